"""scripts/examples/scissor_seed004.py on a short span (0.2 s): seed 004's 3-level scissor mast
deployed by the forces at A and C, against the one-DOF Lagrange model and the dense KKT solve;
the reaction forces against the momentum balance; the engine with a part per unit and the units'
equivalents (partree.subsystem_equivalent) at one instant."""
import importlib.util
import json
import pathlib

import numpy as np
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("scipy")

PATH = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "examples" / "scissor_seed004.py"


def _module():
    spec = importlib.util.spec_from_file_location("scissor_seed004", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed004")
    files, numbers = _module().main(["--out", str(out), "--t-end", "0.2", "--instant", "0.15"])
    return out, files, numbers


def test_figures_and_numbers_are_written(short):
    out, files, numbers = short
    names = sorted(pathlib.Path(f).name for f in files)
    assert names == ["scissor_seed004.json", "scissor_seed004_angle.png", "scissor_seed004_deployment.png",
                     "scissor_seed004_forces.png"]
    for f in files:
        if f.endswith(".png"):
            with open(f, "rb") as fh:
                assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out / "scissor_seed004.json").read_text())
    assert saved["model"]["nv"] == 7 and saved["model"]["loop_rows"] == 6 and saved["model"]["rank"] == 6
    assert saved["run"]["t_end_s"] == pytest.approx(0.2)
    assert len(saved["series"]["t"]) == saved["run"]["samples"] == 41


def test_theta_agrees_with_the_lagrange_model(short):
    n = short[2]
    ag = n["agreement"]
    assert ag["theta_rad"] < 1e-9
    assert ag["theta_dot_rad_s"] < 1e-9
    assert ag["theta_ddot_relative"] < 1e-9
    assert ag["height_m"] < 1e-9
    assert ag["qdd_vs_dense_kkt"] < 1e-10
    assert n["theta_vs_joint_max_diff_rad"] < 1e-12
    assert n["max_violation"] < 1e-10
    assert n["drive"]["F_hold_N"] == pytest.approx(n["drive"]["F_hold_lagrange_N"], rel=1e-12)
    th = np.asarray(n["series"]["theta"])
    assert th[0] == pytest.approx(np.pi / 6) and np.all(np.diff(th[1:]) > 0)


def test_reactions_balance_the_mechanism(short):
    n = short[2]
    assert n["momentum_balance_relative"] < 1e-10
    assert n["drive_as_joint_forces_vs_point_forces_qdd"] < 1e-10
    assert all(np.isfinite(v) and v > 0 for v in n["max_force_N"].values())


def test_subsystems_at_one_instant(short):
    sub = short[2]["subsystems"]
    assert sub["t_s"] == pytest.approx(0.15)
    assert sub["parts_are_units"]
    assert sub["engine_qdd_vs_constrained_dynamics"] < 1e-10 * max(1.0, sub["qdd_scale"])
    assert sub["engine_loop_force_vs_constrained_dynamics"] < 1e-9
    assert sub["closed_unit_refused"] and "pin_B1_B2" in sub["closed_unit_refused"]
    assert sub["tree_with_pin_forces_qdd_vs_closed"] < 1e-10
    eq = sub["equivalents"]
    assert [e["units"] for e in eq] == [[2], [1, 2], [0, 1, 2]]
    for e in eq:
        M = np.array(e["M"])
        assert np.array_equal(M, M.T) and np.linalg.eigvalsh(M).min() > -1e-12
        assert e["difference"] < 1e-10 * max(1.0, e["scale"])
