#!/usr/bin/env python
"""Benchmark: hybrid dynamics (``partree.hybrid_dynamics``) against ABA alone, side by side in one
process, on Featherstone's autoTree chain (bf = 1) and binary tree (bf = 2), with random masks
of active joints.

    python scripts/benchmarks/bench_hybrid.py                        # nb = 1e5, bf = 1 and 2
    python scripts/benchmarks/bench_hybrid.py --sizes 1000 10000     # smaller
    python scripts/benchmarks/bench_hybrid.py --sizes 1000000 --bf 1 --rounds 3

An active joint skips ABA's elimination (U, D^-1, u and the projection of the articulated
inertia) and instead forms IA (c + S qdd) on the way in and S^T (IA a + pA) on the way out, so
the ratio to ABA moves with the fraction of active joints.  Rows: ABA, then the hybrid call with
0 %, 10 %, 50 % and 100 % of the joints active (``--fractions``), each joint drawn independently.

Each round times every call once, in an order that rotates from round to round, after one
warm-up call each (compilation, workspaces); the figure is the best round (``--rounds``), so that
a noisy machine hurts the calls alike.  Beside each time: the largest relative difference of the
result to a reference (0 %: ABA's qdd; otherwise RNEA's tau for the hybrid call's qdd).  The
kernels are serial (one core).
"""
import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import partree  # noqa: E402


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def bench(nb, bf, rounds, fractions, seed=0):
    t0 = time.perf_counter()
    m = partree.resolve_model(f"autotree:nb={nb},bf={bf}")
    t_build = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.0, 1.0, m.nq)
    qd = rng.uniform(-1.0, 1.0, m.nv)
    tau = rng.uniform(-1.0, 1.0, m.nv)
    qdd = rng.uniform(-1.0, 1.0, m.nv)
    data = m.create_data()
    calls = {"ABA": lambda: partree.aba(m, q, qd, tau, data=data)}
    masks = {}
    for f in fractions:
        mask = rng.random(m.n) < f
        masks[f] = mask
        calls[f"hybrid {100 * f:g}%"] = (lambda mk: (lambda: partree.hybrid_dynamics(m, q, qd, tau, qdd, mk,
                                                                                      data=data)))(mask)
    err = {"ABA": 0.0}
    qdd_aba = partree.aba(m, q, qd, tau)
    for f, mask in masks.items():           # warm-up and accuracy
        qdd_h, tau_h = calls[f"hybrid {100 * f:g}%"]()
        if not mask.any():
            err[f"hybrid {100 * f:g}%"] = rel(qdd_h, qdd_aba)
        else:
            err[f"hybrid {100 * f:g}%"] = rel(tau_h, partree.rnea(m, q, qd, qdd_h))
    calls["ABA"]()
    names = list(calls)
    best = {k: np.inf for k in names}
    for r in range(rounds):
        k0 = r % len(names)
        for k in names[k0:] + names[:k0]:
            t = time.perf_counter()
            calls[k]()
            best[k] = min(best[k], time.perf_counter() - t)
    return m, t_build, best, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100000], help="numbers of bodies (default 1e5)")
    ap.add_argument("--bf", type=int, nargs="+", default=[1, 2], help="autoTree branching factors (default 1 2)")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.1, 0.5, 1.0],
                    help="fractions of active joints (default 0 0.1 0.5 1)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds; the best is reported (default 7)")
    args = ap.parse_args(argv)
    print(f"{'model':<28} {'call':<14} {'time [ms]':>10} {'ns/body':>9} {'/ABA':>6} {'rel. diff':>10}")
    for nb in args.sizes:
        for bf in args.bf:
            m, t_build, best, err = bench(nb, bf, args.rounds, args.fractions)
            label = f"autotree:nb={nb},bf={bf}"
            for k, t in best.items():
                print(f"{label:<28} {k:<14} {1e3 * t:>10.3f} {1e9 * t / m.n:>9.1f} {t / best['ABA']:>6.2f} "
                      f"{err[k]:>10.1e}")
            print(f"{'':<28} (model built in {t_build:.2f} s, best of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
