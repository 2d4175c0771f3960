"""Run under mpiexec: partree.parallel.velocity_from_momentum (M v = p) on several models and part
counts, given a model, a loader and a spec string, against the serial velocity_from_momentum.

Prints 'OK <max rel err>' on rank 0 and exits 0; aborts on a mismatch."""
import numpy as np
from mpi4py import MPI

import partree
from partree.models.generators import random_tree
from partree.parallel import velocity_from_momentum

comm = MPI.COMM_WORLD
MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
sources = [
    "autotree:nb=300,bf=1,skew=0.3",
    lambda: random_tree(200, seed=3, floating_base=True, joint_types=MIXED),
    random_tree(150, seed=4, p_chain=0.8, joint_types=MIXED),
]
worst = 0.0
for k, src in enumerate(sources):
    m = src() if callable(src) else (partree.resolve_model(src) if isinstance(src, str) else src)
    rng = np.random.default_rng(k)
    q, p = m.random_configuration(rng), rng.normal(size=m.nv)
    ref = partree.velocity_from_momentum(m, q, p)
    for P in (None, comm.size + 1, 7):
        v = velocity_from_momentum(src, q, p, backend="mpi", comm=comm, parts=P)
        if comm.rank == 0:
            err = float(np.abs(v - ref).max() / np.abs(ref).max())
            worst = max(worst, err)
            if not err < 1e-10:
                print(f"MISMATCH source {k} P={P}: {err}", flush=True)
                comm.Abort(3)
        elif v is not None:
            print("a rank other than 0 got a result", flush=True)
            comm.Abort(4)
if comm.rank == 0:
    print(f"OK {worst:.3e}", flush=True)
