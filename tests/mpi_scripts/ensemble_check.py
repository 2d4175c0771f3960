"""Run under mpiexec: simulate_ensemble(..., backend='mpi') against serial runs of every member.

Members are dealt out over the ranks; rank 0 gathers every result, the other ranks get None.
Prints 'OK <members> <max abs diff>' on rank 0 and exits 0; raises on a mismatch."""
import sys
import tempfile

import numpy as np
from mpi4py import MPI

from partree.models.generators import random_tree
from partree.simulation import load_results, simulate, simulate_ensemble

comm = MPI.COMM_WORLD
m = random_tree(12, seed=3, floating_base=True, joint_types=("revolute", "spherical", "prismatic"))
rng = np.random.default_rng(7)
Q0 = np.array([m.random_configuration(rng) for _ in range(5)])
QD0 = 0.3 * rng.standard_normal((5, m.nv))
out = tempfile.mkdtemp() if comm.Get_rank() == 0 else None
out = comm.bcast(out, root=0)
res = simulate_ensemble(m, 0.05, 1e-3, q0=Q0, qd0=QD0, backend="mpi", out_dir=out + "/ens", integrator="rk4")
if comm.Get_rank() != 0:
    assert res is None
    sys.exit(0)
assert len(res) == 5
worst = 0.0
for k in range(5):
    ref = simulate(m, 0.05, 1e-3, q0=Q0[k], qd0=QD0[k], integrator="rk4", progress=False)
    back = load_results(f"{out}/ens/member_{k:05d}.npz")
    for r in (res[k], back):
        assert np.array_equal(r.q, ref.q) and np.array_equal(r.qd, ref.qd), k
    worst = max(worst, float(np.abs(res[k].q - ref.q).max()))
print("OK", len(res), worst)
