#!/usr/bin/env python
"""Seed 000's example: the free-floating two-arm space robot, simulated with the recursive
algorithm (ABA) and with the constraint force algorithm (general and odd-even forms).

    python scripts/examples/space_robot_cfa.py                    # 10 s at 0.002 s, plots into ./out
    python scripts/examples/space_robot_cfa.py --t-end 0.1 --out /tmp/sr --repeat 1     # short run

What it does
  1. simulates 10 s (``--t-end``) at 0.002 s steps (``--dt``) with classical RK4 on (q, qd) for
     each dynamics method: dense mass matrix (CRBA + bias forces + Cholesky solve), recursive
     (ABA), CFA general (sparse assembly of A = W^T P^T I^-1 P W) and CFA odd-even;
  2. checks that the trajectories of ABA, CFA general and CFA odd-even agree (the paper: relative
     difference below 1e-12) and prints the largest relative differences;
  3. prints the paper's timing table (table 1): dynamics time per step of every method, best of
     ``--repeat`` runs;
  4. plots (PNG, into ``--out``): base attitude, arm-1 joint angles, and the constraint force at
     joint L11 (where link L11 meets its inner body, the base), from CFA odd-even.

Integration of the floating base: its free joint has q = [position in the parent (world) frame,
quaternion xyzw] and v = [linear, angular] velocity in the body frame, so
    p_dot = R(quat) v_lin,   quat_dot = 1/2 quat (x) [w_body; 0]
(spherical joints likewise); RK4 integrates these and the quaternions are renormalised after
every step.

Drive torques (the paper does not list them; chosen): every arm joint gets
tau = A_k sin(2 pi t / T_k + phi), with amplitudes (4, 2, 1) N m for the shoulder-yaw,
shoulder-pitch and elbow joints, periods (10, 5, 4) s, and arm 2 phase-shifted by pi/2 so that the
base both translates and rotates.
"""
import argparse
import os
import time

import numpy as np

import partree
from partree import joints as J
from partree.algorithms.cfa import cfa
from partree.models.seeds import space_robot

AMPLITUDES = (4.0, 2.0, 1.0)
PERIODS = (10.0, 5.0, 4.0)


# ----------------------------------------------------------------------------------------------
# configuration rates (quaternions) and RK4
# ----------------------------------------------------------------------------------------------
def _quat_idx(model):
    """Index arrays of the quaternions (k, 4), their angular velocities (k, 3), and for free joints
    the positions (f, 3) and linear velocities (f, 3)."""
    sph = np.flatnonzero(model.jtype == J.SPHERICAL)
    fre = np.flatnonzero(model.jtype == J.FREE)
    qi = np.concatenate([model.idx_q[sph][:, None] + np.arange(4), model.idx_q[fre][:, None] + 3 + np.arange(4)])
    wi = np.concatenate([model.idx_v[sph][:, None] + np.arange(3), model.idx_v[fre][:, None] + 3 + np.arange(3)])
    pi = model.idx_q[fre][:, None] + np.arange(3)
    li = model.idx_v[fre][:, None] + np.arange(3)
    simple = np.flatnonzero(np.isin(model.jtype, (J.REVOLUTE, J.PRISMATIC, J.UNIVERSAL)))
    sq = np.concatenate([model.idx_q[i] + np.arange(model.nq_j[i]) for i in simple]) if simple.size else \
        np.zeros(0, dtype=int)
    sv = np.concatenate([model.idx_v[i] + np.arange(model.nv_j[i]) for i in simple]) if simple.size else \
        np.zeros(0, dtype=int)
    # free joints: which quaternion row belongs to each (the last len(fre) rows of qi)
    return dict(qi=qi, wi=wi, pi=pi, li=li, sq=sq, sv=sv, nfree=fre.size)


def _quat_rotate(qt, x):
    u = qt[:, :3]
    w = qt[:, 3:4]
    t = 2.0 * np.cross(u, x)
    return x + w * t + np.cross(u, t)


def qdot(model, idx, q, v):
    """dq/dt from the generalised velocity v."""
    out = np.zeros(model.nq)
    out[idx["sq"]] = v[idx["sv"]]
    if idx["qi"].size:
        qt = q[idx["qi"]]
        w = v[idx["wi"]]
        x, y, z, s = qt[:, 0], qt[:, 1], qt[:, 2], qt[:, 3]
        wx, wy, wz = w[:, 0], w[:, 1], w[:, 2]
        # 1/2 q (x) [w; 0]  (Hamilton product, xyzw storage)
        out[idx["qi"]] = 0.5 * np.stack([s * wx + y * wz - z * wy,
                                         s * wy + z * wx - x * wz,
                                         s * wz + x * wy - y * wx,
                                         -(x * wx + y * wy + z * wz)], axis=1)
    if idx["nfree"]:
        qt = q[idx["qi"][-idx["nfree"]:]]
        qt = qt / np.linalg.norm(qt, axis=1, keepdims=True)
        out[idx["pi"]] = _quat_rotate(qt, v[idx["li"]])
    return out


