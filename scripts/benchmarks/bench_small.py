#!/usr/bin/env python
"""Per-call cost of partree's serial algorithms on small real robots, side by side with Pinocchio.

    python scripts/benchmarks/bench_small.py                 # ABA, RNEA, CRBA, CFA on each robot
    python scripts/benchmarks/bench_small.py --breakdown     # where the time of one small call goes
    python scripts/benchmarks/bench_small.py --batch         # a batch of 10^4 humanoid states over the cores
    python scripts/benchmarks/bench_small.py --all --json out.json
    python scripts/benchmarks/bench_small.py --no-per-call --reference ../partree-old   # the plain calls, A/B

Robots: example-robot-data's URDFs (installed with Pinocchio's ``example-robot-data`` package):
UR5 (6 DOF), Panda (9), Solo12 (floating base, 18) and Talos reduced (floating base, 38), loaded
with ``partree.load_urdf``; Pinocchio runs the equivalent model (``partree.io.pinocchio``, fixed
joints merged into their moving parent, as Pinocchio's own URDF parser does).  A robot that does
not load is reported and skipped.

Every figure is measured side by side: in each round every variant runs ``--reps`` calls in turn,
the rounds repeat ``--rounds`` times, and the best round of each variant is kept (the one least
disturbed by the neighbours on a shared machine).  Variants:

``pin``           Pinocchio's call (``pin.aba(model, data, q, v, tau)``, ...)
``partree``       the plain call, ``partree.aba(model, q, qd, tau)``: the model's own workspace,
                  a new result array, every input checked
``partree loop``  the inner-loop call: ``data=`` a workspace, ``out=`` a result array (for CFA a
                  result of an earlier call), ``check=False``

Pinocchio has no constraint-force algorithm; its counterpart of ``partree.cfa`` (forward dynamics
and every joint's wrench) is ``pin.aba`` followed by ``pin.rnea`` at the accelerations found
(which fills ``data.f``, the joint wrenches).  ``pin.crba`` fills the upper triangle of M,
partree's the whole matrix.  Every run checks partree's results against Pinocchio's.

``--breakdown`` times the pieces of one small call (UR5 ABA): the Python side, the crossing into
compiled code with the call's 8 arguments (an empty compiled function), the compiled checks and
views (the check that the merged model of the welded bodies is current included), the kernel
alone on the model the call computes with (welded bodies merged; timed inside compiled code),
and for comparison that kernel called from Python with its 29 arguments one by one.

``--reference CHECKOUT`` times the plain calls against another checkout's, interleaved in one
process (its package imported as ``partree_ref``, as ``ab_kernels.py`` does).

``--batch`` evaluates ``--states`` random states of the humanoid (Talos, or the space robot
``random:n=38,...`` when Talos does not load) as one batch with 1 thread and with all threads,
interleaved, and reports the per-state time next to Pinocchio's single-state call.
"""
import argparse
import datetime
import json
import os
import platform
import sys
import time

import numpy as np
from numba import njit

import partree
from partree.algorithms.aba import aba_call, aba_kernel, aba_kernel_in
from partree.algorithms.welded import merged_model_args
from partree.algorithms.packed import NO_FORCES
from partree import checks

ROBOTS = (("ur5", "ur_description/urdf/ur5_robot.urdf", False),
          ("panda", "panda_description/urdf/panda.urdf", False),
          ("solo12", "solo_description/robots/solo12.urdf", True),
          ("talos", "talos_data/robots/talos_reduced.urdf", True))
ALGORITHMS = ("aba", "rnea", "crba", "cfa")


def robots_dir():
    """example-robot-data's robots folder (next to Pinocchio in a cmeel install), or None."""
    try:
        import example_robot_data

        d = example_robot_data.getModelPath("ur_description/urdf/ur5_robot.urdf")
        return os.path.join(d, "")
    except Exception:
        pass
    for base in sys.path:
        d = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(d):
            return d
    return None


