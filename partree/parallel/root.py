"""The root solve of the parallel engine: O(P) work over the small tree of parts.

Only boundary data enters here (a few 6x6 matrices per part), never per-body data.

* :func:`compose_velocities` turns the parts' handle maps v_h = T_h v_in + vrel_h into every
  part's incoming velocity v_in (parents first; parts hanging from the base get v_in = 0).
* :func:`solve` eliminates leaf parts first: part p with handle relations
  a = Psi a_in + Lam g + beta and its children's eliminated relations g = Mh a + mh solves the
  small dense system (1 - Lam Mh) a = Psi a_in + Lam mh + beta and reports its own
  g_root = (M + Kt Mh Pa) a_in + (m0 + Kt (Mh pa + mh)) to its parent; at the top a_in = a0;
  then going down every part gets its a_in and its handles' wrenches g.
* :class:`RootLoops`: the closed loops a partition leaves to the root (their two ends in
  different parts, ``partree.parallel.partition.place_loops``).  Their ends are handles of their
  parts, where the multipliers lambda act (g_e = -G_e^T lambda) and whose accelerations the
  parts' handle relations give.  :func:`solve` then carries lambda as extra columns through the
  same elimination (every relation becomes affine in lambda), forms the loops' rows
  sum_e G_e a_e = gamma in lambda, solves that r x r system (r the loops' rows) by Cholesky with
  diagonal pivoting, which picks the independent rows as ``constrained_dynamics`` does (rows
  found dependent carry no force), and goes down as before.  The rows' terms (G_e, gamma) come
  from the ends' world poses and velocities, composed from the parts' velocity messages
  (:func:`compose_velocities` hands them to :meth:`RootLoops.observe`).  Cost: O(P r^2) at the
  root, nothing per body.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numba import njit

from ..algorithms.constrained_dynamics import lower_solve, pivoted_cholesky, upper_solve
from ..algorithms.loop_constraints import loop_forces, loop_terms
from ..algorithms.primitives import xform_motion
from ..errors import PartreeInputError
from ..loops import LoopSet
from . import messages as msg
from .part import loop_rhs
from .partition import root_loop_mask

#: the rank tolerance of the root's loop rows (``constrained_dynamics``' default)
ROOT_RANK_TOL = 1e-7


@dataclass
class PartsTree:
    """The O(P) description of the parts tree the root needs.

    part_parent[P]  parent part (-1: hangs from the base)
    hidx[P]         index of the part's attachment body among its parent part's handles
    nh[P]           number of handles of each part
    """
    part_parent: np.ndarray
    hidx: np.ndarray
    nh: np.ndarray
    loops: "RootLoops" = None

    @property
    def nparts(self):
        return int(self.part_parent.shape[0])

    @cached_property
    def arrays(self):
        """(part_parent, hidx, nh, hoff) as int64 arrays for the compiled root: hoff[p] is part
        p's first row in arrays over all handles (hoff[P] their number)."""
        pp = np.ascontiguousarray(self.part_parent, dtype=np.int64)
        nh = np.ascontiguousarray(self.nh, dtype=np.int64)
        hoff = np.zeros(pp.shape[0] + 1, dtype=np.int64)
        np.cumsum(nh, out=hoff[1:])
        return pp, np.ascontiguousarray(self.hidx, dtype=np.int64), nh, hoff

    @classmethod
    def from_partition(cls, pt, model=None):
        """The parts tree of ``pt``; with ``model``, the loops it leaves to the root too."""
        P = pt.nparts
        hidx = -np.ones(P, dtype=np.int64)
        nh = np.zeros(P, dtype=np.int64)
        for k in range(P):
            hs = pt.handles(k)
            nh[k] = hs.size
            for c in pt.child_parts(k):
                hidx[c] = int(np.searchsorted(hs, pt.handle[c]))
        tree = cls(part_parent=pt.part_parent.copy(), hidx=hidx, nh=nh)
        if model is not None and len(getattr(model, "loops", ())):
            rl = RootLoops(model, pt)
            if len(rl.ids):
                tree.loops = rl
        return tree


