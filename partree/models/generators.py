"""Model generators: serial chains, complete binary trees and random trees.

Everything is built with array operations over all bodies at once (the random trees with a bounded
number of children use one compiled loop), so ``chain(10**6)`` and ``binary_tree(10**6)`` build
in about a second.

Geometry shared by ``chain`` and ``binary_tree``: every body is a uniform solid cylinder (a link)
lying along its own x axis, with its joint at the body origin, its centre of mass at half the link
length and its outer end at ``(length, 0, 0)``, where its children's joints sit.

Axis conventions per joint type (for ``chain`` and ``binary_tree``):

============ ==================================================================================
revolute      about z; with ``alternate=True`` the axes alternate z, y, z, y, ... (a 3-D system)
prismatic     along x (the link); with ``alternate=True`` the axes cycle x, y, z
universal     first axis y, second axis z (a Hooke joint between two shafts along x)
spherical,
free, fixed   no axis
============ ==================================================================================

Large models (more than ``10**5`` bodies) skip ``Model.validate`` unless asked (``validate=True``):
their inertias are valid by construction, and validation costs more than the build.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import joints as J
from ..model import Model

VALIDATE_LIMIT = 10**5

DEFAULT_JOINT_TYPES = ("revolute", "prismatic", "universal", "spherical", "fixed")


# ---------------------------------------------------------------------------------------------
# small vectorised helpers (shared with partree.models.seeds)
# ---------------------------------------------------------------------------------------------
def _per_body(x, n, name):
    """A float array of n values from a scalar or an array of n values."""
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        return np.full(n, float(a))
    if a.shape != (n,):
        raise ValueError(f"{name} must be a scalar or have shape ({n},), got {a.shape}")
    return a.astype(float, copy=True)


def _joint_codes(joint, n):
    """int8 joint codes for n bodies from one joint type (name or code) or a sequence of them."""
    if isinstance(joint, (str, int, np.integer)):
        return np.full(n, J.code_of(joint), dtype=np.int8)
    seq = list(joint)
    if len(seq) != n:
        raise ValueError(f"joint has {len(seq)} entries for {n} bodies")
    return np.array([J.code_of(j) for j in seq], dtype=np.int8)


def diag_inertia(a, b, c):
    """Batch of diagonal 3x3 matrices diag(a, b, c) (each argument: scalar or array of n)."""
    a, b, c = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float), np.asarray(c, float))
    out = np.zeros(a.shape + (3, 3))
    out[..., 0, 0] = a
    out[..., 1, 1] = b
    out[..., 2, 2] = c
    return out


def cylinder_inertia(mass, length, radius):
    """Inertia about the centre of mass of uniform solid cylinders along x (batched).

    I_xx = m r^2 / 2 (about the cylinder's axis), I_yy = I_zz = m (3 r^2 + l^2) / 12.
    """
    m = np.asarray(mass, float)
    r2 = np.asarray(radius, float) ** 2
    l2 = np.asarray(length, float) ** 2
    return diag_inertia(0.5 * m * r2, m * (3.0 * r2 + l2) / 12.0, m * (3.0 * r2 + l2) / 12.0)


def rotz_batch(t):
    """Coordinate rotations E = rotz(t) (Featherstone's rotz) for an array of angles."""
    t = np.asarray(t, float)
    c, s = np.cos(t), np.sin(t)
    E = np.zeros(t.shape + (3, 3))
    E[..., 0, 0] = c
    E[..., 0, 1] = s
    E[..., 1, 0] = -s
    E[..., 1, 1] = c
    E[..., 2, 2] = 1.0
    return E


def random_rotations(rng, n):
    """n uniformly distributed random rotation matrices (from normalised Gaussian quaternions)."""
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    x, y, z, w = q.T
    R = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                  2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                  2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=1)
    R = R.reshape(n, 3, 3)
    return R


def random_units(rng, n):
    """n random unit vectors, uniform on the sphere."""
    a = rng.normal(size=(n, 3))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    return a


def random_inertias(rng, n, mass_range=(0.5, 2.0), spread_range=(0.005, 0.05)):
    """Random physically valid rigid-body inertias about the CoM, in random orientations.

    Each body is given a mass and the three second moments s_x, s_y, s_z > 0 (in m^2) of a mass
    distribution along its principal axes; the principal moments are then
    m (s_y + s_z), m (s_x + s_z), m (s_x + s_y), which are positive and satisfy the triangle
    inequality strictly, as every real rigid body's do.  Returns (mass (n,), I_com (n, 3, 3)).
    """
    mass = rng.uniform(*mass_range, size=n)
    s = rng.uniform(*spread_range, size=(n, 3))
    d = mass[:, None] * (s.sum(axis=1, keepdims=True) - s)      # principal moments (n, 3)
    R = random_rotations(rng, n)
    I = np.matmul(R * d[:, None, :], R.transpose(0, 2, 1))      # R diag(d) R^T
    I = 0.5 * (I + I.transpose(0, 2, 1))
    return mass, I


def _axes_for(codes, index, alternate):
    """Default axes (axis, axis2) for joint codes; ``index`` selects the alternating pattern."""
    n = codes.shape[0]
    axis = np.zeros((n, 3))
    axis2 = np.zeros((n, 3))
    rev = codes == J.REVOLUTE
    pri = codes == J.PRISMATIC
    uni = codes == J.UNIVERSAL
    if alternate:
        axis[rev, np.where(index[rev] % 2 == 0, 2, 1)] = 1.0        # z, y, z, y, ...
        axis[pri, index[pri] % 3] = 1.0                             # x, y, z, x, ...
    else:
        axis[rev, 2] = 1.0
        axis[pri, 0] = 1.0
    axis[uni, 1] = 1.0
    axis2[uni, 2] = 1.0
    return axis, axis2


def _validate_flag(validate, n):
    return n <= VALIDATE_LIMIT if validate is None else bool(validate)


# ---------------------------------------------------------------------------------------------
# chain
# ---------------------------------------------------------------------------------------------
def chain(n, joint="revolute", length=1.0, mass=1.0, radius=0.05, alternate=False,
          gravity=(0.0, 0.0, -9.81), name=None, validate=None):
    """A serial chain of n links: body i hangs on body i-1 (body 0 on the fixed base).

    ``joint``: any core joint type ('revolute', 'prismatic', 'universal', 'spherical', 'free',
    'fixed') or a sequence of n of them.  ``length``, ``mass``, ``radius``: scalars or arrays of
    n (uniform solid cylinders along x).  ``alternate``: revolute axes alternate z, y (so the chain
    moves in 3-D) and prismatic axes cycle x, y, z; otherwise revolute axes are all z (a planar
    chain) and prismatic axes all x.  Joint names are 'j0', 'j1', ...
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"chain needs n >= 1, got {n}")
    codes = _joint_codes(joint, n)
    length = _per_body(length, n, "length")
    mass = _per_body(mass, n, "mass")
    radius = _per_body(radius, n, "radius")
    idx = np.arange(n, dtype=np.int64)
    parent = idx - 1
    axis, axis2 = _axes_for(codes, idx, alternate)
    E_tree = np.zeros((n, 3, 3))
    E_tree[:, 0, 0] = E_tree[:, 1, 1] = E_tree[:, 2, 2] = 1.0
    r_tree = np.zeros((n, 3))
    r_tree[1:, 0] = length[:-1]
    com = np.zeros((n, 3))
    com[:, 0] = 0.5 * length
    I_com = cylinder_inertia(mass, length, radius)
    jname = joint if isinstance(joint, str) else (J.NAMES[int(joint)] if isinstance(joint, (int, np.integer))
                                                   else "mixed")
    return Model(parent, codes, axis, E_tree, r_tree, mass, com, I_com, axis2=axis2, gravity=gravity,
                 name=name or f"chain(n={n},joint={jname})", validate=_validate_flag(validate, n))


# ---------------------------------------------------------------------------------------------
# binary tree
# ---------------------------------------------------------------------------------------------
def binary_depth(n):
    """Depth of body i in the complete binary tree of ``binary_tree``: floor(log2(i + 1))."""
    _, e = np.frexp(np.arange(1, int(n) + 1, dtype=np.float64))
    return (e - 1).astype(np.int64)


def binary_tree(n, joint="revolute", length=1.0, mass=1.0, radius=0.05, spread=np.pi / 6,
                alternate=True, gravity=(0.0, 0.0, -9.81), name=None, validate=None):
    """A complete binary tree of n bodies in heap order: parent[i] = (i - 1) // 2.

    Both children of a body sit at its outer end; the odd (first) child is turned by +``spread``
    about the parent's z axis and the even (second) child by -``spread``.  With
    ``alternate=True`` the revolute axes alternate z / y with the depth (prismatic axes cycle
    x, y, z), so the tree moves in 3-D.  Body i has depth floor(log2(i + 1)) (``binary_depth``).
    Other arguments as in ``chain``.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"binary_tree needs n >= 1, got {n}")
    codes = _joint_codes(joint, n)
    length = _per_body(length, n, "length")
    mass = _per_body(mass, n, "mass")
    radius = _per_body(radius, n, "radius")
    idx = np.arange(n, dtype=np.int64)
    parent = (idx - 1) // 2              # -1 for body 0 (floor division)
    depth = binary_depth(n)
    axis, axis2 = _axes_for(codes, depth, alternate)
    angle = np.where(idx % 2 == 1, spread, -spread)
    angle[0] = 0.0
    E_tree = rotz_batch(angle)
    r_tree = np.zeros((n, 3))
    r_tree[1:, 0] = length[parent[1:]]
    com = np.zeros((n, 3))
    com[:, 0] = 0.5 * length
    I_com = cylinder_inertia(mass, length, radius)
    return Model(parent, codes, axis, E_tree, r_tree, mass, com, I_com, axis2=axis2, gravity=gravity,
                 name=name or f"binary_tree(n={n})", validate=_validate_flag(validate, n))


