"""scripts/benchmarks/scaling_model.py: the scaling model's pure functions on synthetic
calibrations (properties that cannot fail silently; no timing assertions), and ``--quick`` runs."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partree.parallel import messages as msg

PATH = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks" / "scaling_model.py"


@pytest.fixture(scope="module")
def sm():
    spec = importlib.util.spec_from_file_location("partree_scaling_model", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kern(c_serial=300e-9):
    return {"c_serial": c_serial, "c_plain": 1.03 * c_serial, "c_path": 1.15 * c_serial, "c_part": 50e-6,
            "c_hh": 100e-9, "c_place": 3e-9}


@pytest.fixture
def cal():
    return {"path_weight": 0.12,
            "kernels": {"chain": {"1000000": _kern()}, "binary": {"1000000": _kern(320e-9)}},
            "root": {"coef": [40e-6, 15e-6, 50e-6, 80e-6, 0.0, 1e-7]},
            "network": {"alpha": 3e-6, "gap": 3e-6, "beta": 2e9},
            "shape": {"binary": {"rho": 2.6, "h_top": 0.5, "path_per_part": 2.0, "imbalance": 1.002}}}


def test_message_sizes_are_the_engines(sm):
    for H in range(6):
        d = sm.message_doubles(H)
        assert d["vel"] == msg.velocity_len(H) and d["red"] == msg.reduction_len(H)
        assert d["sol"] == msg.solution_len(H) and d["v"] == 6


@pytest.mark.parametrize("family", ["chain", "binary"])
@pytest.mark.parametrize("root", ["flat", "hier"])
def test_one_rank_is_the_calibrated_serial_cost(sm, cal, family, root):
    for N in (10**5, 10**6, 10**9):
        p = sm.predict(family, N, 1, cal, root)
        assert p["total"] == pytest.approx(N * cal["kernels"][family]["1000000"]["c_serial"], rel=1e-12)
        assert p["messages"] == 0 and p["root"] == 0


def test_flat_root_grows_linearly_in_parts(sm, cal):
    # a chain of parts: every part but the last has one handle
    roots = [sm.flat_root_seconds(sm.chain_parts(10**8, R)["H"], cal["root"]) for R in (64, 128, 256, 512)]
    steps = np.diff(roots)
    assert np.all(steps > 0)
    assert steps[1] == pytest.approx(2 * steps[0], rel=1e-9) and steps[2] == pytest.approx(2 * steps[1], rel=1e-9)
    # per part: c_root(1) = a + e + b + c + d
    assert steps[0] / 64 == pytest.approx(sum(cal["root"]["coef"][1:]), rel=1e-9)


def test_hierarchical_root_grows_logarithmically(sm, cal):
    vals = [sum(sm.hier_root_seconds(2**k, 2.0, cal["root"], cal["network"])) for k in range(1, 13)]
    steps = np.diff(vals)
    assert np.all(steps > 0)
    assert np.allclose(steps, steps[0], rtol=1e-9)           # the same cost per doubling of the ranks
    assert [sm.hier_levels(R) for R in (1, 2, 3, 4, 5, 4096)] == [0, 1, 2, 2, 3, 12]
    assert sm.hier_levels(64, fanin=4) == 3


def test_hierarchical_root_from_its_measured_node_cost(sm, cal):
    """With a measured time per plan node, the tree root costs (parts per rank + levels) nodes on
    the critical path, whatever c_root says."""
    cal["root"]["tree_node"] = 500e-6
    for R, rho in ((2, 1.0), (64, 2.5), (4096, 3.0)):
        root, msgs = sm.hier_root_seconds(R, rho, cal["root"], cal["network"])
        assert root == pytest.approx((rho + sm.hier_levels(R)) * 500e-6, rel=1e-12)
        assert msgs > 0
    assert sm.hier_root_seconds(1, 1.0, cal["root"], cal["network"]) == (0.0, 0.0)


def test_tree_root_items_time_the_built_tree_root(sm):
    """The hierarchical root's calibration items run the built tree root on synthetic chains and
    count the plan's nodes (P leaves and P - 1 merges at fan-in 2)."""
    rows, fns = sm.tree_root_items((4, 9))
    for r, f in zip(rows, fns):
        f()
        assert r["nodes"] == 2 * r["P"] - 1
    node = sm.fit_tree_root(rows, [1e-3 * r["nodes"] for r in rows])
    assert node == pytest.approx(1e-3)


def test_a_part_with_many_handles_costs_cubically(sm, cal):
    c = [sm.c_root(H, cal["root"]) for H in (100, 200, 400)]
    assert c[2] / c[1] > 7 and c[1] / c[0] > 6


