"""Output paths checked before any work starts: nothing computed is lost to a bad path, and
nothing is overwritten by surprise.

Every command and API call that writes a file (results, checkpoints, figures, converted models)
calls :func:`check_output` first: the directory must exist and be writable, an existing file is
refused unless ``overwrite`` is set, and a model file is never replaced by something that is not
a model.
"""
from __future__ import annotations

import os

from .errors import PartreeInputError

MODEL_SUFFIXES = (".npz", ".h5", ".hdf5", ".json", ".urdf", ".xml", ".mjcf")


def is_model_file(path):
    """True when ``path`` is an existing file holding a model: a URDF / MJCF, or a partree model
    file (its metadata carries the ``partree-model`` format tag).  Results and anything else: False."""
    import json

    from .io.native import FORMAT

    path = os.fspath(path)
    low = path.lower()
    if not os.path.isfile(path) or not low.endswith(MODEL_SUFFIXES):
        return False
    try:
        if low.endswith((".urdf", ".xml", ".mjcf")):
            with open(path, "rb") as f:
                head = f.read(65536)
            return b"<robot" in head or b"<mujoco" in head
        if low.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            return isinstance(doc, dict) and doc.get("format") == FORMAT
        if low.endswith(".npz"):
            import numpy as np

            with np.load(path, allow_pickle=False) as z:
                if "meta" not in z.files:
                    return False
                meta = json.loads(z["meta"].tobytes().decode("utf-8"))
        else:
            import h5py

            with h5py.File(path, "r") as f:
                raw = f.attrs.get("meta")
                if raw is None:
                    return False
                meta = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
        return isinstance(meta, dict) and meta.get("format") == FORMAT
    except (OSError, ValueError, ImportError, KeyError, EOFError, UnicodeDecodeError):
        return False
    except Exception:      # noqa: BLE001 -- a damaged archive raises what its reader raises: not a model
        return False


def check_output(path, overwrite=False, what="output file", allow_model=False):
    """Check that ``path`` can be written before any work is done.

    Parameters
    ----------
    path : str or os.PathLike
        The file to be written.
    overwrite : bool
        Replace an existing file (the CLI's ``--force``).
    what : str
        What the file is, for the messages ("results file", "figure", ...).
    allow_model : bool
        The file being written is itself a model (``partree convert``), so an existing model file
        may be replaced when ``overwrite`` is set.  Otherwise a model file is never replaced.

    Returns
    -------
    str
        The path, as a string.

    Raises
    ------
    PartreeInputError
        The directory does not exist or cannot be written, the path is a directory, or the file
        exists and may not be replaced.
    """
    path = os.fspath(path)
    if not path:
        raise PartreeInputError(f"empty {what} path")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise PartreeInputError(f"cannot write the {what} {path}: directory {d} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise PartreeInputError(f"cannot write the {what} {path}: directory {d} is not writable")
    if os.path.isdir(path):
        raise PartreeInputError(f"cannot write the {what} {path}: it is a directory")
    if os.path.exists(path):
        if is_model_file(path) and not allow_model:
            raise PartreeInputError(f"{path} is a model file; a {what} never replaces it (choose another name)")
        if not overwrite:
            raise PartreeInputError(f"{path} exists; refusing to overwrite it (use --force, or overwrite=True in "
                                    f"Python, to replace it)")
        if not os.access(path, os.W_OK):
            raise PartreeInputError(f"cannot write the {what} {path}: the existing file is read-only")
    return path
