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
column-pivoted QR of Phi_q^T in the mass metric).  Rows found dependent carry no force, unless
they are not negligible themselves: then the group repeats constraints (a spatial scissor mast's
faces and hubs: 30 rows a unit of rank 9), and forces carried by the kept rows alone would grow
from group to group along a chain of such groups, and the rounding with them (threefold a
unit).  Such a group is factored with eps = 1e-12 of its largest K_jj added on its rows'
diagonal, which shares the force among them, and the call repeats its passes with gamma shifted
by eps lambda of the pass before until the shift settles (a proximal-point iteration whose fixed
point satisfies J qdd = gamma; a few passes).  The Schur complement updates IA, pA and the
still-pending rows (seed 004's equivalent subsystem).
The outward pass gives a_x and qdd as in ABA, then lambda of the loops eliminated at x.

Cost: ABA's, plus per body the square of the rows pending there, plus the factorisations: O(N)
for loops that close within small subtrees (a mast of units), whatever their number.

The call path is ABA's (``partree.algorithms.packed``): :func:`constrained_dynamics` hands one
compiled call (:func:`constrained_call`) the model's buffer, the workspace's, the loops' buffers
(:class:`LoopBuffers`: the loops and their :class:`LoopTopology` in one int64 buffer, the loop
passes' workspaces in one float64 buffer, built once per model and set of loops), the loops'
placements and the state; it checks the inputs, runs every pass (:func:`constrained_kernel_in`)
and writes qdd, the multipliers and the rest of the result into one new buffer, whose views the
:class:`ConstrainedResult` makes when they are first read.  Models too large to pack take the
same kernel with their arrays one by one (:func:`constrained_unpacked`).  In the inward and the
outward pass a body with no loop rows takes ABA's step and nothing else, so that local loops cost
the bodies on their paths only.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import checks
from ..errors import PartreeInputError
from .aba import PASS1_SCRATCH, aba_forward_pass1_in, articulated_project
from .linalg import spd_inverse, spd_inverse_trace
from .kinematics import world_poses
from .loop_constraints import TERMS_SCRATCH, distance_error, loop_force_kernel, loop_terms_kernel
from .packed import (ERR_DATA, ERR_SHAPE, NO_FORCES, OK, check_state, model_buffer, model_views, raw_view, restrict,
                     unowned,
                     workspace_views)
from .primitives import congruence_add, inertia_inverse_trace, xform_force_T_add, xform_motion


# ---------------------------------------------------------------------------------- topology
class LoopTopology:
    """Where each loop is pending and where it is eliminated (static: from the tree and the
    loops' bodies), flattened for the kernels.  Node n stands for the world.

    For node x (0..n): its loops are ``wloop[wptr[x]:wptr[x+1]]``, the first ``npl[x]`` pending
    (their rows first, ``prow[x]`` rows) and the others eliminated at x; ``wpos`` is each loop's
    first row within x's rows (``wrows[x]`` in all); ``pmap`` the pending loop's first row within
    the parent's rows, and ``prmap[rptr[x] + t]`` the parent's row of x's pending row t (-1 for
    the rows eliminated at x); ``wglob[rptr[x] + j]`` the global row of x's row j.  The
    workspace offsets are ``cptr`` (C, 6 per row), ``kptr`` (K, rows squared), ``rptr`` (rows)
    and ``sptr`` (C S, pending rows times the joint's degrees of freedom).  Loop ends on x are
    ``eloop[eptr[x]:eptr[x+1]]`` with their side (0 = A, 1 = B) and first row ``epos``.
    ``zfirst[x]``: the node that first writes x's rows in the inward pass (the child of the
    highest number that hands rows to x, or x itself), which zeroes them first.
    ``enodes``: the nodes that eliminate loops; ``zmax``, ``zwork`` and ``scratch``: the most
    rows one node eliminates, the backward pass's work values (:func:`backward_work`) and the
    scratch a whole call takes (:func:`constrained_kernel_in`)."""

    def __init__(self, model):
        loops = model.loops
        n = model.n
        nvj = np.concatenate((np.asarray(model.nv_j), [0])).astype(np.int64)
        arrs = topology_arrays(
            np.ascontiguousarray(model.parent, dtype=np.int64), np.ascontiguousarray(model.depth(), dtype=np.int64),
            np.ascontiguousarray(loops.body_a, dtype=np.int64), np.ascontiguousarray(loops.body_b, dtype=np.int64),
            np.ascontiguousarray(loops.nrows, dtype=np.int64), np.ascontiguousarray(loops.row0, dtype=np.int64), nvj)
        (self.lca, self.wptr, self.npl, self.prow, self.wrows, self.wloop, self.wpos, self.pmap, self.rptr,
         self.kptr, self.sptr, self.wglob, self.eptr, self.eloop, self.eside, self.epos, self.zfirst) = arrs
        self.cptr = 6 * self.rptr
        nrows = loops.nrows
        wrows, prow = self.wrows, self.prow
        self.prmap = pending_row_map(self.wptr, self.wloop, self.wpos, self.npl, self.pmap, nrows, self.rptr)
        # the nodes that eliminate loops, and the largest work of one elimination (the scratch)
        z = wrows - prow
        self.enodes = np.flatnonzero(z > 0).astype(np.int64)
        ze, pe = z[self.enodes], prow[self.enodes]
        self.zmax = int(ze.max(initial=0))
        self.zwork = int(backward_work(wrows, prow))
        self.scratch = 6 + max(PASS1_SCRATCH, TERMS_SCRATCH, BACKWARD_FIXED + self.zwork,
                               FORWARD_FIXED + max(self.zmax, 1))

    def arrays(self):
        return (self.wptr, self.wloop, self.wpos, self.npl, self.prow, self.wrows, self.pmap, self.wglob,
                self.rptr, self.cptr, self.kptr, self.sptr, self.eptr, self.eloop, self.eside, self.epos)


@njit(cache=True)
def _position(wloop, lo, hi, l):
    """The first index j in lo .. hi with j == hi or wloop[j] >= l (wloop increasing there)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if wloop[mid] < l:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def topology_arrays(parent, depth, body_a, body_b, nrows, row0, nvj):
    """The arrays of :class:`LoopTopology` (lca, wptr, npl, prow, wrows, wloop, wpos, pmap, rptr,
    kptr, sptr, wglob, eptr, eloop, eside, epos, zfirst) in two walks of every loop's paths: each
    node lists its pending loops, then the loops eliminated there, each group in loop order.
    Cost: the bodies plus the loops' path lengths."""
    n = parent.shape[0]
    L = body_a.shape[0]
    lca = np.empty(L, dtype=np.int64)
    pc = np.zeros(n + 1, dtype=np.int64)
    ec = np.zeros(n + 1, dtype=np.int64)
    nc = np.zeros(n + 1, dtype=np.int64)
    for l in range(L):              # count
        a = body_a[l]
        b = body_b[l]
        nc[a if a >= 0 else n] += 1
        nc[b if b >= 0 else n] += 1
        da = depth[a] if a >= 0 else -1
        db = depth[b] if b >= 0 else -1
        while a != b:
            if da >= db:
                pc[a] += 1
                a = parent[a]
                da -= 1
            else:
                pc[b] += 1
                b = parent[b]
                db -= 1
        ec[a if a >= 0 else n] += 1
        lca[l] = a
    wptr = np.zeros(n + 2, dtype=np.int64)
    for x in range(n + 1):
        wptr[x + 1] = wptr[x] + pc[x] + ec[x]
    wloop = np.empty(wptr[n + 1], dtype=np.int64)
    pfill = wptr[:n + 1].copy()
    efill = wptr[:n + 1] + pc
    for l in range(L):              # fill
        a = body_a[l]
        b = body_b[l]
        da = depth[a] if a >= 0 else -1
        db = depth[b] if b >= 0 else -1
        while a != b:
            if da >= db:
                wloop[pfill[a]] = l
                pfill[a] += 1
                a = parent[a]
                da -= 1
            else:
                wloop[pfill[b]] = l
                pfill[b] += 1
                b = parent[b]
                db -= 1
        top = a if a >= 0 else n
        wloop[efill[top]] = l
        efill[top] += 1
    npl = pc
    prow = np.zeros(n + 1, dtype=np.int64)
    wrows = np.zeros(n + 1, dtype=np.int64)
    wpos = np.empty(wloop.shape[0], dtype=np.int64)
    for x in range(n + 1):
        pos = 0
        for j in range(wptr[x], wptr[x + 1]):
            wpos[j] = pos
            if j < wptr[x] + npl[x]:
                prow[x] += nrows[wloop[j]]
            pos += nrows[wloop[j]]
        wrows[x] = pos
    pmap = np.full(wloop.shape[0], -1, dtype=np.int64)
    for x in range(n):
        up = parent[x] if parent[x] >= 0 else n
        for j in range(wptr[x], wptr[x] + npl[x]):
            l = wloop[j]
            k = _position(wloop, wptr[up], wptr[up] + npl[up], l)
            if k >= wptr[up] + npl[up] or wloop[k] != l:
                k = _position(wloop, wptr[up] + npl[up], wptr[up + 1], l)
            pmap[j] = wpos[k]
    rptr = np.zeros(n + 2, dtype=np.int64)
    kptr = np.zeros(n + 2, dtype=np.int64)
    sptr = np.zeros(n + 2, dtype=np.int64)
    for x in range(n + 1):
        rptr[x + 1] = rptr[x] + wrows[x]
        kptr[x + 1] = kptr[x] + wrows[x] * wrows[x]
        sptr[x + 1] = sptr[x] + prow[x] * nvj[x]
    wglob = np.empty(rptr[n + 1], dtype=np.int64)
    for x in range(n + 1):
        for j in range(wptr[x], wptr[x + 1]):
            l = wloop[j]
            o = rptr[x] + wpos[j]
            for i in range(nrows[l]):
                wglob[o + i] = row0[l] + i
    eptr = np.zeros(n + 2, dtype=np.int64)
    for x in range(n + 1):
        eptr[x + 1] = eptr[x] + nc[x]
    ne = eptr[n + 1]
    eloop = np.empty(ne, dtype=np.int64)
    eside = np.empty(ne, dtype=np.int64)
    epos = np.empty(ne, dtype=np.int64)
    fill = eptr[:n + 1].copy()
    for l in range(L):
        for side in range(2):
            x = body_a[l] if side == 0 else body_b[l]
            if x < 0:
                x = n
            e = fill[x]
            fill[x] += 1
            eloop[e] = l
            eside[e] = side
            k = _position(wloop, wptr[x], wptr[x] + npl[x], l)
            if k >= wptr[x] + npl[x] or wloop[k] != l:
                k = _position(wloop, wptr[x] + npl[x], wptr[x + 1], l)
            epos[e] = wpos[k]
    # the first writer of each node's rows in the inward pass (leaf to root): its child of the
    # highest number that hands rows up, or the node itself (its loop ends)
    zfirst = np.full(n + 1, -1, dtype=np.int64)
    for x in range(n):
        if prow[x] > 0:
            up = parent[x] if parent[x] >= 0 else n
            zfirst[up] = max(zfirst[up], x)
    for x in range(n + 1):
        if zfirst[x] < 0:
            zfirst[x] = x
    return lca, wptr, npl, prow, wrows, wloop, wpos, pmap, rptr, kptr, sptr, wglob, eptr, eloop, eside, epos, zfirst


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
#: pivots below NOISE times the rows' uncancelled size are rounding noise (rows of relative size
#: 1e-12 and less: a loop whose rows the tree already satisfies leaves ~1e-16)
NOISE = 1e-24


@njit(cache=True)
def pivoted_cholesky(K, o, w, z0, z, perm, tol, dfloor=0.0):
    """Cholesky with diagonal pivoting of the z x z block at rows/columns z0.. of the w x w
    row-major matrix stored at K[o:], in place: its leading rank x rank lower triangle becomes
    L with L L^T = (P^T K P) restricted to the chosen rows, perm[j] the block row of pivot j.
    Stops at a pivot below tol times the largest diagonal entry, or below NOISE times ``dfloor``
    (the size the diagonal would have if the rows did not cancel: rows that vanish to rounding,
    because the tree already allows all they forbid, are noise, not pivots); returns the rank.
    A 2 x 2 block (a planar pin's rows) takes :func:`pivoted_cholesky_2`, the same steps written
    out; any other size :func:`pivoted_cholesky_rows`."""
    if z == 2:
        return pivoted_cholesky_2(K, o + z0 * w + z0, w, perm, 0, tol, dfloor)
    return pivoted_cholesky_rows(K, o, w, z0, z, perm, tol, dfloor)


@njit(cache=True)
def pivoted_cholesky_rows(K, o, w, z0, z, perm, tol, dfloor):
    """:func:`pivoted_cholesky`'s steps for a block of any size z, in loops."""
    for j in range(z):
        perm[j] = j
    dmax = 0.0
    for j in range(z):
        d = K[o + (z0 + j) * w + z0 + j]
        if d > dmax:
            dmax = d
    noise = NOISE * dfloor
    if not dmax > noise or not dmax > 0.0:
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
        if not (best > tol * dmax and best > noise):
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


@njit(cache=True, inline="always")
def pivoted_cholesky_2(K, o, w, perm, op, tol, dfloor):
    """:func:`pivoted_cholesky` of a 2 x 2 block (a planar pin's rows) at K[o] (row stride w),
    its pivots to perm[op], perm[op + 1]: the same decisions and values, written out."""
    i01 = o + 1
    i10 = o + w
    i11 = i10 + 1
    perm[op] = 0
    perm[op + 1] = 1
    d0 = K[o]
    d1 = K[i11]
    dmax = 0.0
    if d0 > dmax:
        dmax = d0
    if d1 > dmax:
        dmax = d1
    noise = NOISE * dfloor
    if not dmax > noise or not dmax > 0.0:
        return 0
    best = -1.0
    jb = 0
    if d0 > best:
        best = d0
    if d1 > best:
        best = d1
        jb = 1
    if not (best > tol * dmax and best > noise):
        return 0
    if jb == 1:         # rows and columns 0 and 1 swapped
        K[o] = d1
        K[i11] = d0
        a = K[i01]
        K[i01] = K[i10]
        K[i10] = a
        perm[op] = 1
        perm[op + 1] = 0
    piv = np.sqrt(K[o])
    K[o] = piv
    K[i10] /= piv
    lik = K[i10]
    v = K[i11] - lik * K[i10]
    K[i11] = v
    if not (v > tol * dmax and v > noise):
        return 1
    K[i11] = np.sqrt(v)
    return 2


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
#: the backward pass's fixed scratch (four 6x6 blocks and two 6-vectors) before the work
#: arrays of the eliminations and of the rows handed on
BACKWARD_FIXED = 156
#: the forward pass's fixed scratch (two 6-vectors) before solve_eliminated's
FORWARD_FIXED = 12


@njit(cache=True)
def elimination_work(z, p):
    """Scratch values one elimination of z rows with p pending ones takes (:func:`eliminate`):
    the rows' factors, the sums, K_ZZ's diagonal and K_ZZ again for a redundant group."""
    return z * (7 + p) + max(36, 6 * p, p * p) + 7 + p + z + z * z


@njit(cache=True)
def backward_work(wrows, prow):
    """Scratch values the backward pass takes beyond BACKWARD_FIXED: the most of an elimination
    (:func:`elimination_work`) and of the rows a body hands on (13 per row) over the nodes."""
    zw = 0
    for x in range(wrows.shape[0]):
        z = wrows[x] - prow[x]
        if z > 0:
            zw = max(zw, elimination_work(z, prow[x]))
        zw = max(zw, 13 * prow[x])
    return zw


@njit(cache=True)
def loop_backward_pass(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, mass, com, I_com,
                       wptr, wloop, wpos, npl, prow, wrows, pmap, wglob, rptr, cptr, kptr, sptr,
                       eptr, eloop, eside, epos, zfirst, nrows, G, gamma, tol, Cw, Kw, kw, SC, perm, rank):
    """Inward pass: ABA's, with the loops' rows carried (C, K, k) and eliminated where their
    paths meet (world last).  Returns -1, or the body whose joint-space inertia is singular.

    G (R, 2, 6): the loop ends' rows (``LoopTerms.G``); gamma (R,): the rows' accelerations
    (frame part: the bodies' accelerations a enter through G); tol: pivots below tol times the
    largest are dependent rows.  Cw, Kw, kw, SC: the flat workspaces (each node's rows of Cw,
    Kw and kw zeroed by the pass where they are first written: ``zfirst``, LoopTopology.zfirst);
    perm (rows of all nodes), rank (n + 1): the factorisations' pivots and ranks; mass, com,
    I_com: the bodies' inertias (the elimination floor's bound).  The work arrays are allocated
    here (:func:`loop_backward_pass_in` takes them from a scratch array)."""
    prmap = pending_row_map(wptr, wloop, wpos, npl, pmap, nrows, rptr)
    return loop_backward_pass_in(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, mass, com, I_com, wptr, wloop,
                                 wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr, sptr, eptr, eloop, eside,
                                 epos, zfirst, nrows, G, gamma, tol, Cw, Kw, kw, SC, perm, rank,
                                 np.empty(BACKWARD_FIXED + backward_work(wrows, prow)), 0.0, np.zeros(1),
                                 np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))


@njit(cache=True)
def pending_row_map(wptr, wloop, wpos, npl, pmap, nrows, rptr):
    """prmap (rows of all nodes): the parent's row of each pending row of each node
    (``pmap[j] + rr`` for row rr of pending loop j), -1 for the rows eliminated at the node."""
    prmap = np.full(rptr[rptr.shape[0] - 1], -1, dtype=np.int64)
    for x in range(npl.shape[0]):
        for j in range(wptr[x], wptr[x] + npl[x]):
            for rr in range(nrows[wloop[j]]):
                prmap[rptr[x] + wpos[j] + rr] = pmap[j] + rr
    return prmap


@njit(cache=True, inline="always")
def zero_node_block(Cw, Kw, kw, oc, ok, orr, w):
    """Zero a node's rows in the inward pass's workspaces: C (6 w at oc), K (w^2 at ok), k (w at
    orr).  Each node's are zeroed by their first writer (``LoopTopology.zfirst``), so that a
    call writes every value it reads and no sweep over the whole workspace is needed."""
    for k in range(6 * w):
        Cw[oc + k] = 0.0
    for k in range(w * w):
        Kw[ok + k] = 0.0
    for k in range(w):
        kw[orr + k] = 0.0


@njit(cache=True, inline="always")
def eliminated_rows_size(x, prow, wrows, wglob, rptr, G):
    """The largest |G_A row|^2 + |G_B row|^2 of the rows eliminated at node x (its rows
    prow[x] .. wrows[x] - 1, whose global numbers ``wglob`` holds)."""
    g2 = 0.0
    o = rptr[x]
    for j in range(prow[x], wrows[x]):
        g = wglob[o + j]
        s = 0.0
        for side in range(2):
            for k in range(6):
                s += G[g, side, k] * G[g, side, k]
        if s > g2:
            g2 = s
    return g2


@njit(cache=True, inline="always")
def elimination_floor(x, n, parent, IA, mass, com, I_com, g2, bound, inv):
    """The size K_ZZ's diagonal would have at node x if the rows of the loops eliminated there
    did not cancel: g2, the largest |G_A row|^2 + |G_B row|^2 of those loops
    (:func:`eliminated_rows_size`), times trace(IA^-1), IA x's articulated inertia (at the world:
    the largest over the roots), a bound on a row's K = G IA^-1 G^T.  ``inv`` is 6x6 scratch.

    With ``bound`` an upper bound of it that needs no factorisation: IA is the body's own rigid
    inertia I plus positive semi-definite terms (its subtree's, the loops eliminated below), so
    trace(IA^-1) <= trace(I^-1), which the body's mass, CoM and inertia give in closed form
    (``inertia_inverse_trace``; inf for a massless body)."""
    if g2 == 0.0:
        return 0.0
    iota = 0.0
    lo = x if x < n else 0
    hi = x + 1 if x < n else n
    for b in range(lo, hi):
        if x == n and parent[b] >= 0:
            continue
        if bound:
            t = inertia_inverse_trace(mass[b], com[b], I_com[b])
        else:
            t = spd_inverse_trace(IA[b], 6, inv)
        if t > iota:
            iota = t
    return g2 * iota


@njit(cache=True)
def eliminate(x, n, w, p, oc, ok, orr, IA, pA, wglob, gamma, tol, Cw, Kw, kw, perm, rank, sc, dfloor,
              delta, reg, kept, rrank):
    """Eliminate the loops whose paths meet at node x (its rows p .. w - 1): factor K_ZZ by
    :func:`pivoted_cholesky`, then with W = L^-1
    [C_Z, K_ZP, gamma_Z - k_Z] (the kept rows) update IA += W1^T W1 and pA -= W1^T w3 (a body),
    and the pending rows: C_P -= W2^T W1, K_PP -= W2^T W2, k_P += W2^T w3 (two kept rows: each
    sum's two terms written out).  ``sc`` holds :func:`elimination_work` values.  Every
    value is summed in the order of its formula; the loops run over independent values inside,
    so that the sums overlap instead of waiting for each other.

    With ``delta`` = 0 the rows the pivoting leaves out carry no force.  With ``delta`` > 0
    (the serial call) the rank-revealing factorisation decides the rank (``rrank[x]``) and the
    rows it keeps (``kept``, 1 or 0 per row of x, rows p .. w - 1).  A group is redundant where
    a row it leaves out is not negligible itself (its own K_jj above the pivots' threshold): the
    constraints repeat one another, and forces carried by the kept rows alone grow from loop to
    loop along a chain of such groups (the multipliers of a spatial scissor mast grow threefold
    a unit, and the rounding with them).  Such a group is factored again with every
    non-negligible row and eps = delta max K_jj on their diagonal (``reg[x]`` = eps; the
    negligible rows are left out and carry no force): the rows share the force as the
    regularised (minimum-norm) multipliers do, and the caller removes the regularisation's shift
    eps lambda by iterating on gamma (:func:`constrained_kernel_in`).  ``rank[x]`` and ``perm``
    then describe the regularised factor; without a redundant row reg[x] = 0 and rank[x] =
    rrank[x].  ``reg``, ``kept`` and ``rrank`` are only written where delta > 0."""
    z = w - p
    oz = z * (7 + p) + max(36, 6 * p, p * p) + 7 + p        # K_ZZ again (elimination_work)
    if delta > 0.0:         # its diagonal, before the factorisation overwrites it
        for j in range(z):
            sc[oz + j] = Kw[ok + (p + j) * w + p + j]
    rk = pivoted_cholesky(Kw, ok, w, p, z, perm[orr + p:orr + w], tol, dfloor)
    if delta > 0.0:
        rrank[x] = rk
        reg[x] = 0.0
        for j in range(z):
            kept[orr + p + j] = 0
        for j in range(rk):
            kept[orr + p + perm[orr + p + j]] = 1
        if rk < z:
            dmax = 0.0
            for j in range(z):
                dmax = max(dmax, sc[oz + j])
            thr = max(tol * dmax, NOISE * dfloor)
            redundant = False
            for j in range(z):
                if kept[orr + p + j] == 0 and sc[oz + j] > thr:
                    redundant = True
            if redundant:
                # K_ZZ back from the factor (pivot order: L L^T on the first rk columns, the Schur
                # complement after), into the block's own order
                Kz = raw_view(sc, oz + z, (z, z))
                for i in range(z):
                    for j in range(i + 1):
                        v = Kw[ok + (p + i) * w + p + j] if i >= rk and j >= rk else 0.0
                        for k in range(min(j + 1, rk)):
                            v += Kw[ok + (p + i) * w + p + k] * Kw[ok + (p + j) * w + p + k]
                        Kz[perm[orr + p + i], perm[orr + p + j]] = v
                        Kz[perm[orr + p + j], perm[orr + p + i]] = v
                # K_ZZ + eps I on the non-negligible rows, the others left out
                eps = delta * dmax
                for i in range(z):
                    big = sc[oz + i] > thr
                    for j in range(z):
                        Kw[ok + (p + i) * w + p + j] = Kz[i, j] if big and sc[oz + j] > thr else 0.0
                    if big:
                        Kw[ok + (p + i) * w + p + i] += eps
                rk = pivoted_cholesky(Kw, ok, w, p, z, perm[orr + p:orr + w], 0.5 * delta, 0.0)
                reg[x] = eps
    rank[x] = rk
    if rk == 0:
        return
    nc = 7 + p
    X = raw_view(sc, 0, (rk, nc))           # columns: W1 (6), W2 (p), w3 (1)
    o = rk * nc
    acc = raw_view(sc, o, (max(36, 6 * p, p * p),))
    s = raw_view(sc, o + acc.shape[0], (nc,))
    for j in range(rk):
        zr = p + perm[orr + p + j]
        for k in range(6):
            X[j, k] = Cw[oc + zr * 6 + k]
        for t in range(p):
            X[j, 6 + t] = Kw[ok + zr * w + t]
        X[j, 6 + p] = gamma[wglob[orr + zr]] - kw[orr + zr]
    # X <- L^-1 X, all columns at once (each as lower_solve would)
    for i in range(rk):
        for col in range(nc):
            s[col] = X[i, col]
        for j in range(i):
            lij = Kw[ok + (p + i) * w + p + j]
            for col in range(nc):
                s[col] -= lij * X[j, col]
        d = Kw[ok + (p + i) * w + p + i]
        for col in range(nc):
            X[i, col] = s[col] / d
    if rk == 2:     # two kept rows (a planar pin): the same sums, two terms each, without acc
        if x < n:
            for k in range(6):
                pA[x, k] -= X[0, k] * X[0, 6 + p] + X[1, k] * X[1, 6 + p]
            for k in range(6):
                for l2 in range(6):
                    IA[x, k, l2] += X[0, k] * X[0, l2] + X[1, k] * X[1, l2]
        for t in range(p):
            y0 = X[0, 6 + t]
            y1 = X[1, 6 + t]
            for k in range(6):
                Cw[oc + t * 6 + k] -= y0 * X[0, k] + y1 * X[1, k]
            for t2 in range(p):
                Kw[ok + t * w + t2] -= y0 * X[0, 6 + t2] + y1 * X[1, 6 + t2]
            kw[orr + t] += y0 * X[0, 6 + p] + y1 * X[1, 6 + p]
        return
    if x < n:
        for k in range(6):
            acc[k] = 0.0
        for j in range(rk):
            y = X[j, 6 + p]
            for k in range(6):
                acc[k] += X[j, k] * y
        for k in range(6):
            pA[x, k] -= acc[k]
        for k in range(36):
            acc[k] = 0.0
        for j in range(rk):
            for k in range(6):
                y = X[j, k]
                for l2 in range(6):
                    acc[k * 6 + l2] += y * X[j, l2]
        for k in range(6):
            for l2 in range(6):
                IA[x, k, l2] += acc[k * 6 + l2]
    if p == 0:
        return
    for k in range(6 * p):
        acc[k] = 0.0
    for j in range(rk):
        for t in range(p):
            y = X[j, 6 + t]
            for k in range(6):
                acc[t * 6 + k] += y * X[j, k]
    for t in range(p):
        for k in range(6):
            Cw[oc + t * 6 + k] -= acc[t * 6 + k]
    for k in range(p * p):
        acc[k] = 0.0
    for j in range(rk):
        for t in range(p):
            y = X[j, 6 + t]
            for t2 in range(p):
                acc[t * p + t2] += y * X[j, 6 + t2]
    for t in range(p):
        for t2 in range(p):
            Kw[ok + t * w + t2] -= acc[t * p + t2]
    for t in range(p):
        acc[t] = 0.0
    for j in range(rk):
        y = X[j, 6 + p]
        for t in range(p):
            acc[t] += X[j, 6 + t] * y
    for t in range(p):
        kw[orr + t] += acc[t]


@njit(cache=True)
def loop_backward_pass_in(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, mass, com, I_com,
                          wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr, sptr,
                          eptr, eloop, eside, epos, zfirst, nrows, G, gamma, tol, Cw, Kw, kw, SC, perm, rank, sc,
                          delta, reg, kept, rrank):
    """:func:`loop_backward_pass` with its work arrays taken from ``sc`` (BACKWARD_FIXED values,
    then :func:`backward_work`: ``LoopTopology.zwork``), and the pending rows' parent rows
    ``prmap`` (``LoopTopology.prmap``) in place of ``pmap`` (wptr, wloop, wpos and npl are not
    read).  ``delta``, ``reg``, ``kept``, ``rrank``: the sharing of redundant groups'
    forces (:func:`eliminate`; delta = 0: none, the three arrays are not read).

    1-DOF joints take ABA's step written out (``aba_backward_pass_in``), in the arithmetic of
    the general path (``articulated_project``); a body with no loop rows (none pending, none
    ending or eliminated there: most bodies when the loops are local) does nothing else.  The
    work of a body with rows stays in this loop: a call per body with the kernels' thirty-odd
    array arguments costs more than it saves."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, tau, E, r, c = unowned(parent), unowned(idx_v), unowned(tau), unowned(E), unowned(r), unowned(c)
    IA, pA, S, U, Dinv, u = unowned(IA), unowned(pA), unowned(S), unowned(U), unowned(Dinv), unowned(u)
    mass, com, I_com, wptr, wloop = unowned(mass), unowned(com), unowned(I_com), unowned(wptr), unowned(wloop)
    wpos, npl, prow, wrows, prmap = unowned(wpos), unowned(npl), unowned(prow), unowned(wrows), unowned(prmap)
    wglob, rptr, cptr, kptr, sptr = unowned(wglob), unowned(rptr), unowned(cptr), unowned(kptr), unowned(sptr)
    eptr, eloop, eside, epos, zfirst = unowned(eptr), unowned(eloop), unowned(eside), unowned(epos), unowned(zfirst)
    nrows, G, gamma, Cw, Kw, kw = unowned(nrows), unowned(G), unowned(gamma), unowned(Cw), unowned(Kw), unowned(kw)
    SC, perm, rank, sc, reg = unowned(SC), unowned(perm), unowned(rank), unowned(sc), unowned(reg)
    kept, rrank = unowned(kept), unowned(rrank)
    n = parent.shape[0]
    nvt = S.shape[0]
    T6 = raw_view(sc, 0, (6, 6))
    Ia = raw_view(sc, 36, (6, 6))
    D = raw_view(sc, 72, (6, 6))
    Dn = raw_view(sc, 108, (6, 6))
    tmp = raw_view(sc, 144, (6,))
    pa = raw_view(sc, 150, (6,))
    work = raw_view(sc, BACKWARD_FIXED, (sc.shape[0] - BACKWARD_FIXED,))
    for step in range(n + 1):
        x = n - 1 - step if step < n else n      # bodies leaf to root, the world last
        if x < n and wrows[x] == 0:
            iv = idx_v[x]
            if (idx_v[x + 1] - iv if x + 1 < n else nvt - iv) == 1:
                Dd = 0.0
                uu = tau[iv]
                for k in range(6):
                    sk = 0.0
                    for l2 in range(6):
                        sk += IA[x, k, l2] * S[iv, l2]
                    U[iv, k] = sk
                    Dd += S[iv, k] * sk
                    uu -= S[iv, k] * pA[x, k]
                if not Dd > 0.0:
                    return x
                Di = 1.0 / Dd
                Dinv[iv, 0] = Di
                u[iv] = uu
                up = parent[x]
                if up < 0:
                    continue
                # Ia = IA - U D^-1 U^T, pa = pA + Ia c + U D^-1 u, in articulated_project's order
                for k in range(6):
                    tmp[k] = Di * U[iv, k]
                for k in range(6):
                    for l2 in range(6):
                        Ia[k, l2] = IA[x, k, l2] - U[iv, k] * tmp[l2]
                wu = Di * uu
                for k in range(6):
                    s = pA[x, k]
                    for l2 in range(6):
                        s += Ia[k, l2] * c[x, l2]
                    pa[k] = s + U[iv, k] * wu
                congruence_add(E[x], r[x], Ia, IA[up], T6)
                xform_force_T_add(E[x], r[x], pa, pA[up])
                continue
        w = wrows[x]
        p = 0
        oc = 0
        ok = 0
        orr = 0
        os_ = 0
        bare = False
        if w > 0:
            p = prow[x]
            oc = cptr[x]
            ok = kptr[x]
            orr = rptr[x]
            os_ = sptr[x]
            # no child handed rows to x: its rows start here.  Where a body only hands its own
            # loop ends' rows on, none eliminated ("bare"), each row of C is one end's row of G (a
            # loop with both ends on x is eliminated at x), and K and k are zero and not read
            bare = x < n and zfirst[x] == x and w == p
            if zfirst[x] == x and not bare:
                zero_node_block(Cw, Kw, kw, oc, ok, orr, w)
            # the rows of the loop ends on x
            for e in range(eptr[x], eptr[x + 1]):
                side = eside[e]
                o6 = oc + epos[e] * 6
                og = orr + epos[e]
                for rr in range(nrows[eloop[e]]):
                    g = wglob[og + rr]
                    if bare:
                        for k in range(6):
                            Cw[o6 + rr * 6 + k] = G[g, side, k]
                    else:
                        for k in range(6):
                            Cw[o6 + rr * 6 + k] += G[g, side, k]
            # eliminate the loops whose paths meet at x.  The floor (elimination_floor: a 6x6
            # factorisation) only decides where NOISE times it exceeds tol times the largest
            # K_jj: below, every pivot the relative test keeps is above the noise, and the
            # bound decides as the floor does
            if w > p:
                g2 = eliminated_rows_size(x, prow, wrows, wglob, rptr, G)
                dfloor = elimination_floor(x, n, parent, IA, mass, com, I_com, g2, True, Dn)
                dmax = 0.0
                for j in range(p, w):
                    dmax = max(dmax, Kw[ok + j * w + j])
                if not NOISE * dfloor <= tol * dmax:
                    dfloor = elimination_floor(x, n, parent, IA, mass, com, I_com, g2, False, Dn)
                eliminate(x, n, w, p, oc, ok, orr, IA, pA, wglob, gamma, tol, Cw, Kw, kw, perm, rank, work, dfloor,
                          delta, reg, kept, rrank)
        if x == n:
            continue
        # ABA's projection of joint x, with the pending rows
        iv = idx_v[x]
        nv = idx_v[x + 1] - iv if x + 1 < n else nvt - iv
        up = parent[x]
        if nv == 1:
            Dd = 0.0
            uu = tau[iv]
            for k in range(6):
                sk = 0.0
                for l2 in range(6):
                    sk += IA[x, k, l2] * S[iv, l2]
                U[iv, k] = sk
                Dd += S[iv, k] * sk
                uu -= S[iv, k] * pA[x, k]
            if not Dd > 0.0:
                return x
            Di = 1.0 / Dd
            Dinv[iv, 0] = Di
            u[iv] = uu
            for t in range(p):          # SC = C_P S
                s = 0.0
                for k in range(6):
                    s += Cw[oc + t * 6 + k] * S[iv, k]
                SC[os_ + t] = s
            if up >= 0:
                # Ia = IA - U D^-1 U^T, pa = pA + Ia c + U D^-1 u, in articulated_project's order
                for k in range(6):
                    tmp[k] = Di * U[iv, k]
                for k in range(6):
                    for l2 in range(6):
                        Ia[k, l2] = IA[x, k, l2] - U[iv, k] * tmp[l2]
                wu = Di * uu
                for k in range(6):
                    s = pA[x, k]
                    for l2 in range(6):
                        s += Ia[k, l2] * c[x, l2]
                    pa[k] = s + U[iv, k] * wu
                congruence_add(E[x], r[x], Ia, IA[up], T6)
                xform_force_T_add(E[x], r[x], pa, pA[up])
        else:
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
            for t in range(p):          # SC = C_P S
                for d in range(nv):
                    s = 0.0
                    for k in range(6):
                        s += Cw[oc + t * 6 + k] * S[iv + d, k]
                    SC[os_ + t * nv + d] = s
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
        if zfirst[q_] == x:         # the first rows handed to the parent: its rows start here
            zero_node_block(Cw, Kw, kw, ocq, okq, orq, wq)
        # the pending rows' relation handed to the parent: C' = C - SC D^-1 U^T (then X),
        # K' = K + SC D^-1 SC^T, k' = k + C' c + SC D^-1 u, each value summed in the order of
        # its formula
        Ex = E[x]
        rx = r[x]
        if nv == 1:
            Di = Dinv[iv, 0]
            U0, U1, U2, U3, U4, U5 = U[iv, 0], U[iv, 1], U[iv, 2], U[iv, 3], U[iv, 4], U[iv, 5]
            c0, c1, c2, c3, c4, c5 = c[x, 0], c[x, 1], c[x, 2], c[x, 3], c[x, 4], c[x, 5]
            uu = u[iv]
            for t in range(p):
                tq = prmap[orr + t]
                y = 0.0 + SC[os_ + t] * Di
                o6 = oc + t * 6
                f0 = Cw[o6] - y * U0
                f1 = Cw[o6 + 1] - y * U1
                f2 = Cw[o6 + 2] - y * U2
                f3 = Cw[o6 + 3] - y * U3
                f4 = Cw[o6 + 4] - y * U4
                f5 = Cw[o6 + 5] - y * U5
                k0 = 0.0 if bare else kw[orr + t]
                kw[orq + tq] += k0 + f0 * c0 + f1 * c1 + f2 * c2 + f3 * c3 + f4 * c4 + f5 * c5 + y * uu
                # C'_parent += X^T C' (xform_force_T_add)
                n0 = Ex[0, 0] * f0 + Ex[1, 0] * f1 + Ex[2, 0] * f2
                n1 = Ex[0, 1] * f0 + Ex[1, 1] * f1 + Ex[2, 1] * f2
                n2 = Ex[0, 2] * f0 + Ex[1, 2] * f1 + Ex[2, 2] * f2
                g0 = Ex[0, 0] * f3 + Ex[1, 0] * f4 + Ex[2, 0] * f5
                g1 = Ex[0, 1] * f3 + Ex[1, 1] * f4 + Ex[2, 1] * f5
                g2 = Ex[0, 2] * f3 + Ex[1, 2] * f4 + Ex[2, 2] * f5
                oq = ocq + tq * 6
                Cw[oq] += n0 + rx[1] * g2 - rx[2] * g1
                Cw[oq + 1] += n1 + rx[2] * g0 - rx[0] * g2
                Cw[oq + 2] += n2 + rx[0] * g1 - rx[1] * g0
                Cw[oq + 3] += g0
                Cw[oq + 4] += g1
                Cw[oq + 5] += g2
                kt = ok + t * w
                ktq = okq + tq * wq
                for t2 in range(p):
                    Kw[ktq + prmap[orr + t2]] += (0.0 if bare else Kw[kt + t2]) + y * SC[os_ + t2]
            continue
        Y = raw_view(work, 0, (p, 6))               # SC D^-1
        Cp = raw_view(work, 6 * p, (p, 6))          # C'
        acc = raw_view(work, 12 * p, (p,))
        for t in range(p):
            for d in range(nv):
                Y[t, d] = 0.0
            for e2 in range(nv):
                f = SC[os_ + t * nv + e2]
                for d in range(nv):
                    Y[t, d] += f * Dinv[iv + e2, d]
            for k in range(6):
                Cp[t, k] = Cw[oc + t * 6 + k]
            for d in range(nv):
                y = Y[t, d]
                for k in range(6):
                    Cp[t, k] -= y * U[iv + d, k]
        for t in range(p):
            tq = prmap[orr + t]
            s = 0.0 if bare else kw[orr + t]
            for k in range(6):
                s += Cp[t, k] * c[x, k]
            for d in range(nv):
                s += Y[t, d] * u[iv + d]
            kw[orq + tq] += s
            xform_force_T_add(Ex, rx, Cp[t], Cw[ocq + tq * 6:ocq + tq * 6 + 6])
            kt = ok + t * w
            for t2 in range(p):
                acc[t2] = 0.0 if bare else Kw[kt + t2]
            for d in range(nv):
                y = Y[t, d]
                for t2 in range(p):
                    acc[t2] += y * SC[os_ + t2 * nv + d]
            ktq = okq + tq * wq
            for t2 in range(p):
                Kw[ktq + prmap[orr + t2]] += acc[t2]
    return -1


@njit(cache=True)
def solve_eliminated(x, a, lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank):
    """The multipliers of the loops eliminated at node x, from its acceleration a and the
    pending multipliers (already in lam): lambda_I = K_II^-1 (gamma - k - C a - K_IP lambda_P);
    dependent rows get 0."""
    solve_eliminated_in(x, a, lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank,
                        np.empty(max(wrows[x] - prow[x], 1)))


@njit(cache=True, inline="always")
def solve_eliminated_in(x, a, lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank, h):
    """:func:`solve_eliminated` with its work vector ``h`` (at least the rows eliminated at x)."""
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
    for j in range(rk):
        zr = p + perm[orr + p + j]
        s = gamma[wglob[orr + zr]] - kw[orr + zr]
        for k in range(6):
            s -= Cw[oc + zr * 6 + k] * a[k]
        for t in range(p):
            s -= Kw[ok + zr * w + t] * lam[wglob[orr + t]]
        h[j] = s
    if rk == 2:     # lower_solve and upper_solve of two rows, written out
        o = ok + p * w + p
        l00 = Kw[o]
        l10 = Kw[o + w]
        l11 = Kw[o + w + 1]
        x0 = h[0] / l00
        x1 = (h[1] - l10 * x0) / l11
        x1 = x1 / l11
        x0 = (x0 - l10 * x1) / l00
        lam[wglob[orr + p + perm[orr + p]]] = x0
        lam[wglob[orr + p + perm[orr + p + 1]]] = x1
        return
    lower_solve(Kw, ok, w, p, rk, h)
    upper_solve(Kw, ok, w, p, rk, h)
    for j in range(rk):
        lam[wglob[orr + p + perm[orr + p + j]]] = h[j]


@njit(cache=True)
def loop_forward_pass(parent, idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd, lam,
                      prow, wrows, wglob, rptr, cptr, kptr, sptr, gamma, Cw, Kw, kw, SC, perm, rank):
    """Outward pass: the world's multipliers from ``a_base``, then for each body its acceleration
    and qdd = D^-1 (u - U^T a' + (C S)^T lambda_P), then the multipliers eliminated at it."""
    zmax = 1
    for x in range(parent.shape[0] + 1):
        zmax = max(zmax, wrows[x] - prow[x])
    loop_forward_pass_in(parent, idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd, lam, prow, wrows, wglob, rptr,
                         cptr, kptr, sptr, gamma, Cw, Kw, kw, SC, perm, rank, np.empty(FORWARD_FIXED + zmax))


@njit(cache=True, inline="always")
def loop_body_step(x, iv, nv, ax, qo, qdd, lam, U, S, Dinv, u, SC, prow, wrows, wglob, rptr, sptr, h):
    """The outward step of body x (nv dofs from iv) once ``ax`` holds X a_parent + c: its joint
    accelerations qdd[qo:qo + nv] = D^-1 (u - U^T ax + (C S)^T lambda_P), then ax += S qdd;
    ``h`` nv values of scratch.  (The multipliers eliminated at x follow: ``solve_eliminated_in``.)"""
    w = wrows[x]
    p = prow[x] if w > 0 else 0
    orr = rptr[x]
    os_ = sptr[x]
    for d in range(nv):
        s = u[iv + d]
        for k in range(6):
            s -= U[iv + d, k] * ax[k]
        for t in range(p):
            s += SC[os_ + t * nv + d] * lam[wglob[orr + t]]
        h[d] = s
    for d in range(nv):
        s = 0.0
        for e2 in range(nv):
            s += Dinv[iv + d, e2] * h[e2]
        qdd[qo + d] = s
    for d in range(nv):
        for k in range(6):
            ax[k] += S[iv + d, k] * qdd[qo + d]


@njit(cache=True)
def loop_forward_pass_in(parent, idx_v, a_base, E, r, S, c, U, Dinv, u, a, qdd, lam,
                         prow, wrows, wglob, rptr, cptr, kptr, sptr, gamma, Cw, Kw, kw, SC, perm, rank, sc):
    """:func:`loop_forward_pass` with its work arrays taken from ``sc`` (FORWARD_FIXED values,
    then the most rows one node eliminates: ``LoopTopology.zmax``).  A body with no loop rows
    and a 1-DOF joint takes ABA's step (``aba_forward_pass2_in``)."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, a_base, E, r = unowned(parent), unowned(idx_v), unowned(a_base), unowned(E), unowned(r)
    S, c, U, Dinv, u, a, qdd = unowned(S), unowned(c), unowned(U), unowned(Dinv), unowned(u), unowned(a), unowned(qdd)
    lam, prow, wrows, wglob, rptr = unowned(lam), unowned(prow), unowned(wrows), unowned(wglob), unowned(rptr)
    cptr, kptr, sptr, gamma, Cw = unowned(cptr), unowned(kptr), unowned(sptr), unowned(gamma), unowned(Cw)
    Kw, kw, SC, perm, rank, sc = unowned(Kw), unowned(kw), unowned(SC), unowned(perm), unowned(rank), unowned(sc)
    n = parent.shape[0]
    nvt = S.shape[0]
    tmp = raw_view(sc, 0, (6,))
    h = raw_view(sc, 6, (6,))
    hz = raw_view(sc, FORWARD_FIXED, (sc.shape[0] - FORWARD_FIXED,))
    if wrows[n] > 0:
        solve_eliminated_in(n, a_base, lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank, hz)
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
        if nv == 1 and wrows[x] == 0:
            s = u[iv]
            for k in range(6):
                s -= U[iv, k] * a[x, k]
            y = Dinv[iv, 0] * s
            qdd[iv] = y
            for k in range(6):
                a[x, k] += S[iv, k] * y
            continue
        loop_body_step(x, iv, nv, a[x], iv, qdd, lam, U, S, Dinv, u, SC, prow, wrows, wglob, rptr, sptr, h)
        if wrows[x] > prow[x]:
            solve_eliminated_in(x, a[x], lam, wrows, prow, wglob, rptr, cptr, kptr, gamma, Cw, Kw, kw, perm, rank, hz)


# ---------------------------------------------------------------------------------- one call
#: return code of a call whose distance loop l has coinciding points: ERR_DISTANCE_AT - l
ERR_DISTANCE_AT = -16
#: the regularisation of a redundant group, relative to its largest K_jj (:func:`eliminate`)
SHARE_DELTA = 1e-12
#: the most passes that remove the regularisation's shift (each an inward and outward pass)
SHARE_PASSES = 8
#: the pivots' relative threshold (of squares) in the passes after a redundant group was found:
#: the regularised eliminations leave rounding-sized pivots of order SHARE_DELTA in the rows
#: still pending, which are no rank
SHARE_RANK_TOL = 1e-9


@njit(cache=True)
def constrained_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                          q, qd, tau, fext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u,
                          kind, body_a, body_b, R_a, p_a, R_b, p_b, laxis, laxis2, length, nrows, row0,
                          wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr, sptr,
                          eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank, kept,
                          Rw, pw, gamma, T, Cw, Kw, kw, SC, reg, gsh, sc, tol, delta,
                          qdd, lam, phi, vel, indep, lforce, G, info):
    """One evaluation: ABA's pass 1, the bodies' world poses (Rw, pw), the loop terms
    (``loop_terms_kernel``: G, gamma, phi, vel, T), the inward and outward loop passes, then the rows
    the pivoting kept (``indep``, 1.0 or 0.0, from ``kept``), the loops' forces T lambda
    (``lforce``) and the total rank (``info[0]``, from ``rrank``).  The inward pass zeroes each
    node's rows of the workspaces (Cw, Kw, kw) where it first writes them (``zfirst``); the
    scratch ``sc`` holds LoopTopology.scratch values.

    With ``delta`` > 0 (SHARE_DELTA) redundant groups share their force (:func:`eliminate`): their rows then
    solve J qdd + eps lambda = gsh, and the passes run again with gsh = gamma + eps lambda of the
    pass before (``reg``: eps per node; ``gsh``: the rows' gamma so shifted), a proximal-point
    iteration whose fixed point is J qdd = gamma, until the shift changes by less than 1e-15 /
    delta of itself (the rows' residual below 1e-15 of K lambda), at most SHARE_PASSES times.
    Models without redundant groups take one pass, and so does ``delta`` = 0, where the rows
    the pivoting leaves out carry no force (the parallel engine's solution).  Returns ``packed.OK``, the body whose
    joint-space inertia is singular, or ERR_DISTANCE_AT - l for a distance loop l whose two
    points coincide."""
    work = raw_view(sc, 6, (sc.shape[0] - 6,))
    aba_forward_pass1_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                         fext, has_fext, E, r, v, c, IA, pA, S, work)
    world_poses(parent, E, r, Rw, pw)
    bad = loop_terms_kernel(kind, body_a, body_b, R_a, p_a, R_b, p_b, laxis, laxis2, length, nrows, row0, Rw, pw,
                            v, G, gamma, phi, vel, T, work)
    if bad >= 0:
        return ERR_DISTANCE_AT - bad
    for k in range(gsh.shape[0]):
        gsh[k] = gamma[k]
    for e in range(enodes.shape[0]):        # no regularisation left from a call before
        reg[enodes[e]] = 0.0
    stop = 1e-15 / delta if delta > 0.0 else 0.0
    a0 = raw_view(sc, 0, (6,))
    tol_it = tol
    for it in range(SHARE_PASSES + 1):
        if it > 0:      # IA and pA afresh: the inward pass changed them
            aba_forward_pass1_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                                 fext, has_fext, E, r, v, c, IA, pA, S, work)
        bad = loop_backward_pass_in(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, mass, com, I_com, wptr, wloop,
                                    wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr, sptr, eptr, eloop, eside,
                                    epos, zfirst, nrows, G, gsh, tol_it, Cw, Kw, kw, SC, perm, rank, work, delta, reg,
                                    kept, rrank)
        if bad >= 0:
            return bad
        a0[0] = 0.0
        a0[1] = 0.0
        a0[2] = 0.0
        a0[3] = -gravity[0]
        a0[4] = -gravity[1]
        a0[5] = -gravity[2]
        for k in range(lam.shape[0]):
            lam[k] = 0.0
        loop_forward_pass_in(parent, idx_v, a0, E, r, S, c, U, Dinv, u, a, qdd, lam, prow, wrows, wglob, rptr, cptr,
                             kptr, sptr, gsh, Cw, Kw, kw, SC, perm, rank, work)
        # the shift of the regularised rows for the next pass
        shared = False
        change = 0.0
        size = 0.0
        for e in range(enodes.shape[0]):
            x = enodes[e]
            eps = reg[x]
            if eps > 0.0:
                shared = True
                o = rptr[x] + prow[x]
                for j in range(rank[x]):
                    g = wglob[o + perm[o + j]]
                    y = gamma[g] + eps * lam[g]
                    change = max(change, abs(y - gsh[g]))
                    size = max(size, abs(eps * lam[g]))
                    gsh[g] = y
        if not shared or (it > 0 and not change > stop * size):
            break
        tol_it = max(tol, SHARE_RANK_TOL)
    for k in range(indep.shape[0]):
        indep[k] = 0.0
    total = 0
    for e in range(enodes.shape[0]):
        x = enodes[e]
        o = rptr[x] + prow[x]
        if delta > 0.0:
            total += rrank[x]
            for j in range(wrows[x] - prow[x]):
                if kept[o + j] != 0:
                    indep[wglob[o + j]] = 1.0
        else:
            total += rank[x]
            for j in range(rank[x]):
                indep[wglob[o + perm[o + j]]] = 1.0
    info[0] = total
    loop_force_kernel(nrows, row0, T, lam, lforce)
    return OK


#: first word of a loop buffer ('ptrloop' and the layout's version)
LOOP_MAGIC = 0x7074726C6F6F7003
LOOP_HEADER = 16


@njit(cache=True)
def loop_views(ib):
    """The loops' and the topology's arrays as raw views of the loop buffer ``ib``
    (:class:`LoopBuffers`): kind, body_a, body_b, nrows, row0, wptr, wloop, wpos, npl, prow,
    wrows, prmap, wglob, rptr, cptr, kptr, sptr, eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank
    (the ranks the pivoting found) and kept (its kept rows)."""
    n = ib[1]
    L = ib[2]
    nw = ib[4]
    nwl = ib[7]
    ne = ib[8]
    nen = ib[9]
    o = LOOP_HEADER
    kind = raw_view(ib, o, (L,))
    body_a = raw_view(ib, o + L, (L,))
    body_b = raw_view(ib, o + 2 * L, (L,))
    nrows = raw_view(ib, o + 3 * L, (L,))
    row0 = raw_view(ib, o + 4 * L, (L,))
    o += 5 * L
    wptr = raw_view(ib, o, (n + 2,))
    rptr = raw_view(ib, o + n + 2, (n + 2,))
    cptr = raw_view(ib, o + 2 * (n + 2), (n + 2,))
    kptr = raw_view(ib, o + 3 * (n + 2), (n + 2,))
    sptr = raw_view(ib, o + 4 * (n + 2), (n + 2,))
    eptr = raw_view(ib, o + 5 * (n + 2), (n + 2,))
    o += 6 * (n + 2)
    npl = raw_view(ib, o, (n + 1,))
    prow = raw_view(ib, o + n + 1, (n + 1,))
    wrows = raw_view(ib, o + 2 * (n + 1), (n + 1,))
    rank = raw_view(ib, o + 3 * (n + 1), (n + 1,))
    rrank = raw_view(ib, o + 4 * (n + 1), (n + 1,))
    o += 5 * (n + 1)
    wloop = raw_view(ib, o, (nwl,))
    wpos = raw_view(ib, o + nwl, (nwl,))
    o += 2 * nwl
    wglob = raw_view(ib, o, (nw,))
    prmap = raw_view(ib, o + nw, (nw,))
    perm = raw_view(ib, o + 2 * nw, (nw,))
    kept = raw_view(ib, o + 3 * nw, (nw,))
    o += 4 * nw
    eloop = raw_view(ib, o, (ne,))
    eside = raw_view(ib, o + ne, (ne,))
    epos = raw_view(ib, o + 2 * ne, (ne,))
    zfirst = raw_view(ib, o + 3 * ne, (n + 1,))
    enodes = raw_view(ib, o + 3 * ne + n + 1, (nen,))
    return (kind, body_a, body_b, nrows, row0, wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr,
            kptr, sptr, eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank, kept)


@njit(cache=True)
def loop_work_views(ib, fb):
    """The loop passes' float workspaces as raw views of ``fb``: Rw, pw (the bodies' world
    poses), gamma, T, Cw, Kw, kw, SC, reg (n + 1: the regularisation per node), gsh (R: the
    shifted gamma) and the scratch."""
    n = ib[1]
    R = ib[3]
    nw = ib[4]
    nk = ib[5]
    ns = ib[6]
    Rw = raw_view(fb, 0, (n, 3, 3))
    pw = raw_view(fb, 9 * n, (n, 3))
    o = 12 * n
    gamma = raw_view(fb, o, (R,))
    o += R
    T = raw_view(fb, o, (R, 6))
    o += 6 * R
    Cw = raw_view(fb, o, (6 * nw,))
    o += 6 * nw
    Kw = raw_view(fb, o, (nk,))
    o += nk
    kw = raw_view(fb, o, (nw,))
    o += nw
    SC = raw_view(fb, o, (max(ns, 1),))
    o += max(ns, 1)
    reg = raw_view(fb, o, (n + 1,))
    o += n + 1
    gsh = raw_view(fb, o, (R,))
    o += R
    sc = raw_view(fb, o, (fb.shape[0] - o,))
    return Rw, pw, gamma, T, Cw, Kw, kw, SC, reg, gsh, sc


def result_size(nv, R, L):
    """Length of a result buffer: qdd (nv), lambda, phi, J qd and the kept rows (R each), the
    loops' forces (6 L), the ends' rows G (12 R) and the rank (1)."""
    return nv + 16 * R + 6 * L + 1


@njit(cache=True)
def result_views(ob, nv, R, L):
    """qdd, lam, phi, vel, indep, lforce (L, 6), G (R, 2, 6) and info (1,) as raw views of ``ob``."""
    qdd = raw_view(ob, 0, (nv,))
    o = nv
    lam = raw_view(ob, o, (R,))
    phi = raw_view(ob, o + R, (R,))
    vel = raw_view(ob, o + 2 * R, (R,))
    indep = raw_view(ob, o + 3 * R, (R,))
    o += 4 * R
    lforce = raw_view(ob, o, (L, 6))
    o += 6 * L
    G = raw_view(ob, o, (R, 2, 6))
    o += 12 * R
    info = raw_view(ob, o, (1,))
    return qdd, lam, phi, vel, indep, lforce, G, info


@njit(cache=True)
def constrained_call(mb, wb, ib, fb, R_a, p_a, R_b, p_b, laxis, laxis2, length, q, qd, tau, fext, ob, tol, delta,
                     check):
    """One constrained evaluation on a packed model and workspace (``partree.algorithms.packed``)
    and the loop buffers ``ib``, ``fb`` (:class:`LoopBuffers`), the loops' placements, axes and
    lengths as the model's LoopSet holds them: the compiled checks, then
    :func:`constrained_kernel_in` into the result buffer ``ob`` (:func:`result_size`).  Returns
    ``packed.OK``, an error code, the body whose joint-space inertia is singular, or
    ERR_DISTANCE_AT - l."""
    e = check_state(mb, wb, q, qd, tau, fext, check)
    if e != OK:
        return e
    n = mb[1]
    nv = mb[3]
    L = ib[2]
    R = ib[3]
    if ib[0] != LOOP_MAGIC or ib[1] != n or fb.shape[0] != ib[10] or R_a.shape[0] != L or p_a.shape[0] != L \
            or R_b.shape[0] != L or p_b.shape[0] != L or laxis.shape[0] != L or laxis2.shape[0] != L \
            or length.shape[0] != L:
        return ERR_DATA
    if ob.shape[0] != nv + 16 * R + 6 * L + 1:
        return ERR_SHAPE
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, _, _ = model_views(mb)
    E, r, v, c, IA, pA, a, S, U, Dinv, u, _, _, _ = workspace_views(wb, n, nv)
    (kind, body_a, body_b, nrows, row0, wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr,
     sptr, eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank, kept) = loop_views(ib)
    Rw, pw, gamma, T, Cw, Kw, kw, SC, reg, gsh, sc = loop_work_views(ib, fb)
    qdd, lam, phi, vel, indep, lforce, G, info = result_views(ob, nv, R, L)
    return constrained_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                                 q, qd, tau, fext, fext.shape[0] > 0, E, r, v, c, IA, pA, a, S, U, Dinv, u,
                                 kind, body_a, body_b, R_a, p_a, R_b, p_b, laxis, laxis2, length, nrows, row0,
                                 wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr, sptr,
                                 eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank, kept,
                                 Rw, pw, gamma, T, Cw, Kw, kw, SC, reg, gsh, sc, tol, delta, qdd, lam, phi, vel,
                                 indep,
                                 lforce,
                                 G, info)


@njit(cache=True)
def constrained_unpacked(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                         q, qd, tau, fext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u,
                         ib, fb, R_a, p_a, R_b, p_b, laxis, laxis2, length, ob, tol, delta):
    """:func:`constrained_kernel_in` for a model that is not packed (more than
    ``packed.PACK_MAX_BODIES`` bodies): the model's and the workspace's arrays one by one,
    checked inputs."""
    nv = S.shape[0]
    L = ib[2]
    R = ib[3]
    (kind, body_a, body_b, nrows, row0, wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr,
     sptr, eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank, kept) = loop_views(ib)
    Rw, pw, gamma, T, Cw, Kw, kw, SC, reg, gsh, sc = loop_work_views(ib, fb)
    qdd, lam, phi, vel, indep, lforce, G, info = result_views(ob, nv, R, L)
    return constrained_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                                 q, qd, tau, fext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u,
                                 kind, body_a, body_b, R_a, p_a, R_b, p_b, laxis, laxis2, length, nrows, row0,
                                 wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr, sptr,
                                 eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank, kept,
                                 Rw, pw, gamma, T, Cw, Kw, kw, SC, reg, gsh, sc, tol, delta, qdd, lam, phi, vel,
                                 indep,
                                 lforce,
                                 G, info)


@njit(cache=True)
def loop_wrench_kernel(body_a, body_b, nrows, row0, G, lam, W):
    """W[x] += G_e^T lambda for each loop end e on body x (the world's ends are left out)."""
    for l in range(body_a.shape[0]):
        m = nrows[l]
        r0 = row0[l]
        for side in range(2):
            x = body_a[l] if side == 0 else body_b[l]
            if x < 0:
                continue
            for k in range(6):
                s = 0.0
                for j in range(m):
                    s += G[r0 + j, side, k] * lam[r0 + j]
                W[x, k] += s


class LoopBuffers:
    """A model's loops and :class:`LoopTopology` packed for the compiled call: ``ib``, one int64
    buffer (a header, the loops' kinds, bodies and rows, the topology's arrays
    and the factorisations' pivots and ranks, :func:`loop_views`), and ``fb``, the float
    workspace (the world poses, gamma, T, the loop passes' C, K, k, C S, the
    redundant groups' regularisation and shifted gamma, and the scratch,
    :func:`loop_work_views`).  Built once per model and set of loops (:func:`loop_buffers`); the
    topology's arrays become views of ``ib`` (one copy of them)."""

    __slots__ = ("loops", "topo", "ib", "fb", "nv", "R", "L", "size")

    def __init__(self, model, topo):
        loops = model.loops
        n, L, R = model.n, len(loops), loops.nrow
        t = topo
        nw, nk, ns = int(t.rptr[-1]), int(t.kptr[-1]), int(t.sptr[-1])
        nwl, ne, nen = t.wloop.size, t.eloop.size, t.enodes.size
        fsize = 12 * n + R + 6 * R + 6 * nw + nk + nw + max(ns, 1) + (n + 1) + R + t.scratch
        ib = np.zeros(LOOP_HEADER + 5 * L + 6 * (n + 2) + 6 * (n + 1) + 2 * nwl + 4 * nw + 3 * ne + nen,
                      dtype=np.int64)
        ib[:11] = (LOOP_MAGIC, n, L, R, nw, nk, ns, nwl, ne, nen, fsize)
        o = LOOP_HEADER
        views = {}
        for name, a in (("kind", loops.kind), ("body_a", loops.body_a), ("body_b", loops.body_b),
                        ("nrows", loops.nrows), ("row0", loops.row0),
                        ("wptr", t.wptr), ("rptr", t.rptr), ("cptr", t.cptr), ("kptr", t.kptr), ("sptr", t.sptr),
                        ("eptr", t.eptr), ("npl", t.npl), ("prow", t.prow), ("wrows", t.wrows),
                        ("rank", np.zeros(n + 1)), ("rrank", np.zeros(n + 1)), ("wloop", t.wloop),
                        ("wpos", t.wpos), ("wglob", t.wglob), ("prmap", t.prmap), ("perm", np.zeros(nw)),
                        ("kept", np.zeros(nw)), ("eloop", t.eloop),
                        ("eside", t.eside), ("epos", t.epos), ("zfirst", t.zfirst), ("enodes", t.enodes)):
            k = a.shape[0]
            ib[o:o + k] = a
            views[name] = ib[o:o + k]
            o += k
        assert o == ib.shape[0]
        for name in ("wptr", "rptr", "cptr", "kptr", "sptr", "eptr", "npl", "prow", "wrows", "wloop", "wpos",
                     "wglob", "prmap", "eloop", "eside", "epos", "zfirst", "enodes"):
            setattr(t, name, views[name])
        self.loops = loops
        self.topo = t
        self.ib = ib
        self.fb = np.zeros(fsize)
        self.nv = model.nv
        self.R = R
        self.L = L
        self.size = result_size(model.nv, R, L)


_CALL_KEY = "loop_call"


def loop_buffers(model):
    """The :class:`LoopBuffers` of ``model`` (built on first use, again when its loops change)."""
    lb = model._topo.get(_CALL_KEY)
    if lb is None or lb.loops is not model.loops:
        lb = LoopBuffers(model, loop_topology(model))
        model._topo[_CALL_KEY] = lb
    return lb


# ---------------------------------------------------------------------------------- the API
class _ResultView:
    """An attribute of :class:`ConstrainedResult`: its view of the result buffer, made on first
    access and kept in the instance (a non-data descriptor: the instance's value wins after)."""

    def __init__(self, part):
        self.part = part

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        nv, R, L = obj._sizes
        b = obj._buf
        part = self.part
        if part == 0:
            v = b[:nv]
        elif part < 5:
            v = b[nv + (part - 1) * R:nv + part * R]
            if part == 4:
                v = v != 0.0
        elif part == 5:
            v = b[nv + 4 * R:nv + 4 * R + 6 * L].reshape(L, 6)
        else:
            v = b[nv + 4 * R + 6 * L:nv + 16 * R + 6 * L].reshape(R, 2, 6)
        obj.__dict__[self.name] = v
        return v


class ConstrainedResult:
    """Result of :func:`constrained_dynamics`.

    Attributes
    ----------
    qdd : ndarray (nv,)
        Joint accelerations.
    multipliers : ndarray (R,)
        lambda, the constraint forces along the loops' rows (zero on rows found dependent, except
        in groups of rows that repeat one another, which share their force).
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
        The loops' wrenches on every body, in body coordinates (zero for bodies without ends;
        computed on first access).
    joint_wrench, constraint_force, drive_force
        The tree joints' wrenches as :func:`partree.cfa` gives them, with the loop forces
        applied (computed on first access).

    The arrays are views of one buffer that the compiled call fills, each made when first read.
    """

    qdd = _ResultView(0)
    multipliers = _ResultView(1)
    violation = _ResultView(2)
    velocity_violation = _ResultView(3)
    independent = _ResultView(4)
    loop_force = _ResultView(5)
    _G = _ResultView(6)

    def __init__(self, model, buf, sizes, q, qd, tau, f_ext):
        self._model = model
        self._buf = buf
        self._sizes = sizes
        self._q, self._qd, self._tau, self._f_ext = q, qd, tau, f_ext
        self._cfa = None
        self._W = None

    @property
    def rank(self):
        return int(self._buf[-1])

    @property
    def loop_wrench(self):
        if self._W is None:
            self._W = loop_wrenches(self._model, self._G, self.multipliers)
        return self._W

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

    def __getstate__(self):
        # the views are made again from the buffer (pickled alone they would be copies of it)
        views = ("qdd", "multipliers", "violation", "velocity_violation", "independent", "loop_force", "_G")
        return {k: v for k, v in self.__dict__.items() if k not in views}

    def __repr__(self):
        return (f"<ConstrainedResult: nv={self.qdd.size}, {self.multipliers.size} rows, rank {self.rank}, "
                f"|phi|max={np.abs(self.violation).max(initial=0.0):.3g}>")


def loop_wrenches(model, G, lam):
    """The loops' wrenches on the bodies, (n, 6) in body coordinates: G_e^T lambda at each end."""
    loops = model.loops
    W = np.zeros((model.n, 6))
    if len(loops):
        loop_wrench_kernel(loops.body_a, loops.body_b, loops.nrows, loops.row0, np.ascontiguousarray(G),
                           np.ascontiguousarray(lam), W)
    return W


#: the one signature of :func:`constrained_call` (``packed.restrict``)
CALL_SIGNATURE = ("int64(int64[::1], float64[::1], int64[::1], float64[::1], float64[:, :, ::1], float64[:, ::1], "
                  "float64[:, :, ::1], float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], "
                  "float64[::1], float64[::1], float64[:, ::1], float64[::1], float64, float64, boolean)")
_CALL_READY = False


def _ready():
    global _CALL_READY
    if not _CALL_READY:
        restrict(constrained_call, CALL_SIGNATURE)
        _CALL_READY = True


#: ``redundant`` of :func:`constrained_dynamics`: the regularisation each choice passes on
REDUNDANT = {"share": SHARE_DELTA, "drop": 0.0}


def constrained_dynamics(model, q, qd, tau, f_ext=None, rank_tol=1e-7, redundant="share"):
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
        the rank changes where the smallest singular value crosses this.  Where loops repeat one
        another's constraints (redundant groups, see the module docstring) the dependent rows
        share the force, and the rank counts pivots above max(rank_tol, 3e-5).
    redundant : {"share", "drop"}
        Where a loop group's rows repeat one another (a spatial scissor mast's faces and hubs),
        "share" divides the force among them as the minimum-norm multipliers do (the stable
        choice along long chains of such groups; a few extra passes), "drop" leaves the rows
        the pivoting finds dependent without force (one pass; the parallel engine's solution,
        :mod:`partree.parallel`).  Both give the same qdd where the state satisfies the loops
        and the rounding stays small; the multipliers of repeated rows, and so the joint
        wrenches, differ, as the constraints leave them undetermined.

    Returns
    -------
    ConstrainedResult
        ``qdd``, ``multipliers``, ``loop_force`` (``loop_force_of(name)``), ``rank``,
        ``independent``, ``violation`` (Phi) and, computed on first access, the loops' wrenches
        on the bodies and the tree joints' ``joint_wrench`` / ``constraint_force`` with the loop
        forces applied.

    The state should satisfy the loops (``violation`` near 0; :func:`partree.correct_state` and
    :func:`partree.assemble` make it so): the accelerations are exact for the rows as stated at
    any state, but the motion they describe is the loop's only where it is closed.

    Inputs that are C-contiguous float64 arrays of the right sizes go straight to one compiled
    call (as for :func:`partree.aba`), which checks them; anything else is checked and converted
    first.
    """
    pk = model._packed
    delta = REDUNDANT.get(redundant) if redundant.__class__ is str else None
    if delta is None:
        raise PartreeInputError(f"redundant must be 'share' or 'drop'; got {redundant!r}")
    if pk is not None and _CALL_READY and rank_tol.__class__ is float and 0.0 < rank_tol < 1.0:
        lb = model._topo.get(_CALL_KEY)
        loops = model.loops
        if lb is not None and lb.loops is loops:
            try:
                ob = np.empty(lb.size)
                if constrained_call(pk.buf, model._data._buf, lb.ib, lb.fb, loops.R_a, loops.p_a, loops.R_b,
                                    loops.p_b, loops.axis, loops.axis2, loops.length, q, qd, tau,
                                    NO_FORCES if f_ext is None else f_ext, ob, rank_tol * rank_tol, delta, True) == OK:
                    return ConstrainedResult(model, ob, (lb.nv, lb.R, lb.L), q, qd, tau, f_ext)
            except (TypeError, AttributeError):
                pass        # not the compiled call's types: checked and converted below
    return _checked(model, q, qd, tau, f_ext, rank_tol, delta)


def _checked(model, q, qd, tau, f_ext, rank_tol, delta):
    """``constrained_dynamics`` with every input checked and converted (the messages of
    ``partree.checks``), and the buffers built where they are missing."""
    q, qd = checks.state(model, q, qd)
    tau = checks.vector(model, tau, model.nv, "tau", "nv")
    F, has_f = checks.external_forces(model, f_ext)
    try:
        ok_tol = bool(np.isfinite(rank_tol) and 0.0 < rank_tol < 1.0)
    except TypeError:
        ok_tol = False
    if not ok_tol:
        raise PartreeInputError(f"rank_tol must lie in (0, 1); got {rank_tol!r}")
    tol = float(rank_tol) ** 2
    loops = model.loops
    lb = loop_buffers(model)
    d = checks.data_for(model, None)
    geometry = tuple(np.ascontiguousarray(a, dtype=np.float64) for a in
                     (loops.R_a, loops.p_a, loops.R_b, loops.p_b, loops.axis, loops.axis2, loops.length))
    ob = np.empty(lb.size)
    pk = model_buffer(model)
    if pk is None:
        code = constrained_unpacked(*checks.model_args(model), model.gravity, q, qd, tau, F, has_f, d.E, d.r, d.v,
                                    d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, lb.ib, lb.fb, *geometry, ob, tol,
                                    delta)
    else:
        _ready()
        code = constrained_call(pk.buf, d._buf, lb.ib, lb.fb, *geometry, checks.writable(q), checks.writable(qd),
                                checks.writable(tau), checks.writable(F) if has_f else NO_FORCES, ob, tol, delta,
                                False)
    if code >= 0:
        raise PartreeInputError(f"joint {model.joint_names[code]!r} (body {code}): its subtree has a singular inertia "
                                f"along the joint's motion; forward dynamics is undefined")
    if code <= ERR_DISTANCE_AT:
        l = ERR_DISTANCE_AT - code
        raise PartreeInputError(distance_error(loops, l))
    if code != OK:
        raise PartreeInputError(f"constrained_dynamics: the compiled call refused checked inputs (code {code}; an "
                                f"internal error)")
    return ConstrainedResult(model, ob, (lb.nv, lb.R, lb.L), q, qd, tau, F if has_f else None)
