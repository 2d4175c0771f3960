"""The Dask backend: the MPI backend's time loop, run by the workers over a socket channel.

``simulate(..., backend='dask', client=None, parts=P)`` submits one long-running task per rank to
the workers (one rank per worker, pinned there).  The tasks open a peer-to-peer channel
(:class:`partree.parallel.sockcomm.SocketComm`: rank 0 listens, its address travels through a
``distributed.Variable``, the other ranks connect) and run the MPI backend's simulation
(:class:`partree.simulation.mpi.MPIBackend`, every integrator and the momentum form, loops'
corrections, prescribed motion) on their parts over it: a step, all its stages, runs on the
workers, who exchange the engine's O(P) boundary data directly; the client sends nothing per
step and hears only about the end of the run (the result), an interrupt or an error.  Rank 0,
on a worker, records the save points, writes the checkpoints and the results file (give paths
the workers can reach: the client's file system for a LocalCluster) and prints the progress;
the client prints the summary.

Signals: SIGINT / SIGTERM reach the client; it tells rank 0 (a ``distributed.Variable`` rank 0
reads at the loop's polls, about every ``loop.POLL_SECONDS``), every rank stops at the same
tick, the checkpoint is written and the client raises ``SimulationInterrupted``.

Lost workers: the run keeps checkpoints (the run's own ones; without a periodic checkpoint, a
recovery checkpoint every :data:`RECOVERY_SECONDS` of wall time, in a temporary directory when
the run has no checkpoint path).  When a worker dies, the client starts the same ranks (same
partition, same rank order, so the same reductions) on the workers alive, several ranks as
threads of one task where workers are fewer than ranks, resuming from the last checkpoint: the
trajectory is that of an uninterrupted run, bit for bit.  After :data:`MAX_RESTARTS` losses the
run ends with ``DaskEngineError``.

``client=None`` starts a LocalCluster with 2 single-threaded workers, closed at the end.  The
``_step_hook`` and ``_probe`` of ``simulate`` run on every rank, on the workers, with the rank's
pieces of the state (as under MPI).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import time

import numpy as np

from ..errors import DaskEngineError
from ..model import Model
from .mpi import MPIBackend

#: wall seconds between recovery checkpoints when the run asks for no periodic checkpoint
RECOVERY_SECONDS = 60.0
#: lost-worker restarts before the run gives up
MAX_RESTARTS = 3
#: seconds the ranks wait for each other to connect
CONNECT_TIMEOUT = 120.0
#: wall seconds between rank 0's reads of the client's stop request
STOP_POLL_SECONDS = 0.2
#: seconds the client waits, after a rank failed, for the others to end
GRACE_SECONDS = 15.0
#: seconds between the client's checks of the ranks (a rank ended, a worker lost, a signal caught)
WATCH_SECONDS = 0.1


class RankBackend(MPIBackend):
    """The MPI backend on one rank of a Dask simulation (a worker's task, over a
    :class:`~partree.parallel.sockcomm.SocketComm`): named 'dask'; rank 0 adds the client's stop
    request (a signal number, or 0) to the loop's polls; the loops' correction takes the maximum
    violation over the socket channel; the engine's root is the flat one.

    Parameters
    ----------
    comm : SocketComm
        The ranks.
    stop : callable or None
        Rank 0: ``stop() -> signal number or 0``.
    workers : int
        The workers the ranks run on (for the summary).
    """

    name = "dask"
    #: the flat root: the hierarchical root's messages (non-blocking point-to-point between any
    #: ranks) are not among the SocketComm's calls
    engine_options = {"root": "flat"}

    def __init__(self, comm, stop=None, workers=1):
        super().__init__(comm)
        self.polls_every_tick = False          # the client's stop request comes with the polls
        self._stop, self._next_stop = stop, 0.0
        self.nworkers = int(workers)

    def poll(self, values):
        from ..parallel.sockcomm import MAX

        values = np.array(values, dtype=np.int64)
        if self._stop is not None and time.monotonic() >= self._next_stop:
            self._next_stop = time.monotonic() + STOP_POLL_SECONDS
            values[0] = max(int(values[0]), int(self._stop()))
        if self.size == 1:
            return values
        out = np.empty_like(values)
        self.comm.Allreduce(values, out, op=MAX)
        return out

    def step_closure(self, closure):
        """The loops' correction as on MPI (``MPIEngine.evaluate_local`` with the correction's
        rows), the violation's maximum over the socket channel."""
        from ..parallel import root as R
        from ..parallel.sockcomm import MAX
        from .closure import EngineLoopClosure

        eng, L = self.eng, self.f.layout
        P = len(eng.parts)

        def step(q, v, rows):
            out = eng.evaluate_local([q[L.qsl[j]] for j in range(P)], [v[L.vsl[j]] for j in range(P)],
                                     [np.zeros(pk.nv) for pk in eng.parts], None, rows=rows)
            err = max([pk.loop_violation() for pk in eng.parts] + [R.root_violation(eng.tree) if self.root else 0.0])
            dx = np.empty(L.nv)
            for j in range(P):
                dx[L.vsl[j]] = out[j]
            return dx, float(self.comm.allreduce(err, op=MAX))

        return EngineLoopClosure(step, lambda q, dv, s: self.space.retract(q, s * dv), closure.correct, closure.tol)

    def summary(self):
        return dict(super().summary(), workers=self.nworkers)


