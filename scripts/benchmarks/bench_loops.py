#!/usr/bin/env python
"""Closed loops: ``partree.constrained_dynamics`` against ABA on the same tree, against Pinocchio's
``constraintDynamics``, and how its cost grows with bodies and loops.

    python scripts/benchmarks/bench_loops.py                   # every part, scaling to 10^6 bodies
    python scripts/benchmarks/bench_loops.py --quick           # scaling to 10^5, fewer rounds
    python scripts/benchmarks/bench_loops.py --parts pinocchio breakdown
    python scripts/benchmarks/bench_loops.py --reference ../partree-old   # also the plain call of another checkout

Parts (``--parts``, all by default):

``large``      10^5-body trees with 10^3 local loops (a binary tree, a 3-D chain, a random tree of
               mixed joints) and the scissor mast of 5*10^4 units (one pin per unit closing a
               loop): constrained_dynamics against ``partree.aba`` on the same tree, with the
               solution's residuals in O(N) (M qdd + h - tau - J^T lambda through RNEA; J qdd -
               gamma on the kept rows at zero velocity) and the one-time set-up of the loops'
               topology and buffers.
``pinocchio``  models Pinocchio holds (at most 511 bodies, a few loops): Solo12 with its four feet
               held on the ground (CONTACT_3D), Talos with its soles welded to it (CONTACT_6D) and
               with its grippers welded together, and binary trees of 63, 255 and 511 bodies with
               local spherical and weld loops; ``pin.constraintDynamics`` with the model's
               RigidConstraintModels (``initConstraintDynamics`` done once, outside the timing;
               ``ProximalSettings(1e-12, 0, 1)``: no regularisation, one exact solve, as a user
               takes for exact results of independent constraints), side by side with
               ``partree.constrained_dynamics``, both results compared.
``scaling``    time per body and per loop at 10^3 .. 10^6 bodies: the binary tree and the 3-D
               chain with one local loop per 100 bodies, and the scissor mast (a loop per unit);
               then 10^5 binary-tree bodies with 10^2 .. 10^4 loops.  Plotted.
``breakdown``  where one call's time goes, on Solo12 (small) and on the 10^5-body binary tree
               with 10^3 loops:
               the Python side, the crossing into compiled code, the result object and the
               kernel's pieces timed inside compiled code (pass 1, world poses, loop terms, the
               inward and the outward loop passes); and cProfile of the plain call.

Local loops: for a body x, the body a few joints above it (2-4 in the trees, 6-10 in the chain),
then down another branch as many joints (the chain: the body above itself); kinds spherical,
revolute and weld in turn (Pinocchio's models: spherical and weld); the frames placed so that
the loop is closed at the benchmark's configuration (unlike ``partree.models.local_loops``,
whose loops are left open).  On the models Pinocchio holds the velocities satisfy the loops
(J qd = 0), so that both libraries solve the same problem; ``to_pinocchio`` numbers Pinocchio's
joints depth first and ``PinocchioMap`` converts the states.

Every figure is measured side by side: in each round every variant of a case runs in turn (for
at least ``--sample`` seconds), the order alternates, and the best round of each variant is kept.
Output: the JSON (``--out``, default docs/results/bench_loops/bench_loops.json) and the plot
``scaling.png`` beside it.
"""
import argparse
import cProfile
import datetime
import io
import json
import os
import platform
import pstats
import sys
import time

import numpy as np
from numba import njit

import partree
from partree import Loop
from partree.algorithms import constrained_dynamics as cdyn
from partree.algorithms.aba import aba_forward_pass1_in
from partree.algorithms.kinematics import forward_kinematics, world_poses
from partree.algorithms.loop_constraints import end_rows, loop_terms, loop_terms_kernel, state_kinematics
from partree.algorithms.primitives import xform_motion
from partree.algorithms.packed import NO_FORCES, raw_view
from partree.loops import KINDS, LoopSet
from partree.spatial import axis_angle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_small import load  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "docs", "results", "bench_loops", "bench_loops.json")
PARTS = ("large", "pinocchio", "scaling", "breakdown")


