"""partree: dynamics of very large tree-structured multibody systems."""
from .mpienv import limit_under_mpi as _limit_under_mpi

_limit_under_mpi()    # one BLAS thread per MPI rank (before NumPy starts its pool); see partree/mpienv.py

from . import io, joints, loops, models, spatial, specs
from .algorithms.aba import aba
from .algorithms.batch import get_num_threads, set_num_threads
from .algorithms.cfa import CFAResult, cfa, constraint_bases
from .algorithms.crba import bias_forces, crba, mass_matrix_operator
from .algorithms.energy import center_of_mass, energy, kinetic_energy, momentum, potential_energy
from .algorithms.generalized_momentum import generalized_momentum
from .algorithms.momentum_rhs import momentum_rhs
from .algorithms.impulse import apply_impulse, generalized_impulse
from .algorithms.velocity_from_momentum import velocity_from_momentum
from .algorithms.kinematics import forward_kinematics
from .algorithms.loop_constraints import loop_constraints
from .algorithms.constrained_dynamics import constrained_dynamics
from .algorithms.loop_correction import assemble, correct_state
from .algorithms.rnea import joint_wrenches, rnea
from .algorithms.hybrid_dynamics import hybrid_dynamics
from .configuration import integrate
from .io import load_mjcf, load_model, load_urdf, save_model
from .model import Data, Model
from .loops import Loop
from .builder import ModelBuilder
from .errors import (CheckpointError, DaskEngineError, MissingDependencyError, PartreeError, PartreeInertiaWarning,
                     PartreeInputError)
from .specs import register_generator, resolve_model
from .simulation import SimulationInterrupted, SimulationOptions, load_results, simulate, simulate_ensemble
from . import parallel
from .parallel import constraint_forces, forward_dynamics
from .parallel.subsystem import SubsystemEquivalent, subsystem_equivalent

__version__ = "0.1.0"
__all__ = ["Model", "Data", "Loop", "ModelBuilder", "PartreeError", "PartreeInputError", "CheckpointError", "DaskEngineError",
           "MissingDependencyError", "PartreeInertiaWarning", "SimulationInterrupted", "aba", "cfa", "CFAResult", "constraint_bases", "rnea", "hybrid_dynamics", "joint_wrenches", "crba", "bias_forces",
           "mass_matrix_operator", "forward_kinematics", "kinetic_energy", "potential_energy", "energy",
           "center_of_mass", "momentum", "generalized_momentum", "velocity_from_momentum", "momentum_rhs", "apply_impulse", "generalized_impulse", "loop_constraints", "constrained_dynamics", "correct_state", "assemble", "integrate", "load_urdf", "load_mjcf", "save_model", "load_model", "resolve_model",
           "register_generator", "set_num_threads", "get_num_threads", "simulate", "simulate_ensemble", "load_results", "SimulationOptions", "forward_dynamics", "constraint_forces", "subsystem_equivalent", "SubsystemEquivalent", "parallel", "io", "specs", "joints", "loops", "models", "spatial"]
