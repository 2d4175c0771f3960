"""The constraints of closed loops: violation Phi, Jacobian J = Phi_q (in v) and bias gamma.

Each loop's rows are T^T [w_rel; v_rel] (``partree.loops``): the forbidden components of the
motion of its frame B relative to its frame A, in A's axes.  On the velocity level the rows are
J qd = 0; on the acceleration level J qdd = gamma, with gamma = -(dJ/dt) qd holding every
velocity-product term.  Written per loop end e on body x with sign s (-1 for A, +1 for B),

    rows(acceleration) = sum_e  G_e a_x  -  gamma,      G_e = s T^T Rot(A <- F_e) X(F_e <- x),

where a_x is body x's spatial acceleration in its own coordinates (as the dynamics passes hold
it) and X(F_e <- x) the transform to the end's frame.  The constrained dynamics
(``partree.algorithms.constrained_dynamics``) takes the G_e and gamma from here; J is only formed
(sparse) for :func:`loop_constraints` and the corrections.

Position-level rows Phi have the rows' directions as derivative where the loop is closed:
distances along T's translational columns (d = R_A^T (o_B - o_A)), and for rotations the rotation
vector of R_A^T R_B (weld, prismatic), the components of the B-fixed axis normal to u (revolute),
or u1 . u2 (universal).  Gauss-Newton with J converges on them quadratically near the closure.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from .. import checks
from ..loops import AXIAL, DISTANCE, POINT_ON_LINE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL, WELD
from .aba import aba_forward_pass1
from .kinematics import world_poses
from .packed import raw_view
from .primitives import xform_motion


@njit(cache=True)
def bias_accelerations(parent, E, r, c, a):
    """The bodies' spatial accelerations at qdd = 0 without gravity (the velocity products c
    carried outward): a[i] = X_up[i] a[parent] + c[i]."""
    n = parent.shape[0]
    tmp = np.empty(6)
    for i in range(n):
        p = parent[i]
        if p < 0:
            for k in range(6):
                a[i, k] = c[i, k]
        else:
            xform_motion(E[i], r[i], a[p], tmp)
            for k in range(6):
                a[i, k] = tmp[k] + c[i, k]


def _motion_xform(E, r):
    """6x6 motion transforms [[E, 0], [-E rx, E]] of the pairs E (L, 3, 3), r (L, 3)."""
    L = E.shape[0]
    X = np.zeros((L, 6, 6))
    rx = np.zeros((L, 3, 3))
    rx[:, 0, 1], rx[:, 0, 2], rx[:, 1, 2] = -r[:, 2], r[:, 1], -r[:, 0]
    rx[:, 1, 0], rx[:, 2, 0], rx[:, 2, 1] = r[:, 2], -r[:, 1], r[:, 0]
    X[:, :3, :3] = E
    X[:, 3:, 3:] = E
    X[:, 3:, :3] = -E @ rx
    return X


@njit(cache=True)
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


#: values of scratch :func:`loop_terms_kernel` takes from its ``sc`` argument
TERMS_SCRATCH = 296


@njit(cache=True, inline="always")
def axis_normals(u, t, e1, e2):
    """e1, e2: the unit directions normal to the unit axis u, (u, e1, e2) right-handed; t is
    scratch (3)."""
    if abs(u[0]) < 0.9:
        t[0], t[1], t[2] = 1.0, 0.0, 0.0
    else:
        t[0], t[1], t[2] = 0.0, 1.0, 0.0
    _cross(u, t, e1)
    nn = np.sqrt(e1[0] ** 2 + e1[1] ** 2 + e1[2] ** 2)
    for a in range(3):
        e1[a] /= nn
    _cross(u, e1, e2)


@njit(cache=True, inline="always")
def point_on_line_row(j, e, r0, d, nul, v_rel, dd, wA, RAB, Rpa, ppa, Rpb, ppb, G, gamma, phi, vel, T):
    """Row j of a point_on_line loop, direction e (frame A): T's column t = [0; e], c = e x d.
    The general sums of :func:`loop_terms_kernel` with T's zero angular part (and Td = 0) left
    out, in their order: the values they give.  nul: nu's linear part; dd: d' in frame A; wA:
    frame A's angular velocity."""
    ph = 0.0
    sg = 0.0
    sv = 0.0
    for a in range(3):
        ph += e[a] * d[a]
    for a in range(3):
        sg -= e[a] * nul[a]
    for a in range(3):
        sv += e[a] * v_rel[a]
    c0 = e[1] * d[2] - e[2] * d[1]
    c1 = e[2] * d[0] - e[0] * d[2]
    c2 = e[0] * d[1] - e[1] * d[0]
    sv += c0 * wA[0]
    sg -= (e[1] * dd[2] - e[2] * dd[1]) * wA[0]
    sv += c1 * wA[1]
    sg -= (e[2] * dd[0] - e[0] * dd[2]) * wA[1]
    sv += c2 * wA[2]
    sg -= (e[0] * dd[1] - e[1] * dd[0]) * wA[2]
    gamma[r0 + j] = sg
    vel[r0 + j] = sv
    phi[r0 + j] = ph
    # end A: t - [c; 0] through frame A's placement; end B: [0; R_AB^T e] through B's
    m0 = Rpa[0, 0] * e[0] + Rpa[0, 1] * e[1] + Rpa[0, 2] * e[2]
    m1 = Rpa[1, 0] * e[0] + Rpa[1, 1] * e[1] + Rpa[1, 2] * e[2]
    m2 = Rpa[2, 0] * e[0] + Rpa[2, 1] * e[1] + Rpa[2, 2] * e[2]
    w0 = Rpa[0, 0] * -c0 + Rpa[0, 1] * -c1 + Rpa[0, 2] * -c2
    w1 = Rpa[1, 0] * -c0 + Rpa[1, 1] * -c1 + Rpa[1, 2] * -c2
    w2 = Rpa[2, 0] * -c0 + Rpa[2, 1] * -c1 + Rpa[2, 2] * -c2
    G[r0 + j, 0, 0] = -(w0 - (m1 * ppa[2] - m2 * ppa[1]))
    G[r0 + j, 0, 1] = -(w1 - (m2 * ppa[0] - m0 * ppa[2]))
    G[r0 + j, 0, 2] = -(w2 - (m0 * ppa[1] - m1 * ppa[0]))
    G[r0 + j, 0, 3] = -m0
    G[r0 + j, 0, 4] = -m1
    G[r0 + j, 0, 5] = -m2
    b0 = RAB[0, 0] * e[0] + RAB[1, 0] * e[1] + RAB[2, 0] * e[2]
    b1 = RAB[0, 1] * e[0] + RAB[1, 1] * e[1] + RAB[2, 1] * e[2]
    b2 = RAB[0, 2] * e[0] + RAB[1, 2] * e[1] + RAB[2, 2] * e[2]
    m0 = Rpb[0, 0] * b0 + Rpb[0, 1] * b1 + Rpb[0, 2] * b2
    m1 = Rpb[1, 0] * b0 + Rpb[1, 1] * b1 + Rpb[1, 2] * b2
    m2 = Rpb[2, 0] * b0 + Rpb[2, 1] * b1 + Rpb[2, 2] * b2
    G[r0 + j, 1, 0] = -(m1 * ppb[2] - m2 * ppb[1])
    G[r0 + j, 1, 1] = -(m2 * ppb[0] - m0 * ppb[2])
    G[r0 + j, 1, 2] = -(m0 * ppb[1] - m1 * ppb[0])
    G[r0 + j, 1, 3] = m0
    G[r0 + j, 1, 4] = m1
    G[r0 + j, 1, 5] = m2
    T[r0 + j, 0] = -c0
    T[r0 + j, 1] = -c1
    T[r0 + j, 2] = -c2
    T[r0 + j, 3] = e[0]
    T[r0 + j, 4] = e[1]
    T[r0 + j, 5] = e[2]


