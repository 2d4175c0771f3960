"""partree.simulate with flexible bodies (serial backend): the state [q; eta], [qd; eta_dot];
against independent references: a plain RK4 loop over flexible_aba / flexible_hybrid_dynamics,
the energy (kinetic + gravity + elastic) of a conservative run, the rigid model's trajectory in
the stiff limit, and an uninterrupted run for a resumed one."""
import os

import numpy as np
import pytest

import partree
from partree.algorithms.flexible_dynamics import (flexible_aba, flexible_energy, flexible_hybrid_dynamics,
                                                  flexible_state_size)
from partree.errors import PartreeInputError
from partree.model import Model
from partree.models.beam import euler_bernoulli_beam
from partree.simulation import load_results, simulate


def _pair(n=3, bending="yz", modes=3, scale=1.0, damping_ratio=0.0):
    """A chain of n beams on revolute joints about z, rigid and with every link flexible."""
    body, mass, com, I_com = euler_bernoulli_beam(0.8, 50.0, 2.0, modes, bending=bending, polar=1e-3,
                                                  damping_ratio=damping_ratio)
    body = body.with_stiffness(scale * body.stiffness)
    r = np.zeros((n, 3))
    r[1:, 0] = 0.8
    rigid = Model(np.arange(n) - 1, "revolute", np.tile([0, 0, 1.0], (n, 1)), np.tile(np.eye(3), (n, 1, 1)), r,
                  [mass] * n, np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)), gravity=(0.0, -9.81, 0.0),
                  joint_names=[f"J{i + 1}" for i in range(n)], body_names=[f"link{i + 1}" for i in range(n)])
    return rigid, rigid.with_flexible({i: body for i in range(n)})


