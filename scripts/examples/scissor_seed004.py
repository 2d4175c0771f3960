"""Seed 004's example: the 3-level planar scissor mechanism deployed by driving forces at A and C.

    python scripts/examples/scissor_seed004.py --out figs             # 1.1 s of deployment, about 10 s
    python scripts/examples/scissor_seed004.py --out figs --t-end 0.2 --no-figures   # short run (tests)
    python scripts/examples/scissor_seed004.py --out docs/figures \\
        --json docs/results/scissor_seed004/scissor_seed004.json      # the committed run

The mechanism: ``partree.models.scissor_mast(3, closed=True, support="slider")``
(``scissor:units=3,closed=true,support=slider``): three scissor units of two 1 m bars each,
5 mm x 30 mm section, 2750 kg/m^3 (0.4125 kg per bar), theta_1 = 30 deg at rest.  Bar A_0's lower
end (A) is pinned to the ground, bar B_0's lower end (C) to a 0.01 kg carriage on a horizontal
slider, and every pin between units is closed (the pins the spanning tree leaves out are loops,
each the plane's pin: a ``point_on_line`` loop of 2 rows): 7 coordinates, 6 independent loop
rows, one degree of freedom.  Gravity acts along -z, along the mast.

The drive: ``ScissorDrive(model, gain=0.05, ramp=0.1)``: A and C are pulled horizontally towards
each other, each with F(t) = F_hold (1 + 0.05 min(1, t / 0.1 s)), F_hold the force that holds the
mast at rest at 30 deg (63.08 N).  The mast starts in equilibrium and the 5 % excess force
deploys it.  F_hold falls as cot(theta_1), so any constant force above it drives the mast on
towards lock-up (the bars upright, theta_1 = 90 deg); the run stops at 1.1 s, at about 66 deg.

Computed:

- partree's solution: ``partree.simulate`` (RK4, dt = 1e-3 s, loops corrected after every
  step), each evaluation ``partree.constrained_dynamics`` (O(N)).  theta_1 is ``scissor_angle``;
  its rates are the rates of bar B_0's joint on the carriage (B_0 turns by exactly theta_1 -
  30 deg about it: checked along the run).
- the reference (seed 004's check): the Lagrange equation of the one-DOF mechanism, written
  from its energy without partree: every bar turns at +-theta_1', the bars' centres stand on one
  vertical line whose foot moves as the carriage does, so

      T = 1/2 Mth(theta) theta'^2,
      Mth = sum_k 2 [m (l^2/4 sin^2 theta + (k + 1/2)^2 l^2 cos^2 theta) + I] + m_c l^2 sin^2 theta,
      V = m g U^2 l sin theta,    Q = F l sin theta (only the carriage's force does work),
      Mth theta'' + 1/2 Mth' theta'^2 + V' = Q,

  (m, I = m (l^2 + h^2) / 12: a bar's mass and inertia about its pin axis from the paper's data;
  m_c the carriage), integrated by scipy's DOP853 at rtol = atol = 1e-13, in two pieces split at
  the end of the ramp.  Also the dense constrained solve at every recorded state: M from
  ``partree.crba``, J and gamma from ``partree.loop_constraints``, the KKT system solved by
  least squares (numpy).
- the reaction forces at every recorded state: ``constrained_dynamics`` with the drive's two
  forces applied as forces at A and C (f_ext; the same motion as the joint forces that
  ``simulate`` uses, but the pins then carry what they physically carry): the fixed pin (the
  loop ``pin_A0_ground``), the slider's rail, the pins between units (the loops ``pin_B0_B1``,
  ``pin_B1_B2`` and the tree joints of A_1, A_2) and the units' centre pins; checked by the
  balance of the whole mechanism's momentum: support forces + weight = total mass x the centre
  of mass's acceleration (from the mechanism's geometry).
- seed 004's subsystems at one instant (``--instant``): the parallel engine with each scissor
  unit in a part (``SerialEngine(model, 3)``; the pins between units are loops solved at the
  root) against ``constrained_dynamics``; and each unit's equivalent 6x6 mass matrix and force
  (``partree.subsystem_equivalent``).  On the closed mast a unit joins the unit below at two
  pins, one of them a loop, and ``subsystem_equivalent`` refuses it (a one-base equivalent has
  no room for the second pin).  With the loops' pin forces applied as known external forces on
  the spanning tree (the mast without its loops), every unit hangs from one pin, and the
  equivalents of unit 2, of units 1-2 and of the whole mast, taken tip to root, give the wrench
  at each unit's root pin: M a_base + f, against the joint wrenches of ``constrained_dynamics``.

Figures (in --out): scissor_seed004_angle.png (a-c: theta_1, its rate and acceleration, partree
solid, Lagrange dashed, and their differences), scissor_seed004_forces.png (d: the driving force,
e: the reactions), scissor_seed004_deployment.png (f: height and pictures of the mast); the
numbers go to scissor_seed004.json in --out (or --json).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import partree
from partree import joints as JT
from partree.models.scissor import (CARRIAGE_MASS, SCISSOR_ANGLE_DEG, SCISSOR_BAR_DEPTH, SCISSOR_BAR_LENGTH,
                                    SCISSOR_BAR_THICKNESS, SCISSOR_DENSITY, ScissorDrive, scissor_angle,
                                    scissor_height, scissor_mast)
from partree.parallel.serial import SerialEngine
from partree.spatial import crm, motion_xform

UNITS = 3
G = 9.81
#: the run's defaults: the drive's excess over the holding force, its ramp (s), the span (s)
GAIN, RAMP, T_END, DT = 0.05, 0.1, 1.1, 1e-3


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


# ------------------------------------------------------------------------------ the Lagrange model
class LagrangeScissor:
    """The one-DOF Lagrange equation of the closed planar mast on its slider, from its energy
    (see the module docstring); data from the paper and the generator's chosen carriage mass."""

    def __init__(self, units=UNITS, carriage_mass=CARRIAGE_MASS, g=G):
        l, b, h, rho = SCISSOR_BAR_LENGTH, SCISSOR_BAR_THICKNESS, SCISSOR_BAR_DEPTH, SCISSOR_DENSITY
        self.U, self.l, self.g, self.mc = int(units), l, g, float(carriage_mass)
        self.m = rho * l * b * h                      # 0.4125 kg
        self.I = self.m * (l * l + h * h) / 12.0      # about the pin axis (the 30 mm side in the plane)
        k = np.arange(self.U)
        self.s2 = float(np.sum((k + 0.5) ** 2))       # sum (k + 1/2)^2
        self.th0 = np.deg2rad(SCISSOR_ANGLE_DEG)

    def mass(self, th):
        s, c, l = np.sin(th), np.cos(th), self.l
        return (2 * self.U * (self.m * l * l / 4 * s * s + self.I) + 2 * self.m * self.s2 * l * l * c * c
                + self.mc * l * l * s * s)

    def dmass(self, th):
        s, c, l = np.sin(th), np.cos(th), self.l
        return (2 * self.U * self.m * l * l / 2 - 4 * self.m * self.s2 * l * l + 2 * self.mc * l * l) * s * c

    def dpotential(self, th):
        return self.m * self.g * self.U ** 2 * self.l * np.cos(th)

    def holding_force(self, th):
        """F that holds the mast at rest at th: F l sin th = V'(th)."""
        return self.dpotential(th) / (self.l * np.sin(th))

    def acceleration(self, th, w, F):
        return (F * self.l * np.sin(th) - self.dpotential(th) - 0.5 * self.dmass(th) * w * w) / self.mass(th)

    def solve(self, force, t_eval, breaks=()):
        """theta, theta', theta'' at t_eval from rest at 30 deg under F = force(t); the
        integration restarts at the ``breaks`` (kinks of F)."""
        from scipy.integrate import solve_ivp

        t_eval = np.asarray(t_eval, float)
        edges = [0.0] + [b for b in sorted(breaks) if 0.0 < b < t_eval[-1]] + [float(t_eval[-1])]
        y0 = np.array([self.th0, 0.0])
        out = np.empty((t_eval.size, 2))
        for lo, hi in zip(edges[:-1], edges[1:]):
            sol = solve_ivp(lambda t, y: [y[1], self.acceleration(y[0], y[1], force(t))], (lo, hi), y0,
                            method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)
            sel = (t_eval >= lo) & (t_eval <= hi)
            out[sel] = sol.sol(t_eval[sel]).T
            y0 = sol.y[:, -1]
        acc = np.array([self.acceleration(th, w, force(t)) for t, (th, w) in zip(t_eval, out)])
        return out[:, 0], out[:, 1], acc

    def rk4(self, force, dt, t_eval):
        """theta at t_eval (multiples of dt) by fixed-step RK4 at dt on the same equation: the
        integrator's own error at that step, the floor of the simulation's."""
        def f(t, y):
            return np.array([y[1], self.acceleration(y[0], y[1], force(t))])
        y, k, out = np.array([self.th0, 0.0]), 0, []
        for target in np.rint(np.asarray(t_eval) / dt).astype(int):
            while k < target:
                t = k * dt
                k1 = f(t, y)
                k2 = f(t + dt / 2, y + dt / 2 * k1)
                k3 = f(t + dt / 2, y + dt / 2 * k2)
                k4 = f(t + dt, y + dt * k3)
                y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
                k += 1
            out.append(y[0])
        return np.array(out)

    def com_acceleration(self, th, w, a, x_pin):
        """Centre of mass of bars and carriage: (x, z) acceleration, for the fixed pin at x_pin."""
        M = 2 * self.U * self.m + self.mc
        # x_com M = 2 U m (x_pin + l/2 cos th) + m_c (x_pin + l cos th);  z_com M = m U^2 l sin th
        ddcos = -np.sin(th) * a - np.cos(th) * w * w
        ddsin = np.cos(th) * a - np.sin(th) * w * w
        ax = (2 * self.U * self.m * self.l / 2 + self.mc * self.l) * ddcos / M
        az = self.m * self.U ** 2 * self.l * ddsin / M
        return M, ax, az


