"""Every algorithm that computes rigid bodies only refuses a model with flexible bodies (instead
of computing its rigid skeleton), naming the flexible algorithms; those still work on it."""
import numpy as np
import pytest

import partree
from partree.algorithms.flexible_dynamics import (flexible_aba, flexible_crba, flexible_energy, flexible_rnea,
                                                  flexible_state_size)
from partree.errors import PartreeInputError
from partree.model import Model
from partree.models.beam import euler_bernoulli_beam


def _pair(n=3):
    """A chain of n beams (revolute joints), rigid and with every link flexible."""
    body, mass, com, I_com = euler_bernoulli_beam(0.8, 50.0, 2.0, 3, bending="yz", polar=1e-3)
    r = np.zeros((n, 3))
    r[1:, 0] = 0.8
    rigid = Model(np.arange(n) - 1, "revolute", np.tile([0, 0, 1.0], (n, 1)), np.tile(np.eye(3), (n, 1, 1)), r,
                  [mass] * n, np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)))
    return rigid, rigid.with_flexible({i: body for i in range(n)})


def _refused(call):
    with pytest.raises(PartreeInputError, match="flexible bod") as e:
        call()
    assert "flexible_aba" in str(e.value)


def _entry_points(m):
    q, qd = m.neutral(), np.zeros(m.nv)
    tau = np.ones(m.nv)
    Q, QD, T = np.tile(q, (2, 1)), np.zeros((2, m.nv)), np.ones((2, m.nv))
    mask = np.zeros(m.nv, dtype=bool)
    mask[0] = True
    return {
        "aba": lambda: partree.aba(m, q, qd, tau),
        "aba list input": lambda: partree.aba(m, list(q), list(qd), list(tau)),
        "aba batch": lambda: partree.aba(m, Q, QD, T),
        "rnea": lambda: partree.rnea(m, q, qd, tau),
        "rnea batch": lambda: partree.rnea(m, Q, QD, T),
        "joint_wrenches": lambda: partree.joint_wrenches(m, q, qd, tau),
        "crba": lambda: partree.crba(m, q),
        "crba batch": lambda: partree.crba(m, Q),
        "bias_forces": lambda: partree.bias_forces(m, q, qd),
        "mass_matrix_operator": lambda: partree.mass_matrix_operator(m, q),
        "hybrid_dynamics": lambda: partree.hybrid_dynamics(m, q, qd, tau, np.zeros(m.nv), mask),
        "constrained_dynamics": lambda: partree.constrained_dynamics(m, q, qd, tau),
        "forward_kinematics": lambda: partree.forward_kinematics(m, q, qd),
        "energy": lambda: partree.energy(m, q, qd),
        "kinetic_energy": lambda: partree.kinetic_energy(m, q, qd),
        "potential_energy": lambda: partree.potential_energy(m, q),
        "center_of_mass": lambda: partree.center_of_mass(m, q),
        "momentum": lambda: partree.momentum(m, q, qd),
        "generalized_momentum": lambda: partree.generalized_momentum(m, q, qd),
        "momentum_rhs": lambda: partree.momentum_rhs(m, 0.0, q, qd, tau),
        "velocity_from_momentum": lambda: partree.velocity_from_momentum(m, q, qd),
        "generalized_impulse": lambda: partree.generalized_impulse(m, q, joint_impulse=tau),
        "apply_impulse": lambda: partree.apply_impulse(m, q, qd, joint_impulse=tau),
        "create_data": lambda: m.create_data(),
        "Model.data": lambda: m.data,
        "parallel.forward_dynamics": lambda: partree.forward_dynamics(m, q, qd, tau),
        "parallel.forward_dynamics parts": lambda: partree.forward_dynamics(m, q, qd, tau, parts=2),
        "parallel.constraint_forces": lambda: partree.constraint_forces(m, q, qd, tau, parts=2),
        "parallel.momentum_rhs": lambda: partree.parallel.momentum_rhs(m, q, qd, tau, parts=2),
        "parallel.velocity_from_momentum": lambda: partree.parallel.velocity_from_momentum(m, q, qd, parts=2),
        "subsystem_equivalent": lambda: partree.subsystem_equivalent(m, q, qd, tau, [1, 2]),
    }


