"""Seed 004's scissor-like deployable mast: ``scissor_mast(units)``, open (a tree) or closed.

A planar scissor (pantograph) mast is a stack of identical scissor units, each two bars pinned
at their midpoints (an "X").  Unit k's upper bar ends are pinned to unit k + 1's lower bar ends,
which closes one loop per unit.

* ``scissor_mast(units)`` (the default) is the spanning tree of the mechanism: it keeps one of
  the two pins between neighbouring units and leaves the other out (it is "cut", as a
  closed-loop solver would cut it).
* ``scissor_mast(units, closed=True)`` adds every left-out pin back as a loop
  (:class:`partree.Loop`) and supports the mast on the ground as the paper's one-degree-of-freedom
  mechanism: one base end pinned, the other on a horizontal slider (``support="slider"``), or
  both pinned (``support="pinned"``: locked).
* ``scissor_mast(units, section="triangle")`` (or ``"square"``) is a spatial mast whose faces
  are planar scissor stacks joined at corner hubs, again with one degree of freedom.

Every model's ``units`` attribute labels the bodies of every scissor unit so that the parallel
engine keeps each unit whole in one part (the paper's subsystems, each reduced to its 6x6
equivalent at its base, are the engine's parts), and its ``scissor`` attribute (a
:class:`ScissorLayout`) says which body is which bar, hub or carriage.  :class:`ScissorDrive` is
the driving-force law (the paper's forces at A and C) as joint forces ``tau(t, q, qd)`` for
``partree.simulate(..., torques=...)``; :func:`scissor_angle` and :func:`scissor_height` read the
mast's angle theta_1 and height from a configuration.

Where the paper gives a number it is used as given; where it leaves one out, the value chosen here
is listed in the generator's docstring, marked "chosen".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import joints as J
from ..loops import KINDS, LoopSet
from ..errors import PartreeInputError
from ..model import Model
from ..spatial import roty
from .generators import VALIDATE_LIMIT, diag_inertia

SCISSOR_BAR_LENGTH = 1.0         # m, paper (l = 1000 mm)
SCISSOR_BAR_THICKNESS = 0.005    # m, paper (b = 5 mm), here along the pin axis
SCISSOR_BAR_DEPTH = 0.030        # m, paper (h = 30 mm), here in the scissor's plane
SCISSOR_DENSITY = 2750.0         # kg/m^3, paper
SCISSOR_ANGLE_DEG = 30.0         # deg, paper (initial angle theta_1)
SCISSOR_UNITS = 3                # paper (a 3-level scissor mechanism)
CARRIAGE_MASS = 0.01             # kg, chosen: the slider carriage (about 2.4 % of a bar)
CARRIAGE_SIZE = 0.03             # m, chosen: the carriage, a uniform cube (its inertia only)
LOCKUP_SPREAD = 1e-3             # of a bar length: base ends closer than this are at lock-up (ScissorDrive)
CORNER_HUB_MASS = 0.05           # kg, chosen: the corner hubs of the spatial sections
HUB_RADIUS = 0.02                # m, chosen: hubs are uniform solid spheres
#: closest approach of the angle to the lock-ups at 0 and 90 deg (rad) that a closed mast accepts:
#: nearer, the loops' Jacobian loses its rank to rounding
LOCKUP_MARGIN = 1e-6

SUPPORTS = ("slider", "pinned")
#: the loop kinds a closed planar mast's pins may take (``pins``): the plane's pin (2 rows) or the
#: 3-D revolute joint (5 rows, of which the tree makes 3 dependent)
PINS = ("point_on_line", "revolute")
SECTIONS = {"planar": 1, "triangle": 3, "square": 4}


def rectangular_bar_inertia(mass, length, thickness, depth):
    """Inertia about the centre of mass of uniform bars along x with a rectangular section,
    ``thickness`` along y and ``depth`` along z (batched):
    I_xx = m (b^2 + h^2) / 12, I_yy = m (l^2 + h^2) / 12, I_zz = m (l^2 + b^2) / 12."""
    m = np.asarray(mass, float)
    l2, b2, h2 = float(length) ** 2, float(thickness) ** 2, float(depth) ** 2
    return diag_inertia(m * (b2 + h2) / 12.0, m * (l2 + h2) / 12.0, m * (l2 + b2) / 12.0)


# ------------------------------------------------------------------------------------ layout
@dataclass(frozen=True)
class ScissorLayout:
    """Which body of a scissor mast is which: bars, hubs, carriage (kept as ``model.scissor``).

    Body numbers follow from a few integers (no per-body storage).  ``sides`` is 1 for the
    planar mast and 3 or 4 for the spatial sections; bar ``(which, k, f)`` is bar A or B of unit
    k in face f (f = 0 for the planar mast).  Every bar runs from its lower end (fraction 0 along
    it) to its upper end (fraction 1); its body frame has x along the bar, y along the pin axis,
    and its origin at the fraction :meth:`bar_origin` along it.
    """

    section: str
    sides: int
    closed: bool
    support: str | None
    units: int
    length: float
    angle: float                 # rad, at q = 0
    hubs: bool                   # planar: a hub at every A bar's upper end
    carriage: int                # body number of the slider carriage, -1 if none
    n0: int                      # bodies of unit 0
    m: int                       # bodies of every other unit
    slots0: tuple                # polygon: ((name, slot), ...) of unit 0
    slots: tuple                 # polygon: ((name, slot), ...) of unit k >= 1

    # -- bodies
    def _index(self, name, k):
        k = np.asarray(k, dtype=np.int64)
        s0, s = dict(self.slots0), dict(self.slots)
        return np.where(k == 0, s0.get(name, -1), self.n0 + (k - 1) * self.m + s.get(name, -1))

    def bar(self, which, k, f=0):
        """Body number(s) of bar ``which`` ('A' or 'B') of unit(s) k in face f."""
        k = np.asarray(k, dtype=np.int64)
        if self.sides == 1:
            pos = 0 if which == "A" else 1
            if not self.closed:
                return (self.m * k + pos)[()]
            c0 = 1 if self.carriage >= 0 else 0
            first = c0 + (1 - pos)                     # unit 0 holds B_0 before A_0
            return np.where(k == 0, first, self.n0 + (k - 1) * self.m + pos)[()]
        return self._index((which, int(f)), k)[()]

    def bar_origin(self, which, k, f=0):
        """Fraction along bar (which, k, f) of its body frame's origin (0, 1/2 or 1)."""
        k = np.asarray(k, dtype=np.int64)
        if self.sides == 1:
            if which == "A":
                return np.where(k == 0, 0.5 if self.closed else 0.0, 0.0)[()]
            return np.where(k == 0, 0.0 if self.closed else 0.5, 0.5)[()]
        if which == "A":
            return np.full(k.shape, 0.0 if f == 0 else 0.5)[()]
        return np.full(k.shape, 0.5 if f == 0 else 1.0)[()]

    def bar_point(self, which, k, f=0, frac=0.0):
        """(body, point in body coordinates) of the point at fraction ``frac`` along a bar."""
        b = int(self.bar(which, k, f))
        return b, np.array([(frac - float(self.bar_origin(which, k, f))) * self.length, 0.0, 0.0])

    def hub(self, level, corner=0):
        """Body number of a hub: planar (with hubs) the hub at A_{level}'s upper end; polygon
        sections the hub at ``corner`` on ``level`` (0 = the base .. units = the top)."""
        if self.sides == 1:
            if not self.hubs:
                raise ValueError("this planar mast has no hubs (hub_mass = 0)")
            level = np.asarray(level, dtype=np.int64)
            return (self.bar("A", level) + np.where(self.closed & (level == 0), 1, 2))[()]
        if level == 0:
            return int(self._index(("H0", int(corner) % self.sides), 0))
        return int(self._index(("H", int(corner) % self.sides), int(level) - 1))

    # -- the points the driving forces act on
    def base_points(self):
        """[(body, point in body coordinates)]: the mast's lower ends (A and C's level)."""
        if self.sides == 1:
            return [self.bar_point("B", 0, 0, 0.0), self.bar_point("A", 0, 0, 0.0)]
        return [(self.hub(0, c), np.zeros(3)) for c in range(self.sides)]

    def top_points(self):
        """[(body, point in body coordinates)]: the mast's upper ends."""
        U = self.units
        if self.sides == 1:
            return [self.bar_point("A", U - 1, 0, 1.0), self.bar_point("B", U - 1, 0, 1.0)]
        return [(self.hub(U, c), np.zeros(3)) for c in range(self.sides)]


