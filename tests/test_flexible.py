"""Dynamics of trees with flexible bodies (partree.algorithms.flexible_dynamics) against
independent references: the compiled rigid algorithms, dense solves of the mass matrix, the energy,
and a fine chain of rigid segments joined by torsional springs."""
import numpy as np
import pytest

import partree
from partree.algorithms.flexible_dynamics import (flexible_aba, flexible_bias, flexible_crba, flexible_energy,
                                                   flexible_hybrid_dynamics, flexible_rnea, flexible_state_size)
from partree.errors import PartreeInputError
from partree.model import Model
from partree.models.beam import euler_bernoulli_beam
from partree.models.generators import random_tree


def _beam_chain(n, joints, flex, EI=50.0, rhoA=2.0, L=0.8, modes=4, bending="yz", gravity=(0, 0, -9.81),
                damping_ratio=0.0):
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, rhoA, modes, bending=bending, polar=1e-3,
                                                  damping_ratio=damping_ratio)
    parent = np.arange(n) - 1
    r = np.zeros((n, 3))
    r[1:, 0] = L
    axis = np.tile([0, 0, 1.0], (n, 1))
    axis[0] = (0, 1.0, 0)
    joints = [joints] * n if isinstance(joints, str) else list(joints)
    axis[[j == "universal" for j in joints]] = (0, 1.0, 0)
    rigid = Model(parent, joints, axis, np.tile(np.eye(3), (n, 1, 1)), r, [mass] * n, np.tile(com, (n, 1)),
                  np.tile(I_com, (n, 1, 1)), axis2=np.tile([0, 0, 1.0], (n, 1)), gravity=gravity)
    return rigid, rigid.with_flexible({i: body for i in flex}), body


def _state(model, rng, eta_scale=0.05):
    nq, nv = flexible_state_size(model)
    q = np.concatenate((model.random_configuration(rng), eta_scale * rng.normal(size=nq - model.nq)))
    return q, rng.normal(size=nv)


def test_rigid_model_gives_the_rigid_algorithms():
    rng = np.random.default_rng(0)
    m = random_tree(12, seed=3, floating_base=True)
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    qdd, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)
    assert np.allclose(flexible_rnea(m, q, qd, qdd), partree.rnea(m, q, qd, qdd), rtol=0, atol=1e-10)
    assert np.allclose(flexible_aba(m, q, qd, tau), partree.aba(m, q, qd, tau), rtol=0, atol=1e-10)
    assert np.allclose(flexible_crba(m, q), partree.crba(m, q), rtol=0, atol=1e-10)


@pytest.mark.parametrize("damping", [0.0, 0.02])
def test_aba_is_the_dense_solve_of_crba_and_rnea(damping):
    rng = np.random.default_rng(1)
    _, m, _ = _beam_chain(4, ["revolute", "universal", "revolute", "spherical"], [0, 1, 2],
                          damping_ratio=damping)
    q, qd = _state(m, rng)
    tau = rng.normal(size=qd.size)
    M = flexible_crba(m, q)
    b = flexible_bias(m, q, qd)
    assert np.abs(M - M.T).max() < 1e-12 * np.abs(M).max()
    assert np.linalg.eigvalsh(M).min() > 0
    qdd = flexible_aba(m, q, qd, tau)
    ref = np.linalg.solve(M, tau - b)
    assert np.abs(qdd - ref).max() < 1e-10 * np.abs(ref).max()
    # inverse dynamics undoes forward dynamics; and is M qdd + b for any qdd
    assert np.abs(flexible_rnea(m, q, qd, qdd) - tau).max() < 1e-10 * np.abs(b).max()
    y = rng.normal(size=qd.size)
    assert np.abs(flexible_rnea(m, q, qd, y) - (M @ y + b)).max() < 1e-11 * np.abs(M @ y).max()


