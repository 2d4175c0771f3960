"""The seed's compliance form of the odd-even constraint force algorithm
(``cfa(..., method='odd-even-compliance')``; the default odd-even reduction is the scattering
form of :mod:`partree.algorithms.cfa.oddeven_scattering`).

Notation (Featherstone; see ``partree.algorithms.cfa`` for the whole picture):
body j, parent l = parent[j], X_j = X_up[j] (motion transform l -> j), S_j the motion subspace
(rows of ``S``), W_j the constraint basis (rows of ``Wt``: W_j^T), Phi_j = I_j^-1 the inverse
spatial inertia (the body's compliance), F_j = S_j F_T,j + W_j F_S,j the wrench joint j transmits
from l to j (seed eq. 5).

Body equation    I_j a_j + p_j = F_j - sum_{c child of j} X_c^T F_c,   p_j = v_j x* I_j v_j - f_ext,j
Kinematics       a_j = X_j a_l + S_j qdd_j + c_j,   a_{-1} = -g
Constraint       W_j^T (a_j - X_j a_l - c_j) = 0

With every body's acceleration written a_j = Phi_j (F_j - sum X_c^T F_c - p_j), the constraints
are the block-sparse SPD system A F_S = rhs (seed eqs. 24-36): diagonal blocks
W_j^T (Phi_j + X_j Phi_l X_j^T) W_j, parent coupling -W_j^T X_j Phi_l W_l, sibling coupling
W_j^T X_j Phi_l X_s^T W_s.

The odd-even kernel never forms the tree-wide system.  The tree is cut into chains (maximal runs
of single-child bodies, ``Model.chains``).  Chains are processed tips first, grouped by their
height in the tree of chains (a chain only depends on the chains hanging from its tip, which all
have a smaller height), so that every group is a batch of independent chains:

backward (tips first)
  1. setup: each chain's block-tridiagonal system in its own F_S.  Its top joint's row keeps
     the parent body's acceleration a_l as a known right-hand side (no Phi_l term).  A chain whose
     tip body is a node uses that body's articulated inertia IA_k and bias pA_k (the chains hanging
     from it are already collapsed into them): Phi_k = IA_k^-1, p_k = pA_k.
  2. odd-even (cyclic) reduction, seed eqs. 39-40: at level ell (stride s = 2^(ell-1)) every joint
     at chain position k = s, 3s, 5s, ... is eliminated, one batch of independent block
     operations over all chains of the group (phase 1: factor the eliminated blocks; phase 2:
     update the surviving neighbours).  ceil(log2 L) levels for a chain of L joints; the top
     joint (position 0) survives last, with its reduced block A^ and right-hand side r^:
     A^ F_S,top = r^ + W^T X_top a_l.
  3. collapse: the chain acts on its parent body l as an articulated body:
     IA_l += X^T W A^-1 W^T X,   pA_l += X^T (S F_T + W A^-1 r^).
     (By the Woodbury identity W (W^T IA^-1 W)^-1 W^T = IA - IA S (S^T IA S)^-1 S^T IA this is
     exactly the articulated-body step of ABA for a one-body chain; one-body chains, the common
     case in bushy trees, use that inertia form directly when ``woodbury`` is set, which avoids
     inverting IA.)
forward (base first)
  the top joint's reduced equation with the now known a_l, back-substitution of the levels in
  reverse order, then F_j, body accelerations and qdd along the chain.

Everything is O(N) for any tree; no allocation inside the loops.  The small block loops run with
literal sizes for the common all-revolute/prismatic case (5 constraint directions per joint),
which the compiler unrolls; mixed sizes take the run-time
path.  The stages are separately compiled functions (compile time), called once per chain or per
height group.

Accuracy: the constraint-force (compliance) formulation is less well conditioned than the
articulated-body (inertia) form: qdd typically agrees with ABA to ~1e-14..1e-12 relative; on long
chains whose constraint system is ill-conditioned (a planar chain loaded out of its plane) the
solved F_S lose digits (qdd does not), see ``cfa(..., wrenches='newton-euler')``.  Accelerations
are recovered as qdd = S^+ (Phi (F_j - X^T F_next - p_j) - X a_parent - c) with the kinematically
consistent a_j = X a_parent + c + S qdd propagated: errors are projected, not amplified, along a
chain (an inertia-weighted projection of the body equation is unstable on long chains).
"""
import numpy as np
from numba import njit

from ..linalg import cholesky, lsolve_cols, lsolve_vec, ltsolve_vec, spd_inverse
from ..primitives import congruence_add, xform_force_T_add, xform_motion
from .result import CFAResult
from .common import (ERR_MASSLESS, ERR_NONE, ERR_SINGULAR_A, ERR_SINGULAR_IA, ERR_SINGULAR_INERTIA, base_acceleration,
                     check_invertible, raise_error, setup, trim_levels, woodbury_backward_group,
                     woodbury_forward_group, workspace)


