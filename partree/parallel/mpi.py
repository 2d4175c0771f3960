"""MPI backend (mpi4py): parts spread over the ranks of a communicator, rank 0 is the root.

Setup (once per engine), ``distribute='root'`` (the default): rank 0 builds the model (a Model,
a zero-argument callable returning one, or a spec string for ``partree.specs.resolve_model``),
partitions it, builds every part (``PartKernel``) and sends each rank its parts; the other ranks
never build or hold the model, so their memory is their parts' data alone (pass a loader or a
spec string rather than a Model built on every rank to get that benefit).  ``distribute='each'``:
every rank builds the model, computes the same deterministic partition and slices out its own
parts (faster set-up, one model per rank at peak).  Afterwards rank 0 keeps only the O(P) parts
tree (plus, to gather results, the v-indices and body indices of all parts and every joint's nv:
17 B per body for 1-DOF joints).

One evaluation = four messages, all O(P) small matrices, independent of N:
  Gatherv  velocity maps (T_h, vrel_h per handle)         parts -> root
  Scatterv incoming velocities v_in                        root -> parts
  Gatherv  boundary relations (M, m0, Kt, Lam, beta)       parts -> root
  Scatterv a_in and the handle wrenches g                  root -> parts
plus, optionally, a Gatherv of qdd to rank 0 (O(N), counted separately).  That is the flat root;
with ``MPIEngine(root='tree')`` (or 'auto' from ``TREE_ROOT_MIN_PARTS`` parts on) the two rounds
go up and down a reduction tree of point-to-point messages instead
(:mod:`partree.parallel.hierarchical_root`): O(log P) levels, no O(P) buffer on any rank.
Hybrid dynamics (joints whose acceleration is given, ``forward_dynamics(..., active=...)``) takes the same four messages
(each part flags its own active joints in its reduction) and gathers the joint forces with qdd.
The constraint forces
(``constraint_forces``) add no message: each part forms its joint wrenches from its own
back-substitution and the g it received; gathering them is O(N) again.

Any exception on any rank prints ``partree MPI rank r: <message>`` to stderr and calls
``comm.Abort(1)`` so the whole job ends at once instead of hanging in a collective (on a
one-rank communicator the exception is raised normally).
"""
from __future__ import annotations

import math
import os
import sys
import time
import traceback

import numpy as np

from ..algorithms.flexible_dynamics import FlexibleLoads
from ..model import Model
from ..errors import PartreeInputError
from . import hierarchical_root as HR
from . import messages as msg
from . import root as R
from .part import (RunIndex, Take, attach_loop_forces, build_part, check_momentum_parts, early_kinematics_wanted,
                   gravity_a0, index_ranges)
from .flexible_part import NOT_BUILT, PartLoads, full_sizes, own_selections, part_forces
from .partition import PATH_WEIGHT, make_partition


#: how long a rank waiting for a message polls without giving way (seconds), before it yields its
#: core between polls (``MPIEngine(wait='yield')``)
SPIN_SECONDS = 5e-5


def wait_for(req, mode, pickled=False):
    """Complete the non-blocking request ``req``.  ``mode`` 'spin': MPI's own wait (MPICH polls
    the network without pause); 'yield': poll for ``SPIN_SECONDS``, then give the core away
    (``sched_yield``) between polls, so that a rank waiting for the root or for another part does
    not take the core a working rank needs when the machine runs more processes than cores.
    ``pickled``: a request of mpi4py's object calls (``irecv``), whose object is returned."""
    if mode == "spin":
        return req.wait() if pickled else req.Wait()
    t0 = time.perf_counter()
    while True:
        done, obj = req.test() if pickled else (req.Test(), None)
        if done:
            return obj
        if time.perf_counter() - t0 > SPIN_SECONDS:
            os.sched_yield()


def _resolve(model_or_loader):
    if isinstance(model_or_loader, Model):
        return model_or_loader
    if callable(model_or_loader):
        return model_or_loader()
    from ..specs import resolve_model

    return resolve_model(model_or_loader)


#: ``MPIEngine(root='auto')`` takes the hierarchical root from this many parts on (see
#: docs/parallel-engine.md, "The hierarchical root", for the measurement behind it)
TREE_ROOT_MIN_PARTS = 1024

#: pause between writing the failing rank's message and MPI_Abort (see ``AbortOnError``)
ABORT_GRACE_SECONDS = 0.5


class AbortOnError:
    """Context: any exception -> message on stderr and comm.Abort (size > 1)."""

    def __init__(self, comm):
        self.comm = comm

    def __enter__(self):
        return self

    def __exit__(self, et, e, tb):
        if e is None or self.comm.Get_size() == 1 or not isinstance(e, Exception):
            return False
        msg = f"partree MPI rank {self.comm.Get_rank()}: {type(e).__name__}: {e}"
        try:
            sys.stderr.write(msg + "\n")
            if not isinstance(e, PartreeInputError):
                traceback.print_exception(et, e, tb, file=sys.stderr)
            sys.stderr.flush()
            sys.stdout.flush()
            # the launcher forwards our output asynchronously; MPI_Abort can end the job before it
            # has (MPICH/Hydra, seen here about once in a dozen runs), and the message is the point
            time.sleep(ABORT_GRACE_SECONDS)
        finally:
            self.comm.Abort(1)
        return False


