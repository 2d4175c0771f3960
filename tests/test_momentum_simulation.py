"""Simulation in generalized momenta (seed 001; ``simulate(..., formulation='momentum')``): the
momentum form against the velocity form and against dense references, the sixth-order
Gauss-Legendre method's order, inputs that depend on qd, checkpoints, results, refusals, the CLI."""
import os

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.simulation import CheckpointError, Gauss6, MomentumDynamics, StateSpace, load_results, simulate
from partree.simulation.dynamics import Dynamics


def run(model, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("verbose", False)
    return simulate(model, **kw)


def _state(m, seed=2, scale=0.5):
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng, scale), m.random_velocity(rng, scale)


@pytest.fixture(scope="module")
def cardan():
    return partree.resolve_model("cardan:n=3")


# ---------------------------------------------------------------------------------------- trajectories
@pytest.mark.parametrize("integ", ["rk4", "gauss6", "dopri5", "dop853"])
def test_momentum_form_follows_the_velocity_form(cardan, integ):
    """The same motion from both forms: a tight velocity-form reference (ABA), and p = M(q) qd at
    every row with M from CRBA."""
    q0, qd0 = _state(cardan)
    kw = dict(t_end=0.4, dt=0.01, q0=q0, qd0=qd0)
    ref = run(cardan, integrator="dop853", rtol=1e-13, atol=1e-13, **kw)
    res = run(cardan, integrator=integ, formulation="momentum", rtol=1e-10, atol=1e-12, **kw)
    tol = {"rk4": 1e-5, "gauss6": 1e-9, "dopri5": 1e-7, "dop853": 1e-9}[integ]
    assert np.abs(res.t - ref.t).max() == 0
    assert np.abs(res.q - ref.q).max() < tol
    assert np.abs(res.qd - ref.qd).max() < tol
    assert res.p.shape == res.qd.shape and ref.p is None
    for q, qd, p in zip(res.q[::10], res.qd[::10], res.p[::10]):
        assert np.allclose(partree.crba(cardan, q) @ qd, p, rtol=1e-12, atol=1e-12)
    assert res.summary["formulation"] == "momentum" and ref.summary["formulation"] == "velocity"
    assert res.options["formulation"] == "momentum"


def test_free_floating_robot_momentum_form(cardan):
    """A free joint (quaternion, body-frame velocities: the quasi-velocity form of pdot) and six
    revolute joints: momentum form with gauss6 against the velocity form, and the total spatial
    momentum of the floating system (no gravity on the space robot) kept."""
    m = partree.resolve_model("spacerobot")
    q0, qd0 = _state(m, seed=4)
    kw = dict(t_end=0.5, dt=0.025, q0=q0, qd0=qd0)
    ref = run(m, integrator="dop853", rtol=1e-13, atol=1e-13, **kw)
    res = run(m, integrator="gauss6", formulation="momentum", **kw)
    assert np.abs(res.q - ref.q).max() < 1e-10
    assert np.abs(res.qd - ref.qd).max() < 1e-10
    h0 = partree.momentum(m, res.q[0], res.qd[0])
    drift = max(np.abs(partree.momentum(m, q, qd) - h0).max() for q, qd in zip(res.q, res.qd))
    assert drift < 1e-12 * max(1.0, np.abs(h0).max())


def _order_errors(m, form, ns, T=0.5):
    q0, qd0 = _state(m)
    ref = run(m, t_end=T, dt=T, q0=q0, qd0=qd0, integrator="dop853", rtol=1e-14, atol=1e-14)
    errs = []
    for n in ns:
        r = run(m, t_end=T, dt=T / n, q0=q0, qd0=qd0, integrator="gauss6", formulation=form)
        errs.append(max(np.abs(r.q[-1] - ref.q[-1]).max(), np.abs(r.qd[-1] - ref.qd[-1]).max()))
    return np.array(errs)


@pytest.mark.parametrize("spec, ns", [("cardan:n=3", (8, 16, 32)), ("spacerobot", (2, 4, 8))])
def test_gauss6_is_of_order_six(spec, ns):
    """Halving the step divides the error by 2^6: the order of the three-stage Gauss method, on
    Cardan joints (canonical momenta) and on a free joint (the Lie-group form)."""
    errs = _order_errors(partree.resolve_model(spec), "momentum", ns)
    orders = np.log2(errs[:-1] / errs[1:])
    assert np.all(orders > 5.5) and np.all(orders < 6.6), orders


