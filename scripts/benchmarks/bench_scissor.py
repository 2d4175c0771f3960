#!/usr/bin/env python
"""Deployable scissor masts: how the cost of the dynamics grows with the number of units.

Models: the closed planar mast ``scissor:units=U,closed=true,support=slider`` (2U + 1 bodies: a
slider carriage and two bars per unit; U loops: the pins between units and A_0's pin to the
ground, each the plane's pin, a ``point_on_line`` loop of 2 rows; one degree of freedom) and the
same mast as a tree, ``scissor:units=U`` (2U bodies, the pins left out).

Modes (``--mode``; each runs on its own, ``--units`` picks the sizes):

``eval``    one forward dynamics: ``partree.constrained_dynamics`` on the closed mast against
            ``partree.aba`` on the tree mast, interleaved in one process: time per call and per
            unit, closed / tree, the per-unit time of every size over that of 10^3 units
            (linearity); partree's constraint residual max |J qdd - gamma| / max |a| (bodies); the
            set-up (model build) and the peak memory.  ``--breakdown``: where one closed call's
            time goes (the compiled kernel's pieces, ``bench_loops.breakdown``) and the same call
            with the pins declared as 3-D revolute loops (``pins=revolute``: 5 rows, 3 of them
            repeating the tree's) and as spherical loops (3 rows, 1 repeating): the same
            mechanism, the same qdd.
``sparse``  a general sparse Lagrange-multiplier solve of the same closed mast, as a user would
            write it with scipy.sparse (below), against ``constrained_dynamics``: both results
            compared, the assembly and the solve timed apart, interleaved with partree's call.
``engine``  the parallel engine against the serial ``constrained_dynamics`` in one process
            (``SerialEngine`` with the 2-rank partition, ``DaskEngine`` on a
            ``distributed.LocalCluster(n_workers=2, threads_per_worker=1)``); under
            ``mpiexec -n 2`` the ``MPIEngine`` (collective) against ``constrained_dynamics`` on
            rank 0 in the same job.  Time per evaluation, speed-up, max |qdd - qdd_serial| /
            max |qdd_serial|; the parts' own times in one process (the ideal 2-rank speed-up).
``dense``   the accuracy the problem in joint coordinates allows in double precision (small
            masts, up to ~10^3 units): the same closed mast as one dense KKT system [[M, J^T],
            [J, 0]] (M from ``partree.crba``, J and gamma from ``partree.loop_constraints``)
            solved by LU (numpy), and ``constrained_dynamics``' qdd refined by one step of that
            dense system (the residuals tau - RNEA(q, qd, qdd, loop wrenches) and gamma - J qdd),
            and by ``--refine-steps`` steps on residuals computed in O(N) (the loops' rows on
            the bodies' accelerations in place of J qdd, ``loop_row_residual``; the corrections
            by the same LU), each against the one-DOF reference.
``steps``   ``partree.simulate`` (RK4, dt = 1e-3, ``correct='full'``, ``--correct``): the time of each step
            from the simulation loop's step hook, steps per second per backend (serial; Dask
            2 workers; ``mpiexec -n 2``: MPI 2 ranks and serial in the same job).

    python scripts/benchmarks/bench_scissor.py --mode eval --units 100 1000 10000 100000
    python scripts/benchmarks/bench_scissor.py --mode eval --units 10000 --breakdown
    python scripts/benchmarks/bench_scissor.py --mode sparse --units 1000 10000 --json sparse.json
    python scripts/benchmarks/bench_scissor.py --mode dense --units 10 30 100 300 1000
    python scripts/benchmarks/bench_scissor.py --mode engine --units 1000 10000 100000 --backends serial dask
    mpiexec -n 2 python scripts/benchmarks/bench_scissor.py --mode engine --units 1000 10000 100000
    python scripts/benchmarks/bench_scissor.py --mode steps --units 100 1000 10000
    mpiexec -n 2 python scripts/benchmarks/bench_scissor.py --mode steps --units 100 1000 10000
    python scripts/benchmarks/bench_scissor.py --plot scissor.png --from eval.json sparse.json engine*.json

The state (every mode but ``steps``): q the neutral configuration (every bar at 30 deg, every
loop closed), qd the mechanism's velocity with the scissor angle opening at 0.5 rad/s (every
joint and pin held at velocity level: the sparse solve's rows C below, with B_0's joint rate
fixed; it gives the rates +-2 omega of every bar joint, omega of B_0's, omega l sin(30 deg) of
the carriage), tau the drive ``ScissorDrive(model)(t=0.05, q, qd)``.  The tree mast: its
neutral q, a random qd (fixed seed), tau = 0 (ABA's cost does not depend on the values).

The sparse Lagrange-multiplier solve (maximal coordinates, world frame).  Unknowns: every
body's angular acceleration alpha_i and the acceleration a_i of its centre of mass (6 per
body).  M = blockdiag(R I_com R^T, m 1); Newton-Euler right-hand side -w x (I w) and m g plus the
joint forces tau (a revolute joint's torque +u tau on the child and -u tau on the parent, the
slider's force u tau at the joint).  Constraint rows C x = gamma, forces C^T lambda:

* every tree joint (the child's frame origin P, the axis u): revolute, the point P of child and
  parent with equal accelerations (3 rows: a_i + alpha_i x r_i + w_i x (w_i x r_i) = the same
  for the parent) and no relative angular acceleration across the axis (2 rows: n . (alpha_i -
  alpha_p) = -(w_p x n) . (w_i - w_p), n perpendicular to u, fixed in the parent); the
  carriage's slider (on the ground): no rotation (3 rows) and no motion across the rail (2).
* every loop pin: the pin point of both bodies with equal accelerations, only across the pin axis
  (2 rows, the rows of partree's default ``point_on_line`` pins).  The mast is planar but declared
  in 3-D: the tree's revolute joints about y already hold every bar in the x-z plane, so a pin's
  3 out-of-plane rows (the point along y, the rotations about x and z) repeat rows of the tree
  joints; with them C loses 3 rows of rank per pin and the KKT matrix is singular (checked by a
  dense SVD on a small mast, ``--rank-check``).  The solve keeps the 2 in-plane rows of every
  pin, the choice a user of a planar mechanism makes.

KKT: [[M, -C^T], [C, 0]] [x; lambda] = [b; gamma], assembled in COO and converted to CSC with
scipy.sparse, solved by ``scipy.sparse.linalg.spsolve`` (SuperLU, COLAMD ordering; ``--solver
splu``: factor then solve).  Joint accelerations from the solution: qdd = u . (alpha_i - alpha_p)
(revolute), u . a_P (the slider).  Assembly starts from the bodies' world poses and velocities
(a maximal-coordinate code's state): the kinematics that give them from (q, qd) are timed but not
charged to it.

Accuracy.  Both solutions are compared with each other and with a reference: the mast's
one-degree-of-freedom Lagrange equation in extended precision (np.longdouble), which holds no
internal force and is well conditioned at any size (``lagrange_reference``).  Residuals of each
solution, through partree's own pieces in O(N): the loops' rows max |J qdd - gamma| / max |a|
(a: the bodies' accelerations), and the dynamics max |RNEA(q, qd, qdd, loop forces) - tau| /
max |RNEA(q, qd, 0)| (the sparse solution's pin forces from its multipliers).

Timing (every mode): best of ``--repeat`` interleaved rounds (each round runs every variant in
turn, alternating the order; a variant runs for at least ``--sample`` seconds per round), after
one warm-up call.  Only ratios of one run mean anything on a shared machine.  Memory: the peak
resident set (VmHWM, reset before each size where Linux allows) of this process, of the Dask
workers and of every MPI rank.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import scipy.sparse.linalg as spla  # noqa: E402

import partree  # noqa: E402
from partree import joints as J  # noqa: E402
from partree.algorithms.constrained_dynamics import loop_wrenches  # noqa: E402
from partree.algorithms.kinematics import forward_kinematics  # noqa: E402
from partree.algorithms.loop_constraints import (bias_accelerations, end_rows, loop_rows, loop_terms,  # noqa: E402
                                                 state_kinematics)
from partree.loops import KINDS  # noqa: E402
from partree.errors import PartreeInputError  # noqa: E402
from partree.models.scissor import ScissorDrive  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_loops import timed  # noqa: E402  (the house timing: interleaved rounds, best kept)

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("eval", "sparse", "dense", "engine", "steps")
DEFAULT_UNITS = {"eval": [100, 1000, 10000, 100000], "sparse": [1000, 10000], "dense": [10, 30, 100, 300, 1000], "engine": [1000, 10000, 100000],
                 "steps": [100, 1000, 10000]}
OMEGA = 0.5          # rad/s, the scissor angle's rate in the benchmark state
T_DRIVE = 0.05       # s, the drive's time in the benchmark state (half its ramp)


# ------------------------------------------------------------------------------------ utilities
def log(*a):
    print(*a, flush=True)


def vmhwm_mb():
    """Peak resident set of this process, MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def reset_peak():
    """Reset VmHWM to the current resident set (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def commit():
    """The commit measured: $PARTREE_COMMIT (a clean export of a commit, on PYTHONPATH), else the
    checkout's HEAD, marked '+dirty' where partree/ has changes not committed."""
    if os.environ.get("PARTREE_COMMIT"):
        return os.environ["PARTREE_COMMIT"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(partree.__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "partree"], cwd=root, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return head + ("+dirty" if dirty else "") if head else None
    except Exception:
        return None


def nan_if_none(x):
    return float("nan") if x is None else x


def rel(x, ref):
    return float(np.abs(np.asarray(x) - ref).max() / max(np.abs(ref).max(), 1e-300))


# ------------------------------------------------------------------------------------ models and state
def closed_mast(U):
    return partree.resolve_model(f"scissor:units={U},closed=true,support=slider")


def tree_mast(U):
    return partree.resolve_model(f"scissor:units={U}")


def mechanism_velocity(model, q, omega=OMEGA):
    """qd with every joint and pin satisfied at velocity level and B_0's joint (the scissor angle)
    at ``omega``: the bodies' twists from the sparse solve's constraint rows C (the same rows at
    velocity level) and one row fixing that joint, a square sparse system; the joint rates from
    the twists.  (``partree.loop_constraints``' J holds every loop's columns down to the root,
    O(U^2) entries on this mast, so it is not used.)"""
    sl = SparseLagrange(model)
    st = MaximalState(model, q, np.zeros(model.nv))
    K, _ = sl.assemble(st, np.zeros(model.nv))
    C = K[sl.nb:, :sl.nb]
    j = int(model.scissor.bar("B", 0))
    pj = int(model.parent[j])
    if model.jtype[j] != J.REVOLUTE:
        raise ValueError("B_0's joint is not revolute")
    u = st.R[j] @ model.axis[j]
    cols, vals = [6 * j, 6 * j + 1, 6 * j + 2], list(u)
    if pj >= 0:
        cols += [6 * pj, 6 * pj + 1, 6 * pj + 2]
        vals += list(-u)
    row = sp.csr_matrix((vals, ([0] * len(cols), cols)), shape=(1, sl.nb))
    rhs = np.zeros(C.shape[0] + 1)
    rhs[-1] = omega
    V = spla.spsolve(sp.vstack([C, row]).tocsc(), rhs)
    return sl.joint_accelerations(st, np.concatenate([V, np.zeros(sl.nrows)]))


def closed_state(model):
    q = model.neutral()
    qd = mechanism_velocity(model, q)
    tau = ScissorDrive(model)(T_DRIVE, q, qd)
    return q, qd, tau


def tree_state(model):
    rng = np.random.default_rng(0)
    return model.neutral(), 0.5 * rng.normal(size=model.nv), np.zeros(model.nv)


def loop_row_residual(model, q, qd, qdd):
    """(gamma - J qdd over the loops' rows, the bodies' accelerations a (n, 6), the rows' G), in
    O(N): the bodies' accelerations (velocity products and S qdd carried outward) through the
    loops' rows G (the pieces of ``partree.algorithms.loop_constraints``; its J itself holds
    O(U^2) entries on this mast)."""
    q, qd, qdd = (np.asarray(x, dtype=float) for x in (q, qd, qdd))
    E, r, v, c, IA, pA, S, Rw, pw = state_kinematics(model, q, qd)
    terms = loop_terms(model.loops, Rw, pw, v)
    cq = c.copy()
    for d in range(int(model.nv_j.max())):
        has = np.flatnonzero(model.nv_j > d)
        cq[has] += S[model.idx_v[has] + d] * qdd[model.idx_v[has] + d][:, None]
    a = np.empty((model.n, 6))
    bias_accelerations(model.parent, E, r, cq, a)
    return terms.gamma - end_rows(model.loops, terms.G, a), a, terms.G


def constraint_residual(model, q, qd, qdd):
    """max |J qdd - gamma| over the loops' rows / max |a| over the bodies (the linear part of
    their spatial accelerations, without gravity), in O(N) (``loop_row_residual``)."""
    res, a, _ = loop_row_residual(model, q, qd, qdd)
    return float(np.abs(res).max() / np.abs(a[:, 3:]).max())


def velocity_residual(model, q, qd):
    """max |J qd| over the loops' rows / max |v| over the bodies (linear part), in O(N)."""
    kin = forward_kinematics(model, q, qd)
    return float(np.abs(loop_rows(model, q, qd).velocity).max() / np.abs(kin.v[:, 3:]).max())


# ------------------------------------------------------------------------------------ the one-DOF reference
def lagrange_reference(model, q, qd, tau):
    """qdd of the closed planar mast on its slider from its one-degree-of-freedom Lagrange equation,
    in extended precision (np.longdouble): the reference of every comparison.

    theta (B_0's angle to the horizontal) is the coordinate.  Every bar's centre of mass lies at
    the middle of its unit, (x_f + l cos(theta) / 2, (k + 1/2) l sin(theta)) with x_f the fixed
    pin, and every bar turns at +-theta'; the carriage slides at l sin(theta) theta'.  So
    T = m(theta) theta'^2 / 2 with m(theta) = sum over bars of m_b ((l sin/2)^2 + ((k + 1/2) l
    cos)^2) + I_yy + m_c (l sin)^2, V = sum m_b g (k + 1/2) l sin, and
    m theta'' + m'(theta) theta'^2 / 2 + dV/dtheta = n . tau, n = dq/dtheta (+-2 for every bar
    joint, 1 for B_0's, l sin(theta) for the carriage: ``mechanism_velocity`` at theta' = 1,
    rounded).  qdd = n theta'' + (dn/dtheta) theta'^2 (only the carriage's n varies).  Sums of
    positive terms and a ratio: well conditioned at any size, so an error above rounding in a
    solver's qdd is the solver's."""
    ld = np.longdouble
    lay = model.scissor
    if lay.sides != 1 or not lay.closed or lay.support != "slider" or lay.hubs:
        raise ValueError("the one-DOF reference is for the planar mast on a slider, without hubs")
    U, l = lay.units, ld(lay.length)
    jb = int(model.idx_v[lay.bar("B", 0)])
    jc = int(model.idx_v[lay.carriage])
    n = mechanism_velocity(model, q, 1.0)
    th = ld(lay.angle) + ld(q[model.idx_q[lay.bar("B", 0)]])
    S, C = np.sin(th), np.cos(th)
    rev = np.flatnonzero(model.jtype == J.REVOLUTE)
    nr = np.round(n[model.idx_v[rev]])
    if np.abs(n[model.idx_v[rev]] - nr).max() > 1e-6 or abs(n[jc] - float(l * S)) > 1e-6:
        raise ValueError("the mechanism's joint rates are not +-2, 1 and l sin(theta): not this mast")
    nn = np.zeros(model.nv, ld)
    nn[model.idx_v[rev]] = nr
    nn[jc] = l * S
    bars = np.concatenate([np.atleast_1d(lay.bar("A", np.arange(U))), np.atleast_1d(lay.bar("B", np.arange(U)))])
    k = np.concatenate([np.arange(U), np.arange(U)]).astype(ld) + ld(0.5)
    mb = model.mass[bars].astype(ld)
    Iyy = model.I_com[bars, 1, 1].astype(ld)
    mc = ld(model.mass[lay.carriage])
    g = -ld(model.gravity[2])
    mass = np.sum(mb * ((l * S / 2) ** 2 + (k * l * C) ** 2)) + np.sum(Iyy) + mc * (l * S) ** 2
    dmass = np.sum(mb * (l * l / 2 * S * C - 2 * k * k * l * l * C * S)) + mc * 2 * l * l * S * C
    dV = np.sum(mb * g * k * l * C)
    thd = ld(qd[jb])
    Q = np.sum(nn * np.asarray(tau, dtype=ld))
    thdd = (Q - dmass * thd * thd / 2 - dV) / mass
    qdd = nn * thdd
    qdd[jc] += l * C * thd * thd
    return qdd


# ------------------------------------------------------------------------------------ the sparse Lagrange solve
def _skew_rows(r, d):
    """Per row: the coefficients c with c . alpha = d . (alpha x r) ... = (r x d) . alpha."""
    return np.cross(r, d)


def _perp(u):
    """Two unit vectors perpendicular to each unit vector u (K, 3) and to each other."""
    e = np.zeros_like(u)
    e[np.arange(u.shape[0]), np.argmin(np.abs(u), axis=1)] = 1.0
    n1 = np.cross(u, e)
    n1 /= np.linalg.norm(n1, axis=1, keepdims=True)
    return n1, np.cross(u, n1)


class MaximalState:
    """The bodies' world poses and velocities (what a maximal-coordinate code holds)."""

    def __init__(self, model, q, qd):
        kin = forward_kinematics(model, q, qd)
        R, p = kin.R, kin.p
        w_b, v_b = kin.v[:, :3], kin.v[:, 3:]
        self.R, self.p = R, p
        self.w = np.einsum("nij,nj->ni", R, w_b)
        self.c = p + np.einsum("nij,nj->ni", R, model.com)
        self.vc = np.einsum("nij,nj->ni", R, v_b + np.cross(w_b, model.com))


class SparseLagrange:
    """[[M, -C^T], [C, 0]] [x; lambda] = [b; gamma] in body coordinates (see the module docstring)."""

    def __init__(self, model, solver="spsolve"):
        lp = model.loops
        if not np.all(np.isin(lp.kind, (KINDS.index("revolute"), KINDS.index("point_on_line")))):
            raise ValueError("this sparse solve knows pins only (revolute or point_on_line loops: 2 in-plane rows)")
        self.model, self.solver = model, solver
        jt, par = model.jtype, model.parent
        self.rev = np.flatnonzero(jt == J.REVOLUTE)
        self.pri = np.flatnonzero(jt == J.PRISMATIC)
        self.fix = np.flatnonzero(jt == J.FIXED)
        if np.any(par[self.pri] >= 0):
            raise ValueError("this sparse solve knows sliders on the ground only")
        if self.rev.size + self.pri.size + self.fix.size != model.n:
            raise ValueError("this sparse solve knows revolute, prismatic and fixed joints only")
        self.nb = 6 * model.n
        self.nrows = 5 * (self.rev.size + self.pri.size) + 6 * self.fix.size + 2 * len(lp)

    # -- assembly, from the bodies' world poses and velocities
    def assemble(self, st, tau):
        m, lp = self.model, self.model.loops
        n, par = m.n, m.parent
        R, p, w, c = st.R, st.p, st.w, st.c
        Iw = np.einsum("nij,njk,nlk->nil", R, m.I_com, R)
        # M: the rotational 3x3 blocks and the masses
        b6 = 6 * np.arange(n)
        ii, jj = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
        rows = [(b6[:, None] + ii.ravel()).ravel(), np.repeat(b6, 3) + np.tile([3, 4, 5], n)]
        cols = [(b6[:, None] + jj.ravel()).ravel(), rows[1]]
        vals = [Iw.reshape(n, 9).ravel(), np.repeat(m.mass, 3)]
        # right-hand side of Newton-Euler: gyroscopic, gravity, joint forces
        dt = st.p.dtype
        b = np.zeros((n, 6), dt)
        b[:, :3] = -np.cross(w, np.einsum("nij,nj->ni", Iw, w))
        b[:, 3:] = m.mass.astype(dt)[:, None] * m.gravity.astype(dt)[None, :]
        iv = m.idx_v
        u_rev = np.einsum("nij,nj->ni", R[self.rev], m.axis[self.rev])
        t = u_rev * tau[iv[self.rev]][:, None]
        np.add.at(b, (self.rev, slice(0, 3)), t)
        has_p = par[self.rev] >= 0
        np.add.at(b, (par[self.rev][has_p], slice(0, 3)), -t[has_p])
        u_pri = np.einsum("nij,nj->ni", R[self.pri], m.axis[self.pri])
        f = u_pri * tau[iv[self.pri]][:, None]
        b[self.pri, 3:] += f
        b[self.pri, :3] += np.cross(p[self.pri] - c[self.pri], f)
        # constraint rows: (row, body, coefficients on alpha, on a) and gamma
        C_r, C_b, C_al, C_a, gam = [], [], [], [], []
        row = [0]

        def new_rows(k):
            r0 = row[0]
            row[0] += k
            return r0

        def point_rows(r, d, body, P, sign):
            """d . a_P(body) with sign, P world points; the body's share of gamma (moved to the rhs)."""
            ok = body >= 0
            bb = np.maximum(body, 0)
            rr = P - c[bb]
            C_r.append(r[ok])
            C_b.append(body[ok])
            C_al.append(sign * _skew_rows(rr, d)[ok])
            C_a.append(sign * d[ok])
            # gamma gets - sign * d . (w x (w x r))
            g = -sign * np.einsum("ni,ni->n", d, np.cross(w[bb], np.cross(w[bb], rr)))
            return np.where(ok, g, 0.0)

        def orient_rows(r, d, body, sign):
            ok = body >= 0
            C_r.append(r[ok])
            C_b.append(body[ok])
            C_al.append(sign * d[ok])
            C_a.append(np.zeros((int(ok.sum()), 3)))

        E3 = np.eye(3)
        # revolute tree joints: 3 point rows, 2 across the axis
        K = self.rev.size
        if K:
            i, pp = self.rev, par[self.rev]
            r0 = new_rows(5 * K)
            base = r0 + 5 * np.arange(K)
            P = p[i]
            for k in range(3):
                d = np.tile(E3[k], (K, 1))
                g = point_rows(base + k, d, i, P, 1.0) + point_rows(base + k, d, pp, P, -1.0)
                gam.append((base + k, g))
            n1, n2 = _perp(u_rev)
            wp = np.where((pp >= 0)[:, None], w[np.maximum(pp, 0)], 0.0)
            for k, nk in enumerate((n1, n2)):
                orient_rows(base + 3 + k, nk, i, 1.0)
                orient_rows(base + 3 + k, nk, pp, -1.0)
                gam.append((base + 3 + k, -np.einsum("ni,ni->n", np.cross(wp, nk), w[i] - wp)))
        # sliders on the ground: no rotation (3), no motion across the rail (2)
        K = self.pri.size
        if K:
            i = self.pri
            r0 = new_rows(5 * K)
            base = r0 + 5 * np.arange(K)
            for k in range(3):
                orient_rows(base + k, np.tile(E3[k], (K, 1)), i, 1.0)
                gam.append((base + k, np.zeros(K)))
            n1, n2 = _perp(u_pri)
            for k, nk in enumerate((n1, n2)):
                gam.append((base + 3 + k, point_rows(base + 3 + k, nk, i, p[i], 1.0)))
        # welds: 3 point rows, 3 orientation rows
        K = self.fix.size
        if K:
            i, pp = self.fix, par[self.fix]
            r0 = new_rows(6 * K)
            base = r0 + 6 * np.arange(K)
            for k in range(3):
                d = np.tile(E3[k], (K, 1))
                gam.append((base + k, point_rows(base + k, d, i, p[i], 1.0) + point_rows(base + k, d, pp, p[i], -1.0)))
                orient_rows(base + 3 + k, d, i, 1.0)
                orient_rows(base + 3 + k, d, pp, -1.0)
                gam.append((base + 3 + k, np.zeros(K)))
        # loop pins: the pin point of both bodies, across the pin axis (the in-plane rows)
        K = len(lp)
        if K:
            a, bo = lp.body_a, lp.body_b
            P = p[a] + np.einsum("nij,nj->ni", R[a], lp.p_a)
            u = np.einsum("nij,njk,nk->ni", R[a], lp.R_a, lp.axis)
            n1, n2 = _perp(u)
            r0 = new_rows(2 * K)
            base = r0 + 2 * np.arange(K)
            for k, nk in enumerate((n1, n2)):
                gam.append((base + k, point_rows(base + k, nk, a, P, 1.0) + point_rows(base + k, nk, bo, P, -1.0)))
        assert row[0] == self.nrows
        cr = np.concatenate(C_r)
        cb = np.concatenate(C_b)
        coef = np.concatenate([np.concatenate(C_al), np.concatenate(C_a)], axis=1)        # (K, 6)
        ccol = (6 * cb)[:, None] + np.arange(6)[None, :]
        crow = np.repeat(cr, 6)
        ccol, cval = ccol.ravel(), coef.ravel()
        nz = cval != 0.0
        crow, ccol, cval = crow[nz], ccol[nz], cval[nz]
        nb = self.nb
        rows += [ccol, nb + crow]                       # -C^T (upper right), C (lower left)
        cols += [nb + crow, ccol]
        vals += [-cval, cval]
        N = nb + self.nrows
        Kkt = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(N, N)).tocsc()
        rhs = np.empty(N, dt)
        rhs[:nb] = b.ravel()
        g = np.zeros(self.nrows, dt)
        for r, val in gam:
            np.add.at(g, r, val)
        rhs[nb:] = g
        return Kkt, rhs

    def solve(self, Kkt, rhs):
        if self.solver == "splu":
            return spla.splu(Kkt).solve(rhs)
        return spla.spsolve(Kkt, rhs)

    def joint_accelerations(self, st, z):
        """qdd from the solution z = [x; lambda]."""
        m = self.model
        x = z[:self.nb].reshape(m.n, 6)
        al, ac = x[:, :3], x[:, 3:]
        qdd = np.zeros(m.nv, z.dtype)
        par, iv = m.parent, m.idx_v
        i = self.rev
        u = np.einsum("nij,nj->ni", st.R[i], m.axis[i])
        alp = np.where((par[i] >= 0)[:, None], al[np.maximum(par[i], 0)], 0.0)
        qdd[iv[i]] = np.einsum("ni,ni->n", u, al[i] - alp)
        i = self.pri
        if i.size:
            u = np.einsum("nij,nj->ni", st.R[i], m.axis[i])
            rr = st.p[i] - st.c[i]
            aP = ac[i] + np.cross(al[i], rr) + np.cross(st.w[i], np.cross(st.w[i], rr))
            qdd[iv[i]] = np.einsum("ni,ni->n", u, aP)
        return qdd

    def pin_wrenches(self, st, z):
        """The loop pins' forces on the bodies, (n, 6) [n; f] in body coordinates about the body
        origin (partree's f_ext), from the pins' multipliers."""
        m, lp = self.model, self.model.loops
        lam = z[self.nb + self.nrows - 2 * len(lp):].reshape(-1, 2)
        a, bo = lp.body_a, lp.body_b
        P = st.p[a] + np.einsum("nij,nj->ni", st.R[a], lp.p_a)
        u = np.einsum("nij,njk,nk->ni", st.R[a], lp.R_a, lp.axis)
        n1, n2 = _perp(u)
        f = lam[:, :1] * n1 + lam[:, 1:] * n2            # world force on body a at P; -f on body b
        W = np.zeros((m.n, 6))
        for body, s in ((a, 1.0), (bo, -1.0)):
            ok = body >= 0
            bb = body[ok]
            Rt = np.transpose(st.R[bb], (0, 2, 1))
            fw = s * f[ok]
            np.add.at(W, (bb, slice(0, 3)), np.einsum("nij,nj->ni", Rt, np.cross(P[ok] - st.p[bb], fw)))
            np.add.at(W, (bb, slice(3, 6)), np.einsum("nij,nj->ni", Rt, fw))
        return W


