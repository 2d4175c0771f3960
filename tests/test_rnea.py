"""partree.algorithms.rnea: joint torques of the planar two-link arm (textbook formula), the meaning
of the joint wrenches (statics of every subtree; Newton-Euler by finite differences of the bodies'
momenta), external forces through the Jacobian, ``joint_wrenches``, and the error paths."""
import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.models import chain, random_tree

from conftest import rel_err

ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
G = np.array([0.4, 0.3, -9.81])


def two_link_arm(m1=1.3, m2=0.8, l1=0.9, lc1=0.4, lc2=0.35, I1=0.07, I2=0.03, g=9.81):
    """Two links in the x-y plane, revolute about z, gravity along -y (Spong's planar elbow arm)."""
    return partree.Model([-1, 0], "revolute", [[0, 0, 1.0]] * 2, [np.eye(3)] * 2, [[0, 0, 0], [l1, 0, 0]],
                         [m1, m2], [[lc1, 0, 0], [lc2, 0, 0]],
                         [np.diag([0.001, I1, I1]), np.diag([0.001, I2, I2])], gravity=(0.0, -g, 0.0),
                         joint_names=["shoulder", "elbow"])


def test_planar_two_link_arm_textbook(rng):
    """tau = M(q) qdd + C(q, qd) qd + g(q) with (Spong, Hutchinson & Vidyasagar, sec. 7.3)
    M11 = m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 cos q2) + I1 + I2, M12 = m2 (lc2^2 + l1 lc2 cos q2) + I2,
    M22 = m2 lc2^2 + I2, h = -m2 l1 lc2 sin q2: C qd = (h qd2^2 + 2 h qd1 qd2, -h qd1^2),
    g = ((m1 lc1 + m2 l1) g cos q1 + m2 lc2 g cos(q1 + q2), m2 lc2 g cos(q1 + q2))."""
    m1, m2, l1, lc1, lc2, I1, I2, g = 1.3, 0.8, 0.9, 0.4, 0.35, 0.07, 0.03, 9.81
    m = two_link_arm(m1, m2, l1, lc1, lc2, I1, I2, g)
    for _ in range(5):
        q, qd, qdd = rng.uniform(-3, 3, 2), rng.normal(size=2) * 2, rng.normal(size=2) * 2
        c2 = np.cos(q[1])
        M = np.array([[m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2) + I1 + I2,
                       m2 * (lc2**2 + l1 * lc2 * c2) + I2],
                      [m2 * (lc2**2 + l1 * lc2 * c2) + I2, m2 * lc2**2 + I2]])
        h = -m2 * l1 * lc2 * np.sin(q[1])
        C = np.array([h * qd[1]**2 + 2 * h * qd[0] * qd[1], -h * qd[0]**2])
        gv = np.array([(m1 * lc1 + m2 * l1) * g * np.cos(q[0]) + m2 * lc2 * g * np.cos(q.sum()),
                       m2 * lc2 * g * np.cos(q.sum())])
        assert rel_err(partree.rnea(m, q, qd, qdd), M @ qdd + C + gv) < 1e-13
        assert rel_err(partree.crba(m, q), M) < 1e-14


def world_wrench_to_body(kin, i, n_w, f_w):
    """A wrench about the world origin, world coordinates -> about body i's origin, its coordinates."""
    R, p = kin.R[i], kin.p[i]
    return np.concatenate((R.T @ (n_w - np.cross(p, f_w)), R.T @ f_w))


def body_wrench_to_world(kin, i, w):
    """[n; f] about body i's origin in its coordinates -> about the world origin, world coordinates."""
    R, p = kin.R[i], kin.p[i]
    f = R @ w[3:]
    return np.cross(p, f) + R @ w[:3], f


def subtree(m, i):
    inside = np.zeros(m.n, dtype=bool)
    inside[i] = True
    for j in range(i + 1, m.n):
        if m.parent[j] >= 0 and inside[m.parent[j]]:
            inside[j] = True
    return np.flatnonzero(inside)


def test_static_wrenches_carry_the_weight_of_every_subtree(rng):
    """At rest (qd = qdd = 0) joint i carries the weight of its subtree and the external forces on
    it: W_i = -sum over the subtree of (m_j g at the centre of mass + f_ext_j), moved to body i.  For
    the base joint: the weight of the whole tree."""
    m = random_tree(25, seed=5, joint_types=ALL_TYPES, gravity=G)
    q = m.random_configuration(rng)
    z = np.zeros(m.nv)
    F = rng.normal(size=(m.n, 6))
    kin = partree.forward_kinematics(m, q)
    cw = kin.com_world(m)
    for f_ext in (None, F):
        _, W = partree.rnea(m, q, z, z, f_ext=f_ext, return_wrenches=True)
        for i in range(m.n):
            n_w, f_w = np.zeros(3), np.zeros(3)
            for j in subtree(m, i):
                n_w -= np.cross(cw[j], m.mass[j] * G)
                f_w -= m.mass[j] * G
                if f_ext is not None:
                    a, b = body_wrench_to_world(kin, j, F[j])
                    n_w -= a
                    f_w -= b
            assert rel_err(W[i], world_wrench_to_body(kin, i, n_w, f_w)) < 1e-12, i
    # the base joint of the unloaded tree: the total weight, at the centre of mass
    _, W = partree.rnea(m, q, z, z, return_wrenches=True)
    c = partree.center_of_mass(m, q)
    assert rel_err(W[0], world_wrench_to_body(kin, 0, -np.cross(c, m.total_mass() * G), -m.total_mass() * G)) < 1e-12


