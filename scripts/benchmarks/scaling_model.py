"""A calibrated model of the parallel engine's time per evaluation, from 1 to thousands of ranks.

    python scripts/benchmarks/scaling_model.py --pairs 3       # calibrate (~3 min), validate (~4 min), curves
    python scripts/benchmarks/scaling_model.py --quick --out /tmp/sm   # small calibration (seconds)
    python scripts/benchmarks/scaling_model.py --from-json docs/results/scaling_model/scaling_model.json \\
        --alpha-us 2 --beta-gbs 10 --ns-per-body 250 --out /tmp/my_cluster   # your cluster's figures

One evaluation of the engine (forward dynamics, qdd left on the ranks that own it) on R ranks
is predicted as

    T(R) = max_r sum_{k on r} t_k  +  T_msg(R)  +  T_root(R)          (T(1) = N c_serial)

    t_k    = c_plain (m_k - p_k) + c_path p_k + c_part + c_hh H_k^2     (part k: m_k bodies, p_k of
             them on handle paths, H_k handles)
    T_msg  = 4 collectives (velocity maps gathered, incoming velocities scattered, boundary
             relations gathered, solutions scattered), each alpha + (R - 2) gap + B / beta, B the
             bytes that cross (messages.py: 18 H, 6, 42 + 36 H + 36 H^2 + 6 H, 6 + 6 H doubles)
    T_root = flat root (as built), rank 0 through every part: O(P)
             z + sum_k c_root(H_k), c_root(H) = a + e [H > 0] + b H + c H^2 + d H^3;
             hierarchical root (MPIEngine(root='tree')): (rho + ceil(log_f R)) c_node
             + ceil(log_f R) (4 alpha + B_level / beta), a reduction tree of fan-in f over the parts
    (+ T_gather = alpha + (R - 2) gap + 8 (N - N_0) / beta + N c_place when qdd is gathered on
    rank 0 every evaluation, as partree bench's seconds_per_eval_gathered)

Measured here (one process unless said), every figure the best of --rounds rounds:
  kernels   c_serial (the one-part engine, per body), c_plain and c_path (fitted on the parts of
            SerialEngine.for_ranks(model, R), R = 2, 4, each part timed as MPIEngine runs it, round
            after round), c_part (parts of two bodies), c_hh (the top part of a binary tree cut at
            depth d: the 2^d handles partition_for_ranks gives the binary tree's top part at large
            R); at N = 1e5 and 1e6 (quick: 2e4), chain:n=N and binary:n=N; ABA beside them; the
            qdd placement per entry (c_place)
  partition the engine's own partitions (make_partition(model, None, nranks=R)): part sizes, path
            bodies, handles, owners; for the curves the binary tree's parts per rank, top-part
            handles and path bodies per part fitted on R = 2..64 at N = 1e6 (the chain is exact:
            the partitioner's PATH_WEIGHT rule)
  root      MPIEngine's rank-0 work with the flat root as built (the compiled compose_packed,
            solve_packed, pack_solutions on the gathered buffers) on synthetic parts trees of
            P = 10..1e4 parts (chain, binary tree, forest) and stars of H = 2..512 handles; c_root's
            coefficients fitted to all of them; the hierarchical root (hierarchical_root's
            compose_velocities and solve) on synthetic chains: c_node, its time per plan node
            (--recalibrate-root with --from-json times the root alone again)
  network   mpiexec -n 2: ping-pong (alpha: half the best small round trip; beta: 2-16 MB
            messages), the gap per message in a stream into one receiver, Gatherv / Scatterv of the
            engine's sizes; mpiexec -n 4 (oversubscribed) Gatherv / Scatterv kept for reference
Validation: fresh `mpiexec -n R partree bench --backend mpi` jobs, R = 1 and 2 alternating
(--pairs), chain and binary tree at N = 1e5 and 1e6, plus one job on 4 ranks at N = 1e5
(oversubscribed: it checks the message sizes and counts, not the time; 2 cores cannot show more);
the best job per point, the model's error at every point, the bytes per evaluation, and each
rank's own work (its parts' phases) against the model's rank loads.  The recorded runs of
docs/performance.md (16-core Xeon to 16 ranks at N = 1e7; 2-core machine at N = 1e6 and 1e7) are
compared too, the per-body cost set from each run's own 1-rank time.

Writes into --out: scaling_model.json (calibration, validation, curves, where each root stops
paying), scaling_model.png (time and efficiency against ranks, N = 1e6..1e9) and report.txt.
Times are best-of (a shared machine: the best time is the least disturbed); only ratios measured
side by side in one run are meaningful.  See docs/scaling-model.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    # one thread per process, set before numpy starts (only when run: a process that imports
    # the module, such as its test, keeps its own settings; numba refuses a changed thread count)
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "docs" / "results" / "scaling_model"
SPECS = {"chain": "chain:n={n}", "binary": "binary:n={n}"}
CURVE_N = (10**6, 10**7, 10**8, 10**9)
CURVE_R = tuple(2**k for k in range(13))            # 1 .. 4096
#: doubles per part per message kind (partree/parallel/messages.py)
KINDS = ("vel", "v", "red", "sol")
#: network figures used when no MPI measurement is possible (shared memory, typical): alpha 2 us,
#: gap 0.5 us, 5 GB/s
FALLBACK_NET = {"alpha": 2e-6, "gap": 0.5e-6, "beta": 5e9, "source": "fallback (no mpiexec measurement)"}


# ============================================================================ the model (pure)
def message_doubles(H):
    """Doubles per part in each of the four messages of one evaluation, for H handles
    (partree.parallel.messages: velocity 18 H, v_in 6, reduction 42 + 36 H + 36 H^2 + 6 H,
    solution 6 + 6 H)."""
    H = np.asarray(H, dtype=np.float64)
    return {"vel": 18 * H, "v": 6 + 0 * H, "red": 42 + 36 * H + 36 * H * H + 6 * H, "sol": 6 + 6 * H}


def part_seconds(m, p, H, k):
    """Time of one part's own work (velocity + reduce + back-substitution, as MPIEngine runs it):
    m bodies, p of them on handle paths, H handles; ``k`` the kernel costs of one family."""
    m, p, H = (np.asarray(x, dtype=np.float64) for x in (m, p, H))
    return k["c_plain"] * (m - p) + k["c_path"] * p + k["c_part"] + k["c_hh"] * H * H


def collective_seconds(R, nbytes, net):
    """One Gatherv or Scatterv over R ranks moving ``nbytes`` to / from the non-root ranks: one
    latency, one gap per further rank, the bytes at bandwidth beta (0 on one rank)."""
    if R <= 1:
        return 0.0
    return net["alpha"] + max(R - 2, 0) * net["gap"] + nbytes / net["beta"]


def c_root(H, root):
    """The flat root's rank-0 work for one part with H handles (seconds):
    a + e [H > 0] + b H + c H^2 + d H^3 (``root['coef']`` = [z, a, e, b, c, d], non-negative,
    fitted to synthetic parts trees and stars).  a: unpacking and packing, every part; e: the
    elimination of a part with handles; b: per handle, that is per child part (its relation carried
    up, its velocity and acceleration carried down); d H^3: the part's dense 6H x 6H solve."""
    _, a, e, b, c, d = root["coef"]
    H = np.asarray(H, dtype=np.float64)
    out = a + e * (H > 0) + H * (b + H * (c + H * d))
    return float(out) if out.ndim == 0 else out


def flat_root_seconds(nh, root):
    """The flat root (as built): rank 0 works through every part, z + sum_k c_root(H_k): O(P)
    (z: the fixed cost of one root round).  0 for a single part: the one-part engine's root is part
    of the calibrated serial cost."""
    nh = np.asarray(nh)
    if nh.size <= 1:
        return 0.0
    return float(root["coef"][0] + np.sum(c_root(nh, root)))


def hier_levels(R, fanin=2):
    """Levels of a reduction tree of fan-in ``fanin`` over R ranks: ceil(log_fanin R)."""
    if R <= 1:
        return 0
    lv, span = 0, 1
    while span < R:
        span *= fanin
        lv += 1
    return lv


def hier_root_seconds(R, parts_per_rank, root, net, fanin=2):
    """The hierarchical root (``MPIEngine(root='tree')``): every rank first closes its own parts'
    relations, then ceil(log_fanin R) levels, each one merge of ``fanin`` relations, and the
    splits back down; per level four messages on the critical path (velocity maps up, v_in down,
    relation up, solution down; groups assumed to keep one entry and one handle: 18 + 6 + 120 +
    12 doubles).  The time per node of the plan (its merge and its split, velocity and dynamics
    rounds) is ``root['tree_node']``, measured on the built tree root (:func:`fit_tree_root`);
    a calibration without it takes c_root(fanin) + fanin c_root(1) per level.
    Returns (root seconds, message seconds)."""
    if R <= 1:
        return 0.0, 0.0
    L = hier_levels(R, fanin)
    d = message_doubles(1)
    level_bytes = 8 * sum(float(d[x]) for x in KINDS)
    msgs = L * (4 * net["alpha"] + level_bytes / net["beta"])
    node = root.get("tree_node")
    if node is not None:
        return (parts_per_rank + L) * node, msgs
    comb = c_root(fanin, root) + fanin * c_root(1, root)
    return parts_per_rank * c_root(1, root) + L * comb, msgs


