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
acceleration, as in the rigid algorithms.

External loads (``f_ext``, :func:`flexible_loads`): wrenches ``[n; f]`` at the body origins in
body coordinates, as the rigid algorithms take them, and wrenches at the named nodes of flexible
bodies.  A wrench at a body's origin acts on its floating frame only (the origin does not move
with the modes); a load at a node moves with it: body-frame axes, moment about the node's
deformed point ``p = x + Phi eta``, and its generalized force is ``[n + p x f; f]`` on the body's
rigid rows and ``Psi^T J_l^T n + Phi^T f`` on its modes (the transpose of the node's velocity map,
``J_l`` the left Jacobian of the node rotation ``exp(Psi eta)``).  Every recursion subtracts these
forces from the bodies' bias forces, as the rigid ones subtract f_ext.

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


class FlexibleLoads:
    """External loads of a model with flexible bodies, checked and packed (:func:`flexible_loads`).

    Attributes
    ----------
    f_ext : float[n, 6] or float[0, 6]
        Wrenches [n; f] at the body origins, body coordinates (no rows: none).
    ld_body, ld_off : int64[k]
        Loads at nodes: the body of each and the offset of its node's data in ``ld_data``.
    ld_w : float[k, 6]
        Their wrenches [n; f]: body-frame axes, moment about the node's deformed point.
    ld_data : float[.]
        Per load: the node's point (3), Psi (3 x m), Phi (3 x m), row major.
    keys : list
        (body, node name) of every load at a node, in order.
    source : FlexibleBodies or None
        The flexible bodies of the model the loads were checked for.
    """

    __slots__ = ("n", "f_ext", "ld_body", "ld_off", "ld_w", "ld_data", "keys", "source")

    def __init__(self, n, f_ext, ld_body, ld_off, ld_w, ld_data, keys, source):
        self.source = source
        self.n = int(n)
        self.f_ext = f_ext
        self.ld_body = ld_body
        self.ld_off = ld_off
        self.ld_w = ld_w
        self.ld_data = ld_data
        self.keys = keys

    @property
    def empty(self):
        return self.f_ext.shape[0] == 0 and self.ld_body.shape[0] == 0

    @property
    def nbytes(self):
        """The bytes of the packed arrays."""
        return int(self.f_ext.nbytes + self.ld_body.nbytes + self.ld_off.nbytes + self.ld_w.nbytes
                   + self.ld_data.nbytes)

    def node_data(self, which):
        """(ld_off, ld_data) of the loads at nodes ``which`` (indices into ``ld_body``), packed
        afresh: each load's data runs from its offset to the next load's (they are packed in
        order, as :func:`flexible_loads` and this method pack them)."""
        which = np.asarray(which, dtype=np.int64)
        size = (np.append(self.ld_off[1:], self.ld_data.size) - self.ld_off)[which]
        off = (np.cumsum(size) - size).astype(np.int64)
        if not which.size:
            return off, np.zeros(1)
        return off, np.concatenate([self.ld_data[o:o + k] for o, k in zip(self.ld_off[which], size)])

    def of_bodies(self, bodies):
        """The loads on ``bodies`` (global numbers), numbered as their positions in ``bodies``:
        a distributed run's piece of them (its bodies in its own order)."""
        bodies = np.asarray(bodies, dtype=np.int64)
        pos = -np.ones(self.n, dtype=np.int64)
        pos[bodies] = np.arange(bodies.size)
        mine = np.flatnonzero(pos[self.ld_body] >= 0)
        F = np.ascontiguousarray(self.f_ext[bodies]) if self.f_ext.shape[0] else np.zeros((0, 6))
        off, data = self.node_data(mine)
        return FlexibleLoads(bodies.size, F, np.ascontiguousarray(pos[self.ld_body[mine]]), off,
                             np.ascontiguousarray(self.ld_w[mine]), data,
                             [(int(pos[self.keys[t][0]]), self.keys[t][1]) for t in mine], self.source)

    def on_bodies(self, index, model):
        """The same loads on ``model``, where body i is body ``index[i]`` (its flexible bodies
        the same :class:`~partree.flexible.FlexibleBody` objects)."""
        index = np.asarray(index, dtype=np.int64)
        n = model.n
        F = np.zeros((0, 6))
        if self.f_ext.shape[0]:
            F = np.zeros((n, 6))
            F[index] = self.f_ext
        return FlexibleLoads(n, F, np.ascontiguousarray(index[self.ld_body]), self.ld_off, self.ld_w,
                             self.ld_data, [(int(index[b]), name) for b, name in self.keys],
                             getattr(model, "flexible", None))