@njit(cache=True, inline="always")
def _inv3_sym(Ic, J):
    """J = Ic^-1 for a symmetric 3x3; returns False when Ic is singular (relative test)."""
    a, b, c = Ic[0, 0], Ic[0, 1], Ic[0, 2]
    d, e = Ic[1, 1], Ic[1, 2]
    f = Ic[2, 2]
    A0 = d * f - e * e
    A1 = c * e - b * f
    A2 = b * e - c * d
    det = a * A0 + b * A1 + c * A2
    tr = (a + d + f) / 3.0
    if not (det > 1e-13 * tr * tr * tr and tr > 0.0):
        return False
    inv = 1.0 / det
    J[0, 0] = A0 * inv
    J[0, 1] = A1 * inv
    J[0, 2] = A2 * inv
    J[1, 0] = A1 * inv
    J[1, 1] = (a * f - c * c) * inv
    J[1, 2] = (b * c - a * e) * inv
    J[2, 0] = A2 * inv
    J[2, 1] = (b * c - a * e) * inv
    J[2, 2] = (a * d - b * b) * inv
    return True


@njit(cache=True, inline="always")
def _phi_from(minv, c0, c1, c2, J, out):
    """out = inverse spatial inertia about the frame origin of a body with 1/mass minv, CoM c and
    inverse rotational inertia J about the CoM (all in that frame):
    Phi = [[J, -J cx], [cx J, 1/m - cx J cx]]."""
    for i in range(3):
        j0 = J[i, 0]
        j1 = J[i, 1]
        j2 = J[i, 2]
        out[i, 0] = j0
        out[i, 1] = j1
        out[i, 2] = j2
        # B = -J cx
        b0 = -(j1 * c2 - j2 * c1)
        b1 = -(-j0 * c2 + j2 * c0)
        b2 = -(j0 * c1 - j1 * c0)
        out[i, 3] = b0
        out[i, 4] = b1
        out[i, 5] = b2
    for i in range(3):
        for k in range(3):
            out[3 + k, i] = out[i, 3 + k]
    # lower-right: 1/m + cx B, rows of cx: [0,-c2,c1], [c2,0,-c0], [-c1,c0,0]
    for k in range(3):
        B0 = out[0, 3 + k]
        B1 = out[1, 3 + k]
        B2 = out[2, 3 + k]
        out[3, 3 + k] = -c2 * B1 + c1 * B2
        out[4, 3 + k] = c2 * B0 - c0 * B2
        out[5, 3 + k] = -c1 * B0 + c0 * B1
    out[3, 3] += minv
    out[4, 4] += minv
    out[5, 5] += minv


@njit(cache=True, inline="always")
def _phi_body(mass, com, J, out):
    """Phi = I^-1 of a rigid body about its own origin."""
    _phi_from(1.0 / mass, com[0], com[1], com[2], J, out)


@njit(cache=True, inline="always")
def _phi_moved(E, r, mass, com, J, Jt, out):
    """out = X Phi X^T for X = (E, r): the parent's compliance seen at the child's origin, in the
    child's coordinates (closed form: rotated J' = E J E^T, CoM c' = E (c - r)).  Jt: 3x3 scratch."""
    d0 = com[0] - r[0]
    d1 = com[1] - r[1]
    d2 = com[2] - r[2]
    c0 = E[0, 0] * d0 + E[0, 1] * d1 + E[0, 2] * d2
    c1 = E[1, 0] * d0 + E[1, 1] * d1 + E[1, 2] * d2
    c2 = E[2, 0] * d0 + E[2, 1] * d1 + E[2, 2] * d2
    # Jt = E J E^T
    for i in range(3):
        m0 = E[i, 0] * J[0, 0] + E[i, 1] * J[1, 0] + E[i, 2] * J[2, 0]
        m1 = E[i, 0] * J[0, 1] + E[i, 1] * J[1, 1] + E[i, 2] * J[2, 1]
        m2 = E[i, 0] * J[0, 2] + E[i, 1] * J[1, 2] + E[i, 2] * J[2, 2]
        for k in range(i, 3):
            Jt[i, k] = m0 * E[k, 0] + m1 * E[k, 1] + m2 * E[k, 2]
            Jt[k, i] = Jt[i, k]
    _phi_from(1.0 / mass, c0, c1, c2, Jt, out)


