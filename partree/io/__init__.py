"""Model files: URDF import and partree's own formats (.npz, .h5/.hdf5, .json)."""
from .native import FORMAT_VERSION, load_model, save_model
from .urdf import load_urdf

MODEL_SUFFIXES = (".npz", ".h5", ".hdf5", ".json")
URDF_SUFFIXES = (".urdf",)


def load(path, **kwargs):
    """Load any model file by suffix: .urdf (``load_urdf``, kwargs such as ``floating_base``)
    or a native file (``load_model``)."""
    import os

    if os.fspath(path).lower().endswith(URDF_SUFFIXES):
        return load_urdf(path, **kwargs)
    return load_model(path, **kwargs)


__all__ = ["load_urdf", "save_model", "load_model", "load", "FORMAT_VERSION", "MODEL_SUFFIXES",
           "URDF_SUFFIXES"]
