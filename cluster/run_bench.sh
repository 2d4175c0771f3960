#!/usr/bin/env bash
# The payload of the job scripts: one `partree bench` run over MPI, JSON on stdout (rank 0).
# Launched by slurm_bench.sbatch (srun), pbs_bench.pbs (mpiexec -f $PBS_NODEFILE) or by hand:
#   PARTREE_LAUNCH="mpiexec -n 2" MODEL=autotree:nb=100000,bf=2 cluster/run_bench.sh
# Environment: PARTREE_LAUNCH (launcher prefix, default "mpiexec -n ${NRANKS:-2}"), MODEL (spec or
# model file), PARTS (default: one per rank), REPEAT (default 5), PYTHON (default python3),
# BENCH_ARGS (extra arguments, e.g. "--residual rnea").
set -euo pipefail
: "${MODEL:=autotree:nb=1000000,bf=2}"
: "${REPEAT:=5}"
: "${PYTHON:=python3}"
: "${PARTREE_LAUNCH:=mpiexec -n ${NRANKS:-2}}"
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
args=(--backend mpi --model "$MODEL" --repeat "$REPEAT" --json)
if [[ -n "${PARTS:-}" ]]; then args+=(--parts "$PARTS"); fi
# shellcheck disable=SC2086
exec $PARTREE_LAUNCH "$PYTHON" -m partree.cli.bench "${args[@]}" ${BENCH_ARGS:-}
