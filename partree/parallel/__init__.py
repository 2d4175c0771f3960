"""The parallel engine: partition a tree into parts, reduce each part to its boundary, solve the
small tree of parts at the root, back-substitute.  Backends: serial (the reference), MPI, Dask.

    from partree.parallel import forward_dynamics, partition
    qdd = forward_dynamics(model, q, qd, tau, backend="serial", parts=8)
"""
from .partition import Partition, partition
from .serial import PartKernel, SerialEngine, forward_dynamics_serial

BACKENDS = ("serial", "mpi", "dask")


def forward_dynamics(model, q, qd, tau, backend="serial", parts=None, comm=None, client=None):
    """Forward dynamics qdd through the parallel decomposition.

    backend 'serial': in this process (``parts`` default 1).
    backend 'mpi': collective over ``comm`` (default COMM_WORLD); ``model`` may also be a loader
        (callable or spec string) run on every rank; returns qdd on rank 0, None elsewhere.
    backend 'dask': over ``client`` (default: a LocalCluster with 2 single-threaded workers).
    """
    if backend == "serial":
        return forward_dynamics_serial(model, q, qd, tau, parts=parts)
    if backend == "mpi":
        from .mpi import forward_dynamics_mpi

        return forward_dynamics_mpi(model, q, qd, tau, comm=comm, parts=parts)
    if backend == "dask":
        from .dask_backend import forward_dynamics_dask

        return forward_dynamics_dask(model, q, qd, tau, client=client, parts=parts)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


__all__ = ["forward_dynamics", "partition", "Partition", "SerialEngine", "PartKernel", "forward_dynamics_serial",
           "BACKENDS"]
