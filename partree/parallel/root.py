"""The root solve of the parallel engine: O(P) work over the small tree of parts.

Only boundary data enters here (a few 6x6 matrices per part), never per-body data.

* :func:`compose_velocities` turns the parts' handle maps v_h = T_h v_in + vrel_h into every
  part's incoming velocity v_in (parents first; parts hanging from the base get v_in = 0).
* :func:`solve` eliminates leaf parts first: part p with handle relations
  a = Psi a_in + Lam g + beta and its children's eliminated relations g = Mh a + mh solves the
  small dense system (1 - Lam Mh) a = Psi a_in + Lam mh + beta and reports its own
  g_root = (M + Kt Mh Pa) a_in + (m0 + Kt (Mh pa + mh)) to its parent; at the top a_in = a0;
  then going down every part gets its a_in and its handles' wrenches g.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PartreeInputError


@dataclass
class PartsTree:
    """The O(P) description of the parts tree the root needs.

    part_parent[P]  parent part (-1: hangs from the base)
    hidx[P]         index of the part's attachment body among its parent part's handles
    nh[P]           number of handles of each part
    """
    part_parent: np.ndarray
    hidx: np.ndarray
    nh: np.ndarray

    @property
    def nparts(self):
        return int(self.part_parent.shape[0])

    @classmethod
    def from_partition(cls, pt):
        P = pt.nparts
        hidx = -np.ones(P, dtype=np.int64)
        nh = np.zeros(P, dtype=np.int64)
        for k in range(P):
            hs = pt.handles(k)
            nh[k] = hs.size
            for c in pt.child_parts(k):
                hidx[c] = int(np.searchsorted(hs, pt.handle[c]))
        return cls(part_parent=pt.part_parent.copy(), hidx=hidx, nh=nh)


def _xmotion(E, r, m):
    w = E @ m[:3]
    v = E @ (m[3:] - np.cross(r, m[:3]))
    return np.concatenate((w, v))


def compose_velocities(tree: PartsTree, vel):
    """vel[p] = (TE (H,3,3), Tr (H,3), vrel (H,6)) of part p.  Returns v_in (P, 6)."""
    P = tree.nparts
    v_in = np.zeros((P, 6))
    for c in range(P):
        p = tree.part_parent[c]
        if p >= 0:
            TE, Tr, vrel = vel[p]
            k = tree.hidx[c]
            v_in[c] = _xmotion(TE[k], Tr[k], v_in[p]) + vrel[k]
    return v_in


def solve(tree: PartsTree, red, a0):
    """red[p] = (M (6,6), m0 (6), Kt (H,6,6), Psi (H,6,6), Lam (H,H,6,6), beta (H,6)).

    Returns (a_in (P,6), g: list of (H_p, 6) arrays) for every part."""
    P = tree.nparts
    pp, hidx, nh = tree.part_parent, tree.hidx, tree.nh
    Mh = [np.zeros((int(nh[p]), 6, 6)) for p in range(P)]
    mh = [np.zeros((int(nh[p]), 6)) for p in range(P)]
    Pa = [None] * P
    pa = [None] * P
    for p in range(P - 1, -1, -1):
        M, m0, Kt, Psi, Lam, beta = red[p]
        H = int(nh[p])
        if H:
            Lb = Lam.transpose(0, 2, 1, 3).reshape(6 * H, 6 * H)
            # Lam Mh (Mh block diagonal)
            LM = np.einsum("jkab,kbc->jakc", Lam, Mh[p]).reshape(6 * H, 6 * H)
            Z = np.eye(6 * H) - LM
            rhs = np.empty((6 * H, 7))
            rhs[:, :6] = Psi.reshape(6 * H, 6)
            rhs[:, 6] = Lb @ mh[p].reshape(6 * H) + beta.reshape(6 * H)
            try:
                sol = np.linalg.solve(Z, rhs)
            except np.linalg.LinAlgError as e:
                raise PartreeInputError(f"part {p}: singular handle system in the root solve ({e})") from None
            Pa[p] = sol[:, :6].reshape(H, 6, 6)
            pa[p] = sol[:, 6].reshape(H, 6)
        q = pp[p]
        if q >= 0:
            if H:
                ga = np.einsum("kab,kbc->kac", Mh[p], Pa[p])        # g = ga a_in + gb
                gb = np.einsum("kab,kb->ka", Mh[p], pa[p]) + mh[p]
                Mp = M + np.einsum("kab,kbc->ac", Kt, ga)
                mp = m0 + np.einsum("kab,kb->a", Kt, gb)
            else:
                Mp, mp = M, m0
            k = hidx[p]
            Mh[q][k] += Mp
            mh[q][k] += mp
    a_in = np.zeros((P, 6))
    g = [None] * P
    ah = [None] * P
    for p in range(P):
        q = pp[p]
        a_in[p] = a0 if q < 0 else ah[q][hidx[p]]
        if nh[p]:
            ah[p] = np.einsum("kab,b->ka", Pa[p], a_in[p]) + pa[p]
            g[p] = np.einsum("kab,kb->ka", Mh[p], ah[p]) + mh[p]
        else:
            g[p] = np.zeros((0, 6))
    return a_in, g
