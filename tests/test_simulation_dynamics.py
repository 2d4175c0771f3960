"""Dynamics (the joint inputs): a piece's inputs (LocalInputs) compute exactly the entries of
the whole tau; inputs that need the whole state are refused for the distributed backends; the
parallel engine as the evaluation of a serial loop takes the external forces too."""
import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.simulation import Dynamics


@pytest.fixture(scope="module")
def tree():
    return partree.models.random_tree(12, seed=4, joint_types=("revolute", "prismatic", "universal"))


def test_local_inputs_equal_the_entries_of_the_whole_tau(tree):
    m = tree
    rng = np.random.default_rng(2)
    nj = int(m.nv_j[5])
    tab = (np.array([0.0, 0.5, 1.0]), rng.normal(size=(3, m.nv)))
    for torques in (rng.normal(size=m.nv), tab, {m.joint_names[5]: (lambda t: np.full(nj, np.cos(t))),
                                                 m.joint_names[2]: 0.7}):
        dyn = Dynamics(m, torques=torques, damping=0.1, stiffness=rng.uniform(0, 1, m.nv), q_ref=rng.normal(size=m.nv))
        q, qd = m.random_configuration(rng), m.random_velocity(rng)
        whole = dyn.tau(0.3, q, qd)
        vsel = np.concatenate([np.arange(m.idx_v[j], m.idx_v[j] + m.nv_j[j]) for j in (1, 5, 8)])
        qsel = np.concatenate([np.arange(m.idx_q[j], m.idx_q[j] + m.nq_j[j]) for j in (1, 5, 8)])
        loc = dyn.restrict(vsel, qsel, [1, 5, 8])
        assert np.array_equal(loc.tau(0.3, q[qsel], qd[vsel]), whole[vsel])


def test_inputs_needing_the_whole_state_refused_for_pieces(tree):
    m = tree
    with pytest.raises(PartreeInputError, match="needs the whole state"):
        Dynamics(m, torques=lambda t, q, qd: np.zeros(m.nv)).restrict([], [], [])
    with pytest.raises(PartreeInputError, match="needs the whole state"):
        Dynamics(m, f_ext=lambda t, q, qd: None).restrict([], [], [])
    # prescribed motion of whole joints is the pieces' own (a function of time per joint); of part
    # of a joint's dofs it is solved densely, on the whole state
    uni = next(j for j in range(m.n) if m.nv_j[j] == 2)
    with pytest.raises(PartreeInputError, match="some but not all of a joint's dofs"):
        Dynamics(m, prescribed={m.joint_names[uni]: lambda t: (0.0, 0.0, 1.0)}).restrict([], [], [])


def test_conservative_flag(tree):
    m = tree
    assert Dynamics(m).conservative
    assert Dynamics(m, torques=np.zeros(m.nv)).conservative
    for kw in (dict(torques=np.ones(m.nv)), dict(damping=0.1), dict(stiffness=1.0),
               dict(f_ext={m.joint_names[0]: np.ones(6)}), dict(torques={m.joint_names[0]: lambda t: 0.0})):
        assert not Dynamics(m, **kw).conservative, kw


def test_parallel_evaluation_takes_external_forces():
    pytest.importorskip("mpi4py")
    m = partree.models.chain(3)
    fe = {"j1": [0.0, 0.0, 1.0, 0.0, 0.0, 2.0]}
    q, qd = m.neutral(), np.zeros(m.nv)
    a = Dynamics(m, f_ext=fe)(0.0, q, qd)
    b = Dynamics(m, f_ext=fe, backend="mpi", parts=2)(0.0, q, qd)
    assert np.abs(a - b).max() < 1e-12 and np.abs(a - Dynamics(m)(0.0, q, qd)).max() > 1.0