def rank_check(U=10):
    """Dense ranks of C on a small mast: with every pin's 5 rows, and with the 2 in-plane rows."""
    m = closed_mast(U)
    q, qd, tau = closed_state(m)
    st = MaximalState(m, q, qd)
    sl = SparseLagrange(m)
    Kkt, _ = sl.assemble(st, tau)
    C = Kkt[sl.nb:, :sl.nb].toarray()
    r_in = np.linalg.matrix_rank(C)
    # the same with the 3 out-of-plane rows of every pin added (the point along the pin axis and
    # the rotations across it)
    lp = m.loops
    extra = []
    a, bo = lp.body_a, lp.body_b
    for k in range(len(lp)):
        u = st.R[a[k]] @ lp.R_a[k] @ lp.axis[k]
        n1, n2 = _perp(u[None])
        P = st.p[a[k]] + st.R[a[k]] @ lp.p_a[k]
        row = np.zeros(sl.nb)
        for body, s in ((a[k], 1.0), (bo[k], -1.0)):
            if body >= 0:
                row[6 * body:6 * body + 3] += s * np.cross(P - st.c[body], u)
                row[6 * body + 3:6 * body + 6] += s * u
        extra.append(row)
        for nk in (n1[0], n2[0]):
            row = np.zeros(sl.nb)
            for body, s in ((a[k], 1.0), (bo[k], -1.0)):
                if body >= 0:
                    row[6 * body:6 * body + 3] += s * nk
            extra.append(row)
    Cf = np.vstack([C, np.array(extra)])
    return {"units": U, "rows_in_plane": int(C.shape[0]), "rank_in_plane": int(r_in),
            "rows_all_5": int(Cf.shape[0]), "rank_all_5": int(np.linalg.matrix_rank(Cf)), "unknowns": int(sl.nb)}


