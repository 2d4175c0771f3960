"""partree.parallel.kernels through ``PartKernel`` (partree.parallel.part), one part at a time
against the serial algorithms (no partition, no root solve): a part without handles is ABA; a part
with handles reports boundary relations (v_h = T_h v_in + vrel_h, g_root = M a_in + m0 +
sum Kt g, a_h = Psi a_in + Lam g + beta) that hold on the true motion of the whole tree (ABA's
qdd, RNEA's wrenches and accelerations) and that ``solve`` / ``wrenches`` reproduce for any
(a_in, g); its joint wrenches are RNEA's; it pickles without its workspace; and its errors."""
import pickle
import re

import numpy as np
import pytest

import partree
from partree import checks
from partree.algorithms.aba import aba_backward_pass, aba_forward_pass1, aba_kernel
from partree.errors import PartreeInputError
from partree import joints as J
from partree.models import auto_tree, binary_tree, chain, random_tree
from partree.models.generators import random_units
from partree.parallel.part import PartKernel
from partree.spatial import motion_xform

from conftest import rel_err

ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
G = np.array([0.5, -0.3, -9.81])


def a0_of(m):
    return np.concatenate((np.zeros(3), -m.gravity))


def subtree_mask(m, i):
    inside = np.zeros(m.n, dtype=bool)
    inside[i] = True
    for j in range(i + 1, m.n):
        if m.parent[j] >= 0 and inside[m.parent[j]]:
            inside[j] = True
    return inside


def part_of(m, r, cuts):
    """The bodies of r's subtree without the subtrees of the cut roots, and the handles (the cut
    roots' parents)."""
    inside = subtree_mask(m, r)
    for c in cuts:
        inside &= ~subtree_mask(m, c)
    bodies = np.flatnonzero(inside)
    assert all(inside[m.parent[c]] for c in cuts)
    return bodies, np.unique(m.parent[list(cuts)]) if len(cuts) else np.zeros(0, dtype=np.int64)


def truth(m, q, qd, tau, F):
    """The whole tree's motion: qdd (ABA), joint wrenches W, body velocities v and accelerations a
    (with the fictitious -g) and X_up, from RNEA run with ABA's qdd."""
    qdd = partree.aba(m, q, qd, tau, f_ext=F)
    d = m.create_data()
    t, W = partree.rnea(m, q, qd, qdd, f_ext=F, data=d, return_wrenches=True)
    assert rel_err(t, tau) < 1e-9
    return dict(qdd=qdd, W=W, v=d.v.copy(), a=d.a.copy(), X=[motion_xform(d.E[i], d.r[i]) for i in range(m.n)])


def boundary_inputs(m, tr, bodies, handles, cuts):
    """v_in, a_in of the part's root's parent (zero / a0 at the base) and the handle wrenches
    g_k = sum over the cut roots c at handle k of X_c^T W_c."""
    p = m.parent[bodies[0]]
    v_in = np.zeros(6) if p < 0 else tr["v"][p]
    a_in = a0_of(m) if p < 0 else tr["a"][p]
    g = np.zeros((len(handles), 6))
    for c in cuts:
        k = int(np.searchsorted(handles, m.parent[c]))
        g[k] += tr["X"][c].T @ tr["W"][c]
    return v_in, a_in, g


def state(m, seed):
    rng = np.random.default_rng(seed)
    return (m.random_configuration(rng), m.random_velocity(rng, 1.5), rng.normal(size=m.nv) * 3,
            rng.normal(size=(m.n, 6)))


def model(kind="mixed"):
    """A random tree of every joint type; with kind '1-dof-paths' the same tree with its free and
    fixed joints below the base made revolute: a free joint transmits no wrench, so on the mixed
    tree the handles' influence stops at the first free joint of a path, and the walk's 1-DOF
    bodies above it are never reached."""
    m = random_tree(90, seed=31, floating_base=True, joint_types=ALL_TYPES, p_chain=0.5, gravity=G)
    if kind == "mixed":
        return m
    swap = (np.arange(m.n) > 0) & np.isin(m.jtype, (J.FREE, J.FIXED))
    jt = np.where(swap, J.REVOLUTE, m.jtype)
    axis = m.axis.copy()
    axis[swap] = random_units(np.random.default_rng(2), int(swap.sum()))
    return partree.Model(m.parent, jt, axis, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, axis2=m.axis2,
                         gravity=G)