@njit(cache=True, inline="always")
def point_on_line_terms(r0, u, Rpa, ppa, Rpb, ppb, RAB, d, wF, voF, G, gamma, phi, vel, T, v_rel, nul, t3, t4,
                        e1, e2):
    """A point_on_line loop's two rows (:func:`loop_terms_kernel`, from the ends' frames: RAB, d,
    wF, voF): only the terms its T (no angular part) and Td (zero) leave, summed as the general
    sums would sum them, so the values are those sums' (``nul`` receives nu's linear part)."""
    for a in range(3):
        sv = -voF[0, a]
        for b in range(3):
            sv += RAB[a, b] * voF[1, b]
        v_rel[a] = sv
    _cross(wF[1], voF[1], t4)       # nu's linear part
    for a in range(3):
        s = 0.0
        for b in range(3):
            s += RAB[a, b] * t4[b]
        nul[a] = s
    _cross(wF[0], voF[0], t3)
    for a in range(3):
        nul[a] -= t3[a]
    _cross(wF[0], v_rel, t3)
    for a in range(3):
        nul[a] -= t3[a]
    axis_normals(u, t3, e1, e2)
    _cross(wF[0], d, t3)
    for a in range(3):
        t4[a] = v_rel[a] - t3[a]                  # d' (in frame A)
    point_on_line_row(0, e1, r0, d, nul, v_rel, t4, wF[0], RAB, Rpa, ppa, Rpb, ppb, G, gamma, phi, vel, T)
    point_on_line_row(1, e2, r0, d, nul, v_rel, t4, wF[0], RAB, Rpa, ppa, Rpb, ppb, G, gamma, phi, vel, T)


