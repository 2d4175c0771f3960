"""The hierarchical root: the tree of parts reduced along a reduction tree, O(log P) deep.

Pure numpy, no MPI: the merge and split of boundary relations, the reduction plan, and a
one-process driver (:func:`solve`, :func:`compose_velocities`) that gives what
``partree.parallel.root`` gives.  ``MPIEngine(root='tree')`` runs the same plan over the ranks
(:func:`run_up`, :func:`run_down` with the communicator's point-to-point messages).

**Relations.**  A part's boundary relation (``root.solve``) is

    g_in = M a_in + m0 + sum_h Kt[h] g[h],    a[h] = Psi[h] a_in + sum_h' Lam[h,h'] g[h'] + beta[h]

with g[h] the sum of the wrenches g_in of the child parts hanging at handle h.  A group of parts
has the same form with several ports: *entry* ports (the parent handles its open child parts hang
from: input a, output the summed g_in of the group's parts hanging there) and *handle* ports (its
handles with child parts outside the group: input the outside children's summed g, output a).
:class:`Relation` holds it as one affine map, outputs = K inputs + k.  The velocity round
(``root.compose_velocities``, v_in[child] = T_h v_in[parent] + vrel_h) is the same with entry
ports that take v and handle ports that give v.

**Merge.**  :func:`merge` joins relations: an entry hanging at a handle of another member takes
that handle's output as its input, and its output adds to that handle's input; the stacked
outputs y solve (1 - K Pi) y = K (Ex u + c0) + k, with Pi the connections, u the merged
relation's inputs and c0 the known inputs (a part hanging from the base takes a0, or v = 0).  A
handle closes when all its child parts are in the group; parts hanging from the base and handles
with no child part close at once.  Merging is associative: the relation of the whole tree has no
port left.  :func:`split` goes back: from the merged relation's inputs, every member's inputs,
and at a part its a_in and its handles' g, exactly as ``root.solve`` (the same eliminations in
another order: equal to rounding).

**Plan.**  :func:`make_plan` orders the parts depth-first, each part after its child parts
(postorder, children in part-number order), and groups ``fanin`` consecutive nodes per level: a
reduction tree of depth ceil(log_f P).  Every group is a contiguous run of that order, so its
open ports are few where the parts tree allows it: a chain of parts keeps one entry and one
handle; a tree of parts of depth d keeps O(d) ports.  A part with H handles keeps up to H open
ports in the groups that hold its children but not it (its own relation already has 36 H^2
doubles): the binary tree's default partition, whose top part collects about P/2 handles, keeps
that cap (the postorder merges the top part last, once, as the flat root does; splitting that
part is the partitioner's job).  Node hosts: a part's owner; a group's host is its first
member's host, so merges of one rank's consecutive nodes need no message.
:meth:`Plan.stats` gives the largest relation (doubles) and port count.

**The momentum form's rounds** are relations of the same two modes.  The gravity field
(``root.compose_field``) is the velocity round with vrel = 0 and the parts hanging from the base
given the field instead of v = 0 (:func:`part_field_relation`).  The sums of the parts' totals
up the parts tree (``root.subtree_totals``) are a dynamics round whose part relation is
g_in = m0 + sum_h X_h^T g[h], with m0 the part's own total and no a_in or handle outputs
(:func:`part_totals_relation`): its g at the handles are the sums the flat root gives.

Not covered (the flat root stays): loops left to the root (``root.RootLoops``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PartreeInputError

#: modes: 'dyn' (entries: in a, out g; handles: in g, out a), 'vel' (entries: in v; handles: out v)
_DIMS = {"dyn": (6, 6, 6, 6), "vel": (6, 0, 0, 6)}      # entry in, entry out, handle in, handle out


@dataclass
class Relation:
    """An affine boundary relation of a group of parts: outputs = K inputs + k.

    ``ent_key``: the global handle id each entry port hangs from; ``ent_cnt``: how many of the
    group's parts hang there; ``hnd_key``: the global ids of the open handles; ``hnd_nch``: the
    number of their child parts outside the group.  Inputs and outputs: entries first, then
    handles, 6 per port where the mode has them (``_DIMS``)."""
    mode: str
    ent_key: np.ndarray
    ent_cnt: np.ndarray
    hnd_key: np.ndarray
    hnd_nch: np.ndarray
    K: np.ndarray
    k: np.ndarray

    @property
    def nports(self):
        return int(self.ent_key.size + self.hnd_key.size)

    @property
    def doubles(self):
        """Doubles of this relation as a message (K, k and the port keys)."""
        return int(self.K.size + self.k.size + 2 * self.nports)


@dataclass
class Record:
    """What :func:`split` needs: y = Yu u + Y0, x = Pi y + Ex u + c0, member i's inputs
    x[in_off[i]:in_off[i + 1]]."""
    Yu: np.ndarray
    Y0: np.ndarray
    Pi: np.ndarray
    Ex: np.ndarray
    c0: np.ndarray
    in_off: np.ndarray


def motion_matrix(E, r):
    """The 6x6 motion transform of ``root._xmotion``: [w; v] -> [E w; E (v - r x w)]."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    rx = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
    X[3:, :3] = -E @ rx
    return X


