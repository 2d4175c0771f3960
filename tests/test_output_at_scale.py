"""Output at scale: what a run records (``record`` subsets, ``record_joints``) on every backend, and
the MPI backend's per-rank results files joined by HDF5 virtual datasets (``output='per-rank'``):
equal to the gathered output and to a serial run, read as one by ``load_results`` (also after the
folder is moved), a missing rank file named, per-rank checkpoints resumed."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partree.errors import PartreeInputError
from partree.models.generators import random_tree
from partree.simulation import SimulationOptions, load_results, simulate

SCRIPTS = Path(__file__).parent / "mpi_scripts"


def _mpiexec():
    pytest.importorskip("mpi4py")
    for cand in (Path(sys.executable).parent / "mpiexec", Path("/work/venv/bin/mpiexec")):
        if cand.exists():
            return str(cand)
    found = shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec")
    return found


def _env():
    return dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")


@pytest.fixture(scope="module")
def job():
    m = random_tree(25, seed=3, floating_base=True, joint_types=("revolute", "spherical", "prismatic"))
    rng = np.random.default_rng(2)
    kw = dict(q0=m.random_configuration(rng), qd0=m.random_velocity(rng, 0.5), torques=rng.normal(size=m.nv) * 0.1,
              damping=0.05, progress=False, verbose=False)
    full = simulate(m, 0.01, 1e-3, record="all", **kw)
    return m, kw, full


# ==================================================================== record subsets

def test_record_values():
    o = SimulationOptions.build(t_end=1.0, dt=0.1, record="qd, q ,energy")
    assert o.record == "joints" and o.quantities == {"q", "qd", "energy"}
    o = SimulationOptions.build(t_end=1.0, dt=0.1, record=["tau", "q"])
    assert o.record == "q,tau"
    assert SimulationOptions.build(t_end=1.0, dt=0.1, record="joints,qdd,tau,wrenches").record == "all"
    for bad, msg in (("q,speed", "unknown quantity 'speed'"), ("", "unknown quantity"), (3, "comma list")):
        with pytest.raises(PartreeInputError, match=msg):
            SimulationOptions.build(t_end=1.0, dt=0.1, record=bad)
    with pytest.raises(PartreeInputError, match="output"):
        SimulationOptions.build(t_end=1.0, dt=0.1, output="everywhere")
    with pytest.raises(PartreeInputError, match="MPI backend"):
        SimulationOptions.build(t_end=1.0, dt=0.1, output="per-rank", out="x.h5")
    with pytest.raises(PartreeInputError, match=r"\.h5"):
        SimulationOptions.build(t_end=1.0, dt=0.1, output="per-rank", backend="mpi", out="x.npz")
    with pytest.raises(PartreeInputError, match="empty selection"):
        SimulationOptions.build(t_end=1.0, dt=0.1, record_joints=[])


def test_record_subset_serial(job, tmp_path):
    m, kw, full = job
    names = [m.joint_names[3], m.joint_names[-1]]
    for suffix in ("h5", "npz"):
        out = tmp_path / f"s.{suffix}"
        r = simulate(m, 0.01, 1e-3, record="q,tau", record_joints=["5:9", *names], out=out, **kw)
        ids = sorted({5, 6, 7, 8, 3, m.n - 1})
        qc = np.concatenate([np.arange(m.idx_q[i], m.idx_q[i] + m.nq_j[i]) for i in ids])
        vc = np.concatenate([np.arange(m.idx_v[i], m.idx_v[i] + m.nv_j[i]) for i in ids])
        for res in (r, load_results(out)):
            assert np.array_equal(res.q_columns, qc) and np.array_equal(res.v_columns, vc)
            assert np.array_equal(res.q, full.q[:, qc]) and np.array_equal(res.tau, full.tau[:, vc])
            assert res.qd is None and res.qdd is None and res.energy is None and res.joint_wrench is None
            assert np.array_equal(res.joint(names[0])[0], full.joint(names[0])[0])
            assert len(res.units["q"]) == qc.size
            with pytest.raises(KeyError, match="not recorded"):
                res.joint(m.joint_names[12])
        assert "energy" not in r.summary
    # the wrenches of the recorded joints; glob patterns; energy only
    r = simulate(m, 0.01, 1e-3, record="wrenches,energy", record_joints=[m.joint_names[2][:-1] + "*"], **kw)
    assert r.q is None and r.wrench_joints and all(w.startswith(m.joint_names[2][:-1]) for w in r.wrench_joints)
    k = [list(m.joint_names).index(w) for w in r.wrench_joints]
    assert np.abs(r.joint_wrench - full.joint_wrench[:, k]).max() < 1e-12
    assert np.array_equal(r.energy, full.energy)
    with pytest.raises(PartreeInputError, match="no joint matches 'nothing\\*'"):
        simulate(m, 0.01, 1e-3, record_joints="nothing*", **kw)
    with pytest.raises(PartreeInputError, match="selects no joint"):
        simulate(m, 0.01, 1e-3, record_joints="100:200", **kw)


def test_record_subset_dask(job):
    pytest.importorskip("distributed")
    m, kw, full = job
    r = simulate(m, 0.01, 1e-3, record="qd,qdd", record_joints="0:6", backend="dask", parts=2, **kw)
    assert r.q is None and r.energy is None
    assert np.abs(r.qd - full.qd[:, r.v_columns]).max() < 1e-12
    assert np.abs(r.qdd - full.qdd[:, r.v_columns]).max() < 1e-12


def test_record_subset_cli(tmp_path):
    out = tmp_path / "c.h5"
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "chain:n=12", "--state", "random", "--t-end",
                        "0.01", "--record", "q,energy", "--record-joints", "0:3", "j1*", "--out", str(out),
                        "--no-progress"], capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    r = load_results(out)
    assert r.qd is None and r.energy is not None and r.q.shape[1] == len(r.q_columns) < 12
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "chain:n=12", "--t-end", "0.01", "--record",
                        "q,speed", "--no-progress"], capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode != 0 and "unknown quantity 'speed'" in p.stderr


# ==================================================================== per-rank files

def _one_rank():
    MPI = pytest.importorskip("mpi4py.MPI")
    return MPI.COMM_SELF


def test_per_rank_single_rank_moved_and_missing(job, tmp_path):
    """One rank in process: the joined file equals the serial run; the folder moved whole still
    reads; a missing rank file is named."""
    comm = _one_rank()
    m, kw, full = job
    d = tmp_path / "run"
    d.mkdir()
    r = simulate(m, 0.01, 1e-3, record="all", backend="mpi", parts=3, comm=comm, output="per-rank",
                 out=d / "x.h5", **kw)
    assert (d / "x.rank0000.h5").exists()
    for name in ("q", "qd", "qdd", "tau", "energy", "joint_wrench"):
        assert np.abs(getattr(r, name) - getattr(full, name)).max() < 1e-12, name
    moved = tmp_path / "elsewhere" / "moved"
    shutil.move(str(d), str(moved))
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        a = load_results(Path("elsewhere") / "moved" / "x.h5")
    finally:
        os.chdir(cwd)
    for name in ("q", "qd", "qdd", "tau"):
        assert np.abs(getattr(a, name) - getattr(full, name)).max() < 1e-12, name
    os.remove(moved / "x.rank0000.h5")
    with pytest.raises(PartreeInputError, match=r"rank file .*x\.rank0000\.h5.* is missing"):
        load_results(moved / "x.h5")


def test_per_rank_checkpoint_resumes_serially(job, tmp_path):
    """A per-rank run's checkpoint (rank segments) resumes on the serial backend and per rank,
    equal to an uninterrupted run."""
    comm = _one_rank()
    m, kw, full = job

    class Stop(BaseException):
        pass

    def hook(k, t, q, v):
        if k == 6:
            raise Stop

    for backend, extra in (("serial", {}), ("mpi", dict(comm=comm, output="per-rank", parts=2))):
        out = tmp_path / f"ck-{backend}.h5"
        with pytest.raises(Stop):
            simulate(m, 0.01, 1e-3, record="all", backend="mpi", parts=3, comm=comm, output="per-rank", out=out,
                     checkpoint_every=2, save_every=2, _step_hook=hook, **kw)
        assert Path(f"{out}.ckpt.seg000001.rank0000.npz").exists()
        r = simulate(m, 0.01, 1e-3, record="all", backend=backend, out=out, checkpoint_every=2, save_every=2,
                     resume=True, **extra, **kw)
        assert r.summary["resumed_from"] > 0
        a = load_results(out)
        for name in ("t", "q", "qd", "qdd", "tau", "energy"):
            assert np.abs(getattr(a, name) - getattr(full, name)[::2]).max() < 1e-12, (backend, name)
        assert not Path(f"{out}.ckpt.seg000001.rank0000.npz").exists()


@pytest.mark.parametrize("n", [2, 3])
def test_per_rank_under_mpiexec(n, tmp_path):
    mpiexec = _mpiexec()
    p = subprocess.run([mpiexec, "-n", str(n), sys.executable, str(SCRIPTS / "output_check.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=300, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "OK" in p.stdout.splitlines(), p.stdout + p.stderr


def test_per_rank_cli_under_mpiexec(tmp_path):
    mpiexec = _mpiexec()
    base = [sys.executable, "-m", "partree", "simulate", "chain:n=16", "--state", "random", "--t-end", "0.01",
            "--save-every", "2", "--no-progress", "--record", "q,qd,tau"]
    p = subprocess.run([mpiexec, "-n", "2", *base, "--backend", "mpi", "--output", "per-rank", "--out",
                        str(tmp_path / "p.h5")], capture_output=True, text=True, timeout=180, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([*base, "--out", str(tmp_path / "s.h5")], capture_output=True, text=True, timeout=120,
                       env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    a, b = load_results(tmp_path / "p.h5"), load_results(tmp_path / "s.h5")
    assert (tmp_path / "p.rank0001.h5").exists()
    for name in ("t", "q", "qd", "tau"):
        assert np.abs(getattr(a, name) - getattr(b, name)).max() < 1e-12, name
    assert a.energy is None and b.energy is None


def test_per_rank_signal_writes_rows_and_resumes(job, tmp_path):
    """SIGINT during a per-rank run (one rank in process): the checkpoint and the rows so far are
    written (the joined file reads), and the resumed run equals an uninterrupted one."""
    import signal

    from partree.simulation import SimulationInterrupted

    comm = _one_rank()
    m, kw, full = job
    out = tmp_path / "sig.h5"

    def hook(k, t, q, v):
        if k == 4:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(SimulationInterrupted):
        simulate(m, 0.01, 1e-3, record="all", backend="mpi", parts=2, comm=comm, output="per-rank", out=out,
                 _step_hook=hook, **kw)
    part = load_results(out)
    assert part.summary["interrupted"] and len(part) == 5
    assert np.abs(part.q - full.q[:5]).max() < 1e-12
    r = simulate(m, 0.01, 1e-3, record="all", backend="mpi", parts=2, comm=comm, output="per-rank", out=out,
                 resume=True, **kw)
    a = load_results(out)
    assert r.summary["resumed_from"] > 0
    for name in ("t", "q", "qd", "qdd", "tau", "energy", "joint_wrench"):
        assert np.abs(getattr(a, name) - getattr(full, name)).max() < 1e-12, name