class RootLoops:
    """The loops a partition leaves to the root, and their state at the last evaluation.

    ``ids``: their numbers in ``model.loops``; ``loops``: a :class:`~partree.loops.LoopSet` of
    them whose "bodies" are end slots (loop j's end A is slot 2 j, end B slot 2 j + 1; -1 the
    world); ``end_part``, ``end_handle``: where each slot's body is a handle (-1: the world).
    After :func:`solve`: ``lam`` (their multipliers, in the order of their rows) and ``terms``.
    """

    def __init__(self, model, pt):
        mask = root_loop_mask(model, pt)
        ids = np.flatnonzero(mask).astype(np.int64)
        lp = model.loops
        L = ids.size
        slot_a = np.where(lp.body_a[ids] >= 0, 2 * np.arange(L), -1)
        slot_b = np.where(lp.body_b[ids] >= 0, 2 * np.arange(L) + 1, -1)
        self.ids = ids
        self.loops = LoopSet([lp.names[l] for l in ids], lp.kind[ids], slot_a, slot_b, lp.R_a[ids], lp.p_a[ids],
                             lp.R_b[ids], lp.p_b[ids], lp.axis[ids], lp.axis2[ids], lp.length[ids])
        bodies = np.stack((lp.body_a[ids], lp.body_b[ids]), axis=1).reshape(-1)
        self.end_part = np.where(bodies >= 0, pt.part_of[np.maximum(bodies, 0)], -1).astype(np.int64)
        self.end_handle = -np.ones(2 * L, dtype=np.int64)
        for j, (b, p) in enumerate(zip(bodies, self.end_part)):
            if p >= 0:
                self.end_handle[j] = int(np.searchsorted(pt.handles(int(p)), b))
        self.nrow = self.loops.nrow
        self.terms = None
        self.lam = np.zeros(self.nrow)

    def observe(self, tree, vel, v_in):
        """The loops' rows at this state (``terms``: G_e, gamma, phi, T) from the parts' velocity
        messages ``vel`` (their handles' transforms T_h and relative velocities) and the incoming
        velocities ``v_in``: each part's frame 0 placed in the world by composing the transforms
        down the parts tree, then each end's pose and velocity."""
        P = tree.nparts
        R0 = np.empty((P, 3, 3))
        p0 = np.zeros((P, 3))
        for c in range(P):
            p = tree.part_parent[c]
            if p < 0:
                R0[c] = np.eye(3)
                p0[c] = 0.0
            else:
                TE, Tr, _ = vel[p]
                k = tree.hidx[c]
                R0[c] = R0[p] @ TE[k].T
                p0[c] = p0[p] + R0[p] @ Tr[k]
        S = self.end_part.size
        Rw = np.tile(np.eye(3), (max(S, 1), 1, 1))
        pw = np.zeros((max(S, 1), 3))
        v = np.zeros((max(S, 1), 6))
        for j in range(S):
            p = self.end_part[j]
            if p < 0:
                continue
            TE, Tr, vrel = vel[p]
            k = self.end_handle[j]
            Rw[j] = R0[p] @ TE[k].T
            pw[j] = p0[p] + R0[p] @ Tr[k]
            v[j] = _xmotion(TE[k], Tr[k], v_in[p]) + vrel[k]
        try:
            self.terms = loop_terms(self.loops, Rw, pw, v)
        except ValueError as e:
            raise PartreeInputError(str(e)) from None

    def pieces(self):
        """(global loop numbers, rows, multipliers, cut-joint wrenches [n; f] in frame A) after
        :func:`solve`, as ``PartKernel.loop_pieces`` gives a part's."""
        lp = self.loops
        return self.ids, lp.nrows, self.lam.copy(), loop_forces(lp, self.terms.T, self.lam)


def root_violation(tree):
    """max abs(Phi) of the loops at the root at the last observed state (0 without them)."""
    if tree is None or tree.loops is None or tree.loops.terms is None:
        return 0.0
    return float(np.abs(tree.loops.terms.phi).max(initial=0.0))


def root_pieces(tree):
    """The loop pieces of the loops at the root after a solve (a list of one, or empty), to
    join the parts' ``loop_pieces`` (``attach_loop_forces``)."""
    return [] if tree is None or tree.loops is None else [tree.loops.pieces()]


