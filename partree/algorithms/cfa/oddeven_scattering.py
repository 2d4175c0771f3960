"""Compiled kernels of the odd-even constraint force algorithm in scattering (Redheffer) form.

This is the default chain reduction of ``cfa(..., method='odd-even')``; the seed's compliance
form (:mod:`partree.algorithms.cfa.oddeven_compliance`) stays available as ``method='odd-even-compliance'``.

Segments
--------
A segment is a run of consecutive bodies j..k of one chain, each with its inner joint.  Its
inputs are a_in, the acceleration of the body it hangs from (in that body's frame), and f_out,
the wrench its last body transmits outwards across the next joint (in the last body's frame;
zero for the segment that holds the chain's tip).  Its outputs are f_in, the wrench its first
joint transmits (in the frame of a_in), and a_out, the acceleration of its last body:

    f_in  = K a_in + T f_out + c
    a_out = T^T a_in - Phi f_out + d

K (6x6 symmetric PSD) is the articulated inertia of the segment seen through its first joint,
Phi (6x6 symmetric PSD) the compliance of its last body with the segment hanging from a fixed
a_in, T the transfer map.  For one body j with joint j (X = X_j, S = S_j, I its spatial inertia,
b = v x* I v - f_ext its bias force, c_j its velocity-product acceleration, U = I S,
D = S^T I S, u = tau - S^T (I c_j + b)):

    qdd = D^-1 (u - U^T X a_in - S^T f_out)
    K = X^T (I - U D^-1 U^T) X,   T = X^T (1 - U D^-1 S^T),   Phi = S D^-1 S^T,
    d = c_j + S D^-1 u,           c = X^T (I d + b).

Two neighbouring segments S1 (outer end at the joint "mid") and S2 compose (Redheffer star
product) with M = (1 + K2 Phi1)^-1 -- the eigenvalues of K2 Phi1, a product of two PSD matrices,
are real and >= 0, so 1 + K2 Phi1 is always invertible, and its pivots stay well scaled however
long the segments are (the compliance form's pivots W^T P^T I^-1 P W W do not):

    f_mid = M (K2 T1^T a_in + T2 f_out + K2 d1 + c2),   a_mid = T1^T a_in - Phi1 f_mid + d1
    K = K1 + T1 M K2 T1^T,   T = T1 M T2,   Phi = Phi2 + T2^T Phi1 M T2,
    c = c1 + T1 M (K2 d1 + c2),   d = d2 + T2^T (d1 - Phi1 M (K2 d1 + c2)).

(M K2 and Phi1 M are symmetric.)  The kernel forms B = 1 + K2 Phi1, factors it by LU with
partial pivoting, and keeps what the back-substitution needs, P = M K2 T1^T, R = M T2,
e = M (K2 d1 + c2) and the left segment's T1, Phi1, d1.  When S1 is a single 1-DOF body,
Phi1 = s s^T / D1 has rank one and M = 1 - K2 s s^T / (D1 + s^T K2 s) (Sherman-Morrison): the
first level never factors a 6x6 matrix.

Odd-even reduction
------------------
Chains are processed tips first, grouped by their height in the tree of chains, as in the
compliance kernel.  Within a chain of L bodies, level 1 builds every body's segment and composes
the pairs (k-1, k), k = 1, 3, 5, ...; level ell composes the segments at stride s = 2^(ell-1)
(k = s, 3s, 5s, ... joins [k-s, k) and [k, k+s)): ceil(log2 L) levels, each a batch of
independent compositions over all chains of the group, the work halving from level to level.
The chain's whole segment acts on the body l it hangs from as an articulated body:
IA_l += K, pA_l += c (f_out = 0).  A chain whose tip body is a node uses that body's articulated
inertia and bias (the chains hanging from it are already folded in).

The serial kernel walks levels 1 .. log2(BLOCK) block by block (BLOCK = 64 consecutive bodies stay
in cache), then the higher levels across the group: the same compositions, so the same results
and level counts, as a level-by-level sweep.

Forward (base first), every split is back-substituted top-down: f_mid = P a_in + R f_out + e and
a_mid = T1^T a_in - Phi1 f_mid + d1 with the a_in and f_out of the segment being split.  The last
level is fused with the per-body step: with a_parent and f_out known,
qdd = D^-1 (u - U^T (X a_parent + c_j) - S^T f_out), a_j = X a_parent + c_j + S qdd and the joint
wrench F_j = I a_j + b + f_out (in body j's frame), F_S = W^T F_j.

Accuracy: the scattering form is backward stable (only inertias, compliances and the
well-conditioned M are ever formed; no inverse of a body inertia or of a constraint-space block).
Its wrenches agree with ABA + RNEA to the digits ABA itself carries, also on long planar chains
where the compliance form's solved constraint forces lose digits.  No body's I^-1 is needed;
every chain body needs D_j = S_j^T I_j S_j > 0 (a massless body inside a chain is rejected).

Block loops have literal sizes (6) and the 1-DOF case (revolute, prismatic) is written out; other
joints take a run-time-size path.  No allocation inside the loops.

Cost: the 6x6 compositions of levels >= 2 (one LU and ~1800 multiply-adds each) dominate on long
chains; binary trees are one-body chains, which take ABA's step, as in the compliance form
(docs/performance.md has the measured figures).
"""
import numpy as np
from numba import njit

from ..linalg import spd_inverse
from ..primitives import congruence_add, inertia_from_compact, inertia_times, xform_force_T_add, xform_motion
from .result import CFAResult
from .common import (ERR_MASSLESS, ERR_SINGULAR_A, ERR_SINGULAR_IA, base_acceleration, raise_error, setup,
                     trim_levels, woodbury_backward_group, woodbury_forward_group, workspace)

#: floating-point contraction (a*b + c as one fused multiply-add, which rounds once) and
#: reassociation of the short sums; no finite-math assumption, so NaN checks keep working
_FM = {"contract", "reassoc"}

#: the serial kernel walks levels 1 .. log2(BLOCK) block by block (BLOCK consecutive bodies of a
#: chain stay in cache), then the higher levels across the chain; the compositions, and so the
#: results, are the same as level by level over the whole chain
BLOCK = 64


