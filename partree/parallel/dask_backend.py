"""Dask backend (distributed): parts scattered to the workers once and kept there as futures.

The client process partitions the model and builds every part (``PartKernel``), then scatters
each part to one worker (largest first onto the least loaded worker).  One evaluation submits
three small tasks per part, each pinned to the worker holding the part (the part's workspace is
updated in place there, so only boundary data and the part's own slices of q, qd, tau travel);
the root solve runs in the client between the rounds.

Failures.  A round never waits blindly: it polls its futures and the scheduler's worker list.
When a worker holding parts leaves (crash, kill, nanny restart) or a task/part is lost, the
evaluation is restarted from scratch after rebuilding the lost parts from the client's model
and scattering them onto the workers still alive (``retries`` times, default 2); when no worker
is left, or after ``timeout`` seconds, a :class:`DaskEngineError` says what happened.
Exceptions raised inside the kernels (bad input) are re-raised as they are, not retried.
"""
from __future__ import annotations

import time

import numpy as np

from ..algorithms import _checks
from . import root as R
from .mpi import assign_parts
from .serial import PATH_WEIGHT, build_part, gravity_a0, make_partition


class DaskEngineError(RuntimeError):
    """The Dask evaluation could not complete (workers lost beyond the retries, or a timeout)."""


class _WorkerLost(Exception):
    pass


def _velocity(pk, q, qd):
    TE, Tr, vrel = pk.velocity(q, qd)
    return TE.copy(), Tr.copy(), vrel.copy()


def _reduce(pk, v_in, tau, f_ext):
    return tuple(x.copy() for x in pk.reduce(v_in, tau, f_ext))


def _solve(pk, a_in, g):
    return pk.solve(a_in, g).copy()


