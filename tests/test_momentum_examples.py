"""scripts/examples/momentum_seed001.py in quick mode: Cardan chains in both forms (energy and
momentum kept by the sixth-order Gauss method, in either form), and the docking through
partree.apply_impulse against its own physics (the latch's velocities equal, the momentum kept,
Carnot's energy loss)."""
import importlib.util
import json
import pathlib

import numpy as np
import pytest

PATH = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "examples" / "momentum_seed001.py"


def _module():
    spec = importlib.util.spec_from_file_location("momentum_seed001", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed001")
    files, numbers = _module().main(["--quick", "--json", str(out / "numbers.json")])
    return out, files, numbers


def test_numbers_are_written(quick):
    out, files, numbers = quick
    assert files == [str(out / "numbers.json")]
    saved = json.loads((out / "numbers.json").read_text())
    assert saved["n"] == 3 and saved["steps"] == 200
    assert set(saved["conservation"]) == {"hanging", "floating"}


def test_gauss6_keeps_energy_and_momentum_in_both_forms(quick):
    cons = quick[2]["conservation"]
    for label in ("hanging", "floating"):
        rows = cons[label]
        assert set(rows) == {"momentum/gauss6", "velocity/gauss6", "momentum/rk4", "velocity/rk4"}
        for form in ("momentum", "velocity"):
            g = rows[f"{form}/gauss6"]
            assert g["max_rel_energy_error"] < 1e-9, (label, form)
            assert g["max_rel_energy_error"] < rows[f"{form}/rk4"]["max_rel_energy_error"], (label, form)
            assert g["iterations_per_step"] >= 1
            if label == "floating":
                assert g["max_rel_momentum_change"] < 1e-10
    assert cons["hanging"]["momentum/gauss6"]["t"][-1] == pytest.approx(2.0)


def test_docking_impulse(quick):
    d = quick[2]["docking"]
    assert d["impulse_norm_N_s"] > 0.05
    assert d["relative_velocity_before_m_s"] == pytest.approx(0.3)
    assert d["relative_velocity_after_m_s"] < 1e-12
    assert d["momentum_change_through_blow"] < 1e-12
    assert d["joined_momentum_vs_before"] < 1e-12
    assert d["energy_lost_J"] > 0
    assert d["energy_lost_J"] == pytest.approx(d["carnot_loss_J"], rel=1e-9)
    assert d["after_max_rel_energy_error"] < 1e-9 and d["after_max_rel_momentum_change"] < 1e-9
    assert np.all(np.diff(d["t_after"]) > 0) and d["t_after"][0] == pytest.approx(d["t_before"][-1])


def test_figure(tmp_path):
    pytest.importorskip("matplotlib")
    files, _ = _module().main(["--quick", "--out", str(tmp_path)])
    assert [pathlib.Path(f).name for f in files] == ["seed001_momentum.png"]
    with open(files[0], "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
