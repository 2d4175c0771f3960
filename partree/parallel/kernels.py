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
extra work over plain ABA is done along these paths only.  ``pbod`` lists the path bodies in
increasing order; ``slot[i]`` is body i's index in it (-1 off the paths).

"Frame 0" is the coordinate frame of the root's parent (where v_in, a_in are given).  Along the
paths the velocity kernel forms the compact transforms T_i (frame 0 -> body i: v_i = T_i v_in +
vrel_i).  The sensitivity walk is done in frame 0, where moving a force to the parent is the
identity, so each path body costs one rank-nv update of a 6x6 matrix instead of a 6x6 transform:
    L_i = 1 - U_i Dinv_i S_i^T (body coordinates)  ->  L~_i = 1 - (T_i^T U_i) Dinv_i (T_i^-1 S_i)^T.

Kernels:
  velocity_kernel  joint kinematics of the path bodies only; T_h and vrel_h for the handles
  reduce_kernel    pass 1 (joint kinematics of the other bodies fused in; velocities from v_in),
                   pass 2 (IA, pA with g = 0) and the sensitivities: the root relation
                   g_root = M a_in + m0 + sum_k Kt_k g_k (frame 0) and the handle relations
                   a_hj = Psi_j a_in + sum_k Lam_jk g_k + beta_j
  solve_kernel     back-substitution: with the known g, u -= Y g along the paths, then pass 3

