"""The leaf-first constraint force method: ABA's inertia form plus one pass.

Leaf-first elimination of the F_S system, written in inertia form, *is* the articulated-body
algorithm (by the Woodbury identity W (W^T IA^-1 W)^-1 W^T = IA - IA S (S^T IA S)^-1 S^T IA), so
this method runs ABA's kernel and then reads every joint's wrench as F_j = IA_j a_j + pA_j and
F_S,j = W_j^T F_j.  It is the serial fast path and as accurate as ABA on any tree.
"""
import numpy as np
from numba import njit, prange

from ... import checks
from ...errors import PartreeInputError
from .. import batch
from ..aba import aba_kernel, aba_kernel_in
from ..packed import (ERR_DATA, ERR_SHAPE, ERR_UNIVERSAL_AT, NO_FORCES, OK, raw_view, cfa_workspace_size,
                      check_state, model_buffer, model_views, restrict,
                      workspace_length, workspace_views)
from .bases import project_wrench, rows_kernel, rows_kernel_in
from .result import BufferedCFAResult, CFAResult
from .common import ERR_UNIVERSAL, raise_error, topology, workspace


@njit(cache=True)
def _wrenches_from_articulated(idx_v, idx_s, IA, pA, a, S, tau, Wt, FS, F, FT):
    """F_j = IA_j a_j + pA_j, F_S,j = W_j^T F_j, F_T = (S^T S)^-1 tau."""
    return wrenches_from_articulated_in(idx_v, idx_s, IA, pA, a, S, tau, Wt, FS, F, FT, np.empty((6, 6)))


@njit(cache=True)
def wrenches_from_articulated_in(idx_v, idx_s, IA, pA, a, S, tau, Wt, FS, F, FT, G):
    """:func:`_wrenches_from_articulated` with its 6x6 work matrix G given."""
    n = IA.shape[0]
    nvt = S.shape[0]
    for j in range(n):
        for k in range(6):
            s = pA[j, k]
            for l in range(6):
                s += IA[j, k, l] * a[j, l]
            F[j, k] = s
        project_wrench(j, n, nvt, idx_v, idx_s, S, tau, Wt, F, FS, FT, G)
    return -1


def _singular(model, bad):
    return PartreeInputError(
        f"joint {model.joint_names[bad]!r} (body {bad}): its subtree has a singular inertia along "
        f"the joint's motion (massless subtree?); forward dynamics is undefined")


def cfa_leaf_first(model, q, qd, tau, F_ext, has_f, data=None):
    d = checks.data_for(model, data)
    bad = aba_kernel(*checks.model_args(model), model.gravity, q, qd, tau, F_ext, has_f,
                     d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, d.qdd)
    if bad >= 0:
        raise _singular(model, bad)
    return result_from_articulated(model, q, d, d.qdd.copy(), tau, "leaf-first")


def result_from_articulated(model, q, d, qdd, tau, method):
    """The :class:`CFAResult` of a motion whose articulated quantities are in the workspace ``d``
    (IA, pA, a and S after ABA's passes, or hybrid dynamics' with every joint's force ``tau``):
    F_j = IA_j a_j + pA_j split into F_S = W^T F and F_T = (S^T S)^-1 tau."""
    topo = topology(model)
    ws = workspace(model)[1]
    bad = rows_kernel(model.jtype, model.idx_v, topo.idx_s, d.S, ws.rows_ready, ws.Wt)
    if bad >= 0:
        ws.rows_ready = False
        raise_error(model, bad, ERR_UNIVERSAL, method)
    ws.rows_ready = True
    FS = np.empty(topo.ns)
    F = np.empty((model.n, 6))
    FT = np.empty(model.nv)
    _wrenches_from_articulated(model.idx_v, topo.idx_s, d.IA, d.pA, d.a, d.S, tau, ws.Wt, FS, F, FT)
    return CFAResult(model, method, qdd, FS, FT, F, q.copy(), topo.idx_s, topo.ns_j, [])


def result_size(n, nq, nv, ns):
    """Length of the buffer of one leaf-first result: qdd (nv), F_S (ns), F_T (nv), the joint
    wrenches (n, 6) and q (nq), in this order (:func:`result_views`)."""
    return 2 * nv + ns + 6 * n + nq


