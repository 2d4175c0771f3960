"""Recursive Newton-Euler algorithm: inverse dynamics in O(N), with every joint's wrench.

Outward: velocities v, accelerations a, body forces f = I a + v x* I v - f_ext.
Inward: tau_i = S_i^T f_i, f_parent += X_up^T f_i.  After the inward pass f_i is the wrench
the parent transmits to body i across joint i, in body i's (joint) frame, as [n; f].
"""
import numpy as np
from numba import njit, prange

from ..joints import FIXED, PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at
from .. import checks
from ..errors import PartreeInputError
from . import batch
from .packed import (ERR_SHAPE, NO_FORCES, OK, check_state, raw_view, model_buffer,
                     model_views, restrict, workspace_length, workspace_views)
from .welded import computing_forces, computing_model
from .primitives import body_force, cross_motion, xform_force_T_add, xform_motion


@njit(cache=True)
def rnea_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                q, qd, qdd, f_ext, has_fext, E, r, v, a, f, S, tau):
    """Inverse dynamics of the tree: tau, and f (n, 6) the joint wrenches."""
    rnea_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                   q, qd, qdd, f_ext, has_fext, E, r, v, a, f, S, tau, np.empty(SCRATCH))


#: scratch values of :func:`rnea_kernel_in`
SCRATCH = 48


@njit(cache=True)
def rnea_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                   q, qd, qdd, f_ext, has_fext, E, r, v, a, f, S, tau, sc):
    """:func:`rnea_kernel` with its scratch arrays taken from ``sc`` (SCRATCH values), so that a
    call allocates nothing."""
    n = parent.shape[0]
    nvt = S.shape[0]
    R = raw_view(sc, 0, (3, 3))
    R2 = raw_view(sc, 9, (3, 3))
    cJ = raw_view(sc, 18, (6,))
    vJ = raw_view(sc, 24, (6,))
    h = raw_view(sc, 30, (6,))
    tmp = raw_view(sc, 36, (6,))
    a0 = raw_view(sc, 42, (6,))
    a0[0] = 0.0
    a0[1] = 0.0
    a0[2] = 0.0
    a0[3] = -gravity[0]
    a0[4] = -gravity[1]
    a0[5] = -gravity[2]
    for i in range(n):
        iv = idx_v[i]
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            nv = joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == PRISMATIC:
            nv = joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == FIXED:
            nv = joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        else:
            nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
        for k in range(6):
            vJ[k] = 0.0
            h[k] = cJ[k]
        for d in range(nv):
            for k in range(6):
                vJ[k] += S[iv + d, k] * qd[iv + d]
                h[k] += S[iv + d, k] * qdd[iv + d]
        p = parent[i]
        if p < 0:
            for k in range(6):
                v[i, k] = vJ[k]
            xform_motion(E[i], r[i], a0, tmp)
            for k in range(6):
                a[i, k] = tmp[k] + h[k]
        else:
            xform_motion(E[i], r[i], v[p], tmp)
            for k in range(6):
                v[i, k] = tmp[k] + vJ[k]
            xform_motion(E[i], r[i], a[p], tmp)
            for k in range(6):
                a[i, k] = tmp[k] + h[k]
            cross_motion(v[i], vJ, tmp)
            for k in range(6):
                a[i, k] += tmp[k]
        body_force(mass[i], com[i], I_com[i], v[i], a[i], f[i], h, tmp)
        if has_fext:
            for k in range(6):
                f[i, k] -= f_ext[i, k]
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        for d in range(nv):
            s = 0.0
            for k in range(6):
                s += S[iv + d, k] * f[i, k]
            tau[iv + d] = s
        p = parent[i]
        if p >= 0:
            xform_force_T_add(E[i], r[i], f[i], f[p])


@njit(cache=True)
def rnea_call(mb, wb, q, qd, qdd, fext, out, wout, check):
    """One inverse-dynamics evaluation on a packed model and workspace (``partree.algorithms.packed``):
    the compiled checks, :func:`rnea_kernel`, tau copied to ``out`` and, when ``wout`` has rows,
    the joint wrenches to ``wout`` (n, 6).  Without ``wout`` rows the kernel runs on the model
    with its welded bodies merged (``partree.algorithms.welded``): their joints' wrenches are not
    asked for.  Returns ``packed.OK`` or an error code."""
    e = check_state(mb, wb, q, qd, qdd, fext, check)
    if e != OK:
        return e
    n = mb[1]
    nv = mb[3]
    if out.shape[0] != nv or (wout.shape[0] != 0 and (wout.shape[0] != n or wout.shape[1] != 6)):
        return ERR_SHAPE
    cb, f = mb, fext
    if wout.shape[0] == 0:                  # tau alone: welded bodies merged (partree.algorithms.welded)
        cb, n = computing_model(mb, wb)
        f = computing_forces(mb, wb, n, fext)
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, _, _ = model_views(cb)
    E, r, v, _, _, pA, a, S, _, _, _, _, tau, sc = workspace_views(wb, mb[1], nv, n)
    rnea_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                   q, qd, qdd, f, f.shape[0] > 0, E, r, v, a, pA, S, tau, sc)
    for k in range(nv):
        out[k] = tau[k]
    if wout.shape[0] != 0:
        for i in range(n):
            for k in range(6):
                wout[i, k] = pA[i, k]
    return OK


