"""Partition a tree into connected parts balanced by work (pure; no MPI, no Dask).

A part is a connected set of bodies with one root body (the body of the part nearest the base).
Chains are split into contiguous segments; subtrees are kept whole when they fit the target.

Algorithm: greedy bottom-up cutting.  Going backward over the regular numbering, every body
accumulates its own weight plus the uncut weight of its children; when that exceeds the target
``t`` the heaviest children are cut off (each becomes a part root) until it fits, and a body whose
accumulated weight reaches ``t`` is itself cut.  Model roots are always part roots.  ``t`` is
found by bisection (smallest t giving at most nparts parts); then a fix-up splits the heaviest
part (at the body whose in-part subtree weight is closest to half) or merges the lightest
part into its parent part until there are exactly ``nparts`` parts.

Parts are numbered by their root body, so the parts tree is itself in regular numbering
(``part_parent[k] < k``), and the bodies of each part are listed in increasing global number
(regular numbering inside the part, its root first).

Units: repeated units (a scissor unit, a module of a deployable mast) can be kept whole.  Given
per-body unit labels (``units=``, or a model's ``units`` attribute), a part root may only be a
body whose parent lies outside its unit (or a model root), so no unit is ever split across parts:
the greedy pass never cuts a child inside a unit and cuts a body on reaching the target only if it
may be a part root; the fix-up split and ``partition_for_ranks``' extra cuts likewise pick only
such bodies.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..algorithms.constrained_dynamics import LoopTopology
from ..model import unit_heads
from ..errors import PartreeInputError


#: the cost of a flexible body (``partree.flexible``) relative to a rigid one with the same joint:
#: its (6 + m) x (6 + m) mass matrix and articulated inertia
FLEXIBLE_WEIGHT = 10.0


def default_weights(model):
    """Per-body cost of one ABA evaluation, roughly: a constant plus a term per joint DOF, times
    ``FLEXIBLE_WEIGHT`` for a flexible body."""
    w = 2.0 + np.asarray(model.nv_j, dtype=np.float64)
    fl = getattr(model, "flexible", None)
    if fl is not None:
        w = np.where(np.asarray(fl.nmodes) > 0, FLEXIBLE_WEIGHT * w, w)
    return w


@dataclass
class Partition:
    """A tree cut into P = ``nparts`` connected parts: the result of :func:`partition`.

    Attributes
    ----------
    n : int
        Number of bodies of the model.
    part_of : ndarray, shape (n,)
        Part of every body.
    ptr, idx : ndarray
        CSR body lists: part k's bodies are ``idx[ptr[k]:ptr[k + 1]]``, increasing.
    roots : ndarray, shape (P,)
        Root body of each part.
    part_parent : ndarray, shape (P,)
        Parent part (-1 for a part whose root is a model root).
    handle : ndarray, shape (P,)
        Body of the parent part the part hangs from (``parent[root]``; -1 at the top).
    weights, sizes : ndarray, shape (P,)
        Work of each part (sum of body weights) and its number of bodies.
    costs : ndarray or None
        Work including the handle-path work (``path_weight`` > 0).
    owner : ndarray or None
        Rank (worker) of every part when the partition was made for a number of ranks
        (:func:`partition_for_ranks`).
    """
    n: int
    nparts: int
    part_of: np.ndarray
    ptr: np.ndarray
    idx: np.ndarray
    roots: np.ndarray
    part_parent: np.ndarray
    handle: np.ndarray
    weights: np.ndarray
    sizes: np.ndarray
    target: float = 0.0
    costs: np.ndarray = field(default=None, repr=False)   # per-part cost incl. path work (path_weight > 0)
    owner: np.ndarray = field(default=None, repr=False)   # rank of every part (``partition_for_ranks``)
    nranks: int = 0                                        # the number of ranks ``owner`` is for
    loop_ends: np.ndarray = field(default=None, repr=False)  # ends of loops solved at the root (``place_loops``)
    _w: np.ndarray = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- per part
    def bodies(self, k):
        """Global ids of part k's bodies, increasing (its root first)."""
        return self.idx[self.ptr[k]:self.ptr[k + 1]]

    def child_parts(self, k=None):
        """Child parts of part k (array), or the CSR pair (ptr, idx) for all parts."""
        if "children" not in self._cache:
            pp = self.part_parent
            order = np.argsort(pp, kind="stable")
            cnt = np.bincount(pp[pp >= 0], minlength=self.nparts)
            cptr = np.zeros(self.nparts + 1, dtype=np.int64)
            np.cumsum(cnt, out=cptr[1:])
            self._cache["children"] = (cptr, order[np.count_nonzero(pp < 0):])
        cptr, cidx = self._cache["children"]
        return (cptr, cidx) if k is None else cidx[cptr[k]:cptr[k + 1]]

    def handles(self, k):
        """Distinct bodies of part k where child parts attach or a loop solved at the root ends
        (``loop_ends``, see :func:`place_loops`): global ids, increasing."""
        h = self.handle[self.child_parts(k)]
        if self.loop_ends is not None and self.loop_ends.size:
            e = self.loop_ends
            h = np.concatenate((h, e[self.part_of[e] == k]))
        return np.unique(h)

    def boundary_joints(self, k):
        """Joints (named by their child body) crossing part k's boundary: its root joint first
        (absent for a part hanging from the fixed base), then the root joints of its children."""
        own = [] if self.part_parent[k] < 0 else [int(self.roots[k])]
        return np.array(own + sorted(int(r) for r in self.roots[self.child_parts(k)]), dtype=np.int64)

    def local_parent(self, k, parent):
        """Parent array of part k in its own numbering (its root gets -1)."""
        b = self.bodies(k)
        par = parent[b]
        loc = np.searchsorted(b, par)
        inside = (par >= 0) & (loc < b.size)
        inside[inside] = b[loc[inside]] == par[inside]
        return np.where(inside, loc, -1).astype(np.int64)

    # ---------------------------------------------------------------- quality
    @property
    def imbalance(self):
        """max / mean part weight (1 is perfect)."""
        return float(self.weights.max() / self.weights.mean())

    @property
    def depth(self):
        """Number of parts on the longest root-to-leaf chain of the parts tree."""
        d = np.ones(self.nparts, dtype=np.int64)
        for k in range(self.nparts):
            if self.part_parent[k] >= 0:
                d[k] = d[self.part_parent[k]] + 1
        return int(d.max())

    @property
    def critical_work(self):
        """Largest total weight along a root-to-leaf chain of parts (body-work terms)."""
        w = self.weights.astype(float).copy()
        for k in range(self.nparts):
            if self.part_parent[k] >= 0:
                w[k] += w[self.part_parent[k]]
        return float(w.max())

    def rank_loads(self, nranks=None):
        """Work (``costs`` where set, else ``weights``) per rank under ``owner`` (or, without an
        owner or for another number of ranks, under :func:`assign_parts`)."""
        c = self.costs if self.costs is not None else self.weights
        own = self.owner_for(nranks)
        return np.bincount(own, weights=c, minlength=self.nranks if nranks is None else int(nranks))

    def owner_for(self, nranks=None):
        """Rank of every part: ``owner`` when it was made for ``nranks`` ranks (or nranks is
        None), else the largest-first assignment of :func:`assign_parts`."""
        if self.owner is not None and (nranks is None or int(nranks) == self.nranks):
            return self.owner
        if nranks is None:
            raise ValueError("this partition was not made for a number of ranks; pass nranks")
        c = self.costs if self.costs is not None else self.weights
        return assign_parts(c, nranks, handles=self._nhandles())

    def _nhandles(self):
        h = self.handle[self.handle >= 0]
        if self.loop_ends is not None and self.loop_ends.size:
            h = np.concatenate((h, self.loop_ends))
        nh = np.zeros(self.nparts, dtype=np.int64)
        if h.size:
            u = np.unique(h)
            np.add.at(nh, self.part_of[u], 1)
        return nh

    def summary(self):
        out = {"nparts": self.nparts, "sizes": self.sizes.tolist(), "weights": self.weights.tolist(),
               "imbalance": self.imbalance, "depth": self.depth, "critical_work": self.critical_work,
               "max_weight": float(self.weights.max())}
        if self.owner is not None:
            loads = self.rank_loads()
            out["owner"] = self.owner.tolist()
            out["rank_imbalance"] = float(loads.max() / loads.mean())
        return out

    def __repr__(self):
        return (f"<Partition: {self.nparts} parts of {self.n} bodies, imbalance {self.imbalance:.3f}, "
                f"depth {self.depth}" + (f", for {self.nranks} ranks>" if self.nranks else ">"))

    def report(self, model, nranks=None):
        """A JSON-ready description: the totals of :meth:`summary` and, per part, its root joint,
        parent part, handle body, size, weight, cost, rank (with ``nranks``) and boundary joints
        (what ``partree partition`` prints)."""
        out = self.summary()
        out.update({"model": model.name, "n": int(model.n), "total_weight": float(self.weights.sum())})
        owner = self.owner_for(nranks) if nranks else None
        if nranks:
            loads = self.rank_loads(nranks)
            out.update({"ranks": int(nranks), "rank_loads": loads.tolist(),
                        "rank_imbalance": float(loads.max() / loads.mean())})
        parts = []
        for k in range(self.nparts):
            r = int(self.roots[k])
            parts.append({"part": k, "root_body": r, "root_joint": model.joint_names[r],
                          "parent_part": int(self.part_parent[k]), "handle_body": int(self.handle[k]),
                          "bodies": int(self.sizes[k]), "weight": float(self.weights[k]),
                          "cost": float(self.costs[k] if self.costs is not None else self.weights[k]),
                          "rank": None if owner is None else int(owner[k]),
                          "boundary_joints": [model.joint_names[int(j)] for j in self.boundary_joints(k)]})
        out["parts"] = parts
        return out

    def check(self, parent):
        """Assert coverage and connectedness (used by tests)."""
        assert self.part_of.shape == (self.n,)
        assert np.array_equal(np.sort(self.idx), np.arange(self.n))
        for k in range(self.nparts):
            b = self.bodies(k)
            assert b[0] == self.roots[k]
            assert np.all(self.part_of[b] == k)
            lp = self.local_parent(k, parent)
            # a part is connected; a top part may hold several trees joined by closed loops
            assert lp[0] == -1 and np.all((lp[1:] >= 0) | (parent[b[1:]] < 0)), f"part {k} is not connected"
            h = self.handle[k]
            assert h == parent[self.roots[k]]
            assert (self.part_parent[k] == -1) == (h < 0)
            if h >= 0:
                assert self.part_of[h] == self.part_parent[k] < k


