"""Run under mpiexec: the momentum form over MPI against the serial backend.

``partree.parallel.momentum_rhs(..., backend='mpi')`` against ``partree.momentum_rhs`` (random
trees of every joint type, fixed and floating base, external forces), then
``simulate(..., formulation='momentum', backend='mpi')`` against the serial run with RK4, the
adaptive DOPRI5 and the symplectic gauss6 (its fixed-point iteration's decisions taken on the
ordered allreduce, the same on every rank), with joint torques, damping and external forces.
Prints 'OK <max rel err of the evaluations> <max rel diff of the runs>' on rank 0 and exits 0;
aborts with a non-zero code on a mismatch."""
import numpy as np
from mpi4py import MPI

import partree
from partree.models.generators import random_tree
from partree.parallel import momentum_rhs
from partree.simulation import simulate

comm = MPI.COMM_WORLD
MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
sources = [lambda: random_tree(150, seed=3, floating_base=True, joint_types=MIXED),
           random_tree(120, seed=4, p_chain=0.8, joint_types=MIXED),
           "cardan:n=40"]
worst = 0.0
for k, src in enumerate(sources):
    m = src() if callable(src) else (partree.resolve_model(src) if isinstance(src, str) else src)
    rng = np.random.default_rng(k)
    q, p, tau = m.random_configuration(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)
    fe = rng.normal(size=(m.n, 6))
    ref = partree.momentum_rhs(m, 0.0, q, p, tau, fe)
    for P in (None, comm.size + 1, 7):
        got = momentum_rhs(src, q, p, tau, backend="mpi", comm=comm, parts=P, f_ext=fe)
        if comm.rank == 0:
            err = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(got, ref))
            worst = max(worst, err)
            if not err < 1e-10:
                print(f"MISMATCH source {k} P={P}: {err}", flush=True)
                comm.Abort(3)
        elif got is not None:
            print("a rank other than 0 got a result", flush=True)
            comm.Abort(4)

m = random_tree(60, seed=7, floating_base=True, joint_types=MIXED)
rng = np.random.default_rng(9)
fe = np.zeros((m.n, 6))
fe[5] = (0.1, 0.0, 0.2, 1.0, -0.5, 0.3)
base = dict(t_end=0.1, dt=0.01, qd0=0.5 * rng.normal(size=m.nv), torques=0.2 * rng.normal(size=m.nv),
            damping=0.05, f_ext=fe, formulation="momentum", progress=False)
run_worst = 0.0
for integrator, extra in (("rk4", {}), ("dopri5", {"rtol": 1e-9, "atol": 1e-11}), ("gauss6", {})):
    kw = dict(base, integrator=integrator, **extra)
    res = simulate(m, backend="mpi", comm=comm, parts=comm.size + 1, **kw)
    if comm.rank == 0:
        ref = simulate(m, backend="serial", **kw)
        scale = max(np.abs(ref.qd).max(), 1.0)
        err = max(np.abs(res.q - ref.q).max(), np.abs(res.qd - ref.qd).max() / scale,
                  np.abs(res.p - ref.p).max() / max(np.abs(ref.p).max(), 1.0))
        run_worst = max(run_worst, err)
        if not err < 1e-10:
            print(f"MISMATCH run {integrator}: {err}", flush=True)
            comm.Abort(5)
if comm.rank == 0:
    print(f"OK {worst:.3e} {run_worst:.3e}", flush=True)