def _xmotion(E, r, m):
    """[w; v] of ``m`` in the frame of the transform (E, r): [E w; E (v - r x w)]."""
    w = E @ m[:3]
    v = E @ (m[3:] - np.cross(r, m[:3]))
    return np.concatenate((w, v))


@njit(cache=True)
def _compose_kernel(pp, hidx, nh, voff, allv, top, relative, out):
    """Parents first, the motion vectors of every part's frame 0 (compiled).

    pp, hidx, nh  (P,) int64   the parts tree (``PartsTree.arrays``)
    voff          (P,) int64   where part p's velocity message starts in ``allv``
    allv          float64      the velocity messages (``messages.pack_velocity``: T_E (H, 3, 3),
                               T_r (H, 3), vrel (H, 6) of each part)
    top           (6,)         the value of the parts hanging from the base
    relative      bool         add vrel_h (velocities) or not (a rigid field)
    out           (P, 6)       written: out[c] = T_h out[parent] (+ vrel_h), h the handle c hangs from
    """
    P = pp.shape[0]
    for c in range(P):
        p = pp[c]
        if p < 0:
            for i in range(6):
                out[c, i] = top[i]
            continue
        H = nh[p]
        k = hidx[c]
        e = voff[p] + 9 * k
        t = voff[p] + 9 * H + 3 * k
        xform_motion(allv[e:e + 9].reshape((3, 3)), allv[t:t + 3], out[p], out[c])
        if relative:
            v = voff[p] + 12 * H + 6 * k
            for i in range(6):
                out[c, i] += allv[v + i]


def compose_packed(tree, allv, voff, top=None, relative=True):
    """:func:`compose_velocities` (``relative``) or :func:`compose_field` on the velocity messages
    as they arrive: part p's at ``allv[voff[p]:]``.  No loops at the root.  Returns (P, 6)."""
    pp, hidx, nh, _ = tree.arrays
    out = np.empty((pp.shape[0], 6))
    top = np.zeros(6) if top is None else np.ascontiguousarray(top, dtype=np.float64)
    _compose_kernel(pp, hidx, nh, np.ascontiguousarray(voff, dtype=np.int64), allv, top, bool(relative), out)
    return out


def _pack_velocities(tree, vel):
    """The parts' (TE, Tr, vrel) as one buffer and each part's offset in it."""
    nh = tree.arrays[2]
    voff = np.zeros(nh.shape[0], dtype=np.int64)
    bufs = []
    o = 0
    for p in range(nh.shape[0]):
        voff[p] = o
        H = int(nh[p])
        if H:
            TE, Tr, vrel = vel[p]
            bufs.append(msg.pack_velocity(np.asarray(TE), np.asarray(Tr),
                                          np.zeros((H, 6)) if vrel is None else np.asarray(vrel)))
        o += msg.velocity_len(H)
    return (np.concatenate(bufs) if bufs else np.zeros(0)), voff


def _compose_down(tree, vel, top, relative):
    """Parents first: a part hanging from the base gets ``top``; the others T_h x_parent (+ vrel_h
    with ``relative``) of their parent's handle h, vel[p] = (TE, Tr, vrel)."""
    allv, voff = _pack_velocities(tree, vel)
    return compose_packed(tree, allv, voff, top, relative)


def compose_velocities(tree: PartsTree, vel):
    """vel[p] = (TE (H,3,3), Tr (H,3), vrel (H,6)) of part p.  Returns v_in (P, 6).  With loops
    at the root (``tree.loops``) their rows at this state are formed too (:meth:`RootLoops.observe`)."""
    v_in = _compose_down(tree, vel, np.zeros(6), True)
    if tree.loops is not None:
        tree.loops.observe(tree, vel, v_in)
    return v_in


def compose_field(tree: PartsTree, vel, top):
    """A rigid field (no joint motion: the gravity field [0; g]) in every part's frame 0, from
    ``top`` (6,) in the base's frame: parts hanging from the base get ``top``, the others
    T_h of their parent's handle applied to the parent's (vel[p] = (TE, Tr, vrel), vrel
    unused).  The parts hanging from the base must have reported their T_h (built with
    ``poses``).  Returns (P, 6)."""
    return _compose_down(tree, vel, np.asarray(top, dtype=np.float64), False)


