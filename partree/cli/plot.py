"""``partree plot``: figures of a simulation's results."""
from __future__ import annotations

import sys

from .common import finite


def add_parser(subparsers):
    from ..plotting.tree import DEFAULT_RANKS, LABEL_LIMIT, LARGE_MODEL

    s = subparsers.add_parser(
        "plot", help="plot a simulation's results",
        description="Write the figures of a results file written by 'partree simulate' into one folder: "
                    "joints (coordinates and velocities against time), energy (kinetic, potential, total and "
                    "the drift (E - E0)/|E0|), wrenches (force and torque magnitudes of the recorded joints on "
                    "a log scale, the largest named; when wrenches were recorded) and configuration (the tree "
                    "at a few times, drawn as by 'partree show').")
    s.add_argument("results", help="results file (.h5/.hdf5 or .npz)")
    s.add_argument("--out", default=None, metavar="DIR",
                   help="output folder, created if missing (its parent must exist; default: RESULTS_plots "
                        "next to the results file)")
    s.add_argument("--joints", nargs="+", default=None, metavar="JOINT", help="joints to plot (default: up to 6)")
    s.add_argument("--times", nargs="+", type=finite, default=None, metavar="T",
                   help="times of the configuration pictures (default: 4 evenly spaced)")
    s.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="figure format (default png)")
    s.add_argument("--dpi", type=float, default=120, help="pixels per inch of png figures (default 120)")
    s.add_argument("--ranks", type=int, default=None, metavar="R",
                   help="configuration pictures: colour the bodies by rank in the engine's partition on R ranks "
                        f"(0: one colour; default {DEFAULT_RANKS} for models larger than --large)")
    s.add_argument("--large", type=int, default=LARGE_MODEL, metavar="N",
                   help=f"models with more than N bodies are drawn by rank (default {LARGE_MODEL})")
    s.add_argument("--labels", type=int, default=LABEL_LIMIT, metavar="N",
                   help=f"write the joint names on models of at most N bodies (default {LABEL_LIMIT}; 0: never)")
    s.add_argument("--force", action="store_true", help="replace existing figures in the output folder")
    s.set_defaults(func=run)
    return s


def run(a):
    from ..errors import MissingDependencyError
    from ..plotting import plot_results

    try:
        files = plot_results(a.results, out_dir=a.out, joints=a.joints, times=a.times, fmt=a.format, dpi=a.dpi,
                             ranks=a.ranks, large=a.large, labels=a.labels, overwrite=a.force)
    except MissingDependencyError as e:
        print(f"partree plot: error: {e}", file=sys.stderr)
        return 2
    for f in files:
        print(f"wrote {f}")
    return 0