def check_finite(x, name, pk):
    """Raise a PartreeInputError naming the global index, body and part of the first non-finite
    entry of ``x``, a part's own slice of q (``name`` 'q'), of a velocity-sized vector ('qd',
    'tau') or of its external wrenches ('f_ext', shape (m, 6), or the wrenches at the origins of a
    ``PartLoads``, whose loads at nodes were checked where they were packed).  One dot product
    when all is well."""
    if name == "f_ext" and isinstance(x, PartLoads):
        if x.F is None:
            return
        x = x.F
    x = np.ravel(x)
    if x.size == 0 or math.isfinite(float(x @ x)) or np.isfinite(x).all():
        return
    k = int(np.flatnonzero(~np.isfinite(x))[0])
    if name == "f_ext":
        body, where = int(pk.bodies[k // 6]), f"f_ext[{int(pk.bodies[k // 6])}, {k % 6}]"
    else:
        sel, first = (pk.qsel, pk.idx_q) if name == "q" else (pk.vsel, pk.idx_v)
        body, where = int(pk.bodies[int(np.searchsorted(first, k, side="right") - 1)]), f"{name}[{int(sel[k])}]"
    raise PartreeInputError(f"{where} is {x[k]} (body {body}, part {pk.part_id})")


class MPIEngine:
    """Forward dynamics over MPI.  Collective: construct and call on every rank of ``comm``.

    ``parts``: number of parts (default: the number of ranks) or a Partition.
    ``path_weight``: see ``partition``.  ``gather``: collect qdd on rank 0.  ``poses``: build the
    parts for the momentum form too (:meth:`momentum_local`; see ``build_part``).

    ``root``: how the boundary relations are solved.  ``'flat'``: gathered to rank 0, which
    solves the whole tree of parts (``root.solve``, O(P) work and messages on rank 0).
    ``'tree'``: the hierarchical root (:mod:`partree.parallel.hierarchical_root`): the
    relations merged along a reduction tree of fan-in ``fanin`` over the parts in postorder, each
    merge on the rank that holds the group's first member, point-to-point messages, then split
    back down the same tree: ceil(log_f P) levels, no O(P) buffer on any rank.  ``'auto'`` (the
    default): the tree from ``TREE_ROOT_MIN_PARTS`` parts on, the flat root below.  Loops left to
    the root (their two ends in different parts) always take the flat root.  ``root_mode`` says
    which one forward dynamics, constraint forces, hybrid dynamics, the loops' corrections and
    the momentum form use;
    ``root_stats`` (every rank) the plan's depth and, after an evaluation, this rank's largest
    relation (doubles) and port count.

    ``wait``: how a rank waits for the evaluation's messages (:func:`wait_for`).  ``'yield'`` (the
    default) polls and then gives its core away between polls: on a machine running more
    processes than cores (a shared workstation, a busy CI runner) the waiting ranks then leave the
    cores to the working ones.  ``'spin'``: MPI's own blocking wait (MPICH polls without pause).
    """

    def __init__(self, model_or_loader, comm=None, parts=None, path_weight=PATH_WEIGHT, gather=True,
                 distribute="root", poses=False, root="auto", fanin=2, wait="yield"):
        if comm is None:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
        if distribute not in ("root", "each"):
            raise ValueError(f"distribute must be 'root' or 'each', not {distribute!r}")
        if root not in ("flat", "tree", "auto"):
            raise ValueError(f"root must be 'flat', 'tree' or 'auto', not {root!r}")
        if int(fanin) < 2:
            raise ValueError(f"fanin must be >= 2, not {fanin}")
        if wait not in ("yield", "spin"):
            raise ValueError(f"wait must be 'yield' or 'spin', not {wait!r}")
        self._bind(comm, wait, gather)
        with AbortOnError(comm):
            t0 = time.perf_counter()
            # 'root': rank 0 builds the model and every part and sends each rank its parts, so the
            # whole model only ever exists on rank 0; 'each': every rank builds it and slices
            by_root = distribute == "root" and self.size > 1
            model = pt = None
            if self.rank == 0 or not by_root:
                model = _resolve(model_or_loader)
                pt = make_partition(model, parts, path_weight, nranks=self.size)
            if by_root:
                meta = None
                if self.rank == 0:
                    meta = {"nparts": pt.nparts, "costs": pt.costs if pt.costs is not None else pt.weights,
                            "n": model.n, "nq": full_sizes(model)[0], "nv": full_sizes(model)[1], "gravity": np.asarray(model.gravity),
                            "nh": R.PartsTree.from_partition(pt).nh, "owner": pt.owner_for(self.size),
                            "nloops": len(model.loops), "name": model.name,
                            "flexible": model.flexible is not None}
                    meta["early"] = early_kinematics_wanted(model, pt, meta["owner"])
                meta = comm.bcast(meta, root=0)
            else:
                meta = {"nparts": pt.nparts, "costs": pt.costs if pt.costs is not None else pt.weights,
                        "n": model.n, "nq": full_sizes(model)[0], "nv": full_sizes(model)[1], "gravity": np.asarray(model.gravity),
                        "nh": R.PartsTree.from_partition(pt).nh, "owner": pt.owner_for(self.size),
                        "nloops": len(model.loops), "name": model.name,
                            "flexible": model.flexible is not None}
                meta["early"] = early_kinematics_wanted(model, pt, meta["owner"])
            P = int(meta["nparts"])
            self.owner = np.asarray(meta["owner"], dtype=np.int64)
            self.local_ids = np.flatnonzero(self.owner == self.rank)
            early = bool(meta["early"])
            if by_root:
                if self.rank == 0:
                    for k in range(P):
                        r = int(self.owner[k])
                        if r != 0:
                            comm.send(build_part(model, pt, k, early_kinematics=early, poses=poses), dest=r, tag=k)
                    self.parts = [build_part(model, pt, int(k), early_kinematics=early, poses=poses)
                                  for k in self.local_ids]
                else:
                    self.parts = [comm.recv(source=0, tag=int(k)) for k in self.local_ids]
            else:
                self.parts = [build_part(model, pt, int(k), early_kinematics=early, poses=poses)
                              for k in self.local_ids]
            tree = None
            if self.rank == 0 or not by_root:
                tree = R.PartsTree.from_partition(pt, model)
            self._finish(meta, tree, pt, model, model_or_loader, gather, root, fanin)
            del model, pt
            self.setup_time = time.perf_counter() - t0
        self.last_info = None

    @classmethod
    def from_parts(cls, comm, parts, meta, tree=None, pt=None, wait="yield"):
        """An engine over ``comm`` (collective) whose parts are already where they run: ``parts``
        this rank's (``meta['owner'] == rank``, increasing), ``meta`` the dict every rank of the
        constructor shares (nparts, n, nq, nv, gravity, nh, owner, nloops, name, flexible), ``tree``
        and ``pt`` (the ``PartsTree`` and the ``Partition``) on rank 0.  The flat root, nothing
        gathered (``gather=False``): the Dask engine's workers evaluate this way, each part
        placed by the client."""
        self = cls.__new__(cls)
        self._bind(comm, wait, False)
        t0 = time.perf_counter()
        self.owner = np.asarray(meta["owner"], dtype=np.int64)
        self.local_ids = np.flatnonzero(self.owner == self.rank)
        self.parts = list(parts)
        self._finish(meta, tree, pt, None, None, False, "flat", 2)
        self.setup_time = time.perf_counter() - t0
        self.last_info = None
        return self

    def _bind(self, comm, wait, gather):
        self.wait = wait
        # a communicator without non-blocking collectives (the Dask workers' socket channel,
        # ``sockcomm.SocketComm``) waits in its own blocking calls
        self._nonblocking = all(hasattr(comm, f) for f in ("Igatherv", "Iscatterv", "irecv"))
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.gather = gather

    def _finish(self, meta, tree, pt, model, model_or_loader, gather, root, fanin):
        """The engine's layouts once this rank holds its parts (``tree`` and ``pt`` on rank 0 or,
        with ``distribute='each'``, everywhere; ``model`` where the results are gathered)."""
        P = int(meta["nparts"])
        self._take = [(Take(pk.qix), Take(pk.vix)) for pk in self.parts]     # a part's slices of q, qd
        self.n, self.nq, self.nv = int(meta["n"]), int(meta["nq"]), int(meta["nv"])
        self.nloops = int(meta["nloops"])
        self.flexible = bool(meta["flexible"])
        self.model_name = str(meta["name"])
        self.a0 = gravity_a0(meta["gravity"])
        nh = meta["nh"] if tree is None else tree.nh
        # fixed message layouts (doubles per part)
        self._vel_len = msg.velocity_len(nh)
        self._red_len = msg.reduction_len(nh)
        self._sol_len = msg.solution_len(nh)
        self._v_len = np.full(P, 6)
        self._redm_len = msg.momentum_reduction_len(nh)
        self._solm_len = msg.momentum_solution_len(nh)
        self.nparts = P
        self.imbalance = None
        if self.rank == 0:
            if pt is not None:
                loads = pt.rank_loads(self.size)
                self.imbalance = float(loads.max() / loads.mean())   # modelled rank loads, max / mean
            self.tree = tree
            self.nh = nh
            order = [np.flatnonzero(self.owner == r) for r in range(self.size)]
            self._order = order
            self._perm = np.concatenate(order)         # parts in rank-major order
            # where each part's message starts in the gathered (rank-major) buffers
            self._off = {}
            for key, lens in (("vel", self._vel_len), ("red", self._red_len), ("sol", self._sol_len)):
                off = np.zeros(P, dtype=np.int64)
                off[self._perm] = np.concatenate(([0], np.cumsum(lens[self._perm])[:-1]))
                self._off[key] = off
            self._sol_total = int(np.sum(self._sol_len))
            if gather:
                vs = [build_vsel(model, pt, int(k)) for k in self._perm]
                self._qdd_index = RunIndex(np.concatenate(vs) if vs else np.zeros(0, dtype=np.int64))
                vlen = {int(k): v.size for k, v in zip(self._perm, vs)}
                self._qdd_counts = [int(sum(vlen[int(k)] for k in order[r])) for r in range(self.size)]
                # the joints' velocities (where F_T goes): qdd's but for the modes
                self._jv_index, self._jv_counts = self._qdd_index, self._qdd_counts
                if model.flexible is not None:
                    js = [index_ranges(model.idx_v[b], model.nv_j[b])
                          for b in (pt.bodies(int(k)) for k in self._perm)]
                    self._jv_index = RunIndex(np.concatenate(js) if js else np.zeros(0, dtype=np.int64))
                    jlen = {int(k): v.size for k, v in zip(self._perm, js)}
                    self._jv_counts = [int(sum(jlen[int(k)] for k in order[r])) for r in range(self.size)]
                qs = [build_qsel(model, pt, int(k)) for k in self._perm]
                self._q_index = RunIndex(np.concatenate(qs) if qs else np.zeros(0, dtype=np.int64))
                qlen = {int(k): v.size for k, v in zip(self._perm, qs)}
                self._q_counts = [int(sum(qlen[int(k)] for k in order[r])) for r in range(self.size)]
                # to gather joint wrenches: the bodies in rank-major order, every joint's nv and
                # the joint names (generated ones cost nothing per body); the model itself only
                # where the caller holds it anyway
                self._body_index = np.concatenate([pt.bodies(int(k)) for k in self._perm])
                self._body_counts = [int(sum(pt.sizes[k] for k in order[r])) for r in range(self.size)]
                self._nv_j = np.asarray(model.nv_j, dtype=np.int8)
                self._names = _JointIndex(model.n, model.joint_names)
                self._model = model_or_loader if isinstance(model_or_loader, Model) else None
        self._setup_root(root, int(fanin), tree)
        self._counts = {key: [int(arr[self.owner == r].sum()) for r in range(self.size)]
                        for key, arr in (("vel", self._vel_len), ("red", self._red_len),
                                         ("sol", self._sol_len), ("v", self._v_len),
                                        ("redm", self._redm_len), ("solm", self._solm_len))}
        self._totals = {key: int(sum(c)) for key, c in self._counts.items()}
        self._displs = {key: np.concatenate(([0], np.cumsum(c)[:-1])).astype(int).tolist()
                        for key, c in self._counts.items()}
        self._crossing = {}

    def __repr__(self):
        return (f"<MPIEngine rank {self.rank} of {self.size}: {self.n} bodies in {self.nparts} parts, "
                f"{len(self.parts)} on this rank>")

    def _setup_root(self, root, fanin, tree):
        """Decide the root (on rank 0, broadcast) and, for the tree, send each rank its share of
        the plan (``hierarchical_root.Plan.rank_piece``) and duplicate the communicator for its
        point-to-point messages."""
        mode = pieces = None
        if self.rank == 0:
            if root == "auto":
                mode = "tree" if self.nparts >= TREE_ROOT_MIN_PARTS else "flat"
            else:
                mode = root
            if tree.loops is not None:          # loops at the root: the flat root only
                mode = "flat"
            if mode == "tree":
                plan = HR.make_plan(tree, self.owner, fanin)
                pieces = [plan.rank_piece(r) for r in range(self.size)]
                depth = plan.depth
        mode = self.comm.bcast(mode, root=0)
        self.root_mode = mode
        self.root_stats = {}
        self._piece = None
        if mode == "tree":
            self._piece = self.comm.scatter(pieces, root=0)
            self.root_stats["depth"] = self.comm.bcast(depth if self.rank == 0 else None, root=0)
            self.root_stats["fanin"] = fanin
            self._tcomm = self.comm.Dup()

    def _tree_round(self, rels, top):
        """One round of the hierarchical root over this rank's parts: ``rels`` part -> its
        Relation; returns part -> its inputs (``hierarchical_root.run_down``).  Sends are
        non-blocking (isend), receives blocking in the plan's order; both sweeps complete here."""
        from mpi4py import MPI

        comm, reqs = self._tcomm, []

        def send(dest, node, obj):            # counts what this rank sends
            self._bytes += 8 * (obj.doubles if isinstance(obj, HR.Relation) else obj.size)
            reqs.append(comm.isend(obj, dest=dest, tag=int(node)))

        def recv(source, node):
            if not self._nonblocking:
                return comm.recv(source=source, tag=int(node))
            return wait_for(comm.irecv(source=source, tag=int(node)), self.wait, pickled=True)

        recs = HR.run_up(self._piece, rels, top, send, recv, self.root_stats)
        out = HR.run_down(self._piece, recs, send, recv)
        MPI.Request.waitall(reqs)
        return out

    # ------------------------------------------------------------------ helpers
    def _gatherv(self, send, recv):
        """Gatherv to rank 0, waiting as ``self.wait`` says (:func:`wait_for`)."""
        if self._nonblocking:
            wait_for(self.comm.Igatherv(send, recv, root=0), self.wait)
        else:
            self.comm.Gatherv(send, recv, root=0)

    def _gather(self, key, local):
        """Gatherv of this rank's flat buffer to rank 0; returns the concatenation on rank 0."""
        counts = self._counts[key]
        recv = None
        if self.rank == 0:
            buf = np.empty(self._totals[key])
            recv = [buf, (counts, self._displs[key])]
        self._gatherv(local, recv)
        if self.rank != 0:
            self._bytes += local.nbytes
        return recv[0] if recv is not None else None

    def _scatter(self, key, full):
        counts = self._counts[key]
        out = np.empty(counts[self.rank])
        send = None
        if self.rank == 0:
            send = [full, (counts, self._displs[key])]
        if self._nonblocking:
            wait_for(self.comm.Iscatterv(send, out, root=0), self.wait)
        else:
            self.comm.Scatterv(send, out, root=0)
        if self.rank != 0:
            self._bytes += out.nbytes
        return out

    def _split(self, buf, lens):
        """Rank-major buffer -> dict part -> flat piece."""
        out = {}
        o = 0
        for k in self._perm:
            L = int(lens[k])
            out[int(k)] = buf[o:o + L]
            o += L
        return out

    # ------------------------------------------------------------------ one evaluation
    def forward_dynamics(self, q, qd, tau, f_ext=None, gather=None, active=None, qdd_active=None):
        """q, qd, tau: full vectors on every rank (each rank reads only its parts' entries);
        f_ext: None or (n, 6) external body wrenches (body coordinates), also full on every rank;
        with flexible bodies, loads at their nodes too, packed by
        ``partree.algorithms.flexible_dynamics.flexible_loads`` (the same on every rank).
        ``gather``: collect qdd on rank 0 (default: the engine's ``gather``).  Returns qdd on
        rank 0 when gathered, else None; each rank's pieces stay in ``local_qdd``.

        Hybrid dynamics (``partree.hybrid_dynamics``): ``active`` flags the joints whose
        acceleration is given, a boolean mask of (n,) on every rank, or joint names (rank 0
        turns them into the mask, with the joint names it keeps for gathering, and broadcasts
        it); ``qdd_active`` (nv,) on every rank holds those accelerations (read at the active
        joints only, as ``tau`` is then read at the others only).  Returns (qdd, tau) on rank 0,
        the full vectors; the pieces stay in ``local_qdd`` and ``local_tau``.  The rounds and
        the boundary messages are those of forward dynamics."""
        gather = self._gather_flag(gather)
        with AbortOnError(self.comm):
            hyb = None if active is None else (self._active_mask(active), qdd_active)
            return self._fd(q, qd, tau, f_ext, gather, hyb)

    def _active_mask(self, active):
        """The (n,) flags of ``active`` (a mask, or joint names resolved on rank 0 and broadcast)."""
        from types import SimpleNamespace

        from ..algorithms.hybrid_dynamics import active_mask

        if self.nloops:
            raise PartreeInputError(f"model {self.model_name!r} has {self.nloops} loops: hybrid dynamics (active "
                                    f"joints) is for trees")
        if not isinstance(active, (str, set, frozenset)) and np.asarray(active).dtype == np.bool_:
            return active_mask(SimpleNamespace(n=self.n, name=self.model_name, joint_names=()), np.asarray(active))
        mask = None
        if self.rank == 0:
            if not hasattr(self, "_names"):
                raise PartreeInputError("joint names for active need the engine's joint names (gather=True); pass a "
                                        "boolean mask of the joints instead")
            mask = active_mask(SimpleNamespace(n=self.n, name=self.model_name, joint_names=self._names.joint_names),
                               active)
        return self.comm.bcast(mask, root=0)

    def constraint_forces(self, q, qd, tau, f_ext=None, gather=None, active=None, qdd_active=None):
        """The constraint force algorithm over the ranks (collective; arguments as for
        ``forward_dynamics``).  Each part computes its joint wrenches right after its
        back-substitution: no further message between the ranks.  Returns on rank 0, when
        gathered, a ``CFAResult`` equal to ``partree.cfa``'s (None elsewhere); every rank keeps
        its parts' (F, F_S, F_T) in ``local_wrenches`` (in the order of ``parts``).  For a model
        with closed loops the wrenches include the loop forces and the result also holds
        ``loop_multipliers`` and ``loop_force`` (as ``partree.constrained_dynamics``).  With
        ``active`` and ``qdd_active`` (as :meth:`forward_dynamics` takes them): hybrid dynamics'
        result, as ``partree.hybrid_dynamics(..., return_forces=True)`` gives it."""
        gather = self._gather_flag(gather)
        with AbortOnError(self.comm):
            if active is None:
                qdd = self._fd(q, qd, tau, f_ext, gather)
            else:
                qdd = self._fd(q, qd, tau, f_ext, gather, (self._active_mask(active), qdd_active))
                qdd = qdd[0] if qdd is not None else None
            self.local_wrenches = [tuple(x.copy() for x in pk.wrenches()) for pk in self.parts]
            if not gather:
                return None
            res = self._gather_wrenches(np.asarray(q, dtype=np.float64), qdd)
            if self.nloops:         # the loops' multipliers and wrenches: O(loops), pickled
                pieces = self.comm.gather([pk.loop_pieces() for pk in self.parts], root=0)
                if self.rank == 0:
                    attach_loop_forces(res, self.nloops, [x for rank in pieces for x in rank] + R.root_pieces(self.tree))
            return res

    def _gather_flag(self, gather):
        gather = self.gather if gather is None else bool(gather)
        if gather and not self.gather:
            raise ValueError("this engine was built with gather=False: it keeps no index to gather with;"
                             " build it with gather=True")
        return gather

    def _gather_to_root(self, local, counts):
        """Gatherv of this rank's (O(N)) piece to rank 0 in rank-major order; counts on rank 0."""
        recv = None
        if self.rank == 0:
            recv = [np.empty(sum(counts)), (counts, np.concatenate(([0], np.cumsum(counts)[:-1])).tolist())]
        self._gatherv(np.ascontiguousarray(local), recv)
        return recv[0] if recv is not None else None

    def _gather_wrenches(self, q, qdd):
        from ..algorithms.cfa import CFAResult, constraint_layout

        # the constraint rows travel too unless rank 0 holds the model (then they are formed there
        # when first asked for); every rank must take part in the same gathers
        with_rows = bool(self.comm.bcast(self._model is None if self.rank == 0 else None, root=0))
        pieces = list(zip(*self.local_wrenches)) if self.parts else [[], [], []]
        cat = [np.concatenate([np.ravel(x) for x in p]) if len(p) else np.zeros(0) for p in pieces]
        nvj = ns_counts = None
        if self.rank == 0:
            nvj = self._nv_j
            ns_b = 6 - nvj[self._body_index].astype(np.int64)           # rank-major body order
            per_rank = np.split(ns_b, np.cumsum(self._body_counts)[:-1])
            ns_counts = [int(x.sum()) for x in per_rank]
        Fb = self._gather_to_root(cat[0], None if nvj is None else [6 * c for c in self._body_counts])
        FSb = self._gather_to_root(cat[1], ns_counts)
        FTb = self._gather_to_root(cat[2], None if nvj is None else self._jv_counts)
        Wb = None
        if with_rows:
            rows = [pk.constraint_rows.ravel() for pk in self.parts]
            Wb = self._gather_to_root(np.concatenate(rows) if rows else np.zeros(0),
                                      None if nvj is None else [6 * c for c in ns_counts])
        if self.rank != 0:
            return None
        n = self.n
        ns_j, idx_s = constraint_layout(nvj)
        srows = index_ranges(idx_s[self._body_index], ns_b)
        F = np.empty((n, 6))
        F[self._body_index] = Fb.reshape(-1, 6)
        FS = np.empty(int(ns_j.sum()))
        FS[srows] = FSb
        FT = np.empty(self._jv_index.size)
        self._jv_index.put(FT, FTb)
        Wt = None
        if Wb is not None:
            Wt = np.empty((FS.size, 6))
            Wt[srows] = Wb.reshape(-1, 6)
        owner = self._model if self._model is not None else self._names
        return CFAResult(owner, "parallel-mpi", qdd, FS, FT, F, q.copy(), idx_s, ns_j, [], Wt)

    def correction_step_local(self, qs, qds, rows):
        """One step of the loops' corrections over this rank's parts (collective; see
        :mod:`partree.parallel.correction`): each local part's dx (copies) with J dx = -Phi
        (``rows='position'``) or -J qd (``'velocity'``) in the mass metric, and max abs(Phi) over
        every loop (an allreduce: every rank gets the same)."""
        from mpi4py import MPI

        out = self.evaluate_local(qs, qds, [np.zeros(pk.nv) for pk in self.parts], None, rows=rows)
        err = max([pk.loop_violation() for pk in self.parts] + [R.root_violation(self.tree) if self.rank == 0 else 0.0])
        return [x.copy() for x in out], float(self.comm.allreduce(err, op=MPI.MAX))

    def evaluate_local(self, qs, qds, taus, fs=None, rows="dynamics", actives=None, qdds=None):
        """One evaluation over this rank's parts (collective): the engine's four boundary messages
        and nothing else.  ``qs``, ``qds``, ``taus`` (and ``fs``, or None): each local part's own
        slices, in the order of ``parts``.  Returns each part's qdd (views of the parts'
        workspaces: copy what must outlive the next evaluation).  Sets ``last_boundary_bytes``
        (what this rank sent to / received from rank 0) and ``phase_seconds``.

        Hybrid dynamics: ``actives`` (each local part's (m,) flags of the joints whose
        acceleration is given) and ``qdds`` (each part's (nv,) accelerations, read at those
        joints; ``taus`` are then read at the others only).  Returns each part's (qdd, tau), both
        full for the part (views of its workspace).  The messages are the same."""
        self._bytes = 0
        t = {}
        t0 = time.perf_counter()
        # (a) velocity round
        bufs = []
        for j, pk in enumerate(self.parts):
            check_finite(qs[j], "q", pk)
            check_finite(qds[j], "qd", pk)
            bufs.append(msg.pack_velocity(*pk.velocity(qs[j], qds[j])))
        t["local_velocity"] = time.perf_counter() - t0
        tree_root = self.root_mode == "tree"
        if tree_root:
            ids = self.local_ids.tolist()
            x = self._tree_round({k: HR.part_velocity_relation(self._piece.leaves[k],
                                                               msg.unpack_velocity(b, pk.H))
                                  for k, b, pk in zip(ids, bufs, self.parts)}, np.zeros(6))
            v_loc = np.array([x[k] for k in ids]).reshape(-1, 6)
        else:
            allv = self._gather("vel", np.concatenate(bufs) if bufs else np.zeros(0))
            vin_full = None
            if self.rank == 0:
                if self.tree.loops is None:
                    v_in = R.compose_packed(self.tree, allv, self._off["vel"])
                else:
                    pieces = self._split(allv, self._vel_len)
                    vel = [msg.unpack_velocity(pieces[k], int(self.nh[k])) for k in range(self.nparts)]
                    v_in = R.compose_velocities(self.tree, vel)
                vin_full = np.ascontiguousarray(v_in[self._perm]).ravel()
            v_loc = self._scatter("v", vin_full).reshape(-1, 6)
        t1 = time.perf_counter()
        # (b) reduction round
        bufs = []
        for j, pk in enumerate(self.parts):
            fl = None if fs is None else fs[j]
            if fl is not None:
                check_finite(fl, "f_ext", pk)
            if actives is None:
                check_finite(taus[j], "tau", pk)
                M, m0, Kt, Psi, Lam, beta = pk.reduce(v_loc[j], taus[j], fl, rows=rows)
            else:
                dof = pk.dof_flags(actives[j])
                check_finite(np.where(dof, 0.0, taus[j]), "tau", pk)
                check_finite(np.where(dof, qdds[j], 0.0), "qdd_active", pk)
                M, m0, Kt, Psi, Lam, beta = pk.reduce(v_loc[j], taus[j], fl, rows=rows, active=actives[j],
                                                      qdd=qdds[j])
            bufs.append(msg.pack_reduction(M, m0, Kt, Lam, beta) if not tree_root
                        else HR.part_relation(self._piece.leaves[ids[j]], (M, m0, Kt, Psi, Lam, beta)))
        t["local_reduce"] = time.perf_counter() - t1
        if tree_root:
            tr = time.perf_counter()
            x = self._tree_round(dict(zip(ids, bufs)), self.a0 if rows == "dynamics" else np.zeros(6))
            t["root_solve"] = time.perf_counter() - tr
            t2 = time.perf_counter()
            out = []
            for k, pk in zip(ids, self.parts):
                qdd = pk.solve(x[k][:6], x[k][6:].reshape(pk.H, 6))
                out.append(qdd if actives is None else (qdd, pk.joint_forces))
            t["local_solve"] = time.perf_counter() - t2
            self.last_boundary_bytes = self._bytes
            self.phase_seconds = t
            return out
        allr = self._gather("red", np.concatenate(bufs) if bufs else np.zeros(0))
        sol_full = None
        if self.rank == 0:
            tr = time.perf_counter()
            a0 = self.a0 if rows == "dynamics" else np.zeros(6)
            if self.tree.loops is None:
                a_in, g = R.solve_packed(self.tree, allr, self._off["red"], a0)
                sol_full = R.pack_solutions(self.tree, a_in, g, self._off["sol"], self._sol_total)
            else:
                pieces = self._split(allr, self._red_len)
                red = [msg.unpack_reduction(pieces[k], int(self.nh[k])) for k in range(self.nparts)]
                a_in, g = R.solve(self.tree, red, a0, rows=rows)
                sol_full = np.concatenate([msg.pack_solution(a_in[k], g[k]) for k in self._perm])
            t["root_solve"] = time.perf_counter() - tr
        sol = self._scatter("sol", sol_full)
        t2 = time.perf_counter()
        # (c) back-substitution
        out = []
        o = 0
        for pk in self.parts:
            a_in, g = msg.unpack_solution(sol[o:], pk.H)
            o += msg.solution_len(pk.H)
            qdd = pk.solve(a_in, g)
            out.append(qdd if actives is None else (qdd, pk.joint_forces))
        t["local_solve"] = time.perf_counter() - t2
        self.last_boundary_bytes = self._bytes
        self.phase_seconds = t
        return out

    def momentum_local(self, qs, ps, fs=None):
        """The momentum form over this rank's parts (collective; see
        ``SerialEngine.momentum_rhs``): three rounds as for an evaluation, at rest with the
        momenta p as joint forces, the gravity field in place of the incoming velocity, the parts'
        totals of gravity and external wrenches added to the reduction messages and the child
        parts' totals to the solution messages (``messages.momentum_*``).  ``qs``, ``ps`` (and
        ``fs``, or None): each local part's own slices.  Returns each part's (v, pdot) without the
        joint forces (views of the parts' workspaces).  The engine must be built with ``poses``."""
        if self.flexible:
            raise PartreeInputError(f"the momentum form {NOT_BUILT}; model {self.model_name!r} has flexible bodies")
        check_momentum_parts(self.nloops, self.parts)
        self._bytes = 0
        bufs = []
        for j, pk in enumerate(self.parts):
            check_finite(qs[j], "q", pk)
            check_finite(ps[j], "p", pk)
            bufs.append(msg.pack_velocity(*pk.velocity(qs[j], np.zeros(pk.nv))))
        if self.root_mode == "tree":
            return self._momentum_tree(bufs, ps, fs)
        allv = self._gather("vel", np.concatenate(bufs) if bufs else np.zeros(0))
        gin_full = vel = None
        if self.rank == 0:
            pieces = self._split(allv, self._vel_len)
            vel = [msg.unpack_velocity(pieces[k], int(self.nh[k])) for k in range(self.nparts)]
            g_in = R.compose_field(self.tree, vel, -self.a0)
            gin_full = np.ascontiguousarray(g_in[self._perm]).ravel()
        g_loc = self._scatter("v", gin_full).reshape(-1, 6)
        bufs = []
        zero = np.zeros(6)
        for j, pk in enumerate(self.parts):
            fl = None if fs is None else fs[j]
            if fl is not None:
                check_finite(fl, "f_ext", pk)
            M, m0, Kt, Psi, Lam, beta = pk.reduce(zero, ps[j], None, rows="position")
            up = pk.momentum_forces(g_loc[j, 3:], fl)
            bufs.append(np.concatenate((msg.pack_reduction(M, m0, Kt, Lam, beta), up)))
        allr = self._gather("redm", np.concatenate(bufs) if bufs else np.zeros(0))
        sol_full = None
        if self.rank == 0:
            pieces = self._split(allr, self._redm_len)
            red = [msg.unpack_reduction(pieces[k][:-6], int(self.nh[k])) for k in range(self.nparts)]
            a_in, g = R.solve(self.tree, red, zero, rows="position")
            Fh = R.subtree_totals(self.tree, vel, [pieces[k][-6:] for k in range(self.nparts)])
            sol_full = np.concatenate([msg.pack_momentum_solution(a_in[k], g[k], Fh[k]) for k in self._perm])
        sol = self._scatter("solm", sol_full)
        out = []
        o = 0
        for pk in self.parts:
            a_in, g, Fh = msg.unpack_momentum_solution(sol[o:], pk.H)
            o += msg.momentum_solution_len(pk.H)
            pk.solve(a_in, g)
            out.append(pk.momentum_rate(Fh))
        self.last_boundary_bytes = self._bytes
        return out

    def _momentum_tree(self, bufs, ps, fs):
        """:meth:`momentum_local`'s rounds through the hierarchical root, from the parts'
        velocity messages ``bufs``: the gravity field down the reduction tree, the reduction at
        rest solved up and down it, and the sums of the parts' totals (a third round of the
        same tree, ``hierarchical_root.part_totals_relation``)."""
        ids = self.local_ids.tolist()
        leaves = self._piece.leaves
        vel = {k: msg.unpack_velocity(b, pk.H) for k, b, pk in zip(ids, bufs, self.parts)}
        x = self._tree_round({k: HR.part_field_relation(leaves[k], vel[k]) for k in ids}, -self.a0)
        zero = np.zeros(6)
        rels, tots = {}, {}
        for j, (k, pk) in enumerate(zip(ids, self.parts)):
            fl = None if fs is None else fs[j]
            if fl is not None:
                check_finite(fl, "f_ext", pk)
            rels[k] = HR.part_relation(leaves[k], pk.reduce(zero, ps[j], None, rows="position"))
            tots[k] = HR.part_totals_relation(leaves[k], vel[k], pk.momentum_forces(x[k][3:], fl))
        sol = self._tree_round(rels, zero)
        tot = self._tree_round(tots, zero)
        out = []
        for k, pk in zip(ids, self.parts):
            pk.solve(sol[k][:6], sol[k][6:].reshape(pk.H, 6))
            out.append(pk.momentum_rate(tot[k][6:].reshape(pk.H, 6)))
        self.last_boundary_bytes = self._bytes
        return out

    def _force_slices(self, f_ext):
        """Each local part's slice of the external wrenches (n, 6) (checked), or None; with flexible
        bodies, loads at nodes too: each local part's :class:`~.flexible_part.PartLoads` of a
        :class:`~partree.algorithms.flexible_dynamics.FlexibleLoads`."""
        if f_ext is None:
            return None
        if self.flexible and isinstance(f_ext, FlexibleLoads):
            if f_ext.n != self.n:
                raise PartreeInputError(f"f_ext: loads checked for a model of {f_ext.n} bodies given to an engine of "
                                        f"{self.n}")
            return [part_forces(f_ext, pk.bix) for pk in self.parts]
        if self.flexible and isinstance(f_ext, dict):
            raise PartreeInputError("f_ext as a dict: an MPIEngine's ranks hold parts, not the model, so they "
                                    "cannot check loads by name; pass "
                                    "partree.algorithms.flexible_dynamics.flexible_loads(model, f_ext), built where "
                                    "the model is (the same on every rank), or the (n, 6) wrenches at the body "
                                    "origins")
        f_ext = np.asarray(f_ext, dtype=np.float64)
        if f_ext.shape != (self.n, 6):
            raise PartreeInputError(f"f_ext has shape {f_ext.shape}, expected ({self.n}, 6) body wrenches [n; f]")
        return [f_ext[pk.bix] for pk in self.parts]

    def momentum_rhs(self, q, p, tau=None, f_ext=None):
        """The equations of motion in generalized momenta over the ranks (collective; see
        :meth:`momentum_local`): (qdot, pdot) gathered to rank 0, None on the other ranks.  The
        engine must be built with ``poses`` and ``gather``."""
        from ..algorithms.momentum_rhs import configuration_rate_kernel

        if not self.gather:
            raise PartreeInputError("momentum_rhs gathers its result: build the engine with gather=True")
        q = np.asarray(q, dtype=np.float64)
        p = np.asarray(p, dtype=np.float64)
        tau = np.zeros(self.nv) if tau is None else np.asarray(tau, dtype=np.float64)
        for x, nm, size in ((q, "q", self.nq), (p, "p", self.nv), (tau, "tau", self.nv)):
            if x.shape != (size,):
                raise PartreeInputError(f"{nm} has shape {x.shape}, expected ({size},)")
        fs = self._force_slices(f_ext)
        out = self.momentum_local([q[pk.qix] for pk in self.parts], [p[pk.vix] for pk in self.parts], fs)
        qdot, pdot = [], []
        for pk, (v, pd) in zip(self.parts, out):
            qd_k = np.empty(pk.nq)
            configuration_rate_kernel(pk.jtype, pk.idx_q, pk.idx_v, np.ascontiguousarray(q[pk.qix]), v, qd_k)
            qdot.append(qd_k)
            pdot.append(pd + tau[pk.vix])
        cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0))
        bq = self._gather_to_root(cat(qdot), self._q_counts if self.rank == 0 else None)
        bp = self._gather_to_root(cat(pdot), self._qdd_counts if self.rank == 0 else None)
        if self.rank != 0:
            return None
        qd_full = np.empty(self.nq)
        self._q_index.put(qd_full, bq)
        pd_full = np.empty(self.nv)
        self._qdd_index.put(pd_full, bp)
        return qd_full, pd_full

    def _fd(self, q, qd, tau, f_ext, gather, hyb=None):
        """One evaluation from full vectors; ``hyb``: None, or (mask (n,), qdd_active) of hybrid
        dynamics (then (qdd, tau) on rank 0)."""
        t0 = time.perf_counter()
        q = np.asarray(q, dtype=np.float64)
        qd = np.asarray(qd, dtype=np.float64)
        tau = np.asarray(tau, dtype=np.float64)
        checked = [(q, "q", self.nq), (qd, "qd", self.nv), (tau, "tau", self.nv)]
        actives = qdds = None
        if hyb is not None:
            mask, qdd_a = hyb[0], np.asarray(hyb[1], dtype=np.float64)
            checked.append((qdd_a, "qdd_active", self.nv))
            actives = [mask[pk.bix] for pk in self.parts]
            qdds = [qdd_a[pk.vix] for pk in self.parts]
        for x, nm, size in checked:
            if x.shape != (size,):
                raise PartreeInputError(f"{nm} has shape {x.shape}, expected ({size},)")
        fs = self._force_slices(f_ext)
        local = self.evaluate_local([tq(q) for tq, _ in self._take], [tv(qd) for _, tv in self._take],
                                    [tv(tau) for _, tv in self._take], fs, actives=actives, qdds=qdds)
        if hyb is not None:
            self.local_tau = [x[1].copy() for x in local]
            local = [x[0] for x in local]
        # one copy of the parts' qdd out of their workspaces, which the gather sends as it is
        flat = np.concatenate(local) if local else np.zeros(0)
        self.local_qdd = np.split(flat, np.cumsum([x.size for x in local])[:-1]) if local else []
        t = dict(self.phase_seconds)
        boundary_bytes = self.last_boundary_bytes
        qdd = None
        gather_bytes = 0
        if gather:
            local = flat
            buf = self._gather_to_root(local, self._qdd_counts if self.rank == 0 else None)
            gather_bytes = local.nbytes
            if self.rank == 0:
                qdd = np.empty(self.nv)
                self._qdd_index.put(qdd, buf)
            if hyb is not None:
                local = np.concatenate(self.local_tau) if self.local_tau else np.zeros(0)
                buf = self._gather_to_root(local, self._qdd_counts if self.rank == 0 else None)
                gather_bytes += local.nbytes
                if self.rank == 0:
                    tau_full = np.empty(self.nv)
                    self._qdd_index.put(tau_full, buf)
                    qdd = (qdd, tau_full)
        t["total"] = time.perf_counter() - t0
        # boundary bytes: what this rank sent to / received from rank 0; rank 0 reports the total
        info = {"rank": self.rank, "ranks": self.size, "nparts": self.nparts, "local_parts": self.local_ids.tolist(),
                "boundary_bytes_rank": boundary_bytes, "gather_bytes_rank": gather_bytes, "times": t}
        # (the hierarchical root counts what each rank sends, rank 0 included)
        # the layout of the messages is fixed, so is what crosses: summed over the ranks once per
        # kind of evaluation (every rank takes the same branch), not a collective per evaluation
        kind = hyb is not None
        if kind not in self._crossing:
            self._crossing[kind] = self.comm.reduce(boundary_bytes if self.rank or self.root_mode == "tree" else 0,
                                                    root=0)
        tot = self._crossing[kind]
        if self.rank == 0:
            info["boundary_bytes"] = int(tot)      # bytes that crossed between ranks
            info["boundary_payload_bytes"] = 8 * sum(sum(c) for c in self._counts.values())
        self.last_info = info
        return qdd


