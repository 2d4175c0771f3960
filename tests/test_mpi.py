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


def _ok_line(n, script):
    """Run a check script under mpiexec -n n; the fields of its 'OK ...' line (it must exit 0)."""
    p, _ = _run(n, script)
    assert p.returncode == 0, p.stdout + p.stderr
    line = [s for s in p.stdout.splitlines() if s.startswith("OK")]
    assert line, p.stdout + p.stderr
    return line[0].split()[1:]


@pytest.mark.parametrize("n", [2, 3])
def test_mpi_matches_aba(n):
    err, nbytes = _ok_line(n, "fd_check.py")
    assert float(err) < 1e-10
    assert 0 < int(nbytes) < 200_000        # O(P) boundary data only


@pytest.mark.parametrize("n", [2, 3])
def test_mpi_constraint_forces_match_cfa(n):
    (err,) = _ok_line(n, "cf_check.py")
    assert float(err) < 1e-10


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


_THREADS_PROBE = (
    "import sys\n"
    "if sys.argv[1] == 'numpy-first':\n"
    "    import numpy\n"
    "import partree\n"
    "from threadpoolctl import threadpool_info\n"
    "from mpi4py import MPI\n"
    "blas = [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']\n"
    "counts = MPI.COMM_WORLD.gather(max(blas), root=0)\n"
    "if MPI.COMM_WORLD.rank == 0:\n"
    "    print('THREADS', *counts, flush=True)\n")


@pytest.mark.parametrize("order", ["partree-first", "numpy-first"])
@pytest.mark.parametrize("user", [None, "2"])
def test_one_blas_thread_per_rank(order, user):
    """Under mpiexec, partree limits every rank's BLAS pool to one thread (spinning BLAS threads of
    P ranks on P cores steal each other's cores), whether NumPy was imported before partree or
    not; a thread count the user set is left alone."""
    pytest.importorskip("threadpoolctl")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "PARTREE_KEEP_THREADS")}
    if user is not None:
        env["OPENBLAS_NUM_THREADS"] = user
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-c", _THREADS_PROBE, order],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    line = [s.split()[1:] for s in p.stdout.splitlines() if s.startswith("THREADS")]
    assert line == [["1", "1"] if user is None else [user, user]], p.stdout


def test_gather_per_call_keeps_qdd_distributed():
    """``forward_dynamics(gather=False)`` leaves qdd on the ranks (``local_qdd``) with the same values
    a gathered call returns; asking to gather from an engine built without the qdd index is an error."""
    import numpy as np

    import partree
    from partree.parallel.mpi import MPIEngine

    m = partree.models.auto_tree(60, bf=2)
    rng = np.random.default_rng(1)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    eng = MPIEngine(m, parts=3, gather=True)
    full = eng.forward_dynamics(q, qd, tau)
    assert eng.forward_dynamics(q, qd, tau, gather=False) is None
    pieces = np.concatenate(eng.local_qdd)
    assert np.array_equal(np.sort(pieces), np.sort(full))
    assert eng.last_info["gather_bytes_rank"] == 0
    ref = partree.aba(m, q, qd, tau)
    assert np.abs(full - ref).max() / np.abs(ref).max() < 1e-10
    lean = MPIEngine(m, parts=3, gather=False)
    assert lean.forward_dynamics(q, qd, tau) is None
    with pytest.raises(ValueError, match="built with gather=False"):
        lean.forward_dynamics(q, qd, tau, gather=True)
