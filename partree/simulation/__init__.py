"""Time simulation of tree dynamics: integrators, the ``simulate`` driver, checkpoints, results.

    from partree.simulation import simulate, load_results
    res = simulate("chain:n=10", t_end=2.0, dt=1e-3, integrator="rk4", out="run.h5")

The integrators take a pluggable dynamics function ``f(t, q, v) -> qdd`` and a ``StateSpace``
(state layout and global-norm hooks), so distributed backends plug in without changes here.
"""
from .checkpoint import CheckpointError, Checkpointer, model_fingerprint
from .dynamics import Dynamics
from .integrators import DOP853, RK4, DormandPrince5, EmbeddedRK, StateSpace, SymplecticEuler, make_integrator
from .results import SimulationResult, load_results
from .distributed import simulate_dask, simulate_mpi
from .simulate import simulate

__all__ = ["simulate", "simulate_mpi", "simulate_dask", "load_results", "SimulationResult", "Dynamics", "StateSpace", "RK4", "SymplecticEuler",
           "DormandPrince5", "DOP853", "EmbeddedRK", "make_integrator", "Checkpointer", "CheckpointError",
           "model_fingerprint"]