# ------------------------------------------------------------------------------ helpers
def drive_wrenches(model, kin, F):
    """The drive's forces at A and C (ScissorDrive's law: horizontal, towards each other) as
    external body wrenches (n, 6), body coordinates, moments about the body origins."""
    lay = model.scissor
    W = np.zeros((model.n, 6))
    pts = lay.base_points()
    P = np.array([kin.p[b] + kin.R[b] @ x for b, x in pts])
    inward = P.mean(axis=0) - P
    inward[:, 2] = 0.0
    for (b, x), d in zip(pts, inward):
        f = kin.R[b].T @ (F * d / np.linalg.norm(d))
        W[b, :3] += np.cross(x, f)
        W[b, 3:] += f
    return W


def body_accelerations(model, kin, qd, qdd):
    """Spatial accelerations (n, 6) in body coordinates, gravity in them as partree's passes
    carry it (the world accelerates at a0 = [0; -g]): a_i = X_up a_parent + S qdd + v x S qd."""
    a0 = np.concatenate([np.zeros(3), -np.asarray(model.gravity, float)])
    A = np.zeros((model.n, 6))
    for i in range(model.n):
        X = motion_xform(kin.E_up[i], kin.r_up[i])
        ap = a0 if model.parent[i] < 0 else A[model.parent[i]]
        ax = np.asarray(model.axis[i], float)
        if model.jtype[i] == JT.REVOLUTE:
            S = np.concatenate([ax, np.zeros(3)])
        elif model.jtype[i] == JT.PRISMATIC:
            S = np.concatenate([np.zeros(3), ax])
        else:
            raise ValueError("revolute and prismatic joints only")
        iv = model.idx_v[i]
        A[i] = X @ ap + S * qdd[iv] + crm(kin.v[i]) @ (S * qd[iv])
    return A


