"""Compiled spatial-algebra primitives shared by the algorithm kernels.

Transforms are compact (E, r) pairs (see ``partree.spatial``); motion vectors [w; v], forces
[n; f]; 6x6 inertias are full arrays.  Every routine writes into caller-owned arrays so the
kernels never allocate inside their loops.
"""
import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def inertia_from_compact(m, c, Ic, out):
    """out = spatial inertia about the body origin (mass m, CoM c, inertia Ic about the CoM)."""
    cc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2]
    for i in range(3):
        for j in range(3):
            out[i, j] = Ic[i, j] - m * c[i] * c[j]
            out[3 + i, 3 + j] = 0.0
        out[i, i] += m * cc
        out[3 + i, 3 + i] = m
    # m [c]x and its transpose
    out[0, 3] = 0.0
    out[0, 4] = -m * c[2]
    out[0, 5] = m * c[1]
    out[1, 3] = m * c[2]
    out[1, 4] = 0.0
    out[1, 5] = -m * c[0]
    out[2, 3] = -m * c[1]
    out[2, 4] = m * c[0]
    out[2, 5] = 0.0
    for i in range(3):
        for j in range(3):
            out[3 + j, i] = out[i, 3 + j]


@njit(cache=True, inline="always")
def inertia_inverse_trace(m, c, Ic):
    """trace(I^-1) of the spatial inertia I about the body origin (mass m, CoM c, inertia Ic about
    the CoM), from Ic^-1 alone: I = X^T blockdiag(Ic, m 1) X with X = [[1, 0], [-c~, 1]], so
    trace(I^-1) = (1 + |c|^2) trace(Ic^-1) - c^T Ic^-1 c + 3 / m.  Returns inf where I is not
    positive definite (m <= 0 or Ic singular or indefinite)."""
    a00, a01, a02 = Ic[0, 0], Ic[0, 1], Ic[0, 2]
    a11, a12, a22 = Ic[1, 1], Ic[1, 2], Ic[2, 2]
    b00 = a11 * a22 - a12 * a12
    b01 = a02 * a12 - a01 * a22
    b02 = a01 * a12 - a02 * a11
    det = a00 * b00 + a01 * b01 + a02 * b02
    if not (m > 0.0 and a00 > 0.0 and a00 * a11 - a01 * a01 > 0.0 and det > 0.0):
        return np.inf
    b11 = a00 * a22 - a02 * a02
    b12 = a01 * a02 - a00 * a12
    b22 = a00 * a11 - a01 * a01
    c0, c1, c2 = c[0], c[1], c[2]
    tr = (b00 + b11 + b22) / det
    cbc = (b00 * c0 * c0 + b11 * c1 * c1 + b22 * c2 * c2 + 2.0 * (b01 * c0 * c1 + b02 * c0 * c2 + b12 * c1 * c2)) / det
    return (1.0 + c0 * c0 + c1 * c1 + c2 * c2) * tr - cbc + 3.0 / m


@njit(cache=True, inline="always")
def inertia_times(m, c, Ic, v, out):
    """out = I v for the compact rigid-body inertia (no 6x6 formed)."""
    w0, w1, w2 = v[0], v[1], v[2]
    # linear momentum: m (v_o + w x c) ... with v_o = v[3:]
    l0 = m * (v[3] + w1 * c[2] - w2 * c[1])
    l1 = m * (v[4] + w2 * c[0] - w0 * c[2])
    l2 = m * (v[5] + w0 * c[1] - w1 * c[0])
    # angular momentum about the origin: Ic w + c x l
    out[0] = Ic[0, 0] * w0 + Ic[0, 1] * w1 + Ic[0, 2] * w2 + c[1] * l2 - c[2] * l1
    out[1] = Ic[1, 0] * w0 + Ic[1, 1] * w1 + Ic[1, 2] * w2 + c[2] * l0 - c[0] * l2
    out[2] = Ic[2, 0] * w0 + Ic[2, 1] * w1 + Ic[2, 2] * w2 + c[0] * l1 - c[1] * l0
    out[3] = l0
    out[4] = l1
    out[5] = l2


