"""Dynamics of trees with flexible bodies (``partree.flexible``): inverse dynamics (RNEA form),
the mass matrix (CRBA form), forward dynamics (ABA form) and the energy, all O(N).

Every body i has the generalized velocity ``nu_i = [v_i; eta_dot_i]`` (6 + m_i; m_i = 0 for a
rigid body) and the (6 + m_i) x (6 + m_i) mass matrix of :func:`partree.flexible.body_mass_matrix`.
Its own coordinates ``z_i = [qd_i; eta_dot_i]`` enter through the joint's motion subspace grown by
m_i columns, ``S_hat = blockdiag(S_i, 1_m)``; the parent's generalized velocity reaches body i
through the 6 x (6 + m_p) map ``T_i = X_J [X_pred(eta_p) | S_def(eta_p)]``: the joint's
predecessor frame sits at the parent's node, translated by ``Phi eta_p`` and rotated by
``exp(Psi eta_p)``, and ``S_def`` is that frame's velocity per modal rate (the rotation's exact
tangent map, so the velocities are the exact time derivatives of the poses).  A rigid parent has
``T_i = X_up``.  The recursions are those of the rigid algorithms with 6-vectors grown to
(6 + m)-vectors at flexible bodies:

* inverse dynamics: outward ``a_i = T_i [a_p; eta_dd_p] + S_i qdd_i + c_i``; body force
  ``f_i = M_i [a_i; eta_dd_i] + b_i`` (b: the velocity terms, the elastic ``K eta`` and the damping
  ``D eta_dot``); inward ``tau_i = S_hat^T f_i``, ``f_p += T_i^T f_i[:6]``;
* mass matrix: composite inertias ``IC_p += T_i^T IC_i[:6, :6] T_i`` and the column walk of CRBA;
* forward dynamics: articulated inertias ``(6 + m) x (6 + m)``, ``U = IA S_hat``,
  ``D = S_hat^T U``, handed to the parent as ``T_i^T Ia_i[:6, :6] T_i``.

A body with geometric stiffening data (``FlexibleBody.stiffening``) adds its modal force
``(omega^T G omega) eta`` to the velocity terms b.

Coordinates: ``q_full = [q; eta]``, ``v_full = [qd; eta_dot]`` (``partree.flexible``); the
modal generalized forces of ``tau_full`` are the forces applied to the modes (zero in free
motion: the elastic and damping forces are part of the dynamics).  Gravity enters as the base
acceleration, as in the rigid algorithms.  External wrenches are not taken yet.

These functions are written with NumPy over the bodies (a Python loop per body): O(N), meant for
models of up to some thousands of bodies; the compiled rigid algorithms do not see the modes.
"""
from __future__ import annotations

import numpy as np

from ..errors import PartreeInputError
from ..flexible import axial, body_mass_matrix, deformed_moments
from ..joints import joint_kinematics
from .flexible_kernels import flexible_articulated, flexible_inverse
from ..spatial import crf, crm, motion_xform, skew, spatial_inertia


# ----------------------------------------------------------------------------- rotations
def _exp_so3(th):
    t2 = float(th @ th)
    K = skew(th)
    if t2 < 1e-2:
        s = 1 - t2 / 6 + t2 * t2 / 120 - t2 ** 3 / 5040
        c = 0.5 - t2 / 24 + t2 * t2 / 720 - t2 ** 3 / 40320
    else:
        t = np.sqrt(t2)
        s = np.sin(t) / t
        c = (1 - np.cos(t)) / t2
    return np.eye(3) + s * K + c * K @ K


def _ab(u):
    """a = (1 - cos t) / t^2, b = (t - sin t) / t^3 and their derivatives with respect to u = t^2."""
    if u < 1e-2:
        a = 0.5 - u / 24 + u * u / 720 - u ** 3 / 40320 + u ** 4 / 3628800
        b = 1 / 6 - u / 120 + u * u / 5040 - u ** 3 / 362880 + u ** 4 / 39916800
        au = -1 / 24 + u / 360 - u * u / 13440 + u ** 3 / 907200
        bu = -1 / 120 + u / 2520 - u * u / 120960 + u ** 3 / 9979200
        return a, b, au, bu
    t = np.sqrt(u)
    s, c = np.sin(t), np.cos(t)
    a = (1 - c) / u
    b = (t - s) / (u * t)
    au = (t * s - 2 * (1 - c)) / (2 * u * u)
    bu = ((1 - c) * t - 3 * (t - s)) / (2 * u * u * t)
    return a, b, au, bu


