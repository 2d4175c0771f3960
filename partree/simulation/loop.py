"""The time loop of every backend: ticks, save points, checkpoints, progress, interrupts.

``run(backend, model, opts, inputs, ...)`` is the one driver; a backend (``serial``, ``mpi``,
``dask_backend``) only supplies what differs (:class:`Backend`): where the state lives and how the
dynamics are evaluated.  Everything else happens here, the same way for all of them:

- **Ticks.**  For fixed-step integrators a tick is one step of ``dt``; for adaptive ones (and
  scipy) a tick is one output interval ``dt * save_every``, inside which the integrator takes
  the steps its error control needs (the last one shortened to land on the output time).  Tick
  k ends at t = k * tick (an integer count times the step, never a running sum, so a resumed run
  lands on the same times bit for bit).
- **Save points.**  Every ``save_every``-th tick (every tick for the adaptive integrators) and
  the last one, the state is sampled into the :class:`Recorder` (on the root process only).
- **Checkpoints** (:class:`CheckpointBook`, the file format of ``checkpoint.py``): written every
  so many steps or wall seconds, at an interrupt, and loaded on resume, by the root only; a
  checkpoint written by one backend resumes on any other and on any part count.
- **Interrupts.**  SIGINT and SIGTERM during the loop are caught (:class:`SignalCatcher`); at the
  end of the tick under way every process stops together: a checkpoint is written at that step,
  the rows recorded so far are written to the results file, and :class:`SimulationInterrupted`
  (a ``KeyboardInterrupt``) is raised.  A second signal stops at once, without a checkpoint.
- **Progress** (:class:`Progress`): a tqdm bar when stderr is a terminal, otherwise a plain line
  at every tenth of the run and at least every 30 s.  When numba compiles kernels during the
  first tick (a cold cache), a note says so (:class:`CompileNotice`).
"""
from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import sys
import threading
import time

import numpy as np

from ..algorithms.energy import energy as _energy
from ..algorithms.flexible_dynamics import flexible_energy
from ..errors import CheckpointError, PartreeInputError
from ..model import Model
from .checkpoint import Checkpointer, model_fingerprint
from ..jit import CompileNotice
from ..outputs import check_output_file
from .results import SimulationResult, format_summary, read_metadata

#: seconds of wall time between plain progress lines (at the latest; also one per tenth of the run)
PROGRESS_LINE_SECONDS = 30.0
#: distributed runs agree on stopping about this often (wall seconds), not at every tick
POLL_SECONDS = 0.2
#: prefix of the integrator's arrays in a checkpoint's state (``integrator.state_dict()``'s
#: ndarray items other than ``fsal``; their names are listed in the meta's integrator ``arrays``)
INTEGRATOR_ARRAY = "integrator_"


# ==================================================================== interrupts


class SimulationInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM after writing its checkpoint.

    Attributes
    ----------
    t : float
        The time the run reached (the checkpoint's time).
    signum : int
        The signal (``signal.SIGINT`` or ``signal.SIGTERM``).
    checkpoint : str or None
        The checkpoint written (None when the run had no checkpoint path: no ``out``, no
        ``checkpoint``).
    out : str or None
        The results file holding the rows recorded so far.
    """

    def __init__(self, t, signum, checkpoint=None, out=None):
        self.t, self.signum, self.checkpoint, self.out = float(t), int(signum), checkpoint, out
        name = signal.Signals(self.signum).name
        if checkpoint:
            what = f"checkpoint written to {checkpoint!r}; resume with resume=True (partree simulate ... --resume)"
        else:
            what = "nothing saved (give out= or checkpoint= to make a run resumable)"
        super().__init__(f"interrupted at t = {self.t:.6g} s by {name}; {what}")

    @property
    def exit_code(self):
        """The shell's exit status for the signal: 128 + its number (130 SIGINT, 143 SIGTERM)."""
        return 128 + self.signum


class SignalCatcher:
    """Context: SIGINT and SIGTERM set :attr:`caught` instead of ending the process; a second
    signal raises ``KeyboardInterrupt`` at once (without a checkpoint).  The same signal again
    within :attr:`repeat_grace` seconds counts as the first one delivered twice (a terminal's
    Ctrl-C reaches the whole process group, and some launchers forward it as well), not as a
    second one.  Does nothing outside the main thread (Python delivers signals to the main thread
    only) or when ``enabled`` is False."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    repeat_grace = 1.0

    def __init__(self, enabled=True):
        self.enabled = bool(enabled) and threading.current_thread() is threading.main_thread()
        self.caught = None
        self._when = None
        self._old = {}

    def _handler(self, signum, frame):
        now = time.monotonic()
        if self.caught is not None:
            if signum == self.caught and now - self._when < self.repeat_grace:
                return
            self._restore()
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}: stopped without a checkpoint")
        self.caught, self._when = signum, now

    def _restore(self):
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}

    def __enter__(self):
        if self.enabled:
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        self._restore()
        return False


def resume_command(argv, launcher=None):
    """The command line that resumes an interrupted ``partree simulate`` run.

    Parameters
    ----------
    argv : list of str
        The arguments after ``partree`` (``['simulate', ...]``).
    launcher : list of str, optional
        What started it, e.g. ``['mpiexec', '-n', '4']``.

    Returns
    -------
    str
        ``partree simulate ... --resume`` (shell-quoted).
    """
    args = list(argv)
    if "--resume" not in args:
        args.append("--resume")
    return shlex.join(list(launcher or []) + ["partree"] + args)


# ==================================================================== progress


class Progress:
    """Progress of a run on stderr: a tqdm bar when the stream is a terminal, otherwise a plain
    line at every tenth of the run and at least every :data:`PROGRESS_LINE_SECONDS` (no carriage
    returns in logs).

    Parameters
    ----------
    enabled : bool
        False: silent.
    t_end, t_start : float
        The run's end time and where it starts (a resumed run).
    desc : str
        The label (model and integrator).
    stream : file, optional
        Default ``sys.stderr``.
    """

    def __init__(self, enabled, t_end, t_start, desc, stream=None):
        self.enabled = bool(enabled)
        self.stream = stream if stream is not None else sys.stderr
        self.t_end, self.desc = float(t_end), desc
        self.bar = None
        self.t0 = time.perf_counter()
        self.t_start = float(t_start)
        self.steps0 = None
        self.last = self.t0
        self.next_tenth = int(10 * t_start / self.t_end) + 1 if self.t_end > 0 else 11
        if not self.enabled:
            return
        isatty = getattr(self.stream, "isatty", None)
        if isatty is not None and isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=self.t_end, initial=self.t_start, unit="s", unit_scale=False, dynamic_ncols=True,
                            desc=desc, file=self.stream,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| t={n:.4g}/{total:.4g} s "
                                       "[{elapsed}<{remaining}{postfix}]")

    def note(self, text):
        """A line of text that does not garble the bar."""
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def update(self, t, steps, last=False):
        """After a tick: simulated time ``t``, integrator steps ``steps`` so far."""
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.steps0 is None:
            self.steps0, self.t0 = steps, now
        rate = (steps - self.steps0) / max(now - self.t0, 1e-9)
        if self.bar is not None:
            if now - self.last > 0.25 or last:
                self.bar.set_postfix_str(f"{rate:.3g} steps/s", refresh=False)
                self.bar.update(t - self.bar.n)
                self.last = now
            return
        frac = t / self.t_end if self.t_end > 0 else 1.0
        if last or frac * 10 >= self.next_tenth or now - self.last >= PROGRESS_LINE_SECONDS:
            self.next_tenth = int(frac * 10) + 1
            done = (t - self.t_start) / max(self.t_end - self.t_start, 1e-300)
            elapsed = now - self.t0
            eta = elapsed * (1 - done) / done if done > 0 else float("nan")
            print(f"{self.desc}: t = {t:.6g} / {self.t_end:.6g} s ({100 * frac:.0f}%), {rate:.3g} steps/s, "
                  f"{elapsed:.1f} s elapsed, {eta:.1f} s to go", file=self.stream, flush=True)
            self.last = now

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# ==================================================================== recording


class Recorder:
    """The rows of the result: at every save point the time and what ``quantities`` names.

    In a gathered run (every serial and Dask run, and MPI runs with ``output='gathered'``) one
    recorder on the root process keeps everything, from the whole vectors.  In a per-rank MPI
    run every rank keeps its joints' columns (``scalars=False``, its pieces of the vectors) and
    the root one more recorder for the time and the scalars (``columns=False``, the whole state
    when energy or wrenches are recorded).

    Parameters
    ----------
    model : Model or None
        The model (for the energy and the wrenches; None where no scalars are recorded).
    dyn : Dynamics or None
        The joint inputs (for the wrenches' external forces).
    quantities : set of str
        What is recorded (``SimulationOptions.quantities``).
    wids : ndarray or None
        The joints whose wrenches are recorded.
    momentum : bool
        The run integrates the momentum form: the generalized momenta p are recorded with qd.
    qtake, vtake : ndarray of int or None
        The entries of the q- and velocity-sized vectors passed to :meth:`add` that are recorded
        (None: all).
    columns, scalars : bool
        Whether this recorder keeps the joints' columns (q, qd, p, qdd, tau), and the scalars
        (energy, violation) and wrenches.
    """

    def __init__(self, model, dyn, quantities, wids, momentum=False, qtake=None, vtake=None, columns=True,
                 scalars=True):
        self.model, self.dyn, self.wids = model, dyn, (wids if scalars else None)
        Q = self.quantities = frozenset(quantities)
        self.qtake, self.vtake = qtake, vtake
        self.rows = {"t": []}
        self.energy = scalars and "energy" in Q
        if columns:
            for k in ("q", "qd", "qdd", "tau"):
                if k in Q:
                    self.rows[k] = []
            if momentum and "qd" in Q:
                self.rows["p"] = []
        if self.energy:
            self.rows.update(kinetic=[], potential=[])
        #: a model with flexible bodies: the elastic energy is recorded too (flexible_energy)
        self.elastic = self.energy and getattr(model, "flexible", None) is not None
        if self.elastic:
            self.rows["elastic"] = []
        if self.wids is not None:
            self.rows["joint_wrench"] = []
        self.closure = None
        if self.energy and len(getattr(model, "loops", ())):
            from .closure import LoopClosure
            self.closure = LoopClosure(model)
            self.rows["violation"] = []

    @property
    def needs_qdd(self):
        """Whether a save point needs qdd (and tau): recorded, or for the wrenches."""
        return "qdd" in self.rows or "tau" in self.rows or self.wids is not None

    @property
    def needs_state(self):
        """Whether :meth:`add` needs the state (q, v): any column, the energy or wrenches."""
        return len(self.rows) > 1

    def add(self, t, q=None, v=None, qdd=None, tau=None, p=None):
        """One row: the state (q, v) at time t, qdd, tau when :attr:`needs_qdd`, and the
        momenta p in the momentum form."""
        r = self.rows
        r["t"].append(t)

        def take(x, idx):
            return np.array(x, dtype=float) if idx is None else np.asarray(x, dtype=float)[idx]

        if "q" in r:
            r["q"].append(take(q, self.qtake))
        if "qd" in r:
            r["qd"].append(take(v, self.vtake))
        if "p" in r:
            r["p"].append(take(p, self.vtake))
        if "qdd" in r:
            r["qdd"].append(take(qdd, self.vtake))
        if "tau" in r:
            r["tau"].append(take(tau, self.vtake))
        if self.elastic:
            T, V, Ve = flexible_energy(self.model, q, v)
            r["kinetic"].append(T)
            r["potential"].append(V)
            r["elastic"].append(Ve)
        elif self.energy:
            T, V = _energy(self.model, q, v)
            r["kinetic"].append(T)
            r["potential"].append(V)
        if self.wids is not None:
            r["joint_wrench"].append(self.dyn.joint_wrenches(t, q, v, qdd)[self.wids])
        if self.closure is not None:
            r["violation"].append(self.closure.violation(q))

    def __len__(self):
        return len(self.rows["t"])

    def stacked(self, start=0):
        """The rows from ``start`` on, as arrays."""
        return {k: np.array(lst[start:], dtype=float) for k, lst in self.rows.items()}

    def load(self, rows):
        """Rows recorded before a checkpoint (from its segments)."""
        for k in self.rows:
            if k in rows:
                self.rows[k] = list(rows[k])


# ==================================================================== checkpoints


class CheckpointBook:
    """The checkpoints of a run, the same on every backend: the root process reads and writes
    the files (``checkpoint.Checkpointer``); every process keeps the bookkeeping (steps and wall
    time of the last checkpoint) so all of them decide alike when one is due.

    Parameters
    ----------
    path : str
        The checkpoint file.
    opts : SimulationOptions
        The run's options (checkpoint intervals).
    root : bool
        Whether this process touches the files.
    t_wall0 : float
        ``time.perf_counter()`` at the start of the run.
    backend : str
        The backend's name (recorded in the checkpoint).
    """

    def __init__(self, path, opts, root, t_wall0, backend):
        self.path = path
        self.every_steps, self.every_secs = opts.checkpoint_every, opts.checkpoint_seconds
        self.periodic = bool(self.every_steps or self.every_secs)
        self.root = root
        self.ckpt = Checkpointer(path) if root else None
        self.t_wall0 = t_wall0
        self.backend = backend
        self.wall_before = 0.0
        self.n_flushed = 0
        self.n_local = 0
        self.nseg = 0
        self.last_steps = 0
        self.last_wall = time.perf_counter()
        self.model_fp = self.options_fp = self.fp_values = None

    def load(self, resume):
        """Root only: (meta, state, rows) to resume from, or None for a fresh run (which removes
        an old checkpoint: the output checks let one through only with ``overwrite``).  Raises
        ``CheckpointError`` for a missing (``resume=True``), corrupt or mismatched checkpoint."""
        ck = self.ckpt
        if resume and (resume != "auto" or ck.exists()):
            meta, st, rows = ck.load(self.model_fp, self.options_fp, self.fp_values)
            n = len(rows.get("t", ()))
            if n != int(meta.get("rows", n)):
                raise CheckpointError(f"checkpoint {ck.path!r}: segments hold {n} rows, expected {meta['rows']}")
            if "q" not in st or "v" not in st or "tick" not in meta:
                raise CheckpointError(f"checkpoint {ck.path!r} holds no state")
            return meta, st, rows
        if ck.exists():
            ck.remove()
        return None

    @staticmethod
    def info(loaded):
        """What every process needs to know of a loaded checkpoint (small, picklable)."""
        if loaded is None:
            return None
        meta, st, _ = loaded
        return {"tick": int(meta["tick"]), "t": float(meta["t"]), "integrator": dict(meta.get("integrator", {})),
                "wall_time": float(meta.get("wall_time", 0.0)), "fsal": "fsal" in st,
                "segments": list(meta.get("segments", [])), "rank_segments": meta.get("rank_segments")}

    def resumed(self, info, rows, rec, steps, columns=None):
        """Bookkeeping after a resume (``rows``, ``rec``: on the root).  ``columns``: a per-rank
        run's recorders of its joints' columns, ``(recorder, q_columns, v_columns, all_q,
        all_v)`` on every process (the global columns it records, and every column the run
        records), filled from the checkpoint's segments (``checkpoint.load_columns``); in a
        gathered run the root's columns come from the ranks' segments when the checkpoint has
        them."""
        from .checkpoint import load_columns

        self.wall_before = info["wall_time"]
        self.nseg = len(info.get("segments", ()))
        if columns is not None:
            lrec, qc, vc, all_q, all_v = columns
            lrec.load(load_columns(self.path, info, qc, vc, all_q, all_v))
            self.n_local = len(lrec)
        if self.root:
            if columns is None and info.get("rank_segments"):
                qc = np.arange(rec.model.nq) if rec.qtake is None else rec.qtake
                vc = np.arange(rec.model.nv) if rec.vtake is None else rec.vtake
                rows = dict(rows, **load_columns(self.path, info, qc, vc, qc, vc))
            rec.load(rows)
            self.n_flushed = len(rec)
        self.last_steps = steps
        self.last_wall = time.perf_counter()

    def late(self):
        """Root: whether the wall-clock interval has passed since the last checkpoint."""
        return bool(self.every_secs) and time.perf_counter() - self.last_wall >= self.every_secs

    def due(self, steps, late):
        """Whether a periodic checkpoint is due after ``steps`` steps; ``late``: the agreed
        wall-clock decision (the same on every process)."""
        if self.every_steps and steps - self.last_steps >= self.every_steps:
            return True
        return bool(self.every_secs) and bool(late)

    def write(self, k, t, steps, q, v, integ, backend, rec, lrec=None):
        """Write the checkpoint of tick k (collective: the state and the integrator's FSAL
        derivative are gathered to the root, which writes).  ``lrec``: a per-rank run's
        recorder of this rank's columns: every rank writes its new rows to its own segment."""
        now = time.perf_counter()
        digests = None
        if lrec is not None:
            from .checkpoint import write_rank_segment

            n = len(lrec)
            d = None
            if n > self.n_local:             # the same on every rank: they save at the same ticks
                d = write_rank_segment(self.path, self.nseg + 1, backend.rank, lrec.stacked(self.n_local),
                                       lrec.q_columns, lrec.v_columns)
                self.n_local = n
                self.nseg += 1
            digests = backend.gather_objects(d)
            if self.root and any(x is None for x in digests):
                digests = None
        idict = integ.state_dict()
        fsal = idict.pop("fsal", None)
        # the integrator's other arrays (the momentum form's FSAL velocity, gauss6's last stages):
        # velocity-sized rows, gathered whole like the state
        iarrays = {}
        for key in [key for key in idict if isinstance(idict[key], np.ndarray)]:
            a = idict.pop(key)
            rows = [backend.gather_v(r) for r in np.atleast_2d(a)]
            iarrays[key] = (rows[0] if a.ndim == 1 else np.stack(rows)) if self.root else None
        qg, vg = backend.gather_q(q), backend.gather_v(v)
        fg = None if fsal is None else backend.gather_v(fsal)
        if self.root:
            st = {"q": qg, "v": vg}
            if fg is not None:
                st["fsal"] = fg
            for key, a in iarrays.items():
                st[INTEGRATOR_ARRAY + key] = a
            idict["arrays"] = sorted(iarrays)
            meta = {"tick": k, "t": t, "rows": len(rec), "model_fingerprint": self.model_fp,
                    "options_fingerprint": self.options_fp, "options": self.fp_values, "integrator": idict,
                    "wall_time": self.wall_before + now - self.t_wall0, "rng": None, "backend": self.backend}
            nrows = len(rec)
            self.ckpt.save(st, meta, rec.stacked(self.n_flushed) if nrows > self.n_flushed else None, digests)
            self.n_flushed = nrows
        self.last_steps = steps
        self.last_wall = now

    def finish(self, keep):
        """After a finished run: delete the checkpoint unless ``keep``."""
        if self.root and not keep:
            self.ckpt.remove()


# ==================================================================== backends


class Backend:
    """What a backend supplies to the time loop.  The serial backend is the plain case: one
    process, whole vectors; MPI runs the loop on every rank with each rank's pieces of the
    vectors (rank 0 is the root); Dask runs it in the client with handles to pieces that stay
    on the workers.

    A backend sets ``name``, ``root`` (this process samples, writes the files and prints) and
    ``polls_every_tick`` (whether agreeing on a stop costs nothing: one process), and implements
    the methods below.
    """

    name = "?"
    root = True
    polls_every_tick = True

    def guard(self):
        """Context around work that may fail on one process only (MPI: abort the job instead
        of leaving the others in a collective)."""
        return contextlib.nullcontext()

    def agree(self, value):
        """The root's ``value`` on every process (MPI: a broadcast)."""
        return value

    def poll(self, values):
        """Element-wise maximum over the processes of a few small integers (the loop's stop and
        checkpoint flags)."""
        return values

    def resolve_model(self, model):
        """The Model from a Model, a spec string or path, or a zero-argument callable."""
        if isinstance(model, Model):
            return model
        if callable(model):
            return model()
        from ..specs import resolve_model

        return resolve_model(model)

    def dynamics(self, model, inputs, custom=None):
        """The run's :class:`~partree.simulation.dynamics.Dynamics` (joint inputs; on the root
        it also gives the recorded wrenches), or a wrapper of a custom dynamics function."""
        raise NotImplementedError

    def start(self, model, dyn, opts, q, v, space=None):
        """Build the state space, the dynamics function and the integrator; distribute the
        initial state.  Returns ``(integrator, q, v)`` in the backend's representation (in the
        momentum form, ``(integrator, q, p)``: the loop then carries p where it says v)."""
        raise NotImplementedError

    def step_closure(self, closure):
        """The loops' correction after each step on this backend's state: ``closure`` itself
        (a :class:`~.closure.LoopClosure` on the whole state) unless the backend distributes it."""
        return closure

    def put_state(self, integ, info, state):
        """Resume: distribute the root's loaded ``state`` (dict q, v[, fsal]) and set the
        integrator's state from ``info``.  Returns ``(q, v)``."""
        raise NotImplementedError

    def gather_q(self, q):
        """The whole configuration on the root (None elsewhere)."""
        raise NotImplementedError

    def gather_v(self, v):
        """A whole velocity-sized vector on the root (None elsewhere)."""
        raise NotImplementedError

    def sample(self, t, q, v, need_qdd):
        """A save point: ``(q, v, qdd, tau)`` as whole vectors on the root (qdd, tau only when
        ``need_qdd``; in the momentum form ``(q, v, qdd, tau, p)``, v solved from p); None
        elsewhere."""
        raise NotImplementedError

    def summary(self):
        """Backend facts for the run's summary (parts, ranks, workers)."""
        return {}

    def per_rank_output(self, opts, model):
        """Whether every process writes its own joints' columns (MPI: ``SimulationOptions.output``)."""
        return False

    def gather_objects(self, obj):
        """A small picklable object of every process, in a list on the root (None elsewhere)."""
        return [obj]

    def close(self):
        """Release what the backend holds (the engine, a cluster it started)."""


# ==================================================================== the driver


def _initial_state(model, q0, qd0):
    """The initial state, checked (sizes, finite, real, quaternions) before it is normalised."""
    from .. import checks

    q = model.neutral() if q0 is None else model.normalize(checks.state(model, q0, names=("q0", "qd0"))[0])
    v = np.zeros(model.nv) if qd0 is None else np.array(checks.vector(model, qd0, model.nv, "qd0", "nv"))
    return q, v


def joint_columns(idx, nj, ids):
    """The columns of joints ``ids`` in a vector whose joint i holds [idx[i], idx[i] + nj[i])."""
    ids = np.asarray(ids, dtype=np.int64)
    cnt = np.asarray(nj, dtype=np.int64)[ids]
    start = np.asarray(idx, dtype=np.int64)[ids]
    if not cnt.sum():
        return np.zeros(0, dtype=np.int64)
    off = np.repeat(start - np.concatenate(([0], np.cumsum(cnt)[:-1])), cnt)
    return (np.arange(int(cnt.sum())) + off).astype(np.int64)


def _wrench_ids(model, quantities, wrench_joints, rsel=None):
    if wrench_joints is None and "wrenches" in quantities:
        return np.arange(model.n) if rsel is None else np.asarray(rsel, dtype=np.int64)
    if wrench_joints:
        try:
            return np.array([model.joint_id(j) for j in wrench_joints], dtype=np.int64)
        except KeyError as e:
            raise PartreeInputError(f"wrench_joints (--wrench-joints): {e.args[0] if e.args else e}; model "
                                    f"{model.name!r} has joints {list(model.joint_names[:min(model.n, 8)])}"
                                    f"{' ...' if model.n > 8 else ''}") from None
    return None


def _agreed(backend, work):
    """Run ``work()`` on the root; every process gets its value, or raises its error (one
    broadcast)."""
    err = value = None
    if backend.root:
        try:
            value = work()
        except Exception as e:      # noqa: BLE001 -- re-raised on every process
            err = e
    what, value = backend.agree((None if err is None else (type(err).__name__, str(err)), value))
    if what is None:
        return value
    if err is not None:
        raise err
    name, text = what
    cls = {"CheckpointError": CheckpointError, "PartreeInputError": PartreeInputError}.get(name)
    raise (cls(text) if cls is not None else RuntimeError(f"root process: {name}: {text}"))


def check_outputs(opts):
    """The checks of the run's files that need nothing but the options (before any work).

    Parameters
    ----------
    opts : SimulationOptions
        Validated options.
    """
    resuming = bool(opts.resume)
    ck = opts.checkpoint_path()
    if ck is not None and opts.out is not None and os.path.abspath(ck) == os.path.abspath(opts.out):
        raise PartreeInputError(f"the checkpoint and the results file are the same file {ck!r}")
    if opts.out is not None:
        if opts.out.lower().endswith((".h5", ".hdf5")):
            from ..extras import require

            require("h5py", f"writing .h5 results ({opts.out!r}; write .npz instead: it needs nothing)")
        interrupted = ck is not None and os.path.exists(ck)
        check_output_file(opts.out, "results file", overwrite=opts.overwrite, may_exist=resuming,
                          hint="its run left a checkpoint: resume it with --resume (resume=True), or " if interrupted
                          else "")
    if ck is not None:
        check_output_file(ck, "checkpoint", overwrite=opts.overwrite, may_exist=resuming,
                          hint="it belongs to an interrupted run: resume it with --resume (resume=True), or ")


def _check_out_on_resume(opts, resumed, model_fp, options_fp):
    """A results file that exists may be replaced by a resumed run when it holds the same run's
    results (an interrupted run's rows, or a finished run's when its checkpoint was kept)."""
    out = opts.out
    if out is None or not os.path.exists(out) or opts.overwrite:
        return
    if not resumed:
        raise PartreeInputError(f"the results file {out!r} exists and there is no checkpoint to resume; use "
                                f"--force (overwrite=True) to replace it, or choose another name")
    try:
        meta = read_metadata(out)
    except (PartreeInputError, OSError, ImportError) as e:
        raise PartreeInputError(f"the results file {out!r} exists and is not this run's results ({e}); use --force "
                                f"(overwrite=True) to replace it, or choose another name") from None
    if meta.get("model_fingerprint") != model_fp or meta.get("options_fingerprint") != options_fp:
        raise PartreeInputError(f"the results file {out!r} holds the results of another run (other model or "
                                f"options); use --force (overwrite=True) to replace it, or choose another name")


def _stderr_line(text):
    print(text, file=sys.stderr, flush=True)


def run(backend, model, opts, inputs, dynamics=None, space=None, step_hook=None, probe=None):
    """Run a simulation on ``backend`` (see ``partree.simulation.simulate``, which calls it).

    Parameters
    ----------
    backend : Backend
        Where the state lives and how the dynamics are evaluated.
    model : Model or str or callable
        The model, a spec / path, or a loader.
    opts : SimulationOptions
        Validated options.
    inputs : dict
        ``q0``, ``qd0`` and the joint inputs of ``Dynamics``.
    dynamics, space : optional
        A custom dynamics function and ``StateSpace`` (serial backend).
    step_hook : callable, optional
        ``step_hook(k, t, q, v)`` after every tick, with the backend's state.
    probe : callable, optional
        ``probe(integrator)`` once before the loop (benchmarks).

    Returns
    -------
    SimulationResult or None
        The result on the root, None on the other processes.
    """
    t_wall0 = time.perf_counter()
    root = backend.root
    inputs = dict(inputs)
    q0, qd0 = inputs.pop("q0", None), inputs.pop("qd0", None)
    notice = CompileNotice(_stderr_line if root and (opts.progress or opts.verbose) else None)
    try:
        with notice:
            res = _run(backend, model, opts, inputs, q0, qd0, dynamics, space, step_hook, probe, t_wall0, notice)
    finally:
        backend.close()
    return res


def _run(backend, model, opts, inputs, q0, qd0, dynamics, space, step_hook, probe, t_wall0, notice):
    root = backend.root
    _agreed(backend, lambda: check_outputs(opts))
    with backend.guard():
        model = backend.resolve_model(model)
        flexible = getattr(model, "flexible", None) is not None
        if flexible:                 # the serial backend's run of [q; eta] (partree.simulation.flexible)
            from . import flexible as fx
            fx.check_run(model, backend, opts)
        dyn = backend.dynamics(model, inputs, dynamics)
        q_full, v_full = (fx.initial_state if flexible else _initial_state)(model, q0, qd0)
        closure = None
        if len(getattr(model, "loops", ())):
            from .closure import LoopClosure
            closure = LoopClosure(model, opts.correct)
            q_full, v_full = closure.initial(q_full, v_full)
            if opts.singular_band and hasattr(dyn, "singular_band"):
                dyn.singular_band = opts.singular_band
        quantities = opts.quantities
        rsel = None
        if opts.record_joints is not None:
            from .options import select_joints

            rsel = select_joints(model, opts.record_joints)
        wids = _wrench_ids(model, quantities, opts.wrench_joints, rsel)
        qcols = vcols = None
        if rsel is not None:
            qcols = joint_columns(model.idx_q, model.nq_j, rsel)
            vcols = joint_columns(model.idx_v, model.nv_j, rsel)
        per_rank = backend.per_rank_output(opts, model)
        wnames = [model.joint_names[int(i)] for i in wids] if wids is not None else []
        inputs_fp = dyn.fingerprint()
        fp_values, options_fp = opts.fingerprint(q_full, v_full, inputs_fp, wnames)
    ck_path = opts.checkpoint_path()
    book = CheckpointBook(ck_path, opts, root, t_wall0, backend.name) if ck_path is not None else None
    model_fp = model_fingerprint(model) if root else None

    loaded = None

    def prepare():                       # root: the checkpoint to resume from, and the results file
        nonlocal loaded
        if book is not None:
            book.model_fp, book.options_fp, book.fp_values = model_fp, options_fp, fp_values
            loaded = book.load(opts.resume)
        _check_out_on_resume(opts, loaded is not None, model_fp, options_fp)
        return CheckpointBook.info(loaded)

    info = _agreed(backend, prepare)
    momentum = opts.formulation == "momentum"
    need_qdd = bool({"qdd", "tau"} & quantities) or wids is not None
    need_full = "energy" in quantities or wids is not None       # per rank: the root needs the whole state
    options = None
    if root:
        options = dict(opts.to_dict(), model=model.name, wrench_joints=wnames, q0=fp_values["q0"],
                       qd0=fp_values["qd0"], inputs=fp_values["inputs"])
    with backend.guard():
        integ, q, v = backend.start(model, dyn, opts, q_full, v_full, space)
        del q_full, v_full
        if closure is not None:
            closure = backend.step_closure(closure)
        adaptive = bool(getattr(integ, "adaptive", False))
        tick = opts.dt * opts.save_every if adaptive else opts.dt
        n_ticks = max(1, int(math.ceil(opts.t_end / tick - 1e-9)))
        save_mod = 1 if adaptive else opts.save_every
        lrec = columns = None
        if per_rank:
            rec = Recorder(model, dyn, quantities, wids, momentum, columns=False) if root else None
            lq, lv = backend.local_columns()
            tq = None if qcols is None else np.flatnonzero(np.isin(lq, qcols))
            tv = None if vcols is None else np.flatnonzero(np.isin(lv, vcols))
            lrec = Recorder(None, None, quantities, None, momentum, qtake=tq, vtake=tv, scalars=False)
            lrec.q_columns = lq if tq is None else lq[tq]
            lrec.v_columns = lv if tv is None else lv[tv]
            all_q = np.arange(model.nq) if qcols is None else qcols
            all_v = np.arange(model.nv) if vcols is None else vcols
            columns = (lrec, lrec.q_columns, lrec.v_columns, all_q, all_v)
            layout = backend.gather_objects((lrec.q_columns, lrec.v_columns))
        else:
            rec = Recorder(model, dyn, quantities, wids, momentum, qtake=qcols, vtake=vcols) if root else None

        def steps_of(k):
            return int(integ.accepted) if adaptive else k

        k0 = 0
        if info is not None:
            q, v = backend.put_state(integ, info, loaded[1] if root else None)
            k0 = info["tick"]
            book.resumed(info, loaded[2] if root else None, rec, steps_of(k0), columns)
        loaded = None
        if not root:
            model = dyn = None             # only the root keeps the whole model

        def t_of(k):
            return min(k * tick, opts.t_end)

        def save(t, q, v):
            if per_rank:
                mine, whole = backend.sample_split(t, q, v, need_qdd, need_full)
                lrec.add(t, *mine)
                if root:
                    rec.add(t, *whole)
                return
            got = backend.sample(t, q, v, need_qdd)
            if root:
                rec.add(t, *got)

        def write_out(res):
            """The results file (per rank: every rank's file, then rank 0's joined one)."""
            if not per_rank:
                if root:
                    res.save(opts.out, overwrite=True)
                return
            from .results import rank_file, write_rank_file

            me = rank_file(opts.out, backend.rank)
            write_rank_file(me, backend.rank, backend.size, lrec.stacked(), lrec.q_columns, lrec.v_columns)
            backend.gather_objects(None)           # every rank's file is written before the joined one
            if root:
                res.save(opts.out, overwrite=True, ranks=layout)

        if k0 == 0:
            save(0.0, q, v)
        if probe is not None:
            probe(integ)                   # benchmarks: the integrator (and its dynamics function integ.f)
        name = model.name if root else ""
        label = opts.integrator if opts.formulation == "velocity" else f"{opts.integrator}, momentum form"
        progress = Progress(root and opts.progress, opts.t_end, t_of(k0), f"simulate {name} [{label}]")
        catcher = SignalCatcher(opts.catch_signals)
        next_poll, poll_k, poll_wall = k0 + 1, k0, time.perf_counter()
        polls = 0
        stopped = None
        k = k0
        rate_from = None
        steps0 = steps_of(k0)
        try:
            with catcher:
                for k in range(k0 + 1, n_ticks + 1):
                    t0, t1 = t_of(k - 1), t_of(k)
                    if adaptive:
                        q, v = integ.advance(t0, q, v, t1)
                    else:
                        q, v = integ.step(t0, q, v, t1 - t0)
                    if closure is not None and closure.correct != "none":
                        q, v = closure(q, v)
                    if k % save_mod == 0 or k == n_ticks:
                        save(t1, q, v)
                    if k == k0 + 1:
                        notice.done()
                        rate_from = (time.perf_counter(), steps_of(k))   # the loop's rate: after start-up
                    if step_hook is not None:
                        step_hook(k, t1, q, v)
                    if k == n_ticks:
                        break
                    steps = steps_of(k)
                    # the processes agree on stopping (a signal) and on a wall-clock checkpoint
                    stop, late = 0, False
                    if backend.polls_every_tick:       # one process: nothing to agree on
                        stop = catcher.caught or 0
                        late = book is not None and book.late()
                    elif (book is not None and book.every_secs) or k >= next_poll:
                        nxt = 0
                        if root:
                            now = time.perf_counter()
                            per_tick = (now - poll_wall) / max(k - poll_k, 1)
                            nxt = k + max(1, int(POLL_SECONDS / max(per_tick, 1e-9)))
                            poll_k, poll_wall = k, now
                        # [the signal caught here (0: none), the root's wall-clock checkpoint flag, the
                        # root's next tick to poll at]: the maximum over the processes
                        flags = backend.poll(np.array([catcher.caught or 0,
                                                       int(root and book is not None and book.late()), nxt],
                                                      dtype=np.int64))
                        polls += 1
                        stop, late, next_poll = int(flags[0]), bool(flags[1]), int(flags[2])
                    if stop:
                        stopped = stop
                        break
                    if book is not None and book.periodic and book.due(steps, late):
                        book.write(k, t1, steps, q, v, integ, backend, rec, lrec)
                    progress.update(t1, steps)
            if stopped is None:
                progress.update(t_of(k), steps_of(k), last=True)
        finally:
            notice.done()
            progress.close()
        now = time.perf_counter()
        wall = (book.wall_before if book is not None else 0.0) + now - t_wall0
        # the loop's rate after start-up (the first tick: compilation, first evaluations), when measurable
        timing = {"startup_time": (rate_from[0] if rate_from is not None else now) - t_wall0,
                  "steps_per_second": ((steps_of(k) - rate_from[1]) / (now - rate_from[0])
                                       if rate_from is not None and k > k0 + 1 and now > rate_from[0]
                                       else (steps_of(k) - steps0) / max(now - t_wall0, 1e-9))}
        if stopped is not None:
            t_stop = t_of(k)
            if book is not None:
                book.write(k, t_stop, steps_of(k), q, v, integ, backend, rec, lrec)
            if opts.out is not None:
                write_out(_result(model, dyn, rec, integ, adaptive, k, opts, options, options_fp, model_fp, wall,
                                  backend, wnames, info, {"t": t_stop, "signal": signal.Signals(stopped).name}, timing,
                                  qcols, vcols, opts.out if per_rank else None) if root else None)
            raise SimulationInterrupted(t_stop, stopped, None if book is None else book.path,
                                        opts.out if root else None)
        extra = dict(backend.summary(), **timing)
        if not backend.polls_every_tick:
            extra["polls"] = polls
        res = None
        if root:
            res = _result(model, dyn, rec, integ, adaptive, k, opts, options, options_fp, model_fp, wall, backend,
                          wnames, info, None, extra, qcols, vcols, opts.out if per_rank else None)
        if opts.out is not None:
            write_out(res)
        if not root:
            return None
        if book is not None:
            book.finish(opts.keep_checkpoint)
        if opts.verbose:
            print(format_summary(res.summary))
        return res


def _result(model, dyn, rec, integ, adaptive, k, opts, options, options_fp, model_fp, wall, backend, wnames, info,
            interrupted=None, extra=None, qcols=None, vcols=None, lazy=None):
    """The result object (root): series, summary, options, fingerprints."""
    series = rec.stacked()
    energy = None
    if "kinetic" in series:
        elastic = series.get("elastic", 0.0)           # the modes' strain energy (flexible bodies)
        series["energy"] = series["kinetic"] + series["potential"] + elastic
        E = series["energy"]
        E0 = E[0]
        # drift relative to the run's energy scale (|E(0)|, or the largest |T| + |V| when E(0) ~ 0)
        scale = max(abs(E0), float(np.max(np.abs(series["kinetic"]) + np.abs(series["potential"])
                                          + np.abs(elastic))), 1e-300)
        energy = {"initial": float(E0), "final": float(E[-1]), "max_abs_drift": float(np.abs(E - E0).max()),
                  "max_rel_drift": float(np.abs(E - E0).max() / scale), "scale": float(scale),
                  "conservative": bool(getattr(dyn, "conservative", True))}
    nsteps = int(integ.accepted) if adaptive else k
    summary = {"integrator": opts.integrator, "formulation": opts.formulation, "steps": nsteps,
               "rejected": int(getattr(integ, "rejected", 0)),
               "f_evals": int(getattr(integ, "nfev", 0)), "t_end": opts.t_end, "wall_time": wall,
               "samples": int(series["t"].size),
               "resumed_from": None if info is None else info["t"], "backend": backend.name}
    if energy is not None:
        summary["energy"] = energy
    if getattr(integ, "iterations", None) is not None:
        summary["iterations"] = int(integ.iterations)      # gauss6: fixed-point iterations (3 evaluations each)
    summary.update(extra or {})
    if "violation" in series and series["violation"].size:
        kv = int(np.argmax(series["violation"]))
        summary["loops"] = {"count": len(model.loops), "rows": model.loops.nrow, "correct": opts.correct,
                            "max_violation": float(series["violation"][kv]),
                            "max_violation_time": float(series["t"][kv])}
    if rec.wids is not None and len(rec.wids):
        W = series["joint_wrench"]
        fn = np.linalg.norm(W[:, :, 3:], axis=2)
        nn = np.linalg.norm(W[:, :, :3], axis=2)
        kf = np.unravel_index(int(np.argmax(fn)), fn.shape)
        kn = np.unravel_index(int(np.argmax(nn)), nn.shape)
        summary["wrench"] = {"max_force": float(fn[kf]), "max_force_joint": wnames[kf[1]],
                             "max_force_time": float(series["t"][kf[0]]), "max_torque": float(nn[kn]),
                             "max_torque_joint": wnames[kn[1]], "max_torque_time": float(series["t"][kn[0]])}
    if interrupted is not None:
        summary["interrupted"] = interrupted
    if opts.out is not None:
        summary["out"] = opts.out
    if "nparts" in summary:
        options = dict(options, parts=summary["nparts"])
    res = SimulationResult(series, options, summary, model, wnames, None, model_fp, None, options_fp, opts.command,
                           q_columns=qcols, v_columns=vcols)
    if lazy is not None:
        res._lazy = lazy              # a per-rank run: the joints' columns are read from the files on first use
    return res
