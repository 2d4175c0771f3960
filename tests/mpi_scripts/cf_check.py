"""Run under mpiexec: the constraint forces over MPI vs serial ``partree.cfa`` (leaf-first).

Prints 'OK <max rel err>' on rank 0 and exits 0; aborts with a message on a mismatch."""
import sys

import numpy as np
from mpi4py import MPI

import partree
from partree.models.generators import random_tree
from partree.parallel import constraint_forces
from partree.parallel.mpi import MPIEngine

comm = MPI.COMM_WORLD
size = comm.Get_size()
MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def check(res, ref, what):
    errs = [rel(res.qdd, ref.qdd), rel(res.joint_wrench, ref.joint_wrench),
            rel(res.constraint_force, ref.constraint_force), rel(res.drive_force, ref.drive_force),
            float(np.abs(res.constraint_rows - ref.constraint_rows).max())]
    if not max(errs) < 1e-10:
        print(f"MISMATCH {what}: {errs}", flush=True)
        comm.Abort(3)
    return max(errs)


worst = 0.0
loaders = ["autotree:nb=300,bf=1,skew=0.3", "autotree:nb=255,bf=2",
           lambda: random_tree(200, seed=3, floating_base=True, joint_types=MIXED)]
for li, loader in enumerate(loaders):
    m = loader() if callable(loader) else partree.specs.resolve_model(loader)
    rng = np.random.default_rng(li)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    ref = partree.cfa(m, q, qd, tau, f_ext=F)
    name = m.joint_names[m.n // 2]
    for P in (None, size + 1, 2 * size + 3):
        # an engine from a spec or loader: rank 0 builds the model and drops it (the constraint rows
        # are gathered); from a Model: rank 0 keeps the caller's model and forms the rows when asked
        for src in (loader, m):
            if src is m:
                res = constraint_forces(src, q, qd, tau, backend="mpi", comm=comm, parts=P, f_ext=F)
            else:
                res = MPIEngine(src, comm=comm, parts=P).constraint_forces(q, qd, tau, F)
                if comm.rank == 0 and res._Wt is None:
                    print("MISMATCH: no constraint rows gathered for a model rank 0 does not hold", flush=True)
                    comm.Abort(7)
            if comm.rank == 0:
                worst = max(worst, check(res, ref, f"model {li} P={P} {type(src).__name__}"))
                if not np.allclose(res.constraint_force_of(name), ref.constraint_force_of(name), rtol=0, atol=1e-9):
                    print(f"MISMATCH constraint_force_of {name}", flush=True)
                    comm.Abort(4)
            elif res is not None:
                print("a rank other than 0 got a result", flush=True)
                comm.Abort(5)
# the pieces stay on the ranks without a gather; gathered they equal the serial reference
m = random_tree(120, seed=9, floating_base=True)
eng = MPIEngine(m, comm=comm, parts=size + 1)
rng = np.random.default_rng(11)
q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
ref = partree.cfa(m, q, qd, tau)
assert eng.constraint_forces(q, qd, tau, gather=False) is None
local = sum(F.shape[0] for F, _, _ in eng.local_wrenches)
total = comm.reduce(local, root=0)
res = eng.constraint_forces(q, qd, tau)
if comm.rank == 0:
    if total != m.n:
        print(f"MISMATCH local wrenches cover {total} of {m.n} bodies", flush=True)
        comm.Abort(6)
    worst = max(worst, check(res, ref, "engine reuse"))
    print(f"OK {worst:.3e}", flush=True)
sys.exit(0)