def subtree_totals(tree: PartsTree, vel, up):
    """Sums of force vectors over the parts tree, leaf parts first: ``up[p]`` (6,) is part p's
    own total in its frame 0 (the parent's handle frame); a part's whole total is its own plus
    its handles' sums moved to its frame 0 (X_h^T, X_h = T_h of ``vel[p]``), and each handle's
    sum is the whole totals of the child parts attached there.  Returns the handles' sums, a
    list of (H_p, 6) arrays (what each part adds at its handles)."""
    P = tree.nparts
    pp, hidx, nh = tree.part_parent, tree.hidx, tree.nh
    Fh = [np.zeros((int(nh[p]), 6)) for p in range(P)]
    for p in range(P - 1, -1, -1):
        q = pp[p]
        if q < 0:
            continue
        tot = np.array(up[p], dtype=np.float64)
        if nh[p]:
            TE, Tr, _ = vel[p]
            for k in range(int(nh[p])):
                f = Fh[p][k]
                fl = TE[k].T @ f[3:]
                tot[:3] += TE[k].T @ f[:3] + np.cross(Tr[k], fl)
                tot[3:] += fl
        Fh[q][hidx[p]] += tot
    return Fh


@njit(cache=True)
def _lu_solve(A, B):
    """A X = B in place by Gaussian elimination with partial pivoting (B becomes X; A is
    overwritten).  Returns False where a pivot is exactly zero (a singular A), as LAPACK's gesv."""
    n = A.shape[0]
    m = B.shape[1]
    for k in range(n):
        piv = k
        big = abs(A[k, k])
        for i in range(k + 1, n):
            if abs(A[i, k]) > big:
                big = abs(A[i, k])
                piv = i
        if big == 0.0:
            return False
        if piv != k:
            for j in range(n):
                A[k, j], A[piv, j] = A[piv, j], A[k, j]
            for j in range(m):
                B[k, j], B[piv, j] = B[piv, j], B[k, j]
        inv = 1.0 / A[k, k]
        for i in range(k + 1, n):
            f = A[i, k] * inv
            if f != 0.0:
                for j in range(k + 1, n):
                    A[i, j] -= f * A[k, j]
                for j in range(m):
                    B[i, j] -= f * B[k, j]
    for k in range(n - 1, -1, -1):
        for j in range(m):
            s = B[k, j]
            for i in range(k + 1, n):
                s -= A[k, i] * B[i, j]
            B[k, j] = s / A[k, k]
    return True


#: handles from which a part's 6H x 6H handle system goes to LAPACK (``np.linalg.solve``, blocked
#: and cache-friendly) instead of the written-out elimination, which is quicker for small systems
#: and cubic in a scalar loop for large ones (a part of 64 handles: a 384 x 384 system)
LAPACK_HANDLES = 8


