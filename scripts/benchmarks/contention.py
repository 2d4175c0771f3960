"""How much faster P processes can go than one, with no communication at all: the ceiling of a
P-rank speed-up on this machine.

    python scripts/benchmarks/contention.py --model autotree:nb=1000000,bf=1 --procs 2 [--repeat 15] [--json]

The model is cut as the MPI backend would cut it for P ranks; then (1) each rank's share of the
work (its parts: velocity, reduction, back-substitution; the root solve is left out) is timed in
one process alone, one share after the other, and (2) all P shares are timed in P processes at
once, started together, each pinned to its own core where the machine has enough.  No data
crosses between the processes.  Reported: each share's time alone and together, the slowdown of
running together (shared memory bandwidth, caches, clock, the neighbours of a shared machine),
and two speed-ups over the one-part engine (timed in the same run):
    ideal:     engine / max(share alone)      what the decomposition allows
    ceiling:   engine / max(share together)   what this machine allows for that decomposition;
                                              an MPI run can only lose against it
``--in-cache`` repeats the test on a model small enough to stay in each core's cache: a slowdown
that stays there comes from the cores (clock, neighbours), one that goes comes from memory.
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time

import numpy as np


def _setup(spec, nranks):
    import partree
    from partree.parallel.serial import SerialEngine

    m = partree.specs.resolve_model(spec)
    rng = np.random.default_rng(0)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    eng = SerialEngine.for_ranks(m, nranks)
    eng.forward_dynamics(q, qd, tau)
    return m, eng, eng.owner, q, qd, tau


def _share_runner(eng, owner, rank, q, qd, tau):
    """A function that runs rank ``rank``'s parts once (the inputs of the last full evaluation)."""
    from partree.parallel import root as R

    ks = [k for k in range(eng.partition.nparts) if owner[k] == rank]
    vel = [eng.parts[k].velocity(q[eng.parts[k].qix], qd[eng.parts[k].vix]) for k in range(eng.partition.nparts)]
    vel = [tuple(x.copy() for x in v) for v in vel]
    v_in = R.compose_velocities(eng.tree, vel)
    red = [tuple(x.copy() for x in eng.parts[k].reduce(v_in[k], tau[eng.parts[k].vix]))
           for k in range(eng.partition.nparts)]
    a_in, g = R.solve(eng.tree, red, eng.a0)
    args = [(eng.parts[k], np.ascontiguousarray(q[eng.parts[k].qix]), np.ascontiguousarray(qd[eng.parts[k].vix]),
             np.ascontiguousarray(tau[eng.parts[k].vix]), v_in[k].copy(), a_in[k].copy(), g[k].copy()) for k in ks]

    def run():
        for pk, ql, qdl, tl, vi, ai, gi in args:
            pk.velocity(ql, qdl)
            pk.reduce(vi, tl)
            pk.solve(ai, gi)
    return run


def _time(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts


def _worker(spec, nranks, rank, repeat, start, out):
    ncpu = os.cpu_count() or 1
    if hasattr(os, "sched_setaffinity") and ncpu >= nranks:
        os.sched_setaffinity(0, {rank % ncpu})
    m, eng, owner, q, qd, tau = _setup(spec, nranks)
    run = _share_runner(eng, owner, rank, q, qd, tau)
    run()
    start.wait()                                     # all processes built: start together
    out.put((rank, _time(run, repeat)))


def measure(spec, nranks, repeat):
    from partree.parallel.serial import SerialEngine

    m, eng, owner, q, qd, tau = _setup(spec, nranks)
    one = SerialEngine(m, 1)
    t_engine = _time(lambda: one.forward_dynamics(q, qd, tau), repeat)
    alone = [_time(_share_runner(eng, owner, r, q, qd, tau), repeat) for r in range(nranks)]
    del m, eng, one
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(nranks)
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(spec, nranks, r, repeat, start, out)) for r in range(nranks)]
    for p in procs:
        p.start()
    together = dict(out.get() for _ in procs)
    for p in procs:
        p.join()
    together = [together[r] for r in range(nranks)]
    best = lambda ts: float(min(ts))              # noqa: E731
    med = lambda ts: float(np.median(ts))         # noqa: E731
    res = {"model": spec, "procs": nranks, "repeat": repeat, "engine_seconds": best(t_engine),
           "share_alone_seconds": [best(t) for t in alone], "share_together_seconds": [best(t) for t in together],
           "share_alone_median": [med(t) for t in alone], "share_together_median": [med(t) for t in together]}
    res["slowdown_together"] = max(res["share_together_seconds"]) / max(res["share_alone_seconds"])
    res["ideal_speedup"] = res["engine_seconds"] / max(res["share_alone_seconds"])
    res["ceiling_speedup"] = res["engine_seconds"] / max(res["share_together_seconds"])
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model", default="autotree:nb=1000000,bf=1")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--in-cache", action="store_true", help="also run the test on a model of 2000 bodies per process")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    runs = [measure(a.model, a.procs, a.repeat)]
    if a.in_cache:
        fam = a.model.split(":", 1)
        spec = "autotree:nb=%d,%s" % (2000 * a.procs, ",".join(x for x in fam[1].split(",") if not x.startswith("nb=")))
        runs.append(measure(spec, a.procs, max(a.repeat, 200)))
    if a.json:
        print(json.dumps(runs if len(runs) > 1 else runs[0]))
        return 0
    for r in runs:
        print(f"{r['model']}, {r['procs']} processes (best of {r['repeat']}):")
        print(f"  one-part engine    {r['engine_seconds'] * 1e3:9.3f} ms")
        print("  share alone        " + "  ".join(f"{x * 1e3:9.3f}" for x in r["share_alone_seconds"]) + " ms")
        print("  share together     " + "  ".join(f"{x * 1e3:9.3f}" for x in r["share_together_seconds"]) + " ms"
              f"   (medians {'  '.join(f'{x * 1e3:.3f}' for x in r['share_together_median'])})")
        print(f"  slowdown together  {r['slowdown_together']:.3f}x")
        print(f"  speed-up: ideal {r['ideal_speedup']:.2f}x, ceiling on this machine {r['ceiling_speedup']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
