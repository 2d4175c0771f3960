"""External loads on models with flexible bodies (wrenches at the body origins and at the nodes of
flexible bodies; partree.algorithms.flexible_dynamics.flexible_loads) through every flexible
function, against independent references: the virtual work of the loads on the node poses
(finite differences of the bodies' kinematics), the dense mass matrix, a cantilever's static
deflection, the rigid algorithms at zero deformation, the NumPy recursions, a plain RK4 loop and
the energy balance of a run."""
import numpy as np
import pytest
from scipy.linalg import expm

import partree
from partree.algorithms.flexible_cfa import flexible_cfa, flexible_hybrid_forces, flexible_joint_wrenches
from partree.algorithms.flexible_dynamics import (_flexible_aba_reference, _flexible_hybrid_dynamics_reference,
                                                  _flexible_rnea_reference, _outward, _right_jacobian, flexible_aba, flexible_bias,
                                                  flexible_crba, flexible_energy, flexible_hybrid_dynamics,
                                                  flexible_loads, flexible_rnea, flexible_state_size)
from partree.errors import PartreeInputError
from partree.flexible import FlexibleBody
from partree.model import Model
from partree.models.beam import euler_bernoulli_beam
from partree.simulation import simulate


def _skew(p):
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


def _beam(L=0.8, EI=50.0, modes=4, bending="yz", seed=0, damping_ratio=0.0):
    """A beam link with a second node "mid" whose translation and rotation maps are random (any
    node data defines a node's kinematics; these turn it about every axis)."""
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, 2.0, modes, bending=bending, polar=1e-3,
                                                  damping_ratio=damping_ratio)
    rng = np.random.default_rng(seed)
    m = body.m
    nodes = dict(body.nodes)
    nodes["mid"] = (np.array([0.45 * L, 0.02, -0.01]), 0.4 * body.nodes["tip"][1] + 0.1 * rng.normal(size=(3, m)),
                    0.5 * body.nodes["tip"][2] + 0.5 * rng.normal(size=(3, m)))
    body = FlexibleBody(body.first, body.xphi, body.phiphi, body.stiffness, body.damping, nodes, "beam")
    return body, mass, com, I_com


def _chain(n=3, joints=("revolute", "universal", "revolute"), flex=(0, 1, 2), gravity=(0.0, 0.0, -9.81),
           damping_ratio=0.0):
    body, mass, com, I_com = _beam(damping_ratio=damping_ratio)
    r = np.zeros((n, 3))
    r[1:, 0] = 0.8
    axis = np.tile([0, 0, 1.0], (n, 1))
    axis[0] = (0, 1.0, 0)
    rigid = Model(np.arange(n) - 1, list(joints), axis, np.tile(np.eye(3), (n, 1, 1)), r, [mass] * n,
                  np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)), axis2=np.tile([1.0, 0, 0], (n, 1)),
                  gravity=gravity, joint_names=[f"J{i + 1}" for i in range(n)])
    return rigid, rigid.with_flexible({i: body for i in flex})


def _state(model, rng, eta_scale=0.1):
    nq, nv = flexible_state_size(model)
    q = np.concatenate((model.random_configuration(rng), eta_scale * rng.normal(size=nq - model.nq)))
    return q, rng.normal(size=nv)


def _rel(x, ref):
    return np.abs(x - ref).max() / max(np.abs(ref).max(), 1e-300)


# ----------------------------------------------------------------------------- virtual work
def _world(model, q):
    """World rotation and position of every body frame (the NumPy recursion's X_up chained)."""
    nq, nv = flexible_state_size(model)
    bodies = _outward(model, q, np.zeros(nv))
    R, p = [None] * model.n, [None] * model.n
    for i, B in enumerate(bodies):
        j = int(model.parent[i])
        if j < 0:
            R[i], p[i] = B.E.T, B.r.copy()
        else:
            R[i], p[i] = R[j] @ B.E.T, p[j] + R[j] @ B.r
    return R, p