def dense_kkt_qdd(model, q, qd, tau):
    """qdd from the dense KKT system [[M, J^T], [J, 0]] [qdd; -lambda] = [tau - h; gamma]
    (least squares: the loops' rows are redundant, qdd is unique)."""
    M = partree.crba(model, q)
    lc = partree.loop_constraints(model, q, qd)
    J = lc.J.toarray()
    h = partree.rnea(model, q, qd, np.zeros(model.nv))
    R = J.shape[0]
    K = np.block([[M, J.T], [J, np.zeros((R, R))]])
    x = np.linalg.lstsq(K, np.concatenate([tau - h, lc.gamma]), rcond=None)[0]
    return x[:model.nv]


def _world_force(kin, b, f_body):
    return kin.R[b] @ f_body


# ------------------------------------------------------------------------------ the parts
def run(t_end=T_END, dt=DT, gain=GAIN, ramp=RAMP, save_every=5):
    """The deployment, the reference and the reactions; returns a dict of arrays and numbers."""
    m = scissor_mast(UNITS, closed=True, support="slider")
    lay = m.scissor
    drive = ScissorDrive(m, gain=gain, ramp=ramp)
    t0 = time.perf_counter()
    res = partree.simulate(m, t_end, dt, torques=drive, integrator="rk4", record="all", save_every=save_every,
                           progress=False)
    wall = time.perf_counter() - t0
    t = res.t

    # theta_1 and its rates: bar B_0 turns by theta_1 - 30 deg about its joint on the carriage
    jB = int(lay.bar("B", 0))
    iv, iq = int(m.idx_v[jB]), int(m.idx_q[jB])
    th = np.array([scissor_angle(m, q) for q in res.q])
    th0 = np.deg2rad(SCISSOR_ANGLE_DEG)
    sign = 1.0 if np.abs(th - th0 - res.q[:, iq]).max() <= np.abs(th - th0 + res.q[:, iq]).max() else -1.0
    joint_check = float(np.abs(th - th0 - sign * res.q[:, iq]).max())
    thd, thdd = sign * res.qd[:, iv], sign * res.qdd[:, iv]
    H = np.array([scissor_height(m, q) for q in res.q])
    F = np.array([drive.force(tk) for tk in t])

    # the Lagrange reference
    lag = LagrangeScissor(carriage_mass=float(m.mass[lay.carriage]))
    assert np.isclose(lag.m, m.mass[jB], rtol=1e-14) and np.isclose(lag.I, m.I_com[jB][1, 1], rtol=1e-14)
    th_r, thd_r, thdd_r = lag.solve(drive.force, t, breaks=(ramp,))
    rk4_floor = float(np.abs(lag.rk4(drive.force, dt, t) - th_r).max())

    # the dense constrained solve, the reactions and the momentum balance at every recorded state
    L = m.loops.names
    A0, B0 = int(lay.bar("A", 0)), jB
    tree_pins = {"A0-A1": int(lay.bar("A", 1)), "A1-A2": int(lay.bar("A", 2))}
    centre_pins = {"B0-A0 (unit 0)": A0, "A1-B1 (unit 1)": int(lay.bar("B", 1)), "A2-B2 (unit 2)": int(lay.bar("B", 2))}
    n = t.size
    kkt = np.empty(n)
    drive_repr = np.empty(n)
    ground = np.empty((n, 3))          # the ground's force on A_0 at the fixed pin (world)
    rail = np.empty((n, 3))            # the rail's force on the carriage (world)
    carriage_pin = np.empty(n)
    loops = {nm: np.empty((n, 3)) for nm in L if nm != "pin_A0_ground"}
    tree = {k: np.empty((n, 3)) for k in tree_pins}
    centre = {k: np.empty((n, 3)) for k in centre_pins}
    balance = np.empty(n)
    x_pin = -0.5 * lag.l * np.cos(th0)
    for k in range(n):
        q, qd, tau = res.q[k], res.qd[k], res.tau[k]
        kkt[k] = np.abs(dense_kkt_qdd(m, q, qd, tau) - res.qdd[k]).max()
        kin = partree.forward_kinematics(m, q, qd)
        fe = drive_wrenches(m, kin, F[k])
        r = partree.constrained_dynamics(m, q, qd, np.zeros(m.nv), fe)
        drive_repr[k] = np.abs(r.qdd - res.qdd[k]).max()
        ground[k] = -_world_force(kin, A0, r.loop_force_of("pin_A0_ground")[3:])
        for nm in loops:                                  # what B_k exerts on B_k+1 (frame A: B_k's axes)
            a = int(m.loops.body_a[m.loops.index(nm)])
            loops[nm][k] = _world_force(kin, a, r.loop_force_of(nm)[3:])
        jw = r.joint_wrench
        rail[k] = _world_force(kin, lay.carriage, jw[lay.carriage][3:])
        carriage_pin[k] = np.linalg.norm(jw[B0][3:])
        for key, b in tree_pins.items():
            tree[key][k] = _world_force(kin, b, jw[b][3:])
        for key, b in centre_pins.items():
            centre[key][k] = _world_force(kin, b, jw[b][3:])
        Mt, ax, az = lag.com_acceleration(th[k], thd[k], thdd[k], x_pin)
        # the drive's two forces cancel; support + weight = M a_com
        resid = ground[k] + rail[k] + Mt * np.array([0.0, 0.0, -G]) - Mt * np.array([ax, 0.0, az])
        balance[k] = np.abs(resid).max() / (Mt * G)

    rank = partree.constrained_dynamics(m, res.q[0], res.qd[0], res.tau[0]).rank
    numbers = {
        "model": {"spec": "scissor:units=3,closed=true,support=slider", "bodies": m.n, "nv": m.nv,
                  "loops": list(L), "loop_rows": int(m.loops.nrows.sum()), "rank": rank,
                  "bar_mass_kg": lag.m, "bar_inertia_kg_m2": lag.I, "carriage_mass_kg": lag.mc},
        "drive": {"law": "F = F_hold (1 + gain min(1, t / ramp))", "gain": gain, "ramp_s": ramp,
                  "F_hold_N": drive.hold, "F_hold_lagrange_N": float(lag.holding_force(th0)), "F_end_N": float(F[-1])},
        "run": {"t_end_s": float(t[-1]), "dt_s": dt, "integrator": "rk4", "save_every": save_every,
                "samples": int(n), "simulate_wall_s": wall},
        "theta_deg": [float(np.rad2deg(th[0])), float(np.rad2deg(th[-1]))],
        "height_m": [float(H[0]), float(H[-1])],
        "theta_vs_joint_max_diff_rad": joint_check,
        "agreement": {"theta_rad": float(np.abs(th - th_r).max()),
                      "theta_dot_rad_s": float(np.abs(thd - thd_r).max()),
                      "theta_ddot_rad_s2": float(np.abs(thdd - thdd_r).max()),
                      "theta_ddot_relative": float(np.abs(thdd - thdd_r).max() / np.abs(thdd_r).max()),
                      "height_m": float(np.abs(H - UNITS * lag.l * np.sin(th_r)).max()),
                      "qdd_vs_dense_kkt": float(kkt.max()),
                      "rk4_on_the_lagrange_equation_theta_rad": rk4_floor},
        "max_violation": float(res.violation.max()),
        "drive_as_joint_forces_vs_point_forces_qdd": float(drive_repr.max()),
        "momentum_balance_relative": float(balance.max()),
        "max_force_N": {"fixed pin": float(np.linalg.norm(ground, axis=1).max()),
                        "rail": float(np.linalg.norm(rail, axis=1).max()),
                        "carriage pin": float(carriage_pin.max()),
                        **{nm: float(np.linalg.norm(v, axis=1).max()) for nm, v in loops.items()},
                        **{f"pin {k_}": float(np.linalg.norm(v, axis=1).max()) for k_, v in tree.items()},
                        **{f"centre pin {k_}": float(np.linalg.norm(v, axis=1).max()) for k_, v in centre.items()}},
    }
    series = {"t": t, "theta": th, "theta_ref": th_r, "theta_dot": thd, "theta_dot_ref": thd_r,
              "theta_ddot": thdd, "theta_ddot_ref": thdd_r, "F": F, "height": H, "violation": res.violation,
              "ground": ground, "rail": rail, "carriage_pin": carriage_pin, "loops": loops, "tree": tree,
              "centre": centre}
    return m, drive, res, numbers, series


