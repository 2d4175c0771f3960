"""partree simulate with no MODEL: the built-in job (seed 000's space robot, driven then coasting)
writes its results and figures, prints its summary, and refuses to overwrite them; the note
while numba compiles."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import partree
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


def test_prescribe_runs_hybrid_dynamics_from_json(tmp_path):
    """``--prescribe``: the named joints follow their motions (sine, polynomial) from the start,
    the run equals ``simulate(..., prescribed=...)``; bad specifications are refused by name."""
    import json

    from partree.simulation.motions import PolynomialMotion, SineMotion, initial_state

    spec = {"j1": {"sine": {"amplitude": 0.3, "omega": 2.0, "phase": 0.1}}, "j3": {"polynomial": [0.2, 0.5, -0.25]}}
    (tmp_path / "motion.json").write_text(json.dumps(spec))
    p = _cli(["chain:n=4", "--prescribe", "motion.json", "--t-end", "0.2", "--dt", "1e-3", "--out", "h.npz",
              "--no-progress"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = partree.load_results(str(tmp_path / "h.npz"))
    assert np.abs(res.q[:, 1] - 0.3 * np.sin(2.0 * res.t + 0.1)).max() < 1e-10
    assert np.abs(res.q[:, 3] - (0.2 + 0.5 * res.t - 0.25 * res.t ** 2)).max() < 1e-10
    m = partree.resolve_model("chain:n=4")
    pres = {"j1": SineMotion(0.3, 2.0, 0.1), "j3": PolynomialMotion([0.2, 0.5, -0.25])}
    q0, qd0 = initial_state(m, pres, m.neutral(), np.zeros(m.nv))
    ref = partree.simulate(m, 0.2, 1e-3, q0=q0, qd0=qd0, prescribed=pres, progress=False)
    assert np.abs(ref.q - res.q).max() < 1e-12
    # the motions' derivatives are the derivatives of q
    for f in pres.values():
        h = 1e-5
        q_m, q_0, q_p = f(0.3 - h)[0], f(0.3), f(0.3 + h)[0]
        assert abs((q_p - q_m) / (2 * h) - q_0[1]) < 1e-8 and abs((q_p - 2 * q_0[0] + q_m) / h ** 2 - q_0[2]) < 1e-4
    for bad, msg in [('{"nope": {"sine": {"amplitude": 1, "omega": 1}}}', "no joint 'nope'"),
                     ('{"j1": {"cosine": {}}}', "unknown prescribed motion"),
                     ('{"j1": {"sine": {"amplitude": 1}}}', "needs amplitude and omega"),
                     ('not json', "not a JSON object")]:
        p = _cli(["chain:n=4", "--prescribe", bad, "--t-end", "0.01", "--no-progress"], cwd=tmp_path)
        assert p.returncode != 0 and msg in p.stderr, p.stderr
    p = _cli(["chain:n=3,joint=spherical", "--prescribe", '{"j1": {"polynomial": [0]}}', "--t-end", "0.01",
              "--no-progress"], cwd=tmp_path)
    assert p.returncode != 0 and "one-DOF" in p.stderr
