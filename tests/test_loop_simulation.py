"""Loop correction (correct_state, assemble, the tangent-space acceleration) and simulations of
models with loops, on the planar four-bar of seed 003 (a parallelogram with an exact one-DOF
reduction), through its singular positions."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import partree
from partree import Loop
from partree.algorithms.loop_correction import ConstraintBases, project_velocity, tangent_acceleration
from partree.errors import PartreeInputError

from loop_models import four_bar  # seed 003's planar four-bar, shared with the engine tests

L = 1.0
G = 9.81


Q0 = np.array([np.pi / 4, -np.pi / 4, np.pi / 4])    # theta1 = theta3 = pi/4, theta2 = 0


def reduced(t_eval, th0=np.pi / 4, w0=0.0):
    """The parallelogram's one-DOF motion from its energy: (2/3 + 1) m L^2 th'' = -2 m g L cos th."""
    def f(t, y):
        return [y[1], -2 * G * L * np.cos(y[0]) / (2 * L * L / 3 + L * L)]
    return solve_ivp(f, (0, t_eval[-1]), [th0, w0], t_eval=t_eval, rtol=1e-12, atol=1e-12, method="DOP853").y


def test_rank_of_the_planar_loop_and_at_the_singular_configuration():
    m = four_bar()
    r = partree.constrained_dynamics(m, Q0, np.zeros(3), np.zeros(3))
    assert r.rank == 2 and r.independent.sum() == 2
    r0 = partree.constrained_dynamics(m, np.zeros(3), np.array([1.0, -1.0, 1.0]), np.zeros(3))
    assert r0.rank == 1
    lc = partree.loop_constraints(m, np.zeros(3))
    assert ConstraintBases(lc.J).rank == 1
    assert ConstraintBases(partree.loop_constraints(m, Q0).J).rank == 2


def test_correct_state_projects_positions_and_velocities():
    m = four_bar()
    rng = np.random.default_rng(0)
    q = Q0 + 1e-3 * rng.normal(size=3)
    qd = rng.normal(size=3)
    qc, qdc = partree.correct_state(m, q, qd)
    lc = partree.loop_constraints(m, qc, qdc)
    assert np.abs(lc.phi).max() <= 1e-12
    assert np.abs(lc.velocity).max() <= 1e-12
    assert np.abs(qc - q).max() < 1e-2
    # the velocity change is normal to the manifold: no tangent component
    B = ConstraintBases(lc.J)
    assert np.abs(B.Qt.T @ (qd - qdc)).max() < 1e-12
    # a consistent state is left as it is
    q2, qd2 = partree.correct_state(m, qc, qdc)
    assert np.allclose(q2, qc, atol=1e-14) and np.allclose(qd2, qdc, atol=1e-14)


def test_assemble_closes_the_loop_with_the_crank_held():
    m = four_bar()
    q = partree.assemble(m, np.array([1.0, -0.5, 0.8]), fixed={"crank": 1.0})
    assert q[0] == 1.0
    assert np.abs(partree.loop_constraints(m, q).phi).max() <= 1e-12
    # the parallelogram branch: the rocker follows the crank, the coupler stays level
    assert abs(q[2] - 1.0) < 1e-10 and abs(q[0] + q[1]) < 1e-10


def test_assemble_refuses_a_loop_no_configuration_closes():
    m = four_bar()
    far = m.with_loops([Loop("rod", "distance", "b1", None, (L, 0, 0), (5.0, 0, 0), length=0.1)])
    with pytest.raises(PartreeInputError, match="could not be closed"):
        partree.assemble(far, Q0, fixed={"crank": 0.0})
    with pytest.raises(PartreeInputError, match="no joint"):
        partree.assemble(m, Q0, fixed={"nonexistent": 0.0})


def test_tangent_acceleration_keeps_the_tangent_part_and_meets_the_constraints():
    m = four_bar()
    qd = project_velocity(partree.loop_constraints(m, Q0).J, np.array([0.7, -0.2, 0.4]))
    lc = partree.loop_constraints(m, Q0, qd)
    qdd = np.array([1.0, 2.0, -3.0])
    new = tangent_acceleration(lc.J, lc.gamma, qdd)
    B = ConstraintBases(lc.J)
    assert np.abs(lc.J @ new - lc.gamma).max() < 1e-12
    assert np.abs(B.Qt.T @ (new - qdd)).max() < 1e-12


def test_four_bar_simulation_stays_closed_and_follows_the_reduction():
    m = four_bar()
    res = partree.simulate(m, 1.0, 1e-3, q0=Q0, progress=False, integrator="rk4", save_every=10)
    assert res.violation is not None and res.violation.max() <= 1e-10
    assert res.summary["loops"]["max_violation"] <= 1e-10
    th1 = res.q[:, 0]
    assert np.abs(th1 + res.q[:, 1]).max() < 1e-9          # coupler level: the parallelogram branch
    assert np.abs(res.q[:, 2] - th1).max() < 1e-9           # rocker parallel to the crank
    ref = reduced(res.t)
    assert np.abs(th1 - ref[0]).max() < 1e-7
    assert np.abs(res.energy - res.energy[0]).max() < 1e-8 * abs(res.energy).max()


