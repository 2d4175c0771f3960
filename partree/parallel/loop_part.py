"""A part of the parallel engine that holds closed loops: the loops are eliminated inside it.

A loop whose two ends (and the bodies where their paths meet) lie in one part is solved where
it closes, as in :func:`partree.constrained_dynamics` (seed 004's equivalent subsystem: the
part's boundary relation stays 6x6 per handle, whatever loops it holds).  The partitioner keeps
loops inside one part (``partree.parallel.partition.loop_cuttable``); a loop to the world lies
in a part that hangs from the base.  A loop that a partition splits is left out here and solved
at the root (``root_loops``; ``partree.parallel.root.RootLoops``).

The part runs the serial loop passes of ``partree.algorithms.constrained_dynamics`` unchanged
(``loop_backward_pass`` with the handle wrenches g = 0, ``loop_forward_pass`` in the
back-substitution), and adds what the boundary relations need: how the handle wrenches g and
the incoming acceleration a_in move the quantities the passes carry.  Everything is linear in
them with the passes' factors fixed (the articulated inertias, D^-1, and the loops' pivoted
Cholesky factors depend on neither), so :func:`loop_sensitivities` carries them as columns:

* inward, along the handle paths only (g reaches no other body): the bias force pA, the joint
  term u = -S^T pA, and the pending rows' k of the loops, with each loop eliminated where its
  paths meet (lambda_Z = K_ZZ^-1 (gamma - k_Z - C_Z a - K_ZP lambda_P));
* Lam, the handle relations' response to g (a_h = Psi a_in + sum_k Lam_hk g_k + beta), as the
  inward walk goes: the passes are a block factorisation of the part's equations, so Lam is the
  sum over the pivots g reaches of each pivot's columns, - ug^T D^-1 ug for a joint's D and
  + w^T w for the loops eliminated at a node (w = L^-1 of their rows' columns, L the pivoted
  Cholesky factor the serial pass left).  Equal to the handles' accelerations of an outward
  pass with g's columns, without that pass;
* beta, the handles' accelerations with g = 0, as the inward walk goes: g's columns are the
  adjoints of the outward pass, so beta is the sum over the same pivots of each column against
  the serial pass's right-hand side (u, the loops' gamma - k) and over the path bodies of
  the columns against their velocity terms c (see loop_sensitivities); the root relation
  g_root = M a_in + m0 + sum_k Kt_k g_k is the root's articulated inertia and bias force, and
  Psi = Kt^T (the part's response is symmetric).  A part hanging from the base has a_in = a0
  always: it is folded into beta.

The back-substitution adds g's columns to u and k and runs the serial outward pass.  Cost: the
serial loop passes over the part, plus 6H columns inward along the path bodies (3H on a planar
path: planar_axis), fewer from where the handles' paths meet (walk_basis).
"""
from __future__ import annotations

import inspect

import numpy as np
from numba import njit

from ..algorithms.aba import articulated_project
from ..algorithms.constrained_dynamics import (BACKWARD_FIXED, FORWARD_FIXED, LoopTopology, constrained_dynamics,
                                                loop_backward_pass_in, loop_forward_pass_in, loop_wrench_kernel)
from ..algorithms.kinematics import world_poses
from ..algorithms.loop_constraints import LoopTermsWorkspace, loop_forces, loop_terms
from ..algorithms.packed import raw_view, unowned
from ..algorithms.primitives import (congruence_add, force_cols_T_add, force_cols_T_add_planar,
                                     plane_axes, xform_force_T_add)
from ..errors import PartreeInputError
from ..loops import LoopSet
from . import kernels as K
from .part import PartKernel, _bias, gravity_a0, loop_rhs

#: entries of g's columns below this are flushed to zero in the walk (``partree.parallel.kernels``' bound)
TINY_ABS = K._TINY_ABS

#: the walk sums the loops' rows of Lam (their columns w = L^-1 k, see loop_sensitivities) four at a
#: time once it holds WL_ROWS of them, so that they stay in the cache
WL_ROWS = 64

#: the walk looks for tiny entries of g's columns every CHECK_EVERY path bodies (and at every
#: handle): a column fades by far less than 1e-100 / 1e-308 over so few bodies
CHECK_EVERY = 8

#: constrained_dynamics' rank tolerance, so that a part picks the rows the serial solve picks
RANK_TOL = inspect.signature(constrained_dynamics).parameters["rank_tol"].default


class _PartShape:
    """What :class:`~partree.algorithms.constrained_dynamics.LoopTopology` reads of a model, for
    a part: its local parent array, joint sizes and loops."""

    def __init__(self, parent, nv_j, loops):
        self.parent = parent
        self.n = parent.shape[0]
        self.nv_j = nv_j
        self.loops = loops

    def depth(self):
        d = np.zeros(self.n, dtype=np.int64)
        for i in range(self.n):
            if self.parent[i] >= 0:
                d[i] = d[self.parent[i]] + 1
        return d


def part_loops(model, bodies, top, root_loops=None):
    """The loops of ``model`` with an end in the part ``bodies`` (increasing global ids), as a
    :class:`~partree.loops.LoopSet` on the part's local body numbers (-1: the world), and their
    global numbers.  Loops marked in ``root_loops`` (bool per loop: solved at the root, see
    ``partree.parallel.partition.place_loops``) are left out.  Any other loop with one end in the
    part and the other in another part is refused; so is a loop to the world in a part that does
    not hang from the base."""
    loops = model.loops
    if not len(loops):
        return LoopSet.empty(), np.zeros(0, dtype=np.int64)
    b = np.asarray(bodies, dtype=np.int64)

    def local(x):
        j = np.searchsorted(b, x)
        ok = (x >= 0) & (j < b.size)
        ok[ok] = b[np.minimum(j[ok], b.size - 1)] == x[ok]
        return np.where(ok, j, -1), ok

    la, ina = local(loops.body_a)
    lb, inb = local(loops.body_b)
    mine = ina | inb
    if root_loops is not None and len(root_loops):
        mine &= ~np.asarray(root_loops, dtype=bool)
    mine = np.flatnonzero(mine)
    for l in mine:
        for x, inside in ((loops.body_a[l], ina[l]), (loops.body_b[l], inb[l])):
            if inside:
                continue
            if x >= 0:
                raise PartreeInputError(f"loop {loops.names[l]!r} joins body {int(loops.body_a[l])} and body "
                                        f"{int(loops.body_b[l])}, which lie in different parts: such a loop is "
                                        f"solved at the root (build the part with root_loops from "
                                        f"partree.parallel.partition.root_loop_mask)")
            if not top:
                raise PartreeInputError(f"loop {loops.names[l]!r} joins a body to the world, but its part does not "
                                        f"hang from the base: such a loop is solved at the root (root_loops)")
    sub = LoopSet([loops.names[l] for l in mine], loops.kind[mine], la[mine], lb[mine], loops.R_a[mine],
                  loops.p_a[mine], loops.R_b[mine], loops.p_b[mine], loops.axis[mine], loops.axis2[mine],
                  loops.length[mine])
    return sub, mine.astype(np.int64)


