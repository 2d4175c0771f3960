"""A part of the parallel engine holding flexible bodies (``partree.flexible``).

:class:`FlexiblePartKernel` exposes the steps of :class:`partree.parallel.part.PartKernel`
(``velocity``, ``reduce``, ``solve``) with the same boundary relation, so the root, the messages
and the backends serve it unchanged:

* every boundary is 6-dimensional: a child part hangs from one node of its handle body.  The
  handle's frame is the *deformed node frame* F in which the child part's root joint placement
  (E_tree, r_tree) applies: F moves with the node (translated by ``Phi eta``, rotated by
  ``exp(Psi eta)``, both in the handle body's coordinates), so that the child's joint frame
  ``X_tree F`` is the one the serial recursion places at the node.  TE, Tr, vrel report F; the
  child part's wrench g_k (F coordinates) reaches the handle body through the node map (its six
  rigid rows and its modal rows Y^T), and the handle's acceleration a_h is F's (the handle body's
  rigid acceleration, its modes' through Y and the node's velocity product).
* a part's own coordinates are its joints' (in the part's order) followed by its flexible bodies'
  modal coordinates (in the part's order): ``qsel``, ``vsel`` index the full vectors
  ``[q; eta]``, ``[qd; eta_dot]``, the modal entries after ``model.nq`` / ``model.nv``.

The part runs the compiled serial recursion (``partree.algorithms.flexible_kernels``: the three
passes) on an *augmented* copy of its bodies:

* body 0 is a massless carrier R with a free joint at the identity: its velocity is the
  part's incoming velocity v_in (its joint rates), and, flagged active, its acceleration the
  incoming a_in (its given joint accelerations; the gravity of the kernels is set to zero, a_in
  carries it).  After the backward pass R's articulated inertia and bias are the root relation's
  M and m0 (frame 0 is R's frame);
* bodies 1..m are the part's, with the part's root hanging from R (its node, if any, belongs to
  the parent part: F takes it);
* every handle h_k gets massless fixed-joint children: for a flexible handle, V_k at the node
  (placement (1, r_c), r_c the child parts' r_tree) and under it F_k (placement (1, -r_c)), so that
  F_k = (exp(Psi eta)^T, r_c + Phi eta - exp(Psi eta) r_c) relative to h_k, the frame in which
  (E_tree, r_tree) of the child part's root applies; for a rigid handle, F_k with the identity
  placement.

The sensitivities are propagated along the root-first paths R -> ... -> h_k -> F_k only: a unit
wrench at F_k is carried inward through each path body's elimination of its (nv_joint + m_modes)
passive coordinates (6 columns, ``sensitivity_kernel``), giving Kt_k at R and, per path body, the
change of its bias and of its u = tau - S_hat^T pA.  Lam_jk is the sum over the bodies paths j
and k share of -du_j^T D^-1 du_k (the unit wrenches' generalized forces through the elimination:
-J_j M^-1 J_k^T), beta_j a walk outward along path j.  ``solve`` adds the known g's changes to u
and pA along the paths and runs the serial pass 3 over the part.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import checks
from ..algorithms.cfa.bases import project_wrench
from ..algorithms.flexible_kernels import (B_I, B_IE, B_KIND, B_L, B_NM, B_NODE, B_P, B_Y, B_Z, BODY_COLUMNS,
                                           FIXED_JOINT, FIXED_MODES, MATH, flexible_apply_loads,
                                           flexible_backward_pass, flexible_forward_pass1, flexible_forward_pass2,
                                           flexible_pack, flexible_rnea_inward, flexible_rnea_outward,
                                           outward_step, rigid_block, set_offsets, tri, u_row,
                                           workspace_shapes)
from ..algorithms.flexible_dynamics import FlexibleLoads, flexible_loads
from ..algorithms.packed import raw_view, unowned
from ..algorithms.primitives import force_cols_T_add, xform_motion
from ..errors import PartreeInputError
from ..joints import FIXED, FREE
from .part import Workspace, _paths, fast_index, index_ranges, local_parents


# ----------------------------------------------------------------------------- kernels
#: the size below which a unit wrench's sensitivity column is zero (``sensitivity_kernel``):
#: far below any sum it enters (relative 1e-150 of the unit wrench), far above the subnormals
SENSITIVITY_FLOOR = 1e-150


@njit(cache=True, inline="always", fastmath=MATH)
def _sizes(i, n, nv, idx_v, body, active):
    m = body[i, B_NM]
    iv = idx_v[i]
    nvi = idx_v[i + 1] - iv if i + 1 < n else nv - iv
    nj = 0 if active[i] else nvi
    return m, iv, nvi, nj, nj + m


@njit(cache=True, fastmath=MATH)
def compose_transforms(parent, E, r, TE, Tr):
    """T_i = X_up,i T_parent (frame 0 -> body i) of every body, T_0 = X_up,0."""
    n = parent.shape[0]
    for i in range(n):
        p = parent[i]
        if p < 0:
            TE[i] = E[i]
            Tr[i] = r[i]
            continue
        for a in range(3):
            s = Tr[p, a]
            for b in range(3):
                s += TE[p, b, a] * r[i, b]
            Tr[i, a] = s
            for b in range(3):
                TE[i, a, b] = E[i, a, 0] * TE[p, 0, b] + E[i, a, 1] * TE[p, 1, b] + E[i, a, 2] * TE[p, 2, b]


@njit(cache=True, inline="always", fastmath=MATH)
def _walk_columns(t, i, iv, m, nj, nv, body, S, U, L, E, r, dP, du, dz, Z, zc, C6, F6):
    """The sensitivity walk's step at path position t (body i, m modes, nj passive joint
    velocities; the sizes are arguments so that :func:`sensitivity_kernel` can give them as
    constants): the six columns of dP[t] to du[t], dz[t] and the force they pass on, F6."""
    npas = nj + m
    # the six columns at once (a dead column's entries are zeros, and stay zeros):
    # du = -S_hat^T dP, dz = D^-1 du (forward, then backward substitution with D's factors, as
    # ``ldl_solve``), and the force the columns pass on, X^T (dP + U dz) (U's rows: the passive
    # joints', then the body's modes')
    oc = 6 * (nv + body[i, B_IE])
    ol = body[i, B_L]
    for b in range(nj):
        for cc in range(6):
            s = 0.0
            for q in range(6):
                s += S[iv + b, q] * dP[t, q, cc]
            du[t, b, cc] = -s
    for l in range(m):
        for cc in range(6):
            du[t, nj + l, cc] = -dP[t, 6 + l, cc]
    for b in range(npas):
        rb = ol + tri(b)
        for cc in range(6):
            zc[cc] = du[t, b, cc]
        for j in range(b):
            f0 = L[rb + j]
            for cc in range(6):
                zc[cc] -= f0 * Z[j, cc]
        for cc in range(6):
            Z[b, cc] = zc[cc]
    for b in range(npas - 1, -1, -1):
        f0 = L[ol + tri(b) + b]
        for cc in range(6):
            zc[cc] = Z[b, cc] * f0
        for j in range(b + 1, npas):
            f0 = L[ol + tri(j) + b]
            for cc in range(6):
                zc[cc] -= f0 * Z[j, cc]
        for cc in range(6):
            Z[b, cc] = zc[cc]
            dz[t, b, cc] = zc[cc]
    for q in range(6):
        for cc in range(6):
            zc[cc] = dP[t, q, cc]
        for b in range(npas):
            f0 = U[u_row(b, iv, nj, oc) + q]
            for cc in range(6):
                zc[cc] += f0 * Z[b, cc]
        for cc in range(6):
            C6[q, cc] = zc[cc]
    for q in range(6):
        for cc in range(6):
            F6[q, cc] = 0.0
    force_cols_T_add(E[i], r[i], C6, F6, 6)


@njit(cache=True, fastmath=MATH)
def sensitivity_kernel(parent, idx_v, nv, body, active, qdd_in, E, r, c, S, IA, pA, Y, U, u, L, path_ptr, path_idx,
                       cp, dP, du, dz, Kt, Lam, beta, live):
    """After ``flexible_backward_pass`` on the augmented part (body 0 the carrier R): per handle k
    the inward walk of a unit wrench at F_k (the last body of path k) along its path, each path
    body's bias change dP (d x 6), u change du (npas x 6) and D^-1 du (dz) by path position, and
    Kt_k at R; then the handle relations: Lam_jk (the acceleration of F_j per unit wrench at F_k,
    a_in = 0) from the shared bodies' du and dz, and beta_j (the acceleration of F_j at a_in = 0,
    g = 0), walking path j outward.

    Along a long path a unit wrench's effect decays geometrically: a column whose largest
    entry falls below SENSITIVITY_FLOOR is set to zero from there inward (it would reach the
    subnormal range, where each operation costs a hundred times a normal one, and it no longer
    changes any sum it enters).  Once all six columns of path k are zero the walk stops there:
    ``live[k]`` is the first path position whose dP, du and dz hold values (those before it are
    zero and are not written; the sums below and :func:`apply_handle_wrenches` skip them)."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, body, active = unowned(parent), unowned(idx_v), unowned(body), unowned(active)
    qdd_in, E, r, c, S, IA = unowned(qdd_in), unowned(E), unowned(r), unowned(c), unowned(S), unowned(IA)
    pA, Y, U, u, L, path_ptr = unowned(pA), unowned(Y), unowned(U), unowned(u), unowned(L), unowned(path_ptr)
    path_idx, cp, dP, du, dz, Kt = unowned(path_idx), unowned(cp), unowned(dP), unowned(du), unowned(dz), unowned(Kt)
    Lam, beta, live = unowned(Lam), unowned(beta), unowned(live)
    n = parent.shape[0]
    H = path_ptr.shape[0] - 1
    nz = dP.shape[1]
    # the scratch, as views of one array that count no references (they are passed to inlined
    # steps, where views that count them cost atomic operations); ``own`` holds the memory and is
    # used again at the end, so that it lives as long as the views
    own = np.empty(96 + 8 * nz)
    col = raw_view(own, 0, (6,))
    zc = raw_view(own, 6, (6,))
    ah = raw_view(own, 12, (6,))
    C6 = raw_view(own, 24, (6, 6))
    F6 = raw_view(own, 60, (6, 6))
    z = raw_view(own, 96, (nz,))
    ed = raw_view(own, 96 + nz, (nz,))
    Z = raw_view(own, 96 + 2 * nz, (nz, 6))
    dead = np.zeros(6, dtype=np.bool_)
    for k in range(H):
        p0 = path_ptr[k]
        p1 = path_ptr[k + 1]
        # (each path position's dP is written once, by the body after it on the path)
        for a in range(6):
            for b in range(6):
                dP[p1 - 1, a, b] = 1.0 if a == b else 0.0
            dead[a] = False
        live[k] = p0
        for t in range(p1 - 1, p0 - 1, -1):
            if dead[0] and dead[1] and dead[2] and dead[3] and dead[4] and dead[5]:
                live[k] = t + 1
                for q in range(6):
                    for cc in range(6):
                        Kt[k, q, cc] = 0.0
                break
            i = path_idx[t]
            m, iv, nvi, nj, npas = _sizes(i, n, nv, idx_v, body, active)
            if m == FIXED_MODES and nj == FIXED_JOINT:
                _walk_columns(t, i, iv, FIXED_MODES, FIXED_JOINT, nv, body, S, U, L, E, r, dP, du, dz, Z, zc, C6,
                              F6)
            else:
                _walk_columns(t, i, iv, m, nj, nv, body, S, U, L, E, r, dP, du, dz, Z, zc, C6, F6)
            if t == p0:
                for q in range(6):
                    for cc in range(6):
                        Kt[k, q, cc] = 0.0 if dead[cc] else F6[q, cc]
                continue
            mp = body[parent[i], B_NM]
            node = body[i, B_NODE] >= 0
            oy = body[i, B_Y]
            for q in range(6):
                for cc in range(6):
                    dP[t - 1, q, cc] = F6[q, cc]
            for l in range(mp):
                for cc in range(6):
                    zc[cc] = 0.0
                if node:
                    for q in range(6):
                        f0 = Y[oy + 6 * l + q]
                        for cc in range(6):
                            zc[cc] += f0 * F6[q, cc]
                for cc in range(6):
                    dP[t - 1, 6 + l, cc] = zc[cc]
            for cc in range(6):
                if dead[cc]:
                    continue
                big = 0.0
                for a in range(6 + mp):
                    big = max(big, abs(dP[t - 1, a, cc]))
                if big < SENSITIVITY_FLOOR:
                    dead[cc] = True
            for cc in range(6):
                if dead[cc]:
                    for a in range(6 + mp):
                        dP[t - 1, a, cc] = 0.0
    # Lam_jk = -J_j M^-1 J_k^T through the elimination: the sum over the bodies the two paths
    # share of -du_j^T D^-1 du_k (du = -S_hat^T dP, the unit wrenches' generalized forces)
    for j in range(H):
        for k in range(H):
            pj = path_ptr[j]
            pk = path_ptr[k]
            for a in range(6):
                for b in range(6):
                    Lam[j, k, a, b] = 0.0
            for t in range(max(live[j] - pj, live[k] - pk, 0), cp[j, k]):
                i = path_idx[pj + t]
                m, iv, nvi, nj, npas = _sizes(i, n, nv, idx_v, body, active)
                for b in range(npas):
                    for a in range(6):
                        w = du[pj + t, b, a]
                        for cc in range(6):
                            Lam[j, k, a, cc] -= w * dz[pk + t, b, cc]
    # beta_j: the acceleration of F_j at a_in = 0, g = 0, walking path j outward (pass 3's step)
    for j in range(H):
        q0 = path_ptr[j]
        q1 = path_ptr[j + 1]
        mprev = 0
        for t in range(q0, q1):
            i = path_idx[t]
            m, iv, nvi, nj, npas = _sizes(i, n, nv, idx_v, body, active)
            # the attachment acceleration: the parent's plus its modes' through Y (R: zero)
            for q in range(6):
                col[q] = ah[q] if t > q0 else 0.0
            if t > q0 and body[i, B_NODE] >= 0:
                oy = body[i, B_Y]
                for l in range(mprev):
                    w = ed[l]
                    for q in range(6):
                        col[q] += Y[oy + 6 * l + q] * w
            xform_motion(E[i], r[i], col, ah)
            outward_step(i, iv, nvi, nj, npas, active[i], nv, body, c, S, U, u, L, qdd_in, ah, z)
            for l in range(m):
                ed[l] = z[nj + l]
            mprev = m
        for q in range(6):
            beta[j, q] = ah[q]
    own[0] = 0.0        # the scratch's memory held to here


