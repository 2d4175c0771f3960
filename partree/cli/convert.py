"""``partree convert``: write a model to a native file (.npz, .h5, .json)."""
from __future__ import annotations

import os

from .common import MODEL_HELP, add_floating_base, add_force, check_output, load_model


def add_parser(sub):
    s = sub.add_parser("convert", help="write a model to a native file",
                       description="Write a model (URDF, file or spec) to .npz, .h5 or .json.")
    s.add_argument("model", help=MODEL_HELP)
    s.add_argument("out", help="output path: .npz, .h5/.hdf5 or .json")
    add_floating_base(s)
    add_force(s)
    s.set_defaults(func=run)
    return s


def run(a):
    from ..extras import require
    from ..io import MODEL_SUFFIXES, save_model

    if not a.out.lower().endswith(MODEL_SUFFIXES):
        raise ValueError(f"{a.out}: the output must end in one of {', '.join(MODEL_SUFFIXES)}")
    if a.out.lower().endswith((".h5", ".hdf5")):
        require("h5py", "writing .h5 model files")
    check_output(a.out, a.force, "model file", allow_model=True)
    if os.path.exists(a.model) and os.path.exists(a.out) and os.path.samefile(a.model, a.out):
        raise ValueError(f"{a.out} is the input model itself; write the converted model to another file")
    m = load_model(a.model, a.floating_base, a.inertia)
    save_model(m, a.out)
    print(f"wrote {a.out}: {m!r}")
    return 0
