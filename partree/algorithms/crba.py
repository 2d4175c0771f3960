"""Composite-rigid-body algorithm: the joint-space mass matrix M(q).

Three forms:
- ``crba(model, q)``: dense (nv x nv), for small and medium models;
- ``crba(model, q, sparse=True)``: scipy.sparse CSR holding only the nonzero ancestor/descendant
  blocks (memory ~ nv x mean depth: cheap for bushy trees, dense for long chains);
- ``mass_matrix_operator(model, q)``: matrix-free, never forms M: ``M @ x`` by a Newton-Euler
  pass and ``M^-1 @ y`` by an articulated-body pass, both O(N) -- the way to go for 10^6 bodies.
"""
import numpy as np
from numba import njit, prange

from ..joints import FIXED, PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at
from ..errors import PartreeInputError
from .. import checks
from . import batch
from .packed import (ERR_SHAPE, OK, raw_view, check_buffers, check_q, model_buffer, model_views, restrict,
                     workspace_length, workspace_views)
from .primitives import COMPACT, compact_inertia, composite_to_parent_add
from .aba import aba_kernel
from .welded import computing_model
from .rnea import rnea_kernel


@njit(cache=True)
def _composite_inertias(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                        q, E, r, IC, S):
    composite_inertias_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                          q, E, r, IC, S, np.empty(SCRATCH + S.shape[0] + 1))


#: scratch values of :func:`composite_inertias_in` and :func:`crba_entries_in` (and nv + 1 more for
#: the first)
SCRATCH = 60


@njit(cache=True)
def composite_inertias_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                          q, E, r, IC, S, sc):
    """X_up, S and the composite inertias IC (n, COMPACT) of every body in compact form (about the
    body's origin, in its axes: :func:`compact_inertia`), with the scratch arrays taken from
    ``sc`` (SCRATCH + nv + 1 values)."""
    n = parent.shape[0]
    R = raw_view(sc, 0, (3, 3))
    R2 = raw_view(sc, 9, (3, 3))
    cJ = raw_view(sc, 18, (6,))
    qd0 = raw_view(sc, SCRATCH, (S.shape[0] + 1,))
    for k in range(qd0.shape[0]):
        qd0[k] = 0.0
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
        compact_inertia(mass[i], com[i], I_com[i], IC[i])
    for i in range(n - 1, -1, -1):
        p = parent[i]
        if p >= 0:
            composite_to_parent_add(E[i], r[i], IC[i], IC[p])


@njit(cache=True)
def _crba_entries(parent, idx_v, E, r, IC, S, rows, cols, vals, dense, M):
    """Walk each joint's force F = IC_i S_i up to the base.  Fills M (dense) or the COO arrays;
    returns the number of COO entries written."""
    return crba_entries_in(parent, idx_v, E, r, IC, S, rows, cols, vals, dense, M, np.empty(SCRATCH))