def load(name, rel, floating):
    """(model, None) or (None, why it did not load)."""
    d = robots_dir()
    if d is None:
        return None, "example-robot-data not found"
    path = os.path.join(d, rel)
    if not os.path.exists(path):
        return None, f"{path} not found"
    try:
        return partree.load_urdf(path, floating_base=floating, name=name), None
    except Exception as e:          # the benchmark goes on with the robots that load
        return None, f"{type(e).__name__}: {e}"


def interleaved(variants, rounds, reps):
    """{name: best seconds per call}: every round runs ``reps`` calls of each variant in turn."""
    best = {k: np.inf for k in variants}
    for fn in variants.values():
        fn()
    for r in range(rounds):
        order = list(variants.items())
        if r % 2:
            order.reverse()
        for k, fn in order:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t0) / reps)
    return best


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    return model.random_configuration(rng), model.random_velocity(rng), rng.normal(size=model.nv)


def pin_state(model, pm, q, qd, tau):
    """(q, qd, tau) in Pinocchio's layout and the PinocchioMap: to_pinocchio adds the joints depth
    first, a permutation of partree's numbering where it is not depth first (the identity for a
    URDF)."""
    from partree.io.pinocchio import PinocchioMap

    mp = PinocchioMap(model, pm)
    return mp.q_to_pinocchio(q), mp.v_to_pinocchio(qd), mp.v_to_pinocchio(tau), mp


def per_call(model, rounds, reps):
    """Per-call times of the four algorithms, partree's two calls and Pinocchio's, and the largest
    differences to Pinocchio's results."""
    import pinocchio as pin
    from partree.io.pinocchio import to_pinocchio

    pm, jid = to_pinocchio(model)
    pd = pm.createData()
    q, qd, tau = state(model)
    qp, qdp, taup, mp = pin_state(model, pm, q, qd, tau)
    d = model.create_data()
    out_v = np.empty(model.nv)
    out_M = np.empty((model.nv, model.nv))
    res = partree.cfa(model, q, qd, tau)

    def pin_cfa():
        a = pin.aba(pm, pd, qp, qdp, taup)
        pin.rnea(pm, pd, qp, qdp, a)

    cases = {
        "aba": {"pin": lambda: pin.aba(pm, pd, qp, qdp, taup),
                "partree": lambda: partree.aba(model, q, qd, tau),
                "partree loop": lambda: partree.aba(model, q, qd, tau, data=d, out=out_v, check=False)},
        "rnea": {"pin": lambda: pin.rnea(pm, pd, qp, qdp, taup),
                 "partree": lambda: partree.rnea(model, q, qd, tau),
                 "partree loop": lambda: partree.rnea(model, q, qd, tau, data=d, out=out_v, check=False)},
        "crba": {"pin": lambda: pin.crba(pm, pd, qp),
                 "partree": lambda: partree.crba(model, q),
                 "partree loop": lambda: partree.crba(model, q, data=d, out=out_M, check=False)},
        "cfa": {"pin": pin_cfa,
                "partree": lambda: partree.cfa(model, q, qd, tau),
                "partree loop": lambda: partree.cfa(model, q, qd, tau, data=d, out=res, check=False)},
    }
    times = {alg: interleaved(v, rounds, reps) for alg, v in cases.items()}
    # accuracy against Pinocchio (its results in partree's order)
    err = {}
    qdd = mp.v_from_pinocchio(pin.aba(pm, pd, qp, qdp, taup))
    err["aba"] = float(np.abs(partree.aba(model, q, qd, tau) - qdd).max() / max(1.0, np.abs(qdd).max()))
    t = mp.v_from_pinocchio(pin.rnea(pm, pd, qp, qdp, taup))
    err["rnea"] = float(np.abs(partree.rnea(model, q, qd, tau) - t).max() / max(1.0, np.abs(t).max()))
    M = np.triu(pin.crba(pm, pd, qp))                 # Pinocchio fills the upper triangle
    k = mp.v_from_pinocchio(np.arange(pm.nv)).astype(np.int64)      # partree's v[i] is Pinocchio's v[k[i]]
    M = (M + np.triu(M, 1).T)[np.ix_(k, k)]
    err["crba"] = float(np.abs(partree.crba(model, q) - M).max() / max(1.0, np.abs(M).max()))
    pin.rnea(pm, pd, qp, qdp, mp.v_to_pinocchio(qdd))
    r = partree.cfa(model, q, qd, tau)
    moving = np.flatnonzero(model.jtype != partree.joints.FIXED)
    fp = np.array([np.concatenate((pd.f[int(jid[i])].angular, pd.f[int(jid[i])].linear)) for i in moving])
    err["cfa"] = float(max(np.abs(r.qdd - qdd).max() / max(1.0, np.abs(qdd).max()),
                           np.abs(r.joint_wrench[moving] - fp).max() / max(1.0, np.abs(fp).max())))
    return times, err


