"""Dask backend (distributed): parts scattered to the workers once and kept there as futures.

The client process partitions the model and builds every part (``PartKernel``), then scatters
each part to one worker (largest first onto the least loaded worker).  One evaluation submits
three small tasks per part, each pinned to the worker holding the part (the part's workspace is
updated in place there, so only boundary data and the part's own slices of q, qd, tau travel);
the root solve runs in the client between the rounds.
"""
from __future__ import annotations

import numpy as np

from ..algorithms import _checks
from . import root as R
from .mpi import assign_parts
from .serial import PATH_WEIGHT, build_part, gravity_a0, make_partition


def _velocity(pk, q, qd):
    TE, Tr, vrel = pk.velocity(q, qd)
    return TE.copy(), Tr.copy(), vrel.copy()


def _reduce(pk, v_in, tau):
    return tuple(x.copy() for x in pk.reduce(v_in, tau))


def _solve(pk, a_in, g):
    return pk.solve(a_in, g).copy()


class DaskEngine:
    """Forward dynamics over a dask.distributed cluster.

    ``client``: a ``distributed.Client``; None starts ``LocalCluster(n_workers=2,
    threads_per_worker=1)`` (closed by ``close()``).  ``parts``: number of parts (default: the
    number of workers) or a Partition.
    """

    def __init__(self, model, client=None, parts=None, path_weight=PATH_WEIGHT):
        from distributed import Client, LocalCluster

        self._own = None
        if client is None:
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
            self._own = (client, cluster)
        self.client = client
        self.model = model
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        pt = make_partition(model, len(workers) if parts is None else parts, path_weight)
        self.partition = pt
        self.tree = R.PartsTree.from_partition(pt)
        self.a0 = gravity_a0(model.gravity)
        costs = pt.costs if pt.costs is not None else pt.weights
        owner = assign_parts(costs, len(workers))
        self.workers = [workers[int(o)] for o in owner]
        self.sel = []
        self.futures = []
        for k in range(pt.nparts):
            pk = build_part(model, pt, k)
            self.sel.append((pk.qsel, pk.vsel))
            self.futures.append(client.scatter(pk, workers=[self.workers[k]], direct=False))
            del pk

    def _submit(self, fn, k, *args):
        return self.client.submit(fn, self.futures[k], *args, workers=[self.workers[k]],
                                  allow_other_workers=False, pure=False)

    def forward_dynamics(self, q, qd, tau):
        model = self.model
        q, qd = _checks.state(model, q, qd)
        tau = _checks.vector(model, tau, model.nv, "tau", "nv")
        P = len(self.futures)
        vel = self.client.gather([self._submit(_velocity, k, q[self.sel[k][0]], qd[self.sel[k][1]])
                                  for k in range(P)])
        v_in = R.compose_velocities(self.tree, vel)
        red = self.client.gather([self._submit(_reduce, k, v_in[k], tau[self.sel[k][1]]) for k in range(P)])
        a_in, g = R.solve(self.tree, red, self.a0)
        parts_qdd = self.client.gather([self._submit(_solve, k, a_in[k], g[k]) for k in range(P)])
        qdd = np.empty(model.nv)
        for k in range(P):
            qdd[self.sel[k][1]] = parts_qdd[k]
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


def forward_dynamics_dask(model, q, qd, tau, client=None, parts=None, path_weight=PATH_WEIGHT):
    """One evaluation over Dask (builds and scatters the parts; keep a DaskEngine to reuse them)."""
    eng = DaskEngine(model, client=client, parts=parts, path_weight=path_weight)
    try:
        return eng.forward_dynamics(q, qd, tau)
    finally:
        eng.close()