@njit(cache=True, fastmath=MATH)
def apply_handle_wrenches(idx_v, nv, body, active, path_ptr, path_idx, dP, du, g, u, pA, live):
    """The known handle wrenches g (H, 6) into the backward pass's results along the paths:
    u += du g and the biases pA += dP g (the carrier R excluded), from path position ``live[k]``
    on (:func:`sensitivity_kernel`: zero before it)."""
    # the array arguments as views that count no references (see ``unowned``)
    idx_v, body, active, path_ptr = unowned(idx_v), unowned(body), unowned(active), unowned(path_ptr)
    path_idx, dP, du, g, u, pA = unowned(path_idx), unowned(dP), unowned(du), unowned(g), unowned(u), unowned(pA)
    live = unowned(live)
    n = body.shape[0]
    H = path_ptr.shape[0] - 1
    for k in range(H):
        for t in range(max(live[k], path_ptr[k]), path_ptr[k + 1]):
            i = path_idx[t]
            m, iv, nvi, nj, npas = _sizes(i, n, nv, idx_v, body, active)
            oz = body[i, B_Z]
            op = body[i, B_P]
            for b in range(npas):
                s = 0.0
                for cc in range(6):
                    s += du[t, b, cc] * g[k, cc]
                u[oz + b] += s
            for a in range(6 + m):
                s = 0.0
                for cc in range(6):
                    s += dP[t, a, cc] * g[k, cc]
                pA[op + a] += s