class LoopPartKernel(PartKernel):
    """A :class:`~partree.parallel.part.PartKernel` whose bodies close loops (see the module
    docstring): the same three steps and wrenches, the loops solved inside.  ``lam`` after
    ``solve``: the multipliers of the part's loops (rows of ``loops``, whose global numbers are
    ``loop_ids``)."""

    #: the walk carries only the in-plane columns of a planar part (see :func:`planar_axis`); False
    #: carries all 6 H (the same relations, to rounding)
    planar_walk = True

    _WORKSPACE = PartKernel._WORKSPACE + ("Rw", "pw", "Cw", "Kw", "kw", "kwg", "SC", "perm", "rank", "ug", "PAg",
                                          "lam", "colsrc", "_kc", "_ax", "_nk", "ncols", "_terms", "_gamma", "_tws",
                                          "_bsc", "_fsc", "_none_f", "_none_i", "_ugbuf", "_pagbuf",
                                          "_kwbuf", "pvptr", "kix", "pflag", "path_nodes", "arow", "_npa", "_cslot",
                                          "_crows", "_Acmp", "_cr", "_nodes_a", "_nodes_b", "_iv_b", "_gb",
                                          "_wsc", "_zm", "_pm")

    def __init__(self, model, bodies, handles, part_id=-1, early_kinematics=False, rank_tol=RANK_TOL,
                 root_loops=None, poses=False):
        b = np.ascontiguousarray(bodies, dtype=np.int64)
        top = bool(b.size and model.parent[b[0]] < 0)
        self.loops, self.loop_ids = part_loops(model, b, top, root_loops)
        self.rank_tol = float(rank_tol)
        self.a0 = gravity_a0(model.gravity)
        super().__init__(model, bodies, handles, part_id=part_id, early_kinematics=early_kinematics, poses=poses)
        self.topo = LoopTopology(_PartShape(self.parent, np.diff(np.append(self.idx_v, self.nv)), self.loops))
        # the path bodies' velocity coordinates (where g's columns of u live)
        ends = np.append(self.idx_v[1:], self.nv)
        pv = [np.arange(self.idx_v[i], ends[i]) for i in self.pbod]
        self.path_v = np.concatenate(pv).astype(np.int64) if pv else np.zeros(0, dtype=np.int64)
        self._allocate_loops()

    def _allocate(self):
        super()._allocate()
        if hasattr(self, "topo"):
            self._allocate_loops()

    def _allocate_loops(self):
        m, nv, H = self.m, self.nv, self.H
        t = self.topo
        nrw = int(t.rptr[-1])
        self.Rw = np.zeros((m, 3, 3))
        self.pw = np.zeros((m, 3))
        self.Cw = np.zeros(6 * nrw)
        self.Kw = np.zeros(int(t.kptr[-1]))
        self.kw = np.zeros(nrw)
        self.SC = np.zeros(max(int(t.sptr[-1]), 1))
        self.perm = np.zeros(nrw, dtype=np.int64)
        self.rank = np.zeros(m + 1, dtype=np.int64)
        # the walk's columns, stored compactly (the path bodies' only, with as many columns as it
        # carries: see _walk_views): ug of the path dofs, PAg in the rows path_live_rows hands from
        # body to body, kwg of the loop rows the path nodes and the world node hold (walk_row_index:
        # one row of kwg per loop row, along its whole path)
        pbod = np.asarray(self.pbod, dtype=np.int64)
        nvb = np.diff(np.append(self.idx_v, nv))
        self.pvptr = np.concatenate(([0], np.cumsum(nvb[pbod]))).astype(np.int64)
        self.path_nodes = np.append(pbod, m).astype(np.int64)
        self.kix, nkr = walk_row_index(t.rptr, t.wglob, np.append(pbod[::-1], m))
        self._ugbuf = np.zeros(max(int(self.pvptr[-1]), 1) * 6 * H)
        # PAg's rows are held only while the walk needs them (path_live_rows): a few, however long the path
        self.arow, self._npa = path_live_rows(self.parent, pbod, self.slot, np.asarray(self.handles, dtype=np.int64))
        self._pagbuf = np.zeros(max(self._npa, 1) * 36 * H)
        self._kwbuf = np.zeros(max(nkr, 1) * 6 * H)
        # per path slot: 1 the body has one path child, 2 it is a handle (loop_sensitivities)
        npc = np.bincount(np.where(self.parent[pbod] >= 0, self.parent[pbod], m), minlength=m + 1)
        self.pflag = (np.where(npc[pbod] == 1, 1, 0) + np.where(np.isin(pbod, self.handles), 2, 0)).astype(np.int64)
        # where the walk changes its columns' basis (walk_basis), the new columns in the old ones
        # (Acmp, cr[0] of them; 0: no change at the last evaluation), and the path nodes whose
        # columns are in the old basis (_nodes_a: walked before the change) or the new (_nodes_b,
        # and their dofs, the first _iv_b of the path's; all of them where there is no change)
        self._cslot, self._crows = walk_basis(self.parent, pbod, self.slot, self.handles, t.prow, t.rptr, self.kix)
        cs = self._cslot if self._cslot >= 0 else len(pbod) - 1
        self._nodes_a = np.ascontiguousarray(pbod[cs + 1:], dtype=np.int64)
        self._nodes_b = np.append(pbod[:cs + 1], m).astype(np.int64)
        self._iv_b = int(self.pvptr[cs + 1])
        self._Acmp = np.zeros((max(6 * H, 1), max(6 * H, 1)))
        self._cr = np.zeros(1, dtype=np.int64)
        self._gb = np.zeros(max(6 * H, 1))
        self._walk_views(6 * H)
        # the walk's scratch, sized by the rows the path nodes and the world eliminate (rank <= z)
        z = (t.wrows - t.prow)[self.path_nodes]
        self._zm = max(1, int(z.max(initial=0)))
        self._pm = max(1, int(t.prow[self.path_nodes].max(initial=0)))
        self._wsc = np.empty(walk_scratch_size(self._zm, self._pm, 6 * H))
        self.colsrc = np.arange(6 * H, dtype=np.int64)     # the walk's column order (walk_columns)
        self._kc = np.arange(6, dtype=np.int64)             # the components it carries (planar_components)
        self._ax, self._nk = -1, 6                          # the path's plane (planar_axis), their count
        self.ncols = 6 * H                                  # how many of them it carries
        self.lam = np.zeros(self.loops.nrow)
        self._terms = None
        self._gamma = None
        # the arrays each evaluation fills again: the loop terms, the passes' scratch
        self._tws = LoopTermsWorkspace(self.loops)
        self._bsc = np.empty(BACKWARD_FIXED + t.zwork)
        self._fsc = np.empty(FORWARD_FIXED + max(t.zmax, 1))
        self._none_f = np.zeros(1)
        self._none_i = np.zeros(1, dtype=np.int64)

    def _walk_views(self, nl):
        """ug (path dofs, nl), PAg (live rows, 6, nl) and kwg (the walk's loop rows, nl): C-contiguous views
        of the walk's buffers with the nl columns it carries, so that it reads and writes no
        column it does not carry."""
        nu, nr = int(self.pvptr[-1]), int(self.kix.max(initial=-1)) + 1
        self.ug = self._ugbuf[:nu * nl].reshape(nu, nl)
        self.PAg = self._pagbuf[:self._npa * 6 * nl].reshape(self._npa, 6, nl)
        self.kwg = self._kwbuf[:nr * nl].reshape(nr, nl)

    # ---------------------------------------------------------------- the steps
    def reduce(self, v_in, tau, f_ext=None, rows="dynamics"):
        """Step (b), loops eliminated inside the part (see :class:`PartKernel.reduce`; the loops'
        rows take ``loop_rhs(terms, rows)``)."""
        bias = _bias(rows)
        F, has_f = self._take_inputs(tau, f_ext)
        v_in = np.ascontiguousarray(v_in, dtype=np.float64)
        # pass 1 from v_in; the joint kinematics the velocity step did (kslot >= 0) are reused
        K._pass1(self.parent, self.jtype, self.axis, self.axis2, self.E_tree, self.r_tree, self.idx_q, self.idx_v,
                 self._q, self._qd, self.mass, self.com, self.I_com, F, has_f, v_in, self.kslot, self.cJb,
                 self.vJb, self.slot, False, self.TEb, self.Trb, self.reach, self.E, self.r, self.S, self.v, self.c,
                 self.pA, bias, self.IA)
        world_poses(self.parent, self.E, self.r, self.Rw, self.pw)     # relative to the root's parent frame
        try:
            terms = loop_terms(self.loops, self.Rw, self.pw, self.v, self._tws)
        except ValueError as e:
            raise PartreeInputError(str(e)) from None
        self._terms = terms
        self._gamma = gamma = np.ascontiguousarray(loop_rhs(terms, rows))
        t = self.topo
        bad = loop_backward_pass_in(self.parent, self.idx_v, self._tau, self.E, self.r, self.c, self.IA, self.pA,
                                    self.S, self.U, self.Dinv, self.u, self.mass, self.com, self.I_com, t.wptr,
                                    t.wloop, t.wpos, t.npl, t.prow, t.wrows, t.prmap, t.wglob, t.rptr, t.cptr,
                                    t.kptr, t.sptr, t.eptr, t.eloop, t.eside, t.epos, t.zfirst, self.loops.nrows,
                                    terms.G, gamma, self.rank_tol ** 2, self.Cw, self.Kw, self.kw, self.SC,
                                    self.perm, self.rank, self._bsc, 0.0, self._none_f, self._none_i, self._none_i)
        if bad >= 0:
            raise PartreeInputError(f"body {int(self.bodies[bad])}: its subtree has a singular inertia along the "
                                    f"joint's motion; forward dynamics is undefined")
        # the columns and components the walk carries (walk_columns, planar_components): a planar
        # path is taken over from the last evaluation and verified by the walk as it goes; a
        # path that was not is looked at again (that look stops at its first body out of plane)
        look = self._ax < 0 or self._nk == 6 or not self.planar_walk
        while True:
            if look:
                self._ax = planar_axis(self.pbod, self.idx_v, self.E, self.r, self.S) if self.planar_walk else -1
                self._nk = planar_components(self._ax, self.pbod, self.idx_v, self.U, self.Cw, t.cptr, t.wrows,
                                             t.prow, self._kc)
            nl = walk_columns(self._ax, self.H, self.colsrc)
            if nl != self.ncols or self.kwg.shape[1] != nl:
                self._walk_views(nl)
            self.ncols = nl
            self.kwg[:] = 0.0
            if not loop_sensitivities(
                    self.parent, self.idx_v, self.handles, self.pbod, self.slot, self.arow, self.E, self.r, self.S,
                    self.c, self.IA, self.pA, self.U, self.Dinv, self.u, t.prow, t.wrows, t.wglob, t.rptr, t.cptr,
                    t.kptr, t.sptr, gamma, self.Cw, self.Kw, self.kw, self.SC, self.perm, self.rank, self.PAg, self.ug,
                    self.pvptr, self.kwg, self.kix,
                    self.pflag, self._ax, self._kc, self._nk, self.top, self.a0 if bias else np.zeros(6), self.Rw,
                    self.pw, self.colsrc, nl, self._cslot, self._crows, self._Acmp, self._cr, self.M, self.m0,
                    self.Kt, self.Psi, self.Lam, self.beta, self._wsc,
                    self._zm, self._pm):
                break
            look = True
        if self.top:
            # a part hanging from the base: its a_in is the base's a0, folded into beta (Psi = 0);
            # its root relation is not used, and Kt carries Psi^T, as the messages do
            self.Kt[:] = 0.0
        self._reduced = True
        return self.M, self.m0, self.Kt, self.Psi, self.Lam, self.beta

    def solve(self, a_in, g):
        """Back-substitution (see :class:`PartKernel.solve`); also sets ``lam``."""
        g = self._take_solution(g)
        t = self.topo
        # g's part goes into the serial pass's u and k in place, at the path dofs and the rows the
        # path nodes eliminate (the outward pass reads no other row's k): a reduction serves one
        # back-substitution, and copies of u and k would cost more (most entries are no path's)
        u, kw = self.u, self.kw
        if self.H:
            # g's components in the walk's column order (walk_columns); the columns the walk did not
            # carry have no part in u and k
            gv = g.reshape(-1)[self.colsrc]
            # the bodies walked after a change of basis carry the new columns, r of them: g in them
            # is Acmp g (walk_basis); without a change both sets carry the old ones
            nl, r = self.ncols, int(self._cr[0])
            gb = gv
            if r:
                gb = self._gb[:r]
                np.dot(self._Acmp[:r, :nl], gv[:nl], out=gb)
            iv = self._iv_b
            add_path_columns(u, kw, self.ug[iv:], self.kwg, gv, self.path_v[iv:], t.rptr, self.kix,
                             self._nodes_a, t.prow, nl)
            add_path_columns(u, kw, self.ug[:iv], self.kwg, gb, self.path_v[:iv], t.rptr, self.kix,
                             self._nodes_b, t.prow, r or nl)
        lam = self.lam
        lam[:] = 0.0
        loop_forward_pass_in(self.parent, self.idx_v, np.ascontiguousarray(a_in, dtype=np.float64), self.E, self.r,
                             self.S, self.c, self.U, self.Dinv, u, self.a, self.qdd, lam, t.prow, t.wrows, t.wglob,
                             t.rptr, t.cptr, t.kptr, t.sptr, self._gamma, self.Cw, self.Kw, kw, self.SC, self.perm,
                             self.rank, self._fsc)
        return self.qdd

    def loop_violation(self):
        """max abs(Phi) of the part's loops at the last ``reduce``."""
        return float(np.abs(self._terms.phi).max(initial=0.0)) if self._terms is not None else 0.0

    def loop_wrenches(self):
        """The loops' wrenches on the part's bodies, (m, 6) in body coordinates, after ``solve``."""
        W = np.zeros((self.m, 6))
        lp = self.loops
        loop_wrench_kernel(lp.body_a, lp.body_b, lp.nrows, lp.row0, np.ascontiguousarray(self._terms.G), self.lam, W)
        return W

    def loop_forces(self):
        """Each of the part's loops' cut-joint wrench [n; f] (as ``ConstrainedResult.loop_force``)."""
        return loop_forces(self.loops, self._terms.T, self.lam)

    def loop_pieces(self):
        """(global loop numbers, rows, multipliers, cut-joint wrenches) after ``solve``."""
        return self.loop_ids, self.loops.nrows, self.lam.copy(), self.loop_forces()

    def wrenches(self):
        """Step (d) (see :class:`PartKernel.wrenches`), the loop forces applied to their bodies."""
        F0, has0 = self._F, self._has_f
        W = self.loop_wrenches()
        self._F = W + F0 if has0 else W
        self._has_f = True
        try:
            return super().wrenches()
        finally:
            self._F, self._has_f = F0, has0