@njit(cache=True, inline="always")
def xform_motion(E, r, m, out):
    """out = X m (out must not alias m)."""
    w0, w1, w2 = m[0], m[1], m[2]
    u0 = m[3] - (r[1] * w2 - r[2] * w1)
    u1 = m[4] - (r[2] * w0 - r[0] * w2)
    u2 = m[5] - (r[0] * w1 - r[1] * w0)
    for i in range(3):
        out[i] = E[i, 0] * w0 + E[i, 1] * w1 + E[i, 2] * w2
        out[3 + i] = E[i, 0] * u0 + E[i, 1] * u1 + E[i, 2] * u2


@njit(cache=True, inline="always")
def xform_force_T_add(E, r, f, out):
    """out += X^T f : a force in the child's coordinates moved to the parent's."""
    n0 = E[0, 0] * f[0] + E[1, 0] * f[1] + E[2, 0] * f[2]
    n1 = E[0, 1] * f[0] + E[1, 1] * f[1] + E[2, 1] * f[2]
    n2 = E[0, 2] * f[0] + E[1, 2] * f[1] + E[2, 2] * f[2]
    g0 = E[0, 0] * f[3] + E[1, 0] * f[4] + E[2, 0] * f[5]
    g1 = E[0, 1] * f[3] + E[1, 1] * f[4] + E[2, 1] * f[5]
    g2 = E[0, 2] * f[3] + E[1, 2] * f[4] + E[2, 2] * f[5]
    out[0] += n0 + r[1] * g2 - r[2] * g1
    out[1] += n1 + r[2] * g0 - r[0] * g2
    out[2] += n2 + r[0] * g1 - r[1] * g0
    out[3] += g0
    out[4] += g1
    out[5] += g2


@njit(cache=True, inline="always")
def cross_motion(v, m, out):
    """out = v x m (motion cross product)."""
    w0, w1, w2, u0, u1, u2 = v[0], v[1], v[2], v[3], v[4], v[5]
    out[0] = w1 * m[2] - w2 * m[1]
    out[1] = w2 * m[0] - w0 * m[2]
    out[2] = w0 * m[1] - w1 * m[0]
    out[3] = w1 * m[5] - w2 * m[4] + u1 * m[2] - u2 * m[1]
    out[4] = w2 * m[3] - w0 * m[5] + u2 * m[0] - u0 * m[2]
    out[5] = w0 * m[4] - w1 * m[3] + u0 * m[1] - u1 * m[0]


@njit(cache=True, inline="always")
def cross_force(v, f, out):
    """out = v x* f (force cross product)."""
    w0, w1, w2, u0, u1, u2 = v[0], v[1], v[2], v[3], v[4], v[5]
    out[0] = w1 * f[2] - w2 * f[1] + u1 * f[5] - u2 * f[4]
    out[1] = w2 * f[0] - w0 * f[2] + u2 * f[3] - u0 * f[5]
    out[2] = w0 * f[1] - w1 * f[0] + u0 * f[4] - u1 * f[3]
    out[3] = w1 * f[5] - w2 * f[4]
    out[4] = w2 * f[3] - w0 * f[5]
    out[5] = w0 * f[4] - w1 * f[3]


