"""``partree show``: draw a model's tree in one configuration."""
from __future__ import annotations

import argparse
import sys
import textwrap

from .common import MODEL_HELP, add_floating_base, load_model


def add_parser(sub):
    from ..plotting.tree import DEFAULT_RANKS, LABEL_LIMIT, LARGE_MODEL, MAX_SEGMENTS

    s = sub.add_parser(
        "show", help="draw a model's tree (PNG / PDF / SVG)",
        description=textwrap.fill(
            "Draw a model as a 3-D stick figure: every body a segment from its parent's joint to its "
            "own joint and on to its centre of mass, joints as circles, the base as a black square "
            "(a floating base as a diamond), and the joint names on small models.  A large model is "
            "drawn as the parts of the partition the parallel engine uses on R ranks, each in the "
            "colour of its rank, from a bounded sample of its bodies.  The camera looks along the "
            "direction in which the model spreads least, so a planar model is seen face on.", 100),
        epilog="examples:\n"
               "  partree show threearm --out threearm.png\n"
               "  partree show autotree:nb=31,bf=2 --q random --seed 3 --out tree.svg\n"
               "  partree show autotree:nb=1000000,bf=2 --q random --ranks 8 --out big.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("model", help=MODEL_HELP)
    s.add_argument("--out", required=True, metavar="FILE",
                   help="picture file: .png, .pdf or .svg (its folder must exist)")
    s.add_argument("--q", default="neutral", metavar="CONFIG",
                   help="configuration: 'neutral' (default), 'random', or a .npy / text file of nq numbers")
    s.add_argument("--seed", type=int, default=0, help="seed of --q random (default 0)")
    s.add_argument("--ranks", type=int, default=None, metavar="R",
                   help=f"colour the bodies by rank in the engine's partition on R ranks (0: one colour; "
                        f"default {DEFAULT_RANKS} for models larger than --large, else 0)")
    s.add_argument("--large", type=int, default=LARGE_MODEL, metavar="N",
                   help=f"models with more than N bodies are drawn by rank, without markers (default {LARGE_MODEL})")
    s.add_argument("--max-segments", type=int, default=MAX_SEGMENTS, metavar="M",
                   help=f"most segments drawn; larger models are sampled (default {MAX_SEGMENTS})")
    s.add_argument("--labels", type=int, default=LABEL_LIMIT, metavar="N",
                   help=f"write the joint names on models of at most N bodies (default {LABEL_LIMIT}; 0: never)")
    s.add_argument("--title", default=None, help="title (default: model, configuration and what is drawn)")
    s.add_argument("--size", type=float, nargs=2, default=(8.0, 6.5), metavar=("W", "H"),
                   help="figure size in inches (default 8 6.5)")
    s.add_argument("--dpi", type=float, default=150, help="pixels per inch of a .png (default 150)")
    s.add_argument("--force", action="store_true", help="replace an existing output file")
    add_floating_base(s)
    s.set_defaults(func=run)
    return s


def _configuration(model, spec):
    """The --q argument: a keyword, or a file of nq numbers."""
    import os

    import numpy as np

    from ..errors import PartreeInputError

    if spec in ("neutral", "random"):
        return spec
    if not os.path.isfile(spec):
        raise PartreeInputError(f"--q {spec!r}: use 'neutral', 'random' or a .npy / text file of {model.nq} numbers")
    q = np.load(spec) if spec.lower().endswith(".npy") else np.loadtxt(spec, ndmin=1)
    return np.asarray(q, dtype=np.float64).reshape(-1)


def run(a):
    from ..errors import MissingDependencyError
    from ..plotting.output import check_output_file, need_matplotlib
    from ..plotting.tree import show_model

    try:
        need_matplotlib("drawing a model")                  # a missing matplotlib is said first,
        out = check_output_file(a.out, overwrite=a.force)    # then a bad output, before the model is built
        model = load_model(a.model, a.floating_base, a.inertia)
        path = show_model(model, out, q=_configuration(model, a.q), seed=a.seed, ranks=a.ranks, large=a.large,
                          max_segments=a.max_segments, labels=a.labels, title=a.title, size=tuple(a.size),
                          dpi=a.dpi, overwrite=a.force)
    except MissingDependencyError as e:
        print(f"partree show: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