def _load_frame(model, q, key):
    """(world rotation of the load's axes, world position of its point, world rotation of the
    frame it moves with) of a load at a body origin or at a node (key (body, node name))."""
    R, p = _world(model, q)
    if not isinstance(key, tuple):
        b = model.joint_id(key)
        return R[b], p[b], R[b]
    b, name = key
    fl = model.flexible
    point, Phi, Psi = fl.bodies[b].nodes[name]
    e = q[model.nq + fl.idx_eta[b]:model.nq + fl.idx_eta[b] + fl.nmodes[b]]
    return R[b], p[b] + R[b] @ (point + Phi @ e), R[b] @ expm(_skew(Psi @ e))


def _virtual_work(model, q, loads, h=1e-6):
    """Q_j = the power of the loads at v_full = e_j: n_w . omega + f_w . v of the loaded frame,
    from central differences of its world pose (coordinates that are plain numbers: q + h e_j)."""
    nq, nv = flexible_state_size(model)
    assert nq == nv
    Q = np.zeros(nv)
    for key, w in loads.items():
        Rax, _, _ = _load_frame(model, q, key)
        n_w, f_w = Rax @ w[:3], Rax @ w[3:]
        for j in range(nv):
            dq = np.zeros(nq)
            dq[j] = h
            _, pp, Rp = _load_frame(model, q + dq, key)
            _, pm, Rm = _load_frame(model, q - dq, key)
            W = Rp @ Rm.T
            omega = np.array([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]]) / (4 * h)
            Q[j] += n_w @ omega + f_w @ (pp - pm) / (2 * h)
    return Q


def _some_loads(rng):
    return {(0, "mid"): rng.normal(size=6), (2, "tip"): rng.normal(size=6), "J2": rng.normal(size=6),
            (1, "mid"): rng.normal(size=6)}


def test_generalized_force_is_the_virtual_work_of_the_loads():
    """The generalized force of loads at nodes and body origins (bias without minus bias with the
    loads) is their virtual power on the loaded frames' finite-differenced motion; forward
    dynamics is the dense solve with it."""
    rng = np.random.default_rng(0)
    _, m = _chain()
    q, qd = _state(m, rng)
    loads = _some_loads(rng)
    Q_fd = _virtual_work(m, q, loads)
    Q = flexible_bias(m, q, qd) - flexible_bias(m, q, qd, loads)
    assert _rel(Q, Q_fd) < 1e-9                                   # measured 3e-11
    tau = rng.normal(size=qd.size)
    M = flexible_crba(m, q)
    ref = np.linalg.solve(M, tau + Q_fd - flexible_bias(m, q, qd))
    assert _rel(flexible_aba(m, q, qd, tau, loads), ref) < 1e-9    # measured 8e-12
    # each load alone, the node's rotation well past the series' range
    for key, w in loads.items():
        one = {key: w}
        assert _rel(flexible_bias(m, q, qd) - flexible_bias(m, q, qd, one), _virtual_work(m, q, one)) < 1e-8


def test_origin_wrench_does_not_load_the_body_own_modes():
    rng = np.random.default_rng(1)
    _, m = _chain()
    q, qd = _state(m, rng)
    nv = m.nv
    w = rng.normal(size=6)
    d = flexible_bias(m, q, qd) - flexible_bias(m, q, qd, {2: w})
    fl = m.flexible
    own = slice(nv + fl.idx_eta[2], nv + fl.idx_eta[2] + fl.nmodes[2])
    assert np.abs(d[own]).max() < 1e-12 * np.abs(d).max()
    assert np.abs(d[:nv]).max() > 0.1 * np.abs(w).max()


