"""Joint types: codes, sizes, and the compiled joint kinematics used by every algorithm.

Joint i connects ``parent[i]`` to body i.  Its fixed placement ``X_tree`` maps the parent body's
coordinates to the joint's predecessor frame; the joint transform ``X_J(q)`` then maps to body i's
frame (the joint's successor frame, which is also the body frame, as in URDF and Pinocchio), so
``X_up = X_J X_tree``.  Velocities are expressed in the body frame.

q / v conventions (the same as URDF for 1-DOF joints and as Pinocchio for the rest):

=========== ==== ==== ==========================================================================
type         nq   nv  meaning
=========== ==== ==== ==========================================================================
revolute      1    1  angle about ``axis``
prismatic     1    1  displacement along ``axis``
universal     2    2  angle about ``axis`` then about ``axis2`` (the rotated second axis; Cardan)
spherical     4    3  unit quaternion (x, y, z, w); v = angular velocity in the body frame
free          7    6  position in the parent frame, quaternion (x, y, z, w);
                      v = [linear velocity, angular velocity], both in the body frame
fixed         0    0  welded
=========== ==== ==== ==========================================================================

The joint dispatch (spatial_v2's ``jcalc``) is the same three-way branch in every kernel that
forms the joint kinematics (ABA, RNEA, CRBA, forward kinematics, CFA's setup and the parallel
engine's velocity and reduce kernels), each copy marked ``the joint dispatch``::

    if jtype[i] == REVOLUTE:        joint_kinematics(REVOLUTE, ...)     inlined, type a constant
    elif jtype[i] == PRISMATIC:     joint_kinematics(PRISMATIC, ...)    inlined, type a constant
    elif jtype[i] == FIXED:         joint_kinematics(FIXED, ...)        inlined, type a constant
    else:                           joint_kinematics_at(i, ...)         one call, any other type

The common types are inlined: 1-DOF joints, and fixed joints, which URDF files hold in numbers
(sensor frames, tool flanges, links welded together) and for which a call would cost more than
their kinematics (two copies).  :func:`joint_kinematics` holds all the joint types' kinematics;
only the branch is repeated, and
``tests/test_dispatch.py`` checks that every kernel's copy is this one.  The branch is written in
each kernel rather than in an inlined helper because numba reference-counts the array arguments
of an inlined function whose body branches at run time, once per call: such a helper made RNEA
and ABA markedly slower per body (docs/performance.md has the measurement).
"""
from __future__ import annotations

import numpy as np
from numba import njit

REVOLUTE, PRISMATIC, UNIVERSAL, SPHERICAL, FREE, FIXED = 0, 1, 2, 3, 4, 5
NAMES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
CODES = {name: code for code, name in enumerate(NAMES)}
NQ = np.array([1, 1, 2, 4, 7, 0], dtype=np.int64)
NV = np.array([1, 1, 2, 3, 6, 0], dtype=np.int64)
#: whether the joint's configuration holds a quaternion (and where it starts inside the joint's q)
QUAT_OFFSET = np.array([-1, -1, -1, 0, 3, -1], dtype=np.int64)


def code_of(jtype) -> int:
    """Joint code from a name ('revolute', ...) or a code."""
    if isinstance(jtype, str):
        try:
            return CODES[jtype.lower()]
        except KeyError:
            raise ValueError(f"unknown joint type {str(jtype)!r}; known: {', '.join(NAMES)}") from None
    code = int(jtype)
    if not 0 <= code < len(NAMES):
        raise ValueError(f"unknown joint type code {code}")
    return code


@njit(cache=True, inline="always")
def _rot_axis_angle(a, t, R):
    """R = exp(t [a]x): the columns are the rotated frame's axes in the old frame."""
    c = np.cos(t)
    s = np.sin(t)
    C = 1.0 - c
    x, y, z = a[0], a[1], a[2]
    R[0, 0] = c + x * x * C
    R[0, 1] = x * y * C - z * s
    R[0, 2] = x * z * C + y * s
    R[1, 0] = y * x * C + z * s
    R[1, 1] = c + y * y * C
    R[1, 2] = y * z * C - x * s
    R[2, 0] = z * x * C - y * s
    R[2, 1] = z * y * C + x * s
    R[2, 2] = c + z * z * C


@njit(cache=True, inline="always")
def _rot_quat(qv, k, R):
    """R from the quaternion (x, y, z, w) stored at qv[k:k+4] (normalised on the fly)."""
    x, y, z, w = qv[k], qv[k + 1], qv[k + 2], qv[k + 3]
    n2 = x * x + y * y + z * z + w * w
    s = 2.0 / n2
    R[0, 0] = 1.0 - s * (y * y + z * z)
    R[0, 1] = s * (x * y - z * w)
    R[0, 2] = s * (x * z + y * w)
    R[1, 0] = s * (x * y + z * w)
    R[1, 1] = 1.0 - s * (x * x + z * z)
    R[1, 2] = s * (y * z - x * w)
    R[2, 0] = s * (x * z - y * w)
    R[2, 1] = s * (y * z + x * w)
    R[2, 2] = 1.0 - s * (x * x + y * y)


