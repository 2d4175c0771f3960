"""Impulses: the jump of the generalized momenta and velocities under a blow, in O(N) (seed 001).

In generalized momenta an impulsive event is the simplest thing there is: during an infinitely
short blow the configuration does not move and every finite force does nothing, so the momenta
jump by the generalized impulse and nothing else,

    p+ = p- + iota,        iota = iota_joint + sum_k J_k(q)^T iota_k,

where iota_joint (nv,) are impulses of the joints' drives (the time integrals of joint forces,
N m s or N s) and iota_k = [n; f] (N m s; N s) the wrench impulse of a blow on body k, in body k's
coordinates, J_k its body Jacobian (the body's twist in its own coordinates is J_k qd).  The
velocity after the blow is the solution of M(q) v+ = p+ (``velocity_from_momentum``); in the
velocity form this is v+ = v- + M^-1 iota, the classical impulse response.

The body impulses map to joint space the way external forces enter the inverse dynamics (RNEA's
inward pass): starting from F_k = iota_k, inward over the bodies,

    iota_i += S_i^T F_i,        F_parent += X_up[i]^T F_i,

since joint i moves exactly the bodies of its subtree, each along S_i (F_i being the subtree's
wrench impulse in body i's coordinates), which is row i of sum_k J_k^T iota_k.  Together with the
joint frames (pass 1 of ABA at zero velocity) and the O(N) velocity solve, the whole jump is O(N)
and never forms M or a Jacobian.

A contact impulse that is itself unknown (a plastic impact, a docking latch that locks two
bodies together) needs the operational-space inverse inertia of the contact; given the impulse,
these functions give the jump.
"""
from collections import namedtuple

import numpy as np
from numba import njit

from .. import checks
from ..errors import PartreeInputError
from ..flexible import refuse
from .generalized_momentum import generalized_momentum
from .primitives import xform_force_T_add
from .velocity_from_momentum import check_method, momentum_frames, velocity_from_momentum

#: the jump of :func:`apply_impulse`: momenta and velocities after the blow, and the generalized
#: impulse that made it (all (nv,))
ImpulseResponse = namedtuple("ImpulseResponse", ["p", "qd", "impulse"])


@njit(cache=True)
def impulse_inward_pass(parent, idx_v, E, r, S, F, iota):
    """Inward: iota_i += S_i^T F_i and F_parent += X_up[i]^T F_i, F starting as the body wrench
    impulses (overwritten with the subtree sums)."""
    n = parent.shape[0]
    nvt = S.shape[0]
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        for d in range(nv):
            s = iota[iv + d]
            for k in range(6):
                s += S[iv + d, k] * F[i, k]
            iota[iv + d] = s
        p_ = parent[i]
        if p_ >= 0:
            xform_force_T_add(E[i], r[i], F[i], F[p_])


def _body_impulses(model, body_impulse):
    """(n, 6) body wrench impulses (a new array) from an (n, 6) array or a {joint: wrench} dict."""
    try:
        F, has = checks.external_forces(model, body_impulse)
    except PartreeInputError as e:
        raise PartreeInputError(str(e).replace("f_ext", "body_impulse")) from None
    return np.array(F, dtype=float) if has else None


