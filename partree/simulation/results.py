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
``energy``          (K,)            kinetic + potential, J
``qdd``             (K, nv)         acceleration; ``qdd_units`` (only with ``record='all'``)
``tau``             (K, nv)         applied joint forces; ``tau_units`` (only with
                                    ``record='all'``)
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
``wrench_units``    (6,) str        ``N m``, ``N m``, ``N m``, ``N``, ``N``, ``N``
``model_npz``       (bytes,) uint8  the model, as ``partree.io.save_model`` writes an .npz
==================  ==============  =========================================================

Metadata (HDF5: attributes of the file, dicts and lists as JSON text; .npz: one JSON document
stored as the uint8 array ``meta``):

==========================  ==================================================================
``format``                  ``"partree-simulation"``
``format_version``          2 (files without it are version 1: no column descriptions)
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
``units``                   dataset name -> unit (a string, or a per-column list)
==========================  ==================================================================

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
FORMAT_VERSION = 2
SERIES = ("t", "q", "qd", "p", "energy", "kinetic", "potential", "qdd", "tau", "joint_wrench", "violation")
#: the column descriptions (see the module docstring)
COLUMNS = ("q_joint", "q_index", "v_joint", "v_index", "q_units", "qd_units", "qdd_units", "tau_units",
           "joint_names", "joint_types", "q_slices", "v_slices")
STRING_ARRAYS = ("q_joint", "v_joint", "q_units", "qd_units", "qdd_units", "tau_units", "joint_names",
                 "joint_types", "wrench_joints", "wrench_units")
META_JSON = ("options", "summary", "wrench_joints", "command", "units")
WRENCH_UNITS = ("N m", "N m", "N m", "N", "N", "N")
SCALAR_UNITS = {"t": "s", "energy": "J", "kinetic": "J", "potential": "J", "violation": ""}

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
        return np.array(tab[jt[ids], comp].tolist(), dtype=str) if ids.size else np.zeros(0, dtype=str)

    return {"q_joint": names[qj], "q_index": q_index, "v_joint": names[vj], "v_index": v_index,
            "q_units": units(_TAB_Q, qj, q_index), "qd_units": units(_TAB_QD, vj, v_index),
            "qdd_units": units(_TAB_QDD, vj, v_index), "tau_units": units(_TAB_TAU, vj, v_index),
            "joint_names": names, "joint_types": np.array([J.NAMES[c] for c in jt], dtype=str),
            "q_slices": np.stack([idx_q, idx_q + nq_j], axis=1), "v_slices": np.stack([idx_v, idx_v + nv_j], axis=1)}


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

    def __init__(self, series, options=None, summary=None, model=None, wrench_joints=(), model_blob=None,
                 model_fingerprint=None, path=None, options_fingerprint=None, command=None, columns=None,
                 partree_version=None, format_version=FORMAT_VERSION):
        for k in SERIES:
            setattr(self, k, series.get(k))
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
        c = self.columns
        u = dict(SCALAR_UNITS, q=c["q_units"], qd=c["qd_units"])
        if self.qdd is not None:
            u["qdd"] = c["qdd_units"]
        if self.tau is not None:
            u["tau"] = c["tau_units"]
        if self.p is not None:
            u["p"] = np.array([f"{x} s" for x in c["tau_units"]], dtype=str)
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
        """(q, qd) time series (K, nq_j), (K, nv_j) of one joint."""
        m = self.model
        return self.q[:, m.q_slice(name)], self.qd[:, m.v_slice(name)]

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
    def save(self, path, overwrite=False):
        """Write the results to ``path`` (.h5/.hdf5 or .npz), atomically.

        Parameters
        ----------
        path : str or path-like
            The file; its suffix picks the format.
        overwrite : bool
            Replace an existing file (never a model file).

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
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "partree_version": __version__,
                "command": self.command or [], "options": self.options, "summary": self.summary,
                "model_name": (self._model.name if self._model is not None else self.options.get("model")),
                "model_fingerprint": self.model_fingerprint, "options_fingerprint": self.options_fingerprint,
                "wrench_joints": self.wrench_joints,
                "units": {k: (v if isinstance(v, str) else list(map(str, v))) for k, v in self.units.items()}}
        arrays = {k: getattr(self, k) for k in SERIES if getattr(self, k) is not None}
        extra = dict(self.columns)
        if self.wrench_joints:
            extra["wrench_joints"] = np.array(self.wrench_joints, dtype=str)
            extra["wrench_units"] = np.array(WRENCH_UNITS, dtype=str)
        if kind == "npz":
            def write(fh):
                np.savez(fh, meta=np.frombuffer(json.dumps(meta, default=_json_default).encode(), dtype=np.uint8),
                         model_npz=blob, **arrays, **extra)
        else:
            h5py = require("h5py", "writing .h5 results")
            units = self.units

            def write(fh):
                buf = io.BytesIO()
                with h5py.File(buf, "w") as f:
                    for k, a in arrays.items():
                        ds = f.create_dataset(k, data=a)
                        u = units.get(k)
                        if u is not None:
                            ds.attrs["units"] = u if isinstance(u, str) else _encode(u)
                    for k, a in extra.items():
                        f.create_dataset(k, data=_encode(a) if k in STRING_ARRAYS else a)
                    f.create_dataset("model_npz", data=np.asarray(blob, dtype=np.uint8))
                    for k, v in meta.items():
                        f.attrs[k] = (json.dumps(v, default=_json_default) if isinstance(v, (dict, list))
                                      else (v if v is not None else ""))
                fh.write(buf.getvalue())
        atomic_write(path, write)
        self.path = path
        return path


def _encode(strings):
    """str array -> UTF-8 bytes array (HDF5 fixed-length strings)."""
    return np.array([str(s).encode("utf-8") for s in strings], dtype="S") if len(strings) else np.zeros(0, "S1")


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
    if "t" not in series or "q" not in series:
        raise _not_results(path, "a partree results file without its time series (t, q): truncated or corrupt")
    columns = None
    if all(k in arrays for k in COLUMNS):
        columns = {k: (_decode(arrays[k]) if k in STRING_ARRAYS else arrays[k]) for k in COLUMNS}
    wj = meta.get("wrench_joints")
    if not wj and "wrench_joints" in arrays:
        wj = [str(s) for s in _decode(arrays["wrench_joints"])]
    command = meta.get("command") or None
    return SimulationResult(series, meta.get("options"), meta.get("summary"), None, wj or (), blob,
                            meta.get("model_fingerprint"), path, meta.get("options_fingerprint") or None, command,
                            columns, meta.get("partree_version"), int(meta.get("format_version", 1)))


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