@njit(cache=True)
def _solve_kernel(pp, hidx, nh, hoff, roff, red, a0, Mh, mh, Pa, pa, ah, a_in, g, at):
    """The root solve over the tree of parts (compiled); see :func:`solve`.

    pp, hidx, nh, hoff  int64   the parts tree (``PartsTree.arrays``)
    roff      (P,) int64        where part p's reduction message starts in ``red``
    red       float64           the reduction messages (``messages.pack_reduction``: M (6, 6),
                                m0 (6), Kt (H, 6, 6), Lam (H, H, 6, 6), beta (H, 6); Psi = Kt^T)
    a0        (6,)              the acceleration of the base (gravity folded in)
    Mh, mh    (NH, 6, 6), (NH, 6)  zeroed workspaces, one row per handle: the children's
                                eliminated relations g = Mh a + mh gathered at each handle
    Pa, pa, ah                  workspaces: a_h = Pa a_in + pa, and the handles' accelerations
    a_in      (P, 6)            written: every part's incoming acceleration
    g         (NH, 6)           written: every handle's wrench
    at        (1,) int64        written: the part being solved (which part a LAPACK error is for)
    Returns -1, or the part whose handle system is singular.  A part of ``LAPACK_HANDLES`` or
    more handles is solved by ``np.linalg.solve``, which raises on an exactly singular system.
    """
    P = pp.shape[0]
    for p in range(P - 1, -1, -1):
        o = roff[p]
        H = nh[p]
        h0 = hoff[p]
        oK = o + 42
        oL = oK + 36 * H
        oB = oL + 36 * H * H
        if H > 0:
            n = 6 * H
            Z = np.empty((n, n))
            rhs = np.empty((n, 7))
            for j in range(H):
                for a in range(6):
                    row = 6 * j + a
                    s7 = red[oB + row]
                    for k in range(H):
                        lb = oL + ((j * H + k) * 6 + a) * 6
                        for c in range(6):
                            s = 0.0
                            for b in range(6):
                                s += red[lb + b] * Mh[h0 + k, b, c]
                            Z[row, 6 * k + c] = -s
                        for b in range(6):
                            s7 += red[lb + b] * mh[h0 + k, b]
                    Z[row, row] += 1.0
                    for c in range(6):
                        rhs[row, c] = red[oK + (j * 6 + c) * 6 + a]
                    rhs[row, 6] = s7
            at[0] = p
            if H >= LAPACK_HANDLES:
                X = np.linalg.solve(Z, rhs)
                for i in range(n):
                    for c in range(7):
                        rhs[i, c] = X[i, c]
            elif not _lu_solve(Z, rhs):
                return p
            for k in range(H):
                for a in range(6):
                    for c in range(6):
                        Pa[h0 + k, a, c] = rhs[6 * k + a, c]
                    pa[h0 + k, a] = rhs[6 * k + a, 6]
        q = pp[p]
        if q >= 0:
            t = hoff[q] + hidx[p]
            for a in range(6):
                for c in range(6):
                    Mh[t, a, c] += red[o + 6 * a + c]
                mh[t, a] += red[o + 36 + a]
            ga = np.empty((6, 6))
            gb = np.empty(6)
            for k in range(H):
                hk = h0 + k
                for a in range(6):
                    for c in range(6):
                        s = 0.0
                        for b in range(6):
                            s += Mh[hk, a, b] * Pa[hk, b, c]
                        ga[a, c] = s
                    s = mh[hk, a]
                    for b in range(6):
                        s += Mh[hk, a, b] * pa[hk, b]
                    gb[a] = s
                kb = oK + 36 * k
                for a in range(6):
                    for c in range(6):
                        s = 0.0
                        for b in range(6):
                            s += red[kb + 6 * a + b] * ga[b, c]
                        Mh[t, a, c] += s
                    s = 0.0
                    for b in range(6):
                        s += red[kb + 6 * a + b] * gb[b]
                    mh[t, a] += s
    for p in range(P):
        q = pp[p]
        if q < 0:
            for a in range(6):
                a_in[p, a] = a0[a]
        else:
            t = hoff[q] + hidx[p]
            for a in range(6):
                a_in[p, a] = ah[t, a]
        for k in range(nh[p]):
            hk = hoff[p] + k
            for a in range(6):
                s = pa[hk, a]
                for b in range(6):
                    s += Pa[hk, a, b] * a_in[p, b]
                ah[hk, a] = s
            for a in range(6):
                s = mh[hk, a]
                for b in range(6):
                    s += Mh[hk, a, b] * ah[hk, b]
                g[hk, a] = s
    return -1


def solve_packed(tree: PartsTree, red, roff, a0):
    """:func:`solve` (no loops at the root) on the reduction messages as they arrive: part p's at
    ``red[roff[p]:]`` (``messages.pack_reduction``).  Returns (a_in (P, 6), g (NH, 6)), part p's
    handles' wrenches in rows ``tree.arrays[3][p]`` to ``[p + 1]``."""
    pp, hidx, nh, hoff = tree.arrays
    P, NH = pp.shape[0], int(hoff[-1])
    Mh, mh = np.zeros((NH, 6, 6)), np.zeros((NH, 6))
    Pa, pa, ah = np.empty((NH, 6, 6)), np.empty((NH, 6)), np.empty((NH, 6))
    a_in, g = np.empty((P, 6)), np.empty((NH, 6))
    at = np.full(1, -1, dtype=np.int64)
    try:
        bad = _solve_kernel(pp, hidx, nh, hoff, np.ascontiguousarray(roff, dtype=np.int64),
                            np.ascontiguousarray(red, dtype=np.float64), np.ascontiguousarray(a0, dtype=np.float64),
                            Mh, mh, Pa, pa, ah, a_in, g, at)
    except np.linalg.LinAlgError:
        bad = int(at[0])
    if bad >= 0:
        raise PartreeInputError(f"part {bad}: singular handle system in the root solve")
    return a_in, g


