"""Dask backend on a real LocalCluster (2 single-threaded worker processes)."""
import numpy as np
import pytest

import partree
from partree.models.generators import random_tree

distributed = pytest.importorskip("distributed")

MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _state(m, seed):
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)


def test_dask_matches_aba_and_serial(client):
    from partree.parallel import forward_dynamics
    from partree.parallel.dask_backend import DaskEngine

    for m, P in [(partree.models.auto_tree(200, bf=1.2, skew=0.3), 3),
                 (random_tree(150, seed=3, floating_base=True, joint_types=MIXED), 5),
                 (random_tree(100, seed=4, p_chain=0.8, joint_types=MIXED), 2)]:
        eng = DaskEngine(m, client=client, parts=P)
        assert len(set(eng.workers)) == 2
        for s in range(2):                      # parts stay on the workers between evaluations
            q, qd, tau = _state(m, s)
            ref = partree.aba(m, q, qd, tau)
            x = eng.forward_dynamics(q, qd, tau)
            assert np.abs(x - ref).max() / np.abs(ref).max() < 1e-10
            xs = forward_dynamics(m, q, qd, tau, backend="serial", parts=eng.partition)
            assert np.abs(x - xs).max() <= 1e-12 * np.abs(xs).max()
        eng.close()
    q, qd, tau = _state(m, 9)
    x = forward_dynamics(m, q, qd, tau, backend="dask", parts=4, client=client)
    assert np.abs(x - partree.aba(m, q, qd, tau)).max() / np.abs(x).max() < 1e-10


def test_unknown_backend():
    from partree.parallel import forward_dynamics

    m = partree.models.auto_tree(5)
    with pytest.raises(ValueError, match="unknown backend"):
        forward_dynamics(m, m.neutral(), np.zeros(5), np.zeros(5), backend="gpu")
