"""Per-part kernels of the parallel engine: pure numba functions over one part's arrays.

No communication and no allocation per body: every array is a caller-owned workspace
(:class:`partree.parallel.part.PartKernel` allocates them once).  Notation (Featherstone;
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
vrel_i); for a part hanging from the fixed base, whose v_in is zero, pass 1 of the reduce kernel
forms them instead (``form_T``).  The sensitivity walk is done in frame 0, where moving a force to
the parent is the identity, so each path body costs one rank-nv update of a 6x6 matrix instead of
a 6x6 transform:
    L_i = 1 - U_i Dinv_i S_i^T (body coordinates)  ->  L~_i = 1 - (T_i^T U_i) Dinv_i (T_i^-1 S_i)^T.

Kernels:
  velocity_kernel  joint kinematics of the path bodies (or of all, ``early_kinematics``); T_h and
                   vrel_h for the handles
  reduce_kernel    pass 1 (joint kinematics of the other bodies fused in; velocities from v_in;
                   the path transforms of a part hanging from the base),
                   pass 2 (IA, pA with g = 0) and the sensitivities: the root relation
                   g_root = M a_in + m0 + sum_k Kt_k g_k (frame 0) and the handle relations
                   a_hj = Psi_j a_in + sum_k Lam_jk g_k + beta_j
                   (the walk skips the bodies where the handle's influence has died out, and
                   a one-handle walk stops where nothing more can reach the sums: see
                   _TINY_REL and _sensitivities)
  solve_kernel     back-substitution: with the known g, u -= Y g along the paths, then pass 3
  hybrid_finish    (hybrid dynamics) the given accelerations and the computed forces of the
                   joints whose acceleration is given (see ``reduce_kernel``'s ``active``)
  wrench_kernel    (constraint forces only) every joint's wrench by RNEA's inward pass from the
                   back-substituted accelerations, the child parts' wrenches g entering at the handles
  momentum_forces_kernel, momentum_rate_kernel
                   (the momentum form, seed 001) the bodies' wrenches of gravity and external forces
                   and the part's total for the root; after a back-substitution at rest with the
                   momenta p as joint forces, the subtree momenta and dp/dt

External forces: ``f_ext[i]`` (body coordinates, [n; f]) enters pA_i -= f_ext_i as in ABA.

Kernel arguments (one meaning per name in every kernel; m bodies in the part, nv its velocity
coordinates, H handles, ns path bodies; the arrays are :class:`~partree.parallel.part.PartKernel`
attributes of the same names):

==========================  ========================================================================
the part's model slice
parent (m,)                 local parent, -1 for the part's root
jtype, axis, axis2          joint codes and axes (``partree.joints``)
E_tree, r_tree              fixed placements X_tree (m, 3, 3), (m, 3)
mass, com, I_com            body inertias: mass, centre of mass, inertia about it
idx_q, idx_v (m,)           first configuration / velocity index of each joint (local)
idx_s (m,)                  first row of each joint's F_S block (``constraint_layout``)
the part's layout
handles (H,)                local bodies where child parts attach
slot (m,)                   index of a body among the path bodies, -1 off the paths
kbod, kslot                 bodies whose kinematics the velocity kernel does (increasing), and
                            their rows in cJb / vJb (-1: fused into pass 1 instead)
path_ptr, path_idx          CSR of the root-first paths to the handles
cp (H, H)                   common prefix length of two paths
yptr, ylo                   row of each path position in Yst; first stored position of each path
acc_first, acc_has (m,)     pass 2's inertia accumulation flags (see ``reduce_kernel``)
state and inputs
q, qd, tau                  the part's own slices of the configuration, velocity, joint forces
f_ext (m, 6), has_fext      external body wrenches (body coordinates) and whether there are any
v_in, a_in (6,)             velocity / acceleration of the root's parent (frame 0)
g (H, 6)                    the child parts' wrenches at the handles (from the root solve)
active (m,), qdd_in (nv,)   hybrid dynamics: the joints whose acceleration is given (None: none)
                            and those accelerations
with_T, form_T              where the path transforms are formed (see above)
workspace (written)
E, r                        X_up of every body, compact
S (nv, 6)                   motion subspaces (rows)
v, c, a (m, 6)              velocities, velocity-product accelerations, accelerations
IA, pA                      articulated inertias (accumulated sums, see ``reduce_kernel``), biases
U, Dinv, u, qdd             ABA's U = IA S, D^-1, u = tau - S^T pA, and the accelerations
cJb, vJb                    cJ and vJ of the multi-DOF joints done by the velocity kernel
TEb, Trb, vrb               path transforms T_i and relative velocities, by slot
G, Yst                      the walk's G~ per path position (H > 1) and its stored Y rows
Wt                          constraint rows W^T (``wrench_kernel``)
F, FS, FT                   joint wrenches, constraint forces, drive forces (``wrench_kernel``)
boundary outputs (written)
TE, Tr, vrel (H, ...)       the handle maps v_h = T_h v_in + vrel_h
M, m0                       the root relation g_root = M a_in + m0 + sum_k Kt_k g_k
Kt, Psi, Lam, beta          its sensitivities and the handle relations (see above)
==========================  ========================================================================
"""
import numpy as np
from numba import njit

from ..algorithms.primitives import (body_force, congruence_add, cross_force, cross_motion, inertia_from_compact,
                                   inertia_times, xform_force_T_add, xform_motion)
from ..algorithms.aba import aba_forward_pass2, articulated_project
from ..algorithms.linalg import spd_inverse
from ..algorithms.packed import raw_view, unowned
from ..algorithms.cfa.bases import project_wrench
from ..algorithms.momentum_rhs import body_wrench_pass, momentum_rate_pass, subtree_sum_pass
from ..joints import FIXED, PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at


@njit(cache=True, inline="always")
def _rot(M, k):
    """M[k] (a 3x3 block) as a tuple of 9 scalars, row by row."""
    return (M[k, 0, 0], M[k, 0, 1], M[k, 0, 2], M[k, 1, 0], M[k, 1, 1], M[k, 1, 2], M[k, 2, 0], M[k, 2, 1],
            M[k, 2, 2])


@njit(cache=True, inline="always")
def _vec3(v, k):
    return (v[k, 0], v[k, 1], v[k, 2])


@njit(cache=True, inline="always")
def _store_T(TEb, Trb, si, A, t):
    TEb[si, 0, 0], TEb[si, 0, 1], TEb[si, 0, 2] = A[0], A[1], A[2]
    TEb[si, 1, 0], TEb[si, 1, 1], TEb[si, 1, 2] = A[3], A[4], A[5]
    TEb[si, 2, 0], TEb[si, 2, 1], TEb[si, 2, 2] = A[6], A[7], A[8]
    Trb[si, 0], Trb[si, 1], Trb[si, 2] = t[0], t[1], t[2]