# ------------------------------------------------------------------------------------ building
def _bar_frames(lower, upper, normal):
    """World rotations (columns: x along the bar, y = normal, z = x cross y) of bars from
    ``lower`` to ``upper`` (K, 3) with pin axes ``normal`` (K, 3) or (3,)."""
    x = upper - lower
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    y = np.broadcast_to(np.asarray(normal, dtype=float), x.shape)
    R = np.empty(x.shape[:-1] + (3, 3))
    R[..., :, 0] = x
    R[..., :, 1] = y
    R[..., :, 2] = np.cross(x, y)
    return R


class _Assembly:
    """Bodies placed by their world poses at q = 0 and loops placed by world points; the tree's
    joint placements (E_tree, r_tree) and the loops' frames follow (:meth:`model`)."""

    def __init__(self, n):
        self.n = n
        self.parent = np.full(n, -2, dtype=np.int64)
        self.jtype = np.full(n, J.REVOLUTE, dtype=np.int8)
        self.axis = np.zeros((n, 3))
        self.Rw = np.tile(np.eye(3), (n, 1, 1))
        self.ow = np.zeros((n, 3))
        self.mass = np.zeros(n)
        self.com_w = np.zeros((n, 3))
        self.I_com = np.zeros((n, 3, 3))
        self.loops = []           # (unit, order, names, kind, a, b, point, axis)

    def body(self, i, parent, jtype, axis_body, R, origin, mass, com_world, inertia):
        i = np.atleast_1d(np.asarray(i, dtype=np.int64))
        self.parent[i] = parent
        self.jtype[i] = jtype
        self.axis[i] = axis_body
        self.Rw[i] = R
        self.ow[i] = origin
        self.mass[i] = mass
        self.com_w[i] = com_world
        self.I_com[i] = inertia

    def loop(self, unit, order, names, kind, a, b, point, axis=(0.0, 1.0, 0.0)):
        """Loops of ``kind`` joining body a (-1: world) to body b at the world ``point``, about
        (revolute) or along (prismatic) the world ``axis``; frame B coincides with frame A."""
        unit = np.atleast_1d(np.asarray(unit, dtype=np.int64))
        K = unit.size
        self.loops.append((unit, np.full(K, order), list(names), KINDS.index(kind),
                           np.broadcast_to(np.asarray(a, dtype=np.int64), (K,)),
                           np.broadcast_to(np.asarray(b, dtype=np.int64), (K,)),
                           np.broadcast_to(np.asarray(point, dtype=float), (K, 3)),
                           np.broadcast_to(np.asarray(axis, dtype=float), (K, 3))))

    def _pose(self, i):
        R = np.where((i < 0)[:, None, None], np.eye(3), self.Rw[np.maximum(i, 0)])
        o = np.where((i < 0)[:, None], 0.0, self.ow[np.maximum(i, 0)])
        return R, o

    def model(self, units, name, gravity, validate):
        assert (self.parent >= -1).all() and (self.parent < np.arange(self.n)).all()
        Rp, op = self._pose(self.parent)
        E_tree = np.einsum("nji,njk->nik", self.Rw, Rp)                    # Rw^T Rp
        r_tree = np.einsum("nji,nj->ni", Rp, self.ow - op)                  # Rp^T (o - o_p)
        com = np.einsum("nji,nj->ni", self.Rw, self.com_w - self.ow)
        # the loops, in the order of their units
        unit = np.concatenate([lp[0] for lp in self.loops])
        order = np.concatenate([lp[1] for lp in self.loops])
        perm = np.lexsort((order, unit))
        names = [s for lp in self.loops for s in lp[2]]
        names = [names[k] for k in perm]
        kind = np.concatenate([np.full(lp[0].size, lp[3], dtype=np.int8) for lp in self.loops])[perm]
        a = np.concatenate([lp[4] for lp in self.loops])[perm]
        b = np.concatenate([lp[5] for lp in self.loops])[perm]
        P = np.concatenate([lp[6] for lp in self.loops])[perm]
        u = np.concatenate([lp[7] for lp in self.loops])[perm]
        Ra, oa = self._pose(a)
        Rb, ob = self._pose(b)
        L = a.size
        R_a = np.tile(np.eye(3), (L, 1, 1))                                 # frame A: body a's axes
        p_a = np.einsum("nji,nj->ni", Ra, P - oa)
        axis = np.einsum("nji,nj->ni", Ra, u)
        R_b = np.einsum("nji,njk->nik", Rb, Ra)                             # frame B = frame A at q = 0
        p_b = np.einsum("nji,nj->ni", Rb, P - ob)
        loops = LoopSet(names, kind, a, b, R_a, p_a, R_b, p_b, axis, np.zeros((L, 3)), np.zeros(L))
        if validate is None:
            validate = self.n <= VALIDATE_LIMIT
        return Model(self.parent, self.jtype, self.axis, E_tree, r_tree, self.mass, com, self.I_com,
                     gravity=gravity, name=name, validate=bool(validate), units=units, loops=loops)


