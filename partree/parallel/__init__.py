"""The parallel engine: partition a tree into parts, reduce each part to its boundary, solve the
small tree of parts at the root, back-substitute.  Backends: serial (the reference), MPI, Dask.

    from partree.parallel import forward_dynamics, partition
    qdd = forward_dynamics(model, q, qd, tau, backend="serial", parts=8)

``evaluate_batch`` splits a batch of states (one per row) over the ranks or workers instead.
"""
from .batch import evaluate_batch
from .partition import Partition, partition, partition_for_ranks, place_loops
from .part import PartKernel
from .serial import SerialEngine, forward_dynamics_serial

BACKENDS = ("serial", "mpi", "dask")


def check_arguments(model, q=None, qd=None, tau=None, parts=None, f_ext=None, backend="serial"):
    """Validate a call before any work starts (no partition built, no worker contacted).

    Raises PartreeInputError (a ValueError) for an unknown backend, for a part count
    that is not in 1..n, or state / force arrays whose sizes do not match the model.  A given
    Partition gets the model's loops placed (``partition.place_loops``)."""
    import numpy as np

    from .. import checks
    from ..model import Model
    from ..errors import PartreeInputError

    if backend not in BACKENDS:
        raise PartreeInputError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if not isinstance(model, Model):
        return
    if parts is not None and not isinstance(parts, Partition):
        if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)):
            raise PartreeInputError(f"parts must be a positive integer or a Partition, got {parts!r}")
        if parts < 1 or parts > model.n:
            raise PartreeInputError(f"parts={parts}: need 1 <= parts <= number of bodies ({model.n}) "
                                    f"of model {model.name!r}")
    if isinstance(parts, Partition) and parts.n != model.n:
        raise PartreeInputError(f"the partition is for {parts.n} bodies, model {model.name!r} has {model.n}")
    if isinstance(parts, Partition):
        place_loops(model, parts)
    if model.flexible is not None:
        # the full vectors [q; eta], [qd; eta_dot] (``partree.parallel.flexible_part``)
        from .flexible_part import engine_forces, flexible_state

        engine_forces(model, f_ext)
        flexible_state(model, q, qd, tau)
        if q is not None and qd is None and tau is None:
            raise PartreeInputError("qd and tau are required")
        return
    if q is not None:
        checks.state(model, q)
    if qd is not None:
        checks.vector(model, qd, model.nv, "qd", "nv")
    if tau is not None:
        checks.vector(model, tau, model.nv, "tau", "nv")
    if f_ext is not None:
        checks.external_forces(model, f_ext)
    if q is not None and qd is None and tau is None:
        raise PartreeInputError("qd and tau are required")


def forward_dynamics(model, q, qd, tau, backend="serial", parts=None, comm=None, client=None, f_ext=None,
                     active=None, qdd_active=None):
    """Forward dynamics qdd through the parallel decomposition (one evaluation), or with
    ``active`` hybrid dynamics (``partree.hybrid_dynamics``).

    For repeated evaluations keep an engine (:class:`SerialEngine`, :class:`MPIEngine`,
    :class:`DaskEngine`): it partitions the model and places the parts once.

    Parameters
    ----------
    model : Model or str
        The model; for the MPI backend also a loader (callable) or a spec string, built on rank 0
        only.
    q, qd, tau : ndarray
        Configuration (nq,), velocity (nv,) and joint forces (nv,); under MPI full vectors on
        every rank.
    backend : {'serial', 'mpi', 'dask'}
        'serial': the decomposition in this process (the reference); 'mpi': collective over
        ``comm``; 'dask': over ``client``.
    parts : int or Partition, optional
        Number of parts, or a partition; default: 1 (serial) or balanced over the ranks / workers.
    comm : mpi4py communicator, optional
        MPI only; default ``MPI.COMM_WORLD``.
    client : distributed.Client, optional
        Dask only; default a LocalCluster with 2 single-threaded workers, closed afterwards.
    f_ext : ndarray or dict, optional
        (n, 6) external body wrenches [n; f] in body coordinates, as for :func:`partree.aba`.
        With flexible bodies also loads at their nodes, as the flexible functions take them
        (``partree.algorithms.flexible_dynamics.flexible_loads``: dict keys ``(body, node
        name)``); each part applies its bodies' share.
    active : array_like of bool, or list of str, optional
        Hybrid dynamics: the joints whose acceleration is given, a boolean mask of (n,) (one flag
        per joint, fixed joints included) or joint names, as :func:`partree.hybrid_dynamics`
        takes them.  Their forces are computed, the other joints' accelerations; ``tau`` is
        then read at the other joints only.  Each part flags its active joints in its reduction
        (an active joint hands its parent its full articulated inertia and the bias of its
        known motion); the rounds and the messages are those of forward dynamics.  Trees only.
    qdd_active : ndarray, optional
        With ``active``: (nv,) accelerations, read at the active joints only (the other
        entries are ignored and may be anything, NaN included).

    Returns
    -------
    ndarray, tuple or None
        qdd (nv,); with ``active`` the pair (qdd, tau) of full vectors that
        :func:`partree.hybrid_dynamics` returns.  Under MPI on rank 0, None on the other ranks.

    Raises
    ------
    PartreeInputError
        Before any work starts, for an unknown backend, ``parts`` not in 1..n, state and force
        arrays whose sizes do not match the model, and for ``active``: a mask of the wrong
        length, unknown joint names, or a model with loops.
    """
    hybrid = None if active is None else (active, qdd_active)
    return _dispatch("forward_dynamics", model, q, qd, tau, backend, parts, comm, client, f_ext, hybrid)


