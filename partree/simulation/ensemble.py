"""``simulate_ensemble``: many independent runs of one model (Monte-Carlo initial states,
parameter sweeps), spread over the cores of Dask workers or over MPI ranks.

An ensemble is embarrassingly parallel: every member is one serial :func:`simulate` run, and
the members are dealt out whole, never split.  On backend ``'mpi'`` rank r runs members
r, r + P, r + 2P, ... and rank 0 gathers the results; on backend ``'dask'`` every member is
one task on the cluster (the model is sent to the workers once).  Every member's output file
is checked before any member starts, so a bad path never costs a finished run.

A member is a dict of the per-run keywords of :func:`simulate` (``q0``, ``qd0``, ``torques``,
``damping``, ``stiffness``, ``q_ref``, ``f_ext``, ``prescribed``) and may name its own
``model`` (a parameter sweep over generator specs or files).  ``q0`` / ``qd0`` given to
``simulate_ensemble`` as 2-D arrays make one member per row.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import PartreeInputError
from ..outputs import check_output_file
from .driver import INPUTS, simulate

#: keywords a member may set (the joint inputs, the initial state, and its own model)
MEMBER_KEYS = frozenset(INPUTS) | {"q0", "qd0", "model"}


def _rows(x, name):
    """A 2-D float array of initial states, or a clear error."""
    if x is None:
        return None
    if np.iscomplexobj(x):
        raise PartreeInputError(f"{name} is complex; partree works with real numbers")
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as e:
        raise PartreeInputError(f"{name} is not an array of numbers ({e})") from None
    if a.ndim != 2:
        raise PartreeInputError(f"{name} has shape {a.shape}; an ensemble takes one initial state per row "
                                f"(a 2-D array), or pass members=[{{'{name}': ...}}, ...]")
    return a


def ensemble_members(members=None, q0=None, qd0=None):
    """The list of member dicts of an ensemble.

    Parameters
    ----------
    members : int or sequence of dict, optional
        A count (members that differ only through ``q0`` / ``qd0`` rows, or identical runs), or
        one dict of ``simulate`` keywords per member (``q0``, ``qd0``, ``torques``, ``damping``,
        ``stiffness``, ``q_ref``, ``f_ext``, ``prescribed``, ``model``).
    q0, qd0 : array_like (members, nq) / (members, nv), optional
        One initial state per row, merged into the member dicts.

    Returns
    -------
    list of dict

    Raises
    ------
    PartreeInputError
        No members, an unknown keyword, or row counts that disagree.
    """
    Q0, QD0 = _rows(q0, "q0"), _rows(qd0, "qd0")
    counts = {name: a.shape[0] for name, a in (("q0", Q0), ("qd0", QD0)) if a is not None}
    if isinstance(members, (int, np.integer)) and not isinstance(members, bool):
        if members < 1:
            raise PartreeInputError(f"members = {members}: an ensemble needs at least one member")
        counts["members"] = int(members)
        members = None
    if members is not None:
        members = list(members)
        for k, m in enumerate(members):
            if not isinstance(m, dict):
                raise PartreeInputError(f"member {k} is a {type(m).__name__}; each member is a dict of simulate "
                                        f"keywords ({', '.join(sorted(MEMBER_KEYS))})")
            bad = sorted(set(m) - MEMBER_KEYS)
            if bad:
                raise PartreeInputError(f"member {k}: unknown keyword(s) {', '.join(bad)}; a member may set "
                                        f"{', '.join(sorted(MEMBER_KEYS))} (every other option is the ensemble's)")
        counts["members"] = len(members)
    if len(set(counts.values())) > 1:
        said = ", ".join(f"{name} {c}" for name, c in counts.items())
        raise PartreeInputError(f"the ensemble's sizes disagree ({said} rows/members): give one member per row")
    if not counts:
        raise PartreeInputError("an ensemble needs members: a count, a list of member dicts, or q0 / qd0 with one "
                                "initial state per row")
    n = next(iter(counts.values()))
    if n < 1:
        raise PartreeInputError("an ensemble needs at least one member (empty list or zero rows)")
    out = [dict(m) for m in members] if members is not None else [{} for _ in range(n)]
    for name, a in (("q0", Q0), ("qd0", QD0)):
        if a is None:
            continue
        for k, m in enumerate(out):
            if name in m:
                raise PartreeInputError(f"member {k} sets {name} and the ensemble's {name} rows do too: give it once")
            m[name] = a[k]
    return out


def member_path(out_dir, k, fmt):
    """The results file of member ``k`` in ``out_dir``."""
    return os.path.join(os.fspath(out_dir), f"member_{k:05d}.{fmt}")


def _run_member(model, t_end, dt, member, options, path):
    """One member: a serial ``simulate`` (no progress bar, no signal handlers of its own)."""
    kw = dict(options)
    kw.update(backend="serial", progress=False, catch_signals=False, out=path)
    m = dict(member)
    model = m.pop("model", model)
    return simulate(model, t_end, dt, **m, **kw)


def _run_members(model, t_end, dt, jobs, options):
    return [(k, _run_member(model, t_end, dt, member, options, path)) for k, member, path in jobs]


def simulate_ensemble(model, t_end, dt, members=None, *, q0=None, qd0=None, backend="serial", comm=None,
                      client=None, out_dir=None, fmt="npz", overwrite=False, progress=True, **option_values):
    """Simulate an ensemble of independent runs of ``model``.

    ``simulate_ensemble("spacerobot", 2.0, 1e-3, q0=Q0)`` runs one simulation per row of
    ``Q0``; ``members=[{"model": "scissor:units=4"}, {"model": "scissor:units=8"}]`` sweeps
    over models.  Each member is a serial :func:`simulate` run with the ensemble's options.

    Parameters
    ----------
    model : Model, str, path-like
        The model every member uses unless it names its own.
    t_end, dt : float
        As for :func:`simulate`.
    members : int or sequence of dict, optional
        See :func:`ensemble_members`.
    q0, qd0 : array_like, optional
        One initial state per row (one member each).
    backend : {'serial', 'mpi', 'dask'}
        Where the members run: one after the other; dealt out over the ranks of ``comm``
        (collective: call it on every rank); or one task each on the Dask ``client`` (default: a
        LocalCluster, closed at the end).
    comm : mpi4py communicator, optional
        Backend 'mpi' (default COMM_WORLD).
    client : distributed.Client, optional
        Backend 'dask'.
    out_dir : path-like, optional
        Write each member's results to ``out_dir/member_NNNNN.<fmt>`` (every path checked
        before any member runs; the directory is created when missing, its parent must exist).
    fmt : {'npz', 'h5'}
        Results file format in ``out_dir``.
    overwrite : bool
        Replace existing member files.
    progress : bool
        A progress bar over the members (serial and Dask backends, on a terminal).
    **option_values
        Options of :class:`~partree.simulation.options.SimulationOptions` shared by every member
        (integrator, rtol, atol, save_every, record, ...).  Per-run options that make no sense
        for a member (backend, out, checkpoint, resume, parts) are refused.

    Returns
    -------
    list of SimulationResult or None
        One result per member, in member order (on backend 'mpi': on rank 0, None elsewhere).

    Raises
    ------
    PartreeInputError
        Bad members, options or output paths, before any member runs; a member's own error
        names the member.
    """
    if backend not in ("serial", "mpi", "dask"):
        raise PartreeInputError(f"backend = {backend!r}: an ensemble runs on 'serial', 'mpi' or 'dask'")
    if fmt not in ("npz", "h5"):
        raise PartreeInputError(f"fmt = {fmt!r}: the results format is 'npz' or 'h5'")
    refused = sorted(set(option_values) & {"backend", "out", "checkpoint", "resume", "parts", "path_weight",
                                           "checkpoint_every", "checkpoint_seconds", "keep_checkpoint",
                                           "catch_signals"})
    if refused:
        raise PartreeInputError(f"option(s) {', '.join(refused)} are per run, not for an ensemble (each member is a "
                                f"serial run; out_dir= names the members' files)")
    if comm is not None and backend != "mpi":
        raise PartreeInputError(f"comm is for backend 'mpi' (this ensemble's backend is {backend!r})")
    if client is not None and backend != "dask":
        raise PartreeInputError(f"client is for backend 'dask' (this ensemble's backend is {backend!r})")
    todo = ensemble_members(members, q0, qd0)
    # the shared options, checked once here (a member's own inputs are checked by its run)
    from .options import SimulationOptions

    SimulationOptions.build(None, t_end=t_end, dt=dt, **option_values)
    paths = [None] * len(todo)
    if out_dir is not None:
        out_dir = os.fspath(out_dir)
        parent = os.path.dirname(os.path.abspath(out_dir))
        if not os.path.isdir(parent):
            raise PartreeInputError(f"cannot write the ensemble into {out_dir!r}: the directory {parent!r} does not "
                                    f"exist")
        if os.path.exists(out_dir) and not os.path.isdir(out_dir):
            raise PartreeInputError(f"cannot write the ensemble into {out_dir!r}: it is a file, not a directory")
        if os.path.isdir(out_dir):
            paths = [member_path(out_dir, k, fmt) for k in range(len(todo))]
            for p in paths:
                check_output_file(p, "results file of an ensemble member", overwrite=overwrite)
        else:
            if not os.access(parent, os.W_OK | os.X_OK):
                raise PartreeInputError(f"cannot write the ensemble into {out_dir!r}: {parent!r} is not writable")
            paths = [member_path(out_dir, k, fmt) for k in range(len(todo))]
        if fmt == "h5":
            from ..extras import require

            require("h5py", "writing .h5 results")
    options = dict(option_values, overwrite=overwrite)
    jobs = list(zip(range(len(todo)), todo, paths))
    if backend == "mpi":
        return _ensemble_mpi(model, t_end, dt, jobs, options, comm, out_dir)
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
    if backend == "dask":
        return _ensemble_dask(model, t_end, dt, jobs, options, client, progress)
    out = []
    bar = _bar(len(jobs), progress)
    try:
        for k, member, path in jobs:
            out.append(_named(k, _run_member, model, t_end, dt, member, options, path))
            bar.update(1)
    finally:
        bar.close()
    return out


def _bar(total, progress):
    """A progress bar over the members, on a terminal only (logs get none)."""
    import sys

    from tqdm import tqdm

    on = bool(progress) and getattr(sys.stderr, "isatty", lambda: False)()
    return tqdm(total=total, unit="run", desc="ensemble", disable=not on, file=sys.stderr)


def _named(k, fn, *args):
    """Run a member, its input errors naming it."""
    try:
        return fn(*args)
    except PartreeInputError as e:
        raise PartreeInputError(f"ensemble member {k}: {e}") from None


def _ensemble_mpi(model, t_end, dt, jobs, options, comm, out_dir):
    from ..extras import require

    require("mpi4py", "backend 'mpi'")
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    if out_dir is not None:
        if rank == 0:
            os.makedirs(out_dir, exist_ok=True)
        comm.Barrier()
    mine, err = [], None
    for k, member, path in jobs[rank::size]:
        try:
            mine.append((k, _run_member(model, t_end, dt, member, options, path)))
        except PartreeInputError as e:
            err = f"ensemble member {k}: {e}"
            break
    errors = comm.allgather(err)
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise PartreeInputError(first)
    got = comm.gather(mine, root=0)
    if rank != 0:
        return None
    res = [None] * len(jobs)
    for part in got:
        for k, r in part:
            res[k] = r
    return res


def _ensemble_dask(model, t_end, dt, jobs, options, client, progress):
    from ..extras import require

    require("distributed", "backend 'dask'")
    from ..parallel.dask_backend import start_local_cluster

    own = client is None
    cluster = None
    if own:
        client, cluster = start_local_cluster()
    try:
        if not isinstance(model, (str, os.PathLike)):
            model = client.scatter(model, broadcast=True, hash=False)
        futs = [client.submit(_run_member, model, t_end, dt, member, options, path, pure=False,
                              key=f"partree-ensemble-member-{k}-{os.getpid()}-{id(jobs)}")
                for k, member, path in jobs]
        from distributed import as_completed

        bar = _bar(len(futs), progress)
        try:
            for _ in as_completed(futs):
                bar.update(1)
        finally:
            bar.close()
        out = []
        for k, f in enumerate(futs):
            try:
                out.append(f.result())
            except PartreeInputError as e:
                raise PartreeInputError(f"ensemble member {k}: {e}") from None
        return out
    finally:
        if own:
            client.close()
            cluster.close()
