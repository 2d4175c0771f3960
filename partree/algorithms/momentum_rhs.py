"""Equations of motion in generalized momenta: (qdot, pdot) = f(t, q, p, tau) in O(N) (seed 001).

The state is the configuration q (nq) and the generalized momenta p = M(q) v (nv, in partree's v
coordinates, ``generalized_momentum``).  One evaluation:

1. v from p by the block L^T D L elimination of seed 001's eq. (6)
   (``velocity_from_momentum``, method 'ldlt'), which also gives the body velocities v_i and the
   subtree momenta mu_i (in body i's coordinates);
2. qdot, the rate of q for the velocity v (:func:`configuration_rate`): qdot = v for angles and
   displacements; for a quaternion (x, y, z, w) with body-frame angular velocity w,
   d quat/dt = quat * (w, 0) / 2; for a free joint's position in the parent frame, R(quat) v_lin;
3. pdot from seed 001's eq. (7), without any acceleration:

       pdot_i = tau_i + S_i^T (F_i - v_i x* mu_i) + (dS_i/dt)^T mu_i,

   F_i the wrench of gravity and of the external forces on the bodies of subtree i, in body i's
   coordinates (the seed's A^T F' = Q).

Derivation of 3, in one inertial frame.  Let s_i = X_{0,i} S_i be joint i's motion subspace in
world coordinates and h_i the momentum of the subtree of body i about the world origin, so that
p_i = s_i^T h_i (joint i moves exactly the subtree's bodies, each along s_i: row i of M v).
Newton-Euler for the subtree as one system gives dh_i/dt = f_i + F_i (world): the joint wrenches
inside the subtree cancel, and f_i, the wrench joint i transmits from the parent, is all that is
left of them.  A vector fixed in body i moves with the body's velocity V_i, so
ds_i/dt = V_i x s_i + X_{0,i} dS_i/dt, dS_i/dt being the rate of S_i in body coordinates.  With
s_i^T f_i = tau_i (the joint's drive; its constraint wrench does no work along s_i) and
(V x s)^T h = -s^T (V x* h),

    dp_i/dt = tau_i + s_i^T (F_i - V_i x* h_i) + (X_{0,i} dS_i/dt)^T h_i,

which is the formula above in body i's coordinates (the pairing of a motion and a force vector
does not depend on the frame).  In the seed's notation this is eq. (7),
pdot = (Adot^T - A^T Omega) mu + A^T F', with Omega_i mu_i = v_i x* mu_i.

Nothing in the derivation uses qdot = v: it holds for quasi-velocities as well.  For spherical
and free joints, whose v is the body-frame velocity, it is the Boltzmann-Hamel form of the
equations (for a free body alone: dp_lin/dt = f - w x p_lin, dp_ang/dt = n - w x p_ang -
v_lin x p_lin, Euler's equations), not d/dt dL/dqdot = dL/dq of a coordinate Lagrangian.  Every
joint of partree has a constant S_i in body coordinates except the universal joint, whose first
column b = R_2(q_2)^T a_1 (axis 1 seen from the body) turns with the second angle:
db/dt = -qd_2 (a_2 x b), hence (dS_i/dt)^T mu_i = (-qd_2 (a_2 x b) . mu_ang, 0).

Passes: the joint frames (pass 1 of ABA at zero velocity), :func:`body_wrench_pass` (outward),
the L^T D L elimination (inward) and recovery (outward) of ``velocity_from_momentum``,
:func:`momentum_rate_pass` (inward), and :func:`configuration_rate_kernel`.
"""
import math

import numpy as np
from numba import njit

from .. import checks
from ..errors import PartreeInputError
from ..joints import FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL
from .packed import ERR_SHAPE, NO_FORCES, OK, check_state, model_buffer, model_views, restrict, workspace_views
from .welded import computing_forces, computing_model, original_body
from .primitives import cross_force, inertia_times, xform_force_T_add, xform_motion
from .velocity_from_momentum import (check_method, elimination_backward_pass, momentum_frames, recovery_forward_pass,
                                     singular_joint)


