"""The parallel engine on models with flexible bodies (``partree.parallel.flexible_part``) against
the serial compiled recursion (``flexible_aba``, ``flexible_hybrid_dynamics``): several parts, cuts
at flexible handles, nonzero modal coordinates and rates, hybrid masks, external loads at the
body origins and at the nodes of flexible bodies, the refusals."""
import numpy as np
import pytest

import partree
from partree.algorithms.flexible_cfa import flexible_cfa, flexible_hybrid_forces
from partree.algorithms.flexible_dynamics import flexible_aba, flexible_hybrid_dynamics, flexible_state_size
from partree.errors import PartreeInputError
from partree.model import Model
from partree.models.beam import euler_bernoulli_beam
from partree.models.generators import random_parents
from partree.parallel import SerialEngine
from partree.parallel.flexible_part import FlexiblePartKernel
from partree.parallel.partition import FLEXIBLE_WEIGHT, default_weights


def beam_chain(n, seed=0, modes=4):
    """A chain of n beam links (every other joint universal, the others revolute), each hanging
    from its parent's tip node, rigid links at every fifth place."""
    rng = np.random.default_rng(seed)
    L = 0.8
    body, mass, com, I_com = euler_bernoulli_beam(L, 50.0, 2.0, modes, bending="yz", polar=1e-3,
                                                  damping_ratio=0.01)
    parent = np.arange(n) - 1
    joints = ["universal" if i % 2 else "revolute" for i in range(n)]
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1)[:, None]
    axis2 = np.cross(axis, rng.normal(size=(n, 3)))
    axis2 /= np.linalg.norm(axis2, axis=1)[:, None]
    r = np.zeros((n, 3))
    r[1:, 0] = L
    flex = {i: body for i in range(n) if i % 5 != 4}
    rigid = Model(parent, joints, axis, np.tile(np.eye(3), (n, 1, 1)), r, [mass] * n, np.tile(com, (n, 1)),
                  np.tile(I_com, (n, 1, 1)), axis2=axis2, gravity=(0, 0, -9.81))
    return rigid.with_flexible(flex)


def random_beam_tree(n, seed, joints=("revolute", "prismatic", "universal", "spherical", "fixed"), floating=True):
    """A random tree of beams of three kinds and rigid bodies, a child of a beam at its tip node."""
    rng = np.random.default_rng(seed)
    parent = random_parents(n, rng)
    L = 0.7
    kinds = [euler_bernoulli_beam(L, 40.0, 2.0, 6, bending="yz", polar=0.05, damping_ratio=0.02, name="six"),
             euler_bernoulli_beam(L, 25.0, 1.5, 3, bending="z", polar=0.05, name="three"),
             euler_bernoulli_beam(L, 60.0, 2.5, 4, bending="yz", polar=0.05, stiffening=True, name="stiff")]
    pick = rng.integers(-1, 3, size=n)
    jt = [joints[k] for k in rng.integers(0, len(joints), size=n)]
    jt[0] = "free" if floating else "revolute"
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1)[:, None]
    axis2 = np.cross(axis, rng.normal(size=(n, 3)))
    axis2 /= np.linalg.norm(axis2, axis=1)[:, None]
    E = np.empty((n, 3, 3))
    for i in range(n):
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        E[i] = Q * np.sign(np.linalg.det(Q))
    r = rng.uniform(-0.4, 0.4, size=(n, 3))
    r[0] = 0.0
    mass, com, I_com = np.empty(n), np.empty((n, 3)), np.empty((n, 3, 3))
    flex = {}
    for i in range(n):
        if pick[i] >= 0:
            body, mass[i], com[i], I_com[i] = kinds[pick[i]]
            flex[i] = body
        else:
            mass[i], com[i], I_com[i] = 1.0 + rng.random(), rng.uniform(-0.2, 0.2, 3), 0.1 * np.diag([1.0, 1.5, 2.0])
        if parent[i] >= 0 and pick[parent[i]] >= 0:
            r[i] = (L, 0.0, 0.0)
    return Model(parent, jt, axis, E, r, mass, com, I_com, axis2=axis2, flexible=flex)


MODELS = {
    "threearm": lambda: partree.resolve_model("threearm:flexible=true,modes=6"),
    "threearm-floating": lambda: partree.resolve_model("threearm:flexible=true,modes=6,floating_base=true"),
    "chain": lambda: beam_chain(14),
    "random-tree": lambda: random_beam_tree(40, 11),
    "random-tree-fixed": lambda: random_beam_tree(30, 5, floating=False),
}


