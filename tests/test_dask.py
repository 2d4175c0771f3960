"""Dask backend on a real LocalCluster (2 single-threaded worker processes)."""
import numpy as np
import pytest

import partree
from partree.models.generators import random_tree

distributed = pytest.importorskip("distributed")

MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _state(m, seed):
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)


def test_dask_matches_aba_and_serial(client):
    from partree.parallel import forward_dynamics
    from partree.parallel.dask_backend import DaskEngine

    for m, P in [(partree.models.auto_tree(200, bf=1.2, skew=0.3), 3),
                 (random_tree(150, seed=3, floating_base=True, joint_types=MIXED), 5),
                 (random_tree(100, seed=4, p_chain=0.8, joint_types=MIXED), 2)]:
        eng = DaskEngine(m, client=client, parts=P)
        assert len(set(eng.workers)) == 2
        for s in range(2):                      # parts stay on the workers between evaluations
            q, qd, tau = _state(m, s)
            ref = partree.aba(m, q, qd, tau)
            x = eng.forward_dynamics(q, qd, tau)
            assert np.abs(x - ref).max() / np.abs(ref).max() < 1e-10
            xs = forward_dynamics(m, q, qd, tau, backend="serial", parts=eng.partition)
            assert np.abs(x - xs).max() <= 1e-12 * np.abs(xs).max()
        eng.close()
    q, qd, tau = _state(m, 9)
    x = forward_dynamics(m, q, qd, tau, backend="dask", parts=4, client=client)
    assert np.abs(x - partree.aba(m, q, qd, tau)).max() / np.abs(x).max() < 1e-10


def test_unknown_backend():
    from partree.parallel import forward_dynamics

    m = partree.models.auto_tree(5)
    with pytest.raises(ValueError, match="unknown backend"):
        forward_dynamics(m, m.neutral(), np.zeros(5), np.zeros(5), backend="gpu")


