"""partree.joints: joint codes and sizes, the joint kinematics (X_J, S, cJ) of every joint type against
the rotation / translation formulas and finite differences of the joint's pose.
"""
import numpy as np
import pytest

import partree
from partree import joints as J
from partree.errors import PartreeInputError
from partree.spatial import axis_angle, matrix_to_quat, quat_to_matrix, rpy_to_matrix

TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
ROT_TYPES = ("revolute", "universal", "spherical", "free")

# a joint placement that is not the identity: URDF <origin rpy="..." xyz="..."/>
RPY = (0.3, -0.7, 1.1)
XYZ = (0.4, -0.2, 0.9)
A1 = np.array([1.0, 2.0, -2.0]) / 3.0
A2 = np.cross(A1, [0.0, 0.0, 1.0])
A2 /= np.linalg.norm(A2)          # perpendicular to A1: a Cardan joint


def one_body(jtype, axis=A1, axis2=A2, rpy=RPY, xyz=XYZ):
    """One body on the fixed base through a joint of type ``jtype`` placed at (rpy, xyz)."""
    return partree.Model([-1], jtype, [axis], [rpy_to_matrix(rpy).T], [xyz], [1.3], [[0.2, -0.1, 0.3]],
                         [np.diag([0.1, 0.12, 0.15])], axis2=[axis2], joint_names=["j"])


def jcalc(model, q, qd, i=0, fill=np.nan):
    """joint_kinematics_at of body i over the model's arrays; E, r, S prefilled with ``fill``.
    Returns (nv, E, r, S, cJ) with the whole E, r, S arrays."""
    E = np.full((model.n, 3, 3), fill)
    r = np.full((model.n, 3), fill)
    S = np.full((model.nv, 6), fill)
    cJ = np.full(6, fill)
    R, R2 = np.empty((3, 3)), np.empty((3, 3))
    nv = J.joint_kinematics_at(i, model.jtype, model.axis, model.axis2, np.ascontiguousarray(q, dtype=float), model.idx_q,
                      np.ascontiguousarray(qd, dtype=float), int(model.idx_v[i]), model.E_tree, model.r_tree,
                      E, r, S, cJ, R, R2)
    return nv, E, r, S, cJ


def joint_rotation(jtype, q):
    """The rotation R_J (child axes in predecessor coordinates) and offset r_J of the joint, from
    the formulas of docs/conventions.md."""
    if jtype == "revolute":
        return axis_angle(A1, q[0]), np.zeros(3)
    if jtype == "prismatic":
        return np.eye(3), q[0] * A1
    if jtype == "universal":
        return axis_angle(A1, q[0]) @ axis_angle(A2, q[1]), np.zeros(3)
    if jtype == "spherical":
        return quat_to_matrix(q), np.zeros(3)
    if jtype == "free":
        return quat_to_matrix(q[3:]), q[:3]
    return np.eye(3), np.zeros(3)


def random_q(jtype, rng):
    nq = int(J.NQ[J.code_of(jtype)])
    q = rng.uniform(-2.0, 2.0, nq)
    if jtype == "spherical":
        q /= np.linalg.norm(q)
    if jtype == "free":
        q[3:] /= np.linalg.norm(q[3:])
    return q


# ----------------------------------------------------------------------------------------------
# codes and tables
# ----------------------------------------------------------------------------------------------
def test_code_of_names_and_codes():
    for k, name in enumerate(TYPES):
        assert J.NAMES[k] == name
        assert J.code_of(name) == k
        assert J.code_of(name.upper()) == k
        assert J.code_of(k) == k
        assert J.code_of(np.int8(k)) == k
    assert J.CODES == {name: k for k, name in enumerate(TYPES)}
    assert (J.REVOLUTE, J.PRISMATIC, J.UNIVERSAL, J.SPHERICAL, J.FREE, J.FIXED) == tuple(range(6))


def test_code_of_errors():
    with pytest.raises(ValueError, match=r"unknown joint type 'hinge'; known: revolute, prismatic, universal, "
                                         r"spherical, free, fixed"):
        J.code_of("hinge")
    for bad in (6, -1, 100):
        with pytest.raises(ValueError, match=f"unknown joint type code {bad}"):
            J.code_of(bad)