# ------------------------------------------------------------------------------------ mode: eval
def mode_eval(a):
    rows = []
    for U in a.units:
        reset_peak()
        t0 = time.perf_counter()
        mc = closed_mast(U)
        t_closed = time.perf_counter() - t0
        t0 = time.perf_counter()
        mt = tree_mast(U)
        t_tree = time.perf_counter() - t0
        q, qd, tau = closed_state(mc)
        qt, qdt, taut = tree_state(mt)
        t0 = time.perf_counter()
        res = partree.constrained_dynamics(mc, q, qd, tau)          # first call: the loops' set-up
        t_first = time.perf_counter() - t0
        t = timed({"closed": lambda: partree.constrained_dynamics(mc, q, qd, tau),
                   "tree": lambda: partree.aba(mt, qt, qdt, taut)}, a.repeat, a.sample)
        r = {"units": U, "bodies_closed": mc.n, "bodies_tree": mt.n, "loops": len(mc.loops), "nv": mc.nv,
             "closed_ms": 1e3 * t["closed"], "tree_ms": 1e3 * t["tree"],
             "closed_ns_per_unit": 1e9 * t["closed"] / U, "tree_ns_per_unit": 1e9 * t["tree"] / U,
             "ratio": t["closed"] / t["tree"], "rank": int(res.rank),
             "constraint_residual": constraint_residual(mc, q, qd, res.qdd),
             "build_closed_s": t_closed, "build_tree_s": t_tree, "first_call_s": t_first,
             "model_bytes_per_body": mc.nbytes / mc.n, "peak_rss_mb": vmhwm_mb()}
        rows.append(r)
        log(f"eval U={U:>7d}: closed {r['closed_ms']:10.3f} ms ({r['closed_ns_per_unit']:8.0f} ns/unit)  "
            f"tree {r['tree_ms']:9.3f} ms ({r['tree_ns_per_unit']:7.0f} ns/unit)  closed/tree {r['ratio']:5.2f}  "
            f"|J qdd - gamma|/|a| {r['constraint_residual']:.1e}  peak {r['peak_rss_mb']:.0f} MB", )
    out = {"rows": rows}
    ref = [r for r in rows if r["units"] == 1000]
    if ref:
        for r in rows:
            r["closed_per_unit_vs_1e3"] = r["closed_ns_per_unit"] / ref[0]["closed_ns_per_unit"]
            r["tree_per_unit_vs_1e3"] = r["tree_ns_per_unit"] / ref[0]["tree_ns_per_unit"]
        log("per-unit time over 10^3 units': " + ", ".join(
            f"U={r['units']}: closed {r['closed_per_unit_vs_1e3']:.2f}, tree {r['tree_per_unit_vs_1e3']:.2f}"
            for r in rows))
    if a.breakdown:
        out["breakdown"] = breakdown(a)
    return out