@njit(cache=True, fastmath=_FM, inline="always")
def _xt_matrix(E, r, XT):
    """XT = X^T = [[E^T, rx E^T], [0, E^T]] for the motion transform X = (E, r)."""
    r0, r1, r2 = r[0], r[1], r[2]
    for i in range(3):
        for j in range(3):
            XT[i, j] = E[j, i]
            XT[3 + i, 3 + j] = E[j, i]
            XT[3 + i, j] = 0.0
        # column j of rx E^T = r x (row j of E)
    for j in range(3):
        e0, e1, e2 = E[j, 0], E[j, 1], E[j, 2]
        XT[0, 3 + j] = r1 * e2 - r2 * e1
        XT[1, 3 + j] = r2 * e0 - r0 * e2
        XT[2, 3 + j] = r0 * e1 - r1 * e0


@njit(cache=True, fastmath=_FM, inline="always")
def _lu6(B, piv):
    """In-place LU factorisation with partial pivoting of the 6x6 B (unit lower L below the
    diagonal, U on and above it with the *reciprocal* diagonal stored).  False if singular."""
    for k in range(6):
        p = k
        big = abs(B[k, k])
        for i in range(k + 1, 6):
            t = abs(B[i, k])
            if t > big:
                big = t
                p = i
        piv[k] = p
        if not big > 0.0:
            return False
        if p != k:
            for j in range(6):
                t = B[k, j]
                B[k, j] = B[p, j]
                B[p, j] = t
        inv = 1.0 / B[k, k]
        B[k, k] = inv
        for i in range(k + 1, 6):
            f = B[i, k] * inv
            B[i, k] = f
            for j in range(k + 1, 6):
                B[i, j] -= f * B[k, j]
    return True


@njit(cache=True, fastmath=_FM, inline="always")
def _lu6_solve_vec(B, piv, x):
    """x := B^-1 x with the factors of ``_lu6``."""
    for k in range(6):
        p = piv[k]
        if p != k:
            t = x[k]
            x[k] = x[p]
            x[p] = t
    for i in range(1, 6):
        s = x[i]
        for k in range(i):
            s -= B[i, k] * x[k]
        x[i] = s
    for i in range(5, -1, -1):
        s = x[i]
        for k in range(i + 1, 6):
            s -= B[i, k] * x[k]
        x[i] = s * B[i, i]


@njit(cache=True, fastmath=_FM, inline="always")
def _lu6_solve_mat(B, piv, Y, X):
    """X := B^-1 Y (6x6; X may be Y)."""
    for j in range(6):
        for i in range(6):
            X[i, j] = Y[i, j]
    for k in range(6):
        p = piv[k]
        if p != k:
            for j in range(6):
                t = X[k, j]
                X[k, j] = X[p, j]
                X[p, j] = t
    for i in range(1, 6):
        for k in range(i):
            f = B[i, k]
            for j in range(6):
                X[i, j] -= f * X[k, j]
    for i in range(5, -1, -1):
        for k in range(i + 1, 6):
            f = B[i, k]
            for j in range(6):
                X[i, j] -= f * X[k, j]
        f = B[i, i]
        for j in range(6):
            X[i, j] *= f


@njit(cache=True, fastmath=_FM, inline="always")
def _copy6(A, B):
    for i in range(6):
        for j in range(6):
            B[i, j] = A[i, j]


@njit(cache=True, fastmath=_FM, inline="always")
def _mm_ab(A, B, C):
    """C = A B."""
    for k in range(6):
        a0, a1, a2, a3, a4, a5 = A[k, 0], A[k, 1], A[k, 2], A[k, 3], A[k, 4], A[k, 5]
        for l in range(6):
            C[k, l] = a0 * B[0, l] + a1 * B[1, l] + a2 * B[2, l] + a3 * B[3, l] + a4 * B[4, l] + a5 * B[5, l]


@njit(cache=True, fastmath=_FM, inline="always")
def _mm_abt(A, B, C):
    """C = A B^T."""
    for k in range(6):
        a0, a1, a2, a3, a4, a5 = A[k, 0], A[k, 1], A[k, 2], A[k, 3], A[k, 4], A[k, 5]
        for l in range(6):
            C[k, l] = a0 * B[l, 0] + a1 * B[l, 1] + a2 * B[l, 2] + a3 * B[l, 3] + a4 * B[l, 4] + a5 * B[l, 5]


@njit(cache=True, fastmath=_FM, inline="always")
def _sym_add_ab(K, A, B, out):
    """out = K + A B for a product known to be symmetric (upper triangle computed, mirrored);
    out may be K."""
    for k in range(6):
        a0, a1, a2, a3, a4, a5 = A[k, 0], A[k, 1], A[k, 2], A[k, 3], A[k, 4], A[k, 5]
        for l in range(k, 6):
            out[k, l] = K[k, l] + (a0 * B[0, l] + a1 * B[1, l] + a2 * B[2, l] + a3 * B[3, l] + a4 * B[4, l]
                                   + a5 * B[5, l])
    for k in range(6):
        for l in range(k + 1, 6):
            out[l, k] = out[k, l]


@njit(cache=True, fastmath=_FM, inline="always")
def _sym_add_atb(K, A, B, out):
    """out = K + A^T B for a product known to be symmetric; out may be K."""
    for k in range(6):
        a0, a1, a2, a3, a4, a5 = A[0, k], A[1, k], A[2, k], A[3, k], A[4, k], A[5, k]
        for l in range(k, 6):
            out[k, l] = K[k, l] + (a0 * B[0, l] + a1 * B[1, l] + a2 * B[2, l] + a3 * B[3, l] + a4 * B[4, l]
                                   + a5 * B[5, l])
    for k in range(6):
        for l in range(k + 1, 6):
            out[l, k] = out[k, l]


