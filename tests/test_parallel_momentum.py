"""The momentum form's velocity solve M v = p through the parallel engine
(``partree.parallel.velocity_from_momentum``) on every backend, against the serial O(N) solve
(``partree.velocity_from_momentum``) and a dense solve with CRBA's M."""
import numpy as np
import pytest

import partree
from partree.models.generators import binary_tree, random_tree
from partree.parallel import velocity_from_momentum

from loop_models import local_loop_models
from test_mpi import MPIEXEC, _ok_line

MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def models():
    return [random_tree(120, seed=3, floating_base=True, joint_types=MIXED),
            random_tree(90, seed=4, p_chain=0.8, joint_types=MIXED),
            binary_tree(63, joint=(["revolute", "universal", "spherical"] * 21)),
            partree.resolve_model("cardan:n=30")]


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("k", range(4))
def test_serial_engine_matches_the_serial_solve(k):
    m = models()[k]
    rng = np.random.default_rng(k)
    q, p = m.random_configuration(rng), rng.normal(size=m.nv)
    ref = partree.velocity_from_momentum(m, q, p)
    M = partree.crba(m, q)
    assert rel(ref, np.linalg.solve(M, p)) < 1e-9
    for parts in (1, 3, 8):
        v = velocity_from_momentum(m, q, p, parts=parts)
        assert rel(v, ref) < 1e-10
        # the backward error of the velocities found: their momenta against p
        assert np.abs(partree.generalized_momentum(m, q, v) - p).max() < 1e-14 * np.abs(M).max() * np.abs(v).max()
    assert np.array_equal(m.gravity, models()[k].gravity)        # the model is left as it was


def test_loops_are_left_out_and_the_model_is_unchanged():
    """The tree's M: a model's loops take no part (as in the serial solve)."""
    m = local_loop_models()[0]
    assert len(m.loops)
    rng = np.random.default_rng(5)
    q, p = m.random_configuration(rng), rng.normal(size=m.nv)
    ref = partree.velocity_from_momentum(m, q, p)
    v = velocity_from_momentum(m, q, p, parts=1)
    assert rel(v, ref) < 1e-10
    assert len(m.loops) and m.gravity.any()


def test_bad_input_is_refused_before_any_work():
    m = models()[0]
    q = m.neutral()
    with pytest.raises(partree.PartreeInputError, match="^p has"):
        velocity_from_momentum(m, q, np.zeros(m.nv + 1))
    with pytest.raises(partree.PartreeInputError, match="backend"):
        velocity_from_momentum(m, q, np.zeros(m.nv), backend="spark")


def test_dask_local_cluster_matches_the_serial_solve():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            for k, m in enumerate(models()[:2]):
                rng = np.random.default_rng(10 + k)
                q, p = m.random_configuration(rng), rng.normal(size=m.nv)
                ref = partree.velocity_from_momentum(m, q, p)
                for parts in (2, 5):
                    v = velocity_from_momentum(m, q, p, backend="dask", client=client, parts=parts)
                    assert rel(v, ref) < 1e-10
    finally:
        cluster.close()


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
@pytest.mark.parametrize("n", [2, 3])
def test_mpiexec_matches_the_serial_solve(n):
    (err,) = _ok_line(n, "momentum_check.py")
    assert float(err) < 1e-10
