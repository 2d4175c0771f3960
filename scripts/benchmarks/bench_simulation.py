"""Simulation throughput: RK4 steps per second of ``partree.simulate`` per backend, and the
overhead of the simulation loop over bare evaluations of the dynamics.

    python scripts/benchmarks/bench_simulation.py                          # chains and binary trees, 1e3..1e6
    python scripts/benchmarks/bench_simulation.py --quick                  # 1e3, 1e4; few steps
    python scripts/benchmarks/bench_simulation.py --sizes 1e5 --backends serial,mpi --ranks 2 --steps 8 --repeat 3
    python scripts/benchmarks/bench_simulation.py --csv sim.csv --markdown  # README-ready table
    python scripts/benchmarks/bench_simulation.py --output-study --sizes 1e6 --ranks 2   # results files

``--output-study``: the cost of writing results under MPI.  One ``mpiexec -n RANKS`` job runs
the same RK4 simulation of an autotree (bf = 2, skew = 0.5, random state, dt = 1e-3, the issue's
job) several ways, in turn, ``--repeat`` times: bare (no results file), and saving every
``--save-every``-th step to an .h5 file gathered on rank 0 (``output='gathered'``), per rank
(``output='per-rank'``), and per rank recording only q and qd (no energy: nothing gathered).
Time per step = wall time from the end of the first tick to the return of ``simulate`` (so the
save points and the final writing of the files count) / the steps after the first; medians over
the repeats, the ratio to bare, and the bytes written (results file plus rank files).

Models: Featherstone's autoTree, chain (bf = 1) and binary tree (bf = 2), N bodies, in a random
state (random configuration, random velocities, random constant torques, so the dynamics is
nontrivial; a small dt so a few steps stay finite).

How it measures (every backend the same way, in the process that runs the loop):
  * one ``simulate(..., integrator='rk4', save_every=<huge>)`` run per repeat: the recording
    happens at t = 0 and at the end only, outside the timed ticks;
  * at every tick the step hook takes the time since the previous tick (one step of the
    simulation loop: the integrator's four evaluations, its stage arithmetic on the joint
    manifolds and the loop's own per-tick work), then right away times four bare evaluations
    of the very dynamics function the integrator calls (``integ.f``, at the current state):
    steps and bare evaluations are interleaved, side by side, under the same conditions;
  * the first ``--warmup`` ticks are dropped; medians over the remaining ticks of all repeats;
  * steps/s = 1 / median step time;  overhead = median step / (4 x median evaluation) - 1.
Backends: serial (one process), mpi (``mpiexec -n RANKS python this --worker ...``, one part
per rank; rank 0's clock; the evaluations are collective), dask (a LocalCluster with RANKS
single-threaded worker processes, one part per worker; the loop runs on the workers, which call
the hook on every rank as under MPI: the ranks' times come back through files, pooled).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

MODELS = {"chain": 1, "binary": 2}


def _model_and_state(bf, n, seed=0):
    from partree.models import auto_tree

    m = auto_tree(int(n), bf=int(bf))
    rng = np.random.default_rng(seed)
    q0 = m.random_configuration(rng, 0.5)
    qd0 = m.random_velocity(rng, 0.1)
    tau = rng.normal(size=m.nv) * 0.1
    return m, dict(q0=q0, qd0=qd0, torques=tau)


class _Probe:
    """Step hook + probe: times each tick's step, then four bare evaluations of ``integ.f``."""

    def __init__(self, warmup, sync=None, wait=None, root=True, dump=None, last=None):
        self.warmup, self.sync, self.wait, self.root = warmup, sync, wait, root
        self.f = None
        self.steps, self.evals = [], []
        self.t_last = None
        self.dump, self.last = dump, last      # Dask: the hook runs on the workers; files carry the times back

    def probe(self, integ):
        self.f = integ.f
        self.t_last = time.perf_counter()

    def hook(self, k, t, q, v):
        if self.sync is not None:
            self.sync(q, v)
        now = time.perf_counter()
        step = now - self.t_last
        t0 = time.perf_counter()
        for _ in range(4):
            r = self.f(t, q, v)
            if self.wait is not None:
                self.wait(r)
        ev = (time.perf_counter() - t0) / 4.0
        if k > self.warmup:
            self.steps.append(step)
            self.evals.append(ev)
        if self.dump is not None and k == self.last:
            with open(f"{self.dump}.{os.getpid()}.{time.monotonic_ns()}", "w") as fh:
                json.dump({"steps": self.steps, "evals": self.evals}, fh)
        self.t_last = time.perf_counter()


