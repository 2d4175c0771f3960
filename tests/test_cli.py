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


def test_partition_report(tmp_path):
    """`partree partition`: the engine's partition of a model, readable and as JSON, units kept."""
    import json

    from partree.models import auto_tree
    from partree.parallel.partition import make_partition

    r = run("partition", "autotree:nb=4095,bf=2", "--ranks", "2")
    assert r.returncode == 0, r.stderr
    assert "balanced over 2 ranks" in r.stdout and "ranks max/mean load" in r.stdout and "boundary joints" in r.stdout
    out = tmp_path / "parts.json"
    r = run("partition", "autotree:nb=4095,bf=2", "--parts", "5", "--json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d == json.loads(out.read_text())
    pt = make_partition(auto_tree(4095, bf=2), 5)
    assert d["nparts"] == 5 and [p["root_body"] for p in d["parts"]] == pt.roots.tolist()
    assert [p["bodies"] for p in d["parts"]] == pt.sizes.tolist() and sum(d["sizes"]) == 4095
    assert d["depth"] == pt.depth and d["imbalance"] == pytest.approx(pt.imbalance)
    for p in d["parts"][1:]:          # a part's own root joint is its first boundary joint
        assert p["boundary_joints"][0] == p["root_joint"] and p["parent_part"] < p["part"]
    # a scissor mast's units are kept whole: every part root is the first body of a unit
    r = run("partition", "scissor:units=30", "--parts", "4", "--json")
    assert r.returncode == 0, r.stderr
    from partree.specs import resolve_model

    m = resolve_model("scissor:units=30")
    for p in json.loads(r.stdout)["parts"]:
        b = p["root_body"]
        assert m.parent[b] < 0 or m.units[m.parent[b]] != m.units[b]
    r = run("partition", "autotree:nb=10", "--parts", "3", "--ranks", "2")
    assert r.returncode == 2 and "--parts P or --ranks R" in r.stderr


def test_inertia_option_on_model_files(tmp_path, capsys):
    """--inertia picks the loader's policy: a URDF with a triangle-inequality violation loads
    with one warning line (warn, the default), is refused naming the body (strict), and is
    balanced (fix); a spec string refuses the option."""
    from partree.cli import main

    urdf = tmp_path / "flat.urdf"
    urdf.write_text("""<robot name="flat"><link name="base"/>
      <link name="plate"><inertial><mass value="1"/><inertia ixx="1e-6" iyy="0.5" izz="1.0" ixy="0" ixz="0" iyz="0"/>
      </inertial></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="plate"/><axis xyz="0 0 1"/></joint></robot>""")
    assert main(["info", str(urdf)]) == 0
    err = capsys.readouterr().err
    assert "partree info: warning:" in err and "plate" in err and "triangle inequality" in err
    assert main(["info", str(urdf), "--inertia", "strict"]) == 2
    err = capsys.readouterr().err
    assert "partree info: error:" in err and "plate" in err
    assert main(["info", str(urdf), "--inertia", "fix"]) == 0
    assert "balanced" in capsys.readouterr().err
    assert main(["info", "chain:n=3", "--inertia", "fix"]) == 2
    assert "applies to a model file" in capsys.readouterr().err


def test_info_lists_the_loops(tmp_path, capsys):
    from partree.cli import main

    xml = tmp_path / "four_bar.xml"
    xml.write_text("""<mujoco model="four-bar"><compiler angle="radian"/><worldbody>
      <body name="crank"><joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 1" size="0.05"/>
        <body name="coupler" pos="0 0 1"><joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 2 0 0.5" size="0.05"/>
        </body></body>
      <body name="rocker" pos="2 0 0"><joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 1.5" size="0.05"/>
      </body></worldbody>
      <equality><connect name="tip" body1="coupler" body2="rocker" anchor="2 0 0.5"/><weld body1="rocker"/></equality>
    </mujoco>""")
    assert main(["info", str(xml)]) == 0
    out = capsys.readouterr().out
    assert "loops      2 (1 spherical, 1 weld), 9 constraint rows" in out
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("  ")]
    assert lines[0] == ["tip", "spherical", "coupler", "(1)", "->", "rocker", "(2)", "rows", "[0:3]"]
    assert lines[1] == ["weld1", "weld", "rocker", "(2)", "->", "world", "rows", "[3:9]"]
    assert main(["info", str(xml), "--loops", "1"]) == 0
    assert "1 more (--loops K lists more)" in capsys.readouterr().out
    assert main(["info", "chain:n=3"]) == 0
    assert "loops" not in capsys.readouterr().out