def gather_seconds(R, nv, nv_root, net, c_place):
    """Gathering qdd on rank 0 (what ``partree bench`` reports as seconds_per_eval_gathered on top
    of an evaluation): a Gatherv of the other ranks' entries and placing all nv entries."""
    return (collective_seconds(R, 8.0 * (nv - nv_root), net) if R > 1 else 0.0) + nv * c_place


def predict_parts(parts, R, kern, root, net, root_kind="flat", fanin=2, gather=False, cores=None):
    """Time per evaluation on R ranks from a partition's parts: ``parts`` a dict of arrays
    m (bodies), p (path bodies), H (handles), owner (rank); ``kern`` the family's kernel costs.
    R = 1 gives the calibrated serial cost N c_serial.  ``cores``: run R ranks on fewer cores
    (oversubscription: the compute term is at least the total work / cores).  Returns the terms."""
    m = np.asarray(parts["m"], dtype=np.float64)
    N = float(m.sum())
    if R <= 1:
        t1 = N * kern["c_serial"]
        out = {"compute": t1, "messages": 0.0, "root": 0.0, "total": t1, "R": 1, "nparts": int(m.size),
               "loads": [t1]}
        if gather:
            out["gather"] = gather_seconds(1, N, N, net, kern["c_place"])
            out["total_gathered"] = t1 + out["gather"]
        return out
    p, H, owner = (np.asarray(parts[x]) for x in ("p", "H", "owner"))
    t = part_seconds(m, p, H, kern)
    loads = np.bincount(owner, weights=t, minlength=R)
    comp = float(loads.max())
    if cores is not None and R > cores:
        comp = max(comp, float(loads.sum()) / cores)
    out = {"R": int(R), "nparts": int(m.size), "compute": comp, "load_imbalance": float(loads.max() / loads.mean()),
           "loads": loads.tolist()}
    if root_kind == "flat":
        d = message_doubles(H)
        away = owner != 0
        nbytes = {x: 8.0 * float(np.sum(d[x][away])) for x in KINDS}
        out["bytes"] = nbytes
        out["messages"] = sum(collective_seconds(R, nbytes[x], net) for x in KINDS)
        out["root"] = flat_root_seconds(H, root)
    else:
        out["root"], out["messages"] = hier_root_seconds(R, m.size / R, root, net, fanin)
    out["total"] = out["compute"] + out["messages"] + out["root"]
    if gather:
        nv_root = float(m[owner == 0].sum())
        out["gather"] = gather_seconds(R, N, nv_root, net, kern["c_place"])
        out["total_gathered"] = out["total"] + out["gather"]
    return out


def chain_parts(N, R, path_weight=0.12):
    """The partition the engine makes of an N-body chain for R ranks: R segments, each hanging the
    next from its last body, so segments 0..R-2 are all on handle paths; sized so that the
    partitioner's costs (path bodies weigh 1 + path_weight) are equal."""
    R = int(R)
    if R <= 1:
        return {"m": np.array([float(N)]), "p": np.zeros(1), "H": np.zeros(1, dtype=np.int64),
                "owner": np.zeros(1, dtype=np.int64)}
    s_plain = N / ((R - 1) / (1.0 + path_weight) + 1.0)
    s_path = s_plain / (1.0 + path_weight)
    m = np.full(R, s_path)
    m[-1] = s_plain
    p = m.copy()
    p[-1] = 0.0
    H = np.ones(R, dtype=np.int64)
    H[-1] = 0
    return {"m": m, "p": p, "H": H, "owner": np.arange(R, dtype=np.int64)}


def binary_parts(N, R, shape, root_kind="flat", fanin=2):
    """A binary tree's partition for R ranks, from the shape fitted on the engine's own partitions
    (``shape``: parts per rank rho, top-part handles h_top R, path bodies per part, the rank
    imbalance): the top part (on rank 0, which holds the most handles) plus rho R - 1 parts of one
    handle or none, spread evenly.  With the hierarchical root the design assumes a partition
    whose parts keep a few handles (the top part split as the ranks' reduction tree), so the top
    part's handles are capped at the fan-in."""
    R = int(R)
    if R <= 1:
        return {"m": np.array([float(N)]), "p": np.zeros(1), "H": np.zeros(1, dtype=np.int64),
                "owner": np.zeros(1, dtype=np.int64)}
    P = max(int(round(shape["rho"] * R)), R)
    h_top = max(1, int(round(shape["h_top"] * R)))
    if root_kind != "flat":
        h_top = min(h_top, fanin)
    # handles of the others: P - 1 attachments in all; h_top of them on the top part
    rest = max(P - 1 - h_top, 0)
    H = np.zeros(P, dtype=np.int64)
    H[0] = h_top
    H[1:1 + rest] = 1                    # (the fitted shape: the others hold about one each)
    owner = np.empty(P, dtype=np.int64)
    owner[0] = 0
    owner[1:] = np.arange(P - 1) % R
    # rank loads within the fitted imbalance; the heaviest is rank 0 (top part + its share)
    per_rank = N / R
    m = np.empty(P)
    counts = np.bincount(owner, minlength=R).astype(np.float64)
    m[:] = per_rank / counts[owner]
    m[owner == 0] *= shape["imbalance"]
    p = np.full(P, shape["path_per_part"])
    p[0] = 2.0 * h_top
    p = np.minimum(p, m)
    return {"m": m, "p": p, "H": H, "owner": owner}


def shape_parts(family, N, R, cal, root_kind="flat", fanin=2):
    """The modelled partition of a family at N bodies on R ranks."""
    if family == "chain":
        return chain_parts(N, R, cal["path_weight"])
    return binary_parts(N, R, cal["shape"]["binary"], root_kind, fanin)


def kernels_for(cal, family, N):
    """The kernel costs of ``family`` measured at the calibration size nearest N (in log)."""
    ks = cal["kernels"][family]
    n = min(ks, key=lambda s: abs(math.log(int(s)) - math.log(N)))
    return ks[n]


def predict(family, N, R, cal, root_kind="flat", fanin=2, gather=False):
    """Predicted time per evaluation (a dict of terms; 'total' the seconds) of ``family`` at N
    bodies on R ranks with the flat or the hierarchical root, from calibration ``cal``."""
    kern = kernels_for(cal, family, N)
    parts = shape_parts(family, N, R, cal, root_kind, fanin)
    return predict_parts(parts, R, kern, cal["root"], cal["network"], root_kind, fanin, gather)


def efficiency(t1, tR, R):
    """Parallel efficiency T(1) / (R T(R))."""
    return t1 / (R * tR)


def stop_paying(Rs, times):
    """Where adding ranks stops paying: the first R (of increasing ``Rs``) whose efficiency is below
    50% or whose time is not below the previous R's.  Returns (last R that pays, first R that does
    not or None, the reason)."""
    t1 = times[0]
    last = Rs[0]
    for i in range(1, len(Rs)):
        if times[i] >= times[i - 1]:
            return last, Rs[i], "time rises"
        if efficiency(t1, times[i], Rs[i]) < 0.5:
            return last, Rs[i], "efficiency < 50%"
        last = Rs[i]
    return last, None, "pays to the largest R modelled"


def curves(cal, Ns=CURVE_N, Rs=CURVE_R, fanin=2):
    """Predicted times and efficiencies for every family, N, R and root; and where each stops."""
    out = {"N": list(Ns), "R": list(Rs), "fanin": fanin, "families": {}}
    for fam in SPECS:
        out["families"][fam] = {}
        for kind in ("flat", "hierarchical"):
            rows = {}
            for N in Ns:
                preds = [predict(fam, N, R, cal, "flat" if kind == "flat" else "hier", fanin) for R in Rs]
                ts = [x["total"] for x in preds]
                last, first_bad, why = stop_paying(list(Rs), ts)
                rows[str(N)] = {
                    "seconds": ts, "efficiency": [efficiency(ts[0], t, R) for t, R in zip(ts, Rs)],
                    "compute": [x["compute"] for x in preds], "messages": [x["messages"] for x in preds],
                    "root": [x["root"] for x in preds], "best_R": int(Rs[int(np.argmin(ts))]),
                    "pays_to": int(last), "stops_at": first_bad, "why": why}
            out["families"][fam][kind] = rows
    return out


# ============================================================================ measurements
def _state(model, seed=0):
    rng = np.random.default_rng(seed)
    return model.random_configuration(rng), model.random_velocity(rng), rng.normal(size=model.nv)


