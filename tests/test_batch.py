"""Batches of states: aba, rnea, crba and cfa with 2-D inputs (one state per row) equal the loop of
single calls bit for bit, on models with every joint type; mismatched rows and bad states are
named; 1-D calls are unchanged; the number of threads is a setting and a keyword."""
from pathlib import Path

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.models import chain, random_tree

DATA = Path(__file__).parent / "data"
B = 7


def _models():
    return {
        "random floating": random_tree(24, seed=5, floating_base=True),
        "spherical chain": chain(6, joint="spherical"),
        "mixed chain": chain(11, joint=["free", "revolute", "universal", "spherical", "prismatic", "fixed",
                                        "revolute", "universal", "prismatic", "spherical", "revolute"],
                             alternate=True),
        "space robot": partree.resolve_model("spacerobot"),
        "arm7 urdf": partree.load_urdf(DATA / "arm7.urdf"),
    }


MODELS = _models()


def states(m, count=B, seed=0):
    rng = np.random.default_rng(seed)
    Q = np.array([m.random_configuration(rng) for _ in range(count)])
    return Q, rng.normal(size=(count, m.nv)), rng.normal(size=(count, m.nv)) * 3


@pytest.mark.parametrize("name", sorted(MODELS))
def test_batch_equals_the_loop_of_single_calls(name):
    m = MODELS[name]
    Q, QD, X = states(m)
    A = partree.aba(m, Q, QD, X)
    R, W = partree.rnea(m, Q, QD, X, return_wrenches=True)
    M = partree.crba(m, Q)
    C = partree.cfa(m, Q, QD, X)
    assert A.shape == (B, m.nv) and R.shape == (B, m.nv) and W.shape == (B, m.n, 6) and M.shape == (B, m.nv, m.nv)
    for s in range(B):
        assert np.array_equal(A[s], partree.aba(m, Q[s], QD[s], X[s]))
        tau, w = partree.rnea(m, Q[s], QD[s], X[s], return_wrenches=True)
        assert np.array_equal(R[s], tau) and np.array_equal(W[s], w)
        assert np.array_equal(M[s], partree.crba(m, Q[s]))
        c = partree.cfa(m, Q[s], QD[s], X[s])
        for key in ("qdd", "constraint_force", "drive_force", "joint_wrench"):
            assert np.array_equal(getattr(C, key)[s], getattr(c, key)), key


@pytest.mark.parametrize("name", ["random floating", "mixed chain"])
def test_batch_with_external_forces_per_state_and_shared(name):
    m = MODELS[name]
    Q, QD, X = states(m, seed=1)
    rng = np.random.default_rng(2)
    F = rng.normal(size=(B, m.n, 6))
    A = partree.aba(m, Q, QD, X, F)
    R = partree.rnea(m, Q, QD, X, F)
    C = partree.cfa(m, Q, QD, X, F)
    shared = partree.aba(m, Q, QD, X, F[0])
    for s in range(B):
        assert np.array_equal(A[s], partree.aba(m, Q[s], QD[s], X[s], F[s]))
        assert np.array_equal(R[s], partree.rnea(m, Q[s], QD[s], X[s], F[s]))
        assert np.array_equal(C.joint_wrench[s], partree.cfa(m, Q[s], QD[s], X[s], F[s]).joint_wrench)
        assert np.array_equal(shared[s], partree.aba(m, Q[s], QD[s], X[s], F[0]))
    with pytest.raises(PartreeInputError, match=r"f_ext has shape \(3, "):
        partree.aba(m, Q, QD, X, F[:3])


def test_batch_threads_setting_and_keyword():
    m = MODELS["random floating"]
    Q, QD, X = states(m, count=23, seed=3)
    before = partree.get_num_threads()
    ref = np.array([partree.aba(m, Q[s], QD[s], X[s]) for s in range(23)])
    try:
        for t in range(1, before + 1):
            partree.set_num_threads(t)
            assert partree.get_num_threads() == t
            assert np.array_equal(partree.aba(m, Q, QD, X), ref)
        partree.set_num_threads(before)
        assert np.array_equal(partree.aba(m, Q, QD, X, threads=1), ref)
        assert partree.get_num_threads() == before          # the keyword holds for its call only
        for bad in (0, before + 1, 1.5, "2", True):
            with pytest.raises(PartreeInputError, match="threads must be an integer"):
                partree.set_num_threads(bad)
        with pytest.raises(PartreeInputError, match="threads must be an integer"):
            partree.aba(m, Q, QD, X, threads=0)
        assert partree.get_num_threads() == before
    finally:
        partree.set_num_threads(before)