class _JointIndex:
    """The joint names of a model without the model (what a gathered ``CFAResult`` needs on rank
    0 to look joints up by name)."""

    joint_id = Model.joint_id

    def __init__(self, n, joint_names):
        self.n = n
        self.joint_names = joint_names


def build_vsel(model, pt, k):
    """Part k's velocity coordinates in the full vector (its modal ones too, for a model with
    flexible bodies: ``flexible_part.own_selections``)."""
    b = pt.bodies(k)
    if model.flexible is not None:
        return own_selections(model, b)[1]
    return index_ranges(model.idx_v[b], model.nv_j[b])


def build_qsel(model, pt, k):
    """Part k's configuration coordinates in the full vector (as ``build_vsel``)."""
    b = pt.bodies(k)
    if model.flexible is not None:
        return own_selections(model, b)[0]
    return index_ranges(model.idx_q[b], model.nq_j[b])


def momentum_rhs_mpi(model_or_loader, q, p, tau=None, comm=None, parts=None, path_weight=PATH_WEIGHT, f_ext=None):
    """One momentum-form evaluation over MPI (``MPIEngine.momentum_rhs``; collective)."""
    eng = MPIEngine(model_or_loader, comm=comm, parts=parts, path_weight=path_weight, poses=True)
    return eng.momentum_rhs(q, p, tau, f_ext)


