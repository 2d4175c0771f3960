"""Forward dynamics of a tree closed by loops, in O(N + loops): the articulated-body algorithm
with each loop eliminated at the body where its two paths meet.

The motion satisfies M qdd + h = tau + J^T lambda and J qdd = gamma (seed 003's equations (6)-(7);
``partree.algorithms.loop_constraints`` gives J's rows per loop end and gamma).  Instead of
forming M or J M^-1 J^T, the inward pass of ABA carries, for every body x, the loops with one
end in x's subtree and the other outside ("pending" at x), as an affine relation between the
subtree's base acceleration a_x, the pending multipliers lambda_P and the force across x's joint
and the pending rows' accelerations:

    f_x = IA_x a_x + pA_x - C_x^T lambda_P,        y_P = C_x a_x + K_x lambda_P + k_x.

Each body adds the rows of its own loop ends to C (the end's G_e), the joint's elimination turns
C, K, k into the parent's (ABA's projection, with C S D^-1 U^T terms), and at the body where a
loop's two paths meet (the lowest common ancestor, or the world for loops to the world or across
roots) the loop's rows y_Z = gamma_Z are solved for lambda_Z and eliminated: its K_ZZ block is
factored by a Cholesky with diagonal pivoting, whose pivots pick the independent rows (the
rank-revealing factorisation of J M^-1 J^T restricted to the loop's rows: seed 003's
column-pivoted QR of Phi_q^T in the mass metric).  Rows found dependent carry no force.  The
Schur complement updates IA, pA and the still-pending rows (seed 004's equivalent subsystem).
The outward pass gives a_x and qdd as in ABA, then lambda of the loops eliminated at x.

Cost: ABA's, plus per body the square of the rows pending there, plus the factorisations: O(N)
for loops that close within small subtrees (a mast of units), whatever their number.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import checks
from ..errors import PartreeInputError
from .aba import articulated_project, aba_forward_pass1
from .linalg import spd_inverse
from .loop_constraints import end_rows, loop_terms, world_poses, bias_accelerations, jacobian
from .primitives import congruence_add, xform_force_T_add, xform_motion


# ---------------------------------------------------------------------------------- topology
class LoopTopology:
    """Where each loop is pending and where it is eliminated (static: from the tree and the
    loops' bodies), flattened for the kernels.  Node n stands for the world.

    For node x (0..n): its loops are ``wloop[wptr[x]:wptr[x+1]]``, the first ``npl[x]`` pending
    (their rows first, ``prow[x]`` rows) and the others eliminated at x; ``wpos`` is each loop's
    first row within x's rows (``wrows[x]`` in all); ``pmap`` the pending loop's first row within
    the parent's rows; ``wglob[rptr[x] + j]`` the global row of x's row j.  The workspace offsets
    are ``cptr`` (C, 6 per row), ``kptr`` (K, rows squared), ``rptr`` (rows) and ``sptr`` (C S,
    pending rows times the joint's degrees of freedom).  Loop ends on x are
    ``eloop[eptr[x]:eptr[x+1]]`` with their side (0 = A, 1 = B) and first row ``epos``."""

    def __init__(self, model):
        loops = model.loops
        n = model.n
        parent = model.parent
        depth = model.depth()
        L = len(loops)
        pend = [[] for _ in range(n + 1)]
        elim = [[] for _ in range(n + 1)]
        ends = [[] for _ in range(n + 1)]
        self.lca = np.empty(L, dtype=np.int64)
        for l in range(L):
            a, b = int(loops.body_a[l]), int(loops.body_b[l])
            ends[a if a >= 0 else n].append((l, 0))
            ends[b if b >= 0 else n].append((l, 1))
            da = depth[a] if a >= 0 else -1
            db = depth[b] if b >= 0 else -1
            while a != b:
                if da >= db:
                    pend[a].append(l)
                    a = int(parent[a])
                    da -= 1
                else:
                    pend[b].append(l)
                    b = int(parent[b])
                    db -= 1
            top = a if a >= 0 else n
            elim[top].append(l)
            self.lca[l] = a
        nrows = loops.nrows
        wptr = np.zeros(n + 2, dtype=np.int64)
        npl = np.zeros(n + 1, dtype=np.int64)
        prow = np.zeros(n + 1, dtype=np.int64)
        wrows = np.zeros(n + 1, dtype=np.int64)
        wloop, wpos = [], []
        rowpos = {}
        for x in range(n + 1):
            ls = sorted(pend[x]) + sorted(elim[x])
            npl[x] = len(pend[x])
            pos = 0
            for j, l in enumerate(ls):
                wloop.append(l)
                wpos.append(pos)
                rowpos[(x, l)] = pos
                if j < npl[x]:
                    prow[x] += nrows[l]
                pos += nrows[l]
            wrows[x] = pos
            wptr[x + 1] = wptr[x] + len(ls)
        self.wptr, self.npl, self.prow, self.wrows = wptr, npl, prow, wrows
        self.wloop = np.array(wloop, dtype=np.int64)
        self.wpos = np.array(wpos, dtype=np.int64)
        pmap = np.full(self.wloop.size, -1, dtype=np.int64)
        for x in range(n):
            up = int(parent[x]) if parent[x] >= 0 else n
            for j in range(int(npl[x])):
                pmap[wptr[x] + j] = rowpos[(up, int(self.wloop[wptr[x] + j]))]
        self.pmap = pmap
        nvj = np.concatenate((model.nv_j, [0])).astype(np.int64)
        self.rptr = np.concatenate(([0], np.cumsum(wrows))).astype(np.int64)
        self.cptr = 6 * self.rptr
        self.kptr = np.concatenate(([0], np.cumsum(wrows * wrows))).astype(np.int64)
        self.sptr = np.concatenate(([0], np.cumsum(prow * nvj))).astype(np.int64)
        wglob = np.empty(int(self.rptr[-1]), dtype=np.int64)
        for x in range(n + 1):
            for j in range(int(wptr[x]), int(wptr[x + 1])):
                l = int(self.wloop[j])
                s = int(self.rptr[x] + self.wpos[j])
                wglob[s:s + nrows[l]] = loops.row0[l] + np.arange(nrows[l])
        self.wglob = wglob
        eptr = np.zeros(n + 2, dtype=np.int64)
        eloop, eside, epos = [], [], []
        for x in range(n + 1):
            for l, side in ends[x]:
                eloop.append(l)
                eside.append(side)
                epos.append(rowpos[(x, l)])
            eptr[x + 1] = eptr[x] + len(ends[x])
        self.eptr = eptr
        self.eloop = np.array(eloop, dtype=np.int64)
        self.eside = np.array(eside, dtype=np.int64)
        self.epos = np.array(epos, dtype=np.int64)

    def arrays(self):
        return (self.wptr, self.wloop, self.wpos, self.npl, self.prow, self.wrows, self.pmap, self.wglob,
                self.rptr, self.cptr, self.kptr, self.sptr, self.eptr, self.eloop, self.eside, self.epos)


def loop_topology(model):
    """The :class:`LoopTopology` of ``model`` (built once per model and set of loops)."""
    key = ("loops", id(model.loops))
    topo = model._topo.get(key)
    if topo is None or topo[0] is not model.loops:
        topo = (model.loops, LoopTopology(model))
        model._topo = {k: v for k, v in model._topo.items() if not (isinstance(k, tuple) and k[0] == "loops")}
        model._topo[key] = topo
    return topo[1]


# ---------------------------------------------------------------------------------- small dense
@njit(cache=True)
def pivoted_cholesky(K, o, w, z0, z, perm, tol):
    """Cholesky with diagonal pivoting of the z x z block at rows/columns z0.. of the w x w
    row-major matrix stored at K[o:], in place: its leading rank x rank lower triangle becomes
    L with L L^T = (P^T K P) restricted to the chosen rows, perm[j] the block row of pivot j.
    Stops at a pivot below tol times the largest diagonal entry; returns the rank."""
    for j in range(z):
        perm[j] = j
    dmax = 0.0
    for j in range(z):
        d = K[o + (z0 + j) * w + z0 + j]
        if d > dmax:
            dmax = d
    if not dmax > 0.0:
        return 0
    rank = 0
    for k in range(z):
        best = -1.0
        jb = k
        for j in range(k, z):
            d = K[o + (z0 + j) * w + z0 + j]
            if d > best:
                best = d
                jb = j
        if not best > tol * dmax:
            break
        if jb != k:
            for t in range(z):      # swap rows k, jb and columns k, jb of the block
                a = K[o + (z0 + k) * w + z0 + t]
                K[o + (z0 + k) * w + z0 + t] = K[o + (z0 + jb) * w + z0 + t]
                K[o + (z0 + jb) * w + z0 + t] = a
            for t in range(z):
                a = K[o + (z0 + t) * w + z0 + k]
                K[o + (z0 + t) * w + z0 + k] = K[o + (z0 + t) * w + z0 + jb]
                K[o + (z0 + t) * w + z0 + jb] = a
            pk = perm[k]
            perm[k] = perm[jb]
            perm[jb] = pk
        piv = np.sqrt(K[o + (z0 + k) * w + z0 + k])
        K[o + (z0 + k) * w + z0 + k] = piv
        for i in range(k + 1, z):
            K[o + (z0 + i) * w + z0 + k] /= piv
        for i in range(k + 1, z):
            lik = K[o + (z0 + i) * w + z0 + k]
            for j in range(k + 1, i + 1):
                v = K[o + (z0 + i) * w + z0 + j] - lik * K[o + (z0 + j) * w + z0 + k]
                K[o + (z0 + i) * w + z0 + j] = v
                K[o + (z0 + j) * w + z0 + i] = v
        rank += 1
    return rank


@njit(cache=True)
def lower_solve(K, o, w, z0, rank, x):
    """x <- L^-1 x for the factor L left by :func:`pivoted_cholesky` (x has rank entries)."""
    for i in range(rank):
        s = x[i]
        for j in range(i):
            s -= K[o + (z0 + i) * w + z0 + j] * x[j]
        x[i] = s / K[o + (z0 + i) * w + z0 + i]


@njit(cache=True)
def upper_solve(K, o, w, z0, rank, x):
    """x <- L^-T x."""
    for i in range(rank - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, rank):
            s -= K[o + (z0 + j) * w + z0 + i] * x[j]
        x[i] = s / K[o + (z0 + i) * w + z0 + i]


# ---------------------------------------------------------------------------------- the passes
@njit(cache=True)
def loop_backward_pass(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u,
                       wptr, wloop, wpos, npl, prow, wrows, pmap, wglob, rptr, cptr, kptr, sptr,
                       eptr, eloop, eside, epos, nrows, G, gamma, tol, Cw, Kw, kw, SC, perm, rank):
    """Inward pass: ABA's, with the loops' rows carried (C, K, k) and eliminated where their
    paths meet (world last).  Returns -1, or the body whose joint-space inertia is singular.

    G (L, 2, 6, 6): the loop ends' rows (``LoopTerms.G``); gamma (R,): the rows' accelerations
    (frame part: the bodies' accelerations a enter through G); tol: pivots below tol times the
    largest are dependent rows.  Cw, Kw, kw, SC: the flat workspaces (zeroed by the caller);
    perm (rows of all nodes), rank (n + 1): the factorisations' pivots and ranks."""
    n = parent.shape[0]
    nvt = S.shape[0]
    T6 = np.empty((6, 6))
    Ia = np.empty((6, 6))
    D = np.empty((6, 6))
    Dn = np.empty((6, 6))
    tmp = np.empty(6)
    pa = np.empty(6)
    row = np.empty(6)
    for step in range(n + 1):
        x = n - 1 - step if step < n else n      # bodies leaf to root, the world last
        w = wrows[x]
        p = prow[x]
        oc = cptr[x]
        ok = kptr[x]
        orr = rptr[x]
        # the rows of the loop ends on x
        for e in range(eptr[x], eptr[x + 1]):
            l = eloop[e]
            for rr in range(nrows[l]):
                for k in range(6):
                    Cw[oc + (epos[e] + rr) * 6 + k] += G[l, eside[e], rr, k]
        # eliminate the loops whose paths meet at x
        z = w - p
        if z > 0:
            rk = pivoted_cholesky(Kw, ok, w, p, z, perm[orr + p:orr + w], tol)
            rank[x] = rk
            if rk > 0:
                W1 = np.empty((rk, 6))
                W2 = np.empty((rk, max(p, 1)))
                w3 = np.empty(rk)
                col = np.empty(rk)
                for k in range(6):
                    for j in range(rk):
                        col[j] = Cw[oc + (p + perm[orr + p + j]) * 6 + k]
                    lower_solve(Kw, ok, w, p, rk, col)
                    for j in range(rk):
                        W1[j, k] = col[j]
                for t in range(p):
                    for j in range(rk):
                        col[j] = Kw[ok + (p + perm[orr + p + j]) * w + t]
                    lower_solve(Kw, ok, w, p, rk, col)
                    for j in range(rk):
                        W2[j, t] = col[j]
                for j in range(rk):
                    zr = p + perm[orr + p + j]
                    w3[j] = gamma[wglob[orr + zr]] - kw[orr + zr]
                lower_solve(Kw, ok, w, p, rk, w3)
                if x < n:
                    for k in range(6):
                        s = 0.0
                        for j in range(rk):
                            s += W1[j, k] * w3[j]
                        pA[x, k] -= s
                        for l2 in range(6):
                            s = 0.0
                            for j in range(rk):
                                s += W1[j, k] * W1[j, l2]
                            IA[x, k, l2] += s
                for t in range(p):
                    for k in range(6):
                        s = 0.0
                        for j in range(rk):
                            s += W2[j, t] * W1[j, k]
                        Cw[oc + t * 6 + k] -= s
                    for t2 in range(p):
                        s = 0.0
                        for j in range(rk):
                            s += W2[j, t] * W2[j, t2]
                        Kw[ok + t * w + t2] -= s
                    s = 0.0
                    for j in range(rk):
                        s += W2[j, t] * w3[j]
                    kw[orr + t] += s
        if x == n:
            continue
        # ABA's projection of joint x, with the pending rows
        iv = idx_v[x]
        nv = idx_v[x + 1] - iv if x + 1 < n else nvt - iv
        for d in range(nv):
            for k in range(6):
                s = 0.0
                for l2 in range(6):
                    s += IA[x, k, l2] * S[iv + d, l2]
                U[iv + d, k] = s
            s = tau[iv + d]
            for k in range(6):
                s -= S[iv + d, k] * pA[x, k]
            u[iv + d] = s
        for d in range(nv):
            for e2 in range(nv):
                s = 0.0
                for k in range(6):
                    s += S[iv + d, k] * U[iv + e2, k]
                D[d, e2] = s
        if nv > 0:
            if not spd_inverse(D, nv, Dn):
                return x
            for d in range(nv):
                for e2 in range(nv):
                    Dinv[iv + d, e2] = Dn[d, e2]
        os_ = sptr[x]
        for t in range(p):          # SC = C_P S
            for d in range(nv):
                s = 0.0
                for k in range(6):
                    s += Cw[oc + t * 6 + k] * S[iv + d, k]
                SC[os_ + t * nv + d] = s
        up = parent[x]
        if up >= 0:
            articulated_project(IA[x], pA[x], c[x], U, Dinv, u, iv, nv, Ia, pa, tmp)
            congruence_add(E[x], r[x], Ia, IA[up], T6)
            xform_force_T_add(E[x], r[x], pa, pA[up])
        if p == 0:
            continue
        q_ = up if up >= 0 else n
        wq = wrows[q_]
        ocq = cptr[q_]
        okq = kptr[q_]
        orq = rptr[q_]
        # the pending rows' relation handed to the parent: C' = C - SC D^-1 U^T (then X),
        # K' = K + SC D^-1 SC^T, k' = k + C' c + SC D^-1 u
        for j in range(wptr[x], wptr[x] + npl[x]):
            l = wloop[j]
            for rr in range(nrows[l]):
                t = wpos[j] + rr
                tq = pmap[j] + rr
                for d in range(nv):
                    s = 0.0
                    for e2 in range(nv):
                        s += SC[os_ + t * nv + e2] * Dinv[iv + e2, d]
                    tmp[d] = s       # (SC D^-1)[t, :]
                for k in range(6):
                    s = Cw[oc + t * 6 + k]
                    for d in range(nv):
                        s -= tmp[d] * U[iv + d, k]
                    row[k] = s
                s = kw[orr + t]
                for k in range(6):
                    s += row[k] * c[x, k]
                for d in range(nv):
                    s += tmp[d] * u[iv + d]
                kw[orq + tq] += s
                for k in range(6):
                    pa[k] = 0.0
                xform_force_T_add(E[x], r[x], row, pa)
                for k in range(6):
                    Cw[ocq + tq * 6 + k] += pa[k]
                for j2 in range(wptr[x], wptr[x] + npl[x]):
                    l2 = wloop[j2]
                    for rr2 in range(nrows[l2]):
                        t2 = wpos[j2] + rr2
                        s = Kw[ok + t * w + t2]
                        for d in range(nv):
                            s += tmp[d] * SC[os_ + t2 * nv + d]
                        Kw[okq + tq * wq + pmap[j2] + rr2] += s
    return -1


@njit(cache=True)
def solve_eliminated(x, a, lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank):
    """The multipliers of the loops eliminated at node x, from its acceleration a and the
    pending multipliers (already in lam): lambda_I = K_II^-1 (gamma - k - C a - K_IP lambda_P);
    dependent rows get 0."""
    w = wrows[x]
    p = prow[x]
    z = w - p
    if z == 0:
        return
    orr = rptr[x]
    oc = cptr[x]
    ok = kptr[x]
    rk = rank[x]
    for j in range(z):
        lam[wglob[orr + p + j]] = 0.0
    if rk == 0:
        return
    h = np.empty(rk)
    for j in range(rk):
        zr = p + perm[orr + p + j]
        s = gamma[wglob[orr + zr]] - kw[orr + zr]
        for k in range(6):
            s -= Cw[oc + zr * 6 + k] * a[k]
        for t in range(p):
            s -= Kw[ok + zr * w + t] * lam[wglob[orr + t]]
        h[j] = s
    lower_solve(Kw, ok, w, p, rk, h)
    upper_solve(Kw, ok, w, p, rk, h)
    for j in range(rk):
        lam[wglob[orr + p + perm[orr + p + j]]] = h[j]


@njit(cache=True)
def loop_forward_pass(parent, idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd, lam,
                      prow, wrows, wglob, rptr, cptr, kptr, sptr, gamma, Cw, Kw, kw, SC, perm, rank):
    """Outward pass: the world's multipliers from ``a_base``, then for each body its acceleration
    and qdd = D^-1 (u - U^T a' + (C S)^T lambda_P), then the multipliers eliminated at it."""
    n = parent.shape[0]
    nvt = S.shape[0]
    tmp = np.empty(6)
    h = np.empty(6)
    solve_eliminated(n, a_base, lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank)
    for x in range(n):
        iv = idx_v[x]
        nv = idx_v[x + 1] - iv if x + 1 < n else nvt - iv
        up = parent[x]
        if up < 0:
            xform_motion(E[x], r[x], a_base, tmp)
        else:
            xform_motion(E[x], r[x], a[up], tmp)
        for k in range(6):
            a[x, k] = tmp[k] + c[x, k]
        p = prow[x]
        orr = rptr[x]
        os_ = sptr[x]
        for d in range(nv):
            s = u[iv + d]
            for k in range(6):
                s -= U[iv + d, k] * a[x, k]
            for t in range(p):
                s += SC[os_ + t * nv + d] * lam[wglob[orr + t]]
            h[d] = s
        for d in range(nv):
            s = 0.0
            for e2 in range(nv):
                s += Dinv[iv + d, e2] * h[e2]
            qdd[iv + d] = s
        for d in range(nv):
            for k in range(6):
                a[x, k] += S[iv + d, k] * qdd[iv + d]
        solve_eliminated(x, a[x], lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank)


# ---------------------------------------------------------------------------------- the API
class ConstrainedResult:
    """Result of :func:`constrained_dynamics`.

    Attributes
    ----------
    qdd : ndarray (nv,)
        Joint accelerations.
    multipliers : ndarray (R,)
        lambda, the constraint forces along the loops' rows (zero on rows found dependent).
    loop_force : ndarray (L, 6)
        Each loop's cut-joint wrench [n; f] = T lambda: what body a exerts on body b through
        the cut joint, in frame A's axes at its origin.
    rank : int
        The number of independent constraint rows.
    independent : ndarray of bool (R,)
        The rows the pivoting kept.
    violation : ndarray (R,)
        Phi at q (position-level violation); ``velocity_violation``: J qd.
    loop_wrench : ndarray (n, 6)
        The loops' wrenches on every body, in body coordinates (zero for bodies without ends).
    joint_wrench, constraint_force, drive_force
        The tree joints' wrenches as :func:`partree.cfa` gives them, with the loop forces
        applied (computed on first access).
    """

    def __init__(self, model, q, qd, tau, f_ext, qdd, lam, terms, rank, independent, loop_wrench):
        self._model, self._q, self._qd, self._tau, self._f_ext = model, q, qd, tau, f_ext
        self.qdd = qdd
        self.multipliers = lam
        self.rank = int(rank)
        self.independent = independent
        self.violation = terms.phi
        self.velocity_violation = terms.velocity
        self.loop_wrench = loop_wrench
        loops = model.loops
        lf = np.zeros((len(loops), 6))
        for l in range(len(loops)):
            m, r0 = int(loops.nrows[l]), int(loops.row0[l])
            lf[l] = terms.T[l, :, :m] @ lam[r0:r0 + m]
        self.loop_force = lf
        self._cfa = None

    def loop_force_of(self, name):
        """The cut-joint wrench [n; f] of the loop ``name``."""
        return self.loop_force[self._model.loops.index(name)]

    def multipliers_of(self, name):
        """The multipliers of the loop ``name``'s rows."""
        return self.multipliers[self._model.loops.rows_of(name)]

    def _tree(self):
        if self._cfa is None:
            from .cfa import cfa
            F = self.loop_wrench if self._f_ext is None else self.loop_wrench + self._f_ext
            self._cfa = cfa(self._model, self._q, self._qd, self._tau, f_ext=F)
        return self._cfa

    @property
    def joint_wrench(self):
        """(n, 6): the wrench the parent transmits to each body across its joint, [n; f] in the
        body's frame, the loop forces included."""
        return self._tree().joint_wrench

    @property
    def constraint_force(self):
        """The tree joints' constraint forces F_S (as ``cfa``), the loop forces included."""
        return self._tree().constraint_force

    @property
    def drive_force(self):
        """The tree joints' drive forces F_T (as ``cfa``)."""
        return self._tree().drive_force

    def __repr__(self):
        return (f"<ConstrainedResult: nv={self.qdd.size}, {self.multipliers.size} rows, rank {self.rank}, "
                f"|phi|max={np.abs(self.violation).max(initial=0.0):.3g}>")


def _solve(model, q, qd, tau, F, has_f, gravity, rank_tol, gamma_override=None):
    """The passes at (q, qd, tau): (qdd, lam, terms, rank per node, pivots, topology, and pass 1's
    E, r, v, c, S with the world poses Rw, pw)."""
    n, nv = model.n, model.nv
    E, r = np.empty((n, 3, 3)), np.empty((n, 3))
    v, c, pA = np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6))
    IA, S = np.empty((n, 6, 6)), np.zeros((max(nv, 1), 6))
    aba_forward_pass1(*checks.model_args(model), q, qd, F, has_f, E, r, v, c, IA, pA, S)
    Rw, pw = np.empty((n, 3, 3)), np.empty((n, 3))
    world_poses(model.parent, E, r, Rw, pw)
    try:
        terms = loop_terms(model.loops, Rw, pw, v)
    except ValueError as e:
        raise PartreeInputError(str(e)) from None
    topo = loop_topology(model)
    gamma = terms.gamma if gamma_override is None else gamma_override
    U, Dinv, u = np.empty((max(nv, 1), 6)), np.empty((max(nv, 1), 6)), np.empty(max(nv, 1))
    nrw = int(topo.rptr[-1])
    Cw, Kw, kw = np.zeros(6 * nrw), np.zeros(int(topo.kptr[-1])), np.zeros(nrw)
    SC = np.zeros(max(int(topo.sptr[-1]), 1))
    perm = np.zeros(nrw, dtype=np.int64)
    rank = np.zeros(n + 1, dtype=np.int64)
    tol = float(rank_tol) ** 2
    bad = loop_backward_pass(model.parent, model.idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u,
                             topo.wptr, topo.wloop, topo.wpos, topo.npl, topo.prow, topo.wrows, topo.pmap,
                             topo.wglob, topo.rptr, topo.cptr, topo.kptr, topo.sptr, topo.eptr, topo.eloop,
                             topo.eside, topo.epos, model.loops.nrows, terms.G, gamma, tol, Cw, Kw, kw, SC,
                             perm, rank)
    if bad >= 0:
        raise PartreeInputError(f"joint {model.joint_names[bad]!r} (body {bad}): its subtree has a singular inertia "
                                f"along the joint's motion; forward dynamics is undefined")
    a_base = np.zeros(6)
    a_base[3:] = -np.asarray(gravity, dtype=float)
    a = np.empty((n, 6))
    qdd = np.empty(nv)
    lam = np.zeros(model.loops.nrow)
    loop_forward_pass(model.parent, model.idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd, lam, topo.prow,
                      topo.wrows, topo.wglob, topo.rptr, topo.cptr, topo.kptr, topo.sptr, gamma, Cw, Kw, kw, SC,
                      perm, rank)
    return qdd, lam, terms, rank, perm, topo, E, r, v, c, S, Rw, pw


def _independent(model, topo, perm, rank):
    ind = np.zeros(model.loops.nrow, dtype=bool)
    for x in range(model.n + 1):
        p, w = int(topo.prow[x]), int(topo.wrows[x])
        o = int(topo.rptr[x])
        for j in range(int(rank[x])):
            ind[topo.wglob[o + p + perm[o + p + j]]] = True
    return ind


def loop_wrenches(model, G, lam):
    """The loops' wrenches on the bodies, (n, 6) in body coordinates: G_e^T lambda at each end."""
    loops = model.loops
    W = np.zeros((model.n, 6))
    for l in range(len(loops)):
        m, r0 = int(loops.nrows[l]), int(loops.row0[l])
        for side, body in ((0, loops.body_a[l]), (1, loops.body_b[l])):
            if body >= 0:
                W[body] += G[l, side, :m].T @ lam[r0:r0 + m]
    return W


def constrained_dynamics(model, q, qd, tau, f_ext=None, rank_tol=1e-7):
    """Forward dynamics of a tree closed by loops: qdd, the loops' forces and the joint wrenches.

    Solves M qdd + h(q, qd) = tau + J^T lambda, J qdd = gamma in O(N + loops) (see the module
    docstring): no mass matrix, no dense constraint matrix beyond each loop group's own rows.

    Parameters
    ----------
    model : Model
        A model with loops (``model.loops``); with none this is :func:`partree.aba`.
    q, qd, tau : ndarray
        Configuration (nq,), velocity (nv,) and joint forces (nv,).
    f_ext : ndarray or dict, optional
        External wrenches on the bodies, as for :func:`partree.aba`.
    rank_tol : float
        Relative size (of singular values) below which a constraint row counts as dependent on the
        others: its multiplier is set to zero and ``rank`` drops.  Near a singular configuration
        the rank changes where the smallest singular value crosses this.

    Returns
    -------
    ConstrainedResult
        ``qdd``, ``multipliers``, ``loop_force`` (``loop_force_of(name)``), ``rank``,
        ``independent``, ``violation`` (Phi) and, computed on first access, the tree joints'
        ``joint_wrench`` / ``constraint_force`` with the loop forces applied.

    The state should satisfy the loops (``violation`` near 0; :func:`partree.correct_state` and
    :func:`partree.assemble` make it so): the accelerations are exact for the rows as stated at
    any state, but the motion they describe is the loop's only where it is closed.
    """
    q, qd = checks.state(model, q, qd)
    tau = checks.vector(model, tau, model.nv, "tau", "nv")
    F, has_f = checks.external_forces(model, f_ext)
    if not (np.isfinite(rank_tol) and 0.0 < rank_tol < 1.0):
        raise PartreeInputError(f"rank_tol must lie in (0, 1); got {rank_tol!r}")
    qdd, lam, terms, rank, perm, topo, E, r, v, c, S, Rw, pw = _solve(model, q, qd, tau, F, has_f, model.gravity,
                                                                   rank_tol)
    ind = _independent(model, topo, perm, rank)
    W = loop_wrenches(model, terms.G, lam)
    return ConstrainedResult(model, q, qd, tau, F if has_f else None, qdd, lam, terms, int(rank.sum()), ind, W)
