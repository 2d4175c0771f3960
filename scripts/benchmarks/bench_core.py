#!/usr/bin/env python
"""Benchmark of partree's serial algorithms against Pinocchio, side by side in one process.

    python scripts/benchmarks/bench_core.py                 # 512-body chain / binary tree + 10^6 bodies
    python scripts/benchmarks/bench_core.py --huge          # also 10^7 bodies (bf = 2), needs ~14 GB
    python scripts/benchmarks/bench_core.py --json out.json # machine-readable results

Prints per-call and per-body times of ABA and RNEA for partree and Pinocchio, their ratio,
memory per body (model + workspace arrays) and the process's peak RSS, and how long a fresh
process takes from start to its first ABA result with the compiled kernels cached.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

import partree
from partree.models import auto_tree


def timeit(fn, min_time=0.3, rounds=5, min_reps=1):
    """Best over ``rounds`` of the mean time per call in a round of at least ``min_time``."""
    fn()
    best = np.inf
    for _ in range(rounds):
        reps, t0 = 0, time.perf_counter()
        while True:
            fn()
            reps += 1
            el = time.perf_counter() - t0
            if el >= min_time and reps >= min_reps:
                break
        best = min(best, el / reps)
    return best


def peak_rss():
    """Peak resident memory of this process (VmHWM: unlike ru_maxrss it is not inherited across exec)."""
    from partree.cli.bench import max_rss_bytes

    return max_rss_bytes()


def small_case(nb, bf, rows):
    m = auto_tree(nb, bf)
    rng = np.random.default_rng(0)
    q, qd, tau = rng.uniform(-1, 1, (3, m.nv))
    r = {"model": f"autotree nb={nb} bf={bf}", "n": nb}
    r["partree_aba_s"] = timeit(lambda: partree.aba(m, q, qd, tau))
    r["partree_rnea_s"] = timeit(lambda: partree.rnea(m, q, qd, tau))
    try:
        import pinocchio as pin
        from partree.io.pinocchio import PinocchioMap, to_pinocchio
        pm, _ = to_pinocchio(m)
        mp = PinocchioMap(m, pm)     # Pinocchio's joints are partree's in depth-first order
        qp, qdp, taup = mp.q_to_pinocchio(q), mp.v_to_pinocchio(qd), mp.v_to_pinocchio(tau)
        rss0 = peak_rss()
        pd = pm.createData()
        r["pin_data_bytes_peak_growth"] = peak_rss() - rss0
        r["pin_aba_s"] = timeit(lambda: pin.aba(pm, pd, qp, qdp, taup))
        r["pin_rnea_s"] = timeit(lambda: pin.rnea(pm, pd, qp, qdp, taup))
        assert np.allclose(mp.v_from_pinocchio(pin.aba(pm, pd, qp, qdp, taup)), partree.aba(m, q, qd, tau),
                           rtol=1e-9, atol=1e-9)
        r["aba_ratio"] = r["partree_aba_s"] / r["pin_aba_s"]
        r["rnea_ratio"] = r["partree_rnea_s"] / r["pin_rnea_s"]
    except ImportError:
        print("pinocchio not installed: partree timings only", file=sys.stderr)
    rows.append(r)
    return r


def large_case(nb, bf, rows, reps=3):
    t0 = time.perf_counter()
    m = auto_tree(nb, bf)
    build = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    q, qd, tau = rng.uniform(-1, 1, (3, m.nv))
    t0 = time.perf_counter()
    d = m.data
    alloc = time.perf_counter() - t0
    t = timeit(lambda: partree.aba(m, q, qd, tau, data=d), min_time=0.0, rounds=reps)
    tr = timeit(lambda: partree.rnea(m, q, qd, tau, data=d), min_time=0.0, rounds=reps)
    bytes_per_body = (m.nbytes + d.nbytes) / m.n
    r = {"model": f"autotree nb={nb} bf={bf}", "n": nb, "build_s": build, "alloc_s": alloc,
         "partree_aba_s": t, "partree_rnea_s": tr, "aba_ns_per_body": t / nb * 1e9,
         "rnea_ns_per_body": tr / nb * 1e9, "bytes_per_body": bytes_per_body, "peak_rss_bytes": peak_rss()}
    return r


def second_process_start():
    """Wall time of a fresh interpreter importing partree and computing one ABA (warm JIT cache)."""
    code = ("import time; t=time.perf_counter(); import numpy as np, partree; "
            "from partree.models import auto_tree; m=auto_tree(100,2); "
            "partree.aba(m, np.zeros(100), np.zeros(100), np.zeros(100)); "
            "print(time.perf_counter()-t)")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)   # make sure the cache is warm
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, float(out.stdout.strip())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", type=int, default=10**6, help="size of the large autoTree cases (0 to skip)")
    ap.add_argument("--huge", action="store_true", help="also run nb = 10^7, bf = 2")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--_child", nargs=2, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    rows = []
    if a._child:
        print(json.dumps(large_case(a._child[0], a._child[1], rows)))
        return
    print(f"partree {partree.__version__}, numba threads unused (serial), pid {os.getpid()}")
    print("\n== 512-body autoTree: partree vs Pinocchio (time per call) ==")
    print(f"{'model':28s} {'partree ABA':>12s} {'pin ABA':>10s} {'ratio':>6s} {'partree RNEA':>13s} {'pin RNEA':>10s} {'ratio':>6s}")
    for nb, bf in ((512, 1), (511, 2)):
        r = small_case(nb, bf, rows)
        print(f"{r['model']:28s} {r['partree_aba_s']*1e6:10.1f}us {r.get('pin_aba_s', np.nan)*1e6:8.1f}us "
              f"{r.get('aba_ratio', np.nan):6.2f} {r['partree_rnea_s']*1e6:11.1f}us {r.get('pin_rnea_s', np.nan)*1e6:8.1f}us "
              f"{r.get('rnea_ratio', np.nan):6.2f}")
    pin_per_body = {bf: rows[k].get("pin_aba_s", np.nan) / rows[k]["n"] * 1e9 for k, bf in ((0, 1), (1, 2))}
    print(f"Pinocchio ABA per body at 512: chain {pin_per_body[1]:.0f} ns, binary {pin_per_body[2]:.0f} ns")
    sizes = []
    if a.large:
        sizes += [(a.large, 1), (a.large, 2)]
    if a.huge:
        sizes += [(10**7, 2)]
    if sizes:
        print("\n== large autoTree, one core ==")
        print(f"{'model':28s} {'build':>7s} {'ABA/body':>9s} {'vs pin@512':>10s} {'RNEA/body':>10s} {'B/body':>7s} {'peak RSS':>9s}")
    for nb, bf in sizes:
        # each large case in a fresh process, so its peak RSS is partree's alone
        out = subprocess.run([sys.executable, __file__, "--_child", str(nb), str(bf)], check=True,
                             capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(r)
        r["aba_vs_pin512"] = r["aba_ns_per_body"] / pin_per_body[bf]
        print(f"{r['model']:28s} {r['build_s']:6.2f}s {r['aba_ns_per_body']:7.0f}ns {r['aba_vs_pin512']:10.2f} "
              f"{r['rnea_ns_per_body']:8.0f}ns {r['bytes_per_body']:7.0f} {r['peak_rss_bytes']/2**30:7.2f}GB")
    wall, inside = second_process_start()
    rows.append({"second_process_wall_s": wall, "second_process_import_to_result_s": inside})
    print(f"\nfresh process, warm JIT cache: {wall:.2f} s wall to exit, {inside:.2f} s from import to first ABA result")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
