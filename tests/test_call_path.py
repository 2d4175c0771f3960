"""The call path of aba, rnea, crba and cfa: the packed model and workspace buffers, ``out=`` and
``check=``, inputs of other types, the same numbers as the kernels called with the arrays one by
one, bit for bit, and the welded bodies the compiled calls merge."""
import pickle
from pathlib import Path

import numpy as np
import pytest

import partree
from partree import checks
from partree.algorithms.aba import aba_kernel
from partree.algorithms.crba import COMPACT, _composite_inertias, _crba_entries
from partree.algorithms.rnea import rnea_kernel
from partree.algorithms.welded import MERGE_FRACTION, merged_model_args
from partree.joints import FIXED
from partree.errors import PartreeInputError
from partree.models import chain, random_tree

DATA = Path(__file__).parent / "data"


def mixed():
    return chain(11, joint=["free", "revolute", "universal", "spherical", "prismatic", "fixed", "revolute",
                            "universal", "prismatic", "spherical", "revolute"], alternate=True)


def state(m, seed=0):
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv), rng.normal(size=(m.n, 6))


def direct(m, q, qd, x, F=None, merged=True):
    """ABA, RNEA (tau, wrenches) and CRBA by the kernels with the arrays one by one: with
    ``merged``, those of the model with its welded bodies merged where the compiled calls merge
    them (ABA, RNEA without wrenches, CRBA: ``partree.algorithms.welded``; F must then carry no
    wrench on a welded body); RNEA's wrenches always with the model's own arrays."""
    mm = merged_model_args(m) if merged else None
    args, Fm = checks.model_args(m), F
    if mm is not None:
        args, orig = mm
        if F is not None:
            assert not F[m.jtype == FIXED].any()
            Fm = np.ascontiguousarray(F[orig])
    nb = args[0].shape[0]

    def kernel_forces(f):
        return (np.zeros((1, 6)), False) if f is None else (np.ascontiguousarray(f), True)

    Fk, has = kernel_forces(Fm)
    d = m.create_data()
    E, r = np.zeros((nb, 3, 3)), np.zeros((nb, 3))
    v, c, a, pA = (np.zeros((nb, 6)) for _ in range(4))
    IA = np.zeros((nb, 6, 6))
    assert aba_kernel(*args, m.gravity, q, qd, x, Fk, has, E, r, v, c, IA, pA, a, d.S, d.U, d.Dinv, d.u,
                      d.qdd) < 0
    qdd = d.qdd.copy()
    rnea_kernel(*args, m.gravity, q, qd, x, Fk, has, E, r, v, a, pA, d.S, d.tau)
    tau = d.tau.copy()
    d = m.create_data()
    Fk, has = kernel_forces(F)
    rnea_kernel(*checks.model_args(m), m.gravity, q, qd, x, Fk, has, d.E, d.r, d.v, d.a, d.pA, d.S, d.tau)
    W = d.pA.copy()
    IC = np.zeros((nb, COMPACT))
    _composite_inertias(*args, q, E, r, IC, d.S)
    M = np.zeros((m.nv, m.nv))
    e = np.zeros(0, dtype=np.int64)
    _crba_entries(args[0], args[10], E, r, IC, d.S, e, e, np.zeros(0), True, M)
    return qdd, tau, W, M


@pytest.mark.parametrize("make", [mixed, lambda: random_tree(30, seed=2, floating_base=True),
                                  lambda: chain(5, joint="spherical")])
def test_same_numbers_as_the_kernels_with_the_arrays_one_by_one(make):
    m = make()
    for with_f in (False, True):
        q, qd, x, F = state(m, seed=int(with_f))
        F[m.jtype == FIXED] = 0.0               # welded bodies' wrenches: test_welded_bodies_merged
        F = F if with_f else None
        qdd, tau, W, M = direct(m, q, qd, x, F)
        qdd0, tau0, _, _ = direct(m, q, qd, x, F, merged=False)
        for _ in range(2):          # the first call builds the buffers, the second goes straight through
            assert np.array_equal(partree.aba(m, q, qd, x, F), qdd)
            t, w = partree.rnea(m, q, qd, x, F, return_wrenches=True)
            assert np.array_equal(t, tau0) and np.array_equal(w, W)
            assert np.array_equal(partree.rnea(m, q, qd, x, F), tau)
            assert np.array_equal(partree.crba(m, q), M)
            assert np.array_equal(partree.cfa(m, q, qd, x, F).qdd, qdd0)