# ------------------------------------------------------------------------------------ timing
def timed(variants, rounds, sample=0.02):
    """{name: best seconds per call}: each round runs every variant for at least ``sample``
    seconds (its repetitions fixed after a first call), in an order that alternates."""
    reps = {}
    for k, fn in variants.items():
        fn()
        t = time.perf_counter()
        fn()
        reps[k] = max(1, int(sample / max(time.perf_counter() - t, 1e-7)))
    best = {k: np.inf for k in variants}
    for r in range(rounds):
        order = list(variants.items())
        if r % 2:
            order.reverse()
        for k, fn in order:
            n = reps[k]
            t = time.perf_counter()
            for _ in range(n):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t) / n)
    return best


# ------------------------------------------------------------------------------------ models
def local_loops(model, q, count, rng, kinds=("spherical", "revolute", "weld"), reach=(2, 4), prefix="loop"):
    """``count`` loops between bodies a few joints apart (see the module docstring), closed at q."""
    parent, depth = model.parent, model.depth()
    cp, ci = model.children()
    kin = forward_kinematics(model, q)
    cand = np.flatnonzero(depth >= reach[1])
    loops = []
    for k in range(count):
        x = int(cand[rng.integers(cand.size)])
        up = int(rng.integers(reach[0], reach[1] + 1))
        a, below = x, x
        for _ in range(up):
            below, a = a, int(parent[a])
        kids = ci[cp[a]:cp[a + 1]]
        others = kids[kids != below]
        b = a
        if others.size:
            b = int(others[rng.integers(others.size)])
            for _ in range(up - 1):
                kb = ci[cp[b]:cp[b + 1]]
                if not kb.size:
                    break
                b = int(kb[rng.integers(kb.size)])
        Ra, pa = axis_angle(rng.normal(size=3), rng.uniform(-np.pi, np.pi)), 0.2 * rng.normal(size=3)
        RA, oA = kin.R[x] @ Ra, kin.p[x] + kin.R[x] @ pa
        loops.append(Loop(f"{prefix}{k}", kinds[k % len(kinds)], x, b, (Ra, pa),
                          (kin.R[b].T @ RA, kin.R[b].T @ (oA - kin.p[b]))))
    return model.with_loops(loops)


def scissor_with_pins(units):
    """The scissor mast with its left-out pins as revolute loops about the pin axis y: B_k's upper
    end to B_{k+1}'s lower end (closed at q = 0; planar, so 2 of each loop's 5 rows are independent)."""
    m = partree.resolve_model(f"scissor:units={units}")
    L = units - 1
    k = np.arange(L)
    eye = np.tile(np.eye(3), (L, 1, 1))
    pa, pb = np.zeros((L, 3)), np.zeros((L, 3))
    pa[:, 0], pb[:, 0] = 0.5, -0.5
    axis = np.zeros((L, 3))
    axis[:, 1] = 1.0
    loops = LoopSet([f"pin{i}" for i in k], np.full(L, KINDS.index("revolute")), 2 * k + 1, 2 * k + 3,
                    eye, pa, eye.copy(), pb, axis, np.zeros((L, 3)), np.zeros(L))
    return m.with_loops(loops)


def world_contacts(model, q, ends):
    """Loops (name, kind, body) from a body to the world, closed at q."""
    kin = forward_kinematics(model, q)
    out = []
    for name, kind, body in ends:
        b = model.body_names.index(body)
        out.append(Loop(name, kind, b, None, None, (kin.R[b], kin.p[b])))
    return model.with_loops(out)


def satisfying_velocity(model, q, qd):
    """qd less its part in the row space of J: J qd = 0."""
    J = partree.loop_constraints(model, q).J.toarray()
    x, *_ = np.linalg.lstsq(J, J @ qd, rcond=None)
    return qd - x


def state(model, seed):
    rng = np.random.default_rng(seed)
    return model.random_configuration(rng), model.random_velocity(rng), rng.normal(size=model.nv)


