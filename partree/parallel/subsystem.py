"""Seed 004's equivalent subsystem: a subtree (closed loops inside it allowed) reduced to a 6x6
mass matrix and a 6x1 force at the body it hangs from.

A subsystem is attached to its *base* body through its root joint(s), as through a massless
virtual body: whatever its size and its loops, the base feels it only through the wrench f that
it must apply for the subsystem to follow the base's motion, and that wrench is affine in the
base's acceleration a::

    f = M a + f0

M is the subsystem's articulated inertia seen at the base (symmetric, positive semi-definite)
and f0 its bias force.  This is exactly the root relation g_root = M a_in + m0 that every part of
the parallel engine reports (``PartKernel.reduce``, ``LoopPartKernel.reduce`` for a part that
holds loops), for a part with no child parts: :func:`subsystem_equivalent` builds that part over
the subsystem's bodies and runs its velocity and reduction steps, one per tree of the subsystem.
It lives with the engine because it is the engine's part reduction (the algorithm kernels below
it do not import the engine).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import checks
from ..algorithms.kinematics import forward_kinematics
from ..errors import PartreeInputError
from .loop_part import LoopPartKernel
from .part import PartKernel, index_ranges


class SubsystemEquivalent:
    """A subsystem's equivalent at its base: ``f = M a + f`` (see :func:`subsystem_equivalent`).

    Unpacks as the pair ``M, f = partree.subsystem_equivalent(...)``.

    Attributes
    ----------
    M : ndarray (6, 6)
        The equivalent mass matrix: the subsystem's articulated inertia in the base frame,
        symmetric positive semi-definite.
    f : ndarray (6,)
        The equivalent (bias) force [n; f] in the base frame, for base accelerations ``a`` with
        gravity in them as partree's passes carry it (a = the base's true acceleration + ``a0``).
    a0 : ndarray (6,)
        The fictitious acceleration of gravity in the base frame, [0; -R^T g] (R: the base's
        orientation in the world): the ``a`` of a base that does not accelerate.
    f_gravity : ndarray (6,)
        ``f + M a0``: the bias force with the subsystem's weight in it, for the base's true
        acceleration: f = M a_true + f_gravity.
    base : int
        The base body, -1 for the world.
    bodies : ndarray of int
        The subsystem's bodies (increasing).
    roots : ndarray of int
        Its root bodies, the children of ``base`` whose joints carry f (usually one).
    """

    __slots__ = ("M", "f", "a0", "base", "bodies", "roots")

    def __init__(self, M, f, a0, base, bodies, roots):
        self.M, self.f, self.a0 = M, f, a0
        self.base, self.bodies, self.roots = base, bodies, roots

    @property
    def f_gravity(self):
        return self.f + self.M @ self.a0

    def wrench(self, a):
        """The wrench [n; f] (base frame) that the base applies to the subsystem when its
        acceleration is ``a`` (partree's convention, gravity in it): ``M a + f``."""
        return self.M @ np.asarray(a, dtype=np.float64) + self.f

    def __iter__(self):
        yield self.M
        yield self.f

    def __repr__(self):
        base = "the world" if self.base < 0 else f"body {self.base}"
        return f"<SubsystemEquivalent: {self.bodies.size} bodies at {base}>"


def subsystem_equivalent(model, q, qd, tau, bodies, f_ext=None):
    """The equivalent 6x6 mass matrix and 6x1 force of a subsystem at its base (seed 004).

    The subsystem is a set of bodies hanging from one *base* body (or from the world): one
    subtree of the model, or several subtrees on the same base, with every closed loop that has
    an end in it lying inside it.  With the base's spatial acceleration ``a`` (in the base's
    frame), the wrench that the base applies to the subsystem through its root joint(s), summed
    and expressed in the base's frame as [n; f], is::

        f_base = M a + f

    for the subsystem's joints driven by ``tau`` (and the external wrenches ``f_ext`` on its
    bodies), their loops held closed.  Gravity enters as partree's passes carry it, as a
    fictitious acceleration of the base: ``a`` is the base's true acceleration plus
    ``a0 = [0; -R^T g]``, so ``f`` holds no weight (for the world as base, a = a0 = [0; -g]).  The
    result's ``f_gravity = f + M a0`` is the bias for the true acceleration instead.  This is the
    root relation g_root = M a_in + m0 of the parallel engine's parts.

    Parameters
    ----------
    model : Model
        The model (loops in ``model.loops``).
    q, qd, tau : ndarray
        The whole model's configuration (nq,), velocity (nv,) and joint forces (nv,).  The
        subsystem's response depends on its own joints' entries; the base's velocity (and
        orientation, for ``a0``) on those of the joints from the world to the base.
    bodies : int, str or sequence of int or str
        One body (by number or name; a joint's name names its body): that body and everything
        below it.  A sequence: exactly these bodies, which must hang from one base (a connected
        subsystem) and hold every body below them: leaving a descendant out would make it a
        child subsystem, which this relation has no room for, and is refused.
    f_ext : ndarray or dict, optional
        External wrenches on the bodies, as for :func:`partree.aba` (those on the subsystem's
        bodies count).

    Returns
    -------
    SubsystemEquivalent
        ``M`` (6, 6), ``f`` (6,), ``a0``, ``f_gravity``, ``base``, ``bodies``, ``roots``; it
        unpacks as ``M, f``.

    Raises
    ------
    PartreeInputError
        For an unknown body, bodies that do not hang from one base, a descendant left out, a
        loop with one end outside the subsystem (or at the world, or on the base), a loop
        joining two subtrees that meet only at the base, or a subtree with a singular inertia
        along a joint's motion (a massless tip).

    Notes
    -----
    Cost: the engine's part reduction over the subsystem (O(its bodies + loops)), plus the
    forward kinematics of the joints from the world to the base.  M is made exactly symmetric
    ((M + M^T) / 2; the reduction's is to rounding).  A loop between two subtrees that meet only
    at the base is not eliminated inside the subsystem by the part kernels, hence refused.
    """
    n = model.n
    q, qd = checks.state(model, q, qd)
    tau = checks.vector(model, tau, model.nv, "tau", "nv")
    F, has_f = checks.external_forces(model, f_ext)
    parent = np.ascontiguousarray(model.parent, dtype=np.int64)

    # ---- the body set
    if isinstance(bodies, (str, int, np.integer)) and not isinstance(bodies, bool):
        r = _body_id(model, bodies)
        inset = _subtree_mask(parent, r)
    else:
        try:
            given = list(bodies)
        except TypeError:
            raise PartreeInputError(f"bodies must be a body (number or name) or a sequence of them, "
                                    f"got {bodies!r}") from None
        if not given:
            raise PartreeInputError("bodies is empty: a subsystem needs at least one body")
        inset = np.zeros(n, dtype=np.bool_)
        inset[[_body_id(model, b) for b in given]] = True
    ids = np.flatnonzero(inset).astype(np.int64)
    par = parent[ids]
    roots = ids[(par < 0) | ~inset[np.maximum(par, 0)]]
    bases = np.unique(parent[roots])
    if bases.size > 1:
        a, b = (int(roots[np.flatnonzero(parent[roots] == x)[0]]) for x in bases[:2])
        raise PartreeInputError(f"the bodies are not one connected subsystem: {_bname(model, a)} hangs from "
                                f"{_bname(model, int(parent[a]))}, {_bname(model, b)} from "
                                f"{_bname(model, int(parent[b]))}; a subsystem hangs from one base body")
    base = int(bases[0])
    below = np.flatnonzero((parent >= 0) & inset[np.maximum(parent, 0)] & ~inset)
    if below.size:
        i = int(below[0])
        more = f" (and {below.size - 1} more)" if below.size > 1 else ""
        raise PartreeInputError(f"{_bname(model, i)}{more} hangs below the subsystem (from "
                                f"{_bname(model, int(parent[i]))}) but is left out of it: give every body "
                                f"below it, or only its root body for its whole subtree")
    label = _components(parent, ids, roots)

    # ---- the loops: every one with an end in the subsystem lies inside one of its trees
    loops = model.loops
    looped = np.zeros(roots.size, dtype=np.bool_)
    if len(loops):
        la, lb = loops.body_a, loops.body_b
        ina = (la >= 0) & inset[np.maximum(la, 0)]
        inb = (lb >= 0) & inset[np.maximum(lb, 0)]
        for l in np.flatnonzero(ina | inb):
            a, b = int(la[l]), int(lb[l])
            if not (ina[l] and inb[l]):
                out = b if ina[l] else a
                where = "the world" if out < 0 else ("the base, " if out == base else "") + _bname(model, out)
                raise PartreeInputError(f"loop {loops.names[l]!r} joins {_bname(model, a if ina[l] else b)} in the "
                                        f"subsystem to {where} outside it: every loop with an end in a subsystem "
                                        f"must lie inside it")
            if label[a] != label[b]:
                raise PartreeInputError(f"loop {loops.names[l]!r} joins {_bname(model, a)} and {_bname(model, b)}, "
                                        f"in two subtrees of the subsystem that meet only at its base: not "
                                        f"supported (take the base into the subsystem)")
            looped[label[a]] = True

    # ---- the base's motion: orientation (for a0) and velocity, in its own frame
    v_base = np.zeros(6)
    Rb = np.eye(3)
    if base >= 0:
        path = _ancestors(parent, base)
        chain = model.select(path)
        qs = index_ranges(model.idx_q[path], model.nq_j[path])
        vs = index_ranges(model.idx_v[path], model.nv_j[path])
        kin = forward_kinematics(chain, q[qs], qd[vs])
        v_base = kin.v[-1].copy()
        Rb = kin.R[-1]
    a0 = np.zeros(6)
    a0[3:] = -(Rb.T @ np.asarray(model.gravity, dtype=np.float64))

    # ---- one part per tree of the subsystem, no child parts: its root relation is the answer
    M = np.zeros((6, 6))
    f = np.zeros(6)
    for k in range(roots.size):
        b = ids[label[ids] == k]
        if looped[k]:
            pk = LoopPartKernel(model, b, [], part_id=k)
        else:
            pk = PartKernel(model, b, [], part_id=k)
        pk.velocity(q[pk.qix], qd[pk.vix])
        Mk, mk = pk.reduce(v_base, tau[pk.vix], F[pk.bix] if has_f else None)[:2]
        M += Mk
        f += mk
    M = 0.5 * (M + M.T)
    return SubsystemEquivalent(M, f, a0, base, ids, roots.copy())


def _body_id(model, b):
    """A body's number from its number or name (or its joint's name)."""
    if isinstance(b, (bool, np.bool_)):
        raise PartreeInputError(f"{b!r} is not a body")
    if isinstance(b, (int, np.integer)):
        if not 0 <= int(b) < model.n:
            raise PartreeInputError(f"there is no body {int(b)} in model {model.name!r} (bodies 0..{model.n - 1})")
        return int(b)
    if isinstance(b, str):
        for names in (model.body_names, model.joint_names):
            try:
                return int(names.index(b))
            except KeyError:
                pass
    raise PartreeInputError(f"{b!r} is not a body of model {model.name!r} (nor the name of a joint)")


def _bname(model, i):
    if i < 0:
        return "the world"
    return f"body {i} ({model.body_names[i]!r})"


@njit(cache=True)
def _subtree_mask(parent, r):
    """Body r and every body below it."""
    n = parent.shape[0]
    m = np.zeros(n, dtype=np.bool_)
    m[r] = True
    for i in range(r + 1, n):
        if parent[i] >= 0 and m[parent[i]]:
            m[i] = True
    return m


@njit(cache=True)
def _components(parent, ids, roots):
    """label[i]: which root's tree body i (of ``ids``, increasing, closed below) is in; -1 off it."""
    label = -np.ones(parent.shape[0], dtype=np.int64)
    for k in range(roots.shape[0]):
        label[roots[k]] = k
    for i in ids:
        if label[i] < 0:
            label[i] = label[parent[i]]
    return label


@njit(cache=True)
def _ancestors(parent, i):
    """The bodies from the world down to body i (root first)."""
    d = 0
    j = i
    while j >= 0:
        d += 1
        j = parent[j]
    out = np.empty(d, dtype=np.int64)
    j = i
    while j >= 0:
        d -= 1
        out[d] = j
        j = parent[j]
    return out