@pytest.mark.parametrize("load", ["force", "moment"])
def test_cantilever_static_deflection(load):
    """A beam clamped to the ground (fixed joint) under a tip force F (or moment M) along its
    bending plane rests where K eta = Phi^T F (Psi^T J_l^T M): there the accelerations vanish,
    and the tip deflects F L^3 / (3 EI) (M L^2 / (2 EI)), Euler-Bernoulli's, within the
    truncation to 6 modes (measured 0.01 % and 0.36 %)."""
    L, EI = 0.8, 50.0
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, 2.0, 6, bending="y", polar=1e-3)
    m = Model([-1], ["fixed"], [[0, 0, 1.0]], [np.eye(3)], [[0, 0, 0.0]], [mass], [com], [I_com], gravity=(0, 0, 0),
              flexible={0: body})
    _, Phi, Psi = body.nodes["tip"]
    if load == "force":
        w = np.array([0, 0, 0, 0, 0.3, 0])
        exact = 0.3 * L ** 3 / (3 * EI)
        eta = np.linalg.solve(body.stiffness, Phi.T @ w[3:])
    else:
        w = np.array([0, 0, 0.2, 0, 0, 0])
        exact = 0.2 * L ** 2 / (2 * EI)
        # the moment's modal force Psi^T J_l(theta)^T n depends on the rotation: a fixed point
        eta = np.zeros(body.m)
        for _ in range(50):
            from partree.algorithms.flexible_dynamics import _right_jacobian
            Jr, _ = _right_jacobian(Psi @ eta, np.zeros(3))
            eta = np.linalg.solve(body.stiffness, Psi.T @ (Jr @ w[:3]))
    qdd = flexible_aba(m, eta, np.zeros(body.m), np.zeros(body.m), {(0, "tip"): w})
    assert np.abs(qdd).max() < 1e-9 * np.abs(np.linalg.solve(body.modal_mass, body.stiffness @ eta)).max()
    assert abs((Phi @ eta)[1] - exact) < (2e-3 if load == "force" else 5e-3) * exact


# ----------------------------------------------------------------------------- round trips, references
def test_rnea_undoes_aba_and_hybrid_is_the_dense_split_with_loads():
    rng = np.random.default_rng(2)
    _, m = _chain(joints=("revolute", "spherical", "universal"), damping_ratio=0.02)
    q, qd = _state(m, rng)
    nv_full = qd.size
    loads = _some_loads(rng)
    tau = rng.normal(size=nv_full)
    qdd = flexible_aba(m, q, qd, tau, loads)
    b = flexible_bias(m, q, qd, loads)
    assert np.abs(flexible_rnea(m, q, qd, qdd, loads) - tau).max() < 1e-10 * np.abs(b).max()
    M = flexible_crba(m, q)
    y = rng.normal(size=nv_full)
    assert _rel(flexible_rnea(m, q, qd, y, loads), M @ y + b) < 1e-11
    assert _rel(qdd, np.linalg.solve(M, tau - b)) < 1e-10
    # hybrid: joint 2 (spherical) active
    mask = np.array([False, True, False])
    act = np.zeros(nv_full, dtype=bool)
    act[m.v_slice(1)] = True
    qa = rng.normal(size=nv_full)
    qdd_h, tau_h = flexible_hybrid_dynamics(m, q, qd, tau, qa, mask, loads)
    p = ~act
    ref = qa.copy()
    ref[p] = np.linalg.solve(M[np.ix_(p, p)], tau[p] - b[p] - M[np.ix_(p, act)] @ qa[act])
    assert _rel(qdd_h, ref) < 1e-10
    assert _rel(tau_h[act], M[act] @ ref + b[act]) < 1e-10