@njit(cache=True, inline="always")
def congruence_add(E, r, Ia, out, T):
    """out += X^T Ia X for a symmetric 6x6 Ia; T is 6x6 scratch.

    With X = diag(E, E) [[1, 0], [-rx, 1]] and Ia' = diag(E, E)^T Ia diag(E, E) = [[A, B], [B^T, C]],
    X^T Ia X = [[A + rx B^T - B rx - rx C rx, B + rx C], [B^T - C rx, C]].
    """
    # T = rotated blocks: T = blockdiag(E^T) Ia blockdiag(E); the diagonal blocks are symmetric,
    # so only their upper triangles are computed (and mirrored)
    for bi in range(2):
        for bj in range(bi, 2):
            oi = 3 * bi
            oj = 3 * bj
            for i in range(3):
                # row i of E^T M : sum_k E[k, i] M[k, :]
                m0 = E[0, i] * Ia[oi, oj] + E[1, i] * Ia[oi + 1, oj] + E[2, i] * Ia[oi + 2, oj]
                m1 = E[0, i] * Ia[oi, oj + 1] + E[1, i] * Ia[oi + 1, oj + 1] + E[2, i] * Ia[oi + 2, oj + 1]
                m2 = E[0, i] * Ia[oi, oj + 2] + E[1, i] * Ia[oi + 1, oj + 2] + E[2, i] * Ia[oi + 2, oj + 2]
                for j in range(i if bi == bj else 0, 3):
                    T[oi + i, oj + j] = m0 * E[0, j] + m1 * E[1, j] + m2 * E[2, j]
    T[4, 3] = T[3, 4]
    T[5, 3] = T[3, 5]
    T[5, 4] = T[4, 5]
    r0, r1, r2 = r[0], r[1], r[2]
    # K = B + rx C   (B = T[0:3, 3:6], C = T[3:6, 3:6])
    for j in range(3):
        c0 = T[3, 3 + j]
        c1 = T[4, 3 + j]
        c2 = T[5, 3 + j]
        T[0, 3 + j] += r1 * c2 - r2 * c1
        T[1, 3 + j] += r2 * c0 - r0 * c2
        T[2, 3 + j] += r0 * c1 - r1 * c0
    # A'' = A + rx B^T - B rx - rx C rx = A - K rx - (K rx)^T + rx C rx   (C symmetric)
    # M1 = K rx  (3x3): (K rx)[i, j] = sum_k K[i, k] rx[k, j]
    for i in range(3):
        k0 = T[i, 3]
        k1 = T[i, 4]
        k2 = T[i, 5]
        # rx = [[0, -r2, r1], [r2, 0, -r0], [-r1, r0, 0]]
        m0 = k1 * r2 - k2 * r1
        m1 = -k0 * r2 + k2 * r0
        m2 = k0 * r1 - k1 * r0
        T[3 + i, 0] = m0   # store K rx temporarily in the (unused) lower-left block
        T[3 + i, 1] = m1
        T[3 + i, 2] = m2
    # N = rx C rx: first P = C rx, then rx P
    p01 = -T[3, 3] * r2 + T[3, 5] * r0
    p02 = T[3, 3] * r1 - T[3, 4] * r0
    p10 = T[4, 4] * r2 - T[4, 5] * r1
    p11 = -T[4, 3] * r2 + T[4, 5] * r0
    p12 = T[4, 3] * r1 - T[4, 4] * r0
    p20 = T[5, 4] * r2 - T[5, 5] * r1
    p21 = -T[5, 3] * r2 + T[5, 5] * r0
    p22 = T[5, 3] * r1 - T[5, 4] * r0
    # rx P rows: row0 = -r2 P[1] + r1 P[2]; row1 = r2 P[0] - r0 P[2]; row2 = -r1 P[0] + r0 P[1]
    n00 = -r2 * p10 + r1 * p20
    n01 = -r2 * p11 + r1 * p21
    n02 = -r2 * p12 + r1 * p22
    n11 = r2 * p01 - r0 * p21
    n12 = r2 * p02 - r0 * p22
    n22 = -r1 * p02 + r0 * p12
    out[0, 0] += T[0, 0] - 2.0 * T[3, 0] + n00
    out[0, 1] += T[0, 1] - T[3, 1] - T[4, 0] + n01
    out[0, 2] += T[0, 2] - T[3, 2] - T[5, 0] + n02
    out[1, 1] += T[1, 1] - 2.0 * T[4, 1] + n11
    out[1, 2] += T[1, 2] - T[4, 2] - T[5, 1] + n12
    out[2, 2] += T[2, 2] - 2.0 * T[5, 2] + n22
    out[1, 0] = out[0, 1]
    out[2, 0] = out[0, 2]
    out[2, 1] = out[1, 2]
    for i in range(3):
        for j in range(3):
            out[i, 3 + j] += T[i, 3 + j]
            out[3 + j, i] = out[i, 3 + j]
    for i in range(3):
        for j in range(i, 3):
            out[3 + i, 3 + j] += T[3 + i, 3 + j]
            out[3 + j, 3 + i] = out[3 + i, 3 + j]


