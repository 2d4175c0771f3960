"""Constraint bases W_j of every joint type, the layout of the stacked constraint forces F_S, and
the split of a joint wrench into its constraint force F_S = W^T F and drive force F_T.

W_j (6 x (6 - nv_j), orthonormal, W_j^T S_j = 0) is deterministic per joint and expressed in body
j's frame (the joint's successor frame), columns [angular; linear]; see :mod:`partree.algorithms.cfa`
for the table of bases.
"""
import numpy as np
from numba import njit

from ...joints import FIXED, FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL


@njit(cache=True, inline="always")
def _perp_pair(a, u1, u2):
    """Two unit vectors completing the unit vector a to a right-handed basis (u1, u2, a).

    The fixed rule: e = the coordinate axis least aligned with a (smallest |a_k|, the first on
    ties), u1 = normalise(e - (e.a) a), u2 = a x u1.  For a = z this gives u1 = x, u2 = y."""
    k = 0
    if abs(a[1]) < abs(a[k]):
        k = 1
    if abs(a[2]) < abs(a[k]):
        k = 2
    d = a[k]
    x0 = -d * a[0]
    x1 = -d * a[1]
    x2 = -d * a[2]
    if k == 0:
        x0 += 1.0
    elif k == 1:
        x1 += 1.0
    else:
        x2 += 1.0
    nn = 1.0 / np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
    u1[0] = x0 * nn
    u1[1] = x1 * nn
    u1[2] = x2 * nn
    u2[0] = a[1] * u1[2] - a[2] * u1[1]
    u2[1] = a[2] * u1[0] - a[0] * u1[2]
    u2[2] = a[0] * u1[1] - a[1] * u1[0]


@njit(cache=True)
def constraint_rows(jt, S, iv, Wt, is_, u1, u2):
    """Write W_j^T (rows) of joint type jt with motion subspace rows S[iv:iv+nv] into
    Wt[is_:is_+6-nv].  Returns False when the subspace is degenerate (universal joint with
    parallel axes)."""
    m = 6
    if jt == REVOLUTE:
        m = 5
    elif jt == PRISMATIC:
        m = 5
    elif jt == UNIVERSAL:
        m = 4
    elif jt == SPHERICAL:
        m = 3
    elif jt == FREE:
        m = 0
    for d in range(m):
        for k in range(6):
            Wt[is_ + d, k] = 0.0
    if jt == REVOLUTE:
        _perp_pair(S[iv, 0:3], u1, u2)
        for k in range(3):
            Wt[is_, k] = u1[k]
            Wt[is_ + 1, k] = u2[k]
        for d in range(3):
            Wt[is_ + 2 + d, 3 + d] = 1.0
    elif jt == PRISMATIC:
        _perp_pair(S[iv, 3:6], u1, u2)
        for d in range(3):
            Wt[is_ + d, d] = 1.0
        for k in range(3):
            Wt[is_ + 3, 3 + k] = u1[k]
            Wt[is_ + 4, 3 + k] = u2[k]
    elif jt == UNIVERSAL:
        b0, b1, b2 = S[iv, 0], S[iv, 1], S[iv, 2]
        c0, c1, c2 = S[iv + 1, 0], S[iv + 1, 1], S[iv + 1, 2]
        n0 = b1 * c2 - b2 * c1
        n1 = b2 * c0 - b0 * c2
        n2 = b0 * c1 - b1 * c0
        nn = np.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
        if not nn > 1e-9:
            return False
        Wt[is_, 0] = n0 / nn
        Wt[is_, 1] = n1 / nn
        Wt[is_, 2] = n2 / nn
        for d in range(3):
            Wt[is_ + 1 + d, 3 + d] = 1.0
    elif jt == SPHERICAL:
        for d in range(3):
            Wt[is_ + d, 3 + d] = 1.0
    elif jt == FIXED:
        for d in range(6):
            Wt[is_ + d, d] = 1.0
    return True


@njit(cache=True)
def rows_kernel(jtype, idx_v, idx_s, S, rows_ready, Wt):
    """All constraint rows from the motion subspaces S (only the universal joints' when
    ``rows_ready``).  Returns -1 or a degenerate universal joint."""
    return rows_kernel_in(jtype, idx_v, idx_s, S, rows_ready, Wt, np.empty(3), np.empty(3))


@njit(cache=True)
def rows_kernel_in(jtype, idx_v, idx_s, S, rows_ready, Wt, u1, u2):
    """:func:`rows_kernel` with its two work vectors u1, u2 (3 values each) given."""
    for i in range(jtype.shape[0]):
        if not rows_ready or jtype[i] == UNIVERSAL:
            if not constraint_rows(jtype[i], S, idx_v[i], Wt, idx_s[i], u1, u2):
                return i
    return -1


def constraint_layout(nv_j):
    """(ns_j, idx_s): every joint's number of constraint rows 6 - nv_j and the offset of its block
    in the stacked F_S."""
    ns_j = (6 - np.asarray(nv_j)).astype(np.int64)
    return ns_j, np.concatenate(([0], np.cumsum(ns_j)[:-1])).astype(np.int64)


@njit(cache=True, inline="always")
def project_wrench(j, n, nvt, idx_v, idx_s, S, tau, Wt, F, FS, FT, G):
    """Joint j's split of its wrench F_j: F_S,j = W_j^T F_j and F_T,j = (S_j^T S_j)^-1 tau_j (G: a
    6x6 scratch)."""
    iv = idx_v[j]
    nv = (idx_v[j + 1] if j + 1 < n else nvt) - iv
    is_ = idx_s[j]
    for d in range(6 - nv):
        row = is_ + d
        FS[row] = (Wt[row, 0] * F[j, 0] + Wt[row, 1] * F[j, 1] + Wt[row, 2] * F[j, 2]
                   + Wt[row, 3] * F[j, 3] + Wt[row, 4] * F[j, 4] + Wt[row, 5] * F[j, 5])
    # F_T = (S^T S)^-1 S^T F  (= tau)
    for d in range(nv):
        for e in range(nv):
            s = 0.0
            for k in range(6):
                s += S[iv + d, k] * S[iv + e, k]
            G[d, e] = s
    if nv == 1:
        FT[iv] = tau[iv] / G[0, 0]
    elif nv > 1:
        # Gauss elimination on the small SPD Gram matrix (no pivoting needed)
        for d in range(nv):
            FT[iv + d] = tau[iv + d]
        for k in range(nv):
            for i in range(k + 1, nv):
                f = G[i, k] / G[k, k]
                for l in range(k, nv):
                    G[i, l] -= f * G[k, l]
                FT[iv + i] -= f * FT[iv + k]
        for i in range(nv - 1, -1, -1):
            s = FT[iv + i]
            for l in range(i + 1, nv):
                s -= G[i, l] * FT[iv + l]
            FT[iv + i] = s / G[i, i]
