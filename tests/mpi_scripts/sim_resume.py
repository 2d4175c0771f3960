"""Run under mpiexec: checkpoints and resume of simulate(..., backend='mpi').

argv[1] = 'kill' DIR: an RK4 run checkpointing every 7 steps into DIR/rk4.h5.ckpt whose every
rank dies (os._exit, no cleanup, no MPI_Finalize) at step 23.

argv[1] = 'resume' DIR: (1) resumes that run and compares it with an uninterrupted one (bit for
bit); (2) DOPRI5 with wall-clock checkpoints (decided on rank 0, broadcast) interrupted in
process and resumed, again bit for bit; (3) resuming with other options / another model must
raise the same CheckpointError on every rank.  Prints 'OK' on rank 0 and exits 0; a mismatch
aborts the job with a non-zero code."""
import os
import sys

import numpy as np
from mpi4py import MPI

from partree.models.generators import random_tree
from partree.simulation import CheckpointError, simulate

comm = MPI.COMM_WORLD
mode, folder = sys.argv[1], sys.argv[2]
m = random_tree(30, seed=6, floating_base=True, joint_types=("revolute", "spherical", "universal"))
rng = np.random.default_rng(1)
kw = dict(q0=m.random_configuration(rng), qd0=m.random_velocity(rng, 0.5), torques=rng.normal(size=m.nv) * 0.1,
          damping=0.05, progress=False, verbose=False, backend="mpi", parts=3)
RK4 = dict(t_end=0.04, dt=1e-3, integrator="rk4", save_every=2)
out = os.path.join(folder, "rk4.h5")


def fail(msg, code):
    print(f"MISMATCH rank {comm.rank}: {msg}", flush=True)
    comm.Abort(code)


def same(a, b, what):
    if comm.rank != 0:
        return
    if a.summary["steps"] != b.summary["steps"] or a.summary["f_evals"] != b.summary["f_evals"]:
        fail(f"{what}: steps {a.summary} {b.summary}", 3)
    for name in ("t", "q", "qd", "energy"):
        x, y = getattr(a, name), getattr(b, name)
        if x.shape != y.shape or not np.array_equal(x, y):
            fail(f"{what}: {name} differs", 4)
    if not a.summary["resumed_from"] or a.summary["resumed_from"] <= 0:
        fail(f"{what}: not resumed ({a.summary['resumed_from']})", 5)


if mode == "kill":
    def die(k, t, q, v):
        if k == 23:
            sys.stdout.flush()
            os._exit(17)
    simulate(m, out=out, checkpoint_every=7, _step_hook=die, **RK4, **kw)
    sys.exit(0)                        # not reached

# (1) resume the killed run
if comm.rank == 0 and (not os.path.exists(out + ".ckpt") or os.path.exists(out)):
    fail("the killed run left no checkpoint (or finished)", 2)
res = simulate(m, out=out, checkpoint_every=7, resume=True, **RK4, **kw)
ref = simulate(m, **RK4, **kw)
same(res, ref, "rk4 after kill")
if comm.rank == 0 and (abs(res.summary["resumed_from"] - 0.021) > 1e-12 or os.path.exists(out + ".ckpt")):
    fail(f"rk4: resumed from {res.summary['resumed_from']}, checkpoint left: {os.path.exists(out + '.ckpt')}", 6)


# (2) adaptive, wall-clock checkpoints (every tick: 1 ns), interrupted in process
class Stop(BaseException):             # not an Exception: leaves simulate on every rank without MPI_Abort
    pass


def stop_at(n):
    def hook(k, t, q, v):
        if k == n:
            raise Stop
    return hook


DP = dict(t_end=0.3, dt=0.05, integrator="dopri5", rtol=1e-7, atol=1e-9)
ck = os.path.join(folder, "dp.ckpt")
try:
    simulate(m, checkpoint=ck, checkpoint_every="1e-9s", _step_hook=stop_at(4), **DP, **kw)
    fail("dopri5 not interrupted", 7)
except Stop:
    pass
res = simulate(m, checkpoint=ck, checkpoint_every="1e-9s", resume=True, keep_checkpoint=True, **DP, **kw)
ref = simulate(m, **DP, **kw)
same(res, ref, "dopri5")
if comm.rank == 0 and abs(res.summary["resumed_from"] - 0.15) > 1e-12:
    fail(f"dopri5 resumed from {res.summary['resumed_from']}", 8)

# (2b) the momentum form: gauss6 (its last stages, velocity-sized arrays, gathered into the
# checkpoint and scattered back) and dopri5 (its FSAL velocity), interrupted and resumed
for integ, extra in (("gauss6", dict(t_end=0.02, dt=1e-3)), ("dopri5", DP)):
    MF = dict(extra, integrator=integ, formulation="momentum")
    ckm = os.path.join(folder, f"m_{integ}.ckpt")
    try:
        simulate(m, checkpoint=ckm, checkpoint_every="1e-9s", _step_hook=stop_at(4), **MF, **kw)
        fail(f"momentum {integ} not interrupted", 11)
    except Stop:
        pass
    res = simulate(m, checkpoint=ckm, checkpoint_every="1e-9s", resume=True, **MF, **kw)
    ref = simulate(m, **MF, **kw)
    same(res, ref, f"momentum {integ}")
    if comm.rank == 0 and not np.array_equal(res.p, ref.p):
        fail(f"momentum {integ}: p differs", 12)

# (3) mismatched checkpoints: the same CheckpointError on every rank
msgs = []
for what, call in (("options", lambda: simulate(m, checkpoint=ck, resume=True, **dict(DP, rtol=1e-6), **kw)),
                   ("model", lambda: simulate(random_tree(30, seed=7, floating_base=True), checkpoint=ck, resume=True,
                                              **DP, **dict(kw, q0=None, qd0=None, torques=None)))):
    try:
        call()
        fail(f"{what}: mismatched checkpoint accepted", 9)
    except CheckpointError as e:
        msgs.append(str(e))
allm = comm.allgather(msgs)
if comm.rank == 0:
    if any(x != allm[0] for x in allm) or "different options: rtol was 1e-07, now 1e-06" not in allm[0][0] \
            or "different model" not in allm[0][1]:
        fail(f"refusals differ or unclear: {allm}", 10)
    print("REFUSED " + " | ".join(allm[0]), flush=True)
    print("OK", flush=True)
sys.exit(0)