def constraint_forces(model, q, qd, tau, backend="serial", parts=None, comm=None, client=None, f_ext=None,
                      active=None, qdd_active=None):
    """The constraint force algorithm through the parallel decomposition: a
    :class:`~partree.CFAResult` (qdd, every joint's wrench, its constraint force F_S and drive
    force F_T) equal to :func:`partree.cfa`'s.

    Arguments as for :func:`forward_dynamics`.  Each part computes its joint wrenches right after
    its back-substitution, from the child parts' root-joint wrenches the root solve gave it, so it
    costs no communication beyond forward dynamics (plus gathering the result).  Under MPI the
    result is on rank 0, None on the other ranks.  With ``active`` and ``qdd_active`` the
    evaluation is hybrid dynamics and the result equals
    ``partree.hybrid_dynamics(..., return_forces=True)``'s: qdd the full accelerations, F_T formed
    from every joint's force, the active joints' computed ones included.
    """
    hybrid = None if active is None else (active, qdd_active)
    return _dispatch("constraint_forces", model, q, qd, tau, backend, parts, comm, client, f_ext, hybrid)


def velocity_from_momentum(model, q, p, backend="serial", parts=None, comm=None, client=None):
    """Joint velocities v of given generalized momenta p (M(q) v = p) through the parallel
    decomposition, equal to :func:`partree.velocity_from_momentum`'s.

    M v = p is forward dynamics at rest with p in place of the joint forces, without gravity or
    external forces: the articulated-body elimination of the parts is seed 001's sweep, so the
    engine solves it with the parts' reduction, root solve and back-substitution unchanged (the
    momentum form in DESIGN.md).  The tree's mass matrix is meant: a model's loops are left out
    (as :func:`partree.velocity_from_momentum` leaves them).

    Arguments as for :func:`forward_dynamics`, with p (nv,) in place of qd and tau; under MPI the
    result is on rank 0, None on the other ranks.
    """
    import functools

    import numpy as np

    from .. import checks
    from ..model import Model

    if isinstance(model, Model):
        from .flexible_part import refuse_flexible

        refuse_flexible(model, "the momentum form (velocity_from_momentum)")
        p = checks.vector(model, p, model.nv, "p", "nv")
    zero = np.zeros(np.shape(p)[-1] if np.ndim(p) else 0)
    # a loader or a spec string is built where the backend builds models (MPI: rank 0 only)
    model = _tree_at_rest(model) if isinstance(model, Model) else functools.partial(_tree_at_rest_of, model)
    return _dispatch("forward_dynamics", model, q, zero, p, backend, parts, comm, client, None)


