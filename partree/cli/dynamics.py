"""``partree dynamics``: forward and inverse dynamics of a model on one state, timed."""
from __future__ import annotations

import time

import numpy as np

from ..jit import CompileNotice
from .common import MODEL_HELP, add_floating_base, add_force, check_output, count, load_model, nonneg_int


def add_parser(sub):
    s = sub.add_parser("dynamics", help="forward and inverse dynamics on one state, timed",
                       description="Compute forward dynamics (ABA) on a state, check it with inverse dynamics "
                                   "(RNEA), report timings, energy and joint wrenches.")
    s.add_argument("model", help=MODEL_HELP)
    s.add_argument("--state", choices=("random", "neutral"), default="random",
                   help="random state and torques (default) or the neutral configuration at rest")
    s.add_argument("--seed", type=nonneg_int, default=0, help="random seed (default 0)")
    s.add_argument("--repeat", type=count, default=5, help="timed repetitions (default 5)")
    add_floating_base(s)
    s.add_argument("--out", help="write q, qd, tau, qdd and joint wrenches to this .npz file")
    add_force(s)
    s.set_defaults(func=run)
    return s


def run(a):
    import partree

    if a.out:
        if not a.out.lower().endswith(".npz"):
            raise ValueError(f"--out {a.out}: the results of 'partree dynamics' are written as .npz")
        check_output(a.out, a.force, "results file")
    m = load_model(a.model, a.floating_base, a.inertia)
    rng = np.random.default_rng(a.seed)
    if a.state == "random":
        q, qd = m.random_configuration(rng, 1.0), m.random_velocity(rng, 1.0)
    else:
        q, qd = m.neutral(), np.zeros(m.nv)
    tau = rng.uniform(-1, 1, m.nv) if a.state == "random" else np.zeros(m.nv)
    print(f"{m!r}", flush=True)
    with CompileNotice(lambda line: print(line, flush=True)) as notice:
        t0 = time.perf_counter()
        qdd = partree.aba(m, q, qd, tau)
        first = time.perf_counter() - t0
        partree.rnea(m, q, qd, qdd, return_wrenches=True)
        partree.energy(m, q, qd)
        notice.done()
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        qdd = partree.aba(m, q, qd, tau)
        times.append(time.perf_counter() - t0)
    tau_back, W = partree.rnea(m, q, qd, qdd, return_wrenches=True)
    t0 = time.perf_counter()
    partree.rnea(m, q, qd, qdd)
    t_rnea = time.perf_counter() - t0
    # normwise backward error: the terms of M qdd + h = tau that cancel (h = RNEA(q, qd, 0)) set
    # the scale; on a long chain |h| is many orders above |tau|
    h = partree.rnea(m, q, qd, np.zeros_like(qdd))
    err = np.abs(tau_back - tau).max() / max(np.abs(tau).max() + np.abs(h).max(), 1e-300)
    T, V = partree.energy(m, q, qd)
    best = min(times) if times else first
    print(f"forward dynamics (ABA): first call {first * 1e3:.2f} ms (includes {'compiling' if notice.compiled else 'loading'} "
          f"the kernels), "
          f"best of {a.repeat}: {best * 1e3:.3f} ms = {best / m.n * 1e9:.0f} ns per body")
    print(f"inverse dynamics (RNEA): {t_rnea * 1e3:.3f} ms; backward error |RNEA(qdd) - tau| / (|tau| + |h|) = {err:.2e}")
    print(f"energy: kinetic {T:.6g} J, potential {V:.6g} J; |qdd|max {np.abs(qdd).max():.4g}; "
          f"largest joint force {np.linalg.norm(W[:, 3:], axis=1).max():.4g} N at joint "
          f"{m.joint_names[int(np.argmax(np.linalg.norm(W[:, 3:], axis=1)))]!r}")
    if a.out:
        np.savez(a.out, q=q, qd=qd, tau=tau, qdd=qdd, joint_wrench=W)
        print(f"wrote {a.out} (q, qd, tau, qdd, joint_wrench)")
    return 0
