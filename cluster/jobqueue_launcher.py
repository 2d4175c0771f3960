"""Run the partree Dask benchmark on workers submitted as batch jobs (dask-jobqueue).

    python cluster/jobqueue_launcher.py --model autotree:nb=10000000,bf=2 --workers 16 [--system slurm|pbs]
    python cluster/jobqueue_launcher.py --model ... --print-job-script     # show what would be submitted
    python cluster/jobqueue_launcher.py --model ... --local 2              # same payload on a LocalCluster

Settings come from cluster/dask_jobqueue.yaml (``--config``) under jobqueue.<system>.  The
package ``dask-jobqueue`` is optional: without it only ``--local`` works and the other modes
exit with a message saying how to install it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_config(path, system):
    import yaml

    with open(path) as f:
        cfg = yaml.safe_load(f)
    return {k.replace("-", "_"): v for k, v in cfg["jobqueue"][system].items() if v is not None}


def make_cluster(system, cfg):
    try:
        import dask_jobqueue
    except ImportError:
        raise SystemExit("jobqueue_launcher: dask-jobqueue is not installed (pip install dask-jobqueue); "
                         "use --local N to run the same payload on a LocalCluster") from None
    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[system]
    return cls(**cfg)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parts", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--system", choices=("slurm", "pbs"), default="slurm")
    ap.add_argument("--config", default=str(HERE / "dask_jobqueue.yaml"))
    ap.add_argument("--print-job-script", action="store_true")
    ap.add_argument("--local", type=int, default=0, metavar="N", help="use a LocalCluster of N workers instead")
    a = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    if a.local:
        cluster = LocalCluster(n_workers=a.local, threads_per_worker=1, processes=True, dashboard_address=None)
        nworkers = a.local
    else:
        cluster = make_cluster(a.system, load_config(a.config, a.system))
        if a.print_job_script:
            print(cluster.job_script())
            cluster.close()
            return 0
        cluster.scale(a.workers)
        nworkers = a.workers
    from partree.cli.bench import main as bench_main

    try:
        with Client(cluster) as client:
            client.wait_for_workers(nworkers, timeout=3600)
            address = client.scheduler.address
            argv2 = ["--model", a.model, "--backend", "dask", "--scheduler", address, "--repeat", str(a.repeat),
                     "--json"] + (["--parts", str(a.parts)] if a.parts else [])
            return bench_main(argv2)
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