def run(model, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("verbose", False)
    return simulate(model, **kw)


def _rk4(f, q, v, dt, steps):
    out = [np.concatenate((q, v))]
    t = 0.0
    for _ in range(steps):
        k1q, k1v = v, f(t, q, v)
        k2q, k2v = v + 0.5 * dt * k1v, f(t + 0.5 * dt, q + 0.5 * dt * k1q, v + 0.5 * dt * k1v)
        k3q, k3v = v + 0.5 * dt * k2v, f(t + 0.5 * dt, q + 0.5 * dt * k2q, v + 0.5 * dt * k2v)
        k4q, k4v = v + dt * k3v, f(t + dt, q + dt * k3q, v + dt * k3v)
        q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        v = v + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        t += dt
        out.append(np.concatenate((q, v)))
    return np.array(out)


def test_rk4_run_is_the_plain_rk4_loop_over_flexible_aba():
    rigid, flex = _pair()
    nq, nv = flexible_state_size(flex)
    rng = np.random.default_rng(1)
    q0 = np.concatenate((rng.uniform(-0.5, 0.5, rigid.nq), 0.01 * rng.normal(size=nq - rigid.nq)))
    qd0 = 0.3 * rng.normal(size=nv)
    tau = np.array([0.4, -0.2, 0.1])
    res = run(flex, t_end=0.02, dt=1e-3, integrator="rk4", q0=q0, qd0=qd0, torques=tau)
    ref = _rk4(lambda t, q, v: flexible_aba(flex, q, v, np.r_[tau, np.zeros(nv - rigid.nv)]), q0, qd0, 1e-3, 20)
    assert res.q.shape == (21, nq) and res.qd.shape == (21, nv)
    assert np.allclose(np.hstack((res.q, res.qd)), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("integ", ["rk4", "dopri5", "dop853", "gauss6"])
def test_energy_is_conserved_without_damping(integ):
    """Gravity and the elastic forces only: kinetic + gravity + elastic stays put while energy
    moves between its forms."""
    rigid, flex = _pair()
    nq, nv = flexible_state_size(flex)
    q0 = np.concatenate((np.array([0.6, -0.4, 0.3]), np.full(nq - rigid.nq, 0.01)))
    # (gauss6: its fixed-point stage iteration needs h times the highest frequency, 170 rad/s, below 1)
    dt = {"rk4": 1e-4, "gauss6": 2.5e-4}.get(integ, 5e-3)
    res = run(flex, t_end=0.05, dt=dt, integrator=integ, q0=q0, rtol=1e-10, atol=1e-12)
    e = res.summary["energy"]
    assert e["conservative"]
    assert e["max_rel_drift"] < 1e-7
    # the recorded forms are flexible_energy's, and the elastic one moves by far more than the drift
    T, V, Ve = flexible_energy(flex, res.q[-1], res.qd[-1])
    assert np.isclose(res.kinetic[-1], T, rtol=1e-13) and np.isclose(res.elastic[-1], Ve, rtol=1e-13)
    assert np.allclose(res.energy, res.kinetic + res.potential + res.elastic, rtol=0, atol=1e-12)
    assert np.ptp(res.elastic) > 1e3 * e["max_abs_drift"] and np.ptp(res.kinetic) > 1e3 * e["max_abs_drift"]


def test_modal_damping_dissipates():
    rigid, flex = _pair(damping_ratio=0.05)
    nq, _ = flexible_state_size(flex)
    q0 = np.concatenate((np.zeros(rigid.nq), np.full(nq - rigid.nq, 0.01)))
    res = run(flex, t_end=0.1, dt=2e-4, q0=q0)
    assert not res.summary["energy"]["conservative"]
    assert res.energy[-1] < res.energy[0] and np.all(np.diff(res.energy) < 1e-12)


def test_stiff_limit_follows_the_rigid_trajectory():
    """Stiffness x 10 and x 1000: the joints follow the rigid run, the gap falling as the
    compliance (the modes start undeformed, at rest)."""
    kw = dict(t_end=0.05, dt=5e-5, integrator="rk4", save_every=20, q0=np.array([0.5, -0.3]),
              torques=np.array([0.5, -0.2]))
    rigid, _ = _pair(n=2, bending="y", modes=2)
    ref = run(rigid, **kw)
    gaps = []
    for scale in (10.0, 1000.0):
        _, flex = _pair(n=2, bending="y", modes=2, scale=scale)
        res = run(flex, **kw)
        assert np.array_equal(res.t, ref.t)
        gaps.append(np.abs(res.q[:, :2] - ref.q).max())
    assert gaps[1] < 3e-5 and gaps[0] / gaps[1] > 30            # measured 9.7e-4, 8.9e-6
    assert gaps[0] > 1e-5                                       # the modes do move the joints


def test_resume_equals_uninterrupted(tmp_path):
    rigid, flex = _pair()
    nq, _ = flexible_state_size(flex)
    kw = dict(t_end=0.02, dt=1e-3, integrator="dopri5", rtol=1e-9, atol=1e-11, save_every=2,
              q0=np.concatenate((np.array([0.4, 0.2, -0.3]), np.full(nq - rigid.nq, 0.005))))
    ref = run(flex, **kw)

    class Stop(Exception):
        pass

    def hook(k, t, q, v):
        if k == 7:
            raise Stop

    out = tmp_path / "r.h5"
    with pytest.raises(Stop):
        run(flex, out=out, checkpoint_every=3, _step_hook=hook, **kw)
    assert os.path.exists(str(out) + ".ckpt") and not out.exists()
    res = run(flex, out=out, checkpoint_every=3, resume=True, **kw)
    assert res.summary["resumed_from"] > 0
    for k in ("t", "q", "qd", "energy", "elastic"):
        assert np.array_equal(getattr(res, k), getattr(ref, k)), k      # bit for bit
    # the checkpoint knows the modal data: another stiffness is another model
    _, other = _pair(scale=2.0)
    with pytest.raises(Stop):
        run(flex, checkpoint=tmp_path / "c.ckpt", checkpoint_every=3, _step_hook=hook, **kw)
    with pytest.raises(partree.CheckpointError, match="different model"):
        run(other, checkpoint=tmp_path / "c.ckpt", resume=True, **kw)


def test_results_file_names_the_modal_columns(tmp_path):
    pytest.importorskip("h5py")
    rigid, flex = _pair(n=2, modes=2)
    out = tmp_path / "f.h5"
    res = run(flex, t_end=0.004, dt=1e-3, record="all", out=out)
    back = load_results(out)
    names = ["J1", "J2", "link1.mode1", "link1.mode2", "link2.mode1", "link2.mode2"]
    assert list(back.columns["q_joint"]) == names and list(back.columns["v_joint"]) == names
    assert list(back.columns["q_index"][2:]) == [0, 1, 0, 1]
    assert list(back.columns["q_units"]) == ["rad", "rad", "m", "m", "m", "m"]
    assert list(back.columns["tau_units"][2:]) == ["N"] * 4
    for k in ("q", "qd", "qdd", "tau", "elastic", "energy", "joint_wrench"):
        assert np.array_equal(getattr(back, k), getattr(res, k)), k
    assert back.q.shape == (5, 6) and back.joint_wrench.shape == (5, 2, 6)
    assert back.model.flexible is not None and back.model.flexible.n_modal == 4
    # the wrenches are the flexible joint wrenches of the recorded motion
    from partree.algorithms.flexible_cfa import flexible_joint_wrenches
    F, tau = flexible_joint_wrenches(flex, back.q[3], back.qd[3], back.qdd[3])
    assert np.allclose(back.joint_wrench[3], F, rtol=0, atol=1e-12 * np.abs(F).max())
    assert np.allclose(back.tau[3], tau, rtol=0, atol=1e-12)


def test_prescribed_motion_runs_flexible_hybrid_dynamics():
    rigid, flex = _pair()
    nq, nv = flexible_state_size(flex)
    ne = nv - rigid.nv
    A = np.deg2rad(3.0)

    def motion(t):
        return A * np.sin(t), A * np.cos(t), -A * np.sin(t)

    q0 = np.zeros(nq)
    qd0 = np.zeros(nv)
    qd0[0] = A
    tau_p = lambda t: np.array([0.0, 0.3 * np.sin(t), 0.2])      # noqa: E731
    res = run(flex, t_end=0.02, dt=1e-3, q0=q0, qd0=qd0, torques={"J2": lambda t: 0.3 * np.sin(t), "J3": 0.2},
              prescribed={"J1": motion}, record="all")
    active = np.array([True, False, False])

    def f(t, q, v):
        qdd = np.zeros(nv)
        qdd[0] = motion(t)[2]
        return flexible_hybrid_dynamics(flex, q, v, np.r_[tau_p(t), np.zeros(ne)], qdd, active)[0]

    ref = _rk4(f, q0, qd0, 1e-3, 20)
    assert np.allclose(np.hstack((res.q, res.qd)), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    # the prescribed joint follows its motion (to the integrator's error) and its torque comes out
    assert np.allclose(res.q[:, 0], A * np.sin(res.t), rtol=0, atol=1e-10)
    for k in (0, 10, 20):
        qdd, tau = flexible_hybrid_dynamics(flex, res.q[k], res.qd[k], np.r_[tau_p(res.t[k]), np.zeros(ne)],
                                            np.r_[motion(res.t[k])[2], np.zeros(nv - 1)], active)
        assert np.allclose(res.tau[k], tau, rtol=1e-12, atol=1e-12) and np.allclose(res.qdd[k], qdd, atol=1e-12)
    assert not res.summary["energy"]["conservative"]


def test_seed_inputs_on_the_flexible_threearm():
    """The seed's HybridInputs drive the flexible three-arm manipulator (a few steps)."""
    from partree.models.seeds import three_arm_inputs

    m = partree.resolve_model("threearm:flexible=true,modes=6")
    inp = three_arm_inputs()
    q0, qd0 = inp.initial_state(m, consistent=True)          # the joints' (nq,), (nv,): modes at rest
    res = run(m, t_end=4e-4, dt=2e-4, q0=q0, qd0=qd0, prescribed=inp, torques=lambda t, q, qd: inp.tau(m, t),
              record="all")
    nq, nv = flexible_state_size(m)
    assert res.q.shape == (3, nq) and res.tau.shape == (3, nv)
    assert np.allclose(res.q[:, m.q_slice("J1")].ravel(), inp.motion_amplitude * np.sin(res.t), atol=1e-12)
    assert np.all(np.isfinite(res.joint_wrench))


def test_node_loads_on_a_distributed_run():
    """Loads at the nodes of flexible bodies (a tip load on each beam and a wrench at a body
    origin) on backend 'mpi', one rank here (several under mpiexec: test_parallel_flexible), each
    part's loads applied by its kernel: the serial run's trajectory and wrenches."""
    _, flex = _pair(n=4)
    loads = {(i, "tip"): (0.0, 0.0, 0.2 * i, 1.0, -2.0, 0.5) for i in range(4)}
    loads["J2"] = (0.1, 0.0, 0.0, 0.0, 3.0, 0.0)
    kw = dict(t_end=0.02, dt=1e-4, f_ext=loads, record="q,qd,wrenches", save_every=20)
    ref = run(flex, **kw)
    free = run(flex, t_end=0.02, dt=1e-4, record="q", save_every=20)
    assert np.abs(ref.q - free.q).max() > 1e-4                  # the loads matter
    for parts in (2, 4):
        got = run(flex, backend="mpi", parts=parts, **kw)
        for name in ("q", "qd", "joint_wrench"):
            a, b = getattr(got, name), getattr(ref, name)
            assert np.abs(a - b).max() <= 1e-10 * np.abs(b).max(), (parts, name)


def test_what_a_flexible_run_refuses(tmp_path):
    rigid, flex = _pair()
    # the distributed backends (here one MPI rank, no mpiexec needed): what needs more than a piece
    with pytest.raises(PartreeInputError, match="callable f_ext"):
        run(flex, t_end=0.01, dt=1e-3, backend="mpi", f_ext=lambda t, q, qd: np.zeros((3, 6)))
    with pytest.raises(PartreeInputError, match="per-rank"):
        run(flex, t_end=0.01, dt=1e-3, backend="mpi", output="per-rank", out=str(tmp_path / "r.h5"))
    with pytest.raises(PartreeInputError, match=r"f_ext has shape \(3, 5\)"):
        run(flex, t_end=0.01, dt=1e-3, f_ext=np.zeros((3, 5)))
    with pytest.raises(PartreeInputError, match="formulation"):
        run(flex, t_end=0.01, dt=1e-3, formulation="momentum")
    with pytest.raises(PartreeInputError, match="record_joints"):
        run(flex, t_end=0.01, dt=1e-3, record_joints=["J1"])
    with pytest.raises(PartreeInputError, match=r"q0 has shape \(5,\)"):
        run(flex, t_end=0.01, dt=1e-3, q0=np.zeros(5))
    with pytest.raises(PartreeInputError, match="modal entries are not finite"):
        run(flex, t_end=0.01, dt=1e-3, qd0=np.full(flexible_state_size(flex)[1], np.nan))


def test_an_ensemble_of_flexible_runs():
    """An ensemble's members are serial runs: a flexible model runs there too."""
    rigid, flex = _pair(n=2, modes=2)
    q0 = np.array([0.2, -0.1])
    out = partree.simulate_ensemble(flex, 0.004, 1e-3, members=[{"q0": q0}, {"q0": -q0}], progress=False)
    assert len(out) == 2
    one = run(flex, t_end=0.004, dt=1e-3, q0=-q0)
    assert np.array_equal(out[1].q, one.q)


def test_flexible_seed_example_writes_its_figures(tmp_path):
    """scripts/examples/flexible_threearm_seed002.py, a short run: both figures written."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "examples" / "flexible_threearm_seed002.py"
    spec = importlib.util.spec_from_file_location("flexible_threearm_seed002", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    files = mod.main(["--out", str(tmp_path), "--t-end", "0.02"])
    assert sorted(os.path.basename(f) for f in files) == ["seed002_flexible_tips.png", "seed002_flexible_torques.png"]
    for f in files:
        assert os.path.getsize(f) > 1000
