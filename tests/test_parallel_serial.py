"""The parallel decomposition run serially equals ABA."""
import numpy as np
import pytest

import partree
from partree.models import auto_tree
from partree.models.generators import binary_tree, chain, random_tree
from partree.parallel.partition import partition_from_roots
from partree.parallel.serial import SerialEngine, forward_dynamics_serial

MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def _models():
    return {
        "chain": chain(40, joint=["revolute", "prismatic", "universal", "spherical"] * 10, alternate=True),
        "autochain": auto_tree(30, skew=0.4, taper=0.97),
        "binary": binary_tree(63, joint=["revolute", "universal", "spherical"] * 21),
        "random": random_tree(120, seed=7, joint_types=MIXED),
        "random_fb": random_tree(90, seed=8, floating_base=True),
        "random_chains": random_tree(100, seed=9, p_chain=0.8, floating_base=True, joint_types=MIXED),
    }


def _rel(a, b):
    return float(np.abs(a - b).max() / max(1e-300, np.abs(b).max()))


def _state(m, seed):
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)


@pytest.mark.parametrize("name", list(_models()))
def test_equals_aba(name):
    m = _models()[name]
    q, qd, tau = _state(m, 1)
    ref = partree.aba(m, q, qd, tau)
    nchains = m.chains()[0].size - 1
    for P in [1, 2, 3, 5, 8, nchains + 3, m.n]:
        P = min(P, m.n)
        eng = SerialEngine(m, P)
        assert eng.partition.nparts == P
        x = eng.forward_dynamics(q, qd, tau)
        assert _rel(x, ref) < 1e-10, (name, P, _rel(x, ref))
        # reusable: a second state through the same engine
        q2, qd2, tau2 = _state(m, 2)
        assert _rel(eng.forward_dynamics(q2, qd2, tau2), partree.aba(m, q2, qd2, tau2)) < 1e-10


def test_many_children_on_one_handle_and_nested_handles():
    m = random_tree(80, seed=11, joint_types=MIXED, floating_base=True)
    q, qd, tau = _state(m, 3)
    ref = partree.aba(m, q, qd, tau)
    # every child of body 0 a part (several parts on one handle), plus deeper cuts
    kids = list(m.children(0))
    roots = kids + [i for i in range(10, 80, 7)]
    pt = partition_from_roots(m, roots)
    assert max(pt.child_parts(k).size for k in range(pt.nparts)) >= 2
    x = forward_dynamics_serial(m, q, qd, tau, parts=pt)
    assert _rel(x, ref) < 1e-10


def test_zero_velocity_and_gravity_free():
    m = binary_tree(31)
    q = m.random_configuration(0)
    qd = np.zeros(m.nv)
    tau = np.zeros(m.nv)
    assert _rel(forward_dynamics_serial(m, q, qd, tau, parts=4), partree.aba(m, q, qd, tau)) < 1e-10
    m2 = random_tree(40, seed=1, gravity=(0.0, 0.0, 0.0))
    q, qd, tau = _state(m2, 5)
    assert _rel(forward_dynamics_serial(m2, q, qd, tau, parts=5), partree.aba(m2, q, qd, tau)) < 1e-10


def test_larger_model():
    m = auto_tree(3000, bf=1.3, skew=0.2)
    q, qd, tau = _state(m, 6)
    ref = partree.aba(m, q, qd, tau)
    for P in (2, 7, 32):
        assert _rel(forward_dynamics_serial(m, q, qd, tau, parts=P), ref) < 1e-10


def test_bad_input_message():
    m = auto_tree(10)
    q, qd, tau = _state(m, 0)
    q[3] = np.nan
    with pytest.raises(partree.PartreeInputError, match=r"q\[3\]"):
        forward_dynamics_serial(m, q, qd, tau, parts=2)
