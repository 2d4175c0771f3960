"""Simulation results: the in-memory :class:`SimulationResult` and its files.

Results files
-------------
``simulate(..., out=PATH)`` and ``SimulationResult.save(PATH)`` write one file; its suffix picks
the format: ``.h5`` / ``.hdf5`` (HDF5, needs h5py: ``pip install 'partree[io]'``) or ``.npz`` (a
numpy archive, needs nothing).  Both hold the same named arrays and the same metadata.  Units are
SI: s, m, rad, kg, N, N m, J; quaternion components are dimensionless (unit ``"1"``).  K is the
number of samples (rows), n the number of joints (= bodies), nq / nv the sizes of the
configuration and velocity vectors, m the number of joints whose wrenches were recorded.

Time series:

==================  ==============  =========================================================
name                shape           content and unit
==================  ==============  =========================================================
``t``               (K,)            time, s
``q``               (K, nq)         configuration; unit of each column in ``q_units``
``qd``              (K, nv)         generalised velocity; ``qd_units``
``p``               (K, nv)         generalised momenta p = M(q) qd, the integrated state
                                    of ``formulation='momentum'`` runs (only those);
                                    N m s per rotational column, N s per translational one
                                    (the units of ``tau`` times s)
``kinetic``         (K,)            kinetic energy, J
``potential``       (K,)            potential energy of gravity, J
``elastic``         (K,)            elastic energy of the flexible bodies' modes, J (models
                                    with flexible bodies only)
``energy``          (K,)            kinetic + potential (+ elastic), J
``qdd``             (K, nv)         acceleration; ``qdd_units`` (when ``record`` names it)
``tau``             (K, nv)         applied joint forces; ``tau_units`` (when ``record``
                                    names it)
``joint_wrench``    (K, m, 6)       wrench [n; f] transmitted across each joint of
                                    ``wrench_joints``, in its child body's frame; n in N m,
                                    f in N (``wrench_units``)
``violation``       (K,)            largest loop-closure violation max abs(Phi) (models with
                                    loops only; m and rad)
==================  ==============  =========================================================

What the columns are:

==================  ==============  =========================================================
``q_joint``         (nq,) str       the joint of each column of ``q``
``q_index``         (nq,) int       the column's component within that joint's coordinates
                                    (a free joint: x, y, z, then the quaternion x, y, z, w)
``v_joint``         (nv,) str       the joint of each column of ``qd``, ``qdd`` and ``tau``
``v_index``         (nv,) int       the component within the joint's velocity (a free joint:
                                    linear velocity x, y, z, then angular velocity x, y, z,
                                    both in the body frame)
``q_units``         (nq,) str       unit of each column of ``q``: ``rad`` (revolute,
                                    universal), ``m`` (prismatic, free-joint position), ``1``
                                    (quaternion components)
``qd_units``        (nv,) str       ``rad/s`` or ``m/s``
``qdd_units``       (nv,) str       ``rad/s^2`` or ``m/s^2``
``tau_units``       (nv,) str       ``N m`` (rotational) or ``N`` (prismatic, free-joint force)
``joint_names``     (n,) str        every joint's name, in body order
``joint_types``     (n,) str        revolute, prismatic, universal, spherical, free or fixed
``q_slices``        (n, 2) int      [start, stop) of each joint's columns of ``q``
``v_slices``        (n, 2) int      [start, stop) of each joint's columns of ``qd``
``wrench_joints``   (m,) str        the joints of ``joint_wrench`` (when recorded)
``q_columns``       (nq',) int      files whose joint series do not hold every column in
                                    order (``record_joints``, per-rank files): the column of
                                    ``q`` (0 .. nq-1) each stored column is
``v_columns``       (nv',) int      the same for ``qd``, ``p``, ``qdd`` and ``tau``
``wrench_units``    (6,) str        ``N m``, ``N m``, ``N m``, ``N``, ``N``, ``N``
``model_npz``       (bytes,) uint8  the model, as ``partree.io.save_model`` writes an .npz
==================  ==============  =========================================================

A model with flexible bodies (``partree.flexible``) has its modal coordinates after the joints'
coordinates: ``q`` holds [q; eta] (nq + n_modal columns), ``qd``, ``qdd`` and ``tau`` hold
[qd; eta_dot] and so on (nv + n_modal).  Their columns are named ``BODY.modeK`` in ``q_joint`` and
``v_joint`` (``BODY`` the body's name, K = 1, 2, ... its modes in order; ``q_index`` /
``v_index`` K - 1), with units m, m/s, m/s^2 and N (a modal coordinate is a displacement of the
mode shape's scale: for partree's beams, whose modes are 1 at the tip, the tip deflection of that
mode); ``q_slices`` and ``v_slices`` keep to the joints.

Metadata (HDF5: attributes of the file, dicts and lists as JSON text; .npz: one JSON document
stored as the uint8 array ``meta``):

==========================  ==================================================================
``format``                  ``"partree-simulation"``
``format_version``          3 for files with ``q_columns`` / ``v_columns`` (a subset of the
                            joints, or per-rank files), 2 otherwise (files without it are
                            version 1: no column descriptions)
``partree_version``         the partree that wrote the file
``command``                 the command line (list of arguments) of a ``partree simulate``
                            run, or empty
``options``                 the run's options (``SimulationOptions``), the model's name, the
                            initial state's and the inputs' hashes, the number of parts
``summary``                 steps, wall time, energy drift, largest joint force, and
                            ``interrupted`` (time and signal) for a run stopped by a signal
``model_name``              the model's name
``model_fingerprint``       SHA-256 of the model's arrays (as checkpoints record it)
``options_fingerprint``     SHA-256 of what a checkpoint must match (``SimulationOptions.fingerprint``)
``units``                   dataset name -> unit (a string, a per-column list, or for more
                            than ``UNITS_INLINE`` columns the name of the dataset holding them)
``rank_files``              per-rank MPI runs: the rank files, in the results file's folder
==========================  ==================================================================

What is recorded is ``SimulationOptions.record`` (any of q, qd, qdd, tau, energy, wrenches; the
time always) of the joints ``record_joints`` (all by default); series not recorded are absent.

Per-rank files (``output='per-rank'``, MPI): every rank writes ``NAME.rankRRRR.h5`` next to
``NAME.h5`` with its joints' columns (``t``, its columns of q, qd, p, qdd, tau, and their
``q_columns`` / ``v_columns``); ``NAME.h5`` holds everything else, and its ``q``, ``qd``, ...
are HDF5 virtual datasets putting the ranks' blocks side by side (rank 0's columns, then rank
1's, ...), with ``q_columns`` / ``v_columns`` saying which column each is.  The sources are named
relative to the file's folder, so the folder may be moved or copied whole.

In HDF5 files every time series also carries a ``units`` attribute (a string, or one string
per column, or per wrench component).

:func:`load_results` reads every version; for a file without column descriptions it derives
them from the stored model.
"""
from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile

