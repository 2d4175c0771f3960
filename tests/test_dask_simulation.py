"""simulate(..., backend='dask') on a real LocalCluster (2 worker processes): the MPI backend's loop
run by the workers over the socket channel.  Every integrator, the momentum form, equals the
serial run; a worker killed mid-run is replaced and the run completes with the trajectory of an
uninterrupted one, bit for bit; errors on the workers reach the client."""
import functools
import os
import threading
import time

import numpy as np
import pytest

from partree.models.generators import random_tree
from partree.simulation import simulate

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _model():
    return random_tree(30, seed=6, floating_base=True, joint_types=("revolute", "spherical", "universal", "prismatic"))


def _inputs(m):
    rng = np.random.default_rng(4)
    return dict(q0=m.random_configuration(rng), qd0=m.random_velocity(rng, 0.5), torques=rng.normal(size=m.nv) * 0.1,
                damping=0.05, progress=False, verbose=False)


@pytest.mark.parametrize("formulation", ["velocity", "momentum"])
def test_every_integrator_equals_the_serial_run(client, formulation):
    m = _model()
    kw = dict(_inputs(m), formulation=formulation)
    for integ, t_end, dt, extra in [("rk4", 0.006, 1e-3, {"save_every": 2}), ("dopri5", 0.1, 0.05, {}),
                                    ("gauss6", 0.004, 1e-3, {}), ("dop853", 0.1, 0.1, {}),
                                    ("symplectic-euler", 0.003, 1e-3, {})]:
        a = simulate(m, t_end, dt, integrator=integ, backend="dask", client=client, parts=3, **kw, **extra)
        b = simulate(m, t_end, dt, integrator=integ, **kw, **extra)
        assert a.t.shape == b.t.shape
        for name in ("q", "qd"):
            x, y = getattr(a, name), getattr(b, name)
            assert np.abs(x - y).max() < 1e-12 * max(1.0, np.abs(y).max()), (integ, name)
        assert a.summary["steps"] == b.summary["steps"] and a.summary["f_evals"] == b.summary["f_evals"], integ
        assert a.summary["backend"] == "dask" and a.summary["nparts"] == 3 and a.summary["workers"] == 2


def test_the_step_runs_on_the_workers(client, tmp_path):
    """The step hook runs on the workers' ranks with the rank's own pieces of the state (arrays
    of the rank's parts' sizes, not the whole state), in processes other than the client's."""
    m = _model()
    log = tmp_path / "hook.txt"

    def hook(k, t, q, v):
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()} {q.size} {v.size}\n")

    simulate(m, 0.003, 1e-3, backend="dask", client=client, parts=2, _step_hook=hook, **_inputs(m))
    rows = [tuple(map(int, s.split())) for s in log.read_text().splitlines()]
    assert len(rows) == 6 and os.getpid() not in {r[0] for r in rows}
    sizes = {pid: {(nq, nv) for p, nq, nv in rows if p == pid} for pid in {r[0] for r in rows}}
    assert len(sizes) == 2 and all(len(s) == 1 for s in sizes.values())      # two ranks, one piece each
    assert sum(next(iter(s))[1] for s in sizes.values()) == m.nv
    assert sum(next(iter(s))[0] for s in sizes.values()) == m.nq


def test_an_error_on_a_worker_reaches_the_client(client):
    class Boom(Exception):
        pass

    def hook(k, t, q, v):
        if k == 2:
            raise Boom("at tick 2")

    m = _model()
    with pytest.raises(Boom, match="at tick 2"):
        simulate(m, 0.01, 1e-3, backend="dask", client=client, parts=2, _step_hook=hook, **_inputs(m))


def _kill_when(c, path, marker, done):
    """Kill a worker process (os._exit, as a crash) once ``path`` exists (the run's first
    checkpoint: the run is under way), then write ``marker``."""
    while not done.is_set():
        if os.path.exists(path):
            time.sleep(0.05)
            w = sorted(c.scheduler_info()["workers"])[0]
            c.run(os._exit, 1, workers=[w], on_error="ignore")
            open(marker, "w").close()
            return
        time.sleep(0.01)


