"""The exception types partree raises.

Every error partree raises on purpose derives from :class:`PartreeError`, so a caller can catch
them all at once; each also derives from the built-in type it refines (a bad argument is a
``ValueError``, a missing optional package an ``ImportError``).
"""
from __future__ import annotations


class PartreeError(Exception):
    """Base class of partree's own errors."""


class PartreeInputError(PartreeError, ValueError):
    """Bad model, bad state or bad option; the message names what and where."""


class CheckpointError(PartreeInputError):
    """A checkpoint that is corrupt, or belongs to another model or other options."""


class DaskEngineError(PartreeError, RuntimeError):
    """The Dask engine could not finish an evaluation (no workers left, a round timed out)."""


class PartreeInertiaWarning(UserWarning):
    """A model's inertias were accepted or repaired although some are not a rigid body's; the
    message names the bodies and what is wrong with (or was changed in) each."""


class MissingDependencyError(PartreeError, ImportError):
    """An optional package a feature needs is not installed; the message names the extra."""


__all__ = ["PartreeError", "PartreeInputError", "CheckpointError", "DaskEngineError", "MissingDependencyError",
           "PartreeInertiaWarning"]