def test_zero_deformation_changes_nothing():
    rng = np.random.default_rng(2)
    rigid, m, _ = _beam_chain(4, ["revolute", "universal", "revolute", "revolute"], [0, 2, 3])
    nq, nv = flexible_state_size(m)
    ne = nv - rigid.nv
    q = rigid.random_configuration(rng)
    qd, qdd = rigid.random_velocity(rng), rng.normal(size=rigid.nv)
    qf, qdf, qddf = (np.concatenate((x, np.zeros(ne))) for x in (q, qd, qdd))
    tau = flexible_rnea(m, qf, qdf, qddf)
    assert np.allclose(tau[:rigid.nv], partree.rnea(rigid, q, qd, qdd), rtol=0, atol=1e-10)
    M = flexible_crba(m, qf)
    assert np.allclose(M[:rigid.nv, :rigid.nv], partree.crba(rigid, q), rtol=0, atol=1e-12)
    # with the modes held (their accelerations the unknown modal forces keep at zero), the joints
    # accelerate as the rigid model's: the Schur complement of the modal block
    tq = rng.normal(size=rigid.nv)
    b = flexible_bias(m, qf, qdf)
    Mjj = M[:rigid.nv, :rigid.nv]
    assert np.allclose(np.linalg.solve(Mjj, tq - b[:rigid.nv]), partree.aba(rigid, q, qd, tq), rtol=0, atol=1e-9)


def _rk4(f, x, dt, steps, record=None):
    out = [] if record is not None else None
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + 0.5 * dt * k1)
        k3 = f(x + 0.5 * dt * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        if out is not None:
            out.append(record(x))
    return x, out


def _flexible_rhs(m):
    nq, nv = flexible_state_size(m)
    zero = np.zeros(nv)

    def f(x):
        return np.concatenate((x[nq:], flexible_aba(m, x[:nq], x[nq:], zero)))
    return f, nq


def test_energy_is_conserved_without_damping():
    rng = np.random.default_rng(3)
    _, m, _ = _beam_chain(2, ["universal", "revolute"], [0, 1], EI=20.0, modes=2)
    q, qd = _state(m, rng, eta_scale=0.01)
    qd *= 0.5
    f, nq = _flexible_rhs(m)
    x0 = np.concatenate((q, qd))
    H = lambda x: sum(flexible_energy(m, x[:nq], x[nq:]))      # noqa: E731
    T0, V0, E0 = flexible_energy(m, q, qd)
    x, _ = _rk4(f, x0, 2.5e-4, 400)
    T1, V1, E1 = flexible_energy(m, x[:nq], x[nq:])
    assert abs(T1 - T0) > 0.1 and abs(E1 - E0) > 1e-3         # energy moved between its forms
    assert abs(H(x) - H(x0)) < 1e-6 * (abs(T0) + abs(V0) + E0)


def test_energy_decreases_with_damping():
    rng = np.random.default_rng(4)
    _, m, _ = _beam_chain(1, ["universal"], [0], EI=20.0, modes=2, damping_ratio=0.05)
    q, qd = _state(m, rng, eta_scale=0.01)
    f, nq = _flexible_rhs(m)
    x0 = np.concatenate((q, qd))
    H = lambda x: sum(flexible_energy(m, x[:nq], x[nq:]))      # noqa: E731
    x, hist = _rk4(f, x0, 5e-4, 100, record=H)
    assert np.all(np.diff([H(x0)] + hist) < 1e-9)


def test_stiff_link_follows_the_rigid_link():
    """stiffness -> infinity: the flexible double pendulum's joints follow the rigid one's."""
    rigid, soft, body = _beam_chain(2, ["revolute", "revolute"], [0, 1], EI=50.0, modes=1, bending="y",
                                    gravity=(0, -9.81, 0))
    rigid = Model(rigid.parent, "revolute", np.tile([0, 0, 1.0], (2, 1)), rigid.E_tree, rigid.r_tree, rigid.mass,
                  rigid.com, rigid.I_com, gravity=(0, -9.81, 0))
    q0 = np.array([0.3, -0.2])
    dt, steps = 2.5e-4, 400
    xr, ref = _rk4(lambda x: np.concatenate((x[2:], partree.aba(rigid, x[:2], x[2:], np.zeros(2)))),
                   np.concatenate((q0, np.zeros(2))), dt, steps, record=lambda x: x[:2].copy())
    errors = []
    for scale in (1e1, 1e3):
        stiff = body.with_stiffness(scale * body.stiffness)
        m = rigid.with_flexible({0: stiff, 1: stiff})
        f, nq = _flexible_rhs(m)
        x0 = np.concatenate((q0, np.zeros(2), np.zeros(4)))
        _, hist = _rk4(f, x0, dt, steps, record=lambda x: x[:2].copy())
        errors.append(np.abs(np.array(hist) - np.array(ref)).max())
    assert errors[1] < 1e-3
    assert errors[1] < 0.05 * errors[0]        # the difference goes as the compliance


def test_cantilever_matches_a_chain_of_rigid_segments():
    """A clamped beam released under a small gravity load: the modal link's tip deflection against
    a chain of 100 rigid segments joined by torsional springs (EI / l; 2 EI / l at the clamp)."""
    L, EI, rhoA, g = 1.0, 12.8, 1.0, 0.1
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, rhoA, 4, bending="z")
    one = Model([-1], "fixed", [[0, 1.0, 0]], [np.eye(3)], [[0, 0, 0]], [mass], [com], [I_com],
                gravity=(0, 0, -g)).with_flexible({0: body})
    Phi_tip = body.nodes["tip"][1]
    f, nq = _flexible_rhs(one)
    T_end, dt = 0.26, 1e-3                       # past the first swing's lowest point (half a period)
    steps = int(round(T_end / dt))
    _, zf = _rk4(f, np.zeros(2 * nq), dt, steps, record=lambda x: float(Phi_tip[2] @ x[:nq]))
    N = 100
    ell = L / N
    r = np.zeros((N, 3))
    r[1:, 0] = ell
    Ic = np.diag([1e-12, 1.0, 1.0]) * rhoA * ell ** 3 / 12
    chain = Model(np.arange(N) - 1, "revolute", np.tile([0, 1.0, 0], (N, 1)), np.tile(np.eye(3), (N, 1, 1)), r,
                  np.full(N, rhoA * ell), np.tile([ell / 2, 0, 0], (N, 1)), np.tile(Ic, (N, 1, 1)),
                  gravity=(0, 0, -g))
    k = np.full(N, EI / ell)
    k[0] = 2 * EI / ell

    def tip(x):
        kin = partree.forward_kinematics(chain, x[:N])
        return float((kin.p[-1] + kin.R[-1] @ np.array([ell, 0, 0]))[2])

    sub = 110                                    # the chain's zigzag mode (2.5e5 rad/s) needs the finer step
    rhs = lambda x: np.concatenate((x[N:], partree.aba(chain, x[:N], x[N:], -k * x[:N], check=False)))    # noqa: E731
    x = np.zeros(2 * N)
    zc = []
    for _ in range(steps):
        x, _ = _rk4(rhs, x, dt / sub, sub)
        zc.append(tip(x))
    zf, zc = np.array(zf), np.array(zc)
    static = g * rhoA * L ** 4 / (8 * EI)
    assert 1.5 * static < -zc.min() < 2.5 * static            # it swings through about twice the sag
    assert -zc.min() < 0.01 * L                                # small deflection
    assert np.abs(zf - zc).max() < 0.02 * np.abs(zc).max()


