"""Impulses (``partree.apply_impulse``, ``partree.generalized_impulse``) against independent
references: the dense mass matrix of CRBA with body Jacobians by finite differences of
``forward_kinematics``, the total spatial momentum of a free-floating system (kept by internal
impulses, changed by exactly the blow by external ones), and Kelvin's theorem for the energy."""
import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError

MODELS = ["cardan:n=4", "spacerobot", "random:n=7,seed=3"]


def _state(m, seed=1):
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng, 0.8), m.random_velocity(rng, 1.0), rng


def _jacobians_fd(m, q, eps=1e-6):
    """(n, 6, nv) body Jacobians: column j is the body twist [w; v] (body coordinates, v of the
    body frame's origin) of the velocity e_j, by central differences of the poses along
    q (+) t e_j (``partree.integrate``)."""
    def poses(x):
        k = partree.forward_kinematics(m, x)
        return k.R.copy(), k.p.copy()
    R0, _ = poses(q)
    Jb = np.zeros((m.n, 6, m.nv))
    for j in range(m.nv):
        dv = np.zeros(m.nv)
        dv[j] = eps
        Rp, Pp = poses(partree.integrate(m, q, dv))
        Rm, Pm = poses(partree.integrate(m, q, -dv))
        for k in range(m.n):
            W = R0[k].T @ (Rp[k] - Rm[k]) / (2 * eps)
            Jb[k, :3, j] = [W[2, 1], W[0, 2], W[1, 0]]
            Jb[k, 3:, j] = R0[k].T @ (Pp[k] - Pm[k]) / (2 * eps)
    return Jb


@pytest.mark.parametrize("spec", MODELS)
def test_velocity_jump_is_M_inverse_J_transpose_iota(spec):
    m = partree.resolve_model(spec)
    q, qd, rng = _state(m)
    B = rng.normal(size=(m.n, 6))
    ji = rng.normal(size=m.nv)
    Jb = _jacobians_fd(m, q)
    iota_ref = ji + np.einsum("kci,kc->i", Jb, B)
    dv_ref = np.linalg.solve(partree.crba(m, q), iota_ref)
    res = partree.apply_impulse(m, q, qd, joint_impulse=ji, body_impulse=B)
    scale = np.abs(dv_ref).max()
    assert np.abs(res.impulse - iota_ref).max() <= 1e-7 * np.abs(iota_ref).max()
    assert np.abs(res.qd - qd - dv_ref).max() <= 1e-7 * scale
    assert np.allclose(res.p, partree.crba(m, q) @ res.qd, rtol=1e-10, atol=1e-10)
    # the generalized impulse alone, and the body impulses alone
    assert np.allclose(partree.generalized_impulse(m, q, body_impulse=B), iota_ref - ji,
                       atol=1e-7 * np.abs(iota_ref).max())
    assert np.array_equal(partree.generalized_impulse(m, q, joint_impulse=ji), ji)


@pytest.mark.parametrize("spec", MODELS)
def test_momentum_and_velocity_inputs_and_methods_agree(spec):
    m = partree.resolve_model(spec)
    q, qd, rng = _state(m, seed=5)
    B = {m.joint_names[-1]: rng.normal(size=6), m.joint_names[0]: rng.normal(size=6)}
    a = partree.apply_impulse(m, q, qd, body_impulse=B)
    p0 = partree.generalized_momentum(m, q, qd)
    b = partree.apply_impulse(m, q, p=p0, body_impulse=B, method="sweep")
    assert np.allclose(a.p, b.p, rtol=1e-13, atol=1e-13)
    assert np.allclose(a.qd, b.qd, rtol=1e-10, atol=1e-10)
    F = np.zeros((m.n, 6))
    for name, w in B.items():
        F[m.joint_id(name)] = w
    c = partree.apply_impulse(m, q, qd, body_impulse=F)
    assert np.array_equal(c.p, a.p) and np.array_equal(c.impulse, b.impulse)


def _blow_at_point(m, q, k, c, f):
    """The body wrench impulse [n; f] in body k's coordinates of a linear impulse f (world) applied
    at the world point c."""
    kin = partree.forward_kinematics(m, q)
    R, p = kin.R[k], kin.p[k]
    fb = R.T @ f
    return np.concatenate([np.cross(R.T @ (c - p), fb), fb])