def test_out_is_written_and_returned():
    m = mixed()
    q, qd, x, F = state(m)
    d = m.create_data()
    for fn, args, shape in ((partree.aba, (q, qd, x), (m.nv,)), (partree.rnea, (q, qd, x), (m.nv,)),
                            (partree.crba, (q,), (m.nv, m.nv))):
        ref = fn(m, *args)
        out = np.full(shape, np.nan)
        assert fn(m, *args, out=out) is out
        assert np.array_equal(out, ref)
        out[...] = np.nan
        assert fn(m, *args, data=d, out=out, check=False) is out
        assert np.array_equal(out, ref)
    ref = partree.cfa(m, q, qd, x, F)
    res = partree.cfa(m, *state(m, seed=5)[:3])
    assert partree.cfa(m, q, qd, x, F, out=res, check=False) is res
    for key in ("qdd", "constraint_force", "drive_force", "joint_wrench"):
        assert np.array_equal(getattr(res, key), getattr(ref, key)), key
    assert np.array_equal(res.constraint_rows, ref.constraint_rows)      # the rows of the new q
    again = pickle.loads(pickle.dumps(res))
    assert np.array_equal(again.joint_wrench, ref.joint_wrench) and np.shares_memory(again.qdd, again._buf)
    m2 = again._model                       # a copy of the model came with it
    assert partree.cfa(m2, *state(m, seed=6)[:3], out=again) is again
    assert np.array_equal(again.qdd, partree.cfa(m, *state(m, seed=6)[:3]).qdd)


@pytest.mark.parametrize("bad", [np.empty(3), np.empty(7, dtype=np.float32), np.empty((7, 1)), np.empty(14)[::2],
                                 [0.0] * 7, "out"])
def test_a_wrong_out_is_refused(bad):
    m = chain(7)
    q = np.zeros(7)
    with pytest.raises(PartreeInputError, match=r"^out is .*; it must be a writable C-contiguous float64 array of "
                                                r"shape \(7,\)"):
        partree.aba(m, q, q, q, out=bad)
    with pytest.raises(PartreeInputError, match=r"shape \(7, 7\)"):
        partree.crba(m, q, out=np.empty((7, 6)))
    ro = np.empty(7)
    ro.flags.writeable = False
    with pytest.raises(PartreeInputError, match="read-only"):
        partree.rnea(m, q, q, q, out=ro)
    with pytest.raises(PartreeInputError, match="CFAResult of an earlier leaf-first"):
        partree.cfa(m, q, q, q, out=np.empty(7))
    other = partree.cfa(chain(7), q, q, q)
    with pytest.raises(PartreeInputError, match="on this model"):
        partree.cfa(m, q, q, q, out=other)


def test_check_false_gives_the_same_numbers_and_skips_only_the_value_checks():
    m = random_tree(20, seed=4, floating_base=True)
    q, qd, x, F = state(m)
    assert np.array_equal(partree.aba(m, q, qd, x, F, check=False), partree.aba(m, q, qd, x, F))
    assert np.array_equal(partree.rnea(m, q, qd, x, check=False), partree.rnea(m, q, qd, x))
    assert np.array_equal(partree.crba(m, q, check=False), partree.crba(m, q))
    assert np.array_equal(partree.cfa(m, q, qd, x, check=False).constraint_force,
                          partree.cfa(m, q, qd, x).constraint_force)
    bad = qd.copy()
    bad[1] = np.inf
    with pytest.raises(PartreeInputError, match=r"qd\[1\] is inf"):
        partree.aba(m, q, bad, x)
    assert not np.isfinite(partree.aba(m, q, bad, x, check=False)).all()     # computed, not checked
    with pytest.raises(PartreeInputError, match=r"tau has shape \(3,\)"):
        partree.aba(m, q, qd, x[:3], check=False)                                # sizes always checked
    with pytest.raises(PartreeInputError, match=r"f_ext has shape \(2, 6\)"):
        partree.rnea(m, q, qd, x, F[:2], check=False)


