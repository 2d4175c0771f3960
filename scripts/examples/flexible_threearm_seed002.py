"""Seed 002's three-arm manipulator with flexible links, beside the rigid one; figures into --out DIR.

    python scripts/examples/flexible_threearm_seed002.py --out figs            # the seed's 10 s
    python scripts/examples/flexible_threearm_seed002.py --out figs --quick    # 0.2 s (tests)

The seed's inputs (``partree.models.seeds.three_arm_inputs``): motion 3 sin t deg on joints J1,
J5, J6 (active: their torques are computed), torque 10 sin t N m on J2, J3, J4, J7, J8, J9, J10
(passive).  Two runs of ``partree.simulate`` (serial backend, RK4):

- rigid: ``threearm``, dt = 1e-3 s;
- flexible: ``threearm:flexible=true,modes=6`` (every link a clamped-free beam with six bending
  modes, three per plane; 60 modal coordinates), dt = 2e-4 s (the links' highest modes, about
  5e3 rad/s, bound an explicit step), hybrid dynamics by ``flexible_hybrid_dynamics``.

Both start in the neutral configuration with the active joints at their prescribed velocity (a
consistent start; the paper starts at rest, which the prescribed motion contradicts) and the
modes undeformed, at rest.  Figures:

- ``seed002_flexible_torques.png``: the active joints' computed torques, rigid and flexible;
- ``seed002_flexible_tips.png``: the tip deflection of each arm's last link (the modal
  displacement of its tip node, ``Phi_tip eta``, in the link's frame, along its y and z
  axes: the beam's two bending directions) and the elastic energy of the links.

A dotted line marks the time from which a tip deflection passes 5 % of the link length: the
seed's torques spin the passive links up to some hundred rad/s within seconds, near the links'
first bending frequency (311 rad/s with EI = 500 N m^2), and the deflections grow past what a
small-deformation (linear modal) model describes; the run goes on, its later part is the
model's answer rather than a real beam's.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

#: the last link of each arm (whose tip deflection is plotted)
TIPS = ("arm1_link4", "arm2_link3", "arm3_link3")
ACTIVE = ("J1", "J5", "J6")
#: tip deflection, as a fraction of the link length, past which the figures mark the run
SMALL = 0.05


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def run(spec, t_end, dt, save_every, progress):
    """One run of the seed's case on the model ``spec``: (model, SimulationResult)."""
    import partree
    from partree.models.seeds import three_arm_inputs
    from partree.simulation import simulate

    m = partree.resolve_model(spec)
    inp = three_arm_inputs()
    q0, qd0 = inp.initial_state(m, consistent=True)
    torques = {j: (lambda t, _i=inp: _i.torque(t)) for j in inp.passive}
    res = simulate(m, t_end, dt, integrator="rk4", prescribed=inp, torques=torques, q0=q0, qd0=qd0,
                   record="q,qd,tau,energy", save_every=save_every, progress=progress, verbose=False)
    return m, res


