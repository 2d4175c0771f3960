"""The equations of motion in generalized momenta (seed 001): ``generalized_momentum`` against the
mass matrix and the kinetic energy, ``velocity_from_momentum`` (both eliminations) against a dense
solve, ``momentum_rhs`` against the velocity form (ABA and a finite difference of M), against
Lagrange's equations (finite differences of the energies) and against Euler's equations of a free
body, the configuration rate against ``partree.integrate``, the error paths, and a 10^5-body
chain."""
from pathlib import Path

import numpy as np
import pytest

import partree
from partree.algorithms.generalized_momentum import generalized_momentum_kernel
from partree.algorithms.momentum_rhs import configuration_rate
from partree.algorithms.velocity_from_momentum import velocity_from_momentum_kernel
from partree.errors import PartreeInputError
from partree.models import chain, random_tree
from partree.spatial import quat_to_matrix, spatial_inertia

DATA = Path(__file__).resolve().parent / "data"
ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
#: joints whose velocity is the rate of their coordinates (qdot = v)
EUCLIDEAN_TYPES = ("revolute", "prismatic", "universal", "fixed")
G = np.array([0.3, -0.5, -9.81])


def mixed_chain():
    """Every joint type in one 3-D chain on a floating base."""
    seq = ["free", "revolute", "universal", "spherical", "prismatic", "fixed", "revolute", "universal",
           "prismatic", "spherical", "revolute"]
    return chain(len(seq), joint=seq, alternate=True, gravity=G)


MODELS = {
    "cardan-10": lambda: partree.resolve_model("cardan:n=10"),
    "universal-chain": lambda: partree.resolve_model("chain:n=12,joint=universal,alternate=true,gravity=[0.3,-0.5,-9.81]"),
    "binary-31": lambda: partree.resolve_model("binary:n=31"),
    "spherical-chain": lambda: partree.resolve_model("chain:n=8,joint=spherical,gravity=[0.3,-0.5,-9.81]"),
    "mixed-chain": mixed_chain,
    "random-floating": lambda: random_tree(40, seed=17, floating_base=True, joint_types=ALL_TYPES, gravity=G),
    "spacerobot": lambda: partree.resolve_model("spacerobot"),
    "threearm-floating": lambda: partree.resolve_model("threearm:floating_base=true"),
    "arm7-urdf": lambda: partree.resolve_model(str(DATA / "arm7.urdf")),
    "branching-urdf": lambda: partree.resolve_model(str(DATA / "branching.urdf")),
}

#: models whose velocity is the rate of the coordinates, for Lagrange's equations
EUCLIDEAN = {
    "cardan-10": MODELS["cardan-10"],
    "binary-31": MODELS["binary-31"],
    "arm7-urdf": MODELS["arm7-urdf"],
    "random-euclidean": lambda: random_tree(25, seed=5, joint_types=EUCLIDEAN_TYPES, gravity=G),
}