def full_state(model, rng, eta_scale=0.05):
    """A state with nonzero modal coordinates and rates: (q, qd, tau) full vectors."""
    nq, nv = flexible_state_size(model)
    q = np.concatenate((model.random_configuration(rng), eta_scale * rng.normal(size=nq - model.nq)))
    return q, rng.normal(size=nv), rng.normal(size=nv)


def rel(x, ref):
    return float(np.abs(x - ref).max() / max(np.abs(ref).max(), 1e-300))


def flexible_cut(eng, model):
    """Whether some part hangs from a flexible body (a cut at a flexible handle)."""
    nm = np.asarray(model.flexible.nmodes)
    return any(model.parent[pk.bodies[0]] >= 0 and nm[model.parent[pk.bodies[0]]] > 0 for pk in eng.parts)


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


@pytest.mark.parametrize("early", [False, True])
def test_forward_dynamics_equals_flexible_aba(model, early):
    """Both velocity steps: the handle paths' kinematics, pass 1 whole in the reduction; and
    early kinematics (every part's in the velocity step with the carrier at rest, moved to v_in
    in the reduction)."""
    rng = np.random.default_rng(1)
    q, qd, tau = full_state(model, rng)
    ref = flexible_aba(model, q, qd, tau)
    roots = 1 + int(np.count_nonzero(model.parent[1:] < 0))
    cut = False
    for P in sorted({roots, roots + 1, roots + 3, min(roots + 6, model.n)}):
        eng = SerialEngine(model, P, early_kinematics=early)
        assert all(isinstance(pk, FlexiblePartKernel) and pk.early_kinematics == early for pk in eng.parts)
        got = eng.forward_dynamics(q, qd, tau)
        assert got.shape == ref.shape
        assert rel(got, ref) < 1e-10, P
        cut = cut or flexible_cut(eng, model)
    if model.n > 10:
        assert cut          # the partitions cut at flexible handles


@pytest.mark.parametrize("early", [False, True])
def test_hybrid_dynamics_equals_flexible_hybrid_dynamics(model, early):
    rng = np.random.default_rng(2)
    q, qd, tau = full_state(model, rng)
    qdd = rng.normal(size=qd.size)
    roots = 1 + int(np.count_nonzero(model.parent[1:] < 0))
    eng = SerialEngine(model, min(roots + 3, model.n), early_kinematics=early)
    for frac in (0.0, 0.4, 1.0):
        mask = rng.random(model.n) < frac
        for pk in eng.parts:            # the parts' root joints and handle bodies too
            if frac > 0:
                mask[pk.bodies[0]] = True
                mask[pk.handles_global] = rng.random(pk.H) < 0.5
        ref = flexible_hybrid_dynamics(model, q, qd, tau, qdd, mask)
        got = eng.forward_dynamics(q, qd, tau, active=mask, qdd_active=qdd)
        for x, y in zip(got, ref):
            assert rel(x, y) < 1e-10, frac
    # after hybrid evaluations, plain ones on the same parts: no given acceleration stays behind
    assert rel(eng.forward_dynamics(q, qd, tau), flexible_aba(model, q, qd, tau)) < 1e-10
    none = np.zeros(model.n, dtype=bool)
    got = eng.forward_dynamics(q, qd, tau, active=none, qdd_active=qdd)
    assert rel(got[0], flexible_aba(model, q, qd, tau)) < 1e-10 and np.array_equal(got[1], tau)


def test_the_engine_functions_take_the_full_vectors():
    m = MODELS["chain"]()
    rng = np.random.default_rng(3)
    q, qd, tau = full_state(m, rng)
    got = partree.parallel.forward_dynamics(m, q, qd, tau, backend="serial", parts=4)
    assert rel(got, flexible_aba(m, q, qd, tau)) < 1e-10
    with pytest.raises(PartreeInputError, match="flexible bodies.*modal coordinates"):
        partree.parallel.forward_dynamics(m, q[:m.nq], qd, tau, backend="serial", parts=4)


def test_what_is_not_built_is_refused():
    m = MODELS["chain"]()
    rng = np.random.default_rng(4)
    q, qd, tau = full_state(m, rng)
    eng = SerialEngine(m, 3)
    with pytest.raises(PartreeInputError, match="momentum form.*not built for flexible"):
        eng.momentum_rhs(q, qd)
    with pytest.raises(PartreeInputError, match="wrenches\\(\\) needs a solve"):
        eng.parts[0].wrenches()
    with pytest.raises(PartreeInputError, match="not built for flexible"):
        partree.parallel.momentum_rhs(m, q, qd[:m.nv], backend="serial", parts=2)


