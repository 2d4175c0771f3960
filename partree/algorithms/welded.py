"""Welded bodies merged: the model the compiled call path of ABA, RNEA and CRBA computes with.

A body joined to its parent by a fixed joint moves with it: for the joint-space results (qdd,
tau, M) it is part of one rigid body with its parent.  Robot descriptions carry many such bodies
(sensor frames, flanges, tool points, the locked joints of a reduced model: Talos has 60 bodies
for 38 degrees of freedom) and each costs a kernel nearly what a moving body costs.  Pinocchio
merges them when it reads a URDF; partree keeps them in the model (their joint wrenches and
frames are results of their own) and merges them on each compiled call instead.

:func:`merge_welded` writes the merged model into a model buffer of the ``packed`` layout held in
the workspace, in O(n); :func:`computing_model` keeps it there with a copy of the model buffer it
was made from and merges again whenever the model's buffer differs from that copy, so that an
array of the model edited in place is what the next call computes with.  The merged model:

- every body of a moving joint becomes a body of the merged model, in the same order (so
  ``parent[k] < k`` still holds) with its joint, axes and coordinate indices;
- a welded body is merged into its *representative*, the nearest moving ancestor, or the world
  when there is none (then it takes no part in the dynamics);
- a moving body under welded ones gets the composed placement X_tree[i] X_fix[parent];
- a representative's inertia is the sum of its own and its welded bodies', each moved to its
  frame (:func:`partree.algorithms.primitives.composite_to_parent_add`), and given back as mass,
  centre of mass and inertia about it.  A representative without welded bodies keeps its
  values bit for bit.

:func:`merge_forces` moves external wrenches on welded bodies to their representatives.
Merging pays when welded bodies are at least an eighth of the model (:data:`MERGE_FRACTION`):
each welded body saves a kernel nearly a moving body's work, while keeping the merged model
current costs a pass over the model buffer on every call (:func:`computing_model`).  Below
that, and for models without welded bodies, the call computes on the model as it is and pays
one pass over the joint types.
"""
import numpy as np
from numba import njit

from ..joints import FIXED
from .packed import HEADER, MAGIC, model_views, raw_view, welded_area
from .primitives import COMPACT, compact_inertia, composite_to_parent_add, xform_force_T_add

#: merge when (number of welded bodies) * MERGE_FRACTION >= n
MERGE_FRACTION = 8


@njit(cache=True)
def welded_views(area, n):
    """The merged model's buffer (int64), rep (n,), orig (n,) (int64), E_fix (n, 3, 3),
    r_fix (n, 3), fext (n, 6), the compact inertias (n, COMPACT) and one more (COMPACT,) as raw
    views of ``area`` (``packed.welded_size`` values), after the cache of :func:`computing_model`."""
    ints = area.view(np.int64)
    o = HEADER + 4 + 37 * n
    rb = raw_view(ints, o, (HEADER + 3 + 40 * n,))
    o += HEADER + 3 + 40 * n
    rep = raw_view(ints, o, (n,))
    orig = raw_view(ints, o + n, (n,))
    o += 2 * n
    E_fix = raw_view(area, o, (n, 3, 3))
    r_fix = raw_view(area, o + 9 * n, (n, 3))
    fext = raw_view(area, o + 12 * n, (n, 6))
    C = raw_view(area, o + 18 * n, (n, COMPACT))
    tmp = raw_view(area, o + 18 * n + COMPACT * n, (COMPACT,))
    return rb, rep, orig, E_fix, r_fix, fext, C, tmp


@njit(cache=True, inline="always")
def _compose(E2, r2, E1, r1, E, r):
    """(E, r) = X2 X1 for X1 = (E1, r1) from frame k to frame p and X2 = (E2, r2) from p to i:
    E = E2 E1, r = r1 + E1^T r2 (i's origin in k)."""
    for a in range(3):
        for b in range(3):
            E[a, b] = E2[a, 0] * E1[0, b] + E2[a, 1] * E1[1, b] + E2[a, 2] * E1[2, b]
    for a in range(3):
        r[a] = r1[a] + E1[0, a] * r2[0] + E1[1, a] * r2[1] + E1[2, a] * r2[2]


@njit(cache=True)
def merge_pays(mb):
    """Whether the model of ``mb`` has welded bodies, at least a :data:`MERGE_FRACTION`-th of
    its bodies (one pass over the joint types)."""
    n = mb[1]
    jtype = raw_view(mb.view(np.int8), 8 * (HEADER + 4 * n + mb[4]), (n,))     # model_views' jtype alone
    nfix = 0
    for i in range(n):
        if jtype[i] == FIXED:
            nfix += 1
    return nfix > 0 and nfix * MERGE_FRACTION >= n