def cases(m):
    """(root, cut roots) of parts with handles in ``model()``: a part inside the tree (root 9, 42
    bodies in its subtree) with two cut roots on one handle (54) and a third elsewhere; the same
    part with nested handles (13 on the path to 24, 24 on the path to 25); the top part, hanging
    from the base, with handles 1, 2, 4 along one path."""
    p = m.parent
    assert p[55] == p[61] == 54 and p[25] == 24 and p[14] == 13 and p[30] == 25 and p[37] == 24
    assert p[3] == p[9] == 2 and p[43] == 1 and p[16] == 4 and m.subtree_sizes()[9] == 42
    return {"two-on-one-handle": (9, [55, 61, 25]), "nested": (9, [14, 30, 37]), "top": (0, [3, 9, 43, 16])}


# ----------------------------------------------------------------------------------------------
# a part without handles
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("early", [False, True])
@pytest.mark.parametrize("make", [lambda: chain(40, joint=(list(ALL_TYPES) * 7)[:40], alternate=True, gravity=G),
                                  lambda: binary_tree(31, joint=(["revolute", "universal", "spherical"] * 11)[:31],
                                                      gravity=G),
                                  lambda: auto_tree(40, 1.5, skew=0.3)])
def test_whole_model_part_is_aba_bit_for_bit(make, early):
    """One part of all bodies, no handles: velocity, reduce, solve is ABA's kernel on the model's
    arrays, the same bits (qdd and every body's acceleration); ``partree.aba``, whose compiled call
    merges welded bodies (``partree.algorithms.welded``), to rounding (its backward error)."""
    m = make()
    q, qd, tau, F = state(m, 1)
    pk = PartKernel(m, np.arange(m.n), [], early_kinematics=early)
    assert pk.H == 0 and pk.top
    TE, Tr, vrel = pk.velocity(q[pk.qsel], qd[pk.vsel])
    assert TE.shape == (0, 3, 3) and Tr.shape == (0, 3) and vrel.shape == (0, 6)
    for f in (None, F):
        pk.reduce(np.zeros(6), tau[pk.vsel], f)
        qdd = pk.solve(a0_of(m), np.zeros((0, 6)))
        d = m.create_data()
        Fk, has = (np.zeros((1, 6)), False) if f is None else (f, True)
        assert aba_kernel(*checks.model_args(m), m.gravity, q, qd, tau, Fk, has, d.E, d.r, d.v, d.c, d.IA, d.pA,
                          d.a, d.S, d.U, d.Dinv, d.u, d.qdd) == -1
        assert np.array_equal(qdd, d.qdd)
        assert np.array_equal(pk.a, d.a)
        # judged by its normwise backward error (M's condition number here is about 3e8)
        ref = partree.aba(m, q, qd, tau, f_ext=f)
        res = np.abs(partree.rnea(m, q, qd, ref, f_ext=f, return_wrenches=True)[0] - tau).max()
        M = partree.crba(m, q)
        assert res <= 1e-14 * (np.abs(M).sum(axis=1).max() * np.abs(ref).max() + np.abs(tau).max())


def test_whole_model_part_of_a_random_tree_is_aba_to_rounding():
    """On a random tree (bodies with several children, one of them numbered right after the
    parent) the reduce kernel adds the children's inertias in another order than ABA: equal to
    rounding."""
    m = model()
    q, qd, tau, F = state(m, 2)
    pk = PartKernel(m, np.arange(m.n), [])
    pk.velocity(q, qd)
    pk.reduce(np.zeros(6), tau, F)
    assert rel_err(pk.solve(a0_of(m), np.zeros((0, 6))), partree.aba(m, q, qd, tau, f_ext=F)) < 1e-12


