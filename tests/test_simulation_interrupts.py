"""SIGINT / SIGTERM during a simulation: a checkpoint at the step reached, the rows so far in the
results file, the command that resumes, exit status 130 / 143; the resumed run equals the
uninterrupted one bit for bit (serial, and MPI under mpiexec -n 2).  In Python: a
SimulationInterrupted (a KeyboardInterrupt) after the checkpoint.  Progress: a bar on a terminal,
plain lines otherwise."""
import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import partree
from partree.simulation import SimulationInterrupted, load_results, simulate
from partree.simulation.loop import Progress, SignalCatcher, resume_command

MODEL = "chain:n=6,alternate=true"


def _env():
    return dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")


def _mpiexec():
    for cand in (Path(sys.executable).parent / "mpiexec", Path("/work/venv/bin/mpiexec")):
        if cand.exists():
            return str(cand)
    return shutil.which("mpiexec")


def _kill_at(k_stop, signum=signal.SIGINT, times=1):
    def hook(k, t, q, v):
        if k == k_stop:
            for _ in range(times):
                os.kill(os.getpid(), signum)
    return hook


# ==================================================================== in process


@pytest.mark.parametrize("integ,signum", [("rk4", signal.SIGINT), ("dopri5", signal.SIGTERM)])
def test_signal_in_process_checkpoints_then_resumes_bit_for_bit(tmp_path, integ, signum):
    m = partree.resolve_model(MODEL)
    kw = dict(t_end=0.3, dt=0.01, integrator=integ, rtol=1e-9, atol=1e-11, q0=np.full(m.nq, 0.4), save_every=2,
              progress=False, verbose=False)
    ref = simulate(m, **kw)
    out = tmp_path / "r.npz"
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with pytest.raises(KeyboardInterrupt) as info:
        simulate(m, out=out, _step_hook=_kill_at(7, signum), **kw)
    e = info.value
    assert isinstance(e, SimulationInterrupted) and e.signum == signum and e.exit_code == 128 + signum
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before     # handlers restored
    tick = 0.01 * (2 if integ == "dopri5" else 1)
    assert abs(e.t - 7 * tick) < 1e-12 and e.checkpoint == str(out) + ".ckpt" and os.path.exists(e.checkpoint)
    part = load_results(out)                       # the rows so far
    assert part.summary["interrupted"] == {"t": e.t, "signal": signal.Signals(signum).name}
    n = len(part.t)
    assert part.t[-1] <= e.t + 1e-12 and n < len(ref.t)
    for k in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(part, k), getattr(ref, k)[:n]), k
    res = simulate(m, out=out, resume=True, **kw)
    assert res.summary["resumed_from"] == e.t
    for k in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(res, k), getattr(ref, k)), k
        assert np.array_equal(getattr(load_results(out), k), getattr(ref, k)), k
    assert not os.path.exists(e.checkpoint)


def test_signal_without_a_checkpoint_path_saves_nothing(tmp_path):
    m = partree.resolve_model(MODEL)
    with pytest.raises(SimulationInterrupted) as info:
        simulate(m, 0.1, 0.01, progress=False, verbose=False, _step_hook=_kill_at(3))
    assert info.value.checkpoint is None and "nothing saved" in str(info.value)


def test_second_signal_stops_at_once_and_catch_signals_off(tmp_path, monkeypatch):
    m = partree.resolve_model(MODEL)
    out = tmp_path / "r.npz"
    # the same signal twice at once (a Ctrl-C that reaches a process twice): one interrupt
    with pytest.raises(SimulationInterrupted):
        simulate(m, 0.1, 0.01, out=out, progress=False, verbose=False, _step_hook=_kill_at(3, times=2))
    os.remove(str(out) + ".ckpt")
    os.remove(str(out) + ".ckpt.seg000001.npz")
    out.unlink()
    # a second signal (another one, or the same one later): a plain KeyboardInterrupt right away,
    # no checkpoint
    monkeypatch.setattr(SignalCatcher, "repeat_grace", 0.0)
    with pytest.raises(KeyboardInterrupt) as info:
        simulate(m, 0.1, 0.01, out=out, progress=False, verbose=False, _step_hook=_kill_at(3, times=2))
    assert not isinstance(info.value, SimulationInterrupted)
    assert not os.path.exists(str(out) + ".ckpt") and not out.exists()
    # catch_signals=False: Python's own KeyboardInterrupt, nothing written
    with pytest.raises(KeyboardInterrupt) as info:
        simulate(m, 0.1, 0.01, out=out, progress=False, verbose=False, catch_signals=False, _step_hook=_kill_at(3))
    assert not isinstance(info.value, SimulationInterrupted)
    assert not os.path.exists(str(out) + ".ckpt") and not out.exists()


def test_resume_command():
    assert resume_command(["simulate", "m.urdf", "--out", "a b.h5"]) == "partree simulate m.urdf --out 'a b.h5' --resume"
    assert resume_command(["simulate", "--resume"], ["mpiexec", "-n", "4"]) == \
        "mpiexec -n 4 partree simulate --resume"


