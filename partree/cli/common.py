"""What the ``partree`` commands share: loading a model argument, formatting sizes."""
from __future__ import annotations

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