def _sphere(mass, radius):
    return np.eye(3) * 0.4 * float(mass) * float(radius) ** 2


def _closed_planar(U, length, bar_mass, I_bar, theta, hub_mass, hub_radius, support, carriage_mass,
                   gravity, name, validate, pins):
    hubs = hub_mass > 0
    c0 = 1 if support == "slider" else 0
    m = 3 if hubs else 2
    n0 = c0 + m
    n = n0 + (U - 1) * m
    lay = ScissorLayout("planar", 1, True, support, U, length, theta, hubs, 0 if c0 else -1, n0, m, (), ())
    w, h = length * np.cos(theta), length * np.sin(theta)
    k = np.arange(U)
    s = np.where(k % 2 == 0, 1.0, -1.0)[:, None]
    ex, ey, ez = np.eye(3)
    zk = (k * h)[:, None] * ez
    A_low, A_up = zk - s * (w / 2) * ex, zk + h * ez + s * (w / 2) * ex
    B_low, B_up = zk + s * (w / 2) * ex, zk + h * ez - s * (w / 2) * ex
    mid = zk + 0.5 * h * ez
    A, B = lay.bar("A", k), lay.bar("B", k)
    asm = _Assembly(n)
    # bars A: A_0 pinned to B_0 at the midpoints; A_k on A_{k-1}'s upper end (or its hub)
    prev = lay.hub(k[:-1]) if hubs else A[:-1]
    asm.body(A, np.concatenate(([B[0]], prev)), J.REVOLUTE, ey, _bar_frames(A_low, A_up, ey),
             np.where((k == 0)[:, None], mid, A_low), bar_mass, mid, I_bar)
    # bars B: B_0 at its lower end on the carriage (or the ground); B_k at A_k's midpoint
    asm.body(B, np.concatenate(([lay.carriage], A[1:])), J.REVOLUTE, ey, _bar_frames(B_low, B_up, ey),
             np.where((k == 0)[:, None], B_low, mid), bar_mass, mid, I_bar)
    if hubs:                      # welded at A_k's upper end: a lumped node mass (no free spin)
        asm.body(lay.hub(k), A, J.FIXED, 0.0, np.eye(3), A_up, hub_mass, A_up, _sphere(hub_mass, hub_radius))
    if c0:                        # the carriage: slides along -x (towards the fixed pin) from B_0's lower end
        asm.body(0, -1, J.PRISMATIC, -ex, np.eye(3), B_low[0], carriage_mass, B_low[0],
                 np.eye(3) * carriage_mass * CARRIAGE_SIZE ** 2 / 6.0)
    asm.loop(0, 0, ["pin_A0_ground"], pins, A[0], -1, A_low[0], ey)
    if U > 1:
        asm.loop(k[:-1], 1, [f"pin_B{i}_B{i + 1}" for i in range(U - 1)], pins, B[:-1], B[1:], B_up[:-1], ey)
    model = asm.model(np.concatenate((np.zeros(n0, dtype=np.int64), np.repeat(np.arange(1, U), m))),
                      name or f"scissor_mast(units={U}, closed, {support})", gravity, validate)
    return model, lay


def _polygon_layout(U, N, support, length, theta):
    """Slots of the bodies of a unit of an N-sided mast (see :func:`_polygon`)."""
    slots0, slots = [("H0", 0)], []
    for f in range(N):
        first = [("A", f), ("B", f)] if f == 0 else [("B", f), ("A", f)]
        slots += first + [("H", (f + 1) % N)]
        slots0 += first + ([("H0", f + 1)] if f + 1 < N else []) + [("H", (f + 1) % N)]
    slots0 = tuple((nm, i) for i, nm in enumerate(slots0))
    slots = tuple((nm, i) for i, nm in enumerate(slots))
    return ScissorLayout({3: "triangle", 4: "square"}[N], N, True, support, U, length, theta, True, -1,
                         len(slots0), len(slots), slots0, slots)


