"""What the ``partree`` commands share: loading a model argument, checked numeric options,
output paths, formatting sizes."""
from __future__ import annotations

import argparse
import math

MODEL_HELP = "URDF, .npz/.h5/.json model file, or spec string (e.g. autotree:nb=100000,bf=2)"


def load_model(spec, floating_base=False):
    """The model named on the command line: a URDF (``floating_base``: attach its root link by a
    free joint), a native model file, or a spec string."""
    from ..specs import resolve_model

    if floating_base and isinstance(spec, str) and spec.lower().endswith(".urdf"):
        from ..io import load_urdf

        return load_urdf(spec, floating_base=True)
    return resolve_model(spec)


def fmt_bytes(b):
    """A byte count for people: 512 B, 1.5 KiB, 3.2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{int(b)} B"
        b /= 1024


def add_floating_base(s):
    s.add_argument("--floating-base", action="store_true", help="URDF: attach the root link by a free joint")


def add_force(s):
    s.add_argument("--force", action="store_true", help="replace an existing output file")


def _number(kind, text, lo=None, lo_open=False, name="value"):
    try:
        x = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if kind is float and not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    if lo is not None and (x <= lo if lo_open else x < lo):
        raise argparse.ArgumentTypeError(f"{text!r}: must be {'>' if lo_open else '>='} {lo:g}")
    return x


def count(text):
    """argparse type: an integer >= 1 (a number of parts, ranks, repetitions, ...)."""
    return _number(int, text, 1)


def nonneg_int(text):
    """argparse type: an integer >= 0."""
    return _number(int, text, 0)


def positive(text):
    """argparse type: a finite number > 0 (a tolerance, a step, a duration)."""
    return _number(float, text, 0.0, lo_open=True)


def nonneg(text):
    """argparse type: a finite number >= 0."""
    return _number(float, text, 0.0)


def finite(text):
    """argparse type: any finite number (negative values welcome: ``--x -1e-3``)."""
    return _number(float, text)


def check_output(path, force, what, allow_model=False):
    """The command's output path, checked before any work (see :func:`partree.outputs.check_output`)."""
    from ..outputs import check_output as _check

    return _check(path, overwrite=force, what=what, allow_model=allow_model)
