"""Constraint force algorithm (seed 000): every method against ABA, RNEA's joint wrenches and
Pinocchio's data.f; constraint bases; odd-even level counts; the planar chain on which the
compliance form loses digits; errors."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import partree
from partree import joints as J
from partree.algorithms.cfa import DEFAULT_METHOD, CFAResult, cfa, constraint_bases
from partree.algorithms.cfa.common import workspace as cfa_workspace
from partree.model import Model, PartreeInputError
from partree.models import auto_tree
from partree.models.generators import binary_tree, chain, random_tree

from conftest import rel_err

METHODS = ("odd-even", "odd-even-compliance", "leaf-first", "general")
ODD_EVEN = ("odd-even", "odd-even-compliance")
ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rel(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if b.size == 0:
        return 0.0
    return rel_err(a, b)


def _mixed_chain():
    seq = ["free", "revolute", "universal", "spherical", "prismatic", "fixed", "revolute", "universal",
           "revolute", "spherical", "prismatic", "revolute", "fixed", "revolute"]
    return chain(len(seq), joint=seq, alternate=True)


MODELS = {
    "chain-revolute": lambda: chain(9, alternate=True),
    "chain-prismatic": lambda: chain(6, joint="prismatic", alternate=True),
    "chain-universal": lambda: chain(7, joint="universal"),
    "chain-spherical": lambda: chain(5, joint="spherical"),
    "chain-free": lambda: chain(4, joint="free"),
    "chain-mixed-floating": _mixed_chain,
    "autotree-chain": lambda: auto_tree(33, 1, skew=0.3, taper=0.95),
    "autotree-binary": lambda: auto_tree(31, 2, skew=0.7, taper=0.9),
    "autotree-bushy": lambda: auto_tree(40, 3.5, skew=-0.4, taper=0.97),
    "binary-tree": lambda: binary_tree(31),
    "random-mixed": lambda: random_tree(60, seed=1, joint_types=ALL_TYPES, p_chain=0.6),
    "random-mixed-floating": lambda: random_tree(60, seed=2, joint_types=ALL_TYPES, floating_base=True, p_chain=0.5),
    "random-floating-bushy": lambda: random_tree(50, seed=3, floating_base=True),
    "random-binary": lambda: random_tree(40, seed=4, joint_types=ALL_TYPES, max_children=2, p_chain=0.3),
}


def _state(m, rng, fext):
    q = m.random_configuration(rng)
    qd = m.random_velocity(rng, 2.0)
    tau = rng.normal(size=m.nv) * 3
    F = rng.normal(size=(m.n, 6)) if fext else None
    return q, qd, tau, F


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(MODELS))
def test_cfa_matches_aba_and_rnea(name, method, rng):
    m = MODELS[name]()
    for trial, fext in enumerate((False, True)):
        q, qd, tau, F = _state(m, rng, fext)
        res = cfa(m, q, qd, tau, f_ext=F, method=method)
        assert isinstance(res, CFAResult)
        qdd_ref = partree.aba(m, q, qd, tau, f_ext=F)
        assert res.qdd.shape == (m.nv,)
        assert _rel(res.qdd, qdd_ref) < 1e-10
        tau_r, W_ref = partree.rnea(m, q, qd, qdd_ref, f_ext=F, return_wrenches=True)
        assert res.joint_wrench.shape == (m.n, 6)
        assert _rel(res.joint_wrench, W_ref) < 1e-10
        # backward error: RNEA run with the method's own qdd (a consistent pair).  RNEA(qdd) is
        # sensitive to the qdd of the tiny tip bodies of the tapered autoTrees under f_ext, hence 1e-9
        _, W_own = partree.rnea(m, q, qd, res.qdd, f_ext=F, return_wrenches=True)
        assert _rel(res.joint_wrench, W_own) < 1e-9
        # constraint forces: F_S,j = W_j^T F_j, and F_j = S_j F_T,j + W_j F_S,j (seed eq. 5)
        ns = int((6 - m.nv_j).sum())
        assert res.constraint_force.shape == (ns,)
        Wt, idx_s = constraint_bases(m, q)
        FS_ref = np.concatenate([Wt[idx_s[j]:idx_s[j] + 6 - m.nv_j[j]] @ W_ref[j] for j in range(m.n)])
        assert _rel(res.constraint_force, FS_ref) < 1e-10
        S = cfa_workspace(m)[1].S
        for j in range(m.n):
            Sj = S[m.v_slice(j)].T
            Wj = res.constraint_basis(j)
            Fj = Sj @ res.drive_force[m.v_slice(j)] + Wj @ res.constraint_force_of(j)
            assert _rel(Fj, res.joint_wrench[j]) < 1e-10
            assert _rel(Sj.T @ res.joint_wrench[j], tau[m.v_slice(j)]) < 1e-10


@pytest.mark.parametrize("method", ODD_EVEN)
@pytest.mark.parametrize("name", ["random-mixed", "random-mixed-floating", "autotree-binary", "chain-mixed-floating"])
def test_odd_even_constraint_form_of_one_body_chains(name, method, rng):
    """One-body chains collapse in inertia form by default (Woodbury: ABA's step); the chain code
    (compliance form: W (W^T IA^-1 W)^-1 W^T; scattering form: the one-body segment) gives the
    same answer."""
    m = MODELS[name]()
    q, qd, tau, F = _state(m, rng, True)
    a = cfa(m, q, qd, tau, F, method=method, one_body_chains="inertia")
    b = cfa(m, q, qd, tau, F, method=method, one_body_chains="constraint")
    assert _rel(a.qdd, b.qdd) < 1e-10
    assert _rel(a.joint_wrench, b.joint_wrench) < 1e-10
    assert _rel(a.constraint_force, b.constraint_force) < 1e-10


def test_woodbury_identity(rng):
    """W (W^T IA^-1 W)^-1 W^T = IA - IA S (S^T IA S)^-1 S^T IA for S, W orthonormal complements:
    the chain collapse IA_l += X^T W A^-1 W^T X is ABA's articulated-inertia step."""
    for nv in range(0, 7):
        Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
        S, W = Q[:, :nv], Q[:, nv:]
        B = rng.normal(size=(6, 6))
        IA = B @ B.T + 6 * np.eye(6)
        lhs = W @ np.linalg.solve(W.T @ np.linalg.solve(IA, W), W.T) if nv < 6 else np.zeros((6, 6))
        rhs = IA - IA @ S @ np.linalg.solve(S.T @ IA @ S, S.T @ IA) if nv else IA
        assert np.abs(lhs - rhs).max() < 1e-10 * np.abs(IA).max()


def test_pinocchio_joint_wrenches(rng):
    pin = pytest.importorskip("pinocchio")
    from partree.io.pinocchio import pin_wrench, to_pinocchio
    from partree.models.seeds import space_robot

    models = [auto_tree(20, 1, skew=0.3, taper=0.95), auto_tree(31, 2, skew=0.7, taper=0.9),
              random_tree(40, seed=5, floating_base=True, joint_types=("revolute", "prismatic", "universal",
                                                                        "spherical"), p_chain=0.5),
              random_tree(40, seed=6, joint_types=("revolute", "prismatic", "universal", "spherical")),
              space_robot()]
    for m in models:
        assert not (m.jtype == J.FIXED).any()
        pm, jid = to_pinocchio(m)
        pd = pm.createData()
        vmap = np.zeros(m.nv, dtype=int)
        qp_idx = np.zeros(m.nq, dtype=int)
        for i in range(m.n):
            jm = pm.joints[pm.getJointId(m.joint_names[i])]
            vmap[m.v_slice(i)] = np.arange(jm.idx_v, jm.idx_v + jm.nv)
            qp_idx[m.q_slice(i)] = np.arange(jm.idx_q, jm.idx_q + jm.nq)
        q, qd, tau, _ = _state(m, rng, False)
        qp = np.zeros(pm.nq)
        qp[qp_idx] = q
        vp = np.zeros(pm.nv)
        vp[vmap] = qd
        for method in METHODS:
            res = cfa(m, q, qd, tau, method=method)
            ap = np.zeros(pm.nv)
            ap[vmap] = res.qdd
            pin.rnea(pm, pd, qp, vp, ap)
            Fp = np.array([pin_wrench(pd.f[int(jid[i])]) for i in range(m.n)])
            assert _rel(res.joint_wrench, Fp) < 1e-10, (m.name, method)
            taup = np.zeros(pm.nv)
            taup[vmap] = tau
            a_ref = pin.aba(pm, pd, qp, vp, taup)[vmap]
            assert _rel(res.qdd, a_ref) < 1e-10, (m.name, method)


# ----------------------------------------------------------------------------------------------
# constraint bases
# ----------------------------------------------------------------------------------------------
def test_constraint_bases_properties(rng):
    m = random_tree(80, seed=7, joint_types=ALL_TYPES, floating_base=True)
    q = m.random_configuration(rng)
    Wt, idx_s = constraint_bases(m, q)
    S = cfa_workspace(m)[1].S
    for j in range(m.n):
        nv = int(m.nv_j[j])
        W = Wt[idx_s[j]:idx_s[j] + 6 - nv].T
        assert W.shape == (6, 6 - nv)
        Sj = S[m.v_slice(j)].T
        if 0 < nv < 6:
            assert np.abs(W.T @ W - np.eye(6 - nv)).max() < 1e-12
            assert np.abs(W.T @ Sj).max() < 1e-12
        code = int(m.jtype[j])
        if code == J.FREE:
            assert W.shape[1] == 0
        elif code == J.FIXED:
            assert np.array_equal(W, np.eye(6))
        elif code == J.SPHERICAL:
            assert np.array_equal(W, np.vstack([np.zeros((3, 3)), np.eye(3)]))
        elif code == J.REVOLUTE:
            assert np.array_equal(W[3:, 2:], np.eye(3)) and not W[3:, :2].any() and not W[:3, 2:].any()
        elif code == J.PRISMATIC:
            assert np.array_equal(W[:3, :3], np.eye(3)) and not W[3:, :3].any() and not W[:3, 3:].any()
        elif code == J.UNIVERSAL:
            n = np.cross(Sj[:3, 0], Sj[:3, 1])
            assert np.allclose(W[:3, 0], n / np.linalg.norm(n)) and np.array_equal(W[3:, 1:], np.eye(3))


def test_revolute_basis_rule():
    """Revolute about z: angular part (x, y), linear identity; about y: (x, -z)."""
    m = chain(2, joint="revolute", alternate=True)          # axes z, y
    Wt, idx_s = constraint_bases(m, m.neutral())
    Wz = Wt[idx_s[0]:idx_s[0] + 5].T
    Wy = Wt[idx_s[1]:idx_s[1] + 5].T
    assert np.array_equal(Wz[:3, :2], np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    assert np.allclose(Wy[:3, :2], np.array([[1.0, 0.0], [0.0, 0.0], [0.0, -1.0]]))


def test_result_accessors(rng):
    from partree.models.seeds import space_robot

    m = space_robot()
    q, qd, tau, _ = _state(m, rng, False)
    assert DEFAULT_METHOD == "leaf-first" and cfa(m, q, qd, tau).method == "leaf-first"
    res = cfa(m, q, qd, tau, method="odd-even")
    assert res.constraint_force_of("base").shape == (0,)
    f = res.constraint_force_of("L11")
    W = res.constraint_basis("L11")
    assert f.shape == (5,) and W.shape == (6, 5)
    assert np.allclose(W @ f, res.constraint_wrench_of("L11"))
    assert np.allclose(W.T @ res.joint_wrench[m.joint_id("L11")], f)
    assert res.constraint_slice("L11") == slice(0, 5)
    assert "odd-even" in repr(res)


# ----------------------------------------------------------------------------------------------
# odd-even levels
# ----------------------------------------------------------------------------------------------
def _chain_levels(L):
    out = []
    s = 1
    while s < L:
        out.append(len(range(s, L, 2 * s)))
        s *= 2
    return out


@pytest.mark.parametrize("method", ODD_EVEN)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 13, 64, 65, 100, 130, 1000])
def test_levels_on_chain(n, method, rng):
    """ceil(log2 n) levels on a chain of n joints, the work halving from level to level (the
    scattering kernel walks the lowest levels block by block for the cache; it counts what it
    composes, and the counts are the same)."""
    m = auto_tree(n, 1, skew=0.2, taper=0.99)
    q, qd, tau, _ = _state(m, rng, False)
    res = cfa(m, q, qd, tau, method=method)
    assert len(res.levels) == (math.ceil(math.log2(n)) if n > 1 else 0)
    assert res.levels == _chain_levels(n)
    assert sum(res.levels) == n - 1                 # every joint but the top one
    for a, b in zip(res.levels, res.levels[1:]):    # the work halves from level to level
        assert b in (a // 2, (a + 1) // 2)
    if n & (n - 1) == 0 and n > 1:
        assert res.levels == [n >> (k + 1) for k in range(int(math.log2(n)))]
    assert _rel(res.qdd, partree.aba(m, q, qd, tau)) < 1e-10


@pytest.mark.parametrize("method", ODD_EVEN)
def test_levels_on_trees(method, rng):
    for m in (random_tree(300, seed=8, p_chain=0.7), auto_tree(200, 1.2), binary_tree(63)):
        ptr, idx = m.chains()
        expect = np.zeros(64, dtype=int)
        for L in np.diff(ptr):
            for k, c in enumerate(_chain_levels(int(L))):
                expect[k] += c
        nl = int(np.flatnonzero(expect)[-1]) + 1 if expect.any() else 0
        q, qd, tau, _ = _state(m, rng, False)
        res = cfa(m, q, qd, tau, method=method)
        assert res.levels == expect[:nl].tolist()
        assert len(res.levels) == (math.ceil(math.log2(int(np.diff(ptr).max()))) if np.diff(ptr).max() > 1 else 0)


@pytest.mark.parametrize("method", ODD_EVEN)
def test_long_chain_backward_error(method, rng):
    """A long chain (odd-even over 2000 joints, 11 levels): backward error of qdd and of the
    wrenches.  The joint forces in play are the bias forces h (gravity on a 2000-link chain,
    |h| ~ 1e9 against |tau| ~ 1e2), so the backward error is measured against max(|tau|, |h|)."""
    m = auto_tree(2000, 1, skew=0.3, taper=1.0)
    q, qd, tau, _ = _state(m, rng, False)
    res = cfa(m, q, qd, tau, method=method)
    assert len(res.levels) == 11
    h = partree.bias_forces(m, q, qd)
    tau_back = partree.rnea(m, q, qd, res.qdd)
    assert np.linalg.norm(tau_back - tau) / max(np.linalg.norm(tau), np.linalg.norm(h)) < 1e-9
    qdd_ref = partree.aba(m, q, qd, tau)
    assert _rel(res.qdd, qdd_ref) < 1e-9
    # forward error of the wrenches (RNEA with the reference qdd; RNEA with res.qdd would multiply
    # its ~1e-11 errors by the chain's composite inertias, ~1e9)
    _, W_ref = partree.rnea(m, q, qd, qdd_ref, return_wrenches=True)
    assert _rel(res.joint_wrench, W_ref) < 1e-9
    lf = cfa(m, q, qd, tau, method="leaf-first")
    assert _rel(res.joint_wrench, lf.joint_wrench) < 1e-9


@pytest.mark.parametrize("method", ["odd-even", "odd-even-compliance", "general"])
def test_newton_euler_wrenches(method, rng):
    m = MODELS["random-mixed-floating"]()
    q, qd, tau, F = _state(m, rng, True)
    a = cfa(m, q, qd, tau, F, method=method)
    b = cfa(m, q, qd, tau, F, method=method, wrenches="newton-euler")
    assert np.array_equal(a.qdd, b.qdd)
    _, W = partree.rnea(m, q, qd, b.qdd, f_ext=F, return_wrenches=True)
    assert _rel(b.joint_wrench, W) < 1e-12
    assert _rel(a.joint_wrench, b.joint_wrench) < 1e-10
    Wt, idx_s = constraint_bases(m, q)
    assert _rel(b.constraint_force, np.concatenate([Wt[idx_s[j]:idx_s[j] + 6 - m.nv_j[j]] @ W[j]
                                                    for j in range(m.n)])) < 1e-12


def test_planar_chain_ill_conditioned_constraint_system(rng):
    """A planar chain loaded out of its plane (gravity along the joint axes) is statically
    determinate out of plane, and its constraint system's condition number grows like a power of
    the length: the compliance form's solved F_S lose digits (the same for 'general'), qdd does
    not.  The Newton-Euler wrenches are as accurate as qdd."""
    m = auto_tree(3000, 1, skew=0.0)
    q, qd, tau, _ = _state(m, rng, False)
    qdd_ref = partree.aba(m, q, qd, tau)
    _, W_ref = partree.rnea(m, q, qd, qdd_ref, return_wrenches=True)
    res = cfa(m, q, qd, tau, method="odd-even-compliance", wrenches="newton-euler")
    assert _rel(res.qdd, qdd_ref) < 1e-10
    assert _rel(res.joint_wrench, W_ref) < 1e-10


def test_planar_chain_scattering_form_is_accurate(rng):
    """The planar autoTree chain (skew = 0) at 2*10^4 bodies: the scattering form's odd-even
    wrenches agree with RNEA's (run with ABA's qdd) to ~1e-13 of the largest wrench and ~1e-12 per
    joint, as leaf-first's do.  The compliance form on the same state is off by ~4e-3 of the
    largest wrench (~1e-2 per joint; 1e-6 at 3000 bodies, 0.2 at 5*10^4, a non-positive pivot at
    10^6), while its qdd stays at ~1e-13."""
    m = auto_tree(20000, 1, skew=0.0)
    q, qd, tau, _ = _state(m, rng, False)
    qdd_ref = partree.aba(m, q, qd, tau)
    _, W_ref = partree.rnea(m, q, qd, qdd_ref, return_wrenches=True)
    res = cfa(m, q, qd, tau, method="odd-even")
    assert len(res.levels) == 15
    scale = np.abs(W_ref).max()
    assert np.abs(res.qdd - qdd_ref).max() < 1e-11 * np.abs(qdd_ref).max()
    assert np.abs(res.joint_wrench - W_ref).max() < 1e-11 * scale
    # per joint, for joints carrying more than 1e-6 of the largest wrench
    err = np.linalg.norm(res.joint_wrench - W_ref, axis=1)
    nrm = np.linalg.norm(W_ref, axis=1)
    big = nrm > 1e-6 * scale
    assert big.mean() > 0.9
    assert (err[big] / nrm[big]).max() < 1e-9
    Wt, idx_s = constraint_bases(m, q)
    FS_ref = np.einsum("jdk,jk->jd", Wt.reshape(m.n, 5, 6), W_ref).ravel()
    assert np.abs(res.constraint_force - FS_ref).max() < 1e-11 * scale
    lf = cfa(m, q, qd, tau, method="leaf-first")
    assert np.abs(res.joint_wrench - lf.joint_wrench).max() < 1e-11 * scale


# ----------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------
def _with_body(m, j, mass, I_com):
    ms = m.mass.copy()
    Ic = m.I_com.copy()
    ms[j] = mass
    Ic[j] = I_com
    return Model(m.parent, m.jtype, m.axis, m.E_tree, m.r_tree, ms, m.com, Ic, axis2=m.axis2,
                 gravity=m.gravity, joint_names=[f"joint{i}" for i in range(m.n)],
                 body_names=[f"link{i}" for i in range(m.n)], allow_massless=True)


@pytest.mark.parametrize("method", ["odd-even", "odd-even-compliance", "general"])
def test_massless_body_error(method, rng):
    m = _with_body(chain(6, alternate=True), 3, 0.0, np.zeros((3, 3)))
    q, qd, tau, _ = _state(m, rng, False)
    with pytest.raises(PartreeInputError, match=r"body 3 \(link3, joint 'joint3'\).*mass"):
        cfa(m, q, qd, tau, method=method)


@pytest.mark.parametrize("method", ["odd-even-compliance", "general"])
def test_singular_inertia_error(method, rng):
    m = _with_body(binary_tree(7), 2, 1.0, np.zeros((3, 3)))     # a point mass: I singular
    q, qd, tau, _ = _state(m, rng, False)
    with pytest.raises(PartreeInputError, match=r"body 2 \(link2.*singular"):
        cfa(m, q, qd, tau, method=method)


@pytest.mark.parametrize("one_body_chains", ["inertia", "constraint"])
def test_scattering_needs_no_inverse_inertia(one_body_chains, rng):
    """The scattering form never inverts a body inertia: a point mass off its joint axis (S^T I S
    > 0) is fine, in a one-body chain and inside a longer chain."""
    for m, j in ((_with_body(binary_tree(7), 2, 1.0, np.zeros((3, 3))), 2),
                 (_with_body(chain(6, alternate=True), 3, 1.0, np.zeros((3, 3))), 3)):
        q, qd, tau, _ = _state(m, rng, False)
        res = cfa(m, q, qd, tau, method="odd-even", one_body_chains=one_body_chains)
        qdd = partree.aba(m, q, qd, tau)
        assert _rel(res.qdd, qdd) < 1e-10
        _, W = partree.rnea(m, q, qd, qdd, return_wrenches=True)
        assert _rel(res.joint_wrench, W) < 1e-10


def test_leaf_first_accepts_massless_interior_body(rng):
    """Leaf-first needs no I^-1: a massless interior body with a massive subtree is fine."""
    m = _with_body(chain(6, alternate=True), 3, 0.0, np.zeros((3, 3)))
    q, qd, tau, _ = _state(m, rng, False)
    res = cfa(m, q, qd, tau, method="leaf-first")
    assert _rel(res.qdd, partree.aba(m, q, qd, tau)) < 1e-12
    _, W = partree.rnea(m, q, qd, res.qdd, return_wrenches=True)
    assert _rel(res.joint_wrench, W) < 1e-10


def test_bad_arguments():
    m = chain(3)
    with pytest.raises(PartreeInputError, match="method"):
        cfa(m, m.neutral(), np.zeros(3), np.zeros(3), method="dense")
    with pytest.raises(PartreeInputError, match="tau"):
        cfa(m, m.neutral(), np.zeros(3), np.zeros(4))
    with pytest.raises(PartreeInputError, match="one_body_chains"):
        cfa(m, m.neutral(), np.zeros(3), np.zeros(3), one_body_chains="x")
    with pytest.raises(PartreeInputError, match="wrenches"):
        cfa(m, m.neutral(), np.zeros(3), np.zeros(3), wrenches="x")


# ----------------------------------------------------------------------------------------------
# scripts (short runs)
# ----------------------------------------------------------------------------------------------
def test_space_robot_script_short(tmp_path):
    pytest.importorskip("matplotlib")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "examples", "space_robot_cfa.py"), "--t-end", "0.02",
                          "--out", str(tmp_path), "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "CFA odd-even" in out.stdout
    for f in ("base_attitude.png", "arm1_joint_angles.png", "constraint_force_L11.png"):
        assert (tmp_path / f).stat().st_size > 0


def test_bench_script_small():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmarks", "bench_cfa.py"), "--sizes", "300",
                          "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "odd-even" in out.stdout and "ABA" in out.stdout