@njit(cache=True, fastmath=_FM, inline="always")
def _mv6(M, v):
    """M v as a tuple (v a 6-tuple or array)."""
    return ((M[0, 0] * v[0] + M[0, 1] * v[1] + M[0, 2] * v[2] + M[0, 3] * v[3] + M[0, 4] * v[4] + M[0, 5] * v[5]),
            (M[1, 0] * v[0] + M[1, 1] * v[1] + M[1, 2] * v[2] + M[1, 3] * v[3] + M[1, 4] * v[4] + M[1, 5] * v[5]),
            (M[2, 0] * v[0] + M[2, 1] * v[1] + M[2, 2] * v[2] + M[2, 3] * v[3] + M[2, 4] * v[4] + M[2, 5] * v[5]),
            (M[3, 0] * v[0] + M[3, 1] * v[1] + M[3, 2] * v[2] + M[3, 3] * v[3] + M[3, 4] * v[4] + M[3, 5] * v[5]),
            (M[4, 0] * v[0] + M[4, 1] * v[1] + M[4, 2] * v[2] + M[4, 3] * v[3] + M[4, 4] * v[4] + M[4, 5] * v[5]),
            (M[5, 0] * v[0] + M[5, 1] * v[1] + M[5, 2] * v[2] + M[5, 3] * v[3] + M[5, 4] * v[4] + M[5, 5] * v[5]))


@njit(cache=True, fastmath=_FM, inline="always")
def _xft(E, r, f):
    """X^T f as a tuple (a force in the child's coordinates moved to the parent's)."""
    n0 = E[0, 0] * f[0] + E[1, 0] * f[1] + E[2, 0] * f[2]
    n1 = E[0, 1] * f[0] + E[1, 1] * f[1] + E[2, 1] * f[2]
    n2 = E[0, 2] * f[0] + E[1, 2] * f[1] + E[2, 2] * f[2]
    g0 = E[0, 0] * f[3] + E[1, 0] * f[4] + E[2, 0] * f[5]
    g1 = E[0, 1] * f[3] + E[1, 1] * f[4] + E[2, 1] * f[5]
    g2 = E[0, 2] * f[3] + E[1, 2] * f[4] + E[2, 2] * f[5]
    return (n0 + r[1] * g2 - r[2] * g1, n1 + r[2] * g0 - r[0] * g2, n2 + r[0] * g1 - r[1] * g0, g0, g1, g2)


@njit(cache=True, fastmath=_FM, inline="always")
def _leaf1(iv, I6, E, r, cv, b, tau, S, U, Dinv, u, K, T, Phi, c, d, want_phi, Ia, scr):
    """``_leaf`` for a 1-DOF joint, with the small vectors held in registers (tuples)."""
    sv = (S[iv, 0], S[iv, 1], S[iv, 2], S[iv, 3], S[iv, 4], S[iv, 5])
    cvv = (cv[0], cv[1], cv[2], cv[3], cv[4], cv[5])
    Uv = _mv6(I6, sv)
    Ic = _mv6(I6, cvv)
    Dd = sv[0] * Uv[0] + sv[1] * Uv[1] + sv[2] * Uv[2] + sv[3] * Uv[3] + sv[4] * Uv[4] + sv[5] * Uv[5]
    if not Dd > 0.0:
        return False
    Di = 1.0 / Dd
    uu = tau[iv]
    for k in range(6):
        uu -= sv[k] * (Ic[k] + b[k])
        U[iv, k] = Uv[k]
    Dinv[iv, 0] = Di
    u[iv] = uu
    x = Di * uu
    # I d + b = I cv + b + U x ; d = cv + s x ; c = X^T (I d + b)
    wv = (Ic[0] + b[0] + Uv[0] * x, Ic[1] + b[1] + Uv[1] * x, Ic[2] + b[2] + Uv[2] * x,
          Ic[3] + b[3] + Uv[3] * x, Ic[4] + b[4] + Uv[4] * x, Ic[5] + b[5] + Uv[5] * x)
    cc = _xft(E, r, wv)
    for k in range(6):
        d[k] = cvv[k] + sv[k] * x
        c[k] = cc[k]
    # K = X^T (I - U U^T / D) X
    for k in range(6):
        t = Uv[k] * Di
        for l in range(6):
            Ia[k, l] = I6[k, l] - t * Uv[l]
            K[k, l] = 0.0
    congruence_add(E, r, Ia, K, scr)
    # T = X^T - (X^T U) (s / D)^T, X^T = [[E^T, rx E^T], [0, E^T]]
    xu = _xft(E, r, Uv)
    r0, r1, r2 = r[0], r[1], r[2]
    for i in range(3):
        t = xu[i] * Di
        t3 = xu[3 + i] * Di
        for j in range(3):
            T[i, j] = E[j, i] - t * sv[j]
            T[3 + i, j] = -t3 * sv[j]
            T[3 + i, 3 + j] = E[j, i] - t3 * sv[3 + j]
    for j in range(3):
        e0, e1, e2 = E[j, 0], E[j, 1], E[j, 2]
        T[0, 3 + j] = r1 * e2 - r2 * e1 - xu[0] * Di * sv[3 + j]
        T[1, 3 + j] = r2 * e0 - r0 * e2 - xu[1] * Di * sv[3 + j]
        T[2, 3 + j] = r0 * e1 - r1 * e0 - xu[2] * Di * sv[3 + j]
    if want_phi:
        for k in range(6):
            t = sv[k] * Di
            for l in range(6):
                Phi[k, l] = t * sv[l]
    return True


@njit(cache=True, fastmath=_FM, inline="always")
def _leaf(j, iv, nv, I6, E, r, cv, b, tau, S, U, Dinv, u, K, T, Phi, c, d, want_phi, Ia, XT, scr, Dm, Dm2, h, w,
          xu):
    """Segment (K, T, Phi, c, d) of body j (inertia I6, bias b, velocity product cv) and its
    per-DOF quantities U = I S, Dinv = (S^T I S)^-1, u = tau - S^T (I cv + b) (kept for the
    forward step).  Phi only when ``want_phi``.  False when D is not positive definite."""
    if nv == 1:
        return _leaf1(iv, I6, E, r, cv, b, tau, S, U, Dinv, u, K, T, Phi, c, d, want_phi, Ia, scr)
    return _leafn(j, iv, nv, I6, E, r, cv, b, tau, S, U, Dinv, u, K, T, Phi, c, d, want_phi, Ia, XT, scr, Dm, Dm2,
                  h, w, xu)