def unit_labels(model, units=None):
    """(labels, heads) of the units to keep whole, or (None, None) for none.

    ``units``: per-body integer labels (bodies with the same label form one unit), or a list of
    body-index sequences (each one unit; bodies not listed are units of their own), or None for the
    model's own ``units`` attribute (if any), or False to ignore a model's units.  ``heads[i]``:
    body i may be a part root (its parent lies outside its unit, or it is a model root).  A unit
    that is not connected raises ``PartreeInputError`` naming the unit and its bodies."""
    if units is None:
        units = getattr(model, "units", None)
    if units is None or units is False:
        return None, None
    parent = np.ascontiguousarray(model.parent if hasattr(model, "parent") else model, dtype=np.int64)
    n = parent.shape[0]
    if not isinstance(units, np.ndarray) and (len(units) == 0 or np.ndim(units[0]) == 1):   # a list of lists
        units = _labels_from_lists(units, n)
        if units is None:
            return None, None
    return unit_heads(parent, units)


def _labels_from_lists(units, n):
    """Per-body labels from a list of body-index sequences: unit u (its index in the list) gets
    label u, every body not listed a label of its own.  None for an empty list."""
    if len(units) == 0:
        return None
    nu = len(units)
    labels = nu + np.arange(n, dtype=np.int64)
    for u, seq in enumerate(units):
        b = np.asarray(seq)
        if b.size == 0 or not np.issubdtype(b.dtype, np.integer):
            raise PartreeInputError(f"unit {u}: {list(seq)!r} is not a non-empty list of body indices")
        b = b.astype(np.int64)
        out = b[(b < 0) | (b >= n)]
        if out.size:
            raise PartreeInputError(f"unit {u}: {int(out[0])} is not a body (n = {n})")
        sb = np.sort(b)
        again = np.concatenate((b[labels[b] < nu], sb[1:][sb[1:] == sb[:-1]]))
        if again.size:
            raise PartreeInputError(f"unit {u}: body {int(again[0])} is listed twice (a body belongs to one unit)")
        labels[b] = u
    return labels