def tip_deflections(model, res):
    """(K, 3, 3): the modal displacement Phi_tip eta of the tip node of every arm's last link
    (rows of TIPS), in that link's frame, m."""
    fl = model.flexible
    out = np.empty((res.t.size, len(TIPS), 3))
    for k, name in enumerate(TIPS):
        i = model.body_names.index(name)
        _, Phi, _ = fl.bodies[i].nodes["tip"]
        s = model.nq + int(fl.idx_eta[i])
        out[:, k] = res.q[:, s:s + int(fl.nmodes[i])] @ Phi.T
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="seed_figures", help="output folder")
    p.add_argument("--quick", action="store_true", help="a short run (0.2 s)")
    p.add_argument("--t-end", type=float, default=None, help="end time, s (default 10, or 0.2 with --quick)")
    p.add_argument("--dt", type=float, default=2e-4, help="step of the flexible run, s")
    p.add_argument("--modes", type=int, default=6, help="modes per link")
    a = p.parse_args(argv)
    t_end = a.t_end if a.t_end is not None else (0.2 if a.quick else 10.0)
    os.makedirs(a.out, exist_ok=True)
    sample = 0.01                                      # s between saved rows, both runs
    w0 = time.perf_counter()
    rigid, rr = run("threearm", t_end, 1e-3, int(round(sample / 1e-3)), progress=not a.quick)
    w1 = time.perf_counter()
    flex, fr = run(f"threearm:flexible=true,modes={a.modes}", t_end, a.dt, max(1, int(round(sample / a.dt))),
                   progress=not a.quick)
    w2 = time.perf_counter()
    n = min(rr.t.size, fr.t.size)
    assert np.allclose(rr.t[:n], fr.t[:n])
    defl = tip_deflections(flex, fr)
    # where the small-deformation model stops describing a real beam (a tip deflection of 5 % of
    # the link), if the run gets there
    from partree.models.seeds import THREE_ARM_LINK_LENGTH
    big = np.flatnonzero(np.linalg.norm(defl, axis=2).max(axis=1) > SMALL * THREE_ARM_LINK_LENGTH)
    t_big = float(fr.t[big[0]]) if big.size else None

    def mark(axes):
        if t_big is not None:
            for x in axes:
                x.axvline(t_big, color="0.5", ls=":", lw=1.0)

    plt = _plt()
    files = []
    fig, ax = plt.subplots(len(ACTIVE), 1, figsize=(6.4, 5.6), sharex=True)
    for k, j in enumerate(ACTIVE):
        c = rigid.v_slice(j).start
        ax[k].plot(rr.t, rr.tau[:, c], "k--", lw=1.0, label="rigid")
        ax[k].plot(fr.t, fr.tau[:, flex.v_slice(j).start], "C0", lw=0.8, label=f"flexible ({a.modes} modes/link)")
        ax[k].set_ylabel(f"{j} [N m]")
        ax[k].grid(alpha=0.3)
    mark(ax)
    ax[0].legend(fontsize=7, loc="upper left")
    ax[0].set_title("seed 002: torques of the active joints", fontsize=10)
    ax[-1].set_xlabel("t [s]")
    fig.tight_layout()
    f = os.path.join(a.out, "seed002_flexible_torques.png")
    fig.savefig(f, dpi=80)
    plt.close(fig)
    files.append(f)

    fig, ax = plt.subplots(2, 1, figsize=(6.4, 4.8), sharex=True)
    for k, name in enumerate(TIPS):
        ax[0].plot(fr.t, 1e3 * defl[:, k, 1], f"C{k}", lw=0.8, label=f"{name} y")
        ax[0].plot(fr.t, 1e3 * defl[:, k, 2], f"C{k}", lw=0.8, ls=":", label=f"{name} z")
    ax[0].set_ylabel("tip deflection [mm]")
    ax[0].legend(fontsize=6, ncol=3, loc="upper left")
    ax[0].grid(alpha=0.3)
    ax[0].set_title("seed 002, flexible links: tip deflections (link frames)", fontsize=10)
    ax[1].plot(fr.t, fr.elastic, "C3", lw=0.8, label="elastic energy")
    ax[1].set_ylabel("elastic energy [J]")
    ax[1].set_xlabel("t [s]")
    ax[1].grid(alpha=0.3)
    mark(ax)
    fig.tight_layout()
    f = os.path.join(a.out, "seed002_flexible_tips.png")
    fig.savefig(f, dpi=80)
    plt.close(fig)
    files.append(f)

    dtau = max(np.abs(fr.tau[:n, flex.v_slice(j).start] - rr.tau[:n, rigid.v_slice(j).start]).max() for j in ACTIVE)
    print(f"rigid run {w1 - w0:.1f} s, flexible run {w2 - w1:.1f} s (wall); t_end = {t_end:g} s")
    print(f"largest tip deflection {1e3 * np.linalg.norm(defl, axis=2).max():.3f} mm; largest torque difference "
          f"flexible - rigid on {', '.join(ACTIVE)}: {dtau:.4g} N m; largest elastic energy {fr.elastic.max():.4g} J")
    print(f"largest joint rates: rigid {np.abs(rr.qd).max():.4g} rad/s, flexible {np.abs(fr.qd[:, :flex.nv]).max():.4g} "
          f"rad/s; a tip deflection past {100 * SMALL:g} % of the link length "
          + (f"from t = {t_big:g} s (dotted line)" if t_big is not None else "never"))
    for f in files:
        print(f"wrote {f}")
    return files


if __name__ == "__main__":
    main()