def _body_of(model, key, what):
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if not -model.n <= key < model.n:
            raise PartreeInputError(f"{what}: body {int(key)} is not a body of model {model.name!r} "
                                    f"(n = {model.n})")
        return int(key) % model.n
    if isinstance(key, str):
        if key in model.joint_names:
            return model.joint_names.index(key)
        raise PartreeInputError(f"{what}: model {model.name!r} has no joint {key!r} (a body is named by its "
                                f"joint's name or its index)")
    raise PartreeInputError(f"{what}: a body is named by its joint's name or its index, got "
                            f"{type(key).__name__}")


def _wrench(w, what):
    try:
        w = np.array(w, dtype=float)
    except (TypeError, ValueError):
        raise PartreeInputError(f"{what} is not an array of numbers") from None
    if w.shape != (6,):
        raise PartreeInputError(f"{what} has shape {w.shape}; a wrench [n; f] has shape (6,)")
    if not np.all(np.isfinite(w)):
        raise PartreeInputError(f"{what} is not finite")
    return w


def flexible_loads(model, f_ext):
    """The external loads ``f_ext`` of a model with flexible bodies, checked and packed for the
    flexible functions (which also take ``f_ext`` as it is and call this).

    ``f_ext`` is None; an (n, 6) array of wrenches [n; f] at the body origins, in body coordinates
    (as :func:`partree.aba` takes it); a :class:`FlexibleLoads`; or a dict whose keys are

    * a body, by its joint's name or its index: the wrench [n; f] at the body's origin, in body
      coordinates (on a flexible body it acts on the floating frame, not on the modes);
    * ``(body, node name)``, a node of that flexible body's :class:`~partree.flexible.FlexibleBody`:
      the wrench [n; f] acting at the node, which moves with the deformation.  Its axes are the
      body frame's; the moment is about the node's deformed point ``x + Phi eta``.  (A load
      that turns with the node, given in the node's own axes ``w_loc``, is
      ``[R n_loc; R f_loc]`` with ``R = exp(Psi eta)``.)

    and whose values are wrenches (6,); several loads on one node add up.
    """
    if isinstance(f_ext, FlexibleLoads):
        if f_ext.n != model.n or f_ext.source is not getattr(model, "flexible", None):
            raise PartreeInputError(f"f_ext: loads checked for another model ({f_ext.n} bodies) given to model "
                                    f"{model.name!r} ({model.n} bodies); check them for this one "
                                    f"(flexible_loads(model, ...))")
        return f_ext
    n = model.n
    F = np.zeros((0, 6))
    keys, ws = [], []
    if f_ext is None:
        pass
    elif isinstance(f_ext, dict):
        for key, w in f_ext.items():
            if isinstance(key, tuple):
                if len(key) != 2:
                    raise PartreeInputError(f"f_ext key {key!r}: a load at a node is keyed (body, node name)")
                b = _body_of(model, key[0], f"f_ext key {key!r}")
                keys.append((b, key[1]))
                ws.append(_wrench(w, f"f_ext[{key!r}]"))
            else:
                b = _body_of(model, key, f"f_ext key {key!r}")
                if F.shape[0] == 0:
                    F = np.zeros((n, 6))
                F[b] += _wrench(w, f"f_ext[{key!r}]")
    else:
        try:
            F = np.array(f_ext, dtype=float)
        except (TypeError, ValueError):
            raise PartreeInputError(f"f_ext must be an (n, 6) array of body wrenches or a dict, got "
                                    f"{type(f_ext).__name__}") from None
        if F.shape != (n, 6):
            raise PartreeInputError(f"f_ext has shape {F.shape}; expected ({n}, 6) body wrenches [n; f], or a dict "
                                    f"(loads at nodes: {{(body, node name): wrench}})")
        if not np.all(np.isfinite(F)):
            i = int(np.argwhere(~np.isfinite(F))[0][0])
            raise PartreeInputError(f"f_ext of body {i} (joint {model.joint_names[i]!r}) is not finite")
    fl = getattr(model, "flexible", None)
    data, off = [], []
    o = 0
    for b, name in keys:
        body = None if fl is None else fl.bodies.get(b)
        if body is None:
            raise PartreeInputError(f"f_ext key ({model.joint_names[b]!r}, {name!r}): body {b} is rigid; a load at a "
                                    f"node needs a flexible body (on a rigid body, give its wrench at the origin)")
        if name not in body.nodes:
            raise PartreeInputError(f"f_ext key ({model.joint_names[b]!r}, {name!r}): flexible body {b} "
                                    f"({body.name!r}) has no node {name!r} (nodes: {', '.join(map(repr, body.nodes)) or 'none'})")
        point, Phi, Psi = body.nodes[name]
        data.append(np.concatenate((point, Psi.ravel(), Phi.ravel())))
        off.append(o)
        o += 3 + 6 * body.m
    return FlexibleLoads(n, np.ascontiguousarray(F), np.array([b for b, _ in keys], dtype=np.int64),
                         np.array(off, dtype=np.int64), np.array(ws, dtype=float).reshape(len(ws), 6),
                         np.concatenate(data) if data else np.zeros(1), keys, fl)