def subsystems(m, drive, res, instant):
    """Seed 004's subsystems at the recorded state nearest ``instant``: the engine with a part
    per unit against constrained_dynamics, and the units' equivalents taken tip to root."""
    lay = m.scissor
    k = int(np.argmin(np.abs(res.t - instant)))
    t, q, qd = float(res.t[k]), res.q[k], res.qd[k]
    tau = drive(t, q, qd)
    r = partree.constrained_dynamics(m, q, qd, tau)
    eng = SerialEngine(m, UNITS)
    part_of = np.asarray(eng.partition.part_of)
    qdd_eng = eng.forward_dynamics(q, qd, tau)
    lf_eng = eng.constraint_forces(q, qd, tau).loop_force
    out = {"t_s": t, "parts_are_units": bool(np.array_equal(part_of, np.asarray(m.units))),
           "engine_qdd_vs_constrained_dynamics": float(np.abs(qdd_eng - r.qdd).max()),
           "engine_loop_force_vs_constrained_dynamics": float(np.abs(lf_eng - r.loop_force).max()),
           "qdd_scale": float(np.abs(r.qdd).max())}

    # subsystem_equivalent on the closed mast: refused (each unit hangs from two pins)
    top = int(lay.bar("A", UNITS - 1))
    try:
        partree.subsystem_equivalent(m, q, qd, tau, top)
        out["closed_unit_refused"] = None
    except partree.errors.PartreeInputError as e:
        out["closed_unit_refused"] = str(e)

    # the spanning tree with the pin forces of the loops (and the drive's forces) as external forces
    kin = partree.forward_kinematics(m, q, qd)
    fe = drive_wrenches(m, kin, drive.force(t))
    rp = partree.constrained_dynamics(m, q, qd, np.zeros(m.nv), fe)
    tree = m.with_loops([], replace=True)
    f_ext = rp.loop_wrench + fe
    zero = np.zeros(m.nv)
    out["tree_with_pin_forces_qdd_vs_closed"] = float(np.abs(partree.aba(tree, q, qd, zero, f_ext) - rp.qdd).max())
    A = body_accelerations(m, kin, qd, rp.qdd)
    units = []
    for u in range(UNITS - 1, -1, -1):                     # tip to root: unit 2, units 1-2, the whole mast
        root = int(np.flatnonzero(np.asarray(m.units) == u)[0])
        e = partree.subsystem_equivalent(tree, q, qd, zero, root, f_ext=f_ext)
        a = e.a0 if e.base < 0 else A[e.base]
        pred = e.wrench(a)
        X = motion_xform(kin.E_up[root], kin.r_up[root])
        ref = X.T @ rp.joint_wrench[root]                   # the root joint's wrench in the base frame
        units.append({"units": list(range(u, UNITS)), "bodies": [int(b) for b in e.bodies], "base": int(e.base),
                      "root_joint": m.joint_names[root], "M": e.M.tolist(), "f": e.f.tolist(),
                      "f_gravity": e.f_gravity.tolist(), "wrench_predicted": pred.tolist(),
                      "wrench_constrained_dynamics": ref.tolist(),
                      "difference": float(np.abs(pred - ref).max()), "scale": float(np.abs(ref).max())})
    out["equivalents"] = units
    return out