def test_zero_deformation_loads_are_the_rigid_models():
    """At eta = eta_dot = 0 with the modes held, body wrenches act as on the rigid model: rnea,
    the joints' forward dynamics (Schur complement of the modal block) and the joint wrenches."""
    rng = np.random.default_rng(3)
    rigid, m = _chain()
    nq, nv = flexible_state_size(m)
    ne = nv - rigid.nv
    q = rigid.random_configuration(rng)
    qd, qdd = rigid.random_velocity(rng), rng.normal(size=rigid.nv)
    F = rng.normal(size=(rigid.n, 6))
    qf, qdf, qddf = (np.concatenate((x, np.zeros(ne))) for x in (q, qd, qdd))
    tau = flexible_rnea(m, qf, qdf, qddf, F)
    assert np.allclose(tau[:rigid.nv], partree.rnea(rigid, q, qd, qdd, F), rtol=0, atol=1e-10)
    M = flexible_crba(m, qf)
    b = flexible_bias(m, qf, qdf, F)
    tq = rng.normal(size=rigid.nv)
    Mjj = M[:rigid.nv, :rigid.nv]
    assert np.allclose(np.linalg.solve(Mjj, tq - b[:rigid.nv]), partree.aba(rigid, q, qd, tq, F), rtol=0, atol=1e-10)
    W, _ = flexible_joint_wrenches(m, qf, qdf, qddf, {"J1": F[0], 1: F[1], "J3": F[2]})
    _, W_rigid = partree.rnea(rigid, q, qd, qdd, F, return_wrenches=True)
    assert np.allclose(W, W_rigid, rtol=0, atol=1e-10)


def test_compiled_equals_the_numpy_recursions():
    rng = np.random.default_rng(4)
    for m in (_chain(joints=("revolute", "spherical", "universal"), damping_ratio=0.02)[1],
              partree.resolve_model("threearm:flexible=true,modes=6,floating_base=true")):
        q, qd = _state(m, rng, 0.01)
        fl = m.flexible
        flex = sorted(fl.bodies)
        loads = {(flex[0], "tip"): rng.normal(size=6), (flex[-1], "tip"): rng.normal(size=6),
                 0: rng.normal(size=6), flex[1]: rng.normal(size=6)}
        if "mid" in fl.bodies[flex[1]].nodes:
            loads[(flex[1], "mid")] = rng.normal(size=6)
        tau = rng.normal(size=qd.size)
        qdd = flexible_aba(m, q, qd, tau, loads)
        assert _rel(qdd, _flexible_aba_reference(m, q, qd, tau, loads)) < 1e-10
        y = rng.normal(size=qd.size)
        assert _rel(flexible_rnea(m, q, qd, y, loads), _flexible_rnea_reference(m, q, qd, y, loads)) < 1e-10
        mask = np.zeros(m.n, dtype=bool)
        mask[::2] = True
        got = flexible_hybrid_dynamics(m, q, qd, tau, y, mask, loads)
        ref = _flexible_hybrid_dynamics_reference(m, q, qd, tau, y, mask, loads)
        assert _rel(got[0], ref[0]) < 1e-10 and _rel(got[1], ref[1]) < 1e-10
        # an (n, 6) array is the dict of body wrenches; the loads packed once are the loads
        F = rng.normal(size=(m.n, 6))
        assert np.array_equal(flexible_aba(m, q, qd, tau, F), flexible_aba(m, q, qd, tau, dict(enumerate(F))))
        assert np.array_equal(flexible_aba(m, q, qd, tau, flexible_loads(m, loads)), qdd)


# ----------------------------------------------------------------------------- reaction forces, entry points
def test_cfa_entry_points_dispatch_to_the_flexible_functions():
    rng = np.random.default_rng(5)
    _, m = _chain()
    q, qd = _state(m, rng)
    tau = rng.normal(size=qd.size)
    loads = _some_loads(rng)
    ref = flexible_cfa(m, q, qd, tau, loads)
    res = partree.cfa(m, q, qd, tau, loads)
    for a in ("qdd", "joint_wrench", "constraint_force", "drive_force"):
        assert np.array_equal(getattr(res, a), getattr(ref, a))
    assert _rel(ref.qdd, flexible_aba(m, q, qd, tau, loads)) < 1e-15
    # the joint wrenches balance the loads: without them they differ
    assert np.abs(flexible_cfa(m, q, qd, tau).joint_wrench - ref.joint_wrench).max() > 1e-3
    mask = np.array([True, False, False])
    qa = rng.normal(size=qd.size)
    qh, th, rh = flexible_hybrid_forces(m, q, qd, tau, qa, mask, loads)
    out = partree.hybrid_dynamics(m, q, qd, tau, qa, mask, loads, return_forces=True)
    assert np.array_equal(out[0], qh) and np.array_equal(out[1], th)
    assert np.array_equal(out[2].joint_wrench, rh.joint_wrench)
    out = partree.hybrid_dynamics(m, q, qd, tau, qa, mask, loads, return_wrenches=True, return_forces=True)
    assert len(out) == 4 and np.array_equal(out[2], rh.joint_wrench)
    W, tf = flexible_joint_wrenches(m, q, qd, qh, loads)
    assert np.array_equal(W, rh.joint_wrench) and _rel(tf, th) < 1e-10
    # the rigid solvers' options have no meaning here
    for call in (lambda: partree.cfa(m, q, qd, tau, method="odd-even"),
                 lambda: partree.cfa(m, np.tile(q, (2, 1)), np.tile(qd, (2, 1)), np.tile(tau, (2, 1))),
                 lambda: partree.cfa(m, q[:m.nq], qd[:m.nv], tau[:m.nv]),
                 lambda: partree.hybrid_dynamics(m, q[:m.nq], qd[:m.nv], tau[:m.nv], qa[:m.nv], mask,
                                                 return_forces=True)):
        with pytest.raises(PartreeInputError):
            call()