@njit(cache=True, inline="always")
def _compose_T(e, rr, A, t):
    """T_i = X_i T_p in scalars: E = E_i E_p, r = r_p + E_p^T r_i (e = E_i and A = E_p as 9-tuples,
    rr = r_i and t = r_p as 3-tuples).  The path transforms are carried in registers along a run of
    path bodies each the child of the one before (a chain): the composition is a chain of
    dependent products, and a store-to-load round trip per body would lengthen it."""
    r0, r1, r2 = rr
    u0 = t[0] + A[0] * r0 + A[3] * r1 + A[6] * r2
    u1 = t[1] + A[1] * r0 + A[4] * r1 + A[7] * r2
    u2 = t[2] + A[2] * r0 + A[5] * r1 + A[8] * r2
    B = (e[0] * A[0] + e[1] * A[3] + e[2] * A[6], e[0] * A[1] + e[1] * A[4] + e[2] * A[7],
         e[0] * A[2] + e[1] * A[5] + e[2] * A[8],
         e[3] * A[0] + e[4] * A[3] + e[5] * A[6], e[3] * A[1] + e[4] * A[4] + e[5] * A[7],
         e[3] * A[2] + e[4] * A[5] + e[5] * A[8],
         e[6] * A[0] + e[7] * A[3] + e[8] * A[6], e[6] * A[1] + e[7] * A[4] + e[8] * A[7],
         e[6] * A[2] + e[7] * A[5] + e[8] * A[8])
    return B, (u0, u1, u2)


@njit(cache=True, inline="always")
def _frame0_bits(jt, A, t, S, iv):
    """The components (bits 0..5) a joint's motion subspace can occupy in frame 0, S~ = T^-1 S with
    T = (A, t) as in _compose_T: those of S~ computed, for a 1-DOF joint (whose cJ is zero); none for a
    fixed joint; all six for a joint of more DOF, whose cJ the bits do not follow.  The walk's
    ``reach`` is built from them (see ``_sensitivities``)."""
    if jt == FIXED:
        return 0
    if jt != REVOLUTE and jt != PRISMATIC:
        return 63
    s0, s1, s2, s3, s4, s5 = S[iv, 0], S[iv, 1], S[iv, 2], S[iv, 3], S[iv, 4], S[iv, 5]
    w0 = A[0] * s0 + A[3] * s1 + A[6] * s2
    w1 = A[1] * s0 + A[4] * s1 + A[7] * s2
    w2 = A[2] * s0 + A[5] * s1 + A[8] * s2
    z0 = A[0] * s3 + A[3] * s4 + A[6] * s5 + t[1] * w2 - t[2] * w1
    z1 = A[1] * s3 + A[4] * s4 + A[7] * s5 + t[2] * w0 - t[0] * w2
    z2 = A[2] * s3 + A[5] * s4 + A[8] * s5 + t[0] * w1 - t[1] * w0
    return (int(w0 != 0.0) | int(w1 != 0.0) << 1 | int(w2 != 0.0) << 2 | int(z0 != 0.0) << 3
            | int(z1 != 0.0) << 4 | int(z2 != 0.0) << 5)


@njit(cache=True, inline="always")
def _cross3_bits(x, y):
    """The components (bits 0..2) a 3-vector cross product x × y can occupy, from those of x and y."""
    b = 0
    if (x & 2 and y & 4) or (x & 4 and y & 2):
        b |= 1
    if (x & 4 and y & 1) or (x & 1 and y & 4):
        b |= 2
    if (x & 1 and y & 2) or (x & 2 and y & 1):
        b |= 4
    return b


@njit(cache=True)
def walk_reach(path_bits, v_in):
    """The components (bits 0..5) that the path bodies' e~ and S~ can occupy in frame 0: those of
    v_in and of the S~ (``path_bits``, see _frame0_bits), closed under the velocity product: since
    v~_i = v_in + sum over the path above of S~ qd and c~_i = cJ~ + v~_i x S~_i qd_i (cJ = 0 for the
    1-DOF joints the bits follow), e~_i = c~_i + S~_i x lies there too.  See ``_sensitivities``."""
    a = path_bits
    for k in range(6):
        if v_in[k] != 0.0:
            a |= 1 << k
    aw, av = a & 7, a >> 3
    return a | _cross3_bits(aw, aw) | (_cross3_bits(aw, av) | _cross3_bits(av, aw)) << 3


