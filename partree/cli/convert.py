"""``partree convert``: write a model to a native file (.npz, .h5, .json)."""
from __future__ import annotations

from .common import MODEL_HELP, add_floating_base, load_model


def add_parser(sub):
    s = sub.add_parser("convert", help="write a model to a native file",
                       description="Write a model (URDF, file or spec) to .npz, .h5 or .json.")
    s.add_argument("model", help=MODEL_HELP)
    s.add_argument("out", help="output path: .npz, .h5/.hdf5 or .json")
    add_floating_base(s)
    s.set_defaults(func=run)
    return s


def run(a):
    from ..io import save_model
    m = load_model(a.model, a.floating_base)
    save_model(m, a.out)
    print(f"wrote {a.out}: {m!r}")
    return 0