# ------------------------------------------------------------------------------ figures
def mast_lines(m, q):
    """[(x, z) arrays] of every bar from its lower to its upper end, and A's and C's points."""
    lay = m.scissor
    kin = partree.forward_kinematics(m, q)
    lines = []
    for k in range(lay.units):
        for which in "AB":
            P = []
            for frac in (0.0, 1.0):
                b, x = lay.bar_point(which, k, 0, frac)
                P.append(kin.p[b] + kin.R[b] @ x)
            P = np.array(P)
            lines.append((P[:, 0], P[:, 2]))
    (bc, xc), (ba, xa) = lay.base_points()
    C = kin.p[bc] + kin.R[bc] @ xc
    Ap = kin.p[ba] + kin.R[ba] @ xa
    return lines, Ap, C


def figures(out, m, drive, res, s, numbers):
    plt = _plt()
    files = []
    t = s["t"]
    ag = numbers["agreement"]

    # (a)-(c): theta_1, its rate and acceleration
    fig, ax = plt.subplots(4, 1, figsize=(8, 10.5), sharex=True)
    rows = (("theta", "(a) θ1 [rad]"), ("theta_dot", "(b) dθ1/dt [rad/s]"), ("theta_ddot", "(c) d²θ1/dt² [rad/s²]"))
    for a, (key, lab) in zip(ax, rows):
        a.plot(t, s[key], "C0-", lw=3, alpha=0.45, label="partree: constrained_dynamics (O(N)) in simulate, RK4")
        a.plot(t, s[key + "_ref"], "k--", lw=1.1, label="Lagrange model (one DOF, from the energy), DOP853")
        a.set_ylabel(lab)
        a.grid(alpha=0.3)
    ax[0].legend(fontsize=8, loc="upper left")
    tw = ax[0].secondary_yaxis("right", functions=(np.rad2deg, np.deg2rad))
    tw.set_ylabel("[deg]")
    for key, lab, st in (("theta", "|Δθ1| [rad]", "C0-"), ("theta_dot", "|Δθ1'| [rad/s]", "C1-"),
                         ("theta_ddot", "|Δθ1''| [rad/s²]", "C2-")):
        ax[3].semilogy(t[1:], np.abs(s[key] - s[key + "_ref"])[1:] + 1e-18, st, lw=1, label=lab)
    ax[3].semilogy(t, s["violation"] + 1e-18, "C3:", lw=1, label="loop violation max|Φ| [m]")
    ax[3].set_ylim(1e-18, 1e-6)
    ax[3].set_ylabel("partree − Lagrange")
    ax[3].set_xlabel(f"t [s]   (RK4, dt = {numbers['run']['dt_s']:g} s)")
    ax[3].grid(alpha=0.3)
    ax[3].legend(fontsize=8, loc="upper left", ncol=2)
    ax[0].set_title(f"seed 004: 3-level scissor mast deployed by the forces at A and C\nmax |Δθ1| = "
                    f"{ag['theta_rad']:.1e} rad, max |Δθ1'| = {ag['theta_dot_rad_s']:.1e} rad/s, max |Δθ1''| = "
                    f"{ag['theta_ddot_rad_s2']:.1e} rad/s²", fontsize=10)
    fig.tight_layout()
    f = os.path.join(out, "scissor_seed004_angle.png")
    fig.savefig(f, dpi=100)
    plt.close(fig)
    files.append(f)

    # (d) the driving force, (e) the reactions
    fig, ax = plt.subplots(3, 1, figsize=(8, 10), sharex=True)
    ax[0].plot(t, s["F"], "C0-", lw=1.5, label="F(t) at A and at C (each)")
    ax[0].axhline(drive.hold, color="k", ls=":", lw=1, label=f"F_hold = {drive.hold:.2f} N (rest at 30°)")
    th = s["theta"]
    lag = LagrangeScissor(carriage_mass=float(m.mass[m.scissor.carriage]))
    ax[0].plot(t, lag.holding_force(th), "C2--", lw=1, label="holding force at the current θ1 (∝ cot θ1)")
    ax[0].set_ylabel("(d) driving force [N]")
    ax[0].legend(fontsize=8)
    ax[1].plot(t, s["ground"][:, 0], "C0-", lw=1.3, label="fixed pin A: ground on A_0, horizontal")
    ax[1].plot(t, s["ground"][:, 2], "C1-", lw=1.3, label="fixed pin A: ground on A_0, vertical")
    ax[1].plot(t, s["rail"][:, 2], "C2-", lw=1.3, label="rail on the carriage, vertical")
    Mt = 2 * UNITS * lag.m + lag.mc
    ax[1].axhline(Mt * G, color="k", ls=":", lw=1, label=f"total weight {Mt * G:.2f} N")
    ax[1].set_ylabel("(e) supports [N]\n(world axes)")
    ax[1].legend(fontsize=8, ncol=2)
    for c, (nm, v) in enumerate(s["loops"].items()):
        lab = nm.replace("pin_", "").replace("_", "-")
        ax[2].plot(t, np.linalg.norm(v, axis=1), f"C{c}-", lw=1.5, label=f"{lab} (loop)")
    for c, (nm, v) in enumerate(s["tree"].items()):
        ax[2].plot(t, np.linalg.norm(v, axis=1), f"C{c}--", lw=1.5, label=f"{nm} (tree joint)")
    for c, (nm, v) in enumerate(s["centre"].items()):
        ax[2].plot(t, np.linalg.norm(v, axis=1), f"C{c + 3}:", lw=1.3, label=f"centre {nm}")
    ax[2].plot(t, s["carriage_pin"], "C7-.", lw=1, label="carriage-B0 (C)")
    ax[2].set_ylabel("(e) |force| at the pins [N]")
    ax[2].set_xlabel("t [s]")
    ax[2].legend(fontsize=7, ncol=2)
    for a in ax:
        a.grid(alpha=0.3)
    ax[0].set_title("seed 004: driving force and reaction forces (constrained_dynamics, drive as forces at A, C)",
                    fontsize=10)
    fig.tight_layout()
    f = os.path.join(out, "scissor_seed004_forces.png")
    fig.savefig(f, dpi=100)
    plt.close(fig)
    files.append(f)

    # (f) deployment: height and pictures
    fig, ax = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw={"width_ratios": [1, 1.6]})
    ax[0].plot(t, s["height"], "C0-", lw=3, alpha=0.45, label="partree: scissor_height")
    ax[0].plot(t, UNITS * lag.l * np.sin(s["theta_ref"]), "k--", lw=1.1, label="Lagrange: 3 l sin θ1")
    ax[0].set_xlabel("t [s]")
    ax[0].set_ylabel("(f) height of the mast [m]")
    ax[0].grid(alpha=0.3)
    ax[0].legend(fontsize=8)
    th_levels = np.linspace(s["theta"][0], s["theta"][-1], 5)           # pictures at evenly spaced angles
    picks = np.unique([int(np.argmin(np.abs(s["theta"] - v))) for v in th_levels])
    gap = 1.25 * SCISSOR_BAR_LENGTH
    for j, k in enumerate(picks):
        lines, Ap, C = mast_lines(m, res.q[k])
        dx = j * gap - Ap[0]
        for (x, z), c in zip(lines, ["C0", "C1"] * UNITS):
            ax[1].plot(x + dx, z, "-", color=c, lw=2)
        ax[1].plot(Ap[0] + dx, Ap[2], "k^", ms=8)
        ax[1].plot(C[0] + dx, C[2], "ks", ms=6, mfc="w")
        ax[1].plot([Ap[0] + dx - 0.05, Ap[0] + dx + 0.95], [-0.04, -0.04], "k-", lw=0.8)
        ax[1].text(Ap[0] + dx + 0.4, -0.2, f"t = {t[k]:.2f} s\nθ1 = {np.rad2deg(s['theta'][k]):.1f}°", ha="center",
                   va="top", fontsize=8)
        ax[0].plot(t[k], s["height"][k], "ko", ms=4)
    ax[1].set_aspect("equal")
    ax[1].set_ylim(-0.5, UNITS * SCISSOR_BAR_LENGTH + 0.1)
    ax[1].set_xlabel("x [m] (each picture shifted; ▲ fixed pin A, □ carriage C)")
    ax[1].set_ylabel("z [m]")
    ax[1].set_title("bars A (blue) and B (orange) of the three units", fontsize=10)
    fig.suptitle("seed 004: deployment of the 3-level scissor mast", fontsize=11)
    fig.tight_layout()
    f = os.path.join(out, "scissor_seed004_deployment.png")
    fig.savefig(f, dpi=100)
    plt.close(fig)
    files.append(f)
    return files


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="seed004_figures", help="output folder (figures and the JSON)")
    p.add_argument("--json", default=None, help="write the numbers here instead of OUT/scissor_seed004.json")
    p.add_argument("--t-end", type=float, default=T_END, help=f"span in s (default {T_END:g})")
    p.add_argument("--dt", type=float, default=DT, help=f"RK4 step in s (default {DT:g})")
    p.add_argument("--gain", type=float, default=GAIN, help=f"the drive's excess over F_hold (default {GAIN:g})")
    p.add_argument("--ramp", type=float, default=RAMP, help=f"the drive's ramp in s (default {RAMP:g})")
    p.add_argument("--save-every", type=int, default=5, help="record every k-th step (default 5)")
    p.add_argument("--instant", type=float, default=1.0,
                   help="time of the subsystem demonstration, s (default 1.0; the run's end if later)")
    p.add_argument("--no-figures", action="store_true", help="numbers only")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)

    m, drive, res, numbers, series = run(a.t_end, a.dt, a.gain, a.ramp, a.save_every)
    numbers["subsystems"] = sub = subsystems(m, drive, res, min(a.instant, float(res.t[-1])))
    numbers["series"] = {k: v for k, v in series.items() if k in ("t", "theta", "theta_ref", "theta_dot",
                                                                 "theta_dot_ref", "theta_ddot", "theta_ddot_ref",
                                                                 "F", "height")}
    numbers["date_note"] = "measured on 2026-11-27, 2-core machine"

    ag, run_ = numbers["agreement"], numbers["run"]
    print(f"seed 004: {numbers['model']['spec']}: {m.n} bodies, nv = {m.nv}, {numbers['model']['loop_rows']} loop rows "
          f"of rank {numbers['model']['rank']} (one DOF)")
    print(f"  drive: F = F_hold (1 + {a.gain:g} min(1, t / {a.ramp:g} s)), F_hold = {drive.hold:.6g} N "
          f"(Lagrange: {numbers['drive']['F_hold_lagrange_N']:.6g} N)")
    print(f"  run: {run_['t_end_s']:g} s, RK4 dt = {a.dt:g} s, {run_['samples']} samples; simulate took "
          f"{run_['simulate_wall_s']:.1f} s; theta_1 {numbers['theta_deg'][0]:.2f} -> {numbers['theta_deg'][1]:.2f} deg, "
          f"height {numbers['height_m'][0]:.3f} -> {numbers['height_m'][1]:.3f} m")
    print(f"  partree vs the Lagrange model: max |d theta_1| = {ag['theta_rad']:.3g} rad, |d theta_1'| = "
          f"{ag['theta_dot_rad_s']:.3g} rad/s, |d theta_1''| = {ag['theta_ddot_rad_s2']:.3g} rad/s^2 "
          f"({ag['theta_ddot_relative']:.2g} of its largest); height {ag['height_m']:.3g} m")
    print(f"    (RK4 at the same step on the Lagrange equation itself: max |d theta_1| = "
          f"{ag['rk4_on_the_lagrange_equation_theta_rad']:.3g} rad)")
    print(f"  qdd vs the dense KKT solve at the recorded states: {ag['qdd_vs_dense_kkt']:.3g}; max loop violation "
          f"{numbers['max_violation']:.3g} m")
    print(f"  reactions: momentum balance of the whole mechanism to {numbers['momentum_balance_relative']:.2g} of "
          f"its weight; largest forces: " + ", ".join(f"{k} {v:.1f} N" for k, v in numbers["max_force_N"].items()))
    print(f"  at t = {sub['t_s']:.3f} s: engine with a part per unit (parts = units: {sub['parts_are_units']}) vs "
          f"constrained_dynamics: qdd {sub['engine_qdd_vs_constrained_dynamics']:.3g} (|qdd| up to "
          f"{sub['qdd_scale']:.3g}), loop forces {sub['engine_loop_force_vs_constrained_dynamics']:.3g} N")
    print(f"    subsystem_equivalent on a closed unit: refused ({sub['closed_unit_refused']})")
    print(f"    the spanning tree with the loops' pin forces as external forces: qdd vs the closed mast "
          f"{sub['tree_with_pin_forces_qdd_vs_closed']:.3g}")
    for e in sub["equivalents"]:
        Mp = np.array(e["M"])[np.ix_([1, 3, 5], [1, 3, 5])]
        print(f"    units {e['units']} at {'the world' if e['base'] < 0 else 'body ' + str(e['base'])} "
              f"(root joint {e['root_joint']}): M a_base + f vs the joint's wrench: {e['difference']:.3g} N "
              f"(of {e['scale']:.3g}); in-plane block of M (n_y, f_x, f_z): "
              + np.array2string(Mp, precision=4, suppress_small=True).replace("\n", ""))

    files = [] if a.no_figures else figures(a.out, m, drive, res, series, numbers)
    path = a.json or os.path.join(a.out, "scissor_seed004.json")
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(_plain(numbers), fh, indent=1)
    files.append(path)
    for f in files:
        print(f"wrote {f}")
    return files, numbers


if __name__ == "__main__":
    main()
