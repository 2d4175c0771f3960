"""One part of the parallel engine: its slice of the model, its boundary layout, its workspace.

:class:`PartKernel` holds one part's arrays (sliced from the model, in local regular numbering)
and its workspace, and exposes the per-part steps of an evaluation (``velocity``, ``reduce``,
``solve`` and, for the constraint forces, ``wrenches``) over the compiled kernels of
:mod:`partree.parallel.kernels`.  Every backend (serial, MPI, Dask) drives the same parts; only
the way their boundary data travels differs.  :class:`PartLayout` and
:func:`assemble_constraint_forces` place the parts' results in the model's arrays.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import PartreeInputError
from ..flexible import refuse
from . import kernels as K
from .partition import on_path_mask, root_loop_mask


@njit(cache=True)
def _paths(parent_l, handles):
    """Root-first paths to the handles (CSR), the path-slot of every body, and the common prefix
    lengths cp[j, k] of paths j and k."""
    m = parent_l.shape[0]
    H = handles.shape[0]
    depth = np.zeros(m, dtype=np.int64)
    for i in range(m):
        if parent_l[i] >= 0:
            depth[i] = depth[parent_l[i]] + 1
    ptr = np.zeros(H + 1, dtype=np.int64)
    for k in range(H):
        ptr[k + 1] = ptr[k] + depth[handles[k]] + 1
    idx = np.empty(ptr[H], dtype=np.int64)
    slot = -np.ones(m, dtype=np.int64)
    for k in range(H):
        i = handles[k]
        pos = ptr[k + 1] - 1
        while i >= 0:
            idx[pos] = i
            slot[i] = 0
            pos -= 1
            i = parent_l[i]
    ns = 0
    for i in range(m):
        if slot[i] >= 0:
            slot[i] = ns
            ns += 1
    cp = np.zeros((H, H), dtype=np.int64)
    for j in range(H):
        for k in range(j, H):
            lj = ptr[j + 1] - ptr[j]
            lk = ptr[k + 1] - ptr[k]
            t = 0
            while t < lj and t < lk and idx[ptr[j] + t] == idx[ptr[k] + t]:
                t += 1
            cp[j, k] = t
            cp[k, j] = t
    return ptr, idx, slot, ns, cp


def local_parents(model, b, part_id, one_tree=False):
    """The local parent of each of a part's bodies ``b`` (increasing global ids, its root first),
    -1 for a body whose parent is outside the part.  Checks that the part is one connected piece
    with its root first; a part hanging from the base may hold several trees of the model (joined
    by closed loops: ``partree.parallel.partition.join_looped_trees``) unless ``one_tree``."""
    m = b.size
    par = model.parent[b]
    loc = np.searchsorted(b, par)
    inside = (par >= 0) & (loc < m)
    inside[inside] = b[np.minimum(loc[inside], m - 1)] == par[inside]
    parent = np.where(inside, loc, -1).astype(np.int64)
    if m == 0 or parent[0] != -1 or np.any(((parent < 0) & (par >= 0))[1:]) or \
            (one_tree and np.any(parent[1:] < 0)):
        raise PartreeInputError(f"part {part_id}: bodies are not one connected piece with its root first")
    return parent


def fast_index(sel):
    """A slice when the index array is one contiguous run (views instead of gathers), else sel."""
    sel = np.asarray(sel, dtype=np.int64)
    if sel.size == 0:
        return slice(0, 0)
    if int(sel[-1]) - int(sel[0]) + 1 == sel.size and np.all(np.diff(sel) == 1):
        return slice(int(sel[0]), int(sel[-1]) + 1)
    return sel


class RunIndex:
    """An index array kept as its contiguous runs: :meth:`put` does ``dst[index] = src`` with one
    slice copy per run where the runs are few (a part's coordinates are a run or two), which
    costs a copy, not a gather; with many runs, through the index itself."""

    def __init__(self, index):
        index = np.asarray(index, dtype=np.int64)
        self.index = index
        self.size = int(index.size)
        self.runs = None
        if index.size:
            brk = np.flatnonzero(np.diff(index) != 1) + 1
            starts = np.concatenate(([0], brk))
            ends = np.concatenate((brk, [index.size]))
            if starts.size <= max(8, index.size // 256):
                self.runs = [(int(index[a]), int(a), int(b - a)) for a, b in zip(starts, ends)]

    def put(self, dst, src):
        """dst[index] = src."""
        if self.runs is None:
            dst[self.index] = src
            return
        for d, a, n in self.runs:
            dst[d:d + n] = src[a:a + n]

    def take(self, src):
        """src[index], a new array."""
        if self.runs is None:
            return src[self.index]
        out = np.empty(self.size, dtype=src.dtype)
        for d, a, n in self.runs:
            out[a:a + n] = src[d:d + n]
        return out


class Take:
    """``x[index]`` for a part's index as :func:`fast_index` leaves it: a view where it is a slice,
    else a :class:`RunIndex` copy (a flexible part's coordinates are two runs, its joints' and its
    modes', which a gather through the index array would read entry by entry)."""

    def __init__(self, index):
        self.slice = index if isinstance(index, slice) else None
        self.runs = None if self.slice is not None else RunIndex(index)

    def __call__(self, x):
        return x[self.slice] if self.slice is not None else self.runs.take(x)


def index_ranges(start, count):
    """Concatenation of arange(start[i], start[i] + count[i])."""
    tot = int(count.sum())
    if tot == 0:
        return np.zeros(0, dtype=np.int64)
    off = np.repeat(start - np.concatenate(([0], np.cumsum(count)[:-1])), count)
    return (np.arange(tot, dtype=np.int64) + off).astype(np.int64)


#: the kernels' ``active`` and ``qdd_in`` when no joint's acceleration is given
NO_ACTIVE = None
NO_QDD = np.zeros(0)
NO_BODIES = np.zeros(0, dtype=np.int64)

#: the loop pieces of a part without loops (``PartKernel.loop_pieces``)
NO_LOOPS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, 6)))