@njit(cache=True, inline="always")
def body_force(m, c, Ic, v, a, out, h, tmp):
    """out = I a + v x* I v: the net wrench a body of velocity v needs for its acceleration a
    (compact inertia m, c, Ic; h and tmp are 6-vector scratch)."""
    inertia_times(m, c, Ic, a, out)
    inertia_times(m, c, Ic, v, h)
    cross_force(v, h, tmp)
    for k in range(6):
        out[k] += tmp[k]


#: values of one compact inertia (:func:`compact_inertia`)
COMPACT = 10


@njit(cache=True, inline="always")
def compact_inertia(m, c, Ic, out):
    """out = the compact form of a body's inertia about its origin: m, h = m c, and the rotational
    inertia about the origin Io = Ic + m (|c|^2 1 - c c^T) as (xx, yy, zz, xy, xz, yz)."""
    cc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2]
    out[0] = m
    out[1] = m * c[0]
    out[2] = m * c[1]
    out[3] = m * c[2]
    out[4] = Ic[0, 0] + m * (cc - c[0] * c[0])
    out[5] = Ic[1, 1] + m * (cc - c[1] * c[1])
    out[6] = Ic[2, 2] + m * (cc - c[2] * c[2])
    out[7] = Ic[0, 1] - m * c[0] * c[1]
    out[8] = Ic[0, 2] - m * c[0] * c[2]
    out[9] = Ic[1, 2] - m * c[1] * c[2]


@njit(cache=True, inline="always")
def composite_to_parent_add(E, r, a, out):
    """out += X^T I X for compact inertias (:func:`compact_inertia`): the inertia ``a`` of a body,
    about its origin in its own axes, moved to its parent's origin and axes and added to ``out``.

    With h' = E^T h and Io' = E^T Io E (the parent's axes), the parallel-axis shift by r (the
    body's origin in the parent) is Io'' = Io' + (m |r|^2 + 2 r.h') 1 - m r r^T - r h'^T - h' r^T
    and h'' = h' + m r: some seventy flops where the 6x6 congruence takes some two hundred.
    """
    m = a[0]
    # h' = E^T h
    h0 = E[0, 0] * a[1] + E[1, 0] * a[2] + E[2, 0] * a[3]
    h1 = E[0, 1] * a[1] + E[1, 1] * a[2] + E[2, 1] * a[3]
    h2 = E[0, 2] * a[1] + E[1, 2] * a[2] + E[2, 2] * a[3]
    # T = Io E (Io symmetric, from its six values)
    ixx, iyy, izz, ixy, ixz, iyz = a[4], a[5], a[6], a[7], a[8], a[9]
    t00 = ixx * E[0, 0] + ixy * E[1, 0] + ixz * E[2, 0]
    t01 = ixx * E[0, 1] + ixy * E[1, 1] + ixz * E[2, 1]
    t02 = ixx * E[0, 2] + ixy * E[1, 2] + ixz * E[2, 2]
    t10 = ixy * E[0, 0] + iyy * E[1, 0] + iyz * E[2, 0]
    t11 = ixy * E[0, 1] + iyy * E[1, 1] + iyz * E[2, 1]
    t12 = ixy * E[0, 2] + iyy * E[1, 2] + iyz * E[2, 2]
    t20 = ixz * E[0, 0] + iyz * E[1, 0] + izz * E[2, 0]
    t21 = ixz * E[0, 1] + iyz * E[1, 1] + izz * E[2, 1]
    t22 = ixz * E[0, 2] + iyz * E[1, 2] + izz * E[2, 2]
    r0, r1, r2 = r[0], r[1], r[2]
    s = m * (r0 * r0 + r1 * r1 + r2 * r2) + 2.0 * (r0 * h0 + r1 * h1 + r2 * h2)
    out[0] += m
    out[1] += h0 + m * r0
    out[2] += h1 + m * r1
    out[3] += h2 + m * r2
    out[4] += E[0, 0] * t00 + E[1, 0] * t10 + E[2, 0] * t20 + s - m * r0 * r0 - 2.0 * r0 * h0
    out[5] += E[0, 1] * t01 + E[1, 1] * t11 + E[2, 1] * t21 + s - m * r1 * r1 - 2.0 * r1 * h1
    out[6] += E[0, 2] * t02 + E[1, 2] * t12 + E[2, 2] * t22 + s - m * r2 * r2 - 2.0 * r2 * h2
    out[7] += E[0, 0] * t01 + E[1, 0] * t11 + E[2, 0] * t21 - m * r0 * r1 - r0 * h1 - h0 * r1
    out[8] += E[0, 0] * t02 + E[1, 0] * t12 + E[2, 0] * t22 - m * r0 * r2 - r0 * h2 - h0 * r2
    out[9] += E[0, 1] * t02 + E[1, 1] * t12 + E[2, 1] * t22 - m * r1 * r2 - r1 * h2 - h1 * r2


