"""Seed 004's scissor-like deployable mast, as a tree: ``scissor_mast(units)``.

A planar scissor (pantograph) mast is a stack of identical scissor units, each two bars pinned
at their midpoints (an "X").  Unit k's upper bar ends are pinned to unit k + 1's lower bar ends,
which closes one loop per unit.  partree is tree-only, so the tree keeps one of the two pins
between neighbouring units and leaves the other out (it is "cut", as a closed-loop solver would cut
it); the model is the spanning tree of the mechanism, and its ``units`` attribute labels the bodies
of every scissor unit so that the parallel engine keeps each unit whole in one part (the paper's
subsystems, each reduced to its 6x6 equivalent at its base, are the engine's parts).

Where the paper gives a number it is used as given; where it leaves one out, the value chosen here
is listed in the generator's docstring, marked "chosen".
"""
from __future__ import annotations

import numpy as np

from .. import joints as J
from ..model import Model
from ..spatial import roty
from .generators import VALIDATE_LIMIT, diag_inertia

SCISSOR_BAR_LENGTH = 1.0         # m, paper (l = 1000 mm)
SCISSOR_BAR_THICKNESS = 0.005    # m, paper (b = 5 mm), here out of the mechanism's plane
SCISSOR_BAR_DEPTH = 0.030        # m, paper (h = 30 mm), here in the mechanism's plane
SCISSOR_DENSITY = 2750.0         # kg/m^3, paper
SCISSOR_ANGLE_DEG = 30.0         # deg, paper (initial angle theta_1)
SCISSOR_UNITS = 3                # paper (a 3-level scissor mechanism)


def rectangular_bar_inertia(mass, length, thickness, depth):
    """Inertia about the centre of mass of uniform bars along x with a rectangular section,
    ``thickness`` along y and ``depth`` along z (batched):
    I_xx = m (b^2 + h^2) / 12, I_yy = m (l^2 + h^2) / 12, I_zz = m (l^2 + b^2) / 12."""
    m = np.asarray(mass, float)
    l2, b2, h2 = float(length) ** 2, float(thickness) ** 2, float(depth) ** 2
    return diag_inertia(m * (b2 + h2) / 12.0, m * (l2 + h2) / 12.0, m * (l2 + b2) / 12.0)


def scissor_mast(units=SCISSOR_UNITS, length=SCISSOR_BAR_LENGTH, thickness=SCISSOR_BAR_THICKNESS,
                 depth=SCISSOR_BAR_DEPTH, density=SCISSOR_DENSITY, angle_deg=SCISSOR_ANGLE_DEG,
                 hub_mass=0.0, hub_radius=0.02, gravity=(0.0, 0.0, -9.81), name=None, validate=None):
    """Seed 004's planar scissor-like deployable mast: ``units`` scissor units, each kept whole in one part.

    A tree (one pin per unit left out, see below) whose ``model.units`` labels every body with its
    scissor unit, so the partitioner (``partree.parallel.partition``) never splits a unit.

    Topology (regular numbering, m = 2 bodies per unit, 3 with hubs): unit k is bodies
    k m .. k m + m - 1 and has label k in ``model.units``.

    - bar A_k (body k m): unit k's first body.  A_0 is pinned to the ground; A_k (k >= 1) is
      pinned to the upper end of A_{k-1} (or to hub_{k-1}).  Body frame at its lower end, the bar
      along its x axis, centre of mass at (l/2, 0, 0).
    - bar B_k (body k m + 1): pinned to A_k at both bars' midpoints (the scissor pin).  Body frame
      at its midpoint (= its centre of mass), the bar along its x axis.
    - hub_k (body k m + 2, only with ``hub_mass > 0``): a node hub pinned at A_k's upper end;
      A_{k+1} is then pinned to the hub instead of to A_k.

    Every joint is revolute about y, the normal of the mechanism's plane (x-z); the mast grows
    along +z.  At q = 0 the mast is deployed at ``angle_deg`` (every bar at that angle to the
    horizontal x axis, the A bars alternately rising to +x and to -x); unit k spans heights
    k l sin(angle) .. (k + 1) l sin(angle), centred on the z axis.  The pins left out of the tree
    (closed loops, not modelled): B_0's lower end to the ground at (l cos(angle) / 2, 0, 0), and
    B_k's upper end to B_{k+1}'s lower end (k = 0 .. units - 2).  At q = 0 the ends of every left-out
    pin coincide.

    ==============================  ==========================================================  ======
    parameter                       value                                                       source
    ==============================  ==========================================================  ======
    mechanism                       planar scissor units stacked in series                      paper
    number of units                 3 (``units``; any number)                                   paper
    bars                            length 1 m, rectangular section 5 mm x 30 mm,               paper
                                    density 2750 kg/m^3 (mass 0.4125 kg each)
    initial angle                   30 deg (``angle_deg``), read as the bars' angle to the      paper,
                                    horizontal                                                  read
    elastic modulus                 70 GPa in the paper; not used (the bars are rigid)          paper
    driving forces at A and C       not part of the model (apply them as tau or f_ext)          paper
    section orientation             the 5 mm side out of the mechanism's plane (along the pin   chosen
                                    axis y), the 30 mm side in the plane (a flat bar)
    loop closures                   one pin per unit left out (a tree), see above               chosen
    bars' plane                     all bars in one plane (no offset along the pin axis)        chosen
    ground support of B_0           left out (with the loop-closing pins)                       chosen
    hubs                            none by default; ``hub_mass`` > 0 adds one per unit, a      chosen
                                    uniform solid sphere of radius ``hub_radius`` (0.02 m)
    gravity                         (0, 0, -9.81) m/s^2, along the mast                         chosen
    ==============================  ==========================================================  ======

    Large masts (more than ``VALIDATE_LIMIT`` bodies) skip ``Model.validate`` unless
    ``validate=True``; the arrays are valid by construction.
    """
    U = int(units)
    if U < 1:
        raise ValueError(f"scissor_mast needs units >= 1, got {units}")
    for key, v in (("length", length), ("thickness", thickness), ("depth", depth), ("density", density)):
        if not float(v) > 0:
            raise ValueError(f"scissor_mast needs {key} > 0, got {v}")
    theta = np.deg2rad(float(angle_deg))
    if not 0.0 < theta < 0.5 * np.pi:
        raise ValueError(f"scissor_mast needs 0 < angle_deg < 90, got {angle_deg}")
    if float(hub_mass) < 0 or (float(hub_mass) > 0 and not float(hub_radius) > 0):
        raise ValueError(f"scissor_mast needs hub_mass >= 0 and, with hubs, hub_radius > 0; got "
                         f"{hub_mass} and {hub_radius}")
    hubs = float(hub_mass) > 0
    m = 3 if hubs else 2
    n = m * U
    length = float(length)
    bar_mass = float(density) * length * float(thickness) * float(depth)

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
        I_com[h] = np.eye(3) * 0.4 * float(hub_mass) * float(hub_radius) ** 2
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
    return Model(parent, jtype, axis, E_tree, r_tree, mass, com, I_com, gravity=gravity,
                 name=name or f"scissor_mast(units={U})", validate=bool(validate),
                 units=np.repeat(k, m))
