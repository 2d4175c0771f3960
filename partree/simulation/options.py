"""The options of a simulation run: one dataclass, checked at entry, and its fingerprint.

:class:`SimulationOptions` holds every option of a run (times, integrator, tolerances, what is
recorded, where results and checkpoints go, progress, backend).  ``validate()`` checks every value
before any work starts and names the option in its message; ``fingerprint()`` is what a checkpoint
must match to be resumed.  The joint inputs (torques, damping, springs, external forces,
prescribed motion) are not options: they belong to :class:`~partree.simulation.dynamics.Dynamics`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass

import numpy as np

from ..errors import PartreeInputError
from .integrators import canonical_integrator

#: the quantities a run may record (``SimulationOptions.record``; t is always recorded)
QUANTITIES = ("q", "qd", "qdd", "tau", "energy", "wrenches")
#: the names of two sets of :data:`QUANTITIES`: 'joints' (q, qd, energy) and 'all' (every one)
RECORD_ALIASES = {"joints": ("q", "qd", "energy"), "all": QUANTITIES}
#: what ``record`` accepts: an alias, or a comma list of :data:`QUANTITIES`
RECORD = tuple(RECORD_ALIASES) + QUANTITIES
#: where the joints' time series of an MPI run are written (``SimulationOptions.output``)
OUTPUTS = ("auto", "per-rank", "gathered")
#: ``output='auto'`` writes per rank from this many bodies on (with more than one rank)
PER_RANK_MIN_BODIES = 100_000
#: the backends ``simulate`` runs on
BACKENDS = ("serial", "mpi", "dask")
#: suffixes of results files and the format each one picks
RESULT_SUFFIXES = {".h5": "h5", ".hdf5": "h5", ".npz": "npz"}
#: the values a checkpoint must match to be resumed (``t_end`` may grow; backend and parts may change)
#: what a run with loops corrects after every step (``SimulationOptions.correct``)
CORRECTIONS = ("full", "velocity", "none")
#: the forms of the equations of motion a run integrates (``SimulationOptions.formulation``)
FORMULATIONS = ("velocity", "momentum")

FINGERPRINT_KEYS = ("dt", "integrator", "rtol", "atol", "save_every", "record", "wrench_joints", "h0", "h_max",
                    "q0", "qd0", "inputs", "correct", "singular_band", "formulation")
#: and, when given, ``record_joints`` (left out otherwise, so older checkpoints still match)


def parse_record(value):
    """Read a ``record`` value: ``'joints'``, ``'all'``, or a subset of :data:`QUANTITIES` as a
    comma list (``'q,energy'``) or a list of names.

    Parameters
    ----------
    value : str or list of str
        What to record.

    Returns
    -------
    tuple
        ``(name, quantities)``: the canonical name (the alias when the set is one, otherwise the
        quantities joined by commas in the order of :data:`QUANTITIES`) and the set.
    """
    where = f"record (--record) = {value!r}"
    if isinstance(value, str):
        items = [x.strip().lower() for x in value.split(",")]
    elif isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(x, str) for x in value):
        items = [x.strip().lower() for x in value]
    else:
        raise PartreeInputError(f"{where}: give 'joints', 'all' or a comma list of {', '.join(QUANTITIES)}")
    got = set()
    for x in items:
        if x in RECORD_ALIASES:
            got.update(RECORD_ALIASES[x])
        elif x in QUANTITIES:
            got.add(x)
        else:
            raise PartreeInputError(f"{where}: unknown quantity {x!r}; record 'joints', 'all' or a comma list of "
                                    f"{', '.join(QUANTITIES)}")
    if not got:
        raise PartreeInputError(f"{where}: name at least one of {', '.join(QUANTITIES)}")
    for alias, qs in RECORD_ALIASES.items():
        if got == set(qs):
            return alias, frozenset(got)
    return ",".join(x for x in QUANTITIES if x in got), frozenset(got)


def parse_joint_selection(items, what="record_joints (--record-joints)"):
    """Check a joint selection: joint names, glob patterns (``'arm*'``), body indices and index
    ranges ``'START:STOP'`` (STOP excluded; either may be left out), as a list or one comma list.

    Parameters
    ----------
    items : str, int or list of them
        The selection.
    what : str
        The option's name, for messages.

    Returns
    -------
    list
        The items, as strings and ints (resolved against a model by :func:`select_joints`).
    """
    if isinstance(items, (str, int, np.integer)):
        items = [items]
    try:
        items = list(items)
    except TypeError:
        raise PartreeInputError(f"{what} must be joint names, patterns or index ranges, got {items!r}") from None
    out = []
    for x in items:
        if isinstance(x, (bool, np.bool_)):
            raise PartreeInputError(f"{what}: {x!r} is not a joint name, pattern or index")
        if isinstance(x, (int, np.integer)):
            out.append(int(x))
        elif isinstance(x, str):
            out += [y.strip() for y in x.split(",") if y.strip()]
        else:
            raise PartreeInputError(f"{what}: {x!r} is not a joint name, pattern or index")
    if not out:
        raise PartreeInputError(f"{what}: an empty selection")
    return out


def select_joints(model, items, what="record_joints (--record-joints)"):
    """The body ids (sorted, unique) of a joint selection (:func:`parse_joint_selection`).

    An item is a joint name; a glob pattern (``*``, ``?``, ``[``); an index (negative from the
    end); or a range ``START:STOP`` of indices.  An item that selects nothing is refused.
    """
    import fnmatch
    import re

    n = model.n
    names = None
    ids = []
    for x in items:
        if isinstance(x, int):
            if not -n <= x < n:
                raise PartreeInputError(f"{what}: no joint {x} (model {model.name!r} has {n} joints)")
            ids.append(np.array([x % n]))
            continue
        m = re.fullmatch(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*", x)
        if m:
            a = int(m.group(1)) if m.group(1) else None
            b = int(m.group(2)) if m.group(2) else None
            r = np.arange(n)[slice(a, b)]
            if not r.size:
                raise PartreeInputError(f"{what}: the range {x!r} selects no joint (model {model.name!r} has "
                                        f"{n} joints)")
            ids.append(r)
            continue
        if re.fullmatch(r"-?\d+", x) and x not in model.joint_names:
            ids.append(np.array([model.joint_id(int(x))]) if -n <= int(x) < n else None)
            if ids[-1] is None:
                raise PartreeInputError(f"{what}: no joint {x} (model {model.name!r} has {n} joints)")
            continue
        if names is None:
            names = np.array([str(s) for s in model.joint_names], dtype=object)
        if any(c in x for c in "*?["):
            sel = np.flatnonzero([fnmatch.fnmatchcase(s, x) for s in names])
        else:
            sel = np.flatnonzero(names == x)
        if not sel.size:
            raise PartreeInputError(f"{what}: no joint matches {x!r}; model {model.name!r} has joints "
                                    f"{list(model.joint_names[:min(n, 8)])}{' ...' if n > 8 else ''}")
        ids.append(sel)
    return np.unique(np.concatenate(ids)).astype(np.int64)


def hash_array(x):
    """The first 16 hex digits of the SHA-256 of an array's float64 bytes (an initial state's identity)."""
    return hashlib.sha256(np.ascontiguousarray(x, dtype=float).tobytes()).hexdigest()[:16]


def results_kind(path):
    """'h5' or 'npz' from a results file's suffix; anything else is refused.

    Parameters
    ----------
    path : str or path-like
        The results file.

    Returns
    -------
    str
        ``'h5'`` for .h5 / .hdf5, ``'npz'`` for .npz.
    """
    low = os.fspath(path).lower()
    for suffix, kind in RESULT_SUFFIXES.items():
        if low.endswith(suffix):
            return kind
    raise PartreeInputError(f"results file {os.fspath(path)!r}: use a .h5/.hdf5 or .npz suffix")


def parse_checkpoint_every(value):
    """Read a ``checkpoint_every`` value: a step count, or wall seconds written with an ``s``.

    Parameters
    ----------
    value : int, str or None
        ``20`` or ``"20"``: every 20 steps; ``"30s"`` or ``"1.5s"``: every 30 / 1.5 seconds of
        wall time; None: no periodic checkpoints.

    Returns
    -------
    tuple
        ``(steps, seconds)``: one of them set, the other None (both None for None).
    """
    if value is None:
        return None, None
    where = f"checkpoint_every (--checkpoint-every) = {value!r}"
    if isinstance(value, str):
        s = value.strip().lower()
        if s.endswith("s"):
            try:
                secs = float(s[:-1])
            except ValueError:
                raise PartreeInputError(f"{where}: give a step count (20) or wall seconds (30s)") from None
            if not (math.isfinite(secs) and secs > 0):
                raise PartreeInputError(f"{where}: the seconds must be > 0")
            return None, secs
        try:
            value = int(s)
        except ValueError:
            raise PartreeInputError(f"{where}: give a step count (20) or wall seconds (30s)") from None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise PartreeInputError(f"{where}: give a step count (20) or wall seconds (30s)")
    if value < 1:
        raise PartreeInputError(f"{where}: the step count must be >= 1")
    return int(value), None


def _count(name, value, minimum=1):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
            value = int(value)
        else:
            raise PartreeInputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise PartreeInputError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def _real(name, value, positive=True, allow_inf=False, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PartreeInputError(f"{name} must be a number, got {value!r}")
    x = float(value)
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise PartreeInputError(f"{name} must be finite, got {value!r}")
    if positive and not x > 0:
        raise PartreeInputError(f"{name} must be > 0, got {value!r}")
    if not positive and x < 0:
        raise PartreeInputError(f"{name} must be >= 0, got {value!r}")
    return x


def _flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise PartreeInputError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _path(name, value):
    if value is None:
        return None
    try:
        p = os.fspath(value)
    except TypeError:
        raise PartreeInputError(f"{name} must be a file path, got {value!r}") from None
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p.strip():
        raise PartreeInputError(f"{name} is an empty path")
    return p


@dataclass
class SimulationOptions:
    """Every option of a simulation run.

    ``simulate(model, t_end, dt, **options)`` builds one from its keywords; build one yourself to
    reuse it (``simulate(model, options=opts)``).  :meth:`validate` checks and normalises every
    value (called by ``simulate`` before any work).

    Parameters
    ----------
    t_end : float
        End time in s (> 0); the run goes from t = 0 to t_end.
    dt : float
        Step in s of the fixed-step integrators; for the adaptive ones the output spacing is
        ``dt * save_every`` (the integrator picks its own steps in between).
    integrator : str
        ``'rk4'``, ``'dopri5'``, ``'dop853'``, ``'symplectic-euler'``, ``'gauss6'`` (the
        three-stage Gauss-Legendre method: implicit, order 6, symplectic; serial and MPI backends;
        aliases ``'rk45'``, ``'euler'``, ``'gauss'``), or ``'scipy'`` / ``'scipy:METHOD'``
        (``scipy.integrate.solve_ivp``; serial backend, models without quaternions).
    formulation : str
        The equations integrated: ``'velocity'`` (default), the state (q, qd) with the
        accelerations of ``partree.aba``; or ``'momentum'`` (seed 001), the state (q, p) with
        p = M(q) qd the generalized momenta, integrated through ``partree.momentum_rhs``
        (qd = M^-1 p and dp/dt in O(N), no accelerations; see
        :class:`~partree.simulation.dynamics.MomentumDynamics`).  Results hold q, qd and p
        either way.  The momentum form runs for trees (no loops) without prescribed motion, on
        every backend (the parallel engine's ``momentum_local`` rounds);
        ``'gauss6'`` is its sixth-order symplectic integrator.
    rtol, atol : float
        Relative and absolute tolerances of the adaptive integrators (> 0).
    h0, h_max : float or None
        First and largest step of the adaptive integrators (None: chosen by the integrator; no
        limit).
    max_steps : int
        Most steps an adaptive integrator may take within one output interval.
    save_every : int
        Record every k-th tick (the initial state is always recorded).
    record : str or list of str
        What is recorded at each save point besides the time: a comma list (or a list) of
        ``q``, ``qd`` (and, in the momentum form, p), ``qdd``, ``tau``, ``energy`` (kinetic,
        potential and total; with loops also the violation) and ``wrenches`` (the joints'
        transmitted wrenches); ``'joints'`` is ``'q,qd,energy'``, ``'all'`` every one.
    record_joints : list or str or None
        Record q, qd, qdd, tau (and p) of these joints only: joint names, glob patterns
        (``'arm*'``), body indices and index ranges ``'START:STOP'`` (None: every joint).
        Without ``wrench_joints`` the wrenches recorded are those of these joints.
    wrench_joints : list of str or None
        Joints whose wrench [n; f] (child frame) is recorded, whatever ``record`` says.
    output : str
        Where an MPI run writes the joints' time series: ``'per-rank'``: every rank writes its
        joints' columns to its own file next to ``out`` (``run.rank0003.h5``) and rank 0 writes
        ``out`` with HDF5 virtual datasets joining them (``load_results`` reads it as one);
        ``'gathered'``: rank 0 gathers the rows and writes one file; ``'auto'`` (default):
        per rank for .h5 results of models with at least :data:`PER_RANK_MIN_BODIES` bodies on
        more than one rank, gathered otherwise.  The serial and Dask backends always gather.
    out : str or path-like or None
        Results file (.h5 / .hdf5 needs h5py; .npz needs nothing).
    overwrite : bool
        Replace existing output files (results, checkpoint).  A model file is never replaced.
    checkpoint : str or path-like or None
        Checkpoint file (default ``out + '.ckpt'``).
    checkpoint_every : int or str or None
        Write a checkpoint every this many steps (int >= 1), or every so many seconds of wall
        time written as ``'30s'``.
    checkpoint_seconds : float or None
        Wall seconds between checkpoints (the same as ``checkpoint_every='30s'``).
    resume : bool or 'auto'
        True: continue from the checkpoint (it must exist and match the model, the inputs and
        the options in :data:`FINGERPRINT_KEYS`); ``'auto'``: continue when a checkpoint exists,
        start afresh otherwise.
    keep_checkpoint : bool
        Keep the checkpoint after a run that finished (it is deleted otherwise).
    progress : bool
        Report progress on stderr: a progress bar when stderr is a terminal, otherwise a plain
        line at every tenth of the run and at least every 30 s of wall time.
    verbose : bool or None
        Print the summary at the end (None: the same as ``progress``).
    catch_signals : bool
        Catch SIGINT and SIGTERM during the time loop: write a checkpoint at the current step,
        write the results recorded so far, and raise
        :class:`~partree.simulation.loop.SimulationInterrupted` (a ``KeyboardInterrupt``).
        Only in the main thread of the process.
    backend : str
        ``'serial'``, ``'mpi'`` (collective over a communicator; the state stays in pieces on
        the ranks) or ``'dask'`` (the MPI backend's loop, run by the workers over a socket
        channel: ``partree.simulation.dask_backend``).
    parts : int or Partition or None
        Number of parts of the distributed backends (default: one per rank / worker).
    path_weight : float or None
        Extra relative work of a body on a handle path, for the partitioner (None: the
        engine's default, ``partree.parallel.partition.PATH_WEIGHT``).
    command : list of str or None
        The command line that started the run, recorded in the results file (the
        ``partree simulate`` command sets it).
    correct : str
        Models with loops: after every step, ``'full'`` projects q and qd back onto the loops'
        constraint manifold (``partree.correct_state``), ``'velocity'`` only qd, ``'none'``
        nothing (the violation then drifts with the integration error).  The projections are
        the smallest changes in the kinetic-energy metric (``metric='mass'``; on the serial
        backend the Euclidean one for models with more than 256 degrees of freedom, on the MPI
        and Dask backends always the mass metric, through the engine:
        ``partree.parallel.correction``): at a singular configuration (a
        four-bar whose bars align) the integration error in the directions losing rank is
        divided by the vanishing singular value and enters the accelerations as
        M^-1 J^T dlambda, which these projections remove whole, so that runs pass singular
        configurations with no more error than elsewhere (``partree.simulation.closure``).
    singular_band : float
        Models with loops near singular configurations: the acceleration's normal component
        along constraint directions whose pivot in the QR of (J W)^T (W W^T = M^-1 where the
        corrections use the mass metric) falls below ``singular_band`` times the largest is
        dropped, the rest kept (seed 003's tangent-space correction, eq. 31,
        ``partree.algorithms.loop_correction.singular_band_acceleration``).  Inside the band it
        replaces the normal acceleration of those directions (the curvature of the motion
        across them) by zero, which the corrections after the step undo; with the mass-metric
        corrections it is not needed for accuracy (seed 003's four-bar through 14 singular
        positions: the same error with and without it).  The pivots compare rows of all kinds,
        so the band depends on the model's units.  0 (default): off.  Models whose J exceeds the
        dense limit skip it.
    """

    t_end: float
    dt: float
    integrator: str = "rk4"
    formulation: str = "velocity"
    rtol: float = 1e-8
    atol: float = 1e-10
    h0: float | None = None
    h_max: float | None = None
    max_steps: int = 10**9
    save_every: int = 1
    record: str = "joints"
    record_joints: list | None = None
    wrench_joints: list | None = None
    output: str = "auto"
    out: str | None = None
    overwrite: bool = False
    checkpoint: str | None = None
    checkpoint_every: int | str | None = None
    checkpoint_seconds: float | None = None
    resume: bool | str = False
    keep_checkpoint: bool = False
    progress: bool = True
    verbose: bool | None = None
    catch_signals: bool = True
    backend: str = "serial"
    parts: object = None
    path_weight: float | None = None
    command: list | None = None
    correct: str = "full"
    singular_band: float = 0.0

    # ---------------------------------------------------------------- building
    @classmethod
    def names(cls):
        """The option names, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def build(cls, options=None, **values):
        """Options from a base (or none) and keyword values, validated.

        Parameters
        ----------
        options : SimulationOptions or None
            Start from these (a copy; the argument is not changed).
        **values
            Option values; None for ``t_end`` / ``dt`` keeps the base's.

        Returns
        -------
        SimulationOptions
            The validated options.
        """
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise PartreeInputError(f"unknown simulation option(s) {', '.join(unknown)}; the options are "
                                    f"{', '.join(cls.names())} (and the joint inputs q0, qd0, torques, damping, "
                                    f"stiffness, q_ref, f_ext, prescribed)")
        if options is not None:
            if not isinstance(options, SimulationOptions):
                raise PartreeInputError(f"options must be a SimulationOptions, got {type(options).__name__}")
            for k in ("t_end", "dt"):
                if values.get(k) is None:
                    values.pop(k, None)
            opts = dataclasses.replace(options, **values)
        else:
            for k in ("t_end", "dt"):
                if values.get(k) is None:
                    raise PartreeInputError(f"simulate needs {k} (a number > 0)")
            opts = cls(**values)
        return opts.validate()

    # ---------------------------------------------------------------- checks
    def validate(self):
        """Check and normalise every option; the message of a refusal names the option.

        Returns
        -------
        SimulationOptions
            ``self``, normalised: numbers as float / int, the integrator's canonical name, paths
            as str, ``checkpoint_every='30s'`` moved to ``checkpoint_seconds``.
        """
        self.t_end = _real("t_end (--t-end)", self.t_end)
        self.dt = _real("dt (--dt)", self.dt)
        if not isinstance(self.integrator, str):
            raise PartreeInputError(f"integrator must be a name, got {self.integrator!r}")
        self.integrator = canonical_integrator(self.integrator)
        self.rtol = _real("rtol (--rtol)", self.rtol)
        self.atol = _real("atol (--atol)", self.atol)
        self.h0 = _real("h0 (--h0)", self.h0, allow_none=True)
        self.h_max = _real("h_max (--h-max)", self.h_max, allow_inf=True, allow_none=True)
        self.max_steps = _count("max_steps", self.max_steps)
        self.save_every = _count("save_every (--save-every)", self.save_every)
        self.record = parse_record(self.record)[0]
        if self.record_joints is not None:
            self.record_joints = parse_joint_selection(self.record_joints)
        outp = str(self.output).strip().lower() if isinstance(self.output, str) else self.output
        if outp not in OUTPUTS:
            raise PartreeInputError(f"output (--output) must be one of {', '.join(OUTPUTS)}; got {self.output!r}")
        self.output = outp
        if self.wrench_joints is not None:
            if isinstance(self.wrench_joints, str):
                self.wrench_joints = [self.wrench_joints]
            names = list(self.wrench_joints)
            if not all(isinstance(n, str) for n in names):
                raise PartreeInputError(f"wrench_joints must be joint names, got {self.wrench_joints!r}")
            self.wrench_joints = names
        self.out = _path("out (--out)", self.out)
        if self.out is not None:
            results_kind(self.out)
        if self.output == "per-rank" and (self.out is None or results_kind(self.out) != "h5"):
            raise PartreeInputError("output='per-rank' (--output per-rank) writes HDF5 files: give an .h5 results "
                                    "file (out=..., --out)")
        self.checkpoint = _path("checkpoint (--checkpoint)", self.checkpoint)
        self.overwrite = _flag("overwrite (--force)", self.overwrite)
        steps, secs = parse_checkpoint_every(self.checkpoint_every)
        if secs is not None:
            if self.checkpoint_seconds is not None:
                raise PartreeInputError("give checkpoint_every='30s' or checkpoint_seconds=30, not both")
            self.checkpoint_seconds = secs
        self.checkpoint_every = steps
        self.checkpoint_seconds = _real("checkpoint_seconds", self.checkpoint_seconds, allow_none=True)
        if isinstance(self.resume, str):
            if self.resume.lower() != "auto":
                raise PartreeInputError(f"resume must be True, False or 'auto', got {self.resume!r}")
            self.resume = "auto"
        else:
            self.resume = _flag("resume (--resume)", self.resume)
        self.keep_checkpoint = _flag("keep_checkpoint (--keep-checkpoint)", self.keep_checkpoint)
        self.progress = _flag("progress", self.progress)
        self.verbose = self.progress if self.verbose is None else _flag("verbose", self.verbose)
        self.catch_signals = _flag("catch_signals", self.catch_signals)
        self.singular_band = _real("singular_band (--singular-band)", self.singular_band, positive=False)
        if not 0.0 <= self.singular_band < 1.0:
            raise PartreeInputError(f"singular_band (--singular-band) must lie in [0, 1); got {self.singular_band!r}")
        if self.correct not in CORRECTIONS:
            raise PartreeInputError(f"correct (--correct) must be one of {', '.join(CORRECTIONS)}; got "
                                    f"{self.correct!r}")
        bk = str(self.backend).lower()
        if bk not in BACKENDS:
            raise PartreeInputError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        self.backend = bk
        if self.output == "per-rank" and bk != "mpi":
            raise PartreeInputError(f"output='per-rank' (--output per-rank) is for the MPI backend (each rank writes "
                                    f"its own file); the {bk} backend writes one file (output='gathered')")
        form = str(self.formulation).strip().lower() if isinstance(self.formulation, str) else self.formulation
        if form not in FORMULATIONS:
            raise PartreeInputError(f"formulation (--formulation) must be one of {', '.join(FORMULATIONS)}; got "
                                    f"{self.formulation!r}")
        self.formulation = form
        if self.parts is not None and not hasattr(self.parts, "nparts"):
            self.parts = _count("parts (--parts)", self.parts)
        self.path_weight = _real("path_weight", self.path_weight, positive=False, allow_none=True)
        if self.command is not None:
            if isinstance(self.command, str) or not all(isinstance(a, str) for a in self.command):
                raise PartreeInputError("command must be a list of strings (the command line's arguments)")
            self.command = list(self.command)
        if (self.checkpoint_every or self.checkpoint_seconds or self.resume) and self.checkpoint_path() is None:
            raise PartreeInputError("checkpointing needs a checkpoint path (checkpoint=..., --checkpoint) or an "
                                    "output file (out=..., --out)")
        if bk != "serial" and self.integrator.startswith("scipy"):
            raise PartreeInputError("integrator 'scipy' needs the whole state in one process; the distributed "
                                    "backends run 'rk4', 'dopri5', 'dop853' or 'symplectic-euler'")
        return self

    # ---------------------------------------------------------------- derived values
    def checkpoint_path(self):
        """The checkpoint file: ``checkpoint``, else ``out + '.ckpt'``, else None."""
        if self.checkpoint is not None:
            return os.fspath(self.checkpoint)
        if self.out is not None:
            return os.fspath(self.out) + ".ckpt"
        return None

    @property
    def quantities(self):
        """The set of :data:`QUANTITIES` that ``record`` names."""
        return parse_record(self.record)[1]

    @property
    def periodic_checkpoints(self):
        """True when checkpoints are written during the run (every so many steps or seconds)."""
        return bool(self.checkpoint_every or self.checkpoint_seconds)

    def fingerprint(self, q0, qd0, inputs, wrench_joints):
        """What a checkpoint must match to be resumed, and its SHA-256.

        The same on every backend and part count, so a checkpoint written by one backend
        resumes on another; ``t_end`` is not part of it (a run may be extended).

        Parameters
        ----------
        q0, qd0 : ndarray
            The initial state (q normalised), hashed.
        inputs : str
            The fingerprint of the joint inputs (``Dynamics.fingerprint()``); its first 16
            digits are used.
        wrench_joints : list of str
            The names of the joints whose wrenches are recorded (resolved: every joint for
            ``record='all'`` without a list).

        Returns
        -------
        tuple
            ``(values, digest)``: the dict of :data:`FINGERPRINT_KEYS` and the hex SHA-256 of its
            JSON.
        """
        values = {"dt": self.dt, "integrator": self.integrator, "rtol": self.rtol, "atol": self.atol,
                  "save_every": self.save_every, "record": self.record, "wrench_joints": list(wrench_joints),
                  "h0": self.h0, "h_max": self.h_max, "q0": hash_array(q0), "qd0": hash_array(qd0),
                  "inputs": str(inputs)[:16], "correct": self.correct, "singular_band": self.singular_band,
                  "formulation": self.formulation}
        if self.record_joints is not None:
            values["record_joints"] = list(self.record_joints)
        return values, hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()

    def to_dict(self):
        """The options as a JSON-able dict (a partition as its number of parts)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if d["wrench_joints"] is not None:
            d["wrench_joints"] = list(d["wrench_joints"])
        if d["record_joints"] is not None:
            d["record_joints"] = list(d["record_joints"])
        if d["command"] is not None:
            d["command"] = list(d["command"])
        if self.parts is not None and not isinstance(self.parts, int):
            d["parts"] = int(self.parts.nparts)
        return d