def check_cfa(got, ref, what=""):
    """An engine's CFAResult against flexible_cfa's (or flexible_hybrid_forces')."""
    assert got.qdd.shape == ref.qdd.shape and got.drive_force.shape == ref.drive_force.shape
    for name in ("qdd", "joint_wrench", "constraint_force", "drive_force", "constraint_rows"):
        assert rel(getattr(got, name), getattr(ref, name)) < 1e-10, (what, name)


@pytest.mark.parametrize("early", [False, True])
def test_constraint_forces_equal_flexible_cfa(model, early):
    """Each part's joint wrenches by inverse dynamics on its full copy, the child parts' root
    wrenches entering at the handle frames (cuts at flexible handles among them), against the
    serial cut-model recursion; hybrid dynamics' forces against flexible_hybrid_forces."""
    rng = np.random.default_rng(6)
    q, qd, tau = full_state(model, rng)
    qdd = rng.normal(size=qd.size)
    ref = flexible_cfa(model, q, qd, tau)
    roots = 1 + int(np.count_nonzero(model.parent[1:] < 0))
    for P in sorted({roots, roots + 1, roots + 3, min(roots + 6, model.n)}):
        eng = SerialEngine(model, P, early_kinematics=early)
        check_cfa(eng.constraint_forces(q, qd, tau), ref, P)
        mask = rng.random(model.n) < 0.4
        qdd_h, tau_h, href = flexible_hybrid_forces(model, q, qd, tau, qdd, mask)
        check_cfa(eng.constraint_forces(q, qd, tau, active=mask, qdd_active=qdd), href, (P, "hybrid"))
        # a plain evaluation after the hybrid one on the same parts
        check_cfa(eng.constraint_forces(q, qd, tau), ref, (P, "again"))
    got = partree.parallel.constraint_forces(model, q, qd, tau, backend="serial", parts=roots + 2)
    check_cfa(got, ref, "function")


@pytest.mark.parametrize("early", [False, True])
def test_body_wrenches_equal_the_flexible_functions(model, early):
    """External wrenches at the body origins (an (n, 6) array, and a dict by joint name): forward
    and hybrid dynamics and the constraint forces against flexible_aba, flexible_hybrid_dynamics
    and flexible_cfa under the same loads."""
    rng = np.random.default_rng(8)
    q, qd, tau = full_state(model, rng)
    qdd = rng.normal(size=qd.size)
    F = 1e3 * rng.normal(size=(model.n, 6))          # large enough to matter next to the modal forces
    mask = rng.random(model.n) < 0.4
    roots = 1 + int(np.count_nonzero(model.parent[1:] < 0))
    ref = flexible_aba(model, q, qd, tau, F)
    assert rel(ref, flexible_aba(model, q, qd, tau)) > 1e-3          # the loads matter
    href = flexible_hybrid_dynamics(model, q, qd, tau, qdd, mask, F)
    cref = flexible_cfa(model, q, qd, tau, F)
    for P in sorted({roots + 1, min(roots + 5, model.n)}):
        eng = SerialEngine(model, P, early_kinematics=early)
        assert rel(eng.forward_dynamics(q, qd, tau, f_ext=F), ref) < 1e-10
        for x, y in zip(eng.forward_dynamics(q, qd, tau, f_ext=F, active=mask, qdd_active=qdd), href):
            assert rel(x, y) < 1e-10
        check_cfa(eng.constraint_forces(q, qd, tau, f_ext=F), cref, P)
        assert rel(eng.forward_dynamics(q, qd, tau), flexible_aba(model, q, qd, tau)) < 1e-10   # none left behind
    name = model.joint_names[model.n - 1]
    one = np.zeros((model.n, 6))
    one[model.n - 1] = F[-1]
    got = partree.parallel.forward_dynamics(model, q, qd, tau, backend="serial", parts=roots + 1, f_ext={name: F[-1]})
    assert rel(got, flexible_aba(model, q, qd, tau, one)) < 1e-10


def node_loads(model, rng, scale=1e3):
    """Loads at every other node of the flexible bodies (the nodes where child parts hang among
    them) and a wrench at the last body's origin, as a dict."""
    loads = [((b, nd), scale * rng.normal(size=6)) for b, body in model.flexible.bodies.items() for nd in body.nodes]
    f_ext = dict(loads[::2])
    f_ext[model.joint_names[model.n - 1]] = scale * rng.normal(size=6)
    return f_ext


