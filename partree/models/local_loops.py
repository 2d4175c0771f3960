"""Closed loops laid over a tree at random, each between two bodies a few joints apart.

For tests and benchmarks of the loop solvers: a loop whose two ends are near each other in the
tree closes within a small subtree, the case the O(N + loops) solve and the parallel engine's
loop-holding parts are built for (a mast of scissor units, a robot's parallel linkages).
"""
from __future__ import annotations

import numpy as np

from ..loops import KINDS, Loop

#: the loop kinds drawn by default, in turn
DEFAULT_KINDS = ("spherical", "weld", "revolute", "distance", "universal", "prismatic")


def with_local_loops(model, count, seed=None, reach=3, kinds=DEFAULT_KINDS, world=0, offset=0.2):
    """``model`` with ``count`` loops between nearby bodies (and ``world`` more to the world).

    Loop k joins a random non-root body b to a body c found by going up 1..``reach`` joints from
    b and then down 1..``reach`` joints along random children (c != b): its two paths meet within
    ``reach`` joints of both ends.  Its kind is ``kinds[k % len(kinds)]``; the frames sit at
    random offsets (coordinates uniform in [-offset, offset]) in random orientations, the axes are
    random, a distance loop's length is 0.7.  The ``world`` extra loops (spherical) join random
    bodies to random points of the world.  Deterministic for a given ``seed``.  The loops are
    generally not closed at a given configuration (``partree.assemble`` closes them where
    possible); the loop solvers are exact for the rows as stated at any state.
    """
    rng = np.random.default_rng(seed)
    parent = np.asarray(model.parent)
    n = parent.shape[0]
    if n < 2:
        raise ValueError("with_local_loops needs a model of at least two bodies")
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"unknown loop kind {k!r}; choose among {', '.join(KINDS)}")
    order = np.argsort(parent, kind="stable")
    nroots = int(np.count_nonzero(parent < 0))
    cnt = np.bincount(parent[parent >= 0], minlength=n)
    cptr = np.concatenate(([0], np.cumsum(cnt)))
    cidx = order[nroots:]
    movers = np.flatnonzero(parent >= 0)
    if movers.size == 0:
        raise ValueError("with_local_loops needs a body with a parent")

    def frame():
        A = rng.normal(size=(3, 3))
        Q, R = np.linalg.qr(A)
        Q = Q * np.sign(np.diag(R))
        if np.linalg.det(Q) < 0:
            Q[:, 0] = -Q[:, 0]
        return Q, rng.uniform(-offset, offset, 3)

    def unit():
        u = rng.normal(size=3)
        return u / np.linalg.norm(u)

    loops = []
    for k in range(int(count)):
        b = int(rng.choice(movers))
        a = b
        for _ in range(int(rng.integers(1, reach + 1))):
            if parent[a] < 0:
                break
            a = int(parent[a])
        c = a
        for _ in range(int(rng.integers(1, reach + 1))):
            if cptr[c + 1] == cptr[c]:
                break
            c = int(cidx[rng.integers(cptr[c], cptr[c + 1])])
        if c == b:
            c = a
        kind = kinds[k % len(kinds)]
        extra = {}
        if kind == "universal":
            u1 = unit()
            u2 = np.cross(u1, unit())
            extra["axis"] = (u1, u2 / np.linalg.norm(u2))
        elif kind in ("revolute", "prismatic"):
            extra["axis"] = unit()
        elif kind == "distance":
            extra["length"] = 0.7
        loops.append(Loop(f"loop{k}", kind, b, c, frame(), frame(), **extra))
    for k in range(int(world)):
        b = int(rng.integers(0, n))
        loops.append(Loop(f"world{k}", "spherical", b, None, frame(), frame()))
    return model.with_loops(loops)
