"""Seed 001's examples: Cardan chains in generalized momenta, and a docking through an impulse.

    python scripts/examples/momentum_seed001.py                     # about half a minute
    python scripts/examples/momentum_seed001.py --steps 100000      # the long runs: 10^5 steps each
    python scripts/examples/momentum_seed001.py --quick             # short runs (tests)
    python scripts/examples/momentum_seed001.py --out figs --json numbers.json
    python scripts/examples/momentum_seed001.py --n 100000 --steps 20 --systems tree --no-docking
    mpiexec -n 2 python scripts/examples/momentum_seed001.py --n 1000000 --steps 5 --systems tree \
        --no-docking --backend mpi                                  # large trees over MPI

Seed 001 integrates the equations of motion in Poisson impulses (generalized momenta) of chains of
bodies joined by 2-DOF Cardan joints with a sixth-order method.  Here the same chains
(``partree.resolve_model("cardan:n=N")``: uniform 1 m, 1 kg cylinders, Hooke joints about y then
the turned z) are integrated by ``partree.simulate`` in both forms:

- ``formulation='momentum'``: the state (q, p), p = M(q) qd, each evaluation one O(N)
  ``partree.momentum_rhs`` (qd = M^-1 p by the block L^T D L elimination, dp/dt without
  accelerations);
- ``formulation='velocity'``: the state (q, qd), each evaluation ``partree.aba``;

each with ``gauss6`` (the 3-stage Gauss-Legendre method: order 6, symplectic) and with ``rk4``.

- conservation: the chain hanging under gravity (released from a seeded perturbation of the
  hanging position), and the same chain floating free in space (a free joint at its first body,
  no gravity, a seeded initial motion).  Over the run: the largest relative energy error, the
  energy error at the end, and for the floating chain the largest change of its total spatial
  momentum (about the world origin, world axes: six invariants).
- docking: the floating chain captures a free-flying payload (a point mass) with its tip.  At
  the moment of contact a latch joins the payload to the tip's end point: a perfectly plastic
  impact in all three directions.  The impulse lambda (world, on the chain; -lambda on the
  payload) is the one that makes the two velocities equal: (G + I / m_payload) lambda =
  v_payload - v_tip, with G = J_c M^-1 J_c^T, the tip point's inverse inertia, probed by three
  unit blows through ``partree.apply_impulse`` (no mass matrix).  ``apply_impulse`` then gives
  the chain's momenta and velocities after the blow.  Checked: the tip point moves with the
  payload afterwards, the total momentum of chain and payload is kept through the blow, the
  kinetic energy lost is Carnot's 1/2 dv^T (G + I/m)^-1 dv, and the chain with the payload
  attached (its tip body's inertia grown by the point mass) continues in momentum form with its
  energy and momentum kept.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import partree
from partree.models.generators import chain

#: the runs of the conservation comparison: (formulation, integrator)
RUNS = (("momentum", "gauss6"), ("velocity", "gauss6"), ("momentum", "rk4"), ("velocity", "rk4"))


def hanging_chain(n, seed):
    """``cardan:n=N`` and a state near its hanging position: the first joint's first angle +pi/2
    (the chain is built along x, horizontal), every angle perturbed and moving (seeded)."""
    m = partree.resolve_model(f"cardan:n={n}")
    rng = np.random.default_rng(seed)
    q0 = m.random_configuration(rng, 0.3)
    q0[0] += np.pi / 2
    return m, q0, m.random_velocity(rng, 0.5)


def floating_chain(n, seed, name="floating_cardan_chain"):
    """The same chain in space: its first body on a free joint, the other n - 1 on Cardan joints,
    no gravity; a seeded motion (the base spinning and drifting, the joints flexing)."""
    m = chain(n, joint=["free"] + ["universal"] * (n - 1), gravity=(0.0, 0.0, 0.0),
              name=f"{name}(n={n})", validate=True)
    rng = np.random.default_rng(seed)
    q0 = m.neutral()
    q0[7:] = rng.uniform(-0.3, 0.3, size=m.nq - 7)
    qd0 = np.concatenate([rng.uniform(-0.2, 0.2, 3), rng.uniform(-0.5, 0.5, 3), rng.uniform(-0.5, 0.5, m.nv - 6)])
    return m, q0, qd0


def momentum_drift(m, res):
    """max over the rows of |h(t) - h(0)| / max(|h(0)|, 1): h the total spatial momentum."""
    h = np.array([partree.momentum(m, q, qd) for q, qd in zip(res.q, res.qd)])
    return float(np.abs(h - h[0]).max() / max(np.abs(h[0]).max(), 1.0))


def floating_tree(n, seed, name="floating_cardan_tree"):
    """A binary tree of n bodies in space (``binary_tree``: 1 m, 1 kg cylinders, the children of a
    body spread at its outer end), its first body on a free joint and the others on Cardan
    joints, no gravity; the same seeded motion as :func:`floating_chain`.  Its depth grows as
    log2 n, so its momenta stay of the size of a short chain's at 10^5..10^6 bodies, where a
    chain's root momenta (its whole length's angular momentum) leave too few digits for the
    velocities."""
    from partree.models.generators import binary_tree

    m = binary_tree(n, joint=["free"] + ["universal"] * (n - 1), gravity=(0.0, 0.0, 0.0),
                    name=f"{name}(n={n})", validate=True)
    rng = np.random.default_rng(seed)
    q0 = m.neutral()
    q0[7:] = rng.uniform(-0.3, 0.3, size=m.nq - 7)
    qd0 = np.concatenate([rng.uniform(-0.2, 0.2, 3), rng.uniform(-0.5, 0.5, 3), rng.uniform(-0.5, 0.5, m.nv - 6)])
    return m, q0, qd0


#: the conservation runs' systems (``--systems``)
SYSTEMS = {"hanging": hanging_chain, "floating": floating_chain, "tree": floating_tree}


def conservation(n, steps, dt, seed, systems=("hanging", "floating"), runs=RUNS, backend="serial", comm=None):
    """Each system, every run of ``runs``: energy (and, floating, momentum) errors and time per
    step.  With ``backend='mpi'`` the runs are collective over ``comm`` (every rank calls; the
    numbers are on rank 0, None elsewhere)."""
    out = {}
    root = comm is None or comm.Get_rank() == 0
    for label in systems:
        m, q0, qd0 = SYSTEMS[label](n, seed)
        rows = {}
        for form, integ in runs:
            kw = {} if backend == "serial" else {"backend": backend, "comm": comm}
            t0 = time.perf_counter()
            res = partree.simulate(m, steps * dt, dt, q0=q0, qd0=qd0, integrator=integ, formulation=form,
                                   save_every=max(1, steps // 400), progress=False, verbose=False, **kw)
            wall = time.perf_counter() - t0
            if not root:
                continue
            E = res.energy
            scale = res.summary["energy"]["scale"]
            row = {"max_rel_energy_error": float(np.abs(E - E[0]).max() / scale),
                   "end_rel_energy_error": float(abs(E[-1] - E[0]) / scale),
                   "wall_per_step_us": 1e6 * wall / steps, "t": res.t, "energy_error": (E - E[0]) / scale}
            if integ == "gauss6":
                row["iterations_per_step"] = res.summary["iterations"] / steps
            if label != "hanging":
                row["max_rel_momentum_change"] = momentum_drift(m, res)
            rows[f"{form}/{integ}"] = row
        out[label] = rows
    return out if root else None


def _tip_point(m, q, qd, c_body):
    """World position and velocity of the point c_body (tip body coordinates) of the last body."""
    kin = partree.forward_kinematics(m, q, qd)
    k = m.n - 1
    R, pos, V = kin.R[k], kin.p[k], kin.v[k]
    return pos + R @ c_body, R @ (V[3:] + np.cross(V[:3], c_body)), R


def _blow(R, f_world, c_body):
    """The body wrench impulse [n; f] (tip body coordinates) of a linear impulse f (world) at the
    tip point c_body."""
    fb = R.T @ f_world
    return np.concatenate([np.cross(c_body, fb), fb])


def attach_point_mass(m, body, mass, c_body, name):
    """The model with a point mass rigidly attached to ``body`` at c_body (body coordinates): the
    body's mass, centre of mass and rotational inertia about the new centre of mass grown by it."""
    M = m.mass.copy()
    com = m.com.copy()
    I = m.I_com.copy()
    m0, c0 = M[body], com[body].copy()
    m1 = m0 + mass
    c1 = (m0 * c0 + mass * c_body) / m1

    def shift(mm, d):
        return mm * (d @ d * np.eye(3) - np.outer(d, d))
    I[body] = I[body] + shift(m0, c0 - c1) + shift(mass, c_body - c1)
    M[body], com[body] = m1, c1
    return partree.Model(m.parent, m.jtype, m.axis, m.E_tree, m.r_tree, M, com, I, axis2=m.axis2,
                         gravity=m.gravity, joint_names=list(m.joint_names), name=name, validate=True)


