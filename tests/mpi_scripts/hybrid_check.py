"""Run under mpiexec: hybrid dynamics over MPI against the serial algorithms.

``partree.parallel.forward_dynamics(..., backend='mpi', active=..., qdd_active=...)`` against
``partree.hybrid_dynamics`` (random trees of every joint type, fixed and floating base, external
forces, masks that flag the parts' root joints and handle-path joints, the joint-name form), an
``MPIEngine`` built from a loader (the model on rank 0 only: names resolved there), then
``simulate(..., prescribed=..., backend='mpi')`` against the serial run (RK4 and DOPRI5).
Prints 'OK <max rel err of the evaluations> <max rel diff of the runs>' on rank 0 and exits 0;
aborts with a non-zero code on a mismatch."""
import numpy as np
from mpi4py import MPI

import partree
from partree.models.generators import random_tree
from partree.parallel import SerialEngine, forward_dynamics
from partree.parallel.mpi import MPIEngine
from partree.simulation import simulate
from partree.simulation.motions import PolynomialMotion, SineMotion, initial_state

comm = MPI.COMM_WORLD
MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
sources = [lambda: random_tree(150, seed=3, floating_base=True, joint_types=MIXED),
           lambda: random_tree(120, seed=4, p_chain=0.8, joint_types=MIXED),
           lambda: random_tree(40, seed=5, joint_types=MIXED, max_children=1)]
worst = 0.0


def check(got, ref, what):
    global worst
    if comm.rank == 0:
        err = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(got, ref))
        worst = max(worst, err)
        if not err < 1e-10:
            print(f"MISMATCH {what}: {err}", flush=True)
            comm.Abort(3)
    elif got is not None:
        print("a rank other than 0 got a result", flush=True)
        comm.Abort(4)


for k, src in enumerate(sources):
    m = src()
    rng = np.random.default_rng(k)
    q, qd, tau, qdd = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv), \
        rng.normal(size=m.nv)
    fe = rng.normal(size=(m.n, 6))
    for P in (None, comm.size + 1, 7):
        # flag the parts' root joints and half of the handle-path joints of the partition used
        eng = SerialEngine.for_ranks(m, comm.size) if P is None else SerialEngine(m, P)
        mask = rng.random(m.n) < 0.3
        for pk in eng.parts:
            mask[pk.bodies[0]] = True
            on = np.flatnonzero(pk.slot >= 0)
            mask[pk.bodies[on[rng.random(on.size) < 0.5]]] = True
        ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, fe)
        got = forward_dynamics(src, q, qd, tau, backend="mpi", comm=comm, parts=P, f_ext=fe, active=mask,
                               qdd_active=qdd)
        check(got, ref, f"source {k} P={P}")
        names = [m.joint_names[i] for i in np.flatnonzero(mask)]
        got = forward_dynamics(src, q, qd, tau, backend="mpi", comm=comm, parts=P, f_ext=fe, active=names,
                               qdd_active=qdd)
        check(got, ref, f"source {k} P={P} (names)")
    # an engine that holds the model on rank 0 only: joint names resolved there
    eng = MPIEngine(src, comm=comm, parts=comm.size + 2)
    for frac in (0.0, 0.5, 1.0):
        mask = rng.random(m.n) < frac
        ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, fe)
        check(eng.forward_dynamics(q, qd, tau, fe, active=mask, qdd_active=qdd), ref, f"engine {k} mask {frac}")
        names = [m.joint_names[i] for i in np.flatnonzero(mask)]
        check(eng.forward_dynamics(q, qd, tau, fe, active=names, qdd_active=qdd), ref, f"engine {k} names {frac}")
    # the reaction forces of the hybrid motion (partree.cfa's form) against the serial ones
    mask = rng.random(m.n) < 0.5
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, fe, return_forces=True)[2]
    res = eng.constraint_forces(q, qd, tau, fe, active=mask, qdd_active=qdd)
    check(None if res is None else [res.qdd, res.joint_wrench, res.constraint_force, res.drive_force],
          [ref.qdd, ref.joint_wrench, ref.constraint_force, ref.drive_force], f"engine {k} reaction forces")
    got = partree.parallel.constraint_forces(src, q, qd, tau, backend="mpi", comm=comm, parts=comm.size + 1,
                                             f_ext=fe, active=mask, qdd_active=qdd)
    check(None if got is None else [got.qdd, got.joint_wrench, got.constraint_force, got.drive_force],
          [ref.qdd, ref.joint_wrench, ref.constraint_force, ref.drive_force], f"one-off {k} reaction forces")
    qdd_plain = eng.forward_dynamics(q, qd, tau, fe)
    check([qdd_plain] if comm.rank == 0 else None, [partree.aba(m, q, qd, tau, fe)], f"engine {k} plain")

m = random_tree(40, seed=11, floating_base=True, joint_types=("revolute", "prismatic", "universal", "spherical"),
                p_chain=0.7)
one = [m.joint_names[i] for i in range(m.n) if m.nv_j[i] == 1]
pres = {one[1]: SineMotion(0.2, 3.0, 0.1, 0.05), one[len(one) // 2]: PolynomialMotion([0.0, 0.3, -0.5]),
        one[-1]: SineMotion(0.1, 5.0)}
rng = np.random.default_rng(2)
q0, qd0 = initial_state(m, pres, m.random_configuration(rng, 0.5), m.random_velocity(rng, 0.5))
base = dict(t_end=0.05, dt=1e-3, q0=q0, qd0=qd0, prescribed=pres, torques=0.1 * rng.normal(size=m.nv),
            damping=0.05, record="all", progress=False)
run_worst = 0.0
for integrator, extra in (("rk4", {}), ("dopri5", {"rtol": 1e-9, "atol": 1e-11})):
    kw = dict(base, integrator=integrator, **extra)
    res = simulate(m, backend="mpi", comm=comm, parts=comm.size + 1, **kw)
    if comm.rank == 0:
        ref = simulate(m, backend="serial", **kw)
        scale = max(np.abs(ref.qd).max(), 1.0)
        err = max(np.abs(res.q - ref.q).max(), np.abs(res.qd - ref.qd).max() / scale,
                  np.abs(res.qdd - ref.qdd).max() / np.abs(ref.qdd).max(),
                  np.abs(res.tau - ref.tau).max() / np.abs(ref.tau).max())
        for name, f in pres.items():          # the prescribed joints follow their laws
            j = m.joint_names.index(name)
            law = np.array([f(t) for t in res.t])
            err = max(err, np.abs(res.qdd[:, m.idx_v[j]] - law[:, 2]).max())
        run_worst = max(run_worst, err)
        if not err < 1e-10:
            print(f"MISMATCH run {integrator}: {err}", flush=True)
            comm.Abort(5)
if comm.rank == 0:
    print(f"OK {worst:.3e} {run_worst:.3e}", flush=True)
