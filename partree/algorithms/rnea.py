"""Recursive Newton-Euler algorithm: inverse dynamics in O(N), with every joint's wrench.

Outward: velocities v, accelerations a, body forces f = I a + v x* I v - f_ext.
Inward: tau_i = S_i^T f_i, f_parent += X_up^T f_i.  After the inward pass f_i is the wrench
the parent transmits to body i across joint i, in body i's (joint) frame, as [n; f].
"""
import numpy as np
from numba import njit

from ..joints import PRISMATIC, REVOLUTE, joint_kinematics, joint_kinematics_at
from .. import checks
from .primitives import body_force, cross_motion, xform_force_T_add, xform_motion


@njit(cache=True)
def rnea_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                q, qd, qdd, f_ext, has_fext, E, r, v, a, f, S, tau):
    n = parent.shape[0]
    nvt = S.shape[0]
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    cJ = np.empty(6)
    vJ = np.empty(6)
    h = np.empty(6)
    tmp = np.empty(6)
    a0 = np.zeros(6)
    a0[3] = -gravity[0]
    a0[4] = -gravity[1]
    a0[5] = -gravity[2]
    for i in range(n):
        iv = idx_v[i]
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            nv = joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == PRISMATIC:
            nv = joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        else:
            nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
        for k in range(6):
            vJ[k] = 0.0
            h[k] = cJ[k]
        for d in range(nv):
            for k in range(6):
                vJ[k] += S[iv + d, k] * qd[iv + d]
                h[k] += S[iv + d, k] * qdd[iv + d]
        p = parent[i]
        if p < 0:
            for k in range(6):
                v[i, k] = vJ[k]
            xform_motion(E[i], r[i], a0, tmp)
            for k in range(6):
                a[i, k] = tmp[k] + h[k]
        else:
            xform_motion(E[i], r[i], v[p], tmp)
            for k in range(6):
                v[i, k] = tmp[k] + vJ[k]
            xform_motion(E[i], r[i], a[p], tmp)
            for k in range(6):
                a[i, k] = tmp[k] + h[k]
            cross_motion(v[i], vJ, tmp)
            for k in range(6):
                a[i, k] += tmp[k]
        body_force(mass[i], com[i], I_com[i], v[i], a[i], f[i], h, tmp)
        if has_fext:
            for k in range(6):
                f[i, k] -= f_ext[i, k]
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        for d in range(nv):
            s = 0.0
            for k in range(6):
                s += S[iv + d, k] * f[i, k]
            tau[iv + d] = s
        p = parent[i]
        if p >= 0:
            xform_force_T_add(E[i], r[i], f[i], f[p])


def rnea(model, q, qd, qdd, f_ext=None, data=None, return_wrenches=False):
    """Inverse dynamics: tau (nv,) such that aba(q, qd, tau, f_ext) = qdd.

    With ``return_wrenches=True`` also returns the (n, 6) array of joint wrenches [n; f]: row i
    is the wrench transmitted from parent[i] to body i across joint i, in body i's frame.
    """
    q, qd = checks.state(model, q, qd)
    qdd = checks.vector(model, qdd, model.nv, "qdd", "nv")
    F, has_f = checks.external_forces(model, f_ext)
    d = checks.data_for(model, data)
    rnea_kernel(*checks.model_args(model), model.gravity, q, qd, qdd, F, has_f,
                d.E, d.r, d.v, d.a, d.pA, d.S, d.tau)
    if return_wrenches:
        return d.tau.copy(), d.pA.copy()
    return d.tau.copy()


def joint_wrenches(model, q, qd, qdd, f_ext=None, data=None):
    """The (n, 6) joint wrenches [n; f] (see ``rnea``) for the motion (q, qd, qdd)."""
    return rnea(model, q, qd, qdd, f_ext, data, return_wrenches=True)[1]
