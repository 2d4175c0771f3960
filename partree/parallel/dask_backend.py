"""Dask backend (distributed): parts scattered to the workers once and driven through actors.

The client process partitions the model and builds every part (``PartKernel``), then scatters
each part to one worker (largest first onto the least loaded worker) and starts one actor per
worker holding all that worker's parts (objects already in its memory).  Over the socket channel
(``channel='socket'``, the default) the actors form a group over TCP sockets
(:class:`~partree.parallel.sockcomm.SocketComm`) and each builds an MPI engine over its parts
(``MPIEngine.from_parts``): one evaluation is one call per worker, the actors exchanging the
boundary messages among themselves (the momentum form too).  Over the client
(``channel='actors'``) one evaluation is three rounds: the client calls every worker's actor directly (no
scheduler round trip; one call per worker and round for all its parts) for the velocity maps,
composes the parts' incoming velocities, calls the actors for the boundary relations, solves the
root, and calls them for the back-substitution.  Only boundary data (O(P) small matrices) moves.
The state can stay on the workers too (``scatter_state`` / ``forward_dynamics_state``), and the
result with it (``gather=False``: a :class:`DaskResult`); otherwise each part's slices of q, qd,
tau travel with the calls and qdd is gathered back.

Failures.  The client never waits blindly: it waits on each result for ``poll`` seconds at a time
and checks the scheduler's worker list in between.  When a worker holding parts leaves (crash,
kill, nanny restart), the evaluation is restarted from scratch after rebuilding the lost parts
(and their actors and resident states) from the client's model on the workers still alive
(``retries`` times, default 2); when no worker is left, or after ``timeout`` seconds, a
:class:`~partree.errors.DaskEngineError` says what happened.  Exceptions raised inside the
kernels (bad input) are re-raised as they are, not retried.
"""
from __future__ import annotations

import signal
import threading
import time

import numpy as np

from .. import checks
from ..errors import DaskEngineError, PartreeInputError
from . import root as R
from .flexible_part import engine_forces, flexible_state, full_sizes, part_forces, refuse_flexible
from .part import PartLayout, build_part, early_kinematics_wanted, gravity_a0
from .partition import PATH_WEIGHT, make_partition


REJOIN_WAIT = 10.0   # seconds to wait for a worker to (re)join when none is left before giving up
CONNECT_TIMEOUT = 30.0    # seconds the workers of a socket group wait for each other to connect
CHANNELS = ("socket", "actors")


class WorkerLost(Exception):
    """A worker holding parts left during a round (the caller rebuilds and retries, or gives up)."""


def _velocity(pk, q, qd):
    TE, Tr, vrel = pk.velocity(q, qd)
    return TE.copy(), Tr.copy(), vrel.copy()


def _reduce(pk, v_in, tau, f_ext, active=None, qdd=None):
    """The part's reduction; ``active``, ``qdd``: hybrid dynamics (``PartKernel.reduce``)."""
    if active is None:
        return tuple(x.copy() for x in pk.reduce(v_in, tau, f_ext))
    return tuple(x.copy() for x in pk.reduce(v_in, tau, f_ext, active=active, qdd=qdd))


def _solve(pk, a_in, g, wrenches=False, forces=False):
    """The part's back-substitution and its results (:func:`_results`)."""
    return _results(pk, pk.solve(a_in, g), wrenches, forces)


def _results(pk, qdd, wrenches=False, forces=False):
    """What a part returns after its back-substitution (``qdd``, a view of its workspace): qdd,
    or with ``wrenches`` (qdd, F, FS, FT, loop pieces) (see ``PartKernel.wrenches`` and
    ``PartKernel.loop_pieces``), or with ``forces`` (hybrid dynamics) (qdd, the part's joint
    forces); copies."""
    qdd = qdd.copy()
    if forces:
        return qdd, pk.joint_forces.copy()
    if not wrenches:
        return qdd
    return (qdd,) + tuple(x.copy() for x in pk.wrenches()) + (pk.loop_pieces(),)


def _by_part(P, groups, results):
    """The P parts' results in part order from each worker's list (``groups``: (worker, its parts)
    pairs in the order of ``results``)."""
    out = [None] * P
    for (_, ks), r in zip(groups, results):
        for k, x in zip(ks, r):
            out[k] = x
    return out


# graph tasks: the root's steps run on a worker, between the parts' steps
def start_local_cluster(n_workers=2):
    """A LocalCluster of ``n_workers`` single-threaded worker processes, which ignore SIGINT.

    A Ctrl-C in a terminal goes to the whole process group, the workers included; the run stops
    in the client, which then fetches the state from the workers to write the checkpoint, so the
    workers must outlive the signal.  SIGINT is ignored while the worker processes start (they
    keep that setting, and Python installs no KeyboardInterrupt handler in a process that starts
    with SIGINT ignored), then restored in the client.

    Parameters
    ----------
    n_workers : int
        Number of worker processes.

    Returns
    -------
    tuple
        ``(client, cluster)``; close both when done.
    """
    from distributed import Client, LocalCluster

    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None)
    finally:
        if main:
            signal.signal(signal.SIGINT, old)
    try:
        return Client(cluster), cluster
    except BaseException:
        cluster.close()
        raise