def test_wrong_state_sizes_are_refused():
    _, m, _ = _beam_chain(2, ["revolute", "revolute"], [0], modes=2, bending="y")
    with pytest.raises(PartreeInputError, match="modal"):
        flexible_aba(m, np.zeros(m.nq), np.zeros(m.nv), np.zeros(m.nv))


def _spin_up(stiffening, modes=2, dt=0.05, T_end=16.0, limit=10.0):
    """The classic spin-up beam: 10 m, EI = 1.4e4 N m^2, 1.2 kg/m, hub speed ramped to 6 rad/s
    over 15 s (Kane, Ryan and Banerjee's profile); the hub angle is given, the modes are free.
    Returns the tip deflection's history (stopped once past ``limit``)."""
    L, EI, rhoA, Om, Tr = 10.0, 1.4e4, 1.2, 6.0, 15.0
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, rhoA, modes, bending="y", stiffening=stiffening)
    m = Model([-1], "revolute", [[0, 0, 1.0]], [np.eye(3)], [[0, 0, 0]], [mass], [com], [I_com],
              gravity=(0, 0, 0)).with_flexible({0: body})
    c = Tr / (2 * np.pi)

    def hub(t):
        if t < Tr:
            return (Om / Tr * (t * t / 2 + c * c * (np.cos(t / c) - 1)), Om / Tr * (t - c * np.sin(t / c)),
                    Om / Tr * (1 - np.cos(t / c)))
        return Om / Tr * (Tr * Tr / 2) + Om * (t - Tr), Om, 0.0

    def f(t, x):
        th, thd, thdd = hub(t)
        q, qd = np.concatenate(([th], x[:modes])), np.concatenate(([thd], x[modes:]))
        M, b = flexible_crba(m, q), flexible_bias(m, q, qd)
        return np.concatenate((x[modes:], np.linalg.solve(M[1:, 1:], -b[1:] - M[1:, 0] * thdd)))

    tip_phi = body.nodes["tip"][1][1]
    x, t, tip = np.zeros(2 * modes), 0.0, []
    for _ in range(int(round(T_end / dt))):
        k1 = f(t, x)
        k2 = f(t + dt / 2, x + dt / 2 * k1)
        k3 = f(t + dt / 2, x + dt / 2 * k2)
        k4 = f(t + dt, x + dt * k3)
        x, t = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), t + dt
        tip.append(float(tip_phi @ x[:modes]))
        if not abs(tip[-1]) < limit:
            break
    return t, np.array(tip)