@pytest.mark.parametrize("family", ["chain", "binary"])
@pytest.mark.parametrize("root", ["flat", "hier"])
def test_efficiency_at_most_one(sm, cal, family, root):
    for N in (10**6, 10**9):
        t1 = sm.predict(family, N, 1, cal, root)["total"]
        for R in sm.CURVE_R:
            p = sm.predict(family, N, R, cal, root)
            assert p["total"] >= p["compute"] > 0
            assert 0 < sm.efficiency(t1, p["total"], R) <= 1 + 1e-12


def test_chain_partition_shape(sm):
    parts = sm.chain_parts(10**6, 8, 0.12)
    assert parts["m"].sum() == pytest.approx(10**6)
    assert list(parts["H"]) == [1] * 7 + [0]
    # the partitioner's costs are equal: a path body weighs 1.12 plain bodies
    assert np.allclose(parts["m"][:-1] * 1.12, parts["m"][-1])
    assert np.all(parts["p"][:-1] == parts["m"][:-1]) and parts["p"][-1] == 0


def test_binary_shape_keeps_the_bodies_and_caps_handles_for_the_hierarchical_root(sm, cal):
    flat = sm.binary_parts(10**7, 256, cal["shape"]["binary"], "flat")
    hier = sm.binary_parts(10**7, 256, cal["shape"]["binary"], "hier")
    for parts in (flat, hier):
        assert parts["m"].sum() == pytest.approx(10**7, rel=5e-3)
        assert parts["owner"].max() == 255 and parts["owner"][0] == 0
        assert parts["H"].sum() <= len(parts["H"]) - 1          # a tree of parts: P - 1 attachments at most
    assert flat["H"].max() == 128 and hier["H"].max() <= 2


def test_kernel_clamps_keep_efficiency_meaningful(sm):
    kern = {"chain": {"1000": {"c_serial": 3.0, "c_plain_fit": 2.5, "c_path_fit": 2.0}},
            "binary": {"1000": {"c_serial": 3.0, "c_plain_fit": 3.5, "c_path_fit": float("nan")}}}
    sm.finish_kernels(kern)
    ch, bi = kern["chain"]["1000"], kern["binary"]["1000"]
    assert ch["c_plain"] == 3.0 and ch["c_path"] == 3.0
    assert bi["c_plain"] == 3.5 and bi["c_path"] == pytest.approx(3.5) and bi["c_path_from"].startswith("chain")


def test_collectives_and_stop_paying(sm, cal):
    net = cal["network"]
    assert sm.collective_seconds(1, 10**6, net) == 0
    assert sm.collective_seconds(2, 0, net) == pytest.approx(net["alpha"])
    assert sm.collective_seconds(10, 2e9, net) == pytest.approx(net["alpha"] + 8 * net["gap"] + 1.0)
    Rs = [1, 2, 4, 8, 16]
    assert sm.stop_paying(Rs, [16, 8, 4, 2, 1]) == (16, None, "pays to the largest R modelled")
    assert sm.stop_paying(Rs, [16, 8, 4, 5, 1])[:2] == (4, 8)
    assert sm.stop_paying(Rs, [16, 8, 6, 5, 4])[1:] == (8, "efficiency < 50%")


def test_curves_cover_the_grid(sm, cal):
    cv = sm.curves(cal, Ns=(10**6, 10**9), Rs=(1, 2, 4, 8))
    for fam in ("chain", "binary"):
        for kind in ("flat", "hierarchical"):
            for N in ("1000000", "1000000000"):
                row = cv["families"][fam][kind][N]
                assert len(row["seconds"]) == 4 and row["efficiency"][0] == pytest.approx(1.0)
                assert all(math.isfinite(x) for x in row["seconds"])


def test_quick_run_writes_its_files(tmp_path):
    out = tmp_path / "sm"
    proc = subprocess.run([sys.executable, str(PATH), "--quick", "--rounds", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "scaling_model.json").read_text())
    cal = doc["calibration"]
    assert cal["quick"] and set(cal["kernels"]) == {"chain", "binary"}
    for fam in ("chain", "binary"):
        k = next(iter(cal["kernels"][fam].values()))
        assert k["c_path"] >= k["c_plain"] >= k["c_serial"] > 0
        assert len(doc["curves"]["families"][fam]["flat"]) == 4
    assert (out / "scaling_model.png").stat().st_size > 1000
    assert "pays to R" in (out / "report.txt").read_text()


def test_help(sm):
    proc = subprocess.run([sys.executable, str(PATH), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--quick" in proc.stdout and "T(R) =" in proc.stdout
