"""Articulated-body algorithm (Featherstone): forward dynamics in O(N).

Three passes over the regular numbering, each a compiled function of its own, as in Pinocchio's
``AbaForwardStep1`` / ``AbaBackwardStep`` / ``AbaForwardStep2``:

1. :func:`aba_forward_pass1`, outward: joint kinematics, velocities v, velocity-product
   accelerations c, rigid-body inertias IA = I and bias forces pA = v x* I v - f_ext;
2. :func:`aba_backward_pass`, inward: at each body U = IA S, D = S^T U, u = tau - S^T pA, and
   the articulated inertia IA - U D^-1 U^T and bias force pA + Ia c + U D^-1 u handed to its
   parent (:func:`articulated_project` for joints of more than one degree of freedom);
3. :func:`aba_forward_pass2`, outward: accelerations a and qdd from the base acceleration.

Passes 2 and 3 are written once for hybrid dynamics (:func:`hybrid_backward_pass`,
:func:`hybrid_forward_pass2`: a per-joint flag marks the joints whose acceleration is given, as
in Featherstone's hybrid articulated-body algorithm, ``partree.hybrid_dynamics``); ABA runs them
with no joint flagged, one predictable branch per body.

The parallel engine's parts run the same passes (``partree.parallel.kernels``): its
back-substitution is :func:`aba_forward_pass2`, its reduce kernel pass 2 with the inertias kept
in hand-over buffers instead of per body, and :func:`articulated_project`.  The per-body step of
pass 2 is written out in both rather than shared through an inlined helper: numba
reference-counts the array arguments of an inlined function that branches at run time, once per
body, which made ABA markedly slower (docs/performance.md).

Kernel arguments, shared by the passes (n bodies, nv velocity coordinates):

==============================  ===================================================================
parent (n,) int                 parent body, -1 for the base (regular numbering: parent[i] < i)
jtype, axis, axis2              joint codes (``partree.joints``), unit axes (n, 3)
E_tree, r_tree                  fixed placements X_tree: (n, 3, 3) rotations, (n, 3) offsets
mass, com, I_com                body mass (n,), centre of mass (n, 3), inertia about it (n, 3, 3)
idx_q, idx_v (n,) int           first configuration / velocity index of each joint
gravity (3,)                    enters as the base acceleration a0 = [0; -g]
q, qd, tau                      state and joint forces; f_ext (n, 6) body wrenches (``has_fext``)
E, r, v, c, IA, pA, a, S        workspace (``Model.create_data``): X_up, velocities, c, articulated
U, Dinv, u, qdd                 inertias and biases, accelerations, motion subspaces, U, D^-1, u, qdd
==============================  ===================================================================
"""
import numpy as np
from numba import njit, prange

from .. import checks
from ..errors import PartreeInputError
from . import batch
from .packed import (ERR_SHAPE, NO_FORCES, OK, check_state, raw_view,
                     model_buffer, model_views, restrict, workspace_length, workspace_views)
from ..joints import FIXED, PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at
from .linalg import spd_inverse
from .welded import computing_forces, computing_model, original_body
from .primitives import (congruence_add, cross_force, cross_motion, inertia_from_compact, inertia_times,
                         xform_force_T_add, xform_motion)


#: scratch values of each pass and of the whole algorithm (the passes run one after the other)
PASS1_SCRATCH, BACKWARD_SCRATCH, PASS2_SCRATCH = 42, 126, 18
SCRATCH = 6 + BACKWARD_SCRATCH
#: the flags of ABA's passes: no joint active (every joint's torque given)
NONE_ACTIVE = np.zeros(0, dtype=np.bool_)
#: IA of a pass that reads no inertia (ABA's pass 3)
NO_INERTIAS = np.zeros((0, 6, 6))


@njit(cache=True)
def aba_forward_pass1(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                      f_ext, has_fext, E, r, v, c, IA, pA, S):
    """Pass 1, outward: X_up (E, r), S, v, c, IA = I (rigid-body inertias) and pA = v x* I v - f_ext."""
    aba_forward_pass1_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                         f_ext, has_fext, E, r, v, c, IA, pA, S, np.empty(PASS1_SCRATCH))


