"""Run under mpiexec; the last rank fails, the job must abort with the message, never hang.

argv[1] = 'nan'    : a NaN in the last rank's part of q (after one good evaluation)
argv[1] = 'loader' : the model loader raises on the last rank only (every rank builds the model)
argv[1] = 'rootloader' : the loader raises on rank 0, which builds the model for all (the
                     default set-up); the other ranks wait for their parts and must not hang
"""
import sys

import numpy as np
from mpi4py import MPI

import partree
from partree.parallel.mpi import MPIEngine

comm = MPI.COMM_WORLD
last = comm.Get_size() - 1
mode = sys.argv[1] if len(sys.argv) > 1 else "nan"


def loader():
    if (mode == "loader" and comm.rank == last) or mode == "rootloader":
        raise RuntimeError("loader failed on purpose")
    return partree.specs.resolve_model("autotree:nb=200,bf=1")


eng = MPIEngine(loader, comm=comm, parts=comm.Get_size(), distribute="each" if mode == "loader" else "root")
q = np.zeros(200)
qd = np.zeros(200)
tau = np.zeros(200)
eng.forward_dynamics(q, qd, tau)           # a good evaluation first
if comm.rank == last:
    q[int(eng.parts[0].qsel[3])] = np.nan  # only this rank sees the bad input
eng.forward_dynamics(q, qd, tau)
print("NOT REACHED", flush=True)