def _run(backend, bf, n, steps, repeat, warmup, dt, comm=None, client=None, parts=None):
    """Returns (step times, evaluation times, finite) over ``repeat`` runs (root only)."""
    from partree.simulation import simulate

    m, st = _model_and_state(bf, n)
    ticks = warmup + steps
    steps_all, evals_all, finite = [], [], True
    root = comm is None or comm.Get_rank() == 0
    dump = None
    if backend == "dask":
        # the Dask simulation runs the loop on the workers (every rank calls the hook, as under MPI):
        # each rank writes its times to a file at the last tick; the ranks' samples are pooled
        import tempfile

        dump_dir = tempfile.mkdtemp(prefix="bench-sim-")
        dump = os.path.join(dump_dir, "times")
    for _ in range(repeat):
        pr = _Probe(warmup, root=root, dump=dump, last=ticks)
        res = simulate(m, ticks * dt, dt, integrator="rk4", save_every=10**9, progress=False, verbose=False,
                       backend=backend, parts=parts, comm=comm, client=client, _step_hook=pr.hook, _probe=pr.probe,
                       **st)
        steps_all += pr.steps
        evals_all += pr.evals
    if dump is not None:
        import shutil

        for name in sorted(os.listdir(dump_dir)):
            with open(os.path.join(dump_dir, name)) as fh:
                d = json.load(fh)
            steps_all += d["steps"]
            evals_all += d["evals"]
        shutil.rmtree(dump_dir, ignore_errors=True)
        if res is not None:
            finite = finite and bool(np.isfinite(res.q[-1]).all() and np.isfinite(res.qd[-1]).all())
    return steps_all, evals_all, finite


def _row(backend, model, n, ranks, steps, evals, finite):
    s, e = statistics.median(steps), statistics.median(evals)
    return {"backend": backend, "model": model, "N": int(n), "ranks": ranks, "samples": len(steps),
            "step_ms": 1e3 * s, "eval_ms": 1e3 * e, "steps_per_s": 1.0 / s, "overhead_pct": 100.0 * (s / (4 * e) - 1),
            "finite": finite}


# ---------------------------------------------------------------- MPI worker (under mpiexec)
def worker(a):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    steps, evals, finite = _run("mpi", a.bf, a.n, a.steps, a.repeat, a.warmup, a.dt, comm=comm)
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps({"steps": steps, "evals": evals, "finite": finite}), flush=True)