@njit(cache=True)
def aba_forward_pass1_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                         f_ext, has_fext, E, r, v, c, IA, pA, S, sc):
    """:func:`aba_forward_pass1` with its scratch arrays taken from ``sc`` (PASS1_SCRATCH values)."""
    n = parent.shape[0]
    R = raw_view(sc, 0, (3, 3))
    R2 = raw_view(sc, 9, (3, 3))
    cJ = raw_view(sc, 18, (6,))
    vJ = raw_view(sc, 24, (6,))
    h = raw_view(sc, 30, (6,))
    tmp = raw_view(sc, 36, (6,))
    for i in range(n):
        iv = idx_v[i]
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            nv = joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
            for k in range(6):
                vJ[k] = S[iv, k] * qd[iv]
        elif jtype[i] == PRISMATIC:
            nv = joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
            for k in range(6):
                vJ[k] = S[iv, k] * qd[iv]
        elif jtype[i] == FIXED:
            nv = joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
            for k in range(6):
                vJ[k] = 0.0
        else:
            nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
            for k in range(6):
                vJ[k] = 0.0
            for d in range(nv):
                for k in range(6):
                    vJ[k] += S[iv + d, k] * qd[iv + d]
        p = parent[i]
        if p < 0:
            for k in range(6):
                v[i, k] = vJ[k]
                c[i, k] = cJ[k]
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
def aba_backward_pass(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u):
    """Pass 2, inward: articulated inertias IA and bias forces pA (in place), U, D^-1, u.
    Returns -1, or the body whose joint-space inertia D is singular."""
    return aba_backward_pass_in(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, np.empty(BACKWARD_SCRATCH))


@njit(cache=True)
def aba_backward_pass_in(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, sc):
    """:func:`aba_backward_pass` with its scratch arrays taken from ``sc`` (BACKWARD_SCRATCH values):
    :func:`hybrid_backward_pass_in` with every joint passive."""
    return hybrid_backward_pass_in(parent, idx_v, NONE_ACTIVE, tau, tau, E, r, c, IA, pA, S, U, Dinv, u, sc)


@njit(cache=True)
def aba_forward_pass2(parent, idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd):
    """Pass 3, outward: accelerations a and qdd = D^-1 (u - U^T a_i') from ``a_base``, the
    acceleration of the bodies' common parent in its own coordinates (a0 = [0; -g] for the base;
    a part's incoming acceleration in the parallel engine)."""
    aba_forward_pass2_in(parent, idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd, np.empty(PASS2_SCRATCH))


@njit(cache=True)
def aba_forward_pass2_in(parent, idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd, sc):
    """:func:`aba_forward_pass2` with its scratch arrays taken from ``sc`` (PASS2_SCRATCH values):
    :func:`hybrid_forward_pass2_in` with every joint passive (IA and pA are not read then)."""
    hybrid_forward_pass2_in(parent, idx_v, NONE_ACTIVE, a_base, u, u, E, r, S, c, NO_INERTIAS, a, U, Dinv, u, a,
                            qdd, u, a, False, sc)


@njit(cache=True)
def hybrid_backward_pass(parent, idx_v, active, tau, qdd_in, E, r, c, IA, pA, S, U, Dinv, u):
    """Pass 2, inward: articulated inertias IA and bias forces pA (in place); U, D^-1, u of the
    passive joints.  Returns -1, or the body whose passive joint has a singular D."""
    return hybrid_backward_pass_in(parent, idx_v, active, tau, qdd_in, E, r, c, IA, pA, S, U, Dinv, u,
                                   np.empty(BACKWARD_SCRATCH))