def _scheduler_workers(dask_scheduler=None):
    return list(dask_scheduler.workers)


def _run_rank(rank, size, comm, model, opts, inputs, stop, workers, step_hook, probe, strip_model):
    from .loop import SimulationInterrupted, run as run_loop

    backend = RankBackend(comm, stop=stop if rank == 0 else None, workers=workers)
    try:
        res = run_loop(backend, model, opts, inputs, step_hook=step_hook, probe=probe)
    except SimulationInterrupted as e:
        return ("interrupted", e.t, e.signum, e.checkpoint, e.out)
    finally:
        comm.close()
    if res is not None and strip_model:
        res._model = None                 # the client has it
    return res


def _pause_profiler(worker):
    """Stop the worker's statistical profiler while the ranks' loop runs; returns what restarts
    it.  The profiler samples every task thread's stack every
    ``distributed.worker.profile.interval`` (10 ms): it takes the interpreter from a loop that
    exchanges short messages many times a second, which cost that loop about a third of an
    evaluation's time at 10⁴ bodies.  The callbacks are stopped and restarted on the worker's
    event loop (``add_callback`` is the thread-safe way in)."""
    try:
        loop = worker.loop
        cbs = [cb for k, cb in worker.periodic_callbacks.items()
               if k in ("profile", "profile-cycle") and cb.is_running()]
    except Exception:        # noqa: BLE001 -- another worker implementation: nothing to pause
        return lambda: None
    for cb in cbs:
        loop.add_callback(cb.stop)

    def restart():
        for cb in cbs:
            loop.add_callback(cb.start)

    return restart