def test_mass_metric_correction_is_a_constraint_impulse():
    m = four_bar()
    rng = np.random.default_rng(1)
    q = Q0 + 1e-4 * rng.normal(size=3)
    qd = rng.normal(size=3)
    qc, qdc = partree.correct_state(m, q, qd, metric="mass")
    lc = partree.loop_constraints(m, qc, qdc)
    assert np.abs(lc.phi).max() <= 1e-12 and np.abs(lc.velocity).max() <= 1e-12
    # the velocity change is M^-1 J^T mu (M at the given q): M times it lies in J's row space
    M = partree.crba(m, q)
    assert np.abs(ConstraintBases(lc.J).Qt.T @ (M @ (qd - qdc))).max() < 1e-12
    with pytest.raises(PartreeInputError, match="metric"):
        partree.correct_state(m, q, qd, metric="riemann")


def test_four_bar_through_its_singular_positions_for_ten_seconds():
    """Fourteen passages through theta1 = 0 and pi (mod 2 pi), where the three bars align and J
    loses a rank: the run stays on the parallelogram branch and follows the exact reduction to
    the integrator's own error (RK4 at 1e-3 s: 8e-11 on the reduced equation).  At each passage
    the integration error across the row losing rank is divided by its vanishing singular value;
    the simulation's mass-metric corrections remove it whole (Euclidean ones left 1.4e-6 here)."""
    m = four_bar()
    res = partree.simulate(m, 10.0, 1e-3, q0=Q0, progress=False, integrator="rk4", save_every=10)
    th1 = res.q[:, 0]
    assert np.count_nonzero(np.diff(np.floor(th1 / np.pi))) == 14        # singular passages
    assert res.violation.max() <= 1e-10
    assert np.abs(th1 + res.q[:, 1]).max() < 1e-9 and np.abs(res.q[:, 2] - th1).max() < 1e-9
    ref = reduced(res.t)
    assert np.abs(th1 - ref[0]).max() < 1e-8
    assert np.abs(res.qd[:, 0] - ref[1]).max() < 1e-7


def test_simulation_refuses_a_state_that_does_not_close_the_loops():
    m = four_bar()
    with pytest.raises(PartreeInputError, match="assemble"):
        partree.simulate(m, 0.01, 1e-3, q0=Q0 + np.array([0.1, 0.0, 0.0]), progress=False)
    with pytest.raises(PartreeInputError, match="correct"):
        partree.simulate(m, 0.01, 1e-3, q0=Q0, progress=False, correct="sometimes")


def test_the_dense_singular_band_is_refused_on_the_distributed_backends():
    m = four_bar()
    for backend in ("mpi", "dask"):
        with pytest.raises(PartreeInputError, match="singular_band"):
            partree.simulate(m, 0.01, 1e-3, q0=Q0, progress=False, backend=backend, singular_band=1e-3)


def test_simulation_with_loops_over_dask_equals_the_serial_run():
    """A real LocalCluster: a chain closed to the world under a partition that leaves the loop to
    the root (corrections needed: it drifts by about 4e-8 in 0.3 s without them), and the scissor
    mast's pins inside parts and at the root."""
    distributed = pytest.importorskip("distributed")
    from partree.models.generators import chain
    from partree.parallel.partition import partition_from_roots

    from loop_models import scissor_pins

    closed = chain(12, alternate=True, gravity=(0, -9.81, -9.81)).with_loops(
        [Loop("w", "spherical", 11, None, (0.5, 0, 0), (3.0, 4.0, 1.0))])
    mast = scissor_pins(6)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        for m, q0, parts in [(closed, partree.assemble(closed, np.full(closed.nq, 0.2)),
                              partition_from_roots(closed, [4, 8])), (mast, np.zeros(mast.nq), 3)]:
            kw = dict(t_end=0.3, dt=1e-2, q0=q0, qd0=np.zeros(m.nv), integrator="rk4", progress=False)
            ref = partree.simulate(m, **kw)
            res = partree.simulate(m, backend="dask", client=client, parts=parts, **kw)
            assert np.abs(res.q - ref.q).max() < 1e-8
            assert np.abs(res.qd - ref.qd).max() < 1e-8 * max(1.0, np.abs(ref.qd).max())
            assert res.violation.max() < 1e-10
    finally:
        client.close()
        cluster.close()


def test_simulation_with_loops_over_mpi_equals_the_serial_run():
    """``mpiexec -n 2`` and ``-n 3``: the engine's corrections (mass metric, on each rank's
    pieces, loops inside parts and at the root) give the serial run's trajectory."""
    pytest.importorskip("mpi4py")
    from test_mpi import MPIEXEC, _ok_line
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    for n in (2, 3):
        err, viol = _ok_line(n, "loop_sim_check.py")
        assert float(err) < 1e-8 and float(viol) < 1e-10


def test_results_file_keeps_the_violation(tmp_path):
    pytest.importorskip("h5py")
    m = four_bar()
    out = tmp_path / "fb.h5"
    res = partree.simulate(m, 0.05, 1e-3, q0=Q0, progress=False, out=str(out), correct="velocity")
    back = partree.load_results(str(out))
    assert np.array_equal(back.violation, res.violation)
    assert back.summary["loops"]["correct"] == "velocity"
