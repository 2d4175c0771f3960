"""Crash-safe checkpoints of a simulation.

A checkpoint is a main file ``PATH`` (an .npz) plus output segments ``PATH.seg000001.npz``, ...
Each write goes to a temporary file in the same folder, is flushed and fsync'ed, then renamed over
the old one with ``os.replace`` (atomic on POSIX), and the folder is fsync'ed: a run killed at
any instant (SIGKILL, node failure) leaves the previous checkpoint or the new one, never a torn
one.  Segments are written before the main file that lists them, so the main file never refers
to a missing segment; segments beyond the ones it lists (from a later, unfinished interval) are
ignored and overwritten.  Only the rows recorded since the previous checkpoint are written each
time, so checkpointing costs O(interval), not O(run).

Runs that write their output per rank (MPI, ``output='per-rank'``) write the joints' rows per
rank too: rank r writes its columns of segment k to ``PATH.seg000001.rank0003.npz`` (with the
global column of each: ``q_columns``, ``v_columns``), rank 0 the time and the scalars to
``PATH.seg000001.npz``, and the main file lists every rank segment's checksum
(``rank_segments``).  On resume every process reads the columns it records now from whichever
segments hold them (:func:`load_columns`), so such a checkpoint resumes on any backend and rank
count, and a gathered one in a per-rank run.

The main file holds: the state (q, v), time, step counters, the integrator's state (step size,
FSAL derivative), the run's options and their fingerprint, the model's fingerprint, the list of
segments with their checksums, wall time so far, and a SHA-256 checksum of everything.  Loading
verifies the checksum, the model and the options; anything wrong is refused with a message that
says what.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile

import numpy as np

from ..errors import CheckpointError

FORMAT = "partree-checkpoint"
VERSION = 1

MODEL_ARRAYS = ("parent", "jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com", "gravity")



def model_fingerprint(model):
    """SHA-256 of the model's defining arrays (topology, joints, placements, inertias, gravity,
    and the flexible bodies' modal data)."""
    h = hashlib.sha256()
    for k in MODEL_ARRAYS:
        a = np.ascontiguousarray(getattr(model, k))
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    fl = getattr(model, "flexible", None)
    if fl is not None:
        # the modal data of every flexible body (a rigid model's fingerprint stays as it was)
        for i in sorted(fl.bodies):
            b = fl.bodies[i]
            h.update(f"flexible {i}".encode())
            for a in (b.first, b.xphi, b.phiphi, b.stiffness, b.damping,
                      np.zeros(0) if b.stiffening is None else b.stiffening):
                a = np.ascontiguousarray(a, dtype=float)
                h.update(str(a.shape).encode())
                h.update(a.tobytes())
            for key in sorted(b.nodes):
                h.update(key.encode())
                for a in b.nodes[key]:
                    h.update(np.ascontiguousarray(a, dtype=float).tobytes())
    return h.hexdigest()