def _polygon(U, N, length, bar_mass, I_bar, theta, hub_mass, hub_radius, support, gravity, name, validate):
    lay = _polygon_layout(U, N, support, length, theta)
    n = lay.n0 + (U - 1) * lay.m
    w, h = length * np.cos(theta), length * np.sin(theta)
    rho = w / (2.0 * np.sin(np.pi / N))                                   # circumradius of the section
    phi = 2.0 * np.pi * np.arange(N) / N - 0.5 * np.pi - np.pi / N        # corners; face 0 faces -y
    radial = np.stack((np.cos(phi), np.sin(phi), np.zeros(N)), axis=1)
    psi = 2.0 * np.pi * np.arange(N) / N - 0.5 * np.pi
    normal = np.stack((np.cos(psi), np.sin(psi), np.zeros(N)), axis=1)   # face f's outward normal: its pins' axis
    ez = np.array([0.0, 0.0, 1.0])
    k = np.arange(U)

    def corner(level, c):
        return rho * radial[c % N] + np.asarray(level, dtype=float)[..., None] * h * ez

    def H(level, c):
        level = np.asarray(level)
        return np.where(level == 0, lay._index(("H0", c % N), 0), lay._index(("H", c % N), np.maximum(level - 1, 0)))

    asm = _Assembly(n)
    I_hub = _sphere(hub_mass, hub_radius)
    for f in range(N):
        nf = normal[f]
        A_low, A_up = corner(k, f), corner(k + 1, f + 1)
        B_low, B_up = corner(k, f + 1), corner(k + 1, f)
        mid = 0.5 * (A_low + A_up)
        A, B = lay.bar("A", k, f), lay.bar("B", k, f)
        RA, RB = _bar_frames(A_low, A_up, nf), _bar_frames(B_low, B_up, nf)
        ey = np.array([0.0, 1.0, 0.0])                                     # a bar's pin axis, in its frame
        if f == 0:                # A_{k,0} on hub (k, 0) at its lower end; B_{k,0} at A's midpoint
            asm.body(A, H(k, 0), J.REVOLUTE, ey, RA, A_low, bar_mass, mid, I_bar)
            asm.body(B, A, J.REVOLUTE, ey, RB, mid, bar_mass, mid, I_bar)
        else:                     # B_{k,f} on hub (k + 1, f) at its upper end; A_{k,f} at B's midpoint
            asm.body(B, H(k + 1, f), J.REVOLUTE, ey, RB, B_up, bar_mass, mid, I_bar)
            asm.body(A, B, J.REVOLUTE, ey, RA, mid, bar_mass, mid, I_bar)
        # the hub at A_{k,f}'s upper end, pinned to it about the face's normal
        asm.body(H(k + 1, f + 1), A, J.REVOLUTE, nf, np.eye(3), A_up, hub_mass, A_up, I_hub)
        # the pins the tree leaves out: the other bar ends on their hubs
        if f == 0:
            asm.loop(k, 0, [f"pin_B{i}.0_H{i + 1}.0" for i in k], "revolute", B, H(k + 1, 0), B_up, nf)
            if U > 1:
                asm.loop(k[1:], 1, [f"pin_B{i}.0_H{i}.1" for i in k[1:]], "revolute", B[1:], H(k[1:], 1),
                         B_low[1:], nf)
        else:
            asm.loop(k, 2 * f, [f"pin_A{i}.{f}_H{i}.{f}" for i in k], "revolute", A, H(k, f), A_low, nf)
            c = (f + 1) % N
            kk = k if c == 0 else k[1:]
            if kk.size:
                asm.loop(kk, 2 * f + 1, [f"pin_B{i}.{f}_H{i}.{c}" for i in kk], "revolute", B[kk], H(kk, c),
                         B_low[kk], nf)
    # the base hubs: hub (0, 0) is the tree's root; hub (0, c) hangs at B_{0,c-1}'s lower end
    for c in range(N):
        inward = -radial[c]
        if c == 0:
            jt = J.PRISMATIC if support == "slider" else J.FIXED
            asm.body(H(0, 0), -1, jt, inward, np.eye(3), corner(0, 0), hub_mass, corner(0, 0), I_hub)
        else:
            asm.body(H(0, c), lay.bar("B", 0, c - 1), J.REVOLUTE, normal[c - 1], np.eye(3), corner(0, c), hub_mass,
                     corner(0, c), I_hub)
            if support == "slider":
                asm.loop(0, -N + c, [f"slider_H0.{c}"], "prismatic", -1, H(0, c), corner(0, c), inward)
            else:
                asm.loop(0, -N + c, [f"anchor_H0.{c}"], "spherical", -1, H(0, c), corner(0, c))
    units = np.concatenate((np.zeros(lay.n0, dtype=np.int64), np.repeat(np.arange(1, U), lay.m)))
    model = asm.model(units, name or f"scissor_mast(units={U}, {lay.section}, {support})", gravity, validate)
    return model, lay


def _open_planar(U, length, thickness, depth, bar_mass, theta, hub_mass, hub_radius, gravity, name, validate):
    """The tree (see :func:`scissor_mast`)."""
    hubs = float(hub_mass) > 0
    m = 3 if hubs else 2
    n = m * U
    lay = ScissorLayout("planar", 1, False, None, U, length, theta, hubs, -1, m, m, (), ())

    k = np.arange(U)
    a = m * k                   # bar A_k
    b = a + 1                   # bar B_k
    # A_k rises at theta (even k) or pi - theta (odd k) from +x towards +z; both children of A_k
    # (B_k at its midpoint, the next unit at its tip) are turned by pi - 2 theta (even k) or
    # 2 theta - pi (odd k) against it.  A turn by d in that sense is the coordinate rotation roty(-d).
    E_turn = np.array([roty(2.0 * theta - np.pi), roty(np.pi - 2.0 * theta)])[k % 2]

    parent = np.empty(n, dtype=np.int64)
    jtype = np.full(n, J.REVOLUTE, dtype=np.int8)
    axis = np.zeros((n, 3))
    axis[:, 1] = 1.0
    E_tree = np.tile(np.eye(3), (n, 1, 1))
    r_tree = np.zeros((n, 3))
    mass = np.full(n, bar_mass)
    com = np.zeros((n, 3))
    I_com = np.empty((n, 3, 3))

    # bar A_k
    parent[0] = -1
    E_tree[0] = roty(-theta)
    r_tree[0] = (-0.5 * length * np.cos(theta), 0.0, 0.0)
    if hubs:
        h = a + 2
        parent[h] = a
        r_tree[h, 0] = length
        mass[h] = float(hub_mass)
        I_com[h] = _sphere(hub_mass, hub_radius)
        parent[a[1:]] = h[:-1]               # r_tree 0: the hub's frame is at the pin
    else:
        parent[a[1:]] = a[:-1]
        r_tree[a[1:], 0] = length
    E_tree[a[1:]] = E_turn[:-1]
    com[a, 0] = 0.5 * length
    I_com[a] = rectangular_bar_inertia(bar_mass, length, thickness, depth)
    # bar B_k, pinned at A_k's midpoint
    parent[b] = a
    E_tree[b] = E_turn
    r_tree[b, 0] = 0.5 * length
    I_com[b] = I_com[a]

    if validate is None:
        validate = n <= VALIDATE_LIMIT
    model = Model(parent, jtype, axis, E_tree, r_tree, mass, com, I_com, gravity=gravity,
                  name=name or f"scissor_mast(units={U})", validate=bool(validate), units=np.repeat(k, m))
    return model, lay


def _positive(key, v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"scissor_mast needs a number for {key}, got {v!r}") from None
    if not (np.isfinite(x) and x > 0):
        raise ValueError(f"scissor_mast needs {key} > 0, got {v}")
    return x


