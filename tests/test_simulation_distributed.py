"""Distributed simulation (partree.simulation.distributed): MPI ranks / Dask workers hold only
their parts' state; trajectories must equal the serial driver's to 1e-10."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partree.model import PartreeInputError
from partree.models.generators import random_tree
from partree.simulation import simulate

SCRIPTS = Path(__file__).parent / "mpi_scripts"


def _mpiexec():
    for cand in (Path(sys.executable).parent / "mpiexec", Path("/work/venv/bin/mpiexec")):
        if cand.exists():
            return str(cand)
    return shutil.which("mpiexec")


def _model(mode):
    if mode == "plain":
        return random_tree(30, seed=5, joint_types=("revolute", "prismatic", "universal"))
    return random_tree(30, seed=6, floating_base=True, joint_types=("revolute", "spherical", "universal"))


def _inputs(m):
    rng = np.random.default_rng(1)
    return dict(q0=m.random_configuration(rng), qd0=m.random_velocity(rng, 0.5), torques=rng.normal(size=m.nv) * 0.1,
                damping=0.05, progress=False, verbose=False)


@pytest.mark.parametrize("n,mode", [(2, "plain"), (3, "plain"), (2, "floating"), (3, "floating")])
def test_mpi_simulation_matches_serial(n, mode):
    pytest.importorskip("mpi4py")
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([mpiexec, "-n", str(n), sys.executable, str(SCRIPTS / "sim_check.py"), mode],
                       capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    line = [s for s in p.stdout.splitlines() if s.startswith("OK")]
    assert line, p.stdout + p.stderr
    assert float(line[0].split()[1]) < 1e-10


def test_mpi_single_rank_in_process():
    """backend='mpi' on a one-rank communicator (no mpiexec) runs the same distributed code path."""
    pytest.importorskip("mpi4py")
    m = _model("plain")
    kw = _inputs(m)
    a = simulate(m, 0.01, 1e-3, backend="mpi", parts=4, **kw)
    b = simulate(m, 0.01, 1e-3, **kw)
    assert a.summary["nparts"] == 4 and a.summary["backend"] == "mpi"
    assert np.abs(a.q - b.q).max() < 1e-10 and np.abs(a.energy - b.energy).max() < 1e-10


def test_unsupported_inputs_raise():
    pytest.importorskip("mpi4py")
    m = _model("plain")
    with pytest.raises(PartreeInputError, match="needs the whole state"):
        simulate(m, 0.01, 1e-3, backend="mpi", parts=2, torques=lambda t, q, qd: np.zeros(m.nv), progress=False)
    with pytest.raises(PartreeInputError, match="checkpoints"):
        simulate(m, 0.01, 1e-3, backend="mpi", parts=2, checkpoint_every=5, out="x.h5", progress=False)
    with pytest.raises(PartreeInputError, match="scipy"):
        simulate(m, 0.01, 1e-3, backend="mpi", parts=2, integrator="scipy", progress=False)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.parametrize("mode", ["plain", "floating"])
def test_dask_simulation_matches_serial(dask_client, mode, tmp_path):
    m = _model(mode)
    kw = _inputs(m)
    if mode == "plain":
        nj = int(m.nv_j[3])
        kw.update(stiffness=0.5, torques={m.joint_names[3]: (lambda t: np.full(nj, np.sin(t)))})
    else:
        kw.update(f_ext={m.joint_names[7]: [0.0, 0.1, 0.0, 0.0, 0.0, 2.0]})
    cases = [("rk4", 0.006, 1e-3, {"save_every": 2}), ("dopri5", 0.1, 0.05, {}), ("dop853", 0.1, 0.1, {}),
             ("rk4", 0.001, 1e-3, {"record": "all"})]
    from partree.simulation.distributed import DaskVector

    def on_workers(k, t, q, v):          # the client never holds the state between save points
        assert isinstance(q, DaskVector) and isinstance(v, DaskVector) and len(q.raw) == 3

    for integ, t_end, dt, extra in cases:
        out = tmp_path / f"{integ}.h5"
        a = simulate(m, t_end, dt, integrator=integ, backend="dask", client=dask_client, parts=3, out=out,
                     _step_hook=on_workers, **kw, **extra)
        b = simulate(m, t_end, dt, integrator=integ, **kw, **extra)
        names = ["t", "q", "qd", "energy"] + (["qdd", "tau", "joint_wrench"] if "record" in extra else [])
        for name in names:
            x, y = getattr(a, name), getattr(b, name)
            assert x.shape == y.shape, name
            assert np.abs(x - y).max() < 1e-10, (integ, name)
        assert a.summary["steps"] == b.summary["steps"] and a.summary["f_evals"] == b.summary["f_evals"]
        assert a.summary["nparts"] == 3 and out.exists()