# ----------------------------------------------------------------------------- the augmented part
_NO_GRAVITY = np.zeros(3)      # the parts' a_in carries gravity (a0 = [0; -g] at the root)


@njit(cache=True, fastmath=MATH)
def part_wrenches(m, body, pA, idx_v, idx_s, S, tau, Wt, F, FS, FT):
    """The part's joint wrenches F (m, 6), read off its full copy after the inward pass (part body
    j is the copy's body j + 1, its wrench the first six entries of its pA), and their split
    F_S = W^T F, F_T = (S^T S)^-1 tau (``project_wrench``; idx_v, S, tau: the part's joints)."""
    G = np.empty((6, 6))
    nvt = S.shape[0]
    for j in range(m):
        o = body[j + 1, B_P]
        for k in range(6):
            F[j, k] = pA[o + k]
        project_wrench(j, m, nvt, idx_v, idx_s, S, tau, Wt, F, FS, FT, G)


class _Augmented(Workspace):
    """The augmented copy of (some of) a part's bodies (see the module's docstring) as the serial
    kernels' arrays, with its workspace.  ``keep``: the part's local bodies it holds (increasing,
    closed under the parent); ``frames``: per handle (local body, node offset or -1, r_c)."""

    def __init__(self, model, gpack, bodies, parent_l, keep, frames):
        keep = np.asarray(keep, dtype=np.int64)
        gb = bodies[keep]
        nk = keep.size
        pos = -np.ones(parent_l.size, dtype=np.int64)
        pos[keep] = np.arange(nk) + 1
        nvirt = sum(2 if node >= 0 else 1 for _, node, _ in frames)
        n = 1 + nk + nvirt
        parent = np.empty(n, dtype=np.int64)
        parent[0] = -1
        pl = parent_l[keep]
        parent[1:1 + nk] = np.where(pl >= 0, pos[np.maximum(pl, 0)], 0)
        jtype = np.full(n, FIXED, dtype=np.int64)
        jtype[0] = FREE
        jtype[1:1 + nk] = model.jtype[gb]
        axis = np.zeros((n, 3))
        axis2 = np.zeros((n, 3))
        axis[1:1 + nk] = model.axis[gb]
        axis2[1:1 + nk] = model.axis2[gb]
        E_tree = np.tile(np.eye(3), (n, 1, 1))
        r_tree = np.zeros((n, 3))
        E_tree[1:1 + nk] = model.E_tree[gb]
        r_tree[1:1 + nk] = model.r_tree[gb]
        mass = np.zeros(n)
        com = np.zeros((n, 3))
        I_com = np.zeros((n, 3, 3))
        mass[1:1 + nk] = model.mass[gb]
        com[1:1 + nk] = model.com[gb]
        I_com[1:1 + nk] = model.I_com[gb]
        nq_j = np.zeros(n, dtype=np.int64)
        nv_j = np.zeros(n, dtype=np.int64)
        nq_j[0], nv_j[0] = 7, 6
        nq_j[1:1 + nk] = model.nq_j[gb]
        nv_j[1:1 + nk] = model.nv_j[gb]
        nm = np.zeros(n, dtype=np.int64)
        nm[1:1 + nk] = gpack.body[gb, B_NM]
        body = np.zeros((n, BODY_COLUMNS), dtype=np.int64)
        body[:, B_KIND] = -1
        body[:, B_NODE] = -1
        body[:, B_NM] = nm
        body[1:1 + nk, B_KIND] = gpack.body[gb, B_KIND]
        body[1:1 + nk, B_NODE] = np.where(pl >= 0, gpack.body[gb, B_NODE], -1)
        body[:, B_IE] = np.concatenate(([0], np.cumsum(nm)[:-1]))
        self.fbody = np.zeros(len(frames), dtype=np.int64)       # F_k's index
        o = 1 + nk
        for k, (h, node, rc) in enumerate(frames):
            ph = pos[h]
            if node >= 0:
                parent[o] = ph
                r_tree[o] = rc
                body[o, B_NODE] = node
                parent[o + 1] = o
                r_tree[o + 1] = -np.asarray(rc)
                o += 2
            else:
                parent[o] = ph
                o += 1
            self.fbody[k] = o - 1
        mpar = np.where(body[:, B_NODE] >= 0, nm[np.maximum(parent, 0)], 0)
        nz = nv_j + nm
        set_offsets(body, nm, nz, mpar)
        self.n = n
        self.parent, self.jtype, self.axis, self.axis2 = parent, jtype, axis, axis2
        self.E_tree, self.r_tree, self.mass, self.com, self.I_com = E_tree, r_tree, mass, com, I_com
        self.idx_q = np.concatenate(([0], np.cumsum(nq_j)[:-1])).astype(np.int64)
        self.idx_v = np.concatenate(([0], np.cumsum(nv_j)[:-1])).astype(np.int64)
        self.nq = int(nq_j.sum())
        self.nv = int(nv_j.sum())
        self.ne = int(nm.sum())
        self.body = body
        self.mmax = int(nm.max())
        self.sizes = (nz, nm, mpar)
        # the part's own coordinates this copy holds (indices into the part's q / qd)
        pq = np.concatenate(([0], np.cumsum(model.nq_j[bodies])[:-1]))
        pv = np.concatenate(([0], np.cumsum(model.nv_j[bodies])[:-1]))
        pnm = gpack.body[bodies, B_NM]
        pe = np.concatenate(([0], np.cumsum(pnm)[:-1]))
        nq_p, nv_p = int(model.nq_j[bodies].sum()), int(model.nv_j[bodies].sum())
        self.qmap = np.concatenate((index_ranges(pq[keep], model.nq_j[gb]), nq_p + index_ranges(pe[keep], pnm[keep])))
        self.vmap = np.concatenate((index_ranges(pv[keep], model.nv_j[gb]), nv_p + index_ranges(pe[keep], pnm[keep])))
        self.full = nk == bodies.size
        self._allocate()

    _WORKSPACE = ("E", "r", "v", "c", "a", "S", "IA", "pA", "Y", "U", "u", "L", "qa", "qda", "taua", "qdda",
                  "qddin", "tauo", "act")

    def _allocate(self):
        n = self.n
        nz, nm, mpar = self.sizes
        for name, shape in workspace_shapes(self.nv, nm, nz, mpar).items():
            setattr(self, name, np.zeros(shape))
        self.qa = np.zeros(self.nq + self.ne)
        self.qa[6] = 1.0                    # the carrier's quaternion (x, y, z, w): the identity
        self.qda = np.zeros(self.nv + self.ne)
        self.taua = np.zeros(self.nv + self.ne)
        self.qdda = np.zeros(self.nv + self.ne)
        self.qddin = np.zeros(self.nv + self.ne)
        self.tauo = np.zeros(self.nv + self.ne)
        self.act = np.zeros(n, dtype=np.bool_)
        self.act[0] = True

    def set_state(self, q, qd, v_in):
        """The part's own q, qd (and the carrier's rates: v_in = [omega; v] as the free joint's
        [v; omega])."""
        self.qa[7:] = q[self.qmap] if not self.full else q
        self.qda[6:] = qd[self.vmap] if not self.full else qd
        self.set_carrier(v_in)

    def set_carrier(self, v_in):
        """The carrier's rates: v_in = [omega; v] as the free joint's [v; omega]."""
        self.qda[0:3] = v_in[3:6]
        self.qda[3:6] = v_in[0:3]

    def pass1(self, gp, stage=0):
        """The serial pass 1 on this copy (``stage`` as ``flexible_forward_pass1`` takes it)."""
        flexible_forward_pass1(self.parent, self.jtype, self.axis, self.axis2, self.E_tree, self.r_tree, self.mass,
                               self.com, self.I_com, self.idx_q, self.idx_v, self.nq, self.nv, self.body, gp.kinfo,
                               gp.first, gp.xphi, gp.sparse_i, gp.sparse_v, gp.Mee, gp.Kst, gp.Dmp, gp.Gs, gp.nodes,
                               self.mmax, self.qa, self.qda, self.E, self.r, self.v, self.c, self.S, self.IA,
                               self.pA, self.Y, self.U, stage)