def test_leaf_part_root_relation_is_its_articulated_body(rng):
    """A part that is a whole subtree (no handles) hanging from body p: its root relation is the
    subtree's articulated body seen from p, M = X^T IA_r X and m0 = X^T pA_r (ABA's inward pass on
    the whole tree), and it holds on the true motion: M a_p + m0 = X^T W_r."""
    m = model()
    q, qd, tau, F = state(m, 3)
    r = int(np.flatnonzero((m.parent >= 0) & (m.subtree_sizes() >= 10))[3])
    bodies = np.flatnonzero(subtree_mask(m, r))
    d = m.create_data()
    aba_forward_pass1(m.parent, m.jtype, m.axis, m.axis2, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, m.idx_q,
                      m.idx_v, q, qd, F, True, d.E, d.r, d.v, d.c, d.IA, d.pA, d.S)
    assert aba_backward_pass(m.parent, m.idx_v, tau, d.E, d.r, d.c, d.IA, d.pA, d.S, d.U, d.Dinv, d.u) == -1
    X = motion_xform(d.E[r], d.r[r])
    tr = truth(m, q, qd, tau, F)
    pk = PartKernel(m, bodies, [])
    assert not pk.top
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    M, m0, *_ = pk.reduce(tr["v"][m.parent[r]], tau[pk.vsel], F[bodies])
    assert rel_err(M, X.T @ d.IA[r] @ X) < 1e-12
    assert rel_err(m0, X.T @ d.pA[r]) < 1e-12
    assert np.allclose(M, M.T, rtol=0, atol=1e-12 * np.abs(M).max()) and np.linalg.eigvalsh(M)[0] > -1e-10
    assert rel_err(M @ tr["a"][m.parent[r]] + m0, X.T @ tr["W"][r]) < 1e-10


# ----------------------------------------------------------------------------------------------
# a part with handles
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("early", [False, True])
@pytest.mark.parametrize("kind", ["mixed", "1-dof-paths"])
@pytest.mark.parametrize("case", ["two-on-one-handle", "nested", "top"])
def test_boundary_relations_hold_on_the_true_motion(case, kind, early):
    m = model(kind)
    r, cuts = cases(m)[case]
    bodies, handles = part_of(m, r, cuts)
    q, qd, tau, F = state(m, 4)
    tr = truth(m, q, qd, tau, F)
    v_in, a_in, g = boundary_inputs(m, tr, bodies, handles, cuts)
    pk = PartKernel(m, bodies, handles, part_id=5, early_kinematics=early)
    H = pk.H
    assert H == len(handles) >= 2 and pk.top == (case == "top")
    if case == "two-on-one-handle":
        assert len(handles) < len(cuts)
    if case == "nested":
        on_path = [h for h in handles if any(subtree_mask(m, h)[o] for o in handles if o != h)]
        assert on_path, "one handle lies on the path to another"
    hl = np.searchsorted(bodies, handles)
    # velocity step: v_h = T_h v_in + vrel_h, T_h the transform from the root's parent to h
    TE, Tr, vrel = (x.copy() for x in pk.velocity(q[pk.qsel], qd[pk.vsel]))
    kin = partree.forward_kinematics(m, q, qd)
    for k, h in enumerate(handles):
        assert rel_err(motion_xform(TE[k], Tr[k]) @ v_in + vrel[k], tr["v"][h]) < 1e-12
        if pk.top:
            assert np.array_equal(TE[k], np.eye(3)) and not Tr[k].any()
        else:
            p = m.parent[r]
            assert rel_err(TE[k], kin.R[h].T @ kin.R[p]) < 1e-13
            assert rel_err(Tr[k], kin.R[p].T @ (kin.p[h] - kin.p[p])) < 1e-12
    # reduce: the root and handle relations
    M, m0, Kt, Psi, Lam, beta = (x.copy() for x in pk.reduce(v_in, tau[pk.vsel], F[bodies]))
    assert Kt.shape == (H, 6, 6) and Lam.shape == (H, H, 6, 6) and beta.shape == (H, 6)
    g_root = M @ a_in + m0 + sum(Kt[k] @ g[k] for k in range(H))
    Xr = tr["X"][r]
    assert rel_err(g_root, Xr.T @ tr["W"][r]) < 1e-9
    for j, h in enumerate(handles):
        a_h = Psi[j] @ a_in + sum(Lam[j, k] @ g[k] for k in range(H)) + beta[j]
        assert rel_err(a_h, tr["a"][h]) < 1e-9, j
    # solve and wrenches: the part's share of the whole tree's motion
    qdd = pk.solve(a_in, g)
    assert rel_err(qdd, tr["qdd"][pk.vsel]) < 1e-9
    assert rel_err(pk.a, tr["a"][bodies]) < 1e-9
    W, _, _ = pk.wrenches()
    assert rel_err(W, tr["W"][bodies]) < 1e-9
    assert pk.handles.tolist() == hl.tolist()


