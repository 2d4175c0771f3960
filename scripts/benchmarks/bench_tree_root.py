"""The flat root against the hierarchical root (partree.parallel.hierarchical_root).

One process (default): for P parts of a random tree and of a chain (2 P bodies), the best of
``--repeat`` times of

* flat: ``root.compose_velocities`` + ``root.solve`` (rank 0's work in the flat root);
* tree, all: ``hierarchical_root.compose_velocities`` + ``solve`` (every merge and split, one process);
* tree, critical path: with ``--rho`` parts per rank (hosts = part // rho), the slowest rank's
  leaves plus, per level of the reduction tree, the slowest merge and split (each node timed in
  the run above), both rounds: the time the tree root would take with every rank on its own
  core and free messages.

Under mpiexec (``--mpi``): ``MPIEngine.forward_dynamics`` with ``root='flat'`` and ``'tree'``
(best of ``--repeat``, the largest of the ranks' times), chain and binary tree of ``--bodies``
bodies, the default partition.

    python scripts/benchmarks/bench_tree_root.py --sizes 100 300 1000 3000 10000
    mpiexec -n 16 python scripts/benchmarks/bench_tree_root.py --mpi
"""
import argparse
import json
import time

import numpy as np


def one_process(sizes, repeat, rho):
    import partree
    from partree.models.generators import random_tree
    from partree.parallel import hierarchical_root as HR
    from partree.parallel import root as R
    from partree.parallel.serial import SerialEngine

    rows = []
    for P in sizes:
        for name, m in (("random", random_tree(2 * P, seed=3, floating_base=True)),
                        ("chain", partree.specs.resolve_model(f"autotree:nb={2 * P},bf=1"))):
            eng = SerialEngine(m, parts=P)
            rng = np.random.default_rng(0)
            q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
            vel = [pk.velocity(q[pk.qix], qd[pk.vix]) for pk in eng.parts]
            v_in = R.compose_velocities(eng.tree, vel)
            red = [pk.reduce(v_in[k], tau[pk.vix], None) for k, pk in enumerate(eng.parts)]
            P = eng.tree.nparts
            owner = np.arange(P) // rho
            t = time.perf_counter()
            plan = HR.make_plan(eng.tree, owner, 2)
            t_plan = time.perf_counter() - t
            flat = tree = np.inf
            for _ in range(repeat):
                t = time.perf_counter()
                R.compose_velocities(eng.tree, vel)
                R.solve(eng.tree, red, eng.a0)
                flat = min(flat, time.perf_counter() - t)
                t = time.perf_counter()
                HR.compose_velocities(eng.tree, vel, plan=plan)
                HR.solve(eng.tree, red, eng.a0, plan=plan)
                tree = min(tree, time.perf_counter() - t)
            crit = critical_path(eng, vel, red, plan, owner, repeat)
            row = {"model": name, "P": P, "flat_s": flat, "tree_all_s": tree, "tree_critical_s": crit,
                   "plan_s": t_plan, "depth": plan.depth, "max_ports": plan.last_stats["max_ports"],
                   "max_doubles": plan.last_stats["max_doubles"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def critical_path(eng, vel, red, plan, owner, repeat=3):
    """The tree root's time with one core per rank: each node's merge and split timed, the
    best of ``repeat`` runs node by node (a shared machine deschedules the process now and then,
    for tens of ms, which a maximum over the nodes of a level would pick up)."""
    from partree.parallel import hierarchical_root as HR

    P = eng.tree.nparts
    best = {}
    orig_merge, orig_split = HR.merge, HR.split
    calls = []

    def merge(members, top):
        t = time.perf_counter()
        out = orig_merge(members, top)
        calls.append(time.perf_counter() - t)
        return out

    def split(rec, u):
        t = time.perf_counter()
        out = orig_split(rec, u)
        calls.append(time.perf_counter() - t)
        return out

    piece = HR.one_rank_piece(plan)
    ids = list(piece.leaves) + [n for n, _ in piece.groups]           # run_up's order
    down = [n for n, _ in reversed(piece.groups)] + list(piece.leaves)   # run_down's order
    HR.merge, HR.split = merge, split
    try:
        for _ in range(repeat):
            cost = {}
            for rels, top in (({p: HR.part_velocity_relation(plan.leaves[p], vel[p]) for p in range(P)}, np.zeros(6)),
                              ({p: HR.part_relation(plan.leaves[p], red[p]) for p in range(P)}, eng.a0)):
                calls.clear()
                recs = HR.run_up(piece, rels, top, HR.no_send, HR.no_send)
                for n, t in zip(ids, calls):
                    cost[n] = cost.get(n, 0.0) + t
                calls.clear()
                HR.run_down(piece, recs, HR.no_send, HR.no_send)
                for n, t in zip(down, calls):
                    cost[n] = cost.get(n, 0.0) + t
            for n, t in cost.items():
                best[n] = min(best.get(n, np.inf), t)
    finally:
        HR.merge, HR.split = orig_merge, orig_split
    leaves = np.bincount(owner, weights=[best[p] for p in range(P)]).max()
    levels = {}
    for n in plan.nodes[P:]:
        levels[n.level] = max(levels.get(n.level, 0.0), best[n.id])
    return float(leaves + sum(levels.values()))


def under_mpi(bodies, repeat):
    from mpi4py import MPI

    import partree
    from partree.parallel.mpi import MPIEngine

    comm = MPI.COMM_WORLD
    for bf in (1, 2):
        m = partree.specs.resolve_model(f"autotree:nb={bodies},bf={bf}")
        rng = np.random.default_rng(0)
        q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
        res = {}
        for root in ("flat", "tree"):
            eng = MPIEngine(m, comm=comm, parts=None, root=root, gather=False)
            best = np.inf
            for _ in range(repeat):
                comm.Barrier()
                t = time.perf_counter()
                eng.forward_dynamics(q, qd, tau)
                best = min(best, comm.allreduce(time.perf_counter() - t, op=MPI.MAX))
            res[root] = best
            res[root + "_parts"] = eng.nparts
            st = comm.gather(eng.root_stats, root=0)
            if comm.rank == 0 and root == "tree":
                res["max_doubles"] = max(s.get("max_doubles", 0) for s in st)
                res["depth"] = st[0]["depth"]
        if comm.rank == 0:
            print(json.dumps({"ranks": comm.size, "model": f"autotree:nb={bodies},bf={bf}", **res}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 3000, 10000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rho", type=int, default=2, help="parts per rank for the critical path")
    ap.add_argument("--mpi", action="store_true", help="time the MPI engine (run under mpiexec)")
    ap.add_argument("--bodies", type=int, default=2000)
    a = ap.parse_args()
    if a.mpi:
        under_mpi(a.bodies, a.repeat)
    else:
        one_process(a.sizes, a.repeat, a.rho)


if __name__ == "__main__":
    main()