@njit(cache=True)
def add_path_columns(u, kw, ug, kwg, g, path_v, rptr, kix, nodes, prow, nl):
    """The handle wrenches g's part in u and k (the first nl columns the walk carried):
    u[path_v[i]] += ug[i] . g and, over the rows t each of ``nodes`` x eliminates (prow[x] and
    after: the outward pass reads no other row's k), kw[rptr[x] + t] += kwg[kix[rptr[x] + t]] . g."""
    for i in range(path_v.shape[0]):
        s = 0.0
        for j in range(nl):
            s += ug[i, j] * g[j]
        u[path_v[i]] += s
    for x in nodes:
        o = rptr[x]
        for t in range(prow[x], rptr[x + 1] - o):
            kr = kix[o + t]
            s = 0.0
            for j in range(nl):
                s += kwg[kr, j] * g[j]
            kw[o + t] += s


def walk_row_index(rptr, wglob, nodes):
    """Where the walk keeps the loop rows' columns (kwg, see :func:`loop_sensitivities`):
    kix[rptr[x] + t] for row t of each of ``nodes`` x (-1 at the other nodes), and how many rows.

    A loop row has one row of kwg along its whole path, from the loop's ends to the node that
    eliminates it (the part's row ``wglob``): each path body adds its step's share to it in
    place, and the paths of a loop's two ends add to the same row.  Rows are numbered in the
    order ``nodes`` (the walk's) first reaches them, so that the walk goes through kwg in order."""
    kix = -np.ones(int(rptr[-1]), dtype=np.int64)
    nodes = np.asarray(nodes, dtype=np.int64)
    cnt = rptr[nodes + 1] - rptr[nodes]
    if not cnt.sum():
        return kix, 0
    idx = np.repeat(rptr[nodes] - np.concatenate(([0], np.cumsum(cnt)[:-1])), cnt) + np.arange(cnt.sum())
    _, first, inv = np.unique(wglob[idx], return_index=True, return_inverse=True)
    order = np.empty(first.size, dtype=np.int64)
    order[np.argsort(first, kind="stable")] = np.arange(first.size)
    kix[idx] = order[inv.reshape(-1)]
    return kix, int(first.size)