class DaskEngine:
    """Forward dynamics over a dask.distributed cluster.

    ``client``: a ``distributed.Client``; None starts ``LocalCluster(n_workers=2,
    threads_per_worker=1)`` (closed by ``close()``).  ``parts``: number of parts (default: the
    number of workers) or a Partition.  ``retries``: restarts of an evaluation after lost workers.
    ``timeout``: seconds one evaluation may take before it is abandoned with an error.
    """

    def __init__(self, model, client=None, parts=None, path_weight=PATH_WEIGHT, retries=2, timeout=600.0,
                 poll=0.25):
        from distributed import Client, LocalCluster

        # everything that can be checked without the cluster is checked first
        pt = None
        if parts is not None:
            pt = make_partition(model, parts, path_weight)
        self._own = None
        if client is None:
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
            self._own = (client, cluster)
        self.client = client
        self.model = model
        self.retries = int(retries)
        self.timeout = float(timeout)
        self.poll = float(poll)
        self.restarts = 0              # evaluations restarted after lost workers (for reports/tests)
        self._after_round = None       # test hook: called with the round name after each round
        self.last_info = None
        workers = self._live_workers()
        if not workers:
            self.close()
            raise DaskEngineError("the Dask cluster has no workers")
        if pt is None:
            pt = make_partition(model, len(workers), path_weight)
        self.partition = pt
        self.tree = R.PartsTree.from_partition(pt)
        self.a0 = gravity_a0(model.gravity)
        self._costs = pt.costs if pt.costs is not None else pt.weights
        self.sel = []
        for k in range(pt.nparts):
            pk = build_part(model, pt, k)
            self.sel.append((pk.qix, pk.vix, pk.bix))
        self.futures = [None] * pt.nparts
        self.workers = [None] * pt.nparts
        self._place(workers, list(range(pt.nparts)))

    # ------------------------------------------------------------------ placement
    def _live_workers(self):
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"]) if _has_n_workers(self.client) \
            else sorted(self.client.scheduler_info()["workers"])

    def _place(self, workers, which):
        """(Re)build the parts ``which`` from the model and scatter them over ``workers``."""
        owner = assign_parts(self._costs, len(workers))
        for k in which:
            self.workers[k] = workers[int(owner[k])]
        for k in which:
            pk = build_part(self.model, self.partition, k, early_kinematics=True)
            # hash=False: two engines on one client built from the same model would otherwise share
            # content-hashed keys, and releasing one engine's futures could drop the other's parts
            self.futures[k] = self.client.scatter(pk, workers=[self.workers[k]], direct=False, hash=False)
            del pk

    def _recover(self):
        workers = self._live_workers()
        if not workers:
            raise DaskEngineError("all Dask workers were lost; cannot continue the evaluation")
        lost = [k for k in range(len(self.futures))
                if self.workers[k] not in workers or self.futures[k].status != "finished"]
        if not lost:
            return
        # spread everything again over the workers alive (balanced), rebuilding the lost parts
        owner = assign_parts(self._costs, len(workers))
        moved = [k for k in range(len(self.futures)) if k in lost or workers[int(owner[k])] != self.workers[k]]
        for k in moved:
            if k not in lost:
                lost.append(k)
        self._place(workers, sorted(lost))

    # ------------------------------------------------------------------ rounds
    def _submit(self, fn, k, *args):
        return self.client.submit(fn, self.futures[k], *args, workers=[self.workers[k]],
                                  allow_other_workers=False, pure=False)

    def _collect(self, futs, deadline, name):
        from distributed import wait
        from distributed.client import FutureCancelledError

        needed = set(self.workers)
        while True:
            try:
                done = wait(futs, timeout=self.poll)
                del done
                break
            except TimeoutError:
                pass
            except _cancel_errors() as e:
                raise _WorkerLost(f"{name} round: {type(e).__name__}: {e}") from None
            except Exception as e:          # distributed's own TimeoutError subclass, etc.
                if "timeout" not in type(e).__name__.lower():
                    raise
            if any(f.status in ("cancelled", "lost") for f in futs):
                raise _WorkerLost(f"a task of the {name} round was cancelled or lost")
            alive = set(self._live_workers())
            if not needed <= alive:
                raise _WorkerLost(f"worker(s) {sorted(needed - alive)} left during the {name} round")
            if time.monotonic() > deadline:
                raise DaskEngineError(f"the {name} round did not finish within {self.timeout:.0f} s")
        try:
            out = self.client.gather(futs)
        except (FutureCancelledError,) + _cancel_errors() as e:
            raise _WorkerLost(f"{name} round: {type(e).__name__}: {e}") from None
        if self._after_round is not None:
            self._after_round(name)
        return out

    def forward_dynamics(self, q, qd, tau, f_ext=None):
        model = self.model
        q, qd = _checks.state(model, q, qd)
        tau = _checks.vector(model, tau, model.nv, "tau", "nv")
        F, has_f = _checks.external_forces(model, f_ext)
        F = F if has_f else None
        attempt = 0
        while True:
            deadline = time.monotonic() + self.timeout
            try:
                return self._fd(q, qd, tau, F, deadline)
            except _WorkerLost as e:
                attempt += 1
                if attempt > self.retries:
                    raise DaskEngineError(f"Dask workers lost {attempt} times during one evaluation "
                                          f"(last: {e}); giving up") from None
                self.restarts += 1
                self._recover()

    def _fd(self, q, qd, tau, F, deadline):
        P = len(self.futures)
        if any(f.status != "finished" for f in self.futures):
            raise _WorkerLost("a part was lost before the evaluation")
        sel = self.sel
        vel = self._collect([self._submit(_velocity, k, q[sel[k][0]], qd[sel[k][1]]) for k in range(P)],
                            deadline, "velocity")
        v_in = R.compose_velocities(self.tree, vel)
        red = self._collect([self._submit(_reduce, k, v_in[k], tau[sel[k][1]],
                                          None if F is None else F[sel[k][2]]) for k in range(P)],
                            deadline, "reduce")
        a_in, g = R.solve(self.tree, red, self.a0)
        parts_qdd = self._collect([self._submit(_solve, k, a_in[k], g[k]) for k in range(P)], deadline, "solve")
        qdd = np.empty(self.model.nv)
        for k in range(P):
            qdd[sel[k][1]] = parts_qdd[k]
        # bytes that crossed client <-> workers: boundary data (O(P)) and the state slices / qdd (O(N))
        bnd = sum(sum(x.nbytes for x in t) for t in vel) + v_in.nbytes + sum(sum(x.nbytes for x in t) for t in red) \
            + a_in.nbytes + sum(x.nbytes for x in g)
        st = q.nbytes + qd.nbytes + tau.nbytes + qdd.nbytes + (0 if F is None else F.nbytes)
        self.last_info = {"boundary_bytes": int(bnd), "state_bytes": int(st), "nparts": P,
                          "workers": len(set(self.workers))}
        return qdd

    def close(self):
        self.futures = []
        if self._own is not None:
            client, cluster = self._own
            client.close()
            cluster.close()
            self._own = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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


def forward_dynamics_dask(model, q, qd, tau, client=None, parts=None, path_weight=PATH_WEIGHT, f_ext=None):
    """One evaluation over Dask (builds and scatters the parts; keep a DaskEngine to reuse them)."""
    eng = DaskEngine(model, client=client, parts=parts, path_weight=path_weight)
    try:
        return eng.forward_dynamics(q, qd, tau, f_ext)
    finally:
        eng.close()
