"""Start a Dask cluster inside an MPI job and run a partree Dask benchmark on it.

    mpiexec -n 4 python cluster/dask_mpi_launcher.py --model autotree:nb=1000000,bf=2 [--parts P]
    srun -n 64 python cluster/dask_mpi_launcher.py --model big.h5 --repeat 3

Rank 0 runs the scheduler and the client (the partree DaskEngine, i.e. the payload), every other
rank runs one single-threaded worker; at the end the client shuts the whole cluster down and all
ranks exit.  With the ``dask-mpi`` package installed (``--use-dask-mpi``) its ``initialize()``
does the same (it then needs >= 3 ranks: scheduler, client, workers); without it the cluster is
built here from ``distributed.Scheduler`` / ``distributed.Worker`` and mpi4py (>= 2 ranks).
The payload prints one JSON object (``partree bench --backend dask --scheduler ADDRESS``).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import threading


def _scheduler_thread(ready, box):
    from distributed import Scheduler

    async def run():
        async with Scheduler(host=box["host"], port=0, dashboard_address=None) as s:
            box["address"] = s.address
            box["scheduler"] = s
            ready.set()
            await s.finished()

    try:
        asyncio.run(run())
    except Exception as e:          # reported to the main thread
        box["error"] = e
        ready.set()


async def _worker(address, nthreads, memory_limit):
    from distributed import Worker

    async with Worker(address, nthreads=nthreads, memory_limit=memory_limit, dashboard_address=None) as w:
        await w.finished()


def _own_cluster(comm, host, nthreads, memory_limit):
    """Scheduler on rank 0 (a background thread), workers on the other ranks; returns the address
    on rank 0 and None after the worker has finished on the others."""
    address = None
    if comm.rank == 0:
        ready = threading.Event()
        box = {"host": host}
        t = threading.Thread(target=_scheduler_thread, args=(ready, box), daemon=True)
        t.start()
        ready.wait(60)
        if "error" in box or "address" not in box:
            comm.Abort(1)
        address = box["address"]
    address = comm.bcast(address, root=0)
    if comm.rank != 0:
        import logging

        for name in ("distributed", "tornado"):       # the shutdown races are expected: keep stderr clean
            logging.getLogger(name).setLevel(logging.CRITICAL)
        asyncio.run(_worker(address, nthreads, memory_limit))
        return None
    return address


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--parts", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--host", default=None, help="interface address for the scheduler (default: this host)")
    ap.add_argument("--nthreads", type=int, default=1)
    ap.add_argument("--memory-limit", default="0", help="per worker (dask syntax; 0 = no limit)")
    ap.add_argument("--use-dask-mpi", action="store_true", help="use dask_mpi.initialize() (package dask-mpi)")
    ap.add_argument("--bench-args", default="", help="extra arguments for partree bench")
    a = ap.parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.size < 2:
        print("dask_mpi_launcher: needs at least 2 MPI ranks (scheduler+client, workers)", file=sys.stderr)
        return 2
    if a.use_dask_mpi:
        try:
            from dask_mpi import initialize
        except ImportError:
            print("dask_mpi_launcher: --use-dask-mpi given but dask-mpi is not installed", file=sys.stderr)
            comm.Abort(2)
        from distributed import Client

        # ranks: 0 scheduler, 1 runs this client code, >= 2 workers (blocking until shutdown)
        initialize(nthreads=a.nthreads, memory_limit=a.memory_limit, dashboard=False)
        with Client() as client:
            address = client.scheduler.address
            code = _payload(a, address, nworkers=comm.size - 2)
            client.shutdown()
        return code
    address = _own_cluster(comm, a.host or "", a.nthreads, a.memory_limit)
    if comm.rank != 0:
        return 0
    code = 1
    try:
        code = _payload(a, address, nworkers=comm.size - 1)
    finally:
        from distributed import Client

        with Client(address) as c:
            c.shutdown()
    return code


def _payload(a, address, nworkers):
    """Wait for the workers, then run ``partree bench --backend dask --scheduler ADDRESS``."""
    import shlex

    from distributed import Client

    from partree.cli.bench import main as bench_main

    with Client(address) as c:
        c.wait_for_workers(nworkers, timeout=120)
    argv = ["--model", a.model, "--backend", "dask", "--scheduler", address, "--repeat", str(a.repeat), "--json"]
    if a.parts:
        argv += ["--parts", str(a.parts)]
    return bench_main(argv + shlex.split(a.bench_args))


if __name__ == "__main__":
    sys.exit(main())