@pytest.mark.parametrize("jtype", TYPES)
def test_size_tables_match_models(jtype):
    """NQ / NV / QUAT_OFFSET against a one-body model of the type, the joint's own nv, the
    conventions' table, and a model of every type (offsets idx_q / idx_v)."""
    code = J.code_of(jtype)
    expected = {"revolute": (1, 1), "prismatic": (1, 1), "universal": (2, 2), "spherical": (4, 3),
                "free": (7, 6), "fixed": (0, 0)}[jtype]
    assert (int(J.NQ[code]), int(J.NV[code])) == expected
    m = one_body(jtype)
    assert (m.nq, m.nv) == expected
    q = m.neutral()
    assert q.shape == (m.nq,)
    nv, _, _, S, _ = jcalc(m, q, np.zeros(m.nv))
    assert nv == J.NV[code] and S.shape == (nv, 6)
    off = int(J.QUAT_OFFSET[code])
    if jtype in ("spherical", "free"):
        assert np.array_equal(q[off:off + 4], [0.0, 0.0, 0.0, 1.0])
        assert np.count_nonzero(q) == 1
    else:
        assert off == -1 and not q.any()


def test_size_tables_in_a_mixed_model():
    seq = ["free", "revolute", "universal", "spherical", "fixed", "prismatic", "spherical", "universal", "fixed",
           "free", "revolute"]
    m = partree.models.chain(len(seq), joint=seq)
    codes = [J.code_of(s) for s in seq]
    nq, nv = J.NQ[codes], J.NV[codes]
    assert m.nq == nq.sum() and m.nv == nv.sum()
    assert np.array_equal(m.idx_q, np.concatenate(([0], np.cumsum(nq)[:-1])))
    assert np.array_equal(m.idx_v, np.concatenate(([0], np.cumsum(nv)[:-1])))
    for i in range(m.n):
        assert m.q_slice(i).stop - m.q_slice(i).start == nq[i]
        assert m.v_slice(i).stop - m.v_slice(i).start == nv[i]
    # every quaternion of a random configuration is a unit one, where QUAT_OFFSET says
    q = m.random_configuration(3)
    for i in range(m.n):
        off = J.QUAT_OFFSET[codes[i]]
        if off >= 0:
            assert abs(np.linalg.norm(q[m.idx_q[i] + off:m.idx_q[i] + off + 4]) - 1.0) < 1e-12
    pytest.importorskip("pinocchio")
    from partree.io.pinocchio import to_pinocchio

    p, _ = to_pinocchio(m)
    assert (p.nq, p.nv) == (m.nq, m.nv)


# ----------------------------------------------------------------------------------------------
# joint_kinematics_at: X_J, S and cJ
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("jtype", TYPES)
def test_joint_transform_formula(jtype, rng):
    """X_up = X_J(q) X_tree: E = R_J^T E_tree, r = r_tree + E_tree^T r_J (compact form), and the
    world pose of forward_kinematics is URDF's R = R_origin R_J, p = xyz + R_origin r_J."""
    m = one_body(jtype)
    for _ in range(3):
        q = random_q(jtype, rng)
        RJ, rJ = joint_rotation(jtype, q)
        _, E, r, _, _ = jcalc(m, q, np.zeros(m.nv))
        E_tree = rpy_to_matrix(RPY).T
        assert np.allclose(E[0], RJ.T @ E_tree, rtol=0, atol=1e-14)
        assert np.allclose(r[0], np.array(XYZ) + E_tree.T @ rJ, rtol=0, atol=1e-14)
        kin = partree.forward_kinematics(m, q)
        assert np.allclose(kin.R[0], rpy_to_matrix(RPY) @ RJ, rtol=0, atol=1e-14)
        assert np.allclose(kin.p[0], np.array(XYZ) + rpy_to_matrix(RPY) @ rJ, rtol=0, atol=1e-14)
        assert np.allclose(kin.R[0] @ kin.R[0].T, np.eye(3), rtol=0, atol=1e-14)


def test_revolute_about_z_is_rotz():
    """Featherstone's X_J = rotz(q) for a revolute joint about z; the axis keeps its coordinates."""
    from partree.spatial import rotz

    m = one_body("revolute", axis=[0.0, 0.0, 1.0], rpy=(0, 0, 0), xyz=(0, 0, 0))
    for t in (0.0, 0.3, -2.5, np.pi):
        _, E, r, S, _ = jcalc(m, [t], [0.0])
        assert np.allclose(E[0], rotz(t), rtol=0, atol=1e-15)
        assert np.array_equal(r[0], np.zeros(3))
        assert np.array_equal(S[0], [0, 0, 1, 0, 0, 0])
    m = one_body("revolute")
    _, E, _, _, _ = jcalc(m, [0.8], [0.0])
    E_J = E[0] @ rpy_to_matrix(RPY)             # E = E_J E_tree
    assert np.allclose(E_J @ A1, A1, rtol=0, atol=1e-15)


