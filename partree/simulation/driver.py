"""``simulate``: the one entry point of a simulation, on every backend."""
from __future__ import annotations

from ..errors import PartreeInputError
from .loop import run as run_loop
from .options import SimulationOptions

#: the joint inputs ``simulate`` passes to ``Dynamics`` (with the initial state q0, qd0)
INPUTS = ("torques", "damping", "stiffness", "q_ref", "f_ext", "prescribed")


def make_backend(name, comm=None, client=None):
    """The backend object of a run.

    Parameters
    ----------
    name : str
        ``'serial'``, ``'mpi'`` or ``'dask'``.
    comm : mpi4py communicator, optional
        For 'mpi' (default COMM_WORLD).
    client : distributed.Client, optional
        For 'dask' (default: a LocalCluster, closed at the end).

    Returns
    -------
    Backend
        The backend.
    """
    if comm is not None and name != "mpi":
        raise PartreeInputError(f"comm is for backend 'mpi' (this run's backend is {name!r})")
    if client is not None and name != "dask":
        raise PartreeInputError(f"client is for backend 'dask' (this run's backend is {name!r})")
    if name == "mpi":
        from .mpi import MPIBackend

        return MPIBackend(comm)
    if name == "dask":
        from .dask_backend import DaskBackend

        return DaskBackend(client)
    from .serial import SerialBackend

    return SerialBackend()


def simulate(model, t_end=None, dt=None, *, options=None, q0=None, qd0=None, torques=None, damping=None,
             stiffness=None, q_ref=None, f_ext=None, prescribed=None, dynamics=None, space=None, comm=None,
             client=None, _step_hook=None, _probe=None, **option_values):
    """Simulate a tree from t = 0 to ``t_end``, on the serial, MPI or Dask backend.

    ``simulate(model, 2.0, 1e-3, integrator='dopri5', out='run.h5', checkpoint_every=500)``:
    every option of :class:`~partree.simulation.options.SimulationOptions` is a keyword here (or
    pass ``options=SimulationOptions(...)``); every value is checked, and every output path, before
    any work starts.

    Parameters
    ----------
    model : Model, str, path-like or callable
        The tree: a ``Model``, a model file or spec string (``partree.resolve_model``), or a
        zero-argument loader.
    t_end : float
        End time in s.
    dt : float
        Step of the fixed-step integrators; output spacing (``dt * save_every``) of the
        adaptive ones.
    options : SimulationOptions, optional
        Options to start from (keywords override them).
    q0, qd0 : array_like, optional
        Initial state (default: the neutral configuration, at rest).  A model with flexible
        bodies (:mod:`partree.simulation.flexible`) takes the joints' entries
        alone (the modes undeformed, at rest) or with its modal ones after them; its state and
        results are [q; eta], [qd; eta_dot].
    torques, damping, stiffness, q_ref, f_ext, prescribed : optional
        The joint inputs (see :class:`~partree.simulation.dynamics.Dynamics`).  The distributed
        backends take constant torques, per-joint torque callables of t, torque tables, damping,
        stiffness, constant external forces and prescribed motion of whole joints (each part
        evaluates its own joints' laws; the engine's hybrid dynamics gives their forces); inputs
        that need the whole state (callables of (t, q, qd)) run on the serial backend.
    dynamics : callable, optional
        A custom dynamics function ``f(t, q, v) -> qdd`` (or a ``Dynamics``) instead of the one
        built from the inputs (serial backend).
    space : StateSpace, optional
        A custom state layout (serial backend).
    comm : mpi4py communicator, optional
        Backend 'mpi': the ranks (default COMM_WORLD).  The call is collective: make it on every
        rank with the same arguments.
    client : distributed.Client, optional
        Backend 'dask': the cluster (default: a LocalCluster with 2 single-threaded workers,
        closed at the end).
    **option_values
        Any option of :class:`~partree.simulation.options.SimulationOptions` (integrator, rtol,
        atol, h0, h_max, max_steps, save_every, record, wrench_joints, out, overwrite,
        checkpoint, checkpoint_every, checkpoint_seconds, resume, keep_checkpoint, progress,
        verbose, catch_signals, backend, parts, path_weight, command).

    Returns
    -------
    SimulationResult or None
        The trajectory, with its summary; on backend 'mpi' on rank 0 only (None on the other
        ranks).

    Raises
    ------
    PartreeInputError
        A bad option or input, or an output that may not be written (a missing or read-only
        directory, an existing file without ``overwrite=True``, a model file).
    CheckpointError
        ``resume`` with a checkpoint that is missing, corrupt, or written for another model,
        other inputs or other options (on every MPI rank alike).
    MissingDependencyError
        An .h5 results file without h5py, backend 'mpi' without mpi4py, 'dask' without
        distributed.
    SimulationInterrupted
        A ``KeyboardInterrupt`` raised after SIGINT or SIGTERM stopped the run: the checkpoint
        at the step reached is written first (when the run has a checkpoint path: ``checkpoint``,
        or ``out + '.ckpt'``), and so are the rows recorded so far (to ``out``); run again with
        ``resume=True`` to continue bit for bit.

    Other Parameters
    ----------------
    _step_hook : callable, optional
        ``_step_hook(k, t, q, v)`` after every tick k (tests and benchmarks; q, v are the
        backend's: a rank's pieces under MPI and under Dask, where it runs on the workers'
        ranks).  An exception raised there ends the run without a checkpoint.
    _probe : callable, optional
        ``_probe(integrator)`` once before the loop (benchmarks time ``integrator.f``; on every
        rank under MPI and Dask).

    Notes
    -----
    Checkpoints are atomic; a resumed run gives bit for bit the trajectory of one that was never
    interrupted (same backend and part count), and a checkpoint of one backend resumes on another
    or on another part count.  On resume, an existing results file may be replaced when it holds
    the same run's results.
    """
    inputs = {"q0": q0, "qd0": qd0, "torques": torques, "damping": damping, "stiffness": stiffness,
              "q_ref": q_ref, "f_ext": f_ext, "prescribed": prescribed}
    opts = SimulationOptions.build(options, t_end=t_end, dt=dt, **option_values)
    if opts.backend != "serial" and (dynamics is not None or space is not None):
        raise PartreeInputError("a custom dynamics function / StateSpace cannot be used with the distributed "
                                "backends (they build their own local ones)")
    if opts.backend != "serial" and opts.singular_band and len(getattr(model, "loops", ())):
        raise PartreeInputError("singular_band (the dense tangent-space acceleration correction) is for serial "
                                "runs; the distributed backends' corrections are the engine's, in the mass metric")
    backend = make_backend(opts.backend, comm=comm, client=client)
    if hasattr(backend, "simulate"):        # Dask: the whole loop runs on the workers
        return backend.simulate(model, opts, inputs, step_hook=_step_hook, probe=_probe)
    return run_loop(backend, model, opts, inputs, dynamics=dynamics, space=space, step_hook=_step_hook,
                    probe=_probe)
