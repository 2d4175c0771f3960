#!/usr/bin/env python
"""This checkout's results against another checkout's, bit for bit, in one process.

    python scripts/benchmarks/ab_results.py --reference ../partree-old [--json out.json]

The reference checkout's ``partree`` is imported next to this one as ``partree_ref`` (as
``ab_kernels.py`` does).  On real robots (example-robot-data's UR5, Panda, Solo12 and Talos, where
installed), a random floating tree with every joint type, seed 000's space robot, a spherical
chain and seed 002's three-arm manipulator, each at three states (without external forces, then
with), the outputs of ABA, RNEA (with the joint wrenches), CRBA, forward kinematics and CFA
('leaf-first') must be the same arrays, signs of zeros included.  Prints one line per model and
the number of arrays that differ (0 for a change that should not move a bit).

CFA 'odd-even' is left out: its kernels allow the compiler to fuse and reassociate
(``fastmath={"contract", "reassoc"}``), so its last bits depend on the compilation itself (a
fresh compile and one loaded from numba's cache can differ by ~1e-14, in any checkout).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_kernels import load_reference  # noqa: E402
from bench_small import ROBOTS, robots_dir  # noqa: E402

SPECS = ("random:n=40,seed=3,floating_base=true", "spacerobot", "chain:n=12,joint=spherical", "threearm")


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b) and bool((np.signbit(a) == np.signbit(b)).all())


def outputs(P, m, q, qd, tau, F):
    """Every compared output of one state, as a list of (name, array)."""
    tau_r, W = P.rnea(m, q, qd, tau, F, return_wrenches=True)
    k = P.forward_kinematics(m, q, qd)
    out = [("aba", P.aba(m, q, qd, tau, F)), ("rnea", tau_r), ("rnea wrenches", W), ("crba", P.crba(m, q)),
           ("kinematics R", k.R), ("kinematics p", k.p), ("kinematics v", k.v)]
    r = P.cfa(m, q, qd, tau, F)
    out += [(f"cfa {key}", getattr(r, key)) for key in ("qdd", "constraint_force", "drive_force", "joint_wrench")]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", required=True, metavar="CHECKOUT", help="the other checkout")
    ap.add_argument("--json", metavar="FILE", help="write the comparison to this JSON file")
    a = ap.parse_args(argv)
    import partree as B

    A = load_reference(a.reference)
    models = []
    d = robots_dir()
    for name, rel, floating in ROBOTS:
        if d is not None and os.path.exists(os.path.join(d, rel)):
            try:
                models.append((name, A.load_urdf(os.path.join(d, rel), floating_base=floating),
                               B.load_urdf(os.path.join(d, rel), floating_base=floating)))
            except Exception as e:      # a robot the reference does not load is left out
                print(f"{name}: skipped ({type(e).__name__}: {e})")
    models += [(s, A.resolve_model(s), B.resolve_model(s)) for s in SPECS]
    report, differ = {}, 0
    for name, ma, mb in models:
        rng = np.random.default_rng(1)
        compared, bad = 0, []
        for t in range(3):
            q, qd = mb.random_configuration(rng), mb.random_velocity(rng)
            tau, F = rng.normal(size=mb.nv), rng.normal(size=(mb.n, 6))
            F = None if t == 0 else F
            for (key, x), (_, y) in zip(outputs(A, ma, q, qd, tau, F), outputs(B, mb, q, qd, tau, F)):
                compared += 1
                if not same(x, y):
                    bad.append(f"{key} (state {t})")
        differ += len(bad)
        report[name] = {"compared": compared, "differ": bad}
        print(f"{name:40s} {compared:4d} arrays, {len(bad)} differ{': ' + ', '.join(bad) if bad else ''}")
    print(f"arrays that differ: {differ}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