class Workspace:
    """The pickling of a part: the attributes named in ``_WORKSPACE`` are its workspace, allocated
    by ``_allocate`` where the part runs and never pickled, so that a part sent to an MPI rank or
    a Dask worker carries its slice of the model only (a fraction of its workspace's size)."""

    _WORKSPACE = ()

    def _allocate(self):
        raise NotImplementedError

    def __getstate__(self):
        return {k: v for k, v in vars(self).items() if k not in self._WORKSPACE}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._allocate()

    def _allocate_boundary(self, H):
        """The boundary outputs of a part with H handles: the handle maps (TE, Tr, vrel) and the
        relation (M, m0, Kt, Psi, Lam, beta) the root takes."""
        self.TE = np.zeros((H, 3, 3))
        self.Tr = np.zeros((H, 3))
        self.vrel = np.zeros((H, 6))
        self.M = np.zeros((6, 6))
        self.m0 = np.zeros(6)
        self.Kt = np.zeros((H, 6, 6))
        self.Psi = np.zeros((H, 6, 6))
        self.Lam = np.zeros((H, H, 6, 6))
        self.beta = np.zeros((H, 6))

    @property
    def nbytes(self):
        """Bytes of the part's arrays, its workspace included."""
        return sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))


class PartKernel(Workspace):
    """One part: its slice of the model, its boundary layout, and its workspace.

    Built from a model and the part's bodies (increasing global ids, its root first) and handle
    bodies (global ids); after construction it no longer refers to the model.  ``poses``: the
    velocity step reports the handles' true transforms T_h even for a part hanging from the base
    (which otherwise reports the identity, its v_in being zero): the root needs them to place the
    ends of the loops it solves (``partree.parallel.root.RootLoops``).
    """

    def __init__(self, model, bodies, handles, part_id=-1, early_kinematics=False, poses=False):
        refuse(model, "the parallel engine (partree.parallel: its parts compute rigid bodies only)")
        b = np.ascontiguousarray(bodies, dtype=np.int64)
        self.part_id = int(part_id)
        self.poses = bool(poses)
        self.bodies = b
        m = b.size
        self.m = m
        self.parent = local_parents(model, b, part_id)
        self.top = bool(model.parent[b[0]] < 0)
        for name in ("jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com"):
            setattr(self, name, np.ascontiguousarray(getattr(model, name)[b]))
        nq_j, nv_j = model.nq_j[b], model.nv_j[b]
        self.idx_q = np.concatenate(([0], np.cumsum(nq_j)[:-1])).astype(np.int64)
        self.idx_v = np.concatenate(([0], np.cumsum(nv_j)[:-1])).astype(np.int64)
        self.nq = int(nq_j.sum())
        self.nv = int(nv_j.sum())
        self.qsel = index_ranges(model.idx_q[b], nq_j)
        self.vsel = index_ranges(model.idx_v[b], nv_j)
        # the same selections as slices where possible (a part is usually a contiguous range)
        self.qix, self.vix, self.bix = fast_index(self.qsel), fast_index(self.vsel), fast_index(b)
        hs = np.ascontiguousarray(np.unique(np.asarray(handles, dtype=np.int64)))
        hl = np.searchsorted(b, hs)
        if hs.size and (np.any(hl >= m) or np.any(b[np.minimum(hl, m - 1)] != hs)):
            raise PartreeInputError(f"part {part_id}: a handle is not a body of the part")
        self.handles_global = hs
        self.handles = hl.astype(np.int64)
        self.H = hs.size
        self.path_ptr, self.path_idx, self.slot, self.ns, self.cp = _paths(self.parent, self.handles)
        self.pbod = np.flatnonzero(self.slot >= 0).astype(np.int64)
        # joint kinematics done in the velocity step: the path bodies only (fused into pass 1
        # for the others: least memory traffic, best in one process), or every body
        # (``early_kinematics``: balances the velocity round when parts run concurrently)
        self.early_kinematics = bool(early_kinematics)
        if early_kinematics:
            self.kbod = np.arange(m, dtype=np.int64)
            self.kslot = self.kbod.copy()
        else:
            self.kbod = self.pbod
            self.kslot = self.slot
        pv = model.nv_j[b][self.path_idx] if self.path_idx.size else np.zeros(0, dtype=np.int64)
        self.yptr = np.concatenate(([0], np.cumsum(pv))).astype(np.int64)
        self.ylo = self.path_ptr[:-1].copy()
        self.acc_first, self.acc_has = _accumulation_flags(self.parent)
        self._allocate()

    #: the workspace: allocated where the part runs, never pickled (a part sent to an MPI rank or
    #: a Dask worker carries its slice of the model only, a fraction of its workspace's size)
    _WORKSPACE = ("E", "r", "S", "v", "c", "IA", "pA", "a", "U", "Dinv", "u", "qdd", "G", "cJb", "vJb", "TEb",
                  "Trb", "reach", "vrb", "Yst", "_q", "_qd", "_fext", "TE", "Tr", "vrel", "M", "m0", "Kt", "Psi", "Lam",
                  "beta", "_tau", "_F", "_has_f", "_g", "_wrench_ws", "_reduced", "_momentum_ws", "_act", "_qdd_in",
                  "tau_out")

    def _allocate(self):
        m, nv, H, ns = self.m, self.nv, self.H, self.ns
        self.E = np.zeros((m, 3, 3))
        self.r = np.zeros((m, 3))
        self.S = np.zeros((nv, 6))
        self.v = np.zeros((m, 6))
        self.c = np.zeros((m, 6))
        # articulated inertias: only the sums over the children not numbered right after their parent
        # (see reduce_kernel; np.zeros leaves the pages of a chain's untouched array unmapped)
        self.IA = np.zeros((m, 6, 6))
        self.pA = np.zeros((m, 6))
        self.a = np.zeros((m, 6))
        self.U = np.zeros((nv, 6))
        self.Dinv = np.zeros((nv, 6))
        self.u = np.zeros(nv)
        self.qdd = np.zeros(nv)
        # path bodies only (by slot); G (per path position) only for the cross terms of H > 1
        self.G = np.zeros((self.path_idx.size if H > 1 else 0, 6, 6))
        self.cJb = np.zeros((self.kbod.size, 6))
        self.vJb = np.zeros((self.kbod.size, 6))
        self.TEb = np.zeros((ns, 3, 3))
        self.Trb = np.zeros((ns, 3))
        self.reach = np.zeros(1, dtype=np.int64)    # the path's S~ components in frame 0 (kernels._frame0_bits)
        self.vrb = np.zeros((0 if self._base_velocities else ns, 6))     # (a part at the base: v, see velocity)
        self.Yst = np.zeros((int(self.yptr[-1]), 6))
        self._reduced = False           # a reduction not yet used by solve (it serves one)
        self._q = np.zeros(self.nq)
        self._qd = np.zeros(nv)
        self._fext = np.zeros((1, 6))
        self._allocate_boundary(H)
        self._tau = np.zeros(nv)
        self._act = NO_BODIES           # the active joints of the last reduction (hybrid dynamics)
        self._qdd_in = NO_QDD
        self.tau_out = np.zeros(nv)     # the joint forces after a hybrid solve
        self._F, self._has_f = self._fext, False
        self._g = np.zeros((H, 6))
        self._wrench_ws = None         # constraint-force arrays, allocated on first use
        self._momentum_ws = None       # the momentum form's arrays, allocated on first use

    @property
    def _base_velocities(self):
        """A part hanging from the base without ``poses``: its velocity step writes the path
        bodies' velocities into v and leaves the path transforms to pass 1."""
        return self.top and not getattr(self, "poses", False)

    # ---------------------------------------------------------------- the three steps
    def velocity(self, q, qd):
        """Step (a). q, qd: this part's own coordinates (q[qsel], qd[vsel]).
        Returns (TE, Tr, vrel) for its handles (views of the workspace).  Only the bodies on
        handle paths are visited here; the others' joint kinematics is fused into ``reduce``.  A
        part hanging from the base (v_in = 0) writes its path bodies' velocities straight into v."""
        self._q = np.ascontiguousarray(q, dtype=np.float64)
        self._qd = np.ascontiguousarray(qd, dtype=np.float64)
        if self.kbod.size:
            K.velocity_kernel(self.parent, self.jtype, self.axis, self.axis2, self.E_tree, self.r_tree, self.idx_q,
                              self.idx_v, self._q, self._qd, self.kbod, self.kslot, self.slot, self.handles,
                              not self._base_velocities, self.E, self.r,
                              self.S, self.cJb, self.vJb, self.TEb, self.Trb,
                              self.v if self._base_velocities else self.vrb, self.TE, self.Tr, self.vrel, self.reach)
        return self.TE, self.Tr, self.vrel

    def _take_inputs(self, tau, f_ext):
        """Keep a reduction's joint forces and external wrenches (checked) for the later steps;
        returns (F, has_f) as the kernels take them."""
        self._tau = np.ascontiguousarray(tau, dtype=np.float64)
        F, has_f = self._checked_forces(f_ext)
        self._F, self._has_f = F, has_f
        return F, has_f

    def _checked_forces(self, f_ext):
        """(F, has_f) as the kernels take the part's external wrenches (m, 6), or None."""
        if f_ext is None:
            return self._fext, False
        F = np.ascontiguousarray(f_ext, dtype=np.float64)
        if F.shape != (self.m, 6):
            raise PartreeInputError(f"part {self.part_id}: f_ext slice has shape {F.shape}, expected ({self.m}, 6)")
        return F, True

    def reduce(self, v_in, tau, f_ext=None, rows="dynamics", active=None, qdd=None):
        """Step (b). v_in: the incoming velocity; tau: this part's own joint forces; f_ext: this
        part's external body wrenches (m, 6) in body coordinates, or None.  ``rows``: 'dynamics'
        (forward dynamics), or for the loops' corrections 'position' / 'velocity': no velocity
        products nor external forces (the solve is then M x = tau with the loops' rows
        J x = -Phi or J x = -J qd, see :mod:`partree.parallel.correction`).

        Hybrid dynamics: ``active`` (m,) bool flags the part's joints whose acceleration is given,
        ``qdd`` (nv,) (read at those joints only); their entries of ``tau`` are not read.  The
        boundary relation keeps its form (an active joint hands its parent its full articulated
        inertia, see ``kernels.reduce_kernel``), so the root and the messages are unchanged; the
        ``solve`` that follows also forms the active joints' forces (:attr:`tau_out`).
        Returns (M, m0, Kt, Psi, Lam, beta)."""
        bias = _bias(rows)
        act, qdd_in, tau = self._take_active(active, qdd, tau, rows)
        F, has_f = self._take_inputs(tau, f_ext)
        # a part hanging from the base left its path transforms out of the velocity step (its v_in
        # is zero): pass 1 forms them, for the walk
        form_T = self._base_velocities and self.H > 0
        bad = K.reduce_kernel(self.parent, self.jtype, self.axis, self.axis2, self.E_tree, self.r_tree, self.idx_q,
                              self.idx_v, self._q, self._qd, self.mass, self.com, self.I_com, self._tau, F, has_f,
                              np.ascontiguousarray(v_in, dtype=np.float64), self.path_ptr, self.path_idx, self.cp,
                              self.kslot, self.slot, self.cJb, self.vJb, form_T, self.TEb, self.Trb, self.reach,
                              self.yptr,
                              self.Yst, self.ylo, self.acc_first, self.acc_has,
                              self.E, self.r, self.S, self.v, self.c, self.IA, self.pA, self.U,
                              self.Dinv, self.u, self.G, self.M, self.m0, self.Kt, self.Psi, self.Lam, self.beta,
                              act, qdd_in, bias)
        if bad >= 0:
            gb = int(self.bodies[bad])
            raise PartreeInputError(f"body {gb}: its subtree has a singular inertia along the joint's motion "
                                    f"(massless subtree?); forward dynamics is undefined"
                                    + ("" if act is None else " (making the joint active is one way out)"))
        self._reduced = True
        return self.M, self.m0, self.Kt, self.Psi, self.Lam, self.beta

    def _take_active(self, active, qdd, tau, rows):
        """The kernels' ``active`` and ``qdd_in`` for a reduction (None and empty: no joint active),
        with ``tau``'s entries of the active joints set to zero (a copy; see ``reduce``).  Keeps
        the active bodies (``_act``, empty for none) and the given accelerations for ``solve``."""
        self._act = NO_BODIES
        if active is None:
            return NO_ACTIVE, NO_QDD, tau
        mask = np.ascontiguousarray(active, dtype=np.bool_)
        if mask.shape != (self.m,):
            raise PartreeInputError(f"part {self.part_id}: active has shape {mask.shape}, expected ({self.m},), one "
                                    f"flag per joint of the part")
        act = np.flatnonzero(mask).astype(np.int64)
        if act.size == 0:
            return NO_ACTIVE, NO_QDD, tau
        if rows != "dynamics":
            raise PartreeInputError(f"part {self.part_id}: given accelerations (active joints) are for forward "
                                    f"dynamics, not for the loops' corrections (rows={rows!r})")
        qdd_in = np.ascontiguousarray(qdd, dtype=np.float64)
        if qdd_in.shape != (self.nv,):
            raise PartreeInputError(f"part {self.part_id}: qdd has shape {qdd_in.shape}, expected ({self.nv},)")
        tau = np.where(self.dof_flags(mask), 0.0, np.asarray(tau, dtype=np.float64))
        self._act, self._qdd_in = act, qdd_in
        return mask, qdd_in, tau

    def _take_solution(self, g):
        """Check and keep the root's handle wrenches g for a back-substitution, which uses up the
        reduction."""
        if not self._reduced:
            raise PartreeInputError(f"part {self.part_id}: solve() needs a reduce() first (each reduction serves "
                                    f"one back-substitution)")
        g = np.ascontiguousarray(g, dtype=np.float64)
        if g.size != 6 * self.H:
            raise PartreeInputError(f"part {self.part_id}: g holds {g.size} values; its {self.H} handles need "
                                    f"({self.H}, 6) wrenches")
        self._g = g.reshape(self.H, 6)
        self._reduced = False
        return self._g

    def solve(self, a_in, g):
        """Back-substitution with the incoming acceleration a_in and the handle wrenches g (H, 6).
        Returns this part's qdd (a view of the workspace).  Each ``reduce`` serves one ``solve``
        (the back-substitution works in the reduction's arrays); a second ``solve`` needs a new
        ``reduce`` first and is refused otherwise.  After a reduction with active joints the qdd
        holds their given accelerations and :attr:`tau_out` every joint force of the part (the
        given ones of the passive joints, the computed ones of the active joints)."""
        self._take_solution(g)
        K.solve_kernel(self.parent, self.idx_v, np.ascontiguousarray(a_in, dtype=np.float64), self._g,
                       self.path_ptr, self.path_idx, self.yptr, self.Yst, self.ylo, self.E, self.r, self.S, self.c,
                       self.U, self.Dinv, self.u, self.a, self.qdd)
        if self._act.size:
            np.copyto(self.tau_out, self._tau)
            K.hybrid_finish(self.idx_v, self.nv, self._act, self._qdd_in, self.U, self.a, self.u, self.qdd,
                            self.tau_out)
            self._tau = self.tau_out          # the joint forces of the motion (``wrenches``' F_T)
        return self.qdd

    def dof_flags(self, mask):
        """The (nv,) flags of the part's velocity coordinates from per-joint flags (m,)."""
        return np.repeat(np.asarray(mask, dtype=np.bool_), np.diff(np.append(self.idx_v, self.nv)))

    @property
    def hybrid(self):
        """Whether the last reduction had active joints (then ``solve`` fills :attr:`tau_out`)."""
        return bool(self._act.size)

    @property
    def joint_forces(self):
        """After ``solve``: the part's joint forces (nv,), those given to ``reduce`` with, after a
        reduction with active joints, their computed forces in place (:attr:`tau_out`)."""
        return self._tau

    def wrenches(self):
        """Step (d), for the constraint forces, after ``solve``: every joint wrench of the part
        (the wrench its parent transmits to body i across joint i, [n; f] in body i's frame) and
        its split into the constraint force F_S = W^T F and the drive force F_T, as ``partree.cfa``
        defines them.  The child parts' wrenches enter at the handles through the g of ``solve``;
        no further communication is needed.  Returns (F (m, 6), FS (ns,), FT (nv,)), views of the
        workspace, FS in the part's joint order (``constraint_index`` places them in the model's)."""
        from ..algorithms.cfa import constraint_layout
        from ..algorithms.cfa.bases import rows_kernel

        ws = self._wrench_ws
        if ws is None:
            ns_j, idx_s = constraint_layout(np.diff(np.append(self.idx_v, self.nv)))
            ws = self._wrench_ws = {"idx_s": idx_s, "Wt": np.zeros((int(ns_j.sum()), 6)), "rows_ready": False,
                                    "F": np.zeros((self.m, 6)), "FS": np.zeros(int(ns_j.sum())),
                                    "FT": np.zeros(self.nv)}
        bad = rows_kernel(self.jtype, self.idx_v, ws["idx_s"], self.S, ws["rows_ready"], ws["Wt"])
        if bad >= 0:
            ws["rows_ready"] = False
            raise PartreeInputError(f"body {int(self.bodies[bad])}: universal joint with parallel axes at this "
                                    f"configuration; its constraint basis is undefined")
        ws["rows_ready"] = True
        K.wrench_kernel(self.parent, self.idx_v, ws["idx_s"], self.mass, self.com, self.I_com, self.E, self.r,
                        self.v, self.a, self.S, self._tau, ws["Wt"], self._F, self._has_f, self.handles, self._g,
                        ws["F"], ws["FS"], ws["FT"])
        return ws["F"], ws["FS"], ws["FT"]

    # ---------------------------------------------------------------- the momentum form
    def momentum_forces(self, g_in, f_ext=None):
        """The momentum form (seed 001), after a ``reduce`` at rest (qd = 0, the momenta p as
        joint forces, ``rows='position'``: no velocity products, no gravity at the root): every
        body's wrench of gravity and external forces F_i = I_i ag_i + f_ext,i, ag the gravity
        field (``g_in``: its linear part (3,) in frame 0, from the root), kept for
        :meth:`momentum_rate`.  Returns the part's total moved to frame 0 (6,), which the root
        adds up the parts tree (``partree.parallel.root.subtree_totals``)."""
        ws = self._momentum_ws
        if ws is None:
            ws = self._momentum_ws = {k: np.zeros((self.m, 6)) for k in ("ag", "F", "tmp", "mu")}
            ws["up"] = np.zeros(6)
            ws["pdot"] = np.zeros(self.nv)
            ws["zero"] = np.zeros(self.nv)
        F, has_f = self._checked_forces(f_ext)
        K.momentum_forces_kernel(self.parent, self.mass, self.com, self.I_com,
                                 np.ascontiguousarray(g_in, dtype=np.float64), self.E, self.r, F, has_f, ws["ag"],
                                 ws["F"], ws["tmp"], ws["up"])
        return ws["up"]

    def momentum_rate(self, Fh):
        """After :meth:`momentum_forces` and the ``solve`` of the same evaluation (its qdd is the
        velocity v = M^-1 p, its body accelerations the body velocities, its handle wrenches g
        the child parts' subtree momenta): dp/dt of the part's joints without the joint forces
        (seed 001's eq. 7, which adds them), ``Fh`` (H, 6) the child parts' totals of gravity and
        external wrenches at the handles.  Returns (v, pdot), views of the workspace."""
        ws = self._momentum_ws
        if ws is None:
            raise RuntimeError("momentum_rate() needs momentum_forces() first")
        Fh = np.ascontiguousarray(Fh, dtype=np.float64).reshape(self.H, 6)
        K.momentum_rate_kernel(self.parent, self.jtype, self.idx_v, self.mass, self.com, self.I_com, self.E, self.r,
                               self.S, self.a, self.qdd, self.handles, self._g, Fh, ws["F"], ws["mu"], ws["zero"],
                               ws["pdot"])
        return self.qdd, ws["pdot"]

    def loop_violation(self):
        """max abs(Phi) of the loops the part holds at the last ``reduce`` (0 without loops)."""
        return 0.0

    def loop_pieces(self):
        """The part's closed loops after ``solve``: (global loop numbers, their rows, the
        multipliers, the cut-joint wrenches (Lp, 6)); empty for a part without loops (see
        :class:`partree.parallel.loop_part.LoopPartKernel`)."""
        return NO_LOOPS

    @property
    def constraint_rows(self):
        """W_j^T of the part's joints stacked (as ``CFAResult.constraint_rows``), at the
        configuration of the last ``wrenches`` call."""
        if self._wrench_ws is None:
            raise RuntimeError("no constraint forces computed yet: call wrenches() after solve()")
        return self._wrench_ws["Wt"]


