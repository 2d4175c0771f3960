"""Joint reaction forces of trees with flexible bodies (partree.algorithms.flexible_cfa) against
independent references: the Newton-Euler balance of every subtree (the momentum of the beams'
material points, differentiated numerically), the rigid cfa / rnea where the modes vanish or
stiffen, and the joints' own forces."""
import numpy as np
import pytest

import partree
from partree.algorithms.flexible_cfa import flexible_cfa, flexible_hybrid_forces, flexible_joint_wrenches
from partree.algorithms.flexible_dynamics import flexible_aba, flexible_hybrid_dynamics, flexible_state_size
from partree.errors import PartreeInputError
from partree.model import Model
from partree.models.beam import clamped_free_roots, euler_bernoulli_beam, mode_shape

L, EI, RHOA, MODES = 0.9, 40.0, 2.0, 3


def _planar_tree():
    """Four beams bending in their x-y plane on revolute joints about z: 0 at the base, 1 and 2
    at 0's tip, 3 at 1's tip; gravity in the plane and across it."""
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, RHOA, MODES, bending="y", polar=1e-3)
    parent = np.array([-1, 0, 0, 1])
    n = parent.size
    r = np.zeros((n, 3))
    r[1:, 0] = L
    rigid = Model(parent, "revolute", np.tile([0, 0, 1.0], (n, 1)), np.tile(np.eye(3), (n, 1, 1)), r,
                  [mass] * n, np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)), gravity=(0.0, -4.0, -9.81))
    return rigid, rigid.with_flexible({i: body for i in range(n)}), body


def _state(model, rng, eta_scale=0.05):
    nq, nv = flexible_state_size(model)
    ne = nq - model.nq
    q = np.concatenate((rng.uniform(-1, 1, model.nq), eta_scale * rng.normal(size=ne)))
    qd = np.concatenate((rng.normal(size=model.nv), rng.normal(size=ne)))
    return q, qd


class _Material:
    """World positions of the beams' material points (quadrature along each beam), planar, from
    the joint angles and modal coordinates alone; complex arguments pass through (complex step)."""

    def __init__(self, model, body):
        self.model = model
        g, w = np.polynomial.legendre.leggauss(12)
        edges = np.linspace(0.0, 1.0, 17)
        xi = (0.5 * (edges[:-1, None] + edges[1:, None]) + 0.5 * np.diff(edges)[:, None] * g).ravel()
        self.x = L * xi
        self.w = RHOA * L * (0.5 * np.diff(edges)[:, None] * w).ravel()     # masses of the points
        roots = clamped_free_roots(MODES)
        self.phi = np.array([mode_shape(roots[k], xi) for k in range(MODES)])
        _, Phi, Psi = body.nodes["tip"]
        assert np.allclose(Phi[[0, 2]], 0) and np.allclose(Psi[:2], 0)
        self.tip_w, self.tip_rot = Phi[1], Psi[2]
        # the quadrature holds the body's mass distribution
        assert np.isclose(self.w.sum(), model.mass[0], rtol=1e-12)
        assert np.allclose(self.phi @ self.w, body.first[1], rtol=1e-10)

    def points(self, q):
        """(n, P, 3) world positions (z = 0) and (n,) frame angles, (n, 2) frame origins."""
        m = self.model
        n, nq = m.n, m.nq
        eta = q[nq:].reshape(n, MODES)
        th = [None] * n
        org = [None] * n
        pts = []
        for i in range(n):
            p = int(m.parent[i])
            if p < 0:
                th[i] = q[i]
                org[i] = m.r_tree[i, :2].astype(complex)
            else:
                c, s = np.cos(th[p]), np.sin(th[p])
                tx, ty = L, self.tip_w @ eta[p]
                org[i] = org[p] + np.array([c * tx - s * ty, s * tx + c * ty])
                th[i] = th[p] + self.tip_rot @ eta[p] + q[i]
            c, s = np.cos(th[i]), np.sin(th[i])
            yy = eta[i] @ self.phi
            P = np.zeros((self.x.size, 3), dtype=complex)
            P[:, 0] = org[i][0] + c * self.x - s * yy
            P[:, 1] = org[i][1] + s * self.x + c * yy
            pts.append(P)
        return np.array(pts), th, org

    def momentum(self, q, qd, bodies):
        """(linear, angular about the world origin) momentum of ``bodies``, by complex step."""
        h = 1e-30
        P, _, _ = self.points(q + 1j * h * qd)
        y, yd = P.real, P.imag / h
        lin = np.einsum("p,bpk->k", self.w, yd[bodies])
        ang = np.einsum("p,bpk->k", self.w, np.cross(y[bodies], yd[bodies]))
        return lin, ang


