"""Per-part kernels of the parallel engine: pure numba functions over one part's arrays.

No communication and no allocation per body: every array is a caller-owned workspace
(:class:`partree.parallel.serial.PartKernel` allocates them once).  Notation (Featherstone;
see ``partree.algorithms.aba``): the part's bodies are numbered locally 0..m-1 in regular
numbering, body 0 is the part's root; ``v_in`` / ``a_in`` are the velocity / acceleration of the
root's parent body in its own coordinates (zero / a0 = -gravity for a part hanging from the base).

Handles: the bodies of the part where child parts attach, k = 0..H-1.  Child parts at handle k
act on it through the unknown wrench g_k (handle coordinates), entering ABA's bias force as
pA_h += g_k (the child part's root-joint wrench F_c moved to the handle: g = X_c^T F_c).
The path of handle k is the list of bodies from the part's root to h_k (root first); all the
extra work over plain ABA is done along these paths only.

Kernels:
  velocity_kernel  joint kinematics of every body; along the paths, the compact transform
                   T_k (v_hk = T_k v_in + vrel_k) and vrel_k
  reduce_kernel    pass 1 (true velocities from v_in), pass 2 (IA, pA with g = 0) and the
                   sensitivities: G (d pA / d g_k along path k), the root relation
                   g_root = M a_in + m0 + sum_k Kt_k g_k (in the parent handle's coordinates),
                   and the handle relations a_hj = Psi_j a_in + sum_k Lam_jk g_k + beta_j
  solve_kernel     back-substitution: with the known g, correct u along the paths, then pass 3
"""
import numpy as np
from numba import njit

from ..algorithms._spatial import (congruence_add, cross_force, cross_motion, inertia_from_compact,
                                   inertia_times, xform_force_T_add, xform_motion)
from ..algorithms.aba import _spd_inverse
from ..joints import joint_kinematics


@njit(cache=True, inline="always")
def _xforceT_mat(E, r, A, out, t1, t2):
    """out = X^T A (6x6, column by column); out must not alias A."""
    for j in range(6):
        for k in range(6):
            t1[k] = A[k, j]
            t2[k] = 0.0
        xform_force_T_add(E, r, t1, t2)
        for k in range(6):
            out[k, j] = t2[k]


@njit(cache=True, inline="always")
def _L_mat(S, U, Dinv, iv, nv, A, out, w):
    """out = L A with L = 1 - U Dinv S^T (the articulated projector of pass 2).  w: 6x6 scratch."""
    for j in range(6):
        for k in range(6):
            out[k, j] = A[k, j]
    if nv == 0:
        return
    # w[d, j] = (S^T A)[d, j]
    for d in range(nv):
        for j in range(6):
            s = 0.0
            for k in range(6):
                s += S[iv + d, k] * A[k, j]
            w[d, j] = s
    for d in range(nv):
        for j in range(6):
            s = 0.0
            for e in range(nv):
                s += Dinv[iv + d, e] * w[e, j]
            for k in range(6):
                out[k, j] -= U[iv + d, k] * s


@njit(cache=True)
def velocity_kernel(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd,
                    slot, handles, E, r, S, cJ, vJ, TEb, Trb, vrb, TE, Tr, vrel):
    """Joint kinematics of the part; along handle paths the maps v_h = T_h v_in + vrel_h.

    Writes E, r (X_up), S, cJ, vJ = S qd for every body; TE, Tr, vrel (H,...) for the handles.
    ``slot[i]`` is body i's row in the path scratch TEb, Trb, vrb (-1 off the paths)."""
    n = parent.shape[0]
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    tmp = np.empty(6)
    for i in range(n):
        iv = idx_v[i]
        nv = joint_kinematics(jtype[i], axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                              E[i], r[i], S[iv:], cJ[i], R, R2)
        for k in range(6):
            s = 0.0
            for d in range(nv):
                s += S[iv + d, k] * qd[iv + d]
            vJ[i, k] = s
        si = slot[i]
        if si >= 0:
            p = parent[i]
            if p < 0:
                for a in range(3):
                    Trb[si, a] = r[i, a]
                    for b in range(3):
                        TEb[si, a, b] = E[i, a, b]
                for k in range(6):
                    vrb[si, k] = vJ[i, k]
            else:
                sp = slot[p]
                # T_i = X_i T_p : E = E_i E_p, r = r_p + E_p^T r_i
                for a in range(3):
                    for b in range(3):
                        TEb[si, a, b] = E[i, a, 0] * TEb[sp, 0, b] + E[i, a, 1] * TEb[sp, 1, b] + \
                            E[i, a, 2] * TEb[sp, 2, b]
                    Trb[si, a] = Trb[sp, a] + TEb[sp, 0, a] * r[i, 0] + TEb[sp, 1, a] * r[i, 1] + \
                        TEb[sp, 2, a] * r[i, 2]
                xform_motion(E[i], r[i], vrb[sp], tmp)
                for k in range(6):
                    vrb[si, k] = tmp[k] + vJ[i, k]
    for k in range(handles.shape[0]):
        si = slot[handles[k]]
        for a in range(3):
            Tr[k, a] = Trb[si, a]
            for b in range(3):
                TE[k, a, b] = TEb[si, a, b]
        for j in range(6):
            vrel[k, j] = vrb[si, j]


