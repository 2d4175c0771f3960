"""The parallel engine on models with closed loops: per-part costs and the MPI speed-up.

Models: a 3-D chain and a complete binary tree of N bodies with L local loops
(``partree.models.local_loops.with_local_loops``: distance and spherical loops between bodies a
few joints apart).  For each, in one process: ABA on the tree, ``partree.constrained_dynamics``
and the engine's parts for R ranks run one after another (``SerialEngine.for_ranks``: the
heaviest rank's share is the ideal R-rank time).  Under ``mpiexec -n R`` the engine itself is
timed too (collective, best of ``--repeat``), beside the serial solve in the same job.

    python scripts/benchmarks/loop_engine.py --n 100000 --loops 1000 --ranks 2
    mpiexec -n 2 python scripts/benchmarks/loop_engine.py --n 100000 --loops 1000 --json out.json
"""
import argparse
import json
import platform
import time

import numpy as np

import partree
from partree.models.generators import binary_tree, chain
from partree.models.local_loops import with_local_loops
from partree.parallel.loop_part import LoopPartKernel
from partree.parallel.serial import SerialEngine


def best(f, k, barrier=None):
    ts = []
    for _ in range(k):
        if barrier:
            barrier()
        t = time.perf_counter()
        f()
        if barrier:
            barrier()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100000, help="bodies")
    ap.add_argument("--loops", type=int, default=1000, help="local loops")
    ap.add_argument("--ranks", type=int, default=2, help="ranks of the per-part profile (one process)")
    ap.add_argument("--repeat", type=int, default=7, help="best of this many calls")
    ap.add_argument("--kinds", default="distance,spherical", help="loop kinds, in turn (comma-separated)")
    ap.add_argument("--json", default=None, help="write the raw results here")
    a = ap.parse_args()
    try:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    except ImportError:
        comm = None
    size = comm.Get_size() if comm is not None else 1
    rank = comm.Get_rank() if comm is not None else 0
    out = {"n": a.n, "loops": a.loops, "kinds": a.kinds, "ranks": size, "machine": platform.node(), "cases": []}
    for base in (chain(a.n, alternate=True), binary_tree(a.n)):
        m = with_local_loops(base, a.loops, seed=1, kinds=tuple(a.kinds.split(",")))
        rng = np.random.default_rng(0)
        q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
        case = {"model": base.name}
        if size > 1:
            from partree.parallel.mpi import MPIEngine
            eng = MPIEngine(m, comm=comm)
            x = eng.forward_dynamics(q, qd, tau)
            case["engine_mpi_ms"] = 1e3 * best(lambda: eng.forward_dynamics(q, qd, tau), a.repeat, comm.Barrier)
        if rank == 0:
            ref = partree.constrained_dynamics(m, q, qd, tau)
            if size > 1:
                case["engine_mpi_rel_err"] = float(np.abs(x - ref.qdd).max() / np.abs(ref.qdd).max())
            case["aba_ms"] = 1e3 * best(lambda: partree.aba(m, q, qd, tau), a.repeat)
            case["constrained_ms"] = 1e3 * best(lambda: partree.constrained_dynamics(m, q, qd, tau), a.repeat)
            se = SerialEngine.for_ranks(m, a.ranks)
            se.forward_dynamics(q, qd, tau)
            parts = []
            for pk in se.parts:
                qs, qds, taus = q[pk.qix], qd[pk.vix], tau[pk.vix]
                v_in = np.zeros(6)

                def step():
                    pk.velocity(qs, qds)
                    pk.reduce(v_in, taus)
                    pk.solve(pk.a0 if isinstance(pk, LoopPartKernel) else np.zeros(6), np.zeros((pk.H, 6)))
                parts.append({"bodies": int(pk.m), "handles": int(pk.H), "path_bodies": int(pk.ns),
                              "loops": int(len(getattr(pk, "loops", ()))), "ms": 1e3 * best(step, a.repeat)})
            load = np.bincount(se.owner, weights=[p["ms"] for p in parts], minlength=a.ranks)
            case.update(parts=parts, profile_ranks=a.ranks, rank_load_ms=load.tolist(),
                        ideal_speedup=float(case["constrained_ms"] / load.max()))
            if size > 1:
                case["speedup"] = case["constrained_ms"] / case["engine_mpi_ms"]
            print(json.dumps(case), flush=True)
        out["cases"].append(case)
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