def _subtree(model, j):
    out = [j]
    for i in range(j + 1, model.n):
        if model.parent[i] in out:
            out.append(i)
    return out


def _balance(model, body, q, qd, qdd, F):
    """Largest relative residual of Newton-Euler over every subtree: the joint's wrench plus
    gravity equals the rate of the subtree's momentum (linear, and angular about the world
    origin)."""
    mat = _Material(model, body)
    g = model.gravity
    h = 1e-6
    worst = 0.0
    _, th, org = mat.points(q.astype(complex))
    y = mat.points(q.astype(complex))[0].real
    for j in range(model.n):
        sub = _subtree(model, j)
        # the momenta are linear in the rates, h(q, qd) = A(q) qd: dh/dt = A(q) qdd + (dA/dq qd) qd,
        # the first exact (complex step), the second a central difference along qd
        acc = mat.momentum(q, qdd, sub)
        lp = mat.momentum(q + h * qd, qd, sub)
        lm = mat.momentum(q - h * qd, qd, sub)
        dlin = acc[0] + (lp[0] - lm[0]) / (2 * h)
        dang = acc[1] + (lp[1] - lm[1]) / (2 * h)
        c, s = np.cos(th[j].real), np.sin(th[j].real)
        R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
        n_w, f_w = R @ F[j, :3], R @ F[j, 3:]
        pj = np.array([org[j][0].real, org[j][1].real, 0.0])
        msub = mat.w.sum() * len(sub)
        grav_moment = np.einsum("p,bpk->k", mat.w, np.cross(y[sub], g))
        r_lin = f_w + msub * g - dlin
        r_ang = n_w + np.cross(pj, f_w) + grav_moment - dang
        scale = max(np.abs(dlin).max(), np.abs(dang).max(), np.abs(f_w).max(), msub * 9.81)
        worst = max(worst, np.abs(r_lin).max() / scale, np.abs(r_ang).max() / scale)
    return worst


def test_reaction_forces_balance_the_subtrees_momentum():
    _, flex, body = _planar_tree()
    rng = np.random.default_rng(7)
    q, qd = _state(flex, rng)
    tau = np.concatenate((rng.normal(size=flex.nv), np.zeros(flex.flexible.n_modal)))
    res = flexible_cfa(flex, q, qd, tau)
    assert np.array_equal(res.qdd, flexible_aba(flex, q, qd, tau))
    assert _balance(flex, body, q, qd, res.qdd, res.joint_wrench) < 1e-7
    # the joints' own forces: S^T F = tau (revolute about z: the z moment)
    assert np.allclose(res.joint_wrench[:, 2], tau[:flex.nv], rtol=0, atol=1e-10 * np.abs(res.joint_wrench).max())
    assert np.array_equal(res.drive_force, tau[:flex.nv])
    # the reaction is the rest of the wrench, in the rigid bases
    for j in range(flex.n):
        F = res.joint_wrench[j]
        W = res.constraint_basis(j)
        assert np.allclose(W @ res.constraint_force_of(j) + np.array([0, 0, F[2], 0, 0, 0]), F, atol=1e-10)
        assert np.allclose(res.constraint_wrench_of(j), W @ W.T @ F)


