"""What the constraint-force methods share: the per-model topology (chains and their heights) and
workspace kept with the model, the setup kernel (kinematics, bias forces, constraint bases, drive
forces), the inertia-form step of one-body chains that both odd-even forms take, the Newton-Euler
wrenches, and the error messages."""
from __future__ import annotations

import weakref

import numpy as np
from numba import njit

from ... import checks
from ...errors import PartreeInputError
from ...joints import FIXED, PRISMATIC, REVOLUTE, UNIVERSAL, joint_kinematics, joint_kinematics_at
from ..aba import articulated_project
from ..linalg import spd_inverse
from ..primitives import (body_force, congruence_add, cross_force, cross_motion, inertia_from_compact, inertia_times,
                          xform_force_T_add, xform_motion)
from .bases import constraint_layout, constraint_rows

#: error kinds returned by the kernels next to the offending body
ERR_NONE, ERR_UNIVERSAL, ERR_MASSLESS, ERR_SINGULAR_INERTIA, ERR_SINGULAR_IA, ERR_SINGULAR_A, ERR_GRAM = range(7)


_CACHE = weakref.WeakKeyDictionary()


@njit(cache=True)
def _chain_heights(parent, cptr, cidx, chain_of_tip):
    """Height of every chain in the tree of chains (chains hanging from nothing: 0)."""
    nc = cptr.shape[0] - 1
    hgt = np.zeros(nc, dtype=np.int64)
    for ch in range(nc - 1, -1, -1):      # children chains start at larger body numbers
        top = cidx[cptr[ch]]
        pb = parent[top]
        if pb >= 0:
            pc = chain_of_tip[pb]
            if hgt[ch] + 1 > hgt[pc]:
                hgt[pc] = hgt[ch] + 1
    return hgt


def _first_singular_inertia(model):
    """(body, error kind) of the first body whose spatial inertia is singular, or None."""
    bad = np.flatnonzero(~(model.mass > 0))
    first = (int(bad[0]), ERR_MASSLESS) if bad.size else None
    Ic = model.I_com
    a, b, c = Ic[:, 0, 0], Ic[:, 0, 1], Ic[:, 0, 2]
    d, e, f = Ic[:, 1, 1], Ic[:, 1, 2], Ic[:, 2, 2]
    det = a * (d * f - e * e) + b * (c * e - b * f) + c * (b * e - c * d)
    tr = (a + d + f) / 3.0
    bad = np.flatnonzero(~((det > 1e-13 * tr ** 3) & (tr > 0)) & (model.mass > 0))
    if bad.size and (first is None or bad[0] < first[0]):
        first = (int(bad[0]), ERR_SINGULAR_INERTIA)
    return first


class _Topology:
    def __init__(self, model):
        n = model.n
        self.n = n
        self.parent_ref = model.parent
        self.cptr, self.cidx = model.chains()
        nc = self.cptr.size - 1
        nchild = model.num_children()
        self.tip_node = nchild >= 2
        tips = self.cidx[self.cptr[1:] - 1]
        chain_of_tip = -np.ones(n, dtype=np.int64)
        chain_of_tip[tips] = np.arange(nc)
        hgt = _chain_heights(model.parent, self.cptr, self.cidx, chain_of_tip)
        self.corder = np.argsort(hgt, kind="stable").astype(np.int64)
        self.gptr = np.zeros(int(hgt.max()) + 2, dtype=np.int64)
        np.cumsum(np.bincount(hgt), out=self.gptr[1:])
        lengths = np.diff(self.cptr)
        one = np.zeros(n, dtype=bool)
        one[self.cidx[self.cptr[:-1][lengths == 1]]] = True
        self.need_IA = self.tip_node | one
        self.need_IA_fs = self.tip_node.copy()
        self.ns_j, self.idx_s = constraint_layout(model.nv_j)
        self.ns = int(self.ns_j.sum())
        self.max_chain = int(lengths.max())
        self.bad_inertia = _first_singular_inertia(model)


