#!/usr/bin/env python
"""Benchmark: the constraint force algorithm (each method) against ABA alone, side by side in one
process, on Featherstone's autoTree chain (bf = 1) and binary tree (bf = 2).

    python scripts/benchmarks/bench_cfa.py                      # nb = 1e5 and 1e6
    python scripts/benchmarks/bench_cfa.py --sizes 1000 10000   # smaller
    python scripts/benchmarks/bench_cfa.py --sizes 100000 --bf 1 --repeat 5
    python scripts/benchmarks/bench_cfa.py --skew 0.3           # twisted (non-planar) autoTree

autoTree's default skew = 0 gives a planar mechanism (all joint axes parallel to z, gravity along
them): out of its plane it is statically determinate, and the constraint-force system of a long
chain becomes ill-conditioned (cond grows like a power of the length) -- the compliance form
('odd-even-compliance') loses digits in the wrenches and at 10^6 bodies meets a non-positive pivot;
the scattering form ('odd-even') and 'leaf-first' do not.  A method that fails prints its error in
its cell.  Under each row: the largest relative qdd difference to ABA, and the largest joint-wrench
difference to RNEA run with ABA's qdd, relative to the largest wrench.

Every timing is the best of ``--repeat`` calls (after one warm-up call), with the methods
interleaved so that a noisy machine hurts them alike.  The kernels are serial (one core).
'general' (sparse assembly, a teaching aid) only runs up to ``--general-max`` bodies.
"""
import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import partree  # noqa: E402
from partree.model import PartreeInputError  # noqa: E402
from partree.algorithms.cfa import METHODS, cfa  # noqa: E402
from partree.models import auto_tree  # noqa: E402


def bench(nb, bf, repeat, methods, general_max, skew=0.0):
    t0 = time.perf_counter()
    m = auto_tree(nb, bf, skew=skew)
    t_build = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, m.nq)
    qd = rng.uniform(-1.0, 1.0, m.nv)
    tau = rng.uniform(-1.0, 1.0, m.nv)
    calls = {"ABA": lambda: partree.aba(m, q, qd, tau)}
    for meth in methods:
        if meth == "general" and nb > general_max:
            continue
        calls[meth] = (lambda mm: (lambda: cfa(m, q, qd, tau, method=mm)))(meth)
    best = {}
    failed = {}
    ref = partree.aba(m, q, qd, tau)
    _, W_ref = partree.rnea(m, q, qd, ref, return_wrenches=True)
    w_scale = np.abs(W_ref).max()
    err = {}
    werr = {}
    for k, f in list(calls.items()):       # warm-up (compilation, workspaces) and accuracy
        try:
            out = f()
        except PartreeInputError as e:
            failed[k] = str(e)
            del calls[k]
            continue
        if k != "ABA":
            err[k] = float(np.abs(out.qdd - ref).max() / np.abs(ref).max())
            werr[k] = float(np.abs(out.joint_wrench - W_ref).max() / w_scale)
            out = None
    for _ in range(repeat):
        for k, f in calls.items():
            t = time.perf_counter()
            f()
            best[k] = min(best.get(k, np.inf), time.perf_counter() - t)
    return m, t_build, best, err, werr, failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6], help="numbers of bodies")
    ap.add_argument("--bf", type=float, nargs="+", default=[1, 2], help="autoTree branching factors")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--general-max", type=int, default=2000, help="largest model for method 'general'")
    ap.add_argument("--skew", type=float, default=0.0, help="autoTree twist between successive joint axes")
    args = ap.parse_args(argv)
    cols = ["ABA"] + list(args.methods)
    head = f"{'model':<14}{'nb':>9}  " + "  ".join(f"{c:>22}" for c in cols)
    print("autoTree(nb, bf, skew=%g): seconds per call (best of %d); ratio to ABA in brackets"
          % (args.skew, args.repeat))
    print(head)
    print("-" * len(head))
    for bf in args.bf:
        for nb in args.sizes:
            m, tb, best, err, werr, failed = bench(nb, bf, args.repeat, args.methods, args.general_max, args.skew)
            kind = "chain" if bf == 1 else ("binary" if bf == 2 else f"bf={bf:g}")
            cells = []
            for c in cols:
                if c in failed:
                    cells.append(f"{'failed (see below)':>22}")
                    continue
                if c not in best:
                    cells.append(f"{'-':>22}")
                    continue
                r = best[c] / best["ABA"]
                cells.append(f"{best[c]:>12.4g} s (x{r:5.2f})")
            print(f"{'autoTree ' + kind:<14}{nb:>9}  " + "  ".join(cells), flush=True)
            print(f"{'':<25}max rel. qdd difference to ABA: "
                  + ", ".join(f"{k} {v:.1e}" for k, v in err.items()), flush=True)
            print(f"{'':<25}max rel. wrench difference to RNEA: "
                  + ", ".join(f"{k} {v:.1e}" for k, v in werr.items()), flush=True)
            for k, msg in failed.items():
                print(f"{'':<25}{k} failed: {msg}", flush=True)


if __name__ == "__main__":
    main()