def test_hybrid_reaction_forces_balance_the_subtrees_momentum():
    _, flex, body = _planar_tree()
    rng = np.random.default_rng(8)
    q, qd = _state(flex, rng)
    nv = flexible_state_size(flex)[1]
    tau = rng.normal(size=nv)
    tau[flex.nv:] = 0.0
    qdd = rng.normal(size=nv)
    active = np.array([True, False, True, False])
    qf, tf, res = flexible_hybrid_forces(flex, q, qd, tau, qdd, active)
    q2, t2 = flexible_hybrid_dynamics(flex, q, qd, tau, qdd, active)
    assert np.array_equal(qf, q2) and np.array_equal(tf, t2)
    assert np.array_equal(qf[[0, 2]], qdd[[0, 2]])
    assert _balance(flex, body, q, qd, qf, res.joint_wrench) < 1e-7
    assert np.allclose(res.joint_wrench[:, 2], tf[:flex.nv], rtol=0, atol=1e-10 * np.abs(res.joint_wrench).max())
    assert res.method == "flexible-hybrid"


def test_undeformed_wrenches_are_the_rigid_ones():
    """At zero deformation, modal rate and modal acceleration the wrenches are the rigid rnea's
    (3-D: universal and spherical joints, bending in both planes)."""
    body, mass, com, I_com = euler_bernoulli_beam(0.8, 50.0, 2.0, 3, bending="yz", polar=1e-3)
    n = 4
    r = np.zeros((n, 3))
    r[1:, 0] = 0.8
    ax2 = np.zeros((n, 3))
    ax2[1] = (0.0, 1.0, 0.0)
    rigid = Model([-1, 0, 1, 2], ["revolute", "universal", "spherical", "revolute"],
                  [[0, 0, 1.0], [0, 0, 1.0], [0, 0, 1.0], [0, 1.0, 0]], np.tile(np.eye(3), (n, 1, 1)), r,
                  [mass] * n, np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)), axis2=ax2)
    flex = rigid.with_flexible({i: body for i in range(n)})
    ne = flex.flexible.n_modal
    rng = np.random.default_rng(2)
    q = rigid.random_configuration(rng)
    qd, qdd = rng.normal(size=rigid.nv), rng.normal(size=rigid.nv)
    z = np.zeros(ne)
    F, tau = flexible_joint_wrenches(flex, np.r_[q, z], np.r_[qd, z], np.r_[qdd, z])
    t_ref, W_ref = partree.rnea(rigid, q, qd, qdd, return_wrenches=True)
    scale = np.abs(W_ref).max()
    assert np.allclose(F, W_ref, rtol=0, atol=1e-12 * scale)
    assert np.allclose(tau[:rigid.nv], t_ref, rtol=0, atol=1e-12 * scale)
    # the split in the rigid bases: the same F_S and F_T as the rigid cfa of that motion
    rr = partree.cfa(rigid, q, qd, t_ref)
    res = flexible_cfa(flex, np.r_[q, z], np.r_[qd, z], np.r_[t_ref, z])
    assert np.allclose(res.drive_force, rr.drive_force, rtol=0, atol=1e-12 * scale)
    assert np.array_equal(res.idx_s, rr.idx_s) and np.array_equal(res.ns_j, rr.ns_j)
    Fs = np.concatenate([rr.constraint_basis(j).T @ F[j] for j in range(n)])
    assert np.allclose(Fs, rr.constraint_force, rtol=0, atol=1e-10 * scale)


def _quasi_static(model, q, qd, tau):
    """The deformation at which the modes do not accelerate (Newton on eta, modal rates zero)."""
    nv, ne = model.nv, model.flexible.n_modal

    def modal(eta):
        return flexible_aba(model, np.r_[q, eta], np.r_[qd, np.zeros(ne)], np.r_[tau, np.zeros(ne)])[nv:]

    eta = np.zeros(ne)
    for _ in range(5):
        a0 = modal(eta)
        h = 1e-6 * max(np.abs(eta).max(), 1e-6)
        J = np.array([(modal(eta + h * e) - a0) / h for e in np.eye(ne)]).T
        eta = eta - np.linalg.solve(J, a0)
    return eta


