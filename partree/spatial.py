"""Spatial algebra in numpy (Featherstone's conventions), for model building, files and tests.

Motion vectors are [w; v], force vectors [n; f].  A transform X = (E, r) from frame A to frame B
is stored compactly: E is the 3x3 rotation taking A-coordinates to B-coordinates and r is the
position of B's origin in A-coordinates.  As 6x6 matrices

    X (motion) = [[E, 0], [-E rx, E]],   X* (force) = [[E, -E rx], [0, E]].

The hot kernels in ``partree.algorithms`` use the same compact form; this module is the readable
reference used by generators, file readers and tests.
"""
from __future__ import annotations

import numpy as np


def skew(p):
    """Cross-product matrix: skew(p) @ x == cross(p, x)."""
    p = np.asarray(p, dtype=float)
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


def rotx(t):
    """Coordinate rotation E for a frame rotated by t about x (Featherstone's rotx)."""
    c, s = np.cos(t), np.sin(t)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]])


def roty(t):
    """Coordinate rotation E for a frame rotated by t about y (Featherstone's roty)."""
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, 0.0, -s], [0.0, 1.0, 0.0], [s, 0.0, c]])


def rotz(t):
    """Coordinate rotation E for a frame rotated by t about z (Featherstone's rotz)."""
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])


def axis_angle(axis, t):
    """Rotation matrix R (columns: rotated frame's axes in the old frame) for angle t about axis."""
    a = np.asarray(axis, dtype=float)
    a = a / np.linalg.norm(a)
    K = skew(a)
    return np.eye(3) + np.sin(t) * K + (1.0 - np.cos(t)) * (K @ K)


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes x, y, z) to a rotation matrix R = Rz(y) Ry(p) Rx(r)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def quat_to_matrix(qxyzw):
    """Unit quaternion (x, y, z, w) -- Pinocchio's and Eigen's storage order -- to R."""
    x, y, z, w = np.asarray(qxyzw, dtype=float) / np.linalg.norm(qxyzw)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat(R):
    """Rotation matrix to unit quaternion (x, y, z, w) with w >= 0."""
    R = np.asarray(R, dtype=float)
    tr = np.trace(R)
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        w, x, y, z = 0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        w, x, y, z = (R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        w, x, y, z = (R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s
    else:
        s = 2.0 * np.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        w, x, y, z = (R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s
    q = np.array([x, y, z, w])
    return q if w >= 0 else -q


def motion_xform(E, r):
    """6x6 motion transform of the compact (E, r)."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ skew(r)
    return X


def force_xform(E, r):
    """6x6 force transform X* = X^{-T} of the compact (E, r)."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[:3, 3:] = -E @ skew(r)
    return X


def crm(v):
    """Motion cross-product matrix v x."""
    w, u = skew(v[:3]), skew(v[3:])
    return np.block([[w, np.zeros((3, 3))], [u, w]])


def crf(v):
    """Force cross-product matrix v x* = -crm(v)^T."""
    return -crm(v).T


def spatial_inertia(mass, com, Icom):
    """6x6 spatial inertia about the body origin from mass, centre of mass and inertia about it."""
    C = skew(com)
    I = np.zeros((6, 6))
    I[:3, :3] = np.asarray(Icom) + mass * C @ C.T
    I[:3, 3:] = mass * C
    I[3:, :3] = mass * C.T
    I[3:, 3:] = mass * np.eye(3)
    return I
