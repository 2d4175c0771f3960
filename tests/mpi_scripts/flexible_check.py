"""Run under mpiexec: the parallel engine on models with flexible bodies over MPI against the
serial compiled recursion.

``partree.parallel.forward_dynamics(..., backend='mpi')`` and an ``MPIEngine`` (forward and
hybrid dynamics, the full vectors [q; eta], [qd; eta_dot]) against ``flexible_aba`` and
``flexible_hybrid_dynamics`` on a chain of beam links and random trees of beams and rigid bodies
(the models of tests/test_parallel_flexible.py), several partitions (cuts at flexible handles);
then the constraint forces (plain and hybrid) against ``flexible_cfa`` and
``flexible_hybrid_forces``, with the model on rank 0 and with a loader (the constraint rows then
gathered from the parts); then wrenches at the body origins, and loads at the nodes of the
flexible bodies (packed with ``flexible_loads`` for an engine, by name for the function).
Prints 'OK <max rel err>' on rank 0 and exits 0; aborts with a non-zero code on a mismatch."""
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_parallel_flexible import MODELS, full_state, node_loads  # noqa: E402

from partree.algorithms.flexible_cfa import flexible_cfa, flexible_hybrid_forces  # noqa: E402
from partree.algorithms.flexible_dynamics import (flexible_aba, flexible_hybrid_dynamics,  # noqa: E402
                                                  flexible_loads)
from partree.parallel import forward_dynamics  # noqa: E402
from partree.parallel.mpi import MPIEngine  # noqa: E402

comm = MPI.COMM_WORLD
worst = 0.0


def check(got, ref, what):
    global worst
    if comm.rank == 0:
        got = got if isinstance(got, tuple) else (got,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        err = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(got, ref))
        worst = max(worst, err)
        if not err < 1e-10:
            print(f"MISMATCH {what}: {err}", flush=True)
            comm.Abort(3)
    elif got is not None:
        print("a rank other than 0 got a result", flush=True)
        comm.Abort(4)


for name in ("chain", "random-tree", "random-tree-fixed", "threearm"):
    m = MODELS[name]()
    rng = np.random.default_rng(len(name))
    q, qd, tau = full_state(m, rng)
    qdd = rng.normal(size=qd.size)
    ref = flexible_aba(m, q, qd, tau)
    roots = 1 + int(np.count_nonzero(m.parent[1:] < 0))
    # (P None: balanced over the ranks, for a forest of no more trees than ranks)
    for P in ((None,) if roots <= comm.size else ()) + (max(roots, comm.size) + 1, min(roots + 5, m.n)):
        got = forward_dynamics(m, q, qd, tau, backend="mpi", comm=comm, parts=P)
        check(got, ref, f"{name} P={P}")
    eng = MPIEngine(m, comm=comm, parts=max(roots, comm.size) + 2)
    check(eng.forward_dynamics(q, qd, tau), ref, f"{name} engine")
    for frac in (0.3, 1.0):
        mask = rng.random(m.n) < frac
        href = flexible_hybrid_dynamics(m, q, qd, tau, qdd, mask)
        check(eng.forward_dynamics(q, qd, tau, active=mask, qdd_active=qdd), href, f"{name} hybrid {frac}")
    cref = flexible_cfa(m, q, qd, tau)
    mask = rng.random(m.n) < 0.4
    href = flexible_hybrid_forces(m, q, qd, tau, qdd, mask)[2]
    for label, e in (("model", eng), ("loader", MPIEngine(lambda: MODELS[name](), comm=comm, parts=P))):
        for what, got, r in (("cfa", e.constraint_forces(q, qd, tau), cref),
                             ("hybrid cfa", e.constraint_forces(q, qd, tau, active=mask, qdd_active=qdd), href)):
            for attr in ("qdd", "joint_wrench", "constraint_force", "drive_force", "constraint_rows"):
                check(None if got is None else getattr(got, attr), getattr(r, attr), f"{name} {label} {what} {attr}")
    F = rng.normal(size=(m.n, 6))          # wrenches at the body origins
    check(eng.forward_dynamics(q, qd, tau, F), flexible_aba(m, q, qd, tau, F), f"{name} loads")
    got = eng.constraint_forces(q, qd, tau, F)
    check(None if got is None else got.joint_wrench, flexible_cfa(m, q, qd, tau, F).joint_wrench, f"{name} loads cfa")
    loads = node_loads(m, rng)              # at nodes: packed for the engine, by name for the function
    packed = flexible_loads(m, loads)
    check(eng.forward_dynamics(q, qd, tau, packed), flexible_aba(m, q, qd, tau, loads), f"{name} node loads")
    got = eng.constraint_forces(q, qd, tau, packed, active=mask, qdd_active=qdd)
    ref_h = flexible_hybrid_forces(m, q, qd, tau, qdd, mask, loads)[2]
    for attr in ("qdd", "joint_wrench", "constraint_force", "drive_force"):
        check(None if got is None else getattr(got, attr), getattr(ref_h, attr), f"{name} node loads hybrid {attr}")
    check(forward_dynamics(m, q, qd, tau, backend="mpi", comm=comm, parts=P, f_ext=loads),
          flexible_aba(m, q, qd, tau, loads), f"{name} node loads function")
if comm.rank == 0:
    print(f"OK {worst:.3e}", flush=True)