def _loads(model, f_ext):
    """The packed loads of ``f_ext``, or None without any."""
    if f_ext is None:
        return None
    ld = flexible_loads(model, f_ext)
    return None if ld.empty else ld


def _load_forces(model, q, loads):
    """Per body, the generalized force (6 + m_i) of the external loads at q_full (NumPy; the
    reference of ``flexible_kernels.flexible_apply_loads``), or None without loads."""
    if loads is None:
        return None
    fl, _, nm, ie = _flex(model)
    eta = q[model.nq:]
    out = [np.zeros(6 + int(nm[i])) for i in range(model.n)]
    if loads.f_ext.shape[0]:
        for i in range(model.n):
            out[i][:6] += loads.f_ext[i]
    for (b, name), w in zip(loads.keys, loads.ld_w):
        point, Phi, Psi = fl.bodies[b].nodes[name]
        e = eta[ie[b]:ie[b] + nm[b]]
        p = point + Phi @ e
        Jr, _ = _right_jacobian(Psi @ e, np.zeros(3))
        n, f = w[:3], w[3:]
        out[b][:3] += n + np.cross(p, f)
        out[b][3:6] += f
        out[b][6:] += Psi.T @ (Jr @ n) + Phi.T @ f
    return out


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
def flexible_rnea(model, q, qd, qdd, f_ext=None):
    """Inverse dynamics of a model with flexible bodies: tau_full (nv + n_modal) for the motion
    (q_full, qd_full, qdd_full) under the external loads ``f_ext`` (:func:`flexible_loads`); its
    modal entries are the forces to apply to the modes.  O(N), compiled
    (``partree.algorithms.flexible_kernels``)."""
    q, qd = _state(model, q, qd)
    qdd = _full_vector(model, qdd, "qdd")
    return flexible_inverse(model, q, qd, qdd, _loads(model, f_ext))


def _flexible_rnea_reference(model, q, qd, qdd, f_ext=None):
    """:func:`flexible_rnea` written with NumPy over the bodies (the reference of the compiled one)."""
    q, qd = _state(model, q, qd)
    _, ne, nm, ie = _flex(model)
    qdd = np.ascontiguousarray(qdd, dtype=float)
    if qdd.shape != (model.nv + ne,):
        raise PartreeInputError(f"qdd has shape {qdd.shape}; expected ({model.nv + ne},)")
    bodies = _outward(model, q, qd)
    ext = _load_forces(model, q, _loads(model, f_ext))
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
        f.append(B.M @ ahat + B.b - (0.0 if ext is None else ext[i]))
    tau = np.zeros(nv + ne)
    for i in range(model.n - 1, -1, -1):
        B = bodies[i]
        tau[_dofs(model, i, nv)] = _S_hat(B).T @ f[i]
        p = int(model.parent[i])
        if p >= 0:
            f[p] += B.T.T @ f[i][:6]
    return tau