#: what a reduction solves for: forward dynamics, or a loop correction's step (see ``PartKernel.reduce``)
ROWS = ("dynamics", "position", "velocity")


def _bias(rows):
    """Whether a reduction for ``rows`` keeps the velocity products and external forces."""
    if rows not in ROWS:
        raise PartreeInputError(f"rows must be one of {', '.join(ROWS)}; got {rows!r}")
    return rows == "dynamics"


def loop_rhs(terms, rows):
    """The right-hand side of the loops' rows J x = rhs for ``rows``: gamma (dynamics), -Phi
    (position step) or -J qd (velocity step)."""
    if rows == "dynamics":
        return terms.gamma
    return -(terms.phi if rows == "position" else terms.velocity)


def _accumulation_flags(parent):
    """For pass 2 of ``reduce_kernel``: ``first[i]``: body i is the first child of its parent (in
    the reverse order of pass 2) among those not numbered right after it, and writes IA[p] rather
    than adding to it; ``has[p]``: some child of p accumulates in IA[p]."""
    m = parent.size
    i = np.arange(m)
    acc = np.flatnonzero((parent >= 0) & (parent != i - 1))
    last = np.full(m, -1, dtype=np.int64)
    np.maximum.at(last, parent[acc], acc)
    first = np.zeros(m, dtype=np.bool_)
    first[last[last >= 0]] = True
    return first, last >= 0