import numpy as np

from .. import joints as J
from ..errors import PartreeInputError
from ..extras import require
from .checkpoint import atomic_write
from .options import results_kind
from ..outputs import HDF5_SIGNATURE, MODEL_FORMAT, ZIP_SIGNATURE, check_output_file, complete_zip

FORMAT = "partree-simulation"
FORMAT_VERSION = 3
#: the version written for files whose columns are all of q and qd in order (readable by partree
#: versions that read version 2); files with ``q_columns`` / ``v_columns`` are version 3
PLAIN_FORMAT_VERSION = 2
SERIES = ("t", "q", "qd", "p", "energy", "kinetic", "potential", "elastic", "qdd", "tau", "joint_wrench",
          "violation")
#: the series with a column per coordinate of q (``q``) or of the velocity (the others)
JOINT_SERIES = ("q", "qd", "p", "qdd", "tau")
#: the column descriptions (see the module docstring)
COLUMNS = ("q_joint", "q_index", "v_joint", "v_index", "q_units", "qd_units", "qdd_units", "tau_units",
           "joint_names", "joint_types", "q_slices", "v_slices")
STRING_ARRAYS = ("q_joint", "v_joint", "q_units", "qd_units", "qdd_units", "tau_units", "joint_names",
                 "joint_types", "wrench_joints", "wrench_units")
META_JSON = ("options", "summary", "wrench_joints", "command", "units", "rank_files")
WRENCH_UNITS = ("N m", "N m", "N m", "N", "N", "N")
SCALAR_UNITS = {"t": "s", "energy": "J", "kinetic": "J", "potential": "J", "elastic": "J", "violation": ""}

# per joint type: the unit of each coordinate of q and of v (rows: joint codes of partree.joints)
_Q_UNITS = {J.REVOLUTE: ("rad",), J.PRISMATIC: ("m",), J.UNIVERSAL: ("rad", "rad"), J.SPHERICAL: ("1",) * 4,
            J.FREE: ("m",) * 3 + ("1",) * 4, J.FIXED: ()}
_V_KIND = {J.REVOLUTE: ("rad",), J.PRISMATIC: ("m",), J.UNIVERSAL: ("rad", "rad"), J.SPHERICAL: ("rad",) * 3,
           J.FREE: ("m",) * 3 + ("rad",) * 3, J.FIXED: ()}


def _unit_table(per_type, fmt):
    width = max(len(v) for v in per_type.values())
    tab = np.full((len(J.NAMES), max(width, 1)), "", dtype=object)
    for code, units in per_type.items():
        for c, u in enumerate(units):
            tab[code, c] = fmt(u)
    return tab