def test_bad_arguments_before_any_work(client, monkeypatch):
    from partree.model import PartreeInputError
    from partree.parallel import dask_backend, forward_dynamics

    m = partree.models.auto_tree(20)
    q, qd, tau = _state(m, 0)

    def no_work(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(dask_backend.DaskEngine, "__init__", no_work)
    with pytest.raises(PartreeInputError, match="parts=21"):
        forward_dynamics(m, q, qd, tau, backend="dask", parts=21, client=client)
    with pytest.raises(PartreeInputError, match=r"q has shape \(19,\)"):
        forward_dynamics(m, q[:19], qd, tau, backend="dask", parts=2, client=client)
    with pytest.raises(PartreeInputError, match="tau"):
        forward_dynamics(m, q, qd, np.zeros(21), backend="dask", parts=2, client=client)


def _kill(client, addr):
    import os

    client.run(os._exit, 1, workers=[addr], on_error="ignore")


def test_resident_state(client):
    """The state scattered once (``scatter_state``) gives the same qdd as arrays sent with every
    evaluation; qdd left on the workers (``gather=False``) gathers to the same values; external
    forces travel with the state."""
    from partree.parallel.dask_backend import DaskEngine, DaskResult

    m = random_tree(180, seed=21, floating_base=True, joint_types=MIXED)
    eng = DaskEngine(m, client=client, parts=5)
    try:
        for s in range(2):
            q, qd, tau = _state(m, 30 + s)
            F = np.random.default_rng(s).normal(size=(m.n, 6)) if s else None
            ref = partree.aba(m, q, qd, tau, f_ext=F)
            st = eng.scatter_state(q, qd, tau, F)
            x1 = eng.forward_dynamics_state(st)
            r = eng.forward_dynamics_state(st, gather=False)
            assert isinstance(r, DaskResult)
            x2 = r.gather()
            x3 = eng.forward_dynamics(q, qd, tau, F)
            assert np.abs(x1 - ref).max() < 1e-10 * np.abs(ref).max()
            assert np.array_equal(x1, x2) and np.array_equal(x1, x3)
            assert eng.last_info["boundary_bytes"] > 0 and eng.last_info["state_bytes"] > 0
            st.release()
        q, qd, tau = _state(m, 40)
        q[7] = np.nan
        with pytest.raises(partree.PartreeInputError, match="q"):
            eng.forward_dynamics(q, qd, tau)
    finally:
        eng.close()


@pytest.mark.parametrize("channel", ["socket", "actors"])
def test_worker_killed_mid_evaluation_recovers(channel):
    """A real LocalCluster; one worker process is killed (os._exit) during an evaluation (after
    its first round through the client, or, over the socket channel, as the evaluation's calls go
    out): the evaluation restarts on the surviving / restarted workers and is correct, with the
    state sent along or resident on the workers."""
    from partree.parallel.dask_backend import DaskEngine

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        m = random_tree(300, seed=5, floating_base=True, joint_types=MIXED)
        q, qd, tau = _state(m, 1)
        ref = partree.aba(m, q, qd, tau)
        eng = DaskEngine(m, client=c, parts=4, timeout=60, channel=channel)
        assert np.abs(eng.forward_dynamics(q, qd, tau) - ref).max() < 1e-10 * np.abs(ref).max()
        victim = eng.workers[0]
        fired = []

        def hook(name):
            if not fired:
                fired.append(name)
                _kill(c, victim)

        eng._after_round = hook
        x = eng.forward_dynamics(q, qd, tau)
        assert fired and eng.restarts >= 1
        assert np.abs(x - ref).max() < 1e-10 * np.abs(ref).max()
        assert victim not in eng.workers
        eng._after_round = None
        q2, qd2, tau2 = _state(m, 2)           # and the engine keeps working
        x2 = eng.forward_dynamics(q2, qd2, tau2)
        ref2 = partree.aba(m, q2, qd2, tau2)
        assert np.abs(x2 - ref2).max() < 1e-10 * np.abs(ref2).max()
        # a resident state survives the loss of a worker too (its slices are sent again)
        c.wait_for_workers(2, timeout=30)
        st = eng.scatter_state(q2, qd2, tau2)
        fired.clear()
        victim = eng.workers[1]
        eng._after_round = hook
        x3 = eng.forward_dynamics_state(st)
        assert fired and eng.restarts >= 2
        assert np.abs(x3 - ref2).max() < 1e-10 * np.abs(ref2).max()
        eng._after_round = None
    finally:
        c.close()
        cluster.close()


def test_all_workers_lost_is_a_clear_error_not_a_hang():
    import time

    from partree.parallel.dask_backend import DaskEngine, DaskEngineError

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        m = partree.models.auto_tree(100, bf=1.3)
        q, qd, tau = _state(m, 3)
        eng = DaskEngine(m, client=c, parts=2, retries=1, timeout=30)
        eng.forward_dynamics(q, qd, tau)

        def hook(name):                       # the only worker goes, and its nanny is closed too
            for w in list(cluster.workers.values()):
                c.loop.add_callback(w.close)
            time.sleep(1.0)

        eng._after_round = hook
        t = time.perf_counter()
        with pytest.raises(DaskEngineError, match="lost|no worker|did not finish"):
            eng.forward_dynamics(q, qd, tau)
        assert time.perf_counter() - t < 40
    finally:
        c.close()
        cluster.close()


def test_dask_external_forces(client):
    from partree.parallel import forward_dynamics

    m = random_tree(80, seed=12, joint_types=MIXED)
    q, qd, tau = _state(m, 4)
    F = np.random.default_rng(1).normal(size=(m.n, 6))
    ref = partree.aba(m, q, qd, tau, f_ext=F)
    x = forward_dynamics(m, q, qd, tau, backend="dask", parts=3, client=client, f_ext=F)
    assert np.abs(x - ref).max() < 1e-10 * np.abs(ref).max()


def test_dask_constraint_forces_equal_cfa(client):
    from partree.parallel import constraint_forces
    from partree.parallel.dask_backend import DaskEngine

    def rel(a, b):
        return float(np.abs(a - b).max() / np.abs(b).max())

    m = random_tree(150, seed=5, floating_base=True, joint_types=MIXED)
    F = np.random.default_rng(6).normal(size=(m.n, 6))
    for parts in (5, 2):
        eng = DaskEngine(m, client=client, parts=parts)
        for s in range(2):
            q, qd, tau = _state(m, 30 + s)
            ref = partree.cfa(m, q, qd, tau, f_ext=F)
            res = eng.constraint_forces(q, qd, tau, F)
            for a, b in ((res.qdd, ref.qdd), (res.joint_wrench, ref.joint_wrench),
                         (res.constraint_force, ref.constraint_force), (res.drive_force, ref.drive_force)):
                assert rel(a, b) < 1e-10
            assert np.abs(res.constraint_rows - ref.constraint_rows).max() < 1e-12
            assert res.method == "parallel-dask"
        st = eng.scatter_state(q, qd, tau, F)       # a state resident on the workers
        res2 = eng.constraint_forces_state(st)
        assert np.array_equal(res2.joint_wrench, res.joint_wrench)
        assert np.array_equal(res2.constraint_force, res.constraint_force)
        kept = eng.constraint_forces_state(st, gather=False)     # the pieces stay on the workers
        res3 = kept.gather()
        assert np.array_equal(res3.joint_wrench, res.joint_wrench) and np.array_equal(res3.qdd, res.qdd)
        assert np.array_equal(res3.drive_force, res.drive_force)
        st.release()
        eng.close()
    q, qd, tau = _state(m, 40)
    res = constraint_forces(m, q, qd, tau, backend="dask", parts=3, client=client)
    assert rel(res.joint_wrench, partree.cfa(m, q, qd, tau).joint_wrench) < 1e-10


def test_socket_and_actor_channels_agree(client):
    """The socket channel (the workers' actors exchange the boundary data among themselves) and
    the rounds through the client compute the same bits: forward dynamics, hybrid dynamics, the
    constraint forces, with the state sent along and resident, the momentum form; a rank's error over the socket
    channel reaches the client as it is, and the group forms again for the next evaluation."""
    from partree.parallel.dask_backend import DaskEngine

    m = random_tree(160, seed=17, floating_base=True, joint_types=MIXED)
    q, qd, tau = _state(m, 50)
    mask = np.random.default_rng(3).random(m.n) < 0.3
    qdd_a = np.random.default_rng(4).normal(size=m.nv)
    got = {}
    for channel in ("socket", "actors"):
        with DaskEngine(m, client=client, parts=5, channel=channel, poses=True) as eng:
            st = eng.scatter_state(q, qd, tau)
            got[channel] = (eng.forward_dynamics(q, qd, tau), eng.forward_dynamics_state(st),
                            *eng.forward_dynamics(q, qd, tau, active=mask, qdd_active=qdd_a),
                            eng.constraint_forces(q, qd, tau).joint_wrench,
                            eng.constraint_forces_state(st).constraint_force,
                            *eng.momentum_rhs(q, qd, tau))
            if channel == "socket":
                assert eng.last_info["channel"] == "socket"
                bad = q.copy()
                bad[-1] = np.inf
                with pytest.raises(partree.PartreeInputError, match="q"):
                    eng.forward_dynamics(bad, qd, tau)
                assert np.array_equal(eng.forward_dynamics(q, qd, tau), got[channel][0])
    ref = partree.aba(m, q, qd, tau)
    assert np.abs(got["socket"][0] - ref).max() < 1e-10 * np.abs(ref).max()
    qdot, pdot = partree.momentum_rhs(m, 0.0, q, qd, tau)
    assert np.abs(got["socket"][-1] - pdot).max() < 1e-10 * np.abs(pdot).max()
    for a, b in zip(got["socket"], got["actors"]):
        assert np.array_equal(a, b)


def test_unknown_channel():
    from partree.parallel.dask_backend import DaskEngine

    with pytest.raises(partree.PartreeInputError, match="channel"):
        DaskEngine(partree.models.auto_tree(10), channel="carrier-pigeon")