def test_gauss6_keeps_the_energy_where_rk4_drifts(cardan):
    """Symplectic: at a step where RK4 loses energy steadily, the Gauss method's energy error
    stays bounded and small (the Hamiltonian of the momentum form is not separable, so no
    explicit symplectic method would do)."""
    q0, qd0 = _state(cardan, scale=0.3)
    q0[0] += np.pi / 2                       # hanging down (the chain starts horizontal): a gentle motion
    kw = dict(t_end=20.0, dt=0.05, q0=q0, qd0=qd0, formulation="momentum", save_every=4)
    g = run(cardan, integrator="gauss6", **kw)
    r = run(cardan, integrator="rk4", **kw)
    dg, dr = g.summary["energy"]["max_rel_drift"], r.summary["energy"]["max_rel_drift"]
    assert dg < 1e-6 and dr > 100 * dg, (dg, dr)


def test_gauss6_integrator_alone():
    """The integrator on its own on the harmonic oscillator q' = p, p' = -q (a custom first-order
    rate function): order six, and the discrete energy of the symplectic map conserved to
    rounding over many periods."""
    m = partree.resolve_model("chain:n=1")

    class Oscillator:
        returns_rate = True

        def __call__(self, t, q, p):
            return p.copy(), -q.copy()

        def velocity(self, t, q, p):
            return p.copy()

    errs = []
    for h in (0.4, 0.2, 0.1):
        g = Gauss6(Oscillator(), StateSpace(m))
        q, p = np.array([1.0]), np.array([0.0])
        n = int(round(2 * np.pi / h * 5))
        H = []
        for k in range(n):
            q, p = g.step(k * h, q, p, h)
            H.append(0.5 * (q[0] ** 2 + p[0] ** 2))
        t = n * h
        errs.append(abs(q[0] - np.cos(t)) + abs(p[0] + np.sin(t)))
        assert max(abs(np.array(H) - 0.5)) < 1e-7 * (h / 0.1) ** 6 + 1e-14
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(orders > 5.6) and np.all(orders < 6.5), orders


def test_gauss6_refuses_a_step_its_iteration_cannot_take(cardan):
    q0, qd0 = _state(cardan, scale=3.0)
    with pytest.raises(FloatingPointError, match="gauss6"):
        run(cardan, t_end=2.0, dt=1.0, q0=q0, qd0=qd0, integrator="gauss6", formulation="momentum")


def test_symplectic_euler_and_scipy_in_momentum_form(cardan):
    """The first-order method converges at order one in the momentum form too, and scipy's
    solve_ivp takes the flat state (q, p)."""
    q0, qd0 = _state(cardan)
    ref = run(cardan, t_end=0.2, dt=0.2, q0=q0, qd0=qd0, integrator="dop853", rtol=1e-13, atol=1e-13)
    errs = [np.abs(run(cardan, t_end=0.2, dt=dt, q0=q0, qd0=qd0, integrator="symplectic-euler",
                       formulation="momentum").q[-1] - ref.q[-1]).max() for dt in (2e-3, 1e-3)]
    assert 0.8 < np.log2(errs[0] / errs[1]) < 1.2
    sc = run(cardan, t_end=0.2, dt=0.05, q0=q0, qd0=qd0, integrator="scipy:dop853", rtol=1e-12, atol=1e-12,
             formulation="momentum")
    assert np.abs(sc.q[-1] - ref.q[-1]).max() < 1e-9 and sc.p is not None


# ---------------------------------------------------------------------------------------- inputs
def _tau_of_state(t, q, qd):
    return 0.3 * np.sin(3 * t) - 0.2 * qd + 0.1 * np.cos(q)


def _fext_of_state(t, q, qd):
    F = np.zeros((3, 6))
    F[2, 4] = 0.5 * qd[0]
    F[1, 0] = 0.2 * np.sin(t)
    return F


@pytest.mark.parametrize("inputs", [
    dict(torques=_tau_of_state),
    dict(damping=0.4, stiffness=2.0, q_ref=np.full(6, 0.1)),
    dict(torques={"j1": lambda t: np.array([np.sin(t), 0.5])}, f_ext={"j2": [0.1, 0, 0, 0, 0, 2.0]}),
    dict(torques=(np.array([0.0, 1.0]), np.outer([0.0, 1.0], np.arange(6.0)))),
    dict(f_ext=_fext_of_state),
])
def test_joint_inputs_are_those_of_the_velocity_form(cardan, inputs):
    """Torques of (t, q, qd), damping, springs, per-joint callables, tables and external forces
    (constant, or callables of qd) act alike in both forms: qd = M^-1 p in the momentum form."""
    q0, qd0 = _state(cardan)
    kw = dict(t_end=0.5, dt=0.05, q0=q0, qd0=qd0, integrator="dop853", rtol=1e-12, atol=1e-12, **inputs)
    ref = run(cardan, **kw)
    res = run(cardan, formulation="momentum", **kw)
    assert np.abs(res.q - ref.q).max() < 1e-9
    assert np.abs(res.qd - ref.qd).max() < 1e-9


