"""The ``partree`` command line.

    partree info MODEL                    what a model is: bodies, joints, topology, memory
    partree dynamics MODEL [options]      forward/inverse dynamics on a state, timed; results to .npz
    partree simulate [MODEL] [options]    integrate a trajectory; results to .h5 / .npz, checkpoints
    partree plot RESULTS                  joint trajectories, energy, joint forces, configuration pictures
    partree show MODEL --out tree.png     a picture of a model (large trees: their parts by rank)
    partree animate RESULTS --out run.gif an animation of a simulation
    partree convert MODEL OUT             write a model to .npz / .h5 / .json
    partree partition MODEL --parts P     how the parallel engine cuts a model: parts, loads, boundary
    partree bench --model SPEC [options]  time one evaluation: serial, MPI (under mpiexec) or Dask

Options before the command: --debug (tracebacks), --max-memory SIZE (the largest generated model).

MODEL is a URDF file, a native model file (.npz, .h5, .json) or a spec string such as
``autotree:nb=1000000,bf=2`` (generators: ``partree info --generators``).
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

#: the sub-commands, one module each in this package, in the order ``--help`` lists them
COMMANDS = ("info", "dynamics", "simulate", "plot", "show", "animate", "convert", "partition", "bench")


def build_parser():
    """The ``partree`` argument parser: every module in :data:`COMMANDS` adds its sub-command."""
    p = argparse.ArgumentParser(prog="partree", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument("--debug", action="store_true",
                   help="show the full traceback of an error (anywhere on the command line)")
    p.add_argument("--max-memory", metavar="SIZE", default=None,
                   help="memory a generated model may use, e.g. 64G (default: the memory available); "
                        "larger models are refused before anything is allocated")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f".{name}", __name__).add_parser(sub)
    return p


#: an option value that is a negative number, also in exponent form (argparse takes '-1e-3' for an
#: option otherwise)
_NEGATIVE = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-inf$|^-nan$", re.IGNORECASE)


def _prepare(argv):
    """(argv with ``--opt -1e-3`` joined as ``--opt=-1e-3``, whether ``--debug`` was given)."""
    out, debug = [], False
    for tok in argv:
        if tok == "--debug":
            debug = True
            continue
        if out and _NEGATIVE.match(tok) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={tok}"
            continue
        out.append(tok)
    return out, debug


def _quiet_stdout():
    """After a closed pipe (``partree info ... | head``): send what is left to /dev/null, so the
    interpreter's final flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _plain_warnings(command, debug):
    """partree's own warnings (a loader's note on inertias) as ``partree COMMAND: warning: ...``
    lines, not Python's ``file:line: Category:`` form (kept with ``--debug``)."""
    import warnings

    from ..errors import PartreeInertiaWarning

    if debug:
        return
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, PartreeInertiaWarning):
            print(f"partree {command}: warning: {message}", file=sys.stderr if file is None else file)
        else:
            shown(message, category, filename, lineno, file, line)
    warnings.showwarning = show


def main(argv=None):
    """Run the ``partree`` command line; returns the exit code.

    A user's error (a bad model, option or path) prints one line, ``partree COMMAND: error: ...``,
    and exits with 2; ``--debug`` shows the traceback.  A closed output pipe ends quietly; Ctrl-C
    exits with 130."""
    argv, debug = _prepare(sys.argv[1:] if argv is None else list(argv))
    p = build_parser()
    a = p.parse_args(argv)
    a.debug = debug or a.debug
    if a.max_memory:
        from ..specs import parse_size

        try:
            parse_size(a.max_memory)
        except ValueError as e:
            p.error(f"--max-memory: {e}")
        os.environ["PARTREE_MAX_MEMORY"] = a.max_memory
    if a.version:
        from .. import __version__
        print(__version__)
        return 0
    if not getattr(a, "func", None):
        p.print_help()
        return 2
    import warnings

    shown = warnings.showwarning
    _plain_warnings(a.command, a.debug)
    try:
        return _run(a)
    finally:
        warnings.showwarning = shown


def _run(a):
    """``a.func(a)``, with a user's errors as one line and their exit codes (see :func:`main`)."""
    from ..errors import PartreeError

    try:
        return a.func(a)
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:
        if a.debug:
            raise
        print(f"partree {a.command}: interrupted", file=sys.stderr)
        return 130
    except (PartreeError, ValueError, KeyError, OSError, MemoryError) as e:
        if a.debug:
            raise
        msg = str(e) if not isinstance(e, KeyError) else str(e.args[0]) if e.args else "KeyError"
        if isinstance(e, MemoryError):
            msg = f"out of memory ({msg or 'MemoryError'}); choose a smaller model or free memory"
        print(f"partree {a.command}: error: {msg}", file=sys.stderr)
        return 2
    except ImportError as e:
        from ..extras import EXTRAS

        if a.debug or (e.name or "").split(".")[0] not in EXTRAS:
            raise
        extra, dist = EXTRAS[e.name.split(".")[0]]
        print(f"partree {a.command}: error: this needs the optional package {dist!r}: "
              f"pip install 'partree[{extra}]'", file=sys.stderr)
        return 2
    except Exception as e:      # noqa: BLE001 -- a bug: one line, and how to see more
        if a.debug:
            raise
        print(f"partree {a.command}: internal error: {type(e).__name__}: {e} (run with --debug for the "
              f"traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