def rank_task(ranks, size, model, opts, inputs, token, names, workers, step_hook=None, probe=None,
              strip_model=False):
    """One worker's share of a Dask simulation: the ranks ``ranks`` of ``size`` (the first in
    this task's thread, the others in threads of their own), connected over a SocketComm.

    Returns rank 0's result (a ``SimulationResult``, or ``('interrupted', t, signum, checkpoint,
    out)``) when this task holds rank 0, else None.  ``names``: the ``distributed.Variable``
    names of rank 0's address and of the client's stop request; ``token``: the group's token."""
    from distributed import Variable, get_worker

    from ..parallel.sockcomm import SocketComm, address_host, listen

    addr_var, stop_var = Variable(names[0]), Variable(names[1])
    srv = None
    if 0 in ranks:
        srv = listen()
        addr = (address_host(get_worker().address), srv.getsockname()[1])
        addr_var.set(addr)
    else:
        addr = tuple(addr_var.get(timeout=CONNECT_TIMEOUT))

    def stop():
        try:
            return int(stop_var.get(timeout=10) or 0)
        except Exception:      # noqa: BLE001 -- the client is gone or slow: no stop request
            return 0

    def make(r):
        if r == 0:
            return SocketComm.accept(srv, size, token, CONNECT_TIMEOUT)
        return SocketComm.connect(r, size, addr, token, CONNECT_TIMEOUT)

    results, errors = {}, {}

    def one(r):
        try:
            results[r] = _run_rank(r, size, make(r), model, opts, inputs, stop, workers, step_hook, probe,
                                   strip_model)
        except BaseException as e:        # noqa: BLE001 -- re-raised in the task
            errors[r] = e

    ranks = sorted(ranks)
    threads = [threading.Thread(target=one, args=(r,), daemon=True, name=f"partree-rank-{r}") for r in ranks[1:]]
    restart = _pause_profiler(get_worker())
    try:
        for t in threads:
            t.start()
        one(ranks[0])
        for t in threads:
            t.join()
    finally:
        restart()
    if errors:
        raise errors[min(errors)]
    return results.get(0)