def scissor_mast(units=SCISSOR_UNITS, length=SCISSOR_BAR_LENGTH, thickness=SCISSOR_BAR_THICKNESS,
                 depth=SCISSOR_BAR_DEPTH, density=SCISSOR_DENSITY, angle_deg=None, hub_mass=None,
                 hub_radius=HUB_RADIUS, gravity=(0.0, 0.0, -9.81), name=None, validate=None, closed=None,
                 support=None, section="planar", carriage_mass=CARRIAGE_MASS, unit_height=None, pins=None):
    """Seed 004's scissor-like deployable mast: ``units`` scissor units, each kept whole in one part.

    Three forms, all with ``model.units`` labelling every body with its scissor unit (the
    partitioner, ``partree.parallel.partition``, never splits a unit) and ``model.scissor`` a
    :class:`ScissorLayout` (which body is which):

    * **open** (the default, ``closed=False``): the planar mechanism's spanning tree, one pin per
      unit left out (below).
    * **closed planar** (``closed=True``): every pin, the left-out ones as loops
      (:class:`partree.Loop`), supported as the paper's one-degree-of-freedom mechanism.
    * **spatial** (``section="triangle"`` or ``"square"``, always closed): a prism whose faces
      are planar scissor stacks, joined at corner hubs; one degree of freedom.

    At q = 0 every form is deployed at the initial angle (every bar at ``angle_deg`` to the
    horizontal; each unit l sin(angle) high) and every loop is closed.  The mast grows along +z.

    **Open planar mast.**  Regular numbering, m = 2 bodies per unit (3 with hubs): unit k is
    bodies k m .. k m + m - 1.

    - bar A_k (body k m): unit k's first body.  A_0 is pinned to the ground; A_k (k >= 1) is
      pinned to the upper end of A_{k-1} (or to hub_{k-1}).  Body frame at its lower end, the bar
      along its x axis, centre of mass at (l/2, 0, 0).
    - bar B_k (body k m + 1): pinned to A_k at both bars' midpoints (the scissor pin).  Body frame
      at its midpoint (= its centre of mass), the bar along its x axis.
    - hub_k (body k m + 2, only with ``hub_mass > 0``): a node hub pinned at A_k's upper end;
      A_{k+1} is then pinned to the hub instead of to A_k (so the hub spins freely).

    Every joint is revolute about y, the normal of the mechanism's plane (x-z).  The A bars rise
    alternately to +x and to -x; unit k spans heights k l sin(angle) .. (k + 1) l sin(angle),
    centred on the z axis.  The pins left out of the tree: B_0's lower end to the ground at
    (l cos(angle) / 2, 0, 0), and B_k's upper end to B_{k+1}'s lower end (k = 0 .. units - 2).

    **Closed planar mast** (``closed=True``, ``support="slider"`` by default).  The same bars and
    places; a unit must be connected in the tree (one body whose parent lies outside it), so unit
    0 is rooted at one ground attachment and reaches the other through a loop:

    - ``support="slider"`` (one degree of freedom, the paper's mechanism): body 0 is the slider
      carriage, on a prismatic joint from the ground along -x (towards the fixed pin: q > 0
      draws the base ends together and deploys the mast), at B_0's lower end; B_0 (body 1) is
      pinned to it at its lower end (body frame there); A_0 (body 2) is pinned to B_0 at the
      midpoints (body frame there); hub_0 (body 3, with hubs).  Units k >= 1 as in the open mast,
      from body 3 (4 with hubs) on.  theta_1 = angle + q of B_0's joint (q > 0 deploys).
    - ``support="pinned"`` (locked, 0 degrees of freedom): no carriage; B_0 (body 0) pinned to
      the ground at its lower end, A_0 (body 1), and on as above.
    - loops, all about y: ``pin_A0_ground`` (A_0's lower end to the ground at
      (-l cos(angle) / 2, 0, 0)) and ``pin_B{k}_B{k+1}`` (B_k's upper end to B_{k+1}'s lower end).
      ``pins="point_on_line"`` (the default) makes each the pin of the plane, 2 rows: the two
      in-plane components of the pinned ends' relative translation, as a planar formulation (and
      the paper's) writes a pin.  ``pins="revolute"`` makes each a 3-D revolute joint, 5 rows:
      the same two, plus the translation along y and the rotations about x and z, which every
      joint of the tree (revolute about y, the slider along x) already keeps at zero; the loops'
      Jacobian then has 3 dependent rows a pin.  The motion and the in-plane pin forces are the
      same; the 2-row pins cost less (``scripts/benchmarks/bench_scissor.py --breakdown``).
    - hubs (``hub_mass > 0``) are welded to A_k's upper end (fixed joints: a lumped node mass),
      so that they add no spinning degree of freedom.

    Mobility, nv - rank(J) at q = 0 (checked in ``tests/test_scissor.py``): 1 with the slider
    (nv = 2 units + 1, rank 2 units), 0 pinned (nv = rank = 2 units).

    **Spatial masts** (``section="triangle"``: 3 faces, ``"square"``: 4).  The section is a
    regular N-gon of side l cos(angle) (the planar unit's span), in the x-y plane, face 0 facing
    -y.  Face f joins corners f and f + 1; in unit k its bar A_{k.f} runs from corner f at level
    k up to corner f + 1 at level k + 1 and bar B_{k.f} from corner f + 1 up to corner f; the two
    are pinned at their midpoints about the face's outward normal, and every bar end is pinned,
    about the same normal, to the hub H_{level.corner} at its corner.  A hub joins the bars of
    two faces whose normals differ, so it cannot spin, nor can a bar about its own axis (pinned
    at three points): the only motion is the deployment, every face at the same angle.  The
    base hubs slide radially on the ground (``support="slider"``: H_{0.0} is the tree's root on a
    prismatic joint along its inward radial, the others are prismatic loops ``slider_H0.c``; q >
    0 of the root deploys) or are held (``"pinned"``: H_{0.0} fixed, the others spherical loops
    ``anchor_H0.c``).  Tree of unit k: A_{k.0} on H_{k.0} (lower end), B_{k.0} on A_{k.0}
    (midpoint), H_{k+1.1} on A_{k.0} (upper end); for f >= 1: B_{k.f} on H_{k+1.f} (upper end),
    A_{k.f} on B_{k.f} (midpoint), H_{k+1.f+1} on A_{k.f} (upper end).  Unit 0 also holds the
    base hubs: H_{0.0} first, H_{0.c} on B_{0.c-1}'s lower end.  Bodies: 3 N per unit, 4 N in
    unit 0; loops ``pin_B{k}.{f}_H{level}.{corner}`` and ``pin_A{k}.{f}_H{level}.{corner}``.
    Mobility at q = 0: 1 with the sliders (triangle: nv = 9 units + 3, rank 9 units + 2), 0
    pinned.  Like every real scissor mast of this kind the mechanism is overconstrained: the
    loops' Jacobian has about three times as many rows as its rank (triangle: 30 rows a unit).

    ==============================  ==========================================================  ======
    parameter                       value                                                       source
    ==============================  ==========================================================  ======
    mechanism                       planar scissor units stacked in series                      paper
    number of units                 3 (``units``; any number)                                   paper
    bars                            length 1 m, rectangular section 5 mm x 30 mm,               paper
                                    density 2750 kg/m^3 (mass 0.4125 kg each)
    initial angle                   30 deg (``angle_deg``), read as the bars' angle to the      paper,
                                    horizontal; or ``unit_height`` = l sin(angle)               read
    elastic modulus                 70 GPa in the paper; not used (the bars are rigid)          paper
    degrees of freedom              one (theta_1): ``closed=True``, ``support="slider"``        paper
    driving forces at A and C       not part of the model: :class:`ScissorDrive` gives them as  paper
                                    joint forces (its law is chosen, see there)
    section orientation             the 5 mm side along the pin axis (y of every bar), the 30   chosen
                                    mm side in the scissor's plane (a flat bar)
    loop closures                   open: one pin per unit left out (a tree); closed: every     chosen
                                    pin, the tree's left-out ones as loops: planar pins
                                    (``pins="point_on_line"``, 2 rows) or 3-D revolute
                                    joints (``pins="revolute"``, 5 rows); spatial: revolute
    bars' plane                     all bars of a face in one plane (no offset along the pin)   chosen
    ground support (closed)         ``support="slider"``: one base end pinned to the ground,    chosen
                                    the other pinned to a carriage sliding horizontally
                                    (spatial: every base hub on a radial slider);
                                    ``"pinned"``: both held (locked)
    carriage                        0.01 kg (``carriage_mass``), a uniform 30 mm cube           chosen
    ground support (open)           A_0 pinned; B_0's support left out with the loops           chosen
    hubs (planar)                   none by default; ``hub_mass`` > 0 adds one per unit, a      chosen
                                    uniform solid sphere of radius ``hub_radius`` (0.02 m);
                                    pinned at A_k's tip (open), welded to it (closed)
    hubs (spatial)                  at every corner node, 0.05 kg (``hub_mass``), spheres of    chosen
                                    radius 0.02 m
    spatial sections                ``section="triangle"`` or ``"square"`` (the paper's mast    chosen
                                    is planar)
    gravity                         (0, 0, -9.81) m/s^2, along the mast                         chosen
    ==============================  ==========================================================  ======

    Raises ``ValueError`` for an angle at or past lock-up (angle_deg <= 0: the bars flat, >= 90:
    upright; closed masts also within ``LOCKUP_MARGIN`` of them), a ``unit_height`` the bars
    cannot reach (the pins cannot meet: 0 < unit_height < length), both ``angle_deg`` and
    ``unit_height``, an unknown ``support``, ``section`` or ``pins``, a support, section or pins for
    an open mast, ``pins`` for a spatial mast (its hubs join faces of different planes: 3-D
    revolute pins), and non-positive sizes or masses.

    Large masts (more than ``VALIDATE_LIMIT`` bodies) skip ``Model.validate`` unless
    ``validate=True``; the arrays are valid by construction.
    """
    U = int(units)
    if U < 1:
        raise ValueError(f"scissor_mast needs units >= 1, got {units}")
    length = _positive("length", length)
    thickness, depth = _positive("thickness", thickness), _positive("depth", depth)
    density = _positive("density", density)
    sec = str(section).lower()
    if sec not in SECTIONS:
        raise ValueError(f"scissor_mast: unknown section {section!r}; the sections are {', '.join(SECTIONS)}")
    N = SECTIONS[sec]
    if closed is None:
        closed = N > 1
    closed = bool(closed)
    if N > 1 and not closed:
        raise ValueError(f"scissor_mast: a {sec} mast exists only closed (its faces meet at the corner hubs "
                         f"through loops); leave closed out or pass closed=True")
    if support is not None and not closed:
        raise ValueError(f"scissor_mast: support={support!r} is for closed masts (the open tree has A_0 pinned "
                         f"to the ground and B_0's support left out); pass closed=True")
    if closed:
        support = "slider" if support is None else str(support).lower()
        if support not in SUPPORTS:
            raise ValueError(f"scissor_mast: unknown support {support!r}; the supports are {', '.join(SUPPORTS)}")
    if pins is not None:
        if not closed:
            raise ValueError(f"scissor_mast: pins={pins!r} is for closed masts (the open tree leaves its loop pins "
                             f"out); pass closed=True")
        if N > 1:
            raise ValueError(f"scissor_mast: pins={pins!r} is for the planar mast; a {sec} mast's hubs join faces "
                             f"of different planes, so its pins are 3-D revolute loops")
        pins = str(pins).lower()
        if pins not in PINS:
            raise ValueError(f"scissor_mast: unknown pins {pins!r}; the pins are {', '.join(PINS)}")

    # the angle: given, or from the units' height
    if unit_height is not None:
        if angle_deg is not None:
            raise ValueError("scissor_mast: give angle_deg or unit_height, not both")
        hu = float(unit_height)
        if not (np.isfinite(hu) and 0.0 < hu < length):
            raise ValueError(f"scissor_mast: a unit cannot be {unit_height} m high with bars {length} m long: "
                             f"the pins meet only for 0 < unit_height < length (at unit_height = length the "
                             f"bars stand upright, locked)")
        theta = float(np.arcsin(hu / length))
    else:
        deg = SCISSOR_ANGLE_DEG if angle_deg is None else float(angle_deg)
        if not (np.isfinite(deg) and 0.0 < deg < 90.0):
            raise ValueError(f"scissor_mast needs 0 < angle_deg < 90, got {angle_deg}: at 0 deg the bars lie flat "
                             f"and at 90 deg they stand upright, aligned in lock-up (singular, no unit closes "
                             f"beyond)")
        theta = float(np.deg2rad(deg))
    if closed and min(theta, 0.5 * np.pi - theta) < LOCKUP_MARGIN:
        raise ValueError(f"scissor_mast: angle {np.rad2deg(theta)!r} deg is within {LOCKUP_MARGIN} rad of lock-up "
                         f"(0 or 90 deg), where the closed mast's loop Jacobian is singular")

    if hub_mass is None:
        hub_mass = CORNER_HUB_MASS if N > 1 else 0.0
    hub_mass = float(hub_mass)
    if not np.isfinite(hub_mass) or hub_mass < 0 or (hub_mass > 0 and not float(hub_radius) > 0):
        raise ValueError(f"scissor_mast needs hub_mass >= 0 and, with hubs, hub_radius > 0; got "
                         f"{hub_mass} and {hub_radius}")
    if N > 1 and hub_mass == 0:
        raise ValueError(f"scissor_mast: a {sec} mast needs hubs of mass > 0 at its corners (hub_mass, default "
                         f"{CORNER_HUB_MASS} kg)")
    if closed and support == "slider" and N == 1:
        carriage_mass = _positive("carriage_mass", carriage_mass)

    bar_mass = density * length * thickness * depth
    if not closed:
        model, lay = _open_planar(U, length, thickness, depth, bar_mass, theta, hub_mass, hub_radius, gravity,
                                  name, validate)
    else:
        I_bar = rectangular_bar_inertia(bar_mass, length, thickness, depth)
        if N == 1:
            model, lay = _closed_planar(U, length, bar_mass, I_bar, theta, hub_mass, hub_radius, support,
                                        carriage_mass, gravity, name, validate, pins or PINS[0])
        else:
            model, lay = _polygon(U, N, length, bar_mass, I_bar, theta, hub_mass, hub_radius, support, gravity,
                                  name, validate)
    model.scissor = lay
    return model


