"""The constraints of closed loops: violation Phi, Jacobian J = Phi_q (in v) and bias gamma.

Each loop's rows are T^T [w_rel; v_rel] (``partree.loops``): the forbidden components of the
motion of its frame B relative to its frame A, in A's axes.  On the velocity level the rows are
J qd = 0; on the acceleration level J qdd = gamma, with gamma = -(dJ/dt) qd holding every
velocity-product term.  Written per loop end e on body x with sign s (-1 for A, +1 for B),

    rows(acceleration) = sum_e  G_e a_x  -  gamma,      G_e = s T^T Rot(A <- F_e) X(F_e <- x),

where a_x is body x's spatial acceleration in its own coordinates (as the dynamics passes hold
it) and X(F_e <- x) the transform to the end's frame.  The constrained dynamics
(``partree.algorithms.constrained_dynamics``) takes the G_e and gamma from here; J is only formed
(sparse) for :func:`loop_constraints` and the corrections.

Position-level rows Phi have the rows' directions as derivative where the loop is closed:
distances along T's translational columns (d = R_A^T (o_B - o_A)), and for rotations the rotation
vector of R_A^T R_B (weld, prismatic), the components of the B-fixed axis normal to u (revolute),
or u1 . u2 (universal).  Gauss-Newton with J converges on them quadratically near the closure.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from .. import checks
from ..loops import DISTANCE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL, WELD
from .aba import aba_forward_pass1
from .kinematics import world_poses
from .primitives import xform_motion


@njit(cache=True)
def bias_accelerations(parent, E, r, c, a):
    """The bodies' spatial accelerations at qdd = 0 without gravity (the velocity products c
    carried outward): a[i] = X_up[i] a[parent] + c[i]."""
    n = parent.shape[0]
    tmp = np.empty(6)
    for i in range(n):
        p = parent[i]
        if p < 0:
            for k in range(6):
                a[i, k] = c[i, k]
        else:
            xform_motion(E[i], r[i], a[p], tmp)
            for k in range(6):
                a[i, k] = tmp[k] + c[i, k]


def _normals(u):
    """e1, e2 with (e1, e2, u) right-handed and orthonormal, for each row of u (L, 3)."""
    w = np.where(np.abs(u[:, :1]) < 0.9, np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 1.0, 0.0]]))
    e1 = np.cross(u, w)
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    return e1, np.cross(u, e1)


def _rotvec(R):
    """Rotation vectors of the rotations R (L, 3, 3) (angles below pi)."""
    s = 0.5 * np.stack((R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]), axis=1)
    sn = np.linalg.norm(s, axis=1)
    c = 0.5 * (np.trace(R, axis1=1, axis2=2) - 1.0)
    th = np.arctan2(sn, c)
    f = np.where(sn > 1e-12, th / np.where(sn > 1e-12, sn, 1.0), 1.0 + sn * sn / 6.0)
    return s * f[:, None]


def _motion_xform(E, r):
    """6x6 motion transforms [[E, 0], [-E rx, E]] of the pairs E (L, 3, 3), r (L, 3)."""
    L = E.shape[0]
    X = np.zeros((L, 6, 6))
    rx = np.zeros((L, 3, 3))
    rx[:, 0, 1], rx[:, 0, 2], rx[:, 1, 2] = -r[:, 2], r[:, 1], -r[:, 0]
    rx[:, 1, 0], rx[:, 2, 0], rx[:, 2, 1] = r[:, 2], -r[:, 1], r[:, 0]
    X[:, :3, :3] = E
    X[:, 3:, 3:] = E
    X[:, 3:, :3] = -E @ rx
    return X


class LoopTerms:
    """What the loops contribute at one state (L loops, R rows).

    Attributes
    ----------
    G : float[L, 2, 6, 6]
        G[l, 0] (end A, sign -1) and G[l, 1] (end B, sign +1): the rows' maps from the end's
        body acceleration (its coordinates; the world's for an end on the world) to the
        constraint acceleration; rows beyond the loop's count are zero.
    gamma, phi, velocity : float[R]
        The acceleration bias (J qdd = gamma), the position-level violation and the velocity-level
        rows J qd.
    T : float[L, 6, 6]
        The loops' constraint-force directions in frame A's axes (columns; beyond the loop's rows
        zero): loop force = T lambda.
    """

    def __init__(self, G, gamma, phi, velocity, T):
        self.G, self.gamma, self.phi, self.velocity, self.T = G, gamma, phi, velocity, T


def loop_terms(loops, Rw, pw, v):
    """:class:`LoopTerms` of the loops (a ``LoopSet``) from the bodies' world poses Rw (n, 3, 3),
    pw (n, 3) and body-frame velocities v (n, 6)."""
    L = len(loops)
    R = loops.nrow
    if L == 0:
        z = np.zeros(0)
        return LoopTerms(np.zeros((0, 2, 6, 6)), z, z.copy(), z.copy(), np.zeros((0, 6, 6)))
    ends = []
    for body, Rp, pp in ((loops.body_a, loops.R_a, loops.p_a), (loops.body_b, loops.R_b, loops.p_b)):
        on = body >= 0
        bx = np.where(on, body, 0)
        Rb = np.where(on[:, None, None], Rw[bx], np.eye(3))
        pb = np.where(on[:, None], pw[bx], 0.0)
        vb = np.where(on[:, None], v[bx], 0.0)
        RF = Rb @ Rp                                        # frame axes in the world
        oF = pb + np.einsum("lij,lj->li", Rb, pp)           # frame origin in the world
        RpT = np.transpose(Rp, (0, 2, 1))
        wF = np.einsum("lij,lj->li", RpT, vb[:, :3])        # body angular velocity, frame axes
        voF = np.einsum("lij,lj->li", RpT, vb[:, 3:] + np.cross(vb[:, :3], pp))   # origin's velocity
        XF = _motion_xform(RpT, pp)                         # X(F <- body)
        ends.append((RF, oF, wF, voF, XF))
    (RA, oA, wA, voA, XA), (RB, oB, wB, voB, XB) = ends
    RAT = np.transpose(RA, (0, 2, 1))
    RAB = RAT @ RB
    d = np.einsum("lij,lj->li", RAT, oB - oA)
    w_rel = np.einsum("lij,lj->li", RAB, wB) - wA
    v_rel = np.einsum("lij,lj->li", RAB, voB) - voA
    nu = np.concatenate((-np.cross(wA, w_rel),
                         np.einsum("lij,lj->li", RAB, np.cross(wB, voB)) - np.cross(wA, voA) - np.cross(wA, v_rel)),
                        axis=1)
    rel = np.concatenate((w_rel, v_rel), axis=1)
    T = np.zeros((L, 6, 6))
    Td = np.zeros((L, 6, 6))
    phi6 = np.zeros((L, 6))
    I3 = np.eye(3)
    kind = loops.kind
    u = loops.axis
    e1, e2 = _normals(u)
    w = np.einsum("lij,lj->li", RAB, u)                     # the B-fixed axis in A's axes
    rv = _rotvec(RAB)
    for code in np.unique(kind):
        k = np.flatnonzero(kind == code)
        if code == REVOLUTE:
            T[k, :3, 0], T[k, :3, 1], T[k, 3:, 2:5] = e1[k], e2[k], I3
            phi6[k, 0] = -np.einsum("li,li->l", e2[k], w[k])
            phi6[k, 1] = np.einsum("li,li->l", e1[k], w[k])
            phi6[k, 2:5] = d[k]
        elif code == PRISMATIC:
            T[k, :3, :3], T[k, 3:, 3], T[k, 3:, 4] = I3, e1[k], e2[k]
            phi6[k, :3] = rv[k]
            phi6[k, 3] = np.einsum("li,li->l", e1[k], d[k])
            phi6[k, 4] = np.einsum("li,li->l", e2[k], d[k])
        elif code == UNIVERSAL:
            u2 = np.einsum("lij,lj->li", RAB[k], loops.axis2[k])
            m = np.cross(u2, u[k])
            T[k, 3:, :3] = I3
            T[k, :3, 3] = m
            Td[k, :3, 3] = np.cross(np.cross(w_rel[k], u2), u[k])
            phi6[k, :3] = d[k]
            phi6[k, 3] = np.einsum("li,li->l", u[k], u2)
        elif code == SPHERICAL:
            T[k, 3:, :3] = I3
            phi6[k, :3] = d[k]
        elif code == WELD:
            T[k] = np.eye(6)
            phi6[k, :3] = rv[k]
            phi6[k, 3:] = d[k]
        elif code == DISTANCE:
            dist = np.linalg.norm(d[k], axis=1)
            if np.any(dist < 1e-12):
                bad = k[int(np.argmin(dist))]
                raise ValueError(f"distance loop {loops.names[bad]!r}: its two points coincide, so the rod has "
                                 f"no direction")
            un = d[k] / dist[:, None]
            dd = v_rel[k] - np.cross(wA[k], d[k])
            T[k, 3:, 0] = un
            Td[k, 3:, 0] = (dd - un * np.einsum("li,li->l", un, dd)[:, None]) / dist[:, None]
            phi6[k, 0] = dist - loops.length[k]
    TT = np.transpose(T, (0, 2, 1))
    gam6 = -np.einsum("lij,lj->li", TT, nu) - np.einsum("lji,lj->li", Td, rel)
    vel6 = np.einsum("lij,lj->li", TT, rel)
    Rot = np.zeros((L, 6, 6))
    Rot[:, :3, :3] = RAB
    Rot[:, 3:, 3:] = RAB
    G = np.empty((L, 2, 6, 6))
    G[:, 0] = -(TT @ XA)
    G[:, 1] = TT @ Rot @ XB
    mask = np.arange(6)[None, :] < loops.nrows[:, None]
    G *= mask[:, None, :, None]
    return LoopTerms(G, gam6[mask], phi6[mask], vel6[mask], T * mask[:, None, :])


def end_rows(loops, G, a):
    """sum over each loop's two ends of G_e a_x: the rows' values for body accelerations a (n, 6)
    (an end on the world takes a zero acceleration)."""
    out = np.zeros(loops.nrow)
    if not len(loops):
        return out
    for side, body in ((0, loops.body_a), (1, loops.body_b)):
        ax = np.where((body >= 0)[:, None], a[np.where(body >= 0, body, 0)], 0.0)
        full = np.einsum("lij,lj->li", G[:, side], ax)
        out += full[np.arange(6)[None, :] < loops.nrows[:, None]]
    return out


class LoopConstraints:
    """Result of :func:`loop_constraints` (R rows, the loops' rows stacked in loop order).

    Attributes
    ----------
    phi : ndarray (R,)
        Position-level violation.
    J : scipy.sparse.csr_matrix (R, nv)
        The constraint Jacobian in v: the rows' velocities are J qd.
    gamma : ndarray (R,)
        The acceleration bias: the motion satisfies J qdd = gamma.
    velocity : ndarray (R,)
        J qd, the velocity-level violation.
    rows : dict
        Loop name -> slice of its rows.
    """

    def __init__(self, phi, J, gamma, velocity, rows):
        self.phi, self.J, self.gamma, self.velocity, self.rows = phi, J, gamma, velocity, rows

    def __repr__(self):
        return (f"<LoopConstraints: {self.phi.size} rows, |phi|max={np.abs(self.phi).max(initial=0.0):.3g}, "
                f"|J qd|max={np.abs(self.velocity).max(initial=0.0):.3g}>")


def state_kinematics(model, q, qd):
    """Pass 1 of ABA at (q, qd) with the world poses: (E, r, v, c, IA, pA, S, Rw, pw)."""
    n, nv = model.n, model.nv
    E, r = np.empty((n, 3, 3)), np.empty((n, 3))
    v, c, pA = np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6))
    IA, S = np.empty((n, 6, 6)), np.zeros((max(nv, 1), 6))
    aba_forward_pass1(*checks.model_args(model), q, qd, np.zeros((0, 6)), False, E, r, v, c, IA, pA, S)
    Rw, pw = np.empty((n, 3, 3)), np.empty((n, 3))
    world_poses(model.parent, E, r, Rw, pw)
    return E, r, v, c, IA, pA, S, Rw, pw


def jacobian(model, terms, S, Rw, pw):
    """The sparse J (R, nv) from the loop terms, the motion subspaces S (body coordinates) and
    the world poses: each end's rows G_e X(x <- 0) times the world motion subspace of every
    joint between its body and the root."""
    loops = model.loops
    nv = model.nv
    idx_v, nv_j, parent = model.idx_v, model.nv_j, model.parent
    rows, cols, vals = [], [], []
    Xw = {}

    def x_from_world(x):
        if x not in Xw:
            Xw[x] = _motion_xform(Rw[x][None].transpose(0, 2, 1), pw[x][None])[0]
        return Xw[x]

    def s_world(k):
        # X(0 <- k) S_k: the joint's motion subspace in world coordinates
        Rk, pk = Rw[k], pw[k]
        Sk = S[idx_v[k]:idx_v[k] + nv_j[k]]
        w = Sk[:, :3] @ Rk.T
        return np.concatenate((w, Sk[:, 3:] @ Rk.T + np.cross(pk, w)), axis=1)

    for l in range(len(loops)):
        m, r0 = int(loops.nrows[l]), int(loops.row0[l])
        acc = {}
        for side, x in ((0, int(loops.body_a[l])), (1, int(loops.body_b[l]))):
            Gw = terms.G[l, side, :m] if x < 0 else terms.G[l, side, :m] @ x_from_world(x)
            while x >= 0:
                if nv_j[x]:
                    acc[x] = acc.get(x, 0.0) + Gw @ s_world(x).T
                x = int(parent[x])
        for k, blk in acc.items():
            if not np.any(blk):
                continue
            rr, cc = np.meshgrid(np.arange(r0, r0 + m), np.arange(idx_v[k], idx_v[k] + nv_j[k]), indexing="ij")
            rows.append(rr.ravel())
            cols.append(cc.ravel())
            vals.append(np.asarray(blk).ravel())
    R = loops.nrow
    if not rows:
        return sp.csr_matrix((R, nv))
    J = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(R, nv))
    J.sum_duplicates()
    return J


def loop_constraints(model, q, qd=None):
    """The loops' constraints at (q, qd): violation phi, sparse Jacobian J, bias gamma.

    Parameters
    ----------
    model : Model
        A model with loops (``model.loops``).
    q : ndarray (nq,)
    qd : ndarray (nv,), optional
        Zero when omitted (then gamma = 0 and the velocity rows vanish).

    Returns
    -------
    LoopConstraints
        ``phi`` (R,), ``J`` (R, nv, scipy.sparse CSR), ``gamma`` (R,) with J qdd = gamma,
        ``velocity`` = J qd, and ``rows`` {loop name: slice}.

    J's columns are the joints on the paths from each loop's two bodies to the root: the joints
    above the two paths' meeting body enter with the difference of the two ends' rows, which
    vanishes where the loop is closed.
    """
    q, qd = checks.state(model, q, np.zeros(model.nv) if qd is None else qd)
    E, r, v, c, IA, pA, S, Rw, pw = state_kinematics(model, q, qd)
    try:
        terms = loop_terms(model.loops, Rw, pw, v)
    except ValueError as e:
        from ..errors import PartreeInputError
        raise PartreeInputError(str(e)) from None
    J = jacobian(model, terms, S, Rw, pw)
    a0 = np.empty((model.n, 6))
    bias_accelerations(model.parent, E, r, c, a0)
    gamma = terms.gamma - end_rows(model.loops, terms.G, a0)
    rows = {nm: model.loops.rows_of(k) for k, nm in enumerate(model.loops.names)}
    return LoopConstraints(terms.phi, J, gamma, terms.velocity, rows)