def _part_steps(eng, q, qd, tau):
    """Per part of a SerialEngine: a callable doing the part's share of one MPIEngine evaluation
    (finite checks, velocity, packing, reduce, packing, back-substitution, the qdd copy), with the
    incoming data of a real evaluation."""
    from partree.parallel import messages as msg
    from partree.parallel import root as R
    from partree.parallel.mpi import check_finite

    vel = [tuple(x.copy() for x in pk.velocity(q[pk.qix], qd[pk.vix])) for pk in eng.parts]
    v_in = R.compose_velocities(eng.tree, vel)
    red = [tuple(x.copy() for x in pk.reduce(v_in[k], tau[pk.vix])) for k, pk in enumerate(eng.parts)]
    a_in, g = R.solve(eng.tree, red, eng.a0)
    for k, pk in enumerate(eng.parts):
        pk.solve(a_in[k], g[k])

    def step(k):
        pk = eng.parts[k]
        qk, qdk, tk = q[pk.qix], qd[pk.vix], tau[pk.vix]
        sol = msg.pack_solution(a_in[k], g[k])

        def run():
            check_finite(qk, "q", pk)
            check_finite(qdk, "qd", pk)
            msg.pack_velocity(*pk.velocity(qk, qdk))
            check_finite(tk, "tau", pk)
            M, m0, Kt, Psi, Lam, beta = pk.reduce(v_in[k], tk, None)
            msg.pack_reduction(M, m0, Kt, Lam, beta)
            a, gg = msg.unpack_solution(sol, pk.H)
            return pk.solve(a, gg).copy()
        return run
    return [step(k) for k in range(len(eng.parts))]


def _times_interleaved(fns, rounds):
    """Times of every callable, round after round (one call each per round, after one warm-up
    call each): an array (rounds, len(fns))."""
    T = np.empty((rounds, len(fns)))
    for f in fns:
        f()
    for r in range(rounds):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            T[r, i] = time.perf_counter() - t0
    return T


def _best_interleaved(fns, rounds):
    """Best time of every callable, timed round after round."""
    return _times_interleaved(fns, rounds).min(axis=0)


def _part_rows(eng):
    from partree.parallel.partition import on_path_mask

    pt = eng.partition
    on = on_path_mask(eng.model.parent, pt)
    paths = np.bincount(pt.part_of, weights=on, minlength=pt.nparts)
    return [{"m": int(pk.m), "p": int(paths[k]), "H": int(pk.H), "owner": int(eng.owner[k])}
            for k, pk in enumerate(eng.parts)]


def warm_up():
    """Compile (or load from numba's cache) every kernel the calibration times, on small models."""
    import partree
    from partree.parallel import SerialEngine

    for fam in SPECS:
        m = partree.resolve_model(SPECS[fam].format(n=200))
        q, qd, tau = _state(m)
        for R in (1, 2, 4):
            SerialEngine.for_ranks(m, R).forward_dynamics(q, qd, tau)
        partree.aba(m, q, qd, tau)
    _best_interleaved(handle_items(63, (2,))[1], 1)


def part_overhead_items():
    """c_part's items: the parts of a 40-body chain cut in 20 parts of two bodies (the Python calls
    and the kernels' set-up dominate)."""
    import partree
    from partree.parallel import SerialEngine

    m = partree.resolve_model("chain:n=40")
    q, qd, tau = _state(m)
    return _part_steps(SerialEngine(m, 20), q, qd, tau)


def handle_items(n, depths):
    """c_hh's items: the top part of a binary tree cut at depth d (every body at depth d starts a
    part) has 2^d handles, the shape partition_for_ranks gives the binary tree's top part at large R."""
    import partree
    from partree.models.generators import binary_depth
    from partree.parallel.partition import partition_from_roots
    from partree.parallel.part import build_part

    model = partree.resolve_model(SPECS["binary"].format(n=n))
    q, qd, tau = _state(model)
    dep = binary_depth(model.n)
    rows, fns = [], []
    for d in depths:
        pt = partition_from_roots(model, np.concatenate(([0], np.flatnonzero(dep == d))))
        pk = build_part(model, pt, 0)
        qk, qdk, tk, z, g = q[pk.qix], qd[pk.vix], tau[pk.vix], np.zeros(6), np.zeros((pk.H, 6))

        def run(pk=pk, qk=qk, qdk=qdk, tk=tk, z=z, g=g):
            pk.velocity(qk, qdk)
            pk.reduce(z, tk)
            pk.solve(z, g)
        fns.append(run)
        rows.append({"depth": d, "m": int(pk.m), "H": int(pk.H)})
    return rows, fns


def fit_handles(rows, best, c_part):
    """c_hh from the top parts' times: t - c_part = c_b m + c_hh H^2 (relative least squares)."""
    A = np.array([[r["m"], r["H"] ** 2] for r in rows], dtype=np.float64)
    y = np.asarray(best) - c_part
    w = 1.0 / np.maximum(y, 1e-9)
    coef = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)[0]
    for r, t in zip(rows, best):
        r["seconds"] = float(t)
    return max(float(coef[1]), 0.0)


def kernel_items(family, n, ranks):
    """Items for one family at n bodies: every part of SerialEngine.for_ranks(model, R) for R = 1
    and ``ranks`` (each timed as MPIEngine runs it), ABA, and the qdd placement on rank 0."""
    import partree
    from partree.parallel import SerialEngine

    model = partree.resolve_model(SPECS[family].format(n=n))
    q, qd, tau = _state(model)
    engines = [SerialEngine.for_ranks(model, 1)] + [SerialEngine.for_ranks(model, R) for R in ranks]
    fns, rows = [], []
    for R, eng in zip((1,) + tuple(ranks), engines):
        steps = _part_steps(eng, q, qd, tau)
        for row, f in zip(_part_rows(eng), steps):
            row["R"] = R
            rows.append(row)
            fns.append(f)
    fns.append(lambda: partree.aba(model, q, qd, tau))
    # qdd placement on rank 0 (MPIEngine._fd with gather): qdd[index] = buffer, rank-major order
    eng2 = engines[1]
    perm = np.argsort(eng2.owner, kind="stable")
    idx = np.concatenate([np.arange(model.nv)[eng2.parts[k].vix] for k in perm])
    buf = np.arange(model.nv, dtype=np.float64)
    out = np.empty(model.nv)

    def place():
        out[idx] = buf
    fns.append(place)
    return rows, fns


def _fit_plain_path(rows, t, c_part, c_hh):
    """(c_plain, c_path) from the multi-rank parts' times t (one round); c_path nan when the parts
    have too few path bodies to resolve it."""
    multi = [i for i, r in enumerate(rows) if r["R"] > 1]
    y = np.array([t[i] - c_part - c_hh * rows[i]["H"] ** 2 for i in multi])
    plain = np.array([rows[i]["m"] - rows[i]["p"] for i in multi], dtype=np.float64)
    path = np.array([rows[i]["p"] for i in multi], dtype=np.float64)
    w = 1.0 / np.array([rows[i]["m"] for i in multi], dtype=np.float64)
    if path.sum() / (plain.sum() + path.sum()) > 0.05:
        a, b = np.linalg.lstsq(np.stack((plain * w, path * w), 1), y * w, rcond=None)[0]
        return float(a), float(b)
    return float(np.sum(y * w) / np.sum((plain + path) * w)), float("nan")


def fit_kernels(n, rows, T, c_part, c_hh):
    """Per-body costs of one family at n bodies from its items' times T (rounds, items), each item
    its best over the rounds: c_serial (the one-part engine), c_plain and c_path fitted on the
    multi-rank parts; ABA and the placement per entry.  The same fit round by round, as ratios to
    that round's one-part engine, is kept to show the noise (``ratio_*_rounds``)."""
    best = T.min(axis=0)
    for r, t in zip(rows, best):
        r["seconds"] = float(t)
    t_aba, t_place = float(best[-2]), float(best[-1])
    c_serial = rows[0]["seconds"] / n
    c_plain_fit, c_path_fit = _fit_plain_path(rows, best, c_part, c_hh)
    ratios = np.array([np.array(_fit_plain_path(rows, t, c_part, c_hh)) / (t[0] / n) for t in T])
    path = sum(r["p"] for r in rows if r["R"] > 1)
    total = sum(r["m"] for r in rows if r["R"] > 1)
    return {"n": n, "c_serial": c_serial, "c_plain_fit": c_plain_fit, "c_path_fit": c_path_fit,
            "ratio_plain_rounds": ratios[:, 0].tolist(), "ratio_path_rounds": ratios[:, 1].tolist(),
            "c_part": c_part, "c_hh": c_hh, "c_place": t_place / n, "aba_seconds": t_aba,
            "aba_per_body": t_aba / n, "path_share": path / total, "parts": rows}


def finish_kernels(kern):
    """Clamp the fitted costs (c_plain >= c_serial, c_path >= c_plain: the model takes no body to be
    cheaper in a decomposition than in the one-part engine, so its efficiency cannot exceed 1) and
    give the binary tree, whose few path bodies leave c_path unresolved, the chain's path ratio at
    the same size."""
    for fam in kern:
        for n, k in kern[fam].items():
            k["c_plain"] = max(k["c_plain_fit"], k["c_serial"])
            if math.isnan(k["c_path_fit"]):
                ch = kern.get("chain", {}).get(n)
                ratio = ch["c_path"] / ch["c_plain"] if ch else 1.12
                k["c_path"] = k["c_plain"] * ratio
                k["c_path_from"] = "chain's c_path / c_plain at the same size"
            else:
                k["c_path"] = max(k["c_path_fit"], k["c_plain"])
                k["c_path_from"] = "fit"
            k["path_weight_measured"] = k["c_path"] / k["c_plain"] - 1.0
    return kern