@njit(cache=True)
def loop_terms_kernel(kind, body_a, body_b, R_a, p_a, R_b, p_b, axis, axis2, length, nrows, row0,
                      Rw, pw, v, G, gamma, phi, vel, T, sc):
    """Each loop's rows at one state (see the module docstring): G (R, 2, 6), gamma, phi,
    vel (R,) and T (R, 6) (:class:`LoopTerms`), from the bodies' world poses Rw, pw (only the
    two ends' relative pose enters; an end on the world has the identity) and body-frame
    velocities v.  Returns -1, or the first distance loop whose two points coincide (no
    direction).  Its small work arrays come from ``sc`` (TERMS_SCRATCH values), so that it
    allocates nothing.  After the ends' frames, a point_on_line loop takes its own path
    (:func:`point_on_line_terms`); every other kind sets its T and Td and takes the general sums."""
    L = kind.shape[0]
    RF = raw_view(sc, 0, (2, 3, 3))
    oF = raw_view(sc, 18, (2, 3))
    wF = raw_view(sc, 24, (2, 3))
    voF = raw_view(sc, 30, (2, 3))
    Rb = raw_view(sc, 108, (3, 3))
    pb = raw_view(sc, 117, (3,))
    vb = raw_view(sc, 120, (6,))
    t3 = raw_view(sc, 126, (3,))
    t4 = raw_view(sc, 129, (3,))
    RAB = raw_view(sc, 132, (3, 3))
    d = raw_view(sc, 141, (3,))
    w_rel = raw_view(sc, 144, (3,))
    v_rel = raw_view(sc, 147, (3,))
    nu = raw_view(sc, 150, (6,))
    rel = raw_view(sc, 156, (6,))
    Td = raw_view(sc, 162, (6, 6))
    ph = raw_view(sc, 198, (6,))
    e1 = raw_view(sc, 204, (3,))
    e2 = raw_view(sc, 207, (3,))
    w = raw_view(sc, 210, (3,))
    u2 = raw_view(sc, 213, (3,))
    m3 = raw_view(sc, 216, (3,))
    Tl = raw_view(sc, 219, (6, 6))          # the loop's T (its first nrows columns)
    for l in range(L):
        for side in range(2):
            x = body_a[l] if side == 0 else body_b[l]
            Rp = R_a[l] if side == 0 else R_b[l]
            pp = p_a[l] if side == 0 else p_b[l]
            for a in range(3):
                for b in range(3):
                    Rb[a, b] = Rw[x, a, b] if x >= 0 else (1.0 if a == b else 0.0)
                pb[a] = pw[x, a] if x >= 0 else 0.0
            for k in range(6):
                vb[k] = v[x, k] if x >= 0 else 0.0
            for a in range(3):
                s = pb[a]
                for b in range(3):
                    s += Rb[a, b] * pp[b]
                    t = 0.0
                    for c in range(3):
                        t += Rb[a, c] * Rp[c, b]
                    RF[side, a, b] = t
                oF[side, a] = s
            _cross(vb[:3], pp, t3)
            for a in range(3):
                sw = 0.0
                sv = 0.0
                for b in range(3):
                    sw += Rp[b, a] * vb[b]
                    sv += Rp[b, a] * (vb[3 + b] + t3[b])
                wF[side, a] = sw
                voF[side, a] = sv
        for a in range(3):
            for b in range(3):
                s = 0.0
                for c in range(3):
                    s += RF[0, c, a] * RF[1, c, b]
                RAB[a, b] = s
            s = 0.0
            for c in range(3):
                s += RF[0, c, a] * (oF[1, c] - oF[0, c])
            d[a] = s
        code = kind[l]
        if code == POINT_ON_LINE:
            point_on_line_terms(row0[l], axis[l], R_a[l], p_a[l], R_b[l], p_b[l], RAB, d, wF, voF, G, gamma, phi,
                                vel, T, v_rel, nu, t3, t4, e1, e2)
            continue
        for a in range(3):
            sw = -wF[0, a]
            sv = -voF[0, a]
            for b in range(3):
                sw += RAB[a, b] * wF[1, b]
                sv += RAB[a, b] * voF[1, b]
            w_rel[a] = sw
            v_rel[a] = sv
            rel[a] = sw
            rel[3 + a] = sv
        _cross(wF[0], w_rel, t3)
        for a in range(3):
            nu[a] = -t3[a]
        _cross(wF[1], voF[1], t4)
        for a in range(3):
            s = 0.0
            for b in range(3):
                s += RAB[a, b] * t4[b]
            nu[3 + a] = s
        _cross(wF[0], voF[0], t3)
        for a in range(3):
            nu[3 + a] -= t3[a]
        _cross(wF[0], v_rel, t3)
        for a in range(3):
            nu[3 + a] -= t3[a]
        m = nrows[l]
        for a in range(6):          # every kind writes T's and Td's first m columns only
            ph[a] = 0.0
            for b in range(m):
                Tl[a, b] = 0.0
                Td[a, b] = 0.0
        u = axis[l]
        if code in AXIAL:           # e1, e2: the directions normal to u
            axis_normals(u, t3, e1, e2)
        if code == REVOLUTE:
            for a in range(3):
                s = 0.0
                for b in range(3):
                    s += RAB[a, b] * u[b]
                w[a] = s
            # rows -e2.w and e1.w, w = R_AB u: their rates are w_rel . (e2 x w) and w_rel . (w x e1)
            # (e1 and e2 at closure, where w = u), and those columns' rates (w_rel x w) in place of w
            _cross(e2, w, m3)
            _cross(w, e1, u2)
            _cross(w_rel, w, t4)
            _cross(e2, t4, t3)
            for a in range(3):
                Tl[a, 0] = m3[a]
                Tl[a, 1] = u2[a]
                Td[a, 0] = t3[a]
                Tl[3 + a, 2 + a] = 1.0
                ph[0] -= e2[a] * w[a]
                ph[1] += e1[a] * w[a]
                ph[2 + a] = d[a]
            _cross(t4, e1, t3)
            for a in range(3):
                Td[a, 1] = t3[a]
        elif code == PRISMATIC:
            _rotvec(RAB, t3)
            for a in range(3):
                Tl[a, a] = 1.0
                Tl[3 + a, 3] = e1[a]
                Tl[3 + a, 4] = e2[a]
                ph[a] = t3[a]
                ph[3] += e1[a] * d[a]
                ph[4] += e2[a] * d[a]
        elif code == UNIVERSAL:
            for a in range(3):
                s = 0.0
                for b in range(3):
                    s += RAB[a, b] * axis2[l, b]
                u2[a] = s
            _cross(u2, u, m3)
            _cross(w_rel, u2, t3)
            _cross(t3, u, t4)
            for a in range(3):
                Tl[3 + a, a] = 1.0
                Tl[a, 3] = m3[a]
                Td[a, 3] = t4[a]
                ph[a] = d[a]
                ph[3] += u[a] * u2[a]
        elif code == SPHERICAL:
            for a in range(3):
                Tl[3 + a, a] = 1.0
                ph[a] = d[a]
        elif code == WELD:
            _rotvec(RAB, t3)
            for a in range(6):
                Tl[a, a] = 1.0
            for a in range(3):
                ph[a] = t3[a]
                ph[3 + a] = d[a]
        else:   # DISTANCE
            dist = np.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
            if dist < 1e-12:
                return l
            _cross(wF[0], d, t3)
            dn = 0.0
            for a in range(3):
                t4[a] = v_rel[a] - t3[a]          # d/dt d_A
                dn += d[a] / dist * t4[a]
            for a in range(3):
                un = d[a] / dist
                Tl[3 + a, 0] = un
                Td[3 + a, 0] = (t4[a] - un * dn) / dist
            ph[0] = dist - length[l]
        r0 = row0[l]
        # the linear rows measure d's rate in frame A, v_rel - w_A x d: each row gains
        # (T_lin x d) . w_A, and its rate (Td_lin x d + T_lin x d') . w_A (+ the w_A' part, in G)
        _cross(wF[0], d, t3)
        for a in range(3):
            t4[a] = v_rel[a] - t3[a]                  # d' (in frame A)
        for j in range(m):
            sg = 0.0
            sv = 0.0
            for a in range(6):
                sg -= Tl[a, j] * nu[a] + Td[a, j] * rel[a]
                sv += Tl[a, j] * rel[a]
            for a in range(3):
                tl0, tl1, tl2 = Tl[3, j], Tl[4, j], Tl[5, j]
                dl0, dl1, dl2 = Td[3, j], Td[4, j], Td[5, j]
                # c = T_lin x d, e = Td_lin x d + T_lin x d'
                if a == 0:
                    cj = tl1 * d[2] - tl2 * d[1]
                    ej = dl1 * d[2] - dl2 * d[1] + tl1 * t4[2] - tl2 * t4[1]
                elif a == 1:
                    cj = tl2 * d[0] - tl0 * d[2]
                    ej = dl2 * d[0] - dl0 * d[2] + tl2 * t4[0] - tl0 * t4[2]
                else:
                    cj = tl0 * d[1] - tl1 * d[0]
                    ej = dl0 * d[1] - dl1 * d[0] + tl0 * t4[1] - tl1 * t4[0]
                sv += cj * wF[0, a]
                sg -= ej * wF[0, a]
                Td[a, j] = cj          # Td's column j is used: its angular rows hold c from here on
            gamma[r0 + j] = sg
            vel[r0 + j] = sv
            phi[r0 + j] = ph[j]
        # G's rows: row j of end A is -t^T X(F_A <- a) with t = T's column j less [c; 0] (c = Td's
        # angular rows: the c . w_A term), of end B t^T Rot X(F_B <- b) with t = T's column j and
        # Rot = blockdiag(R_AB, R_AB).  With X(F <- x) = [[E, 0], [-E rx, E]], E = Rp^T, rx e_b =
        # pp x e_b: t^T X = [Rp t_ang - (Rp t_lin) x pp; Rp t_lin], and t^T Rot = (Rot^T t)^T
        for j in range(m):
            for side in range(2):
                Rp = R_a[l] if side == 0 else R_b[l]
                pp = p_a[l] if side == 0 else p_b[l]
                if side == 0:
                    for a in range(3):
                        t3[a] = Tl[a, j] - Td[a, j]
                        t4[a] = Tl[3 + a, j]
                else:
                    for a in range(3):
                        sw = 0.0
                        sv = 0.0
                        for b in range(3):
                            sw += RAB[b, a] * Tl[b, j]
                            sv += RAB[b, a] * Tl[3 + b, j]
                        t3[a] = sw
                        t4[a] = sv
                for a in range(3):
                    sw = 0.0
                    sv = 0.0
                    for b in range(3):
                        sw += Rp[a, b] * t3[b]
                        sv += Rp[a, b] * t4[b]
                    w[a] = sw
                    m3[a] = sv
                sg = -1.0 if side == 0 else 1.0
                G[r0 + j, side, 0] = sg * (w[0] - (m3[1] * pp[2] - m3[2] * pp[1]))
                G[r0 + j, side, 1] = sg * (w[1] - (m3[2] * pp[0] - m3[0] * pp[2]))
                G[r0 + j, side, 2] = sg * (w[2] - (m3[0] * pp[1] - m3[1] * pp[0]))
                G[r0 + j, side, 3] = sg * m3[0]
                G[r0 + j, side, 4] = sg * m3[1]
                G[r0 + j, side, 5] = sg * m3[2]
        # the cut-joint wrench at frame A's origin: the force acts at B's origin, d from A's, so
        # its moment there is n + d x f = (T_ang - c) lambda
        for j in range(m):
            for a in range(3):
                T[r0 + j, a] = Tl[a, j] - Td[a, j]
                T[r0 + j, 3 + a] = Tl[3 + a, j]
    return -1