@njit(cache=True, fastmath=_FM)
def _leafn(j, iv, nv, I6, E, r, cv, b, tau, S, U, Dinv, u, K, T, Phi, c, d, want_phi, Ia, XT, scr, Dm, Dm2, h, w,
          xu):
    """``_leaf`` for a run-time number of DOFs (0, 2, 3, 6)."""
    # h = I cv + b
    for k in range(6):
        t = b[k]
        for l in range(6):
            t += I6[k, l] * cv[l]
        h[k] = t
    for k in range(6):
        for l in range(6):
            Ia[k, l] = I6[k, l]
    # run-time number of DOFs (0, 2, 3, 6)
    for dd in range(nv):
        for k in range(6):
            t = 0.0
            for l in range(6):
                t += I6[k, l] * S[iv + dd, l]
            U[iv + dd, k] = t
        t = tau[iv + dd]
        for k in range(6):
            t -= S[iv + dd, k] * h[k]
        u[iv + dd] = t
    for dd in range(nv):
        for e in range(nv):
            t = 0.0
            for k in range(6):
                t += S[iv + dd, k] * U[iv + e, k]
            Dm[dd, e] = t
    if nv > 0:
        if not spd_inverse(Dm, nv, Dm2):
            return False
        for dd in range(nv):
            for e in range(nv):
                Dinv[iv + dd, e] = Dm2[dd, e]
    # x = D^-1 u (in xu[:nv]); d = cv + S x, I d + b = h + U^T x
    for dd in range(nv):
        t = 0.0
        for e in range(nv):
            t += Dm2[dd, e] * u[iv + e]
        xu[dd] = t
    for k in range(6):
        t = h[k]
        t2 = cv[k]
        for dd in range(nv):
            t += U[iv + dd, k] * xu[dd]
            t2 += S[iv + dd, k] * xu[dd]
        w[k] = t
        d[k] = t2
        c[k] = 0.0
    xform_force_T_add(E, r, w, c)
    # V = D^-1 S^T (nv x 6) in Dm rows... use scr as (nv x 6) storage for V
    for dd in range(nv):
        for k in range(6):
            t = 0.0
            for e in range(nv):
                t += Dm2[dd, e] * S[iv + e, k]
            scr[dd, k] = t
    # Ia = I - U^T V'  with V' = D^-1 U^T ... = I - sum_d U_d (D^-1 U)_d
    for dd in range(nv):
        for k in range(6):
            t = 0.0
            for e in range(nv):
                t += Dm2[dd, e] * U[iv + e, k]
            Dm[dd, k] = t                       # (D^-1 U^T)^T rows
    for k in range(6):
        for l in range(6):
            t = Ia[k, l]
            for dd in range(nv):
                t -= U[iv + dd, k] * Dm[dd, l]
            Ia[k, l] = t
    # T = X^T - (X^T U) V ; Phi = S^T V
    _xt_matrix(E, r, XT)
    for k in range(6):
        for l in range(6):
            T[k, l] = XT[k, l]
            if want_phi:
                Phi[k, l] = 0.0
    for dd in range(nv):
        for k in range(6):
            xu[k] = 0.0
            w[k] = U[iv + dd, k]
        xform_force_T_add(E, r, w, xu)
        for k in range(6):
            for l in range(6):
                T[k, l] -= xu[k] * scr[dd, l]
                if want_phi:
                    Phi[k, l] += S[iv + dd, k] * scr[dd, l]
    for k in range(6):
        for l in range(6):
            K[k, l] = 0.0
    congruence_add(E, r, Ia, K, Dm)
    return True