def walk_basis(parent, pbod, slot, handles, prow, rptr, kix):
    """Where the walk changes its columns' basis (see :func:`loop_sensitivities`): the path slot of
    the body where the handles' paths meet (-1 for fewer than two handles, or handles below
    different roots), and the kwg rows (kix) of the loop rows its path children hand it.

    From that body on, everything g's columns reach depends on them through the body's pA
    columns and those rows only (the walk has passed every other path body, and nothing enters
    g's columns after the handles), so the walk can go on with nk + len(rows) columns in place
    of 6 H (3 H on a planar path), when that is fewer."""
    none = np.zeros(0, dtype=np.int64)
    if len(handles) < 2:
        return -1, none
    common = None
    for h in handles:
        chain = set()
        x = int(h)
        while x >= 0:
            chain.add(x)
            x = int(parent[x])
        common = chain if common is None else common & chain
    if not common:
        return -1, none
    y = max(common)         # the deepest: a part numbers its bodies parents first
    rows = {int(kix[rptr[x] + t]) for x in pbod if parent[x] == y for t in range(prow[x])}
    return int(slot[y]), np.array(sorted(rows), dtype=np.int64)


def path_live_rows(parent, pbod, slot, handles):
    """The rows of the walk's PAg (see :func:`loop_sensitivities`): arow[slot[x]] per path body x,
    and how many rows there are.  The walk goes over ``pbod`` from its end (children first); a
    body's row is taken when the walk first writes to it (at the start for a handle, else at its
    first path child's step) and given back after the body's own step, to the next body that
    needs one.  A path holds a few rows at a time (one per branch being walked), so PAg stays
    in the cache whatever the path's length."""
    ns = len(pbod)
    arow = -np.ones(ns, dtype=np.int64)
    free, nrow = [], 0

    def take(si):
        nonlocal nrow
        if arow[si] < 0:
            if free:
                arow[si] = free.pop()
            else:
                arow[si] = nrow
                nrow += 1

    for h in handles:
        take(slot[h])
    for x in pbod[::-1]:
        si = slot[x]
        take(si)
        if parent[x] >= 0:
            take(slot[parent[x]])
        free.append(arow[si])
    return arow, nrow


@njit(cache=True, inline="always")
def add_dinv_cols(Dinv, B, iv, nv, X, x0, out, ncol, sd, kc, nk):
    """out[k, cc] += sum over the joint's dofs d of B[iv + d, k] (D^-1 X)[d, cc], X's rows from x0,
    for the first ncol columns and the components k = kc[:nk] (``sd``: ncol values of scratch)."""
    for d in range(nv):
        for cc in range(ncol):
            sd[cc] = 0.0
        for e2 in range(nv):
            f = Dinv[iv + d, e2]
            for cc in range(ncol):
                sd[cc] += f * X[x0 + e2, cc]
        for kk in range(nk):
            k = kc[kk]
            f = B[iv + d, k]
            for cc in range(ncol):
                out[k, cc] += f * sd[cc]


@njit(cache=True, inline="always")
def planar_body(a, x, idx_v, E, r, S):
    """Whether path body x keeps to the plane normal to axis a (see planar_axis): its joint
    transform a rotation about a (exact zeros), its offset in the plane, its joint's motions in
    the plane's algebra."""
    if E[x, a, (a + 1) % 3] != 0.0 or E[x, a, (a + 2) % 3] != 0.0 or E[x, (a + 1) % 3, a] != 0.0:
        return False
    if E[x, (a + 2) % 3, a] != 0.0 or r[x, a] != 0.0:
        return False
    iv = idx_v[x]
    nv = (idx_v[x + 1] if x + 1 < idx_v.shape[0] else S.shape[0]) - iv
    for d in range(nv):
        if S[iv + d, (a + 1) % 3] != 0.0 or S[iv + d, (a + 2) % 3] != 0.0 or S[iv + d, 3 + a] != 0.0:
            return False
    return True


@njit(cache=True, inline="always")
def planar_rows(a, x, idx_v, U, Cw, cptr, wrows, prow):
    """Whether path node x turns no in-plane column out of the plane normal to axis a (see
    planar_components): its joint's U = IA S and the rows C_Z of the loops it eliminates have
    exact zeros out of the plane."""
    iv = idx_v[x]
    nv = (idx_v[x + 1] if x + 1 < idx_v.shape[0] else U.shape[0]) - iv
    for d in range(nv):
        if U[iv + d, (a + 1) % 3] != 0.0 or U[iv + d, (a + 2) % 3] != 0.0 or U[iv + d, 3 + a] != 0.0:
            return False
    for t in range(prow[x], wrows[x]):
        o = cptr[x] + 6 * t
        if Cw[o + (a + 1) % 3] != 0.0 or Cw[o + (a + 2) % 3] != 0.0 or Cw[o + 3 + a] != 0.0:
            return False
    return True


@njit(cache=True)
def planar_axis(pbod, idx_v, E, r, S):
    """The axis a (0, 1, 2) normal to the plane every path body ``pbod`` moves in, or -1.

    Such a path keeps the wrench components out of the plane ([n; f]: the moments about the two
    in-plane axes and the force along a) apart: each joint transform E_i is a rotation about a
    (exact zeros where it would couple a with the other axes) with its offset r_i in the plane,
    and each joint's motion S lies in the plane's algebra (no angular rate about an in-plane
    axis, no velocity along a: planar_body).  A handle wrench column out of the plane then stays
    out of it along the path, S^T of it is exactly zero at every body (u's column is zero), no
    loop row meets it, and it reaches the part's root as a rigid transform: the walk need not
    carry it.  A planar scissor mast's parts are such paths."""
    if pbod.shape[0] == 0:
        return -1
    for a in range(3):
        ok = True
        for x in pbod:
            if not planar_body(a, x, idx_v, E, r, S):
                ok = False
                break
        if ok:
            return a
    return -1


