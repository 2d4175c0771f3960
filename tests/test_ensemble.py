"""simulate_ensemble: many independent runs, serial / Dask (a real LocalCluster) / MPI (real
mpiexec), each member equal bit for bit to its own ``simulate`` run; bad ensembles refused
before any member runs."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.models.generators import random_tree
from partree.simulation import ensemble_members, load_results, simulate, simulate_ensemble

T_END, DT = 0.05, 1e-3


@pytest.fixture(scope="module")
def model():
    return random_tree(10, seed=4, floating_base=True, joint_types=("revolute", "spherical", "universal"))


@pytest.fixture(scope="module")
def states(model):
    rng = np.random.default_rng(11)
    Q0 = np.array([model.random_configuration(rng) for _ in range(4)])
    QD0 = 0.5 * rng.standard_normal((4, model.nv))
    return Q0, QD0


def _reference(model, q0, qd0, **kw):
    return simulate(model, T_END, DT, q0=q0, qd0=qd0, progress=False, **kw)


def test_serial_ensemble_equals_single_runs(model, states, tmp_path):
    Q0, QD0 = states
    res = simulate_ensemble(model, T_END, DT, q0=Q0, qd0=QD0, out_dir=tmp_path / "ens", integrator="dopri5",
                            progress=False)
    assert len(res) == 4
    for k in range(4):
        ref = _reference(model, Q0[k], QD0[k], integrator="dopri5")
        assert np.array_equal(res[k].t, ref.t)
        assert np.array_equal(res[k].q, ref.q) and np.array_equal(res[k].qd, ref.qd)
        back = load_results(tmp_path / "ens" / f"member_{k:05d}.npz")
        assert np.array_equal(back.q, ref.q)
    # the members differ (an ensemble that repeated one run would pass the above with equal rows)
    assert not np.array_equal(res[0].q, res[1].q)


def test_members_sweep_models_and_inputs():
    members = [{"model": "chain:n=3", "torques": {"j0": 1.0}}, {"model": "chain:n=5"},
               {"model": "chain:n=3", "damping": 0.5}]
    res = simulate_ensemble(None, T_END, DT, members=members, progress=False)
    assert [r.q.shape[1] for r in res] == [3, 5, 3]
    ref = simulate("chain:n=3", T_END, DT, torques={"j0": 1.0}, progress=False)
    assert np.array_equal(res[0].q, ref.q)
    assert not np.array_equal(res[0].q, res[2].q)


def test_bad_ensembles_refused_before_any_run(model, states, tmp_path):
    Q0, QD0 = states
    with pytest.raises(PartreeInputError, match=r"sizes disagree \(q0 4, qd0 3"):
        simulate_ensemble(model, T_END, DT, q0=Q0, qd0=QD0[:3])
    with pytest.raises(PartreeInputError, match="unknown keyword.*rtol"):
        simulate_ensemble(model, T_END, DT, members=[{"rtol": 1e-6}])
    with pytest.raises(PartreeInputError, match="per run, not for an ensemble"):
        simulate_ensemble(model, T_END, DT, q0=Q0, checkpoint="x.ckpt")
    with pytest.raises(PartreeInputError, match="one initial state per row"):
        simulate_ensemble(model, T_END, DT, q0=Q0[0])
    with pytest.raises(PartreeInputError, match="needs members"):
        simulate_ensemble(model, T_END, DT)
    with pytest.raises(PartreeInputError, match="dt"):
        simulate_ensemble(model, T_END, -1.0, q0=Q0)
    with pytest.raises(PartreeInputError, match="does not exist"):
        simulate_ensemble(model, T_END, DT, q0=Q0, out_dir=tmp_path / "missing" / "ens")
    # an existing member file is refused before the first member runs: nothing is written
    d = tmp_path / "ens"
    d.mkdir()
    (d / "member_00002.npz").write_bytes(b"keep me")
    with pytest.raises(PartreeInputError, match="member_00002.npz' exists"):
        simulate_ensemble(model, T_END, DT, q0=Q0, qd0=QD0, out_dir=d)
    assert sorted(os.listdir(d)) == ["member_00002.npz"]
    assert (d / "member_00002.npz").read_bytes() == b"keep me"
    # a member's own bad input names the member
    with pytest.raises(PartreeInputError, match="ensemble member 1: .*q0"):
        simulate_ensemble(model, T_END, DT, members=[{}, {"q0": np.zeros(3)}], progress=False)


def test_ensemble_members_merges_rows():
    got = ensemble_members([{"damping": 1.0}, {}], q0=np.zeros((2, 3)))
    assert got[0]["damping"] == 1.0 and got[1]["q0"].shape == (3,)
    with pytest.raises(PartreeInputError, match="sets q0 and the ensemble's q0"):
        ensemble_members([{"q0": np.zeros(3)}, {}], q0=np.zeros((2, 3)))
    assert len(ensemble_members(3)) == 3


def test_dask_ensemble_equals_serial(model, states, tmp_path):
    distributed = pytest.importorskip("distributed")
    Q0, QD0 = states
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        res = simulate_ensemble(model, T_END, DT, q0=Q0, qd0=QD0, backend="dask", client=client,
                                out_dir=tmp_path / "ens", progress=False)
        # the members ran on the workers, not in this process
        assert len(client.scheduler_info()["workers"]) == 2
    finally:
        client.close()
        cluster.close()
    for k in range(4):
        ref = _reference(model, Q0[k], QD0[k])
        assert np.array_equal(res[k].q, ref.q) and np.array_equal(res[k].qd, ref.qd)
        assert np.array_equal(load_results(tmp_path / "ens" / f"member_{k:05d}.npz").q, ref.q)


def test_mpi_ensemble_equals_serial():
    pytest.importorskip("mpi4py")
    from partree.mpienv import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([mpiexec, "-n", "2", sys.executable, str(Path(__file__).parent / "mpi_scripts" / "ensemble_check.py")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    ok = [s for s in p.stdout.splitlines() if s.startswith("OK")]
    assert ok and ok[0].split()[1] == "5", p.stdout + p.stderr