@njit(cache=True)
def velocity_kernel(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd,
                    kbod, kslot, slot, handles, with_T, E, r, S, cJb, vJb, TEb, Trb, vrb, TE, Tr, vrel, reach):
    """Joint kinematics of the bodies ``kbod`` (increasing; at least the path bodies) into E, r,
    S (and, for joints of more than one DOF, cJ, vJ in rows ``kslot[i]`` of cJb, vJb), and the
    maps v_h = T_h v_in + vrel_h of the handles (TE, Tr, vrel (H, ...)) through the path
    transforms (rows ``slot[i]``) and the relative velocities (rows ``slot[i]`` of vrb).
    ``with_T`` False (a part hanging from the fixed base, whose v_in is zero): v_h = vrel_h, the
    path transforms are left to pass 1 of the reduce kernel (``form_T``, where the walk needs them)
    and T_h is reported as the identity; the caller then passes the part's velocities v as vrb
    (rows by body, not by slot): for such a part they are the relative ones, and pass 1 keeps them.
    With the path transforms, ``reach[0]`` gets the components the path bodies' S~ occupy in frame 0
    (see _frame0_bits)."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, jtype, axis, axis2 = unowned(parent), unowned(jtype), unowned(axis), unowned(axis2)
    E_tree, r_tree, idx_q, idx_v, q = unowned(E_tree), unowned(r_tree), unowned(idx_q), unowned(idx_v), unowned(q)
    qd, kbod, kslot, slot, handles = unowned(qd), unowned(kbod), unowned(kslot), unowned(slot), unowned(handles)
    E, r, S, cJb, vJb, TEb = unowned(E), unowned(r), unowned(S), unowned(cJb), unowned(vJb), unowned(TEb)
    Trb, vrb, TE, Tr, vrel = unowned(Trb), unowned(vrb), unowned(TE), unowned(Tr), unowned(vrel)
    reach = unowned(reach)
    # the scratch, as views of one array that count no references (passed to inlined steps per
    # body, or rebound per body, views that count them cost atomic operations); ``own`` holds
    # the memory and is used again at the end, so that it lives as long as the views
    own = np.empty(30)
    R = raw_view(own, 0, (3, 3))
    R2 = raw_view(own, 9, (3, 3))
    cJ = raw_view(own, 18, (6,))
    vJ = raw_view(own, 24, (6,))
    prev = -1
    A = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    t = (0.0, 0.0, 0.0)
    w0 = w1 = w2 = x0 = x1 = x2 = 0.0
    bits = 0
    for ki in range(kbod.shape[0]):
        i = kbod[ki]
        iv = idx_v[i]
        kk = kslot[i]
        # 1-DOF joints have cJ = 0 and vJ = S qd: nothing is stored for them beyond E, r, S (pass 1
        # forms vJ again from S)
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
            for k in range(6):
                vJ[k] = S[iv, k] * qd[iv]
        elif jtype[i] == PRISMATIC:
            joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
            for k in range(6):
                vJ[k] = S[iv, k] * qd[iv]
        elif jtype[i] == FIXED:
            joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
            for k in range(6):
                vJ[k] = 0.0
                vJb[kk, k] = 0.0
                cJb[kk, k] = cJ[k]
        else:
            nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
            for k in range(6):
                s = 0.0
                for d in range(nv):
                    s += S[iv + d, k] * qd[iv + d]
                vJ[k] = s
                vJb[kk, k] = s
                cJb[kk, k] = cJ[k]
        si = slot[i]
        if si < 0:
            continue
        # T_p and vrel_p are carried in registers along a chain (see _compose_T)
        p = parent[i]
        if p < 0:
            A, t = _rot(E, i), _vec3(r, i)
            w0, w1, w2 = vJ[0], vJ[1], vJ[2]
            x0, x1, x2 = vJ[3], vJ[4], vJ[5]
        else:
            if p != prev:
                if with_T:
                    A, t = _rot(TEb, slot[p]), _vec3(Trb, slot[p])
                sp = slot[p] if with_T else p
                w0, w1, w2 = vrb[sp, 0], vrb[sp, 1], vrb[sp, 2]
                x0, x1, x2 = vrb[sp, 3], vrb[sp, 4], vrb[sp, 5]
            e = _rot(E, i)
            r0, r1, r2 = r[i, 0], r[i, 1], r[i, 2]
            if with_T:
                A, t = _compose_T(e, (r0, r1, r2), A, t)
            # vrel_i = X_i vrel_p + vJ
            u0 = x0 - (r1 * w2 - r2 * w1)
            u1 = x1 - (r2 * w0 - r0 * w2)
            u2 = x2 - (r0 * w1 - r1 * w0)
            m0, m1, m2 = w0, w1, w2
            w0 = e[0] * m0 + e[1] * m1 + e[2] * m2 + vJ[0]
            w1 = e[3] * m0 + e[4] * m1 + e[5] * m2 + vJ[1]
            w2 = e[6] * m0 + e[7] * m1 + e[8] * m2 + vJ[2]
            x0 = e[0] * u0 + e[1] * u1 + e[2] * u2 + vJ[3]
            x1 = e[3] * u0 + e[4] * u1 + e[5] * u2 + vJ[4]
            x2 = e[6] * u0 + e[7] * u1 + e[8] * u2 + vJ[5]
        if with_T:
            _store_T(TEb, Trb, si, A, t)
            bits |= _frame0_bits(jtype[i], A, t, S, iv)
        sv = si if with_T else i
        vrb[sv, 0], vrb[sv, 1], vrb[sv, 2] = w0, w1, w2
        vrb[sv, 3], vrb[sv, 4], vrb[sv, 5] = x0, x1, x2
        prev = i
    for k in range(handles.shape[0]):
        si = slot[handles[k]]
        for a in range(3):
            Tr[k, a] = Trb[si, a] if with_T else 0.0
            for b in range(3):
                TE[k, a, b] = TEb[si, a, b] if with_T else (1.0 if a == b else 0.0)
        for j in range(6):
            vrel[k, j] = vrb[si if with_T else handles[k], j]
    if with_T:
        reach[0] = bits
    own[0] = 0.0        # the scratch's memory held to here


@njit(cache=True)
def _pass1(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd, mass, com, I_com, f_ext, has_fext,
           v_in, kslot, cJb, vJb, slot, form_T, TEb, Trb, reach, E, r, S, v, c, pA, bias=True, IA=None):
    """ABA pass 1 from v_in (joint kinematics of the bodies not done by the velocity kernel,
    kslot[i] < 0, fused in).  ``form_T``: a part hanging from the fixed base, with handles: the
    velocity kernel already formed its path bodies' velocities in v (v_in = 0), and pass 1 forms
    their path transforms T_i = X_i T_p (rows slot[i] of TEb, Trb), which the velocity kernel
    leaves out for such a part; the composition, a chain of dependent products carried in
    registers along a chain (see _compose_T), overlaps here with pass 1's own work.  With them,
    ``reach[0]`` gets the components the path bodies' S~ occupy in frame 0 (see _frame0_bits).  ``bias``
    False: the velocities are formed but c and pA are set to zero (no velocity products, no
    external forces): the passes then solve M x = tau alone (the loop corrections' steps).
    ``IA`` (n, 6, 6), or None: each body's spatial inertia about its origin, written in the same
    sweep (the loop passes start from it; None compiles a version without it)."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, jtype, axis, axis2 = unowned(parent), unowned(jtype), unowned(axis), unowned(axis2)
    E_tree, r_tree, idx_q, idx_v, q = unowned(E_tree), unowned(r_tree), unowned(idx_q), unowned(idx_v), unowned(q)
    qd, mass, com, I_com, f_ext = unowned(qd), unowned(mass), unowned(com), unowned(I_com), unowned(f_ext)
    v_in, kslot, cJb, vJb, slot = unowned(v_in), unowned(kslot), unowned(cJb), unowned(vJb), unowned(slot)
    TEb, Trb, E, r, S, v, c = unowned(TEb), unowned(Trb), unowned(E), unowned(r), unowned(S), unowned(v), unowned(c)
    pA, reach = unowned(pA), unowned(reach)
    if IA is not None:
        IAu = unowned(IA)
    n = parent.shape[0]
    prev = -1
    bits = 0
    A = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    t = (0.0, 0.0, 0.0)
    # the scratch, as views that count no references (see velocity_kernel)
    own = np.empty(42)
    R = raw_view(own, 0, (3, 3))
    R2 = raw_view(own, 9, (3, 3))
    h = raw_view(own, 18, (6,))
    tmp = raw_view(own, 24, (6,))
    cJ = raw_view(own, 30, (6,))
    vJ = raw_view(own, 36, (6,))
    for i in range(n):
        iv = idx_v[i]
        si = kslot[i]
        if si < 0:
            if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
                joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                 E[i], r[i], S[iv:], cJ, R, R2)
                for k in range(6):
                    vJ[k] = S[iv, k] * qd[iv]
            elif jtype[i] == PRISMATIC:
                joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                 E[i], r[i], S[iv:], cJ, R, R2)
                for k in range(6):
                    vJ[k] = S[iv, k] * qd[iv]
            elif jtype[i] == FIXED:
                joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                 E[i], r[i], S[iv:], cJ, R, R2)
                for k in range(6):
                    vJ[k] = 0.0
            else:
                nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ,
                                         R, R2)
                for k in range(6):
                    s = 0.0
                    for d in range(nv):
                        s += S[iv + d, k] * qd[iv + d]
                    vJ[k] = s
        elif jtype[i] == REVOLUTE or jtype[i] == PRISMATIC:
            for k in range(6):
                cJ[k] = 0.0
                vJ[k] = S[iv, k] * qd[iv]
        else:
            for k in range(6):
                cJ[k] = cJb[si, k]
                vJ[k] = vJb[si, k]
        p = parent[i]
        if not (form_T and slot[i] >= 0):
            if p < 0:
                xform_motion(E[i], r[i], v_in, tmp)
            else:
                xform_motion(E[i], r[i], v[p], tmp)
            for k in range(6):
                v[i, k] = tmp[k] + vJ[k]
        cross_motion(v[i], vJ, tmp)
        for k in range(6):
            c[i, k] = cJ[k] + tmp[k]
        inertia_times(mass[i], com[i], I_com[i], v[i], h)
        cross_force(v[i], h, pA[i])
        if IA is not None:
            inertia_from_compact(mass[i], com[i], I_com[i], IAu[i])
        if has_fext:
            for k in range(6):
                pA[i, k] -= f_ext[i, k]
        if not bias:
            for k in range(6):
                c[i, k] = 0.0
                pA[i, k] = 0.0
        if form_T and slot[i] >= 0:
            if p < 0:
                A, t = _rot(E, i), _vec3(r, i)
            else:
                if p != prev:
                    A, t = _rot(TEb, slot[p]), _vec3(Trb, slot[p])
                A, t = _compose_T(_rot(E, i), _vec3(r, i), A, t)
            _store_T(TEb, Trb, slot[i], A, t)
            bits |= _frame0_bits(jtype[i], A, t, S, iv)
            prev = i
    if form_T:
        reach[0] = bits
    own[0] = 0.0        # the scratch's memory held to here


