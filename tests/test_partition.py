"""Partitioning into connected, balanced parts (no MPI)."""
import numpy as np
import pytest

from partree.model import PartreeInputError
from partree.models import auto_tree
from partree.models.generators import random_tree
from partree.parallel.partition import default_weights, partition, partition_from_roots


def _models():
    return [auto_tree(200), auto_tree(255, bf=2), auto_tree(300, bf=1.3),
            random_tree(400, seed=1), random_tree(300, seed=2, p_chain=0.8),
            random_tree(150, seed=4, max_children=3, floating_base=True)]


@pytest.mark.parametrize("mi", range(6))
@pytest.mark.parametrize("P", [1, 2, 3, 5, 8, 17, 40])
def test_cover_connected_exact(mi, P):
    m = _models()[mi]
    pt = partition(m, P)
    pt.check(m.parent)               # coverage, connectedness, roots, handles, parts tree
    assert pt.nparts == P
    assert pt.sizes.sum() == m.n
    w = default_weights(m)
    assert np.allclose(pt.weights, np.bincount(pt.part_of, weights=w))
    assert np.all(pt.part_parent < np.arange(P))
    # one root per part: exactly one body of each part has its parent outside the part
    par = m.parent
    outside = (par < 0) | (pt.part_of[np.maximum(par, 0)] != pt.part_of)
    assert np.array_equal(np.bincount(pt.part_of[outside], minlength=P), np.ones(P))
    assert 1 <= pt.depth <= P
    assert pt.critical_work <= w.sum() + 1e-9
    assert pt.imbalance >= 1.0


def test_chain_segments_balanced():
    m = auto_tree(1000)
    for P in (2, 3, 4, 7, 16):
        pt = partition(m, P)
        for k in range(P):
            b = pt.bodies(k)
            assert np.array_equal(b, np.arange(b[0], b[0] + b.size))      # contiguous segment
        assert pt.imbalance < 1.05
        assert pt.depth == P


def test_balance_trees():
    for m, P, tol in [(auto_tree(2047, bf=2), 8, 1.1), (auto_tree(2047, bf=2), 16, 1.15),
                      (random_tree(3000, seed=5), 8, 1.5), (random_tree(3000, seed=6, p_chain=0.7), 6, 1.3),
                      (auto_tree(5000, bf=1.2), 12, 1.3)]:
        pt = partition(m, P)
        assert pt.nparts == P
        assert pt.imbalance < tol, (m.name, P, pt.imbalance)


def test_subtrees_kept_whole():
    # a binary tree of 2^k - 1 bodies into 2^j parts: the greedy keeps whole subtrees
    m = auto_tree(1023, bf=2)
    pt = partition(m, 8)
    sub = m.subtree_sizes()
    for k in range(pt.nparts):
        if pt.child_parts(k).size == 0:
            assert pt.sizes[k] == sub[pt.roots[k]]


def test_more_parts_than_chains_and_single_body_parts():
    m = auto_tree(31, bf=2)          # 31 bodies: 16 leaves, chains of length 1
    pt = partition(m, 31)
    pt.check(m.parent)
    assert np.all(pt.sizes == 1)
    pt = partition(m, 20)
    pt.check(m.parent)
    assert pt.nparts == 20


def test_weights_and_errors():
    m = auto_tree(100)
    w = np.ones(100)
    w[:50] = 3.0
    pt = partition(m, 2, weights=w)
    assert abs(pt.weights[0] - pt.weights[1]) <= 3.0
    assert pt.sizes[0] < pt.sizes[1]
    with pytest.raises(PartreeInputError, match="number of bodies"):
        partition(m, 101)
    with pytest.raises(PartreeInputError):
        partition(m, 0)
    with pytest.raises(PartreeInputError, match="weights"):
        partition(m, 2, weights=-w)


def test_boundary_and_handles():
    m = auto_tree(15, bf=2)
    pt = partition_from_roots(m, [1, 2, 5])
    pt.check(m.parent)
    assert pt.nparts == 4
    assert list(pt.roots) == [0, 1, 2, 5]
    assert list(pt.part_parent) == [-1, 0, 0, 2]
    assert list(pt.handle) == [-1, 0, 0, 2]
    assert list(pt.handles(0)) == [0]
    assert list(pt.boundary_joints(0)) == [1, 2]
    assert list(pt.boundary_joints(2)) == [2, 5]
    assert pt.depth == 3
    s = pt.summary()
    assert s["nparts"] == 4 and len(s["sizes"]) == 4


