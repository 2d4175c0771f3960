"""cluster/: the job scripts' payloads run locally (mpiexec -n 2, LocalCluster)."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CL = ROOT / "cluster"
MPIEXEC = next((str(p) for p in (Path(sys.executable).parent / "mpiexec", Path("/work/venv/bin/mpiexec"))
                if p.exists()), shutil.which("mpiexec"))
ENV = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHON=sys.executable)
need_mpi = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")


def _json(out):
    lines = [s for s in out.splitlines() if s.startswith("{")]
    assert lines, out
    return json.loads(lines[-1])


@pytest.mark.parametrize("script", ["slurm_bench.sbatch", "pbs_bench.pbs", "slurm_scaling.sbatch"])
def test_job_scripts_are_wellformed(script):
    text = (CL / script).read_text()
    assert text.startswith("#!/usr/bin/env bash")
    directive = "#SBATCH" if script.startswith("slurm") else "#PBS"
    assert re.search(rf"^{directive} ", text, re.M)
    assert ("cluster/run_bench.sh" in text) or ("scripts/benchmarks/scaling.py" in text)
    subprocess.run(["bash", "-n", str(CL / script)], check=True)


@need_mpi
@pytest.mark.parametrize("script", ["slurm_bench.sbatch", "pbs_bench.pbs"])
def test_job_script_payload_under_mpiexec(script, tmp_path):
    """Run the job script itself outside the batch system: the launcher is mpiexec -n 2."""
    env = dict(ENV, PARTREE_LAUNCH=f"{MPIEXEC} -n 2", MODEL="autotree:nb=3000,bf=2", REPEAT="2",
               BENCH_ARGS="--residual aba", SLURM_SUBMIT_DIR=str(ROOT), PBS_O_WORKDIR=str(ROOT))
    env.pop("PBS_NODEFILE", None)
    p = subprocess.run(["bash", str(CL / script)], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    d = _json(p.stdout)
    assert d["backend"] == "mpi" and d["ranks"] == 2 and d["residual"] < 1e-10
    for f in ROOT.glob("partree-bench-local.json"):
        f.unlink()


def test_hostfile_example():
    lines = [s for s in (CL / "hostfile.example").read_text().splitlines() if s and not s.startswith("#")]
    assert lines and all(re.fullmatch(r"[\w.-]+(:\d+)?", s) for s in lines)


@need_mpi
def test_dask_mpi_launcher_two_ranks():
    pytest.importorskip("distributed")
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(CL / "dask_mpi_launcher.py"), "--model",
                        "autotree:nb=2000,bf=1.3", "--repeat", "2"], capture_output=True, text=True, timeout=180,
                       env=ENV)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    d = _json(p.stdout)
    assert d["backend"] == "dask" and d["ranks"] == 1 and d["residual"] < 1e-10


def test_jobqueue_config_and_local_payload():
    pytest.importorskip("distributed")
    yaml = pytest.importorskip("yaml")
    sys.path.insert(0, str(CL))
    try:
        import jobqueue_launcher
    finally:
        sys.path.pop(0)
    cfg = jobqueue_launcher.load_config(CL / "dask_jobqueue.yaml", "slurm")
    assert cfg["cores"] == 1 and cfg["processes"] == 1 and "memory" in cfg
    assert yaml.safe_load((CL / "dask_jobqueue.yaml").read_text())["jobqueue"]["pbs"]["cores"] == 1
    p = subprocess.run([sys.executable, str(CL / "jobqueue_launcher.py"), "--model", "autotree:nb=2000,bf=2",
                        "--local", "2", "--repeat", "2"], capture_output=True, text=True, timeout=180, env=ENV)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    d = _json(p.stdout)
    assert d["backend"] == "dask" and d["ranks"] == 2 and d["residual"] < 1e-10
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        p = subprocess.run([sys.executable, str(CL / "jobqueue_launcher.py"), "--model", "x"], capture_output=True,
                           text=True, timeout=60, env=ENV)
        assert p.returncode != 0 and "dask-jobqueue is not installed" in p.stderr