@njit(cache=True)
def _rotvec(R, out):
    """The rotation vector of R (angle below pi)."""
    s0 = 0.5 * (R[2, 1] - R[1, 2])
    s1 = 0.5 * (R[0, 2] - R[2, 0])
    s2 = 0.5 * (R[1, 0] - R[0, 1])
    sn = np.sqrt(s0 * s0 + s1 * s1 + s2 * s2)
    c = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    th = np.arctan2(sn, c)
    f = th / sn if sn > 1e-12 else 1.0 + sn * sn / 6.0
    out[0] = s0 * f
    out[1] = s1 * f
    out[2] = s2 * f


class LoopTerms:
    """What the loops contribute at one state (L loops, R rows).

    Attributes
    ----------
    G : float[R, 2, 6]
        Row by row (loop l's rows at ``row0[l]`` ..): G[r, 0] (end A, sign -1) and G[r, 1] (end B,
        sign +1), the row's map from the end's body acceleration (its coordinates; the world's
        for an end on the world) to the constraint acceleration.
    gamma, phi, velocity : float[R]
        The acceleration bias (J qdd = gamma), the position-level violation and the velocity-level
        rows J qd.
    T : float[R, 6]
        Each row's constraint-force direction, a wrench [n; f] in frame A's axes at its origin:
        a loop's force is the sum over its rows of T[r] lambda[r] (:func:`loop_forces`).
    """

    def __init__(self, G, gamma, phi, velocity, T):
        self.G, self.gamma, self.phi, self.velocity, self.T = G, gamma, phi, velocity, T