@njit(cache=True)
def body_wrench_pass(parent, mass, com, I_com, gravity, E, r, f_ext, has_fext, ag, F):
    """Outward: ag_i = X_up ag_parent, the gravity field [0; g] in body i's coordinates (the base's
    is [0; g] in its own), and F_i = I_i ag_i + f_ext_i, the wrench of gravity and the external
    force on body i."""
    n = parent.shape[0]
    g0 = np.zeros(6)
    g0[3] = gravity[0]
    g0[4] = gravity[1]
    g0[5] = gravity[2]
    for i in range(n):
        p_ = parent[i]
        if p_ < 0:
            xform_motion(E[i], r[i], g0, ag[i])
        else:
            xform_motion(E[i], r[i], ag[p_], ag[i])
        inertia_times(mass[i], com[i], I_com[i], ag[i], F[i])
        if has_fext:
            for k in range(6):
                F[i, k] += f_ext[i, k]


@njit(cache=True)
def subtree_sum_pass(parent, E, r, X):
    """Inward, in place: X_i becomes the sum over body i's subtree of the force vectors X_j, each
    moved to body i's coordinates (the children's sums through X_c^T)."""
    for i in range(parent.shape[0] - 1, -1, -1):
        p_ = parent[i]
        if p_ >= 0:
            xform_force_T_add(E[i], r[i], X[i], X[p_])


@njit(cache=True)
def momentum_rate_pass(parent, jtype, idx_v, tau, E, r, S, v, mu, qd, F, pdot):
    """Inward: F_i summed over each subtree (in place) and
    pdot_i = tau_i + S_i^T (F_i - v_i x* mu_i) + (dS_i/dt)^T mu_i (seed 001's eq. 7)."""
    n = parent.shape[0]
    nvt = S.shape[0]
    g = np.empty(6)
    for i in range(n - 1, -1, -1):
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        cross_force(v[i], mu[i], g)
        for k in range(6):
            g[k] = F[i, k] - g[k]
        for d in range(nv):
            s = tau[iv + d]
            for k in range(6):
                s += S[iv + d, k] * g[k]
            pdot[iv + d] = s
        if jtype[i] == UNIVERSAL:
            # b = S[iv, :3] turns about a_2 = S[iv + 1, :3]: db/dt = -qd_2 (a_2 x b)
            b0, b1, b2 = S[iv, 0], S[iv, 1], S[iv, 2]
            a0, a1, a2 = S[iv + 1, 0], S[iv + 1, 1], S[iv + 1, 2]
            c0 = a1 * b2 - a2 * b1
            c1 = a2 * b0 - a0 * b2
            c2 = a0 * b1 - a1 * b0
            pdot[iv] -= qd[iv + 1] * (c0 * mu[i, 0] + c1 * mu[i, 1] + c2 * mu[i, 2])
        p_ = parent[i]
        if p_ >= 0:
            xform_force_T_add(E[i], r[i], F[i], F[p_])


@njit(cache=True)
def configuration_rate_kernel(jtype, idx_q, idx_v, q, v, qdot):
    """qdot (nq,) for the velocity v (nv,): v itself for angles and displacements; for a
    quaternion (x, y, z, w) and body-frame angular velocity w, quat * (w, 0) / 2 (the rate of
    ``partree.integrate``'s right multiplication by exp(w t)); for a free joint's position in
    the parent frame, R(quat) v_lin (normalised quaternion)."""
    for i in range(jtype.shape[0]):
        jt = jtype[i]
        iq = idx_q[i]
        iv = idx_v[i]
        if jt == REVOLUTE or jt == PRISMATIC:
            qdot[iq] = v[iv]
        elif jt == UNIVERSAL:
            qdot[iq] = v[iv]
            qdot[iq + 1] = v[iv + 1]
        elif jt == SPHERICAL:
            quaternion_rate(q, iq, v[iv], v[iv + 1], v[iv + 2], qdot)
        elif jt == FREE:
            k = iq + 3
            x, y, z, w = q[k], q[k + 1], q[k + 2], q[k + 3]
            nrm = math.sqrt(x * x + y * y + z * z + w * w)
            x, y, z, w = x / nrm, y / nrm, z / nrm, w / nrm
            l0, l1, l2 = v[iv], v[iv + 1], v[iv + 2]
            # R l = l + 2 w (u x l) + 2 u x (u x l), u = (x, y, z)
            t0 = 2.0 * (y * l2 - z * l1)
            t1 = 2.0 * (z * l0 - x * l2)
            t2 = 2.0 * (x * l1 - y * l0)
            qdot[iq] = l0 + w * t0 + (y * t2 - z * t1)
            qdot[iq + 1] = l1 + w * t1 + (z * t0 - x * t2)
            qdot[iq + 2] = l2 + w * t2 + (x * t1 - y * t0)
            quaternion_rate(q, k, v[iv + 3], v[iv + 4], v[iv + 5], qdot)