@njit
def _empty_call(mb, wb, q, qd, tau, fext, out, check):
    return -1


@njit
def _kernel_loop(count, parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                 q, qd, tau, f_ext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, sc):
    for _ in range(count):
        aba_kernel_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                      q, qd, tau, f_ext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, sc)


def breakdown(model, rounds, reps):
    """Where the time of one ABA call on ``model`` goes (seconds per call)."""
    import pinocchio as pin
    from partree.io.pinocchio import to_pinocchio

    pm, _ = to_pinocchio(model)
    pd = pm.createData()
    q, qd, tau = state(model)
    qp, qdp, taup, _ = pin_state(model, pm, q, qd, tau)
    partree.aba(model, q, qd, tau)
    d = model.data
    pk = model._packed
    out = np.empty(model.nv)
    # the kernel on the model the compiled call computes with: its welded bodies merged
    merged = merged_model_args(model)
    margs = checks.model_args(model) if merged is None else merged[0]
    nb = margs[0].shape[0]
    kargs = (*margs, model.gravity, q, qd, tau, NO_FORCES, False, np.zeros((nb, 3, 3)), np.zeros((nb, 3)),
             *(np.zeros((nb, 6)) for _ in range(2)), np.zeros((nb, 6, 6)), *(np.zeros((nb, 6)) for _ in range(2)),
             d.S, d.U, d.Dinv, d.u, d.qdd)
    inner = 50          # kernel calls per timed call of the compiled loop (its own crossing: 1/50th)
    variants = {
        "pin.aba": lambda: pin.aba(pm, pd, qp, qdp, taup),
        "partree.aba (plain call)": lambda: partree.aba(model, q, qd, tau),
        "partree.aba (data, out, check=False)": lambda: partree.aba(model, q, qd, tau, data=d, out=out, check=False),
        "compiled call from Python (aba_call)": lambda: aba_call(pk.buf, d._buf, q, qd, tau, NO_FORCES, out, True),
        "empty compiled call, same 8 arguments": lambda: _empty_call(pk.buf, d._buf, q, qd, tau, NO_FORCES, out, True),
        "for comparison: the kernel from Python, 29 arguments": lambda: aba_kernel(*kargs),
        "kernel loop": lambda: _kernel_loop(inner, *kargs, d.scratch),
    }
    t = interleaved(variants, rounds, reps)
    kl = t.pop("kernel loop") / inner
    t["kernel alone, scratch in the workspace (timed inside compiled code)"] = kl
    t["compiled checks and views (call - empty - kernel)"] = (t["compiled call from Python (aba_call)"]
                                                              - t["empty compiled call, same 8 arguments"] - kl)
    t["Python side of the plain call (plain - compiled call)"] = (t["partree.aba (plain call)"]
                                                                  - t["compiled call from Python (aba_call)"])
    t["Python side of the loop call (loop - compiled call)"] = (t["partree.aba (data, out, check=False)"]
                                                                - t["compiled call from Python (aba_call)"])
    return t


