"""Composite-rigid-body algorithm: the joint-space mass matrix M(q).

Three forms:
- ``crba(model, q)``: dense (nv x nv), for small and medium models;
- ``crba(model, q, sparse=True)``: scipy.sparse CSR holding only the nonzero ancestor/descendant
  blocks (memory ~ nv x mean depth: cheap for bushy trees, dense for long chains);
- ``mass_matrix_operator(model, q)``: matrix-free, never forms M: ``M @ x`` by a Newton-Euler
  pass and ``M^-1 @ y`` by an articulated-body pass, both O(N) -- the way to go for 10^6 bodies.
"""
import numpy as np
from numba import njit

from ..joints import PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at
from ..errors import PartreeInputError
from .. import checks
from .primitives import congruence_add, inertia_from_compact
from .aba import aba_kernel
from .rnea import rnea_kernel


@njit(cache=True)
def _composite_inertias(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                        q, E, r, IC, S):
    n = parent.shape[0]
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    cJ = np.empty(6)
    T = np.empty((6, 6))
    qd0 = np.zeros(S.shape[0] + 1)
    for i in range(n):
        iv = idx_v[i]
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd0, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == PRISMATIC:
            joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd0, iv, E_tree[i], r_tree[i],
                             E[i], r[i], S[iv:], cJ, R, R2)
        else:
            joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd0, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
        inertia_from_compact(mass[i], com[i], I_com[i], IC[i])
    for i in range(n - 1, -1, -1):
        p = parent[i]
        if p >= 0:
            congruence_add(E[i], r[i], IC[i], IC[p], T)


@njit(cache=True)
def _crba_entries(parent, idx_v, E, r, IC, S, rows, cols, vals, dense, M):
    """Walk each joint's force F = IC_i S_i up to the base.  Fills M (dense) or the COO arrays;
    returns the number of COO entries written."""
    n = parent.shape[0]
    nvt = S.shape[0]
    F = np.empty((6, 6))
    G = np.empty(6)
    k = 0
    for i in range(n):
        iv = idx_v[i]
        nvi = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        if nvi == 0:
            continue
        for d in range(nvi):
            for a in range(6):
                s = 0.0
                for b in range(6):
                    s += IC[i, a, b] * S[iv + d, b]
                F[d, a] = s
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
                    for a in range(6):
                        G[a] = 0.0
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
    _composite_inertias(*a, q, d.E, d.r, d.IA, d.S)
    return d


def crba(model, q, sparse=False, data=None, max_dense_bytes=4 * 2**30):
    """Joint-space mass matrix M(q) by the composite-rigid-body algorithm.

    Parameters
    ----------
    model : Model
        The tree.
    q : ndarray
        Configuration (nq,).
    sparse : bool
        Return a scipy.sparse CSR matrix (joint i couples only with its ancestors and
        descendants) instead of a dense array.
    data : Data, optional
        Workspace (``model.create_data()``).
    max_dense_bytes : int
        The largest matrix (dense, or the sparse one's arrays) built; a larger one is refused with
        a message pointing to :func:`mass_matrix_operator`.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix
        M (nv, nv).
    """
    d = _prepare(model, q, data)
    nv = model.nv
    if not sparse:
        if 8 * nv * nv > max_dense_bytes:
            raise PartreeInputError(
                f"a dense {nv}x{nv} mass matrix needs {8 * nv * nv / 2**30:.1f} GiB; use crba(..., sparse=True) "
                f"or mass_matrix_operator(model, q) for large models")
        M = np.zeros((nv, nv))
        e = np.zeros(0, dtype=np.int64)
        _crba_entries(model.parent, model.idx_v, d.E, d.r, d.IA, d.S, e, e, np.zeros(0), True, M)
        return M
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
    k = _crba_entries(model.parent, model.idx_v, d.E, d.r, d.IA, d.S, rows, cols, vals, False,
                      np.zeros((0, 0)))
    import scipy.sparse as sp

    return sp.csr_matrix((vals[:k], (rows[:k], cols[:k])), shape=(nv, nv))


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