@njit(cache=True)
def reduce_kernel(parent, idx_v, mass, com, I_com, tau, v_in,
                  path_ptr, path_idx, cp, slot, bb,
                  E, r, S, cJ, vJ, v, c, IA, pA, U, Dinv, u, G,
                  M, m0, Kt, Psi, Lam, beta):
    """Passes 1 and 2 from v_in, then the part's boundary relations.  Returns -1 or the (local)
    body whose joint-space inertia is singular."""
    n = parent.shape[0]
    H = path_ptr.shape[0] - 1
    nvt = S.shape[0]
    T = np.empty((6, 6))
    Ia = np.empty((6, 6))
    D = np.empty((6, 6))
    W = np.empty((6, 6))
    W2 = np.empty((6, 6))
    w = np.empty((6, 6))
    h = np.empty(6)
    tmp = np.empty(6)
    t1 = np.empty(6)
    t2 = np.empty(6)
    pa = np.empty(6)
    # pass 1
    for i in range(n):
        p = parent[i]
        if p < 0:
            xform_motion(E[i], r[i], v_in, tmp)
        else:
            xform_motion(E[i], r[i], v[p], tmp)
        for k in range(6):
            v[i, k] = tmp[k] + vJ[i, k]
        cross_motion(v[i], vJ[i], tmp)
        for k in range(6):
            c[i, k] = cJ[i, k] + tmp[k]
        inertia_from_compact(mass[i], com[i], I_com[i], IA[i])
        inertia_times(mass[i], com[i], I_com[i], v[i], h)
        cross_force(v[i], h, pA[i])
    # pass 2 (the part's root also forms Ia, pa: they are its boundary relation)
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        p = parent[i]
        for d in range(nv):
            for k in range(6):
                s = 0.0
                for l in range(6):
                    s += IA[i, k, l] * S[iv + d, l]
                U[iv + d, k] = s
            s = tau[iv + d]
            for k in range(6):
                s -= S[iv + d, k] * pA[i, k]
            u[iv + d] = s
        for d in range(nv):
            for e in range(nv):
                s = 0.0
                for k in range(6):
                    s += S[iv + d, k] * U[iv + e, k]
                D[d, e] = s
        if nv == 1:
            if not D[0, 0] > 0.0:
                return i
            Dinv[iv, 0] = 1.0 / D[0, 0]
        elif nv > 1:
            if not _spd_inverse(D, nv, T):
                return i
            for d in range(nv):
                for e in range(nv):
                    Dinv[iv + d, e] = T[d, e]
        # Ia = IA - U Dinv U^T ; pa = pA + Ia c + U Dinv u
        for k in range(6):
            for l in range(6):
                Ia[k, l] = IA[i, k, l]
        for d in range(nv):
            for k in range(6):
                s = 0.0
                for e in range(nv):
                    s += Dinv[iv + d, e] * U[iv + e, k]
                tmp[k] = s
            for k in range(6):
                for l in range(6):
                    Ia[k, l] -= U[iv + d, k] * tmp[l]
        for k in range(6):
            s = pA[i, k]
            for l in range(6):
                s += Ia[k, l] * c[i, l]
            pa[k] = s
        for d in range(nv):
            s = 0.0
            for e in range(nv):
                s += Dinv[iv + d, e] * u[iv + e]
            for k in range(6):
                pa[k] += U[iv + d, k] * s
        if p >= 0:
            congruence_add(E[i], r[i], Ia, IA[p], T)
            xform_force_T_add(E[i], r[i], pa, pA[p])
        else:
            # root relation in the parent handle's coordinates: M = X^T Ia X, m0 = X^T pa
            for k in range(6):
                m0[k] = 0.0
                for l in range(6):
                    M[k, l] = 0.0
            congruence_add(E[i], r[i], Ia, M, T)
            xform_force_T_add(E[i], r[i], pa, m0)
    # sensitivities of pA to the handle wrenches, walking each path from the handle up to the
    # root: G_k (stored; G = 1 at the handle, G_parent = X^T L G).  On the way the compliance
    # blocks are accumulated (reciprocity: the motion transfer root -> handle is the transpose
    # of the force transfer handle -> root):
    #   Lam_jk = -sum over the common path of G_j^T S Dinv S^T G_k,   Psi_k = Kt_k^T.
    for kh in range(H):
        a0 = path_ptr[kh]
        a1 = path_ptr[kh + 1]
        last = a1 - 1
        for k in range(6):
            for l in range(6):
                G[last, k, l] = 1.0 if k == l else 0.0
        for j in range(kh + 1):
            for k in range(6):
                for l in range(6):
                    Lam[j, kh, k, l] = 0.0
        for pos in range(last, a0 - 1, -1):
            t = pos - a0
            i = path_idx[pos]
            iv = idx_v[i]
            nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
            # Y_kh = S^T G_kh (rows of W2)
            for d in range(nv):
                for l in range(6):
                    s2 = 0.0
                    for k in range(6):
                        s2 += S[iv + d, k] * G[pos, k, l]
                    W2[d, l] = s2
            for j in range(kh + 1):
                if t >= cp[j, kh]:
                    continue
                pj = path_ptr[j] + t
                if j == kh:
                    for d in range(nv):
                        for l in range(6):
                            w[d, l] = W2[d, l]
                else:
                    for d in range(nv):
                        for l in range(6):
                            s1 = 0.0
                            for k in range(6):
                                s1 += S[iv + d, k] * G[pj, k, l]
                            w[d, l] = s1
                for d in range(nv):
                    for e in range(nv):
                        De = Dinv[iv + d, e]
                        for k in range(6):
                            x = De * w[d, k]
                            for l in range(6):
                                Lam[j, kh, k, l] -= x * W2[e, l]
            _L_mat(S, U, Dinv, iv, nv, G[pos], W, w)
            if pos > a0:
                _xforceT_mat(E[i], r[i], W, G[pos - 1], t1, t2)
            else:
                _xforceT_mat(E[i], r[i], W, Kt[kh], t1, t2)
        for j in range(kh):
            for k in range(6):
                for l in range(6):
                    Lam[kh, j, l, k] = Lam[j, kh, k, l]
        for k in range(6):
            for l in range(6):
                Psi[kh, k, l] = Kt[kh, l, k]
    # beta: the handle accelerations for a_in = 0, g = 0, once per path body (parents first)
    for i in range(n):
        si = slot[i]
        if si < 0:
            continue
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        p = parent[i]
        if p < 0:
            for k in range(6):
                tmp[k] = c[i, k]
        else:
            xform_motion(E[i], r[i], bb[slot[p]], tmp)
            for k in range(6):
                tmp[k] += c[i, k]
        for d in range(nv):
            s = 0.0
            for k in range(6):
                s += U[iv + d, k] * tmp[k]
            h[d] = u[iv + d] - s
        for d in range(nv):
            s = 0.0
            for e in range(nv):
                s += Dinv[iv + d, e] * h[e]
            for k in range(6):
                tmp[k] += S[iv + d, k] * s
        for k in range(6):
            bb[si, k] = tmp[k]
    for j in range(H):
        si = slot[path_idx[path_ptr[j + 1] - 1]]
        for k in range(6):
            beta[j, k] = bb[si, k]
    return -1