def _right_jacobian(th, thd):
    """J_r(theta) and its time derivative for the rate thd (the body-frame angular velocity of
    exp(theta~) is J_r theta_dot)."""
    u = float(th @ th)
    a, b, au, bu = _ab(u)
    K = skew(th)
    Kd = skew(thd)
    ud = 2.0 * float(th @ thd)
    J = np.eye(3) - a * K + b * K @ K
    Jd = -au * ud * K - a * Kd + bu * ud * K @ K + b * (Kd @ K + K @ Kd)
    return J, Jd


# ----------------------------------------------------------------------------- model access
def _flex(model):
    fl = getattr(model, "flexible", None)
    ne = 0 if fl is None else fl.n_modal
    nm = np.zeros(model.n, dtype=np.int64) if fl is None else fl.nmodes
    ie = np.zeros(model.n, dtype=np.int64) if fl is None else fl.idx_eta
    return fl, ne, nm, ie


def _state(model, q, qd):
    fl, ne, _, _ = _flex(model)
    q = np.ascontiguousarray(q, dtype=float)
    if q.shape != (model.nq + ne,):
        raise PartreeInputError(f"q has shape {q.shape}; a model with {ne} modal coordinates takes "
                                f"({model.nq + ne},): the joint coordinates then the modal ones")
    if qd is None:
        qd = np.zeros(model.nv + ne)
    qd = np.ascontiguousarray(qd, dtype=float)
    if qd.shape != (model.nv + ne,):
        raise PartreeInputError(f"qd has shape {qd.shape}; expected ({model.nv + ne},): the joint "
                                f"velocities then the modal ones")
    return q, qd


class _Body:
    __slots__ = ("T", "S", "v", "c", "M", "b", "nu", "m", "Xup", "E", "r")