def breakdown(a):
    """Where one closed call's time goes, at the largest size (bench_loops' kernel pieces), and
    the same call with the pins declared as revolute loops (5 rows each instead of 2) and as
    spherical loops (3 rows)."""
    sys.path.insert(0, HERE)
    from bench_loops import breakdown as pieces
    U = max(a.units)
    mc = closed_mast(U)
    q, qd, tau = closed_state(mc)
    t = pieces(mc, q, qd, tau, max(3, a.repeat), a.sample, 1)
    lb = partree.algorithms.constrained_dynamics.loop_buffers(mc)
    info = {"units": U, "loop_rows": int(lb.R), "rank": int(partree.constrained_dynamics(mc, q, qd, tau).rank),
            "times_ms": {k: 1e3 * v for k, v in t.items()}}
    log(f"== one call of constrained_dynamics on the closed mast of {U} units: where the time goes (ms) ==")
    for k, v in t.items():
        log(f"  {k:62s} {1e3 * v:10.3f}")
    log(f"  loop rows {info['loop_rows']}, rank {info['rank']}")
    # the same pins as revolute loops (pins=revolute: 5 rows, 3 repeating the tree's) and as
    # spherical loops (3 rows, 1 repeating); in a planar mast the same mechanism, so the same qdd
    from partree.loops import LoopSet
    mr = partree.resolve_model(f"scissor:units={U},closed=true,support=slider,pins=revolute")
    lp = mr.loops
    L = len(lp)
    ms = mr.with_loops(LoopSet(list(lp.names), np.full(L, KINDS.index("spherical"), dtype=np.int8), lp.body_a,
                               lp.body_b, lp.R_a, lp.p_a, lp.R_b, lp.p_b, lp.axis, lp.axis2, lp.length), replace=True)
    mt = tree_mast(U)
    qt, qdt, taut = tree_state(mt)
    x = {k: partree.constrained_dynamics(m, q, qd, tau).qdd for k, m in (("line", mc), ("revolute", mr),
                                                                          ("spherical", ms))}
    t = timed({"line": lambda: partree.constrained_dynamics(mc, q, qd, tau),
               "revolute": lambda: partree.constrained_dynamics(mr, q, qd, tau),
               "spherical": lambda: partree.constrained_dynamics(ms, q, qd, tau),
               "tree": lambda: partree.aba(mt, qt, qdt, taut)}, max(3, a.repeat), a.sample)
    info["pin_kinds"] = {"ms_point_on_line": 1e3 * t["line"], "ms_revolute": 1e3 * t["revolute"],
                         "ms_spherical": 1e3 * t["spherical"], "ms_tree_aba": 1e3 * t["tree"],
                         "qdd_rel_diff_revolute": rel(x["revolute"], x["line"]),
                         "qdd_rel_diff_spherical": rel(x["spherical"], x["line"]),
                         "loop_rows": {"point_on_line": 2 * L, "revolute": 5 * L, "spherical": 3 * L}}
    for k, nm, rows in (("line", "point_on_line", 2), ("revolute", "revolute", 5), ("spherical", "spherical", 3)):
        diff = "" if k == "line" else f"; qdd differs by {rel(x[k], x['line']):.1e}"
        log(f"  the pins as {nm} loops ({rows} rows each, {rows * L} rows): {1e3 * t[k]:9.3f} ms, "
            f"{t[k] / t['tree']:.2f}x ABA on the tree mast ({1e3 * t['tree']:.3f} ms){diff}")
    return info