def unit_spanning_loops(model):
    """Which loops of ``model`` join two different units of its ``units`` labels (bool per loop),
    or None where no loop does.  Such loops are meant to cross part boundaries (the pins between
    neighbouring units of a scissor mast: units are kept whole, so the cut between two units must
    split them): the partitioner does not keep them inside parts, and where they span parts the
    engine solves them at the root (:func:`place_loops`)."""
    loops = getattr(model, "loops", None)
    labels = getattr(model, "units", None)
    if loops is None or not len(loops) or labels is None or not isinstance(labels, np.ndarray):
        return None
    a, b = loops.body_a, loops.body_b
    both = (a >= 0) & (b >= 0)
    span = np.zeros(len(loops), dtype=bool)
    span[both] = labels[a[both]] != labels[b[both]]
    return span if span.any() else None


def loop_cuttable(model):
    """Bodies that may be part roots without splitting a closed loop, or None for all (a model
    without loops, or a parent array).

    A loop is solved where its two paths meet (the lowest common ancestor of its end bodies, or
    the world for a loop to the world or between two trees): no body strictly below that meeting
    point on either path may start a part, so that the loop lies in one part and is eliminated
    there (``partree.parallel.loop_part``).  Trees joined by a loop go into one part hanging from
    the base (:func:`join_looped_trees`).  Loops between two units (:func:`unit_spanning_loops`)
    are left out: they may span parts."""
    loops = getattr(model, "loops", None)
    if loops is None or not len(loops):
        return None
    keep = np.ones(len(loops), dtype=bool)
    span = unit_spanning_loops(model)
    if span is not None:
        keep = ~span
    parent = np.ascontiguousarray(model.parent, dtype=np.int64)
    ok = np.ones(parent.shape[0], dtype=np.bool_)
    _mark_loop_paths(parent, model.depth(), loops.body_a[keep], loops.body_b[keep], ok)
    ok[parent < 0] = True
    return ok


@njit(cache=True)
def _mark_loop_paths(parent, depth, body_a, body_b, ok):
    for l in range(body_a.shape[0]):
        a, b = body_a[l], body_b[l]
        da = depth[a] if a >= 0 else -1
        db = depth[b] if b >= 0 else -1
        while a != b:
            if da >= db:
                ok[a] = False
                a = parent[a]
                da -= 1
            else:
                ok[b] = False
                b = parent[b]
                db -= 1


@njit(cache=True)
def tree_roots(parent):
    """The root of every body's tree (regular numbering: a parent before its children)."""
    top = np.arange(parent.shape[0])
    for i in range(parent.shape[0]):
        if parent[i] >= 0:
            top[i] = top[parent[i]]
    return top


def _tree_groups(model):
    """For a model with loops: the root of the group of trees each tree root belongs to, trees
    being grouped when a loop joins them (the smallest root of the group), or None when no loop
    joins two trees."""
    loops = getattr(model, "loops", None)
    if loops is None or not len(loops):
        return None
    parent = np.ascontiguousarray(model.parent, dtype=np.int64)
    top = tree_roots(parent)
    group = {int(r): int(r) for r in np.flatnonzero(parent < 0)}

    def find(x):
        while group[x] != x:
            group[x] = group[group[x]]
            x = group[x]
        return x

    joined = False
    span = unit_spanning_loops(model)
    for l, (a, b) in enumerate(zip(loops.body_a, loops.body_b)):
        if span is not None and span[l]:
            continue
        if a >= 0 and b >= 0 and top[a] != top[b]:
            ra, rb = find(int(top[a])), find(int(top[b]))
            if ra != rb:
                group[max(ra, rb)] = min(ra, rb)
                joined = True
    if not joined:
        return None
    return {r: find(r) for r in group}


def join_looped_trees(model, pt):
    """``pt`` with the parts of the model's trees that loops join merged into one part hanging
    from the base (the first tree's), so that each such loop lies in one part; ``pt`` itself
    where no loop joins two trees.  Part numbers keep their order (a parent part before its
    children), the merged part taking its first tree's number."""
    groups = _tree_groups(model)
    if groups is None:
        return pt
    target = np.arange(pt.nparts)
    for r, g in groups.items():
        if g != r:
            target[pt.part_of[r]] = pt.part_of[g]
    keep = target == np.arange(pt.nparts)
    new_id = np.cumsum(keep) - 1
    remap = new_id[target]
    part_of = remap[pt.part_of].astype(np.int64)
    k = int(keep.sum())
    sizes = np.bincount(part_of, minlength=k).astype(np.int64)
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    idx = np.argsort(part_of, kind="stable").astype(np.int64)
    roots = pt.roots[keep]
    handle = pt.handle[keep]
    part_parent = np.where(handle >= 0, part_of[np.maximum(handle, 0)], -1).astype(np.int64)
    new = Partition(n=pt.n, nparts=k, part_of=part_of, ptr=ptr, idx=idx, roots=roots, part_parent=part_parent,
                    handle=handle, weights=np.bincount(remap, weights=pt.weights, minlength=k),
                    sizes=sizes, target=pt.target)
    if pt.costs is not None:
        new.costs = np.bincount(remap, weights=pt.costs, minlength=k)
    if pt.owner is not None:
        new.owner = pt.owner[keep]
        new.nranks = pt.nranks
    new._w = pt._w
    return new


