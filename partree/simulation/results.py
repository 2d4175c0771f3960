"""Simulation results: the in-memory object and its HDF5 / npz files.

File layout (either format; the suffix picks it: .h5/.hdf5 or .npz):

    t (K,)  q (K, nq)  qd (K, nv)  energy (K,) = kinetic + potential  kinetic (K,)  potential (K,)
    qdd (K, nv), tau (K, nv)              when recorded (record='all')
    joint_wrench (K, m, 6)                when recorded; wrench_joints names the m joints
    model_npz (bytes)                     the model, as written by partree.io.save_model (.npz)
    metadata: format 'partree-simulation', options (JSON), summary (JSON), model_fingerprint,
              model_name, partree version (HDF5 attributes; in .npz the JSON array 'meta')
"""
from __future__ import annotations

import io
import json
import os
import tempfile

import numpy as np

from ..errors import PartreeInputError
from .checkpoint import atomic_write

FORMAT = "partree-simulation"
SERIES = ("t", "q", "qd", "energy", "kinetic", "potential", "qdd", "tau", "joint_wrench")


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

    Attributes: t, q, qd, energy, kinetic, potential (and qdd, tau, joint_wrench when recorded),
    wrench_joints (names of the joints in joint_wrench), options (dict), summary (dict),
    model (a partree Model, loaded lazily from files), path (the output file, if any).
    """

    def __init__(self, series, options=None, summary=None, model=None, wrench_joints=(), model_blob=None,
                 model_fingerprint=None, path=None):
        for k in SERIES:
            setattr(self, k, series.get(k))
        self.options = dict(options or {})
        self.summary = dict(summary or {})
        self._model = model
        self._model_blob = model_blob
        self.wrench_joints = list(wrench_joints)
        self.model_fingerprint = model_fingerprint
        self.path = path

    @property
    def model(self):
        if self._model is None and self._model_blob is not None:
            self._model = _model_from_bytes(self._model_blob)
        return self._model

    def __len__(self):
        return 0 if self.t is None else len(self.t)

    def __repr__(self):
        m = self.model.name if self._model is not None else self.options.get("model", "?")
        rec = [k for k in SERIES if getattr(self, k) is not None]
        return f"<SimulationResult {m!r}: {len(self)} samples, t = {self.t[0]:g} .. {self.t[-1]:g}; {', '.join(rec)}>"

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
        return format_summary(self.summary)

    # ---------------------------------------------------------------- files
    def save(self, path):
        """Write to ``path`` (.h5/.hdf5 or .npz), atomically."""
        path = os.fspath(path)
        kind = _kind(path)
        blob = self._model_blob if self._model_blob is not None else _model_bytes(self._model)
        meta = {"format": FORMAT, "options": self.options, "summary": self.summary,
                "model_fingerprint": self.model_fingerprint, "wrench_joints": self.wrench_joints,
                "model_name": (self._model.name if self._model is not None else self.options.get("model"))}
        from .. import __version__
        meta["partree_version"] = __version__
        arrays = {k: getattr(self, k) for k in SERIES if getattr(self, k) is not None}
        if kind == "npz":
            def write(fh):
                np.savez(fh, meta=np.frombuffer(json.dumps(meta, default=_json_default).encode(), dtype=np.uint8),
                         model_npz=blob, **arrays)
        else:
            import h5py

            def write(fh):
                buf = io.BytesIO()
                with h5py.File(buf, "w") as f:
                    for k, a in arrays.items():
                        f.create_dataset(k, data=a)
                    f.create_dataset("model_npz", data=np.asarray(blob, dtype=np.uint8))
                    if self.wrench_joints:
                        f.create_dataset("wrench_joints", data=np.array(self.wrench_joints, dtype="S"))
                    for k, v in meta.items():
                        f.attrs[k] = json.dumps(v, default=_json_default) if isinstance(v, (dict, list)) else (v if v is not None else "")
                fh.write(buf.getvalue())
        atomic_write(path, write)
        self.path = path
        return path


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def _kind(path):
    p = str(path).lower()
    if p.endswith(".npz"):
        return "npz"
    if p.endswith((".h5", ".hdf5")):
        return "h5"
    raise PartreeInputError(f"output file {path!r}: use a .h5/.hdf5 or .npz suffix")


def load_results(path):
    """Read a results file written by ``simulate(..., out=path)`` / ``SimulationResult.save``."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no results file {path!r}")
    kind = _kind(path)
    if kind == "npz":
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        try:
            meta = json.loads(bytes(arrays.pop("meta")).decode())
        except KeyError:
            raise PartreeInputError(f"{path!r} is not a partree simulation file (no 'meta')") from None
        blob = arrays.pop("model_npz", None)
    else:
        import h5py
        with h5py.File(path, "r") as f:
            arrays = {k: f[k][()] for k in SERIES if k in f}
            blob = f["model_npz"][()] if "model_npz" in f else None
            meta = {}
            for k, v in f.attrs.items():
                v = v.decode() if isinstance(v, bytes) else v
                if k in ("options", "summary", "wrench_joints"):
                    v = json.loads(v)
                meta[k] = v
    if meta.get("format") != FORMAT:
        raise PartreeInputError(f"{path!r} is not a partree simulation file (format {meta.get('format')!r})")
    return SimulationResult(arrays, meta.get("options"), meta.get("summary"), None, meta.get("wrench_joints") or (),
                            blob, meta.get("model_fingerprint"), path)


def format_summary(s):
    """Human-readable lines of a run summary."""
    if not s:
        return ""
    lines = [f"integrator  {s.get('integrator')}  ({s.get('steps')} steps, {s.get('rejected', 0)} rejected, "
             f"{s.get('f_evals')} dynamics evaluations)",
             f"time        t = 0 .. {s.get('t_end'):g} s simulated in {s.get('wall_time', 0.0):.3f} s wall "
             f"({s.get('steps_per_second', 0.0):.1f} steps/s)"]
    if s.get("resumed_from") is not None:
        lines.append(f"resumed     from t = {s['resumed_from']:g} s (checkpoint)")
    e = s.get("energy")
    if e:
        lines.append(f"energy      E(0) = {e['initial']:.10g} J, E(end) = {e['final']:.10g} J, max |E - E(0)| = "
                     f"{e['max_abs_drift']:.3g} J (relative {e['max_rel_drift']:.3g})")
    w = s.get("wrench")
    if w:
        lines.append(f"joint force max |f| = {w['max_force']:.6g} N at joint {w['max_force_joint']!r}, t = "
                     f"{w['max_force_time']:g} s; max |n| = {w['max_torque']:.6g} N m at joint "
                     f"{w['max_torque_joint']!r}, t = {w['max_torque_time']:g} s")
    if s.get("out"):
        lines.append(f"output      {s['out']}")
    return "\n".join(lines)