def _checked_engine(model_or_loader, q, qd, tau, comm, parts, f_ext, path_weight, gather, hybrid=None):
    """An engine for a one-off call: the model built and the arguments checked on every rank
    before any partitioning.  ``hybrid``: None, or (active, qdd_active) of hybrid dynamics,
    checked too; returns the engine, the active joints' mask (None without ``hybrid``) and the
    external loads as the engine takes them (with flexible bodies, loads at nodes packed:
    ``flexible_part.engine_forces``)."""
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    mask = None
    with AbortOnError(comm):
        from . import check_arguments

        model = _resolve(model_or_loader)
        if hybrid is None:
            check_arguments(model, q, qd, tau, parts, f_ext, "mpi")
        else:
            from .part import hybrid_arguments

            check_arguments(model, q, qd, None, parts, f_ext, "mpi")
            mask = hybrid_arguments(model, hybrid[0], hybrid[1], tau)[0]
        if model.flexible is not None and f_ext is not None:
            from .flexible_part import engine_forces

            F, has_f = engine_forces(model, f_ext)
            f_ext = F if has_f else None
    return MPIEngine(model, comm=comm, parts=parts, path_weight=path_weight, gather=gather), mask, f_ext


def constraint_forces_mpi(model_or_loader, q, qd, tau, comm=None, parts=None, path_weight=PATH_WEIGHT, f_ext=None,
                          active=None, qdd_active=None):
    """The constraint force algorithm over MPI (collective over ``comm``, default COMM_WORLD):
    a ``CFAResult`` on rank 0, None on the others.  Arguments as for ``forward_dynamics_mpi``."""
    hybrid = None if active is None else (active, qdd_active)
    eng, mask, f_ext = _checked_engine(model_or_loader, q, qd, tau, comm, parts, f_ext, path_weight, True, hybrid)
    if hybrid is None:
        return eng.constraint_forces(q, qd, tau, f_ext)
    return eng.constraint_forces(q, qd, tau, f_ext, active=mask, qdd_active=qdd_active)