def test_forest():
    par = np.array([-1, 0, 1, -1, 3, 4])
    pt = partition(par, 2)
    pt.check(par)
    assert list(pt.roots) == [0, 3]
    with pytest.raises(PartreeInputError, match="forest"):
        partition(par, 1)
    pt = partition(par, 4)
    pt.check(par)


def test_assign_parts_puts_the_most_handles_on_the_root_rank():
    """Equal loads either way; the group with the most handles (the most boundary data) is rank 0,
    whichever part happens to cost a little more."""
    from partree.parallel.partition import assign_parts

    for costs in ([1.0, 1.01], [1.01, 1.0]):
        owner = assign_parts(costs, 2, handles=[1, 0])
        assert owner.tolist() == [0, 1]
    owner = assign_parts([5.0, 4.0, 3.0, 3.0, 1.0], 2, handles=[0, 0, 2, 1, 0])
    loads = np.bincount(owner, weights=[5.0, 4.0, 3.0, 3.0, 1.0])
    assert sorted(loads.tolist()) == sorted(np.bincount(assign_parts([5.0, 4.0, 3.0, 3.0, 1.0], 2),
                                                        weights=[5.0, 4.0, 3.0, 3.0, 1.0]).tolist())
    h = np.bincount(owner, weights=[0, 0, 2, 1, 0])
    assert h[0] == h.max()


@pytest.mark.parametrize("R", [2, 3, 4, 8])
def test_partition_for_ranks_evens_out_the_ranks(R):
    """A binary tree with a partly filled last level: its subtrees have 2^k - 1 (+ part of a level)
    bodies, so R equal parts cannot even out R ranks; cutting further subtrees onto the lightest
    rank does."""
    from partree.parallel.partition import assign_parts, partition_for_ranks

    m = auto_tree(100_000, bf=2)
    plain = partition(m, R, path_weight=0.22)
    loads = np.bincount(assign_parts(plain.costs, R), weights=plain.costs, minlength=R)
    pt = partition_for_ranks(m, R, path_weight=0.22)
    pt.check(m.parent)
    assert pt.nranks == R and pt.owner.shape == (pt.nparts,) and set(pt.owner.tolist()) == set(range(R))
    assert R <= pt.nparts <= 3 * R
    rl = pt.rank_loads()
    assert np.isclose(rl.sum(), pt.costs.sum())
    assert rl.max() / rl.mean() <= min(1.01, loads.max() / loads.mean())
    if R == 2:
        assert loads.max() / loads.mean() > 1.03          # what it fixes
    # the rank with the most handles is rank 0 (its boundary data never crosses the network)
    nh = pt._nhandles()
    assert np.bincount(pt.owner, weights=nh, minlength=R).argmax() == 0
    # another rank count: the largest-first assignment
    assert pt.owner_for(R + 1).shape == (pt.nparts,) and pt.owner_for(R + 1).max() <= R
    assert "rank_imbalance" in pt.summary()


def test_partition_for_ranks_chain_keeps_one_part_per_rank():
    from partree.parallel.partition import partition_for_ranks

    m = auto_tree(20_000)
    pt = partition_for_ranks(m, 2, path_weight=0.22)
    assert pt.nparts == 2                   # cutting a chain adds a whole path: not worth it
    assert pt.rank_loads().max() / pt.rank_loads().mean() < 1.002


# ----------------------------------------------------------------------------------- units kept whole
def _random_units(parent, rng, p_head):
    """Random connected units: each body starts a new unit with probability p_head (roots always);
    otherwise it joins its parent's unit."""
    head = (rng.random(parent.size) < p_head) | (parent < 0)
    labels = np.empty(parent.size, dtype=np.int64)
    for i in range(parent.size):
        labels[i] = i if head[i] else labels[parent[i]]
    return 1000 + 3 * labels            # arbitrary label values: only equality matters


def _splits_a_unit(pt, parent, labels):
    """Whether some body lies in another part than its parent of the same unit."""
    inside = np.flatnonzero((parent >= 0) & (labels[np.maximum(parent, 0)] == labels))
    return bool(np.any(pt.part_of[inside] != pt.part_of[parent[inside]]))


def _unit_models():
    from partree.models import scissor_mast

    rng = np.random.default_rng(11)
    out = []
    for m, p_head in [(auto_tree(300, bf=2), 0.3), (random_tree(400, seed=1), 0.2),
                      (random_tree(300, seed=2, p_chain=0.8), 0.15), (auto_tree(200), 0.25),
                      (random_tree(150, seed=4, max_children=3, floating_base=True), 0.4)]:
        out.append((m, _random_units(m.parent, rng, p_head)))
    for m in (scissor_mast(30), scissor_mast(25, hub_mass=0.05)):
        out.append((m, m.units))
    return out


