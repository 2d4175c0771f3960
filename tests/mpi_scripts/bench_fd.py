"""Benchmark (not a test): mpiexec -n R python bench_fd.py SPEC [PARTS] [REPEAT]

Prints on rank 0 the best time of one forward-dynamics evaluation (qdd left distributed), the
same with the qdd gather, serial ABA on rank 0 for reference, and the boundary bytes."""
import sys
import time

import numpy as np
from mpi4py import MPI

import partree
from partree.parallel.mpi import MPIEngine

comm = MPI.COMM_WORLD
spec = sys.argv[1] if len(sys.argv) > 1 else "autotree:nb=1000000,bf=1"
parts = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "-" else None
rep = int(sys.argv[3]) if len(sys.argv) > 3 else 5
m = partree.specs.resolve_model(spec)
rng = np.random.default_rng(0)
q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
eng = MPIEngine(m, comm=comm, parts=parts, gather=False)
eng_g = MPIEngine(m, comm=comm, parts=parts, gather=True)
ref = partree.aba(m, q, qd, tau) if comm.rank == 0 else None
del m
best = best_g = 1e9
for _ in range(rep):
    comm.Barrier()
    t = time.perf_counter()
    eng.forward_dynamics(q, qd, tau)
    comm.Barrier()
    best = min(best, time.perf_counter() - t)
    comm.Barrier()
    t = time.perf_counter()
    x = eng_g.forward_dynamics(q, qd, tau)
    comm.Barrier()
    best_g = min(best_g, time.perf_counter() - t)
if comm.rank == 0:
    mm = partree.specs.resolve_model(spec)
    ta = 1e9
    for _ in range(rep):
        t = time.perf_counter()
        partree.aba(mm, q, qd, tau)
        ta = min(ta, time.perf_counter() - t)
    err = float(np.abs(x - ref).max() / np.abs(ref).max())
    info = eng.last_info
    print(f"ranks={comm.size} parts={eng.nparts} fd={best:.4f}s fd+gather={best_g:.4f}s aba={ta:.4f}s "
          f"err={err:.1e} boundary_bytes={info['boundary_bytes']} setup={eng.setup_time:.2f}s "
          f"times={ {k: round(v, 4) for k, v in info['times'].items()} }", flush=True)