_TAB_Q = _unit_table(_Q_UNITS, lambda u: u)
_TAB_QD = _unit_table(_V_KIND, lambda u: f"{u}/s")
_TAB_QDD = _unit_table(_V_KIND, lambda u: f"{u}/s^2")
_TAB_TAU = _unit_table(_V_KIND, lambda u: "N m" if u == "rad" else "N")


def describe_columns(model):
    """The column descriptions of a model's results (see the module docstring).

    Parameters
    ----------
    model : Model
        The simulated model.

    Returns
    -------
    dict
        ``q_joint``, ``q_index``, ``v_joint``, ``v_index``, the units of the columns of q, qd,
        qdd and tau, ``joint_names``, ``joint_types``, ``q_slices`` and ``v_slices`` as arrays.
    """
    n = model.n
    names = np.array([str(s) for s in model.joint_names], dtype=str) if n else np.zeros(0, dtype=str)
    jt = np.asarray(model.jtype, dtype=np.int64)
    nq_j, nv_j = np.asarray(model.nq_j, dtype=np.int64), np.asarray(model.nv_j, dtype=np.int64)
    idx_q, idx_v = np.asarray(model.idx_q, dtype=np.int64), np.asarray(model.idx_v, dtype=np.int64)
    qj = np.repeat(np.arange(n), nq_j)
    vj = np.repeat(np.arange(n), nv_j)
    q_index = np.arange(qj.size) - idx_q[qj]
    v_index = np.arange(vj.size) - idx_v[vj]

    def units(tab, ids, comp):
        if not ids.size:
            return np.zeros(0, dtype=str)
        return tab.astype(str)[jt[ids], comp]

    out = {"q_joint": names[qj], "q_index": q_index, "v_joint": names[vj], "v_index": v_index,
           "q_units": units(_TAB_Q, qj, q_index), "qd_units": units(_TAB_QD, vj, v_index),
           "qdd_units": units(_TAB_QDD, vj, v_index), "tau_units": units(_TAB_TAU, vj, v_index),
           "joint_names": names, "joint_types": np.array([J.NAMES[c] for c in jt], dtype=str),
           "q_slices": np.stack([idx_q, idx_q + nq_j], axis=1), "v_slices": np.stack([idx_v, idx_v + nv_j], axis=1)}
    fl = getattr(model, "flexible", None)
    if fl is not None and fl.n_modal:
        # the modal coordinates after the joints': BODY.modeK, body by body
        bodies = np.repeat(np.arange(n), fl.nmodes)
        k = np.arange(fl.n_modal) - np.asarray(fl.idx_eta, dtype=np.int64)[bodies]
        modal = np.array([f"{model.body_names[int(b)]}.mode{int(j) + 1}" for b, j in zip(bodies, k)], dtype=str)
        ne = fl.n_modal
        for key, extra in (("q_joint", modal), ("v_joint", modal), ("q_index", k), ("v_index", k),
                           ("q_units", np.full(ne, "m")), ("qd_units", np.full(ne, "m/s")),
                           ("qdd_units", np.full(ne, "m/s^2")), ("tau_units", np.full(ne, "N"))):
            out[key] = np.concatenate((out[key], extra))
    return out


def _model_bytes(model):
    from ..io import save_model
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "model.npz")
        save_model(model, p)
        with open(p, "rb") as fh:
            return np.frombuffer(fh.read(), dtype=np.uint8)


def _model_from_bytes(blob):
    from ..io import load_model
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "model.npz")
        with open(p, "wb") as fh:
            fh.write(np.asarray(blob, dtype=np.uint8).tobytes())
        return load_model(p)


