#!/usr/bin/env python
"""Time per step of the momentum form (seed 001) against the velocity form, on Cardan chains.

    python scripts/benchmarks/bench_momentum.py                  # chains of 5, 10, 20, 50 bodies
    python scripts/benchmarks/bench_momentum.py --huge           # and a chain of 10^5 bodies
    python scripts/benchmarks/bench_momentum.py --quick          # 5 and 10 bodies, few rounds (a check that it runs)
    python scripts/benchmarks/bench_momentum.py --json out.json
    python scripts/benchmarks/bench_momentum.py --sizes 5 --solve 100000 1000000   # the velocity solve vs ABA

Seed 001 integrates chains of 5 to 50 bodies joined by 2-DOF Cardan joints with a sixth-order
method and compares its two O(N) solutions of the momentum equations for the velocities: the
sweep, and the block L^T D L scheme, which it finds 1.3-1.4 times faster.  Here the
chains are ``cardan:n=N`` near their hanging position (seeded), and the sixth-order method is
``gauss6`` (the 3-stage Gauss-Legendre method, ``partree.simulation.Gauss6``).  Variants, each
one step of ``--dt`` of a running integration (the state carried on from step to step):

``momentum ldlt``   gauss6 on (q, p), each evaluation ``partree.momentum_rhs`` with the block
                    L^T D L velocity solve (``MomentumDynamics(dyn, 'ldlt')``, what
                    ``simulate(..., formulation='momentum')`` runs)
``momentum sweep``  the same with the sweep (``MomentumDynamics(dyn, 'sweep')``)
``velocity ABA``    gauss6 on (q, qd), each evaluation ``partree.aba`` (``Dynamics``)

and, for the split of a step's cost, one evaluation of each right-hand side and the velocity
solve alone (``partree.velocity_from_momentum``, ldlt and sweep: the seed's Fig. 3 ratio).  A
gauss6 step costs 3 evaluations per fixed-point iteration (plus one at the first step); the
iterations per step are reported, since the two forms' stage equations need not take the same
number.

Every figure is measured side by side (``scripts/benchmarks/README.md``): in each round every
variant runs ``--reps`` steps (or calls) in turn, the order alternating, the rounds repeat
``--rounds`` times, and the best round of each variant is kept.  Accuracy is checked in every run:
the momentum form's velocities against ABA's state (v = M^-1 p against the velocity run's qd after
the same steps) and the sweep against the ldlt solve.
"""
import argparse
import datetime
import json
import os
import platform

import numpy as np

import partree
from partree.simulation import Gauss6, MomentumDynamics, StateSpace
from partree.simulation.dynamics import Dynamics

from bench_small import interleaved      # the house timing: interleaved rounds, best round

SIZES = (5, 10, 20, 50)
HUGE = 100_000


def hanging_state(m, seed=0):
    """Near the hanging position (the chain is built horizontal, along x): the first joint's first
    angle +pi/2, every angle perturbed by up to 0.3 rad, moving at up to 0.5 rad/s (seeded)."""
    rng = np.random.default_rng(seed)
    q = m.random_configuration(rng, 0.3)
    q[0] += np.pi / 2
    return q, m.random_velocity(rng, 0.5)


class Runner:
    """A running gauss6 integration: ``step()`` advances its own state by one step of h."""

    def __init__(self, f, space, q, y, h):
        self.integ = Gauss6(f, space)
        self.q, self.y, self.h, self.t = q.copy(), y.copy(), h, 0.0

    def step(self):
        self.q, self.y = self.integ.step(self.t, self.q, self.y, self.h)
        self.t += self.h