# ------------------------------------------------------------------------------------ mode: sparse
def mode_sparse(a):
    rows = []
    out = {"solver": a.solver, "scipy": scipy.__version__}
    if a.rank_check:
        rc = rank_check()
        out["rank_check"] = rc
        log(f"rank check, {rc['units']} units: C with the pins' in-plane rows {rc['rows_in_plane']} rows, rank "
            f"{rc['rank_in_plane']}; with all 5 rows of every pin {rc['rows_all_5']} rows, rank {rc['rank_all_5']}")
    timed_units = set(a.units)
    for U in sorted(set(a.units) | set(a.accuracy_units)):
        reset_peak()
        mc = closed_mast(U)
        q, qd, tau = closed_state(mc)
        sl = SparseLagrange(mc, a.solver)
        res = partree.constrained_dynamics(mc, q, qd, tau)
        st = MaximalState(mc, q, qd)
        Kkt, rhs = sl.assemble(st, tau)
        z = sl.solve(Kkt, rhs)
        qdd_s = sl.joint_accelerations(st, z)
        # accuracy: the two solutions, and the residuals of each through partree
        W = sl.pin_wrenches(st, z)
        h = partree.rnea(mc, q, qd, np.zeros(mc.nv))
        r = {"units": U, "bodies": mc.n, "nv": mc.nv, "unknowns": int(Kkt.shape[0]), "constraint_rows": sl.nrows,
             "kkt_nnz": int(Kkt.nnz), "qdd_rel_diff": rel(qdd_s, res.qdd),
             "residual_constraints_partree": constraint_residual(mc, q, qd, res.qdd),
             "residual_constraints_sparse": constraint_residual(mc, q, qd, qdd_s),
             "residual_dynamics_partree": float(np.abs(partree.rnea(mc, q, qd, res.qdd, f_ext=res.loop_wrench) - tau)
                                                .max() / np.abs(h).max()),
             "residual_dynamics_sparse": float(np.abs(partree.rnea(mc, q, qd, qdd_s, f_ext=W) - tau).max()
                                               / np.abs(h).max()),
             "residual_kkt_sparse": float(np.abs(Kkt @ z - rhs).max() / np.abs(rhs).max())}
        msg = (f"sparse U={U:>7d}: max|qdd_sparse - qdd_partree|/max|qdd| {r['qdd_rel_diff']:.1e}")
        ref = lagrange_reference(mc, q, qd, tau)
        r.update(err_partree=rel(res.qdd, ref), err_sparse=rel(qdd_s, ref))
        msg += (f"; against the one-DOF reference: partree {r['err_partree']:.1e}, scipy {r['err_sparse']:.1e}")
        msg += (f"; |J qdd - gamma|/|a| partree {r['residual_constraints_partree']:.1e}, scipy "
                f"{r['residual_constraints_sparse']:.1e}; dynamics residual partree "
                f"{r['residual_dynamics_partree']:.1e},"
                f" scipy {r['residual_dynamics_sparse']:.1e}")
        log(msg)
        if U in timed_units:
            lu = spla.splu(Kkt)
            r["lu_nnz"] = int(lu.L.nnz + lu.U.nnz)
            del lu
            t = timed({"partree": lambda: partree.constrained_dynamics(mc, q, qd, tau),
                       "kinematics": lambda: MaximalState(mc, q, qd),
                       "assembly": lambda: sl.assemble(st, tau),
                       "solve": lambda: sl.solve(Kkt, rhs),
                       "recover": lambda: sl.joint_accelerations(st, z)}, a.repeat, a.sample)
            r.update({"partree_ms": 1e3 * t["partree"], "kinematics_ms": 1e3 * t["kinematics"],
                      "assembly_ms": 1e3 * t["assembly"], "solve_ms": 1e3 * t["solve"],
                      "recover_ms": 1e3 * t["recover"], "peak_rss_mb": vmhwm_mb()})
            r["speedup_assembly_solve"] = (t["assembly"] + t["solve"] + t["recover"]) / t["partree"]
            r["speedup_solve"] = t["solve"] / t["partree"]
            log(f"sparse U={U:>7d}: partree {r['partree_ms']:9.3f} ms | scipy assembly {r['assembly_ms']:9.3f} ms, "
                f"solve {r['solve_ms']:9.3f} ms, recover {r['recover_ms']:.3f} ms (kinematics "
                f"{r['kinematics_ms']:.3f} ms, not charged) | partree faster by {r['speedup_assembly_solve']:.1f}x "
                f"(assembly + solve), {r['speedup_solve']:.1f}x (solve) | KKT {r['unknowns']} unknowns, nnz "
                f"{r['kkt_nnz']}, L+U nnz {r['lu_nnz']} | peak {r['peak_rss_mb']:.0f} MB")
        rows.append(r)
    out["rows"] = rows
    return out