@njit(cache=True, inline="always")
def _mat6_vec(M, x, out):
    for i in range(6):
        out[i] = (M[i, 0] * x[0] + M[i, 1] * x[1] + M[i, 2] * x[2] + M[i, 3] * x[3]
                  + M[i, 4] * x[4] + M[i, 5] * x[5])


@njit(cache=True, inline="always")
def _xform_force(E, r, f, out):
    """out = X^-T f: a force in the parent's coordinates moved to the child's (X* = [[E, -E rx], [0, E]])."""
    n0 = f[0] - (r[1] * f[5] - r[2] * f[4])
    n1 = f[1] - (r[2] * f[3] - r[0] * f[5])
    n2 = f[2] - (r[0] * f[4] - r[1] * f[3])
    for i in range(3):
        out[i] = E[i, 0] * n0 + E[i, 1] * n1 + E[i, 2] * n2
        out[3 + i] = E[i, 0] * f[3] + E[i, 1] * f[4] + E[i, 2] * f[5]


@njit(cache=True, inline="always")
def _rows_dot(Wt, is_, M, x, out):
    """out[d] = W_d . x for the M constraint rows starting at is_."""
    for d in range(M):
        out[d] = (Wt[is_ + d, 0] * x[0] + Wt[is_ + d, 1] * x[1] + Wt[is_ + d, 2] * x[2]
                  + Wt[is_ + d, 3] * x[3] + Wt[is_ + d, 4] * x[4] + Wt[is_ + d, 5] * x[5])


@njit(cache=True, inline="always")
def _proj_sym(Wt, is_, M, T, TW, out):
    """out[:M, :M] = W^T T W (T 6x6 symmetric; TW 6x6 scratch)."""
    for e in range(M):
        for k in range(6):
            TW[k, e] = (T[k, 0] * Wt[is_ + e, 0] + T[k, 1] * Wt[is_ + e, 1] + T[k, 2] * Wt[is_ + e, 2]
                        + T[k, 3] * Wt[is_ + e, 3] + T[k, 4] * Wt[is_ + e, 4] + T[k, 5] * Wt[is_ + e, 5])
    for d in range(M):
        for e in range(d, M):
            s = (Wt[is_ + d, 0] * TW[0, e] + Wt[is_ + d, 1] * TW[1, e] + Wt[is_ + d, 2] * TW[2, e]
                 + Wt[is_ + d, 3] * TW[3, e] + Wt[is_ + d, 4] * TW[4, e] + Wt[is_ + d, 5] * TW[5, e])
            out[d, e] = s
            out[e, d] = s


@njit(cache=True, inline="always")
def _coupling(Wt, isj, MJ, isp, MP, Kp, E, r, M1, z, out):
    """out[:MJ, :MP] = -W_j^T Kp X*_j W_prev  (= -W_j^T X_j Phi_prev W_prev with Kp = X Phi_prev X^T)."""
    for e in range(MJ):
        for k in range(6):
            M1[e, k] = (Wt[isj + e, 0] * Kp[0, k] + Wt[isj + e, 1] * Kp[1, k] + Wt[isj + e, 2] * Kp[2, k]
                        + Wt[isj + e, 3] * Kp[3, k] + Wt[isj + e, 4] * Kp[4, k] + Wt[isj + e, 5] * Kp[5, k])
    for d in range(MP):
        _xform_force(E, r, Wt[isp + d], z)
        for e in range(MJ):
            out[e, d] = -(M1[e, 0] * z[0] + M1[e, 1] * z[1] + M1[e, 2] * z[2]
                          + M1[e, 3] * z[3] + M1[e, 4] * z[4] + M1[e, 5] * z[5])


@njit(cache=True, inline="always")
def _body_phi(j, is_tip_node, mass, com, I_com, IA, J, Phi, T):
    """Phi_j into Phi (and J_j into J for a rigid body).  Returns an error kind or ERR_NONE."""
    if is_tip_node:
        if not spd_inverse(IA[j], 6, Phi):
            return ERR_SINGULAR_IA
        return ERR_NONE
    if not mass[j] > 0.0:
        return ERR_MASSLESS
    if not _inv3_sym(I_com[j], J):
        return ERR_SINGULAR_INERTIA
    _phi_body(mass[j], com[j], J, Phi)
    return ERR_NONE


@njit(cache=True, inline="always")
def _eliminate(A, Cup, Y2, rr, j, jd, has_d, M, MU, MD):
    """Phase 1 for the eliminated joint j (upper neighbour's size MU, lower neighbour jd's MD):
    L = chol(A_jj) in place, Y1 = L^-1 A_{j,up} in Cup[j], Y2 = L^-1 A_{j,down}, y = L^-1 r_j."""
    Aj = A[j]
    if not cholesky(Aj, M):
        return False
    lsolve_cols(Aj, M, Cup[j], MU)
    if has_d:
        Yj = Y2[j]
        Cd = Cup[jd]
        for d in range(M):
            for e in range(MD):
                Yj[d, e] = Cd[e, d]
        lsolve_cols(Aj, M, Yj, MD)
    lsolve_vec(Aj, M, rr[j])
    return True