def relative(a, b):
    """max |a - b| / max |b| (b not all zero)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = np.abs(b).max()
    assert scale > 0
    return float(np.abs(a - b).max() / scale)


def state(m, rng):
    return m.random_configuration(rng), m.random_velocity(rng, 1.5)


# ----------------------------------------------------------------------------------------------
# generalized momenta
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_generalized_momentum_is_the_mass_matrix_times_the_velocity(name, rng):
    m = MODELS[name]()
    for _ in range(3):
        q, v = state(m, rng)
        p = partree.generalized_momentum(m, q, v)
        assert p.shape == (m.nv,)
        assert relative(p, partree.crba(m, q) @ v) < 1e-12


def test_generalized_momentum_is_the_velocity_gradient_of_the_kinetic_energy(rng):
    """p_k = dT/dv_k with T from the body velocities and inertias (``kinetic_energy``, no mass
    matrix); T is quadratic in v, so the central difference is exact up to rounding."""
    m = MODELS["random-floating"]()
    q, v = state(m, rng)
    h = 1e-3
    ref = np.empty(m.nv)
    for k in range(m.nv):
        e = np.zeros(m.nv)
        e[k] = h
        ref[k] = (partree.kinetic_energy(m, q, v + e) - partree.kinetic_energy(m, q, v - e)) / (2 * h)
    assert relative(partree.generalized_momentum(m, q, v), ref) < 1e-9


# ----------------------------------------------------------------------------------------------
# velocities of given momenta
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_velocity_from_momentum_solves_the_mass_matrix(name, rng):
    m = MODELS[name]()
    for _ in range(3):
        q = m.random_configuration(rng)
        p = rng.normal(size=m.nv) * 5
        ref = np.linalg.solve(partree.crba(m, q), p)
        v_ldlt = partree.velocity_from_momentum(m, q, p)
        v_sweep = partree.velocity_from_momentum(m, q, p, method="sweep")
        assert relative(v_ldlt, ref) < 1e-10
        assert relative(v_sweep, ref) < 1e-10
        assert relative(v_ldlt, v_sweep) < 1e-10
        assert relative(partree.velocity_from_momentum(m, q, p, method="ldlt"), v_ldlt) == 0.0


@pytest.mark.parametrize("name", ["mixed-chain", "random-floating", "cardan-10"])
def test_solve_and_product_invert_each_other(name, rng):
    m = MODELS[name]()
    q, v = state(m, rng)
    d = m.create_data()
    for method in ("ldlt", "sweep"):
        back = partree.velocity_from_momentum(m, q, partree.generalized_momentum(m, q, v, data=d), method, data=d)
        assert relative(back, v) < 1e-11


@pytest.mark.parametrize("ldlt", [True, False], ids=["ldlt", "sweep"])
def test_the_recovery_pass_gives_the_subtree_momenta(ldlt, rng):
    """mu_i = IA_i v_i + pA_i from the solver's outward pass (what ``momentum_rhs`` uses) equals
    the subtree momenta summed from the body velocities, and its body velocities are the
    product's."""
    m = MODELS["random-floating"]()
    q, v = state(m, rng)
    args = (m.parent, m.jtype, m.axis, m.axis2, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, m.idx_q, m.idx_v)
    d1 = m.create_data()
    p = np.empty(m.nv)
    generalized_momentum_kernel(*args, q, v, d1.E, d1.r, d1.v, d1.c, d1.IA, d1.pA, d1.S, p)
    d2 = m.create_data()
    qd = np.empty(m.nv)
    bad = velocity_from_momentum_kernel(*args, q, p, ldlt, True, d2.E, d2.r, d2.v, d2.c, d2.IA, d2.pA, d2.S,
                                        d2.U, d2.Dinv, d2.u, qd)
    assert bad == -1
    assert relative(qd, v) < 1e-11
    assert relative(d2.v, d1.v) < 1e-11
    assert relative(d2.pA, d1.pA) < 1e-11


# ----------------------------------------------------------------------------------------------
# the equations of motion in momenta
# ----------------------------------------------------------------------------------------------
def mass_matrix_rate_times(m, q, v, h=1e-5):
    """(dM/dt) v along q(t) = q ⊕ v t, by a central difference of the mass matrix."""
    Mp = partree.crba(m, partree.integrate(m, q, v * h))
    Mm = partree.crba(m, partree.integrate(m, q, -v * h))
    return (Mp - Mm) @ v / (2 * h)


@pytest.mark.parametrize("forces", [False, True], ids=["no-f_ext", "f_ext"])
@pytest.mark.parametrize("name", list(MODELS))
def test_momentum_rate_against_the_velocity_form(name, forces, rng):
    """d/dt (M(q) v) = M vdot + (dM/dt) v with vdot from ABA: the momentum form and the velocity
    form are the same motion (quaternion joints included, whose v are body-frame velocities)."""
    m = MODELS[name]()
    q, v = state(m, rng)
    tau = rng.normal(size=m.nv) * 3
    F = rng.normal(size=(m.n, 6)) if forces else None
    M = partree.crba(m, q)
    p = M @ v
    qdot, pdot = partree.momentum_rhs(m, 0.0, q, p, tau, F)
    ref = M @ partree.aba(m, q, v, tau, F) + mass_matrix_rate_times(m, q, v)
    assert pdot.shape == (m.nv,) and qdot.shape == (m.nq,)
    assert relative(pdot, ref) < 1e-7
    assert relative(qdot, configuration_rate(m, q, v)) < 1e-10


def lagrangian_gradient(m, q, v, h=1e-5):
    """dL/dq at fixed qdot = v, L = T - V, by central differences (q a plain vector here)."""
    out = np.empty(m.nq)
    for k in range(m.nq):
        e = np.zeros(m.nq)
        e[k] = h
        Lp = partree.kinetic_energy(m, q + e, v) - partree.potential_energy(m, q + e)
        Lm = partree.kinetic_energy(m, q - e, v) - partree.potential_energy(m, q - e)
        out[k] = (Lp - Lm) / (2 * h)
    return out


