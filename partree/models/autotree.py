"""Featherstone's autoTree: chains (bf = 1), binary trees (bf = 2), and anything between.

Semantics of spatial_v2's ``autoTree(nb, bf, skew, taper)`` (1-based body i):
parent(i) = floor((i - 2 + ceil(bf)) / bf); revolute joints about local z; link length
taper^(i-1); mass taper^(3(i-1)); CoM at half the link length along x;
Icm = m l^2 diag(0.0025, 1.015/12, 1.015/12); placement rotx(skew) * xlt(len(parent), 0, 0).
Fully vectorised: 10^6 bodies build in well under a second.
"""
import numpy as np

from ..model import Model
from ..spatial import rotx


def auto_tree(nb, bf=1, skew=0.0, taper=1.0, gravity=(0.0, 0.0, -9.81), name=None):
    nb = int(nb)
    if nb < 1:
        raise ValueError(f"auto_tree needs nb >= 1, got {nb}")
    if not bf >= 1:
        raise ValueError(f"auto_tree needs a branching factor bf >= 1, got {bf}")
    i1 = np.arange(1, nb + 1, dtype=np.float64)                 # 1-based body numbers
    parent1 = np.floor((i1 - 2 + np.ceil(bf)) / bf).astype(np.int64)
    parent = parent1 - 1                                         # 0-based, base = -1
    length = float(taper) ** (i1 - 1)
    mass = float(taper) ** (3 * (i1 - 1))
    com = np.zeros((nb, 3))
    com[:, 0] = 0.5 * length
    Ic = np.zeros((nb, 3, 3))
    ml2 = mass * length ** 2
    Ic[:, 0, 0] = 0.0025 * ml2
    Ic[:, 1, 1] = 1.015 / 12 * ml2
    Ic[:, 2, 2] = 1.015 / 12 * ml2
    E_tree = np.broadcast_to(rotx(skew), (nb, 3, 3)).copy()
    r_tree = np.zeros((nb, 3))
    has_parent = parent >= 0
    r_tree[has_parent, 0] = length[parent[has_parent]]
    axis = np.zeros((nb, 3))
    axis[:, 2] = 1.0
    jtype = np.zeros(nb, dtype=np.int8)   # revolute
    return Model(parent, jtype, axis, E_tree, r_tree, mass, com, Ic, gravity=gravity,
                 name=name or f"autotree(nb={nb},bf={bf},skew={skew},taper={taper})", validate=nb <= 10**5)