#: a rank's velocity step (its parts' handle paths) longer than this fraction of the bodies per rank
#: makes the other ranks wait for their v_in: they then do their joint kinematics in that step
EARLY_KINEMATICS_FRACTION = 0.02


def early_kinematics_wanted(model, pt, owner):
    """Whether the parts should do all their joint kinematics in the velocity step (see
    ``PartKernel``): worth it when some rank's velocity step, which walks its parts' handle paths,
    is long (a chain split across ranks), so that the others would wait for their incoming
    velocities; otherwise (short paths: trees) fusing the kinematics into pass 1 is cheaper."""
    owner = np.asarray(owner, dtype=np.int64)
    nranks = int(owner.max()) + 1
    if nranks < 2:
        return False
    on = on_path_mask(np.ascontiguousarray(model.parent, dtype=np.int64), pt)
    per_rank = np.bincount(owner[pt.part_of[on]], minlength=nranks)
    return bool(per_rank.max() > EARLY_KINEMATICS_FRACTION * pt.n / nranks)


def build_part(model, pt, k, early_kinematics=False, poses=False):
    """Part k of the partition ``pt``: a :class:`PartKernel`, or where loops of the model that
    the part holds whole have an end in it a :class:`partree.parallel.loop_part.LoopPartKernel`
    (the loops solved inside).  The ends of loops left to the root (``pt.loop_ends``, see
    ``partree.parallel.partition.place_loops``) are among its handles.  ``poses``: the parts
    hanging from the base report their handles' transforms too (``PartKernel``), as the momentum
    form needs (the root composes the gravity field down the parts tree); parts are built so
    anyway where loops are left to the root.  A model with flexible bodies gets
    :class:`partree.parallel.flexible_part.FlexiblePartKernel` parts."""
    bodies = pt.bodies(k)
    if getattr(model, "flexible", None) is not None:
        from .flexible_part import FlexiblePartKernel, handle_frames
        return FlexiblePartKernel(model, bodies, pt.handles(k), handle_frames(model, pt, k), part_id=k,
                                  early_kinematics=early_kinematics, poses=poses)
    loops = getattr(model, "loops", ())
    at_root = pt.loop_ends is not None and pt.loop_ends.size > 0
    poses = bool(poses) or at_root
    if len(loops):
        root = root_loop_mask(model, pt) if at_root else np.zeros(len(loops), dtype=bool)
        on = np.zeros(model.n, dtype=bool)
        on[bodies] = True
        ends = np.concatenate((loops.body_a[~root], loops.body_b[~root]))
        if np.any(on[ends[ends >= 0]]):
            from .loop_part import LoopPartKernel
            return LoopPartKernel(model, bodies, pt.handles(k), part_id=k, early_kinematics=early_kinematics,
                                  root_loops=root, poses=poses)
    return PartKernel(model, bodies, pt.handles(k), part_id=k, early_kinematics=early_kinematics, poses=poses)


