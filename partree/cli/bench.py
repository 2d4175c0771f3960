"""``partree bench``: time the parallel engine on a model, serial, MPI or Dask.

    partree bench --model SPEC [--backend serial|mpi|dask] [--parts P] [--repeat R] [--json]
    mpiexec -n 4 partree bench --model autotree:nb=1000000,bf=2 --json
    partree bench --model SPEC --quantity constraint-forces ...   (the constraint forces instead)

Reports the time per evaluation (best of R, after one warm-up, with the median's distance above
the best as the run's spread, flagged when over 10%; the result left where it is
computed, on the MPI ranks / Dask workers, as a distributed simulation leaves it, and alongside
the time with qdd collected on rank 0 / the client every evaluation), the time per body, the bytes
communicated per evaluation (boundary data of the engine, O(P) and independent of N; the
O(N) gather of qdd / the state slices sent to Dask workers are reported separately), the peak
memory (max RSS, VmHWM) of every rank / worker, under MPI every timed evaluation's phase times rank
by rank (each rank's own kernels, the root solve, and ``wait``: messages and waiting for the other
ranks; the fastest and the slowest evaluation are printed), and the residual against the serial
reference:
    aba:  |qdd - ABA| / |ABA|                  (default up to 2*10^6 bodies)
    rnea: |RNEA(q, qd, qdd) - tau| / (|tau| + |RNEA(q, qd, 0)|)   (the normwise backward error;
          default above that: the terms of M qdd + h = tau that cancel set its scale, and on a long
          chain |h| dwarfs |tau| by many orders)
With ``--quantity constraint-forces`` an evaluation is ``constraint_forces`` (qdd and every joint's
wrench, constraint and drive force; left on the ranks under MPI) and the residual compares them with
serial ``partree.cfa`` (kind 'cfa': the larger of the qdd and the joint-wrench relative errors) or,
for large models, adds to the RNEA backward error |F - F_RNEA(q, qd, qdd)| / (|F_RNEA(q, qd, qdd)| +
|F_RNEA(q, qd, 0)|) for the wrenches.
A model with closed loops is timed at its neutral configuration at rest, compared with what the
engine solves, serial ``partree.constrained_dynamics`` (redundant rows dropped; kind 'constrained':
qdd, and with ``--quantity constraint-forces`` the joint wrenches too), and ``--compare-aba`` times
that call.
Under mpiexec (more than one rank) the MPI backend is the default: every rank runs the command
and only rank 0 prints.  With --json one JSON object is printed on stdout.

``add_parser(subparsers)`` adds the command to the ``partree`` CLI; ``main(argv)`` runs it
stand-alone (``python -m partree.cli.bench --model ...``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

import numpy as np

from .common import count, nonneg_int

RESIDUAL_ABA_MAX_N = 2_000_000

#: the median evaluation this far above the best marks a run as noisy (a neighbour took the core)
NOISY_SPREAD = 0.10


# ---------------------------------------------------------------------------- helpers
def max_rss_bytes():
    """Peak resident set size of this process in bytes (VmHWM; ru_maxrss as a fallback)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if platform.system() == "Darwin" else r * 1024)


def _under_mpiexec():
    for key in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS"):
        v = os.environ.get(key)
        if v and key != "SLURM_NTASKS" and v.isdigit() and int(v) > 1:
            return True
    return False


def _state(model, seed):
    """A random configuration, velocity and joint forces; a model with closed loops at its neutral
    configuration and at rest (a random configuration would open its loops, and a random velocity
    would pull them apart), with random joint forces."""
    rng = np.random.default_rng(seed)
    if len(model.loops):
        return model.neutral(), np.zeros(model.nv), rng.normal(size=model.nv)
    return model.random_configuration(rng), model.random_velocity(rng), rng.normal(size=model.nv)


def _rel(x, ref):
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


