"""Drawing a model's tree: a 3-D stick figure of its bodies in one configuration.

Every picture of a model (``partree show``, ``partree animate`` and the configuration panels of
``partree plot``) goes through one drawing, :class:`TreeDrawing`:

- every drawn body ``i`` is a segment from its parent's joint to its own joint, and a shorter
  segment from its joint to its centre of mass; joints are markers, the base (where the roots'
  joints are fixed, or a floating root body) is a black square or diamond, and small models carry
  their joint names;
- a large model (more than ``large`` bodies) is drawn as the parts of the partition the parallel
  engine would use on ``ranks`` ranks, each part in the colour of its rank, with a legend of the
  ranks;
- at most ``max_segments`` segments are drawn: the bodies heading the largest subtrees (the
  branching skeleton) and an even sample along the numbering (long chains), each joined to its
  nearest drawn ancestor, so the drawn figure keeps the tree's shape at any size.

The camera looks along the direction in which the drawn points spread least (their smallest
principal axis, tipped by a small angle so the figure keeps some depth). Seen from the side, the
world's z axis is up on the screen; seen from above, the direction of largest spread runs across
it. A planar model is thus seen face on and never collapses to a line, and the axes have equal
scales (orthographic projection, box proportional to the data).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import joints as J
from ..algorithms.kinematics import forward_kinematics
from ..errors import PartreeInputError
from .output import check_output_file, need_matplotlib, new_figure, save_atomic, wrap_title

#: models with more bodies than this are drawn as partition parts coloured by rank
LARGE_MODEL = 2000
#: ranks of the partition drawn for a large model when no number is given
DEFAULT_RANKS = 4
#: most segments drawn in one picture
MAX_SEGMENTS = 20000
#: joint names are written on models with at most this many bodies
LABEL_LIMIT = 30
#: angle in degrees between the viewing direction and the direction of least spread
VIEW_TILT_DEG = 25.0


def engine_partition(model, nranks):
    """The partition the parallel engine uses on ``nranks`` ranks and the rank of each part.

    This is the one place where plotting reaches into the parallel package.

    Parameters
    ----------
    model : partree.Model
        The model.
    nranks : int
        Number of ranks (MPI ranks or Dask workers).

    Returns
    -------
    partition : partree.parallel.partition.Partition
        The parts (``part_of`` gives every body's part).
    owner : numpy.ndarray
        Rank of every part, shape ``(partition.nparts,)``.
    """
    from ..parallel.partition import PATH_WEIGHT, make_partition

    nranks = int(nranks)
    pt = make_partition(model, None, PATH_WEIGHT, nranks=nranks)
    return pt, np.asarray(pt.owner_for(nranks), dtype=np.int64)


def rank_colors(nranks):
    """One RGBA colour per rank: matplotlib's qualitative palettes up to 20 ranks, evenly spaced
    colours of the ``turbo`` map beyond.

    Parameters
    ----------
    nranks : int
        Number of ranks.

    Returns
    -------
    numpy.ndarray
        Colours, shape ``(nranks, 4)``, values in [0, 1].
    """
    from matplotlib import colormaps

    nranks = int(nranks)
    if nranks <= 10:
        return np.column_stack([np.asarray(colormaps["tab10"].colors)[:nranks], np.ones(nranks)])
    if nranks <= 20:
        c = np.asarray(colormaps["tab20"].colors)
        c = np.concatenate([c[0::2], c[1::2]])[:nranks]       # the strong colours first
        return np.column_stack([c, np.ones(nranks)])
    return colormaps["turbo"](np.linspace(0.05, 0.95, nranks))


def select_bodies(model, max_bodies):
    """The bodies drawn when a model has more than ``max_bodies``: half of them the heads of the
    largest subtrees (the branching skeleton of the tree, top levels first), half an even sample
    along the numbering (which keeps long chains whole in outline).

    Parameters
    ----------
    model : partree.Model
        The model.
    max_bodies : int
        Most bodies to keep.

    Returns
    -------
    numpy.ndarray
        Increasing body indices, at most ``max_bodies`` of them (all bodies for a small model).
    """
    n = model.n
    max_bodies = max(int(max_bodies), 1)
    if n <= max_bodies:
        return np.arange(n, dtype=np.int64)
    head = max_bodies // 2
    order = np.argsort(-model.subtree_sizes(), kind="stable")       # ties: lower numbers first
    spread = np.round(np.linspace(0, n - 1, max_bodies - head)).astype(np.int64)
    return np.union1d(order[:head], spread).astype(np.int64)


def nearest_drawn_ancestor(parent, bodies):
    """For every drawn body, its nearest drawn strict ancestor (-1 where none is drawn).

    Pointer jumping over all bodies: every body points at its parent, every drawn body at
    itself, and the pointers are composed with themselves until nothing changes, which takes
    log2 of the longest run of undrawn bodies steps.

    Parameters
    ----------
    parent : numpy.ndarray
        Parent of every body (-1 at the roots).
    bodies : numpy.ndarray
        Increasing indices of the drawn bodies.

    Returns
    -------
    numpy.ndarray
        Positions in ``bodies`` of each drawn body's nearest drawn ancestor, or -1.
    """
    n = parent.shape[0]
    if bodies.size == n:
        up = parent.astype(np.int64)
    else:
        f = parent.astype(np.int64).copy()
        f[bodies] = bodies
        while True:
            ok = f >= 0
            g = f.copy()
            g[ok] = f[f[ok]]
            if np.array_equal(g, f):
                break
            f = g
        p = parent[bodies]
        up = np.where(p >= 0, f[np.maximum(p, 0)], -1)
    pos = np.searchsorted(bodies, np.maximum(up, 0))
    return np.where(up >= 0, pos, -1).astype(np.int64)


@dataclass
class View:
    """A camera and the axis limits of a 3-D picture.

    Attributes
    ----------
    elev, azim, roll : float
        matplotlib's view angles in degrees.
    lo, hi : numpy.ndarray
        Lower and upper axis limits, shape ``(3,)``.
    dims : int
        Number of directions in which the points spread (0: one point, 1: a line, 2: a plane,
        3: a solid), at a relative tolerance of 1e-6.
    """
    elev: float
    azim: float
    roll: float
    lo: np.ndarray
    hi: np.ndarray
    dims: int

    def screen_axes(self):
        """The world directions of the screen's right and up, shape ``(2, 3)``."""
        a, e, r = np.radians(self.azim), np.radians(self.elev), np.radians(self.roll)
        right = np.array([-np.sin(a), np.cos(a), 0.0])
        up = np.array([-np.sin(e) * np.cos(a), -np.sin(e) * np.sin(a), np.cos(e)])
        # matplotlib's roll turns the picture counterclockwise
        return np.stack([np.cos(r) * right - np.sin(r) * up, np.sin(r) * right + np.cos(r) * up])

    def project(self, points):
        """Screen coordinates (right, up) of world points, in metres, shape ``(m, 2)``."""
        return np.asarray(points, dtype=np.float64).reshape(-1, 3) @ self.screen_axes().T

    def box_aspect(self):
        """Height over width of the axis box as it appears on the screen."""
        corners = np.array([[x, y, z] for x in (self.lo[0], self.hi[0]) for y in (self.lo[1], self.hi[1])
                            for z in (self.lo[2], self.hi[2])])
        w, h = np.ptp(self.project(corners), axis=0)
        return float(h / max(w, 1e-300))


def _prefer(v):
    """``v`` or ``-v``: the one pointing up (+z), else towards -y, else towards +x."""
    for c, s in ((2, 1.0), (1, -1.0), (0, 1.0)):
        if abs(v[c]) > 1e-9:
            return v if s * v[c] > 0 else -v
    return v


def _camera(e1, e2, e3, tilt):
    """matplotlib's view angles for a camera along ``e3`` tipped by ``tilt`` degrees towards
    ``e2``, and how far the tip points up the picture (positive: towards its top)."""
    t = np.radians(tilt)
    d = np.cos(t) * e3 + np.sin(t) * e2
    d /= np.linalg.norm(d)
    elev = float(np.degrees(np.arcsin(np.clip(d[2], -1.0, 1.0))))
    azim = float(np.degrees(np.arctan2(d[1], d[0]))) if abs(d[2]) < 0.99999 else 0.0
    if abs(d[2]) <= 0.9:
        return elev, azim, 0.0, 0.0      # matplotlib's roll 0 keeps the world z axis up on the screen
    # looking down (or up): z says nothing about up, so turn the longest spread across the screen
    a, e = np.radians(azim), np.radians(elev)
    right = np.array([-np.sin(a), np.cos(a), 0.0])
    up = np.array([-np.sin(e) * np.cos(a), -np.sin(e) * np.sin(a), np.cos(e)])
    roll = -float(np.degrees(np.arctan2(e1 @ up, e1 @ right)))
    # of the two ways across, the one on which the world axis nearest e1 increases to the right
    k = int(np.argmax(np.abs(e1)))
    r = np.radians(roll)
    if (np.cos(r) * right - np.sin(r) * up)[k] < 0:
        roll += 180.0
    r = np.radians(roll)
    roll = (roll + 180.0) % 360.0 - 180.0
    return elev, azim, roll, float(e2 @ (np.sin(r) * right + np.cos(r) * up))


def choose_view(points, tilt=VIEW_TILT_DEG):
    """The camera that shows a set of points best: along their direction of least spread,
    tipped by ``tilt`` degrees towards the middle one.  Where the camera looks from the side, the
    world z axis is up on the screen; where it looks down (or up), the direction of largest
    spread runs across the screen, the coordinate axis nearest to it increasing to the right.

    Parameters
    ----------
    points : numpy.ndarray
        Points to show, shape ``(m, 3)``; non-finite rows are ignored.
    tilt : float
        Degrees between the viewing direction and the direction of least spread (0: face on).

    Returns
    -------
    View
        Camera angles, equal-scale axis limits around the points, and their dimension.
    """
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    P = P[np.isfinite(P).all(axis=1)]
    if P.shape[0] == 0:
        P = np.zeros((1, 3))
    if P.shape[0] > 200_000:
        P = P[np.round(np.linspace(0, P.shape[0] - 1, 200_000)).astype(np.int64)]
    X = P - P.mean(axis=0)
    _, s, Vt = np.linalg.svd(X, full_matrices=False)
    s = np.concatenate([s, np.zeros(3 - s.size)])
    dims = int(np.sum(s > 1e-6 * max(s[0], 1e-300))) if s[0] > 0 else 0
    z = np.array([0.0, 0.0, 1.0])
    if dims >= 2:
        e1, e2, e3 = Vt[0], Vt[1], np.cross(Vt[0], Vt[1])
        if s[1] > 0.75 * s[0]:           # no clear longest direction: a world axis across the screen
            w = np.eye(3) - np.outer(np.eye(3) @ e3, e3)
            e1 = w[int(np.argmax(np.linalg.norm(w, axis=1)))]
            e1 = e1 / np.linalg.norm(e1)
            e2 = np.cross(e3, e1)
    elif dims == 1:                      # a line: look down on it from above (or from -y)
        e1 = Vt[0]
        w = z - (z @ e1) * e1
        e3 = w / np.linalg.norm(w) if np.linalg.norm(w) > 1e-6 else np.cross(e1, [0.0, 1.0, 0.0])
        e3 /= np.linalg.norm(e3)
        e2 = np.cross(e3, e1)
    else:
        e1, e2, e3 = np.eye(3)
    e3, e2 = _prefer(e3), _prefer(e2)
    elev, azim, roll, up_tilt = _camera(e1, e2, e3, float(tilt))
    if up_tilt > 1e-9:
        # looking down, tipped towards the top of the picture: the box's near edge, which carries
        # the tick labels, would run along the top under the title; tip the other way
        elev, azim, roll, _ = _camera(e1, -e2, e3, float(tilt))
    lo, hi = P.min(axis=0), P.max(axis=0)
    span = hi - lo
    big = max(float(span.max()), 1e-3)
    grow = np.maximum(0.04 * big, 0.5 * (0.25 * big - span))   # margins; every axis at least 25% deep
    return View(elev, azim, roll, lo - grow, hi + grow, dims)


def apply_view(ax, view):
    """Set a 3-D axes to a :class:`View`: orthographic projection, the camera angles, the limits
    and a box proportional to them, so that a metre is as long along every axis.

    Parameters
    ----------
    ax : mpl_toolkits.mplot3d.axes3d.Axes3D
        The axes.
    view : View
        Camera and limits (from :func:`choose_view`).
    """
    ax.set_proj_type("ortho")
    ax.set_facecolor("none")             # an axis label reaching into a neighbour stays visible
    ax.view_init(elev=view.elev, azim=view.azim, roll=view.roll)
    ax.set_xlim(view.lo[0], view.hi[0])
    ax.set_ylim(view.lo[1], view.hi[1])
    ax.set_zlim(view.lo[2], view.hi[2])
    span = view.hi - view.lo
    ax.set_box_aspect(span, zoom=0.95)
    from matplotlib.ticker import MaxNLocator

    seen = span * np.linalg.norm(view.screen_axes(), axis=0)     # length of each axis on the screen
    for name, axis, w in zip("xyz", (ax.xaxis, ax.yaxis, ax.zaxis), seen):
        axis.set_pane_color((0.96, 0.96, 0.96, 1.0))
        axis.label.set_text(f"{name} [m]")
        axis.label.set_fontsize(8)
        axis.labelpad = 10
        if w < 0.25 * seen.max():        # short on the screen: its ticks would pile up
            axis.set_ticks([])
            axis.label.set_text("")
        else:
            axis.set_major_locator(MaxNLocator(nbins=max(2, int(round(7 * w / seen.max())))))
    ax.tick_params(labelsize=7, pad=0)


def _with_alpha(rgba, factor):
    c = np.array(rgba, dtype=np.float64, copy=True)
    c[..., 3] *= factor
    return c


class TreeDrawing:
    """What to draw of a model, decided once and drawn in any number of configurations.

    Parameters
    ----------
    model : partree.Model
        The model.
    ranks : int or None
        Colour the bodies by the rank that owns them in the partition the parallel engine uses on
        this many ranks (see :func:`engine_partition`).  None: :data:`DEFAULT_RANKS` for a model
        with more than ``large`` bodies, otherwise one colour; 0: one colour.
    large : int
        Models with more bodies than this count as large (rank colours by default, no markers,
        no centre-of-mass segments).
    max_segments : int
        Most segments drawn; larger models are drawn through :func:`select_bodies`.
    labels : int
        Write the joint names when the model has at most this many bodies (0: never).
    com : bool or None
        Draw each body's segment from its joint to its centre of mass (None: for models that are
        not large).

    Attributes
    ----------
    bodies : numpy.ndarray
        The drawn bodies.
    ranks : int
        Number of ranks coloured (0: one colour).
    nparts : int
        Number of parts of the partition coloured (0 without ranks).
    body_rank : numpy.ndarray or None
        Rank of every drawn body.
    rank_bodies, rank_parts : numpy.ndarray or None
        Number of bodies and of parts of every rank (of the whole model, not only those drawn).
    """

    def __init__(self, model, ranks=None, large=LARGE_MODEL, max_segments=MAX_SEGMENTS, labels=LABEL_LIMIT,
                 com=None):
        n = model.n
        if ranks is None:
            ranks = DEFAULT_RANKS if n > int(large) else 0
        ranks = int(ranks)
        if ranks < 0:
            raise PartreeInputError(f"ranks must be >= 0, got {ranks}")
        if int(max_segments) < 1:
            raise PartreeInputError(f"max_segments must be >= 1, got {max_segments}")
        self.model = model
        self.large = n > int(large)
        self.com = (not self.large) if com is None else bool(com)
        self.bodies = select_bodies(model, int(max_segments) // (2 if self.com else 1))
        b = self.bodies
        self.anc = nearest_drawn_ancestor(model.parent, b)
        root = model.parent[b] < 0
        self.free_root = root & (model.jtype[b] == J.FREE)
        # segments from the base: drawn roots on a fixed joint (zero length unless it slides)
        self.base_seg = np.flatnonzero(root & ~self.free_root)
        self.tree_seg = np.flatnonzero(self.anc >= 0)
        fixed_roots = model.roots()
        fixed_roots = fixed_roots[model.jtype[fixed_roots] != J.FREE]
        # where the roots' joints sit on the base (a thousand at most: a forest of roots is rare)
        self.base_points = (np.unique(model.r_tree[fixed_roots[:1000]], axis=0) if fixed_roots.size
                            else np.zeros((0, 3)))
        self.ranks = ranks
        self.nparts = 0
        self.body_rank = self.rank_bodies = self.rank_parts = None
        if ranks > 0:
            pt, owner = engine_partition(model, ranks)
            self.nparts = int(pt.nparts)
            self.body_rank = owner[pt.part_of[b]]
            self.rank_bodies = np.bincount(owner[pt.part_of], minlength=ranks)
            self.rank_parts = np.bincount(owner, minlength=ranks)
        # rank colours drawn in a shuffled order, so that no rank is always painted over the others
        m = self.tree_seg.size + self.base_seg.size
        self._order = np.random.default_rng(0).permutation(m) if ranks > 0 else np.arange(m)
        self.names = None
        if n <= int(labels):
            self.names = [model.joint_names[int(i)] for i in b]
        # closed loops whose bodies are drawn (or the world): each body's origin to its frame of
        # the cut joint (the rest of a scissor bar, a coupler's tip), the cut joint a marker
        self.loop_ends = None
        loops = getattr(model, "loops", ())
        if len(loops):
            drawn = np.zeros(n, dtype=bool)
            drawn[b] = True
            a_, b_ = loops.body_a, loops.body_b
            ok = ((a_ < 0) | drawn[np.maximum(a_, 0)]) & ((b_ < 0) | drawn[np.maximum(b_, 0)])
            ends = [(int(x), p) for l in np.flatnonzero(ok)
                    for x, p in ((a_[l], loops.p_a[l]), (b_[l], loops.p_b[l])) if x >= 0]
            if ends:
                self.loop_ends = (np.array([e[0] for e in ends], dtype=np.int64), np.array([e[1] for e in ends]))
        self._loop_points = None

    # ------------------------------------------------------------------ geometry
    @property
    def nsegments(self):
        """Number of segments drawn."""
        return int(self.base_seg.size + self.tree_seg.size + (self.bodies.size if self.com else 0))

    def points(self, q):
        """Joint and centre-of-mass positions of the drawn bodies at configuration ``q``.

        Parameters
        ----------
        q : numpy.ndarray
            Configuration, shape ``(model.nq,)``.

        Returns
        -------
        joints : numpy.ndarray
            World positions of the drawn bodies' joints (frame origins), shape ``(k, 3)``.
        coms : numpy.ndarray or None
            Their centres of mass, shape ``(k, 3)`` (None when they are not drawn).
        """
        kin = forward_kinematics(self.model, q)
        b = self.bodies
        joints = kin.p[b]
        coms = joints + np.einsum("nij,nj->ni", kin.R[b], self.model.com[b]) if self.com else None
        if self.loop_ends is not None:       # kept for the next draw / update (with these points)
            x, p = self.loop_ends
            self._loop_points = (kin.p[x], kin.p[x] + np.einsum("nij,nj->ni", kin.R[x], p))
        return joints, coms

    def visible_points(self, joints, coms):
        """Every point the drawing shows (joints, centres of mass, base), for choosing a view."""
        parts = [joints, self.base_points]
        if coms is not None:
            parts.append(coms)
        if self._loop_points is not None:
            parts.append(self._loop_points[1])
        return np.concatenate(parts)

    def _segments(self, joints, coms):
        b = self.bodies
        segs = [np.stack([joints[self.anc[self.tree_seg]], joints[self.tree_seg]], axis=1),
                np.stack([self.model.r_tree[b[self.base_seg]], joints[self.base_seg]], axis=1)]
        return np.concatenate(segs)[self._order]

    def _segment_colors(self, color):
        from matplotlib.colors import to_rgba

        if self.body_rank is None:
            c = np.broadcast_to(to_rgba(color), (self.bodies.size, 4))
        else:
            c = rank_colors(self.ranks)[self.body_rank]
            if self.bodies.size > 2000:
                c = _with_alpha(c, 0.7)          # overlapping ranks mix instead of hiding each other
        return c, np.concatenate([c[self.tree_seg], c[self.base_seg]])[self._order]

    # ------------------------------------------------------------------ drawing
    def draw(self, ax, joints, coms, color="C0"):
        """Draw the tree on a 3-D axes (the one drawing function of every picture of a model).

        Parameters
        ----------
        ax : mpl_toolkits.mplot3d.axes3d.Axes3D
            The axes.
        joints, coms : numpy.ndarray
            Positions from :meth:`points`.
        color : color
            Colour of the bodies when they are not coloured by rank.

        Returns
        -------
        dict
            The artists, for :meth:`update`.
        """
        from mpl_toolkits.mplot3d.art3d import Line3DCollection

        k = self.bodies.size
        lw = 2.2 if k <= 60 else (1.2 if k <= 2000 else (0.7 if k <= 8000 else 0.45))
        body_c, seg_c = self._segment_colors(color)
        art = {}
        art["tree"] = ax.add_collection3d(Line3DCollection(self._segments(joints, coms), colors=seg_c,
                                                           linewidths=lw, capstyle="round", zorder=2))
        if self.com:
            cseg = np.stack([joints, coms], axis=1)
            art["com"] = ax.add_collection3d(Line3DCollection(cseg, colors=_with_alpha(body_c, 0.8),
                                                              linewidths=max(0.6 * lw, 0.5), zorder=2))
        if not self.large:
            ms = 34 if k <= 60 else (8 if k <= 500 else 2)
            art["joints"] = ax.scatter(*joints.T, s=ms, facecolor="white", edgecolor="0.15",
                                       linewidths=0.9 if k <= 500 else 0.4, depthshade=False, zorder=3,
                                       label="joint")
            if self.com and k <= 500:
                art["coms"] = ax.scatter(*coms.T, s=0.45 * ms, color="0.15", marker="o", depthshade=False,
                                         zorder=3, label="centre of mass")
        if self._loop_points is not None:
            o, e = self._loop_points
            art["loops"] = ax.add_collection3d(Line3DCollection(np.stack([o, e], axis=1), colors=seg_c[:1],
                                                                linewidths=lw, capstyle="round", zorder=2))
            if not self.large:
                art["cuts"] = ax.scatter(*e.T, s=ms, marker="o", facecolor="0.85", edgecolor="C3",
                                         linewidths=1.0, depthshade=False, zorder=3, label="loop (cut joint)")
        if self.base_points.size:
            art["base"] = ax.scatter(*self.base_points.T, s=70 if k <= 500 else 40, marker="s", color="black",
                                     depthshade=False, zorder=4, label="base (fixed)")
        if self.free_root.any():
            fr = joints[self.free_root]
            art["floating"] = ax.scatter(*fr.T, s=70 if k <= 500 else 40, marker="D", color="black",
                                         depthshade=False, zorder=4, label="floating base")
        if self.names is not None:
            art["labels"] = self._labels(ax, joints)
        return art

    def _label_groups(self, joints):
        """Joints at the same place share one label ("J2, J3")."""
        scale = max(float(np.ptp(joints, axis=0).max()), 1e-9) if joints.size else 1.0
        key = np.round(joints / (1e-6 * scale)).astype(np.int64)
        _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inv = np.asarray(inv).reshape(-1)
        return [(int(f), ", ".join(self.names[i] for i in np.flatnonzero(inv == g)))
                for g, f in enumerate(first)]

    def _labels(self, ax, joints):
        texts = []
        for i, text in self._label_groups(joints):
            x, y, z = joints[i]
            texts.append(ax.text(x, y, z, "  " + text, fontsize=7.5, color="0.1", ha="left", va="bottom",
                                 zorder=5, clip_on=False))
        return texts

    def update(self, art, joints, coms):
        """Move drawn artists to new positions (a frame of an animation).

        Parameters
        ----------
        art : dict
            Artists returned by :meth:`draw`.
        joints, coms : numpy.ndarray
            New positions from :meth:`points`.
        """
        art["tree"].set_segments(self._segments(joints, coms))
        if "com" in art:
            art["com"].set_segments(np.stack([joints, coms], axis=1))
        if "joints" in art:
            art["joints"]._offsets3d = tuple(joints.T)
        if "coms" in art:
            art["coms"]._offsets3d = tuple(coms.T)
        if "floating" in art:
            art["floating"]._offsets3d = tuple(joints[self.free_root].T)
        if "loops" in art and self._loop_points is not None:
            o, e = self._loop_points
            art["loops"].set_segments(np.stack([o, e], axis=1))
            if "cuts" in art:
                art["cuts"]._offsets3d = tuple(e.T)
        if "labels" in art:
            for t in art["labels"]:
                t.remove()
            art["labels"] = self._labels(art["tree"].axes, joints)

    def legend(self, fig, ax):
        """Add the legend: the ranks (with their parts and bodies) or the markers.

        Parameters
        ----------
        fig : matplotlib.figure.Figure
            The figure; the legend goes below its axes.
        ax : mpl_toolkits.mplot3d.axes3d.Axes3D
            The axes whose markers are listed.
        """
        from matplotlib.lines import Line2D

        if self.ranks > 0:
            cols = rank_colors(self.ranks)
            shown = min(self.ranks, 16)
            handles = [Line2D([], [], color=cols[r], lw=3,
                              label=f"rank {r}: {self.rank_parts[r]} part{'s' if self.rank_parts[r] != 1 else ''}, "
                                    f"{self.rank_bodies[r]:,} bodies") for r in range(shown)]
            if shown < self.ranks:
                handles.append(Line2D([], [], color="none", label=f"... {self.ranks - shown} more ranks"))
            handles += [h for h in ax.get_legend_handles_labels()[0]]
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 3), fontsize=8,
                       frameon=False, title=f"{self.ranks} ranks, {self.nparts} parts of the engine's partition",
                       title_fontsize=8)
        else:
            h, _ = ax.get_legend_handles_labels()
            if h:
                fig.legend(handles=h, loc="outside lower center", ncols=len(h), fontsize=8, frameon=False)

    def describe(self):
        """A line for a title: how many bodies are drawn and what the colours mean."""
        n = self.model.n
        s = f"{n:,} bodies" if self.bodies.size == n else f"{self.bodies.size:,} of {n:,} bodies drawn"
        if self.ranks > 0:
            s += f", coloured by rank ({self.ranks}-rank partition)"
        return s


