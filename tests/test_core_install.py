"""The core install alone (``pip install -e .``: numpy, scipy, numba, tqdm) in a fresh virtual
environment: every command that needs no optional package runs, and one that does says which extra
to install before doing any work.

The environment is made once for the module (pip takes the packages from its cache when the full
install ran before, as in CI); the compiled kernels are shared through the source tree's cache.
"""
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    """(python of a fresh venv with the core install only, a scratch directory)."""
    d = tmp_path_factory.mktemp("core")
    env_dir = d / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    py = env_dir / "bin" / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", str(ROOT)],
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        pytest.fail(f"pip install -e . failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    missing = subprocess.run([str(py), "-c", "import importlib.util as u; print([m for m in "
                              "('h5py', 'matplotlib', 'mpi4py', 'dask', 'distributed', 'pinocchio') "
                              "if u.find_spec(m)])"], capture_output=True, text=True).stdout.strip()
    assert missing == "[]", f"the core install brought optional packages: {missing}"
    work = d / "work"
    work.mkdir()
    return py, work


def run(core, *args, timeout=600):
    py, work = core
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_"))}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(py), "-m", "partree", *args], cwd=work, capture_output=True, text=True,
                          timeout=timeout, env=env)


def ok(p):
    assert p.returncode == 0, f"{p.args}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    assert "Traceback" not in p.stderr
    return p.stdout


def refused(p, extra):
    """Refused with a message naming the extra, no traceback, nothing written."""
    assert p.returncode == 2, f"{p.args}: exit {p.returncode}\n{p.stdout[-1000:]}\n{p.stderr[-1000:]}"
    assert "Traceback" not in p.stderr
    assert f"partree[{extra}]" in p.stderr, p.stderr


def test_commands_without_optional_packages(core):
    py, work = core
    assert "bodies     7" in ok(run(core, "info", "spacerobot"))
    ok(run(core, "info", "--generators"))
    ok(run(core, "dynamics", "autotree:nb=300,bf=2", "--out", "d.npz"))
    assert (work / "d.npz").exists()
    ok(run(core, "convert", "chain:n=5", "c.npz"))
    ok(run(core, "convert", "c.npz", "c.json"))
    ok(run(core, "partition", "autotree:nb=2000,bf=2", "--ranks", "3"))
    ok(run(core, "bench", "--model", "autotree:nb=2000,bf=2", "--repeat", "2"))
    ok(run(core, "simulate", "chain:n=4", "--t-end", "0.05", "--dt", "0.01", "--out", "r.npz", "--no-progress"))
    assert (work / "r.npz").exists()


def test_the_main_job_without_optional_packages(core):
    """``partree simulate`` with no model: the results go to .npz (no h5py), no figure (no
    matplotlib), and the output says so."""
    py, work = core
    out = ok(run(core, "simulate", "--no-progress"))
    assert (work / "space_robot.npz").exists()
    assert "matplotlib" in out or "partree[plot]" in out


def test_optional_packages_named_before_any_work(core):
    py, work = core
    refused(run(core, "simulate", "chain:n=4", "--t-end", "0.05", "--dt", "0.01", "--out", "r.h5"), "io")
    assert not (work / "r.h5").exists()
    refused(run(core, "convert", "chain:n=5", "c.h5"), "io")
    refused(run(core, "plot", "r.npz", "--out", "figs"), "plot")
    refused(run(core, "show", "spacerobot", "--out", "robot.png"), "plot")
    refused(run(core, "bench", "--model", "chain:n=50", "--backend", "dask"), "dask")
    refused(run(core, "bench", "--model", "chain:n=50", "--backend", "mpi"), "mpi")
    refused(run(core, "simulate", "chain:n=4", "--t-end", "0.05", "--backend", "dask", "--out", "x.npz"), "dask")