@njit(cache=True, inline="always")
def joint_kinematics(jt, a1, a2, q, iq, qd, iv, Et, rt, E, r, S, cJ, R, R2):
    """Joint kinematics of one joint.

    Writes X_up = X_J(q) X_tree as (E, r), the motion subspace S (6 x nv, body coordinates, rows
    of ``S[k]`` for DOF k) and the velocity-product term cJ = dS/dt qd.  R, R2 are 3x3 scratch.
    Returns nv.
    """
    for k in range(6):
        cJ[k] = 0.0
    if jt == FIXED:
        for i in range(3):
            r[i] = rt[i]
            for j in range(3):
                E[i, j] = Et[i, j]
        return 0
    if jt == PRISMATIC:
        d = q[iq]
        for i in range(3):
            for j in range(3):
                E[i, j] = Et[i, j]
        for i in range(3):
            r[i] = rt[i] + d * (Et[0, i] * a1[0] + Et[1, i] * a1[1] + Et[2, i] * a1[2])
        for k in range(3):
            S[0, k] = 0.0
            S[0, 3 + k] = a1[k]
        return 1
    # rotational part R (child axes in predecessor coordinates) and joint offset rJ
    rJ0 = 0.0
    rJ1 = 0.0
    rJ2 = 0.0
    if jt == REVOLUTE:
        _rot_axis_angle(a1, q[iq], R)
        for k in range(3):
            S[0, k] = a1[k]
            S[0, 3 + k] = 0.0
        nv = 1
    elif jt == UNIVERSAL:
        _rot_axis_angle(a1, q[iq], R2)
        _rot_axis_angle(a2, q[iq + 1], R)
        # first column: R2^T a1 (axis 1 seen from the body), second: a2
        b0 = R[0, 0] * a1[0] + R[1, 0] * a1[1] + R[2, 0] * a1[2]
        b1 = R[0, 1] * a1[0] + R[1, 1] * a1[1] + R[2, 1] * a1[2]
        b2 = R[0, 2] * a1[0] + R[1, 2] * a1[1] + R[2, 2] * a1[2]
        S[0, 0] = b0
        S[0, 1] = b1
        S[0, 2] = b2
        S[1, 0] = a2[0]
        S[1, 1] = a2[1]
        S[1, 2] = a2[2]
        for k in range(3):
            S[0, 3 + k] = 0.0
            S[1, 3 + k] = 0.0
        w = -qd[iv] * qd[iv + 1]
        cJ[0] = w * (a2[1] * b2 - a2[2] * b1)
        cJ[1] = w * (a2[2] * b0 - a2[0] * b2)
        cJ[2] = w * (a2[0] * b1 - a2[1] * b0)
        # R = R1 R2 (R2 currently holds R1, R holds R2)
        for i in range(3):
            x0 = R2[i, 0] * R[0, 0] + R2[i, 1] * R[1, 0] + R2[i, 2] * R[2, 0]
            x1 = R2[i, 0] * R[0, 1] + R2[i, 1] * R[1, 1] + R2[i, 2] * R[2, 1]
            x2 = R2[i, 0] * R[0, 2] + R2[i, 1] * R[1, 2] + R2[i, 2] * R[2, 2]
            R2[i, 0] = x0
            R2[i, 1] = x1
            R2[i, 2] = x2
        for i in range(3):
            for j in range(3):
                R[i, j] = R2[i, j]
        nv = 2
    elif jt == SPHERICAL:
        _rot_quat(q, iq, R)
        for d in range(3):
            for k in range(6):
                S[d, k] = 0.0
            S[d, d] = 1.0
        nv = 3
    else:  # FREE
        _rot_quat(q, iq + 3, R)
        rJ0 = q[iq]
        rJ1 = q[iq + 1]
        rJ2 = q[iq + 2]
        for d in range(6):
            for k in range(6):
                S[d, k] = 0.0
        for d in range(3):
            S[d, 3 + d] = 1.0      # linear velocity DOFs
            S[3 + d, d] = 1.0      # angular velocity DOFs
        nv = 6
    # E = R^T Et ; r = rt + Et^T rJ
    for i in range(3):
        for j in range(3):
            E[i, j] = R[0, i] * Et[0, j] + R[1, i] * Et[1, j] + R[2, i] * Et[2, j]
    for i in range(3):
        r[i] = rt[i] + Et[0, i] * rJ0 + Et[1, i] * rJ1 + Et[2, i] * rJ2
    return nv



@njit(cache=True)
def joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2):
    """``joint_kinematics`` of body i as a call rather than inlined, taking whole arrays and the
    index: the branch of the joint dispatch for the joints of more than one degree of freedom.
    Whole arrays and the index, rather than per-body views, keep the call cheap (a view passed to
    a call is reference counted)."""
    return joint_kinematics(jtype[i], axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i], E[i], r[i],
                            S[iv:], cJ, R, R2)
