"""Run under mpiexec: models with closed loops over MPI vs serial ``partree.constrained_dynamics``.

Forward dynamics and the joint wrenches (the loop forces applied), the loops kept inside parts by
the partitioner and solved there.  Prints 'OK <max rel err>' on rank 0 and exits 0; aborts with a
message on a mismatch."""
import sys

import numpy as np
from mpi4py import MPI

import partree
from partree.models.generators import chain, random_tree
from partree.models.local_loops import with_local_loops
from partree.parallel import forward_dynamics
from partree.parallel.mpi import MPIEngine

comm = MPI.COMM_WORLD
size = comm.Get_size()


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


worst = 0.0
models = [with_local_loops(random_tree(120, seed=3, floating_base=True), 6, seed=3, kinds=("spherical", "weld")),
          with_local_loops(chain(150, joint="universal"), 8, seed=4, world=1),
          with_local_loops(random_tree(100, seed=5), 5, seed=5)]
for mi, m in enumerate(models):
    rng = np.random.default_rng(mi)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    ref = partree.constrained_dynamics(m, q, qd, tau, f_ext=F)
    for P in (None, size + 1, 2 * size + 3):
        qdd = forward_dynamics(m, q, qd, tau, backend="mpi", comm=comm, parts=P, f_ext=F)
        res = MPIEngine(m, comm=comm, parts=P).constraint_forces(q, qd, tau, F)
        if comm.rank == 0:
            errs = [rel(qdd, ref.qdd), rel(res.qdd, ref.qdd), rel(res.joint_wrench, ref.joint_wrench),
                    rel(res.constraint_force, ref.constraint_force)]
            if not max(errs) < 1e-10:
                print(f"MISMATCH model {mi} P={P}: {errs}", flush=True)
                comm.Abort(3)
            worst = max(worst, max(errs))
if comm.rank == 0:
    print(f"OK {worst:.3e}", flush=True)
sys.exit(0)