@njit(cache=True)
def hybrid_backward_pass_in(parent, idx_v, active, tau, qdd_in, E, r, c, IA, pA, S, U, Dinv, u, sc):
    """:func:`hybrid_backward_pass` with its scratch arrays taken from ``sc`` (BACKWARD_SCRATCH values)."""
    n = parent.shape[0]
    nvt = S.shape[0]
    T = raw_view(sc, 0, (6, 6))
    Ia = raw_view(sc, 36, (6, 6))
    D = raw_view(sc, 72, (6, 6))
    tmp = raw_view(sc, 108, (6,))
    pa = raw_view(sc, 114, (6,))
    ac = raw_view(sc, 120, (6,))
    hybrid = active.shape[0] > 0
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = idx_v[i + 1] - iv if i + 1 < n else nvt - iv
        p = parent[i]
        if hybrid and nv == 1:
            # 1 DOF, either kind, without a branch on the kind (a random mix of active and passive
            # joints would mispredict one at every body): an active joint is a passive one whose
            # D^-1 is taken as 0 (nothing eliminated: Ia = IA, the parent gets IA itself) and whose
            # c is c + s qdd (pa = pA + Ia (c + s qdd)); u and U are formed for both
            act = active[i]
            fa = 1.0 if act else 0.0
            Dd = 0.0
            uu = (1.0 - fa) * tau[iv]
            for k in range(6):
                sk = 0.0
                for l in range(6):
                    sk += IA[i, k, l] * S[iv, l]
                U[iv, k] = sk
                Dd += S[iv, k] * sk
                uu -= S[iv, k] * pA[i, k]
            if not (act or Dd > 0.0):
                return i
            Di = (1.0 - fa) / (Dd + fa)
            Dinv[iv, 0] = Di
            u[iv] = uu
            if p < 0:
                continue
            wq = fa * qdd_in[iv]
            for k in range(6):
                tmp[k] = U[iv, k] * Di
                ac[k] = c[i, k] + S[iv, k] * wq
            for k in range(6):
                for l in range(6):
                    Ia[k, l] = IA[i, k, l] - tmp[k] * U[iv, l]
            w = uu * Di
            for k in range(6):
                s = pA[i, k] + U[iv, k] * w
                for l in range(6):
                    s += Ia[k, l] * ac[l]
                pa[k] = s
            congruence_add(E[i], r[i], Ia, IA[p], T)
            xform_force_T_add(E[i], r[i], pa, pA[p])
            continue
        if hybrid and active[i]:
            # known relative motion: the parent gets IA itself and pA + IA (c + S qdd)
            if p < 0:
                continue
            if nv == 1:
                w = qdd_in[iv]
                for k in range(6):
                    ac[k] = c[i, k] + S[iv, k] * w
            else:
                for k in range(6):
                    ac[k] = c[i, k]
                for d in range(nv):
                    w = qdd_in[iv + d]
                    for k in range(6):
                        ac[k] += S[iv + d, k] * w
            for k in range(6):
                s = pA[i, k]
                for l in range(6):
                    s += IA[i, k, l] * ac[l]
                pa[k] = s
            congruence_add(E[i], r[i], IA[i], IA[p], T)
            xform_force_T_add(E[i], r[i], pa, pA[p])
            continue
        if nv == 1:
            # ABA's step, written out: U = IA s, D = s^T U, u = tau - s^T pA
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
            if p < 0:
                continue
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
                if not spd_inverse(D, nv, T):
                    return i
                for d in range(nv):
                    for e in range(nv):
                        Dinv[iv + d, e] = T[d, e]
            if p < 0:
                continue
            articulated_project(IA[i], pA[i], c[i], U, Dinv, u, iv, nv, Ia, pa, tmp)
        congruence_add(E[i], r[i], Ia, IA[p], T)
        xform_force_T_add(E[i], r[i], pa, pA[p])
    return -1


@njit(cache=True)
def hybrid_forward_pass2(parent, idx_v, active, a_base, tau, qdd_in, E, r, S, c, IA, pA, U, Dinv, u, a, qdd,
                         tau_out, W, want_w):
    """Pass 3, outward from ``a_base`` (a0 = [0; -g]): accelerations a; qdd (given ones copied,
    passive ones ABA's D^-1 (u - U^T a')); tau_out (passive ones copied, active ones
    S^T (IA a + pA)); with ``want_w`` the joint wrenches IA a + pA of every body in W."""
    hybrid_forward_pass2_in(parent, idx_v, active, a_base, tau, qdd_in, E, r, S, c, IA, pA, U, Dinv, u, a, qdd,
                            tau_out, W, want_w, np.empty(PASS2_SCRATCH))