class SimulationResult:
    """Trajectory and metadata of a run.

    Attributes
    ----------
    t, q, qd, energy, kinetic, potential : ndarray
        The time series (see the module docstring for shapes and units).
    p : ndarray or None
        The generalized momenta of a momentum-form run (``formulation='momentum'``).
    qdd, tau, joint_wrench : ndarray or None
        When recorded.
    violation : ndarray or None
        max abs(Phi) of the loops at each row (models with loops).
    wrench_joints : list of str
        The joints of ``joint_wrench``.
    options, summary : dict
        The run's options and its summary.
    model : Model
        The model (loaded from the file on first use).
    path : str or None
        The file the result was written to or read from.
    command : list of str or None
        The command line of a ``partree simulate`` run.
    columns : dict
        The column descriptions (``describe_columns``), from the file or derived from the model.
    """

    _lazy = None

    def __init__(self, series, options=None, summary=None, model=None, wrench_joints=(), model_blob=None,
                 model_fingerprint=None, path=None, options_fingerprint=None, command=None, columns=None,
                 partree_version=None, format_version=FORMAT_VERSION, q_columns=None, v_columns=None):
        for k in SERIES:
            if k in series or k not in JOINT_SERIES:
                setattr(self, k, series.get(k))
            else:
                self.__dict__.pop(k, None)         # None, or read from the files (``_lazy``) on first use
        self.q_columns = None if q_columns is None else np.asarray(q_columns, dtype=np.int64)
        self.v_columns = None if v_columns is None else np.asarray(v_columns, dtype=np.int64)
        self.options = dict(options or {})
        self.summary = dict(summary or {})
        self._model = model
        self._model_blob = model_blob
        self.wrench_joints = list(wrench_joints)
        self.model_fingerprint = model_fingerprint
        self.options_fingerprint = options_fingerprint
        self.path = path
        self.command = None if command is None else list(command)
        self._columns = columns
        self.partree_version = partree_version
        self.format_version = format_version

    def __getattr__(self, name):
        # the joints' series of a per-rank run, read from its files on first use (or None)
        if name in JOINT_SERIES:
            lazy = self.__dict__.get("_lazy")
            if lazy is not None:
                self.__dict__["_lazy"] = None
                got = load_results(lazy)
                for k in JOINT_SERIES:
                    self.__dict__[k] = getattr(got, k)
                self.q_columns, self.v_columns = got.q_columns, got.v_columns
                return self.__dict__[name]
            return None
        raise AttributeError(name)

    @property
    def model(self):
        """The simulated model."""
        if self._model is None and self._model_blob is not None:
            self._model = _model_from_bytes(self._model_blob)
        return self._model

    @property
    def columns(self):
        """The column descriptions: joint and component of every column, units, joint slices."""
        if self._columns is None:
            self._columns = describe_columns(self.model)
        return self._columns

    @property
    def units(self):
        """Dataset name -> unit: a string, or an array of one unit per column (or wrench component)."""
        present = {k for k in JOINT_SERIES if getattr(self, k) is not None}
        return self._units_for(present, self.q_columns, self.v_columns)

    def _units_for(self, present, qc, vc):
        c = self.columns

        def sub(a, cols):
            return a if cols is None else a[cols]

        u = dict(SCALAR_UNITS)
        for k in ("q", "qd", "qdd", "tau"):
            if k in present:
                u[k] = sub(c[f"{k}_units"], qc if k == "q" else vc)
        if "p" in present:
            u["p"] = np.array([f"{x} s" for x in sub(c["tau_units"], vc)], dtype=str)
        if self.joint_wrench is not None:
            u["joint_wrench"] = np.array(WRENCH_UNITS)
        return u

    def __len__(self):
        return 0 if self.t is None else len(self.t)

    def __repr__(self):
        m = self.model.name if self._model is not None else self.options.get("model", "?")
        rec = [k for k in SERIES if getattr(self, k) is not None]
        span = f"t = {self.t[0]:g} .. {self.t[-1]:g}" if len(self) else "no samples"
        return f"<SimulationResult {m!r}: {len(self)} samples, {span}; {', '.join(rec)}>"

    def joint(self, name):
        """(q, qd) time series (K, nq_j), (K, nv_j) of one joint (None for a series that was not
        recorded; ``KeyError`` for a joint outside ``record_joints``)."""
        m = self.model
        return self._cols(self.q, m.q_slice(name), self.q_columns, name), \
            self._cols(self.qd, m.v_slice(name), self.v_columns, name)

    @staticmethod
    def _cols(a, sl, cols, name):
        if a is None:
            return None
        if cols is None:
            return a[:, sl]
        want = np.arange(sl.start, sl.stop)
        pos = np.searchsorted(cols, want)
        if want.size and (pos[-1] >= cols.size or not np.array_equal(cols[np.minimum(pos, cols.size - 1)], want)):
            raise KeyError(f"joint {name!r} was not recorded (record_joints)")
        return a[:, pos]

    def wrench(self, name):
        """(K, 6) wrench [n; f] of a recorded joint, in its child body's frame."""
        if self.joint_wrench is None:
            raise KeyError("no joint wrenches were recorded (record='all' or wrench_joints=[...])")
        try:
            k = self.wrench_joints.index(name)
        except ValueError:
            raise KeyError(f"joint {name!r} was not recorded; recorded: {self.wrench_joints[:10]}") from None
        return self.joint_wrench[:, k]

    def format_summary(self):
        """The summary as printed at the end of a run."""
        return format_summary(self.summary)

    # ---------------------------------------------------------------- files
    def save(self, path, overwrite=False, ranks=None):
        """Write the results to ``path`` (.h5/.hdf5 or .npz), atomically.

        Parameters
        ----------
        path : str or path-like
            The file; its suffix picks the format.
        overwrite : bool
            Replace an existing file (never a model file).
        ranks : list of (ndarray, ndarray) or None
            A per-rank MPI run (.h5 only): the global columns of q and of qd of every rank's
            file (:func:`write_rank_file`, already written next to ``path``); the joints'
            series are then virtual datasets joining those files.

        Returns
        -------
        str
            The path written.
        """
        path = os.fspath(path)
        kind = results_kind(path)
        if kind == "h5":
            require("h5py", "writing .h5 results (write .npz instead: it needs nothing)")
        check_output_file(path, "results file", overwrite=overwrite)
        blob = self._model_blob if self._model_blob is not None else _model_bytes(self._model)
        from .. import __version__
        if ranks is not None:
            h5py = require("h5py", "writing .h5 results")
            with h5py.File(rank_file(path, 0), "r") as f0:
                present = [k for k in JOINT_SERIES if k in f0]
            units = self._units_for(present, self.q_columns, self.v_columns)
        else:
            units = self.units
        plain = ranks is None and self.q_columns is None and self.v_columns is None
        meta = {"format": FORMAT, "format_version": PLAIN_FORMAT_VERSION if plain else FORMAT_VERSION,
                "partree_version": __version__,
                "command": self.command or [], "options": self.options, "summary": self.summary,
                "model_name": (self._model.name if self._model is not None else self.options.get("model")),
                "model_fingerprint": self.model_fingerprint, "options_fingerprint": self.options_fingerprint,
                "wrench_joints": self.wrench_joints,
                "units": {k: _unit_value(k, v) for k, v in units.items()}}
        arrays = {k: getattr(self, k) for k in SERIES
                  if (ranks is None or k not in JOINT_SERIES) and getattr(self, k) is not None}
        extra = dict(self.columns)
        if self.q_columns is not None and ranks is None:
            extra["q_columns"] = self.q_columns
        if self.v_columns is not None and ranks is None:
            extra["v_columns"] = self.v_columns
        if self.wrench_joints:
            extra["wrench_joints"] = np.array(self.wrench_joints, dtype=str)
            extra["wrench_units"] = np.array(WRENCH_UNITS, dtype=str)
        if ranks is not None and kind != "h5":
            raise PartreeInputError(f"{path}: per-rank results need an .h5 file")
        if ranks is not None:
            meta["rank_files"] = [os.path.basename(rank_file(path, r)) for r in range(len(ranks))]
            qp = np.concatenate([np.asarray(r[0], dtype=np.int64) for r in ranks])
            vp = np.concatenate([np.asarray(r[1], dtype=np.int64) for r in ranks])
        if kind == "npz":
            def write(fh):
                np.savez(fh, meta=np.frombuffer(json.dumps(meta, default=_json_default).encode(), dtype=np.uint8),
                         model_npz=blob, **arrays, **extra)
        else:
            h5py = require("h5py", "writing .h5 results")

            def write(fh):
                buf = io.BytesIO()
                with h5py.File(buf, "w") as f:
                    for k, a in arrays.items():
                        ds = f.create_dataset(k, data=a)
                        u = units.get(k)
                        if u is not None:
                            _unit_attr(ds, k, u)
                    for k, a in extra.items():
                        f.create_dataset(k, data=_encode(a) if k in STRING_ARRAYS else a)
                    f.create_dataset("model_npz", data=np.asarray(blob, dtype=np.uint8))
                    if ranks is not None:
                        _virtual_series(f, h5py, ranks, len(self), present, self._units_for(present, qp, vp),
                                        meta["rank_files"])
                    for k, v in meta.items():
                        f.attrs[k] = (json.dumps(v, default=_json_default) if isinstance(v, (dict, list))
                                      else (v if v is not None else ""))
                fh.write(buf.getvalue())
        atomic_write(path, write)
        self.path = path
        return path