class DaskEngine:
    """Forward dynamics and constraint forces over a dask.distributed cluster.

    Parameters
    ----------
    model : Model or str
        The model, or a spec string / model file for :func:`partree.resolve_model`; the client
        keeps it (to rebuild parts lost with a worker).
    client : distributed.Client, optional
        None starts ``LocalCluster(n_workers=workers, threads_per_worker=1)``, closed by
        ``close()``.
    workers : int
        Worker processes of the LocalCluster started when no ``client`` is given.
    parts : int or Partition, optional
        Number of parts, or a partition; default: balanced over the workers.
    path_weight : float
        Extra relative work of a body on a handle path, for the partitioner.
    retries : int
        Restarts of an evaluation after lost workers.
    timeout : float
        Seconds one evaluation may take before it is abandoned with an error.
    poll : float
        Seconds between checks of the workers' liveness while waiting for a round.
    evaluate : bool
        False: only place the parts on the workers, without the evaluation actors, for a caller
        that drives the parts with actors of its own (the distributed simulation).
    poses : bool
        Build the parts for the momentum form too (:meth:`momentum_rhs`; see ``build_part``).
    channel : {'socket', 'actors'}
        How forward dynamics and the constraint forces exchange the boundary data. 'socket' (the
        default): the workers' actors form a group over TCP sockets
        (:class:`~partree.parallel.sockcomm.SocketComm`, rank 0 on the first worker) and run the
        MPI engine's evaluation among themselves (``MPIEngine.from_parts``): one actor call per
        worker and evaluation, the momentum form's too.  'actors': three rounds through the client
        (the workers need not reach each other).
    """

    def __init__(self, model, client=None, parts=None, path_weight=PATH_WEIGHT, retries=2, timeout=600.0,
                 poll=0.25, evaluate=True, workers=2, poses=False, channel="socket"):
        from ..extras import require

        require("distributed", "the Dask backend")
        from ..specs import resolve_model

        # everything that can be checked without the cluster is checked first
        if channel not in CHANNELS:
            raise PartreeInputError(f"channel must be one of {', '.join(CHANNELS)}, not {channel!r}")
        self.channel = channel
        self._group = None             # the socket group's token, once joined (``_join``)
        self._root_pieces = []         # socket channel: the root's loop pieces of the last evaluation
        model = resolve_model(model)
        if client is None and (isinstance(workers, bool) or not isinstance(workers, (int, np.integer))
                               or workers < 1):
            raise PartreeInputError(f"workers must be a positive integer, got {workers!r}")
        pt = None
        if parts is not None:
            pt = make_partition(model, parts, path_weight)
        self._own = None
        if client is None:
            client, cluster = start_local_cluster(int(workers))
            self._own = (client, cluster)
        self.client = client
        self.model = model
        self.retries = int(retries)
        self.timeout = float(timeout)
        self.poll = float(poll)
        self.restarts = 0              # evaluations restarted after lost workers (for reports/tests)
        self._after_round = None       # test hook: called with the round name after each round
        self.last_info = None
        workers = self._workers_or_wait()
        if not workers:
            self.close()
            raise DaskEngineError(f"the Dask cluster has no workers (waited {REJOIN_WAIT:.0f} s for one)")
        if pt is None:
            pt = make_partition(model, None, path_weight, nranks=len(workers))
        self.partition = pt
        self.poses = bool(poses)
        self.tree = R.PartsTree.from_partition(pt, model)
        self.a0 = gravity_a0(model.gravity)
        self._early = early_kinematics_wanted(model, pt, pt.owner_for(len(workers)))
        self.sel = []
        self.layout = []               # each part's place in the model's arrays
        for k in range(pt.nparts):
            pk = build_part(model, pt, k)
            self.sel.append((pk.qix, pk.vix, pk.bix))
            self.layout.append(PartLayout(model, pk))
        self.futures = [None] * pt.nparts
        self.workers = [None] * pt.nparts
        self.evaluates = bool(evaluate)
        self.actors = {}               # worker address -> the actor holding that worker's parts
        self._actor_futs = {}
        self._states = []              # DaskStates of this engine (to re-place after a lost worker)
        # boundary data of one evaluation (what the tasks pass between workers): per part its
        # velocity maps (18 H), incoming velocity (6), boundary relation (M, m0, Kt, Psi, Lam,
        # beta: 42 + 72 H + 36 H^2 + 6 H), a_in (6) and handle wrenches (6 H) doubles
        nh = np.asarray(self.tree.nh, dtype=np.int64)
        self._boundary_bytes = int(8 * np.sum(18 * nh + 6 + 42 + 72 * nh + 36 * nh * nh + 6 * nh + 6 + 6 * nh))
        self._place(workers, list(range(pt.nparts)))

    def __repr__(self):
        nw = len(set(w for w in self.workers if w is not None))
        return (f"<DaskEngine {self.model.name!r}: {self.model.n} bodies in {self.partition.nparts} parts "
                f"on {nw} workers>")

    # ------------------------------------------------------------------ placement
    def _live_workers(self):
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"]) if _has_n_workers(self.client) \
            else sorted(self.client.scheduler_info()["workers"])

    def _place(self, workers, which):
        """(Re)build the parts ``which`` from the model and scatter them over ``workers``.  Returns
        the parts whose worker's actor was (re)built: a state held there must be sent again."""
        owner = self.partition.owner_for(len(workers))
        for k in which:
            self.workers[k] = workers[int(owner[k])]
        for k in which:
            pk = build_part(self.model, self.partition, k, early_kinematics=self._early, poses=self.poses)
            # hash=False: two engines on one client built from the same model would otherwise share
            # content-hashed keys, and releasing one engine's futures could drop the other's parts
            self.futures[k] = self.client.scatter(pk, workers=[self.workers[k]], direct=False, hash=False)
            del pk
        if not self.evaluates:
            return list(which)
        # one actor per worker, holding all the worker's parts (objects already in its memory: no
        # copy): one call per worker and round, not one per part (each call costs a round trip)
        rebuilt = sorted({self.workers[k] for k in which})
        for w in list(self.actors):
            if w not in self.workers:
                self.actors.pop(w)
                self._actor_futs.pop(w)
        for w in rebuilt:
            ks = self._groups()[w]
            self._actor_futs[w] = self.client.submit(_GroupActor, ks, *[self.futures[k] for k in ks], workers=[w],
                                                     allow_other_workers=False, actor=True, pure=False)
        for w in rebuilt:
            self.actors[w] = self._actor_futs[w].result(timeout=self.timeout)
        self._leave()                  # a socket group is formed again before its next evaluation
        return [k for k in range(len(self.futures)) if self.workers[k] in rebuilt]

    def _groups(self):
        """worker address -> its parts (increasing)."""
        g = {}
        for k, w in enumerate(self.workers):
            g.setdefault(w, []).append(k)
        return g

    def _workers_or_wait(self):
        """The workers alive; when there are none (a cluster still starting, a nanny restarting
        its worker), wait up to REJOIN_WAIT seconds for one."""
        workers = self._live_workers()
        t_end = time.monotonic() + REJOIN_WAIT
        while not workers and time.monotonic() < t_end:
            time.sleep(0.2)
            workers = self._live_workers()
        return workers

    def _recover(self):
        workers = self._workers_or_wait()
        if not workers:
            raise DaskEngineError("all Dask workers were lost; cannot continue the evaluation")
        lost = [k for k in range(len(self.futures))
                if self.workers[k] not in workers or self.futures[k].status != "finished"
                or (self.evaluates and (self.workers[k] not in self._actor_futs
                                         or self._actor_futs[self.workers[k]].status != "finished"))]
        if not lost:
            return
        # spread everything again over the workers alive (balanced), rebuilding the lost parts
        owner = self.partition.owner_for(len(workers))
        moved = [k for k in range(len(self.futures)) if k in lost or workers[int(owner[k])] != self.workers[k]]
        for k in moved:
            if k not in lost:
                lost.append(k)
        resend = self._place(workers, sorted(lost))
        for st in self._states:
            st._place(sorted(set(lost) | set(resend)))

    # ------------------------------------------------------------------ rounds
    def forward_dynamics(self, q, qd, tau, f_ext=None, active=None, qdd_active=None):
        """qdd (gathered to the client) for the state (q, qd), joint forces tau and optional
        external body wrenches f_ext, as ``partree.aba`` (with flexible bodies also loads at their
        nodes, as the flexible functions take them; each part gets its bodies' share).

        Hybrid dynamics with ``active`` (a boolean mask over the joints or joint names, as
        ``partree.hybrid_dynamics`` takes it) and ``qdd_active`` ((nv,), read at the active
        joints): returns (qdd, tau), the full vectors ``partree.hybrid_dynamics`` returns.  Each
        part's flags and given accelerations travel with its reduction call; the rounds are the
        same."""
        if active is None:
            return self._evaluate(q, qd, tau, f_ext, wrenches=False)
        return self._hybrid(q, qd, tau, f_ext, active, qdd_active, wrenches=False)

    def _hybrid(self, q, qd, tau, f_ext, active, qdd_active, wrenches):
        from .part import hybrid_arguments

        model = self.model
        q, qd = self._checked_state(q, qd)
        mask, tau, qdd = hybrid_arguments(model, active, qdd_active, tau)
        F, has_f = engine_forces(model, f_ext)
        F = F if has_f else None
        return self._with_retries(lambda deadline: self._fd(q, qd, tau, F, deadline, wrenches, hybrid=(mask, qdd)))

    def constraint_forces(self, q, qd, tau, f_ext=None, active=None, qdd_active=None):
        """The constraint force algorithm over the cluster: a ``CFAResult`` equal to
        ``partree.cfa``'s.  Each part computes its joint wrenches right after its back-substitution
        (same rounds as ``forward_dynamics``); the client gathers them.  With ``active`` and
        ``qdd_active`` (as :meth:`forward_dynamics` takes them): hybrid dynamics' result, as
        ``partree.hybrid_dynamics(..., return_forces=True)`` gives it."""
        if active is None:
            return self._evaluate(q, qd, tau, f_ext, wrenches=True)
        return self._hybrid(q, qd, tau, f_ext, active, qdd_active, wrenches=True)

    def _evaluate(self, q, qd, tau, f_ext, wrenches):
        model = self.model
        q, qd, tau = self._checked_state(q, qd, tau)
        F, has_f = engine_forces(model, f_ext)
        F = F if has_f else None
        return self._with_retries(lambda deadline: self._fd(q, qd, tau, F, deadline, wrenches))

    def _checked_state(self, q, qd, tau=None):
        """(q, qd) or (q, qd, tau) checked: for a model with flexible bodies the full vectors
        [q; eta], [qd; eta_dot], tau of the joints then the modes (``flexible_part``)."""
        model = self.model
        if model.flexible is not None:
            out = flexible_state(model, q, qd, tau)
        else:
            out = list(checks.state(model, q, qd))
            if tau is not None:
                out.append(checks.vector(model, tau, model.nv, "tau", "nv"))
        return tuple(out) if tau is not None else tuple(out[:2])

    def _with_retries(self, evaluate):
        """evaluate(deadline), restarted after lost workers (``retries`` times) once the lost
        parts are rebuilt on the workers still alive."""
        attempt = 0
        while True:
            try:
                return evaluate(time.monotonic() + self.timeout)
            except WorkerLost as e:
                attempt += 1
                if attempt > self.retries:
                    raise DaskEngineError(f"Dask workers lost {attempt} times during one evaluation "
                                          f"(last: {e}); giving up") from None
                self.restarts += 1
                self._recover()

    def _fd(self, q, qd, tau, F, deadline, wrenches=False, hybrid=None):
        """One evaluation with the parts' slices sent with the calls; ``hybrid``: None, or
        (mask (n,), qdd (nv,)) of hybrid dynamics (then (qdd, tau))."""
        sel = self.sel
        P = len(self.futures)
        args = [(q[sel[k][0]], qd[sel[k][1]], tau[sel[k][1]], part_forces(F, sel[k][2])) for k in range(P)]
        if hybrid is not None:
            mask, qdd = hybrid
            args = [a + (mask[sel[k][2]], qdd[sel[k][1]]) for k, a in enumerate(args)]
        if hybrid is not None and not wrenches:
            out = self._rounds(args, deadline, gather=True, forces=True)
            res = self._assemble([x[0] for x in out]), self._assemble([x[1] for x in out])
            self.last_info["state_bytes"] = int(q.nbytes + qd.nbytes + 2 * tau.nbytes + 2 * qdd.nbytes + mask.nbytes
                                                + (0 if F is None else F.nbytes))
            return res
        out = self._rounds(args, deadline, gather=True, wrenches=wrenches)
        if wrenches:
            # after a hybrid solve each part's wrenches take F_T from its full joint forces
            res = self._assemble_wrenches(q, out)
            back = res.qdd.nbytes + res.joint_wrench.nbytes + res.constraint_force.nbytes + res.drive_force.nbytes
        else:
            res = self._assemble(out)
            back = res.nbytes
        sent = 0 if hybrid is None else hybrid[0].nbytes + hybrid[1].nbytes
        self.last_info["state_bytes"] = int(q.nbytes + qd.nbytes + tau.nbytes + (0 if F is None else F.nbytes) + back
                                            + sent)
        return res

    def _rounds(self, args, deadline, gather, wrenches=False, forces=False):
        """The three rounds through the workers' actors: the client calls each worker's actor
        directly (no scheduler round trip per task; one call per worker and round for all its
        parts), composes the velocities and solves the root between the rounds.
        args[k]: arrays (sent with the call: q, qd, tau, f_ext and, for hybrid dynamics, the
        active flags and given accelerations, with ``forces`` asking each part for its joint
        forces too) or a state key (``DaskState``)."""
        P = len(self.futures)
        if any(f.status != "finished" for f in self.futures):
            raise WorkerLost("a part was lost before the evaluation")
        if self.channel == "socket":
            return self._socket_evaluation(args, deadline, gather, wrenches, forces)
        groups = self._groups()
        key = args[0] if P and isinstance(args[0], int) else None

        def per_worker(method, *extra):
            calls = {}
            for w, ks in groups.items():
                x = [[e[k] for k in ks] for e in extra]
                calls[w] = self._actor_call(w, method, ks, key, *x)
            return _by_part(P, groups.items(), self.collect(list(calls.values()), deadline, method))

        nostate = [None] * P
        vel = per_worker("velocity", nostate if key is not None else [a[:2] for a in args])
        v_in = R.compose_velocities(self.tree, vel)
        red = per_worker("reduce", v_in, nostate if key is not None else [a[2:] for a in args])
        a_in, g = R.solve(self.tree, red, self.a0)
        keep = None if gather else self._next_key()
        out = per_worker("solve", a_in, g, [keep] * P, [wrenches] * P, [forces] * P)
        self.last_info = {"boundary_bytes": self._boundary_bytes, "state_bytes": 0, "nparts": P,
                          "workers": len(set(self.workers))}
        return out if gather else DaskResult(self, keep)

    # ------------------------------------------------------------------ the socket channel
    def _join(self, deadline):
        """Form the socket group of the workers' actors (rank r: the r-th worker in address
        order): rank 0 listens, every actor connects and builds its engine over its parts."""
        from .sockcomm import address_host, new_token

        groups = self._groups()
        ws = sorted(groups)
        rank = {w: r for r, w in enumerate(ws)}
        pt, model = self.partition, self.model
        nq, nv = full_sizes(model)
        meta = {"nparts": pt.nparts, "n": model.n, "nq": nq, "nv": nv, "gravity": np.asarray(model.gravity),
                "nh": self.tree.nh, "owner": np.array([rank[w] for w in self.workers], dtype=np.int64),
                "nloops": len(model.loops), "name": model.name, "flexible": model.flexible is not None}
        port = self.collect([self._actor_call(ws[0], "listen")], deadline, "join")[0]
        addr = (address_host(ws[0]), int(port))
        token = new_token()
        calls = [self._actor_call(w, "join", r, len(ws), token, addr, meta, self.tree if r == 0 else None,
                                  pt if r == 0 else None) for r, w in enumerate(ws)]
        self._settle(calls, deadline, "join")
        self._group = token

    def _leave(self):
        """Forget the socket group (the actors close their connections when they join again)."""
        self._group = None

    def _settle(self, calls, deadline, name):
        """The results of calls that run together over the socket group.  When one fails, the
        group is over: the error of the rank that failed on its own is raised (the others' calls
        end with the closed connections), or ``WorkerLost`` when a worker left."""
        from .sockcomm import own_error

        try:
            return self.collect(calls, deadline, name)
        except WorkerLost:
            self._leave()
            raise
        except Exception as first:        # noqa: BLE001 -- sorted out below
            self._leave()
            errors = [first]
            for c in calls:
                try:
                    c.result(timeout=max(min(self.poll * 4, deadline - time.monotonic()), 1e-3))
                except Exception as e:    # noqa: BLE001
                    errors.append(e)
            if not set(self.workers) <= set(self._live_workers()):
                raise WorkerLost(f"a worker left during the {name}") from None
            raise (own_error(errors) or first) from None

    def _socket_evaluation(self, args, deadline, gather, wrenches, forces):
        """One evaluation over the socket group: one actor call per worker (``_GroupActor.evaluate``)."""
        P = len(self.futures)
        if self._group is None:
            self._join(deadline)
        groups = self._groups()
        key = args[0] if P and isinstance(args[0], int) else None
        keep = None if gather else self._next_key()
        if self._after_round is not None:
            self._after_round("dispatch")
        calls = [self._actor_call(w, "evaluate", key, None if key is not None else [args[k] for k in ks], keep,
                                  wrenches, forces) for w, ks in sorted(groups.items())]
        res = self._settle(calls, deadline, "evaluation")
        out = _by_part(P, sorted(groups.items()), [r for r, _ in res])
        for _, root in res:
            if root:
                self._root_pieces = root
        self.last_info = {"boundary_bytes": self._boundary_bytes, "state_bytes": 0, "nparts": P,
                          "workers": len(groups), "channel": "socket"}
        return out if gather else DaskResult(self, keep)

    def momentum_rhs(self, q, p, tau=None, f_ext=None):
        """The equations of motion in generalized momenta over the cluster: (qdot, pdot) gathered
        to the client, equal to ``partree.momentum_rhs``'s (see ``SerialEngine.momentum_rhs``:
        the same rounds, at rest with p as the joint forces, the parts' totals of gravity and
        external wrenches summed up the parts tree between the second and third).  The engine
        must be built with ``poses``."""
        from ..algorithms.momentum_rhs import configuration_rate

        model = self.model
        refuse_flexible(model, "the momentum form")
        if not self.evaluates:
            raise PartreeInputError("this engine has no evaluation actors (evaluate=False)")
        if len(model.loops):
            raise PartreeInputError(f"model {model.name!r} has {len(model.loops)} loops: the momentum form is built "
                                    f"for trees only")
        if not self.poses and self.partition.nparts > 1:
            raise PartreeInputError("this engine's parts were built without poses=True, which the momentum form "
                                    "needs (the gravity field is composed down the parts tree)")
        q, p = checks.state(model, q, p, names=("q", "p"))
        tau = np.zeros(model.nv) if tau is None else checks.vector(model, tau, model.nv, "tau", "nv")
        F, has_f = checks.external_forces(model, f_ext)
        sel = self.sel
        zero = np.zeros(model.nv)

        def evaluate(deadline):
            P = len(self.futures)
            if any(f.status != "finished" for f in self.futures):
                raise WorkerLost("a part was lost before the evaluation")
            groups = self._groups()
            if self.channel == "socket":        # one call per worker: the group's momentum rounds
                if self._group is None:
                    self._join(deadline)
                calls = [self._actor_call(w, "momentum", [(q[sel[k][0]], p[sel[k][1]], F[sel[k][2]] if has_f else None)
                                                          for k in ks]) for w, ks in sorted(groups.items())]
                return _by_part(P, sorted(groups.items()), self._settle(calls, deadline, "evaluation"))

            def per_worker(method, lead, *extra):
                calls = {w: self._actor_call(w, method, ks, *lead, *[[e[k] for k in ks] for e in extra])
                         for w, ks in groups.items()}
                return _by_part(P, groups.items(), self.collect(list(calls.values()), deadline, method))

            vel = per_worker("velocity", (None,), [(q[sel[k][0]], zero[sel[k][1]]) for k in range(P)])
            g_in = R.compose_field(self.tree, vel, -self.a0)
            got = per_worker("momentum_reduce", (), g_in,
                             [(p[sel[k][1]], F[sel[k][2]] if has_f else None) for k in range(P)])
            a_in, g = R.solve(self.tree, [x[0] for x in got], np.zeros(6), rows="position")
            Fh = R.subtree_totals(self.tree, vel, [x[1] for x in got])
            return per_worker("momentum_solve", (), a_in, g, Fh)

        out = self._with_retries(evaluate)
        v = self._assemble([x[0] for x in out])
        pdot = self._assemble([x[1] for x in out]) + tau
        return configuration_rate(model, q, v), pdot

    def _actor_call(self, w, method, *args):
        try:
            return getattr(self.actors[w], method)(*args)
        except RuntimeError as e:            # "Worker holding Actor was lost"
            if "lost" not in str(e):
                raise
            raise WorkerLost(f"worker {w}: {e}") from None

    def _next_key(self):
        self._key = getattr(self, "_key", 0) + 1
        return self._key

    def collect(self, futs, deadline, name):
        """The results of one round's actor calls.  Blocks on each result (no polling loop: on a
        machine with as many cores as workers a client spinning on ``done()`` takes CPU and the
        GIL from the messages it waits for) and checks every ``poll`` seconds that the workers
        are alive and the deadline not passed."""
        needed = set(self.workers)
        out = []
        for f in futs:
            while True:
                now = time.monotonic()
                if now > deadline:
                    raise DaskEngineError(f"the {name} round did not finish within {self.timeout:.0f} s")
                try:
                    out.append(f.result(timeout=min(self.poll, max(deadline - now, 1e-3))))
                    break
                except TimeoutError:
                    alive = set(self._live_workers())
                    if not needed <= alive:
                        raise WorkerLost(f"worker(s) {sorted(needed - alive)} left during the {name} round") from None
                except (OSError,) + _cancel_errors() as e:
                    raise WorkerLost(f"{name} round: {type(e).__name__}: {e}") from None
        if self._after_round is not None:
            self._after_round(name)
        return out

    # ------------------------------------------------------------------ resident state
    def scatter_state(self, q, qd, tau, f_ext=None):
        """Put a state on the workers, each part's slices next to the part: returns a
        :class:`DaskState` for :meth:`forward_dynamics_state`.  The arrays are checked here, once;
        the client keeps references to them (not copies) to rebuild slices lost with a worker."""
        model = self.model
        q, qd, tau = self._checked_state(q, qd, tau)
        F, has_f = engine_forces(model, f_ext)
        return DaskState(self, q, qd, tau, F if has_f else None)

    def forward_dynamics_state(self, state, gather=True):
        """Forward dynamics of a state already on the workers (:meth:`scatter_state`): only
        boundary data crosses the network.  Returns qdd (gathered to the client), or with
        ``gather=False`` a :class:`DaskResult` whose qdd stays on the workers (see
        :class:`DaskResult`)."""
        out = self._state_rounds(state, gather, False)
        return out if not gather else self._assemble(out)

    def constraint_forces_state(self, state, gather=True):
        """The constraint forces of a state already on the workers (:meth:`scatter_state`): a
        ``CFAResult`` gathered to the client, or with ``gather=False`` a :class:`DaskResult` whose
        pieces (every part's qdd, joint wrenches, constraint and drive forces) stay on the workers
        until its ``gather()``."""
        out = self._state_rounds(state, gather, True)
        if not gather:
            out.q = state._arrays[0]
            return out
        return self._assemble_wrenches(state._arrays[0], out)

    def _assemble_wrenches(self, q, out):
        """A ``CFAResult`` from every part's (qdd, F, FS, FT)."""
        from .part import assemble_constraint_forces, attach_loop_forces

        qdd = self._assemble([x[0] for x in out])
        res = assemble_constraint_forces(self.model, q, qdd, self.layout, [x[1:4] for x in out],
                                         method="parallel-dask")
        if len(self.model.loops):
            root = self._root_pieces if self.channel == "socket" else R.root_pieces(self.tree)
            attach_loop_forces(res, len(self.model.loops), [x[4] for x in out] + root)
        return res

    def _state_rounds(self, state, gather, wrenches):
        if state.engine is not self:
            raise ValueError("this DaskState belongs to another engine")

        def evaluate(deadline):
            return self._rounds(state._args(), deadline, gather, wrenches)

        return self._with_retries(evaluate)

    def _assemble(self, parts_qdd):
        qdd = np.empty(full_sizes(self.model)[1])
        for k, x in enumerate(parts_qdd):
            qdd[self.sel[k][1]] = x
        return qdd

    def close(self):
        self.futures = []
        self.actors = {}
        self._actor_futs = {}
        self._states = []
        if self._own is not None:
            client, cluster = self._own
            client.close()
            cluster.close()
            self._own = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _GroupActor:
    """A Dask actor around the parts one worker holds (objects already in its memory): the client
    calls it directly (no scheduler round trip), once per round for all the worker's parts, and it
    keeps states and results next to the parts.  Every method takes the part ids ``ks`` and a state
    key (None: the per-part arguments come with the call) and returns one result per part."""

    def __init__(self, ks, *pks):
        self.pk = dict(zip(ks, pks))
        self.states = {}
        self.results = {}
        self.eng = None             # the socket channel's engine over this worker's parts (``join``)
        self.eng_ks = []
        self._srv = None

    # ---------------------------------------------------------------- the socket channel
    def listen(self):
        """Rank 0 of a socket group: open the listening socket; returns its port."""
        from .sockcomm import listen

        if self._srv is not None:
            self._srv.close()
        self._srv = listen()
        return self._srv.getsockname()[1]

    def join(self, rank, size, token, addr, meta, tree, pt):
        """Connect to the group (rank 0 accepts on the socket of ``listen``) and build this
        rank's engine over its parts (``MPIEngine.from_parts``; collective over the group)."""
        from .mpi import MPIEngine
        from .sockcomm import SocketComm

        self.leave()
        if rank == 0:
            srv, self._srv = self._srv, None
            comm = SocketComm.accept(srv, size, token, CONNECT_TIMEOUT)
        else:
            comm = SocketComm.connect(rank, size, addr, token, CONNECT_TIMEOUT)
        ks = sorted(self.pk)
        try:
            self.eng = MPIEngine.from_parts(comm, [self.pk[k] for k in ks], meta, tree, pt)
        except BaseException:
            comm.Abort()
            raise
        self.eng_ks = ks
        return True

    def momentum(self, args):
        """The momentum form's rounds over the group (collective; ``MPIEngine.momentum_local``):
        ``args`` per part of this worker (q, p, f_ext or None); each part's (v, pdot) without the
        joint forces.  An error ends the group, as in :meth:`evaluate`."""
        fs = None if not args or args[0][2] is None else [x[2] for x in args]

        def run(eng):
            out = eng.momentum_local([x[0] for x in args], [x[1] for x in args], fs)
            return [tuple(y.copy() for y in x) for x in out]

        return self._collective(run)

    def leave(self):
        """Close this rank's connections of the group."""
        if self.eng is not None:
            self.eng.comm.close()
            self.eng = None

    def evaluate(self, key, args, keep, wrenches, forces):
        """One evaluation over the group (collective): the engine's boundary messages go between
        the workers, the client hears the results.  ``args``: per part of this worker (q, qd,
        tau, f_ext[, active, qdd]), or None with the state ``key``.  Returns one result per part
        as the actors' rounds give them (``_solve``), or keeps them under ``keep``, and with
        ``wrenches`` on rank 0 the root's loop pieces (``root.root_pieces``: the loops that cross
        parts are solved there).  An error on this rank ends the group (the others' calls then
        fail too) and is raised."""
        a = [self.states[key][k] for k in self.eng_ks] if key is not None else args

        def run(eng):
            hyb = bool(a) and len(a[0]) > 4
            fs = None if not a or a[0][3] is None else [x[3] for x in a]
            out = eng.evaluate_local([x[0] for x in a], [x[1] for x in a], [x[2] for x in a], fs,
                                     actives=[x[4] for x in a] if hyb else None,
                                     qdds=[x[5] for x in a] if hyb else None)
            return [_results(pk, o[0] if hyb else o, wrenches, forces) for pk, o in zip(eng.parts, out)]

        res = self._collective(run)
        root = R.root_pieces(self.eng.tree) if wrenches and self.eng.rank == 0 else []
        return self._kept(self.eng_ks, keep, res), root

    def _collective(self, run):
        """``run(engine)`` over the group; an error on this rank ends the group (its connections
        closed, the others' calls then fail too) and is raised."""
        eng = self.eng
        if eng is None:
            raise RuntimeError("this worker's actor is in no socket group (join first)")
        try:
            return run(eng)
        except BaseException:
            eng.comm.Abort()
            self.eng = None
            raise

    def put_state(self, key, k, q, qd, tau, F):
        self.states.setdefault(key, {})[k] = (q, qd, tau, F)

    def drop_state(self, key):
        self.states.pop(key, None)

    def velocity(self, ks, key, qqd):
        st = self.states[key] if key is not None else None
        return [_velocity(self.pk[k], *(st[k][:2] if st is not None else x)) for k, x in zip(ks, qqd)]

    def reduce(self, ks, key, v_in, tf):
        st = self.states[key] if key is not None else None
        return [_reduce(self.pk[k], v, *(st[k][2:] if st is not None else x)) for k, v, x in zip(ks, v_in, tf)]

    def solve(self, ks, key, a_in, g, keep, wrenches, forces):
        out = [_solve(self.pk[k], a, gk, wr, fo) for k, a, gk, wr, fo in zip(ks, a_in, g, wrenches, forces)]
        return self._kept(ks, keep[0], out)

    def _kept(self, ks, keep, out):
        """``out`` (one result per part), or with a ``keep`` key None per part, the results kept
        here (only the latest kept result stays)."""
        if keep is None:
            return out
        self.results = {keep: dict(zip(ks, out))}
        return [None] * len(ks)

    def result(self, key):
        return self.results[key]

    def momentum_reduce(self, ks, g_in, pf):
        """The momentum form's reduction at rest (p as the joint forces) and each part's total of
        gravity and external wrenches (``PartKernel.momentum_forces``)."""
        out = []
        for k, gk, (p, F) in zip(ks, g_in, pf):
            pk = self.pk[k]
            red = tuple(x.copy() for x in pk.reduce(np.zeros(6), p, None, rows="position"))
            out.append((red, pk.momentum_forces(gk[3:], F).copy()))
        return out

    def momentum_solve(self, ks, a_in, g, Fh):
        """The back-substitution and each part's (v, pdot) (``PartKernel.momentum_rate``)."""
        out = []
        for k, a, gk, fk in zip(ks, a_in, g, Fh):
            pk = self.pk[k]
            pk.solve(a, gk)
            out.append(tuple(x.copy() for x in pk.momentum_rate(fk)))
        return out