@njit(cache=True)
def planar_components(axis, pbod, idx_v, U, Cw, cptr, wrows, prow, kc):
    """The wrench components the walk's in-plane columns can take on a planar path (see
    planar_axis, ``axis`` -1: none): into kc (6,), in increasing order; returns how many.

    An in-plane column keeps to the moment about ``axis`` and the two in-plane forces (3) when
    nothing on the path turns it out of the plane: beside the joints' transforms and motions
    (planar_axis), U = IA S of each path joint (the body's inertia couples no out-of-plane
    motion to its in-plane ones) and the rows C_Z of the loops each path node eliminates have
    exact zeros out of the plane (planar_rows).  Otherwise all 6."""
    for k in range(6):
        kc[k] = k
    if axis < 0:
        return 6
    for x in pbod:
        if not planar_rows(axis, x, idx_v, U, Cw, cptr, wrows, prow):
            return 6
    i0, i1 = plane_axes(axis)
    kc[0] = axis
    kc[1] = 3 + i0
    kc[2] = 3 + i1
    return 3


@njit(cache=True)
def walk_columns(axis, H, colsrc):
    """The handle wrenches' columns (6 hk + j) in the walk's order, into colsrc (6 H,); returns how
    many the walk carries.  ``axis`` -1: all 6 H, in order.  Otherwise (see planar_axis) the
    in-plane components of every handle first (the moment about ``axis`` and the two in-plane
    forces: 3 H columns, which the walk carries), then the out-of-plane ones."""
    if axis < 0:
        for cc in range(6 * H):
            colsrc[cc] = cc
        return 6 * H
    i0, i1 = plane_axes(axis)
    pos = 0
    for hk in range(H):
        colsrc[pos] = 6 * hk + axis
        colsrc[pos + 1] = 6 * hk + 3 + i0
        colsrc[pos + 2] = 6 * hk + 3 + i1
        pos += 3
    for hk in range(H):
        colsrc[pos] = 6 * hk + i0
        colsrc[pos + 1] = 6 * hk + i1
        colsrc[pos + 2] = 6 * hk + 3 + axis
        pos += 3
    return 3 * H


def walk_scratch_size(zm, pm, nc):
    """The scratch :func:`loop_sensitivities` takes: zm and pm the most rows a path node (or the
    world) eliminates and keeps pending, nc = 6 H."""
    c1 = max(nc, 1)
    return 96 + 6 * c1 + zm * (7 + pm + c1) + c1 + max(nc, 6) + 3 * c1 * c1 + (WL_ROWS + zm) * c1 + 20 * c1


@njit(cache=True, inline="always")
def gram_add(Wl, i0, i1, ncol, L):
    """L[:ncol, :ncol] += Wl[i0:i1, :ncol]^T Wl[i0:i1, :ncol], four rows at a time (L is read and
    written once per four)."""
    while i0 + 4 <= i1:
        for a in range(ncol):
            f0 = Wl[i0, a]
            f1 = Wl[i0 + 1, a]
            f2 = Wl[i0 + 2, a]
            f3 = Wl[i0 + 3, a]
            for b in range(ncol):
                L[a, b] += (f0 * Wl[i0, b] + f1 * Wl[i0 + 1, b]) + (f2 * Wl[i0 + 2, b] + f3 * Wl[i0 + 3, b])
        i0 += 4
    for i in range(i0, i1):
        for a in range(ncol):
            f = Wl[i, a]
            for b in range(ncol):
                L[a, b] += f * Wl[i, b]