def generalized_impulse(model, q, joint_impulse=None, body_impulse=None, data=None):
    """The generalized impulse iota = iota_joint + sum_k J_k(q)^T iota_k (nv,) of a blow, in O(N).

    Parameters
    ----------
    model : Model
    q : ndarray
        Configuration (nq,) at the blow.
    joint_impulse : array_like, optional
        Impulses of the joints' drives (nv,), in partree's v coordinates (N m s for rotations,
        N s for translations); a pair of equal and opposite torque impulses between a joint's
        two bodies is one entry here.
    body_impulse : array_like or dict, optional
        Wrench impulses [n; f] on the bodies, in body coordinates: an (n, 6) array or
        {joint name: (6,) impulse}, the way ``f_ext`` is given to ``partree.aba``.  Each is the
        impulse of a blow on that body referred to its frame's origin (a linear impulse f at a
        point c of the body adds the angular impulse c x f).
    data : Data, optional
        A reusable workspace (``model.create_data()``); the model's own is used when omitted.

    Returns
    -------
    ndarray
        iota (nv,): what the blow adds to the generalized momenta p.
    """
    refuse(model, "generalized_impulse")
    q = checks.state(model, q, None, names=("q", "qd"))[0]
    iota = np.zeros(model.nv)
    if joint_impulse is not None:
        iota += checks.vector(model, joint_impulse, model.nv, "joint_impulse", "nv")
    F = _body_impulses(model, body_impulse)
    if F is None:
        return iota
    d = checks.data_for(model, data)
    momentum_frames(*checks.model_args(model), q, d.E, d.r, d.v, d.c, d.IA, d.pA, d.S)
    impulse_inward_pass(model.parent, model.idx_v, d.E, d.r, d.S, F, iota)
    return iota


def apply_impulse(model, q, qd=None, *, p=None, joint_impulse=None, body_impulse=None, method="ldlt", data=None):
    """The state just after a blow: momenta p+ = p- + iota and velocities qd+ = M(q)^-1 p+.

    Give the state before the blow by its velocities (``qd``, the velocity form) or by its
    momenta (``p=``, the momentum form; ``partree.generalized_momentum``), and the blow by joint
    impulses, body wrench impulses, or both (:func:`generalized_impulse`).  The configuration
    does not change during a blow.  O(N): one inward pass for the body impulses, one for p- when
    qd is given, and the velocity solve of seed 001 (``velocity_from_momentum``).

    Parameters
    ----------
    model : Model
    q : ndarray
        Configuration (nq,).
    qd : ndarray, optional
        Velocities (nv,) before the blow (give this or ``p``).
    p : ndarray, optional
        Generalized momenta (nv,) before the blow (give this or ``qd``).
    joint_impulse : array_like, optional
        Joint drive impulses (nv,): N m s for rotations, N s for translations.
    body_impulse : array_like or dict, optional
        Body wrench impulses [n; f] in body coordinates, (n, 6) or {joint name: (6,)}.
    method : {'ldlt', 'sweep'}
        The elimination of M v = p (``velocity_from_momentum``).
    data : Data, optional
        A reusable workspace.

    Returns
    -------
    ImpulseResponse
        ``(p, qd, impulse)``: the momenta and velocities after the blow and the generalized
        impulse iota = p+ - p-, each (nv,).

    Examples
    --------
    A blow of 0.5 N s along the last body's y axis, on a chain at rest::

        m = partree.resolve_model("cardan:n=3")
        hit = {m.joint_names[-1]: [0, 0, 0, 0, 0.5, 0]}
        after = partree.apply_impulse(m, m.neutral(), np.zeros(m.nv), body_impulse=hit)
        after.qd, after.p            # the velocities and momenta just after
    """
    check_method(method)
    if (qd is None) == (p is None):
        raise PartreeInputError("apply_impulse needs the state before the blow: its velocities qd or its momenta "
                                "p= (one of the two)")
    if joint_impulse is None and body_impulse is None:
        raise PartreeInputError("apply_impulse needs a blow: joint_impulse=(nv,) and/or body_impulse=(n, 6) or "
                                "{joint: [n; f]}")
    q = checks.state(model, q, None, names=("q", "qd"))[0]
    if qd is not None:
        p0 = generalized_momentum(model, q, qd, data=data)
    else:
        p0 = checks.vector(model, p, model.nv, "p", "nv").astype(float, copy=True)
    iota = generalized_impulse(model, q, joint_impulse, body_impulse, data=data)
    p1 = p0 + iota
    v1 = velocity_from_momentum(model, q, p1, method=method, data=data)
    return ImpulseResponse(p1, v1, iota)
