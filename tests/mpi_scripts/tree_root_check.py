"""Run under mpiexec: the hierarchical root (``MPIEngine(root='tree')``) against the flat root and
the serial backend.

Forward dynamics on a chain, a binary tree and a random tree of mixed joints (a few hundred bodies
at most), the default partition and 2 R + 1 parts, fan-in 2 and 3; external wrenches, hybrid
dynamics, the constraint forces and the momentum form's right-hand side through the tree; an
engine reused for two states; ``auto``
picks the tree from ``TREE_ROOT_MIN_PARTS`` parts on.  With the argument ``light`` (for many
oversubscribed ranks): the chain and the binary tree at 2 R + 1 parts, fan-in 2, forward
dynamics and the momentum form, tree against flat and serial only.  Prints 'OK <max rel err> <largest
relation in doubles> <plan depth> <tree bytes> <flat bytes>' on rank 0 and exits 0; aborts with a
non-zero code on a mismatch."""
import sys

import numpy as np
from mpi4py import MPI

import partree
from partree.models.generators import binary_tree, random_tree
from partree.parallel import forward_dynamics
from partree.parallel.mpi import TREE_ROOT_MIN_PARTS, MPIEngine

comm = MPI.COMM_WORLD
size = comm.Get_size()
light = "light" in sys.argv[1:]
MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
worst = 0.0
largest = depth = 0
tree_bytes = flat_bytes = 0


def check(got, ref, what):
    global worst
    if comm.rank == 0:
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        worst = max(worst, err)
        if not err < 1e-10:
            print(f"MISMATCH {what}: {err}", flush=True)
            comm.Abort(3)


def note(eng):
    global largest, depth
    st = comm.gather(eng.root_stats, root=0)
    if comm.rank == 0:
        largest = max(largest, max(s.get("max_doubles", 0) for s in st))
        depth = max(depth, st[0].get("depth", 0))
        if eng.root_mode != "tree":
            print(f"root_mode {eng.root_mode}", flush=True)
            comm.Abort(5)


models = [("chain", lambda: partree.specs.resolve_model("autotree:nb=200,bf=1")),
          ("binary", lambda: binary_tree(255)),
          ("random", lambda: random_tree(150, seed=3, floating_base=True, joint_types=MIXED))]
for li, (name, loader) in enumerate(models[:2] if light else models):
    m = loader()
    rng = np.random.default_rng(li)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)
    for P, fanin in ((2 * size + 1, 2),) if light else ((None, 2), (2 * size + 1, 2), (2 * size + 1, 3)):
        if comm.rank == 0:
            print(f"{name} P={P} f={fanin}", flush=True)
        flat = MPIEngine(m, comm=comm, parts=P, root="flat")
        tree = MPIEngine(m, comm=comm, parts=P, root="tree", fanin=fanin)
        a = flat.forward_dynamics(q, qd, tau)
        b = tree.forward_dynamics(q, qd, tau)
        note(tree)
        if comm.rank == 0:
            ser = forward_dynamics(m, q, qd, tau, backend="serial", parts=tree.nparts)
            check(b, a, f"{name} P={P} f={fanin} tree vs flat")
            check(b, ser, f"{name} P={P} f={fanin} tree vs serial")
            check(a, ser, f"{name} P={P} flat vs serial")
            if name == "binary" and P is not None and fanin == 2:
                tree_bytes, flat_bytes = tree.last_info["boundary_bytes"], flat.last_info["boundary_bytes"]
        else:
            assert a is None and b is None
        if P is not None and fanin == 2 and not light:
            auto = MPIEngine(m, comm=comm, parts=P)
            want = "tree" if auto.nparts >= TREE_ROOT_MIN_PARTS else "flat"
            if auto.root_mode != want:
                print(f"auto chose {auto.root_mode} at {auto.nparts} parts", flush=True)
                comm.Abort(6)
# the momentum form through the tree (field, solve at rest, totals) against the flat root and serial:
# the binary tree (light) or the floating random tree of mixed joints
for li, (name, loader) in enumerate(models[1:2] if light else models[2:]):
    m = loader()
    rng = np.random.default_rng(50 + li)
    q, p = m.random_configuration(rng), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    P = 2 * size + 1
    tree = MPIEngine(m, comm=comm, parts=P, root="tree", poses=True)
    flat = MPIEngine(m, comm=comm, parts=P, root="flat", poses=True)
    b = tree.momentum_rhs(q, p, f_ext=F)
    a = flat.momentum_rhs(q, p, f_ext=F)
    note(tree)
    if comm.rank == 0:
        ref = partree.momentum_rhs(m, 0.0, q, p, np.zeros(m.nv), f_ext=F)
        for x, y, z, what in ((b[0], a[0], ref[0], "qdot"), (b[1], a[1], ref[1], "pdot")):
            check(x, y, f"momentum {name} {what} tree vs flat")
            check(x, z, f"momentum {name} {what} tree vs serial")
# the random tree: reused engine, external wrenches, hybrid dynamics, constraint forces
if light:
    if comm.rank == 0:
        print(f"OK {worst:.3e} {largest} {depth} {tree_bytes} {flat_bytes}", flush=True)
    sys.exit(0)
if comm.rank == 0:
    print("random tree: reuse, f_ext, hybrid, constraint forces", flush=True)
m = models[2][1]()
tree = MPIEngine(m, comm=comm, parts=size + 2, root="tree")
flat = MPIEngine(m, comm=comm, parts=size + 2, root="flat")
for s in range(2):
    rng = np.random.default_rng(100 + s)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    b = tree.forward_dynamics(q, qd, tau, F)
    if comm.rank == 0:
        check(b, partree.aba(m, q, qd, tau, f_ext=F), f"reuse {s} f_ext vs aba")
mask = np.zeros(m.n, dtype=bool)
mask[::3] = True
qdd_a = np.random.default_rng(5).normal(size=m.nv)
hb = tree.forward_dynamics(q, qd, tau, active=mask, qdd_active=qdd_a)
hf = flat.forward_dynamics(q, qd, tau, active=mask, qdd_active=qdd_a)
if comm.rank == 0:
    check(hb[0], hf[0], "hybrid qdd tree vs flat")
    check(hb[1], hf[1], "hybrid tau tree vs flat")
cb = tree.constraint_forces(q, qd, tau)
cf = flat.constraint_forces(q, qd, tau)
if comm.rank == 0:
    check(cb.joint_wrench, cf.joint_wrench, "constraint forces tree vs flat")
note(tree)
if comm.rank == 0:
    print(f"OK {worst:.3e} {largest} {depth} {tree_bytes} {flat_bytes}", flush=True)