@njit(cache=True)
def result_views(ob, n, nq, nv, ns):
    """qdd, F_S, F_T, F (n, 6) and q as raw views of a result buffer (:func:`result_size`)."""
    return (raw_view(ob, 0, (nv,)), raw_view(ob, nv, (ns,)), raw_view(ob, nv + ns, (nv,)),
            raw_view(ob, 2 * nv + ns, (n, 6)), raw_view(ob, 2 * nv + ns + 6 * n, (nq,)))


@njit(cache=True)
def cfa_call(mb, wb, cb, q, qd, tau, fext, ob, check):
    """One leaf-first evaluation on a packed model and workspace (``partree.algorithms.packed``):
    the compiled checks, :func:`aba_kernel`, the constraint rows (``cb``: a flag and W^T, kept
    between calls) and the wrenches, into the result buffer ``ob`` (:func:`result_size`).
    Returns ``packed.OK``, an error code, the body whose articulated inertia is singular, or
    ``ERR_UNIVERSAL_AT - j`` for a degenerate universal joint j."""
    e = check_state(mb, wb, q, qd, tau, fext, check)
    if e != OK:
        return e
    n = mb[1]
    nq = mb[2]
    nv = mb[3]
    ns = mb[5]
    if cb.shape[0] != 1 + 6 * ns:
        return ERR_DATA
    if ob.shape[0] != 2 * nv + ns + 6 * n + nq:
        return ERR_SHAPE
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, idx_s, _ = model_views(mb)
    E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd_w, _, sc = workspace_views(wb, n, nv)
    bad = aba_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                        q, qd, tau, fext, fext.shape[0] > 0, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd_w, sc)
    if bad >= 0:
        return bad
    Wt = raw_view(cb, 1, (ns, 6))
    bad = rows_kernel_in(jtype, idx_v, idx_s, S, cb[0] != 0.0, Wt, raw_view(sc, 0, (3,)),
                         raw_view(sc, 3, (3,)))
    if bad >= 0:
        cb[0] = 0.0
        return ERR_UNIVERSAL_AT - bad
    cb[0] = 1.0
    qdd, FS, FT, F, qr = result_views(ob, n, nq, nv, ns)
    wrenches_from_articulated_in(idx_v, idx_s, IA, pA, a, S, tau, Wt, FS, F, FT, raw_view(sc, 0, (6, 6)))
    for k in range(nv):
        qdd[k] = qdd_w[k]
    for k in range(nq):
        qr[k] = q[k]
    return OK