@njit
def _accelerations(parent, idx_v, E, r, S, qdd, a):
    """The bodies' accelerations at zero velocity and without gravity: a_i = X_i a_parent + S_i qdd_i."""
    n, nvt = parent.shape[0], S.shape[0]
    tmp = np.empty(6)
    for i in range(n):
        iv = idx_v[i]
        nv = idx_v[i + 1] - iv if i + 1 < n else nvt - iv
        for k in range(6):
            tmp[k] = 0.0
        if parent[i] >= 0:
            xform_motion(E[i], r[i], a[parent[i]], tmp)
        for k in range(6):
            s = tmp[k]
            for d in range(nv):
                s += S[iv + d, k] * qdd[iv + d]
            a[i, k] = s


def residuals(model, q, qd, tau, res):
    """The solution's residuals in O(N): the dynamics at the benchmark's state,
    max |M qdd + h - J^T lambda - tau| / max |tau| (RNEA with the loops' wrenches on the bodies),
    and the constraints at zero velocity, max |J qdd - gamma| over the kept rows / max |a| (the
    rows from the bodies' accelerations a)."""
    f = partree.rnea(model, q, qd, res.qdd, f_ext=res.loop_wrench) - tau
    rd = float(np.abs(f).max() / max(np.abs(tau).max(), 1.0))
    zero = np.zeros(model.nv)
    r0 = partree.constrained_dynamics(model, q, zero, tau)
    E, r, v, c, IA, pA, S, Rw, pw = state_kinematics(model, q, zero)
    a = np.zeros((model.n, 6))
    _accelerations(model.parent, model.idx_v, E, r, S, r0.qdd, a)
    terms = loop_terms(model.loops, Rw, pw, v)
    rows = end_rows(model.loops, terms.G, a) - terms.gamma
    rc = float(np.abs(rows[r0.independent]).max(initial=0.0) / max(np.abs(a).max(), 1.0))
    return rc, rd


# ------------------------------------------------------------------------------------ parts
LARGE = (("binary", "binary:n={n}", (2, 4)), ("chain", "chain:n={n},alternate=true", (6, 10)),
         ("random", "random:n={n},seed=1", (2, 4)))


def large_models(n, loops, seed=0):
    """{name: (model, q, qd, tau)} of the large part (and the scaling's families)."""
    out = {}
    for name, spec, reach in LARGE:
        m = partree.resolve_model(spec.format(n=n))
        q, qd, tau = state(m, seed)
        out[name] = (local_loops(m, q, loops, np.random.default_rng(seed + 1), reach=reach), q, qd, tau)
    return out


def large_part(n, loops, rounds, ref=None):
    print(f"\n== {n} bodies, {loops} local loops: constrained_dynamics / ABA on the same tree (ms per call) ==")
    print(f"{'model':10s} {'nv':>7s} {'rows':>6s} {'rank':>6s} {'ABA':>8s} {'constr.':>8s} {'ratio':>6s} "
          f"{'|Jqdd-g|':>9s} {'|dyn|':>9s} {'max|lam|':>9s} {'setup':>7s}" + ("  reference  this/ref" if ref else ""))
    cases = large_models(n, loops)
    units = n // 2
    m = scissor_with_pins(units)
    q = np.zeros(m.nq)
    rng = np.random.default_rng(3)
    cases["scissor"] = (m, q, np.zeros(m.nv), rng.normal(size=m.nv))
    out = {}
    for name, (m, q, qd, tau) in cases.items():
        t0 = time.perf_counter()
        cdyn.LoopBuffers(m, cdyn.LoopTopology(m))
        setup = time.perf_counter() - t0
        r = partree.constrained_dynamics(m, q, qd, tau)
        variants = {"aba": lambda: partree.aba(m, q, qd, tau),
                    "constrained": lambda: partree.constrained_dynamics(m, q, qd, tau)}
        if ref is not None:
            mr = ref_model(ref, m)
            variants["reference"] = lambda: ref.constrained_dynamics(mr, q, qd, tau)
        t = timed(variants, rounds, sample=0.0)
        rc, rd = residuals(m, q, qd, tau, r)
        out[name] = {"n": m.n, "nv": m.nv, "loops": len(m.loops), "rows": m.loops.nrow, "rank": r.rank,
                     "times_s": t, "ratio": t["constrained"] / t["aba"], "residual_constraints": rc,
                     "residual_dynamics": rd, "max_abs_multiplier": float(np.abs(r.multipliers).max(initial=0.0)),
                     "topology_setup_s": setup}
        line = (f"{name:10s} {m.nv:7d} {m.loops.nrow:6d} {r.rank:6d} {t['aba']*1e3:8.2f} {t['constrained']*1e3:8.2f} "
                f"{t['constrained']/t['aba']:6.2f} {rc:9.1e} {rd:9.1e} {np.abs(r.multipliers).max():9.1e} "
                f"{setup:6.2f}s")
        if ref is not None:
            line += f"  {t['reference']*1e3:9.2f}  {t['constrained']/t['reference']:8.2f}"
        print(line)
    return out


