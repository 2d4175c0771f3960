"""partree.algorithms.aba: the named passes and ``aba`` against closed forms (pendulum, prismatic
body, free body by Newton-Euler), the articulated-inertia formula, finite differences of the
body velocities, and its error paths."""
import numpy as np
import pytest

import partree
from partree.algorithms.aba import (aba_backward_pass, aba_forward_pass1, aba_forward_pass2, aba_kernel,
                                    articulated_project)
from partree.errors import PartreeInputError
from partree.models import chain, random_tree
from partree.spatial import axis_angle, crf, crm, motion_xform, quat_to_matrix, rpy_to_matrix, spatial_inertia

from conftest import rel_err

ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
G = np.array([0.3, -0.5, -9.81])


def body_model(jtypes, parent, axes, E_tree, r_tree, mass, com, I_com, axis2=None, gravity=G, **kw):
    n = len(parent)
    return partree.Model(parent, jtypes, axes, E_tree, r_tree, mass, com, I_com,
                         axis2=np.zeros((n, 3)) if axis2 is None else axis2, gravity=gravity,
                         joint_names=[f"joint{i}" for i in range(n)], body_names=[f"link{i}" for i in range(n)],
                         **kw)


def mixed_chain():
    """A chain with every joint type, axes in 3-D, and a floating base."""
    seq = ["free", "revolute", "universal", "spherical", "prismatic", "fixed", "revolute", "universal",
           "prismatic", "spherical", "revolute"]
    return chain(len(seq), joint=seq, alternate=True, gravity=G)


def model_args(m):
    return (m.parent, m.jtype, m.axis, m.axis2, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, m.idx_q, m.idx_v)


def run_passes(m, q, qd, tau, f_ext=None, a_base=None, after_pass1=None):
    """The three named passes on a fresh workspace; returns (bad, workspace)."""
    d = m.create_data()
    F, has = (np.zeros((1, 6)), False) if f_ext is None else (np.ascontiguousarray(f_ext, dtype=float), True)
    aba_forward_pass1(*model_args(m), q, qd, F, has, d.E, d.r, d.v, d.c, d.IA, d.pA, d.S)
    if after_pass1 is not None:
        after_pass1(d)
    bad = aba_backward_pass(m.parent, m.idx_v, tau, d.E, d.r, d.c, d.IA, d.pA, d.S, d.U, d.Dinv, d.u)
    if bad < 0:
        a0 = np.concatenate((np.zeros(3), -m.gravity)) if a_base is None else np.asarray(a_base, dtype=float)
        aba_forward_pass2(m.parent, m.idx_v, a0, d.E, d.r, d.S, d.c, d.U, d.Dinv, d.u, d.a, d.qdd)
    return bad, d


def random_state(m, rng):
    return m.random_configuration(rng), m.random_velocity(rng, 1.5), rng.normal(size=m.nv) * 3


# ----------------------------------------------------------------------------------------------
# closed forms
# ----------------------------------------------------------------------------------------------
def test_pendulum_closed_form(rng):
    """One body on a revolute joint with a tilted axis and a rotated placement:
    J_a qdd = tau + a . ((R c) x m g_J) + a . n_ext, J_a = a^T (I_c + m (|c|^2 1 - c c^T)) a about
    the axis through the joint (independent of qd: no torque about a fixed axis from the velocity
    terms), g_J = E_tree g the gravity in the joint frame."""
    a = np.array([2.0, -1.0, 2.0]) / 3.0
    E_tree = rpy_to_matrix([0.4, 0.2, -1.0]).T
    m_, c, Ic = 2.5, np.array([0.4, 0.1, -0.3]), np.diag([0.02, 0.05, 0.06])
    m = body_model("revolute", [-1], [a], [E_tree], [[0.3, 0.2, 0.1]], [m_], [c], [Ic])
    Ja = a @ (Ic + m_ * (c @ c * np.eye(3) - np.outer(c, c))) @ a
    gJ = E_tree @ G
    for _ in range(4):
        th, thd, tau = rng.uniform(-3, 3), rng.normal() * 3, rng.normal()
        R = axis_angle(a, th)
        ref = (tau + a @ np.cross(R @ c, m_ * gJ)) / Ja
        qdd = partree.aba(m, [th], [thd], [tau])
        assert abs(qdd[0] - ref) < 1e-13 * max(1, abs(ref))
        # an external force f at the body point p (body coordinates), as a wrench about the origin
        p, f = rng.normal(size=3), rng.normal(size=3)
        F = np.concatenate((np.cross(p, f), f))[None]
        ref_f = ref + a @ np.cross(p, f) / Ja
        assert abs(partree.aba(m, [th], [thd], [tau], f_ext=F)[0] - ref_f) < 1e-13 * max(1, abs(ref_f))