@njit(cache=True)
def merge_welded(mb, area):
    """Write the merged model of ``mb`` into ``area`` (:func:`welded_views`); returns its number
    of bodies, or 0 when merging does not pay (no welded bodies, or fewer than a
    :data:`MERGE_FRACTION`-th of them) and the call should compute on ``mb``."""
    n = mb[1]
    parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, _, qstarts = \
        model_views(mb)
    if not merge_pays(mb):
        return 0
    nfix = 0
    for i in range(n):
        if jtype[i] == FIXED:
            nfix += 1
    rb, rep, orig, E_fix, r_fix, _, C, tmp = welded_views(area, n)
    nr = n - nfix
    nquat = mb[4]
    ints = HEADER + 4 * nr + nquat + (nr + 7) // 8
    rb[0] = MAGIC
    rb[1] = nr
    rb[2] = mb[2]
    rb[3] = mb[3]
    rb[4] = nquat
    rb[5] = 0
    rb[6] = ints
    rb[7] = 0
    o = HEADER
    parent_r = raw_view(rb, o, (nr,))
    idx_q_r = raw_view(rb, o + nr, (nr,))
    idx_v_r = raw_view(rb, o + 2 * nr, (nr,))
    idx_s_r = raw_view(rb, o + 3 * nr, (nr,))
    qstarts_r = raw_view(rb, o + 4 * nr, (nquat,))
    jtype_r = raw_view(rb.view(np.int8), 8 * (o + 4 * nr + nquat), (nr,))
    for k in range(nquat):
        qstarts_r[k] = qstarts[k]
    f = rb.view(np.float64)
    o = ints
    gravity_r = raw_view(f, o, (3,))
    mass_r = raw_view(f, o + 3, (nr,))
    o += 3 + nr
    axis_r = raw_view(f, o, (nr, 3))
    axis2_r = raw_view(f, o + 3 * nr, (nr, 3))
    r_tree_r = raw_view(f, o + 6 * nr, (nr, 3))
    com_r = raw_view(f, o + 9 * nr, (nr, 3))
    E_tree_r = raw_view(f, o + 12 * nr, (nr, 3, 3))
    I_com_r = raw_view(f, o + 21 * nr, (nr, 3, 3))
    for a in range(3):
        gravity_r[a] = gravity[a]
    # pass 1: representatives, placements in them, the merged bodies' joints and placements
    k = 0
    for i in range(n):
        p = parent[i]
        if jtype[i] == FIXED:
            if p < 0:
                rep[i] = -1
                for a in range(3):
                    for b in range(3):
                        E_fix[i, a, b] = E_tree[i, a, b]
                    r_fix[i, a] = r_tree[i, a]
            else:
                rep[i] = rep[p]
                _compose(E_tree[i], r_tree[i], E_fix[p], r_fix[p], E_fix[i], r_fix[i])
            continue
        rep[i] = k
        orig[k] = i
        for a in range(3):
            for b in range(3):
                E_fix[i, a, b] = 1.0 if a == b else 0.0
            r_fix[i, a] = 0.0
        if p >= 0 and jtype[p] == FIXED:
            parent_r[k] = rep[p]
            _compose(E_tree[i], r_tree[i], E_fix[p], r_fix[p], E_tree_r[k], r_tree_r[k])
        else:
            parent_r[k] = rep[p] if p >= 0 else -1
            for a in range(3):
                for b in range(3):
                    E_tree_r[k, a, b] = E_tree[i, a, b]
                r_tree_r[k, a] = r_tree[i, a]
        jtype_r[k] = jtype[i]
        idx_q_r[k] = idx_q[i]
        idx_v_r[k] = idx_v[i]
        idx_s_r[k] = 0
        for a in range(3):
            axis_r[k, a] = axis[i, a]
            axis2_r[k, a] = axis2[i, a]
        mass_r[k] = mass[i]
        for a in range(3):
            com_r[k, a] = com[i, a]
            for b in range(3):
                I_com_r[k, a, b] = I_com[i, a, b]
        C[k, 0] = -1.0      # no welded body merged into k yet
        k += 1
    # pass 2: the welded bodies' inertias, moved into their representatives (compact form)
    for i in range(n):
        if jtype[i] != FIXED or rep[i] < 0:
            continue
        k = rep[i]
        if C[k, 0] < 0.0:
            j = orig[k]
            compact_inertia(mass[j], com[j], I_com[j], C[k])
        compact_inertia(mass[i], com[i], I_com[i], tmp)
        composite_to_parent_add(E_fix[i], r_fix[i], tmp, C[k])
    # pass 3: back to mass, centre of mass and inertia about it
    for k in range(nr):
        if C[k, 0] < 0.0:
            continue
        m = C[k, 0]
        mass_r[k] = m
        if m > 0.0:
            c0, c1, c2 = C[k, 1] / m, C[k, 2] / m, C[k, 3] / m
        else:
            c0, c1, c2 = 0.0, 0.0, 0.0
        com_r[k, 0] = c0
        com_r[k, 1] = c1
        com_r[k, 2] = c2
        cc = c0 * c0 + c1 * c1 + c2 * c2
        I = I_com_r[k]
        I[0, 0] = C[k, 4] - m * (cc - c0 * c0)
        I[1, 1] = C[k, 5] - m * (cc - c1 * c1)
        I[2, 2] = C[k, 6] - m * (cc - c2 * c2)
        I[0, 1] = I[1, 0] = C[k, 7] + m * c0 * c1
        I[0, 2] = I[2, 0] = C[k, 8] + m * c0 * c2
        I[1, 2] = I[2, 1] = C[k, 9] + m * c1 * c2
    return nr