@njit(cache=True, inline="always")
def quaternion_rate(q, k, w0, w1, w2, qdot):
    """qdot[k:k+4] = q[k:k+4] * (w, 0) / 2 (quaternions stored (x, y, z, w); w in the body
    frame).  Orthogonal to q, so the rate keeps the quaternion's norm."""
    ax, ay, az, aw = q[k], q[k + 1], q[k + 2], q[k + 3]
    qdot[k] = 0.5 * (aw * w0 + ay * w2 - az * w1)
    qdot[k + 1] = 0.5 * (aw * w1 - ax * w2 + az * w0)
    qdot[k + 2] = 0.5 * (aw * w2 + ax * w1 - ay * w0)
    qdot[k + 3] = -0.5 * (ax * w0 + ay * w1 + az * w2)


@njit(cache=True)
def momentum_rhs_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                        q, p, tau, f_ext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u, qd, qdot, pdot,
                        ldlt=True):
    """All passes (module docstring): qd receives v, qdot and pdot the state's rates, pA the
    subtree momenta, c the gravity field and a the subtree wrenches F_i.  ``ldlt``: the velocity
    solve by the block L^T D L elimination (True) or by the sweep (False).  Returns -1, or the
    body of a singular joint block."""
    momentum_frames(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q,
                    E, r, v, c, IA, pA, S)
    body_wrench_pass(parent, mass, com, I_com, gravity, E, r, f_ext, has_fext, c, a)
    bad = elimination_backward_pass(parent, idx_v, p, E, r, IA, pA, S, U, Dinv, u, ldlt)
    if bad >= 0:
        return bad
    recovery_forward_pass(parent, idx_v, E, r, S, IA, pA, U, Dinv, u, v, qd, True, ldlt)
    momentum_rate_pass(parent, jtype, idx_v, tau, E, r, S, v, pA, qd, a, pdot)
    configuration_rate_kernel(jtype, idx_q, idx_v, q, qd, qdot)
    return -1


@njit(cache=True)
def momentum_rhs_call(mb, wb, q, p, tau, fext, qdot, pdot, ldlt, check):
    """One evaluation on a packed model and workspace (``partree.algorithms.packed``): the
    compiled checks and :func:`momentum_rhs_kernel` on the model with its welded bodies merged
    (``partree.algorithms.welded``; external wrenches on welded bodies moved to the bodies they
    are merged into), qdot and pdot written, v left in the workspace's qdd.  Returns
    ``packed.OK``, an error code, or the body of a singular joint block."""
    e = check_state(mb, wb, q, p, tau, fext, check)
    if e != OK:
        return e
    nv = mb[3]
    if qdot.shape[0] != mb[2] or pdot.shape[0] != nv:
        return ERR_SHAPE
    cb, n = computing_model(mb, wb)
    f = computing_forces(mb, wb, n, fext)
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, _, _ = model_views(cb)
    E, r, v, c, IA, pA, a, S, U, Dinv, u, qd, _, _ = workspace_views(wb, mb[1], nv, n)
    bad = momentum_rhs_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                              q, p, tau, f, f.shape[0] > 0, E, r, v, c, IA, pA, a, S, U, Dinv, u, qd, qdot, pdot,
                              ldlt)
    if bad >= 0:
        return original_body(mb, wb, n, bad)
    return OK


#: the one signature of :func:`momentum_rhs_call` (``packed.restrict``)
CALL_SIGNATURE = "int64(int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[:, ::1], " \
                 "float64[::1], float64[::1], boolean, boolean)"
_CALL_READY = False


def _ready():
    global _CALL_READY
    if not _CALL_READY:
        restrict(momentum_rhs_call, CALL_SIGNATURE)
        _CALL_READY = True


