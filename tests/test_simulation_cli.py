"""partree simulate with no MODEL: the built-in job (seed 000's space robot, driven then coasting)
writes its results and figures, prints its summary, and refuses to overwrite them; the note
while numba compiles."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from partree.simulation import load_results


def _cli(args, cwd, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "partree", "simulate", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def test_builtin_job(tmp_path):
    pytest.importorskip("h5py")
    pytest.importorskip("matplotlib")
    p = _cli([], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "space_robot" in out and "built-in job: joint torques" in out
    assert "integrator  rk4  (5000 steps" in out and "t = 0 .. 10 s simulated" in out
    drift = float(re.search(r"energy drift while no torque acts \(t >= 4 s\): .* = (\S+)", out).group(1))
    assert drift < 1e-9
    assert re.search(r"joint force max \|f\| = \S+ N at joint 'L\d\d'", out)
    res = load_results(tmp_path / "space_robot.h5")
    assert res.model.name == "space_robot" and res.t[-1] == 10.0 and len(res.t) == 1001
    assert res.wrench_joints == list(res.model.joint_names) and res.command == ["partree", "simulate"]
    # it moves visibly: the shoulders turn more than 60 degrees, the base turns the other way
    assert np.degrees(res.joint("L11")[0][:, 0]).max() > 60
    qb = res.joint("base")[0]
    assert np.degrees(2 * np.arccos(np.clip(np.abs(qb[-1, 6]), 0, 1))) > 30
    figs = sorted(os.listdir(tmp_path / "space_robot_plots"))
    assert {"joints.png", "energy.png"} <= set(figs)
    assert "\r" not in p.stderr and "(100%)" in p.stderr         # not a terminal: plain progress lines
    # a second run keeps the results
    before = (tmp_path / "space_robot.h5").read_bytes()
    p = _cli(["--t-end", "1"], tmp_path)
    assert p.returncode == 2 and "space_robot.h5' exists" in p.stderr and "--force" in p.stderr, p.stderr
    assert (tmp_path / "space_robot.h5").read_bytes() == before
    p = _cli(["--t-end", "1", "--no-plot"], tmp_path)
    assert p.returncode == 2
    p = _cli(["--t-end", "1", "--force", "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert load_results(tmp_path / "space_robot.h5").t[-1] == 1.0 and p.stderr == ""


def test_compile_notice_only_when_numba_compiles():
    from numba import njit

    from partree.simulation.loop import CompileNotice

    @njit
    def fresh(x):
        return 2 * x

    said = []
    with CompileNotice(said.append) as n:
        fresh(1.0)                        # compiles: the note, once
        fresh(2)                          # another signature: no second note
        n.done()
    assert said[0].startswith("compiling kernels (once") and len(said) == 2 and said[1].startswith("kernels ready")
    said.clear()
    with CompileNotice(said.append) as n:
        fresh(3.0)                        # already compiled: silent
        n.done()
    assert said == []


def test_command_line_rebuilt_when_not_run_as_partree_simulate(tmp_path):
    from partree.cli import build_parser

    a = build_parser().parse_args(["simulate", "chain:n=3", "--t-end", "0.02", "--dt", "0.01", "--out",
                                   str(tmp_path / "r.npz"), "--no-progress", "--no-plot", "--wrench-joints", "j0"])
    assert a.func(a) == 0
    cmd = load_results(tmp_path / "r.npz").command
    assert cmd == ["partree", "simulate", "chain:n=3", "--t-end", "0.02", "--dt", "0.01", "--out",
                   str(tmp_path / "r.npz"), "--no-plot", "--wrench-joints", "j0", "--no-progress"]