def _run_mpi(bf, n, a):
    from partree.mpienv import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise RuntimeError("no mpiexec")
    cmd = [mpiexec, "-n", str(a.ranks), sys.executable, os.path.abspath(__file__), "--worker", "--bf", str(bf),
           "--n", str(int(n)), "--steps", str(a.steps), "--repeat", str(a.repeat), "--warmup", str(a.warmup),
           "--dt", repr(a.dt)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    line = [s for s in p.stdout.splitlines() if s.startswith("RESULT ")]
    if p.returncode != 0 or not line:
        raise RuntimeError(f"mpiexec failed ({p.returncode}): {p.stdout[-2000:]}{p.stderr[-2000:]}")
    d = json.loads(line[0][7:])
    return d["steps"], d["evals"], d["finite"]


# ---------------------------------------------------------------- output study (under mpiexec)
CASES = (("bare", {}), ("gathered", dict(output="gathered")), ("per-rank", dict(output="per-rank")),
         ("per-rank q,qd", dict(output="per-rank", record="q,qd")))


def output_worker(a):
    import shutil
    import tempfile

    from mpi4py import MPI

    from partree.simulation import simulate
    from partree.specs import resolve_model

    comm = MPI.COMM_WORLD
    root = comm.Get_rank() == 0
    m = resolve_model(f"autotree:nb={int(a.n)},bf=2,skew=0.5")
    rng = np.random.default_rng(0)
    st = dict(q0=m.random_configuration(rng, 0.5), qd0=m.random_velocity(rng, 0.5))
    folder = comm.bcast(tempfile.mkdtemp(prefix="partree-out-", dir=a.dir) if root else None, root=0)
    dt = 1e-3
    times = {name: [] for name, _ in CASES}
    loop = {name: [] for name, _ in CASES}         # the ticks only (save points included)
    final = {name: [] for name, _ in CASES}        # after the last tick: the results files
    ticks = {name: {"plain": [], "save": []} for name, _ in CASES}   # each tick's time, with / without a save
    sizes = {}
    for rep in range(a.repeat):
        for name, kw in CASES:
            out = None if name == "bare" else os.path.join(folder, f"{name.replace(' ', '_').replace(',', '')}.h5")
            mark = {}

            def hook(k, t, q, v):
                mark[k] = time.perf_counter()

            comm.Barrier()
            simulate(m, a.ticks * dt, dt, integrator="rk4", save_every=a.save_every if out else 10**9,
                     progress=False, verbose=False, backend="mpi", comm=comm, out=out, overwrite=True,
                     _step_hook=hook, **kw, **st)
            comm.Barrier()
            now = time.perf_counter()
            per_step = (now - mark[1]) / (a.ticks - 1)
            times[name].append(per_step)
            loop[name].append((mark[a.ticks] - mark[1]) / (a.ticks - 1))
            final[name].append(now - mark[a.ticks])
            for k in range(2, a.ticks + 1):
                saved = out is not None and (k % a.save_every == 0 or k == a.ticks)
                ticks[name]["save" if saved else "plain"].append(mark[k] - mark[k - 1])
            if root:
                if out is not None:
                    base = os.path.splitext(out)[0]
                    files = [os.path.join(folder, f) for f in os.listdir(folder)
                             if os.path.join(folder, f) == out or os.path.join(folder, f).startswith(base + ".rank")]
                    sizes[name] = sum(os.path.getsize(f) for f in files)
                print(f"# repeat {rep} {name:14s} {1e3 * per_step:9.1f} ms/step", file=sys.stderr, flush=True)
    if root:
        shutil.rmtree(folder, ignore_errors=True)
        print("RESULT " + json.dumps({"times": times, "loop": loop, "final": final, "sizes": sizes, "ticks": ticks}),
              flush=True)


def output_study(a):
    from partree.mpienv import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise RuntimeError("no mpiexec")
    n = int(float(a.sizes.split(",")[0]))
    cmd = [mpiexec, "-n", str(a.ranks), sys.executable, os.path.abspath(__file__), "--output-worker", "--n", str(n),
           "--ticks", str(a.ticks), "--save-every", str(a.save_every), "--repeat", str(a.repeat)]
    if a.dir:
        cmd += ["--dir", a.dir]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    sys.stderr.write(p.stderr)
    line = [s for s in p.stdout.splitlines() if s.startswith("RESULT ")]
    if p.returncode != 0 or not line:
        raise RuntimeError(f"mpiexec failed ({p.returncode}): {p.stdout[-2000:]}{p.stderr[-2000:]}")
    d = json.loads(line[0][7:])
    print(f"autotree bf=2 skew=0.5 N={n}, {a.ranks} ranks, RK4 dt=1e-3, {a.ticks} steps, save every "
          f"{a.save_every}, {a.repeat} repeats (raw ms/step in run order)")
    bare = statistics.median(d["times"]["bare"])
    bare_loop = statistics.median(d["loop"]["bare"])
    print("ms/step: all the run after its first tick (save points and the files written at the end) / steps; "
          "loop: the ticks only (save points included); end: seconds from the last tick to the return")
    print(f"{'case':16s} {'ms/step':>9s} {'vs bare':>8s} {'loop ms':>8s} {'vs bare':>8s} {'end s':>7s} "
          f"{'MB written':>11s}  raw ms/step")
    for name, _ in CASES:
        t = statistics.median(d["times"][name])
        lp = statistics.median(d["loop"][name])
        fin = statistics.median(d["final"][name])
        mb = d["sizes"].get(name)
        raw = ", ".join(f"{1e3 * x:.0f}" for x in d["times"][name])
        print(f"{name:16s} {1e3 * t:9.1f} {t / bare:8.3f} {1e3 * lp:8.1f} {lp / bare_loop:8.3f} {fin:7.2f} "
              f"{'-' if mb is None else f'{mb / 1e6:.1f}':>11s}  {raw}")
    # per tick: a save point's extra time over a plain tick of the same run, as a share of the
    # plain ticks of a saving interval (robust to the load of a shared machine: medians)
    plain_bare = statistics.median(d["ticks"]["bare"]["plain"])
    print(f"\nper tick (medians): bare {1e3 * plain_bare:.1f} ms")
    print(f"{'case':16s} {'plain ms':>9s} {'save ms':>9s} {'extra ms':>9s} {'overhead at every ' + str(a.save_every):>22s}"
          f"  n(save)")
    for name, _ in CASES[1:]:
        tk = d["ticks"][name]
        pl, sv = statistics.median(tk["plain"]), statistics.median(tk["save"])
        extra = sv - pl
        print(f"{name:16s} {1e3 * pl:9.1f} {1e3 * sv:9.1f} {1e3 * extra:9.1f} {100 * extra / (a.save_every * pl):21.1f}%"
              f"  {len(tk['save'])}")
    return 0


# ---------------------------------------------------------------- output
COLS = ("backend", "model", "N", "ranks", "samples", "step_ms", "eval_ms", "steps_per_s", "overhead_pct", "finite")


def _fmt(r, k):
    x = r[k]
    if isinstance(x, float):
        return f"{x:.4g}" if k != "overhead_pct" else f"{x:+.1f}"
    return str(x)


def print_table(rows):
    w = {k: max(len(k), *(len(_fmt(r, k)) for r in rows)) for k in COLS}
    print("  ".join(k.rjust(w[k]) for k in COLS))
    for r in rows:
        print("  ".join(_fmt(r, k).rjust(w[k]) for k in COLS))


def markdown(rows, a):
    """README table: steps/s per model and size (columns: backends), and the loop overhead."""
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    lab = {b: (f"{b} ({a.ranks} ranks)" if b == "mpi" else f"{b} ({a.ranks} workers)" if b == "dask" else b)
           for b in backends}
    by = {(r["backend"], r["model"], r["N"]): r for r in rows}
    keys = list(dict.fromkeys((r["model"], r["N"]) for r in rows))
    out = ["| model | N | " + " | ".join(f"{lab[b]} steps/s (overhead)" for b in backends) + " |",
           "|---|---:|" + "---:|" * len(backends)]
    for model, n in keys:
        cells = []
        for b in backends:
            r = by.get((b, model, n))
            cells.append("—" if r is None else f"{r['steps_per_s']:.3g} ({r['overhead_pct']:+.1f}%)")
        out.append(f"| {model} | {n:.0e} | " + " | ".join(cells) + " |".replace("e+0", "e"))
    out = [s.replace("e+0", "e") for s in out]
    out.append("")
    out.append(f"RK4, medians of {a.steps} steps x {a.repeat} runs after {a.warmup} warm-up step(s), random state, "
               f"dt = {a.dt:g}. Overhead = (time per step) / (4 x time per bare evaluation of the same dynamics "
               f"function) - 1, measured interleaved in the same process.")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1e3,1e4,1e5,1e6", help="comma-separated body counts (default 1e3..1e6)")
    p.add_argument("--models", default="chain,binary", help="chain (bf=1), binary (bf=2)")
    p.add_argument("--backends", default="serial,mpi,dask", help="serial, mpi, dask")
    p.add_argument("--ranks", type=int, default=2, help="MPI ranks / Dask workers, one part each (default 2)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per run (default 5)")
    p.add_argument("--repeat", type=int, default=3, help="runs per case (default 3); medians over all steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps at the start of each run (default 1)")
    p.add_argument("--dt", type=float, default=1e-5, help="step (default 1e-5)")
    p.add_argument("--quick", action="store_true", help="sizes 1e3,1e4, 3 steps, 2 runs")
    p.add_argument("--csv", default=None, help="write the rows to this CSV file")
    p.add_argument("--markdown", action="store_true", help="print a README-ready table")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per mpiexec run")
    p.add_argument("--output-study", action="store_true",
                   help="MPI: time per step saving results (gathered, per rank) against bare evaluations; the "
                        "first of --sizes, --ranks ranks")
    p.add_argument("--ticks", type=int, default=21, help="--output-study: steps per run (default 21)")
    p.add_argument("--save-every", type=int, default=10, help="--output-study: save every k-th step (default 10)")
    p.add_argument("--dir", default=None, help="--output-study: folder for the files (default: the temp folder)")
    p.add_argument("--output-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--bf", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=1000, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return worker(a)
    if a.output_worker:
        return output_worker(a)
    if a.output_study:
        if a.repeat == p.get_default("repeat"):
            a.repeat = 2
        return output_study(a)
    if a.quick:
        a.sizes, a.steps, a.repeat = ("1e3,1e4" if a.sizes == p.get_default("sizes") else a.sizes), 3, 2
    sizes = [int(float(s)) for s in a.sizes.split(",") if s.strip()]
    models = [s.strip() for s in a.models.split(",") if s.strip()]
    backends = [s.strip().lower() for s in a.backends.split(",") if s.strip()]
    client = cluster = None
    rows = []
    try:
        for backend in backends:
            if backend == "dask" and client is None:
                from distributed import Client, LocalCluster

                cluster = LocalCluster(n_workers=a.ranks, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                client = Client(cluster)
            for model in models:
                for n in sizes:
                    t0 = time.perf_counter()
                    try:
                        if backend == "serial":
                            res = _run("serial", MODELS[model], n, a.steps, a.repeat, a.warmup, a.dt)
                        elif backend == "mpi":
                            res = _run_mpi(MODELS[model], n, a)
                        elif backend == "dask":
                            res = _run("dask", MODELS[model], n, a.steps, a.repeat, a.warmup, a.dt, client=client,
                                       parts=a.ranks)
                        else:
                            raise ValueError(f"unknown backend {backend!r}")
                    except Exception as e:  # noqa: BLE001 -- report and go on with the other cases
                        print(f"# {backend} {model} N={n}: failed: {type(e).__name__}: {e}", file=sys.stderr)
                        continue
                    ranks = 1 if backend == "serial" else a.ranks
                    r = _row(backend, model, n, ranks, *res)
                    rows.append(r)
                    print(f"# {backend:6s} {model:6s} N={n:<8d} {r['steps_per_s']:9.3g} steps/s  overhead "
                          f"{r['overhead_pct']:+6.1f}%  ({time.perf_counter() - t0:.1f} s)", file=sys.stderr,
                          flush=True)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    if not rows:
        return 1
    print_table(rows)
    if a.csv:
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(COLS))
            w.writeheader()
            for r in rows:
                w.writerow({k: r[k] for k in COLS})
    if a.markdown:
        print()
        print(markdown(rows, a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