def _outward(model, q, qd):
    """Per body: T (6 x (6 + m_p)), joint subspace S (6 x n_i), velocity v, velocity product c,
    mass matrix M and velocity/elastic force b (both (6 + m_i)), world pose helpers E, r (X_up)."""
    fl, ne, nm, ie = _flex(model)
    nq, nv = model.nq, model.nv
    eta, etad = q[nq:], qd[nv:]
    qj, qdj = q[:nq], qd[:nv]
    out = []
    R, R2 = np.empty((3, 3)), np.empty((3, 3))
    Sb = np.zeros((6, 6))
    cJ = np.zeros(6)
    Ej, rj = np.empty((3, 3)), np.empty(3)
    jtype = np.asarray(model.jtype, dtype=np.int64)
    for i in range(model.n):
        B = _Body()
        p = int(model.parent[i])
        Et, rt = model.E_tree[i], model.r_tree[i]
        node = fl.node(i) if fl is not None else None
        mp = int(nm[p]) if p >= 0 else 0
        if node is not None:
            _, Phi, Psi = node
            ep = eta[ie[p]:ie[p] + mp]
            epd = etad[ie[p]:ie[p] + mp]
            th = Psi @ ep
            thd = Psi @ epd
            Rn = _exp_so3(th)
            Jr, Jrd = _right_jacobian(th, thd)
            E_pred = Et @ Rn.T
            r_pred = rt + Phi @ ep
            S_def = np.vstack((Et @ Jr @ Psi, Et @ Rn.T @ Phi))
            w_b = Jr @ thd
            c_def = np.concatenate((Et @ Jrd @ thd, Et @ (-skew(w_b) @ Rn.T @ (Phi @ epd))))
        else:
            E_pred, r_pred = Et, rt
        iv = int(model.idx_v[i])
        nvi = joint_kinematics(jtype[i], model.axis[i], model.axis2[i], qj, int(model.idx_q[i]), qdj, iv,
                               np.ascontiguousarray(E_pred), np.ascontiguousarray(r_pred), Ej, rj, Sb, cJ, R, R2)
        E_up, r_up = Ej.copy(), rj.copy()
        X_up = motion_xform(E_up, r_up)
        X_J = motion_xform(E_up @ E_pred.T, E_pred @ (r_up - r_pred))
        S = Sb[:nvi].T.copy()                              # 6 x n_i
        vJ = S @ qdj[iv:iv + nvi]
        if p < 0:
            T = X_up
            v = vJ.copy()
            c = cJ.copy()
        else:
            vp = out[p].v
            if node is not None:
                T = np.hstack((X_up, X_J @ S_def))
                w1 = S_def @ epd
                v_pred = motion_xform(E_pred, r_pred) @ vp + w1
                c_pred = c_def + crm(v_pred) @ w1
                v = X_J @ v_pred + vJ
                c = X_J @ c_pred + cJ + crm(v) @ vJ
            else:
                T = X_up if mp == 0 else np.hstack((X_up, np.zeros((6, mp))))
                v = X_up @ vp + vJ
                c = cJ + crm(v) @ vJ
        m = int(nm[i])
        if m:
            body = fl.bodies[i]
            e = eta[ie[i]:ie[i] + m]
            ed = etad[ie[i]:ie[i] + m]
            M = body_mass_matrix(model.mass[i], model.com[i], model.I_com[i], body, e)
            nu = np.concatenate((v, ed))
            b = _flexible_bias(model.mass[i], model.com[i], model.I_com[i], body, e, ed, v, M @ nu)
        else:
            M = spatial_inertia(model.mass[i], model.com[i], model.I_com[i])
            nu = v
            b = crf(v) @ (M @ v)
        B.T, B.S, B.v, B.c, B.M, B.b, B.nu, B.m, B.Xup, B.E, B.r = T, S, v, c, M, b, nu, m, X_up, E_up, r_up
        out.append(B)
    return out


def _flexible_bias(mass, com, I_com, body, e, ed, v, h):
    """b = dM/dt nu + [v x* h_r; -dT/deta] + [0; K eta + D eta_dot] of one flexible body, h = M nu."""
    m = body.m
    w, V = v[:3], v[3:]
    _, _, N = deformed_moments(mass, com, I_com, body, e)
    C = body.phiphi
    sd = body.first @ ed
    Yd = np.einsum("k,kij->ij", ed, N + N.transpose(0, 2, 1))
    Jd = np.trace(Yd) * np.eye(3) - Yd
    Nd = np.einsum("l,lkij->kij", ed, C)
    Gd = np.stack([axial(Nd[k]) for k in range(m)], axis=1)
    Sd = skew(sd)
    out = np.empty(6 + m)
    out[:3] = Jd @ w + Sd @ V + Gd @ ed
    out[3:6] = Sd.T @ w
    out[6:] = Gd.T @ w
    out[:6] += crf(v) @ h[:6]
    # dT/deta_k = V.(w x S_k) + |w|^2 tr N_k - w^T N_k w + w . sum_l ed_l (integral Phi_k x Phi_l)
    for k in range(m):
        Nk = N[k]
        dT = V @ np.cross(w, body.first[:, k]) + (w @ w) * np.trace(Nk) - w @ Nk @ w
        dT += w @ sum(ed[l] * axial(C[k, l]) for l in range(m))
        out[6 + k] -= dT
    out[6:] += body.stiffness @ e + body.damping @ ed
    if body.stiffening is not None:
        out[6:] += np.einsum("a,b,abkl,l->k", w, w, body.stiffening, e)
    return out


def _a0(model):
    return np.concatenate((np.zeros(3), -model.gravity))


def _dofs(model, i, ne_off):
    """Indices in v_full of body i's own coordinates z_i = [qd_i; eta_dot_i]."""
    fl, _, nm, ie = _flex(model)
    iv = int(model.idx_v[i])
    nvi = int(model.nv_j[i])
    j = np.arange(iv, iv + nvi)
    if nm[i]:
        j = np.concatenate((j, ne_off + ie[i] + np.arange(nm[i])))
    return j