def configuration_rate(model, q, v):
    """The rate qdot (nq,) of the configuration q moving with the velocity v (nv,): the
    derivative of ``partree.integrate(model, q, v * t)`` at t = 0 (see
    :func:`configuration_rate_kernel`)."""
    q, v = checks.state(model, q, v, names=("q", "v"))
    qdot = np.empty(model.nq)
    configuration_rate_kernel(model.jtype, model.idx_q, model.idx_v, q, v, qdot)
    return qdot


def momentum_rhs(model, t, q, p, tau, f_ext=None, data=None, method="ldlt", return_velocity=False, check=True):
    """Right-hand side of the equations of motion in generalized momenta (seed 001, eqs. 6-7).

    Returns (qdot, pdot) for the state (q, p), p = M(q) v, in O(N) and without accelerations:
    v from p by the block L^T D L elimination, qdot the configuration's rate for v, and
    pdot_i = tau_i + S_i^T (F_i - v_i x* mu_i) + (dS_i/dt)^T mu_i with mu_i the subtree momenta
    and F_i the wrench of gravity and the external forces on subtree i.  For spherical and free
    joints p is conjugate to the body-frame velocities and pdot follows the quasi-velocity
    (Boltzmann-Hamel) form; the module docstring has the derivation.

    Parameters
    ----------
    model : Model
    t : float
        Time; unused (the equations do not depend on it explicitly), taken for the signature
        ``f(t, y)`` of integrators.
    q : ndarray
        Configuration (nq,).
    p : ndarray
        Generalized momenta (nv,) in partree's v coordinates (``generalized_momentum``).
    tau : ndarray
        Joint forces (nv,).
    f_ext : ndarray or dict, optional
        External wrenches [n; f] on the bodies, in body coordinates: (n, 6) or {joint name:
        wrench}, as for :func:`partree.aba`.
    data : Data, optional
        A reusable workspace (``model.create_data()``); the model's own is used when omitted.
    method : {'ldlt', 'sweep'}
        The elimination that solves M v = p (see ``velocity_from_momentum``): the seed's block
        L^T D L scheme (default) or its sweep.  Both give v to rounding.
    return_velocity : bool
        Also return v (nv,), which the evaluation solves for anyway: the Lie-group integrators of
        ``partree.simulation`` step the configuration with v (velocity coordinates), not qdot.
    check : bool
        False skips the value checks of inputs that are already C-contiguous float64 arrays of
        the right sizes (see :func:`partree.aba`).

    Returns
    -------
    qdot : ndarray
        dq/dt (nq,).
    pdot : ndarray
        dp/dt (nv,).
    v : ndarray
        The joint velocities (nv,), with ``return_velocity`` only.
    """
    pk = model._packed
    if pk is not None and _CALL_READY and (method == "ldlt" or method == "sweep"):
        try:
            d = model._data if data is None else data
            qdot = np.empty(pk.nq)
            pdot = np.empty(pk.nv)
            if momentum_rhs_call(pk.buf, d._buf, q, p, tau, NO_FORCES if f_ext is None else f_ext, qdot, pdot,
                                 method == "ldlt", check) == OK:
                return (qdot, pdot, d.qdd.copy()) if return_velocity else (qdot, pdot)
        except (TypeError, AttributeError):
            pass        # not the compiled call's types: checked and converted below
    check_method(method)
    q, p = checks.state(model, q, p, names=("q", "p"))
    tau = checks.vector(model, tau, model.nv, "tau", "nv")
    F, has_f = checks.external_forces(model, f_ext)
    d = checks.data_for(model, data)
    qdot = np.empty(model.nq)
    pdot = np.empty(model.nv)
    pk = model_buffer(model)
    if pk is None:
        bad = momentum_rhs_kernel(*checks.model_args(model), model.gravity, q, p, tau, F, has_f,
                                  d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, d.qdd, qdot, pdot,
                                  method == "ldlt")
    else:
        _ready()
        bad = momentum_rhs_call(pk.buf, d._buf, checks.writable(q), checks.writable(p), checks.writable(tau),
                                checks.writable(F) if has_f else NO_FORCES, qdot, pdot, method == "ldlt", False)
    if bad >= 0:
        raise singular_joint(model, bad)
    if bad != OK:
        raise PartreeInputError(f"momentum_rhs: the compiled call refused checked inputs (code {bad}; an internal "
                                f"error)")
    if return_velocity:
        return qdot, pdot, d.qdd.copy()
    return qdot, pdot
