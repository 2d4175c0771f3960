"""Compiled articulated-body recursion for trees with flexible bodies: forward and hybrid dynamics
in O(N) (``partree.algorithms.flexible_dynamics`` holds the NumPy reference and the formulas).

Three passes over the regular numbering, as the rigid ABA (``partree.algorithms.aba``):

1. :func:`flexible_forward_pass1`, outward: the node kinematics of every child of a flexible
   body, the joint kinematics (the shared dispatch ``joint_kinematics(jtype[i], ...)``), the
   velocities v and velocity products c, every body's mass matrix M(eta) into IA and its velocity,
   elastic and damping forces b into pA;
2. :func:`flexible_backward_pass`, inward: at each body the passive columns of its coordinate
   map ``S_hat = blockdiag(S, 1_m)`` eliminated (U = IA S_hat, D = S_hat^T U by its factors
   L diag(d) L^T), and the 6 x 6 articulated inertia and bias handed to the parent through
   ``T = X_up [1 | Y]``;
3. :func:`flexible_forward_pass2`, outward: accelerations, qdd of the passive coordinates, the
   forces of the active joints.

External loads enter between passes 1 and 2 (:func:`flexible_apply_loads`): their generalized
forces are subtracted from pA, as the rigid ABA subtracts f_ext from its bias forces; the inverse
dynamics does the same before its passes.

Two facts keep the per-body work small.  The parent's generalized velocity reaches a child
through ``T = X_up [1 | Y]``, where ``Y`` (6 x m_p, the parent's body coordinates) is the node
frame's velocity per modal rate, ``Y = [J_l Psi; Phi + r_pred x J_l Psi]`` (``J_l`` the left
Jacobian of the node rotation ``exp(Psi eta_p)``): the child's articulated inertia is moved by the
rigid congruence ``P = X_up^T Ia X_up`` and then spread over the parent's modes as ``P Y`` and
``Y^T P Y``.  And only the rigid 6 x 6 block of a body's articulated inertia and the first 6
entries of its bias reach the parent (the modes' rows of the velocity-product term are zero), so
only the first six rows of U = IA S_hat are needed: its modes' columns are the inertia's coupling
block, which is held there (in U) from pass 1 on.

Each pass's per-body step is an inlined function of the body's sizes (its modes m, its passive
joint velocities nj).  A body of FIXED_MODES modes on a joint of FIXED_JOINT passive velocities
gets the step with those sizes as constants, so that the compiler unrolls its (6 + m)-sized loops;
other bodies get the general step, with the same arithmetic in the same order (the same results).
The steps' scratch arrays are views that count no references (``packed.raw_view``): passed to the
inlined steps, views that count them would cost two atomic operations per array and body.

Per-body data are flat arrays: one int64 table ``body`` (n, BODY_COLUMNS) of sizes and offsets,
and ragged float arrays that the offsets index.  The modal data of bodies that share one
:class:`partree.flexible.FlexibleBody` (a tree of identical links) are held once, as one *kind*.

Kernel arguments (n bodies, nv joint velocities, ne modal coordinates, nk kinds):

=================================  ================================================================
parent, jtype, axis, axis2         the model's arrays (``partree.algorithms.aba``)
E_tree, r_tree, mass, com, I_com   placements and the rigid inertias of the undeformed bodies
idx_q, idx_v (n,)                  first joint coordinate / velocity of each body
nq, nv                             joint coordinates and velocities: body i's modes sit at
                                   ``q[nq + body[i, B_IE] + k]``, ``qd[nv + body[i, B_IE] + k]``
body (n, BODY_COLUMNS) int64       per body: modes (B_NM), kind (B_KIND, -1 rigid), offset of its
                                   modes in eta (B_IE), offset of its attachment node in ``nodes``
                                   (B_NODE, -1 under a rigid parent), offsets in Y (B_Y), IA (B_I),
                                   pA (B_P), U and u (B_Z: the body's coordinates in body order),
                                   L (B_L)
kinfo (nk, 8) int64                per kind: offset of its modes in ``first``, ``xphi`` (K_E), of
                                   its mode pairs in the m x m arrays (K_2), 1 if it has geometric
                                   stiffening (K_STIFF), 1 if it has damping (K_DAMP), the first row
                                   and the number of rows of C (K_C, K_CN) and of axial(C) (K_X,
                                   K_XN) in ``sparse_i``, ``sparse_v``
first (., 3), xphi (., 3, 3)       per mode: the columns of S, B_k
sparse_i (.,), sparse_v (., mmax)  the entries of C_lk = integral rho Phi_l Phi_k^T that are
                                   nonzero for some l: their place 9 k + 3 a + b in N_k (flat) and
                                   their values over l; then those of axial(C_lk) (3 k + component):
                                   the invariants of a beam are mostly zeros (12 of its 54 N_k
                                   entries and 6 of its 18 axial ones with 6 modes)
Mee, Kst, Dmp (.,)                 per mode pair (k, l) at K_2 + k m + l: modal mass, stiffness,
                                   damping
Gs (., 3, 3)                       per mode pair: geometric stiffening G[:, :, k, l] (zeros: none)
nodes (.,)                         per attachment node: Psi (3 x m_p) then Phi (3 x m_p), row major
mmax                               the largest number of modes of a body
gravity (3,)                       enters as the base acceleration a0 = [0; -g]
q, qd (nq + ne,), (nv + ne,)       the full state; tau (nv + ne,) forces (read where passive)
active (n,) bool                   joints whose acceleration is given (modes are always passive)
qdd_in (nv + ne,)                  the given accelerations (read at the active joints)
f_ext (n, 6) or (0, 6)             external wrenches [n; f] at the body origins, body coordinates
                                   (no rows: none)
ld_body, ld_off (k,) int64         loads at nodes: the body of each and the offset of its node in
                                   ``ld_data``
ld_w (k, 6)                        the loads' wrenches [n; f]: body-frame axes, moment about the
                                   deformed node point
ld_data (.,)                       per load node: its point (3), Psi (3 x m), Phi (3 x m), row major
E, r (n, 3, 3), (n, 3)             workspace: X_up of every body
v, c, a (n, 6)                     workspace: velocities, velocity products, accelerations
S (nv, 6)                          workspace: motion subspaces, one row per joint velocity
IA, pA                             workspace: per body at B_I, B_P: the (6 + m) x (6 + m) symmetric
                                   inertia's rigid and modal blocks as lower triangles (``ia_size``;
                                   its coupling block is in U), and (6 + m)
Y                                  workspace: 6 x m_p per child of a flexible body at B_Y, column
                                   by column (column l at B_Y + 6 l)
U (nv + ne, 6)                     workspace: the first six rows of IA S_hat per coordinate: for
                                   each joint velocity (pass 2), for each mode its body's coupling
                                   block row (pass 1, and the children's terms in pass 2)
u, L                               workspace: n_z and n_z (n_z + 1) / 2 (a lower triangle, ``tri``)
                                   per body (n_z = nv_i + m_i)
qdd, tau_out (nv + ne,)            results: accelerations; forces (given ones copied, active joints'
                                   computed)
=================================  ================================================================
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..joints import joint_kinematics
from .packed import raw_view, unowned
from .primitives import (congruence_add, cross_force, cross_motion, inertia_from_compact, inertia_times,
                         xform_force_T_add, xform_motion)

#: columns of the per-body table ``body``
B_NM, B_KIND, B_IE, B_NODE, B_Y, B_I, B_P, B_Z, B_L = range(9)
BODY_COLUMNS = 9
#: columns of the per-kind table ``kinfo``
K_E, K_2, K_STIFF, K_DAMP, K_C, K_CN, K_X, K_XN = range(8)
KINFO_COLUMNS = 8

#: the mode count and passive joint velocities whose per-body steps are compiled with the sizes
#: fixed (loops unrolled): flexible links of 6 modes (three per bending plane of the beam
#: generator, the three-arm example's) on one-DOF joints.  Other sizes take the general steps,
#: which give the same results.
FIXED_MODES = 6
FIXED_JOINT = 1

#: the floating-point flags of the flexible kernels: a product and the sum it enters may be
#: contracted into one fused multiply-add (one rounding instead of two; nothing is reordered).
#: The passes are sums of products; fused, they take about 10% less time.  The flexible parts of
#: the parallel engine (``partree.parallel.flexible_part``) are compiled with the same flags, so
#: that the steps they share with these passes give the same results there.
MATH = {"contract"}


# ----------------------------------------------------------------------------- symmetric storage
# A body's symmetric (6 + m) x (6 + m) inertia [[R, C^T], [C, M]] is held in two arrays, so that
# each pass reads whole rows and nothing twice.  IA: the rigid 6 x 6 block R's lower triangle (21
# entries, row by row), then the modal block M's lower triangle (mode k's row at 21 + tri(k)).  U:
# the coupling block C, mode k's row of 6 at U[6 (nv + B_IE + k):] -- the row U = IA S_hat has for
# that modal coordinate, beside the joints' rows (U[6 (idx_v + a):] = R S_a) that pass 2 adds.
# L holds each body's factors as one lower triangle.
@njit(cache=True, inline="always", fastmath=MATH)
def tri(k):
    """Offset of row k of a lower triangle held row by row (entry (k, l), l <= k, at tri(k) + l)."""
    return (k * (k + 1)) // 2


@njit(cache=True, inline="always", fastmath=MATH)
def sym(k, l):
    """Offset of entry (k, l) of a symmetric matrix held as its lower triangle, in either order."""
    return tri(k) + l if l <= k else tri(l) + k


@njit(cache=True, inline="always", fastmath=MATH)
def u_row(b, iv, nj, oc):
    """Offset in U of the row of a body's passive coordinate b: its nj passive joint velocities
    first (from idx_v = iv), then its modes (the coupling block's rows, from oc = 6 (nv + B_IE))."""
    return 6 * (iv + b) if b < nj else oc + 6 * (b - nj)


def tri_size(d):
    """Entries of a d x d symmetric matrix held as its lower triangle."""
    return d * (d + 1) // 2


def ia_size(m):
    """Entries of IA per body of m modes: the rigid block's and the modal block's triangles."""
    return 21 + tri_size(m)


def body_inertia(pk, nv, i):
    """Body i's (6 + m) x (6 + m) inertia as the passes hold it in ``pk.IA`` and ``pk.U`` (after
    pass 1 its M(eta), after pass 2 its articulated inertia), as a NumPy array."""
    m = int(pk.body[i, B_NM])
    oi = int(pk.body[i, B_I])
    out = np.empty((6 + m, 6 + m))
    out[:6, :6] = rigid_block(pk.IA, oi)
    c0 = 6 * (nv + int(pk.body[i, B_IE]))
    out[6:, :6] = pk.U[c0:c0 + 6 * m].reshape(m, 6)
    out[:6, 6:] = out[6:, :6].T
    k, l = np.tril_indices(m)
    out[6 + k, 6 + l] = out[6 + l, 6 + k] = pk.IA[oi + 21 + k * (k + 1) // 2 + l]
    return out


_RIGID_INDEX = np.array([[max(k, l) * (max(k, l) + 1) // 2 + min(k, l) for l in range(6)] for k in range(6)])


def rigid_block(IA, o):
    """The symmetric 6 x 6 rigid block held as a lower triangle at IA[o:], as a NumPy array."""
    return IA[o + _RIGID_INDEX]


@njit(cache=True, inline="always", fastmath=MATH)
def _node_rotation(th, thd, Rn, Jr, Jrd):
    """Rn = exp(th~), the right Jacobian J_r(th) and its time derivative for the rate thd (the
    series of the NumPy reference below 1e-2 rad^2)."""
    u = th[0] * th[0] + th[1] * th[1] + th[2] * th[2]
    if u < 1e-2:
        s = 1.0 - u / 6.0 + u * u / 120.0 - u ** 3 / 5040.0
        a = 0.5 - u / 24.0 + u * u / 720.0 - u ** 3 / 40320.0 + u ** 4 / 3628800.0
        ce = 0.5 - u / 24.0 + u * u / 720.0 - u ** 3 / 40320.0
        b = 1.0 / 6.0 - u / 120.0 + u * u / 5040.0 - u ** 3 / 362880.0 + u ** 4 / 39916800.0
        au = -1.0 / 24.0 + u / 360.0 - u * u / 13440.0 + u ** 3 / 907200.0
        bu = -1.0 / 120.0 + u / 2520.0 - u * u / 120960.0 + u ** 3 / 9979200.0
    else:
        t = np.sqrt(u)
        sn = np.sin(t)
        cs = np.cos(t)
        s = sn / t
        ce = (1.0 - cs) / u
        a = ce
        b = (t - sn) / (u * t)
        au = (t * sn - 2.0 * (1.0 - cs)) / (2.0 * u * u)
        bu = ((1.0 - cs) * t - 3.0 * (t - sn)) / (2.0 * u * u * t)
    x, y, z = th[0], th[1], th[2]
    xd, yd, zd = thd[0], thd[1], thd[2]
    dot = x * xd + y * yd + z * zd
    ud = 2.0 * dot
    tv = (x, y, z)
    tdv = (xd, yd, zd)
    # the symmetric parts: K K = th th^T - u 1 and Kd K + K Kd = th thd^T + thd th^T - 2 (th.thd) 1
    for i in range(3):
        for j in range(3):
            one = 1.0 if i == j else 0.0
            kk = tv[i] * tv[j] - u * one
            ks = tv[i] * tdv[j] + tdv[i] * tv[j] - ud * one
            Rn[i, j] = one + ce * kk
            Jr[i, j] = one + b * kk
            Jrd[i, j] = bu * ud * kk + b * ks
    # the skew parts: K = th~, Kd = thd~
    g = -au * ud
    Rn[0, 1] -= s * z
    Rn[1, 0] += s * z
    Rn[0, 2] += s * y
    Rn[2, 0] -= s * y
    Rn[1, 2] -= s * x
    Rn[2, 1] += s * x
    Jr[0, 1] += a * z
    Jr[1, 0] -= a * z
    Jr[0, 2] -= a * y
    Jr[2, 0] += a * y
    Jr[1, 2] += a * x
    Jr[2, 1] -= a * x
    Jrd[0, 1] -= g * z - a * zd
    Jrd[1, 0] += g * z - a * zd
    Jrd[0, 2] += g * y - a * yd
    Jrd[2, 0] -= g * y - a * yd
    Jrd[1, 2] -= g * x - a * xd
    Jrd[2, 1] += g * x - a * xd


@njit(cache=True, inline="always", fastmath=MATH)
def ldl_solve(L, ol, npas, z):
    """z := D^-1 z with D = L diag(d) L^T factored at L[ol:] as ``flexible_backward_pass`` stores
    it: npas x npas, held row by row as ``tri`` says, L's unit lower triangle below the diagonal
    and the reciprocal pivots 1 / d on it."""
    for b in range(npas):
        rb = ol + tri(b)
        s = z[b]
        for t in range(b):
            s -= L[rb + t] * z[t]
        z[b] = s
    for b in range(npas - 1, -1, -1):
        s = z[b] * L[ol + tri(b) + b]
        for t in range(b + 1, npas):
            s -= L[ol + tri(t) + b] * z[t]
        z[b] = s


# ----------------------------------------------------------------------------- pass 1
@njit(cache=True, inline="always", fastmath=MATH)
def _node_kinematics(i, p, on, mp, nq, nv, body, E_tree, r_tree, nodes, q, qd, v, Y, th, thd, rp, ph, Rn, Jr, Jrd,
                     Ep, wn, jt, cp, vp, tmp):
    """Pass 1's node step: body i hangs at node ``on`` of its flexible parent p (mp modes; an
    argument so that :func:`flexible_forward_pass1` can give it as a constant): the node's
    rotation exp(Psi eta_p) and translation Phi eta_p, the placement Ep and point rp of the joint,
    the node map Y, the node frame's velocity vp and velocity product cp in the parent's frame."""
    e0 = nq + body[p, B_IE]
    d0 = nv + body[p, B_IE]
    for k in range(3):
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        s4 = 0.0
        for l in range(mp):
            s1 += nodes[on + k * mp + l] * q[e0 + l]
            s2 += nodes[on + k * mp + l] * qd[d0 + l]
            s3 += nodes[on + (3 + k) * mp + l] * q[e0 + l]
            s4 += nodes[on + (3 + k) * mp + l] * qd[d0 + l]
        th[k] = s1
        thd[k] = s2
        rp[k] = r_tree[i, k] + s3
        ph[k] = s4
    _node_rotation(th, thd, Rn, Jr, Jrd)
    for k in range(3):
        for l in range(3):
            Ep[k, l] = E_tree[i, k, 0] * Rn[l, 0] + E_tree[i, k, 1] * Rn[l, 1] + E_tree[i, k, 2] * Rn[l, 2]
    # Y = [J_l Psi; Phi + r_pred x J_l Psi], J_l = J_r^T
    oy = body[i, B_Y]
    for l in range(mp):
        p0 = nodes[on + l]
        p1 = nodes[on + mp + l]
        p2 = nodes[on + 2 * mp + l]
        y0 = Jr[0, 0] * p0 + Jr[1, 0] * p1 + Jr[2, 0] * p2
        y1 = Jr[0, 1] * p0 + Jr[1, 1] * p1 + Jr[2, 1] * p2
        y2 = Jr[0, 2] * p0 + Jr[1, 2] * p1 + Jr[2, 2] * p2
        Y[oy + 6 * l + 0] = y0
        Y[oy + 6 * l + 1] = y1
        Y[oy + 6 * l + 2] = y2
        Y[oy + 6 * l + 3] = nodes[on + 3 * mp + l] + rp[1] * y2 - rp[2] * y1
        Y[oy + 6 * l + 4] = nodes[on + 4 * mp + l] + rp[2] * y0 - rp[0] * y2
        Y[oy + 6 * l + 5] = nodes[on + 5 * mp + l] + rp[0] * y1 - rp[1] * y0
    # the node's velocity relative to the parent, wn = Y eta_dot_p, and its velocity product
    for k in range(3):
        wn[k] = Jr[0, k] * thd[0] + Jr[1, k] * thd[1] + Jr[2, k] * thd[2]
        jt[k] = Jrd[k, 0] * thd[0] + Jrd[k, 1] * thd[1] + Jrd[k, 2] * thd[2]
    wn[3] = ph[0] + rp[1] * wn[2] - rp[2] * wn[1]
    wn[4] = ph[1] + rp[2] * wn[0] - rp[0] * wn[2]
    wn[5] = ph[2] + rp[0] * wn[1] - rp[1] * wn[0]
    for k in range(3):
        cp[k] = Rn[k, 0] * jt[0] + Rn[k, 1] * jt[1] + Rn[k, 2] * jt[2]
    cp[3] = rp[1] * cp[2] - rp[2] * cp[1] - (wn[1] * ph[2] - wn[2] * ph[1])
    cp[4] = rp[2] * cp[0] - rp[0] * cp[2] - (wn[2] * ph[0] - wn[0] * ph[2])
    cp[5] = rp[0] * cp[1] - rp[1] * cp[0] - (wn[0] * ph[1] - wn[1] * ph[0])
    cross_motion(v[p], wn, tmp)
    for k in range(6):
        cp[k] += tmp[k]
        vp[k] = v[p, k] + wn[k]


@njit(cache=True, inline="always", fastmath=MATH)
def _mass_and_bias(i, m, nq, nv, body, kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs, mass, com, I_com,
                   q, qd, v, IA, pA, U, N, Nf, Gc, Gd, Gdf):
    """Pass 1's step for flexible body i (m > 0 modes; an argument so that
    :func:`flexible_forward_pass1` can give it as a constant): its mass matrix M(eta) into IA and
    U (the coupling block) and its velocity, elastic, damping and stiffening forces b into pA."""
    oi = body[i, B_I]
    op = body[i, B_P]
    # M(eta) and b as partree.flexible.body_mass_matrix and _flexible_bias form them, in scalars:
    # the second moment Y and its rate Yd are symmetric (their upper triangles)
    kd = body[i, B_KIND]
    ke = kinfo[kd, K_E]
    k2 = kinfo[kd, K_2]
    stiff = kinfo[kd, K_STIFF] != 0
    damp = kinfo[kd, K_DAMP] != 0
    e0 = nq + body[i, B_IE]
    d0 = nv + body[i, B_IE]
    # N_k = B_k + sum_l eta_l C_lk (the nonzero entries of C)
    for k in range(m):
        for a in range(3):
            for b in range(3):
                N[k, 3 * a + b] = xphi[ke + k, a, b]
    c0 = kinfo[kd, K_C]
    for t in range(c0, c0 + kinfo[kd, K_CN]):
        s = 0.0
        for l in range(m):
            s += sparse_v[t, l] * q[e0 + l]
        Nf[sparse_i[t]] += s
    mi = mass[i]
    cx, cy, cz = com[i, 0], com[i, 1], com[i, 2]
    sv0 = mi * cx
    sv1 = mi * cy
    sv2 = mi * cz
    sd0 = 0.0
    sd1 = 0.0
    sd2 = 0.0
    # Y = A + B_eta^T + sum_k eta_k N_k, A = integral rho x x^T = tr(Io)/2 1 - Io (Io the
    # undeformed inertia about the origin); Yd = sum_k eta_dot_k (N_k + N_k^T)
    cc = mi * (cx * cx + cy * cy + cz * cz)
    io00 = I_com[i, 0, 0] - mi * cx * cx + cc
    io11 = I_com[i, 1, 1] - mi * cy * cy + cc
    io22 = I_com[i, 2, 2] - mi * cz * cz + cc
    hA = 0.5 * (io00 + io11 + io22)
    Y00 = hA - io00
    Y11 = hA - io11
    Y22 = hA - io22
    Y01 = mi * cx * cy - I_com[i, 0, 1]
    Y02 = mi * cx * cz - I_com[i, 0, 2]
    Y12 = mi * cy * cz - I_com[i, 1, 2]
    D00 = 0.0
    D11 = 0.0
    D22 = 0.0
    D01 = 0.0
    D02 = 0.0
    D12 = 0.0
    for k in range(m):
        ek = q[e0 + k]
        edk = qd[d0 + k]
        f0, f1, f2 = first[ke + k, 0], first[ke + k, 1], first[ke + k, 2]
        sv0 += f0 * ek
        sv1 += f1 * ek
        sv2 += f2 * ek
        sd0 += f0 * edk
        sd1 += f1 * edk
        sd2 += f2 * edk
        n00, n01, n02 = N[k, 0], N[k, 1], N[k, 2]
        n10, n11, n12 = N[k, 3], N[k, 4], N[k, 5]
        n20, n21, n22 = N[k, 6], N[k, 7], N[k, 8]
        Y00 += ek * (xphi[ke + k, 0, 0] + n00)
        Y11 += ek * (xphi[ke + k, 1, 1] + n11)
        Y22 += ek * (xphi[ke + k, 2, 2] + n22)
        Y01 += ek * (xphi[ke + k, 1, 0] + n01)
        Y02 += ek * (xphi[ke + k, 2, 0] + n02)
        Y12 += ek * (xphi[ke + k, 2, 1] + n12)
        D00 += edk * (n00 + n00)
        D11 += edk * (n11 + n11)
        D22 += edk * (n22 + n22)
        D01 += edk * (n01 + n10)
        D02 += edk * (n02 + n20)
        D12 += edk * (n12 + n21)
        Gc[k, 0] = n12 - n21
        Gc[k, 1] = n20 - n02
        Gc[k, 2] = n01 - n10
    # Gd[:, k] = axial(sum_l eta_dot_l C_lk)
    for k in range(m):
        Gd[k, 0] = 0.0
        Gd[k, 1] = 0.0
        Gd[k, 2] = 0.0
    xo = kinfo[kd, K_X]
    for t in range(xo, xo + kinfo[kd, K_XN]):
        s = 0.0
        for l in range(m):
            s += sparse_v[t, l] * qd[d0 + l]
        Gdf[sparse_i[t]] += s
    # J = tr(Y) 1 - Y, Jd = tr(Yd) 1 - Yd
    J00 = Y11 + Y22
    J11 = Y00 + Y22
    J22 = Y00 + Y11
    Jd00 = D11 + D22
    Jd11 = D00 + D22
    Jd22 = D00 + D11
    # the mass matrix [[J, s~, G], [s~^T, m 1, S], [G^T, S^T, M_ee]]: the rigid and modal blocks'
    # lower triangles into IA, the coupling rows [G^T, S^T] into U
    IA[oi] = J00
    IA[oi + 1] = -Y01
    IA[oi + 2] = J11
    IA[oi + 3] = -Y02
    IA[oi + 4] = -Y12
    IA[oi + 5] = J22
    IA[oi + 6] = 0.0
    IA[oi + 7] = sv2
    IA[oi + 8] = -sv1
    IA[oi + 9] = mi
    IA[oi + 10] = -sv2
    IA[oi + 11] = 0.0
    IA[oi + 12] = sv0
    IA[oi + 13] = 0.0
    IA[oi + 14] = mi
    IA[oi + 15] = sv1
    IA[oi + 16] = -sv0
    IA[oi + 17] = 0.0
    IA[oi + 18] = 0.0
    IA[oi + 19] = 0.0
    IA[oi + 20] = mi
    for k in range(m):
        rk = 6 * (d0 + k)
        U[rk] = Gc[k, 0]
        U[rk + 1] = Gc[k, 1]
        U[rk + 2] = Gc[k, 2]
        U[rk + 3] = first[ke + k, 0]
        U[rk + 4] = first[ke + k, 1]
        U[rk + 5] = first[ke + k, 2]
        rk = oi + 21 + tri(k)
        for l in range(k + 1):
            IA[rk + l] = Mee[k2 + k * m + l]
    # h = M nu (its first six entries), f = the rigid rows of b without the v x* h term
    w0, w1, w2 = v[i, 0], v[i, 1], v[i, 2]
    V0, V1, V2 = v[i, 3], v[i, 4], v[i, 5]
    h0 = J00 * w0 - Y01 * w1 - Y02 * w2 + sv1 * V2 - sv2 * V1
    h1 = J11 * w1 - Y01 * w0 - Y12 * w2 + sv2 * V0 - sv0 * V2
    h2 = J22 * w2 - Y02 * w0 - Y12 * w1 + sv0 * V1 - sv1 * V0
    h3 = w1 * sv2 - w2 * sv1 + mi * V0
    h4 = w2 * sv0 - w0 * sv2 + mi * V1
    h5 = w0 * sv1 - w1 * sv0 + mi * V2
    g0 = Jd00 * w0 - D01 * w1 - D02 * w2 + sd1 * V2 - sd2 * V1
    g1 = Jd11 * w1 - D01 * w0 - D12 * w2 + sd2 * V0 - sd0 * V2
    g2 = Jd22 * w2 - D02 * w0 - D12 * w1 + sd0 * V1 - sd1 * V0
    # the modes' rows: 2 Gd_k.w - first_k.(V x w) + sum_ab N_k[a, b] (w_a w_b - |w|^2 1_ab)
    ww = w0 * w0 + w1 * w1 + w2 * w2
    p00 = w0 * w0 - ww
    p11 = w1 * w1 - ww
    p22 = w2 * w2 - ww
    p01 = w0 * w1
    p02 = w0 * w2
    p12 = w1 * w2
    x0 = V1 * w2 - V2 * w1
    x1 = V2 * w0 - V0 * w2
    x2 = V0 * w1 - V1 * w0
    for k in range(m):
        edk = qd[d0 + k]
        f0, f1, f2 = first[ke + k, 0], first[ke + k, 1], first[ke + k, 2]
        a0, a1, a2 = Gd[k, 0], Gd[k, 1], Gd[k, 2]
        h0 += Gc[k, 0] * edk
        h1 += Gc[k, 1] * edk
        h2 += Gc[k, 2] * edk
        h3 += f0 * edk
        h4 += f1 * edk
        h5 += f2 * edk
        g0 += a0 * edk
        g1 += a1 * edk
        g2 += a2 * edk
        bk = (2.0 * (a0 * w0 + a1 * w1 + a2 * w2) - (f0 * x0 + f1 * x1 + f2 * x2)
              + N[k, 0] * p00 + N[k, 4] * p11 + N[k, 8] * p22 + (N[k, 1] + N[k, 3]) * p01
              + (N[k, 2] + N[k, 6]) * p02 + (N[k, 5] + N[k, 7]) * p12)
        for l in range(m):
            bk += Kst[k2 + k * m + l] * q[e0 + l]
        if damp:
            for l in range(m):
                bk += Dmp[k2 + k * m + l] * qd[d0 + l]
        if stiff:
            for l in range(m):
                o = k2 + k * m + l
                g = 0.0
                for a in range(3):
                    g += v[i, a] * (Gs[o, a, 0] * w0 + Gs[o, a, 1] * w1 + Gs[o, a, 2] * w2)
                bk += g * q[e0 + l]
        pA[op + 6 + k] = bk
    # b's rigid rows: f + v x* h
    pA[op] = g0 + w1 * h2 - w2 * h1 + V1 * h5 - V2 * h4
    pA[op + 1] = g1 + w2 * h0 - w0 * h2 + V2 * h3 - V0 * h5
    pA[op + 2] = g2 + w0 * h1 - w1 * h0 + V0 * h4 - V1 * h3
    pA[op + 3] = w1 * sd2 - w2 * sd1 + w1 * h5 - w2 * h4
    pA[op + 4] = w2 * sd0 - w0 * sd2 + w2 * h3 - w0 * h5
    pA[op + 5] = w0 * sd1 - w1 * sd0 + w0 * h4 - w1 * h3


@njit(cache=True, inline="always", fastmath=MATH)
def shift_body(i, p, iv, nvi, nv, body, E, r, S, Y, qd, v, c, dv, w, vJ, t1, t2):
    """Body i's velocity v and velocity product c, computed with body 0 at rest, moved to body
    0's rates now in ``qd`` (the others as they were).  Both are affine in body 0's velocity:
    dv_i = X_i dv_p (dv_0 = S_0 qd_0), and dc_i = X_i (dv_p x w_i) + dv_i x vJ_i, with
    w_i = Y_i eta_dot_p the node's velocity relative to a flexible parent (zero elsewhere) and
    vJ_i = S_i qd_i the joint's.  dv (n, 6) holds the bodies' dv, parents first."""
    joint_velocity(S, qd, iv, nvi, vJ)
    if p < 0:
        # body 0 itself: its velocity is its joint's (a free joint at the identity: no c change)
        for k in range(6):
            dv[i, k] = vJ[k]
            v[i, k] = vJ[k]
        return
    xform_motion(E[i], r[i], dv[p], t1)
    for k in range(6):
        dv[i, k] = t1[k]
        v[i, k] += t1[k]
    cross_motion(t1, vJ, t2)
    for k in range(6):
        c[i, k] += t2[k]
    if body[i, B_NODE] >= 0:
        for k in range(6):
            w[k] = 0.0
        node_motion_add(i, p, body, Y, qd, nv, w)
        cross_motion(dv[p], w, t1)
        xform_motion(E[i], r[i], t1, t2)
        for k in range(6):
            c[i, k] += t2[k]


@njit(cache=True, fastmath=MATH)
def flexible_forward_pass1(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, nq, nv,
                           body, kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs, nodes, mmax,
                           q, qd, E, r, v, c, S, IA, pA, Y, U, stage=0):
    """Pass 1, outward: X_up (E, r), S, Y, v, c, M(eta) into IA and U (its coupling block's rows)
    and pA = b (velocity, elastic, damping and stiffening forces) of every body (arguments: the
    module's table).

    ``stage`` 0: all of it; 1: the kinematics only (E, r, S, Y, v, c); 2: the rest (IA, U and pA,
    from the v a stage 1 left); 3: stage 2 after moving each body's v and c, which stage 1 computed
    with body 0 at rest, to body 0's rates now in qd (:func:`shift_body`).  The parallel engine's
    parts split the pass so that the bodies a child part waits for go through the kinematics
    first, before their own incoming velocity (body 0's, a carrier's) is known."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, jtype, axis, axis2 = unowned(parent), unowned(jtype), unowned(axis), unowned(axis2)
    E_tree, r_tree, mass, com, I_com = unowned(E_tree), unowned(r_tree), unowned(mass), unowned(com), unowned(I_com)
    idx_q, idx_v, body, kinfo, first = unowned(idx_q), unowned(idx_v), unowned(body), unowned(kinfo), unowned(first)
    xphi, sparse_i, sparse_v, Mee = unowned(xphi), unowned(sparse_i), unowned(sparse_v), unowned(Mee)
    Kst, Dmp, Gs, nodes, q, qd = unowned(Kst), unowned(Dmp), unowned(Gs), unowned(nodes), unowned(q), unowned(qd)
    E, r, v, c, S, IA, pA = unowned(E), unowned(r), unowned(v), unowned(c), unowned(S), unowned(IA), unowned(pA)
    Y, U = unowned(Y), unowned(U)
    n = parent.shape[0]
    # the scratch, as views of one array that count no references (passed to the inlined steps
    # per body, views that count them would cost two atomic operations each); ``own`` holds the
    # memory and is used again after the loop, so that it lives as long as the views
    mm = max(mmax, 1)
    own = np.empty(153 + 15 * mm + (6 * n if stage == 3 else 0))
    R = raw_view(own, 0, (3, 3))
    R2 = raw_view(own, 9, (3, 3))
    Rn = raw_view(own, 18, (3, 3))
    Jr = raw_view(own, 27, (3, 3))
    Jrd = raw_view(own, 36, (3, 3))
    Ep = raw_view(own, 45, (3, 3))
    rp = raw_view(own, 54, (3,))
    th = raw_view(own, 57, (3,))
    thd = raw_view(own, 60, (3,))
    ph = raw_view(own, 63, (3,))
    jt = raw_view(own, 66, (3,))
    cJ = raw_view(own, 69, (6,))
    vJ = raw_view(own, 75, (6,))
    vp = raw_view(own, 81, (6,))
    cp = raw_view(own, 87, (6,))
    wn = raw_view(own, 93, (6,))
    tmp = raw_view(own, 99, (6,))
    h = raw_view(own, 105, (6,))
    f = raw_view(own, 111, (6,))
    I6 = raw_view(own, 117, (6, 6))
    N = raw_view(own, 153, (mm, 9))
    Nf = raw_view(own, 153, (9 * mm,))
    Gc = raw_view(own, 153 + 9 * mm, (mm, 3))
    Gd = raw_view(own, 153 + 12 * mm, (mm, 3))
    Gdf = raw_view(own, 153 + 12 * mm, (3 * mm,))
    dv = raw_view(own, 153 + 15 * mm, (n if stage == 3 else 0, 6))
    for i in range(n):
        if stage == 3:
            iv = idx_v[i]
            shift_body(i, parent[i], iv, idx_v[i + 1] - iv if i + 1 < n else nv - iv, nv, body, E, r, S, Y, qd, v,
                       c, dv, wn, vJ, tmp, h)
        if stage < 2:
            p = parent[i]
            iv = idx_v[i]
            on = body[i, B_NODE]
            if on >= 0:
                # the node of the flexible parent: rotation exp(Psi eta_p), translation Phi eta_p
                mp = body[p, B_NM]
                if mp == FIXED_MODES:
                    _node_kinematics(i, p, on, FIXED_MODES, nq, nv, body, E_tree, r_tree, nodes, q, qd, v, Y, th, thd,
                                     rp, ph, Rn, Jr, Jrd, Ep, wn, jt, cp, vp, tmp)
                else:
                    _node_kinematics(i, p, on, mp, nq, nv, body, E_tree, r_tree, nodes, q, qd, v, Y, th, thd, rp, ph,
                                     Rn, Jr, Jrd, Ep, wn, jt, cp, vp, tmp)
            else:
                for k in range(3):
                    rp[k] = r_tree[i, k]
                    for l in range(3):
                        Ep[k, l] = E_tree[i, k, l]
                for k in range(6):
                    cp[k] = 0.0
                    vp[k] = v[p, k] if p >= 0 else 0.0
            nvi = joint_kinematics(jtype[i], axis[i], axis2[i], q, idx_q[i], qd, iv, Ep, rp, E[i], r[i], S[iv:], cJ,
                                   R, R2)
            joint_velocity(S, qd, iv, nvi, vJ)
            if p < 0:
                for k in range(6):
                    v[i, k] = vJ[k]
                    c[i, k] = cJ[k]
            else:
                xform_motion(E[i], r[i], vp, tmp)
                for k in range(6):
                    v[i, k] = tmp[k] + vJ[k]
                xform_motion(E[i], r[i], cp, h)
                cross_motion(v[i], vJ, tmp)
                for k in range(6):
                    c[i, k] = h[k] + cJ[k] + tmp[k]
        if stage == 1:
            continue
        m = body[i, B_NM]
        oi = body[i, B_I]
        op = body[i, B_P]
        if m == 0:
            inertia_from_compact(mass[i], com[i], I_com[i], I6)
            for k in range(6):
                for l in range(k + 1):
                    IA[oi + tri(k) + l] = I6[k, l]
            inertia_times(mass[i], com[i], I_com[i], v[i], h)
            cross_force(v[i], h, f)
            for k in range(6):
                pA[op + k] = f[k]
            continue
        if m == FIXED_MODES:
            _mass_and_bias(i, FIXED_MODES, nq, nv, body, kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs,
                           mass, com, I_com, q, qd, v, IA, pA, U, N, Nf, Gc, Gd, Gdf)
        else:
            _mass_and_bias(i, m, nq, nv, body, kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs, mass, com,
                           I_com, q, qd, v, IA, pA, U, N, Nf, Gc, Gd, Gdf)
    own[0] = 0.0        # the scratch's memory held to here


# ----------------------------------------------------------------------------- external loads
@njit(cache=True, fastmath=MATH)
def flexible_apply_loads(nq, body, f_ext, ld_body, ld_off, ld_w, ld_data, q, pA):
    """Subtract the generalized forces of the external loads from pA (after pass 1: pA holds
    every body's velocity, elastic and damping forces b).

    A wrench f_ext[i] = [n; f] at body i's origin acts on the body frame only: [n; f] on its six
    rigid rows, nothing on its modes.  A load w = [n; f] at a node of flexible body i (body-frame
    axes, moment about the node's deformed point p = x + Phi eta) acts on the node frame, whose
    velocity is [v + Y eta_dot] with Y = [J_l Psi; Phi + p x J_l Psi] (pass 1's node map): its
    generalized force is F = [n + p x f; f] on the rigid rows (the wrench moved to the origin) and
    Y^T F = Psi^T J_l^T n + Phi^T f on the modes (J_l = J_r^T of the node rotation exp(Psi eta))."""
    n = body.shape[0]
    if f_ext.shape[0] == n:
        for i in range(n):
            op = body[i, B_P]
            for k in range(6):
                pA[op + k] -= f_ext[i, k]
    nl = ld_body.shape[0]
    if nl == 0:
        return
    th = np.empty(3)
    zero = np.zeros(3)
    pn = np.empty(3)
    g = np.empty(3)
    Rn = np.empty((3, 3))
    Jr = np.empty((3, 3))
    Jrd = np.empty((3, 3))
    for t in range(nl):
        i = ld_body[t]
        m = body[i, B_NM]
        o = ld_off[t]
        e0 = nq + body[i, B_IE]
        for k in range(3):
            s1 = 0.0
            s2 = 0.0
            for l in range(m):
                e = q[e0 + l]
                s1 += ld_data[o + 3 + k * m + l] * e
                s2 += ld_data[o + 3 + (3 + k) * m + l] * e
            th[k] = s1
            pn[k] = ld_data[o + k] + s2
        _node_rotation(th, zero, Rn, Jr, Jrd)
        n0, n1, n2 = ld_w[t, 0], ld_w[t, 1], ld_w[t, 2]
        f0, f1, f2 = ld_w[t, 3], ld_w[t, 4], ld_w[t, 5]
        op = body[i, B_P]
        pA[op + 0] -= n0 + pn[1] * f2 - pn[2] * f1
        pA[op + 1] -= n1 + pn[2] * f0 - pn[0] * f2
        pA[op + 2] -= n2 + pn[0] * f1 - pn[1] * f0
        pA[op + 3] -= f0
        pA[op + 4] -= f1
        pA[op + 5] -= f2
        for k in range(3):
            g[k] = Jr[k, 0] * n0 + Jr[k, 1] * n1 + Jr[k, 2] * n2
        for l in range(m):
            s = 0.0
            for k in range(3):
                s += ld_data[o + 3 + k * m + l] * g[k]
            s += ld_data[o + 3 + 3 * m + l] * f0 + ld_data[o + 3 + 4 * m + l] * f1 + ld_data[o + 3 + 5 * m + l] * f2
            pA[op + 6 + l] -= s


# ----------------------------------------------------------------------------- pass 2
@njit(cache=True, inline="always", fastmath=MATH)
def _eliminate_body(i, m, nj, act, nvi, iv, parent, nv, body, tau, qdd_in, E, r, c, S, IA, pA, Y, U, u, L,
                    W, y, Ia, pa, P, T, pf, ch, Q):
    """Pass 2's step at body i (m modes, nj passive joint velocities; the sizes are arguments so
    that :func:`flexible_backward_pass` can give them as constants): U, u, D's factors L, and the
    articulated inertia Ia and bias pa moved to the parent's frame, P = X_up^T Ia X_up and
    pf = X_up^T pa (:func:`_to_parent` adds them there).  False where D is not positive definite."""
    oi = body[i, B_I]
    op = body[i, B_P]
    oz = body[i, B_Z]
    ol = body[i, B_L]
    npas = nj + m
    # U = IA S over the passive joint columns (first six rows kept: the modes' columns of
    # IA S_hat, the coupling block's rows, are in U from pass 1 on), u, and D = S_hat^T IA S_hat's
    # lower triangle (row by row at L[ol:], as ``tri`` says)
    ie = body[i, B_IE]
    oc = 6 * (nv + ie)
    for a in range(nj):
        ua = 6 * (iv + a)
        for k in range(6):
            s = 0.0
            for l in range(6):
                s += IA[oi + sym(k, l)] * S[iv + a, l]
            U[ua + k] = s
        s = tau[iv + a]
        for k in range(6):
            s -= S[iv + a, k] * pA[op + k]
        u[oz + a] = s
        for b in range(a + 1):
            s = 0.0
            for k in range(6):
                s += S[iv + b, k] * U[ua + k]
            L[ol + tri(a) + b] = s
        for k in range(m):
            ro = oc + 6 * k
            s = 0.0
            for l in range(6):
                s += U[ro + l] * S[iv + a, l]
            L[ol + tri(nj + k) + a] = s
    for k in range(m):
        ro = oi + 21 + tri(k)
        u[oz + nj + k] = tau[nv + ie + k] - pA[op + 6 + k]
        lo = ol + tri(nj + k) + nj
        for l in range(k + 1):
            L[lo + l] = IA[ro + l]
    # D = L diag(d) L^T, row by row (see ``ldl_solve``): row a's entries first as G = L diag(d)
    # (G_at = D_at - sum_j<t G_aj L_tj), then scaled; one division per pivot and no square root,
    # which on this chain of dependent rows is what a Cholesky factor would wait for
    for a in range(npas):
        ra = ol + tri(a)
        for t in range(a):
            rt = ol + tri(t)
            s = L[ra + t]
            for j in range(t):
                s -= L[ra + j] * L[rt + j]
            L[ra + t] = s
        s = L[ra + a]
        for t in range(a):
            g = L[ra + t]
            f = g * L[ol + tri(t) + t]
            s -= g * f
            L[ra + t] = f
        if not s > 0.0:
            return False
        L[ra + a] = 1.0 / s
    p = parent[i]
    if p < 0:
        return True
    # the velocity product with the given accelerations of an active joint
    for k in range(6):
        ch[k] = c[i, k]
    if act:
        for a in range(nvi):
            w = qdd_in[iv + a]
            for k in range(6):
                ch[k] += S[iv + a, k] * w
    # Ia = IA6 - U D^-1 U^T = IA6 - W^T diag(1/d) W with W = L^-1 U^T;
    # pa = pA6 + Ia ch + W^T diag(1/d) L^-1 u
    for a in range(npas):
        ra = ol + tri(a)
        ro = u_row(a, iv, nj, oc)
        for k in range(6):
            W[a, k] = U[ro + k]
        s = u[oz + a]
        for t in range(a):
            f = L[ra + t]
            s -= f * y[t]
            for k in range(6):
                W[a, k] -= f * W[t, k]
        y[a] = s
    for k in range(6):
        pa[k] = pA[op + k]
        for l in range(k, 6):
            Ia[k, l] = IA[oi + tri(l) + k]
    for a in range(npas):
        rd = L[ol + tri(a) + a]
        ya = y[a] * rd
        for k in range(6):
            wk = W[a, k] * rd
            pa[k] += W[a, k] * ya
            for l in range(k, 6):
                Ia[k, l] -= wk * W[a, l]
    for k in range(6):
        for l in range(k + 1, 6):
            Ia[l, k] = Ia[k, l]
    for k in range(6):
        s = 0.0
        for l in range(6):
            s += Ia[k, l] * ch[l]
        pa[k] += s
    # moved to the parent: P = X_up^T Ia X_up, pf = X_up^T pa
    for k in range(6):
        pf[k] = 0.0
        for l in range(6):
            P[k, l] = 0.0
    congruence_add(E[i], r[i], Ia, P, T)
    xform_force_T_add(E[i], r[i], pa, pf)
    return True


@njit(cache=True, inline="always", fastmath=MATH)
def _y_column(Y, o):
    """The six entries of a node map's column at Y[o:o + 6], as scalars."""
    return Y[o], Y[o + 1], Y[o + 2], Y[o + 3], Y[o + 4], Y[o + 5]


@njit(cache=True, inline="always", fastmath=MATH)
def _to_parent(oy, oip, opp, ocp, mp, IA, pA, U, Y, P, pf, Q):
    """Add a child's moved articulated inertia P and bias pf to its parent's inertia and pA (IA
    at oip, the coupling rows in U at ocp, pA at opp; mp modes), spread over the parent's modes by
    the child's node map Y (at oy): [1 | Y]^T P [1 | Y] and [1 | Y]^T pf."""
    for k in range(6):
        pA[opp + k] += pf[k]
        for l in range(k + 1):
            IA[oip + tri(k) + l] += P[k, l]
    if mp == 0:
        return
    # Q = P Y, column l at Q[l]; the parent's coupling block row by row
    for l in range(mp):
        y0, y1, y2, y3, y4, y5 = _y_column(Y, oy + 6 * l)
        rl = ocp + 6 * l
        for k in range(6):
            s = P[k, 0] * y0 + P[k, 1] * y1 + P[k, 2] * y2 + P[k, 3] * y3 + P[k, 4] * y4 + P[k, 5] * y5
            Q[l, k] = s
            U[rl + k] += s
        pA[opp + 6 + l] += y0 * pf[0] + y1 * pf[1] + y2 * pf[2] + y3 * pf[3] + y4 * pf[4] + y5 * pf[5]
    # Y^T Q on the modal block's lower triangle, column by column
    for k in range(mp):
        y0, y1, y2, y3, y4, y5 = _y_column(Y, oy + 6 * k)
        for l in range(k, mp):
            IA[oip + 21 + tri(l) + k] += (y0 * Q[l, 0] + y1 * Q[l, 1] + y2 * Q[l, 2] + y3 * Q[l, 3]
                                          + y4 * Q[l, 4] + y5 * Q[l, 5])


@njit(cache=True, fastmath=MATH)
def flexible_backward_pass(parent, idx_v, nv, body, mmax, active, tau, qdd_in, E, r, c, S, IA, pA, Y, U, u, L):
    """Pass 2, inward: articulated inertias (IA and the coupling rows in U) and biases pA (in
    place), U's joint rows, u and the factors L diag(d) L^T of D over each body's passive
    coordinates (``ldl_solve``).  Returns -1, or the body whose D is not positive definite.

    D's lower triangle is formed in L and factored there row by row; Ia = IA6 - W^T diag(1/d) W
    is formed on its upper triangle and mirrored.  Bodies of FIXED_MODES modes on joints of FIXED_JOINT
    passive velocities take the step compiled for those sizes."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, body, active, tau = unowned(parent), unowned(idx_v), unowned(body), unowned(active), unowned(tau)
    qdd_in, E, r, c, S, IA = unowned(qdd_in), unowned(E), unowned(r), unowned(c), unowned(S), unowned(IA)
    pA, Y, U, u, L = unowned(pA), unowned(Y), unowned(U), unowned(u), unowned(L)
    n = parent.shape[0]
    nz = 6 + max(mmax, 0)
    mm = max(mmax, 1)
    # the scratch, as views of one array that count no references (see flexible_forward_pass1)
    own = np.empty(132 + 7 * nz + 6 * mm)
    Ia = raw_view(own, 0, (6, 6))
    P = raw_view(own, 36, (6, 6))
    T = raw_view(own, 72, (6, 6))
    pa = raw_view(own, 108, (6,))
    pf = raw_view(own, 114, (6,))
    ch = raw_view(own, 120, (6,))
    W = raw_view(own, 132, (nz, 6))
    y = raw_view(own, 132 + 6 * nz, (nz,))
    Q = raw_view(own, 132 + 7 * nz, (mm, 6))
    hybrid = active.shape[0] > 0
    for i in range(n - 1, -1, -1):
        m = body[i, B_NM]
        iv = idx_v[i]
        nvi = idx_v[i + 1] - iv if i + 1 < n else nv - iv
        act = hybrid and active[i]
        nj = 0 if act else nvi
        if m == FIXED_MODES and nj == FIXED_JOINT:
            ok = _eliminate_body(i, FIXED_MODES, FIXED_JOINT, act, nvi, iv, parent, nv, body, tau, qdd_in, E, r, c,
                                 S, IA, pA, Y, U, u, L, W, y, Ia, pa, P, T, pf, ch, Q)
        else:
            ok = _eliminate_body(i, m, nj, act, nvi, iv, parent, nv, body, tau, qdd_in, E, r, c, S, IA, pA, Y, U, u,
                                 L, W, y, Ia, pa, P, T, pf, ch, Q)
        if not ok:
            own[0] = 0.0
            return i
        p = parent[i]
        if p >= 0:
            mp = body[p, B_NM]
            if mp == FIXED_MODES:
                _to_parent(body[i, B_Y], body[p, B_I], body[p, B_P], 6 * (nv + body[p, B_IE]), FIXED_MODES, IA, pA,
                           U, Y, P, pf, Q)
            else:
                _to_parent(body[i, B_Y], body[p, B_I], body[p, B_P], 6 * (nv + body[p, B_IE]), mp, IA, pA, U, Y, P,
                           pf, Q)
    own[0] = 0.0        # the scratch's memory held to here
    return -1


# ----------------------------------------------------------------------------- pass 3
@njit(cache=True, fastmath=MATH)
def _attachment_acceleration(i, p, body, a, Y, qdd, nv, gravity, ap):
    """ap = the acceleration, in the parent's frame, of the node where body i hangs from its
    parent p: the parent's rigid acceleration plus its modes' through the node map Y; at the
    base (p < 0) the gravity field [0; -g]."""
    if p < 0:
        for k in range(3):
            ap[k] = 0.0
            ap[3 + k] = -gravity[k]
        return
    for k in range(6):
        ap[k] = a[p, k]
    node_motion_add(i, p, body, Y, qdd, nv, ap)


@njit(cache=True, inline="always", fastmath=MATH)
def node_motion_add(i, p, body, Y, x, nv, out):
    """out += Y_i x_p: the motion of the node where body i hangs from its parent p due to the
    parent's modal rates (or accelerations) in x (a full vector, the modes after nv); nothing
    where p is rigid."""
    mp = body[p, B_NM]
    if mp > 0:
        oy = body[i, B_Y]
        e0 = nv + body[p, B_IE]
        for k in range(6):
            s = 0.0
            for l in range(mp):
                s += Y[oy + 6 * l + k] * x[e0 + l]
            out[k] += s


@njit(cache=True, inline="always", fastmath=MATH)
def joint_velocity(S, qd, iv, nvi, out):
    """out = S_i qd_i, the joint's velocity (its nvi motion subspace rows from S[iv])."""
    for k in range(6):
        out[k] = 0.0
    for d in range(nvi):
        for k in range(6):
            out[k] += S[iv + d, k] * qd[iv + d]


@njit(cache=True, inline="always", fastmath=MATH)
def outward_step(i, iv, nvi, nj, npas, act, nv, body, c, S, U, u, L, qdd_in, ah, z):
    """Pass 3's step at body i from ah = X_up a_attachment (in place): ah += c_i and the given
    accelerations of an active joint; z = D^-1 (u - U^T ah), the passive coordinates'
    accelerations (U's rows: the passive joints', then the body's modes'); ah += S z over the
    passive joint velocities (nj of the npas coordinates), so that ah ends as the body's
    acceleration.  Shared with the flexible parts' walk (``partree.parallel.flexible_part``)."""
    oz = body[i, B_Z]
    for k in range(6):
        ah[k] += c[i, k]
    if act:
        for b in range(nvi):
            w = qdd_in[iv + b]
            for k in range(6):
                ah[k] += S[iv + b, k] * w
    oc = 6 * (nv + body[i, B_IE])
    for b in range(npas):
        ro = u_row(b, iv, nj, oc)
        s = u[oz + b]
        for k in range(6):
            s -= U[ro + k] * ah[k]
        z[b] = s
    ldl_solve(L, body[i, B_L], npas, z)
    for b in range(nj):
        for k in range(6):
            ah[k] += S[iv + b, k] * z[b]


@njit(cache=True, inline="always", fastmath=MATH)
def _outward_body(i, m, nj, act, nvi, iv, parent, nv, body, gravity, qdd_in, E, r, c, S, IA, pA, Y, U, u, L, a, qdd,
                  tau_out, z, ap, ah):
    """Pass 3's step at body i (m modes, nj passive joint velocities; the sizes are arguments so
    that :func:`flexible_forward_pass2` can give them as constants)."""
    _attachment_acceleration(i, parent[i], body, a, Y, qdd, nv, gravity, ap)
    xform_motion(E[i], r[i], ap, ah)
    outward_step(i, iv, nvi, nj, nj + m, act, nv, body, c, S, U, u, L, qdd_in, ah, z)
    if act:
        for b in range(nvi):
            qdd[iv + b] = qdd_in[iv + b]
    for b in range(nj):
        qdd[iv + b] = z[b]
    ie = body[i, B_IE]
    for k in range(m):
        qdd[nv + ie + k] = z[nj + k]
    for k in range(6):
        a[i, k] = ah[k]
    if act and nvi > 0:
        oi = body[i, B_I]
        op = body[i, B_P]
        for k in range(6):
            s = pA[op + k]
            for l in range(6):
                s += IA[oi + sym(k, l)] * ah[l]
            for l in range(m):
                s += U[6 * (nv + ie + l) + k] * qdd[nv + ie + l]
            ap[k] = s
        for b in range(nvi):
            s = 0.0
            for k in range(6):
                s += S[iv + b, k] * ap[k]
            tau_out[iv + b] = s


@njit(cache=True, fastmath=MATH)
def flexible_forward_pass2(parent, idx_v, nv, body, mmax, gravity, active, qdd_in, E, r, c, S, IA, pA, Y, U, u, L,
                           a, qdd, tau_out):
    """Pass 3, outward from a0 = [0; -g]: accelerations a (rigid part, n x 6), qdd of the passive
    coordinates (D^-1 (u - U^T a')), the given ones copied; tau_out of the active joints
    S^T (IA [a; eta_dd] + pA).  Bodies of FIXED_MODES modes on joints of FIXED_JOINT passive
    velocities take the step compiled for those sizes."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, body, gravity = unowned(parent), unowned(idx_v), unowned(body), unowned(gravity)
    active, qdd_in, E, r, c, S = unowned(active), unowned(qdd_in), unowned(E), unowned(r), unowned(c), unowned(S)
    IA, pA, Y, U, u, L, a = unowned(IA), unowned(pA), unowned(Y), unowned(U), unowned(u), unowned(L), unowned(a)
    qdd, tau_out = unowned(qdd), unowned(tau_out)
    n = parent.shape[0]
    nz = 6 + max(mmax, 0)
    # the scratch, as views of one array that count no references (see flexible_forward_pass1)
    own = np.empty(12 + nz)
    ap = raw_view(own, 0, (6,))
    ah = raw_view(own, 6, (6,))
    z = raw_view(own, 12, (nz,))
    hybrid = active.shape[0] > 0
    for i in range(n):
        m = body[i, B_NM]
        iv = idx_v[i]
        nvi = idx_v[i + 1] - iv if i + 1 < n else nv - iv
        act = hybrid and active[i]
        nj = 0 if act else nvi
        if m == FIXED_MODES and nj == FIXED_JOINT:
            _outward_body(i, FIXED_MODES, FIXED_JOINT, act, nvi, iv, parent, nv, body, gravity, qdd_in, E, r, c, S,
                          IA, pA, Y, U, u, L, a, qdd, tau_out, z, ap, ah)
        else:
            _outward_body(i, m, nj, act, nvi, iv, parent, nv, body, gravity, qdd_in, E, r, c, S, IA, pA, Y, U, u, L,
                          a, qdd, tau_out, z, ap, ah)
    own[0] = 0.0        # the scratch's memory held to here


@njit(cache=True, fastmath=MATH)
def flexible_articulated_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, nq, nv,
                                body, kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs, nodes, mmax,
                                gravity, q, qd, tau, active, qdd_in, f_ext, ld_body, ld_off, ld_w, ld_data,
                                E, r, v, c, a, S, IA, pA, Y, U, u, L, qdd, tau_out):
    """The three passes, the external loads between the first two (arguments: the module's
    table).  qdd must hold qdd_in and tau_out tau on entry.  Returns -1, or the body whose passive
    coordinates have a singular articulated inertia."""
    flexible_forward_pass1(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, nq, nv,
                           body, kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs, nodes, mmax,
                           q, qd, E, r, v, c, S, IA, pA, Y, U)
    flexible_apply_loads(nq, body, f_ext, ld_body, ld_off, ld_w, ld_data, q, pA)
    bad = flexible_backward_pass(parent, idx_v, nv, body, mmax, active, tau, qdd_in, E, r, c, S, IA, pA, Y, U, u, L)
    if bad >= 0:
        return bad
    flexible_forward_pass2(parent, idx_v, nv, body, mmax, gravity, active, qdd_in, E, r, c, S, IA, pA, Y, U, u, L,
                           a, qdd, tau_out)
    return -1


# ----------------------------------------------------------------------------- inverse dynamics
@njit(cache=True, fastmath=MATH)
def flexible_rnea_passes(parent, idx_v, nv, body, gravity, qdd, E, r, c, S, IA, pA, Y, U, a, tau):
    """Inverse dynamics after pass 1 (IA and U holding every body's M(eta), pA its b):
    :func:`flexible_rnea_outward` then :func:`flexible_rnea_inward`."""
    flexible_rnea_outward(parent, idx_v, nv, body, gravity, qdd, E, r, c, S, IA, pA, Y, U, a)
    flexible_rnea_inward(parent, idx_v, nv, body, E, r, S, pA, Y, tau)


@njit(cache=True, fastmath=MATH)
def flexible_rnea_outward(parent, idx_v, nv, body, gravity, qdd, E, r, c, S, IA, pA, Y, U, a):
    """Outward, after pass 1: the accelerations a_i = X_up (a_p + Y eta_dd_p) + S qdd_i + c_i and
    the body forces f_i = M_i [a_i; eta_dd_i] + b_i (written over pA)."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, body, gravity, qdd = unowned(parent), unowned(idx_v), unowned(body), unowned(gravity), unowned(qdd)
    E, r, c, S, IA, pA = unowned(E), unowned(r), unowned(c), unowned(S), unowned(IA), unowned(pA)
    Y, U, a = unowned(Y), unowned(U), unowned(a)
    n = parent.shape[0]
    # the scratch, as views that count no references (see flexible_forward_pass1)
    own = np.empty(12)
    ap = raw_view(own, 0, (6,))
    ah = raw_view(own, 6, (6,))
    for i in range(n):
        p = parent[i]
        iv = idx_v[i]
        nvi = idx_v[i + 1] - iv if i + 1 < n else nv - iv
        _attachment_acceleration(i, p, body, a, Y, qdd, nv, gravity, ap)
        xform_motion(E[i], r[i], ap, ah)
        for k in range(6):
            ah[k] += c[i, k]
        for b in range(nvi):
            w = qdd[iv + b]
            for k in range(6):
                ah[k] += S[iv + b, k] * w
        for k in range(6):
            a[i, k] = ah[k]
        m = body[i, B_NM]
        oi = body[i, B_I]
        op = body[i, B_P]
        e0 = nv + body[i, B_IE]
        # f = M [a; eta_dd] + b, M = [[R, C^T], [C, Mm]]: the rigid rows R a + C^T eta_dd, the
        # modes' rows C a + Mm eta_dd (R and Mm from their lower triangles in IA, C's rows in U)
        for k in range(6):
            s = pA[op + k]
            for l in range(6):
                s += IA[oi + sym(k, l)] * ah[l]
            for l in range(m):
                s += U[6 * (e0 + l) + k] * qdd[e0 + l]
            pA[op + k] = s
        for k in range(m):
            s = pA[op + 6 + k]
            for l in range(6):
                s += U[6 * (e0 + k) + l] * ah[l]
            for l in range(m):
                s += IA[oi + 21 + sym(k, l)] * qdd[e0 + l]
            pA[op + 6 + k] = s
    own[0] = 0.0        # the scratch's memory held to here


@njit(cache=True, fastmath=MATH)
def flexible_rnea_inward(parent, idx_v, nv, body, E, r, S, pA, Y, tau):
    """Inward, after :func:`flexible_rnea_outward`: tau = S_hat^T f_i and
    f_p += [1 | Y]^T X_up^T f_i[:6], so that pA[B_P(i):B_P(i) + 6] ends as the wrench joint i
    transmits to body i, in body i's frame."""
    # the array arguments as views that count no references (see ``unowned``)
    parent, idx_v, body, E, r, S = unowned(parent), unowned(idx_v), unowned(body), unowned(E), unowned(r), unowned(S)
    pA, Y, tau = unowned(pA), unowned(Y), unowned(tau)
    n = parent.shape[0]
    own = np.empty(6)       # f6 as a view that counts no references (see flexible_forward_pass1)
    f6 = raw_view(own, 0, (6,))
    for i in range(n - 1, -1, -1):
        p = parent[i]
        iv = idx_v[i]
        nvi = idx_v[i + 1] - iv if i + 1 < n else nv - iv
        m = body[i, B_NM]
        op = body[i, B_P]
        e0 = nv + body[i, B_IE]
        for b in range(nvi):
            s = 0.0
            for k in range(6):
                s += S[iv + b, k] * pA[op + k]
            tau[iv + b] = s
        for k in range(m):
            tau[e0 + k] = pA[op + 6 + k]
        if p < 0:
            continue
        for k in range(6):
            f6[k] = 0.0
        xform_force_T_add(E[i], r[i], pA[op:op + 6], f6)
        opp = body[p, B_P]
        for k in range(6):
            pA[opp + k] += f6[k]
        mp = body[p, B_NM]
        if mp > 0:
            oy = body[i, B_Y]
            for l in range(mp):
                s = 0.0
                for k in range(6):
                    s += Y[oy + 6 * l + k] * f6[k]
                pA[opp + 6 + l] += s
    own[0] = 0.0        # the scratch's memory held to here


@njit(cache=True, fastmath=MATH)
def flexible_rnea_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, nq, nv, body,
                         kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs, nodes, mmax, gravity, q, qd, qdd,
                         f_ext, ld_body, ld_off, ld_w, ld_data, E, r, v, c, a, S, IA, pA, Y, U, tau):
    """Inverse dynamics: pass 1, the external loads (:func:`flexible_apply_loads`), then
    :func:`flexible_rnea_passes` (arguments: the module's table; qdd (nv + ne,) the accelerations,
    tau (nv + ne,) the result)."""
    flexible_forward_pass1(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, nq, nv,
                           body, kinfo, first, xphi, sparse_i, sparse_v, Mee, Kst, Dmp, Gs, nodes, mmax,
                           q, qd, E, r, v, c, S, IA, pA, Y, U)
    flexible_apply_loads(nq, body, f_ext, ld_body, ld_off, ld_w, ld_data, q, pA)
    flexible_rnea_passes(parent, idx_v, nv, body, gravity, qdd, E, r, c, S, IA, pA, Y, U, a, tau)


# ----------------------------------------------------------------------------- packing
class FlexiblePack:
    """A model's flexible data as the kernels' flat arrays, with a workspace of the right sizes
    (built once per model by :func:`flexible_pack`).  Pickled, it drops its arrays and is built
    again on the next call."""

    def __init__(self, model):
        fl = model.flexible
        n = model.n
        self.source = fl
        self.nv_j = np.array(model.nv_j, dtype=np.int64)
        nm = np.zeros(n, dtype=np.int64) if fl is None else np.asarray(fl.nmodes, dtype=np.int64)
        ie = np.zeros(n, dtype=np.int64) if fl is None else np.asarray(fl.idx_eta, dtype=np.int64)
        self.ne = 0 if fl is None else int(fl.n_modal)
        self.mmax = int(nm.max()) if n else 0
        body = np.zeros((n, BODY_COLUMNS), dtype=np.int64)
        body[:, B_NM] = nm
        body[:, B_IE] = ie
        body[:, B_KIND] = -1
        body[:, B_NODE] = -1
        # kinds: one per distinct FlexibleBody object
        kinds = {}
        order = []
        for i in sorted(fl.bodies) if fl is not None else ():
            b = fl.bodies[i]
            if id(b) not in kinds:
                kinds[id(b)] = len(order)
                order.append(b)
            body[i, B_KIND] = kinds[id(b)]
        nk = max(len(order), 1)
        kinfo = np.zeros((nk, KINFO_COLUMNS), dtype=np.int64)
        me = sum(b.m for b in order)
        m2 = sum(b.m * b.m for b in order)
        first = np.zeros((max(me, 1), 3))
        xphi = np.zeros((max(me, 1), 3, 3))
        sp_i, sp_v = [np.zeros(0, dtype=np.int64)], [np.zeros((0, max(self.mmax, 1)))]
        nsp = 0
        Mee = np.zeros(max(m2, 1))
        Kst = np.zeros(max(m2, 1))
        Dmp = np.zeros(max(m2, 1))
        Gs = np.zeros((max(m2, 1), 3, 3))
        oe = o2 = 0
        for kd, b in enumerate(order):
            m = b.m
            C = b.phiphi                                     # C[l, k] = C_lk
            ax = np.stack((C[..., 1, 2] - C[..., 2, 1], C[..., 2, 0] - C[..., 0, 2], C[..., 0, 1] - C[..., 1, 0]),
                          axis=-1)
            entries = []
            for arr in (C.reshape(m, m, 9), ax):           # [l, k, entry]
                idx = np.argwhere(np.any(arr != 0.0, axis=0))   # (k, entry) nonzero for some l
                sp_i.append((idx[:, 0] * arr.shape[2] + idx[:, 1]).astype(np.int64))
                vals = np.zeros((len(idx), max(self.mmax, 1)))
                vals[:, :m] = arr[:, idx[:, 0], idx[:, 1]].T
                sp_v.append(vals)
                entries.append((nsp, len(idx)))
                nsp += len(idx)
            kinfo[kd, K_E], kinfo[kd, K_2] = oe, o2
            kinfo[kd, K_STIFF] = int(b.stiffening is not None)
            kinfo[kd, K_DAMP] = int(np.any(b.damping != 0.0))
            (kinfo[kd, K_C], kinfo[kd, K_CN]), (kinfo[kd, K_X], kinfo[kd, K_XN]) = entries
            first[oe:oe + m] = b.first.T
            xphi[oe:oe + m] = b.xphi
            Mee[o2:o2 + m * m] = b.modal_mass.ravel()
            Kst[o2:o2 + m * m] = b.stiffness.ravel()
            Dmp[o2:o2 + m * m] = b.damping.ravel()
            if b.stiffening is not None:
                Gs[o2:o2 + m * m] = b.stiffening.transpose(2, 3, 0, 1).reshape(m * m, 3, 3)
            oe += m
            o2 += m * m
        # attachment nodes, one per (flexible body, node name)
        node_off = {}
        chunks = []
        ono = 0
        parent = model.parent
        for cidx, name in (sorted(fl.node_of.items()) if fl is not None else ()):
            p = int(parent[cidx])
            b = fl.bodies[p]
            key = (id(b), name)
            if key not in node_off:
                _, Phi, Psi = b.nodes[name]
                node_off[key] = ono
                chunks.append(np.concatenate((Psi.ravel(), Phi.ravel())))
                ono += 6 * b.m
            body[cidx, B_NODE] = node_off[key]
        nodes = np.concatenate(chunks) if chunks else np.zeros(1)
        mp = np.where(parent >= 0, nm[np.maximum(parent, 0)], 0)
        mp = np.where(body[:, B_NODE] >= 0, mp, 0)
        nz = self.nv_j + nm
        set_offsets(body, nm, nz, mp)
        self.body, self.kinfo = body, kinfo
        self.first, self.xphi = first, xphi
        self.sparse_i, self.sparse_v = np.concatenate(sp_i), np.concatenate(sp_v)
        self.Mee, self.Kst, self.Dmp, self.Gs, self.nodes = Mee, Kst, Dmp, Gs, nodes
        for name, shape in workspace_shapes(model.nv, nm, nz, mp).items():
            setattr(self, name, np.empty(shape))

    def valid_for(self, model):
        return (self.source is model.flexible and self.nv_j.shape[0] == model.n
                and np.array_equal(self.nv_j, model.nv_j))

    def nbytes(self):
        """Bytes held: the packed model data and the workspace."""
        return sum(x.nbytes for x in vars(self).values() if isinstance(x, np.ndarray))

    def __getstate__(self):
        return {"dropped": True}          # (a non-empty state: __setstate__ runs on every protocol)

    def __setstate__(self, state):
        self.source = None
        self.nv_j = np.zeros(0, dtype=np.int64)


def set_offsets(body, nm, nz, mp):
    """The per-body offsets into the workspace (B_Y, B_I, B_P, B_Z, B_L of ``body``) of bodies of
    nm modes and nz coordinates (joint velocities and modes), mp the modes of the flexible parent
    a body hangs from at a node (0 elsewhere)."""
    for col, size in ((B_Y, 6 * mp), (B_I, ia_size(nm)), (B_P, 6 + nm), (B_Z, nz), (B_L, tri_size(nz))):
        body[:, col] = np.concatenate(([0], np.cumsum(size)[:-1]))


def workspace_shapes(nv, nm, nz, mp):
    """The shapes of the passes' workspace arrays (the module's table) for nv joint velocities and
    bodies as :func:`set_offsets` takes them."""
    n = nm.shape[0]
    return {"E": (n, 3, 3), "r": (n, 3), "v": (n, 6), "c": (n, 6), "a": (n, 6), "S": (max(nv, 1), 6),
            "IA": int(ia_size(nm).sum()), "pA": int((6 + nm).sum()), "Y": max(int((6 * mp).sum()), 1),
            "U": 6 * max(nv + int(nm.sum()), 1), "u": max(int(nz.sum()), 1), "L": max(int(tri_size(nz).sum()), 1)}


def flexible_pack(model):
    """The :class:`FlexiblePack` of ``model``, built on its first call and kept on the model
    (``model._flexible_pack``) while its flexible bodies and joints stay the same."""
    pk = model.__dict__.get("_flexible_pack")
    if pk is None or not pk.valid_for(model):
        pk = FlexiblePack(model)
        object.__setattr__(model, "_flexible_pack", pk)
    return pk


#: the kernels' load arguments of a call without external loads
_NO_WRENCHES = np.zeros((0, 6))
_NO_LOADS = (_NO_WRENCHES, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), _NO_WRENCHES, np.zeros(1))


def load_arrays(loads):
    """The kernels' (f_ext, ld_body, ld_off, ld_w, ld_data) of ``loads`` (an object with those
    attributes, checked for the model, e.g. ``flexible_dynamics.FlexibleLoads``), or of no loads
    for None."""
    if loads is None:
        return _NO_LOADS
    return loads.f_ext, loads.ld_body, loads.ld_off, loads.ld_w, loads.ld_data


def flexible_articulated(model, q, qd, tau, active, qdd_in, loads=None):
    """Run :func:`flexible_articulated_kernel` on checked, contiguous full-state arrays.
    ``active`` (n,) bool, or (0,) for none (forward dynamics: ``qdd_in`` is not read); ``qdd_in``
    and ``tau`` (nv + ne,); ``loads`` the external loads (:func:`load_arrays`).  Returns (code,
    qdd, tau_out), tau_out None where no joint is active (tau unchanged)."""
    pk = flexible_pack(model)
    if active.shape[0]:
        qdd = qdd_in.copy()
        tau_out = tau.copy()
    else:       # every coordinate's qdd is computed, and no force: nothing to copy
        qdd = np.empty_like(tau)
        tau_out = tau
    bad = flexible_articulated_kernel(
        model.parent, model.jtype, model.axis, model.axis2, model.E_tree, model.r_tree, model.mass, model.com,
        model.I_com, model.idx_q, model.idx_v, model.nq, model.nv, pk.body, pk.kinfo, pk.first, pk.xphi,
        pk.sparse_i, pk.sparse_v, pk.Mee, pk.Kst, pk.Dmp, pk.Gs, pk.nodes, pk.mmax, model.gravity,
        q, qd, tau, active, qdd_in, *load_arrays(loads), pk.E, pk.r, pk.v, pk.c, pk.a, pk.S, pk.IA, pk.pA, pk.Y,
        pk.U, pk.u, pk.L, qdd, tau_out)
    return bad, qdd, (tau_out if active.shape[0] else None)


def flexible_inverse(model, q, qd, qdd, loads=None):
    """Run :func:`flexible_rnea_kernel` on checked, contiguous full-state arrays, with the
    external ``loads`` (:func:`load_arrays`); returns tau."""
    pk = flexible_pack(model)
    tau = np.empty_like(qdd)
    flexible_rnea_kernel(
        model.parent, model.jtype, model.axis, model.axis2, model.E_tree, model.r_tree, model.mass, model.com,
        model.I_com, model.idx_q, model.idx_v, model.nq, model.nv, pk.body, pk.kinfo, pk.first, pk.xphi,
        pk.sparse_i, pk.sparse_v, pk.Mee, pk.Kst, pk.Dmp, pk.Gs, pk.nodes, pk.mmax, model.gravity,
        q, qd, qdd, *load_arrays(loads), pk.E, pk.r, pk.v, pk.c, pk.a, pk.S, pk.IA, pk.pA, pk.Y, pk.U, tau)
    return tau
