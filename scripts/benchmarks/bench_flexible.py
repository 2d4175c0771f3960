#!/usr/bin/env python
"""Benchmark: forward dynamics of a tree of flexible links (``flexible_aba``, compiled) against the
same tree with rigid links (``partree.aba``), side by side in one process: time per body, memory.

    python scripts/benchmarks/bench_flexible.py                          # 1e5 links, 6 modes, chain and binary
    python scripts/benchmarks/bench_flexible.py --n 10000 --repeat 5     # smaller
    python scripts/benchmarks/bench_flexible.py --passes                 # also each pass of the kernel alone
    python scripts/benchmarks/bench_flexible.py --passes --baseline /tmp/flexible_kernels.py   # against a copy

``--baseline PATH`` times another copy of ``partree/algorithms/flexible_kernels.py`` (e.g. of an
older commit: ``git show COMMIT:partree/algorithms/flexible_kernels.py > PATH``) in the same rounds:
its ``flexible_articulated`` on the same pack and state, and its passes alternated with the current
ones; the two results are compared.

Every link is a uniform Euler-Bernoulli beam (``partree.models.beam``, clamped-free modes in both
bending planes, ``--modes`` of them) on a revolute joint; a child attaches at its parent's tip,
the joint axes alternate between the two bending planes.  The rigid tree has the same joints,
placements, masses and inertias (``model.with_flexible({})``).  The shapes: ``chain``
(parent[i] = i - 1) and ``binary`` (parent[i] = (i - 1) // 2).

Each round times every call once, in an order that alternates from round to round, after one
warm-up call each (compilation, workspaces, first touch of the pages); the figure is the best
round (``--repeat``).  Accuracy: the backward error of the flexible result through the NumPy
inverse dynamics (``_flexible_rnea_reference``) on a tree of ``--check`` bodies, and the relative difference
of the flexible kernel to the NumPy recursion on one of 8 bodies.  Memory: the bytes per body of
the flexible pack (model data and workspace, ``flexible_pack``) and of the rigid model and
workspace arrays, and the peak resident set size of the process.  The kernels are serial (one
core).
"""
import argparse
import copy
import importlib.util
import inspect
import json
import os
import resource
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import partree  # noqa: E402
from partree.algorithms import flexible_kernels as fk  # noqa: E402
from partree.algorithms.flexible_dynamics import (_flexible_aba_reference, _flexible_rnea_reference,  # noqa: E402
                                                   flexible_aba, flexible_state_size)
from partree.model import Model  # noqa: E402
from partree.models.beam import euler_bernoulli_beam  # noqa: E402


def beam_tree(n, shape, modes, L=1.0, EI=500.0, rhoA=2.5):
    """(flexible model, rigid model) of n beam links on revolute joints."""
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, rhoA, modes, bending="yz", polar=1e-3)
    idx = np.arange(n)
    parent = idx - 1 if shape == "chain" else (idx - 1) // 2
    parent[0] = -1
    axis = np.zeros((n, 3))
    axis[idx % 2 == 0, 2] = 1.0
    axis[idx % 2 == 1, 1] = 1.0
    r = np.zeros((n, 3))
    r[1:, 0] = L
    rigid = Model(parent, "revolute", axis, np.broadcast_to(np.eye(3), (n, 3, 3)).copy(), r, np.full(n, mass),
                  np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)), gravity=(0.0, 0.0, -9.81), validate=False)
    return rigid.with_flexible({i: body for i in range(n)}), rigid


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def rigid_bytes(model):
    d = model.create_data()
    arrays = [getattr(model, k) for k in ("parent", "jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com",
                                          "I_com", "idx_q", "idx_v")]
    return sum(a.nbytes for a in arrays) + sum(v.nbytes for v in vars(d).values() if isinstance(v, np.ndarray))


def state(model, rng, eta_scale=1e-3):
    nq, nv = flexible_state_size(model)
    q = np.concatenate((rng.uniform(-0.3, 0.3, model.nq), eta_scale * rng.normal(size=nq - model.nq)))
    return q, rng.uniform(-0.3, 0.3, nv), rng.uniform(-1.0, 1.0, nv)