@pytest.mark.parametrize("early", [False, True])
def test_node_loads_equal_the_flexible_functions(model, early):
    """Loads at the nodes of flexible bodies (with a wrench at a body origin): each part applies
    those on its bodies after its pass 1, as flexible_aba does; forward and hybrid dynamics and
    the constraint forces against flexible_aba, flexible_hybrid_dynamics and flexible_cfa under the
    same loads, given as a dict and as packed FlexibleLoads."""
    from partree.algorithms.flexible_dynamics import flexible_loads

    rng = np.random.default_rng(12)
    q, qd, tau = full_state(model, rng)
    qdd = rng.normal(size=qd.size)
    f_ext = node_loads(model, rng)
    ref = flexible_aba(model, q, qd, tau, f_ext)
    assert rel(ref, flexible_aba(model, q, qd, tau)) > 1e-2          # the loads matter
    mask = rng.random(model.n) < 0.4
    href = flexible_hybrid_dynamics(model, q, qd, tau, qdd, mask, f_ext)
    cref = flexible_cfa(model, q, qd, tau, f_ext)
    roots = 1 + int(np.count_nonzero(model.parent[1:] < 0))
    for P in sorted({roots + 1, min(roots + 5, model.n)}):
        eng = SerialEngine(model, P, early_kinematics=early)
        for loads in (f_ext, flexible_loads(model, f_ext)):
            assert rel(eng.forward_dynamics(q, qd, tau, f_ext=loads), ref) < 1e-10
            for x, y in zip(eng.forward_dynamics(q, qd, tau, f_ext=loads, active=mask, qdd_active=qdd), href):
                assert rel(x, y) < 1e-10
            check_cfa(eng.constraint_forces(q, qd, tau, f_ext=loads), cref, P)
        assert rel(eng.forward_dynamics(q, qd, tau), flexible_aba(model, q, qd, tau)) < 1e-10   # none left behind
    got = partree.parallel.constraint_forces(model, q, qd, tau, backend="serial", parts=roots + 2, f_ext=f_ext)
    check_cfa(got, cref, "function")


def test_an_mpi_engine_takes_node_loads_packed():
    """An MPIEngine's ranks hold parts, not the model: loads at nodes come packed
    (``flexible_loads``, built where the model is); by name they are refused with that advice.
    One rank here (several under mpiexec: tests/mpi_scripts/flexible_check.py)."""
    pytest.importorskip("mpi4py")
    from mpi4py import MPI

    from partree.algorithms.flexible_dynamics import flexible_loads
    from partree.parallel.mpi import MPIEngine

    m = MODELS["random-tree"]()
    rng = np.random.default_rng(13)
    q, qd, tau = full_state(m, rng)
    f_ext = node_loads(m, rng)
    eng = MPIEngine(m, comm=MPI.COMM_WORLD, parts=4)
    assert rel(eng.forward_dynamics(q, qd, tau, flexible_loads(m, f_ext)), flexible_aba(m, q, qd, tau, f_ext)) < 1e-10
    with pytest.raises(PartreeInputError, match="flexible_loads\\(model, f_ext\\)"):
        eng.forward_dynamics(q, qd, tau, f_ext)
    with pytest.raises(PartreeInputError, match="loads checked for a model of 3 bodies"):
        eng.forward_dynamics(q, qd, tau, flexible_loads(MODELS["chain"]().select([0, 1, 2]), None))


def test_partition_weights_count_flexible_bodies():
    m = MODELS["chain"]()
    w = default_weights(m)
    rigid = default_weights(m.with_flexible({}))
    nm = np.asarray(m.flexible.nmodes)
    assert np.allclose(w[nm > 0], FLEXIBLE_WEIGHT * rigid[nm > 0])
    assert np.array_equal(w[nm == 0], rigid[nm == 0])


# ----------------------------------------------------------------------------- MPI and Dask
def _mpiexec():
    import shutil
    import sys
    from pathlib import Path

    for cand in (Path(sys.executable).parent / "mpiexec", Path("/work/venv/bin/mpiexec")):
        if cand.exists():
            return str(cand)
    return shutil.which("mpiexec")


@pytest.mark.parametrize("n,script", [(2, "flexible_check.py"), (3, "flexible_check.py"),
                                      (2, "flexible_simulation_check.py"), (3, "flexible_simulation_check.py")])