def bench_size(n, dt, rounds, reps):
    """Times per step and per evaluation on ``cardan:n=n``, iterations per step, accuracy."""
    m = partree.resolve_model(f"cardan:n={n}")
    q, qd = hanging_state(m)
    dyn = Dynamics(m)
    mom = {meth: MomentumDynamics(Dynamics(m), meth) for meth in ("ldlt", "sweep")}
    p = mom["ldlt"].momentum(q, qd)
    space = StateSpace(m)
    runners = {"momentum ldlt": Runner(mom["ldlt"], space, q, p, dt),
               "momentum sweep": Runner(mom["sweep"], space, q, p, dt),
               "velocity ABA": Runner(dyn, space, q, qd, dt)}
    # accuracy: a few steps of each, from the same state, compared
    for r in runners.values():
        for _ in range(3):
            r.step()
    v_ldlt = mom["ldlt"].velocity(0.0, runners["momentum ldlt"].q, runners["momentum ldlt"].y)
    v_sweep = mom["sweep"].velocity(0.0, runners["momentum sweep"].q, runners["momentum sweep"].y)
    ref = runners["velocity ABA"].y
    scale = max(np.abs(ref).max(), 1.0)
    acc = {"momentum_vs_velocity": float(np.abs(v_ldlt - ref).max() / scale),
           "sweep_vs_ldlt": float(np.abs(v_sweep - v_ldlt).max() / scale)}
    it0 = {k: (r.integ.iterations, r.integ.nfev) for k, r in runners.items()}
    steps = interleaved({k: r.step for k, r in runners.items()}, rounds, reps)
    calls = (rounds * reps) + 1
    per_step = {k: {"iterations": (r.integ.iterations - it0[k][0]) / calls,
                    "evaluations": (r.integ.nfev - it0[k][1]) / calls} for k, r in runners.items()}
    d = m.create_data()
    ev_reps = reps * 10
    evals = interleaved({"momentum_rhs ldlt": lambda: mom["ldlt"](0.0, q, p),
                         "momentum_rhs sweep": lambda: mom["sweep"](0.0, q, p),
                         "aba": lambda: dyn(0.0, q, qd),
                         "velocity solve ldlt": lambda: partree.velocity_from_momentum(m, q, p, "ldlt", d),
                         "velocity solve sweep": lambda: partree.velocity_from_momentum(m, q, p, "sweep", d)},
                        rounds, ev_reps)
    return {"n": n, "nv": m.nv, "dt": dt, "step": steps, "per_step": per_step, "evaluation": evals, "accuracy": acc}