@njit(cache=True)
def _pack_solutions_kernel(nh, hoff, soff, a_in, g, out):
    for p in range(nh.shape[0]):
        o = soff[p]
        for a in range(6):
            out[o + a] = a_in[p, a]
        for k in range(nh[p]):
            for a in range(6):
                out[o + 6 + 6 * k + a] = g[hoff[p] + k, a]


def pack_solutions(tree: PartsTree, a_in, g, soff, total):
    """The solution messages of every part (``messages.pack_solution``) in one buffer of ``total``
    doubles, part p's at ``soff[p]``; ``g`` as :func:`solve_packed` returns it."""
    _, _, nh, hoff = tree.arrays
    out = np.empty(int(total))
    _pack_solutions_kernel(nh, hoff, np.ascontiguousarray(soff, dtype=np.int64), a_in, g, out)
    return out


def solve(tree: PartsTree, red, a0, rows="dynamics"):
    """red[p] = (M (6,6), m0 (6), Kt (H,6,6), Psi (H,6,6), Lam (H,H,6,6), beta (H,6)).

    Returns (a_in (P,6), g: list of (H_p, 6) arrays) for every part.  With loops at the root
    (``tree.loops``, observed at this state by :func:`compose_velocities`) see :func:`solve_with_loops`;
    ``rows`` says what their rows equal (``partree.parallel.part.loop_rhs``)."""
    if tree.loops is not None:
        return solve_with_loops(tree, red, a0, rows=rows)
    nh, hoff = tree.arrays[2], tree.arrays[3]
    roff = np.zeros(nh.shape[0], dtype=np.int64)
    bufs = []
    o = 0
    for p in range(nh.shape[0]):
        M, m0, Kt, _, Lam, beta = red[p]
        roff[p] = o
        bufs.append(msg.pack_reduction(np.asarray(M), np.asarray(m0), np.asarray(Kt), np.asarray(Lam),
                                       np.asarray(beta)))
        o += msg.reduction_len(int(nh[p]))
    a_in, g = solve_packed(tree, np.concatenate(bufs), roff, a0)
    return a_in, [g[hoff[p]:hoff[p + 1]] for p in range(nh.shape[0])]