@njit(cache=True, parallel=True)
def cfa_batch(mb, Q, QD, TAU, FEXT, OB, check, codes, chunks):
    """:func:`cfa_call` for every row (state), in ``chunks`` runs of consecutive rows spread over
    the threads, each run with workspaces of its own; results in the rows of OB; FEXT (1 or B, n or
    0, 6)."""
    B = Q.shape[0]
    per = FEXT.shape[0] > 1
    for c in prange(chunks):
        wb = np.zeros(workspace_length(mb))
        cb = np.zeros(1 + 6 * mb[5])
        for s in range(B * np.int64(c) // chunks, B * (np.int64(c) + 1) // chunks):
            f = FEXT[s] if per else FEXT[0]
            codes[s] = cfa_call(mb, wb, cb, Q[s], QD[s], TAU[s], f, OB[s], check)


#: the one signature of :func:`cfa_call` (``packed.restrict``)
CALL_SIGNATURE = "int64(int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], " \
                 "float64[:, ::1], float64[::1], boolean)"
CALL_READY = False


def _ready():
    global CALL_READY
    if not CALL_READY:
        restrict(cfa_call, CALL_SIGNATURE)
        CALL_READY = True


def rows_buffer(data, pk):
    """The constraint-row buffer of workspace ``data`` (made on first use)."""
    cb = data._cfa_buf
    if cb is None or cb.shape[0] != cfa_workspace_size(pk.ns):
        cb = data._cfa_buf = np.zeros(cfa_workspace_size(pk.ns))
    return cb


def new_result(model, pk, ob):
    """A leaf-first result whose arrays are views of the result buffer ``ob`` (:func:`result_size`)."""
    return BufferedCFAResult(model, "leaf-first", ob, pk.sizes, pk.idx_s, pk.ns_j)


def raise_code(model, code):
    """Raise the error of a :func:`cfa_call` return code (a singular inertia or a universal joint)."""
    if code >= 0:
        raise _singular(model, code)
    if code <= ERR_UNIVERSAL_AT:
        raise_error(model, ERR_UNIVERSAL_AT - code, ERR_UNIVERSAL, "leaf-first")
    raise PartreeInputError(f"cfa: the compiled call refused checked inputs (code {code}; an internal error)")


def cfa_leaf_first_packed(model, pk, q, qd, tau, F_ext, has_f, data, out):
    """:func:`cfa_call` on checked inputs; ``out``: a leaf-first result of this model to
    overwrite, or None."""
    d = checks.data_for(model, data)
    ob = result_buffer(model, pk, out)
    _ready()
    code = cfa_call(pk.buf, d._buf, rows_buffer(d, pk), checks.writable(q), checks.writable(qd),
                    checks.writable(tau), checks.writable(F_ext) if has_f else NO_FORCES, ob, False)
    if code != OK:
        raise_code(model, code)
    if out is None:
        return new_result(model, pk, ob)
    out._Wt = None
    return out


def result_buffer(model, pk, out):
    """The buffer a result is written to: a new one, or that of ``out``, which must be a
    leaf-first result of this model (from an earlier call)."""
    if out is None:
        return np.empty(result_size(pk.n, pk.nq, pk.nv, pk.ns))
    ob = getattr(out, "_buf", None)
    if not isinstance(out, CFAResult) or ob is None or out._model is not model or out.qdd.ndim != 1:
        raise PartreeInputError("out must be a CFAResult of an earlier leaf-first cfa call on this model "
                                "(one state), whose arrays the call overwrites")
    return ob


def cfa_leaf_first_batch(model, Q, QD, TAU, f_ext, threads):
    """Leaf-first CFA of every row (state) of Q, QD, TAU: a :class:`CFAResult` whose arrays have
    one row per state."""
    Q, QD, TAU = batch.rows(model, (("q", Q, model.nq, "nq"), ("qd", QD, model.nv, "nv"),
                                    ("tau", TAU, model.nv, "nv")))
    B = Q.shape[0]
    F = batch.forces(model, f_ext, B)
    pk = model_buffer(model)

    def single(s):
        f = None if F.shape[1] == 0 else F[s if F.shape[0] > 1 else 0]
        return cfa_leaf_first(model, *checks.state(model, Q[s], QD[s]),
                              checks.vector(model, TAU[s], model.nv, "tau", "nv"), *checks.external_forces(model, f))

    if pk is None:
        parts = []
        batch.each_state(B, single, lambda s, r: parts.append(r))
        return CFAResult(model, "leaf-first", np.array([r.qdd for r in parts]),
                         np.array([r.constraint_force for r in parts]), np.array([r.drive_force for r in parts]),
                         np.array([r.joint_wrench for r in parts]), Q.copy(), parts[0].idx_s, parts[0].ns_j, [])
    OB = np.empty((B, result_size(pk.n, pk.nq, pk.nv, pk.ns)))
    codes = np.empty(B, dtype=np.int64)
    with batch.threads_for(threads, B) as T:
        cfa_batch(pk.buf, Q, QD, TAU, F, OB, True, codes, batch.chunks(B, T))
    fail = batch.first_failure(codes, OK)
    if fail is not None:
        batch.state_error(fail[0], lambda: single(fail[0]))
    n, nv, ns = pk.n, pk.nv, pk.ns
    res = CFAResult(model, "leaf-first", OB[:, :nv], OB[:, nv:nv + ns], OB[:, nv + ns:2 * nv + ns],
                    OB[:, 2 * nv + ns:2 * nv + ns + 6 * n].reshape(B, n, 6), OB[:, 2 * nv + ns + 6 * n:],
                    pk.idx_s, pk.ns_j, [])
    return res