class LoopTermsWorkspace:
    """The arrays :func:`loop_terms` fills for a set of loops, kept for repeated calls (the
    parallel engine's loop parts): ``terms`` (a :class:`LoopTerms` over them) and the scratch."""

    def __init__(self, loops):
        R = loops.nrow
        self.terms = LoopTerms(np.empty((R, 2, 6)), np.empty(R), np.empty(R), np.empty(R), np.empty((R, 6)))
        self.sc = np.empty(TERMS_SCRATCH)


def distance_error(loops, l):
    """The message of distance loop ``l`` whose two points coincide."""
    return f"distance loop {loops.names[l]!r}: its two points coincide, so the rod has no direction"


def loop_terms(loops, Rw, pw, v, ws=None):
    """:class:`LoopTerms` of the loops (a ``LoopSet``) from the bodies' world poses Rw (n, 3, 3),
    pw (n, 3) and body-frame velocities v (n, 6) (:func:`loop_terms_kernel`): new arrays, or
    those of ``ws`` (a :class:`LoopTermsWorkspace` of the same loops), filled again."""
    if ws is None:
        ws = LoopTermsWorkspace(loops)
    t = ws.terms
    if len(loops):
        bad = loop_terms_kernel(loops.kind, loops.body_a, loops.body_b, loops.R_a, loops.p_a, loops.R_b, loops.p_b,
                                loops.axis, loops.axis2, loops.length, loops.nrows, loops.row0, Rw, pw, v,
                                t.G, t.gamma, t.phi, t.velocity, t.T, ws.sc)
        if bad >= 0:
            raise ValueError(distance_error(loops, bad))
    return t