class DaskBackend:
    """The Dask simulation (see the module docstring): ``simulate`` runs the whole run on the
    workers of ``client``.

    Parameters
    ----------
    client : distributed.Client or None
        None: a LocalCluster with 2 single-threaded workers
        (:func:`partree.parallel.dask_backend.start_local_cluster`), closed at the end.
    """

    name = "dask"

    def __init__(self, client=None):
        from ..extras import require

        require("distributed", "backend 'dask'")
        self.client = client
        self.restarts = []

    @staticmethod
    def _live(client):
        """The workers alive, as the scheduler knows them now (``scheduler_info`` may lag)."""
        return sorted(client.run_on_scheduler(_scheduler_workers))

    def simulate(self, model, opts, inputs, step_hook=None, probe=None):
        """Run the simulation on the workers; the ``SimulationResult`` (see
        ``partree.simulation.simulate``)."""
        own = None
        tmp = None
        try:
            client = self.client
            if client is None:
                from ..parallel.dask_backend import start_local_cluster

                own = start_local_cluster()
                client = own[0]
            workers = self._live(client)
            if not workers:
                client.wait_for_workers(1, timeout=60)
                workers = self._live(client)
            nparts = opts.parts if isinstance(opts.parts, int) or opts.parts is None else opts.parts.nparts
            size = len(workers) if nparts is None else max(1, min(len(workers), int(nparts)))
            # no part count given: the MPI engine's default over the ranks (at least one part per
            # rank and per tree of a forest)
            parts = opts.parts
            # paths as the client sees them; the run's own checkpoints are the recovery points
            ck = opts.checkpoint_path()
            changes = dict(parts=parts, verbose=False, catch_signals=False,
                           out=None if opts.out is None else os.path.abspath(os.fspath(opts.out)))
            if ck is None:
                tmp = tempfile.mkdtemp(prefix="partree-dask-")
                changes["checkpoint"] = os.path.join(tmp, "recovery.ckpt")
            else:
                changes["checkpoint"] = os.path.abspath(ck)
            if not opts.periodic_checkpoints:
                changes["checkpoint_seconds"] = RECOVERY_SECONDS
            wopts = dataclasses.replace(opts, **changes)
            strip = isinstance(model, Model)
            out = self._attempts(client, model, wopts, opts, inputs, size, workers[:size], step_hook, probe, strip)
            if isinstance(out, tuple):
                from .loop import SimulationInterrupted

                _, t, signum, ckpt, path = out
                raise SimulationInterrupted(t, signum, None if tmp is not None else ckpt,
                                            None if opts.out is None else os.fspath(opts.out))
            res = out
            if strip:
                res._model = model
            if self.restarts:
                res.summary["restarts"] = [dict(r) for r in self.restarts]
            if opts.verbose:
                from .results import format_summary

                print(format_summary(res.summary))
            return res
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if own is not None:
                own[0].close()
                own[1].close()

    def _attempts(self, client, model, wopts, opts, inputs, size, workers, step_hook, probe, strip):
        """Run the group; on a lost worker, again on the workers alive from the last checkpoint."""
        from .loop import SignalCatcher

        attempt = 0
        with SignalCatcher(opts.catch_signals) as catcher:
            while True:
                # the model on every worker (again after a loss: the new workers have none)
                mfut = client.scatter(model, broadcast=True, hash=False) if strip else model
                got = self._attempt(client, mfut, wopts, inputs, size, workers, step_hook, probe, strip, catcher)
                del mfut
                if got is not _LOST:
                    return got
                attempt += 1
                if attempt > MAX_RESTARTS:
                    raise DaskEngineError(f"Dask workers lost {attempt} times during a simulation; giving up")
                deadline = time.monotonic() + 60
                workers = self._live(client)
                while not workers and time.monotonic() < deadline:
                    time.sleep(0.2)
                    workers = self._live(client)
                if not workers:
                    raise DaskEngineError("every Dask worker was lost during a simulation")
                self.restarts.append({"workers": len(workers)})
                wopts = dataclasses.replace(wopts, resume=wopts.resume or "auto")

    def _attempt(self, client, model, wopts, inputs, size, workers, step_hook, probe, strip, catcher):
        from distributed import Variable, wait

        from ..parallel.sockcomm import new_token

        token = new_token()
        names = (f"partree-sim-addr-{token}", f"partree-sim-stop-{token}")
        stop_var = Variable(names[1], client=client)
        stop_var.set(0)
        groups = {}
        for r in range(size):
            groups.setdefault(workers[r % len(workers)], []).append(r)
        futs = {w: client.submit(rank_task, ranks, size, model, wopts, inputs, token, names, len(groups), step_hook,
                                 probe, strip, workers=[w], allow_other_workers=False, pure=False,
                                 key=f"partree-sim-{token}-{ranks[0]}")
                for w, ranks in groups.items()}
        sent = 0
        failed_at = None
        try:
            while True:
                if catcher.caught and not sent:
                    sent = int(catcher.caught)
                    stop_var.set(sent)
                # block (no spinning: on a machine with as many cores as ranks a busy client takes
                # a rank's core) until a rank ends or WATCH_SECONDS pass, then look again
                try:
                    wait(list(futs.values()), timeout=WATCH_SECONDS, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    pass
                states = {w: f.status for w, f in futs.items()}
                if all(s == "finished" for s in states.values()):
                    return futs[workers[0]].result()
                gone = [w for w in futs if w not in set(self._live(client))]
                if gone or "error" in states.values():
                    failed_at = failed_at or time.monotonic()
                    running = [w for w, s in states.items() if s == "pending" and w not in gone]
                    err = self._genuine(futs)
                    if gone and not running:
                        if err is not None:
                            raise err
                        return _LOST           # the ranks left have ended: start again without it
                    if not running or time.monotonic() - failed_at > GRACE_SECONDS:
                        if err is not None:
                            raise err
                        if gone:
                            return _LOST
                        raise DaskEngineError("a rank of the Dask simulation failed: "
                                              f"{[f.exception() for f in futs.values() if f.status == 'error']}")
        finally:
            for f in futs.values():
                if f.status == "pending":
                    f.cancel()
            try:
                stop_var.delete()
            except Exception:      # noqa: BLE001 -- best effort
                pass

    @staticmethod
    def _genuine(futs):
        """The error of the lowest rank that failed on its own (not through a broken channel)."""
        from distributed import KilledWorker

        from ..parallel.sockcomm import own_error

        # rank order (groups in rank order)
        return own_error([f.exception() for f in futs.values() if f.status == "error"], also=(KilledWorker,))


_LOST = object()