def residual(model, q, qd, tau, qdd, kind="auto"):
    """(kind, value): the relative error of qdd against ABA, or the backward error through RNEA.
    ``qdd`` may also be a ``CFAResult`` (the constraint forces): kind 'aba' then compares qdd and
    the joint wrenches with serial ``partree.cfa`` (reported as kind 'cfa'), kind 'rnea' adds the
    wrenches' error against RNEA's wrenches of the same motion."""
    import partree

    res = None
    if not isinstance(qdd, np.ndarray):
        res, qdd = qdd, qdd.qdd
    if kind == "auto":
        kind = "aba" if model.n <= RESIDUAL_ABA_MAX_N else "rnea"
    if kind == "none":
        return "none", None
    if len(model.loops):
        # the tree's ABA and RNEA know nothing of the loops' forces: the serial closed-loop solve
        ref = serial_reference(model)(model, q, qd, tau)
        err = _rel(qdd, ref.qdd)
        if res is not None:
            err = max(err, _rel(res.joint_wrench, ref.joint_wrench))
        return "constrained", err
    if kind == "aba" and res is not None:
        ref = partree.cfa(model, q, qd, tau)
        return "cfa", max(_rel(qdd, ref.qdd), _rel(res.joint_wrench, ref.joint_wrench))
    if kind == "aba":
        return "aba", _rel(qdd, partree.aba(model, q, qd, tau))
    # the (n, 6) wrenches only where they are checked: at 10^7 bodies they are 480 MB each
    wr = res is not None
    t = partree.rnea(model, q, qd, qdd, return_wrenches=wr)
    h = partree.rnea(model, q, qd, np.zeros_like(qdd), return_wrenches=wr)
    (t, W), (h, W0) = (t, h) if wr else ((t, None), (h, None))
    err = float(np.linalg.norm(t - tau) / max(np.linalg.norm(tau) + np.linalg.norm(h), 1e-300))
    if wr:
        err = max(err, float(np.linalg.norm(res.joint_wrench - W)
                             / max(np.linalg.norm(W) + np.linalg.norm(W0), 1e-300)))
    return "rnea", err


def _wants_wrenches(a):
    return getattr(a, "quantity", "forward-dynamics") == "constraint-forces"


def serial_reference(model, wrenches=False):
    """The serial algorithm computing what the engine computes on ``model``: ABA (CFA for the
    wrenches), or ``constrained_dynamics`` with the redundant rows dropped for a model with
    closed loops (its result carries the joint wrenches too)."""
    import partree

    if len(model.loops):
        return lambda m, q, qd, tau: partree.constrained_dynamics(m, q, qd, tau, redundant="drop")
    return partree.cfa if wrenches else partree.aba


def _reference_name(model, wrenches):
    return "constrained" if len(model.loops) else ("cfa" if wrenches else "aba")


def _best(times):
    return float(min(times)) if times else float("nan")