@pytest.mark.parametrize("mi", range(7))
@pytest.mark.parametrize("P", [1, 2, 3, 5, 8, 13, 17, 25])
@pytest.mark.parametrize("path_weight", [0.0, 0.22])
def test_units_are_never_split(mi, P, path_weight):
    m, labels = _unit_models()[mi]
    pt = partition(m, P, units=labels, path_weight=path_weight)
    pt.check(m.parent)
    assert pt.nparts == P
    assert not _splits_a_unit(pt, m.parent, labels)
    # the same units as a list of body-index lists give the same partition
    groups = [np.flatnonzero(labels == u).tolist() for u in np.unique(labels)]
    assert np.array_equal(partition(m, P, units=groups, path_weight=path_weight).roots, pt.roots)


def test_units_matter_and_all_units_can_be_parts():
    """Without units the partitioner does cut inside units of these models; with them it never does,
    up to one part per unit."""
    split = 0
    for m, labels in _unit_models():
        U = np.unique(labels).size
        for P in sorted({2, 5, 11, U // 2, U}):
            split += _splits_a_unit(partition(m, P, units=False), m.parent, labels)
            pt = partition(m, P, units=labels)
            pt.check(m.parent)
            assert pt.nparts == P and not _splits_a_unit(pt, m.parent, labels)
        pt = partition(m, U, units=labels)
        assert set(pt.roots.tolist()) == set(np.flatnonzero(
            (m.parent < 0) | (labels[np.maximum(m.parent, 0)] != labels)).tolist())
    assert split > 10


@pytest.mark.parametrize("R", [2, 3, 4])
def test_partition_for_ranks_respects_units(R):
    from partree.models import scissor_mast
    from partree.parallel.partition import partition_for_ranks

    m = auto_tree(20_000, bf=2)
    labels = _random_units(m.parent, np.random.default_rng(R), 0.6)     # small units (2 * 0.4 < 1 child)
    plain = partition_for_ranks(m, R, path_weight=0.22, units=False)
    pt = partition_for_ranks(m, R, path_weight=0.22, units=labels)
    pt.check(m.parent)
    assert not _splits_a_unit(pt, m.parent, labels)
    assert pt.owner.shape == (pt.nparts,) and set(pt.owner.tolist()) == set(range(R))
    rl = pt.rank_loads()
    assert rl.max() / rl.mean() < 1.01
    assert _splits_a_unit(plain, m.parent, labels)          # without units its extra cuts do split some
    mast = scissor_mast(40, hub_mass=0.05)
    assert _splits_a_unit(partition_for_ranks(mast, R, path_weight=0.22, units=False), mast.parent, mast.units)
    pt = partition_for_ranks(mast, R, path_weight=0.22)                    # the model's own units
    pt.check(mast.parent)
    assert not _splits_a_unit(pt, mast.parent, mast.units)


def test_model_units_are_used_by_default_and_false_ignores_them():
    from partree.models import scissor_mast
    from partree.parallel.partition import partition_for_ranks
    from partree.parallel.partition import make_partition

    m = scissor_mast(25, hub_mass=0.05)
    bare = scissor_mast(25, hub_mass=0.05)
    bare.units = None
    split = []
    for P in (4, 7, 9, 12):
        pt = partition(m, P)
        assert not _splits_a_unit(pt, m.parent, m.units)
        assert np.array_equal(pt.roots, partition(m.parent, P, units=m.units).roots)
        off = partition(m, P, units=False)
        assert np.array_equal(off.part_of, partition(bare, P).part_of)
        split.append(_splits_a_unit(off, m.parent, m.units))
        # the backends' path (serial, MPI and Dask all call make_partition with the model)
        assert np.array_equal(make_partition(m, P).roots, partition(m, P, path_weight=0.22).roots)
    assert any(split)                       # ignoring the units does cut inside some
    for R in (2, 3):
        assert not _splits_a_unit(make_partition(m, None, nranks=R), m.parent, m.units)
        assert np.array_equal(make_partition(m, None, nranks=R).roots,
                              partition_for_ranks(m, R, path_weight=0.22).roots)


def test_units_errors():
    from partree.models import scissor_mast
    from partree.parallel.partition import partition_for_ranks

    par = np.array([-1, 0, 1, 1, 0, 4, 5])      # 0 -> 1 -> {2, 3};  0 -> 4 -> 5 -> 6
    with pytest.raises(PartreeInputError, match=r"unit 7 is not connected: its bodies 2 \(parent 1\), 4 \(parent 0\)"):
        partition(par, 2, units=[0, 1, 7, 2, 7, 7, 3])
    with pytest.raises(PartreeInputError, match="unit 1 is not connected"):
        partition(par, 2, units=[[1, 2], [3, 5]])
    with pytest.raises(PartreeInputError, match="unit 1: body 2 is listed twice"):
        partition(par, 2, units=[[1, 2], [2, 3]])
    with pytest.raises(PartreeInputError, match="unit 0: 9 is not a body"):
        partition(par, 2, units=[[1, 9]])
    with pytest.raises(PartreeInputError, match="7 integer labels"):
        partition(par, 2, units=np.zeros(6, dtype=np.int64))
    with pytest.raises(PartreeInputError, match="integer labels"):
        partition(par, 2, units=np.zeros(7))
    # too many parts: the units that can be part roots are counted before any work
    units = [[1, 2, 3], [4, 5, 6]]              # units {0}, {1, 2, 3}, {4, 5, 6}
    assert partition(par, 3, units=units).roots.tolist() == [0, 1, 4]
    with pytest.raises(PartreeInputError, match="cannot make 4 parts: the model has only 3 units"):
        partition(par, 4, units=units)
    with pytest.raises(PartreeInputError, match="cannot make 4 parts"):
        partition_for_ranks(par, 4, units=units)
    m = scissor_mast(5)
    with pytest.raises(PartreeInputError, match="cannot make 6 parts: the model has only 5 units"):
        partition(m, 6)
    assert partition(m, 6, units=False).nparts == 6
    # the model refuses a disconnected unit, too
    with pytest.raises(PartreeInputError, match=r"unit 1 is not connected: its bodies 1 \(parent 0\), 3 \(parent 2\)"):
        m.__class__(m.parent, m.jtype, m.axis, m.E_tree, m.r_tree, m.mass, m.com, m.I_com,
                    units=np.array([0, 1, 0, 1, 2, 2, 3, 3, 4, 4]))
    with pytest.raises(PartreeInputError, match="10 integer labels"):
        m.__class__(m.parent, m.jtype, m.axis, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, units=[0, 1])


def test_partition_from_roots_refuses_roots_inside_a_unit():
    from partree.models import scissor_mast

    m = scissor_mast(4)                           # unit k: bar A (2k) and bar B (2k + 1)
    pt = partition_from_roots(m, [2, 6])
    pt.check(m.parent)
    assert pt.roots.tolist() == [0, 2, 6]
    with pytest.raises(PartreeInputError, match=r"body 3 cannot be a part root: it lies inside unit 1 \(its parent 2"):
        partition_from_roots(m, [2, 3])
    assert partition_from_roots(m, [2, 3], units=False).nparts == 3
    with pytest.raises(PartreeInputError, match="inside unit 0"):
        partition_from_roots(m.parent, [1], units=[[0, 1]])


@pytest.mark.parametrize("hub_mass", [0.0, 0.05])
def test_engine_with_units_equals_aba(hub_mass):
    import partree
    from partree.models import scissor_mast
    from partree.parallel import forward_dynamics
    from partree.parallel.serial import SerialEngine

    m = scissor_mast(40, hub_mass=hub_mass)
    rng = np.random.default_rng(3)
    q = m.random_configuration(rng, scale=0.3)
    qd = m.random_velocity(rng)
    tau = m.random_velocity(rng)
    ref = partree.aba(m, q, qd, tau)
    for P in (2, 3, 8, 40):
        assert not _splits_a_unit(SerialEngine(m, parts=P).partition, m.parent, m.units)
        qdd = forward_dynamics(m, q, qd, tau, backend="serial", parts=P)
        assert np.abs(qdd - ref).max() <= 1e-10 * np.abs(ref).max(), P


# reference partitions made by the partitioner before units existed (no units): unchanged
_BEFORE_UNITS = [
    ("auto_tree(255, bf=2)", 8, 0.0, [0, 1, 3, 5, 7, 9, 11, 13]),
    ("auto_tree(300, bf=1.3)", 5, 0.0, [0, 8, 13, 22, 25]),
    ("random_tree(400, seed=1)", 7, 0.0, [0, 1, 3, 6, 7, 19, 22]),
    ("random_tree(300, seed=2, p_chain=0.8)", 6, 0.22, [0, 12, 21, 26, 37, 39]),
    ("auto_tree(1000)", 4, 0.22, [0, 237, 474, 711]),
]


@pytest.mark.parametrize("case", range(len(_BEFORE_UNITS)))
def test_no_units_partition_is_unchanged(case):
    expr, P, pw, roots = _BEFORE_UNITS[case]
    m = eval(expr)
    pt = partition(m, P, path_weight=pw)
    assert pt.roots.tolist() == roots
    # no units, an empty list, every body a unit of its own: all the same partition, bit for bit
    for units in (None, False, [], np.arange(m.n), [[i] for i in range(m.n)]):
        other = partition(m, P, path_weight=pw, units=units)
        assert np.array_equal(other.part_of, pt.part_of) and other.target == pt.target
        assert other.weights.tobytes() == pt.weights.tobytes()


def test_no_units_partition_for_ranks_is_unchanged():
    from partree.parallel.partition import partition_for_ranks

    for m, R, roots, owner in [(auto_tree(100_000, bf=2), 2, [0, 1, 7, 97, 783], [1, 0, 1, 0, 1]),
                               (random_tree(5000, seed=7), 3, [0, 3, 5, 9, 124, 195, 579, 1470],
                                [0, 2, 1, 2, 0, 0, 1, 2])]:
        pt = partition_for_ranks(m, R, path_weight=0.22)
        assert pt.roots.tolist() == roots and pt.owner.tolist() == owner
        same = partition_for_ranks(m, R, path_weight=0.22, units=np.arange(m.n))
        assert np.array_equal(same.roots, pt.roots) and np.array_equal(same.owner, pt.owner)


# ----------------------------------------------------------------------------------- handles capped
@pytest.mark.parametrize("mi", range(6))
@pytest.mark.parametrize("cap", [1, 2, 4])
def test_cap_handles_splits_over_full_parts(mi, cap):
    """cap_handles: every part ends with at most ``cap`` handles (all bodies are cuttable here),
    the pieces stay on the rank of the part they were cut from, and the engine through the capped
    partition is ABA's forward dynamics."""
    import partree
    from partree.parallel import SerialEngine
    from partree.parallel.partition import cap_handles, partition_for_ranks

    m = _models()[mi]
    pt = partition_for_ranks(m, 8)
    got = cap_handles(m, pt, cap)
    got.check(m.parent)
    assert got._nhandles().max() <= cap
    assert set(pt.roots.tolist()) <= set(got.roots.tolist())
    assert np.array_equal(got.owner, pt.owner[pt.part_of[got.roots]])
    assert got.rank_loads(8).sum() >= pt.rank_loads(8).sum() - 1e-9
    if pt._nhandles().max() <= cap:
        assert got is pt
    rng = np.random.default_rng(mi)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    ref = partree.aba(m, q, qd, tau)
    qdd = SerialEngine(m, got).forward_dynamics(q, qd, tau)
    assert np.abs(qdd - ref).max() < 1e-10 * np.abs(ref).max()


@pytest.mark.parametrize("mi", range(7))
def test_cap_handles_keeps_units_whole(mi):
    from partree.parallel.partition import cap_handles, partition_for_ranks

    m, labels = _unit_models()[mi]
    pt = partition_for_ranks(m, 6, units=labels)
    got = cap_handles(m, pt, 1, units=labels)
    got.check(m.parent)
    assert not _splits_a_unit(got, m.parent, labels)
    # a piece is cut only at a unit's head, so a part may keep more handles than asked; never more
    # than it had
    assert got._nhandles().max() <= max(pt._nhandles().max(), 1)


def test_partition_for_many_ranks_caps_the_top_part():
    """The engine's partition for many ranks: no part holds more than MAX_HANDLES handles (a
    binary tree's top levels would otherwise gather the attachments of many parts)."""
    from partree.parallel.partition import MAX_HANDLES, make_partition, partition_for_ranks

    m = auto_tree(20000, bf=2)
    raw = partition_for_ranks(m, 256)
    assert raw._nhandles().max() > MAX_HANDLES
    pt = make_partition(m, None, nranks=256)
    pt.check(m.parent)
    assert pt._nhandles().max() <= MAX_HANDLES and pt.nranks == 256 and pt.owner.max() < 256
    with pytest.raises(PartreeInputError, match="max_handles"):
        from partree.parallel.partition import cap_handles
        cap_handles(m, raw, 0)


def test_default_over_ranks_gives_every_tree_of_a_forest_a_part():
    """A forest of more trees than ranks (the three-arm manipulator: three arms on a fixed base)
    with no part count: at least a part per tree, the ranks all used."""
    import partree
    from partree.parallel.partition import make_partition

    m = partree.resolve_model("threearm")
    pt = make_partition(m, None, nranks=2)
    assert pt.nparts >= 3
    assert set(pt.owner_for(2).tolist()) == {0, 1}
    for k in range(pt.nparts):          # every part connected: one root each
        b = pt.bodies(k)
        assert np.count_nonzero(~np.isin(m.parent[b], b)) == 1
