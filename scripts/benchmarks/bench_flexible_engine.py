#!/usr/bin/env python
"""Benchmark: the parallel engine's forward dynamics on a tree of flexible links over MPI against
the serial compiled recursion (``flexible_aba``) in one process.

    mpiexec -n 2 python scripts/benchmarks/bench_flexible_engine.py                  # 1e5 links, 6 modes
    mpiexec -n 2 python scripts/benchmarks/bench_flexible_engine.py --n 20000 --repeat 5

The models are those of ``bench_flexible.py`` (uniform Euler-Bernoulli beam links on revolute
joints, a child at its parent's tip): ``chain`` and ``binary``.  The engine (``MPIEngine``, parts
balanced over the ranks, the partitioner's weights counting the flexible bodies) evaluates with
the full vectors [q; eta], [qd; eta_dot] on every rank and gathers qdd on rank 0; the serial
figure is ``flexible_aba`` on rank 0 while the other ranks wait.  Each figure is the best of
``--repeat`` timed calls after one warm-up call.  Prints one JSON line per shape on rank 0: the
two times, the speed-up, the relative difference of the results, the parts and the modelled
rank imbalance.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flexible import beam_tree  # noqa: E402

from partree.algorithms.flexible_dynamics import flexible_aba, flexible_state_size  # noqa: E402
from partree.parallel.mpi import MPIEngine  # noqa: E402


def best(fn, repeat, comm):
    """Best wall time of ``repeat`` calls after a warm-up, every rank in step (rank 0's clock)."""
    out = fn()
    times = []
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        out = fn()
        comm.Barrier()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--modes", type=int, default=6)
    ap.add_argument("--shapes", default="chain,binary")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    for shape in a.shapes.split(","):
        model, _ = beam_tree(a.n, shape, a.modes)
        rng = np.random.default_rng(a.seed)
        nq, nv = flexible_state_size(model)
        q = np.concatenate((model.random_configuration(rng), 1e-3 * rng.normal(size=nq - model.nq)))
        qd = np.concatenate((model.random_velocity(rng), 1e-2 * rng.normal(size=nv - model.nv)))
        tau = rng.normal(size=nv)
        t_serial, ref = best(lambda: flexible_aba(model, q, qd, tau) if comm.rank == 0 else None, a.repeat, comm)
        eng = MPIEngine(model, comm=comm)
        t_engine, got = best(lambda: eng.forward_dynamics(q, qd, tau), a.repeat, comm)
        if comm.rank == 0:
            print(json.dumps({"shape": shape, "n": a.n, "modes": a.modes, "ranks": comm.size,
                              "serial_s": round(t_serial, 5), "engine_s": round(t_engine, 5),
                              "speedup": round(t_serial / t_engine, 3),
                              "rel_diff": float(np.abs(got - ref).max() / np.abs(ref).max()),
                              "parts": int(eng.nparts), "imbalance": round(eng.imbalance, 3)}), flush=True)


if __name__ == "__main__":
    main()