@njit(cache=True)
def loop_sensitivities(parent, idx_v, handles, pbod, slot, arow, E, r, S, c, IA, pA, U, Dinv, u,
                       prow, wrows, wglob, rptr, cptr, kptr, sptr, gamma,
                       Cw, Kw, kw, SC, perm, rank, PAg, ug, pvptr, kwg, kix, pflag, ax, kc, nk, top, a0, Rw, pw,
                       colsrc, nl, cslot, crows, Acmp, cr, M, m0, Kt, Psi, Lam, beta, own, zm, pm):
    """The part's boundary relations after the serial inward pass (``loop_backward_pass``, g = 0).

    Inward along the path bodies ``pbod`` (slot[x]: path body x's path slot), then the world
    node: PAg (rows, 6, nl) the handle wrenches' columns of pA, body x's in row arow[slot[x]]
    (path_live_rows: a row is held from the walk's first write to it to the body's own step,
    all zero outside that time), ug (path dofs, nl) of u (path body x's at pvptr[slot[x]]) and
    kwg (rows, nl, zeroed by the caller) of the loop rows' k (node x's row t in kwg's row
    kix[rptr[x] + t], the same all along the loop row's path: walk_row_index), and Lam summed
    over the pivots they meet (module docstring); pflag per path slot: 1 the body has one path child, 2 it is a handle.  Then the
    root relation M, m0, Kt (in the root's parent frame); Psi is Kt^T (the part's response is
    symmetric: reciprocity).  Returns 0, or 1 where the plane ``ax`` is found not to hold.
    ``own``: scratch of walk_scratch_size(zm, pm, 6 H) values (zm, pm: see there).

    beta, the handles' accelerations with g = 0, needs no outward pass: the walk's columns are
    the adjoints of the outward pass (the transposed steps, in reverse order: PAg is the
    adjoint of a body's acceleration after its joint, dg of the one before it, -kwg of the
    rows' multipliers), so each handle acceleration component is the sum over the path bodies
    of dg^T c_x - ug^T D^-1 u_x, over the loop pivots they meet of w3^T (L^-1 (gamma_Z - k_Z)),
    with the serial pass's u and k, and of a_in's column against a_in.  A part hanging from the
    base (``top``) has a_in = a0 (the base's acceleration, gravity in it): it is folded into
    beta, Psi = 0; a part below has a_in = 0 in beta.

    The columns' loops run over the (independent) columns inside, so that they vectorise.  The
    walk carries the columns colsrc[:nl] (see walk_columns): all 6 H, or on a planar path
    (planar_axis, ``ax`` its axis, else -1) the 3 H in-plane ones, the column position cc of PAg,
    ug and kwg then holding handle wrench component colsrc[cc]; the out-of-plane columns add
    nothing to Lam, and their Kt is the handle's pose (Rw, pw).  Of each column it carries the
    components kc[:nk] (planar_components: the 3 in-plane ones, or all 6); the others are zero.
    The caller takes ``ax`` and kc over from the last evaluation, and the walk verifies them at
    every body whose columns are live (planar_body, planar_rows), returning 1 at the first that
    does not keep to them: the caller then looks for the plane again and walks again.

    Where the handles' paths meet (path slot ``cslot``, see walk_basis; -1: nowhere) the walk
    changes its columns' basis: all the columns reach from there depends on them through that
    body's pA columns and the loop rows (kwg rows ``crows``) its path children hand it.  When
    these nk + len(crows) values per column are fewer than the columns, the walk keeps them in
    Acmp (row j, column cc: value j of column cc) and goes on with a unit matrix in their place
    as its columns, each of the new columns standing for one of the values.  ug, kwg and Wl's
    rows written after that hold the new columns; the sums (Lam, beta, a_in's and Kt's columns)
    are taken back to the old ones at the end (old column cc = sum over j of Acmp[j, cc] times
    new column j), and cr[0] is the count of new columns (0: no change), for the
    back-substitution (g in the new columns is Acmp g)."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, handles, pbod = unowned(parent), unowned(idx_v), unowned(handles), unowned(pbod)
    slot, arow, E, r, S = unowned(slot), unowned(arow), unowned(E), unowned(r), unowned(S)
    c, IA, pA = unowned(c), unowned(IA), unowned(pA)
    U, Dinv, u, prow, wrows = unowned(U), unowned(Dinv), unowned(u), unowned(prow), unowned(wrows)
    wglob, rptr, cptr, kptr, sptr = unowned(wglob), unowned(rptr), unowned(cptr), unowned(kptr), unowned(sptr)
    gamma, Cw, Kw, kw, SC = unowned(gamma), unowned(Cw), unowned(Kw), unowned(kw), unowned(SC)
    perm, rank, PAg, ug, kwg = unowned(perm), unowned(rank), unowned(PAg), unowned(ug), unowned(kwg)
    pvptr, kix, pflag, kc = unowned(pvptr), unowned(kix), unowned(pflag), unowned(kc)
    a0, M, m0, Kt, Psi = unowned(a0), unowned(M), unowned(m0), unowned(Kt), unowned(Psi)
    Lam, beta, Rw, pw, colsrc = unowned(Lam), unowned(beta), unowned(Rw), unowned(pw), unowned(colsrc)
    own, crows, Acmp, cr = unowned(own), unowned(crows), unowned(Acmp), unowned(cr)
    n = parent.shape[0]
    nvt = S.shape[0]
    H = handles.shape[0]
    nc = 6 * H
    # the columns the walk carries are colsrc[:nl] (6 hk + j: handle hk's wrench component j); a
    # part whose path is planar carries the in-plane ones only (see planar_axis), the others
    # follow in colsrc[nl:]
    ns = pbod.shape[0]
    c1 = max(nc, 1)
    # the scratch (walk_scratch_size(zm, pm, nc) values of ``own``), as views that count no
    # references (passed to inlined steps per path body, views that count them cost atomic
    # operations)
    Ia = raw_view(own, 0, (6, 6))
    T6 = raw_view(own, 36, (6, 6))
    pa = raw_view(own, 72, (6,))
    tmp = raw_view(own, 78, (6,))
    col6 = raw_view(own, 84, (6,))
    out6 = raw_view(own, 90, (6,))
    o = 96
    dg = raw_view(own, o, (6, c1))
    o += 6 * c1
    Wb = raw_view(own, o, (zm, 7 + pm + c1))
    o += zm * (7 + pm + c1)
    acc = raw_view(own, o, (c1,))
    o += c1
    sd = raw_view(own, o, (max(nc, 6),))
    o += max(nc, 6)
    # Lam, accumulated inward: each pivot the walk eliminates adds its columns' outer product
    # (the loops' rows Wl, nw of them, summed four at a time once WL_ROWS are held)
    Ls = raw_view(own, o, (c1, c1))
    o += c1 * c1
    for a in range(c1):
        for b in range(c1):
            Ls[a, b] = 0.0
    Wl = raw_view(own, o, (WL_ROWS + zm, c1))
    o += (WL_ROWS + zm) * c1
    # beta, accumulated inward as Lam is (the same pivots, each column against the serial pass's
    # right-hand side: see the docstring), and a_in's columns (the base's a0 for a part hanging
    # from it)
    bacc = raw_view(own, o, (c1,))
    o += c1
    ain = raw_view(own, o, (6, c1))
    o += 6 * c1
    # the same sums after the change of basis (where the handles' paths meet), Kt's columns from
    # the root, and T2 = Ls2 Acmp (see below)
    Ls2 = raw_view(own, o, (c1, c1))
    o += c1 * c1
    bacc2 = raw_view(own, o, (c1,))
    o += c1
    ain2 = raw_view(own, o, (6, c1))
    o += 6 * c1
    Kt2 = raw_view(own, o, (6, c1))
    o += 6 * c1
    T2 = raw_view(own, o, (c1, c1))
    for cc in range(c1):
        bacc[cc] = 0.0
        for k in range(6):
            ain[k, cc] = 0.0
    nw = 0
    for s in range(PAg.shape[0]):
        for k in range(6):
            for cc in range(nl):
                PAg[s, k, cc] = 0.0
    for hk in range(H):
        for k in range(6):
            for j in range(6):
                Kt[hk, k, j] = 0.0      # (the root's step writes it, unless g's columns died before)
    for cc in range(nl):
        PAg[arow[slot[handles[colsrc[cc] // 6]]], colsrc[cc] % 6, cc] += 1.0
    # ---- inward: g's columns along the paths, then the world node
    dead = -1       # the path body just walked, if its columns were all zero
    # the columns the walk carries (nl, or nk + ncr after the change of basis where the handles'
    # paths meet), where it sums Lam, beta and a_in's columns (the new basis's own after it), and
    # whether the basis has changed
    ncol = nl
    Lc = Ls
    bc = bacc
    ainc = ain
    changed = False
    kt2 = False
    cr[0] = 0
    ncr = crows.shape[0]
    for step in range(ns + 1):
        x = pbod[ns - 1 - step] if step < ns else n
        if x == n and rptr[n + 1] == rptr[n]:
            break
        w = wrows[x]
        p = prow[x]
        oc = cptr[x]
        ok = kptr[x]
        orr = rptr[x]
        z = w - p
        # no subnormal number enters the walk: g's columns fade along a long 3-D path and would
        # spend most of it in the subnormal range, where every operation is slow.  Every
        # CHECK_EVERY path bodies and at the handles, entries below TINY_ABS are flushed to zero,
        # and a path body whose columns (pA's and its rows' k's) are all zero passes nothing on:
        # its u's columns are zero and the rest of its step is skipped.  So is its parent's when
        # the body is the parent's one path child and the parent no handle (pflag 1): nothing
        # else reaches the parent's columns
        skip = x < n and ncol > 0 and dead >= 0 and parent[dead] == x and pflag[slot[x]] == 1
        dead = -1
        if not skip and x < n and ncol > 0 and (step % CHECK_EVERY == 0 or pflag[slot[x]] & 2):
            mx = 0.0
            small = 0
            si = arow[slot[x]]
            for kk in range(nk):
                k = kc[kk]
                for cc in range(ncol):
                    v = abs(PAg[si, k, cc])
                    mx = max(mx, v)
                    small += (v < TINY_ABS) & (v > 0.0)
            for t in range(w):
                for cc in range(ncol):
                    v = abs(kwg[kix[orr + t], cc])
                    mx = max(mx, v)
                    small += (v < TINY_ABS) & (v > 0.0)
            if mx < TINY_ABS:
                for kk in range(nk):
                    for cc in range(ncol):
                        PAg[si, kc[kk], cc] = 0.0
                for t in range(w):
                    for cc in range(ncol):
                        kwg[kix[orr + t], cc] = 0.0
                skip = True
            elif small > 0:
                for kk in range(nk):
                    k = kc[kk]
                    for cc in range(ncol):
                        if abs(PAg[si, k, cc]) < TINY_ABS:
                            PAg[si, k, cc] = 0.0
                for t in range(w):
                    for cc in range(ncol):
                        if abs(kwg[kix[orr + t], cc]) < TINY_ABS:
                            kwg[kix[orr + t], cc] = 0.0
        if skip:
            # (its PAg row is zero: nothing reached it, or the check above flushed it)
            iv = idx_v[x]
            ov = pvptr[slot[x]]
            nv = idx_v[x + 1] - iv if x + 1 < n else nvt - iv
            for d in range(nv):
                for cc in range(ncol):
                    ug[ov + d, cc] = 0.0
            dead = x
            continue
        if x < n and slot[x] == cslot and nk + ncr < ncol:
            # the handles' paths meet at x (walk_basis): all that g's columns reach from here on
            # depends on them through x's pA columns and the loop rows x's path children hand it,
            # nk + ncr values per column, fewer than the columns.  The walk goes on with these
            # values as its columns (a unit matrix), Acmp holds them in the old columns, and
            # what the walk sums from here on is taken back to the old columns at the end
            gram_add(Wl, 0, nw, ncol, Lc)        # the loops' rows held, in the old columns
            nw = 0
            ai = arow[slot[x]]
            for kk in range(nk):
                for cc in range(ncol):
                    Acmp[kk, cc] = PAg[ai, kc[kk], cc]
                    PAg[ai, kc[kk], cc] = 0.0
                PAg[ai, kc[kk], kk] = 1.0
            for i in range(ncr):
                kt = crows[i]
                for cc in range(ncol):
                    Acmp[nk + i, cc] = kwg[kt, cc]
                    kwg[kt, cc] = 0.0
                kwg[kt, nk + i] = 1.0
            ncol = nk + ncr
            for a in range(ncol):
                bacc2[a] = 0.0
                for b in range(ncol):
                    Ls2[a, b] = 0.0
                for k in range(6):
                    ain2[k, a] = 0.0
            Lc = Ls2
            bc = bacc2
            ainc = ain2
            changed = True
            cr[0] = ncol
        if x < n and ax >= 0 and ncol > 0:
            # the planar path the caller took over from the last evaluation, verified as the walk
            # reaches each body whose columns are live: 1 (the caller looks again) if it is not
            if not planar_body(ax, x, idx_v, E, r, S):
                return 1
            if nk == 3 and not planar_rows(ax, x, idx_v, U, Cw, cptr, wrows, prow):
                return 1
        if z > 0 and rank[x] > 0 and ncol > 0:
            # the loops eliminated at x: with L the factor the serial pass left (rows in pivot
            # order), Wb = L^-1 [C_Z, K_ZP, -k_Z's columns, gamma_Z - k_Z] (rk x (nkx + p + ncol +
            # 1), C_Z's carried components), all columns in one forward substitution, each in
            # lower_solve's order (the last is the serial pass's w3, as it computed it)
            rk = rank[x]
            if rk == 2 and x < n:
                # two rows (a planar pin) at a body: the forward substitution written out, each
                # value as the general path below computes it, w3's columns kept in Wl's two rows
                si = arow[slot[x]]
                z0 = p + perm[orr + p]
                z1 = p + perm[orr + p + 1]
                o2 = ok + p * w + p
                l00 = Kw[o2]
                l10 = Kw[o2 + w]
                l11 = Kw[o2 + w + 1]
                r0 = (gamma[wglob[orr + z0]] - kw[orr + z0]) / l00
                r1 = ((gamma[wglob[orr + z1]] - kw[orr + z1]) - l10 * r0) / l11
                k0 = kix[orr + z0]
                k1 = kix[orr + z1]
                for cc in range(ncol):
                    y0 = -kwg[k0, cc] / l00
                    y1 = (-kwg[k1, cc] - l10 * y0) / l11
                    Wl[nw, cc] = y0
                    Wl[nw + 1, cc] = y1
                    bc[cc] += y0 * r0
                    bc[cc] += y1 * r1
                for kk in range(nk):
                    kr = kc[kk]
                    f0 = Cw[oc + z0 * 6 + kr] / l00
                    f1 = (Cw[oc + z1 * 6 + kr] - l10 * f0) / l11
                    for cc in range(ncol):
                        PAg[si, kr, cc] -= f0 * Wl[nw, cc] + f1 * Wl[nw + 1, cc]
                for t in range(p):
                    f0 = Kw[ok + z0 * w + t] / l00
                    f1 = (Kw[ok + z1 * w + t] - l10 * f0) / l11
                    kt = kix[orr + t]
                    for cc in range(ncol):
                        kwg[kt, cc] += f0 * Wl[nw, cc] + f1 * Wl[nw + 1, cc]
                nw += 2
            else:
                nkx = nk if x < n else 6
                c0 = nkx + p
                ncw = c0 + ncol + 1
                for j in range(rk):
                    zr = p + perm[orr + p + j]
                    for kk in range(nkx):
                        Wb[j, kk] = Cw[oc + zr * 6 + (kc[kk] if x < n else kk)]
                    for t in range(p):
                        Wb[j, nkx + t] = Kw[ok + zr * w + t]
                    kz = kix[orr + zr]
                    for cc in range(ncol):
                        Wb[j, c0 + cc] = -kwg[kz, cc]
                    Wb[j, c0 + ncol] = gamma[wglob[orr + zr]] - kw[orr + zr]
                for i in range(rk):
                    for j in range(i):
                        f = Kw[ok + (p + i) * w + p + j]
                        for cc in range(ncw):
                            Wb[i, cc] -= f * Wb[j, cc]
                    f = Kw[ok + (p + i) * w + p + i]
                    for cc in range(ncw):
                        Wb[i, cc] = Wb[i, cc] / f
                # the loops' pivots: the multipliers oppose the handle wrenches (+ w3^T w3, w3 the
                # last nc columns); their rows are kept for one product at the end
                for j in range(rk):
                    f = Wb[j, c0 + ncol]
                    for cc in range(ncol):
                        Wl[nw, cc] = Wb[j, c0 + cc]
                        bc[cc] += Wb[j, c0 + cc] * f
                    nw += 1
                # pA's and the pending rows' k's columns: - W1^T w3 and + W2^T w3 (W1, W2: Wb's first 6
                # and next p columns)
                for k in range(nkx + p):
                    if k < nkx and x == n:
                        # the world's rows: a_in's columns - C_Z^T L^-T w3 (a_in = a0 for a part
                        # hanging from the base; only such a part has rows to the world)
                        for j in range(rk):
                            f = Wb[j, k]
                            for cc in range(ncol):
                                ainc[k, cc] -= f * Wb[j, c0 + cc]
                        continue
                    for cc in range(ncol):
                        acc[cc] = 0.0
                    for j in range(rk):
                        f = Wb[j, k]
                        for cc in range(ncol):
                            acc[cc] += f * Wb[j, c0 + cc]
                    if k < nkx:
                        si = arow[slot[x]]
                        kr = kc[k]
                        for cc in range(ncol):
                            PAg[si, kr, cc] -= acc[cc]
                    else:
                        kt = kix[orr + k - nkx]
                        for cc in range(ncol):
                            kwg[kt, cc] += acc[cc]
        if nw >= WL_ROWS:
            # + Wl^T Wl of the rows held, four at a time (a multiple of four: the sums go in
            # the groups one product of all the rows would take); the rest moved up
            n4 = nw - nw % 4
            gram_add(Wl, 0, n4, ncol, Lc)
            for i in range(nw - n4):
                for cc in range(ncol):
                    Wl[i, cc] = Wl[n4 + i, cc]
            nw -= n4
        if x == n:
            break
        si = slot[x]
        ai = arow[si]
        iv = idx_v[x]
        ov = pvptr[si]
        nv = idx_v[x + 1] - iv if x + 1 < n else nvt - iv
        # (the loops over the columns inside: independent, each summed in the one-column order)
        if nv == 1:
            # a 1-DOF joint: the steps below written out for a scalar D, each value as they compute it
            Di = Dinv[iv, 0]
            for cc in range(ncol):
                s = 0.0
                for kk in range(nk):
                    s -= S[iv, kc[kk]] * PAg[ai, kc[kk], cc]
                ug[ov, cc] = s
                sd[cc] = 0.0 + Di * s
            for kk in range(nk):
                k = kc[kk]
                fu = U[iv, k]
                fc = c[x, k]
                for cc in range(ncol):
                    v = PAg[ai, k, cc] + fu * sd[cc]
                    dg[k, cc] = v
                    bc[cc] += v * fc
            f = u[iv]
            for cc in range(ncol):
                bc[cc] -= sd[cc] * f
            for a in range(ncol):
                f = ug[ov, a]
                for b in range(ncol):
                    Lc[a, b] -= f * sd[b]
        else:
            for d in range(nv):
                for cc in range(ncol):
                    ug[ov + d, cc] = 0.0
                for kk in range(nk):
                    k = kc[kk]
                    f = S[iv + d, k]
                    for cc in range(ncol):
                        ug[ov + d, cc] -= f * PAg[ai, k, cc]
            # pa's columns: PAg + U D^-1 ug
            for kk in range(nk):
                k = kc[kk]
                for cc in range(ncol):
                    dg[k, cc] = PAg[ai, k, cc]
            add_dinv_cols(Dinv, U, iv, nv, ug, ov, dg, ncol, sd, kc, nk)
            # beta's share of c_x: dg^T c_x
            for kk in range(nk):
                k = kc[kk]
                f = c[x, k]
                for cc in range(ncol):
                    bc[cc] += dg[k, cc] * f
            # the joint's pivot D: - ug^T D^-1 ug, and beta's - ug^T D^-1 u
            for d in range(nv):
                for cc in range(ncol):
                    s = 0.0
                    for e2 in range(nv):
                        s += Dinv[iv + d, e2] * ug[ov + e2, cc]
                    sd[cc] = s
                f = u[iv + d]
                for cc in range(ncol):
                    bc[cc] -= sd[cc] * f
                for a in range(ncol):
                    f = ug[ov + d, a]
                    for b in range(ncol):
                        Lc[a, b] -= f * sd[b]
        # x's PAg row is read: zero again, for the body that takes it next
        for kk in range(nk):
            for cc in range(ncol):
                PAg[ai, kc[kk], cc] = 0.0
        up = parent[x]
        if up >= 0:
            if nk == 3:
                force_cols_T_add_planar(E[x], r[x], dg, PAg[arow[slot[up]]], ncol, kc[0])
            else:
                force_cols_T_add(E[x], r[x], dg, PAg[arow[slot[up]]], ncol)
        else:
            # a root of the part (a part hanging from the base may hold several): a_in's columns,
            # and the root relation's Kt at body 0
            for cc in range(ncol):
                for k in range(6):
                    col6[k] = 0.0
                    out6[k] = 0.0
                for kk in range(nk):
                    col6[kc[kk]] = dg[kc[kk], cc]
                xform_force_T_add(E[x], r[x], col6, out6)
                for k in range(6):
                    ainc[k, cc] += out6[k]
                if x == 0:
                    if changed:
                        for k in range(6):
                            Kt2[k, cc] = out6[k]
                        kt2 = True
                    else:
                        for k in range(6):
                            Kt[colsrc[cc] // 6, k, colsrc[cc] % 6] = out6[k]
        pn = prow[x]
        if pn == 0 or ncol == 0:
            continue
        # x's pending rows (0 .. pn - 1) go on to its parent in place (their kwg rows are the
        # parent's: walk_row_index), with x's share (SC D^-1 ug)
        os_ = sptr[x]
        for t in range(pn):
            kt = kix[orr + t]
            if nv == 1:
                # (a 1-DOF joint: the same values, written out)
                f = 0.0 + SC[os_ + t] * Dinv[iv, 0]
                for cc in range(ncol):
                    kwg[kt, cc] += f * ug[ov, cc]
                continue
            for d in range(nv):
                s = 0.0
                for e2 in range(nv):
                    s += SC[os_ + t * nv + e2] * Dinv[iv + e2, d]
                tmp[d] = s
            for cc in range(ncol):
                s = kwg[kt, cc]
                for d in range(nv):
                    s += tmp[d] * ug[ov + d, cc]
                kwg[kt, cc] = s
    if changed:
        # what the walk summed in the new basis, in the old columns: column cc of the old is
        # sum over j of Acmp[j, cc] times column j of the new
        for cc in range(nl):
            s = bacc[cc]
            for j in range(ncol):
                s += bacc2[j] * Acmp[j, cc]
            bacc[cc] = s
            for k in range(6):
                s = ain[k, cc]
                for j in range(ncol):
                    s += ain2[k, j] * Acmp[j, cc]
                ain[k, cc] = s
            if kt2:
                for k in range(6):
                    s = 0.0
                    for j in range(ncol):
                        s += Kt2[k, j] * Acmp[j, cc]
                    Kt[colsrc[cc] // 6, k, colsrc[cc] % 6] = s
    # the out-of-plane columns, left out of the walk: carried rigidly to the root's parent frame
    # (f0 = Rw f, n0 = Rw n + pw x f0 with the handle's pose)
    for cc in range(nl, nc):
        hk = colsrc[cc] // 6
        j = colsrc[cc] % 6
        h = handles[hk]
        for k in range(6):
            Kt[hk, k, j] = 0.0
        if j < 3:
            for k in range(3):
                Kt[hk, k, j] = Rw[h, k, j]
        else:
            for k in range(3):
                Kt[hk, 3 + k, j] = Rw[h, k, j - 3]
            f0, f1, f2 = Rw[h, 0, j - 3], Rw[h, 1, j - 3], Rw[h, 2, j - 3]
            Kt[hk, 0, j] = pw[h, 1] * f2 - pw[h, 2] * f1
            Kt[hk, 1, j] = pw[h, 2] * f0 - pw[h, 0] * f2
            Kt[hk, 2, j] = pw[h, 0] * f1 - pw[h, 1] * f0
    # ---- the root relation: g_root = X0^T (Ia X0 a_in + pa) (+ Kt g, above)
    iv = idx_v[0]
    nv0 = idx_v[1] - iv if n > 1 else nvt - iv
    articulated_project(IA[0], pA[0], c[0], U, Dinv, u, iv, nv0, Ia, pa, tmp)
    for k in range(6):
        m0[k] = 0.0
        for j in range(6):
            M[k, j] = 0.0
    congruence_add(E[0], r[0], Ia, M, T6)
    xform_force_T_add(E[0], r[0], pa, m0)
    if H == 0:
        return 0
    # ---- beta: the handles' accelerations with g = 0 (a_in = a0 for a part hanging from the base,
    # else 0), accumulated inward; Psi = Kt^T (reciprocity: the handle accelerations' response to
    # a_in is the root force's to g).  The columns the walk left out reach the root rigidly: their
    # beta is their Kt column against a0
    for hk in range(H):
        for j in range(6):
            s = 0.0
            if top:
                for k in range(6):
                    s += Kt[hk, k, j] * a0[k]
            beta[hk, j] = s
            for k in range(6):
                Psi[hk, k, j] = 0.0 if top else Kt[hk, j, k]
    for cc in range(nl):
        s = bacc[cc]
        if top:
            s = 0.0
            for k in range(6):
                s += ain[k, cc] * a0[k]
            s += bacc[cc]
        beta[colsrc[cc] // 6, colsrc[cc] % 6] = s
    # + Wl^T Wl of the rows still held (after a change of basis into Ls2, then Acmp^T Ls2 Acmp
    # into Ls)
    gram_add(Wl, 0, nw, ncol, Lc)
    if changed:
        for j in range(ncol):
            for cc in range(nl):
                s = 0.0
                for i in range(ncol):
                    s += Ls2[j, i] * Acmp[i, cc]
                T2[j, cc] = s
        for a in range(nl):
            for cc in range(nl):
                s = Ls[a, cc]
                for j in range(ncol):
                    s += Acmp[j, a] * T2[j, cc]
                Ls[a, cc] = s
    for a in range(nc):
        for b in range(nc):
            Lam[a // 6, b // 6, a % 6, b % 6] = 0.0
    for a in range(nl):
        for b in range(nl):
            # (Ls is symmetric up to rounding; its upper triangle is taken)
            ca, cb = colsrc[a], colsrc[b]
            Lam[ca // 6, cb // 6, ca % 6, cb % 6] = Ls[min(a, b), max(a, b)]
    return 0
