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
    from partree.parallel.mpi import assign_parts

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