def test_batch_more_threads_than_states_and_one_state():
    m = MODELS["spherical chain"]
    Q, QD, X = states(m, count=1)
    assert np.array_equal(partree.aba(m, Q, QD, X)[0], partree.aba(m, Q[0], QD[0], X[0]))
    assert np.array_equal(partree.crba(m, Q)[0], partree.crba(m, Q[0]))


def test_mismatched_rows_name_the_arrays_and_counts():
    m = MODELS["random floating"]
    Q, QD, X = states(m, count=5)
    with pytest.raises(PartreeInputError, match=r"q has 5, qd has 4, tau has 5"):
        partree.aba(m, Q, QD[:4], X)
    with pytest.raises(PartreeInputError, match=r"q has 5, qd has 5, qdd has 3"):
        partree.rnea(m, Q, QD, X[:3])
    with pytest.raises(PartreeInputError, match=r"q has 5, qd has 4, tau has 5"):
        partree.cfa(m, Q, QD[:4], X)
    with pytest.raises(PartreeInputError, match=r"qd has shape \(5, 3\); a batch .* needs \(states, "):
        partree.aba(m, Q, QD[:, :3], X)
    with pytest.raises(PartreeInputError, match=r"q has shape \(\d+,\); a batch"):
        partree.aba(m, Q[0], QD, X)


def test_a_bad_state_is_named():
    m = MODELS["random floating"]
    Q, QD, X = states(m, count=6)
    QD[3, 2] = np.nan
    with pytest.raises(PartreeInputError, match=r"^state 3: qd\[2\] is nan"):
        partree.aba(m, Q, QD, X)
    with pytest.raises(PartreeInputError, match=r"^state 3: qd\[2\] is nan"):
        partree.cfa(m, Q, QD, X)
    Q2, QD2, X2 = states(m, count=6)
    k = int(partree.checks.quaternion_starts(m)[0])
    Q2[4, k:k + 4] = 0.0
    with pytest.raises(PartreeInputError, match=r"^state 4: joint .* quaternion"):
        partree.crba(m, Q2)


def test_one_dimensional_calls_keep_their_shapes_and_types():
    m = MODELS["mixed chain"]
    Q, QD, X = states(m, count=1)
    assert partree.aba(m, Q[0], QD[0], X[0]).shape == (m.nv,)
    assert partree.rnea(m, list(Q[0]), QD[0], X[0]).shape == (m.nv,)
    assert partree.crba(m, Q[0]).shape == (m.nv, m.nv)
    r = partree.cfa(m, Q[0], QD[0], X[0])
    assert r.qdd.shape == (m.nv,) and r.joint_wrench.shape == (m.n, 6)


def test_batch_cfa_result_answers_per_state():
    m = MODELS["mixed chain"]
    Q, QD, X = states(m, count=4)
    C = partree.cfa(m, Q, QD, X)
    name = m.joint_names[2]          # a universal joint: its basis depends on q
    for s in range(4):
        c = partree.cfa(m, Q[s], QD[s], X[s])
        assert np.array_equal(C.constraint_force_of(name)[s], c.constraint_force_of(name))
        assert np.array_equal(C.constraint_basis(name)[s], c.constraint_basis(name))
        assert np.allclose(C.constraint_wrench_of(name)[s], c.constraint_wrench_of(name), rtol=0, atol=1e-12)
    assert "4 states" in repr(C)
    with pytest.raises(PartreeInputError, match="leaf-first"):
        partree.cfa(m, Q, QD, X, method="odd-even")


def test_batch_out_arrays():
    m = MODELS["space robot"]
    Q, QD, X = states(m, count=5)
    out = np.empty((5, m.nv))
    assert partree.aba(m, Q, QD, X, out=out) is out
    assert np.array_equal(out, partree.aba(m, Q, QD, X))
    M = np.empty((5, m.nv, m.nv))
    assert partree.crba(m, Q, out=M) is M
    with pytest.raises(PartreeInputError, match=r"out is an array of shape \(4, "):
        partree.aba(m, Q, QD, X, out=np.empty((4, m.nv)))
