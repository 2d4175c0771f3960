"""Model files: URDF and MJCF (MuJoCo XML) import, partree's own formats (.npz, .h5/.hdf5, .json),
and the bridge to Pinocchio models."""
from .native import FORMAT_VERSION, load_model, save_model
from .mjcf import load_mjcf, mujoco_to_partree, partree_to_mujoco
from .pinocchio import (PinocchioMap, depth_first_order, from_pinocchio, loop_constraints_to_pinocchio,
                        partree_configuration, pinocchio_configuration, to_pinocchio)
from .urdf import load_urdf

MODEL_SUFFIXES = (".npz", ".h5", ".hdf5", ".json")
URDF_SUFFIXES = (".urdf",)
MJCF_SUFFIXES = (".xml", ".mjcf")


def load(path, **kwargs):
    """Load any model file by suffix: .urdf (``load_urdf``, kwargs such as ``floating_base``),
    .xml or .mjcf (``load_mjcf``) or a native file (``load_model``)."""
    import os

    if os.fspath(path).lower().endswith(URDF_SUFFIXES):
        return load_urdf(path, **kwargs)
    if os.fspath(path).lower().endswith(MJCF_SUFFIXES):
        return load_mjcf(path, **kwargs)
    return load_model(path, **kwargs)


__all__ = ["load_urdf", "load_mjcf", "mujoco_to_partree", "partree_to_mujoco", "save_model", "load_model", "load",
           "from_pinocchio", "to_pinocchio", "loop_constraints_to_pinocchio", "PinocchioMap", "pinocchio_configuration",
           "partree_configuration", "depth_first_order",
           "FORMAT_VERSION", "MODEL_SUFFIXES", "URDF_SUFFIXES", "MJCF_SUFFIXES"]
