"""Run under mpiexec: ``simulate(..., backend='mpi')`` of models with flexible bodies against the
serial run of the same inputs.

The flexible three-arm (fixed base) with joint torques of t on some joints, prescribed motion of
whole joints on others, damping and wrenches at the body origins, and a random tree of beams and
rigid bodies (floating base, spherical and universal joints) with constant torques, then with
loads at the nodes of its beams and at a body origin: RK4 and DOPRI5 over 0.01 s, one and
several parts per rank.  The trajectories (joints' and modal coordinates), the energy series
and the recorded joint wrenches must equal the serial run's to 1e-9 relative.
Prints 'OK <max rel err>' on rank 0 and exits 0; aborts with a non-zero code on a mismatch."""
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_parallel_flexible import MODELS, node_loads  # noqa: E402

from partree.simulation import simulate  # noqa: E402

comm = MPI.COMM_WORLD
worst = 0.0


def compare(a, b, what):
    global worst
    if comm.rank != 0:
        if a is not None:
            print("a rank other than 0 got a result", flush=True)
            comm.Abort(4)
        return
    for name in ("q", "qd", "qdd", "tau", "energy", "joint_wrench"):
        x, y = getattr(a, name, None), getattr(b, name, None)
        if y is None:
            continue
        err = float(np.abs(np.asarray(x) - np.asarray(y)).max() / max(np.abs(np.asarray(y)).max(), 1e-300))
        worst = max(worst, err)
        if not err < 1e-9:
            print(f"MISMATCH {what} {name}: {err}", flush=True)
            comm.Abort(3)


def runs():
    m = MODELS["threearm"]()
    names = list(m.joint_names)
    torques = {names[1]: lambda t: 2.0 * np.sin(t), names[3]: lambda t: -1.0}
    prescribed = {names[0]: lambda t: (0.05 * np.sin(t), 0.05 * np.cos(t), -0.05 * np.sin(t))}
    F = np.zeros((m.n, 6))
    F[-1] = (0.0, 0.0, 0.1, 0.5, 0.0, -0.2)
    yield "threearm", m, dict(torques=torques, prescribed=prescribed, damping=0.01, f_ext=F,
                              record="q,qd,qdd,tau,energy,wrenches")
    m = MODELS["random-tree"]()
    rng = np.random.default_rng(3)
    yield "random-tree", m, dict(torques=0.1 * rng.normal(size=m.nv), qd0=0.1 * rng.normal(size=m.nv),
                                 record="q,qd,energy")
    # loads at the nodes of flexible bodies (and at a body origin), each rank's on its parts
    yield "random-tree node loads", m, dict(f_ext=node_loads(m, rng, scale=1.0), record="q,qd,wrenches")


for name, m, kw in runs():
    for integ, dt in (("rk4", 1e-4), ("dopri5", 1e-3)):       # (stiff modes: RK4 needs the small step)
        common = dict(integrator=integ, save_every=10 if integ == "rk4" else 1, progress=False, verbose=False, **kw)
        ref = simulate(m, 0.01, dt, **common) if comm.rank == 0 else None
        roots = int(np.count_nonzero(m.parent < 0))
        for parts in (max(roots, comm.size), max(roots, comm.size) + 2):
            got = simulate(m, 0.01, dt, backend="mpi", comm=comm, parts=parts, **common)
            compare(got, ref, f"{name} {integ} parts={parts}")
if comm.rank == 0:
    print(f"OK {worst:.3e}", flush=True)