@njit(cache=True)
def hybrid_forward_pass2_in(parent, idx_v, active, a_base, tau, qdd_in, E, r, S, c, IA, pA, U, Dinv, u, a, qdd,
                            tau_out, W, want_w, sc):
    """:func:`hybrid_forward_pass2` with its scratch arrays taken from ``sc`` (PASS2_SCRATCH values)."""
    n = parent.shape[0]
    nvt = S.shape[0]
    tmp = raw_view(sc, 0, (6,))
    h = raw_view(sc, 6, (6,))
    f = raw_view(sc, 12, (6,))
    hybrid = active.shape[0] > 0
    for i in range(n):
        iv = idx_v[i]
        nv = idx_v[i + 1] - iv if i + 1 < n else nvt - iv
        p = parent[i]
        if p < 0:
            xform_motion(E[i], r[i], a_base, tmp)
        else:
            xform_motion(E[i], r[i], a[p], tmp)
        for k in range(6):
            a[i, k] = tmp[k] + c[i, k]
        if hybrid and nv == 1:
            # 1 DOF, either kind (see the inward pass): qdd chosen without a branch; the wrench
            # IA a + pA formed for both kinds (cheaper than a mispredicted branch at every body),
            # its projection kept as the force of an active joint
            act = active[i]
            s = u[iv]
            for k in range(6):
                s -= U[iv, k] * a[i, k]
            x = qdd_in[iv] if act else Dinv[iv, 0] * s
            qdd[iv] = x
            for k in range(6):
                a[i, k] += S[iv, k] * x
            t = 0.0
            for k in range(6):
                s = pA[i, k]
                for l in range(6):
                    s += IA[i, k, l] * a[i, l]
                f[k] = s
                t += S[iv, k] * s
            if want_w:
                for k in range(6):
                    W[i, k] = f[k]
            tau_out[iv] = t if act else tau[iv]
            continue
        if hybrid and active[i]:
            if nv == 1:
                # written out: a = a' + s qdd, tau = s^T (IA a + pA)
                x = qdd_in[iv]
                qdd[iv] = x
                for k in range(6):
                    a[i, k] += S[iv, k] * x
                t = 0.0
                for k in range(6):
                    s = pA[i, k]
                    for l in range(6):
                        s += IA[i, k, l] * a[i, l]
                    f[k] = s
                    t += S[iv, k] * s
                tau_out[iv] = t
            else:
                for d in range(nv):
                    x = qdd_in[iv + d]
                    qdd[iv + d] = x
                    for k in range(6):
                        a[i, k] += S[iv + d, k] * x
                for k in range(6):
                    s = pA[i, k]
                    for l in range(6):
                        s += IA[i, k, l] * a[i, l]
                    f[k] = s
                for d in range(nv):
                    t = 0.0
                    for k in range(6):
                        t += S[iv + d, k] * f[k]
                    tau_out[iv + d] = t
            if want_w:
                for k in range(6):
                    W[i, k] = f[k]
            continue
        if nv == 1:
            s = u[iv]
            for k in range(6):
                s -= U[iv, k] * a[i, k]
            x = Dinv[iv, 0] * s
            qdd[iv] = x
            if hybrid:
                tau_out[iv] = tau[iv]
            for k in range(6):
                a[i, k] += S[iv, k] * x
        else:
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
                if hybrid:
                    tau_out[iv + d] = tau[iv + d]
            for d in range(nv):
                for k in range(6):
                    a[i, k] += S[iv + d, k] * qdd[iv + d]
        if want_w:
            for k in range(6):
                s = pA[i, k]
                for l in range(6):
                    s += IA[i, k, l] * a[i, l]
                W[i, k] = s


@njit(cache=True)
def aba_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
               q, qd, tau, f_ext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd):
    """The three passes (arguments: see the module docstring).  Returns -1 on success, else the
    body whose joint-space inertia D is singular."""
    return aba_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                         q, qd, tau, f_ext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, np.empty(SCRATCH))


@njit(cache=True)
def aba_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                  q, qd, tau, f_ext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, sc):
    """:func:`aba_kernel` with the passes' scratch arrays taken from ``sc`` (SCRATCH values), so
    that a call allocates nothing."""
    a0 = raw_view(sc, 0, (6,))
    work = raw_view(sc, 6, (BACKWARD_SCRATCH,))
    aba_forward_pass1_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                         f_ext, has_fext, E, r, v, c, IA, pA, S, work)
    bad = aba_backward_pass_in(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, work)
    if bad >= 0:
        return bad
    a0[0] = 0.0
    a0[1] = 0.0
    a0[2] = 0.0
    a0[3] = -gravity[0]
    a0[4] = -gravity[1]
    a0[5] = -gravity[2]
    aba_forward_pass2_in(parent, idx_v, a0, E, r, S, c, U, Dinv, u, a, qdd, work)
    return -1