External forces: ``f_ext[i]`` (body coordinates, [n; f]) enters pA_i -= f_ext_i as in ABA.
"""
import numpy as np
from numba import njit

from ..algorithms._spatial import (congruence_add, cross_force, cross_motion, inertia_from_compact,
                                   inertia_times, xform_force_T_add, xform_motion)
from ..algorithms.aba import _spd_inverse, articulated_project
from ..joints import PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at


@njit(cache=True)
def velocity_kernel(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd,
                    kbod, kslot, slot, handles, E, r, S, cJb, vJb, TEb, Trb, vrb, TE, Tr, vrel):
    """Joint kinematics of the bodies ``kbod`` (increasing; at least the path bodies) into E, r,
    S and cJ, vJ (rows ``kslot[i]`` of cJb, vJb), and the maps v_h = T_h v_in + vrel_h of the
    handles (TE, Tr, vrel (H, ...)) through the path transforms (rows ``slot[i]``)."""
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    tmp = np.empty(6)
    for ki in range(kbod.shape[0]):
        i = kbod[ki]
        iv = idx_v[i]
        kk = kslot[i]
        if jtype[i] == REVOLUTE:    # 1-DOF joints inlined with a constant type (see joints.joint_kinematics_at)
            nv = joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJb[kk], R, R2)
        elif jtype[i] == PRISMATIC:
            nv = joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJb[kk], R, R2)
        else:
            nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJb[kk],
                                     R, R2)
        for k in range(6):
            s = 0.0
            for d in range(nv):
                s += S[iv + d, k] * qd[iv + d]
            vJb[kk, k] = s
        si = slot[i]
        if si < 0:
            continue
        p = parent[i]
        if p < 0:
            for a in range(3):
                Trb[si, a] = r[i, a]
                for b in range(3):
                    TEb[si, a, b] = E[i, a, b]
            for k in range(6):
                vrb[si, k] = vJb[kk, k]
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
                vrb[si, k] = tmp[k] + vJb[kk, k]
    for k in range(handles.shape[0]):
        si = slot[handles[k]]
        for a in range(3):
            Tr[k, a] = Trb[si, a]
            for b in range(3):
                TE[k, a, b] = TEb[si, a, b]
        for j in range(6):
            vrel[k, j] = vrb[si, j]


@njit(cache=True)
def _pass1(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd, mass, com, I_com, f_ext, has_fext,
           v_in, kslot, cJb, vJb, E, r, S, v, c, IA, pA):
    """ABA pass 1 from v_in (joint kinematics of the bodies not done by the velocity kernel,
    kslot[i] < 0, fused in)."""
    n = parent.shape[0]
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    h = np.empty(6)
    tmp = np.empty(6)
    cJ = np.empty(6)
    vJ = np.empty(6)
    for i in range(n):
        iv = idx_v[i]
        si = kslot[i]
        if si < 0:
            if jtype[i] == REVOLUTE:    # 1-DOF joints inlined with a constant type (see joints.joint_kinematics_at)
                nv = joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                      E[i], r[i], S[iv:], cJ, R, R2)
            elif jtype[i] == PRISMATIC:
                nv = joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                      E[i], r[i], S[iv:], cJ, R, R2)
            else:
                nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ,
                                         R, R2)
            for k in range(6):
                s = 0.0
                for d in range(nv):
                    s += S[iv + d, k] * qd[iv + d]
                vJ[k] = s
        else:
            for k in range(6):
                cJ[k] = cJb[si, k]
                vJ[k] = vJb[si, k]
        p = parent[i]
        if p < 0:
            xform_motion(E[i], r[i], v_in, tmp)
        else:
            xform_motion(E[i], r[i], v[p], tmp)
        for k in range(6):
            v[i, k] = tmp[k] + vJ[k]
        cross_motion(v[i], vJ, tmp)
        for k in range(6):
            c[i, k] = cJ[k] + tmp[k]
        inertia_from_compact(mass[i], com[i], I_com[i], IA[i])
        inertia_times(mass[i], com[i], I_com[i], v[i], h)
        cross_force(v[i], h, pA[i])
        if has_fext:
            for k in range(6):
                pA[i, k] -= f_ext[i, k]


@njit(cache=True)
def reduce_kernel(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd,
                  mass, com, I_com, tau, f_ext, has_fext, v_in,
                  path_ptr, path_idx, cp, kslot, slot, cJb, vJb, TEb, Trb, yptr, Yst,
                  E, r, S, v, c, IA, pA, U, Dinv, u, G,
                  M, m0, Kt, Psi, Lam, beta):
    """Passes 1 and 2 from v_in, then the part's boundary relations.  Returns -1 or the (local)
    body whose joint-space inertia is singular."""
    n = parent.shape[0]
    nvt = S.shape[0]
    T = np.empty((6, 6))
    Ia = np.empty((6, 6))
    D = np.empty((6, 6))
    tmp = np.empty(6)
    pa = np.empty(6)
    _pass1(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd, mass, com, I_com, f_ext, has_fext,
           v_in, kslot, cJb, vJb, E, r, S, v, c, IA, pA)
    # pass 2 (as in ABA, written out; the part's root also forms Ia, pa: its boundary relation)
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = idx_v[i + 1] - iv if i + 1 < n else nvt - iv
        p = parent[i]
        if nv == 1:
            Dd = 0.0
            uu = tau[iv]
            for k in range(6):
                sk = 0.0
                for l in range(6):
                    sk += IA[i, k, l] * S[iv, l]
                U[iv, k] = sk
                Dd += S[iv, k] * sk
                uu -= S[iv, k] * pA[i, k]
            if not Dd > 0.0:
                return i
            Dinv[iv, 0] = 1.0 / Dd
            u[iv] = uu
            Di = 1.0 / Dd
            for k in range(6):
                tmp[k] = U[iv, k] * Di
            for k in range(6):
                for l in range(6):
                    Ia[k, l] = IA[i, k, l] - tmp[k] * U[iv, l]
            w = uu * Di
            for k in range(6):
                s = pA[i, k] + U[iv, k] * w
                for l in range(6):
                    s += Ia[k, l] * c[i, l]
                pa[k] = s
        else:
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
            if nv > 1:
                if not _spd_inverse(D, nv, T):
                    return i
                for d in range(nv):
                    for e in range(nv):
                        Dinv[iv + d, e] = T[d, e]
            articulated_project(IA[i], pA[i], c[i], U, Dinv, u, iv, nv, Ia, pa, tmp)
        if p >= 0:
            congruence_add(E[i], r[i], Ia, IA[p], T)
            xform_force_T_add(E[i], r[i], pa, pA[p])
        else:
            # root relation in frame 0: M = X^T Ia X, m0 = X^T pa
            for k in range(6):
                m0[k] = 0.0
                for l in range(6):
                    M[k, l] = 0.0
            congruence_add(E[i], r[i], Ia, M, T)
            xform_force_T_add(E[i], r[i], pa, m0)
    _sensitivities(n, nvt, idx_v, path_ptr, path_idx, cp, slot, TEb, Trb, yptr, Yst, S, c, U, Dinv, u, G,
                   Kt, Psi, Lam, beta)
    return -1


#: the walk is latency-bound scalar code: let LLVM reassociate and contract (no nnan/ninf, so a NaN
#: still propagates); ~2x faster than strict IEEE order
_WALK_MATH = {"reassoc", "contract", "nsz", "arcp"}

#: Along a long path some columns of G~ decay geometrically (the sensitivity of the part's root to
#: a handle wrench in a direction the joints absorb) and sink into the subnormal range, where every
#: operation is slow: on a 4*10^4-body chain part half of the stored Y were subnormal and the walk
#: took ~180 ns per body instead of ~70.  Entries of G~ below _TINY (next to entries of order
#: 1e-3..1e3) change no result in double precision and are flushed to zero, as FTZ would (1e-100,
#: so that products of two of them, in Lam and Y, stay clear of the subnormal range too).
_TINY = 1e-100


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _walk_start(TE_h, Tr_h, Gc, Lc, bt):
    """Start of a handle path's walk: G~ = T_h^T = [[E^T, rx E^T], [0, E^T]], Lam_kk = 0, beta = 0."""
    for a in range(3):
        for b in range(3):
            e = TE_h[b, a]
            Gc[a, b] = e
            Gc[3 + a, 3 + b] = e
            Gc[3 + a, b] = 0.0
    r0, r1, r2 = Tr_h[0], Tr_h[1], Tr_h[2]
    for b in range(3):
        e0, e1, e2 = Gc[0, b], Gc[1, b], Gc[2, b]
        Gc[0, 3 + b] = r1 * e2 - r2 * e1
        Gc[1, 3 + b] = r2 * e0 - r0 * e2
        Gc[2, 3 + b] = r0 * e1 - r1 * e0
    for k in range(6):
        bt[k] = 0.0
        for l in range(6):
            Lc[k, l] = 0.0


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _walk_step(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yo, Gc, Lc, bt, St, Ut, Y, tmp, h):
    """One path body of the walk (see ``_sensitivities``): beta += G~^T e~ and, for nv > 0,
    S~ and U~ (left in St, Ut), Y = S~^T G~ (kept in Yst[yo:]), Lam_kk -= Y^T Dinv Y and the
    rank-nv update G~ -= U~ Y.  (Whole arrays and indices, no views: a view per body costs reference
    counting.)"""
    r0, r1, r2 = Trb[si, 0], Trb[si, 1], Trb[si, 2]
    # e (body coordinates) = c + S Dinv (u - U^T c)
    for k in range(6):
        tmp[k] = c[i, k]
    for d in range(nv):
        s = u[iv + d]
        for k in range(6):
            s -= U[iv + d, k] * c[i, k]
        h[d] = s
    for d in range(nv):
        s = 0.0
        for e in range(nv):
            s += Dinv[iv + d, e] * h[e]
        for k in range(6):
            tmp[k] += S[iv + d, k] * s
    # e~ = T^-1 e ; beta += G~^T e~
    w0 = TEb[si, 0, 0] * tmp[0] + TEb[si, 1, 0] * tmp[1] + TEb[si, 2, 0] * tmp[2]
    w1 = TEb[si, 0, 1] * tmp[0] + TEb[si, 1, 1] * tmp[1] + TEb[si, 2, 1] * tmp[2]
    w2 = TEb[si, 0, 2] * tmp[0] + TEb[si, 1, 2] * tmp[1] + TEb[si, 2, 2] * tmp[2]
    x3 = TEb[si, 0, 0] * tmp[3] + TEb[si, 1, 0] * tmp[4] + TEb[si, 2, 0] * tmp[5] + r1 * w2 - r2 * w1
    x4 = TEb[si, 0, 1] * tmp[3] + TEb[si, 1, 1] * tmp[4] + TEb[si, 2, 1] * tmp[5] + r2 * w0 - r0 * w2
    x5 = TEb[si, 0, 2] * tmp[3] + TEb[si, 1, 2] * tmp[4] + TEb[si, 2, 2] * tmp[5] + r0 * w1 - r1 * w0
    for l in range(6):
        bt[l] += Gc[0, l] * w0 + Gc[1, l] * w1 + Gc[2, l] * w2 + Gc[3, l] * x3 + Gc[4, l] * x4 + \
            Gc[5, l] * x5
    if nv == 0:
        return
    # S~_d = T^-1 S_d ;  U~_d = T^T (U Dinv)_d
    for d in range(nv):
        sw0, sw1, sw2 = S[iv + d, 0], S[iv + d, 1], S[iv + d, 2]
        sv0, sv1, sv2 = S[iv + d, 3], S[iv + d, 4], S[iv + d, 5]
        w0 = TEb[si, 0, 0] * sw0 + TEb[si, 1, 0] * sw1 + TEb[si, 2, 0] * sw2
        w1 = TEb[si, 0, 1] * sw0 + TEb[si, 1, 1] * sw1 + TEb[si, 2, 1] * sw2
        w2 = TEb[si, 0, 2] * sw0 + TEb[si, 1, 2] * sw1 + TEb[si, 2, 2] * sw2
        St[d, 0] = w0
        St[d, 1] = w1
        St[d, 2] = w2
        St[d, 3] = TEb[si, 0, 0] * sv0 + TEb[si, 1, 0] * sv1 + TEb[si, 2, 0] * sv2 + r1 * w2 - r2 * w1
        St[d, 4] = TEb[si, 0, 1] * sv0 + TEb[si, 1, 1] * sv1 + TEb[si, 2, 1] * sv2 + r2 * w0 - r0 * w2
        St[d, 5] = TEb[si, 0, 2] * sv0 + TEb[si, 1, 2] * sv1 + TEb[si, 2, 2] * sv2 + r0 * w1 - r1 * w0
        for k in range(6):
            s = 0.0
            for e in range(nv):
                s += U[iv + e, k] * Dinv[iv + e, d]
            tmp[k] = s
        n0 = TEb[si, 0, 0] * tmp[0] + TEb[si, 1, 0] * tmp[1] + TEb[si, 2, 0] * tmp[2]
        n1 = TEb[si, 0, 1] * tmp[0] + TEb[si, 1, 1] * tmp[1] + TEb[si, 2, 1] * tmp[2]
        n2 = TEb[si, 0, 2] * tmp[0] + TEb[si, 1, 2] * tmp[1] + TEb[si, 2, 2] * tmp[2]
        f0 = TEb[si, 0, 0] * tmp[3] + TEb[si, 1, 0] * tmp[4] + TEb[si, 2, 0] * tmp[5]
        f1 = TEb[si, 0, 1] * tmp[3] + TEb[si, 1, 1] * tmp[4] + TEb[si, 2, 1] * tmp[5]
        f2 = TEb[si, 0, 2] * tmp[3] + TEb[si, 1, 2] * tmp[4] + TEb[si, 2, 2] * tmp[5]
        Ut[d, 0] = n0 + r1 * f2 - r2 * f1
        Ut[d, 1] = n1 + r2 * f0 - r0 * f2
        Ut[d, 2] = n2 + r0 * f1 - r1 * f0
        Ut[d, 3] = f0
        Ut[d, 4] = f1
        Ut[d, 5] = f2
    if nv == 1:
        # y = S~^T G~ held in scalars (stores into the work arrays could alias its operands and
        # force reloads); Lam_kk -= Dinv y y^T ;  G~ -= U~ y^T
        y0 = y1 = y2 = y3 = y4 = y5 = 0.0
        for k in range(6):
            sk = St[0, k]
            y0 += sk * Gc[k, 0]
            y1 += sk * Gc[k, 1]
            y2 += sk * Gc[k, 2]
            y3 += sk * Gc[k, 3]
            y4 += sk * Gc[k, 4]
            y5 += sk * Gc[k, 5]
        Y[0, 0] = Yst[yo, 0] = y0
        Y[0, 1] = Yst[yo, 1] = y1
        Y[0, 2] = Yst[yo, 2] = y2
        Y[0, 3] = Yst[yo, 3] = y3
        Y[0, 4] = Yst[yo, 4] = y4
        Y[0, 5] = Yst[yo, 5] = y5
        Di = Dinv[iv, 0]
        for k in range(6):
            x = Di * Y[0, k]
            Lc[k, 0] -= x * y0
            Lc[k, 1] -= x * y1
            Lc[k, 2] -= x * y2
            Lc[k, 3] -= x * y3
            Lc[k, 4] -= x * y4
            Lc[k, 5] -= x * y5
        for k in range(6):
            x = Ut[0, k]
            for l in range(6):
                g = Gc[k, l] - x * Y[0, l]
                Gc[k, l] = g if abs(g) >= _TINY else 0.0
        return
    # Y = S~^T G~ (nv x 6), kept for the back-substitution
    for d in range(nv):
        for l in range(6):
            y = St[d, 0] * Gc[0, l] + St[d, 1] * Gc[1, l] + St[d, 2] * Gc[2, l] + \
                St[d, 3] * Gc[3, l] + St[d, 4] * Gc[4, l] + St[d, 5] * Gc[5, l]
            Y[d, l] = y
            Yst[yo + d, l] = y
    if nv > 1:
        for d in range(nv):
            for e in range(nv):
                De = Dinv[iv + d, e]
                for k in range(6):
                    x = De * Y[d, k]
                    for l in range(6):
                        Lc[k, l] -= x * Y[e, l]
        for d in range(nv):
            for k in range(6):
                x = Ut[d, k]
                for l in range(6):
                    Gc[k, l] -= x * Y[d, l]
        for k in range(6):
            for l in range(6):
                if abs(Gc[k, l]) < _TINY:
                    Gc[k, l] = 0.0


