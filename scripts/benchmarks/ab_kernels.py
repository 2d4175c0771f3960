#!/usr/bin/env python
"""A/B timing of partree's kernels against another checkout, interleaved call by call in one process.

    python scripts/benchmarks/ab_kernels.py --reference ../partree-old [--rounds 40] [--json out.json]

A change that should not cost speed (a reorganisation, a refactor) is checked by timing the same
calls of both versions side by side: the reference checkout's ``partree`` package is copied into
a temporary folder as the package ``partree_ref`` and imported next to this one, and every case
alternates one timed call of each (first A then B, then B then A, ...), ``--rounds`` times; the
best of each side is kept.  On a shared machine a disturbance then falls on both sides alike,
which separate processes run minutes apart cannot promise.  Pin the process to one core
(``taskset -c 1``) for steadier figures.

Cases: ABA, RNEA, forward kinematics, CFA (leaf-first, odd-even) and the parallel engine in one
process (one part, the 2-rank partition, its constraint forces) on autoTree chains and binary
trees, a mixed random tree and a spherical chain; ABA, RNEA, kinematics and CFA on a 512-body
chain and a 7-body arm (where per-call costs show).
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np

CASES = [("chain 1e5", "autotree:nb=100000,bf=1"), ("binary 1e5", "autotree:nb=100000,bf=2"),
         ("mixed random 2e4", "random:n=20000,seed=1,floating_base=true"),
         ("spherical chain 2e4", "chain:n=20000,joint=spherical"), ("chain 512", "autotree:nb=512,bf=1"),
         ("arm 7", "chain:n=7")]


def load_reference(checkout):
    """The reference checkout's package, imported as ``partree_ref`` from a temporary copy."""
    src = os.path.join(checkout, "partree")
    if not os.path.isfile(os.path.join(src, "__init__.py")):
        raise SystemExit(f"{checkout}: no partree package there")
    tmp = tempfile.mkdtemp(prefix="partree_ab_")
    dst = os.path.join(tmp, "partree_ref")
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    for root, _, files in os.walk(dst):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(root, f)
                text = open(p).read()
                # absolute references to the package (lazy generator paths, docstrings) -> the copy
                new = re.sub(r'(["\'])partree\.', r"\1partree_ref.", text)
                if new != text:
                    open(p, "w").write(new)
    sys.path.insert(0, tmp)
    import partree_ref

    return partree_ref


def cases(A, B, spec):
    """{name: (call of A, call of B)} for one model."""
    ma, mb = A.resolve_model(spec), B.resolve_model(spec)
    rng = np.random.default_rng(0)
    q, qd = mb.random_configuration(rng), mb.random_velocity(rng)
    tau = rng.normal(size=mb.nv)
    out = {"ABA": (lambda: A.aba(ma, q, qd, tau), lambda: B.aba(mb, q, qd, tau)),
           "RNEA": (lambda: A.rnea(ma, q, qd, tau), lambda: B.rnea(mb, q, qd, tau)),
           "kinematics": (lambda: A.forward_kinematics(ma, q, qd), lambda: B.forward_kinematics(mb, q, qd)),
           "CFA leaf-first": (lambda: A.cfa(ma, q, qd, tau), lambda: B.cfa(mb, q, qd, tau))}
    if mb.n >= 1000:
        SA, SB = A.parallel.serial.SerialEngine, B.parallel.serial.SerialEngine
        ea1, eb1, ea2, eb2 = SA(ma, 1), SB(mb, 1), SA.for_ranks(ma, 2), SB.for_ranks(mb, 2)
        out.update({
            "CFA odd-even": (lambda: A.cfa(ma, q, qd, tau, method="odd-even"),
                             lambda: B.cfa(mb, q, qd, tau, method="odd-even")),
            "engine, 1 part": (lambda: ea1.forward_dynamics(q, qd, tau), lambda: eb1.forward_dynamics(q, qd, tau)),
            "engine, 2-rank parts": (lambda: ea2.forward_dynamics(q, qd, tau), lambda: eb2.forward_dynamics(q, qd, tau)),
            "engine constraint forces, 2-rank parts": (lambda: ea2.constraint_forces(q, qd, tau),
                                                       lambda: eb2.constraint_forces(q, qd, tau))})
    return out


def interleaved(fa, fb, rounds):
    """Best seconds per call of fa and fb, timed alternately (each sample at least ~10 ms)."""
    fa(), fb()
    t = time.perf_counter()
    fa()
    reps = max(1, int(0.01 / max(time.perf_counter() - t, 1e-7)))
    ta, tb = [], []
    for r in range(rounds):
        for f, acc in ((fa, ta), (fb, tb)) if r % 2 == 0 else ((fb, tb), (fa, ta)):
            t = time.perf_counter()
            for _ in range(reps):
                f()
            acc.append((time.perf_counter() - t) / reps)
    return min(ta), min(tb)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", required=True, metavar="CHECKOUT", help="the other checkout (A)")
    ap.add_argument("--rounds", type=int, default=40, help="alternations per case (default 40)")
    ap.add_argument("--json", metavar="FILE", help="write the figures to this JSON file")
    a = ap.parse_args(argv)
    import partree as B

    A = load_reference(a.reference)
    res = {}
    print(f"{'model':22s} {'case':40s} {'reference':>12s} {'this':>12s} {'this/ref':>9s}")
    for label, spec in CASES:
        for name, (fa, fb) in cases(A, B, spec).items():
            ta, tb = interleaved(fa, fb, a.rounds)
            res[f"{label} / {name}"] = {"reference_s": ta, "this_s": tb, "ratio": tb / ta}
            print(f"{label:22s} {name:40s} {ta * 1e3:9.4f} ms {tb * 1e3:9.4f} ms {tb / ta:9.3f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
