"""partree show / partree animate: pictures of a model's tree and animations of results."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402  (Pillow comes with matplotlib)

import partree  # noqa: E402
from partree.plotting import animate_results, draw_tree, show_model  # noqa: E402
from partree.plotting.output import new_figure  # noqa: E402
from partree.plotting.tree import (TreeDrawing, choose_view, nearest_drawn_ancestor, rank_colors,  # noqa: E402
                                   select_bodies)


def _pixels(path):
    return np.asarray(Image.open(path).convert("RGB")).astype(np.float64) / 255.0


def _not_blank(img):
    """Share of pixels that are not (near) white, and number of distinct colours."""
    ink = np.any(img < 0.9, axis=2).mean()
    colours = np.unique((img * 255).astype(np.uint8).reshape(-1, 3), axis=0).shape[0]
    return ink, colours


def _rank_pixel_counts(img, nranks):
    """Saturated pixels per rank colour, by hue (antialiased thin lines keep their hue)."""
    from matplotlib.colors import rgb_to_hsv

    hsv = rgb_to_hsv(img.reshape(-1, 3))
    hue = hsv[hsv[:, 1] > 0.25, 0]
    ref = rgb_to_hsv(rank_colors(nranks)[:, :3])[:, 0]
    d = np.abs(hue[:, None] - ref[None, :])
    d = np.minimum(d, 1.0 - d)
    near = d.argmin(axis=1)[d.min(axis=1) < 0.04]
    return np.bincount(near, minlength=nranks)


def test_show_small_model(tmp_path):
    out = tmp_path / "threearm.png"
    path = show_model("threearm", out, size=(6, 5), dpi=80)
    assert path == str(out) and out.is_file()
    img = _pixels(out)
    assert img.shape == (400, 480, 3)                       # size x dpi, not cropped
    ink, colours = _not_blank(img)
    assert ink > 0.02 and colours > 20
    # the bodies are drawn in matplotlib's first colour
    c0 = np.array([0x1F, 0x77, 0xB4]) / 255.0
    assert np.sum(np.linalg.norm(img - c0, axis=2) < 0.1) > 200


def test_show_small_model_names_and_markers():
    m = partree.resolve_model("chain:n=5")
    fig = new_figure()
    ax = fig.add_subplot(projection="3d")
    drawing, view = draw_tree(ax, m, m.random_configuration(1))
    texts = {t.get_text().strip() for t in ax.texts}
    assert set(m.joint_names) <= {n for t in texts for n in t.split(", ")}
    labels = {h.get_label() for h in ax.get_legend_handles_labels()[0]}
    assert {"joint", "centre of mass", "base (fixed)"} <= labels
    # one segment per body from its parent's joint (or the base), one to its centre of mass
    assert drawing.nsegments == 2 * m.n


def test_show_large_model_coloured_by_rank(tmp_path):
    out = tmp_path / "big.png"
    show_model("autotree:nb=5000,bf=2", out, q="random", ranks=3, size=(6, 5), dpi=80)
    img = _pixels(out)
    assert img.shape == (400, 480, 3)
    counts = _rank_pixel_counts(img, 3)
    # each rank's colour covers far more than its legend entry (a few dozen pixels)
    assert np.all(counts > 500), counts


def test_rank_colours_follow_the_engine_partition():
    m = partree.resolve_model("autotree:nb=5000,bf=2")
    d = TreeDrawing(m, ranks=3)
    from partree.parallel.serial import PATH_WEIGHT, make_partition

    pt = make_partition(m, None, PATH_WEIGHT, nranks=3)
    own = pt.owner_for(3)
    np.testing.assert_array_equal(d.body_rank, own[pt.part_of[d.bodies]])
    assert sorted(set(d.body_rank.tolist())) == [0, 1, 2]
    assert d.large and d.ranks == 3 and not d.com


def test_sampled_drawing_joins_nearest_drawn_ancestor():
    m = partree.resolve_model("autotree:nb=3000,bf=1")           # a chain
    b = select_bodies(m, 100)
    assert b.size <= 100 and b[0] == 0 and b[-1] == m.n - 1    # the head and the tip are kept
    anc = nearest_drawn_ancestor(m.parent, b)
    assert anc[0] == -1
    # in a chain the nearest drawn ancestor of a drawn body is the drawn body before it
    np.testing.assert_array_equal(anc[1:], np.arange(b.size - 1))
    t = partree.resolve_model("autotree:nb=4095,bf=2")           # a complete binary tree
    bt = select_bodies(t, 400)
    at = nearest_drawn_ancestor(t.parent, bt)
    for k in np.flatnonzero(at >= 0)[::17]:                    # a true ancestor, none drawn between
        i, a = bt[k], bt[at[k]]
        p = t.parent[i]
        while p != a:
            assert p not in set(bt.tolist())
            p = t.parent[p]
            assert p >= 0


def _screen_extent(ax, points):
    """Width and height of points on the screen, through matplotlib's own projection."""
    from mpl_toolkits.mplot3d import proj3d

    ax.figure.canvas.draw()
    x, y, _ = proj3d.proj_transform(points[:, 0], points[:, 1], points[:, 2], ax.get_proj())
    return np.ptp(x), np.ptp(y)


