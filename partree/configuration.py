"""Operations on configurations: integration on the joint manifolds (quaternions stay unit).

``integrate(model, q, v)`` returns q ⊕ v: the configuration reached from q by following the
constant generalised velocity v for unit time.  Angles and displacements add; a spherical
joint's quaternion is multiplied on the right by exp(w) (w in the body frame); a free joint moves
by the SE(3) exponential of [v_lin; w] in the body frame (as Pinocchio's ``integrate``).
"""
import numpy as np

from . import joints as J


def _quat_mul(a, b):
    """Hamilton product of (x, y, z, w) quaternions, row-wise."""
    ax, ay, az, aw = a.T
    bx, by, bz, bw = b.T
    return np.stack([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz], axis=1)


def _quat_exp(w):
    """exp of rotation vectors (k, 3) as (x, y, z, w) quaternions."""
    th = np.linalg.norm(w, axis=1)
    half = 0.5 * th
    small = th < 1e-8
    s = np.where(small, 0.5 - th * th / 48.0, np.sin(half) / np.where(small, 1.0, th))
    return np.concatenate([w * s[:, None], np.cos(half)[:, None]], axis=1)


def _quat_rotate(qt, x):
    """Rotate vectors x (k, 3) by unit quaternions qt (k, 4)."""
    u = qt[:, :3]
    w = qt[:, 3:4]
    t = 2.0 * np.cross(u, x)
    return x + w * t + np.cross(u, t)


def integrate(model, q, v):
    q = np.array(q, dtype=float)
    v = np.asarray(v, dtype=float)
    simple = np.isin(model.jtype, (J.REVOLUTE, J.PRISMATIC, J.UNIVERSAL))
    if simple.any():
        ids = np.flatnonzero(simple)
        for k in range(2):
            sel = ids[model.nv_j[ids] > k]
            q[model.idx_q[sel] + k] += v[model.idx_v[sel] + k]
    ids = np.flatnonzero(model.jtype == J.SPHERICAL)
    if ids.size:
        kq = model.idx_q[ids][:, None] + np.arange(4)
        kv = model.idx_v[ids][:, None] + np.arange(3)
        qn = _quat_mul(q[kq], _quat_exp(v[kv]))
        q[kq] = qn / np.linalg.norm(qn, axis=1, keepdims=True)
    ids = np.flatnonzero(model.jtype == J.FREE)
    if ids.size:
        kp = model.idx_q[ids][:, None] + np.arange(3)
        kq = model.idx_q[ids][:, None] + 3 + np.arange(4)
        lin = v[model.idx_v[ids][:, None] + np.arange(3)]
        w = v[model.idx_v[ids][:, None] + 3 + np.arange(3)]
        # SE(3) exponential: translation = V(w) lin, V = I + (1-cos t)/t^2 [w] + (t - sin t)/t^3 [w]^2
        th = np.linalg.norm(w, axis=1)
        small = th < 1e-6
        ts = np.where(small, 1.0, th)
        b = np.where(small, 0.5 - th ** 2 / 24.0, (1.0 - np.cos(th)) / ts ** 2)
        c = np.where(small, 1.0 / 6.0 - th ** 2 / 120.0, (th - np.sin(th)) / ts ** 3)
        wxl = np.cross(w, lin)
        dp = lin + b[:, None] * wxl + c[:, None] * np.cross(w, wxl)
        quat = q[kq] / np.linalg.norm(q[kq], axis=1, keepdims=True)
        q[kp] += _quat_rotate(quat, dp)
        qn = _quat_mul(quat, _quat_exp(w))
        q[kq] = qn / np.linalg.norm(qn, axis=1, keepdims=True)
    return q


def quaternion_indices(model):
    """Indices into q of every quaternion (k, 4), for integrators that renormalise."""
    out = []
    for code in (J.SPHERICAL, J.FREE):
        ids = np.flatnonzero(model.jtype == code)
        if ids.size:
            out.append((model.idx_q[ids] + J.QUAT_OFFSET[code])[:, None] + np.arange(4))
    return np.concatenate(out) if out else np.zeros((0, 4), dtype=np.int64)
