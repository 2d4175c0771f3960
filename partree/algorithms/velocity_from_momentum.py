"""Joint velocities from generalized momenta: M(q) v = p solved in O(N) (seed 001).

Seed 001 (equations of motion in Poisson impulses) writes the velocity problem of a tree as the
sparse system of its eq. (6), here with the base at rest and no joint driven in time (the seed's
explicit terms V* vanish):

    M v - S^T mu = 0,        -S v + A qd = 0,        A^T mu = p.

M = diag(M_i) holds the body inertias (partree's I_i), S is the kinematic-structure matrix of
eq. (2) (identity blocks on the diagonal, -C_i at (i, parent[i]), where C_i is partree's X_up[i]),
A = diag(A_i) the joints' motion subspaces S_i, v the body velocities, qd the joint velocities
(partree's v coordinates, so p lives in v-space) and mu the multipliers.  The first equation makes
mu the subtree momenta, mu_i = I_i v_i + sum over the children j of X_up[j]^T mu_j (eqs. 3-5:
v = T A qd with T = S^-1), and the third says p_i = S_i^T mu_i.

The system has the block structure of the acceleration problem (the seed's eq. 8), so the seed
solves it with the two O(N) eliminations of that problem, both implemented here:

``sweep`` (the seed's "progonka", Vereshchagin's elimination of the bodies), tip to base::

    U_i = IA_i S_i,   D_i = (S_i^T U_i)^-1,   u_i = p_i - S_i^T pA_i,
    IA_parent += X_up^T (IA_i - U_i D_i U_i^T) X_up,   pA_parent += X_up^T (pA_i + U_i D_i u_i),

then base to tip::

    qd_i = D_i (u_i - U_i^T X_up v_parent),   v_i = X_up v_parent + S_i qd_i,   mu_i = IA_i v_i + pA_i.

IA_i and pA_i (the seed's M*_i and phi*_i) start as the rigid-body inertia I_i and zero.  This is
the articulated-body algorithm with p in place of tau minus the bias forces: no velocity products
and no gravity, since momenta are what velocities, not accelerations, balance.

``ldlt`` (the seed's block L^T D L scheme): the same elimination written on the factors of the
joint block Y_i = S_i^T IA_i S_i = L_i D_i L_i^T (L_i unit lower triangular, D_i diagonal)
instead of its inverse, so only unit triangular factors are inverted, no square root is taken,
and every rank update is symmetric; tip to base::

    x_i = L_i^-1 (p_i - S_i^T pA_i),   Z_i = L_i^-1 U_i^T   (the seed's V_i, before X_up),
    IA_parent += X_up^T (IA_i - Z_i^T D_i^-1 Z_i) X_up,   pA_parent += X_up^T (pA_i + Z_i^T D_i^-1 x_i),

then base to tip::

    L_i^T qd_i = D_i^-1 (x_i - Z_i X_up v_parent),   v_i = X_up v_parent + S_i qd_i,
    mu_i = IA_i v_i + pA_i.

Both touch each body a fixed number of times and couple it only with its parent, so the work is
O(N) for any tree, long chains included, and no matrix of more than 6 x 6 is formed.  (A sparse
L^T D L of M itself in joint space would fill in along every path to the base: O(N depth), O(N^2)
for a chain.  Factoring the extended system of eq. 6 instead, whose blocks couple a body only
with its parent, is what keeps the seed's scheme linear.)  The L^T D L form is the default: its
updates are symmetric by construction and it inverts only unit triangular factors (the seed
finds it the faster of the two on Cardan chains; docs/performance.md has the figures measured
here).

The joint frames X_up and subspaces S_i come from :func:`momentum_frames`, an outward pass with
the package's joint dispatch (``partree.joints``) and no velocity terms, which also sets
IA_i = I_i and pA_i = 0.  Joints of one degree of freedom take a written-out path in every pass,
as in the articulated-body algorithm.  Their joint block is 1 x 1, and the block L^T D L factor of
a 1 x 1 block is the block itself (unit L, D = Y_i): there the two methods do the same arithmetic,
without a square root, and they differ in the blocks of multi-DOF joints (Cardan, spherical,
free), where the L^T D L form factors Y_i instead of inverting it.  One backward and one forward
pass (:func:`elimination_backward_pass`, :func:`recovery_forward_pass`) hold both methods.

Workspace (``Model.create_data``): E, r (X_up), S; IA, pA (IA_i, pA_i; after the outward pass
pA holds mu); U (U_i or Z_i, one row per DOF), Dinv (D_i = Y_i^-1, or L_i's strict lower part
with D_i^-1 on the diagonal), u (u_i or x_i), v (body velocities), qdd (the joint velocities).
"""
import numpy as np
from numba import njit