def batch_case(model, states, rounds, threads):
    """Per-state seconds of one batch of ``states`` states, with 1 thread and with ``threads``, and
    Pinocchio's single-state call over the same states."""
    import pinocchio as pin
    from partree.io.pinocchio import PinocchioMap, to_pinocchio

    pm, _ = to_pinocchio(model)
    pd = pm.createData()
    rng = np.random.default_rng(1)
    Q = np.array([model.random_configuration(rng) for _ in range(states)])
    QD = rng.normal(size=(states, model.nv))
    TAU = rng.normal(size=(states, model.nv))
    mp = PinocchioMap(model, pm)
    QP = np.array([mp.q_to_pinocchio(q) for q in Q])         # the states in Pinocchio's layout
    QDP, TAUP = (np.array([mp.v_to_pinocchio(x) for x in X]) for X in (QD, TAU))
    OV = np.empty((states, model.nv))
    OM = np.empty((states, model.nv, model.nv))
    calls = {"aba": (lambda th: partree.aba(model, Q, QD, TAU, out=OV, threads=th),
                     lambda s: pin.aba(pm, pd, QP[s], QDP[s], TAUP[s])),
             "rnea": (lambda th: partree.rnea(model, Q, QD, TAU, out=OV, threads=th),
                      lambda s: pin.rnea(pm, pd, QP[s], QDP[s], TAUP[s])),
             "crba": (lambda th: partree.crba(model, Q, out=OM, threads=th),
                      lambda s: pin.crba(pm, pd, QP[s])),
             "cfa": (lambda th: partree.cfa(model, Q, QD, TAU, threads=th),
                     lambda s: pin.rnea(pm, pd, QP[s], QDP[s], pin.aba(pm, pd, QP[s], QDP[s], TAUP[s])))}
    out = {}
    for alg, (ours, theirs) in calls.items():
        # bit for bit: the batch against the loop of single calls (a sample of states)
        B = ours(threads)
        for s in range(0, states, max(1, states // 20)):
            single = {"aba": lambda: partree.aba(model, Q[s], QD[s], TAU[s]),
                      "rnea": lambda: partree.rnea(model, Q[s], QD[s], TAU[s]),
                      "crba": lambda: partree.crba(model, Q[s]),
                      "cfa": lambda: partree.cfa(model, Q[s], QD[s], TAU[s]).joint_wrench}[alg]()
            got = B.joint_wrench[s] if alg == "cfa" else B[s]
            assert np.array_equal(got, single), f"batch {alg}: state {s} differs from the single call"

        def pin_loop():
            for s in range(states):
                theirs(s)

        t = interleaved({"1 thread": lambda: ours(1), f"{threads} threads": lambda: ours(threads),
                         "pin loop": pin_loop}, rounds, 1)
        out[alg] = {k: v / states for k, v in t.items()}
        out[alg]["speed-up"] = t["1 thread"] / t[f"{threads} threads"]
    return out


def against_reference(models, checkout, rounds):
    """{robot: {alg: (reference s, this s)}}: the plain calls of another checkout and of this one,
    timed alternately (``ab_kernels.interleaved``)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from ab_kernels import interleaved as alternate, load_reference

    A = load_reference(checkout)
    out = {}
    for name, mb in models.items():
        rel, floating = {r[0]: (r[1], r[2]) for r in ROBOTS}[name]
        ma = A.load_urdf(os.path.join(robots_dir(), rel), floating_base=floating, name=name)
        q, qd, tau = state(mb)
        out[name] = {alg: alternate(fa, fb, rounds) for alg, fa, fb in (
            ("aba", lambda: A.aba(ma, q, qd, tau), lambda: partree.aba(mb, q, qd, tau)),
            ("rnea", lambda: A.rnea(ma, q, qd, tau), lambda: partree.rnea(mb, q, qd, tau)),
            ("crba", lambda: A.crba(ma, q), lambda: partree.crba(mb, q)),
            ("cfa", lambda: A.cfa(ma, q, qd, tau), lambda: partree.cfa(mb, q, qd, tau)))}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15, help="rounds of the interleaved timing (best kept)")
    ap.add_argument("--reps", type=int, default=400, help="calls per round and variant")
    ap.add_argument("--breakdown", action="store_true", help="also time the pieces of one small ABA call")
    ap.add_argument("--batch", action="store_true", help="also time a batch of humanoid states over the cores")
    ap.add_argument("--all", action="store_true", help="per-call figures, breakdown and batch")
    ap.add_argument("--states", type=int, default=10_000, help="states in the batch")
    ap.add_argument("--threads", type=int, default=None, help="threads of the batch (default: all)")
    ap.add_argument("--no-per-call", action="store_true", help="skip the per-call table")
    ap.add_argument("--reference", metavar="CHECKOUT", help="also time the plain calls against this checkout's")
    ap.add_argument("--json", help="write the results to this file")
    a = ap.parse_args(argv)
    if a.all:
        a.breakdown = a.batch = True
    import pinocchio as pin
    import numba

    info = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "numba_threads": numba.config.NUMBA_NUM_THREADS, "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__, "pinocchio": pin.__version__,
            "partree": partree.__version__, "rounds": a.rounds, "reps": a.reps}
    print(f"partree {partree.__version__}, Pinocchio {pin.__version__}, numba {numba.__version__}; "
          f"{info['cpus']} CPUs, {platform.machine()}; best of {a.rounds} interleaved rounds of {a.reps} calls")
    results = {"info": info, "per_call": {}, "skipped": {}}
    models = {}
    for name, rel, floating in ROBOTS:
        m, why = load(name, rel, floating)
        if m is None:
            print(f"{name}: skipped ({why})")
            results["skipped"][name] = why
        else:
            models[name] = m
    if not a.no_per_call:
        print("\n== time per call (us); ratio = partree / Pinocchio ==")
        print(f"{'robot':8s} {'nv':>3s} {'bodies':>6s} {'alg':5s} {'pin':>7s} {'partree':>8s} {'ratio':>6s} "
              f"{'loop':>7s} {'ratio':>6s} {'max rel diff':>12s}")
        for name, m in models.items():
            times, err = per_call(m, a.rounds, a.reps)
            results["per_call"][name] = {"nv": m.nv, "n": m.n, "times_s": times, "max_rel_diff": err}
            for alg in ALGORITHMS:
                t = times[alg]
                print(f"{name:8s} {m.nv:3d} {m.n:6d} {alg:5s} {t['pin']*1e6:7.2f} {t['partree']*1e6:8.2f} "
                      f"{t['partree']/t['pin']:6.2f} {t['partree loop']*1e6:7.2f} {t['partree loop']/t['pin']:6.2f} "
                      f"{err[alg]:12.1e}")
    if a.reference:
        ab = against_reference(models, a.reference, a.rounds)
        results["against_reference"] = {"checkout": a.reference, "times_s": ab}
        print(f"\n== the plain calls against {a.reference} (us per call, alternated) ==")
        print(f"{'robot':8s} {'alg':5s} {'reference':>10s} {'this':>8s} {'this/ref':>8s}")
        for name, r in ab.items():
            for alg, (ta, tb) in r.items():
                print(f"{name:8s} {alg:5s} {ta*1e6:10.2f} {tb*1e6:8.2f} {tb/ta:8.2f}")
    if a.breakdown:
        name = next(iter(models))
        t = breakdown(models[name], a.rounds, a.reps)
        results["breakdown"] = {"robot": name, "times_s": t}
        print(f"\n== one ABA call on {name}, where the time goes (us per call) ==")
        for k, v in t.items():
            print(f"  {k:55s} {v*1e6:7.2f}")
    if a.batch:
        m = models.get("talos")
        label = "talos"
        if m is None:
            m = partree.resolve_model("random:n=38,seed=1,floating_base=true")
            label = "random:n=38,seed=1,floating_base=true"
        threads = a.threads or numba.config.NUMBA_NUM_THREADS
        out = batch_case(m, a.states, max(3, a.rounds // 3), threads)
        results["batch"] = {"model": label, "nv": m.nv, "states": a.states, "threads": threads, "per_state_s": out}
        print(f"\n== a batch of {a.states} states of {label} (nv = {m.nv}): time per state (us) ==")
        print(f"{'alg':5s} {'1 thread':>9s} {f'{threads} threads':>10s} {'speed-up':>9s} {'pin loop':>9s} "
              f"{'vs pin':>7s}")
        for alg, r in out.items():
            print(f"{alg:5s} {r['1 thread']*1e6:9.2f} {r[f'{threads} threads']*1e6:10.2f} {r['speed-up']:9.2f} "
                  f"{r['pin loop']*1e6:9.2f} {r[f'{threads} threads']/r['pin loop']:7.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