@njit(cache=True, inline="always")
def articulated_project(IA_i, pA_i, c_i, U, Dinv, u, iv, nv, Ia, pa, tmp):
    """What a body with a multi-DOF joint passes to its parent (before the transform):
    Ia = IA - U Dinv U^T and pa = pA + Ia c + U Dinv u (the 1-DOF case is written out inline
    in the kernels)."""
    for k in range(6):
        for l in range(6):
            Ia[k, l] = IA_i[k, l]
    for d in range(nv):
        for k in range(6):
            w = 0.0
            for e in range(nv):
                w += Dinv[iv + d, e] * U[iv + e, k]
            tmp[k] = w
        for k in range(6):
            for l in range(6):
                Ia[k, l] -= U[iv + d, k] * tmp[l]
    for k in range(6):
        s = pA_i[k]
        for l in range(6):
            s += Ia[k, l] * c_i[l]
        pa[k] = s
    for d in range(nv):
        w = 0.0
        for e in range(nv):
            w += Dinv[iv + d, e] * u[iv + e]
        for k in range(6):
            pa[k] += U[iv + d, k] * w


@njit(cache=True)
def aba_call(mb, wb, q, qd, tau, fext, out, check):
    """One forward-dynamics evaluation on a packed model and workspace (``partree.algorithms.packed``):
    the compiled checks, :func:`aba_kernel` on the model with its welded bodies merged
    (``partree.algorithms.welded``), qdd copied to ``out``.  Returns ``packed.OK``, an error code,
    or the body whose joint-space inertia is singular."""
    e = check_state(mb, wb, q, qd, tau, fext, check)
    if e != OK:
        return e
    nv = mb[3]
    if out.shape[0] != nv:
        return ERR_SHAPE
    cb, n = computing_model(mb, wb)         # welded bodies merged (partree.algorithms.welded)
    f = computing_forces(mb, wb, n, fext)
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, _, _ = model_views(cb)
    E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, _, sc = workspace_views(wb, mb[1], nv, n)
    bad = aba_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                        q, qd, tau, f, f.shape[0] > 0, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, sc)
    if bad >= 0:
        return original_body(mb, wb, n, bad)
    for k in range(nv):
        out[k] = qdd[k]
    return OK