@dataclass
class LeafInfo:
    """A part's place in the parts tree: ``phid`` the global id of the handle it hangs from (-1:
    the base), ``hids`` its handles' global ids, ``nch`` their numbers of child parts."""
    part: int
    phid: int
    hids: np.ndarray
    nch: np.ndarray


def part_relation(info: LeafInfo, red):
    """The dynamics relation of one part from its reduction (M, m0, Kt, Psi, Lam, beta)."""
    M, m0, Kt, Psi, Lam, beta = red
    H = info.hids.size
    n = 6 * (1 + H)
    K = np.empty((n, n))
    K[:6, :6] = M
    if H:
        K[:6, 6:] = Kt.transpose(1, 0, 2).reshape(6, 6 * H)
        K[6:, :6] = Psi.reshape(6 * H, 6)
        K[6:, 6:] = Lam.transpose(0, 2, 1, 3).reshape(6 * H, 6 * H)
    k = np.concatenate((m0, np.ravel(beta)))
    return Relation("dyn", np.array([info.phid]), np.ones(1, dtype=np.int64), info.hids, info.nch, K, k)


def part_velocity_relation(info: LeafInfo, vel):
    """The velocity relation of one part from its maps (TE, Tr, vrel): v_h = X_h v_in + vrel_h."""
    TE, Tr, vrel = vel
    H = info.hids.size
    K = np.empty((6 * H, 6))
    for h in range(H):
        K[6 * h:6 * h + 6] = motion_matrix(TE[h], Tr[h])
    return Relation("vel", np.array([info.phid]), np.ones(1, dtype=np.int64), info.hids, info.nch, K,
                    np.ravel(vrel).astype(np.float64))


def part_field_relation(info: LeafInfo, vel):
    """The momentum form's field relation of one part from its maps (TE, Tr, vrel): a rigid
    field carried to the handles, x_h = X_h x_in (vrel unused; ``root.compose_field``)."""
    TE, Tr, _ = vel
    return part_velocity_relation(info, (TE, Tr, np.zeros((info.hids.size, 6))))


def force_matrix(E, r):
    """The 6x6 force transform X^T of :func:`motion_matrix`'s X: a wrench [n; f] in the handle's
    frame -> [E^T n + r x E^T f; E^T f] in the part's frame 0."""
    return motion_matrix(E, r).T


