"""The momentum form through the parallel engine on every backend: the velocity solve M v = p
(``partree.parallel.velocity_from_momentum``) against the serial O(N) solve and a dense solve
with CRBA's M, and the whole right-hand side (qdot, pdot) (``partree.parallel.momentum_rhs``)
against the serial ``partree.momentum_rhs`` and finite differences of the momenta."""
import numpy as np
import pytest

import partree
from partree.models.generators import binary_tree, random_tree
from partree.parallel import SerialEngine, momentum_rhs, velocity_from_momentum

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


@pytest.mark.parametrize("k", range(4))
def test_momentum_rhs_matches_the_serial_form(k):
    """(qdot, pdot) through the decomposition equal the serial O(N) evaluation to 1e-10 relative,
    with joint forces and external wrenches on every body, for 1, 3 and 8 parts (the parts'
    totals of gravity and external wrenches summed up the parts tree at the root)."""
    m = models()[k]
    rng = np.random.default_rng(20 + k)
    q, p, tau = m.random_configuration(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)
    fe = rng.normal(size=(m.n, 6))
    ref = partree.momentum_rhs(m, 0.0, q, p, tau, fe)
    for parts in (1, 3, 8):
        got = momentum_rhs(m, q, p, tau, parts=parts, f_ext=fe)
        assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10
    # without forces: gravity alone through the field composed down the parts tree
    ref = partree.momentum_rhs(m, 0.0, q, p, np.zeros(m.nv))
    got = momentum_rhs(m, q, p, parts=5)
    assert rel(got[1], ref[1]) < 1e-10


def test_momentum_rhs_is_the_rate_of_the_momenta():
    """An independent check of pdot: along the motion (q, v) of the velocity form, p(t) =
    M(q(t)) v(t) changes at the rate the engine reports, by central differences of
    generalized_momentum over a step of ABA's accelerations."""
    m = models()[0]
    rng = np.random.default_rng(31)
    q, v, tau = m.random_configuration(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)
    a = partree.aba(m, q, v, tau)
    h = 1e-5
    pp = partree.generalized_momentum(m, partree.integrate(m, q, h * v + 0.5 * h * h * a), v + h * a)
    pm = partree.generalized_momentum(m, partree.integrate(m, q, -h * v + 0.5 * h * h * a), v - h * a)
    p = partree.generalized_momentum(m, q, v)
    _, pdot = momentum_rhs(m, q, p, tau, parts=6)
    assert rel(pdot, (pp - pm) / (2 * h)) < 1e-6


def test_momentum_rhs_refusals():
    """Loops, an engine whose parts were built without poses, and bad sizes: clear errors."""
    m = models()[1]
    q = m.neutral()
    with pytest.raises(partree.PartreeInputError, match="poses"):
        SerialEngine(m, 4).momentum_rhs(q, np.zeros(m.nv))
    with pytest.raises(partree.PartreeInputError, match="^p has"):
        momentum_rhs(m, q, np.zeros(m.nv + 1))
    lm = local_loop_models()[0]
    with pytest.raises(partree.PartreeInputError, match="loops"):
        momentum_rhs(lm, lm.neutral(), np.zeros(lm.nv), parts=2)


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
                tau, fe = rng.normal(size=m.nv), rng.normal(size=(m.n, 6))
                ref = partree.momentum_rhs(m, 0.0, q, p, tau, fe)
                for parts in (2, 5):
                    got = momentum_rhs(m, q, p, tau, backend="dask", client=client, parts=parts, f_ext=fe)
                    assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10
    finally:
        cluster.close()


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
@pytest.mark.parametrize("n", [2, 3])
def test_mpiexec_matches_the_serial_solve(n):
    (err,) = _ok_line(n, "momentum_check.py")
    assert float(err) < 1e-10


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
@pytest.mark.parametrize("n", [2, 3])
def test_mpiexec_momentum_form_matches_serial(n):
    """partree.parallel.momentum_rhs and simulate(formulation='momentum') (rk4, dopri5, gauss6)
    under real mpiexec against the serial backend (tests/mpi_scripts/momentum_sim_check.py)."""
    err, run_err = _ok_line(n, "momentum_sim_check.py")
    assert float(err) < 1e-10 and float(run_err) < 1e-10