@njit(cache=True, fastmath=_FM, inline="always")
def _compose_one(s1, Dd1, Di1, K1, T1, c1, d1, K2, T2, P2, c2, d2, Ko, To, Po, co, do, Ps, Rs, es, want_tail,
                 G, hv, y, Z, w):
    """Composition of a one-body 1-DOF segment S1 (joint axis s1, D1 = Dd1, 1/D1 = Di1) with S2
    (Sherman-Morrison).  Outputs: the composed segment (Ko, To, Po, co, do; To, Po, do only when
    ``want_tail``) and the split's P = M K2 T1^T, R = M T2, e = M (K2 d1 + c2).  Ko/co may alias
    K1/c1 (updated in place); Ps/Rs/es must not alias the inputs, To/Po/do must not alias T1/T2."""
    sv = (s1[0], s1[1], s1[2], s1[3], s1[4], s1[5])
    Gv = _mv6(K2, sv)                              # G = K2 s1
    dl = 1.0 / (Dd1 + sv[0] * Gv[0] + sv[1] * Gv[1] + sv[2] * Gv[2] + sv[3] * Gv[3] + sv[4] * Gv[4]
                + sv[5] * Gv[5])
    # Z = M K2 = K2 - dl G G^T ; P = Z T1^T ; K = K1 + T1 P (symmetric)
    for k in range(6):
        t = dl * Gv[k]
        for l in range(6):
            Z[k, l] = K2[k, l] - t * Gv[l]
    _mm_abt(Z, T1, Ps)
    _sym_add_ab(K1, T1, Ps, Ko)
    # w = K2 d1 + c2 ; e = M w = w - dl G (s1.w)
    d1v = (d1[0], d1[1], d1[2], d1[3], d1[4], d1[5])
    wv = _mv6(K2, d1v)
    sw = 0.0
    for k in range(6):
        sw += sv[k] * (wv[k] + c2[k])
    sw *= dl
    ev = (wv[0] + c2[0] - Gv[0] * sw, wv[1] + c2[1] - Gv[1] * sw, wv[2] + c2[2] - Gv[2] * sw,
          wv[3] + c2[3] - Gv[3] * sw, wv[4] + c2[4] - Gv[4] * sw, wv[5] + c2[5] - Gv[5] * sw)
    if want_tail:
        # h = T2^T s1 ; R = T2 - dl G h^T (unused when f_out = 0) ; T = T1 R ; Phi = Phi2 + dl h h^T ;
        # g = d1 - s1 Di1 (s1.e) ; d = d2 + T2^T g
        hh = (sv[0] * T2[0, 0] + sv[1] * T2[1, 0] + sv[2] * T2[2, 0] + sv[3] * T2[3, 0] + sv[4] * T2[4, 0]
              + sv[5] * T2[5, 0],
              sv[0] * T2[0, 1] + sv[1] * T2[1, 1] + sv[2] * T2[2, 1] + sv[3] * T2[3, 1] + sv[4] * T2[4, 1]
              + sv[5] * T2[5, 1],
              sv[0] * T2[0, 2] + sv[1] * T2[1, 2] + sv[2] * T2[2, 2] + sv[3] * T2[3, 2] + sv[4] * T2[4, 2]
              + sv[5] * T2[5, 2],
              sv[0] * T2[0, 3] + sv[1] * T2[1, 3] + sv[2] * T2[2, 3] + sv[3] * T2[3, 3] + sv[4] * T2[4, 3]
              + sv[5] * T2[5, 3],
              sv[0] * T2[0, 4] + sv[1] * T2[1, 4] + sv[2] * T2[2, 4] + sv[3] * T2[3, 4] + sv[4] * T2[4, 4]
              + sv[5] * T2[5, 4],
              sv[0] * T2[0, 5] + sv[1] * T2[1, 5] + sv[2] * T2[2, 5] + sv[3] * T2[3, 5] + sv[4] * T2[4, 5]
              + sv[5] * T2[5, 5])
        for k in range(6):
            t = dl * Gv[k]
            t2 = dl * hh[k]
            for l in range(6):
                Rs[k, l] = T2[k, l] - t * hh[l]
                Po[k, l] = P2[k, l] + t2 * hh[l]
        _mm_ab(T1, Rs, To)
        se = (sv[0] * ev[0] + sv[1] * ev[1] + sv[2] * ev[2] + sv[3] * ev[3] + sv[4] * ev[4] + sv[5] * ev[5]) * Di1
        gv = (d1v[0] - sv[0] * se, d1v[1] - sv[1] * se, d1v[2] - sv[2] * se, d1v[3] - sv[3] * se,
              d1v[4] - sv[4] * se, d1v[5] - sv[5] * se)
        for l in range(6):
            do[l] = d2[l] + (T2[0, l] * gv[0] + T2[1, l] * gv[1] + T2[2, l] * gv[2] + T2[3, l] * gv[3]
                             + T2[4, l] * gv[4] + T2[5, l] * gv[5])
    # c = c1 + T1 e
    tv = _mv6(T1, ev)
    for k in range(6):
        es[k] = ev[k]
        co[k] = c1[k] + tv[k]


@njit(cache=True, fastmath=_FM)
def _compose_gen(K1, T1, P1, c1, d1, K2, T2, P2, c2, d2, want_tail, keep_left, Ps, Rs, es, B, piv, Z, F, N, TN,
                 g, dn, w):
    """General composition S1 * S2 with M = (1 + K2 Phi1)^-1 by LU with partial pivoting.

    On return: K1, c1 hold the composed K, c (in place); with ``want_tail`` T1, P1, d1 hold the
    composed T, Phi, d.  The split's P, R, e go to Ps, Rs, es (Ps and es may be K2 and c2, which
    are consumed).  With ``keep_left`` the left segment's T1, Phi1, d1 are first saved over T2,
    Phi2, d2 (which are consumed) for the back-substitution.  Returns False if B is singular."""
    # B = 1 + K2 Phi1
    _mm_ab(K2, P1, B)
    for k in range(6):
        B[k, k] += 1.0
    if not _lu6(B, piv):
        return False
    # w = K2 d1 + c2 (before K2, c2 are overwritten)
    for k in range(6):
        w[k] = (c2[k] + K2[k, 0] * d1[0] + K2[k, 1] * d1[1] + K2[k, 2] * d1[2] + K2[k, 3] * d1[3]
                + K2[k, 4] * d1[4] + K2[k, 5] * d1[5])
    _lu6_solve_vec(B, piv, w)                   # e
    _lu6_solve_mat(B, piv, K2, Z)               # Z = M K2
    if want_tail:
        _lu6_solve_mat(B, piv, T2, Rs)          # R = M T2 (unused when f_out = 0)
        # F = Phi1 R ; N = Phi2 + T2^T F ; g = d1 - Phi1 e ; dn = d2 + T2^T g ; TN = T1 R
        _mm_ab(P1, Rs, F)
        _sym_add_atb(P2, T2, F, N)
        for k in range(6):
            g[k] = d1[k] - (P1[k, 0] * w[0] + P1[k, 1] * w[1] + P1[k, 2] * w[2] + P1[k, 3] * w[3]
                            + P1[k, 4] * w[4] + P1[k, 5] * w[5])
        for l in range(6):
            dn[l] = d2[l] + (T2[0, l] * g[0] + T2[1, l] * g[1] + T2[2, l] * g[2] + T2[3, l] * g[3]
                             + T2[4, l] * g[4] + T2[5, l] * g[5])
        _mm_ab(T1, Rs, TN)
    # P = Z T1^T (into Ps, which may be K2: Z is a copy) ; K1 += T1 P (symmetric) ; c1 += T1 e
    _mm_abt(Z, T1, Ps)
    _sym_add_ab(K1, T1, Ps, K1)
    for k in range(6):
        c1[k] += (T1[k, 0] * w[0] + T1[k, 1] * w[1] + T1[k, 2] * w[2] + T1[k, 3] * w[3] + T1[k, 4] * w[4]
                  + T1[k, 5] * w[5])
    for k in range(6):
        es[k] = w[k]
    if keep_left:
        _copy6(T1, T2)
        _copy6(P1, P2)
        for k in range(6):
            d2[k] = d1[k]
    if want_tail:
        _copy6(TN, T1)
        _copy6(N, P1)
        for k in range(6):
            d1[k] = dn[k]
    return True


@njit(cache=True, fastmath=_FM, inline="always")
def _body_inertia(j, tipn, mass, com, I_com, IA, I6):
    if tipn:
        for k in range(6):
            for l in range(6):
                I6[k, l] = IA[j, k, l]
    else:
        inertia_from_compact(mass[j], com[j], I_com[j], I6)


