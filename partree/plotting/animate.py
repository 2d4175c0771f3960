"""Animating a simulation's results: the tree drawn at every recorded time (``partree animate``).

The frames are drawn with the same :class:`~partree.plotting.tree.TreeDrawing` as ``partree
show``, under one camera and one set of axis limits chosen from the whole run, so that the motion
is seen against fixed axes.  A GIF is written with matplotlib's Pillow writer (Pillow comes with
matplotlib); an MP4 needs the ``ffmpeg`` program on the PATH.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import PartreeInputError
from .output import check_output_file, need_matplotlib, new_figure, save_atomic, wrap_title
from .tree import LABEL_LIMIT, LARGE_MODEL, TreeDrawing, apply_view, choose_view

#: output suffixes of an animation
ANIMATION_SUFFIXES = (".gif", ".mp4")
#: most segments per frame by default (fewer than a still picture: every frame is drawn anew)
ANIMATION_SEGMENTS = 5000


def frame_indices(nsamples, max_frames):
    """The recorded samples shown: all of them, or ``max_frames`` evenly spaced from the first to
    the last.

    Parameters
    ----------
    nsamples : int
        Number of recorded samples.
    max_frames : int
        Most frames.

    Returns
    -------
    numpy.ndarray
        Increasing sample indices.
    """
    nsamples, max_frames = int(nsamples), int(max_frames)
    if nsamples <= max_frames:
        return np.arange(nsamples)
    if max_frames == 1:
        return np.array([0])
    return np.unique(np.round(np.linspace(0, nsamples - 1, max_frames)).astype(np.int64))


def _writer(animation, ext, fps):
    if ext == ".gif":
        return animation.PillowWriter(fps=fps)
    if not animation.writers.is_available("ffmpeg"):
        import matplotlib

        raise PartreeInputError(f"writing an .mp4 needs the program 'ffmpeg' on the PATH (matplotlib looks for "
                                f"{matplotlib.rcParams['animation.ffmpeg_path']!r}), which was not found: install "
                                "ffmpeg, or write a .gif")
    return animation.FFMpegWriter(fps=fps)


def animate_results(results, out, fps=10.0, max_frames=100, ranks=None, large=LARGE_MODEL,
                    max_segments=ANIMATION_SEGMENTS, labels=LABEL_LIMIT, size=(7.0, 6.0), dpi=100,
                    overwrite=False, progress=False):
    """Write an animation of a simulation's results: one frame per recorded time (at most
    ``max_frames``, evenly spaced), fixed axes over the whole run and the time on every frame.

    Parameters
    ----------
    results : partree.simulation.results.SimulationResult or str
        The results, or their file (as written by ``partree simulate --out``).
    out : str or os.PathLike
        ``.gif`` (Pillow) or ``.mp4`` (needs ``ffmpeg``); its folder must exist.
    fps : float
        Frames per second of the animation.
    max_frames : int
        Most frames; longer runs are subsampled evenly in time.
    ranks, large, max_segments, labels
        See :class:`~partree.plotting.tree.TreeDrawing`.
    size : tuple of float
        Frame size in inches.
    dpi : float
        Pixels per inch of a frame.
    overwrite : bool
        Replace an existing file.
    progress : bool
        Show a progress bar while the frames are drawn.

    Returns
    -------
    str
        The file written.
    """
    need_matplotlib("animating results")
    from matplotlib import animation

    out = check_output_file(out, ANIMATION_SUFFIXES, overwrite=overwrite)
    ext = os.path.splitext(out)[1].lower()
    if not fps > 0:
        raise PartreeInputError(f"fps must be > 0, got {fps}")
    if int(max_frames) < 1:
        raise PartreeInputError(f"max_frames must be >= 1, got {max_frames}")
    writer = _writer(animation, ext, fps)
    from ..simulation.results import SimulationResult, load_results

    res = results if isinstance(results, SimulationResult) else load_results(results)
    if res.q is None or len(res) == 0:
        raise PartreeInputError("the results hold no configurations to animate")
    if res.q_columns is not None:
        raise PartreeInputError("animating the tree needs every joint's coordinates: these results hold some "
                                "joints' only (record_joints)")
    model = res.model
    frames = frame_indices(len(res), max_frames)
    drawing = TreeDrawing(model, ranks=ranks, large=large, max_segments=max_segments, labels=labels)
    from tqdm.auto import tqdm

    pts = [drawing.points(res.q[k]) for k in tqdm(frames, desc="kinematics", unit="frame", disable=not progress)]
    view = choose_view(np.concatenate([drawing.visible_points(j, c) for j, c in pts]))
    fig = new_figure(figsize=size, layout="constrained")
    ax = fig.add_subplot(projection="3d")
    art = drawing.draw(ax, *pts[0])
    apply_view(ax, view)
    drawing.legend(fig, ax)
    fig.suptitle(wrap_title(f"{model.name}\n{drawing.describe()}", fig, 9), fontsize=9)
    label = ax.text2D(0.01, 0.99, "", transform=ax.transAxes, ha="left", va="top", fontsize=10,
                      family="monospace")
    t = res.t
    width = max(len(f"{t[0]:.6g}"), len(f"{t[-1]:.6g}"))
    fig.canvas.draw()
    fig.set_layout_engine("none")            # freeze the layout: no frame may move the axes

    def write(path):
        with writer.saving(fig, path, dpi):
            for i, k in enumerate(tqdm(frames, desc="frames", unit="frame", disable=not progress)):
                drawing.update(art, *pts[i])
                label.set_text(f"t = {t[k]:{width}.6g} s")
                writer.grab_frame()

    save_atomic(out, write)
    return out