@njit(cache=True)
def solve_kernel(parent, idx_v, a_in, g, handles, slot, dp, E, r, S, c, U, Dinv, u, a, qdd):
    """Back-substitution: the handle wrenches g change pA only on the paths (dp, walked from the
    handles up: dp_parent += X^T L dp), hence u -= S^T dp there; then ABA pass 3 from a_in."""
    n = parent.shape[0]
    H = handles.shape[0]
    nvt = S.shape[0]
    tmp = np.empty(6)
    h = np.empty(6)
    t2 = np.empty(6)
    if H > 0:
        for si in range(dp.shape[0]):
            for k in range(6):
                dp[si, k] = 0.0
        for kh in range(H):
            si = slot[handles[kh]]
            for k in range(6):
                dp[si, k] += g[kh, k]
        for i in range(n - 1, -1, -1):
            si = slot[i]
            if si < 0:
                continue
            iv = idx_v[i]
            nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
            for k in range(6):
                tmp[k] = dp[si, k]
            for d in range(nv):
                s = 0.0
                for k in range(6):
                    s += S[iv + d, k] * tmp[k]
                h[d] = s
                u[iv + d] -= s
            p = parent[i]
            if p < 0:
                continue
            # L dp = dp - U Dinv S^T dp
            for d in range(nv):
                s = 0.0
                for e in range(nv):
                    s += Dinv[iv + d, e] * h[e]
                for k in range(6):
                    tmp[k] -= U[iv + d, k] * s
            for k in range(6):
                t2[k] = 0.0
            xform_force_T_add(E[i], r[i], tmp, t2)
            sp = slot[p]
            for k in range(6):
                dp[sp, k] += t2[k]
    for i in range(n):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        p = parent[i]
        if p < 0:
            xform_motion(E[i], r[i], a_in, tmp)
        else:
            xform_motion(E[i], r[i], a[p], tmp)
        for k in range(6):
            a[i, k] = tmp[k] + c[i, k]
        if nv == 1:
            s = u[iv]
            for k in range(6):
                s -= U[iv, k] * a[i, k]
            x = Dinv[iv, 0] * s
            qdd[iv] = x
            for k in range(6):
                a[i, k] += S[iv, k] * x
            continue
        for d in range(nv):
            s = u[iv + d]
            for k in range(6):
                s -= U[iv + d, k] * a[i, k]
            h[d] = s
        for d in range(nv):
            s = 0.0
            for e in range(nv):
                s += Dinv[iv + d, e] * h[e]
            qdd[iv + d] = s
        for d in range(nv):
            for k in range(6):
                a[i, k] += S[iv + d, k] * qdd[iv + d]