class _Shared:
    """The model's packed modal data (``FlexiblePack``'s kinds and nodes), which the augmented
    copies index; pickled with the part (a part sent to a rank carries it)."""

    NAMES = ("kinfo", "first", "xphi", "sparse_i", "sparse_v", "Mee", "Kst", "Dmp", "Gs", "nodes")

    def __init__(self, gpack):
        for k in self.NAMES:
            setattr(self, k, getattr(gpack, k))


def handle_frames(model, pt, k):
    """Per handle of part k (``pt.handles(k)``, global ids): (node offset in the model's packed
    nodes or -1, r_c (3,)) of the child parts that hang from it.  The child parts of a flexible
    handle must hang from the same node at the same placement (one frame per handle); refused
    otherwise.  A rigid handle's frame is its body frame (node -1)."""
    gp = flexible_pack(model)
    hs = pt.handles(k)
    out = {}
    for c in pt.child_parts(k):
        h = int(pt.handle[c])
        root = int(pt.bodies(c)[0])
        fr = (int(gp.body[root, B_NODE]), np.array(model.r_tree[root], dtype=float))
        if h in out:
            if out[h][0] != fr[0] or (fr[0] >= 0 and not np.array_equal(out[h][1], fr[1])):
                raise PartreeInputError(f"part {k}: child parts hang from body {h} at different nodes or placements; "
                                        f"the parallel engine's flexible parts need one frame per handle (choose a "
                                        f"partition that keeps the children of body {h} at other nodes with it)")
        else:
            out[h] = fr
    return [out.get(int(h), (-1, np.zeros(3))) for h in hs]