def _synthetic_tree(shape, P):
    """(part_parent, hidx, nh) of a synthetic parts tree: 'chain', 'binary' (heap order), 'forest'
    (every part hangs from the base) or 'star' (part 0 with P - 1 handles, one leaf part on each)."""
    pp = -np.ones(P, dtype=np.int64)
    hidx = -np.ones(P, dtype=np.int64)
    if shape == "chain":
        pp[1:] = np.arange(P - 1)
        hidx[1:] = 0
    elif shape == "binary":
        k = np.arange(1, P)
        pp[1:] = (k - 1) // 2
        hidx[1:] = (k - 1) % 2
    elif shape == "star":
        pp[1:] = 0
        hidx[1:] = np.arange(P - 1)
    nh = np.bincount(pp[pp >= 0], minlength=P).astype(np.int64)
    return pp, hidx, nh


def _synthetic_messages(nh, rng):
    """Velocity and reduction buffers of P parts (in part order), well-conditioned: rotations the
    identity, M symmetric positive definite, Lam small."""
    from partree.parallel import messages as msg

    vel, red = [], []
    for H in nh:
        H = int(H)
        TE = np.tile(np.eye(3), (H, 1, 1))
        vel.append(msg.pack_velocity(TE, rng.normal(size=(H, 3)), rng.normal(size=(H, 6))))
        A = rng.normal(size=(6, 6))
        M = A @ A.T + 6 * np.eye(6)
        Kt = 0.1 * rng.normal(size=(H, 6, 6))
        B = 0.01 * rng.normal(size=(6 * H, 6 * H))
        Lam = (B @ B.T + 0.01 * np.eye(6 * H)).reshape(H, 6, H, 6).transpose(0, 2, 1, 3).copy()
        red.append(msg.pack_reduction(M, rng.normal(size=6), Kt, Lam, rng.normal(size=(H, 6))))
    return vel, red


def root_round(tree, offsets, total, allv, allr, a0):
    """Rank 0's work in one MPIEngine evaluation with the flat root (evaluate_local, its root
    branches as built): the compiled composition of the incoming velocities on the gathered
    velocity buffer as it arrives (``root.compose_packed``) and their rank-major copy, the
    compiled solve on the gathered reduction buffer (``root.solve_packed``) and the packed
    solutions (``root.pack_solutions``)."""
    from partree.parallel import root as R

    v_in = R.compose_packed(tree, allv, offsets["vel"])
    np.ascontiguousarray(v_in).ravel()
    a_in, g = R.solve_packed(tree, allr, offsets["red"], a0)
    return R.pack_solutions(tree, a_in, g, offsets["sol"], total)


def root_item(shape, P, rng):
    """A callable doing rank 0's root work for a synthetic parts tree of P parts."""
    from partree.parallel import messages as msg
    from partree.parallel import root as R

    pp, hidx, nh = _synthetic_tree(shape, P)
    tree = R.PartsTree(part_parent=pp, hidx=hidx, nh=nh)
    vel, red = _synthetic_messages(nh, rng)
    offsets = {key: np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
               for key, lens in (("vel", msg.velocity_len(nh)), ("red", msg.reduction_len(nh)),
                                 ("sol", msg.solution_len(nh)))}
    total = int(np.sum(msg.solution_len(nh)))
    allv, allr = np.concatenate(vel), np.concatenate(red)
    a0 = np.array([0, 0, 0, 0, 0, 9.81])
    return lambda: root_round(tree, offsets, total, allv, allr, a0)


def tree_root_item(shape, P, rng, fanin=2):
    """A callable doing the hierarchical root's work in one process for a synthetic parts tree of
    P parts (``hierarchical_root.compose_velocities`` and ``solve``: every node's merge and
    split), and the plan's number of nodes."""
    from partree.parallel import hierarchical_root as HR
    from partree.parallel import messages as msg
    from partree.parallel import root as R

    pp, hidx, nh = _synthetic_tree(shape, P)
    tree = R.PartsTree(part_parent=pp, hidx=hidx, nh=nh)
    vel, red = _synthetic_messages(nh, rng)
    vel = [msg.unpack_velocity(b, int(h)) for b, h in zip(vel, nh)]
    red = [msg.unpack_reduction(b, int(h)) for b, h in zip(red, nh)]
    plan = HR.make_plan(tree, fanin=fanin)
    a0 = np.array([0, 0, 0, 0, 0, 9.81])

    def run():
        HR.compose_velocities(tree, vel, plan=plan)
        HR.solve(tree, red, a0, plan=plan)
    return run, len(plan.nodes)


def tree_root_items(Ps, fanin=2):
    """Items: the hierarchical root on synthetic chains of P parts (groups of one entry and one
    handle, as the model assumes)."""
    rng = np.random.default_rng(2)
    rows, fns = [], []
    for P in Ps:
        fn, nodes = tree_root_item("chain", P, rng, fanin)
        rows.append({"shape": "chain", "P": P, "nodes": nodes, "fanin": fanin})
        fns.append(fn)
    return rows, fns


def fit_tree_root(rows, best):
    """The time per node of the hierarchical root's plan (merge and split, both rounds): the
    median over the chains of their time over their nodes."""
    for r, t in zip(rows, best):
        r["seconds"] = float(t)
        r["per_node"] = float(t) / r["nodes"]
    return float(np.median([r["per_node"] for r in rows]))


def recalibrate_root(cal, quick, log, rounds=None, fanin=2):
    """Time the root alone again (the compiled flat root's synthetic trees and stars, and the
    hierarchical root's chains), side by side, and put the fits into ``cal['root']``."""
    rounds = rounds or (3 if quick else 9)
    Ps = (10, 100, 1000) if quick else (10, 100, 1000, 10000)
    stars = (2, 4, 16, 64) if quick else (2, 4, 8, 16, 32, 64, 128, 256, 512)
    flat_rows, flat_fns = root_items(Ps, stars)
    tree_rows, tree_fns = tree_root_items(Ps, fanin)
    for f in flat_fns + tree_fns:          # compile and warm
        f()
    t1 = time.perf_counter()
    best = _times_interleaved(flat_fns + tree_fns, rounds).min(axis=0)
    cal["root"] = fit_root(flat_rows, best[:len(flat_fns)])
    cal["root"]["tree_node"] = fit_tree_root(tree_rows, best[len(flat_fns):])
    cal["root"]["tree_rows"] = tree_rows
    cal["root"]["recalibrated"] = {"machine": _machine(), "rounds": rounds, "load_average": _load()}
    log(f"root timed again in {time.perf_counter() - t1:.0f} s (best of {rounds} rounds): hierarchical root "
        f"{cal['root']['tree_node'] * 1e6:.1f} us per plan node")


def root_items(Ps, stars):
    """Items: synthetic parts trees (chain, binary tree, forest) of P parts, and stars of H handles."""
    rng = np.random.default_rng(1)
    rows, fns = [], []
    for shape in ("chain", "binary", "forest"):
        for P in Ps:
            rows.append({"shape": shape, "P": P})
            fns.append(root_item(shape, P, rng))
    for H in stars:
        rows.append({"shape": "star", "P": H + 1, "H": H})
        fns.append(root_item("star", H + 1, rng))
    return rows, fns


def root_features(shape, P):
    """[1, P, parts with handles, sum H, sum H^2, sum H^3] of a synthetic parts tree: the root's
    time is linear in the coefficients over these."""
    _, _, nh = _synthetic_tree(shape, P)
    nh = nh.astype(np.float64)
    return [1.0, P, np.count_nonzero(nh), nh.sum(), (nh ** 2).sum(), (nh ** 3).sum()]


def fit_root(rows, best):
    """The coefficients [z, a, e, b, c, d] of T_root = z + sum_k c_root(H_k) (relative errors,
    non-negative, so that the root's time grows with P and H), fitted to every tree and star at
    once; each shape's time per part (slope over P) for the record."""
    from scipy.optimize import nnls

    for r, t in zip(rows, best):
        r["seconds"] = float(t)
    A = np.array([root_features(r["shape"], r["P"]) for r in rows])
    y = np.array([r["seconds"] for r in rows])
    coef = nnls(A / y[:, None], np.ones_like(y))[0]
    fit = A @ coef
    for r, f in zip(rows, fit):
        r["predicted"] = float(f)
    by = {}
    for r in rows:
        by.setdefault(r["shape"], []).append(r)
    slope = {s: float(np.polyfit([r["P"] for r in v], [r["seconds"] for r in v], 1)[0])
             for s, v in by.items() if s != "star"}
    return {"coef": [float(x) for x in coef], "trees": rows, "slopes": slope,
            "max_fit_error": float(np.max(np.abs(fit / y - 1)))}


