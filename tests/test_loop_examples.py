"""scripts/examples/loops_seed003.py in quick mode: seed 003's closed-loop examples against their
references (the planar four-bar's exact reduction, the spatial four-bar's eq. 33, Andrews'
squeezing mechanism's published initial accelerations, multipliers and solution at 0.03 s)."""
import importlib.util
import pathlib

import numpy as np
import pytest

pytest.importorskip("matplotlib")

PATH = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "examples" / "loops_seed003.py"


def _module():
    spec = importlib.util.spec_from_file_location("loops_seed003", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed003")
    files, numbers = _module().main(["--quick", "--out", str(out)])
    return files, numbers


def test_figures_are_written(quick):
    files, _ = quick
    names = sorted(pathlib.Path(f).name for f in files)
    assert names == ["seed003_andrews.png", "seed003_four_bar.png", "seed003_spatial_four_bar.png"]
    for f in files:
        with open(f, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_planar_four_bar_through_singular_positions(quick):
    n = quick[1]["four-bar"]
    assert n["passages"] == 3
    err, viol = n["kinetic-energy metric (default)"]
    assert viol <= 1e-12
    assert err <= 2 * n["rk4_floor"] + 1e-12          # the integrator's own error, no more
    assert n["kinetic-energy metric + eq. 31 band 1e-2"][0] <= 2 * n["rk4_floor"] + 1e-12
    assert n["Euclidean metric"][0] > 30 * err           # what the singular passages did to Euclidean corrections


def test_spatial_four_bar_against_eq_33(quick):
    n = quick[1]["spatial"]
    assert n["rank"] == 4 and n["passages"] == 2
    assert n["err"] <= 1e-11
    assert n["violation"] <= 1e-12
    assert n["force_rel_err"] <= 1e-6


def test_andrews_against_the_test_set(quick):
    n = quick[1]["andrews"]
    assert n["rank"] == 6
    assert n["qdd0_rel_err"] <= 1e-12                  # beta'', theta'' at t = 0
    assert n["lambda0_rel_err"] <= 1e-12               # the multipliers at t = 0
    assert n["t_end"] == pytest.approx(0.03)
    assert n["q_err"] <= 1e-8                          # the seven angles at t = 0.03 s
    assert n["qd_rel_err"] <= 1e-7
    assert n["violation"] <= 1e-12


def test_andrews_model_is_the_test_sets():
    """The mass matrix and the constraint rows of the ModelBuilder model are the test set's
    (Hairer & Wanner's equations) at a random configuration."""
    mod = _module()
    p = mod.ANDREWS
    m = mod.andrews_model()
    rng = np.random.default_rng(0)
    y = rng.uniform(-np.pi, np.pi, 7)                  # the test set's order
    be, th, ga, ph, de, om, ep = y
    M = np.zeros((7, 7))
    M[0, 0] = p["m1"] * p["ra"] ** 2 + p["m2"] * (p["rr"] ** 2 - 2 * p["da"] * p["rr"] * np.cos(th) + p["da"] ** 2) \
        + p["i1"] + p["i2"]
    M[1, 0] = M[0, 1] = p["m2"] * (p["da"] ** 2 - p["da"] * p["rr"] * np.cos(th)) + p["i2"]
    M[1, 1] = p["m2"] * p["da"] ** 2 + p["i2"]
    M[2, 2] = p["m3"] * (p["sa"] ** 2 + p["sb"] ** 2) + p["i3"]
    k4 = p["e"] - p["ea"]
    M[3, 3] = p["m4"] * k4 ** 2 + p["i4"]
    M[4, 3] = M[3, 4] = p["m4"] * (k4 ** 2 + p["zt"] * k4 * np.sin(ph)) + p["i4"]
    M[4, 4] = p["m4"] * (p["zt"] ** 2 + 2 * p["zt"] * k4 * np.sin(ph) + k4 ** 2) + p["m5"] * (p["ta"] ** 2 + p["tb"] ** 2) \
        + p["i4"] + p["i5"]
    k6 = p["zf"] - p["fa"]
    M[5, 5] = p["m6"] * k6 ** 2 + p["i6"]
    M[6, 5] = M[5, 6] = p["m6"] * (k6 ** 2 - p["u"] * k6 * np.sin(om)) + p["i6"]
    M[6, 6] = p["m6"] * (k6 ** 2 - 2 * p["u"] * k6 * np.sin(om) + p["u"] ** 2) + p["m7"] * (p["ua"] ** 2 + p["ub"] ** 2) \
        + p["i6"] + p["i7"]
    import partree
    order = mod.ANDREWS_ORDER
    q = y[order]
    assert np.allclose(partree.crba(m, q), M[np.ix_(order, order)], rtol=1e-12, atol=1e-18)
    # point E along each path (the test set's g): K2's, K3's, K4's and K6's
    E2 = np.array([p["rr"] * np.cos(be) - p["d"] * np.cos(be + th), p["rr"] * np.sin(be) - p["d"] * np.sin(be + th)])
    E3 = np.array([p["xb"] + p["ss"] * np.sin(ga), p["yb"] - p["ss"] * np.cos(ga)])
    E4 = np.array([p["xa"] + p["e"] * np.sin(ph + de) + p["zt"] * np.cos(de),
                   p["ya"] - p["e"] * np.cos(ph + de) + p["zt"] * np.sin(de)])
    E6 = np.array([p["xa"] + p["zf"] * np.cos(om + ep) + p["u"] * np.sin(ep),
                   p["ya"] + p["zf"] * np.sin(om + ep) - p["u"] * np.cos(ep)])
    lc = partree.loop_constraints(m, q)
    a = be + th                                        # frame A of every loop turns with K2
    R = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    for name, Eb in (("E3", E3), ("E4", E4), ("E6", E6)):
        assert np.allclose(R @ lc.phi[lc.rows[name]][2:4], Eb - E2, atol=1e-15), name   # rows [w; v]