# ---------------------------------------------------------------------------------------------
# random tree
# ---------------------------------------------------------------------------------------------
def random_parents(n, rng, max_children=None, p_chain=0.0):
    """A random parent array in regular numbering (parent[0] = -1, 0 <= parent[i] < i).

    Without ``max_children`` body i picks its parent uniformly among 0..i-1 (a random recursive
    tree, depth O(log n)).  With ``max_children = k`` it picks uniformly among the earlier bodies
    that still have fewer than k children (k = 1 gives a chain).  ``p_chain``: probability that
    body i continues the previous body instead (parent i-1, when allowed), for long chains.
    """
    n = int(n)
    u = rng.random(n)
    c = rng.random(n) < p_chain if p_chain > 0 else np.zeros(n, dtype=bool)
    if max_children is None:
        idx = np.arange(n, dtype=np.int64)
        parent = np.floor(u * idx).astype(np.int64)
        parent = np.minimum(parent, idx - 1)
        parent = np.where(c, idx - 1, parent)
        parent[0] = -1
        return parent
    k = int(max_children)
    if k < 1:
        raise ValueError(f"max_children must be >= 1, got {max_children}")
    return _bounded_parents(u, c, k)


@njit(cache=True)
def _bounded_parents(u, c, k):
    n = u.shape[0]
    parent = np.empty(n, dtype=np.int64)
    avail = np.empty(n, dtype=np.int64)     # bodies that can still take a child
    pos = -np.ones(n, dtype=np.int64)       # where each body sits in avail (-1: full)
    nchild = np.zeros(n, dtype=np.int64)
    parent[0] = -1
    avail[0] = 0
    pos[0] = 0
    m = 1
    for i in range(1, n):
        if c[i] and pos[i - 1] >= 0:
            p = i - 1
        else:
            r = int(u[i] * m)
            if r >= m:
                r = m - 1
            p = avail[r]
        parent[i] = p
        nchild[p] += 1
        if nchild[p] == k:        # full: swap-remove from avail
            j = pos[p]
            last = avail[m - 1]
            avail[j] = last
            pos[last] = j
            pos[p] = -1
            m -= 1
        avail[m] = i
        pos[i] = m
        m += 1
    return parent