def flexible_bias(model, q, qd, f_ext=None):
    """The bias forces C(q, qd) qd + g(q) + K eta + D eta_dot - Q_ext, Q_ext the generalized
    force of the external loads ``f_ext`` (:func:`flexible_loads`): inverse dynamics at zero
    acceleration."""
    _, ne, _, _ = _flex(model)
    return flexible_rnea(model, q, qd, np.zeros(model.nv + ne), f_ext)


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


def flexible_aba(model, q, qd, tau, f_ext=None):
    """Forward dynamics of a model with flexible bodies: qdd_full (nv + n_modal) for the joint
    forces and applied modal forces ``tau_full`` (zeros for the modes in free motion) and the
    external loads ``f_ext`` (wrenches at body origins and at nodes, :func:`flexible_loads`), with
    (6 + m) x (6 + m) articulated inertias; O(N), compiled
    (``partree.algorithms.flexible_kernels``)."""
    q, qd = _state(model, q, qd)
    tau = _full_vector(model, tau, "tau")
    return _compiled(model, q, qd, tau, _NONE_ACTIVE, tau, _loads(model, f_ext))[0]


def flexible_hybrid_dynamics(model, q, qd, tau, qdd, active, f_ext=None):
    """Hybrid dynamics of a model with flexible bodies (seed 002): the joints flagged ``active``
    follow the given accelerations and their forces come out; the other joints and every modal
    coordinate move under their given forces.  O(N), compiled
    (``partree.algorithms.flexible_kernels``).

    ``active``: a boolean mask of (n,) or joint names, as :func:`partree.hybrid_dynamics` takes
    it.  A flexible body's modes are passive whatever its joint's flag: an elastic coordinate is
    never driven by a prescribed motion here.  ``tau`` (nv + n_modal) is read at the passive
    coordinates, ``qdd`` (nv + n_modal) at the active joints' coordinates.  Returns (qdd_full,
    tau_full), each (nv + n_modal).  ``f_ext``: external loads, as :func:`flexible_aba` takes them.

    The articulated-body recursion with (6 + m) x (6 + m) inertias: at each body only the passive
    columns of its coordinate map [S, 0; 0, 1] are eliminated, and the given accelerations of the
    active ones enter its velocity-product term, so the parent receives the articulated inertia
    and bias of the known motion.  Every joint passive is :func:`flexible_aba`."""
    mask, _, tau, qdd = _hybrid_inputs(model, tau, qdd, active)
    q, qd = _state(model, q, qd)
    return _compiled(model, q, qd, tau, np.ascontiguousarray(mask, dtype=np.bool_), qdd, _loads(model, f_ext))


def _full_vector(model, x, what):
    _, ne, _, _ = _flex(model)
    x = np.ascontiguousarray(x, dtype=float)
    if x.shape != (model.nv + ne,):
        raise PartreeInputError(f"{what} has shape {x.shape}; expected ({model.nv + ne},)")
    return x


def _singular_articulated(i):
    return PartreeInputError(f"flexible dynamics: the articulated inertia of body {i} is singular along its "
                             f"passive coordinates")


#: ``active`` of a call with no active joint (forward dynamics)
_NONE_ACTIVE = np.zeros(0, dtype=np.bool_)


def _compiled(model, q, qd, tau, active, qdd_given, loads=None):
    bad, qdd, tau_out = flexible_articulated(model, q, qd, tau, active, qdd_given, loads)
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


def _flexible_aba_reference(model, q, qd, tau, f_ext=None):
    """:func:`flexible_aba` written with NumPy over the bodies (the reference of the compiled one)."""
    return _articulated(model, q, qd, tau, None, None, f_ext)[0]


def _flexible_hybrid_dynamics_reference(model, q, qd, tau, qdd, active, f_ext=None):
    """:func:`flexible_hybrid_dynamics` written with NumPy over the bodies (the reference of the
    compiled one)."""
    _, dof, tau, qdd = _hybrid_inputs(model, tau, qdd, active)
    return _articulated(model, q, qd, tau, dof, qdd, f_ext)


def _articulated(model, q, qd, tau, dof_active, qdd_given, f_ext=None):
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
    ext = _load_forces(model, q, _loads(model, f_ext))
    if ext is not None:
        pA = [b - e for b, e in zip(pA, ext)]
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
