"""Figures of simulation results (matplotlib, Agg backend: no display needed).

``plot_results(results_or_path, out_dir, joints=None, times=None, fmt='png')`` writes

    joints.<fmt>         joint coordinates and velocities against time
    energy.<fmt>         kinetic, potential and total energy, and the relative energy drift
    wrenches.<fmt>       joint force and torque magnitudes (when wrenches were recorded)
    configuration.<fmt>  3-D line drawings of the tree (body origins, parent to child) at chosen times

and returns the list of paths.  ``draw_configuration(model, q, ax)`` draws one configuration.
"""
from __future__ import annotations

import os

import numpy as np

MAX_DRAWN_BODIES = 20000


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def draw_configuration(model, q, ax, color="C0", max_bodies=MAX_DRAWN_BODIES, label=None):
    """Draw the tree at configuration q on a 3-D axes: a segment from each body's parent origin (the
    world origin for roots) to its origin, and a dot at every body origin."""
    from .algorithms.kinematics import forward_kinematics
    from mpl_toolkits.mplot3d.art3d import Line3DCollection
    kin = forward_kinematics(model, q)
    p = kin.p
    n = model.n
    ids = np.arange(n) if n <= max_bodies else np.unique(np.linspace(0, n - 1, max_bodies).astype(np.int64))
    par = model.parent[ids]
    start = np.where(par[:, None] >= 0, p[np.maximum(par, 0)], 0.0)
    segs = np.stack([start, p[ids]], axis=1)
    ax.add_collection3d(Line3DCollection(segs, colors=color, linewidths=1.2 if n < 500 else 0.4, label=label))
    ax.scatter(p[ids, 0], p[ids, 1], p[ids, 2], s=8 if n < 200 else 1, color=color, depthshade=False)
    ax.scatter([0], [0], [0], s=30, marker="s", color="k")
    return p


def _set_equal_3d(ax, pts):
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    c = 0.5 * (lo + hi)
    r = 0.5 * max(float((hi - lo).max()), 1e-3) * 1.05
    ax.set_xlim(c[0] - r, c[0] + r)
    ax.set_ylim(c[1] - r, c[1] + r)
    ax.set_zlim(c[2] - r, c[2] + r)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")


def _default_joints(model, k=6):
    """Up to k joints with at least one dof, spread over the tree."""
    with_dof = np.flatnonzero(model.nv_j > 0)
    pick = with_dof if with_dof.size <= k else with_dof[np.unique(np.linspace(0, with_dof.size - 1, k).astype(int))]
    return [model.joint_names[int(i)] for i in pick]


def plot_results(results, out_dir=None, joints=None, times=None, fmt="png", dpi=120):
    """Write the figures of a run (``SimulationResult`` or results file path); returns the paths."""
    from .simulation.results import SimulationResult, load_results
    plt = _plt()
    res = results if isinstance(results, SimulationResult) else load_results(results)
    if out_dir is None:
        base = res.path or "."
        out_dir = os.path.splitext(base)[0] + "_plots" if res.path else "plots"
    os.makedirs(out_dir, exist_ok=True)
    model = res.model
    t = res.t
    files = []
    title = f"{model.name}: {res.options.get('integrator', '')}, dt = {res.options.get('dt', '')}"

    # ---- joint trajectories
    joints = list(joints) if joints else _default_joints(model)
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for j in joints:
        qs, vs = res.joint(j)
        jt = model.joint_type(j)
        if jt in ("spherical", "free"):
            # quaternion joints: plot the rotation angle 2 acos|w| and the speed |w|
            quat = qs[:, -4:]
            ang = 2 * np.arccos(np.clip(np.abs(quat[:, 3]), 0, 1))
            axes[0].plot(t, ang, label=f"{j} (rotation angle)")
            axes[1].plot(t, np.linalg.norm(vs[:, -3:], axis=1), label=f"{j} (|ω|)")
        else:
            for c in range(qs.shape[1]):
                lab = j if qs.shape[1] == 1 else f"{j}[{c}]"
                axes[0].plot(t, qs[:, c], label=lab)
                axes[1].plot(t, vs[:, c], label=lab)
    axes[0].set_ylabel("q [rad or m]")
    axes[1].set_ylabel("q̇ [rad/s or m/s]")
    axes[1].set_xlabel("t [s]")
    axes[0].legend(fontsize=8, ncol=3, loc="best")
    axes[0].set_title(f"joint trajectories: {title}")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    f = os.path.join(out_dir, f"joints.{fmt}")
    fig.savefig(f, dpi=dpi)
    plt.close(fig)
    files.append(f)

    # ---- energy
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    axes[0].plot(t, res.kinetic, label="kinetic")
    axes[0].plot(t, res.potential, label="potential")
    axes[0].plot(t, res.energy, "k", lw=1.5, label="total")
    axes[0].set_ylabel("energy [J]")
    axes[0].legend(fontsize=8)
    axes[0].set_title(f"energy: {title}")
    E0 = res.energy[0]
    scale = max(abs(E0), float(np.max(np.abs(res.kinetic) + np.abs(res.potential))), 1e-300)
    axes[1].plot(t, (res.energy - E0) / scale, "C3")
    axes[1].set_ylabel("relative drift (E - E(0)) / scale")
    axes[1].set_xlabel("t [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    f = os.path.join(out_dir, f"energy.{fmt}")
    fig.savefig(f, dpi=dpi)
    plt.close(fig)
    files.append(f)

    # ---- joint forces
    if res.joint_wrench is not None and len(res.wrench_joints):
        names = res.wrench_joints
        W = res.joint_wrench
        show = [k for k, nm in enumerate(names) if nm in joints] or list(range(min(6, len(names))))
        fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
        for k in show:
            axes[0].plot(t, np.linalg.norm(W[:, k, 3:], axis=1), label=names[k])
            axes[1].plot(t, np.linalg.norm(W[:, k, :3], axis=1), label=names[k])
        axes[0].set_ylabel("|f| joint force [N]")
        axes[1].set_ylabel("|n| joint torque [N m]")
        axes[1].set_xlabel("t [s]")
        axes[0].set_title(f"joint (constraint + drive) wrenches, child frame: {model.name}")
        axes[0].legend(fontsize=8, ncol=3)
        for ax in axes:
            ax.grid(alpha=0.3)
        fig.tight_layout()
        f = os.path.join(out_dir, f"wrenches.{fmt}")
        fig.savefig(f, dpi=dpi)
        plt.close(fig)
        files.append(f)

    # ---- configurations
    if times is None:
        times = np.linspace(t[0], t[-1], 4)
    idx = [int(np.argmin(np.abs(t - tt))) for tt in times]
    fig = plt.figure(figsize=(4.2 * len(idx), 4.6))
    pts = []
    axes = []
    for c, k in enumerate(idx):
        ax = fig.add_subplot(1, len(idx), c + 1, projection="3d")
        pts.append(draw_configuration(model, res.q[k], ax, color=f"C{c}"))
        ax.set_title(f"t = {t[k]:.4g} s", fontsize=10)
        axes.append(ax)
    allp = np.concatenate(pts + [np.zeros((1, 3))])
    for ax in axes:
        _set_equal_3d(ax, allp)
    fig.suptitle(f"configuration (body origins): {model.name}")
    fig.tight_layout()
    f = os.path.join(out_dir, f"configuration.{fmt}")
    fig.savefig(f, dpi=dpi)
    plt.close(fig)
    files.append(f)
    return files
