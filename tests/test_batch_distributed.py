"""Batches of states over MPI ranks (real mpiexec) and Dask workers (a real LocalCluster): the
rows split in blocks, each block by the batched serial algorithm, equal bit for bit to one
batched call in this process."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.models.generators import random_tree
from partree.parallel.batch import evaluate_batch


@pytest.fixture(scope="module")
def batch():
    m = random_tree(12, seed=9, floating_base=True, joint_types=("revolute", "universal", "spherical"))
    rng = np.random.default_rng(5)
    Q = np.array([m.random_configuration(rng) for _ in range(23)])
    return m, Q, rng.standard_normal((23, m.nv)), rng.standard_normal((23, m.nv))


def test_serial_batch_and_bad_input(batch):
    m, Q, QD, X = batch
    assert np.array_equal(evaluate_batch("aba", m, Q, QD, X, backend="serial"), partree.aba(m, Q, QD, X))
    with pytest.raises(PartreeInputError, match="different numbers of rows.*Q has 23, QD has 22"):
        evaluate_batch("aba", m, Q, QD[:-1], X, backend="serial")
    with pytest.raises(PartreeInputError, match=r"needs \(states, "):
        evaluate_batch("rnea", m, Q[:, :-1], QD, X, backend="serial")
    with pytest.raises(PartreeInputError, match="evaluates"):
        evaluate_batch("cholesky", m, Q, backend="serial")
    with pytest.raises(PartreeInputError, match="needs client="):
        evaluate_batch("crba", m, Q, backend="dask")


def test_dask_batch_equals_serial(batch):
    distributed = pytest.importorskip("distributed")
    m, Q, QD, X = batch
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        for chunks in (None, 5, 100):
            assert np.array_equal(evaluate_batch("aba", m, Q, QD, X, backend="dask", client=client, chunks=chunks),
                                  partree.aba(m, Q, QD, X))
        assert np.array_equal(evaluate_batch("rnea", m, Q, QD, X, backend="dask", client=client),
                              partree.rnea(m, Q, QD, X))
        assert np.array_equal(evaluate_batch("crba", m, Q, backend="dask", client=client), partree.crba(m, Q))
        with pytest.raises(PartreeInputError, match="chunks"):
            evaluate_batch("crba", m, Q, backend="dask", client=client, chunks=0)
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("n", [2, 3])
def test_mpi_batch_equals_serial(n):
    pytest.importorskip("mpi4py")
    from partree.mpienv import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([mpiexec, "-n", str(n), sys.executable,
                        str(Path(__file__).parent / "mpi_scripts" / "batch_check.py")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert any(s.startswith("OK 37") for s in p.stdout.splitlines()), p.stdout + p.stderr
