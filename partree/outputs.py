"""Checks of the files a command or call will write, made before any work starts.

Every output (results file, checkpoint, figure, converted model, report) is checked at entry: its folder must exist
and be writable, and an existing file is kept unless the caller allows replacing it
(``overwrite=True``, ``--force``).  A model file (a partree model in .npz / .h5 / .json, or a
URDF) is never replaced, whatever the caller allows: results written over the model they came
from would lose it.  Each refusal is a ``PartreeInputError`` naming the path and what to do.
"""
from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from .errors import PartreeInputError
from .extras import available

MODEL_FORMAT = "partree-model"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"


def complete_zip(path):
    """Whether a zip archive (an .npz) ends with its end-of-central-directory record.

    A truncated archive does not, but may still open: a results file embeds its model as an
    .npz, and a reader that looks for the last directory record finds the embedded one.

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    bool
        True when the last 22 bytes are the record of an archive without a comment (as numpy
        writes them).
    """
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size < 22:
                return False
            fh.seek(size - 22)
            tail = fh.read(22)
    except OSError:
        return False
    return tail[:4] == b"PK\x05\x06" and tail[20:22] == b"\x00\x00"


def model_file_kind(path):
    """What kind of model file ``path`` holds, judged by its content (and a .urdf suffix).

    Parameters
    ----------
    path : str or path-like
        An existing file.

    Returns
    -------
    str or None
        ``'urdf'``, ``'mjcf'``, ``'npz'``, ``'h5'`` or ``'json'`` for a model file; ``'unknown-h5'`` for an
        HDF5 file that cannot be inspected without h5py; None for anything else.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    if path.lower().endswith(".urdf") or b"<robot" in head:
        return "urdf"
    if b"<mujoco" in head:
        return "mjcf"
    if head.startswith(ZIP_SIGNATURE):
        if not complete_zip(path):
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                if "meta" not in z.files:
                    return None
                meta = json.loads(bytes(z["meta"]).decode("utf-8"))
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
            return None
        return "npz" if isinstance(meta, dict) and meta.get("format") == MODEL_FORMAT else None
    if head.startswith(HDF5_SIGNATURE):
        if not available("h5py"):
            return "unknown-h5"
        import h5py

        try:
            with h5py.File(path, "r") as f:
                raw = f.attrs.get("meta")
        except (OSError, ValueError):
            return None
        if raw is None:
            return None
        try:
            meta = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
        except (ValueError, UnicodeDecodeError):
            return None
        return "h5" if isinstance(meta, dict) and meta.get("format") == MODEL_FORMAT else None
    if head.lstrip().startswith(b"{"):
        try:
            with open(path, "rb") as fh:
                doc = json.loads(fh.read().decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return "json" if isinstance(doc, dict) and doc.get("format") == MODEL_FORMAT else None
    return None


def check_directory(path, what):
    """Refuse when the folder that will hold ``path`` does not exist or is not writable.

    Parameters
    ----------
    path : str or path-like
        The file (or folder) to be written.
    what : str
        What it is, for the message (e.g. ``"results file"``).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PartreeInputError(f"cannot write the {what} {path!r}: the directory {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PartreeInputError(f"cannot write the {what} {path!r}: the directory {folder!r} is not writable")


def check_output_file(path, what, overwrite=False, may_exist=False, hint=""):
    """Refuse to write ``path`` when its folder is missing or not writable, when it is a folder,
    when it holds a model, or when it exists and may not be replaced.

    Parameters
    ----------
    path : str or path-like
        The file to be written.
    what : str
        What it is, for the messages.
    overwrite : bool
        Whether an existing file (not a model file) may be replaced.
    may_exist : bool
        Let an existing file through without ``overwrite`` (a resumed run's own files); a model
        file is still refused.
    hint : str
        Extra advice for the message about an existing file.
    """
    path = os.fspath(path)
    check_directory(path, what)
    if os.path.isdir(path):
        raise PartreeInputError(f"cannot write the {what} {path!r}: it is a directory")
    if not os.path.exists(path):
        return
    kind = model_file_kind(path)
    if kind == "unknown-h5":
        raise PartreeInputError(f"the {what} {path!r} exists and is an HDF5 file that may hold a model (h5py is "
                                f"not installed to look inside); choose another name")
    if kind is not None:
        raise PartreeInputError(f"the {what} {path!r} is a model file; it is never overwritten (not even with "
                                f"--force / overwrite=True): choose another name")
    if overwrite or may_exist:
        return
    raise PartreeInputError(f"the {what} {path!r} exists; {hint or ''}use --force (overwrite=True) to replace it, or "
                            f"choose another name")


def check_output_dir(path, what, overwrite=False):
    """Refuse a folder of outputs (figures) whose parent is missing or not writable, that is a
    file, or that exists with files in it (unless ``overwrite``).

    Parameters
    ----------
    path : str or path-like
        The folder (created later when missing).
    what : str
        What it holds, for the messages.
    overwrite : bool
        Whether files in an existing folder may be replaced.
    """
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise PartreeInputError(f"cannot write the {what} into {path!r}: it is a file, not a directory")
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            raise PartreeInputError(f"cannot write the {what} into {path!r}: the directory is not writable")
        if os.listdir(path) and not overwrite:
            raise PartreeInputError(f"the directory {path!r} for the {what} exists and is not empty; use --force "
                                    f"to replace its files, or choose another directory")
        return
    check_directory(path, what)


def is_model_file(path):
    """True when ``path`` is an existing file holding a model (see :func:`model_file_kind`)."""
    return os.path.isfile(os.fspath(path)) and model_file_kind(path) not in (None, "unknown-h5")


def check_output(path, overwrite=False, what="output file", allow_model=False):
    """Check that ``path`` can be written before any work is done; returns it as a string.

    :func:`check_output_file` with one exception: ``allow_model`` lets a model file replace an
    existing model file when ``overwrite`` is set (``partree convert --force``); results and
    figures never replace a model.

    Parameters
    ----------
    path : str or os.PathLike
        The file to be written.
    overwrite : bool
        Replace an existing file (the CLI's ``--force``).
    what : str
        What the file is, for the messages.
    allow_model : bool
        The file written is itself a model.

    Raises
    ------
    PartreeInputError
        The directory does not exist or cannot be written, the path is a directory, or the file
        exists and may not be replaced.
    """
    path = os.fspath(path)
    if not path:
        raise PartreeInputError(f"empty {what} path")
    if allow_model and is_model_file(path):
        check_directory(path, what)
        if not overwrite:
            raise PartreeInputError(f"the {what} {path!r} exists; use --force (overwrite=True) to replace it, or "
                                    f"choose another name")
        return path
    check_output_file(path, what, overwrite=overwrite)
    return path
