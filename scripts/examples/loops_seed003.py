"""Seed 003's closed-loop examples, simulated with partree.simulate; figures into --out DIR.

    python scripts/examples/loops_seed003.py --out figs            # full runs
    python scripts/examples/loops_seed003.py --out figs --quick    # short runs (tests)
    python scripts/examples/loops_seed003.py --only andrews        # one example

- four-bar: the planar parallelogram four-bar (three 1 m, 1 kg bars, theta1 = theta3 = pi/4,
  theta2 = 0, at rest, gravity along -y) swinging through its singular positions (theta1 = 0
  and pi mod 2 pi, where the three bars align and the loop's Jacobian loses a rank): 14 passages
  in 10 s.  theta1(t) against the exact one-DOF reduction, the error and the violation, for the
  corrections in the kinetic-energy metric (partree.simulate's default) and in the Euclidean
  one, each with and without seed 003's tangent-space acceleration correction (eq. 31, a band
  of 1e-2).
- spatial: the four-bar with universal joints of seed 003 section 3.2 (bars 0.5 m, 1 kg; a
  revolute crank, two universal joints, the revolute joint to the ground cut, so 5 rows of
  which 3 are redundant), the crank turning at 124.8 rad/s, against the paper's analytic
  solution (eq. 33): alpha1 = pi/2 - w t, alpha2 = -pi/2 + w t, alpha3 = alpha5 = 0,
  alpha4 = -3 pi/2 - w t.  The linkage is a parallelogram and its kinetic energy does not
  depend on the configuration, so without gravity the crank's uniform rotation is the free
  motion (no drive torque): it passes a singular position twice per turn.  The cut joint's
  force against the analytic one, m w^2 L towards the rocker's pivot.
- andrews: Andrews' squeezing mechanism (seed 003 section 3.3, the seven-body mechanism), with
  the data of Hairer & Wanner, Solving ODEs II, and of the test set for IVP solvers (Mazzia et
  al.): seven bodies on revolute joints, three revolute loops closing at point E, the drive
  torque mom = 0.033 N m on the crank and the spring c0 = 4530 N/m, l0 = 0.07785 m from point C
  to body 3 (an external force), no gravity; the consistent initial state of the test set, the
  published initial accelerations and multipliers, and its reference solution at t = 0.03 s.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import partree
from partree.algorithms.loop_constraints import constraint_terms
from partree.algorithms.loop_correction import mass_metric, singular_band_acceleration
from partree.simulation.closure import LoopClosure
from partree.simulation.dynamics import Dynamics
from partree.simulation.integrators import RK4, StateSpace


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def fixed_step_run(model, t_end, dt, q0, qd0=None, metric="mass", band=0.0, save_every=1, **inputs):
    """RK4 with the loops corrected after every step in a chosen metric ('mass', as
    partree.simulate does, or 'euclidean'), optionally with seed 003's tangent-space acceleration
    correction (eq. 31) in the same metric.  Returns (t, q, qd, violation) at the save points."""
    dyn = Dynamics(model, **inputs)

    def f(t, q, v):
        qdd = dyn(t, q, v)
        if band:
            _, J, gamma = constraint_terms(model, q, v, dense=True)
            qdd = singular_band_acceleration(J, gamma, qdd, band, W=mass_metric(model, q, metric))
        return qdd

    integ = RK4(f, StateSpace(model))
    closure = LoopClosure(model, metric=metric)
    q, v = closure.initial(np.asarray(q0, float), np.zeros(model.nv) if qd0 is None else np.asarray(qd0, float))
    n = int(round(t_end / dt))
    rows = [(0.0, q, v, closure.violation(q))]
    for k in range(1, n + 1):
        q, v = closure(*integ.step((k - 1) * dt, q, v, dt))
        if k % save_every == 0 or k == n:
            rows.append((k * dt, q, v, closure.violation(q)))
    t, Q, V, viol = zip(*rows)
    return np.array(t), np.array(Q), np.array(V), np.array(viol)


# ------------------------------------------------------------------------------ planar four-bar
G = 9.81


def planar_four_bar():
    """Seed 003's planar four-bar: crank, coupler and rocker, 1 m and 1 kg each, on revolute
    joints about z, the ground link 1 m; the coupler's tip pinned to the rocker's by a revolute
    loop (5 rows, 2 independent)."""
    b = partree.ModelBuilder("four-bar", gravity=(0, -G, 0))
    for name, parent, at in (("crank", None, (0, 0, 0)), ("coupler", "crank", (1, 0, 0)),
                             ("rocker", None, (1, 0, 0))):
        b.add_body(name, parent, "revolute", at, mass=1.0, com=(0.5, 0, 0), inertia=(1e-9, 1 / 12, 1 / 12))
    b.add_loop("pin", "revolute", "coupler", "rocker", (1, 0, 0), (1, 0, 0))
    return b.build()


def four_bar_reduction(t, th0=np.pi / 4):
    """The parallelogram's exact one-DOF motion: (2/3 + 1) m L^2 th'' = -2 m g L cos th."""
    from scipy.integrate import solve_ivp
    sol = solve_ivp(lambda _, y: [y[1], -2 * G * np.cos(y[0]) / (5 / 3)], (0, t[-1]), [th0, 0.0], t_eval=t,
                    rtol=1e-12, atol=1e-12, method="DOP853")
    return sol.y