def test_prismatic_body_under_gravity(rng):
    """A slider: qdd = tau / m + a . g_J + a . f / m, whatever its centre of mass and inertia."""
    a = np.array([1.0, 2.0, 2.0]) / 3.0
    E_tree = rpy_to_matrix([-0.3, 0.9, 0.5]).T
    m_ = 1.7
    m = body_model("prismatic", [-1], [a], [E_tree], [[1.0, 0.0, 0.0]], [m_], [[0.3, -0.2, 0.5]],
                   [np.diag([0.03, 0.04, 0.05])])
    for _ in range(3):
        q, qd, tau = rng.normal(size=3)
        f = rng.normal(size=6)
        ref = tau / m_ + a @ (E_tree @ G)
        assert abs(partree.aba(m, [q], [qd], [tau])[0] - ref) < 1e-13 * max(1, abs(ref))
        assert abs(partree.aba(m, [q], [qd], [tau], f_ext=f[None])[0] - (ref + a @ f[3:] / m_)) < 1e-13 * 10


def free_body_newton_euler(mass, c, Ic, Rq, E_tree, v, w, tau, fext, g):
    """qdd of a free joint by Newton's and Euler's equations about the centre of mass, in body
    coordinates.  tau = [f; n] (the free joint's generalised force), fext = [n; f] about the body
    origin.  The free joint's qdd = [dv/dt; dw/dt] of the body-frame coordinates, so the centre of
    mass accelerates as dv/dt + w x v + dw/dt x c + w x (w x c)."""
    f = tau[:3] + fext[3:]
    n_o = tau[3:] + fext[:3]
    n_c = n_o - np.cross(c, f)
    wd = np.linalg.solve(Ic, n_c - np.cross(w, Ic @ w))
    g_body = Rq.T @ (E_tree @ g)
    a_c = g_body + f / mass
    vd = a_c - np.cross(w, v) - np.cross(wd, c) - np.cross(w, np.cross(w, c))
    return np.concatenate((vd, wd))


def test_free_body_against_newton_euler(rng):
    E_tree = rpy_to_matrix([0.2, -0.4, 0.7]).T
    mass, c = 3.2, np.array([0.2, -0.3, 0.15])
    Q = axis_angle([1.0, 1.0, 0.0], 0.6)
    Ic = Q @ np.diag([0.3, 0.5, 0.6]) @ Q.T
    m = body_model("free", [-1], [np.zeros(3)], [E_tree], [[0.5, 0.5, 0.0]], [mass], [c], [Ic])
    for _ in range(4):
        q = m.random_configuration(rng)
        qd = m.random_velocity(rng, 2.0)
        tau = rng.normal(size=6)
        F = rng.normal(size=6)
        ref = free_body_newton_euler(mass, c, Ic, quat_to_matrix(q[3:]), E_tree, qd[:3], qd[3:], tau, F, G)
        got = partree.aba(m, q, qd, tau, f_ext=F[None])
        assert rel_err(got, ref) < 1e-13
        # the position does not matter, the quaternion's norm neither
        q2 = q.copy()
        q2[:3] += rng.normal(size=3)
        q2[3:] *= 0.3
        assert rel_err(partree.aba(m, q2, qd, tau, f_ext=F[None]), ref) < 1e-13