def own_selections(model, bodies):
    """(qsel, vsel) of a part's own coordinates in the full vectors [q; eta], [qd; eta_dot]: its
    joints' then its flexible bodies' modal coordinates, in the part's order."""
    b = np.asarray(bodies, dtype=np.int64)
    fl = model.flexible
    nm = np.asarray(fl.nmodes, dtype=np.int64)[b]
    ie = np.asarray(fl.idx_eta, dtype=np.int64)[b]
    qsel = np.concatenate((index_ranges(model.idx_q[b], model.nq_j[b]), model.nq + index_ranges(ie, nm)))
    vsel = np.concatenate((index_ranges(model.idx_v[b], model.nv_j[b]), model.nv + index_ranges(ie, nm)))
    return qsel.astype(np.int64), vsel.astype(np.int64)


#: a part at the base whose handle paths hold fewer than this fraction of its bodies does its
#: velocity step on them only, unless the engine asks for early kinematics (see
#: ``FlexiblePartKernel``)
TOP_PATH_FRACTION = 0.5

NOT_BUILT = ("is not built for flexible bodies in the parallel engine (its parts compute forward and hybrid "
             "dynamics and the constraint forces only; the serial functions of "
             "partree.algorithms.flexible_dynamics, flexible_aba and the "
             "others, take flexible bodies)")


