"""Operations on configurations: integration on the joint manifolds (quaternions stay unit).

``integrate(model, q, v)`` returns q ⊕ v: the configuration reached from q by following the
constant generalised velocity v for unit time.  Angles and displacements add; a spherical
joint's quaternion is multiplied on the right by exp(w) (w in the body frame); a free joint moves
by the SE(3) exponential of [v_lin; w] in the body frame (as Pinocchio's ``integrate``).
"""
import math

import numpy as np
from numba import njit

from . import joints as J


@njit(cache=True, inline="always")
def _quat_step(q, k, w0, w1, w2):
    """q[k:k+4] <- normalise(q[k:k+4] * exp(w)), quaternions stored (x, y, z, w)."""
    th = math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    if th < 1e-8:
        s = 0.5 - th * th / 48.0
    else:
        s = math.sin(0.5 * th) / th
    bx, by, bz, bw = w0 * s, w1 * s, w2 * s, math.cos(0.5 * th)
    ax, ay, az, aw = q[k], q[k + 1], q[k + 2], q[k + 3]
    x = aw * bx + ax * bw + ay * bz - az * by
    y = aw * by - ax * bz + ay * bw + az * bx
    z = aw * bz + ax * by - ay * bx + az * bw
    w = aw * bw - ax * bx - ay * by - az * bz
    n = math.sqrt(x * x + y * y + z * z + w * w)
    q[k] = x / n
    q[k + 1] = y / n
    q[k + 2] = z / n
    q[k + 3] = w / n


@njit(cache=True)
def _integrate_kernel(jtype, idx_q, idx_v, q, v):
    for i in range(jtype.shape[0]):
        jt = jtype[i]
        iq = idx_q[i]
        iv = idx_v[i]
        if jt == J.REVOLUTE or jt == J.PRISMATIC:
            q[iq] += v[iv]
        elif jt == J.UNIVERSAL:
            q[iq] += v[iv]
            q[iq + 1] += v[iv + 1]
        elif jt == J.SPHERICAL:
            _quat_step(q, iq, v[iv], v[iv + 1], v[iv + 2])
        elif jt == J.FREE:
            l0, l1, l2 = v[iv], v[iv + 1], v[iv + 2]
            w0, w1, w2 = v[iv + 3], v[iv + 4], v[iv + 5]
            # SE(3) exponential: translation = V(w) lin, V = I + b [w] + c [w]^2
            th = math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
            if th < 1e-6:
                b = 0.5 - th * th / 24.0
                c = 1.0 / 6.0 - th * th / 120.0
            else:
                b = (1.0 - math.cos(th)) / (th * th)
                c = (th - math.sin(th)) / (th * th * th)
            x0 = w1 * l2 - w2 * l1
            x1 = w2 * l0 - w0 * l2
            x2 = w0 * l1 - w1 * l0
            d0 = l0 + b * x0 + c * (w1 * x2 - w2 * x1)
            d1 = l1 + b * x1 + c * (w2 * x0 - w0 * x2)
            d2 = l2 + b * x2 + c * (w0 * x1 - w1 * x0)
            # rotate d by the (normalised) current orientation and add to the position
            k = iq + 3
            qx, qy, qz, qw = q[k], q[k + 1], q[k + 2], q[k + 3]
            n = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
            qx, qy, qz, qw = qx / n, qy / n, qz / n, qw / n
            q[k], q[k + 1], q[k + 2], q[k + 3] = qx, qy, qz, qw
            t0 = 2.0 * (qy * d2 - qz * d1)
            t1 = 2.0 * (qz * d0 - qx * d2)
            t2 = 2.0 * (qx * d1 - qy * d0)
            q[iq] += d0 + qw * t0 + (qy * t2 - qz * t1)
            q[iq + 1] += d1 + qw * t1 + (qz * t0 - qx * t2)
            q[iq + 2] += d2 + qw * t2 + (qx * t1 - qy * t0)
            _quat_step(q, k, w0, w1, w2)


def integrate(model, q, v):
    """q ⊕ v on the joint manifolds (a new array)."""
    q = np.array(q, dtype=np.float64)
    v = np.ascontiguousarray(v, dtype=np.float64)
    if q.shape != (model.nq,) or v.shape != (model.nv,):
        from .errors import PartreeInputError
        raise PartreeInputError(f"integrate: q has shape {q.shape} and v {v.shape}; the model needs "
                                f"({model.nq},) and ({model.nv},)")
    _integrate_kernel(model.jtype, model.idx_q, model.idx_v, q, v)
    return q


def quaternion_indices(model):
    """Indices into q of every quaternion (k, 4), for integrators that renormalise."""
    out = []
    for code in (J.SPHERICAL, J.FREE):
        ids = np.flatnonzero(model.jtype == code)
        if ids.size:
            out.append((model.idx_q[ids] + J.QUAT_OFFSET[code])[:, None] + np.arange(4))
    return np.concatenate(out) if out else np.zeros((0, 4), dtype=np.int64)