def test_spin_up_beam_diverges_without_geometric_stiffening():
    # past its first bending frequency (3.8 rad/s, near t = 8.5 s) the linear modal beam softens away
    t, tip = _spin_up(False)
    assert t < 12.0 and not abs(tip[-1]) < 10.0


def test_spin_up_beam_stays_bounded_with_geometric_stiffening():
    t, tip = _spin_up(True)
    assert t == pytest.approx(16.0)
    assert 0.3 < np.abs(tip).max() < 1.0          # lags the hub by about half a metre during the ramp
    assert np.abs(tip[-20:]).max() < 0.1          # and comes back once the speed is steady


def test_geometric_stiffening_keeps_aba_consistent():
    rng = np.random.default_rng(5)
    body, mass, com, I_com = euler_bernoulli_beam(0.8, 20.0, 2.0, 3, bending="yz", polar=1e-3, stiffening=True)
    m = Model([-1, 0], ["spherical", "revolute"], [[0, 0, 1.0]] * 2, [np.eye(3)] * 2, [[0, 0, 0], [0.8, 0, 0]],
              [mass] * 2, [com] * 2, [I_com] * 2).with_flexible({0: body, 1: body})
    q, qd = _state(m, rng)
    tau = rng.normal(size=qd.size)
    M, b = flexible_crba(m, q), flexible_bias(m, q, qd)
    ref = np.linalg.solve(M, tau - b)
    assert np.abs(flexible_aba(m, q, qd, tau) - ref).max() < 1e-10 * np.abs(ref).max()
    plain = m.with_flexible({0: body.without_stiffening(), 1: body.without_stiffening()})
    assert np.abs(flexible_bias(plain, q, qd) - b).max() > 1e-3      # the term is there


def test_threearm_with_flexible_links():
    """The seed-002 example: ten links with six modes each (76 coordinates with the floating base)."""
    m = partree.resolve_model("threearm:flexible=true,modes=6")
    rigid = partree.resolve_model("threearm")
    assert m.flexible.n_modal == 60 and list(m.flexible.nmodes) == [6] * 10
    floating = partree.resolve_model("threearm:flexible=true,modes=6,floating_base=true")
    assert flexible_state_size(floating)[1] == 76
    rng = np.random.default_rng(6)
    q, qd = _state(m, rng, eta_scale=0.005)
    tau = rng.normal(size=qd.size)
    M, b = flexible_crba(m, q), flexible_bias(m, q, qd)
    ref = np.linalg.solve(M, tau - b)
    assert np.abs(flexible_aba(m, q, qd, tau) - ref).max() < 1e-10 * np.abs(ref).max()
    # undeformed and with the modes still, the joints see the rigid manipulator
    q0, qd0 = rigid.random_configuration(rng), rigid.random_velocity(rng)
    qdd0 = rng.normal(size=rigid.nv)
    z = np.zeros(60)
    tau0 = flexible_rnea(m, np.concatenate((q0, z)), np.concatenate((qd0, z)), np.concatenate((qdd0, z)))
    assert np.allclose(tau0[:rigid.nv], partree.rnea(rigid, q0, qd0, qdd0), rtol=0, atol=1e-10)


def _dense_split(m, q, qd, tau, qdd, mask):
    """The partitioned solve with the dense mass matrix and bias: the joints of ``mask`` have
    their accelerations given, every other coordinate (the modes included) its force."""
    M, b = flexible_crba(m, q), flexible_bias(m, q, qd)
    act = np.zeros(M.shape[0], dtype=bool)
    act[:m.nv] = np.repeat(mask, m.nv_j)
    a, p = np.flatnonzero(act), np.flatnonzero(~act)
    qdd_full = np.array(qdd, dtype=float)
    qdd_full[p] = np.linalg.solve(M[np.ix_(p, p)], tau[p] - b[p] - M[np.ix_(p, a)] @ qdd_full[a])
    tau_full = np.array(tau, dtype=float)
    tau_full[a] = M[a] @ qdd_full + b[a]
    return qdd_full, tau_full


