"""What every figure writer shares: importing matplotlib, checking an output path before any work,
and writing a file so that a failed drawing never leaves half a file behind.

matplotlib is optional (the ``plot`` extra).  :func:`need_matplotlib` imports it through
:func:`partree.extras.require`, which names the extra to install, and :func:`new_figure` makes
figures rendered by Agg: they are written to files and need no display.
"""
from __future__ import annotations

import os
import tempfile

from ..errors import PartreeInputError

#: figure formats the writers accept (the file suffix picks the format)
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def need_matplotlib(purpose="drawing figures"):
    """Import matplotlib, or fail before any work with a message naming the extra to install.

    Parameters
    ----------
    purpose : str
        What needs matplotlib, for the message.

    Returns
    -------
    module
        ``matplotlib``.

    Raises
    ------
    partree.errors.MissingDependencyError
        matplotlib is not installed; the message names the ``plot`` extra.
    """
    from ..extras import require

    return require("matplotlib", purpose)


def new_figure(purpose="drawing figures", **kwargs):
    """A matplotlib figure drawn by the Agg renderer, outside ``pyplot``.

    The figure has its own Agg canvas, so it renders without a display and without changing the
    backend or the figure list of ``pyplot`` (a notebook's inline figures are left alone); it is
    freed when no longer referenced.

    Parameters
    ----------
    purpose : str
        What needs matplotlib, for the message of a missing installation.
    **kwargs
        Passed to :class:`matplotlib.figure.Figure` (``figsize``, ``layout``, ...).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.
    """
    need_matplotlib(purpose)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def wrap_title(text, fig, fontsize):
    """A title with every line wrapped to the width of its figure.

    Parameters
    ----------
    text : str
        The title; its own line breaks are kept.
    fig : matplotlib.figure.Figure
        The figure whose width the lines must fit.
    fontsize : float
        Font size in points.

    Returns
    -------
    str
        The wrapped title.
    """
    import textwrap

    # an average character of matplotlib's sans-serif font is about 0.6 of its size wide
    width = max(int(fig.get_figwidth() * 72 * 0.92 / (0.6 * fontsize)), 20)
    return "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False) or line
                     for line in str(text).split("\n"))


def _check_dir(d, what):
    """Refuse an output folder that does not exist or cannot be written to."""
    if not os.path.isdir(d):
        raise PartreeInputError(f"the folder {d!r} of {what} does not exist; create it first")
    if not os.access(d, os.W_OK | os.X_OK):
        raise PartreeInputError(f"the folder {d!r} of {what} is not writable")


def check_output_file(path, suffixes=FIGURE_SUFFIXES, overwrite=False):
    """Check an output file before anything is drawn: a known suffix, then the checks every
    output of partree gets (:func:`partree.outputs.check_output`: an existing writable folder, no
    existing file unless ``overwrite``, never a model file).

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    suffixes : sequence of str
        Accepted suffixes, lower case with the dot (the suffix picks the format).
    overwrite : bool
        Replace an existing file (the command line's ``--force``).

    Returns
    -------
    str
        The path, as a string.

    Raises
    ------
    partree.errors.PartreeInputError
        An unknown suffix, a missing or read-only folder, or an existing file without ``overwrite``.
    """
    from ..outputs import check_output

    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in suffixes:
        raise PartreeInputError(f"output file {path!r}: use one of the suffixes {', '.join(suffixes)}")
    return check_output(path, overwrite=overwrite, what="figure" if ext in FIGURE_SUFFIXES else "output file")


def check_output_dir(out_dir, names, overwrite=False, create=True):
    """Check (and create) the folder of several figures before anything is drawn.

    Parameters
    ----------
    out_dir : str or os.PathLike
        The folder.  Its parent must exist; the folder itself is created when ``create``.
    names : sequence of str
        The file names that will be written into it.
    overwrite : bool
        Replace existing files of those names (the command line's ``--force``).
    create : bool
        Create ``out_dir`` when it does not exist.

    Returns
    -------
    str
        The folder, as a string.

    Raises
    ------
    partree.errors.PartreeInputError
        A missing parent folder, a folder that cannot be written to, or existing files without
        ``overwrite`` (all of them named).
    """
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise PartreeInputError(f"output folder {out_dir!r} is a file")
    if not os.path.isdir(out_dir):
        parent = os.path.dirname(os.path.abspath(out_dir))
        _check_dir(parent, f"the output folder {out_dir!r}")
        if not create:
            raise PartreeInputError(f"output folder {out_dir!r} does not exist")
        os.mkdir(out_dir)
    _check_dir(out_dir, "the figures")
    existing = [n for n in names if os.path.exists(os.path.join(out_dir, n))]
    if existing and not overwrite:
        raise PartreeInputError(f"{', '.join(existing)} exist{'s' if len(existing) == 1 else ''} in {out_dir!r}; "
                                "to replace them, pass --force (overwrite=True in Python)")
    return out_dir


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_atomic(path, write):
    """Write a file through ``write(tmp_path)`` into a temporary file of the same folder and
    suffix, then rename it to ``path``: a drawing that fails leaves no partial file and keeps
    an older file of that name.

    Parameters
    ----------
    path : str
        The final file.
    write : callable
        ``write(tmp_path)`` writes the whole file to ``tmp_path``.

    Returns
    -------
    str
        ``path``.
    """
    d = os.path.dirname(os.path.abspath(path))
    base, ext = os.path.splitext(os.path.basename(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=ext, dir=d)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())       # as an ordinary new file, not mkstemp's 0600
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
