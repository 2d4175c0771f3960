"""The ``partree`` command line.

    partree info MODEL                    what a model is: bodies, joints, topology, memory
    partree dynamics MODEL [options]      forward/inverse dynamics on a state, timed; results to .npz
    partree convert MODEL OUT             write a model to .npz / .h5 / .json
    partree simulate [MODEL] [options]    integrate a trajectory; results to .h5 / .npz, checkpoints
    partree plot RESULTS                  joint trajectories, energy, joint forces, configuration pictures
    partree partition MODEL --parts P     how the parallel engine cuts a model: parts, loads, boundary
    partree bench --model SPEC [options]  time one evaluation: serial, MPI (under mpiexec) or Dask

MODEL is a URDF file, a native model file (.npz, .h5, .json) or a spec string such as
``autotree:nb=1000000,bf=2`` (generators: ``partree info --generators``).
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: the sub-commands, one module each in this package, in the order ``--help`` lists them
COMMANDS = ("info", "dynamics", "simulate", "plot", "show", "animate", "convert", "partition", "bench")


def build_parser():
    """The ``partree`` argument parser: every module in :data:`COMMANDS` adds its sub-command."""
    p = argparse.ArgumentParser(prog="partree", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f".{name}", __name__).add_parser(sub)
    return p


def main(argv=None):
    """Run the ``partree`` command line; returns the exit code."""
    from ..errors import PartreeInputError

    p = build_parser()
    a = p.parse_args(argv)
    if a.version:
        from .. import __version__
        print(__version__)
        return 0
    if not getattr(a, "func", None):
        p.print_help()
        return 2
    try:
        return a.func(a)
    except (PartreeInputError, FileNotFoundError, KeyError, ValueError) as e:
        print(f"partree {a.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
