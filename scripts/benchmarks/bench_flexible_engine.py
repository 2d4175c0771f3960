#!/usr/bin/env python
"""Benchmark: the parallel engine's forward dynamics on a tree of flexible links over MPI against
the serial compiled recursion (``flexible_aba``) in one process.

    mpiexec -n 2 python scripts/benchmarks/bench_flexible_engine.py                  # 1e5 links, 6 modes
    mpiexec -n 2 python scripts/benchmarks/bench_flexible_engine.py --n 20000 --repeat 5
    mpiexec -n 2 python scripts/benchmarks/bench_flexible_engine.py --wait yield,spin      # the two waits side by side

The models are those of ``bench_flexible.py`` (uniform Euler-Bernoulli beam links on revolute
joints, a child at its parent's tip): ``chain`` and ``binary``.  The engine (``MPIEngine``, parts
balanced over the ranks, the partitioner's weights counting the flexible bodies) evaluates with
the full vectors [q; eta], [qd; eta_dot] on every rank and gathers qdd on rank 0; the serial
figure is ``flexible_aba`` on rank 0 while the other ranks wait.

The two are timed side by side: after one warm-up call of each, ``--repeat`` rounds each time one
serial call then one engine call, every rank in step, so that a slow spell of a shared machine
falls on both.  Each engine is timed twice per round: with qdd gathered on rank 0 (``engine_s``,
``speedup``) and with qdd left on the ranks that own it (``engine_local_s``, ``speedup_local``:
as ``partree bench`` times the engine on rigid trees, and as a distributed simulation uses it).
Prints one JSON line per shape on rank 0: the best time of each, the speed-up of
the bests, the median and the range of the rounds' own ratios (gathered), the relative difference of the
results, the parts and the modelled rank imbalance.
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
from partree.parallel.mpi import MPIEngine, wait_for  # noqa: E402


def side_by_side(fns, repeat, comm):
    """``repeat`` rounds of one call of each of ``fns`` in turn (after a warm-up of each), every
    rank in step (rank 0's clock; the ranks wait at a barrier that yields its core, see
    ``partree.parallel.mpi.wait_for``).  Returns the times (len(fns), repeat) and each one's last
    result."""
    out = [fn() for fn in fns]
    times = np.zeros((len(fns), repeat))
    for r in range(repeat):
        for j, fn in enumerate(fns):
            wait_for(comm.Ibarrier(), "yield")
            t0 = time.perf_counter()
            out[j] = fn()
            wait_for(comm.Ibarrier(), "yield")
            times[j, r] = time.perf_counter() - t0
    return times, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--modes", type=int, default=6)
    ap.add_argument("--shapes", default="chain,binary")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wait", default="yield", help="the engines' waits to time, comma separated: yield, spin "
                                                    "(MPIEngine's wait=)")
    ap.add_argument("--path-weight", default="", help="the partitioner's path weights to time, comma separated "
                                                      "(MPIEngine's path_weight=; default: the engine's)")
    a = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    for shape in a.shapes.split(","):
        model, _ = beam_tree(a.n, shape, a.modes)
        rng = np.random.default_rng(a.seed)
        nq, nv = flexible_state_size(model)
        q = np.concatenate((model.random_configuration(rng), 1e-3 * rng.normal(size=nq - model.nq)))
        qd = np.concatenate((model.random_velocity(rng), 1e-2 * rng.normal(size=nv - model.nv)))
        tau = rng.normal(size=nv)
        pws = [float(x) for x in a.path_weight.split(",")] if a.path_weight else [None]
        combos = [(w, pw) for w in a.wait.split(",") for pw in pws]
        engines = [MPIEngine(model, comm=comm, wait=w) if pw is None else
                   MPIEngine(model, comm=comm, wait=w, path_weight=pw) for w, pw in combos]
        ref = flexible_aba(model, q, qd, tau) if comm.rank == 0 else None
        # per engine: qdd gathered on rank 0, then qdd left on the ranks (as `partree bench` times
        # the engine, and as a distributed simulation uses it)
        fns = [lambda: flexible_aba(model, q, qd, tau) if comm.rank == 0 else None]
        for e in engines:
            fns += [lambda e=e: e.forward_dynamics(q, qd, tau),
                    lambda e=e: e.forward_dynamics(q, qd, tau, gather=False)]
        times, outs = side_by_side(fns, a.repeat, comm)
        ts = times[0]
        for j, ((w, pw), eng) in enumerate(zip(combos, engines)):
            te, tl, got = times[1 + 2 * j], times[2 + 2 * j], outs[1 + 2 * j]
            if comm.rank != 0:
                continue
            ratios = ts / te
            print(json.dumps({"shape": shape, "n": a.n, "modes": a.modes, "ranks": comm.size, "wait": w,
                              "path_weight": pw,
                              "serial_s": round(float(ts.min()), 5), "engine_s": round(float(te.min()), 5),
                              "speedup": round(float(ts.min() / te.min()), 3),
                              "engine_local_s": round(float(tl.min()), 5),
                              "speedup_local": round(float(ts.min() / tl.min()), 3),
                              "round_ratio_median": round(float(np.median(ratios)), 3),
                              "round_ratio_range": [round(float(ratios.min()), 3), round(float(ratios.max()), 3)],
                              "rel_diff": float(np.abs(got - ref).max() / np.abs(ref).max()),
                              "parts": int(eng.nparts), "imbalance": round(eng.imbalance, 3)}), flush=True)


if __name__ == "__main__":
    main()