def _layout(model):
    lay = getattr(model, "scissor", None)
    if not isinstance(lay, ScissorLayout):
        raise ValueError(f"model {getattr(model, 'name', model)!r} has no scissor layout: build it with "
                         f"partree.models.scissor_mast (a model read back from a file loses it)")
    return lay


def _world_points(model, q, points):
    from ..algorithms.kinematics import forward_kinematics

    kin = forward_kinematics(model, q)
    return kin, np.array([kin.p[b] + kin.R[b] @ x for b, x in points])


def scissor_angle(model, q):
    """theta_1 (rad): the angle of bar A_0 to the horizontal at configuration q."""
    lay = _layout(model)
    b, x0 = lay.bar_point("A", 0, 0, 0.0)
    _, P = _world_points(model, q, [(b, x0), (b, x0 + np.array([lay.length, 0.0, 0.0]))])
    d = P[1] - P[0]
    return float(np.arctan2(d[2], np.hypot(d[0], d[1])))


def scissor_height(model, q):
    """Height (m) of the mast's top above its base at configuration q: the mean height of the top
    unit's upper ends less that of unit 0's lower ends."""
    lay = _layout(model)
    _, top = _world_points(model, q, lay.top_points())
    _, base = _world_points(model, q, lay.base_points())
    return float(top[:, 2].mean() - base[:, 2].mean())


