"""`partree bench` (partree.cli.bench): serial in-process, MPI under `mpiexec -n 2`, Dask."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from partree.cli.bench import add_parser as add_bench_parser, main, max_rss_bytes

MPIEXEC = next((str(p) for p in (Path(sys.executable).parent / "mpiexec", Path("/work/venv/bin/mpiexec"))
                if p.exists()), None)
KEYS = ("seconds_per_eval", "residual", "bytes_per_eval", "max_rss_bytes", "backend", "parts", "ranks", "n")


def _json(out):
    lines = [s for s in out.splitlines() if s.startswith("{")]
    assert len(lines) == 1, out
    d = json.loads(lines[0])
    for k in KEYS:
        assert k in d, k
    return d


def test_serial_json_and_text(capsys):
    assert main(["--model", "autotree:nb=3000,bf=1.5", "--parts", "4", "--repeat", "2", "--json"]) == 0
    d = _json(capsys.readouterr().out)
    assert d["backend"] == "serial" and d["parts"] == 4 and d["ranks"] == 1 and d["n"] == 3000
    assert d["residual_kind"] == "aba" and d["residual"] < 1e-10
    assert d["seconds_per_eval"] > 0 and d["bytes_per_eval"] == 0 and d["boundary_payload_bytes"] > 0
    assert d["max_rss_bytes"] >= 10 * 2**20
    assert main(["--model", "autotree:nb=500,bf=1", "--parts", "2", "--repeat", "1", "--residual", "rnea",
                 "--compare-aba"]) == 0
    out = capsys.readouterr().out
    assert "per evaluation" in out and "RNEA" in out and "max RSS" in out and "speedup" in out


def test_bad_arguments(capsys):
    assert main(["--model", "autotree:nb=10,bf=1", "--parts", "11"]) == 2
    assert "parts=11" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--model", "autotree:nb=10", "--backend", "gpu"])


def test_parser_hook():
    import argparse

    p = argparse.ArgumentParser(prog="partree")
    sub = p.add_subparsers(dest="command")
    add_bench_parser(sub)
    a = p.parse_args(["bench", "--model", "autotree:nb=10", "--backend", "mpi", "--parts", "3", "--json"])
    assert a.command == "bench" and a.backend == "mpi" and a.parts == 3 and a.json and callable(a.func)
    assert max_rss_bytes() > 0


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
def test_mpi_two_ranks():
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "partree.cli.bench", "--model",
                        "autotree:nb=4000,bf=2", "--repeat", "2", "--json"],
                       capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    d = _json(p.stdout)                       # only rank 0 prints
    # parts balanced over the ranks: at least one per rank, more where equal parts cannot even them out
    assert d["backend"] == "mpi" and d["ranks"] == 2 and 2 <= d["parts"] <= 6
    assert d["residual"] < 1e-10
    assert 0 < d["bytes_per_eval"] < 10_000
    assert len(d["rss_bytes_per_rank"]) == 2 and d["max_rss_bytes"] == max(d["rss_bytes_per_rank"])
    # every timed evaluation's phases, rank by rank: own work + wait = the rank's total
    reps = d["phase_seconds_per_repeat"]
    assert len(reps) == 2 and all(len(r) == 2 for r in reps)
    for r in reps:
        for ph in r:
            own = sum(v for k, v in ph.items() if k.startswith("local_") or k == "root_solve")
            assert ph["wait"] >= 0 and own + ph["wait"] == pytest.approx(ph["total"], abs=5e-6)
    assert d["wait"] == "yield"
    # MPI's own busy wait instead: the same evaluation
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "partree.cli.bench", "--model",
                        "autotree:nb=4000,bf=2", "--repeat", "2", "--wait", "spin", "--json"],
                       capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    d = _json(p.stdout)
    assert d["wait"] == "spin" and d["residual"] < 1e-10


def test_dask_local_cluster(capsys):
    pytest.importorskip("distributed")
    assert main(["--model", "autotree:nb=2000,bf=1.3", "--backend", "dask", "--workers", "2", "--parts", "3",
                 "--repeat", "2", "--json"]) == 0
    d = _json(capsys.readouterr().out)
    assert d["backend"] == "dask" and d["ranks"] == 2 and d["parts"] == 3 and d["channel"] == "socket"
    assert d["residual"] < 1e-10 and 0 < d["bytes_per_eval"] < 20_000
    assert len(d["rss_bytes_per_rank"]) == 3            # client + 2 workers
    # the workers' modelled loads (3 parts on 2 workers), not the parts' weights
    from partree.parallel.partition import make_partition
    from partree.specs import resolve_model

    loads = make_partition(resolve_model("autotree:nb=2000,bf=1.3"), 3).rank_loads(2)
    assert d["rank_imbalance"] == pytest.approx(loads.max() / loads.mean())


@pytest.mark.parametrize("backend", ["serial", "mpi", "dask"])
def test_constraint_forces_quantity(backend, capsys):
    """--quantity constraint-forces times partree.constraint_forces and checks it against serial CFA
    (and, with --residual rnea, against RNEA's wrenches of the computed motion)."""
    args = ["--model", "random:n=300,seed=2", "--quantity", "constraint-forces", "--repeat", "2", "--json",
            "--compare-aba"]
    if backend == "mpi":
        if MPIEXEC is None:
            pytest.skip("no mpiexec")
        env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
        p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "partree.cli.bench", *args],
                           capture_output=True, text=True, timeout=180, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        d = _json(p.stdout)
        assert d["gather_bytes_per_eval"] > 0 and d["seconds_per_eval_gathered"] > 0
    else:
        if backend == "dask":
            pytest.importorskip("distributed")
        assert main(args + ["--backend", backend, "--parts", "3"]) == 0
        d = _json(capsys.readouterr().out)
    assert d["backend"] == backend and d["quantity"] == "constraint-forces"
    assert d["residual_kind"] == "cfa" and d["residual"] < 1e-10
    assert d["cfa_seconds"] > 0 and d["speedup_vs_cfa"] > 0 and "aba_seconds" not in d
    if backend == "serial":
        assert main(args[:-2] + ["--residual", "rnea", "--parts", "4"]) == 0
        out = capsys.readouterr().out
        assert "backward error through RNEA" in out and "serial" in out


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
def test_scaling_script_small(tmp_path):
    """scripts/benchmarks/scaling.py end to end on a tiny model: CSVs, plots, and N-independent bytes."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([sys.executable, str(root / "scripts" / "benchmarks" / "scaling.py"), "--out", str(tmp_path), "--quick",
                        "--families", "chain", "--max-ranks", "2", "--strong-n", "2000", "--weak-n", "1000",
                        "--repeat", "1", "--bytes-n", "1000,4000", "--mpiexec", MPIEXEC],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    for f in ("scaling.csv", "bytes.csv", "strong.png", "weak.png", "bytes.png", "summary.json"):
        assert (tmp_path / f).stat().st_size > 0, f
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["bytes_independent_of_n"] == {"chain": True}
    assert summary["default_partition_parts_bounded"] == {"chain": True}


def test_rnea_backward_error_is_scaled_by_the_terms_that_cancel(capsys):
    """On a long chain |RNEA(q, qd, 0)| is many orders above |tau|: measured against |tau| alone
    the residual of an exact solution looks like 1e-4; against |tau| + |h| it is rounding."""
    import numpy as np

    import partree
    from partree.cli.bench import _state, residual

    m = partree.resolve_model("autotree:nb=20000,bf=1")
    q, qd, tau = _state(m, 0)
    qdd = partree.aba(m, q, qd, tau)
    kind, res = residual(m, q, qd, tau, qdd, "rnea")
    assert kind == "rnea" and res < 1e-13
    # a wrong answer is still caught: one joint's acceleration off by a percent of the largest
    bad = qdd.copy()
    bad[m.nv // 2] += 0.01 * np.abs(qdd).max()
    assert residual(m, q, qd, tau, bad, "rnea")[1] > 1e-6
    assert main(["--model", "autotree:nb=3000,bf=1", "--parts", "3", "--repeat", "1", "--residual", "rnea",
                 "--json"]) == 0
    d = _json(capsys.readouterr().out)
    # the engine's sums run in another order, part by part (and move with where the parts are
    # cut): rounding as well, a few times ABA's
    assert d["residual_kind"] == "rnea" and d["residual"] < 1e-12


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks"


def _script_module(name):
    """scripts/benchmarks/<name>.py imported as a module (the scripts are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"partree_script_{name}", SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_script_json(name, *args, timeout=300):
    """Run scripts/benchmarks/<name>.py with --json in a subprocess; its last stdout line parsed."""
    p = subprocess.run([sys.executable, str(SCRIPTS / f"{name}.py"), *args, "--json"], capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_contention_shares_replay_the_evaluation():
    """scripts/benchmarks/contention.py times each rank's share by replaying its parts with the inputs of a
    full evaluation: run one share after the other, they give back every part's piece of qdd."""
    import numpy as np

    mod = _script_module("contention")
    m, eng, owner, q, qd, tau = mod._setup("autotree:nb=3000,bf=2", 3)
    ref = eng.forward_dynamics(q, qd, tau).copy()
    runs = [mod._share_runner(eng, owner, r, q, qd, tau) for r in range(3)]
    for pk in eng.parts:
        pk.qdd[:] = np.nan
    for run in runs:
        run()
    for pk in eng.parts:
        assert np.allclose(pk.qdd, ref[pk.vsel], rtol=1e-12, atol=1e-12 * np.abs(ref).max())


def test_contention_script_runs_two_processes():
    r = _run_script_json("contention", "--model", "autotree:nb=2000,bf=1", "--procs", "2", "--repeat", "2")
    assert r["procs"] == 2 and len(r["share_alone_seconds"]) == len(r["share_together_seconds"]) == 2
    assert r["ceiling_speedup"] == r["engine_seconds"] / max(r["share_together_seconds"])


def test_speedup_pairs_pairs_each_job_with_the_one_after_it():
    mod = _script_module("speedup_pairs")

    def job(r, t):
        return {"ranks": r, "seconds_per_eval": t, "seconds_per_eval_gathered": t * 1.1, "bytes_per_eval": 432,
                "parts": 2, "max_rss_bytes": 10, "residual": 1e-14, "residual_kind": "aba"}

    s = mod.summarize([job(1, 2.0), job(2, 1.0), job(1, 1.8), job(2, 1.2)], 2)
    assert s["pair_speedups"] == [2.0, 1.5] and s["best_speedup"] == 1.8 and s["seconds_p"] == [1.0, 1.2]


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
def test_speedup_pairs_script_runs_mpi_jobs():
    r = _run_script_json("speedup_pairs", "--model", "autotree:nb=2000,bf=1", "--pairs", "1", "--repeat", "1",
                         timeout=600)
    assert r["ranks"] == 2 and r["pairs"] == 1 and r["parts"] == 2 and r["bytes_per_eval"] == 432
    assert r["best_speedup"] == pytest.approx(r["seconds_1"][0] / r["seconds_p"][0]) and r["residual_p"] < 1e-10
    r = _run_script_json("speedup_pairs", "--model", "autotree:nb=2000,bf=2", "--pairs", "1", "--repeat", "1",
                         "--quantity", "constraint-forces", timeout=600)
    assert r["quantity"] == "constraint-forces" and r["residual_kind"] == "cfa" and r["residual_p"] < 1e-10


@pytest.mark.parametrize("quantity", ["forward-dynamics", "constraint-forces"])
def test_closed_loop_models_are_compared_with_constrained_dynamics(quantity, capsys):
    """On a model with closed loops the reference is the serial closed-loop solve (the tree's ABA
    and CFA know nothing of the loop forces): the residual is against ``constrained_dynamics``,
    whatever --residual asks, and --compare-aba times that call."""
    spec = "scissor:units=30,closed=true,support=slider"
    for residual in ("auto", "rnea"):
        assert main(["--model", spec, "--quantity", quantity, "--repeat", "2", "--json", "--compare-aba", "--parts",
                     "3", "--residual", residual]) == 0
        d = _json(capsys.readouterr().out)
        assert d["residual_kind"] == "constrained" and d["residual"] < 1e-9
        assert d["constrained_seconds"] > 0 and d["speedup_vs_constrained"] > 0
        assert "aba_seconds" not in d and "cfa_seconds" not in d
    assert main(["--model", spec, "--repeat", "2", "--compare-aba"]) == 0
    out = capsys.readouterr().out
    assert "serial constrained_dynamics" in out and "relative error against constrained_dynamics" in out