def resolve_configuration(model, q=None, seed=0):
    """A configuration and a few words saying which.

    Parameters
    ----------
    model : partree.Model
        The model.
    q : None, str or array_like
        None or ``"neutral"``: the neutral configuration; ``"random"``: a random configuration
        (``model.random_configuration(seed)``); an array: that configuration.
    seed : int
        Seed of the random configuration.

    Returns
    -------
    q : numpy.ndarray
        The configuration, shape ``(model.nq,)``.
    what : str
        ``"neutral configuration"``, ``"random configuration (seed 0)"`` or ``"given configuration"``.
    """
    if q is None or (isinstance(q, str) and q == "neutral"):
        return model.neutral(), "neutral configuration"
    if isinstance(q, str):
        if q != "random":
            raise PartreeInputError(f"configuration {q!r}: use 'neutral', 'random' or an array of {model.nq} values")
        return model.random_configuration(int(seed)), f"random configuration (seed {int(seed)})"
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    if q.shape != (model.nq,):
        raise PartreeInputError(f"the configuration has {q.size} values; model {model.name!r} needs {model.nq} (nq)")
    return q, "given configuration"


def draw_tree(ax, model, q, drawing=None, view=None, color="C0", **options):
    """Draw a model at one configuration on a 3-D axes, with the view set.

    Parameters
    ----------
    ax : mpl_toolkits.mplot3d.axes3d.Axes3D
        The axes.
    model : partree.Model
        The model.
    q : numpy.ndarray
        Configuration, shape ``(model.nq,)``.
    drawing : TreeDrawing, optional
        A drawing of ``model`` to reuse (its bodies, partition and colours).
    view : View, optional
        Camera and limits; by default :func:`choose_view` of the drawn points.
    color : color
        Colour of the bodies when they are not coloured by rank.
    **options
        Passed to :class:`TreeDrawing` when ``drawing`` is not given.

    Returns
    -------
    drawing : TreeDrawing
        The drawing.
    view : View
        The view set on ``ax``.
    """
    drawing = drawing if drawing is not None else TreeDrawing(model, **options)
    joints, coms = drawing.points(q)
    if view is None:
        view = choose_view(drawing.visible_points(joints, coms))
    drawing.draw(ax, joints, coms, color=color)
    apply_view(ax, view)
    return drawing, view