@njit(cache=True, parallel=True)
def rnea_batch(mb, Q, QD, QDD, FEXT, OUT, WOUT, check, codes, chunks):
    """:func:`rnea_call` for every row (state), in ``chunks`` runs of consecutive rows spread over
    the threads, each run with a workspace of its own; FEXT (1 or B, n or 0, 6) wrenches per state
    or shared; WOUT (B, n, 6) the joint wrenches, or (1, 0, 6) for none."""
    B = Q.shape[0]
    per = FEXT.shape[0] > 1
    want = WOUT.shape[1] > 0
    for c in prange(chunks):
        wb = np.zeros(workspace_length(mb))
        for s in range(B * np.int64(c) // chunks, B * (np.int64(c) + 1) // chunks):
            f = FEXT[s] if per else FEXT[0]
            w = WOUT[s] if want else WOUT[0]
            codes[s] = rnea_call(mb, wb, Q[s], QD[s], QDD[s], f, OUT[s], w, check)


#: the one signature of :func:`rnea_call` (``packed.restrict``)
CALL_SIGNATURE = "int64(int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[:, ::1], " \
                 "float64[::1], float64[:, ::1], boolean)"
_CALL_READY = False


def _ready():
    global _CALL_READY
    if not _CALL_READY:
        restrict(rnea_call, CALL_SIGNATURE)
        _CALL_READY = True


def rnea(model, q, qd, qdd, f_ext=None, data=None, return_wrenches=False, out=None, check=True, threads=None):
    """Inverse dynamics: tau (nv,) such that aba(q, qd, tau, f_ext) = qdd.

    With ``return_wrenches=True`` also returns the (n, 6) array of joint wrenches [n; f]: row i
    is the wrench transmitted from parent[i] to body i across joint i, in body i's frame.

    2-D q, qd, qdd (one state per row) are a batch: every row is evaluated, spread over the
    cores, tau is (B, nv) and the wrenches (B, n, 6).  ``out`` (a writable C-contiguous float64
    array of tau's shape) receives tau and is returned; ``check=False`` skips the value checks of
    inputs that are already C-contiguous float64 arrays of the right sizes; ``threads``: threads
    for a batch.  See :func:`partree.aba` for these keywords and ``f_ext``, ``data``.
    """
    pk = model._packed
    if pk is not None and _CALL_READY:
        try:
            res = np.empty(pk.nv) if out is None else out
            W = np.empty((pk.n, 6)) if return_wrenches else NO_FORCES
            if rnea_call(pk.buf, (model._data if data is None else data)._buf, q, qd, qdd,
                         NO_FORCES if f_ext is None else f_ext, res, W, check) == OK:
                return (res, W) if return_wrenches else res
        except (TypeError, AttributeError):
            pass        # not the compiled call's types: checked and converted below
    return _rnea_checked(model, q, qd, qdd, f_ext, data, return_wrenches, out, threads)


def _rnea_checked(model, q, qd, qdd, f_ext, data, return_wrenches, out, threads):
    """``rnea`` with every input checked and converted (the messages of ``partree.checks``)."""
    if batch.is_batch(q) or batch.is_batch(qd) or batch.is_batch(qdd):
        return _rnea_batch(model, q, qd, qdd, f_ext, return_wrenches, out, threads)
    q, qd = checks.state(model, q, qd)
    qdd = checks.vector(model, qdd, model.nv, "qdd", "nv")
    F, has_f = checks.external_forces(model, f_ext)
    d = checks.data_for(model, data)
    out = checks.out_array(out, (model.nv,))
    W = np.empty((model.n, 6)) if return_wrenches else NO_FORCES
    pk = model_buffer(model)
    if pk is None:
        rnea_kernel(*checks.model_args(model), model.gravity, q, qd, qdd, F, has_f,
                    d.E, d.r, d.v, d.a, d.pA, d.S, d.tau)
        out[:] = d.tau
        if return_wrenches:
            W[:] = d.pA
    else:
        _ready()
        bad = rnea_call(pk.buf, d._buf, checks.writable(q), checks.writable(qd), checks.writable(qdd),
                        checks.writable(F) if has_f else NO_FORCES, out, W, False)
        if bad != OK:
            raise PartreeInputError(f"rnea: the compiled call refused checked inputs (code {bad}; an internal error)")
    return (out, W) if return_wrenches else out


def _rnea_batch(model, Q, QD, QDD, f_ext, return_wrenches, out, threads):
    Q, QD, QDD = batch.rows(model, (("q", Q, model.nq, "nq"), ("qd", QD, model.nv, "nv"),
                                    ("qdd", QDD, model.nv, "nv")))
    B = Q.shape[0]
    F = batch.forces(model, f_ext, B)
    out = checks.out_array(out, (B, model.nv))
    W = np.empty((B, model.n, 6)) if return_wrenches else NO_FORCES[None]

    def single(s):
        return _rnea_checked(model, Q[s], QD[s], QDD[s], None if F.shape[1] == 0 else F[s if F.shape[0] > 1 else 0],
                             None, return_wrenches, None, None)

    pk = model_buffer(model)
    if pk is None:
        def store(s, r):
            if return_wrenches:
                out[s], W[s] = r
            else:
                out[s] = r

        batch.each_state(B, single, store)
    else:
        codes = np.empty(B, dtype=np.int64)
        with batch.threads_for(threads, B) as T:
            rnea_batch(pk.buf, Q, QD, QDD, F, out, W, True, codes, batch.chunks(B, T))
        fail = batch.first_failure(codes, OK)
        if fail is not None:
            batch.state_error(fail[0], lambda: single(fail[0]))
    return (out, W) if return_wrenches else out


def joint_wrenches(model, q, qd, qdd, f_ext=None, data=None):
    """The (n, 6) joint wrenches [n; f] (see ``rnea``) for the motion (q, qd, qdd)."""
    return rnea(model, q, qd, qdd, f_ext, data, return_wrenches=True)[1]
