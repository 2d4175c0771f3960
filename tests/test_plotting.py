"""partree.plotting: figures from a results file."""
import numpy as np

import partree
from partree.plotting import plot_results
from partree.simulation import simulate


def test_plot_writes_pngs(tmp_path):
    m = partree.models.space_robot()
    rng = np.random.default_rng(0)
    out = tmp_path / "sr.h5"
    simulate(m, 0.2, 0.01, qd0=m.random_velocity(rng, 0.3), out=out, wrench_joints=["L11", "L21"],
             progress=False, verbose=False)
    files = plot_results(out, tmp_path / "figs", joints=["base", "L11", "L12"])
    names = sorted(p.split("/")[-1] for p in files)
    assert names == ["configuration.png", "energy.png", "joints.png", "wrenches.png"]
    for f in files:
        with open(f, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    pdfs = plot_results(out, tmp_path / "pdf", fmt="pdf", times=[0.0, 0.2])
    assert all(p.endswith(".pdf") for p in pdfs)


def test_seed_examples_quick(tmp_path):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "examples" / "seed_examples.py"
    spec = importlib.util.spec_from_file_location("seed_examples", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    files = mod.main(["--quick", "--only", "002", "--out", str(tmp_path)])
    assert any(f.endswith("seed002_three_arm.png") for f in files)


# ---------------------------------------------------------------- what the figures say
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402


from partree.plotting import configuration_figure, energy_figure, joints_figure, wrenches_figure  # noqa: E402
from partree.simulation.results import SimulationResult  # noqa: E402


def _synthetic(model, q, t, kinetic, potential, wrenches=None, names=()):
    """A SimulationResult made by hand, so a figure can be held against known values."""
    K = len(t)
    series = {"t": np.asarray(t, float), "q": np.asarray(q, float), "qd": np.zeros((K, model.nv)),
              "kinetic": np.asarray(kinetic, float), "potential": np.asarray(potential, float)}
    series["energy"] = series["kinetic"] + series["potential"]
    if wrenches is not None:
        series["joint_wrench"] = np.asarray(wrenches, float)
    return SimulationResult(series, {"integrator": "rk4", "dt": 0.1}, {}, model, names)


def _check_layout(fig):
    """Nothing drawn reaches past the figure's edge, and no legend covers the title."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    boxes = [ax.get_tightbbox(r) for ax in fig.axes]             # ticks, labels, titles, legends drawn
    if fig._suptitle is not None:
        boxes.append(fig._suptitle.get_window_extent(r))
    for bb in boxes:
        assert bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1, bb
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for lg in legends:
        bb = lg.get_window_extent(r)
        assert bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1, bb
    if fig._suptitle is not None:
        st = fig._suptitle.get_window_extent(r)
        for ax in fig.axes:
            assert not ax.get_window_extent(r).overlaps(st)
        for lg in legends:
            assert not lg.get_window_extent(r).overlaps(st), "a legend covers the title"


def test_energy_figure_says_what_the_drift_is_divided_by():
    m = partree.resolve_model("chain:n=3")
    t = np.linspace(0, 1, 11)
    q = np.tile(m.neutral(), (11, 1))
    kin = 2.0 + 1e-9 * t
    fig = energy_figure(_synthetic(m, q, t, kin, np.zeros(11)))
    top, drift = fig.axes[0], fig.axes[1]
    assert drift.get_ylabel() == "(E − E₀) / |E₀|"
    np.testing.assert_allclose(drift.get_lines()[0].get_ydata(), 0.5e-9 * t, atol=1e-15)
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert labels == ["total", "kinetic (on top of total)", "potential"]
    styles = {(ln.get_color(), ln.get_linestyle()) for ln in top.get_lines()}
    assert len(styles) == 3
    _check_layout(fig)
    # zero initial energy: divided by the largest T + |V| instead, and said so
    fig = energy_figure(_synthetic(m, q, t, 3.0 * t, -3.0 * t + 1e-6 * t))
    assert fig.axes[1].get_ylabel() == "(E − E₀) / max(T + |V|)"


def test_wrench_figure_shows_every_joint_and_names_the_largest():
    m = partree.resolve_model("chain:n=5")
    m.name = "a chain with a long descriptive name (n=5, revolute, seed paper's example)"   # a wide title
    t = np.linspace(0, 1, 21)
    K, names = len(t), list(m.joint_names)
    W = np.zeros((K, 5, 6))
    scale = np.array([1e-2, 1.0, 1e3, 10.0, 1e-1])               # joint 2 dominates by 10^5
    W[:, :, 5] = scale * (1.5 + np.sin(t))[:, None]
    W[:, :, 0] = 0.5 * scale * (1.5 + np.cos(t))[:, None]
    fig = wrenches_figure(_synthetic(m, np.tile(m.neutral(), (K, 1)), t, np.ones(K), np.zeros(K), W, names))
    _check_layout(fig)
    f_ax, n_ax = fig.axes[0], fig.axes[1]
    assert f_ax.get_yscale() == "log" and n_ax.get_yscale() == "log"
    title = fig._suptitle.get_text()
    assert f"largest force: joint {names[2]}" in title and f"largest torque: joint {names[2]}" in title
    legend = [x.get_text() for x in f_ax.get_legend().get_texts()]
    assert legend == [names[k] for k in np.argsort(-scale)]      # largest first
    lo, hi = f_ax.get_ylim()
    assert lo <= 1e-2 and hi >= 2.5e3                            # the smallest joint is on the axes too


def test_joint_figure_overlapping_lines_stay_distinguishable():
    m = partree.resolve_model("chain:n=4")
    t = np.linspace(0, 1, 30)
    q = np.zeros((30, m.nq))
    q[:, 0] = q[:, 1] = np.sin(t)                                # two joints on top of each other
    q[:, 2] = np.cos(t)
    res = _synthetic(m, q, t, np.ones(30), np.zeros(30))
    res.qd[:, 0] = res.qd[:, 1] = np.cos(t)
    fig = joints_figure(res, joints=m.joint_names[:3])
    ax = fig.axes[0]
    labels = [x.get_text() for x in ax.get_legend().get_texts()]
    assert labels[1] == f"{m.joint_names[1]} (on top of {m.joint_names[0]})"
    assert labels[2] == m.joint_names[2]
    looks = [(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in ax.get_lines()]
    assert len(set(looks)) == len(looks) == 3
    marks = [ln.get_markevery() for ln in ax.get_lines()]
    assert marks[0] != marks[1]                                  # markers at staggered samples
    _check_layout(fig)


def test_configuration_figure_shows_a_planar_tree_face_on():
    from mpl_toolkits.mplot3d import proj3d

    from partree.plotting.tree import TreeDrawing

    m = partree.resolve_model("autotree:nb=31,bf=2")              # joints about z: planar in x-y
    rng = np.random.default_rng(2)
    q0 = m.random_configuration(rng)
    q = np.array([q0 + 0.2 * k for k in range(3)])
    fig = configuration_figure(_synthetic(m, q, [0.0, 0.5, 1.0], np.ones(3), np.zeros(3)))
    axes = [ax for ax in fig.axes if hasattr(ax, "get_proj")]
    assert len(axes) == 3
    fig.canvas.draw()
    d = TreeDrawing(m)
    for ax, qk in zip(axes, q):
        p = d.visible_points(*d.points(qk))
        x, y, _ = proj3d.proj_transform(*p.T, ax.get_proj())
        assert min(np.ptp(x), np.ptp(y)) > 0.3 * max(np.ptp(x), np.ptp(y))
        assert ax.get_xlim() == axes[0].get_xlim() and ax.get_ylim() == axes[0].get_ylim()   # one set of axes


def test_plot_cli_refuses_to_overwrite(tmp_path):
    run = tmp_path / "run.h5"
    partree.simulate("chain:n=3", t_end=0.02, dt=0.01, out=run, progress=False)
    figs = tmp_path / "figs"

    def cli(*a):
        return subprocess.run([sys.executable, "-m", "partree", "plot", str(run), *a], capture_output=True,
                              text=True, timeout=300, env=dict(os.environ, PYTHONWARNINGS="ignore"))

    r = cli("--out", str(figs), "--dpi", "40")
    assert r.returncode == 0, r.stderr
    written = sorted(os.listdir(figs))
    assert written == ["configuration.png", "energy.png", "joints.png"]
    before = {f: os.path.getmtime(figs / f) for f in written}
    r = cli("--out", str(figs))
    assert r.returncode == 2 and "--force" in r.stderr and "Traceback" not in r.stderr
    assert {f: os.path.getmtime(figs / f) for f in written} == before
    r = cli("--out", str(figs), "--force", "--dpi", "40")
    assert r.returncode == 0, r.stderr
    r = cli("--out", str(tmp_path / "missing" / "figs"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr


def test_plots_follow_what_a_run_recorded(tmp_path):
    """A run that recorded a subset (record / record_joints) gets the figures of what it kept;
    asking for a figure of something it did not record is refused by name."""
    import pytest

    from partree.errors import PartreeInputError
    from partree.plotting import animate_results, configuration_figure, energy_figure, joints_figure

    m = partree.models.space_robot()
    rng = np.random.default_rng(1)
    qd0 = m.random_velocity(rng, 0.3)
    some = tmp_path / "some.h5"                      # two joints' q and qd, no energy
    simulate(m, 0.1, 0.01, qd0=qd0, out=some, record="q,qd", record_joints=["L11", "L12"], progress=False,
             verbose=False)
    files = plot_results(some, tmp_path / "some_figs")
    assert sorted(p.split("/")[-1] for p in files) == ["joints.png"]
    full = partree.simulate(m, 0.1, 0.01, qd0=qd0, progress=False, verbose=False)
    ax = joints_figure(some).axes[0]
    got = {ln.get_label().split(" ")[0]: ln.get_ydata() for ln in ax.get_lines()}
    assert set(got) == {"L11", "L12"}
    assert np.allclose(got["L11"], full.joint("L11")[0][:, 0], rtol=0, atol=1e-12)
    with pytest.raises(PartreeInputError, match="not recorded"):
        plot_results(some, tmp_path / "x", joints=["L21"])
    for f in (energy_figure, configuration_figure):
        with pytest.raises(PartreeInputError, match="record"):
            f(some)
    with pytest.raises(PartreeInputError, match="record_joints"):
        animate_results(some, tmp_path / "a.gif")
    only_q = tmp_path / "q.h5"                       # every joint's q only: the tree and q, no velocity axes
    simulate(m, 0.1, 0.01, qd0=qd0, out=only_q, record="q", progress=False, verbose=False)
    files = plot_results(only_q, tmp_path / "q_figs")
    assert sorted(p.split("/")[-1] for p in files) == ["configuration.png", "joints.png"]
    assert len(joints_figure(only_q).axes) == 1
    energy_only = tmp_path / "e.h5"
    simulate(m, 0.1, 0.01, qd0=qd0, out=energy_only, record="energy", progress=False, verbose=False)
    assert [p.split("/")[-1] for p in plot_results(energy_only, tmp_path / "e_figs")] == ["energy.png"]