@njit(cache=True)
def crba_entries_in(parent, idx_v, E, r, IC, S, rows, cols, vals, dense, M, sc):
    """:func:`_crba_entries` with its scratch arrays taken from ``sc`` (36 values)."""
    n = parent.shape[0]
    nvt = S.shape[0]
    F = raw_view(sc, 0, (6, 6))
    k = 0
    for i in range(n):
        iv = idx_v[i]
        nvi = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        if nvi == 0:
            continue
        C = IC[i]
        if nvi == 1:
            # one column, held in registers along the walk
            w0, w1, w2 = S[iv, 0], S[iv, 1], S[iv, 2]
            u0, u1, u2 = S[iv, 3], S[iv, 4], S[iv, 5]
            f0 = C[4] * w0 + C[7] * w1 + C[8] * w2 + C[2] * u2 - C[3] * u1
            f1 = C[7] * w0 + C[5] * w1 + C[9] * w2 + C[3] * u0 - C[1] * u2
            f2 = C[8] * w0 + C[9] * w1 + C[6] * w2 + C[1] * u1 - C[2] * u0
            f3 = C[0] * u0 - (C[2] * w2 - C[3] * w1)
            f4 = C[0] * u1 - (C[3] * w0 - C[1] * w2)
            f5 = C[0] * u2 - (C[1] * w1 - C[2] * w0)
            j = i
            while j >= 0:
                jv = idx_v[j]
                nvj = (idx_v[j + 1] if j + 1 < n else nvt) - jv
                for e in range(nvj):
                    Sj = S[jv + e]
                    s = f0 * Sj[0] + f1 * Sj[1] + f2 * Sj[2] + f3 * Sj[3] + f4 * Sj[4] + f5 * Sj[5]
                    if dense:
                        M[iv, jv + e] = s
                        M[jv + e, iv] = s
                    else:
                        rows[k] = iv
                        cols[k] = jv + e
                        vals[k] = s
                        k += 1
                        if j != i:
                            rows[k] = jv + e
                            cols[k] = iv
                            vals[k] = s
                            k += 1
                p = parent[j]
                if p >= 0:
                    Ej = E[j]
                    rj = r[j]
                    n0 = Ej[0, 0] * f0 + Ej[1, 0] * f1 + Ej[2, 0] * f2
                    n1 = Ej[0, 1] * f0 + Ej[1, 1] * f1 + Ej[2, 1] * f2
                    n2 = Ej[0, 2] * f0 + Ej[1, 2] * f1 + Ej[2, 2] * f2
                    g0 = Ej[0, 0] * f3 + Ej[1, 0] * f4 + Ej[2, 0] * f5
                    g1 = Ej[0, 1] * f3 + Ej[1, 1] * f4 + Ej[2, 1] * f5
                    g2 = Ej[0, 2] * f3 + Ej[1, 2] * f4 + Ej[2, 2] * f5
                    f0 = n0 + rj[1] * g2 - rj[2] * g1
                    f1 = n1 + rj[2] * g0 - rj[0] * g2
                    f2 = n2 + rj[0] * g1 - rj[1] * g0
                    f3 = g0
                    f4 = g1
                    f5 = g2
                j = p
            continue
        for d in range(nvi):
            # F = IC S = [Io w + h x u; m u - h x w] for S = [w; u]
            w0, w1, w2 = S[iv + d, 0], S[iv + d, 1], S[iv + d, 2]
            u0, u1, u2 = S[iv + d, 3], S[iv + d, 4], S[iv + d, 5]
            F[d, 0] = C[4] * w0 + C[7] * w1 + C[8] * w2 + C[2] * u2 - C[3] * u1
            F[d, 1] = C[7] * w0 + C[5] * w1 + C[9] * w2 + C[3] * u0 - C[1] * u2
            F[d, 2] = C[8] * w0 + C[9] * w1 + C[6] * w2 + C[1] * u1 - C[2] * u0
            F[d, 3] = C[0] * u0 - (C[2] * w2 - C[3] * w1)
            F[d, 4] = C[0] * u1 - (C[3] * w0 - C[1] * w2)
            F[d, 5] = C[0] * u2 - (C[1] * w1 - C[2] * w0)
        j = i
        while j >= 0:
            jv = idx_v[j]
            nvj = (idx_v[j + 1] if j + 1 < n else nvt) - jv
            for d in range(nvi):
                for e in range(nvj):
                    s = 0.0
                    for a in range(6):
                        s += F[d, a] * S[jv + e, a]
                    if dense:
                        M[iv + d, jv + e] = s
                        M[jv + e, iv + d] = s
                    else:
                        rows[k] = iv + d
                        cols[k] = jv + e
                        vals[k] = s
                        k += 1
                        if j != i:
                            rows[k] = jv + e
                            cols[k] = iv + d
                            vals[k] = s
                            k += 1
            p = parent[j]
            if p >= 0:
                # F <- X_up[j]^T F  (force transform to the parent's coordinates)
                for d in range(nvi):
                    f = F[d]
                    Ej = E[j]
                    rj = r[j]
                    n0 = Ej[0, 0] * f[0] + Ej[1, 0] * f[1] + Ej[2, 0] * f[2]
                    n1 = Ej[0, 1] * f[0] + Ej[1, 1] * f[1] + Ej[2, 1] * f[2]
                    n2 = Ej[0, 2] * f[0] + Ej[1, 2] * f[1] + Ej[2, 2] * f[2]
                    g0 = Ej[0, 0] * f[3] + Ej[1, 0] * f[4] + Ej[2, 0] * f[5]
                    g1 = Ej[0, 1] * f[3] + Ej[1, 1] * f[4] + Ej[2, 1] * f[5]
                    g2 = Ej[0, 2] * f[3] + Ej[1, 2] * f[4] + Ej[2, 2] * f[5]
                    F[d, 0] = n0 + rj[1] * g2 - rj[2] * g1
                    F[d, 1] = n1 + rj[2] * g0 - rj[0] * g2
                    F[d, 2] = n2 + rj[0] * g1 - rj[1] * g0
                    F[d, 3] = g0
                    F[d, 4] = g1
                    F[d, 5] = g2
            j = p
    return k