def _S_hat(B):
    n, m = B.S.shape[1], B.m
    Sh = np.zeros((6 + m, n + m))
    Sh[:6, :n] = B.S
    Sh[6:, n:] = np.eye(m)
    return Sh


# ----------------------------------------------------------------------------- algorithms
def flexible_rnea(model, q, qd, qdd):
    """Inverse dynamics of a model with flexible bodies: tau_full (nv + n_modal) for the motion
    (q_full, qd_full, qdd_full); its modal entries are the forces to apply to the modes.  O(N),
    compiled (``partree.algorithms.flexible_kernels``)."""
    q, qd = _state(model, q, qd)
    qdd = _full_vector(model, qdd, "qdd")
    return flexible_inverse(model, q, qd, qdd)


def _flexible_rnea_reference(model, q, qd, qdd):
    """:func:`flexible_rnea` written with NumPy over the bodies (the reference of the compiled one)."""
    q, qd = _state(model, q, qd)
    _, ne, nm, ie = _flex(model)
    qdd = np.ascontiguousarray(qdd, dtype=float)
    if qdd.shape != (model.nv + ne,):
        raise PartreeInputError(f"qdd has shape {qdd.shape}; expected ({model.nv + ne},)")
    bodies = _outward(model, q, qd)
    nv = model.nv
    f = []
    acc = []
    for i, B in enumerate(bodies):
        p = int(model.parent[i])
        iv = int(model.idx_v[i])
        ap = _a0(model) if p < 0 else acc[p]
        a = B.T @ ap + B.S @ qdd[iv:iv + B.S.shape[1]] + B.c
        ahat = np.concatenate((a, qdd[nv + ie[i]:nv + ie[i] + B.m])) if B.m else a
        acc.append(ahat)
        f.append(B.M @ ahat + B.b)
    tau = np.zeros(nv + ne)
    for i in range(model.n - 1, -1, -1):
        B = bodies[i]
        tau[_dofs(model, i, nv)] = _S_hat(B).T @ f[i]
        p = int(model.parent[i])
        if p >= 0:
            f[p] += B.T.T @ f[i][:6]
    return tau


def flexible_bias(model, q, qd):
    """The bias forces C(q, qd) qd + g(q) + K eta + D eta_dot: inverse dynamics at zero acceleration."""
    _, ne, _, _ = _flex(model)
    return flexible_rnea(model, q, qd, np.zeros(model.nv + ne))


def flexible_crba(model, q):
    """The mass matrix (nv + n_modal)^2 (dense) of a model with flexible bodies."""
    q, _ = _state(model, q, None)
    _, ne, _, _ = _flex(model)
    bodies = _outward(model, q, np.zeros(model.nv + ne))
    nv = model.nv
    N = nv + ne
    M = np.zeros((N, N))
    IC = [B.M.copy() for B in bodies]
    for i in range(model.n - 1, -1, -1):
        p = int(model.parent[i])
        if p >= 0:
            T = bodies[i].T
            IC[p] += T.T @ IC[i][:6, :6] @ T
    for i in range(model.n):
        B = bodies[i]
        di = _dofs(model, i, nv)
        F = IC[i] @ _S_hat(B)
        M[np.ix_(di, di)] = _S_hat(B).T @ F
        j = i
        while model.parent[j] >= 0:
            F = bodies[j].T.T @ F[:6]
            j = int(model.parent[j])
            dj = _dofs(model, j, nv)
            blk = _S_hat(bodies[j]).T @ F
            M[np.ix_(dj, di)] = blk
            M[np.ix_(di, dj)] = blk.T
    return M


def flexible_aba(model, q, qd, tau):
    """Forward dynamics of a model with flexible bodies: qdd_full (nv + n_modal) for the joint
    forces and applied modal forces ``tau_full`` (zeros for the modes in free motion), with
    (6 + m) x (6 + m) articulated inertias; O(N), compiled
    (``partree.algorithms.flexible_kernels``)."""
    q, qd = _state(model, q, qd)
    tau = _full_vector(model, tau, "tau")
    return _compiled(model, q, qd, tau, np.zeros(model.n, dtype=np.bool_), np.zeros_like(tau))[0]