@pytest.mark.parametrize("kind", ["mixed", "1-dof-paths"])
@pytest.mark.parametrize("case", ["two-on-one-handle", "nested", "top"])
def test_boundary_relations_are_what_solve_and_wrenches_give_for_any_input(case, kind):
    """For any a_in and handle wrenches g (not the tree's), the back-substitution's handle
    accelerations are Psi a_in + Lam g + beta and the root joint's wrench moved to frame 0 is
    M a_in + m0 + sum Kt g; the relations are affine: a perturbation of one g_k moves a_h by
    Lam[h, k] dg."""
    m = model(kind)
    r, cuts = cases(m)[case]
    bodies, handles = part_of(m, r, cuts)
    rng = np.random.default_rng(7)
    q, qd, tau, F = state(m, 5)
    pk = PartKernel(m, bodies, handles)
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    v_in = np.zeros(6) if pk.top else rng.normal(size=6)
    M, m0, Kt, Psi, Lam, beta = (x.copy() for x in pk.reduce(v_in, tau[pk.vsel], F[bodies]))
    hl = pk.handles
    X0 = motion_xform(pk.E[0], pk.r[0])
    for trial in range(3):
        a_in, g = rng.normal(size=6) * 5, rng.normal(size=(pk.H, 6)) * 5
        pk.reduce(v_in, tau[pk.vsel], F[bodies])          # (solve consumes the reduction: see below)
        pk.solve(a_in, g)
        for j in range(pk.H):
            pred = Psi[j] @ a_in + sum(Lam[j, k] @ g[k] for k in range(pk.H)) + beta[j]
            assert rel_err(pk.a[hl[j]], pred) < 1e-10
        W, _, _ = pk.wrenches()
        assert rel_err(X0.T @ W[0], M @ a_in + m0 + sum(Kt[k] @ g[k] for k in range(pk.H))) < 1e-10
        # perturb one handle wrench
        a_before = pk.a[hl].copy()
        k = trial % pk.H
        dg = np.zeros_like(g)
        dg[k] = rng.normal(size=6)
        pk.reduce(v_in, tau[pk.vsel], F[bodies])
        pk.solve(a_in, g + dg)
        for j in range(pk.H):
            assert rel_err(pk.a[hl[j]] - a_before[j], Lam[j, k] @ dg[k]) < 1e-10
    # the handle relations are reciprocal: the root feels g_k through Kt_k = Psi_k^T, and the
    # handles feel each other symmetrically (Lam_jk = Lam_kj^T, Lam_kk symmetric, negative
    # semi-definite: a wrench pushing on a handle accelerates it against the push)
    assert np.allclose(Psi, Kt.transpose(0, 2, 1), rtol=0, atol=1e-12)
    assert np.allclose(Lam, Lam.transpose(1, 0, 3, 2), rtol=0, atol=1e-12)
    L = Lam.transpose(0, 2, 1, 3).reshape(6 * pk.H, 6 * pk.H)
    assert np.linalg.eigvalsh(0.5 * (L + L.T))[-1] < 1e-9
    assert np.allclose(M, M.T, rtol=0, atol=1e-10)


