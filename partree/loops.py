"""Closed kinematic loops: the cut joints that close loops over a tree (seed 003).

A mechanism with loops is described as a spanning tree (the :class:`~partree.Model`) plus one
cut joint per independent loop.  A cut joint :class:`Loop` joins a frame A fixed on body a to a
frame B fixed on body b (either may be the fixed world, ``None``); it removes the relative
motions its kind forbids, and its constraint force is a Lagrange multiplier.

Frames and rows
---------------
A placement is the frame's pose in its body: a rotation R whose columns are the frame's axes in
body coordinates and the frame's origin p in body coordinates (``(R, p)``, a 4x4 homogeneous
matrix, or a position alone for R = 1), as URDF, MJCF and Pinocchio's ``SE3`` place frames.

Every loop's constraint rows are the components of the relative motion of B with respect to A,
expressed in A's axes, that its kind forbids: rows = T^T [w_rel; v_rel], where w_rel is B's
angular velocity minus A's and v_rel the velocity of B's origin minus that of A's origin.

=============  ====  =======================================================================
kind           rows  forbidden relative motion (u: ``axis`` in frame A, default z)
=============  ====  =======================================================================
revolute       5     all translation; rotation about the two directions normal to u
prismatic      5     all rotation; translation along the two directions normal to u
universal      4     all translation; rotation about u2 x u1 (u1 in frame A, u2 in frame B)
spherical      3     all translation
weld           6     everything
distance       1     the change of the distance between the two origins (a massless rod)
point_on_line  2     translation normal to u: B's origin moves only along the line through
                     A's origin along u
=============  ====  =======================================================================

In a planar mechanism whose joints all turn about axes parallel to u (and slide normal to it),
a ``point_on_line`` loop is the pin of the plane: a ``revolute`` loop's three other rows (the
translation along u, the rotations about the in-plane axes) repeat what the tree's joints
already enforce.  The elimination finds such rows dependent and drops them, but carries them
to the body where the loop is solved, so pins of planar linkages (four-bars, scissor masts) are
cheaper as ``point_on_line`` loops, with the same motion and the same in-plane forces.

The loop's force (``constrained_dynamics(...).loop_force``) is the wrench [n; f] that body a
exerts on body b through the cut joint, in frame A's axes at its origin: T lambda.
"""
from __future__ import annotations

import numpy as np

from .errors import PartreeInputError

#: loop kinds, their codes (index) and their numbers of constraint rows
KINDS = ("revolute", "prismatic", "universal", "spherical", "weld", "distance", "point_on_line")
REVOLUTE, PRISMATIC, UNIVERSAL, SPHERICAL, WELD, DISTANCE, POINT_ON_LINE = range(7)
#: the kinds whose rows are set by one axis u in frame A (``axis``); universal takes two
AXIAL = (REVOLUTE, PRISMATIC, POINT_ON_LINE)
ROWS = np.array([5, 5, 4, 3, 6, 1, 2], dtype=np.int64)

#: the name a loop end uses for the fixed world
WORLD = "world"


def placement(pl, what="placement"):
    """(R, p) of a placement given as None (identity), a position (3,), a pair (R, p) or a 4x4
    homogeneous matrix.  R must be a rotation to 1e-6; it is orthonormalised (CAD data carries
    rounding)."""
    if pl is None:
        return np.eye(3), np.zeros(3)
    if isinstance(pl, (tuple, list)) and len(pl) == 2 and np.shape(pl[0]) == (3, 3):
        R, p = pl
    else:
        a = np.asarray(pl, dtype=float)
        if a.shape == (3,):
            R, p = np.eye(3), a
        elif a.shape == (4, 4):
            R, p = a[:3, :3], a[:3, 3]
        else:
            raise PartreeInputError(f"{what} must be a position (3,), a pair (R, p) or a 4x4 matrix; "
                                    f"got shape {a.shape}")
    R = np.array(R, dtype=float)
    p = np.array(p, dtype=float).reshape(-1)
    if R.shape != (3, 3) or p.shape != (3,):
        raise PartreeInputError(f"{what}: R must be 3x3 and p a 3-vector; got {R.shape} and {p.shape}")
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
        raise PartreeInputError(f"{what} is not finite")
    if np.abs(R.T @ R - np.eye(3)).max() > 1e-6 or np.linalg.det(R) < 0:
        raise PartreeInputError(f"{what}: R is not a rotation matrix (R^T R = 1 and det R = +1 to 1e-6)")
    u, _, vt = np.linalg.svd(R)
    return u @ vt, p


def _unit(a, what):
    a = np.asarray(a, dtype=float).reshape(-1)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise PartreeInputError(f"{what} must be a finite 3-vector; got {a!r}")
    n = np.linalg.norm(a)
    if n < 1e-12:
        raise PartreeInputError(f"{what} is a zero vector")
    return a / n