def calibrate_shape(n, ranks):
    """The engine's partitions of the binary tree (and, as a check of chain_parts, the chain) at n
    bodies for R in ``ranks``: parts, top-part handles, path bodies, rank imbalance; fitted per rank."""
    import partree
    from partree.parallel import root as R
    from partree.parallel.partition import make_partition, on_path_mask

    out = {}
    for fam in SPECS:
        model = partree.resolve_model(SPECS[fam].format(n=n))
        rows = []
        for Rr in ranks:
            pt = make_partition(model, None, nranks=Rr)
            nh = R.PartsTree.from_partition(pt).nh
            on = on_path_mask(model.parent, pt)
            loads = pt.rank_loads(Rr)
            rows.append({"R": Rr, "nparts": int(pt.nparts), "h_top": int(nh.max()),
                         "sum_h2_rest": int((nh.astype(np.int64) ** 2).sum() - nh.max() ** 2),
                         "path": int(on.sum()), "depth": int(pt.depth),
                         "imbalance": float(loads.max() / loads.mean())})
        out[fam] = {"rows": rows}
    rows = out["binary"]["rows"]
    Rs = np.array([r["R"] for r in rows], dtype=np.float64)
    big = Rs >= 8 if np.any(Rs >= 8) else Rs > 0
    out["binary"].update({
        "rho": float(np.mean([r["nparts"] / r["R"] for r, b in zip(rows, big) if b])),
        "h_top": float(np.sum([r["h_top"] for r, b in zip(rows, big) if b]) / Rs[big].sum()),
        "path_per_part": float(np.sum([r["path"] - 2 * r["h_top"] for r in rows]) /
                               max(1, np.sum([r["nparts"] - 1 for r in rows]))),
        "imbalance": float(max(r["imbalance"] for r in rows))})
    out["binary"]["path_per_part"] = max(out["binary"]["path_per_part"], 0.0)
    return out


# ---------------------------------------------------------------------------- network (MPI)
def _mpiexec():
    exe = Path(sys.executable).parent / "mpiexec"
    return str(exe) if exe.exists() else shutil.which("mpiexec")