from .. import checks
from ..errors import PartreeInputError
from ..joints import FIXED, PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at
from .linalg import spd_inverse
from .packed import (ERR_SHAPE, OK, check_buffers, check_q, check_v, model_buffer, model_views, restrict,
                     workspace_views)
from .primitives import congruence_add, inertia_from_compact, xform_force_T_add, xform_motion
from .welded import computing_model, original_body

#: the solution methods of :func:`velocity_from_momentum`
METHODS = ("ldlt", "sweep")


@njit(cache=True)
def momentum_frames(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q,
                    E, r, v, c, IA, pA, S):
    """Outward: X_up (E, r) and S of every joint, IA_i = I_i and pA_i = 0.  No velocity enters:
    the velocities are the unknowns (v and c are left as they are)."""
    n = parent.shape[0]
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    cJ = np.empty(6)
    qd0 = np.zeros(S.shape[0] + 1)
    for i in range(n):
        iv = idx_v[i]
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd0, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == PRISMATIC:
            joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd0, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == FIXED:
            joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd0, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
        else:
            joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd0, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
        inertia_from_compact(mass[i], com[i], I_com[i], IA[i])
        for k in range(6):
            pA[i, k] = 0.0


@njit(cache=True)
def elimination_backward_pass(parent, idx_v, p, E, r, IA, pA, S, U, Dinv, u, ldlt):
    """Tip to base, both methods: U_i = IA_i S_i, u_i = p_i - S_i^T pA_i and the joint block
    Y_i = S_i^T U_i; the body's projected inertia and momentum bias added to its parent's.

    ``ldlt`` False (the sweep's forward stroke): D_i = Y_i^-1 into Dinv, and
    IA_i - U_i D_i U_i^T, pA_i + U_i D_i u_i to the parent.  ``ldlt`` True (the L^T D L
    algorithm's first loop): Y_i = L_i D_i L_i^T with L_i unit lower triangular (into Dinv's
    strict lower part, D_i^-1 on its diagonal), x_i = L_i^-1 u_i into u, Z_i = L_i^-1 U_i^T into
    U, and IA_i - Z_i^T D_i^-1 Z_i, pA_i + Z_i^T D_i^-1 x_i to the parent: triangular factors, no
    inverse and no square root.  A joint of one degree of freedom has a 1 x 1 block, its own
    factor (L = 1, D = Y_i): both methods take the same written-out path.  Returns -1, or the
    body whose Y_i is not positive definite."""
    n = parent.shape[0]
    nvt = S.shape[0]
    Y = np.empty((6, 6))
    Ia = np.empty((6, 6))
    T = np.empty((6, 6))
    pa = np.empty(6)
    w = np.empty(6)
    dd = np.empty(6)
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        p_ = parent[i]
        if nv == 1:
            # the common case, written out: U = IA s, D = 1 / (s^T U), u = p - s^T pA
            Dd = 0.0
            uu = p[iv]
            for k in range(6):
                sk = 0.0
                for l in range(6):
                    sk += IA[i, k, l] * S[iv, l]
                U[iv, k] = sk
                Dd += S[iv, k] * sk
                uu -= S[iv, k] * pA[i, k]
            if not Dd > 0.0:
                return i
            Di = 1.0 / Dd
            Dinv[iv, 0] = Di
            u[iv] = uu
            if p_ < 0:
                continue
            wu = uu * Di
            for k in range(6):
                pa[k] = pA[i, k] + U[iv, k] * wu
                tk = U[iv, k] * Di
                for l in range(k, 6):
                    y = IA[i, k, l] - tk * U[iv, l]
                    Ia[k, l] = y
                    Ia[l, k] = y
            congruence_add(E[i], r[i], Ia, IA[p_], T)
            xform_force_T_add(E[i], r[i], pa, pA[p_])
            continue
        for d in range(nv):
            for k in range(6):
                s = 0.0
                for l in range(6):
                    s += IA[i, k, l] * S[iv + d, l]
                U[iv + d, k] = s
            s = p[iv + d]
            for k in range(6):
                s -= S[iv + d, k] * pA[i, k]
            u[iv + d] = s
        for d in range(nv):
            for e in range(d + 1):
                s = 0.0
                for k in range(6):
                    s += S[iv + d, k] * U[iv + e, k]
                Y[d, e] = s
                Y[e, d] = s
        if nv == 0:
            if p_ >= 0:
                congruence_add(E[i], r[i], IA[i], IA[p_], T)
                xform_force_T_add(E[i], r[i], pA[i], pA[p_])
            continue
        if ldlt and nv == 2:
            # the 2 x 2 block (Cardan and universal joints) written out: Y = L D L^T with
            # L = [[1, 0], [l, 1]], D = diag(d0, d1); x = L^-1 u, Z = L^-1 U^T
            d0 = Y[0, 0]
            if not d0 > 0.0:
                return i
            lf = Y[1, 0] / d0
            d1 = Y[1, 1] - lf * Y[1, 0]
            if not d1 > 0.0:
                return i
            x0 = u[iv]
            x1 = u[iv + 1] - lf * x0
            u[iv + 1] = x1
            for k in range(6):
                U[iv + 1, k] -= lf * U[iv, k]
            e0 = 1.0 / d0
            e1 = 1.0 / d1
            Dinv[iv, 0] = e0
            Dinv[iv + 1, 0] = lf
            Dinv[iv + 1, 1] = e1
            if p_ < 0:
                continue
            w0 = x0 * e0
            w1 = x1 * e1
            for k in range(6):
                z0 = U[iv, k]
                z1 = U[iv + 1, k]
                pa[k] = pA[i, k] + z0 * w0 + z1 * w1
                t0 = z0 * e0
                t1 = z1 * e1
                for l in range(k, 6):
                    y = IA[i, k, l] - t0 * U[iv, l] - t1 * U[iv + 1, l]
                    Ia[k, l] = y
                    Ia[l, k] = y
        elif ldlt:
            # Y = L D L^T, L unit lower triangular (in Y's lower part), D in dd: no square roots
            for d in range(nv):
                for e in range(d):
                    s = Y[d, e]
                    for t in range(e):
                        s -= Y[d, t] * Y[e, t] * dd[t]
                    Y[d, e] = s / dd[e]
                s = Y[d, d]
                for t in range(d):
                    s -= Y[d, t] * Y[d, t] * dd[t]
                if not s > 0.0:
                    return i
                dd[d] = s
            # x = L^-1 u and Z = L^-1 U^T (the rows of U hold U^T's columns), unit triangular
            for d in range(nv):
                s = u[iv + d]
                for t in range(d):
                    s -= Y[d, t] * u[iv + t]
                u[iv + d] = s
                for k in range(6):
                    s = U[iv + d, k]
                    for t in range(d):
                        s -= Y[d, t] * U[iv + t, k]
                    U[iv + d, k] = s
                for e in range(d):
                    Dinv[iv + d, e] = Y[d, e]
                Dinv[iv + d, d] = 1.0 / dd[d]
            if p_ < 0:
                continue
            for k in range(6):
                s = pA[i, k]
                for d in range(nv):
                    s += U[iv + d, k] * (u[iv + d] * Dinv[iv + d, d])
                pa[k] = s
                for l in range(k, 6):
                    s = IA[i, k, l]
                    for d in range(nv):
                        s -= U[iv + d, k] * Dinv[iv + d, d] * U[iv + d, l]
                    Ia[k, l] = s
                    Ia[l, k] = s
        else:
            if not spd_inverse(Y, nv, T):
                return i
            for d in range(nv):
                for e in range(nv):
                    Dinv[iv + d, e] = T[d, e]
            if p_ < 0:
                continue
            for k in range(6):
                pa[k] = pA[i, k]
                for l in range(6):
                    Ia[k, l] = IA[i, k, l]
            for d in range(nv):
                # w = sum_e D_i[d, e] U_e (row d of D_i U_i^T), and its pieces of U D U^T and U D u
                for k in range(6):
                    s = 0.0
                    for e in range(nv):
                        s += Dinv[iv + d, e] * U[iv + e, k]
                    w[k] = s
                for k in range(6):
                    pa[k] += w[k] * u[iv + d]
                    for l in range(6):
                        Ia[k, l] -= U[iv + d, k] * w[l]
        congruence_add(E[i], r[i], Ia, IA[p_], T)
        xform_force_T_add(E[i], r[i], pa, pA[p_])
    return -1