class _Workspace:
    def __init__(self, model, topo):
        n, nv = model.n, model.nv
        self.E = np.empty((n, 3, 3))
        self.r = np.empty((n, 3))
        self.v = np.empty((n, 6))
        self.c = np.empty((n, 6))
        self.p = np.empty((n, 6))
        self.IA = np.empty((n, 6, 6))
        self.S = np.zeros((nv, 6))
        self.FT = np.empty(nv)
        self.A = np.empty((n, 6, 6))
        self.Cup = np.empty((n, 6, 6))
        self.Y2 = np.empty((n, 6, 6))
        self.rr = np.empty((n, 6))
        self.a = np.empty((n, 6))
        self.U = np.empty((nv, 6))
        self.Dinv = np.empty((nv, 6))
        self.u = np.empty(nv)
        self.err = np.zeros(1, dtype=np.int64)
        ns = topo.ns
        self.Wt = np.empty((ns, 6))
        self.rows_ready = False     # constraint rows of the q-independent joints computed
        self._scat = None

    def scattering(self):
        """The scattering form's segment slots: Km, Tm, Pm (sharing the compliance form's A, Cup,
        Y2), Rm, cm (sharing rr), dm and fin; the extra arrays are allocated on first use."""
        if self._scat is None:
            n = self.A.shape[0]
            self._scat = (self.A, self.Cup, self.Y2, np.empty((n, 6, 6)), self.rr, np.empty((n, 6)),
                          np.empty((n, 6)))
        return self._scat


def _model_state(model):
    st = _CACHE.get(model)
    if st is None or st[0].parent_ref is not model.parent or st[0].n != model.n:
        topo = _Topology(model)
        st = [topo, None]
        _CACHE[model] = st
    return st


def topology(model):
    return _model_state(model)[0]


def workspace(model):
    st = _model_state(model)
    if st[1] is None:
        st[1] = _Workspace(model, st[0])
    return st[0], st[1]


def raise_error(model, j, kind, method):
    j = int(j)
    who = f"body {j} ({model.body_names[j]}, joint {model.joint_names[j]!r})"
    if kind == ERR_MASSLESS and method == "odd-even":
        msg = (f"{who} has mass {model.mass[j]!r}: its joint-space inertia S^T I S is singular, which the "
               f"scattering form of 'odd-even' needs for every body of a chain (it builds one segment per "
               f"body); give it a mass or weld it to its parent (a fixed joint), or use method='leaf-first'")
    elif kind == ERR_SINGULAR_IA and method == "odd-even":
        msg = (f"{who}: the joint-space inertia S^T I S of the body (or of its articulated subtree, for a node "
               f"body) along its joint is singular; 'odd-even' needs it positive definite for every body of a "
               f"chain; use method='leaf-first'")
    elif kind == ERR_MASSLESS:
        msg = (f"{who} has mass {model.mass[j]!r}: its spatial inertia is singular, so I^-1 (the "
               f"body's compliance, which the constraint force algorithm '{method}' needs) is undefined; "
               f"give it a mass or weld it to its parent (a fixed joint), or use method='leaf-first'")
    elif kind == ERR_SINGULAR_INERTIA:
        msg = (f"{who} has a singular rotational inertia (I_com = {model.I_com[j].tolist()}): its spatial "
               f"inertia cannot be inverted, so the constraint force algorithm '{method}' is undefined "
               f"for it; use method='leaf-first'")
    elif kind == ERR_SINGULAR_IA:
        msg = (f"{who}: the articulated inertia of its subtree is singular (massless subtree?); "
               f"forward dynamics is undefined")
    elif kind == ERR_SINGULAR_A and method == "odd-even":
        msg = (f"{who}: the scattering composition at this joint met a singular 1 + K Phi (not possible for "
               f"finite positive inertias: non-finite input?); use method='leaf-first'")
    elif kind == ERR_SINGULAR_A:
        msg = (f"{who}: the reduced constraint-force system met a non-positive pivot when eliminating this "
               f"joint: it is numerically singular.  Either bodies are degenerate (near-massless), or the "
               f"constraint system is too ill-conditioned for the compliance form (e.g. a very long planar "
               f"chain loaded out of its plane, whose condition number grows like a power of its length); "
               f"method='odd-even' (scattering form) and method='leaf-first' (inertia form) do not have this "
               f"problem")
    elif kind == ERR_UNIVERSAL:
        msg = f"{who}: universal joint with parallel axes (degenerate motion subspace)"
    elif kind == ERR_GRAM:
        msg = f"{who}: the motion subspace S has dependent columns"
    else:
        msg = f"{who}: CFA failed (code {kind})"
    raise PartreeInputError(msg)