_NAMES = list(_entry_points(_pair()[0]))


@pytest.mark.parametrize("name", _NAMES)
def test_entry_point_refuses_a_flexible_model(name):
    rigid, flex = _pair()
    # the rigid model runs (the entry point is reached), and its compiled state does not leak into
    # the flexible copy made from it afterwards
    rigid.with_flexible({})
    _entry_points(rigid)[name]()
    assert not hasattr(flex, "_data") or flex._data is None
    _refused(_entry_points(rigid.with_flexible(flex.flexible.bodies))[name])
    _refused(_entry_points(flex)[name])


def test_flexible_copy_of_a_packed_model_gets_no_buffer():
    rigid, flex = _pair()
    q, qd, tau = rigid.neutral(), np.zeros(rigid.nv), np.ones(rigid.nv)
    ref = partree.aba(rigid, q, qd, tau)
    assert rigid._packed is not None          # the compiled fast path is in use
    f2 = rigid.with_flexible(flex.flexible.bodies)
    assert f2._packed is None
    _refused(lambda: partree.aba(f2, q, qd, tau, data=rigid.data))
    _refused(lambda: partree.aba(f2, q, qd, tau))
    # and back: the rigid skeleton on purpose
    r2 = f2.with_flexible({})
    assert np.array_equal(partree.aba(r2, q, qd, tau), ref)
    # setting the attribute on a packed model drops its buffer too
    r2.flexible = flex.flexible
    assert r2._packed is None
    _refused(lambda: partree.aba(r2, q, qd, tau))


def test_threearm_flexible_is_refused_and_flexible_functions_work():
    m = partree.resolve_model("threearm:flexible=true,modes=6")
    q, qd = m.neutral(), np.zeros(m.nv)
    for call in (lambda: partree.aba(m, q, qd, qd), lambda: partree.rnea(m, q, qd, qd),
                 lambda: partree.crba(m, q), lambda: partree.forward_dynamics(m, q, qd, qd, parts=3)):
        _refused(call)
    nq, nv = flexible_state_size(m)
    rng = np.random.default_rng(3)
    qf = np.concatenate((m.random_configuration(rng), 1e-3 * rng.normal(size=nq - m.nq)))
    vf, tf = rng.normal(size=nv), rng.normal(size=nv)
    a = flexible_aba(m, qf, vf, tf)
    M = flexible_crba(m, qf)
    assert np.allclose(flexible_rnea(m, qf, vf, a), tf, rtol=0, atol=1e-9 * np.abs(tf).max())
    Ma = M @ a
    assert np.allclose(Ma + flexible_rnea(m, qf, vf, np.zeros(nv)), tf, rtol=0, atol=1e-9 * np.abs(Ma).max())
    assert np.isfinite(flexible_energy(m, qf, vf)).all()


def test_batch_and_one_flexible_body_are_refused():
    rigid, flex = _pair()
    q, z = flex.neutral(), np.zeros(flex.nv)
    _refused(lambda: partree.parallel.evaluate_batch("aba", flex, np.tile(q, (2, 1)), np.zeros((2, flex.nv)),
                                                     np.zeros((2, flex.nv)), backend="serial"))
    one = rigid.with_flexible({2: flex.flexible.bodies[2]})
    _refused(lambda: partree.aba(one, q, z, z))


def test_pinocchio_export_refuses_a_flexible_model():
    """A pinocchio.Model holds rigid bodies only: the export refuses rather than drop the modes."""
    pytest.importorskip("pinocchio")
    from partree.io.pinocchio import to_pinocchio

    rigid, flex = _pair()
    assert to_pinocchio(rigid)[0].nv == rigid.nv
    with pytest.raises(PartreeInputError, match="to_pinocchio"):
        to_pinocchio(flex)
