"""Run under mpiexec: forward_dynamics_mpi on several models and part counts vs serial ABA.

Prints 'OK <max rel err> <boundary bytes>' on rank 0 and exits 0; exits non-zero on a mismatch."""
import sys

import numpy as np
from mpi4py import MPI

import partree
from partree.models.generators import binary_tree, random_tree
from partree.parallel.mpi import MPIEngine, forward_dynamics_mpi

comm = MPI.COMM_WORLD
size = comm.Get_size()
MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
loaders = [
    "autotree:nb=300,bf=1,skew=0.3",
    lambda: binary_tree(127, joint=(["revolute", "universal", "spherical"] * 43)[:127]),
    lambda: random_tree(200, seed=3, floating_base=True, joint_types=MIXED),
    lambda: random_tree(150, seed=4, p_chain=0.8, joint_types=MIXED),
]
worst = 0.0
nbytes = []
for li, loader in enumerate(loaders):
    m = loader() if callable(loader) else partree.specs.resolve_model(loader)
    rng = np.random.default_rng(li)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)
    ref = partree.aba(m, q, qd, tau)
    for P in (None, size + 1, 2 * size + 3, 9):
        qdd, info = forward_dynamics_mpi(loader, q, qd, tau, comm=comm, parts=P, return_info=True)
        if comm.rank == 0:
            err = float(np.abs(qdd - ref).max() / np.abs(ref).max())
            worst = max(worst, err)
            nbytes.append(info["boundary_bytes"])
            if not err < 1e-10:
                print(f"MISMATCH model {li} P={P}: {err}", flush=True)
                comm.Abort(3)
        else:
            assert qdd is None
# an engine reused for several states
m = random_tree(100, seed=9, floating_base=True)
eng = MPIEngine(m, comm=comm, parts=5)
for s in range(3):
    rng = np.random.default_rng(100 + s)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    qdd = eng.forward_dynamics(q, qd, tau)
    if comm.rank == 0:
        err = float(np.abs(qdd - partree.aba(m, q, qd, tau)).max())
        worst = max(worst, err)
        if not err < 1e-9:
            print(f"MISMATCH reuse {s}: {err}", flush=True)
            comm.Abort(4)
# external body wrenches, with both set-ups (parts sent by rank 0 / sliced on every rank)
F = np.random.default_rng(7).normal(size=(m.n, 6))
ref = partree.aba(m, q, qd, tau, f_ext=F)
for dist in ("root", "each"):
    eng = MPIEngine(m, comm=comm, parts=size + 2, distribute=dist)
    qdd = eng.forward_dynamics(q, qd, tau, F)
    if comm.rank == 0:
        err = float(np.abs(qdd - ref).max() / np.abs(ref).max())
        worst = max(worst, err)
        if not err < 1e-10:
            print(f"MISMATCH f_ext distribute={dist}: {err}", flush=True)
            comm.Abort(5)
if comm.rank == 0:
    print(f"OK {worst:.3e} {max(nbytes)}", flush=True)
sys.exit(0)