def base_acceleration(model):
    """The base acceleration a_0 = [0; -g] (fictitious, for gravity)."""
    a0 = np.empty(6)
    a0[:3] = 0.0
    a0[3:] = model.gravity
    np.negative(a0[3:], out=a0[3:])
    return a0


def setup(model, ws, topo, q, qd, tau, F_ext, has_f, need_IA):
    ws.err[0] = 0
    bad = setup_kernel(*checks.model_args(model), topo.idx_s, q, qd, tau, F_ext, has_f, need_IA, ws.rows_ready,
                       ws.E, ws.r, ws.v, ws.c, ws.p, ws.IA, ws.S, ws.Wt, ws.FT, ws.err)
    if bad >= 0:
        ws.rows_ready = False
        raise_error(model, bad, int(ws.err[0]), "setup")
    ws.rows_ready = True
    return ws.Wt


def trim_levels(levels):
    lv = levels.tolist()
    while lv and lv[-1] == 0:
        lv.pop()
    return lv


def check_invertible(model, method):
    """Raise unless every body's spatial inertia can be inverted (odd-even and general need
    Phi = I^-1 of every body; the check is done once per model)."""
    bad = topology(model).bad_inertia
    if bad is not None:
        raise_error(model, bad[0], bad[1], method)


@njit(cache=True)
def setup_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, idx_s,
                 q, qd, tau, f_ext, has_fext, need_IA, rows_ready, E, r, v, c, p, IA, S, Wt, FT, err):
    """Velocities v, velocity products c, bias forces p = v x* I v - f_ext, the rigid inertia
    IA = I of the bodies flagged in need_IA, constraint rows Wt and drive forces
    F_T = (S^T S)^-1 tau.  With ``rows_ready`` the rows of all but the universal joints (whose
    basis depends on q) are kept from the previous call.  Returns -1, or the offending body
    (err[0] says why)."""
    n = parent.shape[0]
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    G = np.empty((6, 6))
    Gi = np.empty((6, 6))
    cJ = np.empty(6)
    vJ = np.empty(6)
    h = np.empty(6)
    tmp = np.empty(6)
    u1 = np.empty(3)
    u2 = np.empty(3)
    for i in range(n):
        iv = idx_v[i]
        if jtype[i] == REVOLUTE:    # the joint dispatch (see partree.joints): 1-DOF types inlined
            nv = joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == PRISMATIC:
            nv = joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        elif jtype[i] == FIXED:
            nv = joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i],
                                  E[i], r[i], S[iv:], cJ, R, R2)
        else:
            nv = joint_kinematics_at(i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2)
        for k in range(6):
            vJ[k] = 0.0
        for d in range(nv):
            for k in range(6):
                vJ[k] += S[iv + d, k] * qd[iv + d]
        pi = parent[i]
        if pi < 0:
            for k in range(6):
                v[i, k] = vJ[k]
                c[i, k] = cJ[k]
        else:
            xform_motion(E[i], r[i], v[pi], tmp)
            for k in range(6):
                v[i, k] = tmp[k] + vJ[k]
            cross_motion(v[i], vJ, tmp)
            for k in range(6):
                c[i, k] = cJ[k] + tmp[k]
        inertia_times(mass[i], com[i], I_com[i], v[i], h)
        cross_force(v[i], h, p[i])
        if has_fext:
            for k in range(6):
                p[i, k] -= f_ext[i, k]
        if need_IA[i]:
            inertia_from_compact(mass[i], com[i], I_com[i], IA[i])
        if not rows_ready or jtype[i] == UNIVERSAL:
            if not constraint_rows(jtype[i], S, iv, Wt, idx_s[i], u1, u2):
                err[0] = ERR_UNIVERSAL
                return i
        # drive forces: F_T = (S^T S)^-1 tau  (= tau for an orthonormal S)
        if nv == 1:
            g = S[iv, 0] ** 2 + S[iv, 1] ** 2 + S[iv, 2] ** 2 + S[iv, 3] ** 2 + S[iv, 4] ** 2 + S[iv, 5] ** 2
            FT[iv] = tau[iv] / g
        elif nv > 1:
            orth = True
            for d in range(nv):
                for e in range(nv):
                    s = 0.0
                    for k in range(6):
                        s += S[iv + d, k] * S[iv + e, k]
                    G[d, e] = s
                    if abs(s - (1.0 if d == e else 0.0)) > 1e-14:
                        orth = False
            if orth:
                for d in range(nv):
                    FT[iv + d] = tau[iv + d]
            else:
                if not spd_inverse(G, nv, Gi):
                    err[0] = ERR_GRAM
                    return i
                for d in range(nv):
                    s = 0.0
                    for e in range(nv):
                        s += Gi[d, e] * tau[iv + e]
                    FT[iv + d] = s
    return -1