def root_loop_mask(model, pt):
    """Which loops of ``model`` the partition ``pt`` leaves to the root (bool per loop): those
    whose two ends lie in different parts, and loops to the world from a part that does not hang
    from the base.  Every other loop lies in one part and is eliminated there."""
    loops = getattr(model, "loops", None)
    if loops is None or not len(loops):
        return np.zeros(0, dtype=bool)
    a, b = loops.body_a, loops.body_b
    pa = np.where(a >= 0, pt.part_of[np.maximum(a, 0)], -1)
    pb = np.where(b >= 0, pt.part_of[np.maximum(b, 0)], -1)
    both = (a >= 0) & (b >= 0)
    world = ~both
    p_one = np.where(a >= 0, pa, pb)
    out = np.zeros(len(loops), dtype=bool)
    out[both] = pa[both] != pb[both]
    out[world] = pt.part_parent[p_one[world]] >= 0
    return out


def place_loops(model, pt):
    """Register on ``pt`` the ends of the loops it leaves to the root (:func:`root_loop_mask`):
    they become handles of their parts (``Partition.loop_ends``), where the root's loop
    multipliers act as wrenches and the parts report their accelerations (see
    ``partree.parallel.root``).  Returns ``pt``."""
    loops = getattr(model, "loops", None)
    ends = np.zeros(0, dtype=np.int64)
    if loops is not None and len(loops):
        m = root_loop_mask(model, pt)
        e = np.concatenate((loops.body_a[m], loops.body_b[m]))
        ends = np.unique(e[e >= 0]).astype(np.int64)
    pt.loop_ends = ends
    return pt


def _cuttable(model, units):
    """Bodies that may be part roots under ``units`` (see :func:`unit_labels`) and the model's
    loops (:func:`loop_cuttable`), or None for all."""
    heads = unit_labels(model, units)[1]
    lc = loop_cuttable(model) if hasattr(model, "parent") else None
    if lc is None:
        return heads
    return lc if heads is None else heads & lc


@njit(cache=True)
def _greedy(parent, w, t, cptr, cidx, cuttable, cut):
    """One bottom-up cutting pass with target t; cut[i] = body i is a part root; only bodies with
    cuttable[i] (and model roots) become part roots. Returns count."""
    n = parent.shape[0]
    acc = np.empty(n)
    count = 0
    for i in range(n - 1, -1, -1):
        s = w[i]
        for j in range(cptr[i], cptr[i + 1]):
            c = cidx[j]
            if not cut[c]:
                s += acc[c]
        if s > t and cptr[i + 1] > cptr[i]:
            s, k = _cut_children(i, s, t, acc, cptr, cidx, cuttable, cut)
            count += k
        acc[i] = s
        if (s >= t and cuttable[i]) or parent[i] < 0:
            cut[i] = True
            count += 1
        else:
            cut[i] = False
    return count


@njit(cache=True)
def _cut_children(i, s, t, acc, cptr, cidx, cuttable, cut):
    """Body i's accumulated weight s is over the target t: cut off its heaviest uncut, cuttable
    children until it fits.  Returns (s after the cuts, number of cuts).  Apart from ``_greedy``
    so that its loop over all bodies stays small (it is the partitioner's hot loop)."""
    nc = cptr[i + 1] - cptr[i]
    k = 0
    if nc == 1:
        c = cidx[cptr[i]]
        if not cut[c] and cuttable[c]:
            cut[c] = True
            k += 1
            s -= acc[c]
        return s, k
    vals = np.empty(nc)
    for j in range(nc):
        c = cidx[cptr[i] + j]
        vals[j] = -1.0 if cut[c] or not cuttable[c] else acc[c]
    order = np.argsort(-vals)
    for j in range(nc):
        if s <= t:
            break
        c = cidx[cptr[i] + order[j]]
        if not cut[c] and cuttable[c]:
            cut[c] = True
            k += 1
            s -= acc[c]
    return s, k


@njit(cache=True)
def _label(parent, cut, part_of):
    """Part of every body = index of its part root among the cut bodies (in increasing order)."""
    n = parent.shape[0]
    k = 0
    for i in range(n):
        if cut[i]:
            part_of[i] = k
            k += 1
        else:
            part_of[i] = part_of[parent[i]]
    return k


@njit(cache=True)
def _local_parent(parent, b):
    """Position in b (increasing bodies of one part, its root first) of every body's parent (-1
    for the root)."""
    m = b.shape[0]
    loc = np.empty(m, dtype=np.int64)
    loc[0] = -1
    for j in range(1, m):
        p = parent[b[j]]
        lo, hi = 0, j
        while lo < hi:
            mid = (lo + hi) // 2
            if b[mid] < p:
                lo = mid + 1
            else:
                hi = mid
        loc[j] = lo
    return loc


@njit(cache=True)
def _subtree_sums(w, b, loc):
    """In-part subtree sums of w over the part's bodies b (loc from ``_local_parent``)."""
    m = b.shape[0]
    s = np.empty(m)
    for j in range(m):
        s[j] = w[b[j]]
    for j in range(m - 1, 0, -1):
        s[loc[j]] += s[j]
    return s


@njit(cache=True)
def _inpart_subtree(parent, w, cut, b):
    """Subtree weights inside the part whose (increasing) bodies are b."""
    return _subtree_sums(w, b, _local_parent(parent, b))