def part_totals_relation(info: LeafInfo, vel, up):
    """The totals relation of one part (``root.subtree_totals``): g_in = up + sum_h X_h^T g[h],
    ``up`` (6,) the part's own total in its frame 0, X_h the handle maps of ``vel`` (TE, Tr,
    vrel); a dynamics relation with M = 0 and no handle outputs (Psi = Lam = beta = 0)."""
    TE, Tr, _ = vel
    H = info.hids.size
    Kt = np.empty((H, 6, 6))
    for h in range(H):
        Kt[h] = force_matrix(TE[h], Tr[h])
    return part_relation(info, (np.zeros((6, 6)), np.asarray(up, dtype=np.float64), Kt, np.zeros((H, 6, 6)),
                                np.zeros((H, H, 6, 6)), np.zeros((H, 6))))


def merge(members, top):
    """Join ``members`` (relations of one mode) into one: returns (Relation, Record).  ``top``:
    the known input of entries hanging from the base (a0 for dynamics, zeros for velocities)."""
    mode = members[0].mode
    ein, eout, hin, hout = _DIMS[mode]
    # stacked layouts
    in_off = [0]
    out_off = [0]
    for m in members:
        in_off.append(in_off[-1] + ein * m.ent_key.size + hin * m.hnd_key.size)
        out_off.append(out_off[-1] + eout * m.ent_key.size + hout * m.hnd_key.size)
    ni, no = in_off[-1], out_off[-1]
    hpos = {}                                   # handle id -> (in slot, out slot, nch)
    for i, m in enumerate(members):
        E = m.ent_key.size
        for j, (h, c) in enumerate(zip(m.hnd_key.tolist(), m.hnd_nch.tolist())):
            hpos[h] = (in_off[i] + ein * E + hin * j, out_off[i] + eout * E + hout * j, c)
    inner = {}                                  # handle id -> child parts inside
    open_e = {}                                 # parent handle id -> (new port, count)
    ent = []                                    # (in slot, out slot, handle id or -1, internal)
    for i, m in enumerate(members):
        for j, (h, c) in enumerate(zip(m.ent_key.tolist(), m.ent_cnt.tolist())):
            ent.append((in_off[i] + ein * j, out_off[i] + eout * j, h))
            if h in hpos:
                inner[h] = inner.get(h, 0) + c
            elif h >= 0:
                if h in open_e:
                    open_e[h] = (open_e[h][0], open_e[h][1] + c)
                else:
                    open_e[h] = (len(open_e), c)
    ne = len(open_e)
    open_h = [h for h, (_, _, c) in hpos.items() if inner.get(h, 0) < c]
    nh = len(open_h)
    nu = ein * ne + hin * nh
    nout = eout * ne + hout * nh
    Pi = np.zeros((ni, no))
    Ex = np.zeros((ni, nu))
    c0 = np.zeros(ni)
    S = np.zeros((nout, no))
    I6 = np.eye(6)
    for si, so, h in ent:
        if h in hpos:
            hi, ho, _ = hpos[h]
            Pi[si:si + 6, ho:ho + 6] = I6                   # a_e (v_e) = the handle's a (v)
            if eout:
                Pi[hi:hi + 6, so:so + 6] += I6              # the handle's g += g_e
        elif h < 0:
            c0[si:si + 6] = top
        else:
            p = open_e[h][0]
            Ex[si:si + 6, ein * p:ein * p + 6] = I6
            if eout:
                S[eout * p:eout * p + 6, so:so + 6] += I6
    for j, h in enumerate(open_h):
        hi, ho, _ = hpos[h]
        if hin:
            Ex[hi:hi + 6, ein * ne + hin * j:ein * ne + hin * j + 6] = I6
        S[eout * ne + hout * j:eout * ne + hout * j + 6, ho:ho + 6] = I6
    # block-diagonal K of the members
    Kb = np.zeros((no, ni))
    kb = np.empty(no)
    for i, m in enumerate(members):
        Kb[out_off[i]:out_off[i + 1], in_off[i]:in_off[i + 1]] = m.K
        kb[out_off[i]:out_off[i + 1]] = m.k
    rhs = np.empty((no, nu + 1))
    rhs[:, :nu] = Kb @ Ex
    rhs[:, nu] = Kb @ c0 + kb
    if Pi.any():
        try:
            Y = np.linalg.solve(np.eye(no) - Kb @ Pi, rhs)
        except np.linalg.LinAlgError as e:
            raise PartreeInputError(f"singular handle system in the hierarchical root ({e})") from None
    else:
        Y = rhs
    keys = np.fromiter(open_e.keys(), dtype=np.int64, count=ne)
    cnt = np.fromiter((v[1] for v in open_e.values()), dtype=np.int64, count=ne)
    hk = np.array(open_h, dtype=np.int64)
    hc = np.array([hpos[h][2] - inner.get(h, 0) for h in open_h], dtype=np.int64)   # children still outside
    SY = S @ Y
    rel = Relation(mode, keys, cnt, hk, hc, np.ascontiguousarray(SY[:, :nu]), SY[:, nu].copy())
    return rel, Record(Y[:, :nu], Y[:, nu], Pi, Ex, c0, np.asarray(in_off))