@njit(cache=True)
def end_rows_kernel(body_a, body_b, nrows, row0, G, a, out):
    """out = sum over each loop's two ends of G_e a_x (an end on the world: a = 0)."""
    for l in range(body_a.shape[0]):
        for j in range(nrows[l]):
            s = 0.0
            for side in range(2):
                x = body_a[l] if side == 0 else body_b[l]
                if x >= 0:
                    for k in range(6):
                        s += G[row0[l] + j, side, k] * a[x, k]
            out[row0[l] + j] = s


@njit(cache=True)
def loop_force_kernel(nrows, row0, T, lam, out):
    """out[l] = sum over loop l's rows r of T[r] lambda[r]: each loop's cut-joint wrench [n; f]
    in frame A's axes at its origin (T: :class:`LoopTerms`)."""
    for l in range(nrows.shape[0]):
        r0 = row0[l]
        for k in range(6):
            s = 0.0
            for j in range(nrows[l]):
                s += T[r0 + j, k] * lam[r0 + j]
            out[l, k] = s


def loop_forces(loops, T, lam):
    """Each loop's cut-joint wrench [n; f] (L, 6) from the rows' force directions T (R, 6) and
    multipliers lam (R,) (:func:`loop_force_kernel`)."""
    out = np.zeros((len(loops), 6))
    if len(loops):
        loop_force_kernel(loops.nrows, loops.row0, np.ascontiguousarray(T), np.ascontiguousarray(lam), out)
    return out


def end_rows(loops, G, a):
    """sum over each loop's two ends of G_e a_x: the rows' values for body accelerations a (n, 6)
    (an end on the world takes a zero acceleration)."""
    out = np.zeros(loops.nrow)
    if len(loops):
        end_rows_kernel(loops.body_a, loops.body_b, loops.nrows, loops.row0, G, a, out)
    return out


class LoopConstraints:
    """Result of :func:`loop_constraints` (R rows, the loops' rows stacked in loop order).

    Attributes
    ----------
    phi : ndarray (R,)
        Position-level violation.
    J : scipy.sparse.csr_matrix (R, nv)
        The constraint Jacobian in v: the rows' velocities are J qd.
    gamma : ndarray (R,)
        The acceleration bias: the motion satisfies J qdd = gamma.
    velocity : ndarray (R,)
        J qd, the velocity-level violation.
    rows : dict
        Loop name -> slice of its rows.
    """

    def __init__(self, phi, J, gamma, velocity, rows):
        self.phi, self.J, self.gamma, self.velocity, self.rows = phi, J, gamma, velocity, rows

    def __repr__(self):
        return (f"<LoopConstraints: {self.phi.size} rows, |phi|max={np.abs(self.phi).max(initial=0.0):.3g}, "
                f"|J qd|max={np.abs(self.velocity).max(initial=0.0):.3g}>")


def state_kinematics(model, q, qd):
    """Pass 1 of ABA at (q, qd) with the world poses: (E, r, v, c, IA, pA, S, Rw, pw)."""
    n, nv = model.n, model.nv
    E, r = np.empty((n, 3, 3)), np.empty((n, 3))
    v, c, pA = np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6))
    IA, S = np.empty((n, 6, 6)), np.zeros((max(nv, 1), 6))
    aba_forward_pass1(*checks.model_args(model), q, qd, np.zeros((0, 6)), False, E, r, v, c, IA, pA, S)
    Rw, pw = np.empty((n, 3, 3)), np.empty((n, 3))
    world_poses(model.parent, E, r, Rw, pw)
    return E, r, v, c, IA, pA, S, Rw, pw


