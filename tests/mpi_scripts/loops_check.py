"""Run under mpiexec: models with closed loops over MPI vs serial ``partree.constrained_dynamics``.

Forward dynamics and the joint wrenches (the loop forces applied), the loops kept inside parts by
the partitioner and solved there; trees joined by a loop share a part; partitions that split
loops (solved at the root) and the scissor mast's pins between units.  Prints 'OK <max rel err>'
on rank 0 and exits 0; aborts with a message on a mismatch."""
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

import partree
from partree.parallel import forward_dynamics
from partree.parallel.mpi import MPIEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loop_models import forest, four_bar, local_loop_models, scissor_pins, spanning_cases, state  # noqa: E402
from partree.parallel.partition import partition_from_roots  # noqa: E402

comm = MPI.COMM_WORLD
size = comm.Get_size()


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


worst = 0.0
cases = [(m, (None, size + 1, 2 * size + 3)) for m in local_loop_models()]
cases += [(forest(), (None, size + 1)), (four_bar(), (None, 1))]
cases += [(m, (partition_from_roots(m, roots),)) for m, roots in spanning_cases()]
cases += [(scissor_pins(10), (None, size + 2))]
for mi, (m, counts) in enumerate(cases):
    q, qd, tau, F = state(m, mi)
    ref = partree.constrained_dynamics(m, q, qd, tau, f_ext=F, redundant="drop")
    for P in counts:
        qdd = forward_dynamics(m, q, qd, tau, backend="mpi", comm=comm, parts=P, f_ext=F)
        res = MPIEngine(m, comm=comm, parts=P).constraint_forces(q, qd, tau, F)
        if comm.rank == 0:
            errs = [rel(qdd, ref.qdd), rel(res.qdd, ref.qdd), rel(res.joint_wrench, ref.joint_wrench),
                    rel(res.constraint_force, ref.constraint_force), rel(res.loop_multipliers, ref.multipliers),
                    rel(res.loop_force, ref.loop_force)]
            if not max(errs) < 1e-10:
                print(f"MISMATCH model {mi} ({m.name}) P={P}: {errs}", flush=True)
                comm.Abort(3)
            worst = max(worst, max(errs))
if comm.rank == 0:
    print(f"OK {worst:.3e}", flush=True)
sys.exit(0)