def split(rec: Record, u):
    """The members' inputs from the merged relation's inputs ``u``: a list, one per member."""
    y = rec.Yu @ u + rec.Y0
    x = rec.Pi @ y + rec.Ex @ u + rec.c0
    o = rec.in_off
    return [x[o[i]:o[i + 1]] for i in range(o.size - 1)]


# ---------------------------------------------------------------------- the plan
@dataclass
class Node:
    """A node of the reduction tree: a part (``children`` empty, id = the part) or a group."""
    id: int
    level: int
    host: int
    children: list = field(default_factory=list)
    parent: int = -1


@dataclass
class Plan:
    """The reduction tree over the parts: ``nodes`` (ids 0..P-1 are the parts), ``root`` the top
    node, ``leaves`` each part's :class:`LeafInfo`, ``order`` the parts in merge order."""
    nodes: list
    root: int
    leaves: list
    order: np.ndarray
    fanin: int
    last_stats: dict = None

    @property
    def depth(self):
        return int(self.nodes[self.root].level)

    def rank_piece(self, rank):
        """What one rank runs: its parts' leaf infos and its nodes, each with its children's and
        parent's hosts (a :class:`RankPiece`)."""
        mine = [n for n in self.nodes if n.host == rank]
        leaves = {n.id: self.leaves[n.id] for n in mine if not n.children}
        groups = []
        for n in sorted((n for n in mine if n.children), key=lambda n: (n.level, n.id)):
            groups.append((n.id, [(c, self.nodes[c].host) for c in n.children]))
        up = {n.id: (n.parent, self.nodes[n.parent].host if n.parent >= 0 else -1) for n in mine}
        return RankPiece(rank, leaves, groups, up, self.root)


@dataclass
class RankPiece:
    """A rank's share of a :class:`Plan`: ``leaves`` (part -> LeafInfo), ``groups`` [(node,
    [(child, child's host)])] in the order they merge, ``up`` node -> (parent node, its host)."""
    rank: int
    leaves: dict
    groups: list
    up: dict
    root: int


def leaf_infos(tree):
    """Every part's :class:`LeafInfo` from a ``root.PartsTree``."""
    P = tree.nparts
    nh = np.asarray(tree.nh, dtype=np.int64)
    hoff = np.concatenate(([0], np.cumsum(nh)))
    nch = np.zeros(int(hoff[-1]), dtype=np.int64)
    phid = -np.ones(P, dtype=np.int64)
    for c in range(P):
        q = int(tree.part_parent[c])
        if q >= 0:
            phid[c] = hoff[q] + int(tree.hidx[c])
            nch[phid[c]] += 1
    return [LeafInfo(p, int(phid[p]), np.arange(hoff[p], hoff[p + 1], dtype=np.int64), nch[hoff[p]:hoff[p + 1]])
            for p in range(P)]