def momenta(m, q, qd):
    """Every body's momentum (world coordinates, about the world origin): (angular (n, 3), linear (n, 3))."""
    kin = partree.forward_kinematics(m, q, qd)
    w, v = kin.v[:, :3], kin.v[:, 3:]
    c = kin.com_world(m)
    L = m.mass[:, None] * np.einsum("nij,nj->ni", kin.R, v + np.cross(w, m.com))
    Hc = np.einsum("nij,njk,nk->ni", kin.R, m.I_com, w)
    return Hc + np.cross(c, L), L


def test_wrenches_are_newton_euler_of_each_subtree(rng):
    """W_i = sum over the subtree of (dh_j/dt - gravity on j - f_ext_j), the rate of change of the
    bodies' momenta by central differences along q(t) = q + qd t + qdd t^2 / 2 (joint manifolds),
    moved to body i: the joint supplies what the subtree's motion needs beyond the applied forces."""
    m = random_tree(14, seed=9, floating_base=True, joint_types=ALL_TYPES, gravity=G)
    q, qd, qdd = m.random_configuration(rng), m.random_velocity(rng, 1.5), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    tau, W = partree.rnea(m, q, qd, qdd, f_ext=F, return_wrenches=True)
    h = 1e-5
    Hp, Lp = momenta(m, partree.integrate(m, q, qd * h + 0.5 * qdd * h * h), qd + qdd * h)
    Hm, Lm = momenta(m, partree.integrate(m, q, -qd * h + 0.5 * qdd * h * h), qd - qdd * h)
    dH, dL = (Hp - Hm) / (2 * h), (Lp - Lm) / (2 * h)
    kin = partree.forward_kinematics(m, q)
    cw = kin.com_world(m)
    scale = np.abs(W).max()
    for i in range(m.n):
        n_w, f_w = np.zeros(3), np.zeros(3)
        for j in subtree(m, i):
            a, b = body_wrench_to_world(kin, j, F[j])
            n_w += dH[j] - np.cross(cw[j], m.mass[j] * G) - a
            f_w += dL[j] - m.mass[j] * G - b
        ref = world_wrench_to_body(kin, i, n_w, f_w)
        assert np.abs(W[i] - ref).max() < 1e-7 * scale, i
    # the floating base carries nothing: its joint wrench is its generalised force
    assert np.allclose(tau[:6], np.concatenate((W[0, 3:], W[0, :3])), rtol=0, atol=1e-13)


def test_torques_are_the_wrenches_projected_on_the_joint_motion(rng):
    """tau_i is the component of W_i along the joint's motion: the moment about a revolute axis,
    the force along a prismatic axis, the moment for a spherical joint, [f; n] for a free joint,
    and a fixed joint carries any wrench without a coordinate."""
    m = random_tree(30, seed=12, floating_base=True, joint_types=ALL_TYPES, gravity=G)
    q, qd, qdd = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    tau, W = partree.rnea(m, q, qd, qdd, return_wrenches=True)
    for i in range(m.n):
        t, w, a = tau[m.v_slice(i)], W[i], m.axis[i]
        kind = m.joint_type(i)
        if kind == "revolute":
            assert abs(t[0] - a @ w[:3]) < 1e-12 * max(1, abs(t[0]))
        elif kind == "prismatic":
            assert abs(t[0] - a @ w[3:]) < 1e-12 * max(1, abs(t[0]))
        elif kind == "spherical":
            assert np.allclose(t, w[:3], rtol=1e-12, atol=1e-12)
        elif kind == "free":
            assert np.allclose(t, np.concatenate((w[3:], w[:3])), rtol=1e-12, atol=1e-12)
        elif kind == "universal":
            R2 = partree.spatial.axis_angle(m.axis2[i], q[m.q_slice(i)][1])
            assert np.allclose(t, [(R2.T @ a) @ w[:3], m.axis2[i] @ w[:3]], rtol=1e-12, atol=1e-12)
        else:
            assert t.size == 0 and np.abs(w).max() > 0


