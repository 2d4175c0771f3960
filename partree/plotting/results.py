"""The figures of a simulation's results (``partree plot``).

:func:`plot_results` writes, into one folder:

``joints.<fmt>``
    joint coordinates and velocities against time (rotation angle and angular speed for
    spherical and free joints);
``energy.<fmt>``
    kinetic, potential and total energy, and the total energy's drift relative to its initial
    value (the axis label says what it is divided by);
``wrenches.<fmt>``
    the force and torque magnitudes carried by the recorded joints, on a log scale so that every
    joint shows beside the dominant one, which the title names (written when wrenches were
    recorded);
``configuration.<fmt>``
    the tree drawn at a few times, under one camera (see :mod:`partree.plotting.tree`).

Each figure is written when the results hold what it shows: joint coordinates for the first
(velocities too for its lower axes), the energy, the wrenches, and every joint's coordinates for
the configuration (a run that recorded a subset, ``record`` / ``record_joints``, gets the figures of
what it kept).

Lines that lie on top of each other stay distinguishable: each line has its own colour, dash
pattern and markers (placed at staggered samples), and the legend notes which lines overlap.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import PartreeInputError
from .output import check_output_dir, need_matplotlib, new_figure, save_atomic, wrap_title
from .tree import LABEL_LIMIT, LARGE_MODEL, TreeDrawing, apply_view, choose_view

#: figure formats of :func:`plot_results`
FORMATS = ("png", "pdf", "svg")
#: most joints in the joint and wrench figures
MAX_LINES = 10

_DASHES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "v", "D", "x", "+", "<", ">", "*")


def line_style(k, nsamples, nlines):
    """Plot keywords of the ``k``-th of ``nlines`` lines: a colour, a dash pattern and markers at
    samples staggered from line to line, so that lines lying on top of each other stay visible.

    Parameters
    ----------
    k : int
        Index of the line.
    nsamples : int
        Number of samples of the line.
    nlines : int
        Number of lines in the axes.

    Returns
    -------
    dict
        Keywords for ``Axes.plot``.
    """
    step = max(nsamples // 8, 1)
    return dict(color=f"C{k % 10}", linestyle=_DASHES[k % len(_DASHES)], marker=_MARKERS[k % len(_MARKERS)],
                markersize=4.5, markevery=(min((k * step) // max(nlines, 1), nsamples - 1), step),
                fillstyle="none", linewidth=1.4)


def overlaps(series, names, rel=2e-3, log=False):
    """For every series, the earlier series it lies on top of at the scale of the plot, if any.

    Parameters
    ----------
    series : list of numpy.ndarray
        The plotted values, one array per line, all of one length.
    names : list of str
        Their names.
    rel : float
        Two lines overlap when they differ nowhere by more than ``rel`` times the range of all
        values.
    log : bool
        Compare the logarithms (for a log-scale axis); values <= 0, which a log axis leaves out,
        count as gaps.

    Returns
    -------
    list of str or None
        The name of the first earlier series each series lies on top of, or None.
    """
    if not series:
        return []
    if log:
        series = [np.log10(np.where(np.asarray(s, dtype=np.float64) > 0, s, np.nan)) for s in series]
    allv = np.concatenate([np.ravel(s) for s in series])
    allv = allv[np.isfinite(allv)]
    span = float(np.ptp(allv)) if allv.size else 0.0
    span = span if span > 0 else max(float(np.abs(allv).max()) if allv.size else 0.0, 1e-300)
    out = []
    for k, s in enumerate(series):
        hit = None
        for j in range(k):
            a, b = np.asarray(s, dtype=np.float64), np.asarray(series[j], dtype=np.float64)
            same_gaps = np.array_equal(np.isfinite(a), np.isfinite(b))
            d = np.abs(a - b)[np.isfinite(a) & np.isfinite(b)]
            if same_gaps and float(d.max(initial=0.0)) <= rel * span:
                hit = names[j]
                break
        out.append(hit)
    return out


def overlap_note(hits):
    """A legend note from :func:`overlaps` of one line in several panels.

    Parameters
    ----------
    hits : list of (str, str or None)
        Per panel, the quantity plotted (e.g. ``"q"``) and the line it lies on top of there.

    Returns
    -------
    str
        ``""``, ``" (on top of j0)"`` when the line hides behind one other line in every panel, or
        e.g. ``" (q̇ on top of j0)"``.
    """
    names = [h for _, h in hits]
    if all(h is None for h in names):
        return ""
    if all(h == names[0] for h in names):
        return f" (on top of {names[0]})"
    return " (" + ", ".join(f"{what} on top of {h}" for what, h in hits if h is not None) + ")"


def _default_joints(model, k=6, res=None):
    """Up to ``k`` joints with at least one degree of freedom, spread over the tree (with ``res``:
    among the joints whose coordinates it recorded, ``record_joints``)."""
    with_dof = np.flatnonzero(model.nv_j > 0)
    if res is not None and res.q_columns is not None:
        kept = np.zeros(model.nq, dtype=bool)
        kept[res.q_columns] = True
        with_dof = np.array([i for i in with_dof if kept[model.idx_q[i]:model.idx_q[i] + model.nq_j[i]].all()],
                            dtype=np.int64)
    pick = with_dof if with_dof.size <= k else with_dof[np.unique(np.linspace(0, with_dof.size - 1, k).astype(int))]
    return [model.joint_names[int(i)] for i in pick]


def figure_names(res, fmt="png"):
    """The files :func:`plot_results` writes for these results.

    Parameters
    ----------
    res : partree.simulation.results.SimulationResult
        The results.
    fmt : str
        Figure format.

    Returns
    -------
    list of str
        File names, in the order they are written.
    """
    names = []
    if res.q is not None and _default_joints(res.model, res=res):
        names.append("joints")
    if res.energy is not None:
        names.append("energy")
    if res.joint_wrench is not None and len(res.wrench_joints):
        names.append("wrenches")
    if _whole_configuration(res):
        names.append("configuration")
    return [f"{n}.{fmt}" for n in names]


def _whole_configuration(res):
    """Whether the results hold every coordinate of q (what drawing the tree needs)."""
    return res.q is not None and res.q_columns is None


def _save(fig, out_dir, name, dpi, files):
    path = os.path.join(out_dir, name)
    # the tight box takes in whatever reaches past the layout (a 3-D axis label at the edge)
    save_atomic(path, lambda p: fig.savefig(p, dpi=dpi, bbox_inches="tight", pad_inches=0.08))
    files.append(path)


def _results(results):
    """A ``SimulationResult`` from itself or its file."""
    from ..simulation.results import SimulationResult, load_results

    res = results if isinstance(results, SimulationResult) else load_results(results)
    if res.t is None or len(res) == 0:
        raise PartreeInputError("the results hold no samples to plot")
    return res


def _run_title(res):
    return f"{res.model.name}, {res.options.get('integrator', '')}, dt = {res.options.get('dt', '')} s"


def joints_figure(results, joints=None):
    """Joint coordinates and velocities against time (rotation angle and angular speed for
    spherical and free joints).

    Parameters
    ----------
    results : partree.simulation.results.SimulationResult or str
        The results, or their file.
    joints : list of str, optional
        The joints (default: up to 6 with degrees of freedom, spread over the tree).

    Returns
    -------
    matplotlib.figure.Figure
        Two axes (q above, q̇ below) and a legend that notes the lines lying on top of others.
    """
    need_matplotlib("plotting results")
    res = _results(results)
    model, t = res.model, res.t
    if res.q is None:
        raise PartreeInputError("the results hold no joint coordinates (record q to plot joint trajectories)")
    joints = list(joints) if joints else _default_joints(model, res=res)
    with_v = res.qd is not None
    lines = []                                   # (name, q series, q̇ series or None)
    for j in joints:
        try:
            qs, vs = res.joint(j)
        except KeyError as e:
            raise PartreeInputError(str(e.args[0])) from None
        if model.joint_type(j) in ("spherical", "free"):
            quat = qs[:, -4:]
            ang = 2 * np.arccos(np.clip(np.abs(quat[:, 3]), 0, 1))
            lines.append((f"{j} (rotation angle, |ω|)", ang, np.linalg.norm(vs[:, -3:], axis=1) if with_v else None))
        else:
            for c in range(qs.shape[1]):
                lines.append((j if qs.shape[1] == 1 else f"{j}[{c}]", qs[:, c], vs[:, c] if with_v else None))
    names = [ln[0] for ln in lines]
    hq = overlaps([ln[1] for ln in lines], names)
    hv = overlaps([ln[2] for ln in lines], names) if with_v else [[] for _ in lines]
    fig = new_figure(figsize=(9.5, 6.5 if with_v else 3.8), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True) if with_v else [fig.subplots(1, 1)]
    for k, (name, q, v) in enumerate(lines):
        st = line_style(k, len(t), len(lines))
        axes[0].plot(t, q, label=name + overlap_note([("q", hq[k]), ("q̇", hv[k])]), **st)
        if with_v:
            axes[1].plot(t, v, **st)
    axes[0].set_ylabel("q  [rad or m]")
    if with_v:
        axes[1].set_ylabel("q̇  [rad/s or m/s]")
    axes[-1].set_xlabel("t  [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(wrap_title(f"joint trajectories: {_run_title(res)}", fig, 10), fontsize=10)
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def energy_figure(results):
    """Kinetic, potential and total energy against time, and the drift of the total.

    The drift is divided by the size of the initial energy, ``(E − E₀)/|E₀|``; where E₀ is
    (nearly) zero it is divided by the largest ``T + |V|`` of the run instead, and the axis label
    says which.

    Parameters
    ----------
    results : partree.simulation.results.SimulationResult or str
        The results, or their file.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: the energies, and the relative drift.
    """
    need_matplotlib("plotting results")
    res = _results(results)
    if res.energy is None:
        raise PartreeInputError("the results hold no energy (record energy to plot it)")
    t, E, T, V = res.t, res.energy, res.kinetic, res.potential
    series = [("total", E, dict(color="black", linestyle="-", linewidth=2.4, alpha=0.55)),
              ("kinetic", T, dict(color="C0", linestyle="--", linewidth=1.6)),
              ("potential", V, dict(color="C3", linestyle="-.", linewidth=1.6))]
    hits = overlaps([s[1] for s in series], [s[0] for s in series])
    fig = new_figure(figsize=(9.5, 6.5), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    for (name, y, st), hit in zip(series, hits):
        axes[0].plot(t, y, label=name + overlap_note([("", hit)]), **st)
    axes[0].set_ylabel("energy  [J]")
    axes[0].legend(fontsize=8, loc="best")
    fig.suptitle(wrap_title(f"energy: {_run_title(res)}", fig, 10), fontsize=10)
    E0 = float(E[0])
    size = float(np.max(np.abs(T) + np.abs(V)))
    if abs(E0) > 1e-3 * size and E0 != 0:
        drift, label = (E - E0) / abs(E0), "(E − E₀) / |E₀|"
    elif size > 0:
        drift, label = (E - E0) / size, "(E − E₀) / max(T + |V|)"
    else:
        drift, label = E - E0, "E − E₀  [J]"
    axes[1].plot(t, drift, color="C2", linewidth=1.4)
    axes[1].axhline(0.0, color="0.5", linewidth=0.8)
    axes[1].set_ylabel(label)
    axes[1].set_xlabel("t  [s]")
    axes[1].ticklabel_format(axis="y", style="sci", scilimits=(-3, 3), useMathText=True)
    k = int(np.argmax(np.abs(drift)))
    axes[1].set_title(f"change of the total energy (the integrator's drift where no input does work): largest "
                      f"{drift[k]:+.3g} at t = {t[k]:.4g} s" if drift[k] != 0
                      else "change of the total energy: none (E = E₀ at every sample)", fontsize=9)
    for ax in axes:
        ax.grid(alpha=0.3)
    return fig


def wrenches_figure(results):
    """Force and torque magnitudes carried by the recorded joints, on a log scale so that small
    wrenches show beside the dominant one; the title names the joints with the largest force and
    torque, and says when a panel holds round-off only.

    Parameters
    ----------
    results : partree.simulation.results.SimulationResult or str
        Results with joint wrenches (``record='all'`` or ``wrench_joints``), or their file.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes (|f| above, |n| below); at most :data:`MAX_LINES` joints, largest force first.
    """
    need_matplotlib("plotting results")
    res = _results(results)
    if res.joint_wrench is None or not len(res.wrench_joints):
        raise PartreeInputError("the results hold no joint wrenches (simulate with record='all' or wrench_joints)")
    t, W, names = res.t, res.joint_wrench, list(res.wrench_joints)
    f = np.linalg.norm(W[:, :, 3:], axis=2)         # (K, m) force magnitudes
    n = np.linalg.norm(W[:, :, :3], axis=2)         # torque magnitudes
    order = np.argsort(-f.max(axis=0), kind="stable")
    shown = order[:MAX_LINES]
    shown_names = [names[k] for k in shown]
    hf = overlaps([f[:, k] for k in shown], shown_names, log=True)
    hn = overlaps([n[:, k] for k in shown], shown_names, log=True)
    # a link length: moments below 1e-9 |f| l (or forces below 1e-9 |n| / l) are round-off
    model = res.model
    link = max(float(np.max(np.linalg.norm(model.r_tree, axis=1) + np.linalg.norm(model.com, axis=1))), 1e-9)
    fmax, nmax = float(f.max()), float(n.max())
    fig = new_figure(figsize=(9.5, 6.5), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    for ax, mag, what in ((axes[0], f, "|f|"), (axes[1], n, "|n|")):
        positive = mag[:, shown][mag[:, shown] > 0]
        for r, k in enumerate(shown):
            y = np.where(mag[:, k] > 0, mag[:, k], np.nan)
            label = names[k] + overlap_note([("|f|", hf[r]), ("|n|", hn[r])]) if ax is axes[0] else None
            ax.plot(t, y, label=label, **line_style(r, len(t), len(shown)))
        if positive.size:
            ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, f"{what} = 0 at every joint and sample", transform=ax.transAxes, ha="center",
                    va="center", fontsize=9, color="0.3")
        ax.grid(alpha=0.3, which="both")
    if 0 < nmax <= 1e-9 * fmax * link:
        axes[1].set_title(f"all torques are round-off (below 1e-9 × max |f| × link length {link:.3g} m)", fontsize=9)
    if 0 < fmax <= 1e-9 * nmax / link:
        axes[0].set_title(f"all forces are round-off (below 1e-9 × max |n| / link length {link:.3g} m)", fontsize=9)
    axes[0].set_ylabel("|f|  joint force  [N]")
    axes[1].set_ylabel("|n|  joint torque  [N m]")
    axes[1].set_xlabel("t  [s]")
    kf, kn = int(np.argmax(f.max(axis=0))), int(np.argmax(n.max(axis=0)))
    head = [f"joint wrenches (constraint + drive, child frame), log scale: {_run_title(res)}"]
    if fmax > 0:
        head.append(f"largest force: joint {names[kf]}, {fmax:.4g} N at t = {t[int(np.argmax(f[:, kf]))]:.4g} s")
    if nmax > 0:
        head.append(f"largest torque: joint {names[kn]}, {nmax:.4g} N m at t = {t[int(np.argmax(n[:, kn]))]:.4g} s")
    fig.suptitle(wrap_title("\n".join(head), fig, 10), fontsize=10)
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, title_fontsize=8,
                   title="largest |f| first" + (f"\n({MAX_LINES} of {len(names)} joints)"
                                                if len(names) > MAX_LINES else ""))
    return fig


def configuration_figure(results, times=None, ranks=None, large=LARGE_MODEL, labels=LABEL_LIMIT):
    """The tree at a few times, side by side under one camera and one set of axes.

    Parameters
    ----------
    results : partree.simulation.results.SimulationResult or str
        The results, or their file.
    times : list of float, optional
        Times of the panels (the nearest recorded samples; default: 4, evenly spaced).
    ranks, large, labels
        How the tree is drawn (see :class:`~partree.plotting.tree.TreeDrawing`).

    Returns
    -------
    matplotlib.figure.Figure
        One 3-D axes per time.
    """
    need_matplotlib("plotting results")
    res = _results(results)
    model, t = res.model, res.t
    if not _whole_configuration(res):
        raise PartreeInputError("drawing the tree needs every joint's coordinates: these results "
                                + ("hold none (record q)" if res.q is None else "hold some joints' only (record_joints)"))
    if times is None:
        times = np.linspace(t[0], t[-1], min(4, len(t)))
    span = max(t[-1] - t[0], 1e-300)
    bad = [tt for tt in times if not np.isfinite(tt) or tt < t[0] - 1e-9 * span or tt > t[-1] + 1e-9 * span]
    if bad:
        raise PartreeInputError(f"times {bad} are outside the run, which covers t = {t[0]:g} .. {t[-1]:g} s")
    idx = list(dict.fromkeys(int(np.argmin(np.abs(t - tt))) for tt in times))
    drawing = TreeDrawing(model, ranks=ranks, large=large, labels=labels)
    pts = [drawing.points(res.q[k]) for k in idx]
    view = choose_view(np.concatenate([drawing.visible_points(j, c) for j, c in pts]))
    cols = min(len(idx), 4)
    rows = -(-len(idx) // cols)
    panel = 3.8 * min(max(view.box_aspect(), 0.3), 1.4) + 0.9         # panel height in inches
    fig = new_figure(figsize=(3.8 * cols, panel * rows + 0.6 + (0.5 if drawing.ranks else 0)),
                     layout="constrained")
    ax = None
    for c, (k, (jp, cp)) in enumerate(zip(idx, pts)):
        ax = fig.add_subplot(rows, cols, c + 1, projection="3d")
        drawing.draw(ax, jp, cp)
        apply_view(ax, view)
        ax.set_title(f"t = {t[k]:.4g} s", fontsize=10)
    drawing.legend(fig, ax)
    fig.suptitle(wrap_title(f"configuration: {model.name}\n{drawing.describe()}", fig, 10), fontsize=10)
    return fig


def plot_results(results, out_dir=None, joints=None, times=None, fmt="png", dpi=120, ranks=None,
                 large=LARGE_MODEL, labels=LABEL_LIMIT, overwrite=False):
    """Write the figures of a run (see the module's description) into one folder.

    Parameters
    ----------
    results : partree.simulation.results.SimulationResult or str
        The results, or their file.
    out_dir : str or os.PathLike, optional
        Folder of the figures, created if missing (its parent must exist).  Default: beside the
        results file, ``<results>_plots``, or ``plots``.
    joints : list of str, optional
        Joints of the trajectory figure (default: up to 6, spread over the tree).
    times : list of float, optional
        Times of the configuration panels (default: 4, evenly spaced).
    fmt : {"png", "pdf", "svg"}
        Figure format.
    dpi : float
        Resolution of ``png`` figures.
    ranks, large, labels
        How the configuration panels draw the tree (see :class:`~partree.plotting.tree.TreeDrawing`).
    overwrite : bool
        Replace existing figures of the same names.

    Returns
    -------
    list of str
        The files written.
    """
    need_matplotlib("plotting results")
    if fmt not in FORMATS:
        raise PartreeInputError(f"figure format {fmt!r}: use one of {', '.join(FORMATS)}")
    res = _results(results)
    if out_dir is None:
        out_dir = os.path.splitext(res.path)[0] + "_plots" if res.path else "plots"
    names = figure_names(res, fmt)
    if not names:
        raise PartreeInputError("the results hold nothing to plot (no joint coordinates, energy or wrenches)")
    model = res.model
    joints = list(joints) if joints else _default_joints(model, res=res)
    for j in joints:
        model.joint_id(j)                         # unknown names fail before anything is drawn
        if f"joints.{fmt}" in names:
            try:
                res.joint(j)
            except KeyError as e:
                raise PartreeInputError(str(e.args[0])) from None
    out_dir = check_output_dir(out_dir, names, overwrite=overwrite)
    files = []
    if f"joints.{fmt}" in names:
        _save(joints_figure(res, joints), out_dir, f"joints.{fmt}", dpi, files)
    if f"energy.{fmt}" in names:
        _save(energy_figure(res), out_dir, f"energy.{fmt}", dpi, files)
    if f"wrenches.{fmt}" in names:
        _save(wrenches_figure(res), out_dir, f"wrenches.{fmt}", dpi, files)
    if f"configuration.{fmt}" in names:
        _save(configuration_figure(res, times, ranks, large, labels), out_dir, f"configuration.{fmt}", dpi, files)
    return files