@njit(cache=True, fastmath=_FM)
def _chain_backward_first(b0, L, cidx, idx_v, mass, com, I_com, tau, E, r, c, p, IA, S, tip_node, U, Dinv, u,
                          Km, Tm, Pm, Rm, cm, dm, levels, M6, V6, M3, piv, err):
    """Levels 1 .. log2(BLOCK) of one chain, block by block: every body's segment and the
    compositions of the pairs (k-1, k), k = 1, 3, 5, ... (the composed pair goes to slot cidx[k-1],
    the split's P, R, e to slot cidx[k]; an unpaired last body keeps its own segment), then the
    compositions at strides 2, 4, ... < BLOCK inside the block.  levels[ell] += compositions at
    level ell + 1.  Returns -1 or the offending body."""
    I6 = M6[0]
    Ia = M6[1]
    XT = M6[2]
    scr = M6[3]
    Dm = M6[4]
    Dm2 = M6[5]
    K1 = M6[6]
    T1 = M6[7]
    P1 = M6[8]
    K2 = M6[9]
    T2 = M6[10]
    P2 = M6[11]
    Z = M6[12]
    B = M6[13]
    F = M6[14]
    N = M6[15]
    TN = M6[16]
    h = V6[0]
    w = V6[1]
    xu = V6[2]
    c1 = V6[3]
    d1 = V6[4]
    c2 = V6[5]
    d2 = V6[6]
    G = V6[7]
    hv = V6[8]
    y = V6[9]
    g = V6[10]
    dn = V6[11]
    for q0 in range(0, L, BLOCK):
        q1 = min(q0 + BLOCK, L)
        for k in range(q0, q1, 2):
            j1 = cidx[b0 + k]
            iv1 = idx_v[j1]
            nv1 = idx_v[j1 + 1] - iv1 if j1 + 1 < idx_v.shape[0] else S.shape[0] - iv1
            tip1 = k == L - 1
            _body_inertia(j1, tip1 and tip_node[j1], mass, com, I_com, IA, I6)
            if tip1:
                # unpaired last body: its own segment into its slot
                if not _leaf(j1, iv1, nv1, I6, E[j1], r[j1], c[j1], p[j1], tau, S, U, Dinv, u, Km[j1], Tm[j1], Pm[j1],
                             cm[j1], dm[j1], True, Ia, XT, scr, Dm, Dm2, h, w, xu):
                    err[0] = ERR_MASSLESS if not mass[j1] > 0.0 else ERR_SINGULAR_IA
                    return j1
                continue
            if not _leaf(j1, iv1, nv1, I6, E[j1], r[j1], c[j1], p[j1], tau, S, U, Dinv, u, K1, T1, P1, c1, d1,
                         nv1 != 1, Ia, XT, scr, Dm, Dm2, h, w, xu):
                err[0] = ERR_MASSLESS if not mass[j1] > 0.0 else ERR_SINGULAR_IA
                return j1
            j2 = cidx[b0 + k + 1]
            iv2 = idx_v[j2]
            nv2 = idx_v[j2 + 1] - iv2 if j2 + 1 < idx_v.shape[0] else S.shape[0] - iv2
            tail = k + 2 < L                      # the pair is not the chain's outermost segment
            _body_inertia(j2, (k + 1 == L - 1) and tip_node[j2], mass, com, I_com, IA, I6)
            if not _leaf(j2, iv2, nv2, I6, E[j2], r[j2], c[j2], p[j2], tau, S, U, Dinv, u, K2, T2, P2, c2, d2, tail,
                         Ia, XT, scr, Dm, Dm2, h, w, xu):
                err[0] = ERR_MASSLESS if not mass[j2] > 0.0 else ERR_SINGULAR_IA
                return j2
            if nv1 == 1:
                _compose_one(S[iv1], 1.0 / Dinv[iv1, 0], Dinv[iv1, 0], K1, T1, c1, d1, K2, T2, P2, c2, d2,
                             Km[j1], Tm[j1], Pm[j1], cm[j1], dm[j1], Km[j2], Rm[j2], cm[j2], tail, G, hv, y, Z, w)
            else:
                if not _compose_gen(K1, T1, P1, c1, d1, K2, T2, P2, c2, d2, tail, False, Km[j2], Rm[j2], cm[j2],
                                    B, piv, Z, F, N, TN, g, dn, w):
                    err[0] = ERR_SINGULAR_A
                    return j2
                _copy6(K1, Km[j1])
                for kk in range(6):
                    cm[j1, kk] = c1[kk]
                if tail:
                    _copy6(T1, Tm[j1])
                    _copy6(P1, Pm[j1])
                    for kk in range(6):
                        dm[j1, kk] = d1[kk]
        # levels 2 .. log2(BLOCK) inside the block
        levels[0] += (q1 - q0) // 2
        s = 2
        lev = 1
        while s < BLOCK and q0 + s < q1:
            for k in range(q0 + s, q1, 2 * s):
                i1 = cidx[b0 + k - s]
                i2 = cidx[b0 + k]
                if not _compose_gen(Km[i1], Tm[i1], Pm[i1], cm[i1], dm[i1], Km[i2], Tm[i2], Pm[i2], cm[i2],
                                    dm[i2], k + s < L, True, Km[i2], Rm[i2], cm[i2], B, piv, Z, F, N, TN, g, dn, w):
                    err[0] = ERR_SINGULAR_A
                    return i2
                levels[lev] += 1
            s *= 2
            lev += 1
    return -1