def partition(model, nparts, weights=None, path_weight=0.0, iterations=4, units=None) -> Partition:
    """Split ``model`` (or a parent array) into ``nparts`` connected parts balanced by work.

    ``weights``: per-body work (default :func:`default_weights`: 2 + joint nv).
    ``path_weight``: extra relative work of a body on a handle path (the path from its part's
    root to a body where a child part attaches; the engine's sensitivities cost about 0.5-1 ABA
    per such body).  When > 0 the partition is recomputed ``iterations`` times with the path
    bodies of the previous one weighted by 1 + path_weight, and the best (smallest maximal
    part cost, ``Partition.costs``) is kept.
    ``units``: repeated units to keep whole (no unit is split across parts): per-body integer
    labels or a list of body-index sequences (see :func:`unit_labels`); None (default) takes the
    model's ``units`` attribute if it has one, False ignores it.  At most as many parts as units.
    """
    return _partition_paths(model, nparts, weights, path_weight, iterations, _cuttable(model, units))


def _partition_paths(model, nparts, weights, path_weight, iterations, cuttable):
    """:func:`partition` with the units already resolved to ``cuttable`` (None: every body)."""
    pt = _partition(model, nparts, weights, cuttable)
    if path_weight <= 0:
        return pt
    if not np.any(pt.handle >= 0):
        pt.costs = np.asarray(pt.weights, dtype=np.float64).copy()   # no part hangs from another: no paths
        return pt
    parent = np.ascontiguousarray(model.parent if hasattr(model, "parent") else model, dtype=np.int64)
    w = pt._w
    best, best_cost = pt, None
    for _ in range(int(iterations)):
        on = on_path_mask(parent, pt)
        cost = np.bincount(pt.part_of, weights=w * (1.0 + path_weight * on), minlength=pt.nparts)
        pt.costs = cost
        improved = best_cost is None or cost.max() < best_cost * (1.0 - 1e-4)
        if best_cost is None or cost.max() < best_cost:
            best, best_cost = pt, cost.max()
        if not improved:
            break       # converged: a further re-weighting moves the cut by a few bodies at most
        prev = pt
        pt = _partition(parent, nparts, w * (1.0 + path_weight * on), cuttable)
        pt.weights = np.bincount(pt.part_of, weights=w, minlength=pt.nparts)
        pt._w = w
        if np.array_equal(pt.roots, prev.roots):
            break       # the same cut again: so would every further iteration be
    on = on_path_mask(parent, pt)
    pt.costs = np.bincount(pt.part_of, weights=w * (1.0 + path_weight * on), minlength=pt.nparts)
    if pt.costs.max() < best_cost:
        best = pt
    return best


def on_path_mask(parent, pt):
    """Bodies on a handle path (from their part's root to a body where a child part attaches)."""
    mark = np.zeros(pt.n, dtype=np.bool_)
    _mark_paths(parent, pt.part_of, pt.handle[pt.handle >= 0], mark)
    return mark


@njit(cache=True)
def _mark_paths(parent, part_of, handles, mark):
    for h in handles:
        i = h
        k = part_of[h]
        while i >= 0 and part_of[i] == k and not mark[i]:
            mark[i] = True
            i = parent[i]


def _partition(model, nparts, weights=None, cuttable=None) -> Partition:
    parent = np.ascontiguousarray(model.parent if hasattr(model, "parent") else model, dtype=np.int64)
    n = parent.shape[0]
    P = int(nparts)
    if P < 1:
        raise PartreeInputError(f"nparts must be >= 1, got {nparts}")
    if P > n:
        raise PartreeInputError(f"cannot split {n} bodies into {P} parts: need nparts <= number of bodies")
    if cuttable is None:
        cuttable = np.ones(n, dtype=np.bool_)
    else:
        nunits = int(np.count_nonzero(cuttable))
        if P > nunits:
            if len(getattr(model, "loops", ())):
                raise PartreeInputError(f"cannot make {P} parts: only {nunits} bodies may start a part (no unit "
                                        f"and no closed loop is split across parts; need nparts <= {nunits})")
            raise PartreeInputError(f"cannot make {P} parts: the model has only {nunits} units, and no unit "
                                    f"is split across parts (need nparts <= {nunits})")
    if weights is None:
        w = default_weights(model) if hasattr(model, "nv_j") else np.ones(n)
    else:
        w = np.ascontiguousarray(weights, dtype=np.float64)
        if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise PartreeInputError(f"weights must be {n} positive finite numbers")
    nroots = int(np.count_nonzero(parent < 0))
    if nroots > P:
        raise PartreeInputError(f"the model is a forest of {nroots} trees; every part is connected, "
                                f"so nparts must be >= {nroots} (got {P})")
    # children CSR
    order = np.argsort(parent, kind="stable")
    cnt = np.bincount(parent[parent >= 0], minlength=n)
    cptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cnt, out=cptr[1:])
    cidx = np.ascontiguousarray(order[nroots:])

    cut = np.zeros(n, dtype=np.bool_)
    total = float(w.sum())
    if P == nroots:
        # one part per tree: nothing to search (the one-rank engine, a forest split by trees)
        cut[:] = parent < 0
        part_of = np.empty(n, dtype=np.int64)
        k = _label(parent, cut, part_of)
        pt = _build(parent, w, cut, part_of, k, total)
        pt._w = w
        return pt
    # P parts of at most t weigh at least total / P each on average: t >= total / P
    lo, hi = max(float(w.max()), total / P) * (1 - 1e-12), total
    best = None
    # the answer is usually just above total / P (a chain: within a body's weight): look there first
    for f in (1e-3, 1e-2, 1e-1):
        t = lo * (1.0 + f)
        if not lo < t < hi:
            break
        if _greedy(parent, w, t, cptr, cidx, cuttable, cut) <= P:
            hi = t
            best = (t, cut.copy())
            break
        lo = t
    # smallest t with count <= P (bisection; the count is non-increasing in t in practice), to
    # 1e-5 of t: parts balanced far finer than their costs can be measured
    for _ in range(60):
        t = 0.5 * (lo + hi)
        c = _greedy(parent, w, t, cptr, cidx, cuttable, cut)
        if c <= P:
            hi = t
            best = (t, cut.copy())
        else:
            lo = t
        if hi - lo <= 1e-5 * hi:
            break
    if best is None:
        _greedy(parent, w, total, cptr, cidx, cuttable, cut)
        best = (total, cut.copy())
    t, cut = best

    # fix-up to exactly P parts
    part_of = np.empty(n, dtype=np.int64)
    k = _label(parent, cut, part_of)
    while k != P:
        pw = np.bincount(part_of, weights=w, minlength=k)
        roots = np.flatnonzero(cut)
        if k < P:
            # split the heaviest part that has a body other than its root that may be a part root
            free = np.bincount(part_of[cuttable & ~cut], minlength=k)
            cand = np.flatnonzero(free > 0)
            if cand.size == 0:
                break
            kk = int(cand[np.argmax(pw[cand])])
            b = np.flatnonzero(part_of == kk)
            s = _inpart_subtree(parent, w, cut, b)
            d = np.abs(s[1:] - 0.5 * pw[kk])
            d[~cuttable[b[1:]]] = np.inf
            j = 1 + int(np.argmin(d))
            cut[b[j]] = True
        else:
            pr = parent[roots]
            ok = np.flatnonzero(pr >= 0)
            if ok.size == 0:
                break
            comb = pw[ok] + pw[part_of[pr[ok]]]
            j = int(ok[np.argmin(comb)])
            cut[roots[j]] = False
        k = _label(parent, cut, part_of)
    pt = _build(parent, w, cut, part_of, k, t)
    pt._w = w
    return pt