def check(shape, modes, nc, seed, n_numpy=8):
    """The backward error on an nc-body tree, and the difference to the NumPy recursion on an
    n_numpy-body tree (the NumPy recursion loses digits on long chains of flexible links; its
    backward error passes 1e-4 at 20 links of this chain, where the compiled one stays near 1e-12)."""
    m, _ = beam_tree(nc, shape, modes)
    q, qd, tau = state(m, np.random.default_rng(seed))
    qdd = flexible_aba(m, q, qd, tau)
    b = _flexible_rnea_reference(m, q, qd, np.zeros_like(qd))
    back = float(np.abs(_flexible_rnea_reference(m, q, qd, qdd) - tau).max() / max(np.abs(tau).max(), np.abs(b).max()))
    m, _ = beam_tree(min(nc, n_numpy), shape, modes)
    q, qd, tau = state(m, np.random.default_rng(seed))
    ref = _flexible_aba_reference(m, q, qd, tau)
    return back, float(np.abs(flexible_aba(m, q, qd, tau) - ref).max() / np.abs(ref).max())


def load_kernels(path):
    """The kernels module in the file ``path`` (a copy of ``flexible_kernels.py``), imported under
    ``partree.algorithms`` so that its relative imports resolve."""
    name = "partree.algorithms._flexible_kernels_baseline"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def pass_arguments(func, m, pk, values):
    """The arguments of the pass ``func`` (a compiled kernel of a flexible kernels module) by
    name: from ``values``, else the pack ``pk``, else the model ``m`` (so that a copy of the
    module with another pack layout gets its own arrays)."""
    out = []
    for name, par in inspect.signature(func.py_func).parameters.items():
        if name in values:
            out.append(values[name])
        elif hasattr(pk, name):
            out.append(getattr(pk, name))
        elif hasattr(m, name):
            out.append(getattr(m, name))
        elif par.default is inspect.Parameter.empty:
            raise ValueError(f"{func.__name__}: no value for its argument {name!r}")
        else:
            break       # the defaults from here on
    return tuple(out)


def passes(models, q, qd, tau, repeat, mods=(fk,)):
    """Best time of each pass of the flexible kernel alone, per module of ``mods`` (their rounds
    alternated), each on its own copy of the model in ``models`` (its pack kept there)."""
    calls = []
    for mod, m in zip(mods, models):
        pk = mod.flexible_pack(m)
        zero = np.zeros_like(tau)
        values = {"q": q, "qd": qd, "tau": tau, "active": np.zeros(m.n, dtype=np.bool_), "qdd_in": zero,
                  "qdd": zero.copy(), "tau_out": tau.copy()}
        calls.append([(f, pass_arguments(f, m, pk, values)) for f in
                      (mod.flexible_forward_pass1, mod.flexible_backward_pass, mod.flexible_forward_pass2)])
    names = ("pass 1 (kinematics, M, b)", "pass 2 (inward)", "pass 3 (outward)")
    best = [dict.fromkeys(names, np.inf) for _ in mods]
    for rnd in range(repeat + 1):
        for j in (range(len(mods)) if rnd % 2 == 0 else range(len(mods) - 1, -1, -1)):
            (f1, a1), (f2, a2), (f3, a3) = calls[j]
            t = time.perf_counter()
            f1(*a1)
            t1 = time.perf_counter()
            f2(*a2)
            t2 = time.perf_counter()
            f3(*a3)
            t3 = time.perf_counter()
            for k, dt in zip(names, (t1 - t, t2 - t1, t3 - t2)):
                best[j][k] = min(best[j][k], dt)
    return best