def generalized_external_forces(m, q, F):
    """Q_k = sum_j F_j . (J_j e_k): the virtual work of the body wrenches F (body coordinates)
    for a unit velocity of coordinate k (the body velocities of ``forward_kinematics``)."""
    Q = np.empty(m.nv)
    for k in range(m.nv):
        e = np.zeros(m.nv)
        e[k] = 1.0
        Q[k] = np.sum(F * partree.forward_kinematics(m, q, e).v)
    return Q


@pytest.mark.parametrize("forces", [False, True], ids=["no-f_ext", "f_ext"])
@pytest.mark.parametrize("name", list(EUCLIDEAN))
def test_momentum_rate_is_lagranges_equation(name, forces, rng):
    """For joints with qdot = v, pdot = tau + dL/dq|qdot (+ the generalized external forces):
    Lagrange's equations from the energies alone, no dynamics algorithm involved."""
    m = EUCLIDEAN[name]()
    assert m.nq == m.nv
    q, v = state(m, rng)
    tau = rng.normal(size=m.nv) * 3
    F = rng.normal(size=(m.n, 6)) if forces else None
    p = partree.generalized_momentum(m, q, v)
    qdot, pdot = partree.momentum_rhs(m, 0.0, q, p, tau, F)
    ref = tau + lagrangian_gradient(m, q, v)
    if forces:
        ref += generalized_external_forces(m, q, F)
    assert relative(pdot, ref) < 1e-7
    assert relative(qdot, v) < 1e-10


def test_free_body_follows_eulers_equations(rng):
    """One free body: with mu = [l_ang; l_lin] = I v in body coordinates, p = [l_lin; l_ang] (v
    is [linear; angular]), and Euler's equations in the body frame,
    dl_lin/dt = f - w x l_lin, dl_ang/dt = n - w x l_ang - v_lin x l_lin, with the body's weight
    (the gravity g_b = R^T g acting at the centre of mass c), an applied wrench and tau."""
    c = np.array([0.1, -0.2, 0.05])
    Ic = np.array([[0.3, 0.02, -0.01], [0.02, 0.5, 0.03], [-0.01, 0.03, 0.4]])
    mass = 2.5
    m = partree.Model([-1], "free", [[0.0, 0.0, 1.0]], [np.eye(3)], [[0.0, 0.0, 0.0]], [mass], [c], [Ic],
                      gravity=G)
    q, v = state(m, rng)
    w, vl = v[3:], v[:3]
    l_lin = mass * (vl + np.cross(w, c))
    l_ang = Ic @ w + mass * np.cross(c, vl + np.cross(w, c))     # about the body origin
    p = np.concatenate((l_lin, l_ang))
    assert relative(partree.generalized_momentum(m, q, v), p) < 1e-13
    g_b = quat_to_matrix(q[3:7]).T @ G
    n_e, f_e = rng.normal(size=3), rng.normal(size=3)
    tau = rng.normal(size=6)
    f = mass * g_b + f_e + tau[:3]
    n = np.cross(c, mass * g_b) + n_e + tau[3:]
    ref = np.concatenate((f - np.cross(w, l_lin), n - np.cross(w, l_ang) - np.cross(vl, l_lin)))
    _, pdot = partree.momentum_rhs(m, 0.0, q, p, tau, np.concatenate((n_e, f_e))[None])
    assert relative(pdot, ref) < 1e-12


def test_universal_joint_rate_term(rng):
    """The universal joint's first axis turns with the second angle, and its (dS/dt)^T mu term is
    a sizeable part of the rate: one Cardan-jointed body with both angles moving (no gravity), against
    Lagrange's equations."""
    m = partree.resolve_model("cardan:n=1,gravity=[0,0,0]")
    q = m.random_configuration(rng)
    v = np.array([1.3, -0.8])
    d = m.create_data()
    p = partree.generalized_momentum(m, q, v)
    _, pdot = partree.momentum_rhs(m, 0.0, q, p, np.zeros(2), data=d)
    ref = lagrangian_gradient(m, q, v)
    assert relative(pdot, ref) < 1e-7
    # the term itself, -qd_2 (a_2 x b) . mu_ang, from the workspace (S rows, subtree momenta in pA)
    b, a2, mu = d.S[0, :3], d.S[1, :3], d.pA[0]
    term = -v[1] * np.cross(a2, b) @ mu[:3]
    assert abs(term) > 0.05 * np.abs(ref).max()