def test_free_fall_of_a_floating_tree_without_forces(rng):
    """Only gravity on a floating tree at rest: every body falls with g, nothing turns
    (qdd of the free joint = [R^T g; 0], every other joint still)."""
    m = random_tree(12, seed=4, floating_base=True, joint_types=ALL_TYPES, gravity=G)
    q = m.random_configuration(rng)
    qdd = partree.aba(m, q, np.zeros(m.nv), np.zeros(m.nv))
    R0 = partree.forward_kinematics(m, q).R[0]
    assert np.allclose(qdd[:3], R0.T @ G, rtol=0, atol=1e-12)
    assert np.allclose(qdd[3:], 0.0, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# the named passes
# ----------------------------------------------------------------------------------------------
def test_named_passes_compose_to_aba(rng):
    m = mixed_chain()
    q, qd, tau = random_state(m, rng)
    F = rng.normal(size=(m.n, 6))
    for f in (None, F):
        bad, d = run_passes(m, q, qd, tau, f)
        assert bad == -1
        # the compiled call merges the welded body into its parent (partree.algorithms.welded)
        assert rel_err(d.qdd, partree.aba(m, q, qd, tau, f_ext=f)) < 1e-13
        w = m.create_data()
        Fk, has = (np.zeros((1, 6)), False) if f is None else (F, True)
        assert aba_kernel(*model_args(m), m.gravity, q, qd, tau, Fk, has, w.E, w.r, w.v, w.c, w.IA, w.pA, w.a, w.S,
                          w.U, w.Dinv, w.u, w.qdd) == -1
        assert np.array_equal(w.qdd, d.qdd)


def test_pass1_outputs(rng):
    """Pass 1: X_up and v as forward kinematics; IA = the rigid-body inertias; pA = v x* I v - f_ext."""
    m = mixed_chain()
    q, qd, tau = random_state(m, rng)
    F = rng.normal(size=(m.n, 6))
    snap = {}
    run_passes(m, q, qd, tau, F, after_pass1=lambda d: snap.update(IA=d.IA.copy(), pA=d.pA.copy(), v=d.v.copy(),
                                                                    E=d.E.copy(), r=d.r.copy()))
    kin = partree.forward_kinematics(m, q, qd)
    assert np.allclose(snap["v"], kin.v, rtol=0, atol=1e-13)
    assert np.allclose(snap["E"], kin.E_up, rtol=0, atol=1e-15) and np.allclose(snap["r"], kin.r_up, rtol=0,
                                                                                 atol=1e-15)
    for i in range(m.n):
        I = spatial_inertia(m.mass[i], m.com[i], m.I_com[i])
        assert np.allclose(snap["IA"][i], I, rtol=0, atol=1e-14)
        assert np.allclose(snap["pA"][i], crf(kin.v[i]) @ I @ kin.v[i] - F[i], rtol=0, atol=1e-12)


def test_pass2_accelerations_are_the_derivatives_of_the_body_velocities(rng):
    """Pass 3's a_i (body coordinates, with the fictitious base acceleration -g) minus the gravity
    term [0; -R_i^T g] is d/dt of v_i's body coordinates (the frame moves with v_i, and v x v = 0),
    by central differences along q(t) = q + qd t + qdd t^2 / 2 (on the joint manifolds)."""
    m = random_tree(14, seed=21, floating_base=True, joint_types=ALL_TYPES, gravity=G)
    q, qd, tau = random_state(m, rng)
    F = rng.normal(size=(m.n, 6))
    _, d = run_passes(m, q, qd, tau, F)
    qdd = d.qdd
    h = 1e-5

    def v_at(t):
        return partree.forward_kinematics(m, partree.integrate(m, q, qd * t + 0.5 * qdd * t * t), qd + qdd * t).v

    dv = (v_at(h) - v_at(-h)) / (2 * h)
    R = partree.forward_kinematics(m, q).R
    grav = np.concatenate((np.zeros((m.n, 3)), -np.einsum("nji,j->ni", R, G)), axis=1)
    assert rel_err(d.a - grav, dv) < 1e-7


def test_pass2_base_acceleration(rng):
    """a_base is the acceleration of the bodies' common parent: a gravity-free model whose base
    accelerates by [0; -g] behaves as the model in gravity g; and for any a_base (angular part
    too) the resulting qdd is what the tree does when hung from a body (a free joint, at rest)
    moving with that acceleration: RNEA of the extended model gives back tau on the tree's joints."""
    m = random_tree(10, seed=3, joint_types=ALL_TYPES, gravity=G)
    q, qd, tau = random_state(m, rng)
    m0 = random_tree(10, seed=3, joint_types=ALL_TYPES, gravity=(0.0, 0.0, 0.0))
    _, d = run_passes(m0, q, qd, tau, a_base=np.concatenate((np.zeros(3), -G)))
    assert rel_err(d.qdd, partree.aba(m, q, qd, tau)) < 1e-13
    _, d0 = run_passes(m0, q, qd, tau, a_base=np.zeros(6))
    assert rel_err(d0.qdd, partree.aba(m0, q, qd, tau)) < 1e-14
    A = rng.normal(size=6)
    _, dA = run_passes(m0, q, qd, tau, a_base=A)
    ext = partree.Model(np.concatenate(([-1], m0.parent + 1)), np.concatenate(([4], m0.jtype)),
                        np.vstack((np.zeros(3), m0.axis)), np.concatenate((np.eye(3)[None], m0.E_tree)),
                        np.vstack((np.zeros(3), m0.r_tree)), np.concatenate(([1.0], m0.mass)),
                        np.vstack((np.zeros(3), m0.com)), np.concatenate((np.eye(3)[None], m0.I_com)),
                        axis2=np.vstack((np.zeros(3), m0.axis2)), gravity=(0.0, 0.0, 0.0))
    qe = np.concatenate(([0, 0, 0, 0, 0, 0, 1.0], q))
    qde = np.concatenate((np.zeros(6), qd))
    qdde = np.concatenate((A[3:], A[:3], dA.qdd))
    assert rel_err(partree.rnea(ext, qe, qde, qdde)[6:], tau) < 1e-12


def test_articulated_inertia_of_a_two_link_chain(rng):
    """IA_0 = I_0 + X_1^T (I_1 - I_1 S (S^T I_1 S)^-1 S^T I_1) X_1 and
    pA_0 = p_0 + X_1^T (p_1 + Ia_1 c_1 + I_1 S D^-1 (tau_1 - S^T p_1)), p_i = v_i x* I_i v_i,
    c_1 = v_1 x S qd_1, by 6x6 matrices, for every multi-body joint type of link 1."""
    src = random_tree(2, seed=8)
    a = np.array([2.0, 1.0, -2.0]) / 3.0
    b2 = np.array([2.0, -2.0, 1.0]) / 3.0           # perpendicular to a
    for jt in ("revolute", "prismatic", "universal", "spherical"):
        m = body_model(["revolute", jt], [-1, 0], [[0, 0, 1.0], a], src.E_tree, [[0, 0, 0], [0.6, -0.2, 0.3]],
                       src.mass, src.com, src.I_com, axis2=[[0, 0, 0], b2])
        q, qd, tau = random_state(m, rng)
        kin = partree.forward_kinematics(m, q, qd)
        X1 = motion_xform(kin.E_up[1], kin.r_up[1])
        v1 = kin.v[1]
        sl = m.v_slice(1)
        if jt == "revolute":
            S = np.concatenate((m.axis[1], np.zeros(3)))[:, None]
        elif jt == "prismatic":
            S = np.concatenate((np.zeros(3), m.axis[1]))[:, None]
        elif jt == "universal":
            b = axis_angle(m.axis2[1], q[sl][1]).T @ m.axis[1]
            S = np.array([np.concatenate((b, np.zeros(3))), np.concatenate((m.axis2[1], np.zeros(3)))]).T
        else:
            S = np.vstack((np.eye(3), np.zeros((3, 3))))
        I0 = spatial_inertia(m.mass[0], m.com[0], m.I_com[0])
        I1 = spatial_inertia(m.mass[1], m.com[1], m.I_com[1])
        D = S.T @ I1 @ S
        Ia1 = I1 - I1 @ S @ np.linalg.solve(D, S.T @ I1)
        p0, p1 = crf(kin.v[0]) @ I0 @ kin.v[0], crf(v1) @ I1 @ v1
        c1 = crm(v1) @ (S @ qd[sl])
        if jt == "universal":                     # + the joint's own velocity product dS/dt qd
            c1[:3] += -qd[sl][0] * qd[sl][1] * np.cross(m.axis2[1], b)
        IA0 = I0 + X1.T @ Ia1 @ X1
        pA0 = p0 + X1.T @ (p1 + Ia1 @ c1 + I1 @ S @ np.linalg.solve(D, tau[sl] - S.T @ p1))
        _, d = run_passes(m, q, qd, tau)
        assert rel_err(d.IA[0], IA0) < 1e-13, jt
        assert rel_err(d.pA[0], pA0) < 1e-12, jt
        assert rel_err(d.IA[1], I1) < 1e-14           # the leaf: its own inertia
        assert np.allclose(d.IA[0], d.IA[0].T, rtol=0, atol=1e-14)
        assert np.linalg.eigvalsh(d.IA[0])[0] > 0


def test_articulated_inertia_is_the_floating_chain_response(rng):
    """The articulated-body equation f = IA_0 a_0 + pA_0: the same two links on a free joint, at
    rest at the base, pushed by a wrench f on link 0 (joint 1 driven by tau_1, moving at qd_1),
    accelerate link 0 by a_0 with IA_0 a_0 + pA_0 = f (IA_0, pA_0 from the fixed-base chain)."""
    src = random_tree(2, seed=10, joint_types=("revolute",), gravity=(0.0, 0.0, 0.0))
    fixed = body_model(["revolute", "universal"], [-1, 0], [[0, 0, 1.0], [0.0, 0.6, 0.8]], src.E_tree,
                       [[0, 0, 0], [0.5, 0.4, -0.2]], src.mass, src.com, src.I_com,
                       axis2=[[0, 0, 0], [1.0, 0, 0]], gravity=(0.0, 0.0, 0.0))
    floating = body_model(["free", "universal"], [-1, 0], fixed.axis, fixed.E_tree, fixed.r_tree, fixed.mass,
                          fixed.com, fixed.I_com, axis2=fixed.axis2, gravity=(0.0, 0.0, 0.0))
    for _ in range(3):
        q1, qd1, tau1 = rng.uniform(-2, 2, 2), rng.normal(size=2), rng.normal(size=2)
        _, d = run_passes(fixed, np.concatenate(([0.4], q1)), np.concatenate(([0.0], qd1)),
                          np.concatenate(([0.0], tau1)))
        quat = np.array([0.0, 0.0, np.sin(0.2), np.cos(0.2)])     # rotz(0.4): the same pose
        qf = np.concatenate((np.zeros(3), quat, q1))
        f = rng.normal(size=6)
        F = np.zeros((2, 6))
        F[0] = f
        qdd = partree.aba(floating, qf, np.concatenate((np.zeros(6), qd1)), np.concatenate((np.zeros(6), tau1)),
                          f_ext=F)
        a0 = np.concatenate((qdd[3:6], qdd[:3]))
        assert rel_err(d.IA[0] @ a0 + d.pA[0], f) < 1e-12


@pytest.mark.parametrize("nv", [1, 2, 3, 6])
def test_articulated_project(nv, rng):
    """What a body hands its parent: Ia = IA - U D^-1 U^T and pa = pA + Ia c + U D^-1 u, with
    Ia S = 0 (no inertia along the joint's motion is handed on), S^T pa = tau, and Ia symmetric
    positive semi-definite; U, D^-1, u read only from the joint's rows."""
    nvt, iv = nv + 3, 2
    A = rng.normal(size=(6, 6))
    IA = A @ A.T + 0.1 * np.eye(6)
    pA, c = rng.normal(size=6), rng.normal(size=6)
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    Sm = (Q[:nv] * rng.uniform(0.5, 2.0, (nv, 1))).T
    tau = rng.normal(size=nv)
    Dinv_ref = np.linalg.inv(Sm.T @ IA @ Sm)
    U, Dinv, u = np.full((nvt, 6), np.nan), np.full((nvt, 6), np.nan), np.full(nvt, np.nan)
    U[iv:iv + nv] = (IA @ Sm).T
    Dinv[iv:iv + nv, :nv] = Dinv_ref
    u[iv:iv + nv] = tau - Sm.T @ pA
    Ia, pa = np.full((6, 6), 7.0), np.full(6, 7.0)
    articulated_project(IA, pA, c, U, Dinv, u, iv, nv, Ia, pa, np.zeros(6))
    Ia_ref = IA - IA @ Sm @ Dinv_ref @ Sm.T @ IA
    assert np.allclose(Ia, Ia_ref, rtol=0, atol=1e-11)
    assert np.allclose(pa, pA + Ia_ref @ c + IA @ Sm @ Dinv_ref @ (tau - Sm.T @ pA), rtol=0, atol=1e-11)
    assert np.allclose(Ia @ Sm, 0.0, rtol=0, atol=1e-11)
    assert np.allclose(Sm.T @ pa, tau, rtol=0, atol=1e-11)
    assert np.allclose(Ia, Ia.T, rtol=0, atol=1e-12) and np.linalg.eigvalsh(Ia)[0] > -1e-11


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_spd_inverse(n, rng):
    """The package's one SPD inverse: D^-1 of an SPD block in place or into another array, and
    False for a block that is not positive definite (a zero pivot: no inertia along a motion)."""
    from partree.algorithms.linalg import spd_inverse

    A = rng.normal(size=(n, n))
    D = A @ A.T + 0.1 * np.eye(n)
    out = np.full((6, 6), np.nan)
    assert spd_inverse(D, n, out)
    assert np.allclose(out[:n, :n], np.linalg.inv(D), rtol=1e-12, atol=1e-12)
    W = np.zeros((6, 6))
    W[:n, :n] = D
    assert spd_inverse(W, n, W)                          # in place
    assert np.allclose(W[:n, :n], np.linalg.inv(D), rtol=1e-12, atol=1e-12)
    S = D.copy()
    S[:, 0] = S[0, :] = 0.0                               # a direction with no inertia
    assert not spd_inverse(S, n, out)
    assert not spd_inverse(-D, n, out)


# ----------------------------------------------------------------------------------------------
# aba: errors, forces, workspace, inverse of RNEA
# ----------------------------------------------------------------------------------------------
def point_mass_chain(leaf_on_axis=True, massless_leaf=False):
    """Four links; link 3 a point mass on its own revolute axis (or massless)."""
    src = chain(4, alternate=True)
    mass, com, Ic = src.mass.copy(), src.com.copy(), src.I_com.copy()
    if leaf_on_axis:
        com[3] = 0.4 * src.axis[3]            # on joint 3's axis
        Ic[3] = 0.0
    if massless_leaf:
        mass[3], Ic[3] = 0.0, 0.0
    args = ("revolute", src.parent, src.axis, src.E_tree, src.r_tree, mass, com, Ic)
    if not (leaf_on_axis or massless_leaf):
        return body_model(*args)
    # the model itself refuses a joint that moves no inertia; ABA's own check is tested without it
    with pytest.raises(PartreeInputError, match=r"joint 'joint3' \(body 3, revolute\)"):
        body_model(*args, allow_massless=massless_leaf)
    return body_model(*args, allow_massless=massless_leaf, validate=False)


@pytest.mark.parametrize("case", ["point-mass-on-axis", "massless"])
def test_singular_joint_inertia_names_the_joint(case, rng):
    m = point_mass_chain(massless_leaf=case == "massless")
    q, qd, tau = random_state(m, rng)
    bad, _ = run_passes(m, q, qd, tau)
    assert bad == 3
    with pytest.raises(PartreeInputError, match=r"joint 'joint3' \(body 3\): its subtree has a singular inertia"):
        partree.aba(m, q, qd, tau)


def test_massless_interior_body_with_a_massive_subtree_is_fine(rng):
    src = chain(5, alternate=True)
    mass, Ic = src.mass.copy(), src.I_com.copy()
    mass[2], Ic[2] = 0.0, 0.0
    m = body_model("revolute", src.parent, src.axis, src.E_tree, src.r_tree, mass, src.com, Ic,
                   allow_massless=True)
    q, qd, tau = random_state(m, rng)
    qdd = partree.aba(m, q, qd, tau)
    assert rel_err(partree.rnea(m, q, qd, qdd), tau) < 1e-12


def test_external_forces_array_and_dict(rng):
    m = mixed_chain()
    m = body_model(m.jtype, m.parent, m.axis, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, axis2=m.axis2)
    q, qd, tau = random_state(m, rng)
    w3, w7 = rng.normal(size=6), rng.normal(size=6)
    F = np.zeros((m.n, 6))
    F[3], F[7] = w3, w7
    ref = partree.aba(m, q, qd, tau, f_ext=F)
    assert rel_err(ref, partree.aba(m, q, qd, tau)) > 1e-3          # the forces matter
    for d in ({"joint3": w3, "joint7": w7}, {3: w3, "joint7": list(w7)}, {-8: w3, 7: w7}):
        assert np.array_equal(partree.aba(m, q, qd, tau, f_ext=d), ref)
    assert np.array_equal(partree.aba(m, q, qd, tau, f_ext={}), partree.aba(m, q, qd, tau, f_ext=np.zeros((m.n, 6))))
    # forward dynamics is affine in the forces
    F2 = rng.normal(size=(m.n, 6))
    a0, a1, a2 = (partree.aba(m, q, qd, tau, f_ext=f) for f in (None, F, F2))
    a12 = partree.aba(m, q, qd, tau, f_ext=F + 2.0 * F2)
    assert rel_err(a12 - a0, (a1 - a0) + 2.0 * (a2 - a0)) < 1e-11


def test_external_force_errors():
    m = point_mass_chain(leaf_on_axis=False)
    q, z = m.neutral(), np.zeros(m.nv)
    with pytest.raises(PartreeInputError, match=r"f_ext has shape \(3, 6\); expected \(4, 6\)"):
        partree.aba(m, q, z, z, f_ext=np.zeros((3, 6)))
    with pytest.raises(PartreeInputError, match=r"f_ext has shape \(24,\)"):
        partree.aba(m, q, z, z, f_ext=np.zeros(24))
    F = np.zeros((4, 6))
    F[2, 4] = np.inf
    with pytest.raises(PartreeInputError, match=r"f_ext of body 2 \(joint 'joint2'\) is not finite"):
        partree.aba(m, q, z, z, f_ext=F)
    with pytest.raises(KeyError, match="no joint named 'elbow'"):
        partree.aba(m, q, z, z, f_ext={"elbow": np.zeros(6)})
    with pytest.raises(ValueError):
        partree.aba(m, q, z, z, f_ext={"joint1": np.zeros(5)})


def test_state_errors():
    m = point_mass_chain(leaf_on_axis=False)
    q, z = m.neutral(), np.zeros(m.nv)
    with pytest.raises(PartreeInputError, match=r"tau has shape \(5,\)"):
        partree.aba(m, q, z, np.zeros(5))
    with pytest.raises(PartreeInputError, match=r"qd has shape \(3,\)"):
        partree.aba(m, q, np.zeros(3), z)
    bad = z.copy()
    bad[2] = np.nan
    with pytest.raises(PartreeInputError, match=r"tau\[2\] is nan \(joint 'joint2', body 2\)"):
        partree.aba(m, q, z, bad)


def test_workspace_reuse(rng):
    """data=: the same bits as the model's own workspace, whatever was computed in it before, and
    the result is a copy (not a view of the workspace); data of another model is refused."""
    m = random_tree(30, seed=6, floating_base=True, joint_types=ALL_TYPES, gravity=G)
    q, qd, tau = random_state(m, rng)
    ref = partree.aba(m, q, qd, tau)
    d = m.create_data()
    x = partree.aba(m, q, qd, tau, data=d)
    assert np.array_equal(x, ref)
    x[:] = 0.0
    q2, qd2, tau2 = random_state(m, rng)
    partree.aba(m, q2, qd2, tau2, data=d, f_ext=rng.normal(size=(m.n, 6)))
    partree.rnea(m, q2, qd2, tau2, data=d)
    partree.crba(m, q2, data=d)
    assert np.array_equal(partree.aba(m, q, qd, tau, data=d), ref)
    assert np.array_equal(partree.aba(m, q, qd, tau), ref)
    other = random_tree(31, seed=6)
    with pytest.raises(PartreeInputError, match="data was created for a different model"):
        partree.aba(m, q, qd, tau, data=other.create_data())


def test_inputs_are_not_modified(rng):
    m = mixed_chain()
    q, qd, tau = random_state(m, rng)
    q[3:7] *= 2.0                                  # an unnormalised quaternion stays as given
    F = rng.normal(size=(m.n, 6))
    copies = [x.copy() for x in (q, qd, tau, F)]
    partree.aba(m, q, qd, tau, f_ext=F)
    for x, c in zip((q, qd, tau, F), copies):
        assert np.array_equal(x, c)


@pytest.mark.parametrize("make", [mixed_chain, lambda: random_tree(40, seed=2, floating_base=True,
                                                                    joint_types=ALL_TYPES, gravity=G)])
def test_aba_inverts_rnea(make, rng):
    m = make()
    for _ in range(3):
        q, qd, _ = random_state(m, rng)
        x = rng.normal(size=m.nv)
        F = rng.normal(size=(m.n, 6))
        assert rel_err(partree.aba(m, q, qd, partree.rnea(m, q, qd, x, f_ext=F), f_ext=F), x) < 1e-10
        tau = rng.normal(size=m.nv)
        assert rel_err(partree.rnea(m, q, qd, partree.aba(m, q, qd, tau)), tau) < 1e-10