@njit(cache=True)
def reduce_kernel(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd,
                  mass, com, I_com, tau, f_ext, has_fext, v_in,
                  path_ptr, path_idx, cp, kslot, slot, cJb, vJb, form_T, TEb, Trb, reach, yptr, Yst, ylo,
                  acc_first, acc_has, E, r, S, v, c, IA, pA, U, Dinv, u, G,
                  M, m0, Kt, Psi, Lam, beta, active, qdd_in, bias=True):
    """Passes 1 and 2 from v_in, then the part's boundary relations.  Returns -1 or the (local)
    body whose (passive) joint's joint-space inertia is singular.

    ``active`` (m,) bool, or None for none: the joints whose acceleration is given (``qdd_in``,
    read at their entries; hybrid dynamics).  None compiles a version of its own, without the
    test (numba prunes the branches on an argument that is None), so that forward dynamics runs
    the same code as without hybrid dynamics.  Such a joint is eliminated with D^-1 = 0 and its
    velocity-product term c augmented by S qdd: it then hands its parent its full articulated
    inertia IA and the bias pA + IA (c + S qdd), as in ``partree.hybrid_dynamics``, and every
    later step (the walk, the back-substitution) takes it as it is, as a joint no force
    accelerates (Lam and G~ get no update from it, its Y rows still carry the handle wrenches'
    effect on S^T pA).  The caller passes tau with zeros at such joints, so u = -S^T pA there,
    and after the back-substitution (its qdd is then zero relative to the augmented c)
    :func:`hybrid_finish` reads its force S^T (IA a + pA) = U^T a - u.

    The articulated inertias are not kept per body (nothing after pass 2 needs them): body i's
    IA_i = I_i + the children's X^T Ia X is formed in a 6x6 buffer when pass 2 reaches it.  A
    child numbered right after its parent (every body of a chain) hands its X^T Ia X over in a
    second buffer, the parent being the next body visited; the other children accumulate in
    IA[p], the first of them (``acc_first``) writing it, and ``acc_has[p]`` says IA[p] holds some.
    A chain then keeps no 6x6 per body at all: 288 B per body less to write and read again.
    ``bias`` False: no velocity products nor external forces (see :func:`_pass1`)."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, jtype, axis, axis2 = unowned(parent), unowned(jtype), unowned(axis), unowned(axis2)
    E_tree, r_tree, idx_q, idx_v, q = unowned(E_tree), unowned(r_tree), unowned(idx_q), unowned(idx_v), unowned(q)
    qd, mass, com, I_com, tau = unowned(qd), unowned(mass), unowned(com), unowned(I_com), unowned(tau)
    f_ext, v_in, path_ptr, path_idx = unowned(f_ext), unowned(v_in), unowned(path_ptr), unowned(path_idx)
    cp, kslot, slot, cJb, vJb = unowned(cp), unowned(kslot), unowned(slot), unowned(cJb), unowned(vJb)
    TEb, Trb, yptr, Yst, ylo, E = unowned(TEb), unowned(Trb), unowned(yptr), unowned(Yst), unowned(ylo), unowned(E)
    reach = unowned(reach)
    r, S, v, c, IA, pA, U = unowned(r), unowned(S), unowned(v), unowned(c), unowned(IA), unowned(pA), unowned(U)
    Dinv, u, G, M, m0, Kt = unowned(Dinv), unowned(u), unowned(G), unowned(M), unowned(m0), unowned(Kt)
    Psi, Lam, beta = unowned(Psi), unowned(Lam), unowned(beta)
    n = parent.shape[0]
    nvt = S.shape[0]
    # the scratch, as views that count no references (see velocity_kernel)
    own = np.empty(192)
    T = raw_view(own, 0, (6, 6))
    Ia = raw_view(own, 36, (6, 6))
    Ibuf = raw_view(own, 72, (6, 6))    # IA_i of a body no child hands or adds an inertia to
    Cb = raw_view(own, 108, (6, 6))     # X^T Ia X handed from body i to its parent i - 1
    D = raw_view(own, 144, (6, 6))
    tmp = raw_view(own, 180, (6,))
    pa = raw_view(own, 186, (6,))
    _pass1(parent, jtype, axis, axis2, E_tree, r_tree, idx_q, idx_v, q, qd, mass, com, I_com, f_ext, has_fext,
           v_in, kslot, cJb, vJb, slot, form_T, TEb, Trb, reach, E, r, S, v, c, pA, bias)
    # pass 2 (ABA's, written out; the part's root also forms Ia, pa: its boundary relation)
    handed = False
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = idx_v[i + 1] - iv if i + 1 < n else nvt - iv
        p = parent[i]
        # IA_i, in place: the children already added their X^T Ia X to I_i (see below)
        if handed:
            Ib = Cb
            if acc_has[i]:          # both hold I_i: take it out of one
                inertia_from_compact(mass[i], com[i], I_com[i], Ibuf)
                for k in range(6):
                    for l in range(6):
                        Ib[k, l] += IA[i, k, l] - Ibuf[k, l]
        elif acc_has[i]:
            Ib = IA[i]
        else:
            Ib = Ibuf
            inertia_from_compact(mass[i], com[i], I_com[i], Ib)
        if nv == 1:
            Dd = 0.0
            uu = tau[iv]
            for k in range(6):
                sk = 0.0
                for l in range(6):
                    sk += Ib[k, l] * S[iv, l]
                U[iv, k] = sk
                Dd += S[iv, k] * sk
                uu -= S[iv, k] * pA[i, k]
            if active is not None and active[i]:
                # a given acceleration: nothing eliminated (D^-1 = 0), c augmented by S qdd
                x = qdd_in[iv]
                for k in range(6):
                    c[i, k] += S[iv, k] * x
                Di = 0.0
            elif not Dd > 0.0:
                return i
            else:
                Di = 1.0 / Dd
            Dinv[iv, 0] = Di
            u[iv] = uu
            for k in range(6):
                tmp[k] = U[iv, k] * Di
            for k in range(6):
                for l in range(6):
                    Ia[k, l] = Ib[k, l] - tmp[k] * U[iv, l]
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
                        s += Ib[k, l] * S[iv + d, l]
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
            if active is not None and active[i]:
                # (as for one DOF above)
                for d in range(nv):
                    x = qdd_in[iv + d]
                    for k in range(6):
                        c[i, k] += S[iv + d, k] * x
                    for e in range(nv):
                        Dinv[iv + d, e] = 0.0
            elif nv > 1:
                if not spd_inverse(D, nv, T):
                    return i
                for d in range(nv):
                    for e in range(nv):
                        Dinv[iv + d, e] = T[d, e]
            articulated_project(Ib, pA[i], c[i], U, Dinv, u, iv, nv, Ia, pa, tmp)
        handed = p >= 0 and p == i - 1
        if handed:
            inertia_from_compact(mass[p], com[p], I_com[p], Cb)
            congruence_add(E[i], r[i], Ia, Cb, T)
            xform_force_T_add(E[i], r[i], pa, pA[p])
        elif p >= 0:
            if acc_first[i]:
                inertia_from_compact(mass[p], com[p], I_com[p], IA[p])
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
    _sensitivities(n, nvt, idx_v, path_ptr, path_idx, cp, slot, TEb, Trb, yptr, Yst, ylo, S, c, U, Dinv, u, G,
                   Kt, Psi, Lam, beta, walk_reach(reach[0], v_in))
    own[0] = 0.0        # the scratch's memory held to here
    return -1


#: the walk is latency-bound scalar code: let LLVM reassociate and contract (no nnan/ninf, so a NaN
#: still propagates); strict IEEE order serialises its sums
_WALK_MATH = {"reassoc", "contract", "nsz", "arcp"}

#: Along a long path the columns of G~ decay geometrically (the sensitivity of the part's root to
#: a handle wrench in a direction the joints absorb).  Left alone they sink into the subnormal
#: range, where every operation is slow (on a long chain part about half of the stored Y would be
#: subnormal, and the walk several times slower).  So a column of G~ whose entries
#: are all below _TINY_REL * max(1, |T_h|) is set to zero: it is 10^44 below the rounding error of
#: the entries G~ starts with, and what it could still contribute to Lam, beta, Kt and Y is as far
#: below every result's rounding error.  A zero column stays zero (its Y entry is zero).  Once G~
#: is all zero the rest of the path contributes nothing and the walk stops there (3-D chains); while
#: some columns are left, the bodies where Y = S~^T G~ is exactly zero skip the updates (planar
#: chains, whose out-of-plane columns every joint transmits rigidly).  Whole columns, not single
#: entries: flushing entries one by one leaves the others hovering just above the threshold.
#: Single entries below _TINY_ABS are still flushed, so that no subnormal number survives in a
#: live column.
_TINY_REL = 1e-60
_TINY_ABS = 1e-100


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _flush_columns(Gc, tiny):
    """Zero the columns of G~ whose entries are all below tiny.  Returns 1 if a column is left, else 2."""
    live = 0
    for l in range(6):
        mx = max(abs(Gc[0, l]), abs(Gc[1, l]), abs(Gc[2, l]), abs(Gc[3, l]), abs(Gc[4, l]), abs(Gc[5, l]))
        if mx >= tiny:
            live += 1
        elif mx > 0.0:
            for k in range(6):
                Gc[k, l] = 0.0
    return 1 if live else 2


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _rows_clear(Gc, rows):
    """Whether the rows of G~ in ``rows`` (bits 0..5) are all zero."""
    for k in range(6):
        if (rows >> k) & 1:
            for l in range(6):
                if Gc[k, l] != 0.0:
                    return False
    return True


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _live_columns(Gc):
    """Bit l set where column l of G~ is not all zero."""
    cm = 0
    for l in range(6):
        if Gc[0, l] != 0.0 or Gc[1, l] != 0.0 or Gc[2, l] != 0.0 or Gc[3, l] != 0.0 or Gc[4, l] != 0.0 or \
                Gc[5, l] != 0.0:
            cm |= 1 << l
    return cm


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _walk_start(TE_h, Tr_h, Gc, Lc, bt):
    """Start of a handle path's walk: G~ = T_h^T = [[E^T, rx E^T], [0, E^T]], Lam_kk = 0, beta = 0.
    Returns the flush threshold of this path (see _TINY_REL)."""
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
    scale = 1.0
    for k in range(6):
        bt[k] = 0.0
        for l in range(6):
            Lc[k, l] = 0.0
            scale = max(scale, abs(Gc[k, l]))
    return _TINY_REL * scale


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _flush_beta(Gc, es, bt):
    """beta += G~^T es ; es = 0 (the deferred e~ of the bodies since G~ last changed)."""
    for l in range(6):
        bt[l] += Gc[0, l] * es[0] + Gc[1, l] * es[1] + Gc[2, l] * es[2] + Gc[3, l] * es[3] + \
            Gc[4, l] * es[4] + Gc[5, l] * es[5]
    for k in range(6):
        es[k] = 0.0


@njit(cache=True, fastmath=_WALK_MATH, inline="always")
def _walk_step(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yo, Gc, Lc, bt, es, St, Ut, Y, tmp, h, tiny):
    """One path body of the walk (see ``_sensitivities``).  Returns 0 if G~ is unchanged, 1 if it
    changed, 2 if it changed and is now all zero.

    e~ is added to es (beta += G~^T e~ is deferred while G~ does not change: beta += G~^T es when
    it does, and at the end).  For nv > 0: S~ (left in St), Y = S~^T G~ (kept in Yst[yo:]); when Y
    is not zero, U~ (in Ut), Lam_kk -= Y^T Dinv Y and the rank-nv update G~ -= U~ Y.  Where the
    handle's influence has died out Y is exactly zero (the flushed columns of G~, and on planar
    chains the out-of-plane columns every joint transmits rigidly) and the body costs e~, S~ and Y
    only.  (Whole arrays and indices, no views: a view per body costs reference counting.)"""
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
    # e~ = T^-1 e, deferred into es
    w0 = TEb[si, 0, 0] * tmp[0] + TEb[si, 1, 0] * tmp[1] + TEb[si, 2, 0] * tmp[2]
    w1 = TEb[si, 0, 1] * tmp[0] + TEb[si, 1, 1] * tmp[1] + TEb[si, 2, 1] * tmp[2]
    w2 = TEb[si, 0, 2] * tmp[0] + TEb[si, 1, 2] * tmp[1] + TEb[si, 2, 2] * tmp[2]
    es[0] += w0
    es[1] += w1
    es[2] += w2
    es[3] += TEb[si, 0, 0] * tmp[3] + TEb[si, 1, 0] * tmp[4] + TEb[si, 2, 0] * tmp[5] + r1 * w2 - r2 * w1
    es[4] += TEb[si, 0, 1] * tmp[3] + TEb[si, 1, 1] * tmp[4] + TEb[si, 2, 1] * tmp[5] + r2 * w0 - r0 * w2
    es[5] += TEb[si, 0, 2] * tmp[3] + TEb[si, 1, 2] * tmp[4] + TEb[si, 2, 2] * tmp[5] + r0 * w1 - r1 * w0
    if nv == 0:
        return 0
    # S~_d = T^-1 S_d
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
    # Y = S~^T G~ (nv x 6), kept for the back-substitution
    nz = False
    for d in range(nv):
        for l in range(6):
            y = St[d, 0] * Gc[0, l] + St[d, 1] * Gc[1, l] + St[d, 2] * Gc[2, l] + \
                St[d, 3] * Gc[3, l] + St[d, 4] * Gc[4, l] + St[d, 5] * Gc[5, l]
            Y[d, l] = y
            Yst[yo + d, l] = y
            nz = nz or y != 0.0
    if not nz:
        return 0
    _flush_beta(Gc, es, bt)
    # U~_d = T^T (U Dinv)_d
    for d in range(nv):
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
    # Lam_kk -= Y^T Dinv Y (symmetric: the upper triangle, mirrored at the end of the path)
    for d in range(nv):
        for e in range(nv):
            De = Dinv[iv + d, e]
            for k in range(6):
                x = De * Y[d, k]
                for l in range(k, 6):
                    Lc[k, l] -= x * Y[e, l]
    # G~ -= U~ Y, flushing what has decayed (see _TINY_REL)
    for k in range(6):
        for l in range(6):
            g = Gc[k, l]
            for d in range(nv):
                g -= Ut[d, k] * Y[d, l]
            Gc[k, l] = g if abs(g) >= _TINY_ABS else 0.0
    return _flush_columns(Gc, tiny)


@njit(cache=True, fastmath=_WALK_MATH)
def _walk_update1(iv, si, TEb, Trb, U, Dinv, Yst, yo, Gc, Lc, bt, es, tiny):
    """The updates of the walk at a 1-DOF path body whose y = Yst[yo] is not zero (see
    ``_sensitivities``): beta += G~^T es, U~ = T^T U Dinv, Lam_kk -= Dinv y y^T (upper triangle),
    G~ -= U~ y^T (flushing what has decayed).  Returns what ``_walk_step`` returns."""
    _flush_beta(Gc, es, bt)
    r0, r1, r2 = Trb[si, 0], Trb[si, 1], Trb[si, 2]
    Di = Dinv[iv, 0]
    U0, U1, U2 = U[iv, 0] * Di, U[iv, 1] * Di, U[iv, 2] * Di
    U3, U4, U5 = U[iv, 3] * Di, U[iv, 4] * Di, U[iv, 5] * Di
    n0 = TEb[si, 0, 0] * U0 + TEb[si, 1, 0] * U1 + TEb[si, 2, 0] * U2
    n1 = TEb[si, 0, 1] * U0 + TEb[si, 1, 1] * U1 + TEb[si, 2, 1] * U2
    n2 = TEb[si, 0, 2] * U0 + TEb[si, 1, 2] * U1 + TEb[si, 2, 2] * U2
    f0 = TEb[si, 0, 0] * U3 + TEb[si, 1, 0] * U4 + TEb[si, 2, 0] * U5
    f1 = TEb[si, 0, 1] * U3 + TEb[si, 1, 1] * U4 + TEb[si, 2, 1] * U5
    f2 = TEb[si, 0, 2] * U3 + TEb[si, 1, 2] * U4 + TEb[si, 2, 2] * U5
    n0 += r1 * f2 - r2 * f1
    n1 += r2 * f0 - r0 * f2
    n2 += r0 * f1 - r1 * f0
    ys = (Yst[yo, 0], Yst[yo, 1], Yst[yo, 2], Yst[yo, 3], Yst[yo, 4], Yst[yo, 5])
    us = (n0, n1, n2, f0, f1, f2)
    for k in range(6):
        xk = Di * ys[k]
        for l in range(k, 6):
            Lc[k, l] -= xk * ys[l]
    for k in range(6):
        uk = us[k]
        for l in range(6):
            g = Gc[k, l] - uk * ys[l]
            Gc[k, l] = g if abs(g) >= _TINY_ABS else 0.0
    return _flush_columns(Gc, tiny)


@njit(cache=True, fastmath=_WALK_MATH)
def _walk_step_any(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yo, Gc, Lc, bt, es, St, Ut, Y, tmp, h, tiny):
    """``_walk_step`` for any nv, as a function of its own (see ``_sensitivities``)."""
    return _walk_step(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yo, Gc, Lc, bt, es, St, Ut, Y, tmp, h, tiny)


@njit(cache=True, fastmath=_WALK_MATH)
def _sensitivities(n, nvt, idx_v, path_ptr, path_idx, cp, slot, TEb, Trb, yptr, Yst, ylo, S, c, U, Dinv, u, G,
                   Kt, Psi, Lam, beta, reach):
    """The handle-path walk of ``reduce_kernel`` (see there).  ``reach``: the components (bits
    0..5) that every path body's S~ and e~ can occupy in frame 0 (``walk_reach``).  A body
    contributes to the sums only through S~^T G~ and G~^T e~, so once the rows of G~ in ``reach``
    are all zero (a planar chain, once the in-plane columns have died out: its out-of-plane
    columns have no in-plane rows) the rest of the path adds exact zeros and a one-handle walk
    stops there, as it does where G~ is all zero."""
    H = path_ptr.shape[0] - 1
    # the scratch, as views that count no references (see velocity_kernel)
    own = np.empty(240)
    Gc = raw_view(own, 0, (6, 6))
    Y = raw_view(own, 36, (6, 6))
    Wj = raw_view(own, 72, (6, 6))
    Lc = raw_view(own, 108, (6, 6))
    St = raw_view(own, 144, (6, 6))     # S~ rows (frame 0)
    Ut = raw_view(own, 180, (6, 6))     # (U Dinv)~ rows (frame 0)
    bt = raw_view(own, 216, (6,))
    es = raw_view(own, 222, (6,))
    h = raw_view(own, 228, (6,))
    tmp = raw_view(own, 234, (6,))
    for k in range(6):
        es[k] = 0.0
    # sensitivities of pA (frame 0) to the handle wrenches, walking each path from the handle up
    # to the root: G~ = T_h^T at the handle, G~ <- L~_i G~ at each path body (a rank-nv update).
    # On the way (reciprocity: motion transfer body -> handle = G~^T):
    #   Lam_jk = -sum over the common path of (S~^T G~_j)^T Dinv (S~^T G~_k),   Psi_k = Kt_k^T,
    #   beta_k = sum over path k of G~^T e_i,  e_i = T_i^-1 (c_i + S Dinv (u - U^T c_i))
    # (the handle acceleration for a_in = 0, g = 0), and Y = S~^T G~ is kept (Yst) for the
    # back-substitution (u_i -= Y g); ylo[k]: the first position of path k with Y not zero (the
    # back-substitution skips the rest).  G[pos] keeps G~ on entry to path position pos (H > 1).
    store = H > 1
    for kh in range(H):
        a0 = path_ptr[kh]
        a1 = path_ptr[kh + 1]
        last = a1 - 1
        sh = slot[path_idx[last]]
        tiny = _walk_start(TEb[sh], Trb[sh], Gc, Lc, bt)
        cm = 63
        for k in range(6):
            es[k] = 0.0
        for j in range(kh):
            for k in range(6):
                for l in range(6):
                    Lam[j, kh, k, l] = 0.0
        lo = a1
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
                # The common case written out here in scalars, with nv = 1: e~ into es, S~, and
                # y = S~^T G~; the updates (reached only while y is not zero) are a call.  Written
                # in the loop, not as an inlined function: the arrays an inlined function takes are
                # reference counted on every pass once its control flow gets too involved for
                # numba's pruning, which makes the walk several times slower (see
                # docs/parallel-engine.md).
                yo = yptr[pos]
                r0, r1, r2 = Trb[si, 0], Trb[si, 1], Trb[si, 2]
                E00, E01, E02 = TEb[si, 0, 0], TEb[si, 0, 1], TEb[si, 0, 2]
                E10, E11, E12 = TEb[si, 1, 0], TEb[si, 1, 1], TEb[si, 1, 2]
                E20, E21, E22 = TEb[si, 2, 0], TEb[si, 2, 1], TEb[si, 2, 2]
                c0, c1, c2, c3, c4, c5 = c[i, 0], c[i, 1], c[i, 2], c[i, 3], c[i, 4], c[i, 5]
                s0, s1, s2, s3, s4, s5 = S[iv, 0], S[iv, 1], S[iv, 2], S[iv, 3], S[iv, 4], S[iv, 5]
                # e = c + S Dinv (u - U^T c) ;  e~ = T^-1 e, deferred into es
                x = Dinv[iv, 0] * (u[iv] - (U[iv, 0] * c0 + U[iv, 1] * c1 + U[iv, 2] * c2 + U[iv, 3] * c3
                                            + U[iv, 4] * c4 + U[iv, 5] * c5))
                t0, t1, t2 = c0 + s0 * x, c1 + s1 * x, c2 + s2 * x
                t3, t4, t5 = c3 + s3 * x, c4 + s4 * x, c5 + s5 * x
                w0 = E00 * t0 + E10 * t1 + E20 * t2
                w1 = E01 * t0 + E11 * t1 + E21 * t2
                w2 = E02 * t0 + E12 * t1 + E22 * t2
                es[0] += w0
                es[1] += w1
                es[2] += w2
                es[3] += E00 * t3 + E10 * t4 + E20 * t5 + r1 * w2 - r2 * w1
                es[4] += E01 * t3 + E11 * t4 + E21 * t5 + r2 * w0 - r0 * w2
                es[5] += E02 * t3 + E12 * t4 + E22 * t5 + r0 * w1 - r1 * w0
                # S~ = T^-1 S ;  y = S~^T G~ (kept in Yst)
                w0 = E00 * s0 + E10 * s1 + E20 * s2
                w1 = E01 * s0 + E11 * s1 + E21 * s2
                w2 = E02 * s0 + E12 * s1 + E22 * s2
                z3, z4, z5 = r1 * w2 - r2 * w1, r2 * w0 - r0 * w2, r0 * w1 - r1 * w0
                if s3 != 0.0 or s4 != 0.0 or s5 != 0.0:       # (a revolute joint's S has no linear part)
                    z3 += E00 * s3 + E10 * s4 + E20 * s5
                    z4 += E01 * s3 + E11 * s4 + E21 * s5
                    z5 += E02 * s3 + E12 * s4 + E22 * s5
                # (only the columns of G~ not flushed to zero: bit l of cm; the row in Y, scratch here)
                nz = False
                for l in range(6):
                    y = w0 * Gc[0, l] + w1 * Gc[1, l] + w2 * Gc[2, l] + z3 * Gc[3, l] + z4 * Gc[4, l] + \
                        z5 * Gc[5, l] if (cm >> l) & 1 else 0.0
                    Y[0, l] = y
                    nz = nz or y != 0.0
                if not nz:
                    moved = 0     # no row of Yst written (see below)
                else:
                    for l in range(6):
                        Yst[yo, l] = Y[0, l]
                    St[0, 0], St[0, 1], St[0, 2], St[0, 3], St[0, 4], St[0, 5] = w0, w1, w2, z3, z4, z5
                    moved = _walk_update1(iv, si, TEb, Trb, U, Dinv, Yst, yo, Gc, Lc, bt, es, tiny)
            else:
                moved = _walk_step_any(iv, nv, si, i, TEb, Trb, c, S, U, Dinv, u, Yst, yptr[pos], Gc, Lc, bt, es,
                                       St, Ut, Y, tmp, h, tiny)
            if moved == 0:
                continue      # Y = 0: no cross terms either
            cm = _live_columns(Gc)
            # zeros in the rows of Yst of the 1-DOF positions passed with Y = 0 since the last row
            # written: the back-substitution reads the rows from ylo on, and a long path's tail of
            # zero rows below them is not written at all
            for row in range(yptr[pos + 1], yptr[lo]):
                for l in range(6):
                    Yst[row, l] = 0.0
            lo = pos
            if not store and (moved == 2 or _rows_clear(Gc, reach)):
                break         # nothing more to add on this path (its Y above lo stay unread)
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
                                Lam[j, kh, k, l] -= x * Yst[yptr[pos] + e, l]
        _flush_beta(Gc, es, bt)
        ylo[kh] = lo
        for k in range(6):
            beta[kh, k] = bt[k]
            for l in range(k, 6):
                Lam[kh, kh, k, l] = Lc[k, l]
                Lam[kh, kh, l, k] = Lc[k, l]
            for l in range(6):
                Kt[kh, k, l] = Gc[k, l]
                Psi[kh, l, k] = Gc[k, l]
        for j in range(kh):
            for k in range(6):
                for l in range(6):
                    Lam[kh, j, l, k] = Lam[j, kh, k, l]
    own[0] = 0.0        # the scratch's memory held to here




@njit(cache=True)
def solve_kernel(parent, idx_v, a_in, g, path_ptr, path_idx, yptr, Yst, ylo, E, r, S, c, U, Dinv, u, a, qdd):
    """Back-substitution: the handle wrenches g change u only on the paths (u -= Y g, Y kept by
    the reduce kernel, zero before ylo); then ABA pass 3 from a_in.  u is changed in place, so
    each reduction serves one back-substitution (``PartKernel.solve`` enforces it): keeping u
    would cost two more passes over the handle paths, which on a chain cut in two are all of the
    first part's bodies."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, a_in, g, path_ptr = unowned(parent), unowned(idx_v), unowned(a_in), unowned(g), unowned(path_ptr)
    path_idx, yptr, Yst, ylo, E = unowned(path_idx), unowned(yptr), unowned(Yst), unowned(ylo), unowned(E)
    r, S, c, U, Dinv, u, a = unowned(r), unowned(S), unowned(c), unowned(U), unowned(Dinv), unowned(u), unowned(a)
    qdd = unowned(qdd)
    n = parent.shape[0]
    H = path_ptr.shape[0] - 1
    nvt = S.shape[0]
    for kh in range(H):
        for pos in range(max(path_ptr[kh], ylo[kh]), path_ptr[kh + 1]):
            i = path_idx[pos]
            iv = idx_v[i]
            nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
            yo = yptr[pos]
            for d in range(nv):
                s = 0.0
                for l in range(6):
                    s += Yst[yo + d, l] * g[kh, l]
                u[iv + d] -= s
    aba_forward_pass2(parent, idx_v, a_in, E, r, S, c, U, Dinv, u, a, qdd)