@njit(cache=True, fastmath=_WALK_MATH)
def _walk_step_any(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yo, Gc, Lc, bt, St, Ut, Y, tmp, h):
    """``_walk_step`` for any nv, as a function of its own (see ``_sensitivities``)."""
    _walk_step(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yo, Gc, Lc, bt, St, Ut, Y, tmp, h)


@njit(cache=True, fastmath=_WALK_MATH)
def _sensitivities(n, nvt, idx_v, path_ptr, path_idx, cp, slot, TEb, Trb, yptr, Yst, S, c, U, Dinv, u, G,
                   Kt, Psi, Lam, beta):
    """The handle-path walk of ``reduce_kernel`` (see there)."""
    H = path_ptr.shape[0] - 1
    Gc = np.empty((6, 6))
    Y = np.empty((6, 6))
    Wj = np.empty((6, 6))
    Lc = np.empty((6, 6))
    St = np.empty((6, 6))      # S~ rows (frame 0)
    Ut = np.empty((6, 6))      # (U Dinv)~ rows (frame 0)
    bt = np.empty(6)
    h = np.empty(6)
    tmp = np.empty(6)
    # sensitivities of pA (frame 0) to the handle wrenches, walking each path from the handle up
    # to the root: G~ = T_h^T at the handle, G~ <- L~_i G~ at each path body (a rank-nv update).
    # On the way (reciprocity: motion transfer body -> handle = G~^T):
    #   Lam_jk = -sum over the common path of (S~^T G~_j)^T Dinv (S~^T G~_k),   Psi_k = Kt_k^T,
    #   beta_k = sum over path k of G~^T e_i,  e_i = T_i^-1 (c_i + S Dinv (u - U^T c_i))
    # (the handle acceleration for a_in = 0, g = 0), and Y = S~^T G~ is kept (Yst) for the
    # back-substitution (u_i -= Y g).  G[pos] keeps G~ on entry to path position pos (H > 1).
    store = H > 1
    for kh in range(H):
        a0 = path_ptr[kh]
        a1 = path_ptr[kh + 1]
        last = a1 - 1
        sh = slot[path_idx[last]]
        _walk_start(TEb[sh], Trb[sh], Gc, Lc, bt)
        for j in range(kh):
            for k in range(6):
                for l in range(6):
                    Lam[j, kh, k, l] = 0.0
        for pos in range(last, a0 - 1, -1):
            t = pos - a0
            i = path_idx[pos]
            si = slot[i]
            iv = idx_v[i]
            nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
            if store:
                for k in range(6):
                    for l in range(6):
                        G[pos, k, l] = Gc[k, l]
            if nv == 1:
                # the common case inlined with nv a constant (its nv-loops unrolled); the general
                # step is a call: a second inlined copy in this loop slows the first one down
                # (measured on a 4*10^4-body chain part: 73 ns per body, against 150 with one
                # inlined step for any nv and 185 with two)
                _walk_step(iv, 1, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yptr[pos], Gc, Lc, bt, St, Ut, Y, tmp, h)
            else:
                _walk_step_any(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yptr[pos], Gc, Lc, bt, St, Ut, Y,
                               tmp, h)
            if nv == 0:
                continue
            # cross terms Lam_{j,kh} -= (S~^T G~_j)^T Dinv Y over the earlier paths through this body
            for j in range(kh):
                if t >= cp[j, kh]:
                    continue
                pj = path_ptr[j] + t
                for d in range(nv):
                    for l in range(6):
                        Wj[d, l] = St[d, 0] * G[pj, 0, l] + St[d, 1] * G[pj, 1, l] + \
                            St[d, 2] * G[pj, 2, l] + St[d, 3] * G[pj, 3, l] + St[d, 4] * G[pj, 4, l] + \
                            St[d, 5] * G[pj, 5, l]
                for d in range(nv):
                    for e in range(nv):
                        De = Dinv[iv + d, e]
                        for k in range(6):
                            x = De * Wj[d, k]
                            for l in range(6):
                                Lam[j, kh, k, l] -= x * Y[e, l]
        for k in range(6):
            beta[kh, k] = bt[k]
            for l in range(6):
                Lam[kh, kh, k, l] = Lc[k, l]
                Kt[kh, k, l] = Gc[k, l]
                Psi[kh, l, k] = Gc[k, l]
        for j in range(kh):
            for k in range(6):
                for l in range(6):
                    Lam[kh, j, l, k] = Lam[j, kh, k, l]




@njit(cache=True)
def solve_kernel(parent, idx_v, a_in, g, path_ptr, path_idx, yptr, Yst, E, r, S, c, U, Dinv, u, a, qdd):
    """Back-substitution: the handle wrenches g change u only on the paths (u -= Y g, Y kept by
    the reduce kernel); then ABA pass 3 from a_in."""
    n = parent.shape[0]
    H = path_ptr.shape[0] - 1
    nvt = S.shape[0]
    tmp = np.empty(6)
    h = np.empty(6)
    for kh in range(H):
        for pos in range(path_ptr[kh], path_ptr[kh + 1]):
            i = path_idx[pos]
            iv = idx_v[i]
            nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
            yo = yptr[pos]
            for d in range(nv):
                s = 0.0
                for l in range(6):
                    s += Yst[yo + d, l] * g[kh, l]
                u[iv + d] -= s
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