@njit(cache=True, inline="always")
def force_cols_T_add(E, r, f, out, ncol):
    """out[:, cc] += X^T f[:, cc] for the first ncol columns: ``xform_force_T_add``'s arithmetic on
    each, written out so that the loop over the (independent) columns vectorises."""
    e00, e01, e02 = E[0, 0], E[0, 1], E[0, 2]
    e10, e11, e12 = E[1, 0], E[1, 1], E[1, 2]
    e20, e21, e22 = E[2, 0], E[2, 1], E[2, 2]
    r0, r1, r2 = r[0], r[1], r[2]
    for cc in range(ncol):
        n0 = e00 * f[0, cc] + e10 * f[1, cc] + e20 * f[2, cc]
        n1 = e01 * f[0, cc] + e11 * f[1, cc] + e21 * f[2, cc]
        n2 = e02 * f[0, cc] + e12 * f[1, cc] + e22 * f[2, cc]
        g0 = e00 * f[3, cc] + e10 * f[4, cc] + e20 * f[5, cc]
        g1 = e01 * f[3, cc] + e11 * f[4, cc] + e21 * f[5, cc]
        g2 = e02 * f[3, cc] + e12 * f[4, cc] + e22 * f[5, cc]
        out[0, cc] += n0 + r1 * g2 - r2 * g1
        out[1, cc] += n1 + r2 * g0 - r0 * g2
        out[2, cc] += n2 + r0 * g1 - r1 * g0
        out[3, cc] += g0
        out[4, cc] += g1
        out[5, cc] += g2


@njit(cache=True, inline="always")
def plane_axes(a):
    """The two axes other than a (0, 1, 2), in increasing order: those of the plane normal to a."""
    return (0 if a != 0 else 1), (2 if a != 2 else 1)


@njit(cache=True, inline="always")
def force_cols_T_add_planar(E, r, f, out, ncol, a):
    """:func:`force_cols_T_add` for wrenches in the plane normal to axis a (0, 1, 2) carried by a
    transform in that plane (E a rotation about a, r in the plane): only the moment about a and
    the two in-plane forces (rows a, 3 + b, 3 + c; b, c the next axes) are read and written,
    each summed in force_cols_T_add's order without its terms that are exact zeros, so that the
    result is the same to the bit."""
    b = (a + 1) % 3
    c = (a + 2) % 3
    # E^T's rows b and c on the in-plane force (index order, the term of f_a left out)
    i0, i1 = plane_axes(a)
    eb0, eb1 = E[i0, b], E[i1, b]
    ec0, ec1 = E[i0, c], E[i1, c]
    eaa = E[a, a]
    rb, rc = r[b], r[c]
    for cc in range(ncol):
        gb = eb0 * f[3 + i0, cc] + eb1 * f[3 + i1, cc]
        gc = ec0 * f[3 + i0, cc] + ec1 * f[3 + i1, cc]
        out[a, cc] += eaa * f[a, cc] + rb * gc - rc * gb
        out[3 + b, cc] += gb
        out[3 + c, cc] += gc