# ------------------------------------------------------------------------------------ mode: dense
def mode_dense(a):
    """The dense joint-coordinate KKT solve and the refinements of partree's qdd with it (module docstring)."""
    rows = []
    for U in a.units:
        mc = closed_mast(U)
        q, qd, tau = closed_state(mc)
        ref = lagrange_reference(mc, q, qd, tau)
        res = partree.constrained_dynamics(mc, q, qd, tau)
        lc = partree.loop_constraints(mc, q, qd)
        Jd = lc.J.toarray()
        M = partree.crba(mc, q)
        nv, R = mc.nv, Jd.shape[0]
        K = np.block([[M, Jd.T], [Jd, np.zeros((R, R))]])
        h = partree.rnea(mc, q, qd, np.zeros(nv))
        dense = np.linalg.solve(K, np.concatenate([tau - h, lc.gamma]))[:nv]
        r_dyn = tau - partree.rnea(mc, q, qd, res.qdd, f_ext=res.loop_wrench)
        r_con = lc.gamma - Jd @ res.qdd
        refined = res.qdd + np.linalg.solve(K, np.concatenate([r_dyn, r_con]))[:nv]
        # refinement on partree's own O(N) residuals (RNEA with the loop wrenches; the loops' rows
        # on the bodies' accelerations), the correction solved by the dense LU: K's multipliers
        # mu are -lambda, so a correction dmu takes the wrenches G^T dmu off the loop wrenches
        x, W, local = res.qdd.copy(), res.loop_wrench.copy(), []
        for _ in range(a.refine_steps):
            r_loc, _, G = loop_row_residual(mc, q, qd, x)
            z = np.linalg.solve(K, np.concatenate([tau - partree.rnea(mc, q, qd, x, f_ext=W), r_loc]))
            x = x + z[:nv]
            W = W - loop_wrenches(mc, G, z[nv:])
            local.append(rel(x, ref))
        r = {"units": U, "nv": nv, "rows": R, "cond_kkt": float(np.linalg.cond(K)) if nv + R <= 2500 else None,
             "err_partree": rel(res.qdd, ref), "err_dense_lu": rel(dense, ref), "err_refined": rel(refined, ref),
             "err_refined_local": local}
        cond = f"{r['cond_kkt']:.1e}" if r["cond_kkt"] is not None else "not computed"
        steps = ", ".join(f"{e:.1e}" for e in local)
        log(f"dense U={U:>6d}: against the one-DOF reference: partree {r['err_partree']:.1e}, dense LU in joint "
            f"coordinates {r['err_dense_lu']:.1e}, partree refined by one dense step {r['err_refined']:.1e}, "
            f"refined on partree's O(N) residuals ({len(local)} steps) {steps}; KKT {nv + R} unknowns, "
            f"condition number {cond}")
        rows.append(r)
    return {"rows": rows}


# ------------------------------------------------------------------------------------ mode: engine
def part_profile(model, q, qd, tau, repeat, sample, nranks=2):
    """The parts of the ``nranks``-rank partition one after another in one process: each part's
    time, each rank's load (loop_engine.py's profile)."""
    from partree.parallel.loop_part import LoopPartKernel
    from partree.parallel.serial import SerialEngine

    se = SerialEngine.for_ranks(model, nranks)
    se.forward_dynamics(q, qd, tau)
    fns = {}
    for k, pk in enumerate(se.parts):
        qs, qds, taus = q[pk.qix], qd[pk.vix], tau[pk.vix]
        v_in = np.zeros(6)

        def step(pk=pk, qs=qs, qds=qds, taus=taus, v_in=v_in):
            pk.velocity(qs, qds)
            pk.reduce(v_in, taus)
            pk.solve(pk.a0 if isinstance(pk, LoopPartKernel) else np.zeros(6), np.zeros((pk.H, 6)))
        fns[k] = step
    fns["serial"] = lambda: partree.constrained_dynamics(model, q, qd, tau)
    t = timed(fns, repeat, sample)
    parts = [{"bodies": int(pk.m), "handles": int(pk.H), "loops": int(len(getattr(pk, "loops", ()))),
              "ms": 1e3 * t[k], "rank": int(se.owner[k])} for k, pk in enumerate(se.parts)]
    load = np.bincount(se.owner, weights=[p["ms"] for p in parts], minlength=nranks)
    return {"nparts": len(parts), "parts": parts, "rank_load_ms": load.tolist(), "root_loops":
            int(len(model.loops) - sum(p["loops"] for p in parts)), "serial_ms": 1e3 * t["serial"],
            "ideal_speedup": t["serial"] / (1e-3 * load.max()),
            "parts_sum_over_serial": 1e-3 * load.sum() / t["serial"]}


def exact_qdd(model, q, qd, tau, a):
    """The one-DOF reference qdd (``lagrange_reference``), unless --no-reference."""
    if not a.reference:
        return None
    return lagrange_reference(model, q, qd, tau)


def err_text(r):
    if "err_backend" not in r:
        return ""
    return f" (against the one-DOF reference: serial {r['err_serial']:.1e}, this {r['err_backend']:.1e})"