def test_part_wrenches_split(rng):
    """wrenches(): F is RNEA's joint wrench (whole tree, tested above); F_S = W^T F with W^T S = 0,
    and F_T = tau where S is orthonormal (every joint of a random tree: its universal axes are
    perpendicular)."""
    m = model()
    r, cuts = cases(m)["two-on-one-handle"]
    bodies, handles = part_of(m, r, cuts)
    q, qd, tau, F = state(m, 6)
    tr = truth(m, q, qd, tau, F)
    v_in, a_in, g = boundary_inputs(m, tr, bodies, handles, cuts)
    pk = PartKernel(m, bodies, handles)
    with pytest.raises(RuntimeError, match="call wrenches"):
        _ = pk.constraint_rows
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    pk.reduce(v_in, tau[pk.vsel], F[bodies])
    pk.solve(a_in, g)
    _, FS, FT = pk.wrenches()
    Wt = pk.constraint_rows
    assert Wt.shape == (int((6 - m.nv_j[bodies]).sum()), 6) and FS.shape == (Wt.shape[0],)
    row = 0
    for li, b in enumerate(bodies):
        ns = 6 - int(m.nv_j[b])
        S = pk.S[pk.idx_v[li]:pk.idx_v[li] + m.nv_j[b]]
        assert np.allclose(Wt[row:row + ns] @ S.T, 0.0, rtol=0, atol=1e-14)
        assert np.allclose(Wt[row:row + ns] @ Wt[row:row + ns].T, np.eye(ns), rtol=0, atol=1e-14)
        if ns:
            assert rel_err(FS[row:row + ns], Wt[row:row + ns] @ tr["W"][b]) < 1e-9
        row += ns
    assert rel_err(FT, tau[pk.vsel]) < 1e-13


def test_each_reduce_serves_one_solve():
    """The back-substitution works in the reduction's arrays: a second solve without a new reduce
    is refused (it would start from a spent reduction); after a new reduce it gives the same
    result again."""
    m = model()
    r, cuts = cases(m)["nested"]
    bodies, handles = part_of(m, r, cuts)
    q, qd, tau, F = state(m, 5)
    rng = np.random.default_rng(11)
    v_in, a_in, g = rng.normal(size=6), rng.normal(size=6), rng.normal(size=(len(handles), 6))
    pk = PartKernel(m, bodies, handles)
    with pytest.raises(PartreeInputError, match="needs a reduce"):
        pk.solve(a_in, g)
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    pk.reduce(v_in, tau[pk.vsel], F[bodies])
    first = pk.solve(a_in, g).copy()
    with pytest.raises(PartreeInputError, match="needs a reduce"):
        pk.solve(a_in, g)
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    pk.reduce(v_in, tau[pk.vsel], F[bodies])
    assert np.array_equal(pk.solve(a_in, g), first)


def test_pickles_without_its_workspace():
    m = model()
    r, cuts = cases(m)["nested"]
    bodies, handles = part_of(m, r, cuts)
    q, qd, tau, F = state(m, 8)
    rng = np.random.default_rng(9)
    v_in, a_in, g = rng.normal(size=6), rng.normal(size=6), rng.normal(size=(len(handles), 6))

    def run(pk):
        out = [x.copy() for x in pk.velocity(q[pk.qsel], qd[pk.vsel])]
        out += [x.copy() for x in pk.reduce(v_in, tau[pk.vsel], F[bodies])]
        out.append(pk.solve(a_in, g).copy())
        out += [x.copy() for x in pk.wrenches()]
        return out

    pk = PartKernel(m, bodies, handles, part_id=3)
    fresh = pickle.dumps(pk)
    ref = run(pk)
    blob = pickle.dumps(pk)              # after use: still no workspace, no wrench arrays
    assert len(blob) == len(fresh)
    state_keys = set(pk.__getstate__())
    assert not state_keys & set(PartKernel._WORKSPACE)
    assert {"bodies", "parent", "mass", "path_idx", "handles"} <= state_keys
    assert len(blob) < 0.5 * pk.nbytes
    pk2 = pickle.loads(blob)
    assert pk2.part_id == 3 and pk2._wrench_ws is None and not pk2.M.any()
    got = run(pk2)
    for a, b in zip(got, ref):
        assert np.array_equal(a, b)