@pytest.mark.parametrize("scale", [1e2, 1e4])
def test_stiff_limit_is_the_rigid_cfa(scale):
    """Stiffness x scale, at the deformation where the modes stay put: the reaction forces and
    joint accelerations approach the rigid cfa's as the compliance 1 / scale."""
    body, mass, com, I_com = euler_bernoulli_beam(0.8, 50.0, 2.0, 3, bending="yz", polar=1e-3)
    n = 3
    r = np.zeros((n, 3))
    r[1:, 0] = 0.8
    ax2 = np.zeros((n, 3))
    ax2[1] = (0.0, 1.0, 0.0)
    rigid = Model(np.arange(n) - 1, ["revolute", "universal", "revolute"], np.tile([0, 0, 1.0], (n, 1)),
                  np.tile(np.eye(3), (n, 1, 1)), r, [mass] * n, np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)),
                  axis2=ax2)
    stiff = rigid.with_flexible({i: body.with_stiffness(scale * body.stiffness) for i in range(n)})
    rng = np.random.default_rng(0)
    q, qd, tau = rigid.random_configuration(rng), rng.normal(size=rigid.nv), rng.normal(size=rigid.nv)
    eta = _quasi_static(stiff, q, qd, tau)
    ne = eta.size
    res = flexible_cfa(stiff, np.r_[q, eta], np.r_[qd, np.zeros(ne)], np.r_[tau, np.zeros(ne)])
    rr = partree.cfa(rigid, q, qd, tau)
    rel = np.abs(res.joint_wrench - rr.joint_wrench).max() / np.abs(rr.joint_wrench).max()
    rel_s = np.abs(res.constraint_force - rr.constraint_force).max() / np.abs(rr.constraint_force).max()
    assert rel < 0.05 / scale and rel_s < 0.05 / scale       # measured 1.4e-2 / scale
    assert np.abs(res.qdd[:rigid.nv] - rr.qdd).max() < 5.0 / scale
    assert np.allclose(res.drive_force, rr.drive_force, rtol=1e-13)   # the universal joint's Gram matrix


def test_threearm_floating_base_carries_no_base_wrench():
    """A free base joint with no force on it transmits nothing; the arms' joints do."""
    m = partree.resolve_model("threearm:flexible=true,modes=6,floating_base=true")
    nq, nv = flexible_state_size(m)
    rng = np.random.default_rng(4)
    q = np.concatenate((m.random_configuration(rng), 1e-3 * rng.normal(size=nq - m.nq)))
    qd = 0.3 * rng.normal(size=nv)
    tau = np.zeros(nv)
    tau[6:m.nv] = rng.normal(size=m.nv - 6)
    res = flexible_cfa(m, q, qd, tau)
    scale = np.abs(res.joint_wrench).max()
    assert scale > 1.0
    assert np.abs(res.joint_wrench[0]).max() < 1e-10 * scale
    assert res.constraint_force.size == sum(6 - int(k) for k in m.nv_j)


def test_bad_inputs():
    rigid, flex, _ = _planar_tree()
    nq, nv = flexible_state_size(flex)
    with pytest.raises(PartreeInputError, match="no flexible bodies"):
        flexible_cfa(rigid, np.zeros(rigid.nq), np.zeros(rigid.nv), np.zeros(rigid.nv))
    with pytest.raises(PartreeInputError, match="modal coordinates"):
        flexible_joint_wrenches(flex, np.zeros(flex.nq), np.zeros(nv), np.zeros(nv))
    with pytest.raises(PartreeInputError, match="not finite"):
        flexible_joint_wrenches(flex, np.zeros(nq), np.full(nv, np.nan), np.zeros(nv))