def lazy_barrier(comm):
    """A barrier that sleeps while it waits (MPI's busy-waiting barrier would take a core)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(2e-4)


def rank_peaks(comm):
    return comm.gather(vmhwm_mb(), root=0)


def mode_engine(a, comm):
    size = comm.Get_size() if comm is not None else 1
    rank = comm.Get_rank() if comm is not None else 0
    rows = []
    if size > 1:
        from partree.parallel.mpi import MPIEngine
        for U in a.units:
            reset_peak()
            mc = closed_mast(U) if rank == 0 else None
            state = closed_state(mc) if rank == 0 else None
            q, qd, tau = comm.bcast(state, root=0)
            comm.Barrier()
            t0 = time.perf_counter()
            eng = MPIEngine(mc if rank == 0 else f"scissor:units={U},closed=true,support=slider", comm=comm)
            comm.Barrier()
            t_setup = time.perf_counter() - t0
            x = eng.forward_dynamics(q, qd, tau)
            ref = partree.constrained_dynamics(mc, q, qd, tau).qdd if rank == 0 else None
            xref = exact_qdd(mc, q, qd, tau, a) if rank == 0 else None

            def serial():
                lazy_barrier(comm)
                t = time.perf_counter()
                if rank == 0:
                    partree.constrained_dynamics(mc, q, qd, tau)
                dt = time.perf_counter() - t
                lazy_barrier(comm)
                return dt

            def mpi():
                comm.Barrier()
                t = time.perf_counter()
                eng.forward_dynamics(q, qd, tau)
                comm.Barrier()
                return time.perf_counter() - t
            best = {"serial": np.inf, "mpi": np.inf}
            for rr in range(a.repeat):
                order = [("serial", serial), ("mpi", mpi)]
                if rr % 2:
                    order.reverse()
                for k, fn in order:
                    best[k] = min(best[k], fn())
            peaks = rank_peaks(comm)
            if rank == 0:
                r = {"units": U, "backend": "mpi", "workers": size, "nparts": int(eng.nparts),
                     "serial_ms": 1e3 * best["serial"], "backend_ms": 1e3 * best["mpi"],
                     "speedup": best["serial"] / best["mpi"], "qdd_rel_diff": rel(x, ref), "setup_s": t_setup,
                     "imbalance_model": eng.imbalance, "peak_rss_mb_ranks": peaks}
                if xref is not None:
                    r.update(err_serial=rel(ref, xref), err_backend=rel(x, xref))
                rows.append(r)
                log(f"engine U={U:>7d} MPI {size} ranks: {r['backend_ms']:9.2f} ms, constrained_dynamics (rank 0, "
                    f"same job) {r['serial_ms']:9.2f} ms, speed-up {r['speedup']:.2f}x, max|dqdd|/max|qdd| "
                    f"{r['qdd_rel_diff']:.1e}{err_text(r)}, set-up {t_setup:.1f} s, peak "
                    f"{', '.join(f'{p:.0f}' for p in peaks)} MB")
            del eng
        return {"rows": rows}
    backends = a.backends
    client = cluster = None
    if "dask" in backends:
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        for U in a.units:
            reset_peak()
            if client is not None:
                client.run(reset_peak)
            mc = closed_mast(U)
            q, qd, tau = closed_state(mc)
            ref = partree.constrained_dynamics(mc, q, qd, tau).qdd
            xref = exact_qdd(mc, q, qd, tau, a)
            fns = {"serial": lambda: partree.constrained_dynamics(mc, q, qd, tau)}
            engines, setup, diffs = {}, {}, {}
            if "serial" in backends:
                from partree.parallel.serial import SerialEngine
                t0 = time.perf_counter()
                engines["serial_engine"] = SerialEngine.for_ranks(mc, a.workers)
                setup["serial_engine"] = time.perf_counter() - t0
            if "dask" in backends:
                from partree.parallel.dask_backend import DaskEngine
                t0 = time.perf_counter()
                engines["dask"] = DaskEngine(mc, client=client)
                setup["dask"] = time.perf_counter() - t0
            errs = {}
            for k, e in engines.items():
                x = e.forward_dynamics(q, qd, tau)
                diffs[k] = rel(x, ref)
                if xref is not None:
                    errs[k] = {"err_serial": rel(ref, xref), "err_backend": rel(x, xref)}
                fns[k] = (lambda e=e: e.forward_dynamics(q, qd, tau))
            t = timed(fns, a.repeat, a.sample)
            peak = vmhwm_mb()
            wpeaks = sorted(client.run(vmhwm_mb).values()) if client is not None else None
            for k in engines:
                e = engines[k]
                nparts = e.partition.nparts
                r = {"units": U, "backend": "dask" if k == "dask" else "serial_engine",
                     "workers": a.workers if k == "dask" else 1, "nparts": int(nparts),
                     "serial_ms": 1e3 * t["serial"], "backend_ms": 1e3 * t[k], "speedup": t["serial"] / t[k],
                     "qdd_rel_diff": diffs[k], "setup_s": setup[k], "peak_rss_mb": peak,
                     "peak_rss_mb_workers": wpeaks if k == "dask" else None, **errs.get(k, {})}
                rows.append(r)
                log(f"engine U={U:>7d} {r['backend']:>13s}: {r['backend_ms']:9.2f} ms, constrained_dynamics "
                    f"{r['serial_ms']:9.2f} ms, speed-up {r['speedup']:.2f}x, max|dqdd|/max|qdd| "
                    f"{r['qdd_rel_diff']:.1e}{err_text(r)}, set-up {setup[k]:.1f} s, peak {peak:.0f} MB"
                    + (f" (workers {', '.join(f'{p:.0f}' for p in wpeaks)} MB)" if k == "dask" else ""))
            if "dask" in engines:
                engines["dask"].close()
            if a.profile_parts:
                prof = part_profile(mc, q, qd, tau, a.repeat, a.sample, a.workers)
                rows.append({"units": U, "backend": "profile", **prof})
                log(f"engine U={U:>7d} parts of the {a.workers}-rank partition one after another: "
                    f"{prof['nparts']} parts, rank loads {', '.join(f'{x:.2f}' for x in prof['rank_load_ms'])} ms, "
                    f"constrained_dynamics {prof['serial_ms']:.2f} ms (interleaved with them), the parts' sum "
                    f"{prof['parts_sum_over_serial']:.2f}x the serial, ideal speed-up {prof['ideal_speedup']:.2f}x; "
                    f"parts: "
                    + "; ".join(f"{p['bodies']} bodies, {p['loops']} loops, {p['ms']:.2f} ms" for p in prof["parts"])
                    + f"; loops at the root {prof['root_loops']}")
            del engines
    finally:
        if client is not None:
            client.close()
            cluster.close()
    return {"rows": rows}


# ------------------------------------------------------------------------------------ mode: steps
def drive_torques(model):
    """The drive as the distributed backends take it: ``ScissorDrive(model).carriage_torques()``
    where it exists, else None (no drive)."""
    d = ScissorDrive(model)
    f = getattr(d, "carriage_torques", None)
    return (f(), "ScissorDrive.carriage_torques()") if callable(f) else (None, "none (no carriage_torques)")


class StepClock:
    """The simulation loop's step hook: the wall time of every tick after the warm-up."""

    def __init__(self, warmup, sync=None):
        self.warmup, self.sync = warmup, sync
        self.t_last, self.ticks = None, []

    def probe(self, integ):
        self.t_last = time.perf_counter()

    def hook(self, k, t, q, v):
        if self.sync is not None:
            self.sync(q, v)
        now = time.perf_counter()
        if k > self.warmup:
            self.ticks.append(now - self.t_last)
        self.t_last = time.perf_counter()


def _dask_sync(q, v):
    # the Dask simulation queues per-part arithmetic until the next call to the parts' actors; one
    # round trip runs what is queued, so the clock sees finished work (as bench_simulation.py)
    ctx = getattr(q, "ctx", None)
    if ctx is not None:
        ctx.call("nkeys", ())


def run_steps(model, backend, torques, a, comm=None, client=None):
    """(step times, wall time, finite, result, error): error is the message of a PartreeInputError
    the run stopped with (then the result is None)."""
    clock = StepClock(a.warmup, _dask_sync if backend == "dask" else None)
    t0 = time.perf_counter()
    try:
        res = partree.simulate(model, (a.warmup + a.steps) * a.dt, a.dt, torques=torques, backend=backend,
                               integrator="rk4", correct=a.correct, save_every=10 ** 9, progress=False,
                               verbose=False, comm=comm, client=client, _step_hook=clock.hook, _probe=clock.probe)
    except PartreeInputError as e:
        return clock.ticks, time.perf_counter() - t0, False, None, f"{type(e).__name__}: {e}"
    wall = time.perf_counter() - t0
    ok = res is None or bool(np.isfinite(res.q[-1]).all())
    return clock.ticks, wall, ok, res, None


def mode_steps(a, comm):
    size = comm.Get_size() if comm is not None else 1
    rank = comm.Get_rank() if comm is not None else 0
    rows = []
    client = cluster = None
    if size == 1 and "dask" in a.backends:
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        for U in a.units:
            mc = closed_mast(U)
            tq, tq_name = drive_torques(mc)
            variants = [("serial", "serial", tq)]
            if size > 1:
                variants.append(("mpi", "mpi", tq))
            else:
                if "serial_drive" in a.backends:
                    variants.append(("serial_drive", "serial", ScissorDrive(mc)))
                if "dask" in a.backends:
                    variants.append(("dask", "dask", tq))
            ticks = {k: [] for k, _, _ in variants}
            walls = {k: [] for k, _, _ in variants}
            finite = {k: True for k, _, _ in variants}
            qend, errors = {}, {}
            for rr in range(a.repeat):
                order = variants if rr % 2 == 0 else variants[::-1]
                for name, backend, torques in order:
                    if name in errors:
                        continue
                    err = None
                    if backend == "serial" and size > 1:
                        # the serial run on rank 0 while the other ranks sleep
                        if rank == 0:
                            tk, wall, ok, res, err = run_steps(mc, "serial", torques, a)
                        lazy_barrier(comm)
                        err = comm.bcast(err, root=0)
                    else:
                        if comm is not None and size > 1:
                            comm.Barrier()
                        tk, wall, ok, res, err = run_steps(mc, backend, torques, a,
                                                           comm=comm if backend == "mpi" else None,
                                                           client=client if backend == "dask" else None)
                    if err is not None:
                        errors[name] = err
                        if rank == 0:
                            log(f"steps U={U:>6d} {name:>12s}: stopped after {len(tk)} timed steps: {err}")
                        continue
                    if rank == 0:
                        ticks[name] += tk
                        walls[name].append(wall)
                        finite[name] = finite[name] and ok
                        if res is not None:
                            qend[name] = np.asarray(res.q[-1])
            if rank == 0:
                base = np.median(ticks["serial"]) if ticks["serial"] else np.nan
                for name, backend, _ in variants:
                    if not ticks[name]:
                        rows.append({"units": U, "variant": name, "backend": backend, "correct": a.correct,
                                     "error": errors.get(name)})
                        continue
                    med, best = float(np.median(ticks[name])), float(np.min(ticks[name]))
                    r = {"units": U, "variant": name, "backend": backend, "correct": a.correct,
                         "error": errors.get(name),
                         "workers": size if backend == "mpi" else (a.workers if backend == "dask" else 1),
                         "torques": "ScissorDrive (t, q, qd)" if name == "serial_drive" else tq_name,
                         "samples": len(ticks[name]), "step_ms_median": 1e3 * med, "step_ms_best": 1e3 * best,
                         "steps_per_s": 1.0 / med, "speedup_vs_serial": base / med,
                         "run_wall_s_best": float(min(walls[name])), "finite": finite[name],
                         "q_end_rel_diff_vs_serial": (rel(qend[name], qend["serial"])
                                                      if name in qend and "serial" in qend else None)}
                    rows.append(r)
                    log(f"steps U={U:>6d} {name:>12s}: {r['step_ms_median']:10.2f} ms/step median "
                        f"({r['step_ms_best']:.2f} best, {r['samples']} steps), {r['steps_per_s']:8.2f} steps/s, "
                        f"x{r['speedup_vs_serial']:.2f} over serial; torques {r['torques']}; q at the end vs serial "
                        f"{nan_if_none(r['q_end_rel_diff_vs_serial']):.1e}")
    finally:
        if client is not None:
            client.close()
            cluster.close()
    return {"rows": rows, "dt": a.dt, "steps": a.steps, "warmup": a.warmup}


