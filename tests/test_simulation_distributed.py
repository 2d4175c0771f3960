"""Distributed simulation (simulate(..., backend='mpi' | 'dask'): partree.simulation.mpi and
dask_backend): MPI ranks / Dask workers hold only their parts' state; trajectories must equal the
serial backend's to 1e-10.  Checkpoints: a
resumed run (same backend and parts) equals the uninterrupted one bit for bit; mismatched
checkpoints are refused on every rank / by the client."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partree.model import PartreeInputError
from partree.models.generators import random_tree
from partree.simulation import CheckpointError, load_results, simulate

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
    with pytest.raises(PartreeInputError, match="checkpoint path"):
        simulate(m, 0.01, 1e-3, backend="mpi", parts=2, checkpoint_every=5, progress=False)
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
             ("rk4", 0.001, 1e-3, {"record": "all"}), ("symplectic-euler", 0.004, 1e-3, {})]
    def on_workers(k, t, q, v):          # the ranks on the workers hold their parts' pieces only
        assert isinstance(q, np.ndarray) and 0 < q.size < m.nq and 0 < v.size < m.nv

    for ci, (integ, t_end, dt, extra) in enumerate(cases):
        out = tmp_path / f"{ci}_{integ}.h5"
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


# ==================================================================== checkpoints and resume

def _env():
    return dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")


def _need_mpiexec():
    pytest.importorskip("mpi4py")
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    return mpiexec


def test_mpi_checkpoint_kill_then_resume(tmp_path):
    """Every rank killed mid-run (os._exit); a new job resumes bit for bit (RK4); DOPRI5 with
    wall-clock checkpoints; mismatched checkpoints raise the same CheckpointError on every rank."""
    mpiexec = _need_mpiexec()
    script = str(SCRIPTS / "sim_resume.py")
    p = subprocess.run([mpiexec, "-n", "2", sys.executable, script, "kill", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode != 0, p.stdout + p.stderr
    assert (tmp_path / "rk4.h5.ckpt").exists() and not (tmp_path / "rk4.h5").exists()
    p = subprocess.run([mpiexec, "-n", "2", sys.executable, script, "resume", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "OK" in p.stdout.splitlines(), p.stdout + p.stderr


def _cli(args, timeout=120, mpi=None, cwd=None):
    cmd = [sys.executable, "-m", "partree", "simulate", *args, "--no-progress"]
    if mpi:
        cmd = [mpi, "-n", "2", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=cwd)


def test_mpi_cli_checkpoint_resume_and_refusal(tmp_path):
    """mpiexec -n 2 partree simulate ... --backend mpi --checkpoint-every / --resume; a resume with
    other options exits with the refusal on stderr (once, from rank 0), no hang."""
    mpiexec = _need_mpiexec()
    out, ref = tmp_path / "r.h5", tmp_path / "ref.h5"
    base = ["chain:n=12", "--state", "random", "--t-end", "0.05", "--backend", "mpi", "--checkpoint-every", "20"]
    p = _cli(base + ["--out", str(ref), "--keep-checkpoint"], mpi=mpiexec)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("integrator  rk4") == 1            # rank 0 talks
    os.replace(str(ref) + ".ckpt", str(out) + ".ckpt")
    for k in (1, 2):
        os.replace(f"{ref}.ckpt.seg{k:06d}.npz", f"{out}.ckpt.seg{k:06d}.npz")
    p = _cli(base + ["--out", str(out), "--resume"], mpi=mpiexec)      # resumes at t = 0.04
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resumed     from t = 0.04" in p.stdout, p.stdout
    a, b = load_results(out), load_results(ref)
    for name in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert not os.path.exists(str(out) + ".ckpt")
    _cli(base + ["--out", str(out), "--keep-checkpoint", "--force"], mpi=mpiexec)
    p = _cli(base + ["--out", str(out), "--resume", "--dt", "2e-3"], timeout=60, mpi=mpiexec)
    assert p.returncode != 0
    assert p.stderr.count("different options: dt was 0.001, now 0.002") == 1, p.stderr


def _interrupt_after(k_stop):
    class Stop(Exception):
        pass

    def hook(k, t, q, v):
        if k == k_stop:
            raise Stop
    return Stop, hook


def test_dask_checkpoint_resume(dask_client, tmp_path):
    """Interrupted Dask runs resume bit for bit (RK4, DOPRI5 with its FSAL derivative and step
    size); mismatched checkpoints are refused before any work; a Dask checkpoint resumes on the
    serial backend too (same format)."""
    m = _model("floating")
    kw = _inputs(m)
    kw.update(backend="dask", client=dask_client, parts=3)
    for integ, extra, k_stop, every, t_from in [("rk4", dict(t_end=0.008, dt=1e-3, save_every=2), 7, 3, 0.006),
                                                ("dopri5", dict(t_end=0.2, dt=0.05), 3, 2, None)]:
        ref = simulate(m, integrator=integ, **extra, **kw)
        ck = tmp_path / f"{integ}.ckpt"
        Stop, hook = _interrupt_after(k_stop)
        with pytest.raises(Stop):
            simulate(m, integrator=integ, checkpoint=ck, checkpoint_every=every, _step_hook=hook, **extra, **kw)
        assert ck.exists()
        res = simulate(m, integrator=integ, checkpoint=ck, checkpoint_every=every, resume="auto",
                       keep_checkpoint=True, **extra, **kw)
        assert res.summary["resumed_from"] > 0
        if t_from is not None:
            assert abs(res.summary["resumed_from"] - t_from) < 1e-12
        for name in ("t", "q", "qd", "energy"):
            assert np.array_equal(getattr(res, name), getattr(ref, name)), (integ, name)
        assert res.summary["steps"] == ref.summary["steps"] and res.summary["f_evals"] == ref.summary["f_evals"]
    # the dopri5 checkpoint: other options / model refused with a clear message
    with pytest.raises(CheckpointError, match="different options: rtol was 1e-08, now 1e-06"):
        simulate(m, integrator="dopri5", checkpoint=ck, resume=True, **dict(extra, **kw, rtol=1e-6))
    with pytest.raises(CheckpointError, match="different model"):
        simulate(_model("plain"), integrator="dopri5", checkpoint=ck, resume=True, **extra,
                 **dict(kw, q0=None, qd0=None, torques=None))
    # one checkpoint format for every backend: the serial backend resumes it
    kws = {k: v for k, v in kw.items() if k not in ("backend", "client", "parts")}
    res = simulate(m, integrator="dopri5", checkpoint=ck, resume=True, **extra, **kws)
    assert np.abs(res.q - ref.q).max() < 1e-10 and res.summary["resumed_from"] > 0


def test_dask_cli_checkpoint_resume(tmp_path):
    """partree simulate ... --backend dask --checkpoint-every N [--resume] (its own LocalCluster)."""
    pytest.importorskip("distributed")
    out, ref = tmp_path / "d.h5", tmp_path / "ref.h5"
    base = ["chain:n=8", "--state", "random", "--t-end", "0.01", "--backend", "dask", "--parts", "2",
            "--checkpoint-every", "4"]
    p = _cli(base + ["--out", str(ref), "--keep-checkpoint"])
    assert p.returncode == 0, p.stdout + p.stderr
    os.replace(str(ref) + ".ckpt", str(out) + ".ckpt")
    for k in (1, 2):
        os.replace(f"{ref}.ckpt.seg{k:06d}.npz", f"{out}.ckpt.seg{k:06d}.npz")
    p = _cli(base + ["--out", str(out), "--resume"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resumed     from t = 0.008" in p.stdout, p.stdout
    a, b = load_results(out), load_results(ref)
    for name in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_bench_simulation_script_smoke(tmp_path):
    """scripts/benchmarks/bench_simulation.py: a tiny serial case, table + CSV + markdown."""
    script = Path(__file__).parent.parent / "scripts" / "benchmarks" / "bench_simulation.py"
    csv_path = tmp_path / "b.csv"
    p = subprocess.run([sys.executable, str(script), "--sizes", "100", "--backends", "serial", "--steps", "3",
                        "--repeat", "1", "--csv", str(csv_path), "--markdown"],
                       capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "steps_per_s" in p.stdout and "| chain | 1e2 |" in p.stdout, p.stdout
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("backend,model,N") and len(lines) == 3


# ==================================================================== interrupts (SIGINT / SIGTERM)

def _signal_at(k_stop, signum, wait=0.0):
    """A step hook that sends ``signum`` to this process at tick ``k_stop`` (on Dask the hook
    runs on the workers: it signals the client and waits ``wait`` s for the stop to reach them)."""
    import time

    pid = os.getpid()

    def hook(k, t, q, v):
        if k == k_stop:
            os.kill(pid, signum)
            time.sleep(wait)
    return hook


@pytest.mark.parametrize("backend", ["mpi", "dask"])
def test_signal_in_process_distributed_checkpoints_then_resumes(backend, tmp_path, request):
    """SIGTERM during a distributed run (MPI on one rank; Dask): the state is gathered for a
    checkpoint at the tick reached, SimulationInterrupted is raised; the resumed run equals the
    uninterrupted one bit for bit."""
    import signal

    from partree.simulation import SimulationInterrupted

    if backend == "mpi":
        pytest.importorskip("mpi4py")
        kw_b = dict(backend="mpi", parts=3)
    else:
        kw_b = dict(backend="dask", client=request.getfixturevalue("dask_client"), parts=3)
    m = _model("floating")
    kw = dict(_inputs(m), t_end=0.008, dt=1e-3, save_every=2, **kw_b)
    ref = simulate(m, **kw)
    out = tmp_path / "r.npz"
    hook = _signal_at(5, signal.SIGTERM, wait=0.0 if backend == "mpi" else 1.0)
    with pytest.raises(SimulationInterrupted) as info:
        simulate(m, out=out, _step_hook=hook, **kw)
    assert abs(info.value.t - 0.005) < 1e-12 and os.path.exists(info.value.checkpoint)
    assert load_results(out).summary["interrupted"]["signal"] == "SIGTERM"
    res = simulate(m, out=out, resume=True, **kw)
    assert res.summary["resumed_from"] == info.value.t
    for name in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(res, name), getattr(ref, name)), name


def test_dask_cli_ctrl_c_to_the_process_group(tmp_path):
    """A terminal's Ctrl-C reaches the whole process group, the local cluster's workers too: they
    ignore it, so the client can still fetch the state and write the checkpoint (exit 130); the
    checkpoint resumes on the serial backend, close to the serial run."""
    import signal

    pytest.importorskip("distributed")
    # long enough (4000 steps, a few seconds on the workers) that the signal sent at 10% lands
    # well before the end on a fast machine
    args = ["chain:n=40", "--state", "random", "--t-end", "0.4", "--dt", "1e-4", "--save-every", "100"]
    p = subprocess.Popen([sys.executable, "-m", "partree", "simulate", *args, "--backend", "dask", "--out", "d.npz"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path,
                         start_new_session=True)
    try:
        for line in p.stderr:
            if "(10%)" in line:
                os.killpg(p.pid, signal.SIGINT)
                break
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, out + err
    assert "; resume with: partree simulate" in err and (tmp_path / "d.npz.ckpt").exists()
    q = _cli(args + ["--out", "d.npz", "--resume"], cwd=tmp_path)        # serial backend
    assert q.returncode == 0, q.stdout + q.stderr
    r = _cli(args + ["--out", "ref.npz"], cwd=tmp_path)
    a, b = load_results(tmp_path / "d.npz"), load_results(tmp_path / "ref.npz")
    assert a.summary["resumed_from"] > 0 and np.abs(a.q - b.q).max() < 1e-10 and r.returncode == 0
