"""The seed papers' examples, simulated with partree.simulation; figures into --out DIR.

    python scripts/examples/seed_examples.py --out figs            # full runs
    python scripts/examples/seed_examples.py --out figs --quick    # short runs (tests)

- seed 000: free-floating two-arm space robot, 10 s at dt = 0.002 s (RK4): base attitude, arm-1
  joint angles, and the joint (constraint) force at joint 'L11'.  The paper's drive torques are
  not in the model package; here arm 1 is driven by tau = 20 sin(pi t) N m on L11..L13 (chosen),
  arm 2 is free.
- seed 001: Cardan chains of 5..50 bodies: wall time per RK4 step (table and figure).
- seed 002: three-arm manipulator with its hybrid inputs (motion 3 sin t deg on J1, J5, J6;
  torque 10 sin t N m on the others), prescribed-motion joints solved with the mass matrix split
  into active / passive blocks; the initial velocities of the active joints are the prescribed
  ones (consistent start; the paper starts at rest, which the prescribed motion contradicts).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _quat_to_euler_zyx(qt):
    x, y, z, w = qt.T
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1, 1))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.stack([roll, pitch, yaw], axis=1)


def seed000(out, quick):
    from partree.models.seeds import space_robot
    from partree.simulation import simulate
    plt = _plt()
    m = space_robot()
    t_end, dt = (0.5, 0.002) if quick else (10.0, 0.002)
    drive = {j: (lambda t: 20.0 * np.sin(np.pi * t)) for j in ("L11", "L12", "L13")}
    res = simulate(m, t_end, dt, integrator="rk4", torques=drive, wrench_joints=["L11"], save_every=5,
                   out=os.path.join(out, "seed000_space_robot.h5"), overwrite=True, progress=not quick,
                   verbose=True)
    qb, _ = res.joint("base")
    eul = np.rad2deg(_quat_to_euler_zyx(qb[:, 3:7]))
    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for c, lab in enumerate(("roll", "pitch", "yaw")):
        ax[0].plot(res.t, eul[:, c], label=lab)
    ax[0].set_ylabel("base attitude [deg]")
    for j in ("L11", "L12", "L13"):
        ax[1].plot(res.t, np.rad2deg(res.joint(j)[0][:, 0]), label=j)
    ax[1].set_ylabel("arm-1 joint angle [deg]")
    W = res.wrench("L11")
    for c, lab in enumerate(("f_x", "f_y", "f_z")):
        ax[2].plot(res.t, W[:, 3 + c], label=lab)
    ax[2].set_ylabel("force at joint L11 [N]\n(link frame)")
    ax[2].set_xlabel("t [s]")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    ax[0].set_title("seed 000: space robot, arm 1 driven by 20 sin(πt) N m")
    fig.tight_layout()
    f = os.path.join(out, "seed000_space_robot.png")
    fig.savefig(f, dpi=110)
    plt.close(fig)
    return [f]


def seed001(out, quick):
    from partree.models.seeds import cardan_chain
    from partree.simulation import simulate
    plt = _plt()
    sizes = (5, 10, 20) if quick else (5, 10, 20, 30, 40, 50)
    steps = 50 if quick else 500
    rows = []
    for n in sizes:
        m = cardan_chain(n)
        q0 = np.full(m.nq, 0.1)
        simulate(m, 0.01, 0.001, q0=q0, progress=False, verbose=False)         # warm-up
        t0 = time.perf_counter()
        r = simulate(m, steps * 1e-3, 1e-3, q0=q0, save_every=steps, progress=False, verbose=False)
        w = time.perf_counter() - t0
        rows.append((n, m.nv, w / steps * 1e6, r.summary["energy"]["max_rel_drift"]))
    lines = ["bodies  dof  us/step(RK4, 4 ABA)  energy drift"] + \
            [f"{n:6d} {nv:4d} {us:20.1f}  {d:.2e}" for n, nv, us, d in rows]
    table = "\n".join(lines)
    print("seed 001: Cardan chains, time per RK4 step\n" + table)
    with open(os.path.join(out, "seed001_cardan_timing.txt"), "w") as fh:
        fh.write(table + "\n")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r[0] for r in rows], [r[2] for r in rows], "o-")
    ax.set_xlabel("bodies in the Cardan chain")
    ax.set_ylabel("wall time per RK4 step [µs]")
    ax.set_title("seed 001: Cardan chains (serial ABA, RK4)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    f = os.path.join(out, "seed001_cardan_timing.png")
    fig.savefig(f, dpi=110)
    plt.close(fig)
    return [f, os.path.join(out, "seed001_cardan_timing.txt")]


def seed002(out, quick):
    from partree.models.seeds import three_arm_inputs, three_arm_manipulator
    from partree.simulation import simulate
    plt = _plt()
    m = three_arm_manipulator()
    inp = three_arm_inputs()
    q0, qd0 = inp.initial_state(m, consistent=True)
    torques = {j: (lambda t, _i=inp: _i.torque(t)) for j in inp.passive}
    t_end = 1.0 if quick else 10.0
    res = simulate(m, t_end, 1e-3, integrator="rk4", prescribed=inp, torques=torques, q0=q0, qd0=qd0,
                   record="all", save_every=10, out=os.path.join(out, "seed002_three_arm.h5"), overwrite=True,
                   progress=not quick, verbose=True)
    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for j in ("J1", "J5", "J6"):
        ax[0].plot(res.t, np.rad2deg(res.joint(j)[0][:, 0]), label=f"{j} (prescribed)")
    for j in ("J3", "J5", "J8"):
        ax[1].plot(res.t, np.rad2deg(res.joint(j)[0][:, 0]), label=j)
    for j in ("J1", "J5", "J6"):
        ax[2].plot(res.t, res.tau[:, m.v_slice(j).start], label=f"{j} drive torque")
    ax[0].set_ylabel("active joints [deg]")
    ax[1].set_ylabel("joints 3, 5, 8 [deg]")
    ax[2].set_ylabel("computed torque [N m]")
    ax[2].set_xlabel("t [s]")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    ax[0].set_title("seed 002: three-arm manipulator, hybrid inputs")
    fig.tight_layout()
    f = os.path.join(out, "seed002_three_arm.png")
    fig.savefig(f, dpi=110)
    plt.close(fig)
    return [f]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="seed_figures", help="output folder")
    p.add_argument("--quick", action="store_true", help="short runs")
    p.add_argument("--only", nargs="+", choices=("000", "001", "002"), default=("000", "001", "002"))
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    files = []
    for s in a.only:
        files += {"000": seed000, "001": seed001, "002": seed002}[s](a.out, a.quick)
    for f in files:
        print(f"wrote {f}")
    return files


if __name__ == "__main__":
    main()