@njit(cache=True, inline="always")
def _survive(A, Cup, Y2, rr, j, jd, ju, has_d, has_u, M, MD, MU, MUU):
    """Phase 2 for the surviving joint j: its eliminated neighbours below (jd: Y1 in Cup[jd]) and
    above (ju: Y2[ju]) are folded in (seed eq. 40): A_jj -= Y^T Y, r_j -= Y^T y, and the new
    coupling to the survivor two strides up, Cup[j] = -Y2_ju^T Y1_ju."""
    Aj = A[j]
    if has_d:
        Yd = Cup[jd]
        for d in range(M):
            for e in range(d, M):
                t = 0.0
                for w in range(MD):
                    t += Yd[w, d] * Yd[w, e]
                Aj[d, e] -= t
            t = 0.0
            for w in range(MD):
                t += Yd[w, d] * rr[jd, w]
            rr[j, d] -= t
    if has_u:
        Yu = Y2[ju]
        Y1u = Cup[ju]
        Cj = Cup[j]
        for d in range(M):
            for e in range(d, M):
                t = 0.0
                for w in range(MU):
                    t += Yu[w, d] * Yu[w, e]
                Aj[d, e] -= t
            t = 0.0
            for w in range(MU):
                t += Yu[w, d] * rr[ju, w]
            rr[j, d] -= t
            for e in range(MUU):
                t = 0.0
                for w in range(MU):
                    t += Yu[w, d] * Y1u[w, e]
                Cj[d, e] = -t
    if has_d or has_u:
        for d in range(M):
            for e in range(d + 1, M):
                Aj[e, d] = Aj[d, e]


@njit(cache=True, inline="always")
def _back_one(A, Cup, Y2, rr, FS, je, has_d, isu, isd, ise, x, ME, MU, MD):
    """Back-substitution of one eliminated joint: x_e = L^-T (y - Y1 x_up - Y2 x_down)."""
    for d in range(ME):
        t = rr[je, d]
        for w in range(MU):
            t -= Cup[je, d, w] * FS[isu + w]
        x[d] = t
    if has_d:
        for d in range(ME):
            t = 0.0
            for w in range(MD):
                t += Y2[je, d, w] * FS[isd + w]
            x[d] -= t
    for i in range(ME - 1, -1, -1):
        t = x[i]
        for q in range(i + 1, ME):
            t -= A[je, q, i] * x[q]
        x[i] = t * A[je, i, i]
    for d in range(ME):
        FS[ise + d] = x[d]


@njit(cache=True, inline="always")
def _wrench_one(S, FT, Wt, FS, iv, NV, is_, M, Fj):
    """F_j = S F_T + W F_S."""
    for k in range(6):
        t = 0.0
        for d in range(NV):
            t += S[iv + d, k] * FT[iv + d]
        for d in range(M):
            t += Wt[is_ + d, k] * FS[is_ + d]
        Fj[k] = t


@njit(cache=True)
def _eliminate_rt(A, Cup, Y2, rr, j, jd, has_d, M, MU, MD):
    return _eliminate(A, Cup, Y2, rr, j, jd, has_d, M, MU, MD)


@njit(cache=True)
def _survive_rt(A, Cup, Y2, rr, j, jd, ju, has_d, has_u, M, MD, MU, MUU):
    _survive(A, Cup, Y2, rr, j, jd, ju, has_d, has_u, M, MD, MU, MUU)


@njit(cache=True)
def _back_one_rt(A, Cup, Y2, rr, FS, je, has_d, isu, isd, ise, x, ME, MU, MD):
    _back_one(A, Cup, Y2, rr, FS, je, has_d, isu, isd, ise, x, ME, MU, MD)


@njit(cache=True)
def _proj_coupling_rt(Wt, isj, MJ, isp, MP, T, Kp, E, r, TW, M1, z, Aj, Cj):
    """A_jj = W_j^T T W_j and the parent coupling, with the all-5 case unrolled."""
    if MJ == 5 and MP == 5:
        _proj_sym(Wt, isj, 5, T, TW, Aj)
        _coupling(Wt, isj, 5, isp, 5, Kp, E, r, M1, z, Cj)
    else:
        _proj_sym(Wt, isj, MJ, T, TW, Aj)
        _coupling(Wt, isj, MJ, isp, MP, Kp, E, r, M1, z, Cj)