# ==================================================================== progress


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def test_progress_plain_lines_when_not_a_terminal_bar_when_it_is():
    s = _Stream(False)
    p = Progress(True, 1.0, 0.0, "simulate m [rk4]", stream=s)
    for k in range(1, 101):
        p.update(k / 100, k, last=k == 100)
    p.close()
    text = s.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 10 and lines[0].startswith("simulate m [rk4]: t = 0.1 / 1 s (10%)") and "(100%)" in lines[-1]
    s = _Stream(True)
    p = Progress(True, 1.0, 0.0, "simulate m [rk4]", stream=s)
    assert p.bar is not None
    for k in range(1, 101):
        p.update(k / 100, k, last=k == 100)
    p.close()
    assert "\r" in s.getvalue() and "100%" in s.getvalue()
    s = _Stream(True)
    p = Progress(False, 1.0, 0.0, "x", stream=s)
    p.update(0.5, 5)
    p.close()
    assert s.getvalue() == ""


# ==================================================================== a real partree simulate process


def _run_until_progress_then_signal(cmd, signum, cwd, timeout=180):
    """Start cmd, wait for its first progress line (10 %), send the signal, return (rc, out, err)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=cwd)
    watchdog = threading.Timer(timeout, p.kill)
    watchdog.start()
    try:
        err = []
        for line in p.stderr:
            err.append(line)
            if "(10%)" in line:
                p.send_signal(signum)
                break
        out, rest = p.communicate(timeout=timeout)
    finally:
        watchdog.cancel()
        if p.poll() is None:
            p.kill()
    return p.returncode, out, "".join(err) + rest


def _resume_argv(err, mpiexec=None):
    line = [s for s in err.splitlines() if "; resume with: " in s]
    assert line, err
    words = shlex.split(line[0].split("; resume with: ", 1)[1])
    if words[0] == "mpiexec":
        words = [mpiexec] + words[1:]
    k = words.index("partree")
    return words[:k] + [sys.executable, "-m", "partree"] + words[k + 1:]


SERIAL = ["autotree:nb=1000,bf=2", "--state", "random", "--t-end", "1", "--dt", "1e-3", "--save-every", "10"]


@pytest.fixture(scope="module")
def serial_reference():
    m = partree.resolve_model(SERIAL[0])
    rng = np.random.default_rng(0)
    q0, qd0 = m.random_configuration(rng, 0.5), m.random_velocity(rng, 0.5)
    return simulate(m, 1.0, 1e-3, save_every=10, q0=q0, qd0=qd0, progress=False, verbose=False)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_cli_signal_then_resume_bit_for_bit(tmp_path, signum, serial_reference):
    cmd = [sys.executable, "-m", "partree", "simulate", *SERIAL, "--out", "r.npz"]
    rc, out, err = _run_until_progress_then_signal(cmd, signum, tmp_path)
    assert rc == 128 + signum, out + err
    assert "\r" not in err                             # stderr is a pipe: plain progress lines
    name = signal.Signals(signum).name
    ck = tmp_path / "r.npz.ckpt"
    assert ck.exists()
    part = load_results(tmp_path / "r.npz")
    t_stop = part.summary["interrupted"]["t"]
    assert part.summary["interrupted"]["signal"] == name and 0 < t_stop < 1.0
    assert f"interrupted at t = {t_stop:.6g} s; resume with: partree simulate {' '.join(SERIAL)} --out r.npz --resume" \
        in err
    n = len(part.t)
    assert np.array_equal(part.q, serial_reference.q[:n])
    p = subprocess.run(_resume_argv(err) + ["--no-progress"], capture_output=True, text=True, env=_env(), cwd=tmp_path,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"resumed     from t = {t_stop:g}" in p.stdout
    res = load_results(tmp_path / "r.npz")
    for k in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(res, k), getattr(serial_reference, k)), k
    assert res.command[:2] == ["partree", "simulate"] and "--resume" in res.command
    assert not ck.exists()


MPI_RUN = ["autotree:nb=2000,bf=2", "--state", "random", "--t-end", "0.6", "--dt", "1e-3", "--save-every", "10",
           "--backend", "mpi"]


@pytest.fixture(scope="module")
def mpi_reference(tmp_path_factory):
    pytest.importorskip("mpi4py")
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    d = tmp_path_factory.mktemp("mpiref")
    p = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "partree", "simulate", *MPI_RUN, "--out", "ref.npz",
                        "--no-progress"], capture_output=True, text=True, env=_env(), cwd=d, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return mpiexec, load_results(d / "ref.npz")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_mpi_cli_signal_to_the_launcher_then_resume_bit_for_bit(tmp_path, signum, mpi_reference):
    """mpiexec -n 2 partree simulate --backend mpi: the signal goes to the launcher (hydra forwards
    it to the ranks); the ranks agree on the tick to stop at, rank 0 writes the checkpoint and the
    rows so far; the resumed job equals an uninterrupted one bit for bit."""
    mpiexec, ref = mpi_reference
    cmd = [mpiexec, "-n", "2", sys.executable, "-m", "partree", "simulate", *MPI_RUN, "--out", "r.npz"]
    rc, out, err = _run_until_progress_then_signal(cmd, signum, tmp_path)
    assert rc == 128 + signum, out + err
    part = load_results(tmp_path / "r.npz")
    t_stop = part.summary["interrupted"]["t"]
    assert 0 < t_stop < 0.6 and (tmp_path / "r.npz.ckpt").exists()
    assert err.count("; resume with: mpiexec -n 2 partree simulate") == 1, err
    p = subprocess.run(_resume_argv(err, mpiexec) + ["--no-progress"], capture_output=True, text=True, env=_env(),
                       cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"resumed     from t = {t_stop:g}" in p.stdout
    res = load_results(tmp_path / "r.npz")
    for k in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(res, k), getattr(ref, k)), k