def torques(model, t):
    """Drive torques of the arm joints at time t (see the module docstring)."""
    tau = np.zeros(model.nv)
    for arm, phase in ((1, 0.0), (2, 0.5 * np.pi)):
        for k, (A, T) in enumerate(zip(AMPLITUDES, PERIODS)):
            name = f"L{arm}{k + 1}"
            try:
                sl = model.v_slice(name)
            except KeyError:
                continue
            tau[sl] = A * np.sin(2.0 * np.pi * t / T + phase)
    return tau


def simulate(model, accel, q0, v0, dt, nsteps):
    """Classical RK4 on (q, v); quaternions renormalised after each step.  Returns (Q, V, t_dyn)
    with the trajectory and the time spent in the dynamics (accel) calls."""
    idx = _quat_idx(model)
    Q = np.empty((nsteps + 1, model.nq))
    V = np.empty((nsteps + 1, model.nv))
    q, v = q0.copy(), v0.copy()
    Q[0], V[0] = q, v
    t_dyn = 0.0
    clock = time.perf_counter

    def f(t, q, v):
        nonlocal t_dyn
        tau = torques(model, t)
        t0 = clock()
        a = accel(q, v, tau)
        t_dyn += clock() - t0
        return qdot(model, idx, q, v), a

    for s in range(nsteps):
        t = s * dt
        k1q, k1v = f(t, q, v)
        k2q, k2v = f(t + 0.5 * dt, q + 0.5 * dt * k1q, v + 0.5 * dt * k1v)
        k3q, k3v = f(t + 0.5 * dt, q + 0.5 * dt * k2q, v + 0.5 * dt * k2v)
        k4q, k4v = f(t + dt, q + dt * k3q, v + dt * k3v)
        q = q + dt / 6.0 * (k1q + 2 * k2q + 2 * k3q + k4q)
        v = v + dt / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        if idx["qi"].size:
            qt = q[idx["qi"]]
            q[idx["qi"]] = qt / np.linalg.norm(qt, axis=1, keepdims=True)
        Q[s + 1], V[s + 1] = q, v
    return Q, V, t_dyn


# ----------------------------------------------------------------------------------------------
# the four dynamics methods
# ----------------------------------------------------------------------------------------------
def methods(model):
    import scipy.linalg as sla

    def dense(q, v, tau):
        M = partree.crba(model, q)
        h = partree.bias_forces(model, q, v)
        return sla.cho_solve(sla.cho_factor(M), tau - h)

    return {
        "dense mass matrix (CRBA + solve)": dense,
        "recursive (ABA)": lambda q, v, tau: partree.aba(model, q, v, tau),
        "CFA general": lambda q, v, tau: cfa(model, q, v, tau, method="general").qdd,
        "CFA odd-even": lambda q, v, tau: cfa(model, q, v, tau, method="odd-even").qdd,
    }


def euler_zyx(qt):
    """Yaw-pitch-roll (ZYX) angles in degrees of quaternions (k, 4) xyzw."""
    x, y, z, w = qt.T
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.degrees(np.stack([roll, pitch, yaw], axis=1))