@njit(cache=True)
def _proj_rt(Wt, isj, MJ, T, TW, Aj):
    """A_jj = W_j^T T W_j (a chain's top joint)."""
    _proj_sym(Wt, isj, MJ, T, TW, Aj)


@njit(cache=True)
def _setup_chain(b0, L, cidx, idx_v, idx_s, ms, mass, com, I_com, E, r, c, p, IA, S, Wt, FT, tip_node,
                 A, Cup, rr, M6, V6, M3, err):
    """Stage 1 for one chain (bodies cidx[b0:b0+L], base to tip): its block-tridiagonal system.
    Diagonal blocks A_jj = W_j^T (Phi_j + X_j Phi_prev X_j^T) W_j (the top joint without the
    parent's term), parent couplings Cup_j = -W_j^T X_j Phi_prev W_prev, right-hand sides
    r_j = -W_j^T (a0_j - X_j a0_prev - c_j) with a0 the accelerations at F_S = 0 (seed eqs. 29-32).
    Scratch: M6 (>= 5, 6, 6), V6 (>= 6, 6), M3 (3, 3, 3).  Returns -1 or the offending body."""
    Phi = M6[0]
    Kp = M6[1]
    T = M6[2]
    TW = M6[3]
    M1 = M6[4]
    g = V6[0]
    a0c = V6[1]
    a0p = V6[2]
    tmp = V6[3]
    tmp2 = V6[4]
    w6 = V6[5]
    J = M3[0]
    Jp = M3[1]
    Jt = M3[2]
    for k in range(L):
        j = cidx[b0 + k]
        iv = idx_v[j]
        mj = ms[j]
        nv = 6 - mj
        isj = idx_s[j]
        e = _body_phi(j, (k == L - 1) and tip_node[j], mass, com, I_com, IA, J, Phi, T)
        if e != ERR_NONE:
            err[0] = e
            return j
        # g = S F_T - p - X_next^T S_next F_T,next ; a0 = Phi g
        for kk in range(6):
            s = -p[j, kk]
            for d in range(nv):
                s += S[iv + d, kk] * FT[iv + d]
            g[kk] = s
        if k < L - 1:
            jn = cidx[b0 + k + 1]
            ivn = idx_v[jn]
            for kk in range(6):
                s = 0.0
                for d in range(6 - ms[jn]):
                    s -= S[ivn + d, kk] * FT[ivn + d]
                tmp[kk] = s
            xform_force_T_add(E[jn], r[jn], tmp, g)
        _mat6_vec(Phi, g, a0c)
        for kk in range(6):
            tmp[kk] = c[j, kk] - a0c[kk]
        if k > 0:
            xform_motion(E[j], r[j], a0p, tmp2)
            for kk in range(6):
                tmp[kk] += tmp2[kk]
        _rows_dot(Wt, isj, mj, tmp, rr[j])
        if k > 0:
            jp = cidx[b0 + k - 1]
            _phi_moved(E[j], r[j], mass[jp], com[jp], Jp, Jt, Kp)
            for kk in range(6):
                for ll in range(6):
                    T[kk, ll] = Phi[kk, ll] + Kp[kk, ll]
            _proj_coupling_rt(Wt, isj, mj, idx_s[jp], ms[jp], T, Kp, E[j], r[j], TW, M1, w6, A[j], Cup[j])
        else:
            _proj_rt(Wt, isj, mj, Phi, TW, A[j])
        for kk in range(6):
            a0p[kk] = a0c[kk]
        for kk in range(3):
            for ll in range(3):
                Jp[kk, ll] = J[kk, ll]
    return -1