def test_external_forces_through_the_jacobian(rng):
    """A force P (world) at a point x of body k and a moment N (world) on it: tau(f_ext) =
    tau(0) - J_x^T P - J_w^T N, J_x = d(world point)/dq and J_w the angular Jacobian, both by central
    differences of the forward kinematics (q and v coincide for revolute / prismatic chains)."""
    m = chain(6, joint=["revolute", "prismatic", "revolute", "revolute", "prismatic", "revolute"],
              alternate=True, gravity=G)
    q, qd, qdd = rng.normal(size=m.nv), rng.normal(size=m.nv), rng.normal(size=m.nv)
    k, x, P, N = 4, np.array([0.3, 0.1, -0.2]), rng.normal(size=3), rng.normal(size=3)
    h = 1e-6
    Jx, Jw = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    R0 = partree.forward_kinematics(m, q).R[k]
    for c in range(m.nv):
        e = np.zeros(m.nv)
        e[c] = h
        kp, km = partree.forward_kinematics(m, q + e), partree.forward_kinematics(m, q - e)
        Jx[:, c] = (kp.p[k] + kp.R[k] @ x - km.p[k] - km.R[k] @ x) / (2 * h)
        Wm = (kp.R[k] - km.R[k]) / (2 * h) @ R0.T
        Jw[:, c] = [Wm[2, 1], Wm[0, 2], Wm[1, 0]]
    f = R0.T @ P
    F = np.zeros((m.n, 6))
    F[k] = np.concatenate((np.cross(x, f) + R0.T @ N, f))
    got = partree.rnea(m, q, qd, qdd, f_ext=F) - partree.rnea(m, q, qd, qdd)
    assert rel_err(got, -(Jx.T @ P + Jw.T @ N)) < 1e-8
    assert np.count_nonzero(np.abs(got) > 1e-12) == k + 1         # only the joints carrying body k
    # the dict form, by name and by index
    d = {m.joint_names[k]: F[k]}
    assert np.array_equal(partree.rnea(m, q, qd, qdd, f_ext=d), partree.rnea(m, q, qd, qdd, f_ext=F))
    assert np.array_equal(partree.rnea(m, q, qd, qdd, f_ext={k: F[k]}), partree.rnea(m, q, qd, qdd, f_ext=F))


def test_joint_wrenches_function(rng):
    m = random_tree(20, seed=3, joint_types=ALL_TYPES, gravity=G)
    q, qd, qdd = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    tau, W = partree.rnea(m, q, qd, qdd, f_ext=F, return_wrenches=True)
    assert W.shape == (m.n, 6)
    assert np.array_equal(partree.joint_wrenches(m, q, qd, qdd, f_ext=F), W)
    assert np.array_equal(partree.joint_wrenches(m, q, qd, qdd, F, m.create_data()), W)
    # tau alone comes from the model with its welded bodies merged (partree.algorithms.welded)
    t = partree.rnea(m, q, qd, qdd, f_ext=F)
    assert np.abs(t - tau).max() <= 1e-13 * np.abs(tau).max()
    # results are copies: a later call does not change them
    W0 = W.copy()
    partree.rnea(m, *(x * 2 for x in (q, qd, qdd)), return_wrenches=True)
    assert np.array_equal(W, W0)


def test_workspace_reuse(rng):
    m = random_tree(20, seed=4, floating_base=True, joint_types=ALL_TYPES, gravity=G)
    q, qd, qdd = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    ref = partree.rnea(m, q, qd, qdd)
    d = m.create_data()
    partree.aba(m, q, qd, qdd, data=d)
    assert np.array_equal(partree.rnea(m, q, qd, qdd, data=d), ref)
    with pytest.raises(PartreeInputError, match="different model"):
        partree.rnea(m, q, qd, qdd, data=random_tree(21, seed=4).create_data())


def test_no_motion_no_gravity_no_torque(rng):
    m = random_tree(15, seed=2, floating_base=True, joint_types=ALL_TYPES, gravity=(0.0, 0.0, 0.0))
    z = np.zeros(m.nv)
    tau, W = partree.rnea(m, m.random_configuration(rng), z, z, return_wrenches=True)
    assert not tau.any() and not W.any()


def test_errors():
    m = two_link_arm()
    z = np.zeros(2)
    with pytest.raises(PartreeInputError, match=r"qdd has shape \(3,\); model .* needs \(2,\)"):
        partree.rnea(m, z, z, np.zeros(3))
    with pytest.raises(PartreeInputError, match=r"q has shape \(1,\)"):
        partree.rnea(m, np.zeros(1), z, z)
    with pytest.raises(PartreeInputError, match=r"qd\[1\] is inf \(joint 'elbow', body 1\)"):
        partree.rnea(m, z, [0.0, np.inf], z)
    with pytest.raises(PartreeInputError, match=r"f_ext has shape \(2, 3\)"):
        partree.rnea(m, z, z, z, f_ext=np.zeros((2, 3)))
    with pytest.raises(PartreeInputError, match=r"f_ext of body 0 \(joint 'shoulder'\) is not finite"):
        partree.joint_wrenches(m, z, z, z, f_ext={"shoulder": [np.nan, 0, 0, 0, 0, 0]})
    with pytest.raises(KeyError):
        partree.rnea(m, z, z, z, f_ext={"wrist": np.zeros(6)})