class Loop:
    """A cut joint closing a kinematic loop between a frame on body a and a frame on body b.

    Parameters
    ----------
    name : str
        The loop's name (unique in a model).
    kind : str
        'revolute', 'prismatic', 'universal', 'spherical', 'weld', 'distance' or 'point_on_line'
        (see the module docstring for the rows each removes).
    body_a, body_b : str, int or None
        The two bodies, by name or number; None (or 'world') for the fixed world.
    placement_a, placement_b : optional
        Frame A in body a, frame B in body b: a position (3,), a pair (R, p) or a 4x4 matrix
        (R's columns the frame's axes in body coordinates, p its origin); identity by default.
    axis : optional
        revolute, prismatic and point_on_line: the joint axis (the line) u in frame A (= in
        frame B when the loop is closed), default (0, 0, 1).  universal: the pair (u1 in frame
        A, u2 in frame B), the cross axes, default ((1, 0, 0), (0, 1, 0)).  Ignored by the
        other kinds.
    length : float, optional
        distance: the rod's length (> 0), required.
    """

    __slots__ = ("name", "kind", "body_a", "body_b", "placement_a", "placement_b", "axis", "axis2", "length")

    def __init__(self, name, kind, body_a, body_b, placement_a=None, placement_b=None, axis=None, length=None):
        self.name = str(name)
        if str(kind) not in KINDS:
            raise PartreeInputError(f"loop {self.name!r}: unknown kind {kind!r}; the kinds are {', '.join(KINDS)}")
        self.kind = str(kind)
        self.body_a = body_a
        self.body_b = body_b
        self.placement_a = placement(placement_a, f"loop {self.name!r}: placement_a")
        self.placement_b = placement(placement_b, f"loop {self.name!r}: placement_b")
        code = KINDS.index(self.kind)
        self.axis = np.array([0.0, 0.0, 1.0])
        self.axis2 = np.zeros(3)
        if code in AXIAL and axis is not None:
            self.axis = _unit(axis, f"loop {self.name!r}: axis")
        elif code == UNIVERSAL:
            u1, u2 = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)) if axis is None else axis
            self.axis = _unit(u1, f"loop {self.name!r}: axis[0]")
            self.axis2 = _unit(u2, f"loop {self.name!r}: axis[1]")
        self.length = 0.0
        if code == DISTANCE:
            if length is None or not np.isfinite(length) or not float(length) > 0.0:
                raise PartreeInputError(f"loop {self.name!r}: a distance loop needs a length > 0; got {length!r}")
            self.length = float(length)
        elif length is not None:
            raise PartreeInputError(f"loop {self.name!r}: length is only for a 'distance' loop, not {self.kind!r}")

    @property
    def rows(self):
        """Number of constraint rows."""
        return int(ROWS[KINDS.index(self.kind)])

    def __repr__(self):
        a = WORLD if self.body_a is None else self.body_a
        b = WORLD if self.body_b is None else self.body_b
        return f"Loop({self.name!r}, {self.kind!r}, {a!r}, {b!r})"