def test_record_all_in_momentum_form(cardan):
    """qdd and tau at the save points are those of the state (ABA with the inputs), the wrenches
    too, and pdot = d/dt (M qd) agrees with qdd by a finite difference of p over the trajectory."""
    q0, qd0 = _state(cardan)
    res = run(cardan, t_end=0.1, dt=0.001, q0=q0, qd0=qd0, integrator="gauss6", formulation="momentum",
              record="all", damping=0.3)
    k = 50
    tau = -0.3 * res.qd[k]
    assert np.allclose(res.tau[k], tau, atol=1e-14)
    assert np.allclose(res.qdd[k], partree.aba(cardan, res.q[k], res.qd[k], tau), atol=1e-12)
    pdot_fd = (res.p[k + 1] - res.p[k - 1]) / 0.002
    Mdot_qd = (partree.crba(cardan, res.q[k + 1]) - partree.crba(cardan, res.q[k - 1])) @ res.qd[k] / 0.002
    assert np.allclose(pdot_fd, partree.crba(cardan, res.q[k]) @ res.qdd[k] + Mdot_qd, atol=1e-4)
    assert res.joint_wrench.shape == (len(res.t), cardan.n, 6)


def test_momentum_dynamics_methods_agree(cardan):
    """The sweep and the block Cholesky solve give the same rates."""
    q, qd = _state(cardan, seed=7)
    d = Dynamics(cardan, damping=0.2)
    a, b = MomentumDynamics(d, "ldlt"), MomentumDynamics(d, "sweep")
    p = a.momentum(q, qd)
    for x, y in zip(a(0.1, q, p), b(0.1, q, p)):
        assert np.allclose(x, y, rtol=1e-12, atol=1e-12)
    assert np.allclose(a.velocity(0.0, q, p), qd, atol=1e-12)


# ---------------------------------------------------------------------------------------- checkpoints, files
def _interrupt_after(k_stop):
    class Stop(Exception):
        pass

    def hook(k, t, q, p):
        if k == k_stop:
            raise Stop
    return Stop, hook


@pytest.mark.parametrize("integ", ["gauss6", "rk4", "dopri5", "dop853"])
def test_resume_equals_uninterrupted(tmp_path, cardan, integ):
    """A momentum-form run stopped and resumed from its checkpoint gives bit for bit the
    uninterrupted trajectory (gauss6's starting guess from the last step and dopri5's FSAL
    velocity travel in the checkpoint)."""
    q0, qd0 = _state(cardan)
    kw = dict(t_end=0.3, dt=0.01, integrator=integ, formulation="momentum", rtol=1e-9, atol=1e-11, q0=q0, qd0=qd0,
              save_every=2, damping=0.1)
    ref = run(cardan, **kw)
    out = tmp_path / "r.npz"
    Stop, hook = _interrupt_after(13)
    with pytest.raises(Stop):
        run(cardan, out=out, checkpoint_every=5, _step_hook=hook, **kw)
    assert os.path.exists(str(out) + ".ckpt")
    res = run(cardan, out=out, checkpoint_every=5, resume=True, **kw)
    assert res.summary["resumed_from"] > 0
    for k in ("t", "q", "qd", "p", "energy"):
        assert np.array_equal(getattr(res, k), getattr(ref, k)), k
    back = load_results(out)
    assert np.array_equal(back.p, ref.p)


def test_checkpoint_of_the_other_form_is_refused(tmp_path, cardan):
    kw = dict(t_end=0.2, dt=0.01, q0=_state(cardan)[0])
    ck = tmp_path / "c.ckpt"
    Stop, hook = _interrupt_after(5)
    with pytest.raises(Stop):
        run(cardan, checkpoint=ck, checkpoint_every=2, _step_hook=hook, **kw)
    with pytest.raises(CheckpointError, match="formulation"):
        run(cardan, checkpoint=ck, resume=True, formulation="momentum", **kw)