@njit(cache=True)
def merge_forces(mb, area, nr, fext):
    """The external wrenches ``fext`` (n, 6) of the model's bodies summed on the merged model's
    (:func:`merge_welded` must have run): a moving body's as they are, each welded body's moved
    to its representative's frame, those on bodies welded to the world dropped.  Returns the
    (nr, 6) view that holds them."""
    n = mb[1]
    jtype = model_views(mb)[1]
    _, rep, _, E_fix, r_fix, out, _, _ = welded_views(area, n)
    for k in range(nr):
        for a in range(6):
            out[k, a] = 0.0
    for i in range(n):
        k = rep[i]
        if k < 0:
            continue
        if jtype[i] != FIXED:
            for a in range(6):
                out[k, a] += fext[i, a]
        else:
            xform_force_T_add(E_fix[i], r_fix[i], fext[i], out[k])
    return raw_view(out.reshape(6 * n), 0, (nr, 6))


@njit(cache=True)
def computing_model(mb, wb):
    """The buffer of the model a call on ``mb`` computes with, and its number of bodies: the
    merged model kept in the workspace ``wb`` (:func:`merge_welded`), or ``mb`` itself.

    The workspace keeps the merged model with a copy of the model buffer it was made from; the
    model is merged again only when the buffer differs from that copy in any bit (an array of the
    model edited in place, or the workspace used with another model).  The comparison reads the
    buffer once, a loop without branches that the compiler vectorizes: a small fraction of the
    merge, which is repeated only when needed.  A model where merging does not pay
    (:func:`merge_pays`) is computed as it is, without the comparison.
    """
    n = mb[1]
    if not merge_pays(mb):
        return mb, n
    area = welded_area(wb, n, mb[3])
    ints = area.view(np.int64)
    L = mb.shape[0]
    copy = raw_view(ints, 1, (L,))
    diff = 0
    for k in range(L):
        diff |= mb[k] ^ copy[k]
    if diff != 0:
        ints[0] = merge_welded(mb, area)
        for k in range(L):
            copy[k] = mb[k]
    nr = ints[0]
    if nr == 0:
        return mb, n
    return raw_view(ints, HEADER + 4 + 37 * n, (HEADER + 3 + 40 * n,)), nr      # welded_views' buffer


@njit(cache=True)
def computing_forces(mb, wb, nr, fext):
    """``fext`` (n, 6 or 0, 6) as the model of :func:`computing_model` takes it (nr bodies)."""
    n = mb[1]
    if nr == n or fext.shape[0] == 0:
        return fext
    return merge_forces(mb, welded_area(wb, n, mb[3]), nr, fext)


@njit(cache=True)
def original_body(mb, wb, nr, k):
    """The model's body of body k of the model of :func:`computing_model` (nr bodies)."""
    n = mb[1]
    if nr == n:
        return k
    return welded_views(welded_area(wb, n, mb[3]), n)[2][k]


def merged_model_args(model):
    """The arrays of the model the compiled calls of ABA, RNEA (without joint wrenches) and CRBA
    compute with, in the order of ``partree.checks.model_args`` (parent, jtype, axis, axis2,
    E_tree, r_tree, mass, com, I_com, idx_q, idx_v), as copies, and the model's body of each of
    their bodies; None when those calls compute on the model as it is (no welded bodies, fewer
    than a :data:`MERGE_FRACTION`-th of them, or a model too large to pack)."""
    from .packed import model_buffer, welded_size

    pk = model_buffer(model)
    if pk is None:
        return None
    area = np.zeros(welded_size(model.n))
    nr = merge_welded(pk.buf, area)
    if nr == 0:
        return None
    rb, _, orig, _, _, _, _, _ = welded_views(area, model.n)
    args = tuple(np.array(a) for a in model_views(rb)[:11])
    return args, np.array(orig[:nr])