def pinocchio_models():
    """[(name, model, q)] of the Pinocchio part: spherical and weld loops only, independent rows."""
    out = []
    rng = np.random.default_rng(11)
    solo, why = load("solo12", "solo_description/robots/solo12.urdf", True)
    if solo is not None:
        q = solo.random_configuration(rng)
        out.append(("solo12, 4 feet on the ground", world_contacts(
            solo, q, [(f, "spherical", f) for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")]), q))
    else:
        print(f"solo12 skipped ({why})")
    talos, why = load("talos", "talos_data/robots/talos_reduced.urdf", True)
    if talos is not None:
        q = talos.random_configuration(rng)
        feet = world_contacts(talos, q, [("left sole", "weld", "left_sole_link"),
                                         ("right sole", "weld", "right_sole_link")])
        out.append(("talos, soles welded", feet, q))
        kin = forward_kinematics(talos, q)
        a, b = talos.body_names.index("arm_left_7_link"), talos.body_names.index("arm_right_7_link")
        X = (np.eye(3), (0.0, 0.0, -0.1))
        RA, oA = kin.R[a], kin.p[a] + kin.R[a] @ np.array(X[1])
        hands = feet.with_loops([Loop("hands", "weld", a, b, X, (kin.R[b].T @ RA, kin.R[b].T @ (oA - kin.p[b])))])
        out.append(("talos, soles welded, hands welded", hands, q))
    else:
        print(f"talos skipped ({why})")
    for n, L in ((63, 2), (255, 4), (511, 6)):
        m = partree.resolve_model(f"binary:n={n}")
        for seed in range(20):
            r2 = np.random.default_rng(100 * n + seed)
            q = m.random_configuration(r2)
            ml = local_loops(m, q, L, r2, kinds=("spherical", "weld"), reach=(3, 4))
            if partree.constrained_dynamics(ml, q, np.zeros(m.nv), np.zeros(m.nv)).rank == ml.loops.nrow:
                out.append((f"binary {n}, {L} loops", ml, q))
                break
    return out


def pinocchio_part(rounds, sample, ref=None):
    import pinocchio as pin
    from partree.io.pinocchio import PinocchioMap, loop_constraints_to_pinocchio, to_pinocchio

    print("\n== against Pinocchio's constraintDynamics (us per call); ratio = partree / Pinocchio ==")
    print(f"{'model':36s} {'nv':>4s} {'rows':>4s} {'pin':>8s} {'partree':>8s} {'ratio':>6s} {'pin.aba':>8s} "
          f"{'aba':>8s} {'max rel diff':>12s}" + ("  reference  this/ref" if ref else ""))
    out = {}
    prox = pin.ProximalSettings(1e-12, 0.0, 1)
    for name, m, q in pinocchio_models():
        rng = np.random.default_rng(5)
        qd = satisfying_velocity(m, q, m.random_velocity(rng))
        tau = rng.normal(size=m.nv)
        pm, _ = to_pinocchio(m)
        pd = pm.createData()
        mp = PinocchioMap(m, pm)
        qp, vp, tp = mp.q_to_pinocchio(q), mp.v_to_pinocchio(qd), mp.v_to_pinocchio(tau)
        cms = pin.StdVec_RigidConstraintModel(loop_constraints_to_pinocchio(m, pm))
        cds = pin.StdVec_RigidConstraintData([c.createData() for c in cms])
        pin.initConstraintDynamics(pm, pd, cms, cds)
        a_pin = mp.v_from_pinocchio(pin.constraintDynamics(pm, pd, qp, vp, tp, cms, cds, prox).copy())
        r = partree.constrained_dynamics(m, q, qd, tau)
        diff = float(np.abs(r.qdd - a_pin).max() / max(np.abs(a_pin).max(), 1.0))
        variants = {"pin": lambda: pin.constraintDynamics(pm, pd, qp, vp, tp, cms, cds, prox),
                    "partree": lambda: partree.constrained_dynamics(m, q, qd, tau),
                    "pin.aba": lambda: pin.aba(pm, pd, qp, vp, tp),
                    "partree.aba": lambda: partree.aba(m, q, qd, tau)}
        if ref is not None:
            mr = ref_model(ref, m)
            variants["reference"] = lambda: ref.constrained_dynamics(mr, q, qd, tau)
        t = timed(variants, rounds, sample)
        out[name] = {"n": m.n, "nv": m.nv, "pin_joints": pm.njoints - 1, "loops": len(m.loops), "rows": m.loops.nrow,
                     "rank": r.rank, "times_s": t, "ratio": t["partree"] / t["pin"], "max_rel_diff_qdd": diff}
        line = (f"{name:36s} {m.nv:4d} {m.loops.nrow:4d} {t['pin']*1e6:8.2f} {t['partree']*1e6:8.2f} "
                f"{t['partree']/t['pin']:6.2f} {t['pin.aba']*1e6:8.2f} {t['partree.aba']*1e6:8.2f} {diff:12.1e}")
        if ref is not None:
            line += f"  {t['reference']*1e6:9.2f}  {t['partree']/t['reference']:8.2f}"
        print(line)
    return out


def scaling_part(sizes, rounds, loop_counts, n_loops_sweep):
    print("\n== growth: ns per body (constrained_dynamics, ABA) and per loop ((constrained - ABA) / loops) ==")
    print(f"{'family':8s} {'bodies':>8s} {'loops':>7s} {'ABA/body':>9s} {'constr/body':>11s} {'ratio':>6s} "
          f"{'extra/loop':>11s}")
    rows = []

    def point(family, m, q, qd, tau, sweep=False):
        partree.constrained_dynamics(m, q, qd, tau)
        t = timed({"aba": lambda: partree.aba(m, q, qd, tau),
                   "constrained": lambda: partree.constrained_dynamics(m, q, qd, tau)}, rounds, sample=0.05)
        L = len(m.loops)
        row = {"family": family, "n": m.n, "nv": m.nv, "loops": L, "rows": m.loops.nrow, "sweep": sweep,
               "aba_s": t["aba"], "constrained_s": t["constrained"], "aba_ns_per_body": t["aba"] / m.n * 1e9,
               "constrained_ns_per_body": t["constrained"] / m.n * 1e9,
               "extra_ns_per_loop": (t["constrained"] - t["aba"]) / max(L, 1) * 1e9}
        rows.append(row)
        print(f"{family:8s} {m.n:8d} {L:7d} {row['aba_ns_per_body']:9.1f} {row['constrained_ns_per_body']:11.1f} "
              f"{t['constrained']/t['aba']:6.2f} {row['extra_ns_per_loop']:11.0f}")

    for n in sizes:
        for name, spec, reach in LARGE[:2]:
            m = partree.resolve_model(spec.format(n=n))
            q, qd, tau = state(m, 0)
            point(name, local_loops(m, q, max(n // 100, 1), np.random.default_rng(1), reach=reach), q, qd, tau)
        m = scissor_with_pins(n // 2)
        point("scissor", m, np.zeros(m.nq), np.zeros(m.nv), np.random.default_rng(3).normal(size=m.nv))
    m0 = partree.resolve_model(f"binary:n={n_loops_sweep}")
    q, qd, tau = state(m0, 0)
    for L in loop_counts:
        point("binary", local_loops(m0, q, L, np.random.default_rng(1)), q, qd, tau, sweep=True)
    return rows


def plot_scaling(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.3))
    colours = {"binary": "C0", "chain": "C1", "scissor": "C2"}
    for fam, col in colours.items():
        pts = sorted((r for r in rows if r["family"] == fam and not r["sweep"]), key=lambda r: r["n"])
        if not pts:
            continue
        n = [r["n"] for r in pts]
        ax[0].plot(n, [r["constrained_ns_per_body"] for r in pts], "o-", color=col,
                   label=f"{fam}: constrained_dynamics")
        ax[0].plot(n, [r["aba_ns_per_body"] for r in pts], "s--", color=col, alpha=0.6, label=f"{fam}: ABA")
        ax[1].plot(n, [r["extra_ns_per_loop"] for r in pts], "o-", color=col,
                   label=f"{fam} ({'1 loop / 2 bodies' if fam == 'scissor' else '1 loop / 100 bodies'})")
    sw = sorted((r for r in rows if r["sweep"]), key=lambda r: r["loops"])
    if sw:
        L = [r["loops"] for r in sw]
        ax[2].plot(L, [r["constrained_s"] / r["aba_s"] for r in sw], "o-", color="C0",
                   label="constrained_dynamics / ABA")
        ax[2].axhline(3.0, color="gray", ls=":", label="target at 10^3 loops: 3")
        ax[2].set_xscale("log")
        ax[2].set_xlabel(f"loops ({sw[0]['n']}-body binary tree)")
        ax[2].set_ylabel("time / ABA's (same tree, interleaved)")
        ax[2].set_title("against the number of loops")
        ax[2].set_ylim(bottom=0)
        ax[2].legend(fontsize=8)
    ax[0].set_xscale("log")
    ax[0].set_xlabel("bodies")
    ax[0].set_ylabel("ns per body")
    ax[0].set_title("time per body (one core)")
    ax[0].set_ylim(bottom=0)
    ax[0].legend(fontsize=7)
    ax[1].set_xscale("log")
    ax[1].set_xlabel("bodies")
    ax[1].set_ylabel("ns per loop")
    ax[1].set_title("(constrained - ABA) per loop")
    ax[1].set_ylim(bottom=0)
    ax[1].legend(fontsize=7)
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------ breakdown
@njit
def _pieces(count, which, parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
            E, r, v, c, IA, pA, a, S, U, Dinv, u, ib, fb, R_a, p_a, R_b, p_b, laxis, laxis2, length, q, qd, tau,
            fext, ob, tol, delta):
    """``count`` runs of one piece of a call (which: 0 pass 1, 1 world poses, 2 loop terms, 3 pass 1
    + the inward loop pass, 4 the outward loop pass, 5 the whole kernel); ``delta``: the
    redundant groups' regularisation (``constrained_dynamics``' ``redundant``)."""
    n, nv, L, R = parent.shape[0], S.shape[0], ib[2], ib[3]
    (kind, body_a, body_b, nrows, row0, wptr, wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr,
     sptr, eptr, eloop, eside, epos, zfirst, enodes, perm, rank, rrank, kept) = cdyn.loop_views(ib)
    Rw, pw, gamma, T, Cw, Kw, kw, SC, reg, gsh, sc = cdyn.loop_work_views(ib, fb)
    qdd, lam, phi, vel, indep, lforce, G, info = cdyn.result_views(ob, nv, R, L)
    work = raw_view(sc, 6, (sc.shape[0] - 6,))
    a0 = raw_view(sc, 0, (6,))
    for _ in range(count):
        if which == 0 or which == 3:
            aba_forward_pass1_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                                 fext, False, E, r, v, c, IA, pA, S, work)
        if which == 1:
            world_poses(parent, E, r, Rw, pw)
        elif which == 2:
            loop_terms_kernel(kind, body_a, body_b, R_a, p_a, R_b, p_b, laxis, laxis2, length, nrows, row0, Rw, pw,
                              v, G, gamma, phi, vel, T, work)
        elif which == 3:
            cdyn.loop_backward_pass_in(parent, idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u, mass, com, I_com, wptr,
                                       wloop, wpos, npl, prow, wrows, prmap, wglob, rptr, cptr, kptr, sptr, eptr,
                                       eloop, eside, epos, zfirst, nrows, G, gamma, tol, Cw, Kw, kw, SC, perm, rank,
                                       work, delta, reg, kept, rrank)
        elif which == 4:
            cdyn.loop_forward_pass_in(parent, idx_v, a0, E, r, S, c, U, Dinv, u, a, qdd, lam, prow, wrows, wglob,
                                      rptr, cptr, kptr, sptr, gamma, Cw, Kw, kw, SC, perm, rank, work)
        elif which == 5:
            cdyn.constrained_unpacked(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                                      gravity, q, qd, tau, fext, False, E, r, v, c, IA, pA, a, S, U, Dinv, u, ib, fb,
                                      R_a, p_a, R_b, p_b, laxis, laxis2, length, ob, tol, delta)


@njit
def _empty_call(mb, wb, ib, fb, R_a, p_a, R_b, p_b, laxis, laxis2, length, q, qd, tau, fext, ob, tol, delta,
                check):
    return -1


def breakdown(m, q, qd, tau, rounds, sample, inner):
    """Seconds per call of the pieces (see the module docstring)."""
    from partree import checks

    partree.constrained_dynamics(m, q, qd, tau)
    lb, lp, d = cdyn.loop_buffers(m), m.loops, m.data
    ob = np.empty(lb.size)
    geometry = (lp.R_a, lp.p_a, lp.R_b, lp.p_b, lp.axis, lp.axis2, lp.length)
    kargs = (*checks.model_args(m), m.gravity, d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, lb.ib,
             lb.fb, *geometry, q, qd, tau, NO_FORCES, ob, 1e-14, cdyn.SHARE_DELTA)
    sizes = (lb.nv, lb.R, lb.L)
    v = {"partree.constrained_dynamics (plain call)": lambda: partree.constrained_dynamics(m, q, qd, tau),
         "partree.aba (plain call), for comparison": lambda: partree.aba(m, q, qd, tau),
         "result buffer (np.empty)": lambda: np.empty(lb.size),
         "result object (ConstrainedResult)": lambda: cdyn.ConstrainedResult(m, ob, sizes, q, qd, tau, None)}
    pk = m._packed
    if pk is not None:
        args = (pk.buf, d._buf, lb.ib, lb.fb, *geometry, q, qd, tau, NO_FORCES, ob, 1e-14, cdyn.SHARE_DELTA)
        v["compiled call from Python (constrained_call, 19 arguments)"] = lambda: cdyn.constrained_call(*args, True)
        v["empty compiled function, the same 19 arguments"] = lambda: _empty_call(*args, True)
    names = ("pass 1 (ABA's)", "world poses", "loop terms (G, gamma, phi, T)", "inward pass",
             "outward pass", "kernel whole (pieces, rank, loop forces)")
    for k, nm in enumerate(names):
        v[nm] = (lambda k=k: _pieces(inner, k, *kargs))
    t = timed(v, rounds, sample)
    for nm in names:
        t[nm] /= inner
    t["inward pass"] -= t["pass 1 (ABA's)"]
    return t


def profile(m, q, qd, tau, calls):
    """The top of cProfile's table (by own time) for ``calls`` plain calls."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        partree.constrained_dynamics(m, q, qd, tau)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(8)
    return s.getvalue()


def breakdown_part(rounds, sample, big):
    out = {}
    cases = []
    solo, why = load("solo12", "solo_description/robots/solo12.urdf", True)
    if solo is not None:
        q = solo.random_configuration(np.random.default_rng(11))
        m = world_contacts(solo, q, [(f, "spherical", f) for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")])
        qd = satisfying_velocity(m, q, m.random_velocity(np.random.default_rng(5)))
        tau = np.random.default_rng(6).normal(size=m.nv)
        cases.append(("solo12, 4 feet on the ground", m, q, qd, tau, 200, 1e6, "us"))
    m, q, qd, tau = large_models(big, big // 100)["binary"]
    cases.append((f"binary {big}, {big // 100} loops", m, q, qd, tau, 1, 1e3, "ms"))
    for name, m, q, qd, tau, inner, scale, unit in cases:
        t = breakdown(m, q, qd, tau, rounds, sample, inner)
        prof = profile(m, q, qd, tau, 2000 if inner > 1 else 20)
        out[name] = {"times_s": t, "cprofile": prof}
        print(f"\n== one call on {name}: where the time goes ({unit} per call) ==")
        for k, val in t.items():
            print(f"  {k:62s} {val*scale:9.2f}")
        print("  cProfile, by own time:\n" + "\n".join("    " + s for s in prof.strip().splitlines()[-12:]))
    return out


# ------------------------------------------------------------------------------------ reference
def load_reference(checkout):
    from ab_kernels import load_reference as load_ref

    return load_ref(checkout)


def ref_model(ref, m):
    """The reference package's model of the same tree and loops."""
    loops = [ref.Loop(m.loops.names[k], KINDS[int(m.loops.kind[k])], int(m.loops.body_a[k]) if m.loops.body_a[k] >= 0
                      else None, int(m.loops.body_b[k]) if m.loops.body_b[k] >= 0 else None,
                      (m.loops.R_a[k], m.loops.p_a[k]), (m.loops.R_b[k], m.loops.p_b[k]),
                      axis=(m.loops.axis[k] if KINDS[int(m.loops.kind[k])] in ("revolute", "prismatic") else None))
             for k in range(len(m.loops))]
    return ref.Model(m.parent.copy(), m.jtype.copy(), m.axis.copy(), m.E_tree.copy(), m.r_tree.copy(), m.mass.copy(),
                     m.com.copy(), m.I_com.copy(), axis2=m.axis2.copy(), gravity=m.gravity.copy(), validate=False,
                     loops=loops)


# ------------------------------------------------------------------------------------ main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="scaling to 10^5 bodies, fewer rounds")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--rounds", type=int, default=None, help="rounds of the interleaved timing (best kept)")
    ap.add_argument("--sample", type=float, default=0.02, help="seconds of calls per variant and round (small models)")
    ap.add_argument("--reference", metavar="CHECKOUT", help="also time another checkout's plain call, alternated")
    ap.add_argument("--out", default=DEFAULT_OUT, help="the JSON file (the plot goes beside it)")
    ap.add_argument("--replot", action="store_true", help="only draw the plot again from the JSON at --out")
    a = ap.parse_args(argv)
    if a.replot:
        with open(a.out) as f:
            plot_scaling(json.load(f)["scaling"], os.path.join(os.path.dirname(os.path.abspath(a.out)), "scaling.png"))
        return
    rounds = a.rounds or (7 if a.quick else 15)
    big_rounds = max(3, rounds // 2)
    sizes = (1000, 10000, 100000) if a.quick else (1000, 10000, 100000, 1000000)
    import numba

    info = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "partree": partree.__version__, "rounds": rounds, "quick": a.quick, "argv": sys.argv[1:]}
    try:
        import pinocchio as pin

        info["pinocchio"] = pin.__version__
    except ImportError:
        info["pinocchio"] = None
    print(f"partree {partree.__version__}, numba {numba.__version__}, Pinocchio {info['pinocchio']}; "
          f"{info['cpus']} CPUs; best of {rounds} interleaved rounds ({big_rounds} for the large models)")
    ref = load_reference(a.reference) if a.reference else None
    if ref is not None:
        info["reference"] = a.reference
    results = {"info": info}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)

    def save():
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)

    if "large" in a.parts:
        results["large"] = large_part(100000, 1000, big_rounds, ref)
        save()
    if "pinocchio" in a.parts:
        if info["pinocchio"] is None:
            print("pinocchio not installed: the Pinocchio part is skipped")
        else:
            results["pinocchio"] = pinocchio_part(rounds, a.sample, ref)
            save()
    if "scaling" in a.parts:
        rows = scaling_part(sizes, big_rounds, (100, 1000, 10000), 100000)
        results["scaling"] = rows
        save()
        png = os.path.join(os.path.dirname(os.path.abspath(a.out)), "scaling.png")
        plot_scaling(rows, png)
        print(f"plot: {png}")
    if "breakdown" in a.parts:
        results["breakdown"] = breakdown_part(rounds, a.sample, 100000)
        save()
    save()
    print(f"\nraw results: {a.out}")


if __name__ == "__main__":
    main()