def flexible_hybrid_dynamics(model, q, qd, tau, qdd, active):
    """Hybrid dynamics of a model with flexible bodies (seed 002): the joints flagged ``active``
    follow the given accelerations and their forces come out; the other joints and every modal
    coordinate move under their given forces.  O(N), compiled
    (``partree.algorithms.flexible_kernels``).

    ``active``: a boolean mask of (n,) or joint names, as :func:`partree.hybrid_dynamics` takes
    it.  A flexible body's modes are passive whatever its joint's flag: an elastic coordinate is
    never driven by a prescribed motion here.  ``tau`` (nv + n_modal) is read at the passive
    coordinates, ``qdd`` (nv + n_modal) at the active joints' coordinates.  Returns (qdd_full,
    tau_full), each (nv + n_modal).

    The articulated-body recursion with (6 + m) x (6 + m) inertias: at each body only the passive
    columns of its coordinate map [S, 0; 0, 1] are eliminated, and the given accelerations of the
    active ones enter its velocity-product term, so the parent receives the articulated inertia
    and bias of the known motion.  Every joint passive is :func:`flexible_aba`."""
    mask, _, tau, qdd = _hybrid_inputs(model, tau, qdd, active)
    q, qd = _state(model, q, qd)
    return _compiled(model, q, qd, tau, np.ascontiguousarray(mask, dtype=np.bool_), qdd)


def _full_vector(model, x, what):
    _, ne, _, _ = _flex(model)
    x = np.ascontiguousarray(x, dtype=float)
    if x.shape != (model.nv + ne,):
        raise PartreeInputError(f"{what} has shape {x.shape}; expected ({model.nv + ne},)")
    return x


def _singular_articulated(i):
    return PartreeInputError(f"flexible dynamics: the articulated inertia of body {i} is singular along its "
                             f"passive coordinates")


def _compiled(model, q, qd, tau, active, qdd_given):
    bad, qdd, tau_out = flexible_articulated(model, q, qd, tau, active, qdd_given)
    if bad >= 0:
        raise _singular_articulated(bad)
    return qdd, tau_out


def _hybrid_inputs(model, tau, qdd, active):
    """(joint mask, coordinate mask, tau, qdd) of a hybrid call, checked; the entries that are
    not read set to zero."""
    from .hybrid_dynamics import active_mask

    mask = active_mask(model, active)
    _, ne, _, _ = _flex(model)
    nv = model.nv
    dof = np.zeros(nv + ne, dtype=bool)
    dof[:nv] = np.repeat(mask, model.nv_j)
    qdd = np.array(qdd, dtype=float)
    if qdd.shape != (nv + ne,):
        raise PartreeInputError(f"qdd has shape {qdd.shape}; expected ({nv + ne},)")
    tau = np.array(tau, dtype=float)
    if tau.shape != (nv + ne,):
        raise PartreeInputError(f"tau has shape {tau.shape}; expected ({nv + ne},)")
    # only the entries that are read must be finite
    tau[dof] = 0.0
    qdd[~dof] = 0.0
    for x, nm in ((tau, "tau"), (qdd, "qdd")):
        if not np.all(np.isfinite(x)):
            raise PartreeInputError(f"{nm} has non-finite entries where it is read")
    return mask, dof, tau, qdd


def _flexible_aba_reference(model, q, qd, tau):
    """:func:`flexible_aba` written with NumPy over the bodies (the reference of the compiled one)."""
    return _articulated(model, q, qd, tau, None, None)[0]


def _flexible_hybrid_dynamics_reference(model, q, qd, tau, qdd, active):
    """:func:`flexible_hybrid_dynamics` written with NumPy over the bodies (the reference of the
    compiled one)."""
    _, dof, tau, qdd = _hybrid_inputs(model, tau, qdd, active)
    return _articulated(model, q, qd, tau, dof, qdd)


