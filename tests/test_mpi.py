"""MPI backend: real `mpiexec -n 2` / `-n 3` jobs compared with serial ABA, and abort on errors."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

SCRIPTS = Path(__file__).parent / "mpi_scripts"


def _mpiexec():
    for cand in (Path(sys.executable).parent / "mpiexec", Path("/work/venv/bin/mpiexec")):
        if cand.exists():
            return str(cand)
    return shutil.which("mpiexec")


MPIEXEC = _mpiexec()
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")


def _run(n, script, *args, timeout=240):
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    t = time.perf_counter()
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(SCRIPTS / script), *args],
                       capture_output=True, text=True, timeout=timeout, env=env)
    return p, time.perf_counter() - t


@pytest.mark.parametrize("n", [2, 3])
def test_mpi_matches_aba(n):
    p, _ = _run(n, "fd_check.py")
    assert p.returncode == 0, p.stdout + p.stderr
    line = [s for s in p.stdout.splitlines() if s.startswith("OK")]
    assert line, p.stdout + p.stderr
    _, err, nbytes = line[0].split()
    assert float(err) < 1e-10
    assert 0 < int(nbytes) < 200_000        # O(P) boundary data only


@pytest.mark.parametrize("n,mode,msg", [(2, "nan", "is nan"), (3, "nan", "is nan"),
                                        (2, "loader", "loader failed on purpose"),
                                        (3, "rootloader", "loader failed on purpose")])
def test_error_on_one_rank_aborts(n, mode, msg):
    p, dt = _run(n, "fd_fail.py", mode, timeout=60)
    assert p.returncode != 0
    assert "NOT REACHED" not in p.stdout
    assert msg in p.stderr + p.stdout
    failing = 0 if mode == "rootloader" else n - 1
    assert f"partree MPI rank {failing}" in p.stderr + p.stdout
    assert dt < 45


def test_single_rank_in_process_raises_instead_of_abort():
    import numpy as np

    import partree
    from partree.model import PartreeInputError
    from partree.parallel import forward_dynamics

    m = partree.models.auto_tree(50, bf=1.3)
    rng = np.random.default_rng(0)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    x = forward_dynamics(m, q, qd, tau, backend="mpi", parts=4)
    ref = partree.aba(m, q, qd, tau)
    assert np.abs(x - ref).max() / np.abs(ref).max() < 1e-10
    q[0] = np.inf
    with pytest.raises(PartreeInputError, match=r"q\[0\] is inf"):
        forward_dynamics(m, q, qd, tau, backend="mpi", parts=4)