@pytest.mark.parametrize("suffix", [".npz", ".h5"])
def test_results_file_holds_p_with_units(tmp_path, cardan, suffix):
    if suffix == ".h5":
        pytest.importorskip("h5py")
    out = tmp_path / f"r{suffix}"
    res = run(cardan, t_end=0.05, dt=0.01, q0=_state(cardan)[0], formulation="momentum", integrator="gauss6",
              out=out)
    back = load_results(out)
    assert np.array_equal(back.p, res.p)
    assert list(back.units["p"]) == ["N m s"] * cardan.nv
    velocity = run(cardan, t_end=0.05, dt=0.01, out=tmp_path / f"v{suffix}")
    assert load_results(tmp_path / f"v{suffix}").p is None and "p" not in velocity.units


# ---------------------------------------------------------------------------------------- refusals
def test_refusals(cardan):
    kw = dict(t_end=0.1, dt=0.01)
    with pytest.raises(PartreeInputError, match="formulation"):
        run(cardan, formulation="hamilton", **kw)
    from loop_models import four_bar
    with pytest.raises(PartreeInputError, match="loops"):
        run(four_bar(), formulation="momentum", **kw)
    with pytest.raises(PartreeInputError, match="custom dynamics"):
        run(cardan, formulation="momentum", dynamics=lambda t, q, v: np.zeros(6), **kw)
    from partree.models.seeds import three_arm_inputs, three_arm_manipulator
    with pytest.raises(PartreeInputError, match="prescribed"):
        run(three_arm_manipulator(), formulation="momentum", prescribed=three_arm_inputs(), **kw)


def test_dask_momentum_form_equals_the_serial_run():
    """The momentum form on a real LocalCluster (the workers' ranks run the engine's momentum
    rounds over their socket channel: velocity maps at rest, reductions with the momenta as
    joint forces, the parts' wrench totals summed up the parts tree at rank 0) against the
    serial run, with RK4 and the adaptive DOPRI5."""
    distributed = pytest.importorskip("distributed")
    from partree.models.generators import random_tree

    m = random_tree(40, seed=3, floating_base=True,
                    joint_types=("revolute", "prismatic", "universal", "spherical", "free", "fixed"))
    rng = np.random.default_rng(0)
    fe = np.zeros((m.n, 6))
    fe[4] = (0.1, 0.0, 0.2, 1.0, -0.5, 0.3)
    kw = dict(t_end=0.06, dt=0.006, integrator="rk4", formulation="momentum", qd0=0.3 * rng.normal(size=m.nv),
              torques=0.2 * rng.normal(size=m.nv), damping=0.05, f_ext=fe, parts=3, record="all")
    ref = run(m, backend="serial", **kw)
    adaptive = dict(kw, integrator="dopri5", rtol=1e-8, atol=1e-10, record="joints")
    ref_dp = run(m, backend="serial", **adaptive)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            res = run(m, backend="dask", client=client, **kw)
            dp = run(m, backend="dask", client=client, **adaptive)
    finally:
        cluster.close()
    # DOPRI5 with its FSAL velocity and rate on the workers: the same steps as the serial run
    assert dp.summary["steps"] == ref_dp.summary["steps"]
    assert np.abs(dp.q - ref_dp.q).max() < 1e-11
    assert np.abs(dp.p - ref_dp.p).max() < 1e-10 * max(np.abs(ref_dp.p).max(), 1.0)
    assert np.abs(res.q - ref.q).max() < 1e-12
    assert np.abs(res.qd - ref.qd).max() < 1e-11 * max(np.abs(ref.qd).max(), 1.0)
    assert np.abs(res.p - ref.p).max() < 1e-11 * max(np.abs(ref.p).max(), 1.0)
    assert np.abs(res.qdd - ref.qdd).max() < 1e-9 * max(np.abs(ref.qdd).max(), 1.0)
    # the momenta recorded are those of the velocities recorded (CRBA's M, dense)
    M = partree.crba(m, res.q[-1])
    assert np.abs(M @ res.qd[-1] - res.p[-1]).max() < 1e-10 * max(np.abs(res.p[-1]).max(), 1.0)


def test_cli_momentum_form(tmp_path):
    from partree.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command" or getattr(a, "choices", None)
               and "simulate" in (a.choices or {}))
    helptext = sub.choices["simulate"].format_help()
    assert "--formulation" in helptext and "gauss6" in helptext and "momenta" in helptext
    out = tmp_path / "r.npz"
    a = parser.parse_args(["simulate", "cardan:n=3", "--t-end", "0.05", "--dt", "0.01", "--formulation", "momentum",
                           "--integrator", "gauss6", "--state", "random", "--out", str(out), "--no-progress",
                           "--no-plot"])
    assert a.func(a) == 0
    res = load_results(out)
    assert res.options["formulation"] == "momentum" and res.p.shape == (6, 6)
    assert "--formulation" in res.command