def network_worker(quick):
    """Under mpiexec: ping-pong, the receive gap, Gatherv / Scatterv; JSON on rank 0's stdout."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    res = {"ranks": size}
    nb = 10 if quick else 30

    def best_of(fn, k):
        """Best of nb short blocks of k calls (per call); every rank takes part."""
        best = np.inf
        fn(1)
        for _ in range(nb):
            comm.Barrier()
            t0 = time.perf_counter()
            fn(k)
            best = min(best, (time.perf_counter() - t0) / k)
        return best

    if size == 2:
        pp = []
        top = 1 << (16 if quick else 24)
        s = 8
        while s <= top:
            buf = np.zeros(s // 8)
            iters = max(5, min(400, (16 << 20) // s)) // (4 if quick else 1) + 2
            best = np.inf
            comm.Barrier()
            for i in range(iters):                # one round trip at a time: the best is the latency
                t0 = time.perf_counter()
                if rank == 0:
                    comm.Send(buf, dest=1)
                    comm.Recv(buf, source=1)
                else:
                    comm.Recv(buf, source=0)
                    comm.Send(buf, dest=0)
                if i:
                    best = min(best, time.perf_counter() - t0)
            pp.append({"bytes": s, "seconds": comm.bcast(best / 2, root=0), "round_trips": iters - 1})
            s *= 8
        res["pingpong"] = pp
        # a stream of K messages of 1 KiB from rank 1, received one after another on rank 0: the gap
        K = 50
        buf = np.zeros(128)

        def stream(k):
            for _ in range(k):
                if rank == 1:
                    reqs = [comm.Isend(buf, dest=0, tag=1) for _ in range(K)]
                    MPI.Request.Waitall(reqs)
                else:
                    for _ in range(K):
                        comm.Recv(buf, source=1, tag=1)
        res["stream_seconds_per_message"] = comm.bcast(best_of(stream, 2) / K, root=0)
    # Gatherv / Scatterv of the engine's message sizes (one chain part per rank: H = 1)
    coll = []
    for doubles in (18, 6, 120, 12, 6000, 600000):
        send = np.zeros(doubles)
        recv = np.zeros(doubles * size)
        counts = [doubles] * size
        displs = [doubles * r for r in range(size)]

        def gv(k, send=send, recv=recv, counts=counts, displs=displs):
            for _ in range(k):
                comm.Gatherv(send, [recv, (counts, displs)] if rank == 0 else None, root=0)

        def sv(k, send=send, recv=recv, counts=counts, displs=displs):
            for _ in range(k):
                comm.Scatterv([recv, (counts, displs)] if rank == 0 else None, send, root=0)
        k = 20 if doubles < 10000 else 2
        tg = best_of(gv, k)
        ts = best_of(sv, k)
        coll.append({"doubles_per_rank": doubles, "gatherv": comm.bcast(tg if rank == 0 else None, root=0),
                     "scatterv": comm.bcast(ts if rank == 0 else None, root=0)})
    res["collectives"] = coll
    if rank == 0:
        print("SCALING_MODEL_NETWORK " + json.dumps(res), flush=True)


def run_network(nranks, quick, timeout=300):
    """Run network_worker under ``mpiexec -n nranks``; None when that is not possible."""
    exe = _mpiexec()
    if exe is None:
        return None
    cmd = [exe, "-n", str(nranks), sys.executable, str(Path(__file__).resolve()), "--worker", "network"]
    if quick:
        cmd.append("--quick")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in p.stdout.splitlines():
        if line.startswith("SCALING_MODEL_NETWORK "):
            return json.loads(line.split(" ", 1)[1])
    return None


def fit_network(two, four=None):
    """alpha, beta and the gap from the 2-rank measurements; the 4-rank collectives kept for the check."""
    if two is None or "pingpong" not in two:
        return dict(FALLBACK_NET)
    pp = two["pingpong"]
    alpha = min(r["seconds"] for r in pp if r["bytes"] <= 64)
    big = [r for r in pp if r["bytes"] >= 1 << 20] or pp[-2:]
    beta = float(np.median([r["bytes"] / max(r["seconds"] - alpha, 1e-12) for r in big]))
    gap = float(two.get("stream_seconds_per_message", alpha))
    net = {"alpha": float(alpha), "beta": beta, "gap": gap, "source": "mpiexec -n 2 on this machine",
           "pingpong": pp, "collectives_2": two.get("collectives")}
    if four is not None:
        net["collectives_4"] = four.get("collectives")
    return net


def _env():
    return dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                MKL_NUM_THREADS="1")


# ---------------------------------------------------------------------------- validation
def bench_job(R, spec, repeat, timeout=900):
    """One fresh ``mpiexec -n R partree bench`` job (its JSON), None on failure."""
    exe = _mpiexec()
    if exe is None:
        return None
    cmd = [exe, "-n", str(R), sys.executable, "-m", "partree", "bench", "--backend", "mpi", "--model", spec, "--json",
           "--repeat", str(repeat), "--residual", "none"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=str(ROOT))
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [s for s in p.stdout.splitlines() if s.startswith("{")]
    return json.loads(lines[-1]) if p.returncode == 0 and lines else None


def engine_parts(family, n, R):
    """The engine's own partition for R ranks as the model's input (m, p, H, owner per part)."""
    import partree
    from partree.parallel import root as Rt
    from partree.parallel.partition import make_partition, on_path_mask

    model = partree.resolve_model(SPECS[family].format(n=n))
    pt = make_partition(model, None, nranks=R) if R > 1 else make_partition(model, 1)
    on = on_path_mask(model.parent, pt)
    return {"m": pt.sizes.astype(np.float64), "p": np.bincount(pt.part_of, weights=on, minlength=pt.nparts),
            "H": Rt.PartsTree.from_partition(pt).nh, "owner": np.asarray(pt.owner_for(R) if R > 1 else
                                                                           np.zeros(pt.nparts, dtype=np.int64))}


def validate(cal, sizes, pairs, repeat, cores, log, over=4, over_sizes=None):
    """Fresh jobs, R = 1 and R = 2 alternating (``pairs`` pairs per point), plus one job on ``over``
    ranks (oversubscribed: a check of the message terms, not of the time) at ``over_sizes``; the
    best job per point; the model's prediction from the engine's own partition.  Also each rank's
    own work (its parts' velocity, reduce and solve phases, best over the jobs) against the model's
    rank loads, which the waits and the messages do not enter."""
    rows = []
    over_sizes = sizes[:1] if over_sizes is None else over_sizes
    for fam in SPECS:
        for n in sizes:
            spec = SPECS[fam].format(n=n)
            ranks = (1, 2) + ((over,) if over and n in over_sizes else ())
            jobs = {R: [] for R in ranks}
            loads = {R: [] for R in ranks}
            for i in range(pairs):
                for R in ranks:
                    if R > 2 and i:
                        continue
                    loads[R].append(_load())
                    j = bench_job(R, spec, repeat)
                    if j is not None:
                        jobs[R].append(j)
            for R in ranks:
                if not jobs[R]:
                    log(f"  {fam} n={n} R={R}: no job succeeded")
                    continue
                parts = engine_parts(fam, n, R)
                kern = kernels_for(cal, fam, n)
                pr = predict_parts(parts, R, kern, cal["root"], cal["network"], "flat", gather=True, cores=cores)
                meas = min(x["seconds_per_eval"] for x in jobs[R])
                meas_g = min(x.get("seconds_per_eval_gathered", np.inf) for x in jobs[R])
                phases = [x.get("phase_seconds_per_rank") or [] for x in jobs[R]]
                own = [min(sum(ph[r].get(k, 0.0) for k in ("local_velocity", "local_reduce", "local_solve"))
                           for ph in phases if len(ph) > r) for r in range(R)] if all(phases) else []
                root_meas = min(ph[0].get("root_solve", np.nan) for ph in phases) if all(phases) else float("nan")
                bytes_meas = jobs[R][0]["bytes_per_eval"]
                bytes_pred = int(sum(pr.get("bytes", {}).values()))
                row = {"family": fam, "n": n, "R": R, "parts": jobs[R][0]["parts"], "jobs": len(jobs[R]),
                       "load_average_before_jobs": loads[R],
                       "measured": meas, "all_measured": [x["seconds_per_eval"] for x in jobs[R]],
                       "predicted": pr["total"], "error": pr["total"] / meas - 1.0,
                       "measured_gathered": meas_g, "predicted_gathered": pr["total_gathered"],
                       "error_gathered": pr["total_gathered"] / meas_g - 1.0,
                       "rank_work_measured": own, "rank_work_predicted": pr["loads"],
                       "root_solve_measured": root_meas, "root_predicted": pr["root"],
                       "bytes_measured": bytes_meas, "bytes_predicted": bytes_pred,
                       "terms": {k: pr[k] for k in ("compute", "messages", "root")},
                       "oversubscribed": R > cores}
                rows.append(row)
    for r in rows:
        one = [x for x in rows if x["family"] == r["family"] and x["n"] == r["n"] and x["R"] == 1]
        if one and r["R"] > 1:
            r["speedup_measured"] = one[0]["measured"] / r["measured"]
            r["speedup_predicted"] = one[0]["predicted"] / r["predicted"]
            r["speedup_error"] = r["speedup_predicted"] / r["speedup_measured"] - 1.0
    return rows


# ---------------------------------------------------------------------------- earlier measurements
#: docs/performance.md, 2026-11-22: 16-core Xeon, N = 1e7, autotree bf=1 (chain) and bf=2 (binary),
#: times with qdd gathered on rank 0 every evaluation (seconds_per_eval_gathered)
SIXTEEN = {"chain": {1: 3.199, 2: 1.801, 4: 1.171, 8: 0.604, 16: 0.433},
           "binary": {1: 2.689, 2: 1.631, 4: 0.865, 8: 0.609, 16: 0.360}}
#: docs/performance.md, 2026-11-27: 16-core Xeon (another machine of the same description), N = 1e7,
#: ranks pinned (mpiexec -bind-to core), qdd left on the ranks (seconds_per_eval); R = 1 is the best
#: of the job's two timed loops (at one rank they compute the same thing)
SIXTEEN_PINNED = {"chain": {1: 3.256, 2: 2.373, 4: 1.214, 8: 0.765, 16: 0.419},
                  "binary": {1: 3.178, 2: 2.280, 4: 1.181, 8: 0.661, 16: 0.372}}
#: the same runs: the mean over the ranks of each rank's own kernel seconds (velocity, reduction,
#: back-substitution; phase_seconds_per_rank of the median repeat), from which the slowdown of a
#: body when R ranks run at once is read: s(R) = R * own_mean / T(1), less the path bodies' share
SIXTEEN_PINNED_OWN_MEAN = {"chain": {2: 2.183, 4: 1.127, 8: 0.661, 16: 0.410},
                           "binary": {2: 2.156, 4: 0.935, 8: 0.504, 16: 0.282}}
#: docs/performance.md, 2026-11-23: the same decomposition at 16 ranks timed part by part in one
#: process (2-core machine, N = 1e6): the ideal speed-up ABA / slowest rank
SIXTEEN_IDEAL = {"chain": 13.7, "binary": 15.6}
#: docs/performance.md (2-core machine, N = 1e7, commit e6a2f0e): 1 and 2 ranks, qdd left on the ranks
TWO_CORE_1E7 = {"chain": {1: 2.214, 2: 1.245}, "binary": {1: 2.491, 2: 1.399}}
#: docs/performance.md, Summary (2-core machine, 2026-11-25): 2-rank speed-up at N = 1e6, best
#: against best of alternating 1-rank and 2-rank jobs, two runs each
TWO_CORE_1E6_SPEEDUP = {"chain": (1.80, 1.81), "binary": (1.84, 1.92)}


def _scaled(k, s):
    """Kernel costs ``k`` with every per-body and per-part cost multiplied by s (another machine)."""
    return {**k, **{x: k[x] * s for x in ("c_serial", "c_plain", "c_path", "c_part", "c_hh")}}


def compare_earlier(cal):
    """The model against the recorded points: the per-body cost set from each run's own 1-rank time
    (each machine's), every ratio and the root and network costs from this calibration."""
    out = {"sixteen_core": [], "sixteen_core_pinned": [], "two_core_1e7": [], "ideal_16": {},
           "two_core_1e6_speedup": []}
    for fam, sp in TWO_CORE_1E6_SPEEDUP.items():
        pred = predict(fam, 10**6, 1, cal)["total"] / predict(fam, 10**6, 2, cal)["total"]
        out["two_core_1e6_speedup"].append({"family": fam, "measured": list(sp), "predicted": pred,
                                            "error": pred / float(np.mean(sp)) - 1.0})
    N = 10**7
    for fam, pts in SIXTEEN.items():
        k0 = kernels_for(cal, fam, N)
        c_serial = (pts[1] - N * k0["c_place"]) / N
        s = c_serial / k0["c_serial"]
        c = dict(cal)
        c["kernels"] = {fam: {str(N): _scaled(k0, s)}}
        for R, t in pts.items():
            pr = predict(fam, N, R, c, "flat", gather=True)
            out["sixteen_core"].append({"family": fam, "R": R, "measured": t, "predicted": pr["total_gathered"],
                                        "error": pr["total_gathered"] / t - 1.0,
                                        "efficiency_measured": pts[1] / (R * t),
                                        "efficiency_predicted": efficiency(predict(fam, N, 1, c, gather=True)["total_gathered"],
                                                                           pr["total_gathered"], R),
                                        "gather": pr["gather"], "compute": pr["compute"], "root": pr["root"],
                                        "messages": pr["messages"]})
    for fam, pts in SIXTEEN_PINNED.items():
        k0 = kernels_for(cal, fam, N)
        s = pts[1] / N / k0["c_serial"]
        c = dict(cal)
        c["kernels"] = {fam: {str(N): _scaled(k0, s)}}
        t1 = predict(fam, N, 1, c)["total"]
        for R, t in pts.items():
            pr = predict(fam, N, R, c, "flat")
            row = {"family": fam, "R": R, "measured": t, "predicted": pr["total"], "error": pr["total"] / t - 1.0,
                   "efficiency_measured": pts[1] / (R * t), "efficiency_predicted": efficiency(t1, pr["total"], R),
                   "compute": pr["compute"], "root": pr["root"], "messages": pr["messages"]}
            if R > 1:
                # what the model leaves out: a body's cost when R ranks run at once.  The model's own
                # mean rank load (path bodies included) against the ranks' measured mean own time
                slow = SIXTEEN_PINNED_OWN_MEAN[fam][R] / float(np.mean(pr["loads"]))
                row["slowdown_together"] = slow
                row["predicted_with_slowdown"] = pr["compute"] * slow + pr["messages"] + pr["root"]
                row["error_with_slowdown"] = row["predicted_with_slowdown"] / t - 1.0
            out["sixteen_core_pinned"].append(row)
    for fam in SIXTEEN:
        t16 = predict(fam, 10**6, 16, cal)["compute"]
        out["ideal_16"][fam] = {"recorded": SIXTEEN_IDEAL[fam],
                                "model_compute_only": predict(fam, 10**6, 1, cal)["total"] / t16}
    for fam, pts in TWO_CORE_1E7.items():
        k0 = kernels_for(cal, fam, N)
        s = pts[1] / N / k0["c_serial"]
        c = dict(cal)
        c["kernels"] = {fam: {str(N): _scaled(k0, s)}}
        pr = predict(fam, N, 2, c)
        out["two_core_1e7"].append({"family": fam, "R": 2, "measured": pts[2], "predicted": pr["total"],
                                    "error": pr["total"] / pts[2] - 1.0, "speedup_measured": pts[1] / pts[2],
                                    "speedup_predicted": pts[1] / pr["total"]})
    return out


# ---------------------------------------------------------------------------- plot
def plot(cv, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Rs = np.array(cv["R"])
    fig, axes = plt.subplots(2, 2, figsize=(9.5, 6.8), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, fam in enumerate(("chain", "binary")):
        for i, N in enumerate(cv["N"]):
            for kind, ls in (("flat", "-"), ("hierarchical", "--")):
                row = cv["families"][fam][kind][str(N)]
                lab = f"N = 1e{int(round(math.log10(N)))}, {'flat root' if kind == 'flat' else 'hierarchical root'}"
                axes[0, j].loglog(Rs, row["seconds"], ls, color=colors[i], label=lab if j == 0 else None)
                axes[1, j].semilogx(Rs, row["efficiency"], ls, color=colors[i])
                if kind == "flat" and row["stops_at"]:
                    k = list(Rs).index(row["pays_to"])
                    axes[0, j].plot(Rs[k], row["seconds"][k], "o", color=colors[i], ms=4)
        axes[0, j].set_title(f"{fam}: predicted time per evaluation")
        axes[1, j].axhline(0.5, color="0.5", lw=0.8)
        axes[1, j].set_ylim(0, 1.05)
        axes[1, j].set_xlabel("ranks R")
        axes[1, j].set_title(f"{fam}: parallel efficiency T(1) / (R T(R))")
        axes[0, j].grid(True, which="major", alpha=0.3)
        axes[1, j].grid(True, which="major", alpha=0.3)
    axes[0, 0].set_ylabel("seconds")
    axes[1, 0].set_ylabel("efficiency")
    axes[0, 0].legend(fontsize=6.5, loc="lower left")
    fig.suptitle("partree parallel engine: calibrated model (dots: last R before the flat root stops paying)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


# ---------------------------------------------------------------------------- driver
def _machine():
    try:
        import numba
        nb = numba.__version__
    except ImportError:            # pragma: no cover
        nb = "?"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(ROOT), capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except OSError:
        commit = ""
    try:
        from mpi4py import MPI
        mpi = MPI.Get_library_version().splitlines()[0].strip()
    except Exception:              # noqa: BLE001  (mpi4py absent or broken: the model still runs)
        mpi = ""
    return {"python": platform.python_version(), "numpy": np.__version__, "numba": nb, "mpi": mpi,
            "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "platform": platform.platform(), "commit": commit}


def _load():
    """The 1-minute load average (other work on the machine), or None."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def calibrate(quick, log, rounds=None):
    """The whole calibration; returns the ``cal`` dict the model functions take.  Every timed item
    (the parts of every engine, ABA, the placement, the tiny parts, the top parts of many handles,
    the synthetic parts trees) is timed once per round, round after round, and keeps its best: all
    costs are measured side by side, in the same minutes of a shared machine."""
    from partree.parallel.partition import PATH_WEIGHT

    rounds = rounds or (3 if quick else 9)
    sizes = (20000,) if quick else (100000, 1000000)
    t0 = time.perf_counter()
    cal = {"path_weight": PATH_WEIGHT, "machine": _machine(), "quick": bool(quick), "rounds": rounds,
           "load_average": {"start": _load()}}
    warm_up()
    cal["compile_seconds"] = time.perf_counter() - t0
    log(f"compiled / loaded the kernels in {cal['compile_seconds']:.0f} s (not part of any figure)")
    t1 = time.perf_counter()
    groups = {"part": ([], part_overhead_items())}
    caps = handle_items(2**14 - 1 if quick else 2**17 - 1, (3, 4, 5, 6) if quick else (4, 5, 6, 7, 8))
    groups["caps"] = caps
    for fam in SPECS:
        for n in sizes:
            groups[(fam, n)] = kernel_items(fam, n, (2, 4))
    Ps = (10, 100, 1000) if quick else (10, 100, 1000, 10000)
    stars = (2, 4, 16, 64) if quick else (2, 4, 8, 16, 32, 64, 128, 256, 512)
    groups["root"] = root_items(Ps, stars)
    groups["tree_root"] = tree_root_items(Ps)
    fns, where = [], {}
    for key, (_, fs) in groups.items():
        where[key] = slice(len(fns), len(fns) + len(fs))
        fns.extend(fs)
    log(f"{len(fns)} items built in {time.perf_counter() - t1:.0f} s; timing {rounds} rounds")
    t1 = time.perf_counter()
    T = _times_interleaved(fns, rounds)
    best = T.min(axis=0)
    cal["timing_seconds"] = time.perf_counter() - t1
    cal["load_average"]["after_timing"] = _load()
    c_part = float(np.median(best[where["part"]]))
    c_hh = fit_handles(caps[0], best[where["caps"]], c_part)
    kern = {fam: {str(n): fit_kernels(n, groups[(fam, n)][0], T[:, where[(fam, n)]], c_part, c_hh) for n in sizes}
            for fam in SPECS}
    finish_kernels(kern)
    cal["kernels"] = kern
    cal["caps"] = caps[0]
    cal["root"] = fit_root(groups["root"][0], best[where["root"]])
    cal["root"]["tree_node"] = fit_tree_root(groups["tree_root"][0], best[where["tree_root"]])
    cal["root"]["tree_rows"] = groups["tree_root"][0]
    log(f"timed in {cal['timing_seconds']:.0f} s")
    del groups, fns
    t1 = time.perf_counter()
    shape_n = 20000 if quick else 1000000
    shape_R = (2, 4, 8, 16) if quick else (2, 4, 8, 16, 32, 64)
    cal["shape"] = calibrate_shape(shape_n, shape_R)
    cal["shape"]["n"] = shape_n
    log(f"partitions for R = {list(shape_R)} at n={shape_n} in {time.perf_counter() - t1:.0f} s")
    t1 = time.perf_counter()
    two = run_network(2, quick)
    four = None if quick or two is None else run_network(4, quick)
    cal["network"] = fit_network(two, four)
    cal["load_average"]["after_network"] = _load()
    log(f"network measured in {time.perf_counter() - t1:.0f} s")
    cal["calibration_seconds"] = time.perf_counter() - t0
    log(f"calibrated in {cal['calibration_seconds']:.0f} s")
    return cal


def summarize_calibration(cal, log):
    """The calibration's figures, one line each (what report.txt shows)."""
    k0 = next(iter(cal["kernels"]["chain"].values()))
    log(f"calibration ({'quick, ' if cal.get('quick') else ''}best of {cal.get('rounds')} rounds; "
        f"load average {', '.join(f'{v:.1f}' for v in cal.get('load_average', {}).values() if v is not None)}):")
    log(f"  c_part = {k0['c_part'] * 1e6:.1f} us per part; c_hh = {k0['c_hh'] * 1e9:.1f} ns per handle pair (top parts "
        f"of H = {[r['H'] for r in cal.get('caps', [])]})")
    for fam in SPECS:
        for n, k in cal["kernels"][fam].items():
            rp, rq = np.array(k.get("ratio_plain_rounds", [np.nan]), dtype=float), \
                np.array(k.get("ratio_path_rounds", [np.nan]), dtype=float)
            log(f"  {fam:6s} n={int(n):>8d}: c_serial {k['c_serial'] * 1e9:6.1f}  c_plain {k['c_plain'] * 1e9:6.1f} "
                f"(fit {k['c_plain_fit'] * 1e9:6.1f}; round by round {np.nanmin(rp):.2f}..{np.nanmax(rp):.2f} c_serial)  "
                f"c_path {k['c_path'] * 1e9:6.1f} ({k['c_path_from']}"
                + (f"; round by round {np.nanmin(rq):.2f}..{np.nanmax(rq):.2f}" if not np.isnan(rq).all() else "")
                + f")  ns/body; ABA {k['aba_per_body'] * 1e9:6.1f}; qdd placement {k['c_place'] * 1e9:.1f} ns/entry")
    r = cal["root"]
    log("  root per part (slope over P): " + ", ".join(f"{s} {v * 1e6:.1f} us" for s, v in r["slopes"].items())
        + "; stars (whole tree): " + ", ".join(f"H={x['H']}: {x['seconds'] * 1e3:.2f} ms (fit {x['predicted'] * 1e3:.2f})"
                                              for x in r["trees"] if x["shape"] == "star"))
    z_, a_, e_, b_, c_, d_ = r["coef"]
    log(f"  T_root = {z_ * 1e6:.1f} us + sum_k c_root(H_k), c_root(H) = {a_ * 1e6:.1f} us + {e_ * 1e6:.1f} us [H > 0] "
        f"+ {b_ * 1e6:.1f} us H + {c_ * 1e9:.1f} ns H^2 + {d_ * 1e9:.2f} ns H^3; largest misfit "
        f"{100 * r['max_fit_error']:.0f}%")
    if r.get("tree_node") is not None:
        log(f"  hierarchical root: {r['tree_node'] * 1e6:.1f} us per plan node (merge and split, both rounds; chains of "
            + ", ".join(f"P={x['P']}: {x['per_node'] * 1e6:.1f} us" for x in r.get("tree_rows", [])) + ")")
    b = cal["shape"]["binary"]
    log(f"  binary tree's partitions at n={cal['shape']['n']}: {b['rho']:.2f} parts per rank, top part "
        f"{b['h_top']:.3f} R handles, {b['path_per_part']:.1f} path bodies per part, rank imbalance {b['imbalance']:.4f}")
    net = cal["network"]
    log(f"  network ({net['source']}): alpha {net['alpha'] * 1e6:.2f} us, gap {net['gap'] * 1e6:.2f} us, "
        f"beta {net['beta'] / 1e9:.2f} GB/s")


def summarize_validation(rows, log):
    log("validation (fresh mpiexec -n R partree bench --backend mpi jobs; best job per point):")
    for row in rows:
        log(f"  {row['family']:6s} n={row['n']:>8d} R={row['R']} parts={row['parts']:3d}  measured "
            f"{row['measured'] * 1e3:8.2f} ms  predicted {row['predicted'] * 1e3:8.2f} ms  error "
            f"{100 * row['error']:+6.1f}%   gathered {row['measured_gathered'] * 1e3:8.2f} / "
            f"{row['predicted_gathered'] * 1e3:8.2f} ms ({100 * row['error_gathered']:+6.1f}%)  bytes "
            f"{row['bytes_measured']}/{row['bytes_predicted']}{'  (oversubscribed)' if row['oversubscribed'] else ''}")
        if row.get("rank_work_measured"):
            log("      each rank's own work, measured / predicted: " + ", ".join(
                f"{a * 1e3:.2f} / {b * 1e3:.2f} ms" for a, b in zip(row["rank_work_measured"], row["rank_work_predicted"])))


def apply_overrides(cal, a):
    net = cal["network"]
    if a.alpha_us is not None:
        net["alpha"] = a.alpha_us * 1e-6
    if a.gap_us is not None:
        net["gap"] = a.gap_us * 1e-6
    if a.beta_gbs is not None:
        net["beta"] = a.beta_gbs * 1e9
    if a.ns_per_body is not None:
        for fam in cal["kernels"]:
            for k in cal["kernels"][fam].values():
                s = a.ns_per_body * 1e-9 / k["c_serial"]
                for x in ("c_serial", "c_plain", "c_path", "c_part", "c_hh"):
                    k[x] *= s
    if any(x is not None for x in (a.alpha_us, a.gap_us, a.beta_gbs, a.ns_per_body)):
        net["source"] = net.get("source", "") + " (overridden on the command line)"


def report_curves(cv, log):
    for fam in SPECS:
        for kind in ("flat", "hierarchical"):
            for N in cv["N"]:
                row = cv["families"][fam][kind][str(N)]
                i = cv["R"].index(row["pays_to"])
                log(f"  {fam:6s} {kind:12s} N=1e{int(round(math.log10(N)))}: pays to R = {row['pays_to']:4d} "
                    f"(efficiency {row['efficiency'][i]:.2f}, {row['seconds'][i] * 1e3:9.3f} ms); "
                    f"{'stops at ' + str(row['stops_at']) + ': ' + row['why'] if row['stops_at'] else row['why']}; "
                    f"fastest at R = {row['best_R']}")


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a small calibration in seconds (N = 2e4, root to 1e3 parts, short ping-pong, no "
                         "validation jobs); writes only with --out")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"output folder (default {DEFAULT_OUT.relative_to(ROOT)}; --quick writes nothing without it)")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="take the calibration from a previous run's scaling_model.json instead of measuring")
    ap.add_argument("--recalibrate-root", action="store_true",
                    help="with --from-json: time the root alone again (the compiled flat root and the "
                         "hierarchical root) and keep the rest of the saved calibration")
    ap.add_argument("--no-validate", action="store_true", help="skip the mpiexec partree bench jobs")
    ap.add_argument("--validate", action="store_true",
                    help="run the validation jobs even with --from-json (checks a saved calibration now)")
    ap.add_argument("--pairs", type=int, default=2, help="validation: fresh jobs per point, R = 1 and 2 alternating "
                                                         "(default 2)")
    ap.add_argument("--repeat", type=int, default=5, help="validation: evaluations per job, best reported (default 5)")
    ap.add_argument("--no-oversubscribe", action="store_true",
                    help="validation: skip the job on twice as many ranks as cores (at N = 1e5)")
    ap.add_argument("--rounds", type=int, default=None, help="calibration: timing rounds, best of (default 9; quick 3)")
    ap.add_argument("--fanin", type=int, default=2, help="the hierarchical root's fan-in (default 2)")
    ap.add_argument("--alpha-us", type=float, default=None, help="override the message latency (microseconds)")
    ap.add_argument("--gap-us", type=float, default=None, help="override the per-message gap at the root (microseconds)")
    ap.add_argument("--beta-gbs", type=float, default=None, help="override the bandwidth (GB/s)")
    ap.add_argument("--ns-per-body", type=float, default=None,
                    help="override the one-rank cost per body (ns; your machine's: `partree bench` on one rank, "
                         "ns_per_body); every kernel cost is scaled by the same factor")
    ap.add_argument("--no-plot", action="store_true", help="write no PNG")
    ap.add_argument("--worker", choices=("network",), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker == "network":
        network_worker(a.quick)
        return 0
    out = a.out if a.out is not None else (None if a.quick else DEFAULT_OUT)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    t0 = time.perf_counter()
    log(f"scaling_model.py {'--quick ' if a.quick else ''}on {platform.node() and 'this machine'}: "
        f"{os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M')}")
    if a.from_json:
        saved = json.loads(a.from_json.read_text())
        cal = saved["calibration"]
        validation = saved.get("validation", [])
        measured = {"date": saved.get("date"), "command": saved.get("measured_by", saved.get("command"))}
        log(f"calibration from {a.from_json}: measured on {measured['date']} by `{measured['command']}`")
    else:
        cal = calibrate(a.quick, log, a.rounds)
        validation = []
        measured = {"date": time.strftime("%Y-%m-%d"), "command": " ".join(["scaling_model.py"] + (argv or sys.argv[1:]))}
    if a.recalibrate_root:
        if not a.from_json:
            ap.error("--recalibrate-root takes the rest of the calibration from --from-json")
        recalibrate_root(cal, a.quick, log, a.rounds, a.fanin)
        measured["root"] = {"date": time.strftime("%Y-%m-%d"),
                            "command": " ".join(["scaling_model.py"] + (argv or sys.argv[1:]))}
    apply_overrides(cal, a)
    summarize_calibration(cal, log)
    if (a.validate or (not a.from_json and not a.quick)) and not a.no_validate:
        log("validation jobs ...")
        cores = os.cpu_count() or 2
        validation = validate(cal, (100000, 1000000), a.pairs, a.repeat, cores, log,
                              over=0 if a.no_oversubscribe else 2 * cores)
    if validation:
        summarize_validation(validation, log)
    earlier = compare_earlier(cal)
    log("earlier measurements (docs/performance.md) against the model:")
    for r in earlier["sixteen_core"]:
        log(f"  16-core, N=1e7, {r['family']:6s} R={r['R']:2d}: measured {r['measured'] * 1e3:7.1f} ms, predicted "
            f"{r['predicted'] * 1e3:7.1f} ms ({100 * r['error']:+5.1f}%); efficiency {r['efficiency_measured']:.2f} "
            f"measured, {r['efficiency_predicted']:.2f} predicted")
    for r in earlier["sixteen_core_pinned"]:
        extra = (f"; with the measured slowdown of a body on {r['R']} busy ranks ({r['slowdown_together']:.2f}x) "
                 f"{r['predicted_with_slowdown'] * 1e3:.1f} ms ({100 * r['error_with_slowdown']:+5.1f}%)"
                 if "slowdown_together" in r else "")
        log(f"  16-core pinned, qdd on the ranks, N=1e7, {r['family']:6s} R={r['R']:2d}: measured "
            f"{r['measured'] * 1e3:7.1f} ms, predicted {r['predicted'] * 1e3:7.1f} ms ({100 * r['error']:+5.1f}%){extra}")
    for fam, r in earlier["ideal_16"].items():
        log(f"  16 ranks in one process, {fam}: recorded ideal speed-up {r['recorded']}x, model compute term "
            f"{r['model_compute_only']:.1f}x")
    for r in earlier["two_core_1e6_speedup"]:
        log(f"  2-core, N=1e6, {r['family']:6s} R=2 speed-up: measured {r['measured']}, predicted "
            f"{r['predicted']:.2f} ({100 * r['error']:+.1f}% against their mean)")
    for r in earlier["two_core_1e7"]:
        log(f"  2-core, N=1e7, {r['family']:6s} R=2: measured {r['measured'] * 1e3:.0f} ms, predicted "
            f"{r['predicted'] * 1e3:.0f} ms ({100 * r['error']:+.1f}%)")
    cv = curves(cal, fanin=a.fanin)
    log(f"curves (R = 1..{CURVE_R[-1]}; flat root and hierarchical root as built):")
    report_curves(cv, log)
    log(f"total {time.perf_counter() - t0:.0f} s")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        doc = {"date": measured["date"], "measured_by": measured["command"],
               "command": " ".join(["scaling_model.py"] + (argv or sys.argv[1:])),
               **({"root_measured": measured["root"]} if "root" in measured else {}),
               "calibration": cal, "validation": validation, "earlier": earlier, "curves": cv}
        (out / "scaling_model.json").write_text(json.dumps(_jsonable(doc), indent=1) + "\n")
        (out / "report.txt").write_text("\n".join(lines) + "\n")
        if not a.no_plot:
            plot(cv, out / "scaling_model.png")
        log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