@njit(cache=True)
def recovery_forward_pass(parent, idx_v, E, r, S, IA, pA, U, Dinv, u, v, qd, momenta, ldlt):
    """Base to tip, both methods: qd_i from the velocity X_up v_parent the parent passes down,
    v_i = X_up v_parent + S_i qd_i, and with ``momenta`` the subtree momenta
    mu_i = IA_i v_i + pA_i written over pA_i.  The sweep's back stroke (``ldlt`` False):
    qd_i = D_i (u_i - U_i^T X_up v_parent); the L^T D L algorithm's second loop (True):
    L_i^T qd_i = D_i^-1 (x_i - Z_i X_up v_parent); for one degree of freedom both are the first."""
    n = parent.shape[0]
    nvt = S.shape[0]
    vp = np.empty(6)
    h = np.empty(6)
    for i in range(n):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        p_ = parent[i]
        if p_ < 0:
            for k in range(6):
                vp[k] = 0.0
        else:
            xform_motion(E[i], r[i], v[p_], vp)
        if nv == 1:
            s = u[iv]
            for k in range(6):
                s -= U[iv, k] * vp[k]
            x = Dinv[iv, 0] * s
            qd[iv] = x
            for k in range(6):
                v[i, k] = vp[k] + S[iv, k] * x
            if momenta:
                subtree_momentum(IA[i], v[i], pA[i])
            continue
        if nv == 2 and ldlt:
            # the 2 x 2 block written out: L^T qd = D^-1 h with L = [[1, 0], [l, 1]]
            h0 = u[iv]
            h1 = u[iv + 1]
            for k in range(6):
                h0 -= U[iv, k] * vp[k]
                h1 -= U[iv + 1, k] * vp[k]
            x1 = h1 * Dinv[iv + 1, 1]
            x0 = h0 * Dinv[iv, 0] - Dinv[iv + 1, 0] * x1
            qd[iv] = x0
            qd[iv + 1] = x1
            for k in range(6):
                v[i, k] = vp[k] + S[iv, k] * x0 + S[iv + 1, k] * x1
            if momenta:
                subtree_momentum(IA[i], v[i], pA[i])
            continue
        for k in range(6):
            v[i, k] = vp[k]
        for d in range(nv):
            s = u[iv + d]
            for k in range(6):
                s -= U[iv + d, k] * vp[k]
            h[d] = s
        if nv > 0:
            if ldlt:
                # L^T qd = D^-1 h, L unit lower triangular: back substitution
                for d in range(nv - 1, -1, -1):
                    s = h[d] * Dinv[iv + d, d]
                    for t in range(d + 1, nv):
                        s -= Dinv[iv + t, d] * qd[iv + t]
                    qd[iv + d] = s
            else:
                for d in range(nv):
                    s = 0.0
                    for e in range(nv):
                        s += Dinv[iv + d, e] * h[e]
                    qd[iv + d] = s
            for d in range(nv):
                for k in range(6):
                    v[i, k] += S[iv + d, k] * qd[iv + d]
        if momenta:
            subtree_momentum(IA[i], v[i], pA[i])