@njit(cache=True)
def _reduce_group(g0, g1, corder, cptr, cidx, ms, woodbury, A, Cup, Y2, rr, levels, err):
    """Stage 2: odd-even (cyclic) reduction of every chain of the group corder[g0:g1] (seed eqs.
    39-40).  Level by level, each level one batch over all the group's chains: phase 1 factors
    the eliminated joints k = s, 3s, 5s, ... (independent), phase 2 updates the survivors
    k = 0, 2s, 4s, ... (independent).  levels[ell] += number eliminated at level ell + 1.
    Returns -1 or the offending body."""
    s = 1
    lev = 0
    while True:
        any_chain = False
        for gi in range(g0, g1):
            ch = corder[gi]
            b0 = cptr[ch]
            L = cptr[ch + 1] - b0
            if (L == 1 and woodbury) or s >= L:
                continue
            any_chain = True
            cnt = 0
            for k in range(s, L, 2 * s):
                j = cidx[b0 + k]
                has_d = k + s < L
                jd = cidx[b0 + k + s] if has_d else j
                me = ms[j]
                mu = ms[cidx[b0 + k - s]]
                md = ms[jd]
                if me == 5 and mu == 5 and md == 5:
                    ok = _eliminate(A, Cup, Y2, rr, j, jd, has_d, 5, 5, 5)
                else:
                    ok = _eliminate_rt(A, Cup, Y2, rr, j, jd, has_d, me, mu, md)
                if not ok:
                    err[0] = ERR_SINGULAR_A
                    return j
                cnt += 1
            levels[lev] += cnt
        if not any_chain:
            return -1
        for gi in range(g0, g1):
            ch = corder[gi]
            b0 = cptr[ch]
            L = cptr[ch + 1] - b0
            if (L == 1 and woodbury) or s >= L:
                continue
            for k in range(0, L, 2 * s):
                j = cidx[b0 + k]
                has_d = k + s < L
                has_u = k >= s
                jd = cidx[b0 + k + s] if has_d else j
                ju = cidx[b0 + k - s] if has_u else j
                juu = cidx[b0 + k - 2 * s] if has_u else j
                mj = ms[j]
                md = ms[jd]
                mu = ms[ju]
                muu = ms[juu]
                if mj == 5 and md == 5 and mu == 5 and muu == 5:
                    _survive(A, Cup, Y2, rr, j, jd, ju, has_d, has_u, 5, 5, 5, 5)
                else:
                    _survive_rt(A, Cup, Y2, rr, j, jd, ju, has_d, has_u, mj, md, mu, muu)
        s *= 2
        lev += 1


@njit(cache=True)
def _collapse_chain(j, parent, idx_v, idx_s, ms, E, r, p, IA, S, Wt, FT, A, rr, XW, Ia, T, x, pa):
    """Stage 3: factor the chain's reduced top block A^ (in A[j]) and collapse the chain onto its
    parent body l: IA_l += X^T W A^-1 W^T X, pA_l += X^T (S F_T + W A^-1 r^).  False if A^ is
    singular."""
    iv = idx_v[j]
    mj = ms[j]
    nv = 6 - mj
    isj = idx_s[j]
    if not cholesky(A[j], mj):
        return False
    pj = parent[j]
    if pj < 0:
        return True
    # G = L^-1 W^T (mj x 6) in XW; W A^-1 W^T = G^T G; W A^-1 r^ = G^T L^-1 r^
    for d in range(mj):
        for kk in range(6):
            XW[d, kk] = Wt[isj + d, kk]
    lsolve_cols(A[j], mj, XW, 6)
    for kk in range(6):
        x[kk] = rr[j, kk] if kk < mj else 0.0
    lsolve_vec(A[j], mj, x)
    for kk in range(6):
        s2 = 0.0
        for d in range(nv):
            s2 += S[iv + d, kk] * FT[iv + d]
        for d in range(mj):
            s2 += XW[d, kk] * x[d]
        pa[kk] = s2
        for ll in range(kk, 6):
            t = 0.0
            for d in range(mj):
                t += XW[d, kk] * XW[d, ll]
            Ia[kk, ll] = t
            Ia[ll, kk] = t
    congruence_add(E[j], r[j], Ia, IA[pj], T)
    xform_force_T_add(E[j], r[j], pa, p[pj])
    return True


