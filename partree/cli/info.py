"""``partree info``: what a model is (bodies, joints, topology, memory), or the list of generators."""
from __future__ import annotations

import sys
import time

import numpy as np

from .common import MODEL_HELP, add_floating_base, fmt_bytes, load_model, nonneg_int


def add_parser(sub):
    s = sub.add_parser("info", help="describe a model", description="Describe a model: sizes, joints, topology, memory.")
    s.add_argument("model", nargs="?", help=MODEL_HELP)
    add_floating_base(s)
    s.add_argument("--joints", type=nonneg_int, default=0, metavar="K", help="list the first K joints")
    s.add_argument("--loops", type=nonneg_int, default=20, metavar="K",
                   help="list the first K loops of a model with loops (default 20)")
    s.add_argument("--generators", action="store_true", help="list the model generators usable in spec strings")
    s.set_defaults(func=run)
    return s


def run(a):
    from .. import joints as J
    if a.generators:
        from ..specs import generators
        for g in generators().values() if isinstance(generators(), dict) else generators():
            print(f"{g.name:12s} {g.doc.splitlines()[0] if g.doc else ''}")
        return 0
    if not a.model:
        print("partree info: give a MODEL (or --generators)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    m = load_model(a.model, a.floating_base, a.inertia)
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
    if len(m.loops):
        _print_loops(m, a.loops)
    print(f"memory     model {fmt_bytes(m.nbytes)}, workspace {fmt_bytes(m.data.nbytes)} "
          f"({(m.nbytes + m.data.nbytes) / m.n:.0f} B per body)")
    print(f"built in   {t_build:.3f} s")
    if a.joints:
        for i in range(min(m.n, a.joints)):
            print(f"  {i:6d} {m.joint_names[i]:24s} {J.NAMES[m.jtype[i]]:10s} parent {int(m.parent[i]):6d} "
                  f"q[{m.q_slice(i).start}:{m.q_slice(i).stop}] v[{m.v_slice(i).start}:{m.v_slice(i).stop}]")
    return 0


def _print_loops(m, limit):
    from ..loops import KINDS, WORLD
    lp = m.loops
    counts = np.bincount(lp.kind.astype(np.int64), minlength=len(KINDS))
    kinds = ", ".join(f"{c} {KINDS[k]}" for k, c in enumerate(counts) if c)
    print(f"loops      {len(lp)} ({kinds}), {lp.nrow} constraint rows")

    def body(i):
        return WORLD if i < 0 else f"{m.body_names[int(i)]} ({int(i)})"

    for k in range(min(len(lp), limit)):
        r = lp.rows_of(k)
        print(f"  {lp.names[k]:24s} {KINDS[int(lp.kind[k])]:13s} {body(lp.body_a[k])} -> {body(lp.body_b[k])}   "
              f"rows [{r.start}:{r.stop}]")
    if len(lp) > limit:
        print(f"  ... {len(lp) - limit} more (--loops K lists more)")