@njit(cache=True, inline="always")
def _aba_backward(j, pj, iv, nv, E, r, c, p, IA, S, FT, U, Dinv, u, Ia, pa, T, D, tmp):
    """Inertia form of collapsing the one-body chain j onto its parent pj (ABA's step):
    U = IA S, D = S^T IA S, u = tau - S^T pA, Ia = IA - U D^-1 U^T, pa = pA + Ia c + U D^-1 u.
    (tau is recovered as S^T S F_T.)  Returns False when D is singular."""
    for d in range(nv):
        for k in range(6):
            s = 0.0
            for l in range(6):
                s += IA[j, k, l] * S[iv + d, l]
            U[iv + d, k] = s
    for d in range(nv):
        # tau_d = sum_e (S_d . S_e) F_T,e
        t = 0.0
        for e in range(nv):
            g = 0.0
            for k in range(6):
                g += S[iv + d, k] * S[iv + e, k]
            t += g * FT[iv + e]
        for k in range(6):
            t -= S[iv + d, k] * p[j, k]
        u[iv + d] = t
        for e in range(nv):
            s = 0.0
            for k in range(6):
                s += S[iv + d, k] * U[iv + e, k]
            D[d, e] = s
    if nv == 1:
        if not D[0, 0] > 0.0:
            return False
        Dinv[iv, 0] = 1.0 / D[0, 0]
    elif nv > 1:
        if not spd_inverse(D, nv, Ia):
            return False
        for d in range(nv):
            for e in range(nv):
                Dinv[iv + d, e] = Ia[d, e]
    if pj < 0:
        return True
    articulated_project(IA[j], p[j], c[j], U, Dinv, u, iv, nv, Ia, pa, tmp)
    congruence_add(E[j], r[j], Ia, IA[pj], T)
    xform_force_T_add(E[j], r[j], pa, p[pj])
    return True


@njit(cache=True, inline="always")
def _woodbury_forward(j, a_parent, idx_v, idx_s, ms, E, r, c, p, IA, S, Wt, U, Dinv, u, FS, F, a, qdd, tmp, g):
    """Forward step of a one-body chain in inertia form: qdd = D^-1 (u - U^T a), a += S qdd,
    F = IA a + pA, F_S = W^T F."""
    iv = idx_v[j]
    mj = ms[j]
    nv = 6 - mj
    isj = idx_s[j]
    xform_motion(E[j], r[j], a_parent, tmp)
    for kk in range(6):
        a[j, kk] = tmp[kk] + c[j, kk]
    for d in range(nv):
        t = u[iv + d]
        for kk in range(6):
            t -= U[iv + d, kk] * a[j, kk]
        g[d] = t
    for d in range(nv):
        t = 0.0
        for e2 in range(nv):
            t += Dinv[iv + d, e2] * g[e2]
        qdd[iv + d] = t
    for d in range(nv):
        for kk in range(6):
            a[j, kk] += S[iv + d, kk] * qdd[iv + d]
    for kk in range(6):
        t = p[j, kk]
        for ll in range(6):
            t += IA[j, kk, ll] * a[j, ll]
        F[j, kk] = t
    for d in range(mj):
        FS[isj + d] = (Wt[isj + d, 0] * F[j, 0] + Wt[isj + d, 1] * F[j, 1] + Wt[isj + d, 2] * F[j, 2]
                       + Wt[isj + d, 3] * F[j, 3] + Wt[isj + d, 4] * F[j, 4] + Wt[isj + d, 5] * F[j, 5])