def _articulated(model, q, qd, tau, dof_active, qdd_given):
    """The articulated-body passes; ``dof_active`` (nv + n_modal,) flags the coordinates whose
    acceleration ``qdd_given`` is known (None: none).  Returns (qdd_full, tau_full)."""
    q, qd = _state(model, q, qd)
    _, ne, _, ie = _flex(model)
    nv = model.nv
    tau = np.ascontiguousarray(tau, dtype=float)
    if tau.shape != (nv + ne,):
        raise PartreeInputError(f"tau has shape {tau.shape}; expected ({nv + ne},)")
    bodies = _outward(model, q, qd)
    n = model.n
    IA = [B.M.copy() for B in bodies]
    pA = [B.b.copy() for B in bodies]
    keep = [None] * n
    for i in range(n - 1, -1, -1):
        B = bodies[i]
        Sh = _S_hat(B)
        di = _dofs(model, i, nv)
        chat = np.zeros(6 + B.m)
        chat[:6] = B.c
        if dof_active is None:
            pas = np.ones(di.size, dtype=bool)
        else:
            pas = ~dof_active[di]
            chat += Sh[:, ~pas] @ qdd_given[di[~pas]]       # the known motion's part
        Sp = Sh[:, pas]
        U = IA[i] @ Sp
        D = Sp.T @ U
        try:
            Dinv = np.linalg.inv(D)
        except np.linalg.LinAlgError:
            raise _singular_articulated(i) from None
        u = tau[di[pas]] - Sp.T @ pA[i]
        keep[i] = (U, Dinv, u, Sh, pas, chat)
        p = int(model.parent[i])
        if p >= 0:
            Ia = IA[i] - U @ Dinv @ U.T
            pa = pA[i] + Ia @ chat + U @ Dinv @ u
            T = B.T
            IA[p] += T.T @ Ia[:6, :6] @ T
            pA[p] += T.T @ pa[:6]
    qdd = np.zeros(nv + ne) if qdd_given is None else qdd_given.copy()
    tau_out = tau.copy()
    acc = [None] * n
    for i in range(n):
        B = bodies[i]
        p = int(model.parent[i])
        ap = _a0(model) if p < 0 else acc[p]
        U, Dinv, u, Sh, pas, chat = keep[i]
        di = _dofs(model, i, nv)
        a_hat = chat.copy()
        a_hat[:6] += B.T @ ap
        z = Dinv @ (u - U.T @ a_hat)
        qdd[di[pas]] = z
        acc[i] = a_hat + Sh[:, pas] @ z
        if not pas.all():
            # the force of the known motion: the projection of the articulated body's wrench
            tau_out[di[~pas]] = Sh[:, ~pas].T @ (IA[i] @ acc[i] + pA[i])
    return qdd, tau_out


def flexible_energy(model, q, qd):
    """(kinetic, gravity potential, elastic) energy of a model with flexible bodies.  The
    gravity potential is zero with every body's mass at the base origin's height, as
    ``partree.energy``."""
    q, qd = _state(model, q, qd)
    fl, _, nm, ie = _flex(model)
    bodies = _outward(model, q, qd)
    eta = q[model.nq:]
    T = 0.0
    V = 0.0
    Ve = 0.0
    Rw = [None] * model.n
    pw = [None] * model.n
    g = model.gravity
    for i, B in enumerate(bodies):
        p = int(model.parent[i])
        if p < 0:
            Rw[i], pw[i] = B.E.T, B.r.copy()
        else:
            Rw[i], pw[i] = Rw[p] @ B.E.T, pw[p] + Rw[p] @ B.r
        T += 0.5 * B.nu @ B.M @ B.nu
        s = model.mass[i] * model.com[i]
        if nm[i]:
            body = fl.bodies[i]
            e = eta[ie[i]:ie[i] + nm[i]]
            s = s + body.first @ e
            Ve += 0.5 * e @ body.stiffness @ e
        V -= g @ (model.mass[i] * pw[i] + Rw[i] @ s)
    return float(T), float(V), float(Ve)


def flexible_state_size(model):
    """(n_q, n_v) of the full state: joint then modal coordinates."""
    _, ne, _, _ = _flex(model)
    return model.nq + ne, model.nv + ne