@njit(cache=True, parallel=True)
def aba_batch(mb, Q, QD, TAU, FEXT, OUT, check, codes, chunks):
    """:func:`aba_call` for every row (state) of Q, QD, TAU into OUT's rows, in ``chunks`` runs of
    consecutive rows spread over the threads, each run with a workspace of its own; FEXT (1 or B,
    n or 0, 6): wrenches per state or shared.  Each state's return code goes to ``codes``."""
    B = Q.shape[0]
    per = FEXT.shape[0] > 1
    for c in prange(chunks):
        wb = np.zeros(workspace_length(mb))
        for s in range(B * np.int64(c) // chunks, B * (np.int64(c) + 1) // chunks):
            f = FEXT[s] if per else FEXT[0]
            codes[s] = aba_call(mb, wb, Q[s], QD[s], TAU[s], f, OUT[s], check)


def aba(model, q, qd, tau, f_ext=None, data=None, out=None, check=True, threads=None):
    """Forward dynamics: joint accelerations qdd (nv,) from q (nq,), qd (nv,), tau (nv,).

    Parameters
    ----------
    model : Model
    q, qd, tau : ndarray
        Configuration (nq,), velocity (nv,) and joint forces (nv,); or 2-D arrays, one state per
        row (a batch: all rows are evaluated, spread over the cores, and qdd is (B, nv)).
    f_ext : ndarray or dict, optional
        External wrenches [n; f] on each body, in body coordinates: an (n, 6) array or a dict
        {joint name: wrench}; for a batch also (B, n, 6), wrenches per state.
    data : Data, optional
        A reusable workspace (``model.create_data()``); the model's own is used when omitted.  A
        batch uses workspaces of its own.
    out : ndarray, optional
        A writable C-contiguous float64 array of shape (nv,) (a batch: (B, nv)) that receives qdd
        and is returned; without it a new array is returned.
    check : bool
        False skips the checks of the values (finite numbers, nonzero quaternions) on arrays
        that are already C-contiguous float64 of the right sizes, for inner loops whose inputs
        are known to be good; sizes are always checked.
    threads : int, optional
        Threads for a batch (see ``partree.set_num_threads``); the current setting when omitted.

    Inputs that are C-contiguous float64 arrays of the right sizes go straight to the compiled
    call, which checks them; anything else (lists, other dtypes, a batch) is checked and
    converted first by the same rules.
    """
    pk = model._packed
    if pk is not None and _CALL_READY:
        try:
            res = np.empty(pk.nv) if out is None else out
            if aba_call(pk.buf, (model._data if data is None else data)._buf, q, qd, tau,
                        NO_FORCES if f_ext is None else f_ext, res, check) == OK:
                return res
        except (TypeError, AttributeError):
            pass        # not the compiled call's types: checked and converted below
    return _aba_checked(model, q, qd, tau, f_ext, data, out, threads)


#: the one signature of :func:`aba_call` (``packed.restrict``)
CALL_SIGNATURE = "int64(int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[:, ::1], " \
                 "float64[::1], boolean)"
_CALL_READY = False


def _ready():
    global _CALL_READY
    if not _CALL_READY:
        restrict(aba_call, CALL_SIGNATURE)
        _CALL_READY = True


def _singular(model, bad):
    return PartreeInputError(
        f"joint {model.joint_names[bad]!r} (body {bad}): its subtree has a singular inertia "
        f"along the joint's motion (massless subtree?); forward dynamics is undefined")


def _aba_checked(model, q, qd, tau, f_ext, data, out, threads):
    """``aba`` with every input checked and converted (the messages of ``partree.checks``)."""
    if batch.is_batch(q) or batch.is_batch(qd) or batch.is_batch(tau):
        return _aba_batch(model, q, qd, tau, f_ext, out, threads)
    q, qd = checks.state(model, q, qd)
    tau = checks.vector(model, tau, model.nv, "tau", "nv")
    F, has_f = checks.external_forces(model, f_ext)
    d = checks.data_for(model, data)
    out = checks.out_array(out, (model.nv,))
    pk = model_buffer(model)
    if pk is None:
        bad = aba_kernel(*checks.model_args(model), model.gravity, q, qd, tau, F, has_f,
                         d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, d.qdd)
        if bad < 0:
            out[:] = d.qdd
            bad = OK
    else:
        _ready()
        bad = aba_call(pk.buf, d._buf, checks.writable(q), checks.writable(qd), checks.writable(tau),
                       checks.writable(F) if has_f else NO_FORCES, out, False)
    if bad >= 0:
        raise _singular(model, bad)
    if bad != OK:
        raise PartreeInputError(f"aba: the compiled call refused checked inputs (code {bad}; an internal error)")
    return out


def _aba_batch(model, Q, QD, TAU, f_ext, out, threads):
    Q, QD, TAU = batch.rows(model, (("q", Q, model.nq, "nq"), ("qd", QD, model.nv, "nv"),
                                    ("tau", TAU, model.nv, "nv")))
    B = Q.shape[0]
    F = batch.forces(model, f_ext, B)
    out = checks.out_array(out, (B, model.nv))

    def single(s):
        return _aba_checked(model, Q[s], QD[s], TAU[s], None if F.shape[1] == 0 else F[s if F.shape[0] > 1 else 0],
                            None, None, None)

    pk = model_buffer(model)
    if pk is None:
        batch.each_state(B, single, out.__setitem__)
        return out
    codes = np.empty(B, dtype=np.int64)
    with batch.threads_for(threads, B) as T:
        aba_batch(pk.buf, Q, QD, TAU, F, out, True, codes, batch.chunks(B, T))
    fail = batch.first_failure(codes, OK)
    if fail is not None:
        batch.state_error(fail[0], lambda: single(fail[0]))
    return out