# ------------------------------------------------------------------------------------ plot
def plot(paths, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    series = {}
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        mode = d.get("mode")
        for r in d.get("rows", []):
            U = r["units"]
            if mode == "eval":
                series.setdefault("closed: constrained_dynamics", {})[U] = r["closed_ns_per_unit"]
                series.setdefault("tree: ABA", {})[U] = r["tree_ns_per_unit"]
            elif mode == "sparse" and "assembly_ms" in r:
                series.setdefault("closed: scipy.sparse KKT, assembly + solve", {})[U] = \
                    1e6 * (r["assembly_ms"] + r["solve_ms"] + r["recover_ms"]) / U
                series.setdefault("closed: scipy.sparse KKT, solve", {})[U] = 1e6 * r["solve_ms"] / U
            elif mode == "engine" and r.get("backend") in ("serial_engine", "dask", "mpi"):
                lab = {"serial_engine": "engine, serial (1 process)", "dask": f"engine, Dask {r['workers']} workers",
                       "mpi": f"engine, MPI {r['workers']} ranks"}[r["backend"]]
                series.setdefault(lab, {})[U] = 1e6 * r["backend_ms"] / U
    style = {"closed: constrained_dynamics": ("C0", "o-"), "tree: ABA": ("C1", "s-"),
             "closed: scipy.sparse KKT, assembly + solve": ("C3", "^-"),
             "closed: scipy.sparse KKT, solve": ("C3", "v--"), "engine, serial (1 process)": ("C2", "d:")}
    for k, s in series.items():
        xs = sorted(s)
        c, m = style.get(k, ("C4", "D:") if "Dask" in k else ("C5", "p:") if "MPI" in k else (None, "d:"))
        ax.loglog(xs, [s[x] for x in xs], m, color=c, label=k)
    ax.set_xlabel("units U (closed mast: 2U + 1 bodies, U loops)")
    ax.set_ylabel("time per unit, ns (one forward dynamics)")
    ax.set_title("Scissor mast: cost per unit (2-core machine)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    log(f"plot: {out}")


# ------------------------------------------------------------------------------------ main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=MODES, help="what to measure (see above)")
    ap.add_argument("--units", type=int, nargs="+", help="mast sizes (default per mode: eval 1e2..1e5, sparse 1e3 "
                    "1e4, dense 10..1e3, engine 1e3..1e5, steps 1e2..1e4)")
    ap.add_argument("--repeat", type=int, default=7, help="interleaved rounds, best kept (steps: simulate runs per "
                    "backend)")
    ap.add_argument("--sample", type=float, default=0.05, help="seconds of calls per variant and round (small sizes)")
    ap.add_argument("--breakdown", action="store_true", help="eval: where one closed call's time goes (largest size)")
    ap.add_argument("--solver", choices=("spsolve", "splu"), default="spsolve", help="sparse: scipy's solve")
    ap.add_argument("--no-rank-check", dest="rank_check", action="store_false",
                    help="sparse: skip the dense rank check of C on a 10-unit mast")
    ap.add_argument("--refine-steps", type=int, default=3, help="dense: refinement steps on the O(N) residuals")
    ap.add_argument("--accuracy-units", type=int, nargs="*", default=[10, 100],
                    help="sparse: sizes compared for accuracy only (not timed), besides --units")
    ap.add_argument("--no-reference", dest="reference", action="store_false",
                    help="engine: skip the comparison with the one-DOF reference")
    ap.add_argument("--backends", nargs="+", default=["serial", "dask"],
                    help="engine: serial (SerialEngine) and/or dask; steps: dask and/or serial_drive (the serial "
                         "run with ScissorDrive as a callable of (t, q, qd)); under mpiexec: MPI")
    ap.add_argument("--workers", type=int, default=2, help="Dask workers (and the partition's ranks)")
    ap.add_argument("--no-profile-parts", dest="profile_parts", action="store_false",
                    help="engine: skip the parts' own times (the ideal speed-up)")
    ap.add_argument("--steps", type=int, default=5, help="steps: timed steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="steps: steps not timed at the start of a run")
    ap.add_argument("--dt", type=float, default=1e-3, help="steps: the step, s")
    ap.add_argument("--correct", choices=("full", "velocity", "none"), default="full",
                    help="steps: the loops' correction after every step (simulate's correct=)")
    ap.add_argument("--json", default=None, help="write the raw results here")
    ap.add_argument("--plot", default=None, metavar="PNG", help="draw the per-unit plot (from --from, else from "
                    "this run's JSON)")
    ap.add_argument("--from", dest="inputs", nargs="+", default=None, metavar="JSON",
                    help="with --plot and no --mode: the results files to draw")
    a = ap.parse_args(argv)
    if a.mode is None:
        if a.plot and a.inputs:
            plot(a.inputs, a.plot)
            return
        ap.error("give --mode (or --plot with --from)")
    a.units = a.units or DEFAULT_UNITS[a.mode]
    comm = None
    if a.mode in ("engine", "steps"):
        try:
            from mpi4py import MPI
            comm = MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None
        except ImportError:
            comm = None
    rank = comm.Get_rank() if comm is not None else 0
    t0 = time.perf_counter()
    head = {"mode": a.mode, "date": datetime.date.today().isoformat(), "machine": platform.node(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "partree_commit": commit(), "partree_path": os.path.dirname(partree.__file__), "argv": sys.argv,
            "mpi_ranks": comm.Get_size() if comm is not None else 1,
            "load_average_before": os.getloadavg()}
    if rank == 0:
        log(f"bench_scissor --mode {a.mode}: units {a.units}, repeat {a.repeat}, machine {head['machine']} "
            f"({head['cpus']} CPUs), load average {', '.join(f'{x:.2f}' for x in head['load_average_before'])}, "
            f"commit {head['partree_commit']}")
    if a.mode == "eval":
        body = mode_eval(a)
    elif a.mode == "sparse":
        body = mode_sparse(a)
    elif a.mode == "dense":
        body = mode_dense(a)
    elif a.mode == "engine":
        body = mode_engine(a, comm)
    else:
        body = mode_steps(a, comm)
    if rank != 0:
        return
    out = {**head, **body, "wall_s": time.perf_counter() - t0, "load_average_after": os.getloadavg()}
    log(f"done in {out['wall_s']:.0f} s; load average after {', '.join(f'{x:.2f}' for x in out['load_average_after'])}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    if a.plot:
        if a.json:
            plot([a.json], a.plot)
        else:
            import tempfile
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(out, f)
            plot([f.name], a.plot)
            os.unlink(f.name)


if __name__ == "__main__":
    main()