@njit(cache=True)
def woodbury_backward_group(g0, g1, corder, cptr, cidx, parent, idx_v, ms, E, r, c, p, IA, S, FT, U, Dinv, u,
                             err):
    """Backward step of every one-body chain of the group, in inertia form (ABA's step)."""
    Ia = np.empty((6, 6))
    T = np.empty((6, 6))
    D = np.empty((6, 6))
    pa = np.empty(6)
    tmp = np.empty(6)
    for gi in range(g0, g1):
        ch = corder[gi]
        b0 = cptr[ch]
        if cptr[ch + 1] - b0 != 1:
            continue
        j = cidx[b0]
        if not _aba_backward(j, parent[j], idx_v[j], 6 - ms[j], E, r, c, p, IA, S, FT, U, Dinv, u, Ia, pa, T, D,
                             tmp):
            err[0] = ERR_SINGULAR_IA
            return j
    return -1


@njit(cache=True)
def woodbury_forward_group(g0, g1, corder, cptr, cidx, parent, a0, idx_v, idx_s, ms, E, r, c, p, IA, S, Wt,
                            U, Dinv, u, FS, F, a, qdd):
    """Forward step of every one-body chain of the group, in inertia form."""
    tmp = np.empty(6)
    g = np.empty(6)
    for gi in range(g0, g1):
        ch = corder[gi]
        b0 = cptr[ch]
        if cptr[ch + 1] - b0 != 1:
            continue
        j = cidx[b0]
        pj = parent[j]
        _woodbury_forward(j, a0 if pj < 0 else a[pj], idx_v, idx_s, ms, E, r, c, p, IA, S, Wt, U, Dinv, u,
                          FS, F, a, qdd, tmp, g)


@njit(cache=True)
def newton_euler_wrenches(parent, idx_v, idx_s, ms, mass, com, I_com, a0, E, r, v, c, S, Wt, qdd, f_ext, has_fext,
                          a, F, FS):
    """F_j = I_j a_j + v_j x* I_j v_j - f_ext,j + sum_c X_c^T F_c with a_j = X_j a_l + S_j qdd_j + c_j
    (the inward pass of RNEA), then F_S,j = W_j^T F_j.  Uses the kinematics of ``setup_kernel``."""
    n = parent.shape[0]
    h = np.empty(6)
    tmp = np.empty(6)
    for j in range(n):
        pj = parent[j]
        if pj < 0:
            xform_motion(E[j], r[j], a0, tmp)
        else:
            xform_motion(E[j], r[j], a[pj], tmp)
        iv = idx_v[j]
        nv = 6 - ms[j]
        for k in range(6):
            t = tmp[k] + c[j, k]
            for d in range(nv):
                t += S[iv + d, k] * qdd[iv + d]
            a[j, k] = t
        body_force(mass[j], com[j], I_com[j], v[j], a[j], F[j], h, tmp)
        if has_fext:
            for k in range(6):
                F[j, k] -= f_ext[j, k]
    for j in range(n - 1, -1, -1):
        pj = parent[j]
        if pj >= 0:
            xform_force_T_add(E[j], r[j], F[j], F[pj])
        is_ = idx_s[j]
        for d in range(ms[j]):
            FS[is_ + d] = (Wt[is_ + d, 0] * F[j, 0] + Wt[is_ + d, 1] * F[j, 1] + Wt[is_ + d, 2] * F[j, 2]
                           + Wt[is_ + d, 3] * F[j, 3] + Wt[is_ + d, 4] * F[j, 4] + Wt[is_ + d, 5] * F[j, 5])


def newton_euler(model, res, F_ext, has_f):
    """Replace res.joint_wrench / constraint_force by the Newton-Euler inward pass from res.qdd
    (the workspace still holds this call's kinematics)."""
    topo, ws = workspace(model)
    newton_euler_wrenches(model.parent, model.idx_v, topo.idx_s, topo.ns_j, model.mass, model.com, model.I_com,
                          base_acceleration(model), ws.E, ws.r, ws.v, ws.c, ws.S, ws.Wt, res.qdd, F_ext, has_f, ws.a,
                          res.joint_wrench, res.constraint_force)


def constraint_bases(model, q):
    """(Wt, idx_s): the constraint rows W_j^T of every joint at configuration q, stacked ((ns, 6);
    joint j's rows are Wt[idx_s[j]:idx_s[j] + 6 - nv_j]), as used by ``cfa``."""
    q, _ = checks.state(model, q)
    topo, ws = workspace(model)
    zero = np.zeros(model.nv)
    Wt = setup(model, ws, topo, q, zero, zero, *checks.external_forces(model, None),
                np.zeros(model.n, dtype=bool))
    return Wt.copy(), topo.idx_s.copy()