def momentum_rhs(model, q, p, tau=None, backend="serial", parts=None, comm=None, client=None, f_ext=None):
    """The equations of motion in generalized momenta (seed 001) through the parallel
    decomposition: (qdot, pdot) equal to :func:`partree.momentum_rhs`'s.

    One evaluation is the engine's rounds at rest with p in place of the joint forces (the
    parts' reduction, the root solve and the back-substitution give v = M^-1 p, the body
    velocities and, in the handle wrenches, the child parts' subtree momenta), with each part's
    total of gravity and external wrenches summed up the parts tree at the root on the way; then
    every part forms dp/dt of its joints (seed 001's eq. 7) on its own.  Trees only (a model
    with loops is refused, as by the serial momentum form).

    Arguments as for :func:`forward_dynamics`, with p (nv,) in place of qd and tau optional
    (default zero); under MPI the result is on rank 0, None on the other ranks.
    """
    import importlib

    import numpy as np

    from .. import checks
    from ..model import Model

    if isinstance(model, Model):
        from .flexible_part import refuse_flexible

        refuse_flexible(model, "the momentum form")
        p = checks.vector(model, p, model.nv, "p", "nv")
        tau = np.zeros(model.nv) if tau is None else tau
    if tau is None:            # a loader or a spec string: the sizes are checked where it is built
        check_arguments(model, None, None, None, parts, f_ext, backend)
    else:
        check_arguments(model, q, np.zeros(np.shape(tau)), tau, parts, f_ext, backend)
    if backend == "serial":
        from .serial import SerialEngine

        eng = SerialEngine(model, parts, poses=True)
        return eng.momentum_rhs(q, p, tau, f_ext)[:2]
    module = {"mpi": ".mpi", "dask": ".dask_backend"}[backend]
    fn = getattr(importlib.import_module(module, __name__), f"momentum_rhs_{backend}")
    where = {"mpi": {"comm": comm}, "dask": {"client": client}}[backend]
    return fn(model, q, p, tau, parts=parts, f_ext=f_ext, **where)


def _tree_at_rest(model):
    """The model's tree without gravity and without loops (arrays shared)."""
    import copy

    import numpy as np

    new = model.with_loops([], replace=True) if len(model.loops) else copy.copy(model)
    new.gravity = np.zeros(3)
    object.__setattr__(new, "_data", None)
    return new


def _tree_at_rest_of(source):
    """:func:`_tree_at_rest` of the model a loader or a spec string gives."""
    from ..specs import resolve_model

    return _tree_at_rest(source() if callable(source) else resolve_model(source))


def _dispatch(what, model, q, qd, tau, backend, parts, comm, client, f_ext, hybrid=None):
    """``what`` ('forward_dynamics' or 'constraint_forces') on ``backend``, the arguments checked
    first; ``hybrid``: None, or (active, qdd_active) of hybrid dynamics."""
    import importlib

    from ..model import Model

    if hybrid is None:
        check_arguments(model, q, qd, tau, parts, f_ext, backend)
    else:
        # tau is read at the passive joints only: checked with the mask (``hybrid_arguments``)
        check_arguments(model, q, qd, None, parts, f_ext, backend)
        if isinstance(model, Model):
            from .part import hybrid_arguments

            hybrid_arguments(model, hybrid[0], hybrid[1], tau)
    module = {"serial": ".serial", "mpi": ".mpi", "dask": ".dask_backend"}[backend]
    fn = getattr(importlib.import_module(module, __name__), f"{what}_{backend}")
    where = {"mpi": {"comm": comm}, "dask": {"client": client}}.get(backend, {})
    if hybrid is not None:
        where.update(active=hybrid[0], qdd_active=hybrid[1])
    return fn(model, q, qd, tau, parts=parts, f_ext=f_ext, **where)


def __getattr__(name):
    """The MPI and Dask engines, imported on first use (mpi4py and dask are optional)."""
    if name == "MPIEngine":
        from .mpi import MPIEngine
        return MPIEngine
    if name == "DaskEngine":
        from .dask_backend import DaskEngine
        return DaskEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["forward_dynamics", "velocity_from_momentum", "momentum_rhs", "evaluate_batch", "constraint_forces", "partition", "partition_for_ranks", "Partition", "SerialEngine",
           "MPIEngine", "DaskEngine", "PartKernel", "forward_dynamics_serial", "BACKENDS", "check_arguments"]