def _prepare(model, q, data):
    q, _ = checks.state(model, q)
    d = checks.data_for(model, data)
    a = checks.model_args(model)
    _composite_inertias(*a, q, d.E, d.r, _compact_area(d), d.S)
    return d


def _compact_area(d):
    """The workspace's IA area as the (n, COMPACT) array of compact composite inertias."""
    return d.IA.reshape(-1)[:COMPACT * d.n].reshape(d.n, COMPACT)


@njit(cache=True)
def crba_call(mb, wb, q, M, check):
    """One dense mass matrix on a packed model and workspace (``partree.algorithms.packed``): the
    compiled checks, the composite inertias of the model with its welded bodies merged
    (``partree.algorithms.welded``) and M (nv, nv) written whole (zero where two joints are not
    on one path to the base).  Returns ``packed.OK`` or an error code."""
    e = check_buffers(mb, wb)
    if e == OK:
        e = check_q(mb, q, check)
    if e != OK:
        return e
    nv = mb[3]
    if M.shape[0] != nv or M.shape[1] != nv:
        return ERR_SHAPE
    cb, n = computing_model(mb, wb)         # welded bodies merged (partree.algorithms.welded)
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, _, _, _ = model_views(cb)
    E, r, _, _, IA, _, _, S, _, _, _, _, _, sc = workspace_views(wb, mb[1], nv, n)
    IC = raw_view(IA.reshape(36 * n), 0, (n, COMPACT))      # the compact composites, in IA's area
    composite_inertias_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, E, r, IC, S,
                          sc)
    for i in range(nv):
        for j in range(nv):
            M[i, j] = 0.0
    # the dense form writes no COO entries: empty raw arrays stand for them
    crba_entries_in(parent, idx_v, E, r, IC, S, raw_view(mb, 0, (0,)), raw_view(mb, 0, (0,)),
                    raw_view(sc, 0, (0,)), True, M, sc)
    return OK