class FlexiblePartKernel(Workspace):
    """One part of a model with flexible bodies (see the module's docstring): the steps of
    :class:`partree.parallel.part.PartKernel` for forward and hybrid dynamics.  ``frames``: per
    handle (node offset or -1, r_c) from :func:`handle_frames`."""

    def __init__(self, model, bodies, handles, frames, part_id=-1, early_kinematics=False, poses=False):
        if len(getattr(model, "loops", ())):
            raise PartreeInputError(f"model {model.name!r} has closed loops and flexible bodies: the parallel engine "
                                    f"takes flexible bodies in trees only")
        b = np.ascontiguousarray(bodies, dtype=np.int64)
        self.part_id = int(part_id)
        self.poses = bool(poses)
        self.bodies = b
        m = b.size
        self.m = m
        self.parent = local_parents(model, b, part_id, one_tree=True)
        self.top = bool(model.parent[b[0]] < 0)
        gp = flexible_pack(model)
        self.shared = _Shared(gp)
        self.jtype = np.ascontiguousarray(model.jtype[b])
        nq_j, nv_j = model.nq_j[b], model.nv_j[b]
        self.idx_q = np.concatenate(([0], np.cumsum(nq_j)[:-1])).astype(np.int64)
        self.idx_v = np.concatenate(([0], np.cumsum(nv_j)[:-1])).astype(np.int64)
        self.nq_joints, self.nv_joints = int(nq_j.sum()), int(nv_j.sum())
        self.qsel, self.vsel = own_selections(model, b)
        self.nq, self.nv = self.qsel.size, self.vsel.size
        self.qix, self.vix, self.bix = fast_index(self.qsel), fast_index(self.vsel), fast_index(b)
        hs = np.ascontiguousarray(np.unique(np.asarray(handles, dtype=np.int64)))
        hl = np.searchsorted(b, hs)
        if hs.size and (np.any(hl >= m) or np.any(b[np.minimum(hl, m - 1)] != hs)):
            raise PartreeInputError(f"part {part_id}: a handle is not a body of the part")
        self.handles_global = hs
        self.handles = hl.astype(np.int64)
        self.H = hs.size
        fr = [(int(h), int(node), np.asarray(rc, dtype=float)) for h, (node, rc) in zip(hl, frames)]
        self.full = _Augmented(model, gp, b, self.parent, np.arange(m), fr)
        # the velocity step.  With ``early_kinematics`` (the engine's choice where some rank's
        # handle paths are long: a chain split across ranks, ``part.early_kinematics_wanted``)
        # every part runs pass 1's kinematics on its full copy with the carrier at rest, and the
        # reduction moves them to v_in (pass 1's stage 3, ``shift_body``): no reduction waits for the
        # kinematics of the part above.  Otherwise a part runs the kinematics of its handle
        # paths only, on the path copy (the bodies on the paths), and its whole pass 1 in the
        # reduction; a part at the base whose paths are most of it does its velocity step on the
        # full copy, whose kinematics its reduction reuses
        self.early = bool(early_kinematics)
        self.pathcopy = None
        ptr, idx, slot, ns, cp = _paths(self.parent, self.handles)
        keep = np.flatnonzero(slot >= 0)
        if self.H and not self.early and (not self.top or keep.size < TOP_PATH_FRACTION * m):
            self.pathcopy = _Augmented(model, gp, b, self.parent, keep, fr)
        # the paths in the full copy: R excluded, the part's root ... h_k (V_k) F_k
        A = self.full
        rows, ptr2 = [], [0]
        for k in range(self.H):
            path = [A.fbody[k]]
            i = A.parent[A.fbody[k]]
            while i > 0:
                path.append(i)
                i = A.parent[i]
            rows.append(np.array(path[::-1], dtype=np.int64))
            ptr2.append(ptr2[-1] + len(path))
        self.path_ptr = np.array(ptr2, dtype=np.int64)
        self.path_idx = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        # common prefix lengths of the augmented paths (a path ends at its own F_k)
        self.cp = np.zeros((self.H, self.H), dtype=np.int64)
        for j in range(self.H):
            for k in range(self.H):
                L = min(rows[j].size, rows[k].size)
                neq = np.flatnonzero(rows[j][:L] != rows[k][:L])
                self.cp[j, k] = neq[0] if neq.size else L
        self.dmax = 6 + max(A.mmax, int(model.nv_j[b].max()) if m else 0)
        self._allocate()

    _WORKSPACE = ("TE", "Tr", "vrel", "M", "m0", "Kt", "Psi", "Lam", "beta", "dP", "du", "dz", "live", "_tau",
                  "tau_out", "_act", "_g", "_reduced", "_solved", "_wrench_ws", "_kin", "_TEp", "_Trp", "_F")

    def _allocate(self):
        H = self.H
        self._allocate_boundary(H)
        P = self.path_idx.size
        self.dP = np.zeros((P, self.dmax, 6))
        self.du = np.zeros((P, self.dmax, 6))
        self.dz = np.zeros((P, self.dmax, 6))
        self.live = np.zeros(H, dtype=np.int64)
        self._tau = np.zeros(self.nv)
        self.tau_out = np.zeros(self.nv)
        self._act = np.zeros(0, dtype=np.int64)
        self._g = np.zeros((H, 6))
        self._reduced = False
        self._solved = False         # a solve since the last reduction (what wrenches() works from)
        self._F = None               # the last reduction's external loads: wrenches (m, 6), PartLoads or None
        self._wrench_ws = None       # constraint-force arrays, allocated on first use
        self._kin = False            # the full copy's kinematics done by the velocity step (carrier at rest)
        c = self.pathcopy if self.pathcopy is not None else self.full
        self._TEp = np.zeros((c.n, 3, 3))
        self._Trp = np.zeros((c.n, 3))

    @property
    def early_kinematics(self):
        return self.early

    # ---------------------------------------------------------------- the three steps
    def velocity(self, q, qd):
        """Step (a): the handle frames' maps v_F = T_F v_in + vrel_F (TE, Tr, vrel).  q, qd: the
        part's own coordinates (q[qsel], qd[vsel])."""
        self._q = np.ascontiguousarray(q, dtype=np.float64)
        self._qd = np.ascontiguousarray(qd, dtype=np.float64)
        self._kin = False
        if self.H == 0 and not self.early:
            return self.TE, self.Tr, self.vrel
        # the kinematics with the carrier at rest (the child parts' v_in needs them; the
        # reduction moves the full copy's to this part's v_in, pass 1's stage 3)
        c = self.pathcopy if self.pathcopy is not None else self.full
        c.set_state(self._q, self._qd, np.zeros(6))
        c.pass1(self.shared, stage=1)
        self._kin = c is self.full
        if self.H == 0:
            return self.TE, self.Tr, self.vrel
        compose_transforms(c.parent, c.E, c.r, self._TEp, self._Trp)
        for k in range(self.H):
            f = c.fbody[k]
            self.TE[k] = self._TEp[f]
            self.Tr[k] = self._Trp[f]
            self.vrel[k] = c.v[f]
        return self.TE, self.Tr, self.vrel

    def reduce(self, v_in, tau, f_ext=None, rows="dynamics", active=None, qdd=None):
        """Step (b): the boundary relation (M, m0, Kt, Psi, Lam, beta) for the incoming velocity
        v_in, the part's own forces tau (joints then modes) and external loads f_ext (the wrenches
        at its bodies' origins (m, 6), or a :class:`PartLoads` with loads at nodes).  Hybrid
        dynamics: ``active`` (m,) flags the joints whose acceleration is given in ``qdd`` (the
        part's own (nv,), read there); a flexible body's modes are always passive."""
        F = None
        if isinstance(f_ext, PartLoads):
            F = f_ext
            if F.F is not None and F.F.shape != (self.m, 6):
                raise PartreeInputError(f"part {self.part_id}: f_ext slice has shape {F.F.shape}, expected "
                                        f"({self.m}, 6)")
        elif f_ext is not None:
            F = np.ascontiguousarray(f_ext, dtype=np.float64)
            if F.shape != (self.m, 6):
                raise PartreeInputError(f"part {self.part_id}: f_ext slice has shape {F.shape}, expected ({self.m}, 6)")
        self._F = F
        if rows != "dynamics":
            raise PartreeInputError(f"the loops' corrections (rows={rows!r}) {NOT_BUILT}")
        A = self.full
        tau = np.asarray(tau, dtype=np.float64)
        if tau.shape != (self.nv,):
            raise PartreeInputError(f"part {self.part_id}: tau has shape {tau.shape}, expected ({self.nv},)")
        if self._act.size:           # the last reduction's given accelerations and flags
            A.act[1:1 + self.m] = False
            A.qddin[:] = 0.0
            self._act = np.zeros(0, dtype=np.int64)
        else:                        # only the carrier's entries were set (by the last solve)
            A.qddin[:6] = 0.0
        A.taua[6:] = tau
        if active is not None:
            mask = np.ascontiguousarray(active, dtype=np.bool_)
            if mask.shape != (self.m,):
                raise PartreeInputError(f"part {self.part_id}: active has shape {mask.shape}, expected ({self.m},)")
            if mask.any():
                qv = np.asarray(qdd, dtype=np.float64)
                if qv.shape != (self.nv,):
                    raise PartreeInputError(f"part {self.part_id}: qdd has shape {qv.shape}, expected ({self.nv},)")
                A.act[1:1 + self.m] = mask
                dof = np.zeros(self.nv, dtype=np.bool_)
                dof[:self.nv_joints] = np.repeat(mask, np.diff(np.append(self.idx_v, self.nv_joints)))
                A.qddin[6:] = np.where(dof, qv, 0.0)
                A.taua[6:] = np.where(dof, 0.0, tau)
                self._act = np.flatnonzero(mask).astype(np.int64)
        self._tau = A.taua[6:]       # (a view: the forces stay until the next reduction)
        if self._kin:       # the velocity step did the kinematics with the carrier at rest
            if self.top:
                A.pass1(self.shared, stage=2)
            else:           # moved to v_in, body by body, before the rest of pass 1
                A.set_carrier(np.ascontiguousarray(v_in, dtype=np.float64))
                A.pass1(self.shared, stage=3)
        else:
            A.set_state(self._q, self._qd, np.ascontiguousarray(v_in, dtype=np.float64))
            A.pass1(self.shared)
        self._kin = False
        self._apply_loads(A)
        bad = flexible_backward_pass(A.parent, A.idx_v, A.nv, A.body, A.mmax, A.act, A.taua, A.qddin, A.E, A.r, A.c,
                                     A.S, A.IA, A.pA, A.Y, A.U, A.u, A.L)
        if bad > 0:
            if bad > self.m:
                raise PartreeInputError(f"part {self.part_id}: singular articulated inertia at a handle frame")
            raise PartreeInputError(f"flexible dynamics: the articulated inertia of body {int(self.bodies[bad - 1])} "
                                    f"is singular along its passive coordinates")
        self.M[:] = rigid_block(A.IA, 0)
        self.m0[:] = A.pA[:6]
        if self.H:
            sensitivity_kernel(A.parent, A.idx_v, A.nv, A.body, A.act, A.qddin, A.E, A.r, A.c, A.S, A.IA, A.pA, A.Y,
                               A.U, A.u, A.L, self.path_ptr, self.path_idx, self.cp, self.dP, self.du, self.dz,
                               self.Kt, self.Lam, self.beta, self.live)
            self.Psi[:] = self.Kt.transpose(0, 2, 1)
        self._reduced = True
        self._solved = False
        return self.M, self.m0, self.Kt, self.Psi, self.Lam, self.beta

    def _apply_loads(self, A):
        """The last reduction's external loads into pA of the full copy A, after its pass 1."""
        F = self._F
        if isinstance(F, PartLoads):
            F.apply(self.m, A.body, A.nq, A.qa, A.pA)
        elif F is not None:
            subtract_body_wrenches(self.m, A.body, F, A.pA)

    def solve(self, a_in, g):
        """Step (c): the part's own accelerations (joints then modes) for the incoming
        acceleration a_in and the handle wrenches g (H, 6); after a hybrid reduction
        :attr:`tau_out` holds the part's forces (the active joints' computed)."""
        if not self._reduced:
            raise PartreeInputError(f"part {self.part_id}: solve() needs a reduce() first (each reduction serves "
                                    f"one back-substitution)")
        g = np.ascontiguousarray(g, dtype=np.float64)
        if g.size != 6 * self.H:
            raise PartreeInputError(f"part {self.part_id}: g holds {g.size} values; its {self.H} handles need "
                                    f"({self.H}, 6) wrenches")
        self._g = g.reshape(self.H, 6)
        self._reduced = False
        A = self.full
        if self.H:
            apply_handle_wrenches(A.idx_v, A.nv, A.body, A.act, self.path_ptr, self.path_idx, self.dP, self.du,
                                  self._g, A.u, A.pA, self.live)
        a_in = np.asarray(a_in, dtype=np.float64)
        A.qddin[0:3] = a_in[3:6]
        A.qddin[3:6] = a_in[0:3]
        if self._act.size:           # pass 3 writes the active joints' forces only
            A.tauo[:] = A.taua
        flexible_forward_pass2(A.parent, A.idx_v, A.nv, A.body, A.mmax, np.zeros(3), A.act, A.qddin, A.E, A.r, A.c,
                               A.S, A.IA, A.pA, A.Y, A.U, A.u, A.L, A.a, A.qdda, A.tauo)
        qdd = A.qdda[6:]
        if self._act.size:
            self.tau_out = A.tauo[6:].copy()
            self._tau = self.tau_out
        self._solved = True
        return qdd

    def dof_flags(self, mask):
        """The (nv,) flags of the part's own coordinates from per-joint flags (m,) (modes: False)."""
        out = np.zeros(self.nv, dtype=np.bool_)
        out[:self.nv_joints] = np.repeat(np.asarray(mask, dtype=np.bool_),
                                         np.diff(np.append(self.idx_v, self.nv_joints)))
        return out

    @property
    def hybrid(self):
        return bool(self._act.size)

    @property
    def joint_forces(self):
        """After ``solve``: the part's own forces (joints then modes), the active joints' computed."""
        return self._tau

    def wrenches(self):
        """Step (d), for the constraint forces, after ``solve``: every joint wrench of the part
        and its split into F_S and F_T, as :func:`partree.algorithms.flexible_cfa.flexible_cfa`
        gives them.  Inverse dynamics of the part's motion on its full copy: pass 1 again at the
        reduction's state (the reduction left articulated inertias in IA and pA, and after a
        hybrid one the active joints' S qdd in c), the outward pass with the accelerations of the
        solve, the child parts' root-joint wrenches g entering at the handle frames F_k, and the
        inward pass, after which the copy's pA holds at each body the wrench its joint
        transmits.  Returns (F (m, 6), FS (ns,), FT (nv of the joints,)), views of the workspace;
        F_T from the part's joint forces (:attr:`joint_forces`, the active joints' computed)."""
        from ..algorithms.cfa import constraint_layout
        from ..algorithms.cfa.bases import rows_kernel

        if not self._solved:
            raise PartreeInputError(f"part {self.part_id}: wrenches() needs a solve() first")
        A = self.full
        nvj = self.nv_joints
        ws = self._wrench_ws
        if ws is None:
            ns_j, idx_s = constraint_layout(np.diff(np.append(self.idx_v, nvj)))
            ns = int(ns_j.sum())
            ws = self._wrench_ws = {"idx_s": idx_s, "Wt": np.zeros((ns, 6)), "rows_ready": False,
                                    "F": np.zeros((self.m, 6)), "FS": np.zeros(ns), "FT": np.zeros(nvj),
                                    "tau": np.zeros(A.nv + A.ne)}
        S = A.S[6:6 + nvj]
        bad = rows_kernel(self.jtype, self.idx_v, ws["idx_s"], S, ws["rows_ready"], ws["Wt"])
        if bad >= 0:
            ws["rows_ready"] = False
            raise PartreeInputError(f"body {int(self.bodies[bad])}: universal joint with parallel axes at this "
                                    f"configuration; its constraint basis is undefined")
        ws["rows_ready"] = True
        A.pass1(self.shared)
        self._apply_loads(A)
        flexible_rnea_outward(A.parent, A.idx_v, A.nv, A.body, _NO_GRAVITY, A.qdda, A.E, A.r, A.c, A.S, A.IA, A.pA,
                              A.Y, A.U, A.a)
        for k in range(self.H):
            o = int(A.body[A.fbody[k], B_P])
            A.pA[o:o + 6] += self._g[k]
        flexible_rnea_inward(A.parent, A.idx_v, A.nv, A.body, A.E, A.r, A.S, A.pA, A.Y, ws["tau"])
        part_wrenches(self.m, A.body, A.pA, self.idx_v, ws["idx_s"], S, np.ascontiguousarray(self._tau[:nvj]),
                      ws["Wt"], ws["F"], ws["FS"], ws["FT"])
        return ws["F"], ws["FS"], ws["FT"]

    def momentum_forces(self, g_in, f_ext=None):
        raise PartreeInputError(f"the momentum form of a model with flexible bodies {NOT_BUILT}")

    def momentum_rate(self, Fh):
        raise PartreeInputError(f"the momentum form of a model with flexible bodies {NOT_BUILT}")

    def loop_violation(self):
        return 0.0

    def loop_pieces(self):
        from .part import NO_LOOPS
        return NO_LOOPS

    @property
    def constraint_rows(self):
        """W_j^T of the part's joints stacked (as ``CFAResult.constraint_rows``), at the
        configuration of the last ``wrenches`` call."""
        if self._wrench_ws is None:
            raise RuntimeError("no constraint forces computed yet: call wrenches() after solve()")
        return self._wrench_ws["Wt"]


