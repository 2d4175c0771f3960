"""One BLAS thread per MPI rank.

Under ``mpiexec -n P`` every rank is a process of its own, normally one per core.  NumPy's
OpenBLAS (and MKL, and OpenMP runtimes) start one thread per core in every process and let them
spin-wait after each call; with P ranks on P cores those threads steal the other ranks' cores
(docs/performance.md has the figures).

:func:`limit_under_mpi` is called when partree is imported.  When the process was started by an
MPI launcher it sets ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` to 1
unless the user has set one of them (or ``PARTREE_KEEP_THREADS``); if NumPy was imported first
(so the variables come too late) it limits the loaded BLAS pools through threadpoolctl instead.  Outside a launcher it does nothing.
"""
from __future__ import annotations

import os
import sys

#: variables set by MPI launchers in every rank (MPICH/Hydra and Intel MPI, Open MPI, PMIx, MVAPICH)
LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def under_mpi_launcher(environ=None):
    """True when this process was started by mpiexec/mpirun/srun --mpi (one of LAUNCHER_VARS set)."""
    env = os.environ if environ is None else environ
    return any(v in env for v in LAUNCHER_VARS)


def limit_under_mpi():
    """Under an MPI launcher: one BLAS/OpenMP thread per rank unless the user chose otherwise.
    Returns the names of the variables it set (empty outside a launcher)."""
    if not under_mpi_launcher() or os.environ.get("PARTREE_KEEP_THREADS"):
        return []
    if any(v in os.environ for v in THREAD_VARS):
        return []           # the user chose
    for v in THREAD_VARS:
        os.environ[v] = "1"
    if "numpy" in sys.modules:
        # NumPy came first, its BLAS pool already exists: shrink it
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            threadpool_limits(1)
    return list(THREAD_VARS)


def find_mpiexec():
    """The MPI launcher to start jobs with: the ``mpiexec`` next to this interpreter (the mpich
    wheel installs it in the environment's bin/), else the one on PATH, else None."""
    import shutil

    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")
