"""Argument checks at the entry points (none inside the kernels)."""
import math

import numpy as np
from numba import njit

from .errors import PartreeInputError


def vector(model, x, size, name, what):
    """A contiguous float64 vector of the given size, finite, or a clear error (None, complex and
    non-numeric input are refused, not cast)."""
    if type(x) is not np.ndarray or x.dtype != np.float64 or not x.flags.c_contiguous:
        if x is None:
            raise PartreeInputError(f"{name} is None; model {model.name!r} needs an array of {size} values ({what})")
        if np.iscomplexobj(x):
            raise PartreeInputError(f"{name} is complex; partree works with real numbers (take .real if the "
                                    f"imaginary parts are rounding noise)")
        try:
            x = np.ascontiguousarray(x, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise PartreeInputError(f"{name} is not an array of numbers ({e})") from None
    if x.ndim != 1 or x.shape[0] != size:
        raise PartreeInputError(f"{name} has shape {x.shape}; model {model.name!r} needs ({size},) ({what})")
    # one dot product finds any NaN/inf (it overflows only for |x| > 1e154: then look closely)
    if not math.isfinite(x @ x) and not np.isfinite(x).all():
        k = int(np.flatnonzero(~np.isfinite(x))[0])
        idx = model.idx_q if what == "nq" else model.idx_v
        body = int(np.searchsorted(idx, k, side="right") - 1)
        # skip joints with no coordinates of this kind
        while body > 0 and (model.nq_j if what == "nq" else model.nv_j)[body] == 0:
            body -= 1
        raise PartreeInputError(f"{name}[{k}] is {x[k]} (joint {model.joint_names[body]!r}, body {body})")
    return x


def state(model, q, qd=None, names=("q", "qd")):
    """q (and qd) checked: sizes, finite values, and quaternions of spherical and free joints that
    define a rotation (the kernels normalise them, but a zero quaternion has no direction).
    ``names``: what the messages call them."""
    q = vector(model, q, model.nq, names[0], "nq")
    qi = quaternion_starts(model)
    if qi.size:
        k = _first_zero_quaternion(q, qi, QUAT_MIN_NORM2)
        if k >= 0:
            body = int(np.flatnonzero(_quat_bodies(model))[k])
            raise PartreeInputError(f"joint {model.joint_names[body]!r} (body {body}): its quaternion "
                                    f"{names[0]}[{qi[k]}:{qi[k] + 4}] = {q[qi[k]:qi[k] + 4].tolist()} is zero; a rotation "
                                    f"needs a nonzero (normally unit) quaternion (x, y, z, w)")
    if qd is not None:
        qd = vector(model, qd, model.nv, names[1], "nv")
    return q, qd


#: squared norm below which a quaternion is refused (it defines no rotation)
QUAT_MIN_NORM2 = 1e-20


@njit(cache=True)
def _first_zero_quaternion(q, starts, tol):
    """Index (into ``starts``) of the first quaternion whose squared norm is not above ``tol``
    (NaN included), or -1: one pass, no temporaries."""
    for k in range(starts.shape[0]):
        i = starts[k]
        n2 = q[i] * q[i] + q[i + 1] * q[i + 1] + q[i + 2] * q[i + 2] + q[i + 3] * q[i + 3]
        if not n2 > tol:
            return k
    return -1


def _quat_bodies(model):
    """Boolean mask of the bodies whose joint carries a quaternion (spherical, free)."""
    from . import joints as J

    return (model.jtype == J.SPHERICAL) | (model.jtype == J.FREE)


def quaternion_starts(model):
    """Index in q of the first component of every quaternion, in body order (cached on the model,
    as long as its joint types are the same array)."""
    got = getattr(model, "_quaternion_starts", None)
    if got is None or got[0] is not model.jtype:
        from . import joints as J

        ids = np.flatnonzero(_quat_bodies(model))
        starts = (model.idx_q[ids] + J.QUAT_OFFSET[model.jtype[ids]]).astype(np.int64)
        got = (model.jtype, starts)
        model._quaternion_starts = got
    return got[1]


_NO_FORCES = np.zeros((1, 6))


def external_forces(model, f_ext):
    """f_ext: None, an (n, 6) array of body wrenches [n; f] in body coordinates, or a dict
    {joint name or body index: wrench}."""
    if f_ext is None:
        return _NO_FORCES, False
    if isinstance(f_ext, dict):
        F = np.zeros((model.n, 6))
        for key, w in f_ext.items():
            F[model.joint_id(key)] = np.asarray(w, dtype=float).reshape(6)
        f_ext = F
    F = np.ascontiguousarray(f_ext, dtype=np.float64)
    if F.shape != (model.n, 6):
        raise PartreeInputError(f"f_ext has shape {F.shape}; expected ({model.n}, 6) body wrenches [n; f]")
    if not np.isfinite(F).all():
        i = int(np.argwhere(~np.isfinite(F))[0][0])
        raise PartreeInputError(f"f_ext of body {i} (joint {model.joint_names[i]!r}) is not finite")
    return F, True


def out_array(out, shape, name="out"):
    """The array a result is written to: a new one for ``out=None``, else ``out`` itself, which
    must be a writable C-contiguous float64 array of exactly ``shape`` (it is written in place,
    never cast or reshaped)."""
    if out is None:
        return np.empty(shape)
    if (type(out) is not np.ndarray or out.dtype != np.float64 or not out.flags.c_contiguous
            or not out.flags.writeable or out.shape != tuple(shape)):
        what = (f"a {type(out).__name__}" if type(out) is not np.ndarray else
                f"an array of shape {out.shape}, dtype {out.dtype}"
                + ("" if out.flags.c_contiguous else ", not C-contiguous")
                + ("" if out.flags.writeable else ", read-only"))
        raise PartreeInputError(f"{name} is {what}; it must be a writable C-contiguous float64 array of "
                                f"shape {tuple(shape)}")
    return out


def writable(x):
    """``x``, or a copy of it when it is read-only (the compiled calls take writable arrays)."""
    return x if x.flags.writeable else x.copy()


def data_for(model, data):
    if data is None:
        return model.data if model._data is None else model._data
    if data.n != model.n or data.S.shape[0] != model.nv:
        raise PartreeInputError("data was created for a different model")
    return data


def model_args(model):
    """The model arrays every kernel takes, in order (a model with flexible bodies is refused:
    the kernels compute rigid bodies only)."""
    if getattr(model, "flexible", None) is not None:
        from .flexible import RIGID_ALGORITHMS, unsupported

        raise unsupported(model, RIGID_ALGORITHMS)
    return (model.parent, model.jtype, model.axis, model.axis2, model.E_tree, model.r_tree,
            model.mass, model.com, model.I_com, model.idx_q, model.idx_v)