@njit(cache=True)
def hybrid_finish(idx_v, nvt, act, qdd_in, U, a, u, qdd, tau_out):
    """After a back-substitution of a reduction with given accelerations (``active`` in
    :func:`reduce_kernel`): at each body of ``act`` (the active joints, local numbering) the given
    qdd is copied (the pass found zero relative to the augmented c) and the joint force
    tau = S^T (IA a + pA) = U^T a - u is read (u = -S^T pA, the handle wrenches' part included
    by the back-substitution).  ``tau_out`` holds the given forces of the other joints already."""
    n = idx_v.shape[0]
    for j in range(act.shape[0]):
        i = act[j]
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        for d in range(nv):
            s = -u[iv + d]
            for k in range(6):
                s += U[iv + d, k] * a[i, k]
            tau_out[iv + d] = s
            qdd[iv + d] = qdd_in[iv + d]


@njit(cache=True)
def wrench_kernel(parent, idx_v, idx_s, mass, com, I_com, E, r, v, a, S, tau, Wt, f_ext, has_fext, handles, g,
                  F, FS, FT):
    """Every joint wrench of the part after the back-substitution, by the inward pass of RNEA:
    F_i = I_i a_i + v_i x* I_i v_i - f_ext,i + sum_c X_c^T F_c, where at handle k the child parts'
    root-joint wrenches arrive as g_k (already moved to the handle); then each joint's split
    F_S = W^T F, F_T = (S^T S)^-1 tau (as ``partree.cfa``).  F_0 is the part's root-joint wrench."""
    n = parent.shape[0]
    nvt = S.shape[0]
    h = np.empty(6)
    tmp = np.empty(6)
    G = np.empty((6, 6))
    for i in range(n):
        body_force(mass[i], com[i], I_com[i], v[i], a[i], F[i], h, tmp)
        if has_fext:
            for k in range(6):
                F[i, k] -= f_ext[i, k]
    for kh in range(handles.shape[0]):
        for k in range(6):
            F[handles[kh], k] += g[kh, k]
    for i in range(n - 1, -1, -1):
        p = parent[i]
        if p >= 0:
            xform_force_T_add(E[i], r[i], F[i], F[p])
        project_wrench(i, n, nvt, idx_v, idx_s, S, tau, Wt, F, FS, FT, G)