def _hold_until(marker, tick, k, t, q, v):
    """Step hook: every rank waits at ``tick`` (after the first checkpoint) until ``marker``
    exists, so that the worker is killed mid-run however fast the run goes; the resumed run finds
    the marker and goes on.  It changes no state."""
    if k == tick:
        deadline = time.monotonic() + 60
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.01)


@pytest.mark.parametrize("integ", ["rk4", "dopri5"])
def test_a_worker_killed_mid_run_the_run_completes_alike(integ, tmp_path):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        m = random_tree(40, seed=2, joint_types=("revolute", "universal"))
        kw = dict(_inputs(m), integrator=integ, t_end=1.5 if integ == "rk4" else 3.0,
                  dt=1e-3 if integ == "rk4" else 0.01, save_every=50 if integ == "rk4" else 1, parts=2)
        ref = simulate(m, backend="dask", client=c, **kw)
        serial = simulate(m, **kw)
        ck = tmp_path / "run.ckpt"
        marker = str(tmp_path / "killed")
        every = 100 if integ == "rk4" else 20
        done = threading.Event()
        killer = threading.Thread(target=_kill_when, args=(c, str(ck), marker, done), daemon=True)
        killer.start()
        t0 = time.perf_counter()
        try:
            res = simulate(m, backend="dask", client=c, checkpoint=ck, checkpoint_every=every,
                           _step_hook=functools.partial(_hold_until, marker, every + 5), **kw)
        finally:
            done.set()
            killer.join()
        assert time.perf_counter() - t0 < 240
        assert res.summary.get("restarts"), "no worker was lost during the run"
        for name in ("t", "q", "qd", "energy"):
            assert np.array_equal(getattr(res, name), getattr(ref, name)), name
        assert res.summary["steps"] == ref.summary["steps"] and res.summary["f_evals"] == ref.summary["f_evals"]
        assert np.abs(res.q - serial.q).max() < 1e-10
    finally:
        c.close()
        cluster.close()


def test_many_parts_run_on_the_flat_root(client):
    """70 parts (where MPIEngine's root='auto' would take the hierarchical root): the Dask ranks'
    engines take the flat root over the socket channel, and the run equals the serial one."""
    m = random_tree(150, seed=8, joint_types=("revolute", "prismatic"))
    kw = _inputs(m)
    a = simulate(m, 0.003, 1e-3, backend="dask", client=client, parts=70, **kw)
    b = simulate(m, 0.003, 1e-3, **kw)
    assert a.summary["nparts"] == 70
    assert np.abs(a.q - b.q).max() < 1e-12 and np.abs(a.qd - b.qd).max() < 1e-12


def test_the_workers_profiler_pauses_during_the_run_and_resumes(client, tmp_path):
    """The worker's statistical profiler is stopped while the ranks' loop runs (it would sample the
    loop's thread every 10 ms) and running again afterwards."""
    m = _model()
    log = tmp_path / "profiler.txt"

    def running(dask_worker):
        pc = dask_worker.periodic_callbacks.get("profile")
        return None if pc is None else pc.is_running()

    before = client.run(running)
    if not all(before.values()):
        pytest.skip("the workers' profiler is not enabled")

    def hook(k, t, q, v):
        from distributed import get_worker

        if k >= 3:          # the stop is scheduled on the worker's event loop: a few steps in
            with open(log, "a") as fh:
                fh.write(f"{int(get_worker().periodic_callbacks['profile'].is_running())}\n")

    simulate(m, 0.02, 1e-3, backend="dask", client=client, parts=2, _step_hook=hook, **_inputs(m))
    seen = {int(s) for s in log.read_text().split()}
    assert seen == {0}
    deadline = time.monotonic() + 10
    while not all(client.run(running).values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(client.run(running).values())