def flexible_state(model, q, qd, tau=None):
    """The full vectors of a model with flexible bodies checked: q (nq + n_modal), qd and tau
    (nv + n_modal); tau None -> not checked."""
    ne = int(model.flexible.n_modal)
    out = []
    for x, nm, size in ((q, "q", model.nq + ne), (qd, "qd", model.nv + ne), (tau, "tau", model.nv + ne)):
        if x is None:
            out.append(None)
            continue
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.shape != (size,):
            raise PartreeInputError(f"{nm} has shape {x.shape}; a model with flexible bodies ({ne} modal coordinates) "
                                    f"takes the full vector ({size},): the joint coordinates then the modal ones, as "
                                    f"flexible_aba")
        if not np.all(np.isfinite(x)):
            raise PartreeInputError(f"{nm} has non-finite entries")
        out.append(x)
    return out


def flexible_hybrid_arguments(model, active, qdd_active, tau):
    """(mask (n,), tau, qdd) of a hybrid call on a model with flexible bodies, the full vectors
    (nv + n_modal), the entries that are not read set to zero (tau's at the active joints, qdd's
    elsewhere: the modes are always passive)."""
    from ..algorithms.hybrid_dynamics import active_mask

    mask = active_mask(model, active)
    ne = int(model.flexible.n_modal)
    dof = np.zeros(model.nv + ne, dtype=bool)
    dof[:model.nv] = np.repeat(mask, model.nv_j)
    out = []
    for x, nm, keep in ((tau, "tau", ~dof), (qdd_active, "qdd_active", dof)):
        x = np.array(x, dtype=float)
        if x.shape != (model.nv + ne,):
            raise PartreeInputError(f"{nm} has shape {x.shape}; expected ({model.nv + ne},)")
        x[~keep] = 0.0
        if not np.all(np.isfinite(x)):
            raise PartreeInputError(f"{nm} has non-finite entries where it is read")
        out.append(x)
    return mask, out[0], out[1]