@pytest.mark.parametrize("floating", [False, True])
def test_hybrid_dynamics_is_the_dense_partitioned_solve(floating):
    """Active joints' accelerations given, the other joints and every mode free: equal to the
    partitioned solve with flexible_crba's mass matrix; every joint passive is flexible_aba."""
    m = partree.resolve_model("threearm:flexible=true,modes=6" + (",floating_base=true" if floating else ""))
    rng = np.random.default_rng(11)
    q, qd = _state(m, rng, eta_scale=0.005)
    tau, qdd = rng.normal(size=qd.size), rng.normal(size=qd.size)
    for mask in (np.zeros(m.n, dtype=bool), rng.random(m.n) < 0.4, np.ones(m.n, dtype=bool)):
        got = flexible_hybrid_dynamics(m, q, qd, tau, qdd, mask)
        ref = _dense_split(m, q, qd, tau, qdd, mask)
        for x, r in zip(got, ref):
            assert np.abs(x - r).max() < 1e-10 * np.abs(r).max()
        dof = np.repeat(mask, m.nv_j)
        assert np.array_equal(got[0][:m.nv][dof], qdd[:m.nv][dof])
    assert np.array_equal(flexible_hybrid_dynamics(m, q, qd, tau, qdd, np.zeros(m.n, dtype=bool))[0],
                          flexible_aba(m, q, qd, tau))
    # the seed's split by name, the ignored entries may be anything
    names = [m.joint_names[i] for i in (0, 4, 5)]
    t2, a2 = tau.copy(), qdd.copy()
    mask = np.isin(np.arange(m.n), [0, 4, 5])
    dof = np.zeros(qd.size, dtype=bool)
    dof[:m.nv] = np.repeat(mask, m.nv_j)
    t2[dof], a2[~dof] = np.nan, np.nan
    got = flexible_hybrid_dynamics(m, q, qd, t2, a2, names)
    ref = _dense_split(m, q, qd, tau, qdd, mask)
    assert np.abs(got[0] - ref[0]).max() < 1e-10 * np.abs(ref[0]).max()
    with pytest.raises(PartreeInputError, match="shape"):
        flexible_hybrid_dynamics(m, q, qd, tau, qdd, np.zeros(m.n - 1, dtype=bool))
    with pytest.raises(PartreeInputError, match="does not have"):
        flexible_hybrid_dynamics(m, q, qd, tau, qdd, ["nope"])
    with pytest.raises(PartreeInputError, match="qdd"):
        flexible_hybrid_dynamics(m, q, qd, tau, qdd[:-1], mask)


@pytest.mark.parametrize("ids", [[1, 2], [0, 2, 3], [2], [0, 1, 2, 3]])
def test_select_keeps_the_flexible_bodies(ids):
    """Model.select keeps the modal data of the selected bodies, renumbered, and equals the model
    built directly from the selected rows (a child of a left-out body becomes a base body)."""
    rigid, m, body = _beam_chain(4, "revolute", [0, 2, 3], modes=3)
    sub = m.select(ids)
    ids = np.asarray(ids)
    new = {k: body for k, i in enumerate(ids) if int(i) in (0, 2, 3)}
    par = np.array([list(ids).index(p) if p in ids else -1 for p in rigid.parent[ids]])
    direct = Model(par, rigid.jtype[ids], rigid.axis[ids], rigid.E_tree[ids], rigid.r_tree[ids], rigid.mass[ids],
                   rigid.com[ids], rigid.I_com[ids], axis2=rigid.axis2[ids], gravity=rigid.gravity, flexible=new)
    assert sorted(sub.flexible.bodies) == sorted(new)
    assert np.array_equal(sub.flexible.nmodes, direct.flexible.nmodes)
    assert np.array_equal(sub.flexible.idx_eta, direct.flexible.idx_eta)
    assert sub.flexible.n_modal == 3 * len(new) and sub.flexible.node_of == direct.flexible.node_of
    rng = np.random.default_rng(11)
    q, qd = _state(sub, rng)
    tau = rng.normal(size=qd.size)
    assert np.array_equal(flexible_aba(sub, q, qd, tau), flexible_aba(direct, q, qd, tau))
    assert rigid.select(ids).flexible is None
    assert sub.with_flexible({}).select([0]).flexible is None