def plots(model, T, Q, FS, W, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(outdir, exist_ok=True)
    base = model.q_slice("base")
    att = np.degrees(np.unwrap(np.radians(euler_zyx(Q[:, base.start + 3:base.start + 7])), axis=0))
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, lab in enumerate(("roll (x)", "pitch (y)", "yaw (z)")):
        ax.plot(T, att[:, k], label=lab)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("base attitude [deg]")
    ax.set_title("Base attitude (ZYX Euler angles, unwrapped)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "base_attitude.png"), dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for name in (n for n in model.joint_names if str(n).startswith("L1")):
        ax.plot(T, np.degrees(Q[:, model.q_slice(name)]), label=name)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("joint angle [deg]")
    ax.set_title("Arm 1 joint angles")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "arm1_joint_angles.png"), dpi=120)
    plt.close(fig)

    # the constraint force as a wrench in the body frame of L11: W F_S = [n; f]
    Wr = FS @ W.T
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for k, lab in enumerate("xyz"):
        if np.abs(W[k]).max() > 0:
            a1.plot(T, Wr[:, k], label=f"n_{lab}")
        a2.plot(T, Wr[:, 3 + k], label=f"f_{lab}")
    a1.set_ylabel("constraint moment [N m]")
    a2.set_ylabel("constraint force [N]")
    a2.set_xlabel("t [s]")
    a1.set_title("Constraint force at joint L11 (link L11 / base), body frame of L11")
    for a in (a1, a2):
        a.legend()
        a.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "constraint_force_L11.png"), dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--t-end", type=float, default=10.0)
    ap.add_argument("--dt", type=float, default=0.002)
    ap.add_argument("--out", default="out")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs per method (best is reported)")
    ap.add_argument("--general-repeat", type=int, default=1,
                    help="timing runs of 'CFA general' (slow: scipy.sparse assembly every call)")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)

    model = space_robot()
    nsteps = int(round(args.t_end / args.dt))
    q0 = model.neutral()
    # start from a bent configuration (elbows and shoulders at 30-45 degrees) and at rest
    for name, ang in (("L12", 0.5), ("L13", -0.8), ("L22", -0.4), ("L23", 0.7)):
        q0[model.q_slice(name)] = ang
    v0 = np.zeros(model.nv)
    print(f"{model}\nsimulating {args.t_end:g} s at dt = {args.dt:g} s ({nsteps} RK4 steps, 4 dynamics calls each)")

    meth = methods(model)
    for f in meth.values():        # warm-up (JIT compilation)
        f(q0, v0, torques(model, 0.0))
    traj = {}
    timing = {}
    for name, f in meth.items():
        best = np.inf
        for _ in range(max(1, args.general_repeat if name == "CFA general" else args.repeat)):
            Q, V, t_dyn = simulate(model, f, q0, v0, args.dt, nsteps)
            best = min(best, t_dyn)
        traj[name] = (Q, V)
        timing[name] = best / max(nsteps, 1)

    # agreement (the paper: below 1e-12)
    Qr, Vr = traj["recursive (ABA)"]
    print("\nrelative difference to the recursive algorithm over the whole trajectory "
          "(max|dx| / max|x|, and ||dx|| / ||x|| over all steps):")
    for name in ("CFA general", "CFA odd-even", "dense mass matrix (CRBA + solve)"):
        Q, V = traj[name]
        eq = np.abs(Q - Qr).max() / np.abs(Qr).max()
        ev = np.abs(V - Vr).max() / max(np.abs(Vr).max(), 1e-300)
        fq = np.linalg.norm(Q - Qr) / np.linalg.norm(Qr)
        fv = np.linalg.norm(V - Vr) / max(np.linalg.norm(Vr), 1e-300)
        print(f"  {name:<34} q: {eq:.2e} / {fq:.2e}   qd: {ev:.2e} / {fv:.2e}")

    print(f"\nTable 1 (seed 000): dynamics time per step (4 evaluations per RK4 step), best of {args.repeat} runs "
          f"({args.general_repeat} for CFA general)")
    print(f"  {'method':<34}{'ms / step':>12}{'x ABA':>8}")
    for name, t in timing.items():
        print(f"  {name:<34}{1e3 * t:>12.4f}{t / timing['recursive (ABA)']:>8.2f}")

    # constraint force at L11 along the odd-even trajectory
    Q, V = traj["CFA odd-even"]
    T = np.arange(nsteps + 1) * args.dt
    FS = np.empty((nsteps + 1, 6 - int(model.nv_j[model.joint_id("L11")])))
    for s in range(nsteps + 1):
        res = cfa(model, Q[s], V[s], torques(model, T[s]))
        FS[s] = res.constraint_force_of("L11")
    W = res.constraint_basis("L11")
    print("\nconstraint force F_S at joint L11 in its basis W (rows of W^T: constraint directions [n; f] in the "
          "body frame of L11):")
    print("  " + np.array2string(W.T.round(6) + 0.0, precision=3).replace("\n", "\n  "))
    print(f"  F_S at t = 0: {np.array2string(FS[0], precision=4)}, at t = {T[-1]:g} s: "
          f"{np.array2string(FS[-1], precision=4)}")
    if not args.no_plots:
        plots(model, T, Q, FS, W, args.out)
        print(f"plots written to {os.path.abspath(args.out)}: base_attitude.png, arm1_joint_angles.png, "
              f"constraint_force_L11.png")


if __name__ == "__main__":
    main()