@njit(cache=True)
def _forward_chain(b0, L, cidx, parent, idx_v, idx_s, ms, mass, com, I_com, a0, E, r, c, p, IA, S, Wt, FT,
                   tip_node, A, Cup, Y2, rr, FS, F, a, qdd, M6, V6, M3):
    """Stage 4 for one chain whose parent body's acceleration is known: the top joint's reduced
    equation A^ F_S = r^ + W^T X a_parent, back-substitution of the levels (last first), the
    joint wrenches F = S F_T + W F_S, then the accelerations along the chain."""
    T = M6[0]
    Phi = M6[2]
    D = M6[3]
    Ia = M6[4]
    g = V6[0]
    tmp = V6[1]
    tmp2 = V6[2]
    pa = V6[3]
    x = V6[4]
    J = M3[0]
    j = cidx[b0]
    pj = parent[j]
    mj = ms[j]
    isj = idx_s[j]
    if pj < 0:
        xform_motion(E[j], r[j], a0, tmp)
    else:
        xform_motion(E[j], r[j], a[pj], tmp)
    _rows_dot(Wt, isj, mj, tmp, x)
    for d in range(mj):
        x[d] += rr[j, d]
    lsolve_vec(A[j], mj, x)
    ltsolve_vec(A[j], mj, x)
    for d in range(mj):
        FS[isj + d] = x[d]
    # back-substitution, last level first: x_e = L^-T (y - Y1 x_up - Y2 x_down)
    nlev = 0
    while (1 << nlev) < L:
        nlev += 1
    for lv in range(nlev - 1, -1, -1):
        s = 1 << lv
        for k in range(s, L, 2 * s):
            je = cidx[b0 + k]
            ju = cidx[b0 + k - s]
            has_d = k + s < L
            jd = cidx[b0 + k + s] if has_d else je
            me = ms[je]
            mu = ms[ju]
            md = ms[jd]
            if me == 5 and mu == 5 and md == 5:
                _back_one(A, Cup, Y2, rr, FS, je, has_d, idx_s[ju], idx_s[jd], idx_s[je], x, 5, 5, 5)
            else:
                _back_one_rt(A, Cup, Y2, rr, FS, je, has_d, idx_s[ju], idx_s[jd], idx_s[je], x, me, mu, md)
    # joint wrenches F = S F_T + W F_S
    for k in range(L):
        jj = cidx[b0 + k]
        mjj = ms[jj]
        if mjj == 5:
            _wrench_one(S, FT, Wt, FS, idx_v[jj], 1, idx_s[jj], 5, F[jj])
        else:
            _wrench_one(S, FT, Wt, FS, idx_v[jj], 6 - mjj, idx_s[jj], mjj, F[jj])
    # accelerations: a' = Phi_j (F_j - X_next^T F_next - p_j) from the body equation (IA^-1 and pA
    # for a node tip, whose children chains are folded in); qdd = S^+ (a' - X a_parent - c) and
    # a_j = X a_parent + c + S qdd (kinematically consistent: errors are projected, not amplified,
    # along the chain; an inertia-weighted projection of the body equation instead is unstable on
    # long chains)
    for k in range(L):
        jj = cidx[b0 + k]
        ivj = idx_v[jj]
        nvj = 6 - ms[jj]
        if k > 0:
            xform_motion(E[jj], r[jj], a[parent[jj]], tmp)
        for kk in range(6):
            tmp[kk] += c[jj, kk]            # tmp = X a_parent + c
            g[kk] = F[jj, kk] - p[jj, kk]
        if k < L - 1:
            jn = cidx[b0 + k + 1]
            for kk in range(6):
                tmp2[kk] = -F[jn, kk]
            xform_force_T_add(E[jn], r[jn], tmp2, g)
        if (k == L - 1) and tip_node[jj]:
            for kk in range(6):
                for ll in range(6):
                    T[kk, ll] = IA[jj, kk, ll]
            cholesky(T, 6)
            for kk in range(6):
                tmp2[kk] = g[kk]
            lsolve_vec(T, 6, tmp2)
            ltsolve_vec(T, 6, tmp2)
        else:
            _inv3_sym(I_com[jj], J)
            _phi_body(mass[jj], com[jj], J, Phi)
            _mat6_vec(Phi, g, tmp2)
        for kk in range(6):
            tmp2[kk] -= tmp[kk]             # a' - X a_parent - c
        if nvj == 1:
            t = 0.0
            gg = 0.0
            for kk in range(6):
                t += S[ivj, kk] * tmp2[kk]
                gg += S[ivj, kk] * S[ivj, kk]
            qdd[ivj] = t / gg
        elif nvj > 1:
            for d in range(nvj):
                t = 0.0
                for kk in range(6):
                    t += S[ivj + d, kk] * tmp2[kk]
                pa[d] = t
                for e2 in range(nvj):
                    t = 0.0
                    for kk in range(6):
                        t += S[ivj + d, kk] * S[ivj + e2, kk]
                    D[d, e2] = t
            spd_inverse(D, nvj, Ia)
            for d in range(nvj):
                t = 0.0
                for e2 in range(nvj):
                    t += Ia[d, e2] * pa[e2]
                qdd[ivj + d] = t
        for kk in range(6):
            t = tmp[kk]
            for d in range(nvj):
                t += S[ivj + d, kk] * qdd[ivj + d]
            a[jj, kk] = t