class ScissorDrive:
    """The driving forces at A and C (seed 004) as joint forces ``tau(t, q, qd)``.

    Usable as ``partree.simulate(model, ..., torques=ScissorDrive(model))`` (serial backend) on a
    closed mast of :func:`scissor_mast` with ``support="slider"``.

    The paper applies driving forces at points A and C; its figure and force law did not
    survive.  The law chosen here: at the base level (A and C read as the two lower ends of unit
    0; spatial: the base hubs) every end is pulled horizontally towards the ends' common centre
    with the force F(t); with ``top=True`` the top unit's upper ends (spatial: the top hubs) are
    pulled in the same way with the same force.  Drawing the base ends together raises the
    scissor angle, so F above the static holding force deploys the mast.  The planar mast's
    fixed pin takes its end's force as a reaction, so only the carriage's force does work.

    F(t):

    * ``force=None`` (default): F(t) = F_hold (1 + gain r(t)), r(t) = min(1, t / ramp) (r = 1 with
      ramp = 0).  F_hold (``hold``) is the force that holds the mast at rest at q = 0 against
      gravity, by virtual work along the mechanism's one degree of freedom (:meth:`holding_force`:
      O(N) and exact at any length).  The mast starts in equilibrium and the excess ``gain``
      F_hold, ramped in over ``ramp`` s, deploys it.  Chosen: gain = 1, ramp = 0.1 s.
    * ``force`` a number F0: F(t) = F0 r(t).
    * ``force`` a callable: F(t) = force(t).

    Each force enters as its generalized force (J_point^T f over the tree joints above its body),
    from the world positions of the points at q.
    """

    def __init__(self, model, force=None, gain=1.0, ramp=0.1, top=False):
        lay = _layout(model)
        if not lay.closed or lay.support != "slider":
            raise ValueError(f"ScissorDrive drives a closed mast on sliders (scissor_mast(closed=True, "
                             f"support='slider')); this one is {'open' if not lay.closed else 'pinned, locked'}")
        self.model, self.layout, self.top = model, lay, bool(top)
        self.ramp, self.gain = float(ramp), float(gain)
        if not (np.isfinite(self.ramp) and self.ramp >= 0):
            raise ValueError(f"ScissorDrive needs ramp >= 0, got {ramp}")
        levels = [lay.base_points()] + ([lay.top_points()] if self.top else [])
        self._levels = levels
        # per point: the joints above its body that move (their body numbers) and velocity indices
        self._paths = []
        for pts in levels:
            for b, _ in pts:
                path = []
                i = int(b)
                while i >= 0:
                    if model.nv_j[i] == 1:
                        path.append(i)
                    i = int(model.parent[i])
                path = np.array(path, dtype=np.int64)
                self._paths.append((path, model.idx_v[path], model.jtype[path] == J.PRISMATIC))
        self._force = force
        if force is None:
            self.hold = self.holding_force()
        elif callable(force):
            self.hold = None
        else:
            f0 = float(force)
            if not np.isfinite(f0):
                raise ValueError(f"ScissorDrive needs a finite force, got {force}")
            self._force = f0
            self.hold = None

    def holding_force(self):
        """F_hold (N): the force that holds the mast at rest at q = 0 against gravity.

        Virtual work along the mechanism's one degree of freedom, the common angle theta of the
        bars: as theta moves, every height above the base scales with sin(theta) and every
        horizontal distance from the support's fixed point (the planar mast's pinned end; the
        centre of a spatial mast's radial sliders) with cos(theta), so a point p moves by
        dp/dtheta = (-tan(theta) (p - c)_horizontal, cot(theta) (p_z - z_base)).  Then
        F_hold = (dV/dtheta) / (sum over the driven points of d_i . dP_i/dtheta), with V the
        potential of gravity over the bodies' centres of mass and d_i the driving forces' unit
        directions.  One forward kinematics, O(N): unlike a solve of the constrained dynamics,
        whose accuracy falls with the mast's depth in relative coordinates, it is exact at any
        number of units."""
        from ..algorithms.kinematics import forward_kinematics

        m, lay = self.model, self.layout
        kin = forward_kinematics(m, m.neutral())
        com = kin.p + np.einsum("nij,nj->ni", kin.R, m.com)
        levels = [np.array([kin.p[b] + kin.R[b] @ x for b, x in pts]) for pts in self._levels]
        base = levels[0]
        # the fixed point of the support: the planar mast's pinned end (A_0's lower end), else the
        # centre of the base hubs on their radial sliders
        c = base[1] if lay.sides == 1 else base.mean(axis=0)
        t = np.tan(lay.angle)

        def rate(p):
            d = np.empty_like(p)
            d[:, :2] = -t * (p[:, :2] - c[:2])
            d[:, 2] = (p[:, 2] - c[2]) / t
            return d

        dV = -float(np.sum(m.mass * (rate(com) @ m.gravity)))
        dW = 0.0
        for P in levels:
            inward = P.mean(axis=0) - P
            inward[:, 2] = 0.0
            nd = np.linalg.norm(inward, axis=1)
            live = nd > 0
            dW += float(np.sum((inward[live] / nd[live, None]) * rate(P)[live]))
        return dV / dW

    def force(self, t):
        """F(t), N."""
        r = 1.0 if self.ramp == 0 else min(1.0, max(0.0, float(t)) / self.ramp)
        if self._force is None:
            return self.hold * (1.0 + self.gain * r)
        if callable(self._force):
            return float(self._force(t))
        return self._force * r

    def carriage_torques(self):
        """This drive as per-joint forces of time (:func:`carriage_torques`)."""
        return carriage_torques(self)

    def generalized(self, q, F, kin=None):
        """Joint forces (nv,) of the forces F at configuration q (``kin``: its kinematics, if
        already at hand)."""
        from ..algorithms.kinematics import forward_kinematics

        m = self.model
        kin = forward_kinematics(m, q) if kin is None else kin
        tau = np.zeros(m.nv)
        it = iter(self._paths)
        for pts in self._levels:
            P = np.array([kin.p[b] + kin.R[b] @ x for b, x in pts])
            inward = P.mean(axis=0) - P
            inward[:, 2] = 0.0
            for Pi, d in zip(P, inward):
                path, iv, prism = next(it)
                nd = np.linalg.norm(d)
                if nd == 0.0 or path.size == 0:
                    continue
                f = F * d / nd
                a = np.einsum("nij,nj->ni", kin.R[path], m.axis[path])     # joint axes in the world
                moment = np.cross(Pi - kin.p[path], f)
                tau[iv] += np.where(prism, a @ f, np.einsum("ni,ni->n", a, moment))
        return tau

    def __call__(self, t, q, qd):
        from ..algorithms.kinematics import forward_kinematics

        kin = forward_kinematics(self.model, q)
        self.check_lockup(t, q, kin)
        return self.generalized(q, self.force(t), kin)

    def check_lockup(self, t, q, kin=None):
        """Refuse a state at lock-up: the base ends (A and C) drawn together to within
        ``LOCKUP_SPREAD`` of a bar length, every bar upright and aligned (theta_1 = 90 deg).
        There the mechanism is singular and gains a rotation of the folded mast about its
        coincident base ends, which a drive would spin it into: a real mast has a stop there,
        which the model does not hold."""
        from ..algorithms.kinematics import forward_kinematics

        kin = forward_kinematics(self.model, q) if kin is None else kin
        P = np.array([kin.p[b] + kin.R[b] @ x for b, x in self._levels[0]])
        spread = float(np.abs(P[:, :2] - P[:, :2].mean(axis=0)).max())
        if spread < LOCKUP_SPREAD * self.layout.length:
            raise PartreeInputError(f"the scissor mast reached lock-up at t = {float(t):.6g} s: its base ends are "
                                    f"{spread:.3g} m apart, every bar upright (theta_1 = 90 deg); the mechanism is "
                                    f"singular there and the model has no stop: end the run before (t_end) or "
                                    f"lower the driving force")