# ----------------------------------------------------------------------------- simulation
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


def test_simulate_with_loads_is_the_rk4_loop_and_balances_energy():
    rng = np.random.default_rng(6)
    _, m = _chain(joints=("revolute", "revolute", "revolute"))
    nq, nv = flexible_state_size(m)
    loads = {(2, "tip"): np.array([0.0, 0.1, 0.0, 0.5, -0.3, 0.8]), "J2": np.array([0.05, 0, 0, 0, 0.2, 0]),
             (0, "mid"): np.array([0, 0, 0.1, 0, 0, -0.4])}
    q0 = np.concatenate((rng.uniform(-0.5, 0.5, m.nq), np.zeros(nq - m.nq)))
    qd0 = np.zeros(nv)
    dt, steps = 1e-4, 200
    res = simulate(m, t_end=steps * dt, dt=dt, integrator="rk4", q0=q0, qd0=qd0, f_ext=loads, progress=False,
                   verbose=False)
    zero = np.zeros(nv)
    ref = _rk4(lambda t, q, v: flexible_aba(m, q, v, zero, loads), q0, qd0, dt, steps)
    assert np.allclose(np.hstack((res.q, res.qd)), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    assert not res.summary["energy"]["conservative"]
    # a callable f_ext(t, q_full, v_full) sees the full state and gives the same run
    seen = []

    def fe(t, q, v):
        seen.append(q.size)
        return loads
    res2 = simulate(m, t_end=10 * dt, dt=dt, integrator="rk4", q0=q0, qd0=qd0, f_ext=fe, progress=False,
                    verbose=False)
    assert set(seen) == {nq} and np.array_equal(res2.q, res.q[:11])

    # the energy balance: the change of kinetic + gravity + elastic energy is the loads' work,
    # integrated along with the state (power Q . v, Q the loads' generalized force)
    def f_aug(x):
        q, v = x[:nq], x[nq:nq + nv]
        Q = flexible_bias(m, q, v) - flexible_bias(m, q, v, loads)
        return np.concatenate((v, flexible_aba(m, q, v, zero, loads), [Q @ v]))
    x = np.concatenate((q0, qd0, [0.0]))
    E0 = sum(flexible_energy(m, q0, qd0))
    for _ in range(steps):
        k1 = f_aug(x)
        k2 = f_aug(x + 0.5 * dt * k1)
        k3 = f_aug(x + 0.5 * dt * k2)
        k4 = f_aug(x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    assert np.allclose(x[:nq + nv], ref[-1], rtol=0, atol=1e-12 * np.abs(ref).max())
    E1 = sum(flexible_energy(m, x[:nq], x[nq:nq + nv]))
    assert abs(x[-1]) > 1e-3 * abs(E1 - E0) and abs(E1 - E0) > 1e-4
    assert abs((E1 - E0) - x[-1]) < 1e-7 * max(abs(x[-1]), abs(E1 - E0))      # measured 8e-9


def test_stiff_limit_with_loads_follows_the_rigid_trajectory():
    """Stiffness x 10 and x 1000, a load at the last link's tip node and a wrench at the first
    link's origin: the joints follow the rigid run under the same wrenches (the tip load moved to
    the origin of the undeformed link), the gap falling as the compliance."""
    L = 0.8
    body, mass, com, I_com = euler_bernoulli_beam(L, 50.0, 2.0, 2, bending="y", polar=1e-3)
    r = np.array([[0, 0, 0], [L, 0, 0.0]])
    rigid = Model([-1, 0], "revolute", np.tile([0, 0, 1.0], (2, 1)), np.tile(np.eye(3), (2, 1, 1)), r, [mass] * 2,
                  np.tile(com, (2, 1)), np.tile(I_com, (2, 1, 1)), gravity=(0.0, -9.81, 0.0))
    w_tip = np.array([0.0, 0.0, 0.1, 0.2, 0.5, 0.0])
    w0 = np.array([0.0, 0.0, -0.2, 0.0, 0.3, 0.0])
    F = np.zeros((2, 6))
    F[0] = w0
    F[1, :3] = w_tip[:3] + np.cross([L, 0, 0], w_tip[3:])
    F[1, 3:] = w_tip[3:]
    kw = dict(t_end=0.05, dt=5e-5, integrator="rk4", save_every=20, q0=np.array([0.5, -0.3]), progress=False,
              verbose=False)
    ref = simulate(rigid, f_ext=F, **kw)
    free = simulate(rigid, **kw)
    gaps = []
    for scale in (10.0, 1000.0):
        flex = rigid.with_flexible({i: body.with_stiffness(scale * body.stiffness) for i in range(2)})
        res = simulate(flex, f_ext={0: w0, (1, "tip"): w_tip}, **kw)
        gaps.append(np.abs(res.q[:, :2] - ref.q).max())
    assert np.abs(free.q - ref.q).max() > 100 * gaps[1]        # the loads move the joints (4.5e-3)
    assert gaps[1] < 3e-5 and gaps[0] / gaps[1] > 30            # measured 1.0e-3, 1.0e-5


# ----------------------------------------------------------------------------- bad input
def test_bad_loads_are_refused():
    rng = np.random.default_rng(7)
    rigid, m = _chain(flex=(0, 2))
    q, qd = _state(m, rng)
    tau = np.zeros(qd.size)
    cases = {
        "has shape": np.zeros((m.n, 5)),
        "has shape \\(5,\\)": {(0, "tip"): np.zeros(5)},
        "has no node 'elbow'": {(0, "elbow"): np.zeros(6)},
        "is rigid": {(1, "tip"): np.zeros(6)},
        "no joint 'J9'": {("J9", "tip"): np.zeros(6)},
        "not a body": {7: np.zeros(6)},
        "not finite": {(2, "mid"): [0, 0, np.nan, 0, 0, 0]},
        "keyed \\(body, node name\\)": {(0, "tip", 1): np.zeros(6)},
    }
    for msg, fe in cases.items():
        for call in (lambda: flexible_aba(m, q, qd, tau, fe), lambda: flexible_rnea(m, q, qd, tau, fe),
                     lambda: flexible_cfa(m, q, qd, tau, fe)):
            with pytest.raises(PartreeInputError, match=msg):
                call()
    with pytest.raises(PartreeInputError, match="has no node"):
        simulate(m, t_end=1e-3, dt=1e-4, f_ext={(0, "elbow"): np.zeros(6)}, progress=False, verbose=False)
    # loads checked for another model (other bodies, or the same number of other flexible bodies)
    for other in (_chain(n=2, joints=("revolute",) * 2, flex=(0,))[1], _chain(flex=(0, 1))[1]):
        with pytest.raises(PartreeInputError, match="another model"):
            flexible_aba(m, q, qd, tau, flexible_loads(other, {0: np.ones(6)}))
