"""The ``partree`` command line.

    partree info MODEL                    what a model is: bodies, joints, topology, memory
    partree dynamics MODEL [options]      forward/inverse dynamics on a state, timed; results to .npz
    partree convert MODEL OUT             write a model to .npz / .h5 / .json
    partree simulate [MODEL] [options]    integrate a trajectory; results to .h5 / .npz, checkpoints
    partree plot RESULTS                  joint trajectories, energy, joint forces, configuration pictures
    partree partition MODEL --parts P     how the parallel engine cuts a model: parts, loads, boundary
    partree bench --model SPEC [options]  time one evaluation: serial, MPI (under mpiexec) or Dask

MODEL is a URDF file, a native model file (.npz, .h5, .json) or a spec string such as
``autotree:nb=1000000,bf=2`` (generators: ``partree info --generators``).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _model(spec, floating_base=False):
    from .specs import resolve_model
    if floating_base and isinstance(spec, str) and spec.lower().endswith(".urdf"):
        from .io import load_urdf
        return load_urdf(spec, floating_base=True)
    return resolve_model(spec)


def _fmt_bytes(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{int(b)} B"
        b /= 1024


def cmd_info(a):
    from . import joints as J
    if a.generators:
        from .specs import generators
        for g in generators().values() if isinstance(generators(), dict) else generators():
            print(f"{g.name:12s} {g.doc.splitlines()[0] if g.doc else ''}")
        return 0
    if not a.model:
        print("partree info: give a MODEL (or --generators)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    m = _model(a.model, a.floating_base)
    t_build = time.perf_counter() - t0
    counts = np.bincount(m.jtype, minlength=len(J.NAMES))
    nch = m.num_children()
    d = m.depth()
    ptr, _ = m.chains()
    print(f"model      {m.name}")
    print(f"bodies     {m.n}   (nq = {m.nq}, nv = {m.nv}, total mass {m.total_mass():.6g})")
    print("joints     " + ", ".join(f"{c} {J.NAMES[k]}" for k, c in enumerate(counts) if c))
    print(f"topology   depth {int(d.max()) + 1}, {len(m.roots())} root(s), {int((nch == 0).sum())} leaves, "
          f"{int((nch >= 2).sum())} nodes (>= 2 children), {len(ptr) - 1} chains, max children {int(nch.max())}")
    print(f"gravity    {m.gravity.tolist()}")
    print(f"memory     model {_fmt_bytes(m.nbytes)}, workspace {_fmt_bytes(m.data.nbytes)} "
          f"({(m.nbytes + m.data.nbytes) / m.n:.0f} B per body)")
    print(f"built in   {t_build:.3f} s")
    if a.joints:
        for i in range(min(m.n, a.joints)):
            print(f"  {i:6d} {m.joint_names[i]:24s} {J.NAMES[m.jtype[i]]:10s} parent {int(m.parent[i]):6d} "
                  f"q[{m.q_slice(i).start}:{m.q_slice(i).stop}] v[{m.v_slice(i).start}:{m.v_slice(i).stop}]")
    return 0


def cmd_dynamics(a):
    import partree
    m = _model(a.model, a.floating_base)
    rng = np.random.default_rng(a.seed)
    if a.state == "random":
        q, qd = m.random_configuration(rng, 1.0), m.random_velocity(rng, 1.0)
    else:
        q, qd = m.neutral(), np.zeros(m.nv)
    tau = rng.uniform(-1, 1, m.nv) if a.state == "random" else np.zeros(m.nv)
    print(f"{m!r}")
    t0 = time.perf_counter()
    qdd = partree.aba(m, q, qd, tau)
    first = time.perf_counter() - t0
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        qdd = partree.aba(m, q, qd, tau)
        times.append(time.perf_counter() - t0)
    tau_back, W = partree.rnea(m, q, qd, qdd, return_wrenches=True)
    t0 = time.perf_counter()
    partree.rnea(m, q, qd, qdd)
    t_rnea = time.perf_counter() - t0
    # normwise backward error: the terms of M qdd + h = tau that cancel (h = RNEA(q, qd, 0)) set
    # the scale; on a long chain |h| is many orders above |tau|
    h = partree.rnea(m, q, qd, np.zeros_like(qdd))
    err = np.abs(tau_back - tau).max() / max(np.abs(tau).max() + np.abs(h).max(), 1e-300)
    T, V = partree.energy(m, q, qd)
    best = min(times) if times else first
    print(f"forward dynamics (ABA): first call {first * 1e3:.2f} ms (includes loading compiled kernels), "
          f"best of {a.repeat}: {best * 1e3:.3f} ms = {best / m.n * 1e9:.0f} ns per body")
    print(f"inverse dynamics (RNEA): {t_rnea * 1e3:.3f} ms; backward error |RNEA(qdd) - tau| / (|tau| + |h|) = {err:.2e}")
    print(f"energy: kinetic {T:.6g} J, potential {V:.6g} J; |qdd|max {np.abs(qdd).max():.4g}; "
          f"largest joint force {np.linalg.norm(W[:, 3:], axis=1).max():.4g} N at joint "
          f"{m.joint_names[int(np.argmax(np.linalg.norm(W[:, 3:], axis=1)))]!r}")
    if a.out:
        np.savez(a.out, q=q, qd=qd, tau=tau, qdd=qdd, joint_wrench=W)
        print(f"wrote {a.out} (q, qd, tau, qdd, joint_wrench)")
    return 0


def cmd_convert(a):
    from .io import save_model
    m = _model(a.model, a.floating_base)
    save_model(m, a.out)
    print(f"wrote {a.out}: {m!r}")
    return 0


def partition_report(model, pt, nranks=None):
    """A JSON-ready description of a partition: totals (``Partition.summary``) and per part its
    root joint, parent part, handle body, size, weight, cost, rank and boundary joints."""
    out = pt.summary()
    out.update({"model": model.name, "n": int(model.n), "total_weight": float(pt.weights.sum())})
    owner = pt.owner_for(nranks) if nranks else None
    if nranks:
        loads = pt.rank_loads(nranks)
        out.update({"ranks": int(nranks), "rank_loads": loads.tolist(),
                    "rank_imbalance": float(loads.max() / loads.mean())})
    parts = []
    for k in range(pt.nparts):
        r = int(pt.roots[k])
        parts.append({"part": k, "root_body": r, "root_joint": model.joint_names[r],
                      "parent_part": int(pt.part_parent[k]), "handle_body": int(pt.handle[k]),
                      "bodies": int(pt.sizes[k]), "weight": float(pt.weights[k]),
                      "cost": float(pt.costs[k] if pt.costs is not None else pt.weights[k]),
                      "rank": None if owner is None else int(owner[k]),
                      "boundary_joints": [model.joint_names[int(j)] for j in pt.boundary_joints(k)]})
    out["parts"] = parts
    return out


def cmd_partition(a):
    import json

    from .parallel.serial import PATH_WEIGHT, make_partition
    if (a.parts is None) == (a.ranks is None):
        raise ValueError("give --parts P or --ranks R")
    m = _model(a.model, a.floating_base)
    t0 = time.perf_counter()
    pw = PATH_WEIGHT if a.path_weight is None else a.path_weight
    pt = make_partition(m, a.parts, pw, nranks=a.ranks)
    dt = time.perf_counter() - t0
    rep = partition_report(m, pt, a.ranks)
    rep["seconds"] = dt
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rep, f, indent=1)
    if a.json:
        print(json.dumps(rep))
        return 0
    tot = rep["total_weight"]
    how = f"balanced over {a.ranks} ranks" if a.ranks else "balanced over the parts"
    print(f"model      {m.name}: {m.n} bodies")
    print(f"partition  {pt.nparts} parts, {how} (handle-path weight {pw:g}), made in {dt:.3f} s")
    print(f"imbalance  parts max/mean weight {rep['imbalance']:.4f}"
          + (f"; ranks max/mean load {rep['rank_imbalance']:.4f} (handle-path work counted)" if a.ranks else ""))
    print(f"depth      {rep['depth']} parts on the longest chain of the parts tree; critical work "
          f"{rep['critical_work']:.6g} of {tot:.6g} ({100 * rep['critical_work'] / tot:.1f}%)")
    print(f"{'part':>5s} {'root joint':>14s} {'parent':>6s} {'handle':>9s} {'bodies':>9s} {'weight':>11s} "
          f"{'cost':>11s} {'rank':>4s}  boundary joints")
    for p in rep["parts"][:a.list]:
        bj = p["boundary_joints"]
        bjs = ", ".join(bj[:4]) + (f", ... ({len(bj)})" if len(bj) > 4 else "")
        print(f"{p['part']:5d} {p['root_joint']:>14s} {p['parent_part']:6d} {p['handle_body']:9d} {p['bodies']:9d} "
              f"{p['weight']:11.6g} {p['cost']:11.6g} {'-' if p['rank'] is None else p['rank']:>4}  {bjs}")
    if pt.nparts > a.list:
        print(f"  ... {pt.nparts - a.list} more parts (--list K shows more, --json or --out FILE all)")
    if a.out:
        print(f"wrote {a.out}")
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="partree", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("info", help="describe a model", description="Describe a model: sizes, joints, topology, memory.")
    s.add_argument("model", nargs="?", help="URDF, .npz/.h5/.json model file, or spec string")
    s.add_argument("--floating-base", action="store_true", help="URDF: attach the root link by a free joint")
    s.add_argument("--joints", type=int, default=0, metavar="K", help="list the first K joints")
    s.add_argument("--generators", action="store_true", help="list the model generators usable in spec strings")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("dynamics", help="forward and inverse dynamics on one state, timed",
                       description="Compute forward dynamics (ABA) on a state, check it with inverse dynamics "
                                   "(RNEA), report timings, energy and joint wrenches.")
    s.add_argument("model", help="URDF, .npz/.h5/.json model file, or spec string")
    s.add_argument("--state", choices=("random", "neutral"), default="random",
                   help="random state and torques (default) or the neutral configuration at rest")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--repeat", type=int, default=5, help="timed repetitions (default 5)")
    s.add_argument("--floating-base", action="store_true", help="URDF: attach the root link by a free joint")
    s.add_argument("--out", help="write q, qd, tau, qdd and joint wrenches to this .npz file")
    s.set_defaults(func=cmd_dynamics)

    s = sub.add_parser("convert", help="write a model to a native file",
                       description="Write a model (URDF, file or spec) to .npz, .h5 or .json.")
    s.add_argument("model")
    s.add_argument("out", help="output path: .npz, .h5/.hdf5 or .json")
    s.add_argument("--floating-base", action="store_true")
    s.set_defaults(func=cmd_convert)

    s = sub.add_parser("partition", help="show how the parallel engine cuts a model into parts",
                       description="Partition a model as the parallel engine does: connected parts balanced by "
                                   "work (--parts P), or the partition the MPI / Dask backends use on R ranks or "
                                   "workers (--ranks R).  Prints every part's root joint, parent part, handle, "
                                   "size, weight, cost (with the handle-path work), rank and boundary joints, the "
                                   "load imbalance and the critical path of the parts tree.")
    s.add_argument("model", help="URDF, .npz/.h5/.json model file, or spec string")
    s.add_argument("--parts", type=int, default=None, metavar="P", help="number of parts")
    s.add_argument("--ranks", type=int, default=None, metavar="R",
                   help="the partition the engine uses on R ranks / workers (at least R parts)")
    s.add_argument("--path-weight", type=float, default=None, metavar="W",
                   help="extra relative work of a body on a handle path (default: the engine's)")
    s.add_argument("--list", type=int, default=20, metavar="K", help="parts listed (default 20)")
    s.add_argument("--json", action="store_true", help="print the whole report as one JSON object")
    s.add_argument("--out", metavar="FILE", help="also write the report to this JSON file")
    s.add_argument("--floating-base", action="store_true", help="URDF: attach the root link by a free joint")
    s.set_defaults(func=cmd_partition)

    from .parallel.bench import add_bench_parser
    from .simulation.cli import add_plot_parser, add_simulate_parser
    add_simulate_parser(sub)
    add_plot_parser(sub)
    add_bench_parser(sub)
    return p


def main(argv=None):
    from .model import PartreeInputError
    p = build_parser()
    a = p.parse_args(argv)
    if a.version:
        from . import __version__
        print(__version__)
        return 0
    if not getattr(a, "func", None):
        p.print_help()
        return 2
    try:
        return a.func(a)
    except (PartreeInputError, FileNotFoundError, KeyError, ValueError) as e:
        print(f"partree {a.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
