"""Nothing lost, nothing silent: the cases a new user and a hostile tester tried, run again through
the CLI and the API (sizes, options, output paths, bad arrays, tracebacks, closed pipes)."""
import subprocess
import sys
import time

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError


def cli(*args, cwd=None, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "partree", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def refused(p, *words):
    assert p.returncode == 2, f"{p.args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in p.stderr, (w, p.stderr)
    return p.stderr


# ------------------------------------------------------------------------------------- sizes
def test_a_model_too_large_is_refused_before_allocating():
    t = time.perf_counter()
    err = refused(cli("info", "autotree:nb=3e8"), "300,000,000 bodies", "GiB", "available", "--max-memory")
    assert time.perf_counter() - t < 60          # refused at once, not after growing to the limit
    assert "MemoryError" not in err
    refused(cli("info", "autotree:nb=1e10"), "10,000,000,000 bodies")
    refused(cli("--max-memory", "1M", "info", "chain:n=1000"), "1,000 bodies", "1.0 MiB")
    assert cli("--max-memory", "1G", "info", "chain:n=1000").returncode == 0
    with pytest.raises(PartreeInputError, match="bodies need about"):
        partree.resolve_model("binary:n=1e12")


def test_integer_parameters_refuse_non_integers():
    refused(cli("info", "autotree:nb=10.9"), "'nb' must be an integer, got 10.9")
    with pytest.raises(PartreeInputError, match="'n' must be an integer"):
        partree.resolve_model("chain:n=3.5")
    assert partree.resolve_model("autotree:nb=1e3,bf=1.5").n == 1000    # a fractional branching factor is fine


# ----------------------------------------------------------------------------------- options
@pytest.mark.parametrize("args, words", [
    (("dynamics", "chain:n=3", "--repeat", "-3"), ("--repeat", "must be >= 1")),
    (("dynamics", "chain:n=3", "--repeat", "0"), ("--repeat", "must be >= 1")),
    (("partition", "chain:n=30", "--parts", "0"), ("--parts", "must be >= 1")),
    (("partition", "chain:n=30", "--ranks", "2.5"), ("--ranks", "not an integer")),
    (("bench", "--model", "chain:n=30", "--repeat", "-1"), ("--repeat",)),
    (("info", "chain:n=3", "--joints", "-1"), ("--joints", "must be >= 0")),
])
def test_numeric_options_are_checked_by_name(args, words):
    refused(cli(*args), *words)


def test_negative_numbers_are_option_values(tmp_path):
    """``--x -1e-3`` reaches the option as a value (argparse alone would read it as an option) and
    is then judged on its merit."""
    p = cli("partition", "chain:n=30", "--parts", "2", "--path-weight", "-1e-3")
    refused(p, "--path-weight", "must be >= 0")
    assert cli("partition", "chain:n=30", "--parts", "2", "--path-weight", "1e-3").returncode == 0


# ------------------------------------------------------------------------------ output paths
def test_outputs_checked_before_any_work(tmp_path):
    refused(cli("dynamics", "chain:n=3", "--out", str(tmp_path / "nonexist" / "d.npz")), "does not exist")
    refused(cli("convert", "chain:n=3", str(tmp_path / "nonexist" / "m.npz")), "does not exist")
    model = tmp_path / "victim.npz"
    assert cli("convert", "chain:n=3", str(model)).returncode == 0
    before = model.read_bytes()
    refused(cli("convert", "chain:n=4", str(model)), "exists", "--force")
    refused(cli("dynamics", "chain:n=3", "--out", str(model)), "model file")
    refused(cli("dynamics", "chain:n=3", "--out", str(model), "--force"), "model file")
    assert model.read_bytes() == before
    assert cli("convert", "chain:n=4", str(model), "--force").returncode == 0       # a model may replace a model
    assert partree.load_model(model).n == 4
    refused(cli("convert", str(model), str(model), "--force"), "input model itself")
    out = tmp_path / "d.npz"
    assert cli("dynamics", "chain:n=3", "--out", str(out)).returncode == 0
    refused(cli("dynamics", "chain:n=3", "--out", str(out)), "exists")
    assert cli("dynamics", "chain:n=3", "--out", str(out), "--force").returncode == 0
    refused(cli("partition", "chain:n=30", "--parts", "2", "--out", str(out)), "exists")


def test_check_output_in_python(tmp_path):
    from partree.outputs import check_output, is_model_file

    partree.save_model(partree.resolve_model("chain:n=3"), tmp_path / "m.json")
    assert is_model_file(tmp_path / "m.json") and not is_model_file(tmp_path / "none.json")
    with pytest.raises(PartreeInputError, match="model file"):
        check_output(tmp_path / "m.json", overwrite=True, what="results file")
    (tmp_path / "r.txt").write_text("x")
    with pytest.raises(PartreeInputError, match="exists"):
        check_output(tmp_path / "r.txt")
    assert check_output(tmp_path / "r.txt", overwrite=True) == str(tmp_path / "r.txt")
    with pytest.raises(PartreeInputError, match="is a directory"):
        check_output(tmp_path)


# ------------------------------------------------------------------------------ API arguments
def test_zero_quaternion_names_its_joint():
    m = partree.resolve_model("chain:n=3,joint=spherical")
    q = m.neutral()
    q[m.q_slice("j1")] = 0.0
    z = np.zeros(m.nv)
    for call in (lambda: partree.aba(m, q, z, z), lambda: partree.rnea(m, q, z, z), lambda: partree.crba(m, q),
                 lambda: partree.forward_dynamics(m, q, z, z, parts=2)):
        with pytest.raises(PartreeInputError, match="joint 'j1'.*quaternion.*zero"):
            call()
    q2 = m.neutral() * 3.0                               # not unit: the kernels normalise it
    assert np.allclose(partree.aba(m, q2, z, z), partree.aba(m, m.neutral(), z, z))


def test_none_complex_and_non_numeric_arrays_refused():
    m = partree.resolve_model("chain:n=4")
    z = np.zeros(m.nv)
    with pytest.raises(PartreeInputError, match="tau is None"):
        partree.aba(m, z, z, None)
    with pytest.raises(PartreeInputError, match="q is complex"):
        partree.aba(m, z + 0j, z, z)
    with pytest.raises(PartreeInputError, match="qd is not an array of numbers"):
        partree.aba(m, z, ["a"] * m.nv, z)
    with pytest.raises(PartreeInputError, match="tau has shape"):
        partree.aba(m, z, z, np.zeros(m.nv + 1))


# ----------------------------------------------------------------------------------- manners
def test_user_errors_have_no_traceback_and_debug_shows_it():
    p = cli("info", "nosuchmodel:n=3")
    refused(p, "partree info: error:", "unknown model generator")
    p = cli("--debug", "info", "nosuchmodel:n=3")
    assert p.returncode != 0 and "Traceback" in p.stderr
    p = cli("info", "nosuchmodel:n=3", "--debug")          # anywhere on the command line
    assert "Traceback" in p.stderr


def test_a_closed_pipe_ends_quietly():
    """``partree info MODEL --joints K | head -1``: the reader goes away; no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "partree", "info", "autotree:nb=20000,bf=2", "--joints", "20000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    rc = proc.wait(timeout=120)
    assert first.startswith("model")
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert rc == 0


# -------------------------------------------------------------- the same rules in Python
def test_python_writers_refuse_existing_files(tmp_path):
    pytest.importorskip("matplotlib")
    from partree.plotting import plot_results
    from partree.plotting.tree import show_model

    res = partree.simulate("chain:n=3", t_end=0.02, dt=0.01, out=tmp_path / "r.npz", progress=False)
    with pytest.raises(PartreeInputError, match="exists"):
        partree.simulate("chain:n=3", t_end=0.02, dt=0.01, out=tmp_path / "r.npz", progress=False)
    plot_results(res, tmp_path / "figs")
    with pytest.raises(PartreeInputError, match="exist"):
        plot_results(res, tmp_path / "figs")
    assert plot_results(res, tmp_path / "figs", overwrite=True)
    show_model("chain:n=3", tmp_path / "m.png")
    with pytest.raises(PartreeInputError, match="exists"):
        show_model("chain:n=3", tmp_path / "m.png")


# ------------------------------------------------------------------- noise-aware benchmarks
def test_bench_reports_its_spread():
    import json

    p = cli("bench", "--model", "autotree:nb=500,bf=2", "--repeat", "3", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout.strip().splitlines()[-1])
    assert d["spread"] >= 0 and d["seconds_median"] >= d["seconds_per_eval"]
    p = cli("bench", "--model", "autotree:nb=500,bf=2", "--repeat", "3")
    assert "above the best" in p.stdout


def test_scaling_measures_points_until_they_settle(tmp_path):
    """Every point from fresh jobs, more while the two best differ; the CSV says how many and how
    far apart, and nothing is written outside --out."""
    import csv
    from pathlib import Path

    from partree.mpienv import find_mpiexec

    if find_mpiexec() is None:
        pytest.skip("no mpiexec")
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "study"
    before = set(p.name for p in root.iterdir())
    p = subprocess.run([sys.executable, str(root / "scripts" / "benchmarks" / "scaling.py"), "--out", str(out),
                        "--ranks", "1,2", "--families", "chain", "--strong-n", "2000", "--modes", "strong",
                        "--bytes-n", "none", "--repeat", "2", "--min-jobs", "2", "--max-jobs", "3", "--spread", "0.5",
                        "--no-plots"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "scaling.csv")))
    assert len(rows) == 2
    for r in rows:
        assert 2 <= int(r["jobs"]) <= 3 and float(r["job_spread"]) >= 0 and r["settled"] in ("True", "False")
    assert set(p.name for p in root.iterdir()) == before