@njit(cache=True, fastmath=_FM)
def _reduce_group_scattering(g0, g1, corder, cptr, cidx, woodbury, Km, Tm, Pm, Rm, cm, dm, levels, M6, V6, piv,
                             err):
    """Levels log2(BLOCK) + 1, ... over every chain of the group, level by level (each level a
    batch of independent compositions).  levels[ell] += compositions at level ell + 1.
    Returns -1 or the offending body."""
    B = M6[13]
    Z = M6[12]
    F = M6[14]
    N = M6[15]
    TN = M6[16]
    g = V6[10]
    dn = V6[11]
    w = V6[1]
    s = BLOCK
    lev = 0
    while (1 << lev) < BLOCK:
        lev += 1
    while True:
        any_chain = False
        for gi in range(g0, g1):
            ch = corder[gi]
            b0 = cptr[ch]
            L = cptr[ch + 1] - b0
            if s >= L:
                continue
            any_chain = True
            for k in range(s, L, 2 * s):
                i1 = cidx[b0 + k - s]
                i2 = cidx[b0 + k]
                tail = k + s < L
                if not _compose_gen(Km[i1], Tm[i1], Pm[i1], cm[i1], dm[i1], Km[i2], Tm[i2], Pm[i2], cm[i2], dm[i2],
                                    tail, True, Km[i2], Rm[i2], cm[i2], B, piv, Z, F, N, TN, g, dn, w):
                    err[0] = ERR_SINGULAR_A
                    return i2
                levels[lev] += 1
        if not any_chain:
            return -1
        s *= 2
        lev += 1


@njit(cache=True, fastmath=_FM)
def _chain_forward(b0, L, cidx, parent, idx_v, idx_s, ms, mass, com, I_com, a0, E, r, c, p, IA, S, Wt, tip_node,
                   U, Dinv, u, Km, Tm, Pm, Rm, cm, dm, fin, FS, F, a, qdd, V6):
    """Back-substitution of one chain whose parent body's acceleration is known: the splits of
    levels >= 2 top-down (f_mid into fin, a_mid into a; the levels below BLOCK block by block),
    then level 1 fused with the per-body step (qdd, a, joint wrench, F_S)."""
    tmp = V6[0]
    fz = V6[1]
    g = V6[2]
    x = V6[3]
    for kk in range(6):
        fz[kk] = 0.0
    top = cidx[b0]
    pj = parent[top]
    ap0 = a0 if pj < 0 else a[pj]
    nlev = 0
    while (1 << nlev) < L:
        nlev += 1
    for lv in range(nlev - 1, -1, -1):
        s = 1 << lv
        if s < BLOCK:
            break
        for k in range(s, L, 2 * s):
            _back_split(k, s, b0, L, cidx, ap0, a, fin, Km, Rm, cm, Tm, Pm, dm)
    for c0 in range(0, L, BLOCK):
        c1 = min(c0 + BLOCK, L)
        s = BLOCK // 2
        while s >= 2:
            for k in range(c0 + s, c1, 2 * s):
                _back_split(k, s, b0, L, cidx, ap0, a, fin, Km, Rm, cm, Tm, Pm, dm)
            s //= 2
        _level1_bodies(c0, c1, b0, L, cidx, ap0, idx_v, idx_s, ms, mass, com, I_com, E, r, c, p, IA, S, Wt,
                       tip_node, U, Dinv, u, Km, Rm, cm, fin, FS, F, a, qdd, tmp, fz, g, x)


@njit(cache=True, fastmath=_FM, inline="always")
def _split_force(P, e, ain, has_out, R, fo, f):
    """The force at a split: f = P a_in + R f_out + e (without the R term at the chain's tip)."""
    for kk in range(6):
        t = e[kk]
        for ll in range(6):
            t += P[kk, ll] * ain[ll]
        if has_out:
            for ll in range(6):
                t += R[kk, ll] * fo[ll]
        f[kk] = t


@njit(cache=True, fastmath=_FM, inline="always")
def _back_split(k, s, b0, L, cidx, ap0, a, fin, Km, Rm, cm, Tm, Pm, dm):
    """Back-substitution of the split at chain position k, stride s >= 2:
    f_mid = P a_in + R f_out + e (into fin), a_mid = T1^T a_in - Phi1 f_mid + d1 (into a)."""
    i2 = cidx[b0 + k]
    ain = ap0 if k == s else a[cidx[b0 + k - s - 1]]
    f = fin[i2]
    if k + s < L:
        _split_force(Km[i2], cm[i2], ain, True, Rm[i2], fin[cidx[b0 + k + s]], f)
    else:
        _split_force(Km[i2], cm[i2], ain, False, Rm[i2], ain, f)
    T1 = Tm[i2]
    P1 = Pm[i2]
    d1 = dm[i2]
    am = a[cidx[b0 + k - 1]]
    for kk in range(6):
        t = d1[kk]
        for ll in range(6):
            t += T1[ll, kk] * ain[ll] - P1[kk, ll] * f[ll]
        am[kk] = t