@njit(cache=True)
def jacobian_entries(parent, idx_v, nv_j, body_a, body_b, nrows, row0, G, S, Rw, pw, count_only, rows, cols, vals):
    """The entries (row, column, value) of J: for each loop end on body x, its rows
    G_e X(x <- 0) times the world motion subspace X(0 <- k) S_k of every joint k from x to the root
    (the two ends' entries on common joints are summed later).  With ``count_only`` only counts."""
    L = body_a.shape[0]
    Gw = np.empty((6, 6))
    sw = np.empty(6)
    cnt = 0
    for l in range(L):
        m = nrows[l]
        for side in range(2):
            x = body_a[l] if side == 0 else body_b[l]
            if not count_only:
                # Gw = G X(x <- 0), X(x <- 0) = [[Rw^T, 0], [-Rw^T px, Rw^T]]
                for j in range(m):
                    for a in range(3):
                        sa = 0.0
                        sl = 0.0
                        for c in range(3):
                            Rca = Rw[x, a, c] if x >= 0 else (1.0 if a == c else 0.0)
                            sa += G[row0[l] + j, side, c] * Rca
                            sl += G[row0[l] + j, side, 3 + c] * Rca
                        Gw[j, a] = sa
                        Gw[j, 3 + a] = sl
                    if x >= 0:
                        # angular part gains -G_lin Rw^T px: (G_lin Rw^T) (p x e_a) = ((G_lin Rw^T) x p)... per column
                        g0, g1, g2 = Gw[j, 3], Gw[j, 4], Gw[j, 5]
                        p0, p1, p2 = pw[x, 0], pw[x, 1], pw[x, 2]
                        # row (g . (p x e_a)) = (g x p)_a... with sign: -g^T px e_a = -(g . (p x e_a)) = -(e_a . (g x p))
                        Gw[j, 0] -= g1 * p2 - g2 * p1
                        Gw[j, 1] -= g2 * p0 - g0 * p2
                        Gw[j, 2] -= g0 * p1 - g1 * p0
            k = x
            while k >= 0:
                nk = nv_j[k]
                if nk > 0:
                    if not count_only:
                        for d in range(nk):
                            iv = idx_v[k] + d
                            for a in range(3):
                                s1 = 0.0
                                s2 = 0.0
                                for c in range(3):
                                    s1 += Rw[k, a, c] * S[iv, c]
                                    s2 += Rw[k, a, c] * S[iv, 3 + c]
                                sw[a] = s1
                                sw[3 + a] = s2
                            # linear part of the world subspace gains p_k x w
                            sw[3] += pw[k, 1] * sw[2] - pw[k, 2] * sw[1]
                            sw[4] += pw[k, 2] * sw[0] - pw[k, 0] * sw[2]
                            sw[5] += pw[k, 0] * sw[1] - pw[k, 1] * sw[0]
                            for j in range(m):
                                s = 0.0
                                for a in range(6):
                                    s += Gw[j, a] * sw[a]
                                rows[cnt + j * nk + d] = row0[l] + j
                                cols[cnt + j * nk + d] = iv
                                vals[cnt + j * nk + d] = s
                    cnt += m * nk
                k = parent[k]
    return cnt


def jacobian(model, terms, S, Rw, pw, dense=False):
    """J (R, nv) from the loop terms, the motion subspaces S (body coordinates) and the world
    poses (:func:`jacobian_entries`): scipy.sparse CSR, or a dense array with ``dense``."""
    loops = model.loops
    args = (model.parent, model.idx_v, model.nv_j.astype(np.int64), loops.body_a, loops.body_b, loops.nrows,
            loops.row0, terms.G, S, Rw, pw)
    e = np.empty(0, dtype=np.int64)
    cnt = jacobian_entries(*args, True, e, e, np.empty(0))
    rows, cols, vals = np.empty(cnt, dtype=np.int64), np.empty(cnt, dtype=np.int64), np.empty(cnt)
    jacobian_entries(*args, False, rows, cols, vals)
    if dense:
        J = np.zeros((loops.nrow, model.nv))
        np.add.at(J, (rows, cols), vals)
        return J
    J = sp.csr_matrix((vals, (rows, cols)), shape=(loops.nrow, model.nv))
    J.sum_duplicates()
    return J


def _left_jacobian_inverse(th):
    """J_l(theta)^-1 of SO(3) for rotation vectors th (K, 3), real or complex (the complex step
    differentiates it): theta' = J_l^-1 w for R' = [w]x R, R = exp([theta]x)."""
    K = th.shape[0]
    out = np.zeros((K, 3, 3), dtype=th.dtype)
    out[:, 0, 0] = out[:, 1, 1] = out[:, 2, 2] = 1.0
    S = np.zeros((K, 3, 3), dtype=th.dtype)
    S[:, 0, 1], S[:, 0, 2], S[:, 1, 2] = -th[:, 2], th[:, 1], -th[:, 0]
    S[:, 1, 0], S[:, 2, 0], S[:, 2, 1] = th[:, 2], -th[:, 1], th[:, 0]
    a2 = np.einsum("ki,ki->k", th, th)                # |theta|^2 (no abs: analytic for the complex step)
    small = np.abs(a2) < 1e-8
    a = np.sqrt(np.where(small, 1.0, a2))
    c = np.where(small, 1.0 / 12.0 + a2 / 720.0,
                 1.0 / np.where(small, 1.0, a2) - (1.0 + np.cos(a)) / (2.0 * a * np.sin(a)))
    return out - 0.5 * S + c[:, None, None] * (S @ S)


