"""``partree partition``: how the parallel engine cuts a model into parts."""
from __future__ import annotations

import time

from .common import MODEL_HELP, add_floating_base, add_force, check_output, count, load_model, nonneg, nonneg_int


def add_parser(sub):
    s = sub.add_parser("partition", help="show how the parallel engine cuts a model into parts",
                       description="Partition a model as the parallel engine does: connected parts balanced by "
                                   "work (--parts P), or the partition the MPI / Dask backends use on R ranks or "
                                   "workers (--ranks R).  Prints every part's root joint, parent part, handle, "
                                   "size, weight, cost (with the handle-path work), rank and boundary joints, the "
                                   "load imbalance and the critical path of the parts tree.")
    s.add_argument("model", help=MODEL_HELP)
    s.add_argument("--parts", type=count, default=None, metavar="P", help="number of parts")
    s.add_argument("--ranks", type=count, default=None, metavar="R",
                   help="the partition the engine uses on R ranks / workers (at least R parts)")
    s.add_argument("--path-weight", type=nonneg, default=None, metavar="W",
                   help="extra relative work of a body on a handle path (default: the engine's)")
    s.add_argument("--list", type=nonneg_int, default=20, metavar="K", help="parts listed (default 20)")
    s.add_argument("--json", action="store_true", help="print the whole report as one JSON object")
    s.add_argument("--out", metavar="FILE", help="also write the report to this JSON file")
    add_floating_base(s)
    add_force(s)
    s.set_defaults(func=run)
    return s


def run(a):
    import json

    from ..parallel.partition import PATH_WEIGHT, make_partition
    if (a.parts is None) == (a.ranks is None):
        raise ValueError("give --parts P or --ranks R")
    if a.out:
        check_output(a.out, a.force, "report")
    m = load_model(a.model, a.floating_base, a.inertia)
    t0 = time.perf_counter()
    pw = PATH_WEIGHT if a.path_weight is None else a.path_weight
    pt = make_partition(m, a.parts, pw, nranks=a.ranks)
    dt = time.perf_counter() - t0
    rep = pt.report(m, a.ranks)
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