def solve_with_loops(tree, red, a0, rank_tol=ROOT_RANK_TOL, rows="dynamics"):
    """:func:`solve` with the multipliers lambda of the loops at the root (``tree.loops``) as r
    extra columns: the handles' wrenches are g = Mh a + mh + Nh lambda, where Nh holds the
    loops' -G_e^T at their ends' handles and what the child parts pass up; every a_in and handle
    acceleration is affine in lambda; the rows sum_e G_e a_e = gamma give lambda (pivoted
    Cholesky of the symmetric r x r matrix); then a_in and g as in :func:`solve`.  Sets
    ``tree.loops.lam``."""
    rl = tree.loops
    lp, terms = rl.loops, rl.terms
    if terms is None:
        raise RuntimeError("the root's loops have no terms at this state: compose_velocities first")
    G, gamma = terms.G, loop_rhs(terms, rows)
    P = tree.nparts
    r = rl.nrow
    pp, hidx, nh = tree.part_parent, tree.hidx, tree.nh
    Mh = [np.zeros((int(nh[p]), 6, 6)) for p in range(P)]
    mh = [np.zeros((int(nh[p]), 6)) for p in range(P)]
    Nh = [np.zeros((int(nh[p]), 6, r)) for p in range(P)]
    for l in range(len(lp)):
        m, r0 = int(lp.nrows[l]), int(lp.row0[l])
        for side in range(2):
            p = rl.end_part[2 * l + side]
            if p >= 0:
                Nh[p][rl.end_handle[2 * l + side], :, r0:r0 + m] -= G[r0:r0 + m, side, :].T
    Pa, pa, Pl = [None] * P, [None] * P, [None] * P
    for p in range(P - 1, -1, -1):
        M, m0, Kt, Psi, Lam, beta = red[p]
        H = int(nh[p])
        if H:
            Lb = Lam.transpose(0, 2, 1, 3).reshape(6 * H, 6 * H)
            LM = np.einsum("jkab,kbc->jakc", Lam, Mh[p]).reshape(6 * H, 6 * H)
            rhs = np.empty((6 * H, 7 + r))
            rhs[:, :6] = Psi.reshape(6 * H, 6)
            rhs[:, 6] = Lb @ mh[p].reshape(6 * H) + beta.reshape(6 * H)
            rhs[:, 7:] = Lb @ Nh[p].reshape(6 * H, r)
            try:
                sol = np.linalg.solve(np.eye(6 * H) - LM, rhs)
            except np.linalg.LinAlgError as e:
                raise PartreeInputError(f"part {p}: singular handle system in the root solve ({e})") from None
            Pa[p] = sol[:, :6].reshape(H, 6, 6)
            pa[p] = sol[:, 6].reshape(H, 6)
            Pl[p] = sol[:, 7:].reshape(H, 6, r)
        q = pp[p]
        if q >= 0:
            if H:
                ga = np.einsum("kab,kbc->kac", Mh[p], Pa[p])
                gb = np.einsum("kab,kb->ka", Mh[p], pa[p]) + mh[p]
                gl = np.einsum("kab,kbc->kac", Mh[p], Pl[p]) + Nh[p]
                Mp = M + np.einsum("kab,kbc->ac", Kt, ga)
                mp = m0 + np.einsum("kab,kb->a", Kt, gb)
                Np = np.einsum("kab,kbc->ac", Kt, gl)
            else:
                Mp, mp, Np = M, m0, 0.0
            k = hidx[p]
            Mh[q][k] += Mp
            mh[q][k] += mp
            Nh[q][k] += Np
    # down: a_in and the handle accelerations, affine in lambda
    ain0, ainL = np.zeros((P, 6)), np.zeros((P, 6, r))
    ah0, ahL = [None] * P, [None] * P
    for p in range(P):
        q = pp[p]
        if q < 0:
            ain0[p] = a0
        else:
            ain0[p] = ah0[q][hidx[p]]
            ainL[p] = ahL[q][hidx[p]]
        if nh[p]:
            ah0[p] = np.einsum("kab,b->ka", Pa[p], ain0[p]) + pa[p]
            ahL[p] = np.einsum("kab,bc->kac", Pa[p], ainL[p]) + Pl[p]
    # the loops' rows: sum over the ends of G_e a_e = gamma (the world's end moves with a0)
    C = np.zeros((r, r))
    c = np.zeros(r)
    for l in range(len(lp)):
        m, r0 = int(lp.nrows[l]), int(lp.row0[l])
        for side in range(2):
            j = 2 * l + side
            Ge = G[r0:r0 + m, side, :]
            p = rl.end_part[j]
            if p < 0:
                c[r0:r0 + m] += Ge @ a0
            else:
                k = rl.end_handle[j]
                c[r0:r0 + m] += Ge @ ah0[p][k]
                C[r0:r0 + m] += Ge @ ahL[p][k]
    lam = np.zeros(r)
    if r:
        K = np.ascontiguousarray(0.5 * (C + C.T)).ravel()
        perm = np.zeros(r, dtype=np.int64)
        rank = pivoted_cholesky(K, 0, r, 0, r, perm, rank_tol * rank_tol, 0.0)
        if rank:
            h = np.ascontiguousarray((gamma - c)[perm[:rank]])
            lower_solve(K, 0, r, 0, rank, h)
            upper_solve(K, 0, r, 0, rank, h)
            lam[perm[:rank]] = h
    rl.lam = lam
    a_in = ain0 + np.einsum("pac,c->pa", ainL, lam)
    g = [None] * P
    for p in range(P):
        if nh[p]:
            ah = ah0[p] + np.einsum("kac,c->ka", ahL[p], lam)
            g[p] = np.einsum("kab,kb->ka", Mh[p], ah) + mh[p] + np.einsum("kac,c->ka", Nh[p], lam)
        else:
            g[p] = np.zeros((0, 6))
    return a_in, g