def _fmt_bytes(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{int(b)} B"
        b /= 1024


# ---------------------------------------------------------------------------- backends
def _bench_serial(a, model, q, qd, tau):
    from ..parallel.serial import SerialEngine

    t0 = time.perf_counter()
    eng = SerialEngine(model, a.parts)
    setup = time.perf_counter() - t0
    evaluate = eng.constraint_forces if _wants_wrenches(a) else eng.forward_dynamics
    qdd = evaluate(q, qd, tau)
    times = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        qdd = evaluate(q, qd, tau)
        times.append(time.perf_counter() - t)
    nh = eng.tree.nh
    payload = int(8 * sum(18 * h + 6 + 42 + 36 * h + 36 * h * h + 6 * h + 6 + 6 * h for h in nh))
    return qdd, {"ranks": 1, "parts": eng.partition.nparts, "times": times, "setup_seconds": setup,
                 "bytes_per_eval": 0, "boundary_payload_bytes": payload, "gather_bytes_per_eval": 0,
                 "rss_bytes_per_rank": [max_rss_bytes()], "imbalance": eng.partition.imbalance}


def _bench_dask(a, model, q, qd, tau):
    from distributed import Client, LocalCluster

    from ..parallel.dask_backend import DaskEngine

    cluster = None
    if a.scheduler:
        client = Client(a.scheduler)
    else:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        t0 = time.perf_counter()
        eng = DaskEngine(model, client=client, parts=a.parts, channel=a.channel)
        setup = time.perf_counter() - t0
        # two ways of feeding the engine, timed interleaved: the state resident on the workers
        # (scattered once, as in a distributed simulation; qdd stays there as futures) and the
        # state sent from the client with every evaluation (qdd gathered back)
        wrenches = _wants_wrenches(a)
        state = eng.scatter_state(q, qd, tau)
        if wrenches:
            resident, on_client = (lambda: eng.constraint_forces_state(state, gather=False)), eng.constraint_forces
        else:
            resident, on_client = (lambda: eng.forward_dynamics_state(state, gather=False)), eng.forward_dynamics
        on_client(q, qd, tau)
        resident()
        times, times_client = [], []
        for k in range(a.repeat):
            t = time.perf_counter()
            futs = resident()
            times.append(time.perf_counter() - t)
            info = dict(eng.last_info)
            if k == a.repeat - 1:
                kept = futs.gather()            # (before the client-state evaluation below)
            t = time.perf_counter()
            qdd = on_client(q, qd, tau)
            times_client.append(time.perf_counter() - t)
            info_client = dict(eng.last_info)
        same = (np.array_equal(kept.joint_wrench, qdd.joint_wrench) and np.array_equal(kept.qdd, qdd.qdd)) \
            if wrenches else np.array_equal(kept, qdd)
        if not same:
            raise RuntimeError("Dask: the resident-state evaluation differs from the client-state one")
        state.release()
        del futs, state
        rss = client.run(max_rss_bytes)
        workers = len(client.scheduler_info()["workers"])
        eng.close()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return qdd, {"ranks": workers, "parts": eng.partition.nparts, "times": times, "setup_seconds": setup,
                 "times_client_state": times_client, "bytes_per_eval": info["boundary_bytes"],
                 "gather_bytes_per_eval": info_client["state_bytes"],
                 "rss_bytes_per_rank": [max_rss_bytes()] + [int(v) for _, v in sorted(rss.items())],
                 "rss_labels": ["client"] + sorted(rss), "imbalance": eng.partition.imbalance,
                 "rank_imbalance": _worker_imbalance(eng), "restarts": eng.restarts, "channel": a.channel}


def _worker_imbalance(eng):
    """Modelled work per worker, max / mean, under the engine's placement of the parts."""
    pt = eng.partition
    c = np.asarray(pt.costs if pt.costs is not None else pt.weights, dtype=float)
    ws = sorted(set(eng.workers))
    loads = np.array([c[[k for k, w in enumerate(eng.workers) if w == x]].sum() for x in ws])
    return float(loads.max() / loads.mean())


def _bench_mpi(a, model, q, qd, tau, comm):
    from ..parallel.mpi import MPIEngine

    # rank 0 passes its model; the others pass the spec, which they never build (distribute='root')
    eng = MPIEngine(model if comm.rank == 0 else a.model, comm=comm, parts=a.parts, gather=True, wait=a.wait)
    setup = comm.allreduce(eng.setup_time, op=_mpi_max())

    evaluate = eng.constraint_forces if _wants_wrenches(a) else eng.forward_dynamics

    def timed(gather, per_repeat=None):
        evaluate(q, qd, tau, gather=gather)          # warm-up
        times = []
        for _ in range(a.repeat):
            comm.Barrier()
            t = time.perf_counter()
            evaluate(q, qd, tau, gather=gather)
            comm.Barrier()
            times.append(time.perf_counter() - t)
            if per_repeat is not None:
                per_repeat.append(with_wait(eng.last_info["times"]))
        return times

    # the engine's evaluation: qdd (and the wrenches) stay on the ranks that own them, as in a
    # distributed simulation; then the same with the result collected on rank 0 every time (O(N) more)
    mine = []
    times = timed(False, mine)
    phases = comm.gather(mine[-1], root=0)
    phases_all = comm.gather(mine, root=0)
    times_g = timed(True)
    qdd = evaluate(q, qd, tau, gather=True)
    info = eng.last_info
    gather = comm.reduce(info["gather_bytes_rank"] if comm.rank else 0, root=0)
    rss = comm.gather(max_rss_bytes(), root=0)
    out = {"ranks": comm.size, "parts": eng.nparts, "times": times, "times_gathered": times_g, "setup_seconds": setup,
           "wait": a.wait}
    if comm.rank == 0:
        out.update({"bytes_per_eval": info["boundary_bytes"], "boundary_payload_bytes": info["boundary_payload_bytes"],
                    "gather_bytes_per_eval": int(gather), "rss_bytes_per_rank": [int(x) for x in rss],
                    "rank_imbalance": eng.imbalance,
                    "phase_seconds_per_rank": [{k: round(v, 6) for k, v in p.items()} for p in phases],
                    "phase_seconds_per_repeat": [[{k: round(v, 6) for k, v in p.items()} for p in rk]
                                                 for rk in zip(*phases_all)]})
    return qdd, out


def with_wait(t):
    """A rank's phase times of one evaluation with ``wait`` added: the evaluation's total less the
    rank's own work (its kernels, and the root solve on rank 0), i.e. the time spent in the
    engine's messages and waiting for the other ranks."""
    t = dict(t)
    own = sum(v for k, v in t.items() if k.startswith("local_") or k == "root_solve")
    if "total" in t:
        t["wait"] = max(t["total"] - own, 0.0)
    return t


def _mpi_max():
    from mpi4py import MPI

    return MPI.MAX


# ---------------------------------------------------------------------------- command
def cmd_bench(a):
    """Run the benchmark for parsed arguments ``a``; returns the exit code."""
    from ..specs import resolve_model

    from ..extras import require

    comm = None
    backend = a.backend or ("mpi" if _under_mpiexec() else "serial")
    if backend in ("mpi", "dask"):
        require("mpi4py" if backend == "mpi" else "distributed", f"the {backend.upper()} backend"
                if backend == "mpi" else "the Dask backend")
    if backend == "mpi":
        from mpi4py import MPI

        from ..parallel.mpi import AbortOnError

        comm = MPI.COMM_WORLD
    rank = 0 if comm is None else comm.rank
    if a.repeat < 1:
        raise ValueError("--repeat must be >= 1")
    guard = AbortOnError(comm) if comm is not None else _Null()
    with guard:
        from ..parallel import check_arguments

        t0 = time.perf_counter()
        model = None
        if rank == 0:
            model = resolve_model(a.model)
            q, qd, tau = _state(model, a.seed)
            check_arguments(model, q, qd, tau, a.parts, None, backend)
        t_build = time.perf_counter() - t0
        if comm is not None and comm.size > 1:
            # only rank 0 builds the model; the engine sends every rank its parts, and the
            # benchmark's state vectors are broadcast (they are full vectors on every rank)
            nq, nv = comm.bcast((model.nq, model.nv) if rank == 0 else None, root=0)
            if rank != 0:
                q, qd, tau = np.empty(nq), np.empty(nv), np.empty(nv)
            for x in (q, qd, tau):
                comm.Bcast(x, root=0)
        if backend == "serial":
            qdd, r = _bench_serial(a, model, q, qd, tau)
        elif backend == "dask":
            qdd, r = _bench_dask(a, model, q, qd, tau)
        else:
            qdd, r = _bench_mpi(a, model, q, qd, tau, comm)
        if rank != 0:
            return 0
        kind, res = residual(model, q, qd, tau, qdd, a.residual)
        aba_t = None
        if a.compare_aba:
            # the serial algorithm computing the same thing: ABA, CFA (leaf-first) for the wrenches,
            # constrained_dynamics for a model with loops
            reference = serial_reference(model, _wants_wrenches(a))
            reference(model, q, qd, tau)        # (a closed-loop model's first call sets up its loops)
            ts = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                reference(model, q, qd, tau)
                ts.append(time.perf_counter() - t)
            aba_t = _best(ts)
    best = _best(r["times"])
    out = {
        "model": a.model, "backend": backend, "quantity": a.quantity, "parts": int(r["parts"]), "ranks": int(r["ranks"]),
        "n": int(model.n), "nq": int(model.nq), "nv": int(model.nv), "repeat": int(a.repeat),
        "seconds_per_eval": best, "seconds_mean": float(np.mean(r["times"])),
        "seconds_median": float(np.median(r["times"])),
        "spread": float((np.median(r["times"]) - best) / best) if best > 0 else float("nan"),
        "seconds_per_body": best / model.n, "ns_per_body": best / model.n * 1e9,
        "bytes_per_eval": int(r["bytes_per_eval"]), "gather_bytes_per_eval": int(r.get("gather_bytes_per_eval", 0)),
        "max_rss_bytes": int(max(r["rss_bytes_per_rank"])), "rss_bytes_per_rank": r["rss_bytes_per_rank"],
        "residual": res, "residual_kind": kind, "setup_seconds": float(r["setup_seconds"]),
        "build_seconds": t_build,
    }
    for key in ("boundary_payload_bytes", "phase_seconds_per_rank", "phase_seconds_per_repeat", "imbalance",
                "rank_imbalance", "restarts", "rss_labels", "wait", "channel"):
        if key in r:
            out[key] = r[key]
    if "times_client_state" in r:
        out["seconds_per_eval_client_state"] = _best(r["times_client_state"])
    if "times_gathered" in r:
        out["seconds_per_eval_gathered"] = _best(r["times_gathered"])
    if aba_t is not None:
        ref = _reference_name(model, _wants_wrenches(a))
        out[f"{ref}_seconds"] = aba_t
        out[f"speedup_vs_{ref}"] = aba_t / best
        if "times_client_state" in r:
            out[f"speedup_vs_{ref}_client_state"] = aba_t / out["seconds_per_eval_client_state"]
    if a.json:
        print(json.dumps(out), flush=True)
        return 0
    print(f"model      {a.model}: {model.n} bodies (nq = {model.nq}, nv = {model.nv}), built in {t_build:.2f} s")
    print(f"backend    {backend}: {out['parts']} parts on {out['ranks']} "
          f"{'rank(s)' if backend != 'dask' else 'worker(s)'}; setup {out['setup_seconds']:.2f} s")
    noisy = out["spread"] > NOISY_SPREAD
    print(f"time       {best * 1e3:.3f} ms per evaluation (best of {a.repeat}; median {out['seconds_median'] * 1e3:.3f} ms,"
          f" {100 * out['spread']:.0f}% above the best{': noisy, repeat more' if noisy else ''})"
          f" = {out['ns_per_body']:.0f} ns per body")
    if "seconds_per_eval_client_state" in out:
        print(f"           (state resident on the workers, the result left there; with q, qd, tau sent and"
              f" the result gathered every evaluation: {out['seconds_per_eval_client_state'] * 1e3:.3f} ms)")
    if "seconds_per_eval_gathered" in out:
        print(f"           (the result left on the ranks that own it; gathered on rank 0 every evaluation:"
              f" {out['seconds_per_eval_gathered'] * 1e3:.3f} ms)")
    if "phase_seconds_per_repeat" in out and len(r["times"]) > 1:
        # where the fastest and the slowest evaluation spent their time, rank by rank
        order = np.argsort(r["times"])
        for label, k in (("fastest", order[0]), ("slowest", order[-1])):
            ranks = out["phase_seconds_per_repeat"][int(k)]
            print(f"phases     {label} ({r['times'][int(k)] * 1e3:.1f} ms): " + "; ".join(
                f"rank {j} own {1e3 * (p['total'] - p['wait']):.1f} wait {1e3 * p['wait']:.1f}"
                for j, p in enumerate(ranks)) + " ms")
    if aba_t is not None:
        ref = _reference_name(model, _wants_wrenches(a))
        name = {"aba": "ABA", "cfa": "CFA", "constrained": "constrained_dynamics"}[ref]
        print(f"serial {name} {aba_t * 1e3:.3f} ms (speedup {aba_t / best:.2f}x)")
    print(f"traffic    {out['bytes_per_eval']} B boundary data per evaluation"
          f" (+ {_fmt_bytes(out['gather_bytes_per_eval'])} state/qdd transfer)")
    print("memory     max RSS " + _fmt_bytes(out["max_rss_bytes"]) + "  (per rank: "
          + ", ".join(_fmt_bytes(x) for x in out["rss_bytes_per_rank"]) + ")")
    if res is not None:
        what = {"aba": "|qdd - ABA|/|ABA|", "cfa": "max(|qdd - CFA|/|CFA|, |F - F_CFA|/|F_CFA|)",
                "rnea": "backward error through RNEA",
                "constrained": "relative error against constrained_dynamics"}[kind]
        print(f"residual   {what} = {res:.2e}")
    return 0


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _add_arguments(s):
    s.add_argument("--model", required=True, metavar="SPEC",
                   help="URDF, .npz/.h5/.json model file, or spec string (e.g. autotree:nb=1000000,bf=2)")
    s.add_argument("--backend", choices=("serial", "mpi", "dask"), default=None,
                   help="serial (default), mpi (the default under mpiexec), or dask")
    s.add_argument("--parts", type=count, default=None, metavar="P",
                   help="number of parts (default: 1 serial; otherwise balanced over the ranks / workers: one "
                        "part each, plus up to two more per rank where equal parts cannot even the ranks out)")
    s.add_argument("--quantity", choices=("forward-dynamics", "constraint-forces"), default="forward-dynamics",
                   help="what one evaluation computes: forward dynamics (qdd; default) or the constraint forces "
                        "(qdd and every joint's wrench, constraint and drive force)")
    s.add_argument("--repeat", type=count, default=5, metavar="R", help="timed evaluations (default 5; best is reported)")
    s.add_argument("--seed", type=nonneg_int, default=0, help="random state seed (default 0)")
    s.add_argument("--residual", choices=("auto", "aba", "rnea", "none"), default="auto",
                   help=f"reference check: ABA up to {RESIDUAL_ABA_MAX_N} bodies, else the RNEA backward error "
                        "|RNEA(qdd) - tau| / (|tau| + |RNEA(q, qd, 0)|); a model with closed loops: "
                        "constrained_dynamics (unless none)")
    s.add_argument("--compare-aba", action="store_true",
                   help="also time the serial algorithm on rank 0 (speedup): ABA, CFA with --quantity "
                        "constraint-forces, constrained_dynamics for a model with closed loops")
    s.add_argument("--wait", choices=("yield", "spin"), default="yield",
                   help="mpi: how a rank waits for a message: poll, then give its core away between polls (yield, "
                        "default), or MPI's own busy wait (spin); see partree.parallel.mpi.MPIEngine")
    s.add_argument("--channel", choices=("socket", "actors"), default="socket",
                   help="dask: the workers exchange the boundary data over sockets among themselves (socket, "
                        "default) or in rounds through the client (actors); see "
                        "partree.parallel.dask_backend.DaskEngine")
    s.add_argument("--workers", type=count, default=2, help="dask: workers of the LocalCluster started (default 2)")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="dask: connect to this scheduler (tcp://host:8786 or a scheduler file) instead")
    s.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    s.set_defaults(func=cmd_bench)
    return s


def add_parser(subparsers):
    """Add ``bench`` to the ``partree`` sub-commands (``sub = parser.add_subparsers(...)``)."""
    s = subparsers.add_parser("bench", help="time the parallel engine (serial, MPI, Dask)",
                              description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    return _add_arguments(s)


def main(argv=None):
    """Stand-alone entry point: ``python -m partree.cli.bench --model SPEC ...``."""
    from ..errors import PartreeInputError

    p = argparse.ArgumentParser(prog="partree bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    a = p.parse_args(argv)
    a.command = "bench"
    try:
        return a.func(a)
    except (PartreeInputError, FileNotFoundError, KeyError, ValueError) as e:
        print(f"partree bench: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