def check_momentum_parts(nloops, parts):
    """Refuse the momentum form on an engine that cannot evaluate it: a model with loops (the
    constrained equations in momenta are not built) or parts built without ``poses``."""
    if nloops:
        raise PartreeInputError(f"the model has {nloops} loops: the momentum form is built for trees only (the "
                                f"constrained equations in generalized momenta are not); use the velocity form")
    for pk in parts:
        if pk.top and pk.H and not pk.poses:
            raise PartreeInputError("this engine's parts were built without poses=True, which the momentum form "
                                    "needs (the gravity field is composed down the parts tree)")


def hybrid_arguments(model, active, qdd_active, tau):
    """The engine's hybrid-dynamics inputs, checked as ``partree.hybrid_dynamics`` checks them:
    (mask (n,) bool, tau, qdd), ``active`` a boolean mask over the joints or joint names
    (``partree.algorithms.hybrid_dynamics.active_mask``), ``tau`` and ``qdd_active`` (nv,)
    vectors of which only the entries that are read must be finite (tau's of the passive joints,
    qdd's of the active ones; the others are set to zero); for a model with flexible bodies the
    full (nv + n_modal,) vectors, the modes passive.  A model with loops is refused: the
    engine's hybrid dynamics is for trees, as ``partree.hybrid_dynamics`` is."""
    from ..algorithms.hybrid_dynamics import active_mask, given_entries

    if getattr(model, "flexible", None) is not None:
        from .flexible_part import flexible_hybrid_arguments
        return flexible_hybrid_arguments(model, active, qdd_active, tau)
    mask = active_mask(model, active)
    if len(getattr(model, "loops", ())):
        raise PartreeInputError(f"model {model.name!r} has {len(model.loops)} loops: hybrid dynamics (active joints) "
                                f"is for trees")
    dof_active = np.repeat(mask, model.nv_j)
    tau = given_entries(model, tau, "tau", dof_active)
    qdd = given_entries(model, qdd_active, "qdd_active", ~dof_active)
    return mask, tau, qdd


