"""Benchmark of the MPI engine against serial ABA.

    mpiexec -n R python scripts/benchmarks/bench_parallel.py SPEC [PARTS|-] [REPEAT]
        rank 0 prints the best time of one evaluation (qdd left distributed), the same with the
        qdd gather, serial ABA for reference, the boundary bytes and the phase times per rank.
    python scripts/benchmarks/bench_parallel.py --profile SPEC PARTS|rR [REPEAT]
        one process: the cost of every part (velocity + reduce + solve, best of REPEAT) in ns per
        body next to ABA's, and the 'ideal speedup' ABA / max part (what P ranks could reach if
        nothing else cost anything).  ``rR`` (e.g. r16): the decomposition the MPI backend uses on
        R ranks (``SerialEngine.for_ranks``); the parts' costs are summed per rank, and the ideal
        speedup is ABA / max rank.  This is how PATH_WEIGHT in partree/parallel/partition.py is
        measured: (ns per path body) / (ns per plain body) - 1 on a chain split in two.
For a user-facing benchmark with JSON output see ``partree bench``.
"""
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

import partree  # noqa: E402


def _state(m):
    rng = np.random.default_rng(0)
    return m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)


def profile(spec, P, rep):
    from partree.parallel import root as R
    from partree.parallel.serial import SerialEngine

    m = partree.specs.resolve_model(spec)
    q, qd, tau = _state(m)
    nranks = None
    if str(P).startswith("r"):
        nranks = int(P[1:])
        eng = SerialEngine.for_ranks(m, nranks)
        owner = eng.owner
        P = eng.partition.nparts
    else:
        P = int(P)
        eng = SerialEngine(m, P)
    eng.forward_dynamics(q, qd, tau)
    qs = [q[pk.qix] for pk in eng.parts]
    qds = [qd[pk.vix] for pk in eng.parts]
    ts = [tau[pk.vix] for pk in eng.parts]
    ta, te, tp = 1e9, 1e9, [1e9] * P
    for _ in range(rep):
        t0 = time.perf_counter()
        partree.aba(m, q, qd, tau)
        ta = min(ta, time.perf_counter() - t0)
        t0 = time.perf_counter()
        eng.forward_dynamics(q, qd, tau)
        te = min(te, time.perf_counter() - t0)
        vel, tt = [], []
        for k, pk in enumerate(eng.parts):
            t0 = time.perf_counter()
            vel.append(tuple(x.copy() for x in pk.velocity(qs[k], qds[k])))
            tt.append(time.perf_counter() - t0)
        v_in = R.compose_velocities(eng.tree, vel)
        red = []
        for k, pk in enumerate(eng.parts):
            t0 = time.perf_counter()
            red.append(tuple(x.copy() for x in pk.reduce(v_in[k], ts[k])))
            tt[k] += time.perf_counter() - t0
        a_in, g = R.solve(eng.tree, red, eng.a0)
        for k, pk in enumerate(eng.parts):
            t0 = time.perf_counter()
            pk.solve(a_in[k], g[k])
            tt[k] += time.perf_counter() - t0
        tp = [min(a, b) for a, b in zip(tp, tt)]
    sizes = eng.partition.sizes
    paths = [pk.pbod.size for pk in eng.parts]
    print(f"{spec} P={P} sizes={sizes.tolist()} path_bodies={paths}")
    print(f"aba={ta:.4f}s ({ta / m.n * 1e9:.0f} ns/body)  engine in one process={te:.4f}s ({te / ta:.3f}x aba)")
    print(f"parts={[round(x, 4) for x in tp]} ns/body={[round(x / s * 1e9) for x, s in zip(tp, sizes)]} "
          f"ideal speedup={ta / max(tp):.2f}")
    if nranks:
        loads = np.bincount(owner, weights=tp, minlength=nranks)
        print(f"ranks={nranks} rank loads (s)={[round(float(x), 4) for x in loads]}  sum/aba={loads.sum() / ta:.3f} "
              f"max/mean={loads.max() / loads.mean():.3f}  ideal speedup={ta / loads.max():.2f} "
              f"(efficiency {ta / loads.max() / nranks:.2f})")


def mpi_bench(spec, parts, rep):
    from mpi4py import MPI

    from partree.parallel.mpi import MPIEngine

    comm = MPI.COMM_WORLD
    m = partree.specs.resolve_model(spec)
    q, qd, tau = _state(m)
    eng = MPIEngine(m, comm=comm, parts=parts, gather=False)
    eng_g = MPIEngine(m, comm=comm, parts=parts, gather=True)
    ref = partree.aba(m, q, qd, tau) if comm.rank == 0 else None
    if comm.rank != 0:
        del m
    best = best_g = 1e9
    for _ in range(rep):
        comm.Barrier()
        t = time.perf_counter()
        eng.forward_dynamics(q, qd, tau)
        comm.Barrier()
        best = min(best, time.perf_counter() - t)
        comm.Barrier()
        t = time.perf_counter()
        x = eng_g.forward_dynamics(q, qd, tau)
        comm.Barrier()
        best_g = min(best_g, time.perf_counter() - t)
    phases = comm.gather({k: round(v, 4) for k, v in eng.last_info["times"].items()}, root=0)
    if comm.rank == 0:
        ta = 1e9
        for _ in range(rep):
            t = time.perf_counter()
            partree.aba(m, q, qd, tau)
            ta = min(ta, time.perf_counter() - t)
        err = float(np.abs(x - ref).max() / np.abs(ref).max())
        info = eng.last_info
        print(f"ranks={comm.size} parts={eng.nparts} fd={best:.4f}s fd+gather={best_g:.4f}s aba={ta:.4f}s "
              f"speedup={ta / best:.2f} err={err:.1e} boundary_bytes={info['boundary_bytes']} "
              f"setup={eng.setup_time:.2f}s phases={phases}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--profile":
        profile(args[1], args[2], int(args[3]) if len(args) > 3 else 7)
    else:
        spec = args[0] if args else "autotree:nb=1000000,bf=1"
        parts = int(args[1]) if len(args) > 1 and args[1] != "-" else None
        mpi_bench(spec, parts, int(args[2]) if len(args) > 2 else 5)