def postorder(part_parent):
    """The parts depth-first, every part after its child parts (children in increasing order)."""
    P = int(len(part_parent))
    kids = [[] for _ in range(P)]
    tops = []
    for c in range(P):
        q = int(part_parent[c])
        (tops if q < 0 else kids[q]).append(c)
    out = []
    stack = [(t, False) for t in reversed(tops)]
    while stack:
        p, done = stack.pop()
        if done:
            out.append(p)
            continue
        stack.append((p, True))
        stack.extend((c, False) for c in reversed(kids[p]))
    return np.asarray(out, dtype=np.int64)


def make_plan(tree, owner=None, fanin=2):
    """The reduction tree of ``tree`` (a ``root.PartsTree`` without root loops): the parts in
    :func:`postorder`, ``fanin`` consecutive nodes per group, level by level.  ``owner``: each
    part's rank (default: all on rank 0); a group is hosted by its first member's host."""
    if tree.loops is not None:
        raise ValueError("the hierarchical root does not take loops left to the root: use the flat root")
    fanin = int(fanin)
    if fanin < 2:
        raise ValueError(f"fanin must be >= 2, not {fanin}")
    P = tree.nparts
    own = np.zeros(P, dtype=np.int64) if owner is None else np.asarray(owner, dtype=np.int64)
    nodes = [Node(p, 0, int(own[p])) for p in range(P)]
    order = postorder(tree.part_parent)
    cur = order.tolist()
    level = 0
    while len(cur) > 1:
        level += 1
        nxt = []
        for i in range(0, len(cur), fanin):
            ch = cur[i:i + fanin]
            if len(ch) == 1:            # a lone last node goes up as it is
                nxt.append(ch[0])
                continue
            nid = len(nodes)
            nodes.append(Node(nid, level, nodes[ch[0]].host, list(ch)))
            for c in ch:
                nodes[c].parent = nid
            nxt.append(nid)
        cur = nxt
    return Plan(nodes, cur[0], leaf_infos(tree), order, fanin)


# ---------------------------------------------------------------------- running a plan
def run_up(piece: RankPiece, leaf_rel, top, send, recv, stats=None):
    """The upward sweep on one rank: ``leaf_rel`` part -> its Relation (this rank's parts);
    ``send(dest, node, rel)`` / ``recv(source, node)`` move a node's relation between hosts.
    Returns the records of this rank's nodes (node -> Record, for :func:`run_down`).  ``stats``:
    a dict updated with the largest relation (doubles) and port count seen."""
    have = {}
    recs = {}
    for p, rel in leaf_rel.items():
        rel, rec = merge([rel], top)            # close the base's entry and childless handles
        recs[p] = rec
        have[p] = rel
        _note(stats, rel)
        _pass_up(piece, p, rel, send, have)
    for nid, ch in piece.groups:
        members = [have.pop(c) if h == piece.rank else recv(h, c) for c, h in ch]
        rel, rec = merge(members, top)
        recs[nid] = rec
        have[nid] = rel
        _note(stats, rel)
        _pass_up(piece, nid, rel, send, have)
    return recs


def _pass_up(piece, nid, rel, send, have):
    par, host = piece.up[nid]
    if par >= 0 and host != piece.rank:
        send(host, nid, rel)
        del have[nid]


def _note(stats, rel):
    if stats is not None:
        stats["max_doubles"] = max(stats.get("max_doubles", 0), rel.doubles)
        stats["max_ports"] = max(stats.get("max_ports", 0), rel.nports)


def run_down(piece: RankPiece, recs, send, recv):
    """The downward sweep on one rank: from the top node's (empty) inputs, every node's inputs
    (``send(dest, node, u)`` / ``recv(source, node)``).  Returns part -> its inputs (x of the
    part's own relation: [a_in, g per handle] for dynamics, v_in for velocities)."""
    inputs = {}
    if piece.root in recs:
        inputs[piece.root] = np.zeros(0)
    out = {}
    for nid, ch in reversed(piece.groups):
        u = _input(piece, nid, inputs, recv)
        for (c, h), x in zip(ch, split(recs[nid], u)):
            if h == piece.rank:
                inputs[c] = x
            else:
                send(h, c, x)
    for p in piece.leaves:
        u = _input(piece, p, inputs, recv)
        out[p] = split(recs[p], u)[0]
    return out