def show_model(model, out, q=None, seed=0, ranks=None, large=LARGE_MODEL, max_segments=MAX_SEGMENTS,
               labels=LABEL_LIMIT, title=None, size=(8.0, 6.5), dpi=150, overwrite=False):
    """Draw a model's tree in one configuration and write the picture (``partree show``).

    Parameters
    ----------
    model : partree.Model or str
        The model, or anything :func:`partree.resolve_model` takes (file or spec string).
    out : str or os.PathLike
        Picture file, ``.png``, ``.pdf`` or ``.svg``; its folder must exist.
    q : None, str or array_like
        Configuration: None / ``"neutral"``, ``"random"`` or an array (see
        :func:`resolve_configuration`).
    seed : int
        Seed of a random configuration.
    ranks, large, max_segments, labels
        See :class:`TreeDrawing`.
    title : str, optional
        Title (default: the model's name, size and configuration).
    size : tuple of float
        Figure size in inches.
    dpi : float
        Resolution of a ``.png``.
    overwrite : bool
        Replace an existing file.

    Returns
    -------
    str
        The file written.
    """
    need_matplotlib("drawing a model")
    out = check_output_file(out, overwrite=overwrite)
    if not hasattr(model, "parent"):
        from ..specs import resolve_model

        model = resolve_model(model)
    q, what = resolve_configuration(model, q, seed)
    drawing = TreeDrawing(model, ranks=ranks, large=large, max_segments=max_segments, labels=labels)
    fig = new_figure(figsize=size, layout="constrained")
    ax = fig.add_subplot(projection="3d")
    drawing, view = draw_tree(ax, model, q, drawing=drawing)
    drawing.legend(fig, ax)
    if title is None:
        title = f"{model.name}: {what}\n{drawing.describe()}"
        if view.dims <= 1 and model.n > 1:
            title += "\nall joints lie on one line in this configuration"
    fig.suptitle(wrap_title(title, fig, 9), fontsize=9)
    save_atomic(out, lambda p: fig.savefig(p, dpi=dpi))
    return out