@pytest.mark.parametrize("jtype", TYPES)
def test_motion_subspace_matches_pose_derivative(jtype, rng):
    """The body velocity S qd (body frame, [w; v]) of a joint on the fixed base equals the
    derivative of its pose: w = (R^T dR/dt)^v, v = R^T dp/dt, by central differences along a
    curve with the joint's velocity (quaternion joints: R(t) = R(0) exp(t [w]), in the body
    frame; the free joint's position moves by R_J v_lin in the predecessor frame)."""
    m = one_body(jtype)
    q0 = random_q(jtype, rng)
    qd = rng.normal(size=m.nv)

    def q_at(t):
        if jtype in ("revolute", "prismatic", "universal"):
            return q0 + t * qd
        if jtype == "fixed":
            return q0
        w = qd if jtype == "spherical" else qd[3:]
        Rq = quat_to_matrix(q0 if jtype == "spherical" else q0[3:])
        quat = matrix_to_quat(Rq @ axis_angle(w, t * np.linalg.norm(w)))
        if jtype == "spherical":
            return quat
        return np.concatenate((q0[:3] + t * Rq @ qd[:3], quat))

    h = 1e-6
    kp, km, k0 = (partree.forward_kinematics(m, q_at(t)) for t in (h, -h, 0.0))
    dR = (kp.R[0] - km.R[0]) / (2 * h)
    W = k0.R[0].T @ dR
    w = np.array([W[2, 1], W[0, 2], W[1, 0]])
    v = k0.R[0].T @ (kp.p[0] - km.p[0]) / (2 * h)
    nv, _, _, S, _ = jcalc(m, q0, qd)
    vJ = S.T @ qd if nv else np.zeros(6)
    assert np.allclose(vJ, np.concatenate((w, v)), rtol=0, atol=1e-8)
    assert np.allclose(partree.forward_kinematics(m, q0, qd).v[0], vJ, rtol=0, atol=1e-14)


@pytest.mark.parametrize("jtype", TYPES)
def test_motion_subspace_layout_and_orthonormality(jtype, rng):
    m = one_body(jtype)
    q = random_q(jtype, rng)
    nv, _, _, S, cJ = jcalc(m, q, rng.normal(size=m.nv))
    if jtype == "revolute":
        assert np.allclose(S, [np.concatenate((A1, np.zeros(3)))], rtol=0, atol=1e-15)
    elif jtype == "prismatic":
        assert np.allclose(S, [np.concatenate((np.zeros(3), A1))], rtol=0, atol=1e-15)
    elif jtype == "spherical":
        assert np.array_equal(S, np.hstack((np.eye(3), np.zeros((3, 3)))))
    elif jtype == "free":
        # v = [v_lin; w] (Pinocchio's layout) to the spatial [w; v]: linear DOFs first
        assert np.array_equal(S, np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]]))
    elif jtype == "universal":
        R2 = axis_angle(A2, q[1])
        assert np.allclose(S[0], np.concatenate((R2.T @ A1, np.zeros(3))), rtol=0, atol=1e-15)
        assert np.allclose(S[1], np.concatenate((A2, np.zeros(3))), rtol=0, atol=1e-15)
    else:
        assert nv == 0 and S.shape == (0, 6)
    # orthonormal rows for every type here (the universal joint's axes are perpendicular)
    assert np.allclose(S @ S.T, np.eye(nv), rtol=0, atol=1e-14)
    if jtype != "universal":
        assert np.array_equal(cJ, np.zeros(6))     # S constant in body coordinates: no cJ


def test_universal_with_oblique_axes_is_not_orthonormal_but_spans_the_rotation(rng):
    """Axes at 60 degrees: S^T S is not the identity (the rows meet at the angle between the first
    axis seen from the body and the second), and S qd is still the body's angular velocity."""
    b = np.cos(np.pi / 3) * A1 + np.sin(np.pi / 3) * A2
    m = one_body("universal", axis2=b)
    q = rng.uniform(-2, 2, 2)
    _, _, _, S, _ = jcalc(m, q, np.zeros(2))
    assert abs(S[0] @ S[1] - 0.5) < 1e-14
    assert np.allclose(np.linalg.norm(S, axis=1), 1.0, rtol=0, atol=1e-14)
    qd = rng.normal(size=2)
    h = 1e-6
    kp, km, k0 = (partree.forward_kinematics(m, q + t * qd) for t in (h, -h, 0.0))
    W = k0.R[0].T @ (kp.R[0] - km.R[0]) / (2 * h)
    assert np.allclose(S[:, :3].T @ qd, [W[2, 1], W[0, 2], W[1, 0]], rtol=0, atol=1e-8)
    assert np.allclose(kin_R := k0.R[0], rpy_to_matrix(RPY) @ axis_angle(A1, q[0]) @ axis_angle(b, q[1]),
                       rtol=0, atol=1e-14), kin_R