#: per-column unit lists longer than this are not copied into attributes and metadata (HDF5
#: attributes are small): they name the dataset of the column units instead
UNITS_INLINE = 1024
#: the dataset of a series' column units
UNIT_DATASETS = {"q": "q_units", "qd": "qd_units", "qdd": "qdd_units", "tau": "tau_units", "p": "tau_units"}


def _unit_value(k, u):
    """A series' unit for the metadata: a string, a list, or for long lists the dataset that
    holds them (``"per column: qd_units"``; p's are tau_units' with ``s`` appended)."""
    if isinstance(u, str):
        return u
    if len(u) <= UNITS_INLINE:
        return list(map(str, u))
    uniq = set(map(str, u))
    if len(uniq) == 1:
        return uniq.pop()
    return f"per column: {UNIT_DATASETS.get(k, k + '_units')}" + (" times s" if k == "p" else "")


def _unit_attr(ds, k, u):
    v = _unit_value(k, u)
    ds.attrs["units"] = v if isinstance(v, str) else _encode(v)


def rank_file(path, rank):
    """The file of rank ``rank``'s columns of a per-rank run whose results file is ``path``:
    ``run.h5`` -> ``run.rank0003.h5`` (same folder)."""
    base, ext = os.path.splitext(os.fspath(path))
    return f"{base}.rank{int(rank):04d}{ext}"