@njit(cache=True, inline="always")
def subtree_momentum(IA_i, v_i, pA_i):
    """pA_i <- IA_i v_i + pA_i: the subtree momentum mu_i once v_i is known (the seed's
    mu_i = M*_i v_i + phi*_i)."""
    h0 = pA_i[0]
    h1 = pA_i[1]
    h2 = pA_i[2]
    h3 = pA_i[3]
    h4 = pA_i[4]
    h5 = pA_i[5]
    for l in range(6):
        x = v_i[l]
        h0 += IA_i[0, l] * x
        h1 += IA_i[1, l] * x
        h2 += IA_i[2, l] * x
        h3 += IA_i[3, l] * x
        h4 += IA_i[4, l] * x
        h5 += IA_i[5, l] * x
    pA_i[0] = h0
    pA_i[1] = h1
    pA_i[2] = h2
    pA_i[3] = h3
    pA_i[4] = h4
    pA_i[5] = h5


@njit(cache=True)
def velocity_from_momentum_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                                  q, p, ldlt, momenta, E, r, v, c, IA, pA, S, U, Dinv, u, qd):
    """The three passes: frames, elimination tip to base (``ldlt`` True: L^T D L, else the
    sweep), recovery base to tip.  qd receives the joint velocities, v the body velocities and,
    with ``momenta``, pA the subtree momenta.  Returns -1 or the body of a singular joint block."""
    momentum_frames(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q,
                    E, r, v, c, IA, pA, S)
    bad = elimination_backward_pass(parent, idx_v, p, E, r, IA, pA, S, U, Dinv, u, ldlt)
    if bad >= 0:
        return bad
    recovery_forward_pass(parent, idx_v, E, r, S, IA, pA, U, Dinv, u, v, qd, momenta, ldlt)
    return -1


def singular_joint(model, bad):
    """The error for a joint whose block S_i^T IA_i S_i is singular (a subtree that carries no
    inertia along the joint's motion)."""
    return PartreeInputError(
        f"joint {model.joint_names[bad]!r} (body {bad}): its subtree has a singular inertia along the "
        f"joint's motion (massless subtree?); the velocities of given momenta are undefined")