def random_tree(n, seed=None, joint_types=DEFAULT_JOINT_TYPES, floating_base=False, max_children=None,
                p_chain=0.0, offset_scale=0.5, gravity=(0.0, 0.0, -9.81), name=None, validate=None):
    """A random tree of n bodies, deterministic for a given ``seed``.

    - topology: ``random_parents`` (regular numbering; ``max_children`` bounds the number of
      children of every body; ``p_chain`` favours long chains);
    - joints: drawn uniformly from ``joint_types`` (names or codes), or with weights when it is a
      dict {type: weight}; with ``floating_base=True`` body 0 gets a free joint;
    - axes: random unit vectors; the second axis of a universal joint is a random unit vector
      perpendicular to the first (a Cardan joint);
    - placements: random rotations E_tree and offsets r_tree with coordinates uniform in
      [-offset_scale, offset_scale] (body 0's offset is zero);
    - inertias: masses uniform in [0.5, 2] kg, principal moments from random second moments
      (positive definite, triangle inequality satisfied) in a random orientation, CoM uniform in
      [-0.25, 0.25]^3 m.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"random_tree needs n >= 1, got {n}")
    rng = np.random.default_rng(seed)
    parent = random_parents(n, rng, max_children=max_children, p_chain=p_chain)
    if isinstance(joint_types, dict):
        kinds = [J.code_of(k) for k in joint_types]
        w = np.array([float(v) for v in joint_types.values()])
        if np.any(w < 0) or w.sum() <= 0:
            raise ValueError("joint_types weights must be non-negative and not all zero")
        w = w / w.sum()
    else:
        kinds = [J.code_of(k) for k in ([joint_types] if isinstance(joint_types, str) else joint_types)]
        w = None
    if not kinds:
        raise ValueError("joint_types is empty")
    codes = np.asarray(kinds, dtype=np.int8)[rng.choice(len(kinds), size=n, p=w)]
    if floating_base:
        codes[0] = J.FREE
    axis = random_units(rng, n)
    b = random_units(rng, n)
    b -= np.sum(b * axis, axis=1, keepdims=True) * axis
    nb = np.linalg.norm(b, axis=1, keepdims=True)
    # (a random vector parallel to the axis has probability zero; fall back to a fixed choice)
    bad = nb[:, 0] < 1e-6
    if bad.any():
        e = np.where(np.abs(axis[bad, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
        b[bad] = e - np.sum(e * axis[bad], axis=1, keepdims=True) * axis[bad]
        nb[bad] = np.linalg.norm(b[bad], axis=1, keepdims=True)
    axis2 = b / nb
    axis2[codes != J.UNIVERSAL] = 0.0
    axis[~np.isin(codes, (J.REVOLUTE, J.PRISMATIC, J.UNIVERSAL))] = 0.0
    E_tree = random_rotations(rng, n)
    r_tree = rng.uniform(-offset_scale, offset_scale, size=(n, 3))
    r_tree[0] = 0.0
    mass, I_com = random_inertias(rng, n)
    com = rng.uniform(-0.25, 0.25, size=(n, 3))
    return Model(parent, codes, axis, E_tree, r_tree, mass, com, I_com, axis2=axis2, gravity=gravity,
                 name=name or f"random_tree(n={n},seed={seed})", validate=_validate_flag(validate, n))


__all__ = ["chain", "binary_tree", "random_tree", "random_parents", "binary_depth", "cylinder_inertia",
           "diag_inertia", "random_inertias", "random_rotations", "random_units", "rotz_batch"]