class DaskState:
    """A state scattered over the workers of a :class:`DaskEngine`: every part's slices of q, qd,
    tau (and f_ext) in the actor of the worker holding the part.
    ``release()`` frees them."""

    def __init__(self, engine, q, qd, tau, F):
        self.engine = engine
        self._arrays = (q, qd, tau, F)
        P = len(engine.futures)
        self.key = engine._next_key()
        self._at = [None] * P
        engine._states.append(self)
        self._place(range(P))

    def _args(self):
        return [self.key] * len(self._at)

    def _place(self, which):
        """(Re)send the slices of the parts ``which`` (after placement changes or lost workers)."""
        eng = self.engine
        q, qd, tau, F = self._arrays
        calls = []
        for k in which:
            qs, vs, bs = eng.sel[k]
            w = eng.workers[k]
            xs = [np.ascontiguousarray(q[qs]), np.ascontiguousarray(qd[vs]), np.ascontiguousarray(tau[vs]),
                  part_forces(F, bs)]
            calls.append(eng._actor_call(w, "put_state", self.key, k, *xs))
            self._at[k] = w
        for c in calls:
            c.result()

    def release(self):
        eng = self.engine
        if self in eng._states:
            eng._states.remove(self)
            for a in eng.actors.values():
                try:
                    a.drop_state(self.key).result()
                except Exception:     # noqa: BLE001 -- a worker gone with its states
                    pass

    def __repr__(self):
        return f"<DaskState key {self.key}: q, qd, tau{', f_ext' if self._arrays[3] is not None else ''} on the workers>"

    @property
    def nbytes(self):
        return int(sum(x.nbytes for x in self._arrays if x is not None))