def bench(n, shape, modes, repeat, seed, want_passes, base=None):
    t0 = time.perf_counter()
    flex, rigid = beam_tree(n, shape, modes)
    t_build = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    q, qd, tau = state(flex, rng)
    qr, qdr, taur = q[:rigid.nq], qd[:rigid.nv], tau[:rigid.nv]
    data = rigid.create_data()
    calls = {"flexible": lambda: flexible_aba(flex, q, qd, tau),
             "rigid": lambda: partree.aba(rigid, qr, qdr, taur, data=data)}
    if base is not None:
        # the baseline on its own copy of the model, which keeps the baseline's pack
        flex_b = copy.copy(flex)
        flex_b.__dict__.pop("_flexible_pack", None)
        no_active, zero = np.zeros(0, dtype=np.bool_), np.zeros_like(tau)
        calls["baseline"] = lambda: base.flexible_articulated(flex_b, q, qd, tau, no_active, zero)[1]
    t0 = time.perf_counter()
    for f in calls.values():
        f()
    t_first = time.perf_counter() - t0
    best = {k: np.inf for k in calls}
    names = list(calls)
    for rnd in range(repeat):
        for k in (names if rnd % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            calls[k]()
            best[k] = min(best[k], time.perf_counter() - t)
    out = {"shape": shape, "n": n, "modes": modes, "build_s": t_build, "first_calls_s": t_first,
           "flexible_s": best["flexible"], "rigid_s": best["rigid"],
           "flexible_ns_per_body": 1e9 * best["flexible"] / n, "rigid_ns_per_body": 1e9 * best["rigid"] / n,
           "ratio": best["flexible"] / best["rigid"],
           "flexible_bytes_per_body": fk.flexible_pack(flex).nbytes() / n,
           "rigid_bytes_per_body": rigid_bytes(rigid) / n}
    if base is not None:
        qb, qf = calls["baseline"](), calls["flexible"]()
        out.update(baseline_s=best["baseline"], baseline_ns_per_body=1e9 * best["baseline"] / n,
                   baseline_ratio=best["baseline"] / best["rigid"], speedup=best["baseline"] / best["flexible"],
                   baseline_difference=float(np.abs(qb - qf).max() / np.abs(qb).max()))
    if want_passes:
        mods, models = ((fk,), (flex,)) if base is None else ((fk, base), (flex, flex_b))
        res = passes(models, q, qd, tau, repeat, mods)
        out["passes_ns_per_body"] = {k: 1e9 * v / n for k, v in res[0].items()}
        if base is not None:
            out["baseline_passes_ns_per_body"] = {k: 1e9 * v / n for k, v in res[1].items()}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--n", type=int, nargs="+", default=[100000], help="links per tree (default 100000)")
    ap.add_argument("--shapes", nargs="+", default=["chain", "binary"], choices=["chain", "binary"])
    ap.add_argument("--modes", type=int, default=6, help="modes per link (default 6: three per bending plane)")
    ap.add_argument("--repeat", type=int, default=7, help="rounds; the best is kept (default 7)")
    ap.add_argument("--check", type=int, default=40, help="bodies of the tree whose accuracy is checked (0: none)")
    ap.add_argument("--passes", action="store_true", help="also time each pass of the flexible kernel")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", help="a copy of flexible_kernels.py to time in the same rounds")
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)
    base = load_kernels(args.baseline) if args.baseline else None
    rows = []
    print(f"{'shape':>7} {'n':>8} {'flexible/body':>14} {'rigid/body':>11} {'ratio':>6} {'flex B/body':>11} "
          f"{'rigid B/body':>12} {'build':>7}")
    for shape in args.shapes:
        for n in args.n:
            row = bench(n, shape, args.modes, args.repeat, args.seed, args.passes, base)
            if args.check:
                row["backward_error"], row["vs_numpy"] = check(shape, args.modes, args.check, args.seed)
            rows.append(row)
            print(f"{shape:>7} {n:>8} {row['flexible_ns_per_body']:>11.0f} ns {row['rigid_ns_per_body']:>8.0f} ns "
                  f"{row['ratio']:>5.1f}x {row['flexible_bytes_per_body']:>11.0f} {row['rigid_bytes_per_body']:>12.0f} "
                  f"{row['build_s']:>6.1f}s")
            if base is not None:
                print(f"{'':>17} baseline: {row['baseline_ns_per_body']:.0f} ns per body, "
                      f"{row['baseline_ratio']:.1f}x rigid; speed-up {row['speedup']:.2f}; "
                      f"relative difference of the results {row['baseline_difference']:.1e}")
            if "passes_ns_per_body" in row:
                for k, v in row["passes_ns_per_body"].items():
                    extra = (f" (baseline {row['baseline_passes_ns_per_body'][k]:.0f})" if base is not None else "")
                    print(f"{'':>17} {k}: {v:.0f} ns per body{extra}")
            if args.check:
                print(f"{'':>17} accuracy: backward error {row['backward_error']:.1e} ({args.check} bodies), "
                      f"against the NumPy recursion {row['vs_numpy']:.1e} ({min(args.check, 8)} bodies)")
    rss = peak_rss_mb()
    print(f"peak RSS {rss:.0f} MB")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "peak_rss_mb": rss}, fh, indent=1)


if __name__ == "__main__":
    main()