def _build(parent, w, cut, part_of, k, t):
    n = parent.shape[0]
    roots = np.flatnonzero(cut).astype(np.int64)
    idx = np.argsort(part_of, kind="stable").astype(np.int64)
    sizes = np.bincount(part_of, minlength=k).astype(np.int64)
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    handle = parent[roots].copy()
    part_parent = np.where(handle >= 0, part_of[np.maximum(handle, 0)], -1).astype(np.int64)
    weights = np.bincount(part_of, weights=w, minlength=k)
    return Partition(n=n, nparts=k, part_of=part_of, ptr=ptr, idx=idx, roots=roots, part_parent=part_parent,
                     handle=handle, weights=weights, sizes=sizes, target=float(t))


def partition_from_roots(model, roots, weights=None, units=None) -> Partition:
    """A Partition from explicit part roots (model roots are added).  For tests and hand-made
    layouts.  ``units`` as for :func:`partition` (None: the model's own): a root inside a unit
    (its parent in the same unit) is refused."""
    parent = np.ascontiguousarray(model.parent if hasattr(model, "parent") else model, dtype=np.int64)
    n = parent.shape[0]
    w = (default_weights(model) if hasattr(model, "nv_j") else np.ones(n)) if weights is None else \
        np.asarray(weights, dtype=float)
    roots = np.asarray(roots, dtype=np.int64)
    labels, heads = unit_labels(model, units)
    if heads is not None:
        inside = roots[~heads[roots]]
        if inside.size:
            i = int(inside[0])
            raise PartreeInputError(f"body {i} cannot be a part root: it lies inside unit {int(labels[i])} "
                                    f"(its parent {int(parent[i])} is in the same unit), and a unit is never "
                                    f"split across parts")
    cut = np.zeros(n, dtype=np.bool_)
    cut[roots] = True
    cut[parent < 0] = True
    part_of = np.empty(n, dtype=np.int64)
    k = _label(parent, cut, part_of)
    return _build(parent, w, cut, part_of, k, 0.0)


def assign_parts(costs, nranks, handles=None):
    """Parts -> ranks: largest cost first onto the least loaded rank (deterministic).

    ``handles``: number of handles of every part.  The groups are then renumbered so that rank 0
    (the root, whose boundary data never crosses the network) holds the most handles; the loads are
    the same, but which group lands on rank 0 no longer turns on small differences in cost."""
    costs = np.asarray(costs, dtype=float).reshape(-1)
    owner = np.empty(costs.size, dtype=np.int64)
    load = np.zeros(nranks)
    for k in np.argsort(-costs, kind="stable"):
        r = int(np.argmin(load))
        owner[k] = r
        load[r] += costs[k]
    return _most_handles_on_rank0(owner, nranks, handles)


def _most_handles_on_rank0(owner, nranks, handles):
    if handles is not None and nranks > 1:
        h = np.bincount(owner, weights=np.asarray(handles, dtype=float), minlength=nranks)
        top = int(np.argmax(h))                  # first of the largest: rank 0 when it ties
        if top != 0:
            swap = owner == top
            owner[owner == 0] = top
            owner[swap] = 0
    return owner


def _body_costs(parent, pt, w, path_weight):
    on = on_path_mask(parent, pt)
    return w * (1.0 + path_weight * on), on


@njit(cache=True)
def _best_cut(parent, b, c, extra, cuttable, load_hi, load_lo):
    """Best body of part b (increasing bodies, its root first) to cut off onto the lightest rank:
    the j >= 1 with cuttable[b[j]] minimising max(load_hi - s_j + x_j, load_lo + s_j), where s_j is
    the in-part subtree cost of b[j] and x_j the new path work in the donor part (``extra``
    cumulated from its root to b[j]'s parent).  Returns (j, that maximum); j = -1 when the part has
    no such body."""
    m = b.shape[0]
    loc = _local_parent(parent, b)
    s = _subtree_sums(c, b, loc)
    x = np.zeros(m)
    x[0] = extra[b[0]]
    for j in range(1, m):
        x[j] = x[loc[j]] + extra[b[j]]
    best, val = -1, np.inf
    for j in range(1, m):
        if not cuttable[b[j]]:
            continue
        v = max(load_hi - s[j] + x[loc[j]], load_lo + s[j])
        if v < val:
            best, val = j, v
    return best, val