def gravity_a0(gravity):
    a0 = np.zeros(6)
    a0[3:] = -np.asarray(gravity, dtype=float)
    return a0


class PartLayout:
    """Where a part's pieces go in the model's arrays: its bodies (``bix``), its joints' rows of
    F_S (``six``), its velocities (``vix``: with flexible bodies its joints' then its modes') and
    its joints' velocities (``jvix``, where F_T goes); slices where they are one run."""

    def __init__(self, model, pk):
        self.bix, self.vix = pk.bix, pk.vix
        nvj = getattr(pk, "nv_joints", None)
        self.jvix = pk.vix if nvj is None else fast_index(pk.vsel[:nvj])
        self.six = constraint_index(model, pk.bodies)


def assemble_constraint_forces(model, q, qdd, layout, pieces, method="parallel"):
    """A ``CFAResult`` from the parts' (F, FS, FT) (``PartKernel.wrenches``) placed by their
    ``PartLayout``; its constraint rows are formed from the model when first asked for."""
    from ..algorithms.cfa import CFAResult, constraint_layout

    ns_j, idx_s = constraint_layout(model.nv_j)
    F = np.empty((model.n, 6))
    FS = np.empty(int(ns_j.sum()))
    FT = np.empty(model.nv)
    for lay, (Fk, FSk, FTk) in zip(layout, pieces):
        F[lay.bix] = Fk
        FS[lay.six] = FSk
        FT[lay.jvix] = FTk
    return CFAResult(model, method, qdd, FS, FT, F, np.array(q, dtype=np.float64), idx_s, ns_j, [])