@pytest.mark.parametrize("name", ["mixed-chain", "random-floating", "branching-urdf"])
def test_configuration_rate_is_the_derivative_of_integrate(name, rng):
    m = MODELS[name]()
    q, v = state(m, rng)
    h = 1e-6
    ref = (partree.integrate(m, q, v * h) - partree.integrate(m, q, -v * h)) / (2 * h)
    assert relative(configuration_rate(m, q, v), ref) < 1e-8


def test_momentum_rhs_integrates_the_velocity_form_motion(rng):
    """Classical RK4 runs of y = (q, p) with momentum_rhs and of (q, v) with ABA approximate the
    same motion (a Cardan chain under gravity: q and v coordinates coincide): the two end points
    differ by the methods' O(h^4) errors only, so halving the step divides the gap by about 16."""
    m = MODELS["cardan-10"]()
    q0, v0 = state(m, rng)
    tau = rng.normal(size=m.nv)
    n = m.nq

    def rk4(f, y, h, steps):
        for _ in range(steps):
            k1 = f(y)
            k2 = f(y + 0.5 * h * k1)
            k3 = f(y + 0.5 * h * k2)
            k4 = f(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return y

    def momentum_form(y):
        return np.concatenate(partree.momentum_rhs(m, 0.0, y[:n], y[n:], tau))

    def velocity_form(y):
        return np.concatenate((y[n:], partree.aba(m, y[:n], y[n:], tau)))

    gaps = []
    for h, steps in ((1e-3, 20), (5e-4, 40)):
        ym = rk4(momentum_form, np.concatenate((q0, partree.generalized_momentum(m, q0, v0))), h, steps)
        yv = rk4(velocity_form, np.concatenate((q0, v0)), h, steps)
        gaps.append(relative(ym[:n], yv[:n]))
        assert relative(partree.velocity_from_momentum(m, ym[:n], ym[n:]), yv[n:]) < 1e-6
    assert gaps[1] < 1e-8
    assert 12 < gaps[0] / gaps[1] < 20


# ----------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------
def test_bad_inputs_name_the_argument(rng):
    m = MODELS["mixed-chain"]()
    q, v = state(m, rng)
    p = rng.normal(size=m.nv)
    tau = np.zeros(m.nv)
    with pytest.raises(PartreeInputError, match=r"^q has shape \(3,\)"):
        partree.generalized_momentum(m, q[:3], v)
    with pytest.raises(PartreeInputError, match=r"^qd has shape"):
        partree.generalized_momentum(m, q, v[:-1])
    with pytest.raises(PartreeInputError, match=r"^q has shape"):
        partree.velocity_from_momentum(m, np.append(q, 0.0), p)
    with pytest.raises(PartreeInputError, match=r"^p has shape"):
        partree.velocity_from_momentum(m, q, p[:-1], method="sweep")
    bad = p.copy()
    bad[4] = np.nan
    with pytest.raises(PartreeInputError, match=r"^p\[4\] is nan"):
        partree.velocity_from_momentum(m, q, bad)
    for method in ("cholesky", "LDLT", None, 1):
        with pytest.raises(PartreeInputError, match=r"^method is .*'ldlt'.*'sweep'"):
            partree.velocity_from_momentum(m, q, p, method=method)
    with pytest.raises(PartreeInputError, match=r"^p has shape"):
        partree.momentum_rhs(m, 0.0, q, p[:-2], tau)
    with pytest.raises(PartreeInputError, match=r"^tau has shape"):
        partree.momentum_rhs(m, 0.0, q, p, tau[:-1])
    with pytest.raises(PartreeInputError, match=r"^tau is None"):
        partree.momentum_rhs(m, 0.0, q, p, None)
    with pytest.raises(PartreeInputError, match=r"^f_ext has shape"):
        partree.momentum_rhs(m, 0.0, q, p, tau, np.zeros((m.n - 1, 6)))
    zero = q.copy()
    zero[3:7] = 0.0                                    # the free joint's quaternion
    with pytest.raises(PartreeInputError, match=r"quaternion q\[3:7\]"):
        partree.momentum_rhs(m, 0.0, zero, p, tau)
    with pytest.raises(PartreeInputError, match=r"^v has shape"):
        configuration_rate(m, q, v[:-1])
    with pytest.raises(PartreeInputError, match="different model"):
        partree.velocity_from_momentum(m, q, p, data=MODELS["cardan-10"]().create_data())


def massless_leaf_chain():
    """Four links whose last is massless (the model check is off so that the solvers' own check
    is what refuses it)."""
    src = chain(4, alternate=True)
    mass, Ic = src.mass.copy(), src.I_com.copy()
    mass[3], Ic[3] = 0.0, 0.0
    return partree.Model(src.parent, "revolute", src.axis, src.E_tree, src.r_tree, mass, src.com, Ic,
                         joint_names=[f"joint{i}" for i in range(4)], allow_massless=True, validate=False)


def test_singular_joint_block_names_the_joint(rng):
    m = massless_leaf_chain()
    q = m.random_configuration(rng)
    p = rng.normal(size=m.nv)
    msg = r"joint 'joint3' \(body 3\): its subtree has a singular inertia"
    for method in ("ldlt", "sweep"):
        with pytest.raises(PartreeInputError, match=msg):
            partree.velocity_from_momentum(m, q, p, method=method)
    with pytest.raises(PartreeInputError, match=msg):
        partree.momentum_rhs(m, 0.0, q, p, np.zeros(m.nv))


# ----------------------------------------------------------------------------------------------
# large: O(N), no mass matrix
# ----------------------------------------------------------------------------------------------
def test_hundred_thousand_body_chain(rng):
    """A 10^5-body chain (a dense M would take 80 GB): both solvers run, and the product of the
    solution gives back p (backward error); momentum_rhs runs and its rates are finite, with
    pdot sampled against tau + S_i^T (F_i - v_i x* mu_i) at the tip, where the subtree is one
    body."""
    m = chain(100_000, alternate=True)
    q = m.random_configuration(rng)
    p = rng.normal(size=m.nv)
    v = {}
    for method in ("ldlt", "sweep"):
        v[method] = partree.velocity_from_momentum(m, q, p, method=method)
        assert relative(partree.generalized_momentum(m, q, v[method]), p) < 1e-9
    assert relative(v["sweep"], v["ldlt"]) < 1e-9
    tau = rng.normal(size=m.nv)
    qdot, pdot = partree.momentum_rhs(m, 0.0, q, p, tau)
    assert np.isfinite(pdot).all()
    assert relative(qdot, v["ldlt"]) < 1e-12
    # the tip body alone: its momentum I v, gravity I [0; g_b], axis S (revolute: [a; 0])
    kin = partree.forward_kinematics(m, q, v["ldlt"])
    tip = m.n - 1
    I = spatial_inertia(m.mass[tip], m.com[tip], m.I_com[tip])
    vt = kin.v[tip]
    mu = I @ vt
    F = I @ np.concatenate((np.zeros(3), kin.R[tip].T @ m.gravity))
    w, u = vt[:3], vt[3:]
    cross = np.concatenate((np.cross(w, mu[:3]) + np.cross(u, mu[3:]), np.cross(w, mu[3:])))
    ref = tau[-1] + m.axis[tip] @ (F - cross)[:3]
    assert abs(pdot[-1] - ref) < 1e-9 * max(1.0, abs(ref))


def test_call_path_out_check_and_workspace():
    """The compiled call path: ``out=`` is written and returned, ``check=False`` and a workspace
    of one's own give the same numbers, and bad values are still named (they take the checked
    path)."""
    m = partree.resolve_model("cardan:n=10")
    rng = np.random.default_rng(3)
    q, qd = m.random_configuration(rng), rng.normal(size=m.nv)
    p = partree.generalized_momentum(m, q, qd)
    tau = rng.normal(size=m.nv)
    ref = partree.velocity_from_momentum(m, q, p)
    out = np.full(m.nv, np.nan)
    d = m.create_data()
    assert partree.velocity_from_momentum(m, q, p, data=d, out=out, check=False) is out
    assert np.array_equal(out, ref)
    qdot, pdot = partree.momentum_rhs(m, 0.0, q, p, tau)
    qdot2, pdot2, v2 = partree.momentum_rhs(m, 0.0, q, p, tau, data=d, check=False, return_velocity=True)
    assert np.array_equal(qdot, qdot2) and np.array_equal(pdot, pdot2) and np.array_equal(v2, ref)
    bad = p.copy()
    bad[3] = np.nan
    with pytest.raises(PartreeInputError, match="p"):
        partree.velocity_from_momentum(m, q, bad)
    with pytest.raises(PartreeInputError, match="p"):
        partree.momentum_rhs(m, 0.0, q, bad, tau)
    with pytest.raises(PartreeInputError):
        partree.velocity_from_momentum(m, q, p, out=np.empty(m.nv + 1))