@njit(cache=True, parallel=True)
def crba_batch(mb, Q, OUT, check, codes, chunks):
    """:func:`crba_call` for every row (state) of Q into OUT (B, nv, nv), in ``chunks`` runs of
    consecutive rows spread over the threads, each run with a workspace of its own."""
    B = Q.shape[0]
    for c in prange(chunks):
        wb = np.zeros(workspace_length(mb))
        for s in range(B * np.int64(c) // chunks, B * (np.int64(c) + 1) // chunks):
            codes[s] = crba_call(mb, wb, Q[s], OUT[s], check)


#: the one signature of :func:`crba_call` (``packed.restrict``)
CALL_SIGNATURE = "int64(int64[::1], float64[::1], float64[::1], float64[:, ::1], boolean)"
_CALL_READY = False


def _ready():
    global _CALL_READY
    if not _CALL_READY:
        restrict(crba_call, CALL_SIGNATURE)
        _CALL_READY = True


def crba(model, q, sparse=False, data=None, max_dense_bytes=4 * 2**30, out=None, check=True, threads=None):
    """Joint-space mass matrix M(q) by the composite-rigid-body algorithm.

    Parameters
    ----------
    model : Model
        The tree.
    q : ndarray
        Configuration (nq,), or (B, nq), one configuration per row: a batch, evaluated over the
        cores, whose dense matrices come back as (B, nv, nv).
    sparse : bool
        Return a scipy.sparse CSR matrix (joint i couples only with its ancestors and
        descendants) instead of a dense array (one configuration at a time).
    data : Data, optional
        Workspace (``model.create_data()``); a batch uses workspaces of its own.
    max_dense_bytes : int
        The largest matrix (dense, or the sparse one's arrays) built; a larger one is refused with
        a message pointing to :func:`mass_matrix_operator`.
    out : ndarray, optional
        A writable C-contiguous float64 array of shape (nv, nv) (a batch: (B, nv, nv)) that
        receives the dense M and is returned.
    check : bool
        False skips the value checks of a q that is already a C-contiguous float64 array of the
        right size (see :func:`partree.aba`).
    threads : int, optional
        Threads for a batch (``partree.set_num_threads``).

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix
        M (nv, nv).
    """
    pk = model._packed
    if pk is not None and _CALL_READY and not sparse and pk.dense_bytes <= max_dense_bytes:
        try:
            res = np.empty((pk.nv, pk.nv)) if out is None else out
            if crba_call(pk.buf, (model._data if data is None else data)._buf, q, res, check) == OK:
                return res
        except (TypeError, AttributeError):
            pass        # not the compiled call's types: checked and converted below
    return _crba_checked(model, q, sparse, data, max_dense_bytes, out, threads)


def _dense_too_large(model, max_dense_bytes):
    nv = model.nv
    if 8 * nv * nv > max_dense_bytes:
        raise PartreeInputError(
            f"a dense {nv}x{nv} mass matrix needs {8 * nv * nv / 2**30:.1f} GiB; use crba(..., sparse=True) "
            f"or mass_matrix_operator(model, q) for large models")


def _crba_checked(model, q, sparse, data, max_dense_bytes, out, threads):
    """``crba`` with every input checked and converted (the messages of ``partree.checks``)."""
    if batch.is_batch(q):
        if sparse:
            raise PartreeInputError("crba(..., sparse=True) takes one configuration q (nq,), not a batch")
        return _crba_batch(model, q, max_dense_bytes, out, threads)
    nv = model.nv
    if not sparse:
        _dense_too_large(model, max_dense_bytes)
        out = checks.out_array(out, (nv, nv))
        pk = model_buffer(model)
        if pk is not None:
            q, _ = checks.state(model, q)
            d = checks.data_for(model, data)
            _ready()
            bad = crba_call(pk.buf, d._buf, checks.writable(q), out, False)
            if bad != OK:
                raise PartreeInputError(f"crba: the compiled call refused checked inputs (code {bad}; an internal "
                                        f"error)")
            return out
        d = _prepare(model, q, data)
        out[...] = 0.0
        e = np.zeros(0, dtype=np.int64)
        _crba_entries(model.parent, model.idx_v, d.E, d.r, _compact_area(d), d.S, e, e, np.zeros(0), True, out)
        return out
    if out is not None:
        raise PartreeInputError("out= is for the dense mass matrix; crba(..., sparse=True) returns a new matrix")
    d = _prepare(model, q, data)
    # nonzeros: for each DOF of joint i, all DOFs of i and its ancestors, mirrored
    anc_dofs = _ancestor_dofs(model.parent, model.nv_j)
    nnz = int(2 * (model.nv_j * anc_dofs).sum() - (model.nv_j ** 2).sum())
    need = 48 * nnz          # rows, cols, values and the CSR conversion's copies
    if need > max_dense_bytes:
        raise PartreeInputError(
            f"the sparse mass matrix of model {model.name!r} has {nnz:,} nonzeros (every joint couples "
            f"with all its ancestors: a deep chain makes M dense) and needs about {need / 2**30:.1f} GiB; "
            f"use mass_matrix_operator(model, q), whose products and solves are O(N), or raise "
            f"max_dense_bytes")
    rows = np.empty(nnz, dtype=np.int64)
    cols = np.empty(nnz, dtype=np.int64)
    vals = np.empty(nnz)
    k = _crba_entries(model.parent, model.idx_v, d.E, d.r, _compact_area(d), d.S, rows, cols, vals, False,
                      np.zeros((0, 0)))
    import scipy.sparse as sp

    return sp.csr_matrix((vals[:k], (rows[:k], cols[:k])), shape=(nv, nv))


def _crba_batch(model, Q, max_dense_bytes, out, threads):
    (Q,) = batch.rows(model, (("q", Q, model.nq, "nq"),))
    B = Q.shape[0]
    nv = model.nv
    if 8 * nv * nv * B > max_dense_bytes:
        raise PartreeInputError(
            f"{B} dense {nv}x{nv} mass matrices need {8 * nv * nv * B / 2**30:.1f} GiB (max_dense_bytes "
            f"{max_dense_bytes / 2**30:.1f} GiB); split the batch, or use mass_matrix_operator(model, q)")
    out = checks.out_array(out, (B, nv, nv))

    def single(s):
        return _crba_checked(model, Q[s], False, None, max_dense_bytes, None, None)

    pk = model_buffer(model)
    if pk is None:
        batch.each_state(B, single, out.__setitem__)
        return out
    codes = np.empty(B, dtype=np.int64)
    with batch.threads_for(threads, B) as T:
        crba_batch(pk.buf, Q, out, True, codes, batch.chunks(B, T))
    fail = batch.first_failure(codes, OK)
    if fail is not None:
        batch.state_error(fail[0], lambda: single(fail[0]))
    return out


@njit(cache=True)
def _ancestor_dofs(parent, nv_j):
    """DOFs on the path from the base to each body, the body's own included."""
    n = parent.shape[0]
    out = np.zeros(n, dtype=np.int64)
    for i in range(n):
        out[i] = nv_j[i] + (out[parent[i]] if parent[i] >= 0 else 0)
    return out


def _operator_class():
    from scipy.sparse.linalg import LinearOperator

    class MassMatrixOperator(_MassMatrixMethods, LinearOperator):
        """M(q) as a scipy LinearOperator: ``M @ x`` and ``M.solve(y)`` in O(N), M never formed."""

    return MassMatrixOperator


class _MassMatrixMethods:
    def __init__(self, model, q):
        self.model = model
        self.q = checks.state(model, q)[0].copy()      # the operator's own q: M(q) as of now
        self._data = model.create_data()
        self._zero_v = np.zeros(model.nv)
        self._g0 = np.zeros(3)
        super().__init__(dtype=np.float64, shape=(model.nv, model.nv))

    def _matvec(self, x):
        x = np.ascontiguousarray(np.ravel(x), dtype=np.float64)
        d = self._data
        F, has_f = checks.external_forces(self.model, None)
        rnea_kernel(*checks.model_args(self.model), self._g0, self.q, self._zero_v, x, F, has_f,
                    d.E, d.r, d.v, d.a, d.pA, d.S, d.tau)
        return d.tau.copy()

    def _rmatvec(self, x):
        return self._matvec(x)

    def solve(self, y):
        """M^{-1} y by one articulated-body pass with zero velocity and gravity."""
        y = checks.vector(self.model, y, self.model.nv, "y", "nv")
        d = self._data
        F, has_f = checks.external_forces(self.model, None)
        bad = aba_kernel(*checks.model_args(self.model), self._g0, self.q, self._zero_v, y, F, has_f,
                         d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, d.qdd)
        if bad >= 0:
            raise PartreeInputError(f"mass matrix is singular at joint {self.model.joint_names[bad]!r}")
        return d.qdd.copy()


def mass_matrix_operator(model, q):
    """Matrix-free M(q) (see ``MassMatrixOperator``)."""
    return _operator_class()(model, q)


def bias_forces(model, q, qd, f_ext=None, data=None):
    """C(q, qd) + g(q) - J^T f_ext: the joint forces that give zero acceleration."""
    from .rnea import rnea
    return rnea(model, q, qd, np.zeros(model.nv), f_ext, data)
