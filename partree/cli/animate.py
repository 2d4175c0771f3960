"""``partree animate``: an animation (GIF or MP4) of a simulation's results."""
from __future__ import annotations

import argparse
import sys
import textwrap


def add_parser(sub):
    from ..plotting.animate import ANIMATION_SEGMENTS
    from ..plotting.tree import DEFAULT_RANKS, LABEL_LIMIT, LARGE_MODEL

    s = sub.add_parser(
        "animate", help="animate a simulation's results (GIF / MP4)",
        description=textwrap.fill(
            "Animate a results file written by 'partree simulate': the tree drawn as by 'partree show' "
            "at every recorded time (evenly subsampled to at most --max-frames frames), under one "
            "camera and fixed axes chosen from the whole run, with the time on every frame.  A .gif is "
            "written with Pillow (installed with matplotlib); an .mp4 needs the program ffmpeg on the "
            "PATH.", 100),
        epilog="examples:\n"
               "  partree simulate threearm --t-end 2 --dt 0.01 --out run.h5\n"
               "  partree animate run.h5 --out run.gif --fps 20\n"
               "  partree animate big.h5 --out big.mp4 --ranks 8 --max-frames 50",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("results", help="results file (.h5/.hdf5 or .npz) written by 'partree simulate --out'")
    s.add_argument("--out", required=True, metavar="FILE", help="animation file: .gif or .mp4 (its folder must exist)")
    s.add_argument("--fps", type=float, default=10.0, help="frames per second (default 10)")
    s.add_argument("--max-frames", type=int, default=100, metavar="K",
                   help="most frames; longer runs are subsampled evenly in time (default 100)")
    s.add_argument("--ranks", type=int, default=None, metavar="R",
                   help=f"colour the bodies by rank in the engine's partition on R ranks (0: one colour; "
                        f"default {DEFAULT_RANKS} for models larger than --large, else 0)")
    s.add_argument("--large", type=int, default=LARGE_MODEL, metavar="N",
                   help=f"models with more than N bodies are drawn by rank, without markers (default {LARGE_MODEL})")
    s.add_argument("--max-segments", type=int, default=ANIMATION_SEGMENTS, metavar="M",
                   help=f"most segments per frame; larger models are sampled (default {ANIMATION_SEGMENTS})")
    s.add_argument("--labels", type=int, default=LABEL_LIMIT, metavar="N",
                   help=f"write the joint names on models of at most N bodies (default {LABEL_LIMIT}; 0: never)")
    s.add_argument("--size", type=float, nargs=2, default=(7.0, 6.0), metavar=("W", "H"),
                   help="frame size in inches (default 7 6)")
    s.add_argument("--dpi", type=float, default=100, help="pixels per inch of a frame (default 100)")
    s.add_argument("--force", action="store_true", help="replace an existing output file")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=run)
    return s


def run(a):
    from ..errors import MissingDependencyError
    from ..plotting.animate import animate_results

    try:
        path = animate_results(a.results, a.out, fps=a.fps, max_frames=a.max_frames, ranks=a.ranks, large=a.large,
                               max_segments=a.max_segments, labels=a.labels, size=tuple(a.size), dpi=a.dpi,
                               overwrite=a.force, progress=not a.no_progress)
    except MissingDependencyError as e:
        print(f"partree animate: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