def partition_for_ranks(model, nranks, weights=None, path_weight=0.0, max_cuts=None, tol=2e-3,
                        units=None) -> Partition:
    """A partition balanced over ``nranks`` ranks rather than over its parts, with ``owner`` set.

    Starts from ``partition(model, nranks)`` and the largest-first assignment, then, while the
    heaviest rank is more than ``tol`` above the mean, cuts off the subtree (inside one of that
    rank's parts) whose cost best evens the heaviest and the lightest rank, counting the handle-path
    work the cut adds to the donor part, and gives it to the lightest rank as a part of its own.
    Useful where equal parts cannot even out the ranks: a complete binary tree splits into subtrees
    of 2^k - 1 bodies, and with a partly filled last level its two halves differ by 5%.
    At most ``max_cuts`` (default: 2 * nranks) parts are added; a cut is kept only if it lowers the
    heaviest rank's load.  ``units`` as for :func:`partition` (None: the model's own): the extra
    cuts, too, never split a unit."""
    parent = np.ascontiguousarray(model.parent if hasattr(model, "parent") else model, dtype=np.int64)
    cuttable = _cuttable(model, units)
    pt = _partition_paths(model, nranks, weights, path_weight, 4, cuttable)
    w = pt._w
    nr = int(nranks)
    c, on = _body_costs(parent, pt, w, path_weight)
    pt.costs = np.bincount(pt.part_of, weights=c, minlength=pt.nparts)
    owner = assign_parts(pt.costs, nr)
    n = parent.shape[0]
    if cuttable is None:
        cuttable = np.ones(n, dtype=np.bool_)
    nroots_max = int(np.count_nonzero(cuttable))       # bodies that may be part roots
    for _ in range(2 * nr if max_cuts is None else int(max_cuts)):
        loads = np.bincount(owner, weights=pt.costs, minlength=nr)
        hi, lo = int(np.argmax(loads)), int(np.argmin(loads))
        if loads[hi] <= loads.mean() * (1.0 + tol) or pt.nparts >= nroots_max:
            break
        extra = path_weight * w * (~on)
        best = (None, -1, loads[hi])
        for k in np.flatnonzero(owner == hi):
            j, val = _best_cut(parent, pt.bodies(int(k)), c, extra, cuttable, loads[hi], loads[lo])
            if j >= 0 and val < best[2]:
                best = (int(k), j, val)
        k, j, val = best
        if k is None or val >= loads[hi] * (1.0 - 1e-9):
            break
        body = int(pt.bodies(k)[j])
        old_owner_by_root = dict(zip(pt.roots.tolist(), owner.tolist()))
        old_owner_by_root[body] = lo
        npt = partition_from_roots(parent, np.concatenate((pt.roots, [body])), weights=w)
        npt._w = w
        c, on = _body_costs(parent, npt, w, path_weight)
        npt.costs = np.bincount(npt.part_of, weights=c, minlength=npt.nparts)
        owner = np.array([old_owner_by_root[int(r)] for r in npt.roots], dtype=np.int64)
        pt = npt
    pt.owner = _most_handles_on_rank0(owner, nr, pt._nhandles())
    pt.nranks = nr
    return pt


#: the most handles the partition for ranks leaves on one part (:func:`cap_handles`): a part's
#: share of the root solve grows as the cube of its handles (one dense 6H x 6H solve), and a
#: binary tree's top part would otherwise hold about half the parts' attachments
MAX_HANDLES = 32


def cap_handles(model, pt, max_handles=MAX_HANDLES, units=None, path_weight=0.0):
    """``pt`` with every part that has more than ``max_handles`` handles split into parts that
    have at most that many (where the cuttable bodies allow it).  Returns ``pt`` itself when no
    part is over.

    Inside an over-full part the bodies are visited leaf first; a body's count is its own handle
    (1 if a child part hangs from it) plus its uncut in-part children's counts, and while it is
    over ``max_handles`` its children with the largest counts are cut off as new parts (each
    cut makes the body a handle of the piece it keeps).  So every piece has at most
    ``max_handles`` handles, and a binary tree's top part, which holds the top levels of the tree
    with about P / 2 handles, becomes a small tree of pieces.  A new part stays on the rank of
    the part it was cut from (``owner``): the ranks' loads change only by the pieces' handle-path
    work, counted in ``costs`` with ``path_weight``.  ``units`` as for :func:`partition`."""
    max_handles = int(max_handles)
    if max_handles < 1:
        raise PartreeInputError(f"max_handles must be >= 1, got {max_handles}")
    nh = pt._nhandles()
    if nh.size == 0 or nh.max() <= max_handles:
        return pt
    parent = np.ascontiguousarray(model.parent if hasattr(model, "parent") else model, dtype=np.int64)
    n = parent.shape[0]
    cuttable = _cuttable(model, units)
    if cuttable is None:
        cuttable = np.ones(n, dtype=np.bool_)
    is_handle = np.zeros(n, dtype=np.bool_)
    is_handle[pt.handle[pt.handle >= 0]] = True
    new_roots = []
    for k in np.flatnonzero(nh > max_handles):
        b = pt.bodies(int(k))
        loc = _local_parent(parent, b)
        m = b.size
        kids = [[] for _ in range(m)]
        for j in range(1, m):
            kids[loc[j]].append(j)
        acc = np.zeros(m, dtype=np.int64)
        handle = is_handle[b].copy()
        for j in range(m - 1, -1, -1):
            ch = kids[j]
            cnt = int(handle[j]) + sum(int(acc[c]) for c in ch)
            if cnt > max_handles:
                for c in sorted(ch, key=lambda c: -int(acc[c])):
                    if cnt <= max_handles:
                        break
                    if not cuttable[b[c]] or acc[c] == 0:
                        continue
                    new_roots.append(int(b[c]))
                    cnt -= int(acc[c])
                    if not handle[j]:
                        handle[j] = True
                        cnt += 1
            acc[j] = cnt
    if not new_roots:
        return pt
    w = getattr(pt, "_w", None)
    npt = partition_from_roots(parent, np.concatenate((pt.roots, new_roots)), weights=w, units=units)
    npt._w = w if w is not None else np.ones(n)
    c, _ = _body_costs(parent, npt, npt._w, path_weight)
    npt.costs = np.bincount(npt.part_of, weights=c, minlength=npt.nparts)
    if pt.owner is not None:
        own = np.asarray(pt.owner)[pt.part_of[npt.roots]]       # the rank of the part each piece was cut from
        npt.owner = np.asarray(own, dtype=np.int64)
        npt.nranks = pt.nranks
    return npt


