"""P-rank speed-up of the MPI engine measured in back-to-back pairs of jobs.

    python scripts/benchmarks/speedup_pairs.py --model autotree:nb=1000000,bf=1 [--ranks 2] [--pairs 4]
                                    [--repeat 9] [--quantity constraint-forces] [--json]

On a shared machine the speed drifts from minute to minute, so a 1-rank job timed now and a P-rank
job timed ten minutes later say little.  This runs ``mpiexec -n 1 partree bench --backend mpi
--json`` and ``mpiexec -n P ...`` alternately, ``--pairs`` times, and reports each job's best time
per evaluation (q̈ left on the ranks, and gathered on rank 0 beside it), the speed-up of every pair
(1-rank time / the P-rank job right after it), their range, and the best P-rank time against the
best 1-rank time.  Each job is a fresh process: model build, set-up and kernels as a user's job
would see them.  ``--json`` prints one JSON object with everything instead of the table.
"""
import argparse
import json
import shlex
import subprocess
import sys


def run_job(mpiexec, nranks, model, repeat, timeout, quantity="forward-dynamics"):
    cmd = [*shlex.split(mpiexec), "-n", str(nranks), sys.executable, "-m", "partree", "bench", "--backend", "mpi", "--model",
           model, "--repeat", str(repeat), "--quantity", quantity, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    lines = [s for s in p.stdout.splitlines() if s.startswith("{")]
    if len(lines) != 1:
        raise RuntimeError(f"{' '.join(cmd)}: expected one JSON line, got:\n{p.stdout[-2000:]}")
    return json.loads(lines[0])


def summarize(jobs, nranks):
    """jobs: the bench outputs in the order run (1, P, 1, P, ...).  Returns the summary dict."""
    one = [j for j in jobs if j["ranks"] == 1]
    many = [j for j in jobs if j["ranks"] == nranks]
    pairs = [a["seconds_per_eval"] / b["seconds_per_eval"] for a, b in zip(one, many)]
    best1 = min(j["seconds_per_eval"] for j in one)
    bestp = min(j["seconds_per_eval"] for j in many)
    return {"ranks": nranks, "pairs": len(pairs), "pair_speedups": pairs,
            "seconds_1": [j["seconds_per_eval"] for j in one], "seconds_p": [j["seconds_per_eval"] for j in many],
            "seconds_p_gathered": [j.get("seconds_per_eval_gathered") for j in many],
            "best_speedup": best1 / bestp, "bytes_per_eval": many[0]["bytes_per_eval"], "parts": many[0]["parts"],
            "max_rss_bytes_p": max(j["max_rss_bytes"] for j in many),
            "residual_p": max(j["residual"] for j in many), "residual_kind": many[0].get("residual_kind")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--model", required=True, help="model spec, e.g. autotree:nb=1000000,bf=1")
    ap.add_argument("--ranks", type=int, default=2, help="P, the ranks of the parallel job (default 2)")
    ap.add_argument("--pairs", type=int, default=4, help="number of (1-rank, P-rank) pairs (default 4)")
    ap.add_argument("--repeat", type=int, default=9, help="evaluations timed per job, best taken (default 9)")
    ap.add_argument("--quantity", choices=("forward-dynamics", "constraint-forces"), default="forward-dynamics",
                    help="what one evaluation computes (partree bench --quantity; default forward-dynamics)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds one job may take (default 900)")
    ap.add_argument("--mpiexec", default=None,
                    help='launcher command, e.g. "mpiexec -bind-to core" (default: the venv\'s mpiexec)')
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.ranks < 2 or a.pairs < 1 or a.repeat < 1:
        ap.error("need --ranks >= 2, --pairs >= 1, --repeat >= 1")
    from partree.mpienv import find_mpiexec

    mpiexec = a.mpiexec or find_mpiexec()
    if mpiexec is None:
        ap.error("no mpiexec found (install the mpich wheel: pip install mpich)")
    jobs = []
    for k in range(a.pairs):
        for n in (1, a.ranks):
            jobs.append(run_job(mpiexec, n, a.model, a.repeat, a.timeout, a.quantity))
            if not a.json:
                j = jobs[-1]
                g = j.get("seconds_per_eval_gathered")
                print(f"pair {k + 1}  {n:3d} rank(s)  {j['seconds_per_eval'] * 1e3:9.1f} ms"
                      + (f"  (q̈ gathered {g * 1e3:.1f} ms)" if g is not None and n > 1 else ""), flush=True)
    s = summarize(jobs, a.ranks)
    s["model"] = a.model
    s["quantity"] = a.quantity
    if a.json:
        print(json.dumps(s))
        return 0
    ps = s["pair_speedups"]
    print(f"{a.model}: speed-up on {a.ranks} ranks, pairwise {min(ps):.2f}-{max(ps):.2f}x "
          f"({', '.join(f'{x:.2f}' for x in ps)}); best {a.ranks}-rank / best 1-rank {s['best_speedup']:.2f}x")
    print(f"{s['parts']} parts, {s['bytes_per_eval']} B per evaluation, max RSS per rank "
          f"{s['max_rss_bytes_p'] / 1e9:.2f} GB, {s['residual_kind']} residual {s['residual_p']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