# ----------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------
def test_bodies_not_one_connected_piece():
    m = binary_tree(15)
    for bodies in ([1, 2], [0, 3], [3, 1], [], [1, 3, 4, 2]):
        with pytest.raises(PartreeInputError, match="part 7: bodies are not one connected piece with its root first"):
            PartKernel(m, bodies, [], part_id=7)
    pk = PartKernel(m, [2, 5, 6, 12], [5])          # a connected piece, with one handle
    assert pk.parent.tolist() == [-1, 0, 0, 1] and pk.handles.tolist() == [1]


def test_handle_outside_the_part():
    m = binary_tree(15)
    with pytest.raises(PartreeInputError, match="part 2: a handle is not a body of the part"):
        PartKernel(m, [1, 3, 4], [3, 5], part_id=2)
    with pytest.raises(PartreeInputError, match="part 2: a handle is not a body of the part"):
        PartKernel(m, [1, 3, 4], [14], part_id=2)


def test_external_forces_of_the_wrong_shape():
    m = chain(6, alternate=True)
    pk = PartKernel(m, [2, 3, 4, 5], [], part_id=1)
    q, qd, tau, _ = state(m, 0)
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    for bad in (np.zeros((6, 6)), np.zeros((4, 3)), np.zeros(24)):
        with pytest.raises(PartreeInputError, match=re.escape(f"part 1: f_ext slice has shape {bad.shape}, "
                                                              f"expected (4, 6)")):
            pk.reduce(np.zeros(6), tau[pk.vsel], bad)
    # f_ext=None and zeros: the same
    pk.reduce(np.zeros(6), tau[pk.vsel])
    a = pk.solve(np.zeros(6), np.zeros((0, 6))).copy()
    pk.reduce(np.zeros(6), tau[pk.vsel], np.zeros((4, 6)))
    assert np.array_equal(pk.solve(np.zeros(6), np.zeros((0, 6))), a)


def test_singular_subtree_names_the_global_body():
    src = chain(6, alternate=True)
    mass, Ic = src.mass.copy(), src.I_com.copy()
    mass[5], Ic[5] = 0.0, 0.0
    args = (src.parent, src.jtype, src.axis, src.E_tree, src.r_tree, mass, src.com, Ic)
    # the model itself refuses the massless leaf joint; the part kernel's own check is tested without it
    with pytest.raises(PartreeInputError, match=r"joint 'j5' \(body 5, revolute\)"):
        partree.Model(*args, allow_massless=True)
    m = partree.Model(*args, allow_massless=True, validate=False)
    pk = PartKernel(m, [3, 4, 5], [])
    q, qd, tau, _ = state(m, 0)
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    with pytest.raises(PartreeInputError, match="body 5: its subtree has a singular inertia"):
        pk.reduce(np.zeros(6), tau[pk.vsel])


def test_solve_needs_one_wrench_per_handle():
    m = binary_tree(15)
    pk = PartKernel(m, [0, 1, 2, 3, 4, 5, 6], [3, 4, 6])
    q, qd, tau, _ = state(m, 0)
    pk.velocity(q[pk.qsel], qd[pk.vsel])
    pk.reduce(np.zeros(6), tau[pk.vsel])
    with pytest.raises(ValueError):
        pk.solve(np.zeros(6), np.zeros((2, 6)))