def _input(piece, nid, inputs, recv):
    if nid in inputs:
        return inputs.pop(nid)
    return recv(piece.up[nid][1], nid)


# ---------------------------------------------------------------------- one-process drivers
def _local(plan):
    return plan.rank_piece(0) if all(n.host == 0 for n in plan.nodes) else one_rank_piece(plan)


def one_rank_piece(plan):
    """The whole of ``plan`` as one rank's piece (every node on rank 0)."""
    one = Plan([Node(n.id, n.level, 0, n.children, n.parent) for n in plan.nodes], plan.root, plan.leaves,
               plan.order, plan.fanin)
    return one.rank_piece(0)


def no_send(*a):
    """The ``send`` and ``recv`` of a one-process run: never called."""
    raise RuntimeError("a one-process plan sends nothing")


def compose_velocities(tree, vel, plan=None, fanin=2):
    """``root.compose_velocities`` through the reduction tree in one process: v_in (P, 6).
    ``plan``: a :func:`make_plan` (its hosts are ignored here), default one of ``fanin``."""
    plan = make_plan(tree, fanin=fanin) if plan is None else plan
    x = _run_local(plan, {p: part_velocity_relation(plan.leaves[p], vel[p]) for p in range(tree.nparts)},
                   np.zeros(6))
    v_in = np.empty((tree.nparts, 6))
    for p, xp in x.items():
        v_in[p] = xp
    return v_in


def _run_local(plan, rels, top):
    """One plan's upward and downward sweeps in one process: part -> its inputs."""
    piece = _local(plan)
    stats = {}
    recs = run_up(piece, rels, np.asarray(top, dtype=np.float64), no_send, no_send, stats)
    x = run_down(piece, recs, no_send, no_send)
    plan.last_stats = stats
    return x


def compose_field(tree, vel, top, plan=None, fanin=2):
    """``root.compose_field`` through the reduction tree in one process: the field (P, 6) in
    every part's frame 0, ``top`` (6,) the field in the base's frame."""
    plan = make_plan(tree, fanin=fanin) if plan is None else plan
    x = _run_local(plan, {p: part_field_relation(plan.leaves[p], vel[p]) for p in range(tree.nparts)}, top)
    out = np.empty((tree.nparts, 6))
    for p, xp in x.items():
        out[p] = xp
    return out


def subtree_totals(tree, vel, up, plan=None, fanin=2):
    """``root.subtree_totals`` through the reduction tree in one process: each part's handle
    sums, a list of (H_p, 6) arrays, ``up[p]`` (6,) part p's own total."""
    plan = make_plan(tree, fanin=fanin) if plan is None else plan
    x = _run_local(plan, {p: part_totals_relation(plan.leaves[p], vel[p], up[p]) for p in range(tree.nparts)},
                   np.zeros(6))
    return [x[p][6:].reshape(-1, 6) for p in range(tree.nparts)]


def solve(tree, red, a0, plan=None, fanin=2):
    """``root.solve`` through the reduction tree in one process: (a_in (P, 6), g list of (H_p,
    6)).  ``plan`` as for :func:`compose_velocities`; ``plan.last_stats`` gets the largest
    relation's doubles and ports."""
    plan = make_plan(tree, fanin=fanin) if plan is None else plan
    x = _run_local(plan, {p: part_relation(plan.leaves[p], red[p]) for p in range(tree.nparts)}, a0)
    a_in = np.empty((tree.nparts, 6))
    g = [None] * tree.nparts
    for p, xp in x.items():
        a_in[p] = xp[:6]
        g[p] = xp[6:].reshape(-1, 6)
    return a_in, g