def forward_dynamics_mpi(model_or_loader, q, qd, tau, comm=None, parts=None, gather=True, return_info=False,
                         path_weight=PATH_WEIGHT, f_ext=None, active=None, qdd_active=None):
    """Forward dynamics over MPI (collective over ``comm``, default COMM_WORLD).

    ``model_or_loader``: a Model, a zero-argument callable building it, or a spec string; every rank
    builds it and keeps only its parts.  ``q, qd, tau``: full vectors on every rank.
    Returns qdd on rank 0 (None on the others); with ``return_info`` a pair (qdd, info) where
    info holds the bytes communicated per evaluation and the phase times.  ``active``,
    ``qdd_active``: hybrid dynamics (see ``MPIEngine.forward_dynamics``; names are resolved on
    every rank, which builds the model here); then (qdd, tau) in place of qdd.
    """
    hybrid = None if active is None else (active, qdd_active)
    eng, mask, f_ext = _checked_engine(model_or_loader, q, qd, tau, comm, parts, f_ext, path_weight, gather, hybrid)
    if hybrid is None:
        qdd = eng.forward_dynamics(q, qd, tau, f_ext)
    else:
        qdd = eng.forward_dynamics(q, qd, tau, f_ext, active=mask, qdd_active=qdd_active)
    if return_info:
        info = dict(eng.last_info)
        info["setup_time"] = eng.setup_time
        return qdd, info
    return qdd
