"""What the ``partree`` commands share: loading a model argument, checked numeric options,
output paths, formatting sizes."""
from __future__ import annotations

import argparse
import math

INERTIA_POLICIES = ("warn", "fix", "strict")
INERTIA_HELP = ("model files: inertias that are not a rigid body's but still physical are accepted with a "
                "warning (warn, the default for URDF and MJCF), balanced as MuJoCo does (fix), or refused (strict)")
MODEL_HELP = "URDF, .npz/.h5/.json model file, or spec string (e.g. autotree:nb=100000,bf=2)"


def load_model(spec, floating_base=False, inertia=None):
    """The model named on the command line: a URDF (``floating_base``: attach its root link by a
    free joint), an MJCF file, a native model file, or a spec string.  ``inertia``: the inertia
    policy of a model file ('warn', 'fix', 'strict'; None: the reader's default)."""
    from ..errors import PartreeInputError
    from ..specs import FILE_SUFFIXES, URDF_SUFFIXES, resolve_model

    kw = {}
    if inertia is not None:
        if not (isinstance(spec, str) and spec.lower().endswith(FILE_SUFFIXES)):
            raise PartreeInputError(f"--inertia applies to a model file (URDF, MJCF, native); {spec!r} is a spec "
                                    f"string (a generator builds physical inertias)")
        kw["inertia"] = inertia
    if floating_base and isinstance(spec, str) and spec.lower().endswith(URDF_SUFFIXES):
        kw["floating_base"] = True
    return resolve_model(spec, **kw)


def fmt_bytes(b):
    """A byte count for people: 512 B, 1.5 KiB, 3.2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{int(b)} B"
        b /= 1024


def add_floating_base(s):
    """The model file options: ``--floating-base`` (URDF) and ``--inertia`` (every file reader)."""
    s.add_argument("--floating-base", action="store_true", help="URDF: attach the root link by a free joint")
    s.add_argument("--inertia", choices=INERTIA_POLICIES, default=None, help=INERTIA_HELP)


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