def write_rank_file(path, rank, ranks, rows, q_columns, v_columns):
    """Write one rank's columns of a per-rank run (atomically).

    Parameters
    ----------
    path : str
        The rank's file (:func:`rank_file`).
    rank, ranks : int
        This rank and the number of ranks.
    rows : dict
        ``t`` and the rank's columns of q, qd, p, qdd, tau that were recorded, (K, columns).
    q_columns, v_columns : ndarray of int
        The global column of each column of q and of the velocity-sized series.
    """
    h5py = require("h5py", "writing .h5 results")
    K = len(rows["t"])

    def write(fh):
        buf = io.BytesIO()
        with h5py.File(buf, "w") as f:
            for k, a in rows.items():
                a = np.asarray(a, dtype=np.float64)
                if k in JOINT_SERIES:
                    a = a.reshape(K, len(q_columns) if k == "q" else len(v_columns))
                f.create_dataset(k, data=a)
            f.create_dataset("q_columns", data=np.asarray(q_columns, dtype=np.int64))
            f.create_dataset("v_columns", data=np.asarray(v_columns, dtype=np.int64))
            f.attrs["format"] = FORMAT + "-rank"
            f.attrs["rank"] = int(rank)
            f.attrs["ranks"] = int(ranks)
        fh.write(buf.getvalue())

    atomic_write(path, write)
    return path


def _virtual_series(f, h5py, ranks, K, present, units, names):
    """The joints' series of a per-rank run as virtual datasets: the ranks' blocks side by side
    (rank 0's columns, then rank 1's, ...), ``q_columns`` / ``v_columns`` the global column of
    each; the source files by their names relative to the results file's folder (``./NAME``:
    the folder may be moved or copied whole).  ``units``: of the stored columns."""
    qcols = np.concatenate([np.asarray(r[0], dtype=np.int64) for r in ranks])
    vcols = np.concatenate([np.asarray(r[1], dtype=np.int64) for r in ranks])
    f.create_dataset("q_columns", data=qcols)
    f.create_dataset("v_columns", data=vcols)
    for k in present:
        width = [len(r[0]) if k == "q" else len(r[1]) for r in ranks]
        layout = h5py.VirtualLayout(shape=(K, int(sum(width))), dtype=np.float64)
        o = 0
        for r, w in enumerate(width):
            if w:
                layout[:, o:o + w] = h5py.VirtualSource("./" + names[r], k, shape=(K, w))
            o += w
        ds = f.create_virtual_dataset(k, layout, fillvalue=np.nan)
        u = units.get(k)
        if u is not None:
            _unit_attr(ds, k, u)


def _encode(strings):
    """str array -> UTF-8 bytes array (HDF5 fixed-length strings)."""
    if not len(strings):
        return np.zeros(0, "S1")
    a = np.asarray(strings)
    if a.dtype.kind == "U":
        try:
            return a.astype("S")            # ASCII: numpy converts the whole array at once
        except UnicodeEncodeError:
            pass
    return np.array([str(s).encode("utf-8") for s in strings], dtype="S")


def _decode(a):
    a = np.asarray(a)
    if a.dtype.kind == "S":
        return np.array([x.decode("utf-8") for x in a.ravel()], dtype=str).reshape(a.shape) if a.size \
            else np.zeros(a.shape, dtype=str)
    if a.dtype.kind == "O":
        return np.array([x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in a.ravel()],
                        dtype=str).reshape(a.shape)
    return a


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


# ==================================================================== reading

def _head(path, size=8):
    with open(path, "rb") as fh:
        return fh.read(size)


def _json_model_file(path):
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and doc.get("format") == MODEL_FORMAT


def _not_results(path, why):
    return PartreeInputError(f"{path}: {why}")


def _model_file_error(path):
    return _not_results(path, "this is a model file, not simulation results (load it with partree.load_model / "
                              "partree.resolve_model, or simulate it with partree simulate)")


def read_metadata(path):
    """The metadata of a results file, without reading its time series.

    Parameters
    ----------
    path : str or path-like
        A results file (.h5/.hdf5 or .npz).

    Returns
    -------
    dict
        ``format``, ``format_version``, ``options``, ``summary``, fingerprints, ... (see the module
        docstring).  A model file, a truncated file and a file that is not partree's are
        refused with ``PartreeInputError`` saying which.
    """
    meta, _, _ = _read(os.fspath(path), arrays=False)
    return meta