def attach_loop_forces(res, nloops, pieces):
    """Set ``res.loop_multipliers`` (R,) and ``res.loop_force`` (L, 6) of a result of the engine
    from the parts' :meth:`PartKernel.loop_pieces` (every loop lies in one part), as
    ``partree.constrained_dynamics`` reports them: the multipliers in the order of the model's
    loop rows, each loop's cut-joint wrench [n; f] in its frame A."""
    nrows = np.zeros(nloops, dtype=np.int64)
    for ids, nr, _, _ in pieces:
        nrows[ids] = nr
    row0 = np.concatenate(([0], np.cumsum(nrows)[:-1])).astype(np.int64)
    lam = np.zeros(int(nrows.sum()))
    force = np.zeros((nloops, 6))
    for ids, nr, lp, fp in pieces:
        o = 0
        for l, r in zip(ids, nr):
            lam[row0[l]:row0[l] + r] = lp[o:o + r]
            o += r
        force[ids] = fp
    res.loop_multipliers = lam
    res.loop_force = force
    return res


def constraint_index(model, bodies):
    """Rows of the bodies' joints in the model's F_S (joint j's block starts at 6 j - idx_v[j]):
    a slice where they are one run."""
    b = np.asarray(bodies, dtype=np.int64)
    return fast_index(index_ranges(6 * b - model.idx_v[b], 6 - model.nv_j[b]))
