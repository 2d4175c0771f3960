"""Hybrid dynamics through the parallel engine (``partree.parallel.forward_dynamics(...,
active=..., qdd_active=...)``, the engines' ``forward_dynamics``) against independent references:
the serial ``partree.hybrid_dynamics`` (itself checked against the dense partitioned solve), ABA
with every joint passive and RNEA's forces with every joint active; partitions that cut through
active joints (on the handle paths, at the parts' roots); the joint-name form; a real Dask
LocalCluster; the MPI engine on a one-rank communicator (``mpiexec`` runs:
tests/mpi_scripts/hybrid_check.py); distributed simulations with prescribed motion against the
serial run; refusals."""
import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.models import random_tree
from partree.parallel import SerialEngine, forward_dynamics
from partree.simulation import simulate
from partree.simulation.motions import PolynomialMotion, SineMotion

from test_mpi import MPIEXEC, _ok_line

ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def rel(a, b):
    """Largest difference relative to the largest reference entry."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def tree(seed, floating_base, n=40, p_chain=0.5, max_children=None):
    return random_tree(n, seed=seed, floating_base=floating_base, joint_types=ALL_TYPES, p_chain=p_chain,
                       max_children=max_children)


def state(m, rng):
    q, qd = m.random_configuration(rng), m.random_velocity(rng, 1.5)
    return q, qd, rng.normal(size=m.nv), rng.normal(size=m.nv), rng.normal(size=(m.n, 6))


def cutting_mask(eng, rng):
    """Active joints where the partition makes work: every part's root joint, about half the
    bodies on the handle paths, and a few others."""
    mask = rng.random(eng.model.n) < 0.2
    for pk in eng.parts:
        b = pk.bodies
        mask[b[0]] = True
        on = np.flatnonzero(pk.slot >= 0)
        mask[b[on[rng.random(on.size) < 0.5]]] = True
    return mask


CASES = [(seed, fb) for seed in (1, 2) for fb in (False, True)]


@pytest.mark.parametrize("seed,floating_base", CASES)
def test_serial_engine_equals_hybrid_dynamics(seed, floating_base):
    m = tree(seed, floating_base)
    rng = np.random.default_rng(seed)
    for P in (1, 2, 3, 7):
        eng = SerialEngine(m, P)
        for frac in (0.0, 0.3, 0.7, 1.0, "cut"):
            q, qd, tau, qdd, F = state(m, rng)
            mask = cutting_mask(eng, rng) if frac == "cut" else rng.random(m.n) < frac
            for fe in (None, F):
                ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, fe)
                got = eng.forward_dynamics(q, qd, tau, fe, active=mask, qdd_active=qdd)
                assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10, (P, frac)
                assert np.array_equal(got[0][np.repeat(mask, m.nv_j)], qdd[np.repeat(mask, m.nv_j)])
                assert np.array_equal(got[1][np.repeat(~mask, m.nv_j)], tau[np.repeat(~mask, m.nv_j)])


def same_forces(got, ref, tol=1e-10):
    for a in ("qdd", "joint_wrench", "constraint_force", "drive_force"):
        assert rel(getattr(got, a), getattr(ref, a)) < tol, a


@pytest.mark.parametrize("seed,floating_base", CASES)
def test_serial_engine_reaction_forces_equal_hybrid_dynamics(seed, floating_base):
    """constraint_forces(..., active=, qdd_active=) through the parts equals
    partree.hybrid_dynamics(..., return_forces=True), itself checked against partree.cfa."""
    m = tree(seed, floating_base)
    rng = np.random.default_rng(40 + seed)
    for P in (1, 3, 7):
        eng = SerialEngine(m, P)
        q, qd, tau, qdd, F = state(m, rng)
        for mask in (rng.random(m.n) < 0.4, cutting_mask(eng, rng)):
            ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F, return_forces=True)[2]
            same_forces(eng.constraint_forces(q, qd, tau, F, active=mask, qdd_active=qdd), ref)
        # and the plain evaluation after a hybrid one takes the given forces again
        same_forces(eng.constraint_forces(q, qd, tau, F), partree.cfa(m, q, qd, tau, F))
    names = [m.joint_names[i] for i in range(0, m.n, 4)]
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, names, return_forces=True)[2]
    same_forces(partree.parallel.constraint_forces(m, q, qd, tau, parts=4, active=names, qdd_active=qdd), ref)


@pytest.mark.parametrize("seed,floating_base", CASES)
def test_all_passive_is_aba_and_all_active_is_rnea(seed, floating_base):
    m = tree(seed, floating_base)
    rng = np.random.default_rng(10 + seed)
    q, qd, tau, qdd, F = state(m, rng)
    for P in (1, 4):
        eng = SerialEngine(m, P)
        got_q, got_t = eng.forward_dynamics(q, qd, tau, F, active=np.zeros(m.n, dtype=bool), qdd_active=qdd)
        assert rel(got_q, partree.aba(m, q, qd, tau, F)) < 1e-10 and np.array_equal(got_t, tau)
        got_q, got_t = eng.forward_dynamics(q, qd, np.full(m.nv, np.nan), F, active=np.ones(m.n, dtype=bool),
                                            qdd_active=qdd)
        assert rel(got_t, partree.rnea(m, q, qd, qdd, F)) < 1e-10 and np.array_equal(got_q, qdd)


def test_active_joints_on_chains_cut_into_parts():
    """Long chains of every joint type cut into parts: every body of all parts but the last is on
    a handle path, so active joints there change the walk's sensitivities (not their updates)
    and the back-substitution carries their forces."""
    rng = np.random.default_rng(3)
    for floating_base in (False, True):
        m = tree(5, floating_base, n=60, max_children=1)
        assert np.array_equal(m.parent, np.arange(m.n) - 1)
        q, qd, tau, qdd, F = state(m, rng)
        for P in (2, 3, 5):
            eng = SerialEngine(m, P)
            assert all(np.all(pk.slot >= 0) for pk in eng.parts[:-1])
            for _ in range(3):
                mask = cutting_mask(eng, rng)
                ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F)
                got = eng.forward_dynamics(q, qd, tau, F, active=mask, qdd_active=qdd)
                assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10


def test_without_active_nothing_changes():
    """No ``active``: qdd alone, the same bits as before a hybrid evaluation of the same engine."""
    m = tree(4, True)
    rng = np.random.default_rng(4)
    q, qd, tau, qdd, F = state(m, rng)
    eng = SerialEngine(m, 3)
    before = eng.forward_dynamics(q, qd, tau, F)
    eng.forward_dynamics(q, qd, tau, F, active=rng.random(m.n) < 0.5, qdd_active=qdd)
    after = eng.forward_dynamics(q, qd, tau, F)
    assert isinstance(after, np.ndarray) and np.array_equal(before, after)
    assert rel(after, partree.aba(m, q, qd, tau, F)) < 1e-10
    assert np.array_equal(forward_dynamics(m, q, qd, tau, parts=3, f_ext=F), after)


def test_joint_names_and_ignored_entries():
    m = tree(6, False, n=20)
    rng = np.random.default_rng(6)
    q, qd, tau, qdd, F = state(m, rng)
    mask = rng.random(m.n) < 0.5
    names = [m.joint_names[i] for i in np.flatnonzero(mask)]
    dof = np.repeat(mask, m.nv_j)
    tau_nan, qdd_nan = tau.copy(), qdd.copy()
    tau_nan[dof] = np.nan          # the entries that are not read may be anything
    qdd_nan[~dof] = np.nan
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F)
    got = forward_dynamics(m, q, qd, tau_nan, parts=3, f_ext=F, active=names, qdd_active=qdd_nan)
    assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10


def test_bad_input_is_refused():
    m = tree(7, False, n=12)
    q, qd = m.neutral(), np.zeros(m.nv)
    tau, qdd = np.zeros(m.nv), np.zeros(m.nv)
    with pytest.raises(PartreeInputError, match=r"active has shape \(11,\).*\(12,\)"):
        forward_dynamics(m, q, qd, tau, parts=2, active=np.zeros(m.n - 1, dtype=bool), qdd_active=qdd)
    with pytest.raises(PartreeInputError, match="does not have.*'nope'"):
        forward_dynamics(m, q, qd, tau, parts=2, active=["nope", m.joint_names[1]], qdd_active=qdd)
    with pytest.raises(PartreeInputError, match="joint indices are not accepted"):
        forward_dynamics(m, q, qd, tau, parts=2, active=[1, 2], qdd_active=qdd)
    mask = np.zeros(m.n, dtype=bool)
    mask[m.nv_j > 0] = True
    mask[np.flatnonzero(m.nv_j > 0)[0]] = False     # one passive joint with coordinates
    bad = np.zeros(m.nv)
    bad[np.repeat(~mask, m.nv_j)] = np.nan
    with pytest.raises(PartreeInputError, match=r"^tau\["):
        forward_dynamics(m, q, qd, bad, parts=2, active=mask, qdd_active=qdd)
    bad = np.full(m.nv, np.nan)
    with pytest.raises(PartreeInputError, match=r"^qdd_active\["):
        forward_dynamics(m, q, qd, tau, parts=2, active=mask, qdd_active=bad)
    with pytest.raises(PartreeInputError, match=r"qdd_active has shape"):
        forward_dynamics(m, q, qd, tau, parts=2, active=mask, qdd_active=np.zeros(m.nv + 1))
    eng = SerialEngine(m, 2)
    with pytest.raises(PartreeInputError, match="active has shape"):
        eng.forward_dynamics(q, qd, tau, active=np.ones(m.n + 1, dtype=bool), qdd_active=qdd)
    with pytest.raises(PartreeInputError, match="does not have"):
        eng.forward_dynamics(q, qd, tau, active="nope", qdd_active=qdd)
    from loop_models import four_bar
    fb = four_bar()
    with pytest.raises(PartreeInputError, match="loops: hybrid dynamics"):
        forward_dynamics(fb, fb.neutral(), np.zeros(fb.nv), np.zeros(fb.nv), active=np.ones(fb.n, dtype=bool),
                         qdd_active=np.zeros(fb.nv))


def test_mpi_engine_on_one_rank():
    """The MPI engine's code path (evaluate_local with the flags) on a one-rank communicator;
    real ranks: test_mpiexec_hybrid_matches_serial."""
    pytest.importorskip("mpi4py")
    from partree.parallel.mpi import MPIEngine

    m = tree(8, True)
    rng = np.random.default_rng(8)
    q, qd, tau, qdd, F = state(m, rng)
    mask = rng.random(m.n) < 0.5
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F)
    for got in (forward_dynamics(m, q, qd, tau, backend="mpi", parts=4, f_ext=F, active=mask, qdd_active=qdd),
                MPIEngine(m, parts=3).forward_dynamics(q, qd, tau, F, active=[m.joint_names[i] for i in
                                                                              np.flatnonzero(mask)], qdd_active=qdd)):
        assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_local_cluster_equals_hybrid_dynamics(dask_client):
    from partree.parallel.dask_backend import DaskEngine

    m = tree(9, True, p_chain=0.8)
    rng = np.random.default_rng(9)
    q, qd, tau, qdd, F = state(m, rng)
    eng = DaskEngine(m, client=dask_client, parts=5)
    try:
        for mask in (rng.random(m.n) < 0.5, cutting_mask(SerialEngine(m, eng.partition), rng),
                     np.ones(m.n, dtype=bool)):
            ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F)
            got = eng.forward_dynamics(q, qd, tau, F, active=mask, qdd_active=qdd)
            assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10
        assert rel(eng.forward_dynamics(q, qd, tau, F), partree.aba(m, q, qd, tau, F)) < 1e-10
    finally:
        eng.close()
    names = [m.joint_names[i] for i in range(0, m.n, 3)]
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, names)
    got = forward_dynamics(m, q, qd, tau, backend="dask", client=dask_client, parts=3, active=names,
                           qdd_active=qdd)
    assert rel(got[0], ref[0]) < 1e-10 and rel(got[1], ref[1]) < 1e-10
    # the reaction forces of the hybrid motion
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, names, F, return_forces=True)[2]
    got = partree.parallel.constraint_forces(m, q, qd, tau, backend="dask", client=dask_client, parts=3, f_ext=F,
                                             active=names, qdd_active=qdd)
    same_forces(got, ref)


# ------------------------------------------------------------ simulations with prescribed motion
def _prescribed_run(m):
    """A run's inputs with three one-DOF joints prescribed (sine and polynomial laws)."""
    one = [m.joint_names[i] for i in range(m.n) if m.nv_j[i] == 1]
    pres = {one[1]: SineMotion(0.2, 3.0, 0.1, 0.05), one[len(one) // 2]: PolynomialMotion([0.0, 0.3, -0.5]),
            one[-1]: SineMotion(0.1, 5.0)}
    rng = np.random.default_rng(2)
    q0, qd0 = partree.simulation.motions.initial_state(m, pres, m.random_configuration(rng, 0.5),
                                                       m.random_velocity(rng, 0.5))
    return dict(q0=q0, qd0=qd0, prescribed=pres, torques=0.1 * rng.normal(size=m.nv), damping=0.05, record="all",
                progress=False, verbose=False), pres


def _check_against_serial(m, res, ref, pres):
    scale = max(np.abs(ref.qd).max(), 1.0)
    assert np.abs(res.q - ref.q).max() < 1e-10 and np.abs(res.qd - ref.qd).max() / scale < 1e-10
    assert rel(res.qdd, ref.qdd) < 1e-10 and rel(res.tau, ref.tau) < 1e-10
    for name, f in pres.items():                 # the prescribed joints follow their laws
        j = m.joint_names.index(name)
        law = np.array([f(t) for t in res.t])
        assert np.abs(res.qdd[:, m.idx_v[j]] - law[:, 2]).max() < 1e-12
        assert np.abs(res.q[:, m.idx_q[j]] - law[:, 0]).max() < 1e-6


def _sim_model():
    return random_tree(30, seed=11, floating_base=True, joint_types=("revolute", "prismatic", "universal",
                                                                      "spherical"), p_chain=0.7)


def test_mpi_simulation_with_prescribed_motion_on_one_rank():
    pytest.importorskip("mpi4py")
    m = _sim_model()
    kw, pres = _prescribed_run(m)
    ref = simulate(m, 0.05, 1e-3, **kw)
    res = simulate(m, 0.05, 1e-3, backend="mpi", parts=4, **kw)
    _check_against_serial(m, res, ref, pres)


def test_dask_simulation_with_prescribed_motion(dask_client):
    m = _sim_model()
    kw, pres = _prescribed_run(m)
    for integrator in ("rk4", "dopri5"):
        ref = simulate(m, 0.05, 1e-3, integrator=integrator, **kw)
        res = simulate(m, 0.05, 1e-3, integrator=integrator, backend="dask", client=dask_client, parts=3, **kw)
        _check_against_serial(m, res, ref, pres)


def test_dask_simulation_with_seed_inputs(dask_client):
    """The object form of prescribed motion (``HybridInputs``: seed 002's three-arm manipulator)."""
    from partree.models.seeds import three_arm_inputs, three_arm_manipulator

    m, inp = three_arm_manipulator(), three_arm_inputs()
    kw = dict(prescribed=inp, torques={j: (lambda t: 10.0 * np.sin(t)) for j in inp.passive}, record="all",
              progress=False, verbose=False)
    ref = simulate(m, 0.1, 1e-2, **kw)
    res = simulate(m, 0.1, 1e-2, backend="dask", client=dask_client, parts=3, **kw)
    assert np.abs(res.q - ref.q).max() < 1e-10 and rel(res.tau, ref.tau) < 1e-10


def test_local_inputs_flag_and_evaluate_their_own_prescribed_joints():
    """A piece's prescribed joints (``LocalInputs.active``, ``prescribed_qdd``) are the whole
    run's entries, for the dict form and the object form (seed 002's ``HybridInputs``)."""
    from partree.models.seeds import three_arm_inputs, three_arm_manipulator
    from partree.simulation import Dynamics

    m = _sim_model()
    for model, prescribed in ((m, _prescribed_run(m)[1]), (three_arm_manipulator(), three_arm_inputs())):
        dyn = Dynamics(model, prescribed=prescribed)
        dofs, _, _, qdd_a = dyn.prescribed(0.37)
        whole = np.zeros(model.nv)
        whole[dofs] = qdd_a
        for bodies in (np.arange(0, model.n, 2), np.arange(1, model.n, 2)[::-1]):
            vsel = np.concatenate([np.arange(model.idx_v[b], model.idx_v[b] + model.nv_j[b]) for b in bodies])
            qsel = np.concatenate([np.arange(model.idx_q[b], model.idx_q[b] + model.nq_j[b]) for b in bodies])
            loc = dyn.restrict(vsel, qsel, bodies)
            assert np.array_equal(loc.active, dyn._active_joints[bodies])
            assert np.array_equal(loc.prescribed_qdd(0.37), np.where(np.repeat(loc.active, model.nv_j[bodies]),
                                                                     whole[vsel], 0.0))


def test_whole_state_evaluation_on_the_engine():
    """``Dynamics(prescribed=..., backend='mpi')`` (the engine inside a serial loop, one rank)
    evaluates the hybrid problem through the engine, equal to the serial evaluation."""
    pytest.importorskip("mpi4py")
    from partree.simulation import Dynamics

    m = _sim_model()
    kw, pres = _prescribed_run(m)
    rng = np.random.default_rng(12)
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    fe = {m.joint_names[3]: rng.normal(size=6)}
    ref = Dynamics(m, prescribed=pres, torques=kw["torques"], f_ext=fe)
    eng = Dynamics(m, prescribed=pres, torques=kw["torques"], f_ext=fe, backend="mpi", parts=3)
    assert rel(eng(0.3, q, qd), ref(0.3, q, qd)) < 1e-10 and rel(eng.last_tau, ref.last_tau) < 1e-10


def test_distributed_prescribed_refusals():
    pytest.importorskip("mpi4py")
    m = random_tree(8, seed=3, joint_types=("spherical", "revolute"))
    sph = next(m.joint_names[i] for i in range(m.n) if m.nv_j[i] == 3)
    with pytest.raises(PartreeInputError, match="some but not all of a joint's dofs"):
        simulate(m, 0.01, 1e-3, backend="mpi", parts=2, prescribed={sph: SineMotion(0.1, 1.0)}, progress=False)
    rev = next(m.joint_names[i] for i in range(m.n) if m.nv_j[i] == 1)
    with pytest.raises(PartreeInputError, match="prescribed motion .* has no momentum form"):
        simulate(m, 0.01, 1e-3, backend="mpi", parts=2, prescribed={rev: SineMotion(0.1, 1.0)},
                 formulation="momentum", progress=False)


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
@pytest.mark.parametrize("n", [2, 3])
def test_mpiexec_hybrid_matches_serial(n):
    """forward_dynamics(..., backend='mpi', active=...) and a run with prescribed motion under
    real mpiexec against hybrid_dynamics and the serial run (tests/mpi_scripts/hybrid_check.py)."""
    err, run_err = _ok_line(n, "hybrid_check.py")
    assert float(err) < 1e-10 and float(run_err) < 1e-10