def _array_digest(arrays):
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _fsync_dir(path):
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, write):
    """Call ``write(fileobj)`` on a temporary file next to ``path``, fsync it, and rename it to
    ``path`` atomically."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path)
    return path


def _write_npz(path, arrays, meta):
    meta = dict(meta)
    meta["checksum"] = _array_digest(arrays)
    blob = np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    atomic_write(path, lambda fh: np.savez(fh, __meta__=blob, **arrays))
    return meta["checksum"]


def _read_npz(path, what):
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise CheckpointError(f"{what} {path!r} is corrupt or unreadable ({type(e).__name__}: {e}); "
                              f"delete it to start the run afresh") from None
    if "__meta__" not in arrays:
        raise CheckpointError(f"{what} {path!r} is not a partree checkpoint (no metadata)")
    try:
        meta = json.loads(bytes(arrays.pop("__meta__")).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{what} {path!r} has corrupt metadata ({e})") from None
    if _array_digest(arrays) != meta.get("checksum"):
        raise CheckpointError(f"{what} {path!r} is corrupt: its checksum does not match its contents")
    return meta, arrays


def segment_path(path, k, rank=None):
    """The file of segment k (and of a rank's columns of it)."""
    if rank is None:
        return f"{os.fspath(path)}.seg{k:06d}.npz"
    return f"{os.fspath(path)}.seg{k:06d}.rank{rank:04d}.npz"


def write_rank_segment(path, k, rank, rows, q_columns, v_columns):
    """Rank ``rank``'s columns of segment k (rows: q, qd, qdd, tau, p of its joints); returns
    the segment's checksum (the root lists it in the main file)."""
    arrays = dict(rows, q_columns=np.asarray(q_columns, dtype=np.int64), v_columns=np.asarray(v_columns, dtype=np.int64))
    return _write_npz(segment_path(path, k, rank), arrays, {"format": FORMAT + "-segment", "index": k, "rank": rank})


#: the per-joint series of a run's rows: which columns they have
Q_SERIES = ("q",)
V_SERIES = ("qd", "p", "qdd", "tau")


def load_columns(path, meta, q_columns, v_columns, all_q, all_v):
    """The joints' rows of a checkpoint restricted to some columns.

    Parameters
    ----------
    path : str
        The checkpoint.
    meta : dict
        Its metadata (``segments``, ``rank_segments``).
    q_columns, v_columns : ndarray of int
        The global columns wanted (of q; of qd, qdd, tau, p).
    all_q, all_v : ndarray of int
        The columns the run records (those of a gathered segment, which stores no column list).

    Returns
    -------
    dict
        name -> (rows, len(columns)) array for every per-joint series the segments hold.
    """
    segs = meta.get("segments", [])
    ranks = meta.get("rank_segments") or [None] * len(segs)
    out = {}
    qc, vc = np.asarray(q_columns, dtype=np.int64), np.asarray(v_columns, dtype=np.int64)

    def read(sp, digest):
        if not os.path.exists(sp):
            raise CheckpointError(f"checkpoint {path!r} lists segment {sp!r}, which is missing")
        smeta, arrs = _read_npz(sp, "checkpoint segment")
        if smeta.get("checksum") != digest:
            raise CheckpointError(f"checkpoint segment {sp!r} does not belong to {path!r} (checksum)")
        return arrs

    for k, digest in enumerate(segs, start=1):
        head = read(segment_path(path, k), digest)
        out.setdefault("t", []).append(head["t"])
        files = [(head, all_q, all_v)]
        if ranks[k - 1]:
            files = []
            for r, d in enumerate(ranks[k - 1]):
                arrs = read(segment_path(path, k, r), d)
                files.append((arrs, arrs.pop("q_columns"), arrs.pop("v_columns")))
        pieces = {}
        for arrs, have_q, have_v in files:
            for name, a in arrs.items():
                kind = "q" if name in Q_SERIES else "v" if name in V_SERIES else None
                if kind is None:
                    continue
                have = np.asarray(have_q if kind == "q" else have_v, dtype=np.int64)
                want = qc if kind == "q" else vc
                buf = pieces.setdefault(name, np.full((a.shape[0], want.size), np.nan))
                if not have.size or not want.size:
                    continue
                order = np.argsort(have, kind="stable")
                pos = np.minimum(np.searchsorted(have, want, sorter=order), have.size - 1)
                hit = have[order[pos]] == want
                buf[:, hit] = a[:, order[pos[hit]]]
        for name, a in pieces.items():
            out.setdefault(name, []).append(a)
    return {name: np.concatenate(lst, axis=0) for name, lst in out.items()}


class Checkpointer:
    """Writes and reads the checkpoint at ``path`` (see the module docstring)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.segments = []          # checksums of the segments written so far
        self.rank_segments = []     # per segment: None, or the checksums of its ranks' files

    def exists(self):
        return os.path.exists(self.path)

    def save(self, state, meta, rows=None, rank_digests=None):
        """state: dict of arrays (q, v, integrator arrays); meta: JSON-able dict; rows: dict of
        arrays (the output recorded since the previous checkpoint) or None; rank_digests: the
        checksums of the ranks' segments of these rows (:func:`write_rank_segment`), when the
        joints' rows are written per rank."""
        if rows:
            k = len(self.segments) + 1
            digest = _write_npz(segment_path(self.path, k), rows, {"format": FORMAT + "-segment", "index": k})
            self.segments.append(digest)
            self.rank_segments.append(None if rank_digests is None else list(rank_digests))
        meta = dict(meta, format=FORMAT, version=VERSION, segments=list(self.segments))
        if any(r is not None for r in self.rank_segments):
            meta["rank_segments"] = list(self.rank_segments)
        _write_npz(self.path, state, meta)

    def load(self, model_fp=None, options_fp=None, options=None):
        """Returns (meta, state arrays, rows) where rows concatenates the segments; raises
        ``CheckpointError`` when the checkpoint is corrupt or does not match."""
        if not self.exists():
            raise CheckpointError(f"no checkpoint at {self.path!r} to resume from")
        meta, state = _read_npz(self.path, "checkpoint")
        if meta.get("format") != FORMAT:
            raise CheckpointError(f"{self.path!r} is not a partree checkpoint (format {meta.get('format')!r})")
        if meta.get("version", 0) > VERSION:
            raise CheckpointError(f"checkpoint {self.path!r} has version {meta.get('version')}, newer than this "
                                  f"partree understands ({VERSION})")
        if model_fp is not None and meta.get("model_fingerprint") != model_fp:
            raise CheckpointError(f"checkpoint {self.path!r} was written for a different model (fingerprint "
                                  f"{str(meta.get('model_fingerprint'))[:12]}..., this model "
                                  f"{model_fp[:12]}...); refusing to resume")
        if options_fp is not None and meta.get("options_fingerprint") != options_fp:
            diff = ""
            if options is not None and isinstance(meta.get("options"), dict):
                old = meta["options"]
                keys = sorted(k for k in set(old) | set(options) if old.get(k) != options.get(k))
                if keys:
                    diff = ": " + ", ".join(f"{k} was {old.get(k)!r}, now {options.get(k)!r}" for k in keys)
            raise CheckpointError(f"checkpoint {self.path!r} was written with different options{diff or ' (inputs differ)'}"
                                  f"; refusing to resume (start afresh without resume, or use the same options)")
        rows = {}
        parts = {}
        for k, digest in enumerate(meta.get("segments", []), start=1):
            sp = segment_path(self.path, k)
            if not os.path.exists(sp):
                raise CheckpointError(f"checkpoint {self.path!r} lists segment {sp!r}, which is missing")
            smeta, arrs = _read_npz(sp, "checkpoint segment")
            if smeta.get("checksum") != digest:
                raise CheckpointError(f"checkpoint segment {sp!r} does not belong to {self.path!r} (checksum)")
            for name, a in arrs.items():
                parts.setdefault(name, []).append(a)
        for name, lst in parts.items():
            rows[name] = np.concatenate(lst, axis=0)
        self.segments = list(meta.get("segments", []))
        self.rank_segments = list(meta.get("rank_segments") or [None] * len(self.segments))
        return meta, state, rows

    def remove(self):
        """Delete the checkpoint and all its segments."""
        import glob

        k = 1
        while True:
            sp = segment_path(self.path, k)
            if not os.path.exists(sp):
                break
            os.remove(sp)
            k += 1
        for sp in glob.glob(glob.escape(os.fspath(self.path)) + ".seg[0-9]*.rank[0-9]*.npz"):
            try:
                os.remove(sp)
            except OSError:
                pass
        if os.path.exists(self.path):
            os.remove(self.path)