def _read(path, arrays=True):
    """(meta, arrays, model blob) of a results file; every failure a PartreeInputError."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no results file {path!r}")
    if os.path.isdir(path):
        raise _not_results(path, "is a directory, not a results file")
    low = path.lower()
    if low.endswith(".urdf"):
        raise _model_file_error(path)
    if low.endswith(".json"):
        if _json_model_file(path):
            raise _model_file_error(path)
        raise _not_results(path, "not a partree results file (results are .h5/.hdf5 or .npz files)")
    try:
        head = _head(path)
    except OSError as e:
        raise _not_results(path, f"cannot be read ({e.strerror or e})") from None
    if not head:
        raise _not_results(path, "the file is empty (an interrupted write?)")
    if head.startswith(ZIP_SIGNATURE) or low.endswith(".npz"):
        return _read_npz(path, head, arrays)
    if head.startswith(HDF5_SIGNATURE) or low.endswith((".h5", ".hdf5")):
        return _read_h5(path, head, arrays)
    raise _not_results(path, "not a partree results file (neither an .npz archive nor an HDF5 file)")


def _check_format(path, meta):
    fmt = meta.get("format") if isinstance(meta, dict) else None
    if fmt == MODEL_FORMAT:
        raise _model_file_error(path)
    if fmt != FORMAT:
        raise _not_results(path, f"not a partree simulation results file (format {fmt!r})")
    v = meta.get("format_version", 1)
    if not isinstance(v, int) or v > FORMAT_VERSION:
        raise _not_results(path, f"results format version {v!r} is newer than this partree reads ({FORMAT_VERSION}); "
                                 f"upgrade partree")


def _read_npz(path, head, arrays):
    corrupt = (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError)
    if not head.startswith(ZIP_SIGNATURE):
        raise _not_results(path, "not a partree results file (not an .npz archive)")
    if not complete_zip(path):
        raise _not_results(path, "truncated or corrupt .npz archive (it does not end with its directory)")
    try:
        z = np.load(path, allow_pickle=False)
    except corrupt as e:
        raise _not_results(path, f"truncated or corrupt .npz archive ({type(e).__name__}: {e})") from None
    with z:
        files = set(z.files)
        if "meta" not in files:
            raise _not_results(path, "not a partree simulation results file (an .npz archive without 'meta')")
        try:
            meta = json.loads(bytes(z["meta"]).decode("utf-8"))
        except corrupt as e:
            raise _not_results(path, f"truncated or corrupt .npz archive ({type(e).__name__}: {e})") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _not_results(path, "not a partree simulation results file (unreadable 'meta')") from None
        _check_format(path, meta)
        if not arrays:
            return meta, None, None
        out = {}
        try:
            for k in files - {"meta"}:
                out[k] = z[k]
        except corrupt as e:
            raise _not_results(path, f"truncated or corrupt .npz archive ({type(e).__name__}: {e})") from None
    blob = out.pop("model_npz", None)
    return meta, out, blob


def _read_h5(path, head, arrays):
    h5py = require("h5py", "reading .h5 results")
    if not head.startswith(HDF5_SIGNATURE):
        raise _not_results(path, "not a partree results file (not an HDF5 file)")
    try:
        f = h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise _not_results(path, f"truncated or corrupt HDF5 file ({e})") from None
    try:
        with f:
            raw_model_meta = f.attrs.get("meta")
            if raw_model_meta is not None and "format" not in f.attrs:
                try:
                    mm = json.loads(raw_model_meta.decode() if isinstance(raw_model_meta, bytes) else str(raw_model_meta))
                except ValueError:
                    mm = None
                if isinstance(mm, dict) and mm.get("format") == MODEL_FORMAT:
                    raise _model_file_error(path)
            meta = {}
            for k, v in f.attrs.items():
                v = v.decode() if isinstance(v, bytes) else v
                if isinstance(v, np.generic):
                    v = v.item()
                if k in META_JSON and isinstance(v, str):
                    v = json.loads(v) if v else None
                meta[k] = v
            _check_format(path, meta)
            if not arrays:
                return meta, None, None
            folder = os.path.dirname(os.path.abspath(path))
            for name in meta.get("rank_files") or ():
                rf = os.path.join(folder, name)
                if not os.path.exists(rf):
                    raise _not_results(path, f"the rank file {rf!r} is missing: a per-rank run's results are this "
                                             f"file and its rank files {', '.join(meta['rank_files'])} in the same "
                                             f"folder (move or copy them together)")
            out = {}
            for k, ds in f.items():
                if isinstance(ds, h5py.Dataset):
                    out[k] = ds[()]
    except PartreeInputError:
        raise
    except (OSError, KeyError, ValueError, EOFError) as e:
        raise _not_results(path, f"truncated or corrupt HDF5 file ({type(e).__name__}: {e})") from None
    blob = out.pop("model_npz", None)
    return meta, out, blob


def load_results(path):
    """Read a results file written by ``simulate(..., out=path)`` or ``SimulationResult.save``.

    Parameters
    ----------
    path : str or path-like
        The file (.h5/.hdf5 or .npz); files of every format version are read.

    Returns
    -------
    SimulationResult
        The trajectory, options, summary, model (loaded on first use) and column descriptions.

    Raises
    ------
    FileNotFoundError
        When there is no such file.
    PartreeInputError
        For a model file ("this is a model file, not simulation results"), a truncated or
        corrupt file, or a file that is not partree's results.
    MissingDependencyError
        For an .h5 file when h5py is not installed.
    """
    path = os.fspath(path)
    meta, arrays, blob = _read(path)
    series = {k: arrays[k] for k in SERIES if k in arrays}
    if "t" not in series:
        raise _not_results(path, "a partree results file without its time series (t): truncated or corrupt")
    picked = {}
    for kind, names in (("q", ("q",)), ("v", ("qd", "p", "qdd", "tau"))):
        cols = arrays.get(f"{kind}_columns")
        if cols is None:
            picked[kind] = None
            continue
        cols = np.asarray(cols, dtype=np.int64)
        order = np.argsort(cols, kind="stable")
        if not np.array_equal(order, np.arange(cols.size)):      # per-rank files: the ranks' blocks side by side
            for k in names:
                if k in series:
                    series[k] = series[k][:, order]
            cols = cols[order]
        total = len(arrays["q_joint" if kind == "q" else "v_joint"]) if f"{kind}_joint" in arrays else None
        picked[kind] = None if total is not None and np.array_equal(cols, np.arange(total)) else cols
    columns = None
    if all(k in arrays for k in COLUMNS):
        columns = {k: (_decode(arrays[k]) if k in STRING_ARRAYS else arrays[k]) for k in COLUMNS}
    wj = meta.get("wrench_joints")
    if not wj and "wrench_joints" in arrays:
        wj = [str(s) for s in _decode(arrays["wrench_joints"])]
    command = meta.get("command") or None
    return SimulationResult(series, meta.get("options"), meta.get("summary"), None, wj or (), blob,
                            meta.get("model_fingerprint"), path, meta.get("options_fingerprint") or None, command,
                            columns, meta.get("partree_version"), int(meta.get("format_version", 1)),
                            q_columns=picked["q"], v_columns=picked["v"])


def format_summary(s):
    """Human-readable lines of a run summary.

    Parameters
    ----------
    s : dict
        A run's summary (``SimulationResult.summary``).

    Returns
    -------
    str
        The lines, joined.
    """
    if not s:
        return ""
    form = ", momentum form" if s.get("formulation") == "momentum" else ""
    iters = f", {s['iterations']} stage iterations" if s.get("iterations") is not None else ""
    lines = [f"integrator  {s.get('integrator')}{form}  ({s.get('steps')} steps, {s.get('rejected', 0)} rejected, "
             f"{s.get('f_evals')} dynamics evaluations{iters})",
             f"time        t = 0 .. {s.get('t_end'):g} s simulated in {s.get('wall_time', 0.0):.3f} s wall "
             f"({s.get('steps_per_second', 0.0):.1f} steps/s"
             + (f" after {s['startup_time']:.3f} s of start-up)" if "startup_time" in s else ")")]
    if s.get("resumed_from") is not None:
        lines.append(f"resumed     from t = {s['resumed_from']:g} s (checkpoint)")
    if s.get("interrupted"):
        it = s["interrupted"]
        lines.append(f"interrupted at t = {it.get('t'):g} s ({it.get('signal')}): the rows up to there")
    e = s.get("energy")
    if e:
        what = "drift" if e.get("conservative", True) else "change (the inputs do work: not a drift)"
        lines.append(f"energy      E(0) = {e['initial']:.10g} J, E(end) = {e['final']:.10g} J, max |E - E(0)| = "
                     f"{e['max_abs_drift']:.3g} J (relative {e['max_rel_drift']:.3g}): {what}")
    lp = s.get("loops")
    if lp:
        lines.append(f"loops       {lp['count']} ({lp['rows']} rows), correction {lp['correct']!r}: max violation "
                     f"{lp['max_violation']:.3g} at t = {lp['max_violation_time']:g} s")
    w = s.get("wrench")
    if w:
        lines.append(f"joint force max |f| = {w['max_force']:.6g} N at joint {w['max_force_joint']!r}, t = "
                     f"{w['max_force_time']:g} s; max |n| = {w['max_torque']:.6g} N m at joint "
                     f"{w['max_torque_joint']!r}, t = {w['max_torque_time']:g} s")
    if s.get("out"):
        lines.append(f"output      {s['out']}")
    return "\n".join(lines)