@pytest.mark.parametrize("axes", ["perpendicular", "oblique"])
def test_universal_velocity_product_is_derivative_of_S_qd(axes, rng):
    """cJ = (dS/dt) qd = sum_k dS/dq_k qd_k qd, by central differences of S(q) along qd."""
    b = A2 if axes == "perpendicular" else (0.6 * A1 + 0.8 * A2)
    m = one_body("universal", axis2=b)
    for _ in range(3):
        q, qd = rng.uniform(-2, 2, 2), rng.normal(size=2)
        cJ = jcalc(m, q, qd)[4]
        h = 1e-6
        Sp = jcalc(m, q + h * qd, qd)[3]
        Sm = jcalc(m, q - h * qd, qd)[3]
        ref = ((Sp - Sm) / (2 * h)).T @ qd
        assert np.allclose(cJ, ref, rtol=0, atol=1e-8 * max(1.0, np.abs(qd).max() ** 2))
        assert np.abs(cJ).max() > 1e-3              # (not trivially zero)
    # cJ is a product of the two rates: zero when either is
    assert not jcalc(m, q, [qd[0], 0.0])[4].any() and not jcalc(m, q, [0.0, qd[1]])[4].any()


@pytest.mark.parametrize("jtype", ["spherical", "free"])
def test_quaternion_normalised_on_the_fly(jtype, rng):
    """A quaternion of any norm encodes the rotation of its normalised self, in joint_kinematics_at and in
    every algorithm (the free joint's position is not scaled)."""
    m = one_body(jtype)
    q = random_q(jtype, rng)
    qs = q.copy()
    k = int(J.QUAT_OFFSET[J.code_of(jtype)])
    qs[k:k + 4] *= 3.7
    a, b = jcalc(m, q, np.zeros(m.nv)), jcalc(m, qs, np.zeros(m.nv))
    assert np.allclose(a[1], b[1], rtol=0, atol=1e-14) and np.allclose(a[2], b[2], rtol=0, atol=1e-14)
    qd, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)
    assert np.allclose(partree.aba(m, q, qd, tau), partree.aba(m, qs, qd, tau), rtol=1e-13, atol=1e-13)
    assert np.allclose(partree.rnea(m, q, qd, tau), partree.rnea(m, qs, qd, tau), rtol=1e-13, atol=1e-13)
    qs[k:k + 4] *= -1.0          # q and -q are the same rotation
    assert np.allclose(jcalc(m, qs, np.zeros(m.nv))[1], a[1], rtol=0, atol=1e-14)


def test_joint_kinematics_at_writes_only_its_own_body_and_rows(rng):
    """In a model of several joints, joint_kinematics_at(i, ...) writes E[i], r[i] and the rows
    idx_v[i] .. idx_v[i] + nv of S, nothing else, and returns nv; X_up is that of
    forward_kinematics."""
    seq = ["revolute", "free", "universal", "prismatic", "fixed", "spherical", "revolute"]
    m = partree.models.random_tree(len(seq), seed=5, joint_types=seq)
    m = partree.Model(m.parent, seq, np.where(np.isin(seq, ["revolute", "prismatic", "universal"])[:, None],
                                              A1, 0.0), m.E_tree, m.r_tree, m.mass, m.com, m.I_com,
                      axis2=np.where(np.array(seq)[:, None] == "universal", A2, 0.0))
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    kin = partree.forward_kinematics(m, q, qd)
    for i in range(m.n):
        nv, E, r, S, _ = jcalc(m, q, qd, i)
        assert nv == m.nv_j[i]
        assert np.array_equal(E[i], kin.E_up[i]) and np.array_equal(r[i], kin.r_up[i])
        others = np.arange(m.n) != i
        assert np.isnan(E[others]).all() and np.isnan(r[others]).all()
        rows = np.zeros(m.nv, dtype=bool)
        rows[m.v_slice(i)] = True
        assert np.isfinite(S[rows]).all() and np.isnan(S[~rows]).all()


def test_unknown_joint_code_in_model_refused():
    with pytest.raises(PartreeInputError, match="body 0: unknown joint type code 6"):
        partree.Model([-1], [6], [A1], [np.eye(3)], [[0, 0, 0]], [1.0], [[0, 0, 0]], [np.eye(3)])
    with pytest.raises(ValueError, match="unknown joint type 'hinge'"):
        one_body("hinge")