class CarriageForce:
    """A :class:`ScissorDrive`'s force F(t) on the carriage's slider joint: a function of time
    alone, so that it travels to the parts of a distributed run (a per-joint torque of
    ``partree.simulate``).  ``sign`` is the joint force of a unit pull towards the fixed pin.
    Being a function of time, it does not see the state and cannot refuse lock-up as
    :meth:`ScissorDrive.check_lockup` does: a run driven past it stays finite and closed, the
    carriage passing the fixed pin and the planar mechanism opening again the other way (the
    model has no stop)."""

    def __init__(self, drive, sign):
        self.hold, self.gain, self.ramp, self.sign = drive.hold, drive.gain, drive.ramp, float(sign)
        self._force = drive._force

    def __call__(self, t):
        r = 1.0 if self.ramp == 0 else min(1.0, max(0.0, float(t)) / self.ramp)
        if self._force is None:
            F = self.hold * (1.0 + self.gain * r)
        elif callable(self._force):
            F = float(self._force(t))
        else:
            F = self._force * r
        return self.sign * F

    def __repr__(self):
        return f"CarriageForce(hold={self.hold!r}, gain={self.gain!r}, ramp={self.ramp!r}, sign={self.sign!r})"


def carriage_torques(drive):
    """The drive of a planar mast on a slider as per-joint forces of time: ``{carriage joint:
    CarriageForce}``, for ``torques=`` on every backend (``partree simulate --drive``).

    The force at the fixed pin's end (A) acts at a point the ground pin holds: it does no work
    on any motion the loops allow and only adds to that pin's reaction.  The carriage's force
    alone therefore gives the same motion as the whole :class:`ScissorDrive`; the ground pin's
    reaction differs by the force at A.  Refused for ``top=True`` and the spatial sections,
    whose driving forces act through loops (the base hubs' sliders) or on moving bars."""
    lay, m = drive.layout, drive.model
    if lay.sides != 1 or lay.carriage < 0 or drive.top:
        raise ValueError("carriage_torques is for the planar mast on a slider driven at its base (top=False); "
                         "use the ScissorDrive itself (a function of the whole state, serial backend)")
    from ..algorithms.kinematics import forward_kinematics

    kin = forward_kinematics(m, m.neutral())
    pts = [kin.p[b] + kin.R[b] @ x for b, x in lay.base_points()]
    inward = np.mean(pts, axis=0) - pts[0]          # the carriage's end (B_0's lower end) is the first
    inward[2] = 0.0
    c = lay.carriage
    axis = kin.R[c] @ m.axis[c]
    return {m.joint_names[c]: CarriageForce(drive, float(axis @ inward / np.linalg.norm(inward)))}


def scissor_drive(model, force=None, gain=1.0, ramp=0.1, top=False):
    """:class:`ScissorDrive` (the driving forces at A and C as ``torques=`` of ``partree.simulate``)."""
    return ScissorDrive(model, force=force, gain=gain, ramp=ramp, top=top)