def _exact_rotation_rows(loops, terms, J, gamma):
    """Make the rotation-vector rows of weld and prismatic loops (rows 0-2, Phi = the rotation
    vector theta of R_A^T R_B) the exact derivatives of Phi: their velocity-level rows are the
    relative angular velocity w (in A's axes), and theta' = J_l(theta)^-1 w.  J's rows and the
    velocity rows are multiplied by A = J_l^-1, gamma becomes A gamma - A' w (A' by a complex
    step along theta' = A w).  At a closed loop theta = 0 and nothing changes.  In place."""
    sel = np.flatnonzero((loops.kind == WELD) | (loops.kind == PRISMATIC))
    if sel.size == 0:
        return
    r0 = loops.row0[sel]
    rows = r0[:, None] + np.arange(3)
    th = terms.phi[rows]
    if not np.abs(th).max() > 0.0:
        return
    A = _left_jacobian_inverse(th)
    w = terms.velocity[rows]
    if gamma is not None:
        h = 1e-30
        Adot_w = np.einsum("kij,kj->ki", _left_jacobian_inverse(th + 1j * h * np.einsum("kij,kj->ki", A, w)).imag / h, w)
        gamma[rows] = np.einsum("kij,kj->ki", A, gamma[rows]) - Adot_w
    terms.velocity[rows] = np.einsum("kij,kj->ki", A, w)
    flat = rows.reshape(-1)
    if isinstance(J, np.ndarray):
        J[flat] = np.einsum("kij,kjn->kin", A, J[rows]).reshape(-1, J.shape[1])
    else:
        D = sp.identity(J.shape[0], format="lil")
        for k in range(sel.size):
            D[rows[k][:, None], rows[k]] = A[k]
        J_new = D.tocsr() @ J
        J.data, J.indices, J.indptr = J_new.data, J_new.indices, J_new.indptr


def constraint_terms(model, q, qd=None, dense=False, need_gamma=True):
    """(terms, J, gamma) at (q, qd) for checked inputs: the loop terms, J (sparse, or dense with
    ``dense``) and the bias gamma of J qdd = gamma (None without ``need_gamma``).  J is Phi's
    derivative: the rotation-vector rows of weld and prismatic loops are made exact off closure
    (:func:`_exact_rotation_rows`; ``terms.velocity`` is then J qd for them too)."""
    qd = np.zeros(model.nv) if qd is None else qd
    E, r, v, c, IA, pA, S, Rw, pw = state_kinematics(model, q, qd)
    try:
        terms = loop_terms(model.loops, Rw, pw, v)
    except ValueError as e:
        from ..errors import PartreeInputError
        raise PartreeInputError(str(e)) from None
    J = jacobian(model, terms, S, Rw, pw, dense)
    gamma = None
    if need_gamma:
        a0 = np.empty((model.n, 6))
        bias_accelerations(model.parent, E, r, c, a0)
        gamma = terms.gamma - end_rows(model.loops, terms.G, a0)
    _exact_rotation_rows(model.loops, terms, J, gamma)
    return terms, J, gamma


def loop_rows(model, q, qd=None):
    """The loops' :class:`LoopTerms` at (q, qd) (checked): phi, the velocity rows J qd, G, T, in
    O(N + loops), without forming J (whose entries run from every loop end to the root: O(N^2)
    for loops far down a chain)."""
    q, qd = checks.state(model, q, np.zeros(model.nv) if qd is None else qd)
    E, r, v, c, IA, pA, S, Rw, pw = state_kinematics(model, q, qd)
    try:
        return loop_terms(model.loops, Rw, pw, v)
    except ValueError as e:
        from ..errors import PartreeInputError
        raise PartreeInputError(str(e)) from None


def loop_constraints(model, q, qd=None):
    """The loops' constraints at (q, qd): violation phi, sparse Jacobian J, bias gamma.

    Parameters
    ----------
    model : Model
        A model with loops (``model.loops``).
    q : ndarray (nq,)
    qd : ndarray (nv,), optional
        Zero when omitted (then gamma = 0 and the velocity rows vanish).

    Returns
    -------
    LoopConstraints
        ``phi`` (R,), ``J`` (R, nv, scipy.sparse CSR), ``gamma`` (R,) with J qdd = gamma,
        ``velocity`` = J qd, and ``rows`` {loop name: slice}.

    J's columns are the joints on the paths from each loop's two bodies to the root: the joints
    above the two paths' meeting body enter with the difference of the two ends' rows, which
    vanishes where the loop is closed.  J is the derivative of phi at any state, closed or not:
    the rotation-vector rows of prismatic and weld loops are the relative angular velocity times
    the inverse left Jacobian of SO(3) at their rotation vector (the identity where the loop is
    closed), and gamma follows.  (``partree.constrained_dynamics`` and the engine take those rows
    as the relative angular velocity itself, which spans the same constraint.)
    """
    q, qd = checks.state(model, q, np.zeros(model.nv) if qd is None else qd)
    terms, J, gamma = constraint_terms(model, q, qd)
    rows = {nm: model.loops.rows_of(k) for k, nm in enumerate(model.loops.names)}
    return LoopConstraints(terms.phi, J, gamma, terms.velocity, rows)