def test_inputs_of_other_types_are_converted_as_before():
    m = mixed()
    q, qd, x, F = state(m)
    ref = partree.aba(m, q, qd, x, F)
    ro = x.copy()
    ro.flags.writeable = False
    assert np.array_equal(partree.aba(m, list(q), tuple(qd), ro, F), ref)
    assert np.array_equal(partree.aba(m, q, qd, x, {name: F[i] for i, name in enumerate(m.joint_names)}), ref)
    assert np.array_equal(partree.aba(m, np.repeat(q, 2)[::2], qd, x, F), ref)       # not contiguous
    f32 = partree.aba(m, q.astype(np.float32), qd, x)
    assert np.array_equal(f32, partree.aba(m, q.astype(np.float32).astype(np.float64), qd, x))
    with pytest.raises(PartreeInputError, match="complex"):
        partree.aba(m, q + 0j, qd, x)
    with pytest.raises(PartreeInputError, match="q is None"):
        partree.rnea(m, None, qd, x)


def test_the_model_buffer_follows_edits_of_the_model():
    m = chain(4)
    q, qd, x, _ = state(m)
    partree.aba(m, q, qd, x)
    assert m._packed is not None and np.shares_memory(m.mass, m._packed.buf)
    g = partree.rnea(m, q, np.zeros(4), np.zeros(4))
    m.gravity[:] = 0.0                          # an edit in place is what the next call sees
    assert np.array_equal(partree.rnea(m, q, np.zeros(4), np.zeros(4)), np.zeros(4))
    m.gravity[:] = (0.0, 0.0, -9.81)
    assert np.array_equal(partree.rnea(m, q, np.zeros(4), np.zeros(4)), g)
    m.mass = m.mass * 2.0                       # a new array drops the buffer; the next call packs it
    assert m._packed is None
    m.I_com = m.I_com * 2.0
    assert np.allclose(partree.rnea(m, q, np.zeros(4), np.zeros(4)), 2.0 * g, rtol=1e-14, atol=0)
    assert np.shares_memory(m.mass, m._packed.buf)


def test_the_packed_fields_are_the_models():
    from partree.algorithms.packed import PACKED_FIELDS
    from partree.model import _PACKED_FIELDS

    assert set(PACKED_FIELDS) == _PACKED_FIELDS


def test_pickled_model_and_data_are_their_own():
    m = random_tree(9, seed=1)
    q, qd, x, _ = state(m)
    ref = partree.aba(m, q, qd, x)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2._packed is None
    assert np.array_equal(partree.aba(m2, q, qd, x), ref)
    m2.gravity[:] = 0.0
    assert np.array_equal(partree.aba(m, q, qd, x), ref)
    d = m.create_data()
    partree.aba(m, q, qd, x, data=d)
    d2 = pickle.loads(pickle.dumps(d))
    assert np.array_equal(d2.qdd, ref) and np.shares_memory(d2.qdd, d2._buf)
    assert np.array_equal(partree.aba(m, q, qd, x, data=d2), ref)


def test_data_of_another_model_is_refused():
    m, other = chain(4), chain(5)
    q = np.zeros(4)
    with pytest.raises(PartreeInputError, match="data was created for a different model"):
        partree.aba(m, q, q, q, data=other.create_data())
    with pytest.raises(PartreeInputError, match="data was created for a different model"):
        partree.cfa(m, q, q, q, data=other.create_data())


def test_workspace_arrays_are_views_of_one_buffer():
    m = mixed()
    d = m.create_data()
    for name in ("E", "r", "v", "c", "IA", "pA", "a", "S", "U", "Dinv", "u", "qdd", "tau"):
        assert np.shares_memory(getattr(d, name), d._buf), name
    assert d.nbytes == d._buf.nbytes


# ----------------------------------------------------------------------------------------------
# welded bodies merged (partree.algorithms.welded)
# ----------------------------------------------------------------------------------------------
def welded_tree():
    """A floating tree where a third of the joints are fixed: welded leaves, welded bodies
    between moving ones, chains of welded bodies, and a body welded to the world."""
    m = random_tree(40, seed=7, floating_base=True, joint_types=["revolute", "prismatic", "universal", "spherical",
                                                                  "fixed", "fixed"])
    assert np.count_nonzero(m.jtype == FIXED) * MERGE_FRACTION >= m.n
    return m


