"""Batches of states over MPI ranks or Dask workers: ``evaluate_batch(algorithm, model, ...)``.

A batch is a set of independent evaluations (one state per row), so it is split by rows, never
by bodies: every rank or worker evaluates its block of rows with the batched serial algorithm
(``partree.aba(model, Q, QD, TAU)`` with 2-D arrays, which spreads its rows over the cores of the
process), and the blocks are put back in row order.  Use it for batches large enough that one
machine's cores are not enough; for one large tree, the parallel engine
(:func:`partree.forward_dynamics`) splits the bodies instead.

MPI: the call is collective.  Rank 0 holds the arrays (the other ranks may pass None); the rows are
scattered in contiguous blocks (``Scatterv``), evaluated, and gathered on rank 0 (``Gatherv``); the
other ranks return None.  Every rank holds the model.

Dask: the rows are cut into ``chunks`` blocks (default: two per worker), the model is sent to
every worker once, and each block is one task.
"""
from __future__ import annotations

import numpy as np

from ..errors import PartreeInputError

#: algorithm name -> (the arrays it takes after the model, the width of its output per row)
ALGORITHMS = {
    "aba": (("q", "qd", "tau"), "nv"),
    "rnea": (("q", "qd", "qdd"), "nv"),
    "crba": (("q",), "nv*nv"),
}


def _algorithm(name):
    from ..algorithms.aba import aba
    from ..algorithms.crba import crba
    from ..algorithms.rnea import rnea

    if name not in ALGORITHMS:
        raise PartreeInputError(f"algorithm {name!r}: a batch over ranks or workers evaluates "
                                f"{', '.join(map(repr, ALGORITHMS))}")
    return {"aba": aba, "rnea": rnea, "crba": crba}[name]


def _check_rows(model, name, arrays):
    """The batch's arrays as 2-D float64, with one count of rows, or a clear error (the batched
    serial algorithms' own check, :func:`partree.algorithms.batch.rows`)."""
    from ..algorithms.batch import rows

    names, _ = ALGORITHMS[name]
    if len(arrays) != len(names):
        raise PartreeInputError(f"{name} takes {len(names)} arrays ({', '.join(n.upper() for n in names)}), "
                                f"got {len(arrays)}")
    return rows(model, [(nm.upper(), a, model.nq if nm == "q" else model.nv, "nq" if nm == "q" else "nv")
                        for nm, a in zip(names, arrays)])


def _evaluate_block(name, model, arrays):
    """One block of rows with the batched serial algorithm (rows over this process's cores)."""
    return _algorithm(name)(model, *arrays)


def _out_shape(name, model, rows):
    return (rows, model.nv, model.nv) if name == "crba" else (rows, model.nv)


def evaluate_batch(name, model, *arrays, backend="mpi", comm=None, client=None, chunks=None):
    """Evaluate a batch of states over MPI ranks or Dask workers.

    Parameters
    ----------
    name : {'aba', 'rnea', 'crba'}
        The algorithm: ``aba(Q, QD, TAU)`` gives QDD (rows, nv), ``rnea(Q, QD, QDD)`` gives TAU
        (rows, nv), ``crba(Q)`` gives the mass matrices (rows, nv, nv).
    model : Model
        The model (on every rank for MPI).
    *arrays : array_like (rows, nq) / (rows, nv)
        One state per row.  Under MPI only rank 0's arrays are read.
    backend : {'mpi', 'dask', 'serial'}
        Where the rows go; 'serial' evaluates them in this process.
    comm : mpi4py communicator, optional
        Backend 'mpi' (default COMM_WORLD).
    client : distributed.Client, optional
        Backend 'dask' (required: the cluster to use).
    chunks : int, optional
        Backend 'dask': the number of blocks (default two per worker).

    Returns
    -------
    ndarray or None
        The results in row order (under MPI on rank 0; None on the other ranks).

    Raises
    ------
    PartreeInputError
        An unknown algorithm, arrays of the wrong width, row counts that disagree (under MPI
        raised on every rank alike).
    """
    _algorithm(name)
    if backend == "serial":
        return _evaluate_block(name, model, _check_rows(model, name, arrays))
    if backend == "mpi":
        return _batch_mpi(name, model, arrays, comm)
    if backend == "dask":
        return _batch_dask(name, model, arrays, client, chunks)
    raise PartreeInputError(f"backend = {backend!r}: a batch runs on 'serial', 'mpi' or 'dask'")


def _batch_mpi(name, model, arrays, comm):
    from ..extras import require

    require("mpi4py", "backend 'mpi'")
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    err, rows = None, 0
    if rank == 0:
        try:
            arrays = _check_rows(model, name, arrays)
            rows = arrays[0].shape[0]
        except PartreeInputError as e:
            err = str(e)
    err, rows = comm.bcast((err, rows), root=0)
    if err is not None:
        raise PartreeInputError(err)
    counts = np.full(size, rows // size, dtype=np.int64)
    counts[:rows % size] += 1
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    mine = int(counts[rank])
    names, _ = ALGORITHMS[name]
    local = []
    for k, nm in enumerate(names):
        width = model.nq if nm == "q" else model.nv
        buf = np.empty((mine, width))
        send = [arrays[k], (counts * width, starts * width), MPI.DOUBLE] if rank == 0 else None
        comm.Scatterv(send, buf, root=0)
        local.append(buf)
    res = np.ascontiguousarray(_evaluate_block(name, model, local)) if mine else \
        np.empty(_out_shape(name, model, 0))
    per_row = int(np.prod(_out_shape(name, model, 1)))
    out = np.empty(_out_shape(name, model, rows)) if rank == 0 else None
    recv = [out, (counts * per_row, starts * per_row), MPI.DOUBLE] if rank == 0 else None
    comm.Gatherv(res, recv, root=0)
    return out


def _batch_dask(name, model, arrays, client, chunks):
    if client is None:
        raise PartreeInputError("backend 'dask' needs client= (a distributed.Client of the cluster to use)")
    arrays = _check_rows(model, name, arrays)
    rows = arrays[0].shape[0]
    if chunks is None:
        chunks = 2 * max(1, len(client.scheduler_info()["workers"]))
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise PartreeInputError(f"chunks = {chunks!r}: the number of blocks must be an integer >= 1")
    bounds = np.linspace(0, rows, min(int(chunks), max(rows, 1)) + 1).astype(int)
    handle = client.scatter(model, broadcast=True, hash=False)
    futs = [client.submit(_evaluate_block, name, handle, [a[lo:hi] for a in arrays], pure=False)
            for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    if not futs:
        return np.empty(_out_shape(name, model, 0))
    return np.concatenate(client.gather(futs), axis=0)