def engine_forces(model, f_ext):
    """(F, has_f) of the engine's external loads: the (n, 6) wrenches at the body origins
    (``checks.external_forces``); on a model with flexible bodies whose loads act at nodes too
    (dict keys ``(body, node name)``, or a :class:`FlexibleLoads`), F is their
    :class:`FlexibleLoads` (:func:`partree.algorithms.flexible_dynamics.flexible_loads`), which
    :func:`part_forces` splits by part."""
    if getattr(model, "flexible", None) is not None and (
            isinstance(f_ext, FlexibleLoads) or (isinstance(f_ext, dict) and any(isinstance(k, tuple) for k in f_ext))):
        loads = flexible_loads(model, f_ext)
        if loads.ld_body.shape[0]:
            return loads, True
        f_ext = loads.f_ext if loads.f_ext.shape[0] else None
    return checks.external_forces(model, f_ext)


class PartLoads:
    """One part's external loads where some act at the nodes of its flexible bodies: ``F`` the
    wrenches at its bodies' origins (m, 6), or None, and the loads at nodes as
    ``flexible_apply_loads`` reads them (``ld_body``: the body in the part's augmented copy,
    the part's own body number + 1; ``ld_off`` into ``ld_data``; ``ld_w`` the wrenches; ``ld_data``
    each node's point, Psi and Phi).  Built by :func:`part_forces`; small, and sent as it is."""

    __slots__ = ("F", "ld_body", "ld_off", "ld_w", "ld_data")

    def __init__(self, F, ld_body, ld_off, ld_w, ld_data):
        self.F = F
        self.ld_body = ld_body
        self.ld_off = ld_off
        self.ld_w = ld_w
        self.ld_data = ld_data

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        for k, x in zip(self.__slots__, state):
            setattr(self, k, x)

    @property
    def nbytes(self):
        return sum(int(getattr(self, k).nbytes) for k in self.__slots__ if getattr(self, k) is not None)

    def apply(self, m, body, nq, q, pA):
        """Subtract the loads' generalized forces from pA of the augmented copy (``body``, its
        coordinates q with ``nq`` those of the joints), after pass 1: the wrenches at the origins
        of its bodies 1..m, then the loads at nodes, as ``flexible_apply_loads`` does serially."""
        if self.F is not None:
            subtract_body_wrenches(m, body, self.F, pA)
        flexible_apply_loads(nq, body, _NO_ROWS, self.ld_body, self.ld_off, self.ld_w, self.ld_data, q, pA)


_NO_ROWS = np.zeros((0, 6))


def part_forces(F, b):
    """One part's share of the engine's external loads F (:func:`engine_forces`): the rows ``b``
    (the part's bodies in increasing order, or their slice) of the (n, 6) wrenches, or, where F
    holds loads at nodes (a :class:`FlexibleLoads`), a :class:`PartLoads` of the part's bodies;
    None without loads."""
    if F is None:
        return None
    if not isinstance(F, FlexibleLoads):
        return F[b]
    # the loads on the part's bodies (a run, or increasing numbers): O(loads), not O(bodies)
    if isinstance(b, slice):
        lo = b.start or 0
        mine = np.flatnonzero((F.ld_body >= lo) & (F.ld_body < b.stop))
        local = F.ld_body[mine] - lo
    else:
        bodies = np.asarray(b, dtype=np.int64)
        j = np.minimum(np.searchsorted(bodies, F.ld_body), max(bodies.size - 1, 0))
        mine = np.flatnonzero(bodies[j] == F.ld_body) if bodies.size else np.zeros(0, dtype=np.int64)
        local = j[mine]
    off, data = F.node_data(mine)
    return PartLoads(np.ascontiguousarray(F.f_ext[b]) if F.f_ext.shape[0] else None,
                     np.ascontiguousarray(local + 1, dtype=np.int64), off, np.ascontiguousarray(F.ld_w[mine]), data)


@njit(cache=True, fastmath=MATH)
def subtract_body_wrenches(m, body, F, pA):
    """pA -= the external wrenches F (m, 6) at the origins of the part's bodies (the copy's bodies
    1..m): on the six rigid rows of each, nothing on the modes (``flexible_apply_loads``)."""
    for j in range(m):
        o = body[j + 1, B_P]
        for k in range(6):
            pA[o + k] -= F[j, k]


def refuse_flexible(model, what):
    """Refuse ``what`` on the parallel engine for a model with flexible bodies."""
    if getattr(model, "flexible", None) is not None:
        raise PartreeInputError(f"{what} {NOT_BUILT}; model {model.name!r} has flexible bodies")


def full_sizes(model):
    """(length of q, length of qd) the engine takes for ``model``: with flexible bodies the full
    vectors [q; eta], [qd; eta_dot]."""
    ne = 0 if getattr(model, "flexible", None) is None else int(model.flexible.n_modal)
    return model.nq + ne, model.nv + ne