def docking(n, seed, t_contact, t_after, dt, payload_mass=2.0, approach=0.3):
    """The floating chain captures a payload with its tip at t_contact (module docstring)."""
    m, q0, qd0 = floating_chain(n, seed)
    before = partree.simulate(m, t_contact, dt, q0=q0, qd0=qd0, integrator="gauss6", formulation="momentum",
                              progress=False, verbose=False)
    q, qd = before.q[-1], before.qd[-1]
    c_body = np.array([m.com[-1][0] * 2.0, 0.0, 0.0])               # the tip body's outer end (length along x)
    c, v_tip, R = _tip_point(m, q, qd, c_body)
    # the payload comes in along the tip body's axis, towards it, at `approach` m/s relative to the tip
    axis = R[:, 0]
    v_pay = v_tip - approach * axis
    name = m.joint_names[-1]
    # G = J_c M^-1 J_c^T by three unit blows at the tip point (apply_impulse's velocity jump)
    G = np.empty((3, 3))
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1.0
        dq = partree.apply_impulse(m, q, np.zeros(m.nv), body_impulse={name: _blow(R, e, c_body)}).qd
        G[:, k] = _tip_point(m, q, dq, c_body)[1]
    lam = np.linalg.solve(G + np.eye(3) / payload_mass, v_pay - v_tip)
    after = partree.apply_impulse(m, q, qd, body_impulse={name: _blow(R, lam, c_body)})
    v_pay_after = v_pay - lam / payload_mass
    v_tip_after = _tip_point(m, q, after.qd, c_body)[1]
    h_pay = lambda v: payload_mass * np.concatenate([np.cross(c, v), v])      # noqa: E731
    h_before = partree.momentum(m, q, qd) + h_pay(v_pay)
    h_after = partree.momentum(m, q, after.qd) + h_pay(v_pay_after)
    T_before = partree.kinetic_energy(m, q, qd) + 0.5 * payload_mass * v_pay @ v_pay
    T_after = partree.kinetic_energy(m, q, after.qd) + 0.5 * payload_mass * v_pay_after @ v_pay_after
    dv = v_pay - v_tip
    carnot = -0.5 * dv @ np.linalg.solve(G + np.eye(3) / payload_mass, dv)
    # the chain with the payload attached, from the state after the blow
    m2 = attach_point_mass(m, m.n - 1, payload_mass, c_body, f"{m.name}+payload")
    h_joined = partree.momentum(m2, q, after.qd)
    joined = partree.simulate(m2, t_after, dt, q0=q, qd0=after.qd, integrator="gauss6", formulation="momentum",
                              progress=False, verbose=False)
    hj = np.array([partree.momentum(m2, a, b) for a, b in zip(joined.q, joined.qd)])
    scale = max(np.abs(h_before).max(), 1.0)
    return {"impulse_N_s": lam.tolist(), "impulse_norm_N_s": float(np.linalg.norm(lam)),
            "relative_velocity_before_m_s": float(np.linalg.norm(dv)),
            "relative_velocity_after_m_s": float(np.linalg.norm(v_tip_after - v_pay_after)),
            "momentum_change_through_blow": float(np.abs(h_after - h_before).max() / scale),
            "joined_momentum_vs_before": float(np.abs(h_joined - h_before).max() / scale),
            "energy_lost_J": float(T_before - T_after), "carnot_loss_J": float(-carnot),
            "after_max_rel_energy_error": joined.summary["energy"]["max_rel_drift"],
            "after_max_rel_momentum_change": float(np.abs(hj - hj[0]).max() / scale),
            "tip_speed_before": float(np.linalg.norm(v_tip)), "tip_speed_after": float(np.linalg.norm(v_tip_after)),
            "t_before": before.t, "t_after": joined.t + t_contact,
            "kinetic_before": before.kinetic + 0.5 * payload_mass * v_pay @ v_pay, "kinetic_after": joined.kinetic}