@njit(cache=True, fastmath=_FM)
def _level1_bodies(c0, c1, b0, L, cidx, ap0, idx_v, idx_s, ms, mass, com, I_com, E, r, c, p, IA, S, Wt, tip_node,
                   U, Dinv, u, Km, Rm, cm, fin, FS, F, a, qdd, tmp, fz, g, x):
    """Level 1 of the back-substitution fused with the per-body step, chain positions c0 .. c1-1
    (c0 even)."""
    for k in range(c0, c1):
        j = cidx[b0 + k]
        ap = ap0 if k == 0 else a[cidx[b0 + k - 1]]
        if k % 2 == 0 and k + 1 < L:
            # the level-1 split at k + 1: f_{k+1} = P a_{k-1} + R f_{k+2} + e
            i2 = cidx[b0 + k + 1]
            if k + 2 < L:
                _split_force(Km[i2], cm[i2], ap, True, Rm[i2], fin[cidx[b0 + k + 2]], fin[i2])
            else:
                _split_force(Km[i2], cm[i2], ap, False, Rm[i2], ap, fin[i2])
        fo = fin[cidx[b0 + k + 1]] if k + 1 < L else fz
        # the body: qdd = D^-1 (u - U^T X a_parent - S^T f_out) (u = tau - S^T (I c + b) holds the
        # velocity-product term) ; a = X a_parent + c + S qdd
        xform_motion(E[j], r[j], ap, tmp)
        iv = idx_v[j]
        nv = 6 - ms[j]
        if nv == 1:
            t = u[iv]
            for kk in range(6):
                t -= U[iv, kk] * tmp[kk] + S[iv, kk] * fo[kk]
            qq = Dinv[iv, 0] * t
            qdd[iv] = qq
            for kk in range(6):
                a[j, kk] = tmp[kk] + c[j, kk] + S[iv, kk] * qq
        else:
            for d in range(nv):
                t = u[iv + d]
                for kk in range(6):
                    t -= U[iv + d, kk] * tmp[kk] + S[iv + d, kk] * fo[kk]
                x[d] = t
            for kk in range(6):
                tmp[kk] += c[j, kk]
            for d in range(nv):
                t = 0.0
                for e2 in range(nv):
                    t += Dinv[iv + d, e2] * x[e2]
                qdd[iv + d] = t
            for kk in range(6):
                t = tmp[kk]
                for d in range(nv):
                    t += S[iv + d, kk] * qdd[iv + d]
                a[j, kk] = t
        # joint wrench F = I a + b + f_out (IA, pA for a node tip)
        Fj = F[j]
        if k == L - 1 and tip_node[j]:
            for kk in range(6):
                t = p[j, kk]
                for ll in range(6):
                    t += IA[j, kk, ll] * a[j, ll]
                Fj[kk] = t
        else:
            inertia_times(mass[j], com[j], I_com[j], a[j], g)
            for kk in range(6):
                Fj[kk] = g[kk] + p[j, kk] + fo[kk]
        is_ = idx_s[j]
        for d in range(ms[j]):
            FS[is_ + d] = (Wt[is_ + d, 0] * Fj[0] + Wt[is_ + d, 1] * Fj[1] + Wt[is_ + d, 2] * Fj[2]
                           + Wt[is_ + d, 3] * Fj[3] + Wt[is_ + d, 4] * Fj[4] + Wt[is_ + d, 5] * Fj[5])


@njit(cache=True, fastmath=_FM)
def scattering_kernel(parent, idx_v, idx_s, ms, mass, com, I_com, a0, tau, E, r, c, p, IA, S, Wt, FT,
                      cptr, cidx, corder, gptr, tip_node, woodbury,
                      Km, Tm, Pm, Rm, cm, dm, fin, U, Dinv, u, FS, F, a, qdd, levels, err):
    """Odd-even constraint force algorithm over chains in scattering form (module docstring).

    ms[j] = 6 - nv_j; Wt: constraint rows, E, r, c, p: kinematics and bias forces
    (``cfa_oddeven.setup_kernel``; IA holds the rigid inertia of the node bodies, and of the
    one-body chains when ``woodbury``).  cptr/cidx: chains (base to tip), corder/gptr: chains
    grouped by height; tip_node[j]: body j is a node.  woodbury: one-body chains take ABA's
    step (inertia form; identical to their one-body segment) instead of the segment code.
    Workspace: Km, Tm, Pm, Rm (n, 6, 6), cm, dm, fin (n, 6), U, Dinv (nv, 6), u (nv).
    Output: FS, F (joint wrenches), a (body accelerations), qdd, levels.  Returns -1, or the
    offending body (err[0] says why)."""
    ng = gptr.shape[0] - 1
    M6 = np.empty((17, 6, 6))
    V6 = np.empty((12, 6))
    M3 = np.empty((3, 3, 3))
    piv = np.empty(6, dtype=np.int64)
    # ================================================================ backward: tips first
    for h in range(ng):
        g0 = gptr[h]
        g1 = gptr[h + 1]
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
            bad = _chain_backward_first(b0, L, cidx, idx_v, mass, com, I_com, tau, E, r, c, p, IA, S, tip_node,
                                        U, Dinv, u, Km, Tm, Pm, Rm, cm, dm, levels, M6, V6, M3, piv, err)
            if bad >= 0:
                return bad
        bad = _reduce_group_scattering(g0, g1, corder, cptr, cidx, woodbury, Km, Tm, Pm, Rm, cm, dm, levels, M6,
                                       V6, piv, err)
        if bad >= 0:
            return bad
        # collapse: the chain's segment acts on its parent as an articulated body
        for gi in range(g0, g1):
            ch = corder[gi]
            b0 = cptr[ch]
            if cptr[ch + 1] - b0 == 1 and woodbury:
                continue
            top = cidx[b0]
            pj = parent[top]
            if pj < 0:
                continue
            for kk in range(6):
                p[pj, kk] += cm[top, kk]
                for ll in range(6):
                    IA[pj, kk, ll] += Km[top, kk, ll]
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
            _chain_forward(b0, L, cidx, parent, idx_v, idx_s, ms, mass, com, I_com, a0, E, r, c, p, IA, S, Wt,
                           tip_node, U, Dinv, u, Km, Tm, Pm, Rm, cm, dm, fin, FS, F, a, qdd, V6)
    return -1


def cfa_oddeven_scattering(model, q, qd, tau, F_ext, has_f, woodbury):
    topo, ws = workspace(model)
    setup(model, ws, topo, q, qd, tau, F_ext, has_f, topo.need_IA if woodbury else topo.need_IA_fs)
    Km, Tm, Pm, Rm, cm, dm, fin = ws.scattering()
    FS = np.empty(topo.ns)
    F = np.empty((model.n, 6))
    qdd = np.empty(model.nv)
    levels = np.zeros(64, dtype=np.int64)
    ws.err[0] = 0
    bad = scattering_kernel(model.parent, model.idx_v, topo.idx_s, topo.ns_j, model.mass, model.com, model.I_com,
                            base_acceleration(model), tau, ws.E, ws.r, ws.c, ws.p, ws.IA, ws.S, ws.Wt, ws.FT,
                            topo.cptr, topo.cidx, topo.corder, topo.gptr, topo.tip_node, bool(woodbury),
                            Km, Tm, Pm, Rm, cm, dm, fin, ws.U, ws.Dinv, ws.u, FS, F, ws.a, qdd, levels, ws.err)
    if bad >= 0:
        raise_error(model, bad, int(ws.err[0]), "odd-even")
    return CFAResult(model, "odd-even", qdd, FS, ws.FT.copy(), F, q.copy(), topo.idx_s, topo.ns_j,
                     trim_levels(levels))
