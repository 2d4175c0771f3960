"""Run under mpiexec: per-rank output of simulate(..., backend='mpi', output='per-rank').

argv[1] = DIR.  (1) A per-rank run (every quantity, momentum-free RK4) and a gathered run of the
same job write DIR/per.h5 (+ DIR/per.rankNNNN.h5) and DIR/gat.h5; rank 0 compares the joined
file with the gathered file and with a serial run (1e-12).  (2) A subset (record='q,tau',
record_joints) per rank against the serial run's columns.  (3) A per-rank run with checkpoints
killed in process (a hook raising a BaseException) and resumed per rank: equal to the
uninterrupted one bit for bit; the same checkpoint resumed gathered (output='gathered') too.
(4) The momentum form per rank (p recorded).  Prints 'OK' on rank 0; a mismatch aborts the job.
"""
import os
import sys

import numpy as np
from mpi4py import MPI

from partree.models.generators import random_tree
from partree.simulation import load_results, simulate

comm = MPI.COMM_WORLD
folder = sys.argv[1]
m = random_tree(40, seed=6, floating_base=True, joint_types=("revolute", "spherical", "universal", "prismatic"))
rng = np.random.default_rng(1)
kw = dict(q0=m.random_configuration(rng), qd0=m.random_velocity(rng, 0.5), torques=rng.normal(size=m.nv) * 0.1,
          damping=0.05, progress=False, verbose=False)
RUN = dict(t_end=0.02, dt=1e-3, integrator="rk4", save_every=3)
SERIES = ("t", "q", "qd", "qdd", "tau", "energy", "kinetic", "potential", "joint_wrench")


def fail(msg, code):
    print(f"MISMATCH rank {comm.rank}: {msg}", flush=True)
    comm.Abort(code)


def close(a, b, what, names=SERIES, tol=1e-12, exact=False):
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None or x.shape != y.shape:
            fail(f"{what}: {name} {None if x is None else x.shape} vs {None if y is None else y.shape}", 3)
        err = np.abs(x - y).max() / max(1.0, np.abs(y).max()) if x.size else 0.0
        if (exact and not np.array_equal(x, y)) or err > tol:
            fail(f"{what}: {name} differs by {err:.3g}", 4)


per = os.path.join(folder, "per.h5")
gat = os.path.join(folder, "gat.h5")
ref = simulate(m, **RUN, **kw, record="all") if comm.rank == 0 else None
comm.Barrier()
# (1) every quantity, per rank and gathered
res = simulate(m, **RUN, **kw, record="all", backend="mpi", output="per-rank", out=per)
g = simulate(m, **RUN, **kw, record="all", backend="mpi", output="gathered", out=gat)
if comm.rank == 0:
    if not all(os.path.exists(os.path.join(folder, f"per.rank{r:04d}.h5")) for r in range(comm.size)):
        fail("rank files missing", 2)
    joined = load_results(per)
    close(joined, load_results(gat), "per-rank vs gathered file")
    close(joined, ref, "per-rank vs serial")
    close(res, ref, "returned result vs serial")
    if joined.q_columns is not None or joined.v_columns is not None:
        fail("a full record reads back as a subset", 5)

# (2) a subset: q and tau of some joints
sub = os.path.join(folder, "sub.h5")
res = simulate(m, **RUN, **kw, record="q,tau", record_joints=["2:9", "j3*"], backend="mpi", output="per-rank",
               out=sub)
if comm.rank == 0:
    s = load_results(sub)
    if s.qd is not None or s.energy is not None or s.qdd is not None:
        fail("unrecorded series present", 6)
    if not np.array_equal(s.q, ref.q[:, s.q_columns]) or np.abs(s.tau - ref.tau[:, s.v_columns]).max() > 1e-12:
        fail("subset columns differ from the serial run", 7)
    name = m.joint_names[4]
    if not np.array_equal(s.joint(name)[0], ref.joint(name)[0]):
        fail("joint() of a subset", 8)

# (3) per-rank checkpoints, interrupted and resumed (per rank and gathered)


class Stop(BaseException):
    pass


def stop_at(n):
    def hook(k, t, q, v):
        if k == n:
            raise Stop
    return hook


LONG = dict(RUN, t_end=0.04)
full = simulate(m, **LONG, **kw, backend="mpi", output="gathered", record="all")
for how in ("per-rank", "gathered"):
    ck = os.path.join(folder, f"resume-{how}.h5")
    try:
        simulate(m, **LONG, **kw, backend="mpi", output="per-rank", record="all", out=ck, checkpoint_every=5,
                 _step_hook=stop_at(27))
        fail("not stopped", 9)
    except Stop:
        pass
    comm.Barrier()
    if comm.rank == 0 and not os.path.exists(ck + ".ckpt.seg000002.rank0000.npz"):
        fail("no per-rank checkpoint segments", 10)
    r2 = simulate(m, **LONG, **kw, backend="mpi", output=how, record="all", out=ck, checkpoint_every=5, resume=True)
    if comm.rank == 0:
        if not r2.summary.get("resumed_from"):
            fail("not resumed", 11)
        close(load_results(ck), full, f"resumed {how}", exact=True)
        if os.path.exists(ck + ".ckpt") or os.path.exists(ck + ".ckpt.seg000001.rank0000.npz"):
            fail("checkpoint files left", 12)

# (4) the momentum form: p per rank
mo = os.path.join(folder, "mom.h5")
mkw = dict(kw)
mkw.pop("torques")
simulate(m, **RUN, **mkw, backend="mpi", formulation="momentum", output="per-rank", out=mo)
if comm.rank == 0:
    a = load_results(mo)
    b = simulate(m, **RUN, **mkw, formulation="momentum")
    close(a, b, "momentum per rank", names=("t", "q", "qd", "p", "energy"))
    print("OK", flush=True)