class DaskResult:
    """The result of a ``forward_dynamics_state`` / ``constraint_forces_state`` with
    ``gather=False``, left on the workers (valid until the next such evaluation of the engine);
    ``gather()`` fetches it: qdd, or the ``CFAResult`` of the constraint forces."""

    q = None       # the state's q, for a constraint-force result

    def __init__(self, engine, key):
        self.engine, self.key = engine, key

    def __repr__(self):
        what = "constraint forces" if self.q is not None else "qdd"
        return f"<DaskResult: {what} left on the workers (key {self.key}); gather() fetches it>"

    def gather(self):
        eng = self.engine
        got = {}
        for f in [a.result(self.key) for a in eng.actors.values()]:
            got.update(f.result())
        out = [got[k] for k in range(len(eng.futures))]
        return eng._assemble(out) if self.q is None else eng._assemble_wrenches(self.q, out)


def _has_n_workers(client):
    import inspect

    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


def _cancel_errors():
    from distributed import CancelledError, KilledWorker

    errs = [CancelledError, KilledWorker]
    try:
        from distributed.client import FutureCancelledError, FuturesCancelledError

        errs += [FutureCancelledError, FuturesCancelledError]
    except ImportError:
        pass
    try:
        from distributed.comm.core import CommClosedError

        errs.append(CommClosedError)
    except ImportError:
        pass
    return tuple(errs)


