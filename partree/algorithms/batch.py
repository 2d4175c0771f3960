"""Batches of states: ``aba``, ``rnea``, ``crba`` and ``cfa`` called with 2-D arrays, one state
per row, evaluate every state, spread over the cores.

Each algorithm has a compiled batch function (numba ``parallel=True``) that cuts the rows into
runs of consecutive states (:func:`chunks`, several per thread), hands the runs to the threads as
they become free (numba's dynamic scheduling, :func:`threads_for`; so that a thread slowed by
another program on its core takes fewer), and runs the algorithm's single-state compiled call on
every row of a run with a workspace of the run's own.  The single-state call is the one a 1-D
call runs, so a batch gives the numbers of the loop of single calls, bit for bit.

The number of threads is numba's (:func:`set_num_threads`, or the ``threads=`` keyword of one
call); it starts at the number of cores (numba's ``NUMBA_NUM_THREADS``).
"""
from __future__ import annotations

import contextlib

import numpy as np

from .. import checks
from ..errors import PartreeInputError


def set_num_threads(n):
    """Use ``n`` threads for batches of states from now on (in this thread of the program).

    ``n`` runs from 1 to the number of threads numba started with (``NUMBA_NUM_THREADS``, the
    number of cores unless set in the environment).
    """
    import numba

    top = numba.config.NUMBA_NUM_THREADS
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= top:
        raise PartreeInputError(f"threads must be an integer from 1 to {top} (NUMBA_NUM_THREADS), got {n!r}")
    numba.set_num_threads(int(n))


def get_num_threads():
    """The number of threads batches of states use."""
    import numba

    return numba.get_num_threads()


@contextlib.contextmanager
def threads_for(threads, count):
    """Run the block with ``threads`` threads (None: the current setting), but no more than the
    ``count`` states, the parallel loops handing out one iteration at a time; then go back.
    Yields the number of threads."""
    import numba

    before = get_num_threads()
    chunk = numba.get_parallel_chunksize()
    try:
        if threads is not None:
            set_num_threads(threads)
        use = max(1, min(get_num_threads(), count))
        set_num_threads(use)
        numba.set_parallel_chunksize(1)
        yield use
    finally:
        numba.set_parallel_chunksize(chunk)
        set_num_threads(before)


def chunks(count, threads):
    """Number of runs a batch of ``count`` states is cut into: eight per thread (at most one per
    state)."""
    return max(1, min(count, 8 * threads))


def is_batch(x):
    """True for a 2-D array (or nested sequence): a batch of states, one per row."""
    return np.ndim(x) == 2


def rows(model, arrays):
    """The batch inputs as writable C-contiguous float64 arrays of shape (B, width), or a
    :class:`PartreeInputError` naming the arrays whose numbers of rows differ.

    ``arrays``: (name, value, width, what) per input, ``what`` naming the width ('nq', 'nv').
    """
    out = []
    for name, x, width, what in arrays:
        if x is None:
            raise PartreeInputError(f"{name} is None; a batch needs {name} with one state per row")
        if np.iscomplexobj(x):
            raise PartreeInputError(f"{name} is complex; partree works with real numbers")
        try:
            a = np.ascontiguousarray(x, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise PartreeInputError(f"{name} is not an array of numbers ({e})") from None
        if a.ndim != 2 or a.shape[1] != width:
            raise PartreeInputError(f"{name} has shape {a.shape}; a batch for model {model.name!r} needs "
                                    f"(states, {width}) ({what} per state)")
        out.append(checks.writable(a))
    counts = [a.shape[0] for a in out]
    if len(set(counts)) > 1:
        listed = ", ".join(f"{name} has {c}" for (name, *_), c in zip(arrays, counts))
        raise PartreeInputError(f"the batch's arrays have different numbers of rows (states): {listed}; "
                                f"they need one row per state, the same number each")
    return out


def forces(model, f_ext, count):
    """f_ext of a batch as a 3-D array: (1, 0, 6) for none, (1, n, 6) for the same wrenches in
    every state (an (n, 6) array or a dict), (count, n, 6) for wrenches per state."""
    from .packed import NO_FORCES

    if f_ext is None:
        return NO_FORCES[None]
    if not isinstance(f_ext, dict) and np.ndim(f_ext) == 3:
        F = checks.writable(np.ascontiguousarray(f_ext, dtype=np.float64))
        if F.shape != (count, model.n, 6):
            raise PartreeInputError(f"f_ext has shape {F.shape}; a batch of {count} states needs ({count}, "
                                    f"{model.n}, 6) body wrenches [n; f] per state, or ({model.n}, 6) for all")
        if not np.isfinite(F).all():
            s, i = (int(k) for k in np.argwhere(~np.isfinite(F))[0][:2])
            raise PartreeInputError(f"state {s}: f_ext of body {i} (joint {model.joint_names[i]!r}) is not finite")
        return F
    F, _ = checks.external_forces(model, f_ext)
    return checks.writable(F)[None]


def first_failure(codes, ok):
    """(state, code) of the first state whose code is not ``ok``, or None."""
    bad = np.flatnonzero(codes != ok)
    if bad.size == 0:
        return None
    s = int(bad[0])
    return s, int(codes[s])


def each_state(count, single, store):
    """``store(s, single(s))`` for every state in turn (the batch of a model too large for the
    compiled batch), an error naming its state."""
    for s in range(count):
        try:
            r = single(s)
        except PartreeInputError as e:
            raise PartreeInputError(f"state {s}: {e}") from None
        store(s, r)


def state_error(s, single):
    """Run ``single()`` (the single-state call with its full checks on state ``s``) so that it
    raises its own error, and raise it again with the state named."""
    try:
        single()
    except PartreeInputError as e:
        raise PartreeInputError(f"state {s}: {e}") from None
    raise PartreeInputError(f"state {s}: the batch refused it but the single call did not (an internal error)")
