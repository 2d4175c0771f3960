"""partree.plotting: figures from a results file."""
import numpy as np

import partree
from partree.plotting import plot_results
from partree.simulation import simulate


def test_plot_writes_pngs(tmp_path):
    m = partree.models.space_robot()
    rng = np.random.default_rng(0)
    out = tmp_path / "sr.h5"
    simulate(m, 0.2, 0.01, qd0=m.random_velocity(rng, 0.3), out=out, wrench_joints=["L11", "L21"],
             progress=False, verbose=False)
    files = plot_results(out, tmp_path / "figs", joints=["base", "L11", "L12"])
    names = sorted(p.split("/")[-1] for p in files)
    assert names == ["configuration.png", "energy.png", "joints.png", "wrenches.png"]
    for f in files:
        with open(f, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    pdfs = plot_results(out, tmp_path / "pdf", fmt="pdf", times=[0.0, 0.2])
    assert all(p.endswith(".pdf") for p in pdfs)


def test_seed_examples_quick(tmp_path):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "examples" / "seed_examples.py"
    spec = importlib.util.spec_from_file_location("seed_examples", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    files = mod.main(["--quick", "--only", "002", "--out", str(tmp_path)])
    assert any(f.endswith("seed002_three_arm.png") for f in files)