def check_method(method):
    """``method`` if it is one of :data:`METHODS`, else a clear error."""
    if not isinstance(method, str) or method not in METHODS:
        raise PartreeInputError(f"method is {method!r}; velocity_from_momentum knows 'ldlt' (block L^T D L, "
                                f"the default) and 'sweep' (Vereshchagin's elimination)")
    return method


@njit(cache=True)
def velocity_from_momentum_call(mb, wb, q, p, out, ldlt, check):
    """One solve of M v = p on a packed model and workspace (``partree.algorithms.packed``): the
    compiled checks, :func:`velocity_from_momentum_kernel` on the model with its welded bodies
    merged (``partree.algorithms.welded``), v copied to ``out``.  Returns ``packed.OK``, an error
    code, or the body of a singular joint block."""
    e = check_buffers(mb, wb)
    if e == OK:
        e = check_q(mb, q, check)
    if e == OK:
        e = check_v(mb, p, check)
    if e != OK:
        return e
    nv = mb[3]
    if out.shape[0] != nv:
        return ERR_SHAPE
    cb, n = computing_model(mb, wb)
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, _, _, _ = model_views(cb)
    E, r, v, c, IA, pA, _, S, U, Dinv, u, qd, _, _ = workspace_views(wb, mb[1], nv, n)
    bad = velocity_from_momentum_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                                        q, p, ldlt, False, E, r, v, c, IA, pA, S, U, Dinv, u, qd)
    if bad >= 0:
        return original_body(mb, wb, n, bad)
    for k in range(nv):
        out[k] = qd[k]
    return OK


#: the one signature of :func:`velocity_from_momentum_call` (``packed.restrict``)
CALL_SIGNATURE = "int64(int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], boolean, boolean)"
_CALL_READY = False


def _ready():
    global _CALL_READY
    if not _CALL_READY:
        restrict(velocity_from_momentum_call, CALL_SIGNATURE)
        _CALL_READY = True


def velocity_from_momentum(model, q, p, method="ldlt", data=None, out=None, check=True):
    """Joint velocities v (nv,) of given generalized momenta: the solution of M(q) v = p in O(N).

    The tree form of seed 001's eq. (6) is eliminated tip to base and solved base to tip; M is
    never formed.  See the module docstring for the two eliminations.

    Parameters
    ----------
    model : Model
    q : ndarray
        Configuration (nq,).
    p : ndarray
        Generalized momenta (nv,), in partree's v coordinates (``generalized_momentum``): for a
        spherical or free joint the momenta conjugate to its body-frame velocities.
    method : {'ldlt', 'sweep'}
        'ldlt': the seed's block L^T D L scheme, which factors each joint block and
        inverts only unit triangular factors (the default); 'sweep': Vereshchagin's elimination, the
        articulated-body recursion with p in place of tau minus the bias forces.
    data : Data, optional
        A reusable workspace (``model.create_data()``); the model's own is used when omitted.
    out : ndarray, optional
        A writable C-contiguous float64 array (nv,) that receives v and is returned.
    check : bool
        False skips the value checks of q and p when they are C-contiguous float64 arrays of the
        right sizes (see :func:`partree.aba`).

    Returns
    -------
    ndarray
        v (nv,).
    """
    pk = model._packed
    if pk is not None and _CALL_READY and (method == "ldlt" or method == "sweep"):
        try:
            res = np.empty(pk.nv) if out is None else out
            if velocity_from_momentum_call(pk.buf, (model._data if data is None else data)._buf, q, p, res,
                                           method == "ldlt", check) == OK:
                return res
        except (TypeError, AttributeError):
            pass        # not the compiled call's types: checked and converted below
    check_method(method)
    q, p = checks.state(model, q, p, names=("q", "p"))
    d = checks.data_for(model, data)
    out = checks.out_array(out, (model.nv,))
    pk = model_buffer(model)
    if pk is None:
        bad = velocity_from_momentum_kernel(*checks.model_args(model), q, p, method == "ldlt", False,
                                            d.E, d.r, d.v, d.c, d.IA, d.pA, d.S, d.U, d.Dinv, d.u, d.qdd)
        if bad < 0:
            out[:] = d.qdd
            bad = OK
    else:
        _ready()
        bad = velocity_from_momentum_call(pk.buf, d._buf, checks.writable(q), checks.writable(p), out,
                                          method == "ldlt", False)
    if bad >= 0:
        raise singular_joint(model, bad)
    if bad != OK:
        raise PartreeInputError(f"velocity_from_momentum: the compiled call refused checked inputs (code {bad}; "
                                f"an internal error)")
    return out