def forward_dynamics_dask(model, q, qd, tau, client=None, parts=None, path_weight=PATH_WEIGHT, f_ext=None,
                          active=None, qdd_active=None):
    """One evaluation over Dask (builds and scatters the parts; keep a DaskEngine to reuse them);
    with ``active``, hybrid dynamics ((qdd, tau), see ``DaskEngine.forward_dynamics``)."""
    return _one_off("forward_dynamics", model, q, qd, tau, client, parts, path_weight, f_ext, active, qdd_active)


def constraint_forces_dask(model, q, qd, tau, client=None, parts=None, path_weight=PATH_WEIGHT, f_ext=None,
                           active=None, qdd_active=None):
    """One constraint-force evaluation over Dask (a ``CFAResult``; keep a DaskEngine to reuse the
    parts); with ``active``, of hybrid dynamics (``DaskEngine.constraint_forces``)."""
    return _one_off("constraint_forces", model, q, qd, tau, client, parts, path_weight, f_ext, active, qdd_active)


def momentum_rhs_dask(model, q, p, tau=None, client=None, parts=None, path_weight=PATH_WEIGHT, f_ext=None):
    """One momentum-form evaluation over Dask (``DaskEngine.momentum_rhs``)."""
    eng = DaskEngine(model, client=client, parts=parts, path_weight=path_weight, poses=True)
    try:
        return eng.momentum_rhs(q, p, tau, f_ext)
    finally:
        eng.close()


def _one_off(method, model, q, qd, tau, client, parts, path_weight, f_ext, active=None, qdd_active=None):
    eng = DaskEngine(model, client=client, parts=parts, path_weight=path_weight)
    try:
        if active is None:
            return getattr(eng, method)(q, qd, tau, f_ext)
        return getattr(eng, method)(q, qd, tau, f_ext, active=active, qdd_active=qdd_active)
    finally:
        eng.close()