@njit(cache=True)
def oddeven_kernel(parent, idx_v, idx_s, ms, mass, com, I_com, a0, E, r, c, p, IA, S, Wt, FT,
                   cptr, cidx, corder, gptr, tip_node, woodbury,
                   A, Cup, Y2, rr, U, Dinv, u, FS, F, a, qdd, levels, err):
    """Odd-even constraint force algorithm over chains (see the module docstring).

    ms[j] = 6 - nv_j (constraint count); Wt: constraint rows (``setup_kernel``).
    cptr/cidx: chains (CSR, base to tip); corder: chains ordered by height in the tree of chains,
    gptr: the height groups (corder[gptr[h]:gptr[h+1]] have height h); tip_node[j]: body j is a
    node (its children chains collapse into IA[j], p[j]); woodbury: one-body chains in inertia form.
    Workspace: A, Cup, Y2 (n,6,6), rr (n,6), U, Dinv (nv,6), u (nv).  Output: FS (ns), F (n,6)
    joint wrenches, a (n,6) body accelerations, qdd (nv), levels[ell] += joints eliminated at
    level ell+1.  Returns -1, or the offending body (err[0] says why)."""
    ng = gptr.shape[0] - 1
    M6 = np.empty((8, 6, 6))
    V6 = np.empty((8, 6))
    M3 = np.empty((3, 3, 3))
    # ================================================================ backward: tips first
    for h in range(ng):
        g0 = gptr[h]
        g1 = gptr[h + 1]
        # 1. every chain's block-tridiagonal system (one-body chains: ABA's step, Woodbury)
        if woodbury:
            bad = woodbury_backward_group(g0, g1, corder, cptr, cidx, parent, idx_v, ms, E, r, c, p, IA, S, FT, U,
                                           Dinv, u, err)
            if bad >= 0:
                return bad
        for gi in range(g0, g1):
            ch = corder[gi]
            b0 = cptr[ch]
            L = cptr[ch + 1] - b0
            if L == 1 and woodbury:
                continue
            bad = _setup_chain(b0, L, cidx, idx_v, idx_s, ms, mass, com, I_com, E, r, c, p, IA, S, Wt, FT,
                               tip_node, A, Cup, rr, M6, V6, M3, err)
            if bad >= 0:
                return bad
        # 2. odd-even reduction, level by level over the whole group
        bad = _reduce_group(g0, g1, corder, cptr, cidx, ms, woodbury, A, Cup, Y2, rr, levels, err)
        if bad >= 0:
            return bad
        # 3. collapse every chain onto its parent body
        for gi in range(g0, g1):
            ch = corder[gi]
            b0 = cptr[ch]
            if cptr[ch + 1] - b0 == 1 and woodbury:
                continue
            j = cidx[b0]
            if not _collapse_chain(j, parent, idx_v, idx_s, ms, E, r, p, IA, S, Wt, FT, A, rr, M6[0], M6[1],
                                   M6[2], V6[0], V6[1]):
                err[0] = ERR_SINGULAR_A
                return j
    # ================================================================ forward: base first
    for h in range(ng - 1, -1, -1):
        if woodbury:
            woodbury_forward_group(gptr[h], gptr[h + 1], corder, cptr, cidx, parent, a0, idx_v, idx_s, ms, E, r, c,
                                    p, IA, S, Wt, U, Dinv, u, FS, F, a, qdd)
        for gi in range(gptr[h], gptr[h + 1]):
            ch = corder[gi]
            b0 = cptr[ch]
            L = cptr[ch + 1] - b0
            if L == 1 and woodbury:
                continue
            _forward_chain(b0, L, cidx, parent, idx_v, idx_s, ms, mass, com, I_com, a0, E, r, c, p, IA, S, Wt, FT,
                           tip_node, A, Cup, Y2, rr, FS, F, a, qdd, M6, V6, M3)
    return -1


def cfa_oddeven_compliance(model, q, qd, tau, F_ext, has_f, woodbury):
    check_invertible(model, "odd-even-compliance")
    topo, ws = workspace(model)
    setup(model, ws, topo, q, qd, tau, F_ext, has_f, topo.need_IA if woodbury else topo.need_IA_fs)
    FS = np.empty(topo.ns)
    F = np.empty((model.n, 6))
    qdd = np.empty(model.nv)
    levels = np.zeros(64, dtype=np.int64)
    ws.err[0] = 0
    bad = oddeven_kernel(model.parent, model.idx_v, topo.idx_s, topo.ns_j, model.mass, model.com, model.I_com,
                         base_acceleration(model), ws.E, ws.r, ws.c, ws.p, ws.IA, ws.S, ws.Wt, ws.FT,
                         topo.cptr, topo.cidx, topo.corder, topo.gptr, topo.tip_node, bool(woodbury),
                         ws.A, ws.Cup, ws.Y2, ws.rr, ws.U, ws.Dinv, ws.u, FS, F, ws.a, qdd, levels, ws.err)
    if bad >= 0:
        raise_error(model, bad, int(ws.err[0]), "odd-even-compliance")
    return CFAResult(model, "odd-even-compliance", qdd, FS, ws.FT.copy(), F, q.copy(), topo.idx_s, topo.ns_j,
                     trim_levels(levels))
