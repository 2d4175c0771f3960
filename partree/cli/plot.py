"""``partree plot``: figures of a simulation's results."""
from __future__ import annotations


def add_parser(subparsers):
    s = subparsers.add_parser(
        "plot", help="plot a simulation's results",
        description="Draw joint trajectories, energy, joint (constraint) forces and the tree's configuration "
                    "at chosen times from a results file written by 'partree simulate'.")
    s.add_argument("results", help="results file (.h5/.hdf5 or .npz)")
    s.add_argument("--out", default=None, help="output folder (default: next to the results file)")
    s.add_argument("--joints", nargs="+", default=None, metavar="JOINT", help="joints to plot (default: up to 6)")
    s.add_argument("--times", nargs="+", type=float, default=None, metavar="T",
                   help="times of the configuration pictures (default: 4 evenly spaced)")
    s.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="figure format (default png)")
    s.set_defaults(func=run)
    return s


def run(a):
    from ..plotting import plot_results
    files = plot_results(a.results, out_dir=a.out, joints=a.joints, times=a.times, fmt=a.format)
    for f in files:
        print(f"wrote {f}")
    return 0