@pytest.mark.parametrize("spec, q", [("autotree:nb=31,bf=2", "random"),     # planar in x-y
                                     ("scissor:units=3", "neutral")])       # planar in x-z
def test_planar_model_not_collapsed(spec, q):
    m = partree.resolve_model(spec)
    qv = m.random_configuration(0) if q == "random" else m.neutral()
    fig = new_figure()
    ax = fig.add_subplot(projection="3d")
    drawing, view = draw_tree(ax, m, qv)
    pts = drawing.visible_points(*drawing.points(qv))
    assert view.dims == 2
    w, h = _screen_extent(ax, pts)
    # the plane is seen face on: both screen extents keep most of the in-plane spread
    spread = np.sort(np.linalg.svd(pts - pts.mean(axis=0), compute_uv=False))[::-1]
    assert min(w, h) / max(w, h) > 0.6 * spread[1] / spread[0], (w, h, spread)


def test_view_of_a_tilted_plane():
    rng = np.random.default_rng(4)
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    pts = (rng.normal(size=(300, 3)) * [3.0, 2.0, 0.0]) @ Q.T    # a plane in no coordinate plane
    view = choose_view(pts)
    e, a = np.radians(view.elev), np.radians(view.azim)
    camera = np.array([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)])
    normal = Q[:, 2]
    # the camera looks along the plane's normal, tipped by the view's tilt (25 degrees) at most
    assert abs(camera @ normal) >= np.cos(np.radians(26.0))
    fig = new_figure()
    ax = fig.add_subplot(projection="3d")
    from partree.plotting import apply_view

    apply_view(ax, view)
    w, h = _screen_extent(ax, pts)
    assert min(w, h) / max(w, h) > 0.5
    # equal scales: matplotlib's projection is a multiple of the view's own screen axes
    from mpl_toolkits.mplot3d import proj3d

    x, y, _ = proj3d.proj_transform(*pts.T, ax.get_proj())
    S = np.column_stack([x - x.mean(), y - y.mean()])
    P = view.project(pts)
    P -= P.mean(axis=0)
    A = np.linalg.lstsq(P, S, rcond=None)[0]
    np.testing.assert_allclose(A / A[0, 0], np.eye(2), atol=1e-6)


def test_show_given_configuration_and_line_note(tmp_path):
    m = partree.resolve_model("chain:n=5")
    out = tmp_path / "chain.svg"
    show_model(m, out, q=m.neutral())
    text = out.read_text()
    assert "<svg" in text and "all joints lie on one line" in text
    with pytest.raises(partree.errors.PartreeInputError, match="needs 5"):
        show_model(m, tmp_path / "bad.png", q=np.zeros(3))