def _rk4_reduction(t, dt, th0=np.pi / 4):
    """theta1 at the times t (multiples of dt) by RK4 at step dt on the reduced equation: the
    integrator's own error, the floor of the loop simulation's."""
    def f(y):
        return np.array([y[1], -2 * G * np.cos(y[0]) / (5 / 3)])
    y, out, k = np.array([th0, 0.0]), [], 0
    for target in np.rint(np.asarray(t) / dt).astype(int):
        while k < target:
            k1 = f(y)
            k2 = f(y + dt / 2 * k1)
            k3 = f(y + dt / 2 * k2)
            k4 = f(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            k += 1
        out.append(y[0])
    return np.array(out)


def _window_max(t, x, width):
    """The largest x in consecutive windows of ``width`` (for a readable log plot)."""
    edges = np.arange(t[0], t[-1] + width, width)
    idx = np.clip(np.searchsorted(t, edges), 0, len(t))
    vals = [x[i:j].max() for i, j in zip(idx[:-1], idx[1:]) if j > i]
    return edges[:len(vals)], np.array(vals)


def four_bar(out, quick):
    """The planar four-bar through its singular positions; returns (files, numbers)."""
    plt = _plt()
    m = planar_four_bar()
    q0 = np.array([np.pi / 4, -np.pi / 4, np.pi / 4])
    t_end, dt, every = (2.0, 1e-3, 10) if quick else (10.0, 1e-3, 10)
    t0 = time.perf_counter()
    res = partree.simulate(m, t_end, dt, q0=q0, integrator="rk4", save_every=every, progress=False)
    wall = time.perf_counter() - t0
    runs = {"kinetic-energy metric (default)": (res.t, res.q, res.violation)}
    for label, metric, band in (("kinetic-energy metric + eq. 31 band 1e-2", "mass", 1e-2),
                                ("Euclidean metric", "euclidean", 0.0),
                                ("Euclidean metric + eq. 31 band 1e-2", "euclidean", 1e-2)):
        t, q, _, viol = fixed_step_run(m, t_end, dt, q0, metric=metric, band=band, save_every=every)
        runs[label] = (t, q, viol)
    ref = four_bar_reduction(res.t)
    passages = int(np.count_nonzero(np.diff(np.floor(res.q[:, 0] / np.pi))))
    numbers = {"t_end": t_end, "passages": passages, "wall_s": wall}
    print(f"four-bar: {t_end:g} s, RK4 dt = {dt:g} s, {passages} singular passages; simulate took {wall:.1f} s")
    print(f"  {'corrections':44s} max|theta1 - reduction|   max violation")
    for label, (t, q, viol) in runs.items():
        err = float(np.abs(q[:, 0] - ref[0]).max())
        numbers[label] = (err, float(viol.max()))
        print(f"  {label:44s} {err:22.3g}   {viol.max():.3g}")
    numbers["rk4_floor"] = float(np.abs(_rk4_reduction(res.t, dt) - ref[0]).max())
    print(f"  {'(RK4 on the reduced equation itself)':44s} {numbers['rk4_floor']:22.3g}")

    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    ax[0].plot(res.t, ref[0], "k-", lw=2.5, alpha=0.35, label="exact one-DOF reduction")
    ax[0].plot(res.t, res.q[:, 0], "C0--", lw=1, label="partree.simulate (default options)")
    for k in np.arange(np.floor(ref[0].min() / np.pi), np.ceil(ref[0].max() / np.pi) + 1):
        ax[0].axhline(k * np.pi, color="C3", lw=0.6, ls=":")
    ax[0].set_ylabel("θ1 [rad]\n(dotted: singular, bars aligned)")
    styles = ("C0-", "C2--", "C3-", "C1--")
    for (label, (t, q, viol)), st in zip(runs.items(), styles):
        ax[1].semilogy(t[1:], np.abs(q[1:, 0] - ref[0][1:]) + 1e-17, st, lw=1, label=label)
        tw, vw = _window_max(t, viol, 0.1)
        ax[2].semilogy(tw, vw + 1e-17, st, lw=1, drawstyle="steps-post", label=label)
    rk4 = _rk4_reduction(res.t, dt)
    ax[1].semilogy(res.t[1:], np.abs(rk4[1:] - ref[0][1:]) + 1e-17, "k:", lw=1,
                   label="RK4 on the reduced equation itself")
    ax[1].set_ylim(1e-16, 1e-4)
    ax[1].set_ylabel("|θ1 − reduction| [rad]")
    ax[2].set_ylabel("violation max|Φ| [m]\n(largest in 0.1 s)")
    ax[2].set_xlabel("t [s]")
    ax[2].set_ylim(1e-17, 1e-9)
    for a in ax:
        a.grid(alpha=0.3)
    ax[0].legend(fontsize=8, loc="lower left")
    ax[1].legend(fontsize=7, loc="upper left", ncol=2)
    ax[2].legend(fontsize=7, loc="upper left", ncol=2)
    ax[0].set_title(f"seed 003: planar four-bar, {passages} singular passages (RK4, dt = {dt:g} s)")
    fig.tight_layout()
    f = os.path.join(out, "seed003_four_bar.png")
    fig.savefig(f, dpi=100)
    plt.close(fig)
    return [f], numbers


# ------------------------------------------------------------------------------ spatial four-bar
W_CRANK = 124.8
L_BAR = 0.5


def spatial_four_bar():
    """Seed 003's spatial four-bar: three 0.5 m, 1 kg bars (uniform rods, length along x), the
    crank on a revolute joint about z at the origin, the coupler and the rocker on universal
    joints (first axis z, second axis the bar's y); the rocker points along its -x from its
    universal joint to the ground pivot at (0.5, 0, 0), where a revolute loop about z closes
    the linkage (5 rows for 1 + 2 + 2 coordinates, 4 independent).  No gravity."""
    L, m = L_BAR, 1.0
    inertia = (1e-6, m * L * L / 12, m * L * L / 12)
    z, y = (0, 0, 1), (0, 1, 0)
    b = partree.ModelBuilder("spatial four-bar", gravity=(0, 0, 0))
    b.add_body("bar1", None, "revolute", (0, 0, 0), mass=m, com=(L / 2, 0, 0), inertia=inertia, axis=z,
               joint_name="alpha1")
    b.add_body("bar2", "bar1", "universal", (L, 0, 0), mass=m, com=(L / 2, 0, 0), inertia=inertia, axis=(z, y),
               joint_name="U2")
    b.add_body("bar3", "bar2", "universal", (L, 0, 0), mass=m, com=(-L / 2, 0, 0), inertia=inertia, axis=(z, y),
               joint_name="U3")
    b.add_loop("cut", "revolute", None, "bar3", (L, 0, 0), (-L, 0, 0), axis=z)
    return b.build()


def spatial_exact(t, w=W_CRANK):
    """Seed 003's eq. 33: (alpha1, ..., alpha5)(t) (partree's q: alpha1, U2's two angles, U3's)."""
    t = np.asarray(t, float)
    z = np.zeros_like(t)
    return np.stack([np.pi / 2 - w * t, -np.pi / 2 + w * t, z, -1.5 * np.pi - w * t, z], axis=-1)


def spatial_force(t, w=W_CRANK, L=L_BAR, m=1.0):
    """The force of the ground on the rocker at the cut joint, world axes, for eq. 33's motion:
    m a_P, the crank tip's centripetal acceleration (-m w^2 L (cos a1, sin a1))."""
    a1 = np.pi / 2 - w * np.asarray(t, float)
    return -m * w * w * L * np.stack([np.cos(a1), np.sin(a1)], axis=-1)


def spatial(out, quick):
    """The spatial four-bar against eq. 33; returns (files, numbers)."""
    plt = _plt()
    m = spatial_four_bar()
    q0 = spatial_exact(0.0)
    qd0 = np.array([-W_CRANK, W_CRANK, 0.0, -W_CRANK, 0.0])
    t_end, dt, every = (0.06, 5e-5, 2) if quick else (0.2, 5e-5, 2)
    t0 = time.perf_counter()
    res = partree.simulate(m, t_end, dt, q0=q0, qd0=qd0, integrator="rk4", save_every=every, progress=False)
    wall = time.perf_counter() - t0
    exact = spatial_exact(res.t)
    err = np.abs(res.q - exact).max(axis=1)
    te, qe, _, viol_e = fixed_step_run(m, t_end, dt, q0, qd0, metric="euclidean", save_every=every)
    err_e = np.abs(qe - spatial_exact(te)).max(axis=1)
    F = np.array([partree.constrained_dynamics(m, q, v, np.zeros(m.nv)).loop_force_of("cut")[3:5]
                  for q, v in zip(res.q, res.qd)])
    Fx = spatial_force(res.t)
    a1 = res.q[:, 0]
    sing = np.abs(np.sin(a1)) > 1e-2             # away from the singular positions (horizontal bars)
    ferr = float(np.abs(F - Fx)[sing].max() / (W_CRANK ** 2 * L_BAR))
    passages = int(np.count_nonzero(np.diff(np.floor(a1 / np.pi))))
    rank = partree.constrained_dynamics(m, q0, qd0, np.zeros(5)).rank
    numbers = {"t_end": t_end, "err": float(err.max()), "err_euclidean": float(err_e.max()),
               "violation": float(res.violation.max()), "force_rel_err": ferr, "passages": passages,
               "wall_s": wall, "rank": rank}
    print(f"spatial four-bar: {t_end:g} s at 124.8 rad/s ({W_CRANK * t_end / (2 * np.pi):.2f} turns, {passages} "
          f"singular passages), RK4 dt = {dt:g} s, rank {rank} of 5 rows; simulate took {wall:.1f} s")
    print(f"  max |alpha - eq. 33|: {err.max():.3g} rad (Euclidean-metric corrections: {err_e.max():.3g}); "
          f"max violation {res.violation.max():.3g}")
    print(f"  cut-joint force vs m w^2 L (cos, sin), away from the singular positions: {ferr:.3g} relative")

    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    tm = res.t * 1e3
    for k, lab in ((0, "α1"), (1, "α2"), (3, "α4")):
        ax[0].plot(tm, exact[:, k], "k-", lw=2.5, alpha=0.3)
        ax[0].plot(tm, res.q[:, k], "--", lw=1, label=f"{lab} (α3 = α5 = 0)" if k == 0 else lab)
    ax[0].plot([], [], "k-", lw=2.5, alpha=0.3, label="eq. 33")
    ax[0].set_ylabel("joint angle [rad]")
    ax[1].semilogy(tm, err + 1e-18, "C0-", lw=1, label="kinetic-energy metric (default)")
    ax[1].semilogy(te * 1e3, err_e + 1e-18, "C3-", lw=1, label="Euclidean metric")
    ax[1].set_ylabel("max |α − eq. 33| [rad]")
    for c, lab in enumerate(("x", "y")):
        ax[2].plot(tm, Fx[:, c], "k-", lw=2.5, alpha=0.3)
        ax[2].plot(tm, F[:, c], f"C{c}--", lw=1, label=f"F_{lab}")
    ax[2].plot([], [], "k-", lw=2.5, alpha=0.3, label="analytic −m ω² L (cos α1, sin α1)")
    ax[2].set_ylabel("ground on rocker at the\ncut joint [N]")
    ax[2].set_ylim(-1.15 * W_CRANK ** 2 * L_BAR, 1.6 * W_CRANK ** 2 * L_BAR)
    ax[2].set_xlabel("t [ms]")
    t_sing = (np.pi / 2 + np.pi * np.arange(passages)) / W_CRANK * 1e3     # alpha1 = 0 mod pi
    for a in ax:
        a.grid(alpha=0.3)
        a.legend(fontsize=8, loc="upper left", ncol=3)
        for ts in t_sing:
            a.axvline(ts, color="C3", lw=0.6, ls=":")
    ax[1].legend(fontsize=8, loc="lower right")
    ax[1].plot([], [], "C3:", lw=0.6, label="singular positions (bars aligned)")
    ax[1].legend(fontsize=8, loc="lower right")
    ax[0].set_title("seed 003: spatial four-bar with universal joints, crank at 124.8 rad/s")
    fig.tight_layout()
    f = os.path.join(out, "seed003_spatial_four_bar.png")
    fig.savefig(f, dpi=100)
    plt.close(fig)
    return [f], numbers


# ------------------------------------------------------------------------------ Andrews
#: Andrews' squeezing mechanism: masses [kg], inertias [kg m^2], lengths and points [m], spring
#: [N/m], torque [N m] (Hairer & Wanner, Solving ODEs II, sec. VII.7; the test set for IVP solvers)
ANDREWS = dict(m1=.04325, m2=.00365, m3=.02373, m4=.00706, m5=.07050, m6=.00706, m7=.05498,
               xa=-.06934, ya=-.00227, xb=-.03635, yb=.03273, xc=.014, yc=.072, c0=4530.0,
               i1=2.194e-6, i2=4.410e-7, i3=5.255e-6, i4=5.667e-7, i5=1.169e-5, i6=5.667e-7, i7=1.912e-5,
               d=28e-3, da=115e-4, e=2e-2, ea=1421e-5, rr=7e-3, ra=92e-5, l0=7785e-5,
               ss=35e-3, sa=1874e-5, sb=1043e-5, sc=18e-3, sd=2e-2, ta=2308e-5, tb=916e-5,
               u=4e-2, ua=1228e-5, ub=449e-5, zf=2e-2, zt=4e-2, fa=1421e-5, mom=33e-3)

#: the test set's coordinates, in its order
ANDREWS_NAMES = ("beta", "theta", "gamma", "phi", "delta", "omega", "epsilon")
#: the consistent initial configuration (at rest), the accelerations beta'', theta'' (the others
#: 0) and the multipliers of the rows E(2) - E(3) (the others 0), all from the test set
ANDREWS_Q0 = np.array([-0.0617138900142764496358948458001, 0.0, 0.455279819163070380255912382449,
                       0.222668390165885884674473185609, 0.487364979543842550225598953530,
                       -0.222668390165885884674473185609, 1.23054744454982119249735015568])
ANDREWS_QDD0 = np.array([14222.4439199541138705911625887, -10666.8329399655854029433719415, 0, 0, 0, 0, 0])
ANDREWS_LAMBDA0 = np.array([98.5668703962410896057654982170, -6.12268834425566265503114393122])
#: the reference solution at t = 0.03 s (PSIDE at tolerance 1e-14): q and qd
ANDREWS_T_REF = 0.03
ANDREWS_Q_REF = np.array([0.1581077119629904e+02, -0.1575637105984298e+02, 0.4082224013073101e-01,
                          -0.5347301163226948e+00, 0.5244099658805304e+00, 0.5347301163226948e+00,
                          0.1048080741042263e+01])
ANDREWS_QD_REF = np.array([0.1139920302151208e+04, -0.1424379294994111e+04, 0.1103291221937134e+02,
                           0.1929337464421385e+02, 0.5735699284790808e+00, -0.1929337464421385e+02,
                           0.3231791658026955e+00])
#: partree's joint order (bodies added parent first) as indices into the test set's order
ANDREWS_ORDER = np.array([0, 1, 2, 4, 3, 6, 5])     # beta, theta, gamma, delta, phi, epsilon, omega


def andrews_model(p=ANDREWS):
    """The seven bodies on revolute joints about z, in the plane z = 0, each joint frame at
    its pivot: K1 (crank, beta) at O, K2 (theta) on K1 at F, K3 (gamma) at B, K5 (delta) and
    K7 (epsilon) at A, K4 (phi) on K5 at G, K6 (omega) on K7 at H; point E closes three
    revolute loops, K2-K3, K2-K4 and K2-K6.  The bodies' geometry in their frames follows the
    test set's equations (a centre of mass off the bars, as for K3, K5 and K7, is placed at the
    published distance from the pivot; only that distance enters the dynamics)."""
    b = partree.ModelBuilder("andrews", gravity=(0, 0, 0))
    add = b.add_body
    add("K1", None, "revolute", (0, 0, 0), mass=p["m1"], com=(p["ra"], 0, 0), inertia=p["i1"], joint_name="beta")
    add("K2", "K1", "revolute", (p["rr"], 0, 0), mass=p["m2"], com=(-p["da"], 0, 0), inertia=p["i2"],
        joint_name="theta")
    add("K3", None, "revolute", (p["xb"], p["yb"], 0), mass=p["m3"], com=(p["sa"], -p["sb"], 0), inertia=p["i3"],
        joint_name="gamma")
    add("K5", None, "revolute", (p["xa"], p["ya"], 0), mass=p["m5"], com=(p["ta"], p["tb"], 0), inertia=p["i5"],
        joint_name="delta")
    add("K4", "K5", "revolute", (p["zt"], 0, 0), mass=p["m4"], com=(0, -(p["e"] - p["ea"]), 0), inertia=p["i4"],
        joint_name="phi")
    add("K7", None, "revolute", (p["xa"], p["ya"], 0), mass=p["m7"], com=(p["ua"], p["ub"], 0), inertia=p["i7"],
        joint_name="epsilon")
    add("K6", "K7", "revolute", (0, -p["u"], 0), mass=p["m6"], com=(p["zf"] - p["fa"], 0, 0), inertia=p["i6"],
        joint_name="omega")
    E2 = (-p["d"], 0, 0)                                  # point E on K2
    b.add_loop("E3", "revolute", "K2", "K3", E2, (0, -p["ss"], 0))
    b.add_loop("E4", "revolute", "K2", "K4", E2, (0, -p["e"], 0))
    b.add_loop("E6", "revolute", "K2", "K6", E2, (p["zf"], 0, 0))
    return b.build()


def andrews_inputs(model, p=ANDREWS):
    """(torques, f_ext) of simulate: mom on the crank, and the spring from C to point D of K3 as
    a wrench on K3 (body coordinates, moment about its pivot)."""
    k3 = model.body_names.index("K3")
    D_loc = np.array([p["sd"], -p["sc"], 0.0])
    B = np.array([p["xb"], p["yb"], 0.0])
    C = np.array([p["xc"], p["yc"], 0.0])
    ig = model.q_slice("gamma").start

    def spring(t, q, qd):
        c, s = np.cos(q[ig]), np.sin(q[ig])
        R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        D = B + R @ D_loc
        length = np.linalg.norm(D - C)
        f = R.T @ (-p["c0"] * (length - p["l0"]) / length * (D - C))
        W = np.zeros((model.n, 6))
        W[k3, :3] = np.cross(D_loc, f)
        W[k3, 3:] = f
        return W

    return {"beta": p["mom"]}, spring


def andrews(out, quick):
    """Andrews' squeezing mechanism against the test set; returns (files, numbers)."""
    plt = _plt()
    m = andrews_model()
    torques, spring = andrews_inputs(m)
    q0 = ANDREWS_Q0[ANDREWS_ORDER]
    back = np.argsort(ANDREWS_ORDER)                  # partree's order -> the test set's
    tau0 = np.zeros(m.nv)
    tau0[m.v_slice("beta")] = ANDREWS["mom"]
    r0 = partree.constrained_dynamics(m, q0, np.zeros(m.nv), tau0, spring(0.0, q0, None))
    qdd0 = r0.qdd[back]
    # the force K2 exerts on K3 at E, in world axes (frame A turns with K2: beta + theta)
    a = q0[0] + q0[1]
    lam0 = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]) @ r0.loop_force_of("E3")[3:5]
    dt = 1e-5                 # RK4: 1.5e-9 rad from the reference at t = 0.03 s (1.8e-8 at 3e-5)
    t0 = time.perf_counter()
    res = partree.simulate(m, ANDREWS_T_REF, dt, q0=q0, integrator="rk4", torques=torques, f_ext=spring,
                           save_every=10, progress=False)
    wall = time.perf_counter() - t0
    q, qd = res.q[:, back], res.qd[:, back]
    err_q = np.abs(q[-1] - ANDREWS_Q_REF)
    err_qd = np.abs(qd[-1] - ANDREWS_QD_REF)
    numbers = {"dt": dt, "t_end": float(res.t[-1]), "wall_s": wall, "rank": r0.rank,
               "qdd0_rel_err": float(np.abs(qdd0 - ANDREWS_QDD0).max() / np.abs(ANDREWS_QDD0).max()),
               "lambda0_rel_err": float(np.abs(lam0 - ANDREWS_LAMBDA0).max() / np.abs(ANDREWS_LAMBDA0).max()),
               "q_err": float(err_q.max()), "q_rel_err": float((err_q / np.maximum(1.0, np.abs(ANDREWS_Q_REF))).max()),
               "qd_rel_err": float(err_qd.max() / np.abs(ANDREWS_QD_REF).max()),
               "violation": float(res.violation.max())}
    print(f"Andrews' squeezing mechanism: RK4 dt = {dt:g} s to t = {res.t[-1]:g} s, rank {r0.rank} "
          f"(3 loops, 15 rows); simulate took {wall:.1f} s")
    print(f"  t = 0: beta'', theta'' = {qdd0[0]:.10g}, {qdd0[1]:.10g} (published {ANDREWS_QDD0[0]:.10g}, "
          f"{ANDREWS_QDD0[1]:.10g}); lambda(E: K2 on K3) = {lam0[0]:.8g}, {lam0[1]:.8g} (published "
          f"{ANDREWS_LAMBDA0[0]:.8g}, {ANDREWS_LAMBDA0[1]:.8g})")
    print(f"  t = 0.03 s    {'partree':>20s} {'reference':>20s} {'difference':>10s}")
    for k, name in enumerate(ANDREWS_NAMES):
        print(f"  {name:12s} {q[-1, k]:20.13f} {ANDREWS_Q_REF[k]:20.13f} {q[-1, k] - ANDREWS_Q_REF[k]:10.2e}")
    print(f"  max |q - ref| = {err_q.max():.3g} rad, max |qd - ref| / max |qd_ref| = {numbers['qd_rel_err']:.3g}; "
          f"max violation {res.violation.max():.3g} m")

    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    tm = res.t * 1e3
    for k, name in enumerate(ANDREWS_NAMES):
        a_ = ax[0 if k < 2 else 1]
        a_.plot(tm, q[:, k], lw=1.2, label=name, color=f"C{k}")
        a_.plot(ANDREWS_T_REF * 1e3, ANDREWS_Q_REF[k], "o", mfc="none", ms=8, color=f"C{k}")
    for k, name in enumerate(ANDREWS_NAMES[:2]):
        ax[2].plot(tm, qd[:, k], lw=1.2, label=f"{name}'", color=f"C{k}")
        ax[2].plot(ANDREWS_T_REF * 1e3, ANDREWS_QD_REF[k], "o", mfc="none", ms=8, color=f"C{k}")
    for a_ in ax:
        a_.plot([], [], "ko", mfc="none", label="reference, t = 0.03 s")
        a_.grid(alpha=0.3)
    ax[0].set_ylabel("angle [rad]")
    ax[1].set_ylabel("angle [rad]")
    ax[1].set_ylim(-0.65, 1.75)
    ax[2].set_ylabel("angular velocity [rad/s]")
    ax[2].set_xlabel(f"t [ms]        (RK4, dt = {dt * 1e3:g} ms; largest loop violation {res.violation.max():.1e} m)")
    ax[0].legend(fontsize=8, loc="upper left", ncol=3)
    ax[1].legend(fontsize=8, loc="upper left", ncol=3)
    ax[2].legend(fontsize=8, loc="upper left", ncol=3)
    ax[0].set_title("seed 003: Andrews' squeezing mechanism (seven bodies, three loops)")
    fig.tight_layout()
    f = os.path.join(out, "seed003_andrews.png")
    fig.savefig(f, dpi=100)
    plt.close(fig)
    return [f], numbers


EXAMPLES = {"four-bar": four_bar, "spatial": spatial, "andrews": andrews}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="seed003_figures", help="output folder")
    p.add_argument("--quick", action="store_true", help="short runs")
    p.add_argument("--only", nargs="+", choices=tuple(EXAMPLES), default=tuple(EXAMPLES))
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    files, numbers = [], {}
    for name in a.only:
        fs, numbers[name] = EXAMPLES[name](a.out, a.quick)
        files += fs
    for f in files:
        print(f"wrote {f}")
    return files, numbers


if __name__ == "__main__":
    main()
