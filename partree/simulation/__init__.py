"""Time simulation of tree dynamics: one ``simulate`` for every backend, checkpoints, results.

    from partree.simulation import simulate, load_results
    res = simulate("chain:n=10", t_end=2.0, dt=1e-3, integrator="rk4", out="run.h5")
    res = simulate(model, 2.0, 1e-3, backend="mpi", parts=8)        # on every rank, under mpiexec

Modules: ``options`` (:class:`SimulationOptions`: every option, checked at entry, and the
fingerprint a checkpoint must match), ``dynamics`` (the joint inputs and the dynamics function,
in the velocity form or in generalized momenta), ``integrators`` (RK4, DOPRI5, DOP853, symplectic
Euler and the sixth-order Gauss-Legendre method, on the joint manifolds), ``loop`` (the one
time loop: ticks, save points, checkpoints, progress, interrupts), the backends ``serial``,
``mpi`` and ``dask_backend``, ``checkpoint`` (the checkpoint files), ``results`` (the results
files: their format is described there), ``outputs`` (the checks of every output path) and
``flexible`` (runs of models with flexible bodies, serial backend), ``driver`` (:func:`simulate`) and
``ensemble`` (:func:`simulate_ensemble`: many independent runs
over the cores, MPI ranks or Dask workers).
"""
from .checkpoint import Checkpointer, model_fingerprint
from .driver import simulate
from .ensemble import ensemble_members, simulate_ensemble
from .dynamics import Dynamics, MomentumDynamics
from .integrators import DOP853, RK4, DormandPrince5, EmbeddedRK, Gauss6, StateSpace, SymplecticEuler, make_integrator
from .loop import SimulationInterrupted
from .options import SimulationOptions
from .results import SimulationResult, load_results
from ..errors import CheckpointError

__all__ = ["simulate", "simulate_ensemble", "ensemble_members", "SimulationOptions", "SimulationInterrupted", "load_results", "SimulationResult", "Dynamics", "MomentumDynamics",
           "StateSpace", "RK4", "SymplecticEuler", "Gauss6", "DormandPrince5", "DOP853", "EmbeddedRK", "make_integrator",
           "Checkpointer", "CheckpointError", "model_fingerprint"]