def test_internal_impulses_keep_the_total_momentum_of_a_floating_system():
    """A joint impulse between two bodies, or equal and opposite blows on two bodies at one point
    (a spring-loaded separation, a latch), leaves the total spatial momentum of a free-floating
    system unchanged."""
    m = partree.resolve_model("spacerobot")
    q, qd, rng = _state(m, seed=2)
    h0 = partree.momentum(m, q, qd)
    ji = np.zeros(m.nv)
    ji[6 + 2] = 3.0                                    # an internal joint's drive (revolute joint 3)
    after = partree.apply_impulse(m, q, qd, joint_impulse=ji)
    assert np.abs(after.qd - qd).max() > 0.1
    assert np.allclose(partree.momentum(m, q, after.qd), h0, rtol=0, atol=1e-12 * max(1, np.abs(h0).max()))
    c, f = rng.normal(size=3), rng.normal(size=3) * 5
    a, b = 2, m.n - 1
    B = np.zeros((m.n, 6))
    B[a] = _blow_at_point(m, q, a, c, f)
    B[b] = _blow_at_point(m, q, b, c, -f)
    after = partree.apply_impulse(m, q, qd, body_impulse=B)
    assert np.abs(after.qd - qd).max() > 0.1
    assert np.allclose(partree.momentum(m, q, after.qd), h0, rtol=0, atol=1e-12 * max(1, np.abs(h0).max()))


def test_external_blow_changes_the_total_momentum_by_the_blow():
    """A blow f at the world point c changes the floating system's momentum by [c x f; f]."""
    m = partree.resolve_model("spacerobot")
    q, qd, rng = _state(m, seed=3)
    c, f = rng.normal(size=3), rng.normal(size=3) * 2
    k = 4
    after = partree.apply_impulse(m, q, qd, body_impulse={m.joint_names[k]: _blow_at_point(m, q, k, c, f)})
    dh = partree.momentum(m, q, after.qd) - partree.momentum(m, q, qd)
    assert np.allclose(dh, np.concatenate([np.cross(c, f), f]), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("spec", MODELS)
def test_kelvin_energy_of_an_impulse(spec):
    """The kinetic energy changes by iota . (qd- + qd+) / 2 (Kelvin's theorem)."""
    m = partree.resolve_model(spec)
    q, qd, rng = _state(m, seed=4)
    res = partree.apply_impulse(m, q, qd, joint_impulse=rng.normal(size=m.nv), body_impulse=rng.normal(size=(m.n, 6)))
    dT = partree.kinetic_energy(m, q, res.qd) - partree.kinetic_energy(m, q, qd)
    assert np.isclose(dT, res.impulse @ (qd + res.qd) / 2, rtol=1e-10, atol=1e-12)


def test_a_blow_that_stops_the_motion():
    """The impulse -p brings the system to rest; a blow along a fixed base's constraint (a vertical
    push on a chain's first body, hinged about horizontal axes at the base) moves nothing."""
    m = partree.resolve_model("cardan:n=3")
    q, qd, _ = _state(m, seed=6)
    p = partree.generalized_momentum(m, q, qd)
    stop = partree.apply_impulse(m, q, p=p, joint_impulse=-p)
    assert np.abs(stop.qd).max() < 1e-12 and np.abs(stop.p).max() < 1e-12
    # a pure impulse along the first universal joint's spider (at its origin, along the body's x):
    q0 = m.neutral()
    res = partree.apply_impulse(m, q0, np.zeros(m.nv), body_impulse={m.joint_names[0]: [0, 0, 0, 1.0, 0, 0]})
    assert np.abs(res.qd).max() < 1e-14


def test_refusals():
    m = partree.resolve_model("cardan:n=2")
    q, qd = m.neutral(), np.zeros(m.nv)
    with pytest.raises(PartreeInputError, match="qd or its momenta"):
        partree.apply_impulse(m, q, joint_impulse=np.ones(m.nv))
    with pytest.raises(PartreeInputError, match="qd or its momenta"):
        partree.apply_impulse(m, q, qd, p=qd, joint_impulse=np.ones(m.nv))
    with pytest.raises(PartreeInputError, match="needs a blow"):
        partree.apply_impulse(m, q, qd)
    with pytest.raises(PartreeInputError, match="joint_impulse"):
        partree.apply_impulse(m, q, qd, joint_impulse=np.ones(3))
    with pytest.raises(PartreeInputError, match="body_impulse"):
        partree.apply_impulse(m, q, qd, body_impulse=np.ones((3, 6)))
    with pytest.raises(PartreeInputError, match="method"):
        partree.apply_impulse(m, q, qd, joint_impulse=np.ones(m.nv), method="qr")
    with pytest.raises((PartreeInputError, KeyError)):
        partree.apply_impulse(m, q, qd, body_impulse={"nope": np.ones(6)})