def _figure(out, cons, dock):
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, label in zip(axes[:2], ("hanging", "floating")):
        for key, row in cons[label].items():
            ax.semilogy(row["t"], np.abs(row["energy_error"]) + 1e-17, label=key)
        ax.set_title(f"{label} Cardan chain: |E - E(0)| / E scale")
        ax.set_xlabel("t [s]")
        ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(dock["t_before"], dock["kinetic_before"], label="chain and free payload")
    ax.plot(dock["t_after"], dock["kinetic_after"], label="chain with the payload latched")
    ax.set_title("docking: total kinetic energy [J]")
    ax.set_xlabel("t [s]")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "seed001_momentum.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plain(numbers):
    """The numbers without the time series (for printing and JSON)."""
    def strip(d):
        return {k: (strip(v) if isinstance(v, dict) else v) for k, v in d.items() if not isinstance(v, np.ndarray)}
    return strip(numbers)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=5, help="bodies in each chain (default 5; the seed's 5 .. 50)")
    p.add_argument("--steps", type=int, default=1000,
                   help="steps of each conservation run (default 1000; --steps 100000 for the long runs)")
    p.add_argument("--dt", type=float, default=0.01, help="step in s (default 0.01)")
    p.add_argument("--seed", type=int, default=1, help="seed of the initial states")
    p.add_argument("--quick", action="store_true", help="short runs (tests): 3 bodies, 200 steps")
    p.add_argument("--out", default=None, help="folder of the figure (needs matplotlib)")
    p.add_argument("--json", default=None, help="write the numbers to this JSON file")
    p.add_argument("--systems", nargs="+", choices=tuple(SYSTEMS), default=["hanging", "floating"],
                   help="the conservation runs' systems (default: hanging floating; tree: a floating binary "
                        "tree of Cardan joints, for 10^5..10^6 bodies)")
    p.add_argument("--runs", nargs="+", default=[f"{f}/{i}" for f, i in RUNS], metavar="FORM/INTEGRATOR",
                   help="the conservation runs (default: " + " ".join(f"{f}/{i}" for f, i in RUNS) + ")")
    p.add_argument("--no-docking", action="store_true", help="leave the docking example out (large systems)")
    p.add_argument("--backend", choices=("serial", "mpi"), default="serial",
                   help="the conservation runs' backend; mpi: run under mpiexec, the numbers on rank 0")
    a = p.parse_args(argv)
    n, steps = (3, 200) if a.quick else (a.n, a.steps)
    runs = []
    for r in a.runs:
        form, _, integ = r.partition("/")
        if form not in ("momentum", "velocity") or not integ:
            p.error(f"--runs: {r!r} is not FORM/INTEGRATOR with FORM momentum or velocity")
        runs.append((form, integ))
    comm = None
    if a.backend == "mpi":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    numbers = {"n": n, "steps": steps, "dt": a.dt, "backend": a.backend,
               "ranks": 1 if comm is None else comm.Get_size()}
    numbers["conservation"] = conservation(n, steps, a.dt, a.seed, a.systems, runs, a.backend, comm)
    if comm is not None and comm.Get_rank() != 0:
        return [], None
    if not a.no_docking:
        numbers["docking"] = docking(n, a.seed, t_contact=0.5 if a.quick else 2.0, t_after=0.5 if a.quick else 5.0,
                                     dt=a.dt)
    plain = _plain(numbers)
    print(f"{n} bodies, {steps} steps of {a.dt:g} s ({steps * a.dt:g} s), backend {a.backend}"
          f" ({numbers['ranks']} process{'es' if numbers['ranks'] > 1 else ''})")
    for label, rows in plain["conservation"].items():
        print(f"\n{label:8s}           max |dE|/E   end |dE|/E   max |dh|/|h|   us/step   iterations/step")
        for key, r in rows.items():
            print(f"  {key:18s} {r['max_rel_energy_error']:11.3e}  {r['end_rel_energy_error']:11.3e}  "
                  f"{r.get('max_rel_momentum_change', float('nan')):12.3e}  {r['wall_per_step_us']:8.0f}  "
                  f"{r.get('iterations_per_step', float('nan')):8.1f}")
    d = plain.get("docking")
    if d is not None:
        print(f"\ndocking: impulse {d['impulse_norm_N_s']:.4g} N s; relative velocity "
              f"{d['relative_velocity_before_m_s']:.3g} -> {d['relative_velocity_after_m_s']:.2e} m/s; energy lost "
              f"{d['energy_lost_J']:.6g} J (Carnot {d['carnot_loss_J']:.6g} J); momentum through the blow "
              f"{d['momentum_change_through_blow']:.1e}, joined model {d['joined_momentum_vs_before']:.1e}; after: "
              f"energy {d['after_max_rel_energy_error']:.1e}, momentum {d['after_max_rel_momentum_change']:.1e}")
    files = []
    if a.out and "docking" in numbers:
        os.makedirs(a.out, exist_ok=True)
        files.append(_figure(a.out, numbers["conservation"], numbers["docking"]))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(plain, fh, indent=1)
        files.append(a.json)
    for f in files:
        print(f"wrote {f}")
    return files, numbers


if __name__ == "__main__":
    main()