class LoopSet:
    """The loops of a model as arrays, one entry per loop (L loops, R rows in all).

    Attributes
    ----------
    names : list of str
    kind : int8[L]
        Codes (``partree.loops.KINDS``).
    body_a, body_b : int64[L]
        Body numbers; -1 for the world.
    R_a, p_a, R_b, p_b : float[L, 3, 3], float[L, 3]
        Placements of frames A and B in their bodies.
    axis, axis2 : float[L, 3]
        u (revolute, prismatic, point_on_line, universal's u1, in frame A) and u2 (universal,
        in frame B).
    length : float[L]
        Rod lengths of distance loops (0 elsewhere).
    nrows, row0 : int64[L]
        Rows of each loop and the first of them in the stacked constraint vector.
    """

    def __init__(self, names, kind, body_a, body_b, R_a, p_a, R_b, p_b, axis, axis2, length):
        self.names = [str(s) for s in names]
        L = len(self.names)
        self.kind = np.asarray(kind, dtype=np.int8).reshape(L)
        self.body_a = np.asarray(body_a, dtype=np.int64).reshape(L)
        self.body_b = np.asarray(body_b, dtype=np.int64).reshape(L)
        self.R_a = np.ascontiguousarray(R_a, dtype=float).reshape(L, 3, 3)
        self.p_a = np.ascontiguousarray(p_a, dtype=float).reshape(L, 3)
        self.R_b = np.ascontiguousarray(R_b, dtype=float).reshape(L, 3, 3)
        self.p_b = np.ascontiguousarray(p_b, dtype=float).reshape(L, 3)
        self.axis = np.ascontiguousarray(axis, dtype=float).reshape(L, 3)
        self.axis2 = np.ascontiguousarray(axis2, dtype=float).reshape(L, 3)
        self.length = np.ascontiguousarray(length, dtype=float).reshape(L)
        self.nrows = ROWS[self.kind.astype(np.int64)] if L else np.zeros(0, dtype=np.int64)
        self.row0 = np.concatenate(([0], np.cumsum(self.nrows)[:-1])).astype(np.int64) if L else \
            np.zeros(0, dtype=np.int64)
        self._index = None

    @classmethod
    def empty(cls):
        z3 = np.zeros((0, 3))
        return cls([], [], [], [], np.zeros((0, 3, 3)), z3, np.zeros((0, 3, 3)), z3, z3, z3, [])

    @property
    def nrow(self):
        """Total number of constraint rows."""
        return int(self.nrows.sum())

    def __len__(self):
        return len(self.names)

    def index(self, name):
        """Number of the loop ``name`` (an int is passed through)."""
        if isinstance(name, (int, np.integer)):
            if not -len(self) <= name < len(self):
                raise KeyError(f"no loop {name}")
            return int(name) % len(self)
        if self._index is None:
            self._index = {s: k for k, s in enumerate(self.names)}
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no loop named {name!r}") from None

    def rows_of(self, name):
        """Slice of the loop ``name``'s rows in the stacked constraint vector."""
        k = self.index(name)
        return slice(int(self.row0[k]), int(self.row0[k] + self.nrows[k]))

    def loop(self, k, body_names=None):
        """The :class:`Loop` of entry k (bodies by name when ``body_names`` is given)."""
        k = self.index(k)

        def body(i):
            if i < 0:
                return None
            return body_names[int(i)] if body_names is not None else int(i)

        code = int(self.kind[k])
        axis = None
        if code in AXIAL:
            axis = self.axis[k]
        elif code == UNIVERSAL:
            axis = (self.axis[k], self.axis2[k])
        return Loop(self.names[k], KINDS[code], body(self.body_a[k]), body(self.body_b[k]),
                    (self.R_a[k], self.p_a[k]), (self.R_b[k], self.p_b[k]), axis,
                    self.length[k] if code == DISTANCE else None)

    def __iter__(self):
        return (self.loop(k) for k in range(len(self)))

    def arrays(self):
        """The arrays by name (for files)."""
        return {k: getattr(self, k) for k in ("kind", "body_a", "body_b", "R_a", "p_a", "R_b", "p_b", "axis",
                                              "axis2", "length")}

    def concat(self, other):
        """The loops of this set followed by those of ``other``."""
        a, b = self.arrays(), other.arrays()
        return LoopSet(self.names + other.names, *[np.concatenate((a[k], b[k])) for k in
                                                    ("kind", "body_a", "body_b", "R_a", "p_a", "R_b", "p_b",
                                                     "axis", "axis2", "length")])


def _body_number(model, b, loop, end):
    if b is None or (isinstance(b, str) and b == WORLD):
        return -1
    if isinstance(b, (int, np.integer)):
        if not -1 <= int(b) < model.n:
            raise PartreeInputError(f"loop {loop!r}: body_{end} {int(b)} does not exist (the model has "
                                    f"{model.n} bodies, numbered 0..{model.n - 1}; -1 or None is the world)")
        return int(b)
    try:
        return model.body_names.index(str(b))
    except KeyError:
        pass
    try:
        return model.joint_names.index(str(b))      # a body may be named by its joint
    except KeyError:
        raise PartreeInputError(f"loop {loop!r}: body_{end} {b!r} is not a body of model {model.name!r} "
                                f"(nor the name of a joint)") from None


def loop_set(model, loops):
    """Check ``loops`` (Loop objects) against ``model`` and return them as a :class:`LoopSet`.

    Refuses an unknown body, a loop joining a body to itself (or the world to itself) and a
    name used twice, naming the loop."""
    if isinstance(loops, LoopSet):
        return loops
    loops = list(loops)
    for lp in loops:
        if not isinstance(lp, Loop):
            raise PartreeInputError(f"loops must be partree.Loop objects; got {type(lp).__name__}")
    L = len(loops)
    ba = np.empty(L, dtype=np.int64)
    bb = np.empty(L, dtype=np.int64)
    seen = {}
    for k, lp in enumerate(loops):
        if lp.name in seen:
            raise PartreeInputError(f"loop name {lp.name!r} used twice (loops {seen[lp.name]} and {k})")
        seen[lp.name] = k
        ba[k] = _body_number(model, lp.body_a, lp.name, "a")
        bb[k] = _body_number(model, lp.body_b, lp.name, "b")
        if ba[k] == bb[k]:
            what = "the world" if ba[k] < 0 else f"body {int(ba[k])} ({model.body_names[int(ba[k])]})"
            raise PartreeInputError(f"loop {lp.name!r} joins {what} to itself: a loop needs two different bodies")
    stack = (lambda f: np.array([f(lp) for lp in loops]).reshape((L,) + np.shape(f(loops[0])))) if L else None
    if not L:
        return LoopSet.empty()
    return LoopSet([lp.name for lp in loops], [KINDS.index(lp.kind) for lp in loops], ba, bb,
                   stack(lambda lp: lp.placement_a[0]), stack(lambda lp: lp.placement_a[1]),
                   stack(lambda lp: lp.placement_b[0]), stack(lambda lp: lp.placement_b[1]),
                   stack(lambda lp: lp.axis), stack(lambda lp: lp.axis2), [lp.length for lp in loops])