def test_animate_gif_frames(tmp_path):
    run = tmp_path / "run.h5"
    partree.simulate("chain:n=4", t_end=0.05, dt=0.01, out=run, progress=False)
    res = partree.load_results(run)
    assert len(res) == 6
    gif = tmp_path / "run.gif"
    animate_results(run, gif, fps=5, size=(4, 3), dpi=50)
    with Image.open(gif) as im:
        assert im.n_frames == 6 and im.size == (200, 150)
        assert im.info["duration"] == 200
        frames = []
        for k in range(im.n_frames):
            im.seek(k)
            frames.append(np.asarray(im.convert("RGB")))
    assert not np.array_equal(frames[0], frames[-1])        # the time label changes
    short = tmp_path / "short.gif"
    animate_results(res, short, max_frames=3, size=(4, 3), dpi=50)
    with Image.open(short) as im:
        assert im.n_frames == 3


def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "partree", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_cli_show_refusals(tmp_path):
    r = _cli("show", "threearm", "--out", str(tmp_path / "no" / "such" / "dir" / "a.png"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "no").exists()
    out = tmp_path / "a.png"
    out.write_bytes(b"keep me")
    r = _cli("show", "threearm", "--out", str(out))
    assert r.returncode == 2 and "exists" in r.stderr and "--force" in r.stderr and "Traceback" not in r.stderr
    assert out.read_bytes() == b"keep me"
    r = _cli("show", "threearm", "--out", str(out), "--force", "--size", "4", "3", "--dpi", "50")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = _cli("show", "threearm", "--out", str(tmp_path / "a.jpg"))
    assert r.returncode == 2 and ".png" in r.stderr and "Traceback" not in r.stderr
    if os.name == "posix" and os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        r = _cli("show", "threearm", "--out", str(ro / "a.png"))
        assert r.returncode == 2 and "not writable" in r.stderr
        ro.chmod(0o755)


def test_cli_animate(tmp_path):
    import shutil

    run = tmp_path / "run.h5"
    partree.simulate("chain:n=4", t_end=0.03, dt=0.01, out=run, progress=False)
    r = _cli("animate", str(run), "--out", str(tmp_path / "run.gif"), "--size", "3", "3", "--dpi", "40",
             "--no-progress")
    assert r.returncode == 0, r.stderr
    with Image.open(tmp_path / "run.gif") as im:
        assert im.n_frames == 4
    r = _cli("animate", str(run), "--out", str(tmp_path / "run.gif"))
    assert r.returncode == 2 and "--force" in r.stderr
    r = _cli("animate", str(run), "--out", str(tmp_path / "run.mp4"), "--size", "3", "3", "--dpi", "40",
             "--no-progress")
    if shutil.which("ffmpeg"):
        assert r.returncode == 0 and (tmp_path / "run.mp4").stat().st_size > 0
    else:
        assert r.returncode == 2 and "ffmpeg" in r.stderr and "Traceback" not in r.stderr
        assert not (tmp_path / "run.mp4").exists()


def test_cli_without_matplotlib_names_the_extra(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; from partree.cli import main; "
            f"sys.exit(main(['show', 'threearm', '--out', {str(tmp_path / 'a.png')!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "partree[plot]" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "a.png").exists()


def test_closed_loops_are_drawn_to_their_cut_joints():
    """A model with loops: each loop end's body is drawn from its origin to its frame of the cut
    joint (the rest of a scissor bar), the cut joints as markers, and they follow an animation."""
    m = partree.resolve_model("scissor:units=3,closed=true,support=slider")
    d = TreeDrawing(m)
    joints, coms = d.points(m.neutral())
    o, e = d._loop_points
    L = m.loops
    assert o.shape == e.shape == (int(np.count_nonzero(L.body_a >= 0) + np.count_nonzero(L.body_b >= 0)), 3)
    # the loops close at q = 0: the two ends of each loop between bodies meet
    k = 0
    for a_, b_ in zip(L.body_a, L.body_b):
        if a_ >= 0 and b_ >= 0:
            assert np.abs(e[k] - e[k + 1]).max() < 1e-12
        k += int(a_ >= 0) + int(b_ >= 0)
    fig = new_figure()
    ax = fig.add_subplot(projection="3d")
    art = d.draw(ax, joints, coms)
    assert "loops" in art and "cuts" in art
    q1 = m.neutral() + 0.01
    d.update(art, *d.points(q1))
    assert np.allclose(np.asarray(art["loops"]._segments3d)[:, 1], d._loop_points[1])