def bench_solve(n, rounds):
    """The velocity solve M v = p (``partree.velocity_from_momentum``, ldlt and sweep) against ABA
    on trees of n bodies: Featherstone's chain (``autotree:nb=n,bf=1``), binary tree (``bf=2``)
    and the Cardan chain (``cardan:n=n``); one call per variant and round, interleaved, best
    round; the solve checked against the momenta it came from."""
    out = {}
    for spec in (f"autotree:nb={n},bf=1", f"autotree:nb={n},bf=2", f"cardan:n={n}"):
        m = partree.resolve_model(spec)
        rng = np.random.default_rng(0)
        q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
        p = partree.generalized_momentum(m, q, qd)
        d = m.create_data()
        outv = np.empty(m.nv)
        t = interleaved({"aba": lambda: partree.aba(m, q, qd, tau, data=d, out=outv),
                         "solve ldlt": lambda: partree.velocity_from_momentum(m, q, p, "ldlt", d, out=outv),
                         "solve sweep": lambda: partree.velocity_from_momentum(m, q, p, "sweep", d, out=outv)},
                        rounds, 1)
        v = partree.velocity_from_momentum(m, q, p)
        err = float(np.abs(partree.generalized_momentum(m, q, v) - p).max() / np.abs(p).max())
        out[spec] = {"n": m.n, "nv": m.nv, "times_s": t, "momentum_residual": err}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="chain lengths (default 5 10 20 50)")
    ap.add_argument("--huge", action="store_true", help=f"also a chain of {HUGE} bodies (one step per round)")
    ap.add_argument("--dt", type=float, default=0.001,
                    help="step in s (default 0.001; gauss6's fixed-point iteration diverges at 0.005 on "
                         "cardan:n=5 near the hanging position)")
    ap.add_argument("--solve", type=int, nargs="+", default=[], metavar="N",
                    help="also time the velocity solve against ABA on chains, binary trees and Cardan chains "
                         "of N bodies (e.g. 100000 1000000)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--reps", type=int, default=20, help="steps per variant and round (default 20)")
    ap.add_argument("--quick", action="store_true", help="5 and 10 bodies, 2 rounds of 3 steps")
    ap.add_argument("--json", help="write the results to this file")
    a = ap.parse_args(argv)
    sizes, rounds, reps = (list(a.sizes), a.rounds, a.reps)
    if a.quick:
        sizes, rounds, reps = [5, 10], 2, 3
    import numba

    info = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "numba": numba.__version__, "partree": partree.__version__,
            "rounds": rounds, "reps": reps, "dt": a.dt}
    print(f"partree {partree.__version__}, numba {numba.__version__}; {info['cpus']} CPUs, {platform.machine()}; "
          f"gauss6 steps of {a.dt:g} s on cardan:n=N; best of {rounds} interleaved rounds of {reps} steps")
    results = []
    runs = [(n, rounds, reps) for n in sizes] + ([(HUGE, 3, 1)] if a.huge else [])
    for n, rd, rp in runs:
        results.append(bench_size(n, a.dt, rd, rp))
    print("\n== time per gauss6 step (us); iterations per step in brackets ==")
    print(f"{'N':>6s} {'nv':>6s} {'momentum ldlt':>20s} {'momentum sweep':>20s} {'velocity ABA':>20s} "
          f"{'sweep/ldlt':>10s} {'ldlt/ABA':>9s}")
    for r in results:
        s, it = r["step"], r["per_step"]

        def cell(k):
            return f"{s[k] * 1e6:11.1f} [{it[k]['iterations']:5.1f}]"
        print(f"{r['n']:6d} {r['nv']:6d} {cell('momentum ldlt'):>20s} {cell('momentum sweep'):>20s} "
              f"{cell('velocity ABA'):>20s} {s['momentum sweep'] / s['momentum ldlt']:10.2f} "
              f"{s['momentum ldlt'] / s['velocity ABA']:9.2f}")
    print("\n== time per evaluation (us) ==")
    print(f"{'N':>6s} {'rhs ldlt':>9s} {'rhs sweep':>9s} {'ABA':>9s} {'solve ldlt':>10s} {'solve sweep':>11s} "
          f"{'solve sweep/ldlt':>16s}")
    for r in results:
        e = r["evaluation"]
        print(f"{r['n']:6d} {e['momentum_rhs ldlt'] * 1e6:9.2f} {e['momentum_rhs sweep'] * 1e6:9.2f} "
              f"{e['aba'] * 1e6:9.2f} {e['velocity solve ldlt'] * 1e6:10.2f} {e['velocity solve sweep'] * 1e6:11.2f} "
              f"{e['velocity solve sweep'] / e['velocity solve ldlt']:16.2f}")
    print("\n== accuracy (relative, after 3 steps from the same state) ==")
    for r in results:
        print(f"{r['n']:6d}  momentum form's v against the velocity form's qd {r['accuracy']['momentum_vs_velocity']:.1e}, "
              f"sweep against ldlt {r['accuracy']['sweep_vs_ldlt']:.1e}")
    solves = {}
    for n in a.solve:
        solves.update(bench_solve(n, max(3, rounds)))
    if solves:
        print("\n== the velocity solve against ABA, one call (ms); ratios to ABA ==")
        print(f"{'model':>26s} {'ABA':>9s} {'ldlt':>9s} {'sweep':>9s} {'ldlt/ABA':>9s} {'sweep/ABA':>9s} "
              f"{'sweep/ldlt':>10s} {'residual':>9s}")
        for spec, r in solves.items():
            t = r["times_s"]
            print(f"{spec:>26s} {t['aba'] * 1e3:9.2f} {t['solve ldlt'] * 1e3:9.2f} {t['solve sweep'] * 1e3:9.2f} "
                  f"{t['solve ldlt'] / t['aba']:9.2f} {t['solve sweep'] / t['aba']:9.2f} "
                  f"{t['solve sweep'] / t['solve ldlt']:10.2f} {r['momentum_residual']:9.1e}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"info": info, "results": results, "solve": solves}, fh, indent=1)
        print(f"wrote {a.json}")
    return results


if __name__ == "__main__":
    main()
