"""Run under mpiexec: simulate(..., backend='mpi') vs the serial backend (RK4, DOPRI5, DOP853,
record='all'), for the default part count and for more parts than ranks.

Also checks that every rank holds only its slice of the state and that the run's only
communication is the engine's two rounds per evaluation (Gatherv + Scatterv each), the state
gathered at save points, the adaptive error norm's allgather, one gather at setup, the time
loop's agreements on stopping (one Allreduce of three integers each, counted in the summary's
'polls') and the set-up messages (before the first step).

argv[1]: 'plain' (revolute/prismatic/universal random tree, stiffness, per-joint torque of t) or
'floating' (free base, spherical joints).  Prints 'OK <max abs diff>' on rank 0 and exits 0;
aborts with a non-zero code on a mismatch."""
import os
import sys
import tempfile

import numpy as np
from mpi4py import MPI

from partree.models.generators import random_tree
from partree.simulation import load_results, simulate

comm = MPI.COMM_WORLD


class CountingComm:
    """COMM_WORLD with a count of the communication calls (to check what a run sends)."""

    def __init__(self, c):
        self._c = c
        self.calls = {}

    def __getattr__(self, name):
        attr = getattr(self._c, name)
        if not callable(attr) or name in ("Get_rank", "Get_size", "Abort"):
            return attr

        def counted(*a, **k):
            self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*a, **k)
        return counted


mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
if mode == "plain":
    m = random_tree(30, seed=5, joint_types=("revolute", "prismatic", "universal"))
else:
    m = random_tree(30, seed=6, floating_base=True, joint_types=("revolute", "spherical", "universal"))
rng = np.random.default_rng(1)
q0 = m.random_configuration(rng)
qd0 = m.random_velocity(rng, 0.5)
kw = dict(q0=q0, qd0=qd0, torques=rng.normal(size=m.nv) * 0.1, damping=0.05, progress=False, verbose=False)
if mode == "floating":
    kw["f_ext"] = {m.joint_names[7]: [0.0, 0.1, 0.0, 0.0, 0.0, 2.0]}
if mode == "plain":
    kw["stiffness"] = 0.5
    kw["torques"] = {m.joint_names[3]: (lambda t: np.full(m.nv_j[3], np.sin(t)))}
worst = 0.0
tmp = tempfile.mkdtemp() if comm.rank == 0 else None
tmp = comm.bcast(tmp)
cases = [("rk4", 0.05, 1e-3, {"save_every": 10}),
         ("dopri5", 0.2, 0.05, {"rtol": 1e-8, "atol": 1e-10}),
         ("dop853", 0.2, 0.1, {}),
         ("rk4", 0.004, 1e-3, {"record": "all"})]
for P in (None, comm.size + 2):
    for ci, (integ, t_end, dt, extra) in enumerate(cases):
        out = os.path.join(tmp, f"{ci}_{integ}_{P}.h5")
        cc = CountingComm(comm)
        sizes = []
        at_step1 = {}

        def hook(k, t, q, v):
            sizes.append((q.size, v.size))
            if k == 1:
                at_step1.update(cc.calls)
        res = simulate(m, t_end, dt, integrator=integ, backend="mpi", parts=P, out=out, comm=cc, _step_hook=hook,
                       **kw, **extra)
        # each rank holds only its own slice of the state
        tot = comm.allreduce(np.array(sizes[-1]))
        if comm.size > 1 and (max(sizes) >= (m.nq, m.nv) or tuple(tot) != (m.nq, m.nv)):
            print(f"MISMATCH local sizes {sizes[-1]} {tot}", flush=True)
            comm.Abort(6)
        info = comm.bcast(None if res is None else (res.summary["f_evals"], len(res.t), res.summary.get("polls", 0)))
        nfev, nsave, polls = info
        extra_ev = nsave if extra.get("record") == "all" else 0
        calls = dict(cc.calls)
        # the loop: two rounds (Gatherv + Scatterv each, blocking or not: the engine's own rounds
        # wait in MPIEngine.wait's way) per evaluation; Gatherv of q, v (and qdd, tau) at save
        # points; the error norm's allgather (adaptive only); one gather at setup
        want_g = 2 * (nfev + extra_ev) + nsave * (4 if extra_ev else 2)
        gathers = calls.pop("Gatherv", 0) + calls.pop("Igatherv", 0)
        scatters = calls.pop("Scatterv", 0) + calls.pop("Iscatterv", 0)
        ok = (gathers == want_g and scatters == 2 * (nfev + extra_ev)
              and calls.pop("gather", 0) == 1 and (integ != "rk4" or "allgather" not in calls))
        calls.pop("allgather", None)
        # the loop's agreements on stopping: one Allreduce each (none with a single rank)
        if calls.pop("Allreduce", 0) != (polls if comm.size > 1 else 0):
            ok = False
        # the engine's set-up messages (e.g. rank 0 sending the parts: bcast, send / recv) happen
        # before the first step and never again
        for name in ("bcast", "send", "recv"):
            if name in calls and calls[name] == at_step1.get(name):
                calls.pop(name)
        if not ok or calls:
            print(f"MISMATCH communication {integ} P={P}: {cc.calls} nfev={nfev} saves={nsave}", flush=True)
            comm.Abort(7)
        if comm.rank != 0:
            assert res is None
            continue
        ref = simulate(m, t_end, dt, integrator=integ, **kw, **extra)
        back = load_results(out)
        names = ["t", "q", "qd", "energy"] + (["qdd", "tau", "joint_wrench"] if extra.get("record") == "all" else [])
        for name in names:
            a, b = getattr(res, name), getattr(ref, name)
            if a.shape != b.shape:
                print(f"MISMATCH shape {name} {integ} P={P}: {a.shape} {b.shape}", flush=True)
                comm.Abort(3)
            d = float(np.abs(a - b).max())
            worst = max(worst, d)
            if not d < 1e-10 or not np.array_equal(getattr(back, name), a):
                print(f"MISMATCH {name} {integ} P={P}: {d}", flush=True)
                comm.Abort(4)
        if res.summary["steps"] != ref.summary["steps"] or res.summary["f_evals"] != ref.summary["f_evals"]:
            print(f"MISMATCH steps {integ} P={P}: {res.summary} {ref.summary}", flush=True)
            comm.Abort(5)
if comm.rank == 0:
    print(f"OK {worst:.3e}", flush=True)
sys.exit(0)
