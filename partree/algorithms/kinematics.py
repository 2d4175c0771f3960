"""Forward kinematics: body poses in the base (world) frame and body-frame velocities."""
import numpy as np
from numba import njit

from ..joints import FIXED, PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at
from .. import checks
from .primitives import xform_motion


@njit(cache=True)
def kinematics_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                      q, qd, E, r, v, S, Rw, pw):
    n = parent.shape[0]
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    cJ = np.empty(6)
    tmp = np.empty(6)
    for i in range(n):
        iv = idx_v[i]
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            nv = joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == PRISMATIC:
            nv = joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == FIXED:
            nv = joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        else:
            nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
        p = parent[i]
        if p < 0:
            for k in range(6):
                tmp[k] = 0.0
        else:
            xform_motion(E[i], r[i], v[p], tmp)
        for k in range(6):
            s = tmp[k]
            for d in range(nv):
                s += S[iv + d, k] * qd[iv + d]
            v[i, k] = s
    world_poses(parent, E, r, Rw, pw)


@njit(cache=True)
def world_poses(parent, E, r, Rw, pw):
    """Body poses in the world from the joint transforms X_up = (E, r): Rw[i] (body i's axes in
    world coordinates) = Rw[parent] E_i^T and pw[i] (its origin) = pw[parent] + Rw[parent] r_i."""
    n = parent.shape[0]
    for i in range(n):
        p = parent[i]
        for a in range(3):
            for b in range(3):
                if p < 0:
                    Rw[i, a, b] = E[i, b, a]
                else:
                    Rw[i, a, b] = Rw[p, a, 0] * E[i, b, 0] + Rw[p, a, 1] * E[i, b, 1] + Rw[p, a, 2] * E[i, b, 2]
            if p < 0:
                pw[i, a] = r[i, a]
            else:
                pw[i, a] = pw[p, a] + Rw[p, a, 0] * r[i, 0] + Rw[p, a, 1] * r[i, 1] + Rw[p, a, 2] * r[i, 2]


class Kinematics:
    """Result of ``forward_kinematics``: ``R[i]`` (body i's axes in world coordinates),
    ``p[i]`` (its origin in world coordinates), ``v[i]`` (spatial velocity [w; v] in body i's
    frame) and ``X_up`` as the compact pair (E_up, r_up)."""

    def __init__(self, R, p, v, E_up, r_up):
        self.R, self.p, self.v, self.E_up, self.r_up = R, p, v, E_up, r_up

    def com_world(self, model):
        """Every body's centre of mass in world coordinates (n, 3)."""
        return self.p + np.einsum("nij,nj->ni", self.R, model.com)


def forward_kinematics(model, q, qd=None, data=None):
    q, qd = checks.state(model, q, qd)
    if qd is None:
        qd = np.zeros(model.nv)
    d = checks.data_for(model, data)
    Rw = np.empty((model.n, 3, 3))
    pw = np.empty((model.n, 3))
    kinematics_kernel(*checks.model_args(model), q, qd, d.E, d.r, d.v, d.S, Rw, pw)
    return Kinematics(Rw, pw, d.v.copy(), d.E.copy(), d.r.copy())
