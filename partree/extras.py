"""Optional packages: import them where a feature needs them, or say which extra installs them.

The core install (numpy, scipy, numba, tqdm) runs every command that needs nothing more; a
feature that needs an optional package calls :func:`require` before doing any work, so a user
learns what to install before waiting for a result that could not be saved.
"""
from __future__ import annotations

import importlib

#: optional module -> (extra of ``pip install partree[EXTRA]``, distribution name)
EXTRAS = {
    "h5py": ("io", "h5py"),
    "matplotlib": ("plot", "matplotlib"),
    "mpi4py": ("mpi", "mpi4py"),
    "dask": ("dask", "dask"),
    "distributed": ("dask", "distributed"),
    "pinocchio": ("test", "pin"),
}


def require(module, purpose):
    """Import ``module`` or raise :class:`~partree.errors.MissingDependencyError` naming the extra.

    Parameters
    ----------
    module : str
        Top-level module name, e.g. ``"h5py"``.
    purpose : str
        What needs it, for the message, e.g. ``"writing .h5 results"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        from .errors import MissingDependencyError

        extra, dist = EXTRAS.get(module.split(".")[0], (None, module))
        how = (f"pip install 'partree[{extra}]'  (or: pip install {dist})" if extra
               else f"pip install {dist}")
        raise MissingDependencyError(f"{purpose} needs the optional package {dist!r}, which is not "
                                     f"installed: {how}") from e


def available(module):
    """True when ``module`` can be imported (without importing it twice)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
