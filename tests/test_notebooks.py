"""The Dask notebooks in scripts/notebooks/ run from top to bottom and show what they say.

Each notebook is executed with nbclient at its small size (``PARTREE_NB_SCALE=small``, read in
its ``parameters`` cell) in a temporary directory, on a kernel that runs this interpreter.  The
checks read the printed results: the engine agrees with the serial references, the simulated
tree moves, the sweep covers every size and worker count, and the figures are there.
"""
import json
import os
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")
pytest.importorskip("distributed")

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "scripts" / "notebooks"
NAMES = ("dask_quickstart.ipynb", "dask_scaling.ipynb")
CELL_TIMEOUT = 900      # seconds per cell: a fresh checkout compiles the kernels on first use (minutes)

REL = re.compile(r"max relative difference to partree\.(aba|cfa) = ([0-9.eE+-]+)")


@pytest.fixture
def run_notebook(tmp_path, monkeypatch):
    """Execute a notebook of scripts/notebooks/ small, in tmp_path; returns (notebook, text)
    with text every stream and text/plain output joined."""
    # a python3 kernelspec first on JUPYTER_PATH that starts this interpreter (the one with
    # partree installed), whatever kernelspecs the machine has elsewhere
    kdir = tmp_path / "jupyter" / "kernels" / "python3"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (partree tests)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PARTREE_NB_SCALE", "small")
    work = tmp_path / "run"
    work.mkdir()

    def run(name):
        before = sorted(os.listdir(REPO)), sorted(os.listdir(NOTEBOOKS))
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                resources={"metadata": {"path": str(work)}}).execute()
        assert (sorted(os.listdir(REPO)), sorted(os.listdir(NOTEBOOKS))) == before, \
            "the notebook left files in the repository"
        return nb, "\n".join(_texts(nb))

    return run


def _texts(nb):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                yield out.text
            elif out.output_type in ("execute_result", "display_data"):
                yield out.get("data", {}).get("text/plain", "")


def _figures(nb):
    return sum("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))


def _number(text, pattern):
    m = re.search(pattern, text)
    assert m, f"no output matches {pattern!r}"
    return float(m.group(1))


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs_and_with_a_parameters_cell(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), "the first code cell must be tagged 'parameters'"
    assert "PARTREE_NB_SCALE" in code[0].source
    assert all(not c.outputs and c.execution_count is None for c in code), "clear the outputs before committing"


def test_quickstart(run_notebook):
    nb, text = run_notebook("dask_quickstart.ipynb")
    rel = REL.findall(text)
    # forward dynamics, the three parts of the constraint forces, the resident state twice
    assert [w for w, _ in rel].count("aba") >= 2 and [w for w, _ in rel].count("cfa") >= 4, text
    assert all(float(x) < 1e-10 for _, x in rel), rel
    assert re.search(r"\d+ bodies in \d+ parts on 2 workers", text)
    assert _number(text, r"Dask and the serial trajectory: ([0-9.eE+-]+) rad") < 1e-9
    assert _number(text, r"largest change of a joint angle during the run: ([0-9.eE+-]+) rad") > 0.05
    assert _number(text, r"relative energy drift: ([0-9.eE+-]+)") < 1e-4
    assert _figures(nb) >= 2


def test_scaling(run_notebook):
    nb, text = run_notebook("dask_scaling.ipynb")
    rel = REL.findall(text)
    assert len(rel) == 4 and all(float(x) < 1e-10 for _, x in rel), rel
    # the table: one row per size and worker count, positive times and speed-ups
    rows = re.findall(r"^\s*([\d,]+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$", text, re.M)
    assert {(int(n.replace(",", "")), int(w)) for n, w, *_ in rows} == {(2_000, 1), (20_000, 1), (2_000, 2),
                                                                       (20_000, 2)}, text
    assert all(float(x) > 0 for r in rows for x in r[3:]), rows
    assert _figures(nb) >= 1