@njit(cache=True)
def momentum_forces_kernel(parent, mass, com, I_com, g_in, E, r, f_ext, has_fext, ag, F, tmp, up):
    """The momentum form's wrenches of gravity and external forces (after ``reduce_kernel``, which
    formed E and r): ag_i, the gravity field in body i's coordinates from g_in (the field's
    linear part in frame 0; its angular part is zero), F_i = I_i ag_i + f_ext,i (kept in F), and
    ``up``, the part's total sum_i X_i0^T F_i moved to frame 0, which the root adds up the parts
    tree (the child parts' totals are not in it)."""
    body_wrench_pass(parent, mass, com, I_com, g_in, E, r, f_ext, has_fext, ag, F)
    n = parent.shape[0]
    for i in range(n):
        for k in range(6):
            tmp[i, k] = F[i, k]
    subtree_sum_pass(parent, E, r, tmp)
    for k in range(6):
        up[k] = 0.0
    for i in range(n):
        if parent[i] < 0:
            xform_force_T_add(E[i], r[i], tmp[i], up)


@njit(cache=True)
def momentum_rate_kernel(parent, jtype, idx_v, mass, com, I_com, E, r, S, V, v, handles, g, Fh, F, mu, tau, pdot):
    """dp/dt of the part's joints (seed 001's eq. 7, ``partree.algorithms.momentum_rhs``) after a
    back-substitution at rest with the momenta as joint forces: V (the pass's body accelerations)
    are then the body velocities and v (its qdd) the joint velocities.  mu_i = I_i V_i summed over
    the subtree, with the child parts' subtree momenta entering at the handles as g (the root
    solve's handle wrenches: at rest they are exactly those momenta); F (from
    :func:`momentum_forces_kernel`) summed likewise with the child parts' totals Fh at the
    handles; then pdot_i = tau_i + S_i^T (F_i - V_i x* mu_i) + (dS_i/dt)^T mu_i."""
    n = parent.shape[0]
    for i in range(n):
        inertia_times(mass[i], com[i], I_com[i], V[i], mu[i])
    for kh in range(handles.shape[0]):
        h = handles[kh]
        for k in range(6):
            mu[h, k] += g[kh, k]
            F[h, k] += Fh[kh, k]
    subtree_sum_pass(parent, E, r, mu)
    momentum_rate_pass(parent, jtype, idx_v, tau, E, r, S, V, mu, v, F, pdot)