def test_welded_bodies_merged_give_the_model_s_results():
    """The compiled calls (merged) against the kernels on the model as it is, with wrenches on
    welded bodies too: the same dynamics to rounding."""
    for m in (welded_tree(), partree.load_urdf(DATA / "branching.urdf", floating_base=True), mixed()):
        mm = merged_model_args(m)
        nfix = np.count_nonzero(m.jtype == FIXED)
        assert (mm is not None) == (nfix * MERGE_FRACTION >= m.n)
        assert mm is None or len(mm[1]) == m.n - nfix
        for seed in range(3):
            q, qd, x, F = state(m, seed=seed)
            qdd0, tau0, _, M0 = direct(m, q, qd, x, F, merged=False)
            qdd = partree.aba(m, q, qd, x, F)
            assert np.abs(qdd - qdd0).max() <= 1e-12 * np.abs(qdd0).max()
            tau = partree.rnea(m, q, qd, x, F)
            assert np.abs(tau - tau0).max() <= 1e-12 * np.abs(tau0).max()
            M = partree.crba(m, q)
            assert np.abs(M - M0).max() <= 1e-13 * np.abs(M0).max() and np.array_equal(M, M.T)


def test_welded_merge_follows_edits_in_place():
    """The merged model is kept in the workspace with the model buffer it came from: an array of
    the model edited in place (a welded body's mass and placement, gravity) is what the
    next call computes with."""
    m = welded_tree()
    q, qd, x, _ = state(m)
    before = partree.crba(m, q)
    k = int(np.flatnonzero((m.jtype == FIXED) & (m.parent >= 0))[0])
    m.mass[k] *= 3.0
    m.r_tree[k] += 0.1
    after = partree.crba(m, q)
    assert not np.array_equal(after, before)
    assert np.abs(after - direct(m, q, qd, x, merged=False)[3]).max() <= 1e-13 * np.abs(after).max()
    m2 = welded_tree()
    m2.mass[k] *= 3.0
    m2.r_tree[k] += 0.1
    assert np.array_equal(partree.crba(m2, q), after)          # the same model built afresh
    d = m.create_data()
    partree.aba(m, q, qd, x, data=d)
    m.gravity[:] = 0.0
    assert np.array_equal(partree.aba(m, q, qd, x, data=d), direct(m, q, qd, x)[0])


def test_welded_singular_joint_is_named_in_the_model_s_numbering():
    """A moving joint under welded bodies whose subtree has no inertia along its motion (a point
    mass on its axis; a model built without validation) is named by the model's own joint name,
    though it is body 1 of the merged model."""
    b = partree.ModelBuilder()
    b.add_body("base", parent=None, joint="revolute", axis=(0, 0, 1), mass=1.0, inertia=np.eye(3) * 0.1)
    b.add_body("flange", parent="base", joint="fixed", placement=(0.0, 0.0, 0.1), mass=0.0)
    b.add_body("tool", parent="flange", joint="fixed", placement=(0.0, 0.0, 0.1), mass=0.5, inertia=0.01)
    b.add_body("wrist", parent="tool", joint="revolute", axis=(1, 0, 0), mass=1.0, com=(0.3, 0.0, 0.0))
    m = b.build(validate=False)
    assert merged_model_args(m) is not None
    with pytest.raises(PartreeInputError, match="wrist"):
        partree.aba(m, np.zeros(m.nq), np.zeros(m.nv), np.zeros(m.nv))


def test_unowned_views_are_the_same_arrays():
    """``packed.unowned``: the view a kernel rebinds its arguments to has the array's data, shape
    and strides (a strided view's too), and what the kernel writes through it, and through the
    views it takes of it, lands in the caller's array."""
    from numba import njit
    from numba.core.errors import TypingError

    from partree.algorithms.packed import unowned

    @njit
    def scaled_rows(a, out):
        a, out = unowned(a), unowned(out)
        for i in range(a.shape[0]):
            row = a[i]
            dst = out[i]
            for k in range(row.shape[0]):
                dst[k] = 2.0 * row[k]
        return a.shape, a.strides

    base = np.arange(60.0).reshape(6, 10)
    for a in (base, base[::2, 1::3], base.T):
        out = np.full(a.shape, np.nan)
        shape, strides = scaled_rows(a, out)
        assert shape == a.shape and strides == a.strides
        assert np.array_equal(out, 2.0 * a)

    @njit
    def of_a_number(x):
        return unowned(x)

    with pytest.raises(TypingError):
        of_a_number(1.0)