def test_mpi_matches_flexible_aba(n, script):
    """``mpiexec -n 2`` / ``-n 3``: forward and hybrid dynamics and the constraint forces over MPI
    (tests/mpi_scripts/flexible_check.py); simulations against the serial runs
    (tests/mpi_scripts/flexible_simulation_check.py)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mpi4py")
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    script = Path(__file__).parent / "mpi_scripts" / script
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([mpiexec, "-n", str(n), sys.executable, str(script)], capture_output=True, text=True,
                       timeout=400, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    line = [s for s in p.stdout.splitlines() if s.startswith("OK")]
    assert line, p.stdout + p.stderr
    assert float(line[0].split()[1]) < 1e-10


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_dask_matches_flexible_aba(client):
    """A real LocalCluster: forward and hybrid dynamics, an engine and a resident state, against
    the serial recursion; the constraint forces (from the client, resident, kept on the workers,
    hybrid) against flexible_cfa and flexible_hybrid_forces; loads at body origins and at nodes."""
    from partree.parallel.dask_backend import DaskEngine

    for name in ("chain", "random-tree"):
        m = MODELS[name]()
        rng = np.random.default_rng(5)
        q, qd, tau = full_state(m, rng)
        qdd = rng.normal(size=qd.size)
        ref = flexible_aba(m, q, qd, tau)
        got = partree.parallel.forward_dynamics(m, q, qd, tau, backend="dask", client=client, parts=3)
        assert rel(got, ref) < 1e-10
        with DaskEngine(m, client=client, parts=5) as eng:
            assert rel(eng.forward_dynamics(q, qd, tau), ref) < 1e-10
            assert rel(eng.forward_dynamics_state(eng.scatter_state(q, qd, tau)), ref) < 1e-10
            mask = rng.random(m.n) < 0.4
            href = flexible_hybrid_dynamics(m, q, qd, tau, qdd, mask)
            for x, y in zip(eng.forward_dynamics(q, qd, tau, active=mask, qdd_active=qdd), href):
                assert rel(x, y) < 1e-10
            cref = flexible_cfa(m, q, qd, tau)
            check_cfa(eng.constraint_forces(q, qd, tau), cref, name)
            st = eng.scatter_state(q, qd, tau)
            check_cfa(eng.constraint_forces_state(st), cref, (name, "state"))
            kept = eng.constraint_forces_state(st, gather=False)
            check_cfa(kept.gather(), cref, (name, "kept"))
            check_cfa(eng.constraint_forces(q, qd, tau, active=mask, qdd_active=qdd),
                      flexible_hybrid_forces(m, q, qd, tau, qdd, mask)[2], (name, "hybrid"))
            F = rng.normal(size=(m.n, 6))
            assert rel(eng.forward_dynamics(q, qd, tau, F), flexible_aba(m, q, qd, tau, F)) < 1e-10
            check_cfa(eng.constraint_forces_state(eng.scatter_state(q, qd, tau, F)), flexible_cfa(m, q, qd, tau, F),
                      (name, "loads"))
            loads = node_loads(m, rng)
            assert rel(eng.forward_dynamics(q, qd, tau, loads), flexible_aba(m, q, qd, tau, loads)) < 1e-10
            check_cfa(eng.constraint_forces_state(eng.scatter_state(q, qd, tau, loads)),
                      flexible_cfa(m, q, qd, tau, loads), (name, "node loads"))


def test_dask_simulation_equals_the_serial_run(client):
    """``simulate(..., backend='dask')``: the ranks' loop on the workers over the socket channel,
    with the flexible parts; RK4 (wrenches at body origins) and DOPRI5 (loads at nodes too) against
    the serial run (trajectory, energy, wrenches)."""
    from partree.simulation import simulate

    m = MODELS["threearm"]()
    names = list(m.joint_names)
    F = np.zeros((m.n, 6))
    F[-1] = (0.0, 0.0, 0.1, 0.5, 0.0, -0.2)
    # a wrench at the last body's origin and loads at two tip nodes
    loads = {names[-1]: F[-1], (names[4], "tip"): (0.0, 0.1, 0.0, 0.0, 0.0, 2.0), (names[2], "tip"): np.ones(6)}
    kw = dict(torques={names[1]: lambda t: 2.0 * np.sin(t)}, damping=0.01,
              prescribed={names[0]: lambda t: (0.05 * np.sin(t), 0.05 * np.cos(t), -0.05 * np.sin(t))},
              record="q,qd,energy,wrenches", progress=False, verbose=False)
    for integ, dt, f_ext in (("rk4", 1e-4, F), ("dopri5", 1e-3, loads)):
        kw["f_ext"] = f_ext
        ref = simulate(m, 0.005, dt, integrator=integ, **kw)
        got = simulate(m, 0.005, dt, integrator=integ, backend="dask", client=client, parts=4, **kw)
        assert got.summary["nparts"] == 4
        for name in ("q", "qd", "energy", "joint_wrench"):
            assert rel(np.asarray(getattr(got, name)), np.asarray(getattr(ref, name))) < 1e-9, (integ, name)
