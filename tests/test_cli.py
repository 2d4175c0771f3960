"""The partree command line, run as a user would (a subprocess)."""
import subprocess
import sys

import numpy as np
import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "partree", *args], capture_output=True, text=True, timeout=300)


def test_help_reads_well():
    r = run("--help")
    assert r.returncode == 0
    for word in ("info", "dynamics", "convert", "spec string"):
        assert word in r.stdout
    r = run("dynamics", "--help")
    assert r.returncode == 0 and "--repeat" in r.stdout


def test_info_and_dynamics(tmp_path):
    r = run("info", "autotree:nb=1000,bf=2")
    assert r.returncode == 0, r.stderr
    assert "bodies     1000" in r.stdout and "B per body" in r.stdout
    out = tmp_path / "res.npz"
    r = run("dynamics", "autotree:nb=2000,bf=1", "--repeat", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "backward error" in r.stdout
    d = np.load(out)
    assert d["qdd"].shape == (2000,) and d["joint_wrench"].shape == (2000, 6)
    import partree
    m = partree.resolve_model("autotree:nb=2000,bf=1")
    assert np.allclose(partree.aba(m, d["q"], d["qd"], d["tau"]), d["qdd"], rtol=1e-12, atol=1e-9)


def test_convert_roundtrip(tmp_path):
    out = tmp_path / "m.npz"
    r = run("convert", "random:n=50,seed=3", str(out))
    assert r.returncode == 0, r.stderr
    r = run("info", str(out), "--joints", "3")
    assert r.returncode == 0 and "j0" in r.stdout


@pytest.mark.parametrize("args,msg", [
    (("info", "nosuch:nb=3"), "unknown model generator"),
    (("info", "autotree:nb=10,wrong=1"), "wrong"),
    (("dynamics", "missing_file.urdf"), "missing_file.urdf"),
])
def test_clear_errors(args, msg):
    r = run(*args)
    assert r.returncode == 2
    assert msg in r.stderr and "Traceback" not in r.stderr