#: extra relative cost of a body on a handle path (the sensitivity walk and the carried path
#: transforms), for the partitioner's weights: between the planar chain's (whose walk goes all the
#: way up) and the 3-D chain's (whose walk stops after a few thousand bodies), so that both are
#: balanced on 2 ranks; ``python scripts/benchmarks/bench_parallel.py --profile SPEC r2 7`` measures
#: it, and docs/parallel-engine.md gives the figures.
PATH_WEIGHT = 0.08

#: the path weight of a model with flexible bodies: its parts' walk is dearer than a rigid one's,
#: but the lower part of a chain waits for the upper one's kinematics, and on 2 ranks a larger
#: weight measured slower (docs/parallel-engine.md, "Weights")
FLEXIBLE_PATH_WEIGHT = 0.12


#: the path weight of a model with closed loops (:func:`loop_path_weight`): a path body of a part
#: holding loops carries the handle wrenches' columns through the loop passes
#: (``partree.parallel.loop_part``), LOOP_PATH_WEIGHT more than a plain body's work, and
#: LOOP_ROW_WEIGHT more for each loop row the passes carry through a body, on average
LOOP_PATH_WEIGHT = 0.27
LOOP_ROW_WEIGHT = 0.06


def loop_path_weight(model):
    """The path weight of a model with closed loops: LOOP_PATH_WEIGHT + LOOP_ROW_WEIGHT times the
    loop rows per body that the loop passes carry (a loop's rows visit every body from its ends to
    where its paths meet).  Fitted to the 2-rank parts timed one after another: a path body costs
    1.25x a plain one on a 3-D chain of 10^5 bodies with 10^3 local loops (0.05 rows per body) and
    1.6x on the planar scissor mast (4 rows per body, a split pin's end a second handle)
    (``scripts/benchmarks/loop_engine.py``, ``bench_scissor.py --mode engine``).  On 2 ranks the
    mast's plain part slows more than its path part (it is bound by memory, the walk is not), so
    LOOP_ROW_WEIGHT is the one that balanced the MPI runs best (0.08, 0.06 and 0.04 swept on the
    mast of 10^5 units: docs/performance.md), a little below the fit."""
    n = int(model.n)
    rows = int(LoopTopology(model).rptr[-1]) if len(model.loops) else 0
    return LOOP_PATH_WEIGHT + LOOP_ROW_WEIGHT * rows / max(n, 1)


def make_partition(model, parts, path_weight=PATH_WEIGHT, nranks=None):
    """A Partition from a number of parts or a Partition (checked).  ``parts`` None: one part, or
    with ``nranks`` the partition balanced over that many ranks (``partition_for_ranks``: at least
    nranks parts, and one per tree of a forest, more where equal parts cannot even the ranks
    out).  The default ``path_weight``
    is :func:`loop_path_weight` for a model with closed loops, FLEXIBLE_PATH_WEIGHT for one with
    flexible bodies."""
    if path_weight == PATH_WEIGHT:
        fl = getattr(model, "flexible", None)
        if len(getattr(model, "loops", ())):
            path_weight = loop_path_weight(model)
        elif fl is not None and np.any(np.asarray(fl.nmodes) > 0):
            path_weight = FLEXIBLE_PATH_WEIGHT
    if isinstance(parts, Partition):
        if parts.n != model.n:
            raise PartreeInputError(f"the partition is for {parts.n} bodies, the model has {model.n}")
        place_loops(model, parts)
        return parts
    groups = _tree_groups(model)
    # trees joined by loops end in one part: ask for as many more parts as merging removes
    extra = 0 if groups is None else len(groups) - len(set(groups.values()))
    if parts is None and nranks is not None and int(nranks) > 1:
        R = int(nranks) + extra
        if extra:      # no more parts than the loops allow (some ranks may then hold none)
            R = min(R, int(np.count_nonzero(_cuttable(model, None))))
        # a forest of more trees than ranks: at least a part per tree (every part is connected)
        R = max(R, int(np.count_nonzero(np.asarray(model.parent) < 0)))
        pt = cap_handles(model, partition_for_ranks(model, R, path_weight=path_weight), path_weight=path_weight)
        pt = join_looped_trees(model, pt)
        return place_loops(model, pt)
    P = (1 if nranks is None else int(nranks)) if parts is None else int(parts)
    if extra:
        ngroups = len(groups) - extra
        if P < ngroups:
            raise PartreeInputError(f"model {model.name!r} is a forest of {len(groups)} trees, {ngroups} once the "
                                    f"trees that loops join share a part; every part is connected, so nparts must be "
                                    f">= {ngroups} (got {P})")
        most = int(np.count_nonzero(_cuttable(model, None))) - extra
        if P > most:
            raise PartreeInputError(f"cannot make {P} parts of model {model.name!r}: its closed loops leave at most "
                                    f"{most} (no loop is split across parts, and trees joined by a loop share one)")
    pt = join_looped_trees(model, partition(model, min(P + extra, model.n), path_weight=path_weight))
    return place_loops(model, pt)
