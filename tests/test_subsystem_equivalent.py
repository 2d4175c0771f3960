"""partree.subsystem_equivalent: a subsystem's equivalent 6x6 mass matrix and 6x1 force at its
base (seed 004), against independent references.

* Brute force, dense: the subsystem copied onto a massless free-floating virtual base at the
  base body's pose and velocity; the base's acceleration prescribed (the 6 unit vectors and
  zero), the subsystem's joint accelerations and loop multipliers from the dense KKT system
  [[M_ss, -J_s^T], [J_s, 0]] (CRBA, RNEA, partree.loop_constraints), and the base wrench read
  off the free joint's row.  Open chains, branched subtrees, several subtrees on one base,
  subsystems holding closed loops (a four-bar, random loops of every kind), hanging from a
  moving body in the middle of a tree or from the world; random q, qd, tau, external wrenches.
* Identities: M symmetric positive semi-definite; for an open subtree M and f are ABA's
  articulated inertia and bias force of its root, moved to the base; a single body welded to
  its base gives its rigid spatial inertia.
* The relation in use: a free-floating body carrying subsystems accelerates as
  (I_base + M)^-1 (S tau - bias - f), as partree.aba / partree.constrained_dynamics of the
  whole model say.
* The inputs refused.

States close the loops: each loop is built with its two frames coinciding at a random
configuration (frame B's placement computed from frame A's pose), and correct_state projects a
random velocity onto the loops' tangent space.
"""
import numpy as np
import pytest

import partree
from partree import Loop, ModelBuilder
from partree.algorithms.aba import aba_backward_pass, aba_forward_pass1
from partree.errors import PartreeInputError
from partree.joints import FREE
from partree.models.generators import chain, random_tree
from partree.spatial import axis_angle, crf, matrix_to_quat, motion_xform, spatial_inertia

TOL = 1e-9


def rel(a, b, floor=1e-12):
    """max |a - b| relative to the size of b (absolute below ``floor``)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max(initial=0.0) / max(np.abs(b).max(initial=0.0), floor))


def subtree(model, r):
    out = [r]
    for i in range(r + 1, model.n):
        if model.parent[i] in out:
            out.append(i)
    return np.array(out)


# ------------------------------------------------------------------------ loops closed at a state
def rotation(rng):
    return axis_angle(rng.normal(size=3), rng.uniform(-np.pi, np.pi))


def unit(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def closed_loop(kin, name, kind, a, b, rng):
    """A loop of ``kind`` between bodies a and b, closed at the configuration of ``kin``: frame B
    placed on body b where frame A (random on body a) is."""
    Ra, pa = rotation(rng), rng.uniform(-0.4, 0.4, size=3)
    RA, oA = kin.R[a] @ Ra, kin.p[a] + kin.R[a] @ pa
    Rb, pb = kin.R[b].T @ RA, kin.R[b].T @ (oA - kin.p[b])
    axis, length = None, None
    if kind in ("revolute", "prismatic"):
        axis = unit(rng)
    elif kind == "universal":
        u1 = unit(rng)
        u2 = np.cross(u1, unit(rng))
        axis = (u1, u2 / np.linalg.norm(u2))
    elif kind == "distance":
        pb = rng.uniform(-0.4, 0.4, size=3)
        length = float(np.linalg.norm(kin.p[b] + kin.R[b] @ pb - oA))
    return Loop(name, kind, a, b, (Ra, pa), (Rb, pb), axis=axis, length=length)


def with_closed_loops(model, q0, pairs, kinds, rng):
    kin = partree.forward_kinematics(model, q0)
    loops = [closed_loop(kin, f"loop{k}", kind, a, b, rng) for k, ((a, b), kind) in enumerate(zip(pairs, kinds))]
    return model.with_loops(loops, replace=True)


def closed_state(model, q0, rng, speed=1.0):
    q, qd = partree.correct_state(model, q0, model.random_velocity(rng, speed))
    lc = partree.loop_constraints(model, q, qd)
    assert np.abs(lc.phi).max(initial=0.0) <= 1e-11 and np.abs(lc.velocity).max(initial=0.0) <= 1e-10
    return q, qd


# ------------------------------------------------------------------------------- the brute force
#: a free joint's velocity is [linear; angular] (body frame), a spatial vector [angular; linear]
SWAP = np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])


def virtual_model(model, ids, base, q, qd, f_ext, gravity):
    """The bodies ``ids`` on a massless free body at the base's pose and velocity (the world's for
    base -1), with the loops among them; its state and external wrenches."""
    kin = partree.forward_kinematics(model, q, qd)
    R, p, v = (kin.R[base], kin.p[base], kin.v[base]) if base >= 0 else (np.eye(3), np.zeros(3), np.zeros(6))
    loc = {int(g): k + 1 for k, g in enumerate(ids)}
    parent = [-1] + [0 if model.parent[i] == base else loc[int(model.parent[i])] for i in ids]

    def cat(name, first):
        return np.concatenate([first[None], getattr(model, name)[ids]])

    vm = partree.Model(parent, np.concatenate([[FREE], model.jtype[ids]]), cat("axis", np.zeros(3)),
                       cat("E_tree", np.eye(3)), cat("r_tree", np.zeros(3)), cat("mass", np.zeros(())),
                       cat("com", np.zeros(3)), cat("I_com", np.zeros((3, 3))), axis2=cat("axis2", np.zeros(3)),
                       gravity=model.gravity if gravity else np.zeros(3), allow_massless=True, inertia="warn")
    loops = []
    for k in range(len(model.loops)):
        a, b = int(model.loops.body_a[k]), int(model.loops.body_b[k])
        if a in loc and b in loc:
            lp = model.loops.loop(k)
            lp.body_a, lp.body_b = loc[a], loc[b]
            loops.append(lp)
    if loops:
        vm = vm.with_loops(loops)
    qs = np.concatenate([np.arange(model.idx_q[i], model.idx_q[i] + model.nq_j[i]) for i in ids]).astype(int)
    vs = np.concatenate([np.arange(model.idx_v[i], model.idx_v[i] + model.nv_j[i]) for i in ids]).astype(int)
    qv = np.concatenate([p, matrix_to_quat(R), q[qs]])
    qdv = np.concatenate([SWAP @ v, qd[vs]])
    F = np.zeros((vm.n, 6))
    if f_ext is not None:
        F[1:] = f_ext[ids]
    kv = partree.forward_kinematics(vm, qv, qdv)
    assert rel(kv.R[0], R) < 1e-13 and rel(kv.v[0], v) < 1e-13
    return vm, qv, qdv, F, vs


def brute_force(model, res, q, qd, tau, f_ext=None, gravity=False):
    """(M, f) of the relation f_base = M a + f from the dense KKT system of the virtual model,
    for base accelerations a prescribed as the virtual free joint's acceleration (the base's
    true acceleration; with ``gravity`` the virtual model has the model's gravity)."""
    vm, qv, qdv, F, vs = virtual_model(model, res.bodies, res.base, q, qd, f_ext, gravity)
    Mf = partree.crba(vm, qv)
    h = partree.rnea(vm, qv, qdv, np.zeros(vm.nv), f_ext=F)
    ts = tau[vs]
    if len(vm.loops):
        lc = partree.loop_constraints(vm, qv, qdv)
        J, gamma = lc.J.toarray(), lc.gamma
    else:
        J, gamma = np.zeros((0, vm.nv)), np.zeros(0)
    Js, Jb = J[:, 6:], J[:, :6]
    # the independent rows (redundant ones, e.g. a planar mechanism's out-of-plane rows, dropped)
    U, s, _ = np.linalg.svd(Js, full_matrices=False) if J.shape[0] else (np.zeros((0, 0)), np.zeros(0), None)
    U = U[:, s > 1e-10 * max(s.max(initial=0.0), 1.0)]
    Jr = U.T @ Js
    ns, r = Js.shape[1], Jr.shape[0]
    K = np.block([[Mf[6:, 6:], -Jr.T], [Jr, np.zeros((r, r))]])

    def wrench(a):
        qddb = SWAP @ a
        rhs = np.concatenate([ts - h[6:] - Mf[6:, :6] @ qddb, U.T @ (gamma - Jb @ qddb)])
        x = np.linalg.solve(K, rhs)
        x += np.linalg.solve(K, rhs - K @ x)
        lam = U @ x[ns:]
        taub = Mf[:6, :6] @ qddb + Mf[:6, 6:] @ x[:ns] + h[:6] - Jb.T @ lam
        return SWAP @ taub

    f = wrench(np.zeros(6))
    M = np.column_stack([wrench(e) - f for e in np.eye(6)])
    return M, f


def check(model, bodies, q, qd, tau, f_ext=None):
    res = partree.subsystem_equivalent(model, q, qd, tau, bodies, f_ext=f_ext)
    M, f = brute_force(model, res, q, qd, tau, f_ext)
    # (relative to 1 where everything is tiny: below a free joint M vanishes, masses are O(1))
    assert rel(res.M, M, 1.0) < TOL, (res.M, M)
    assert rel(res.f, f, 1.0) < TOL, (res.f, f)
    # with the model's gravity in the virtual model and the base's true acceleration
    Mg, fg = brute_force(model, res, q, qd, tau, f_ext, gravity=True)
    assert rel(res.M, Mg, 1.0) < TOL
    assert rel(res.f_gravity, fg, 1.0) < TOL
    # symmetric positive semi-definite
    assert np.array_equal(res.M, res.M.T)
    ev = np.linalg.eigvalsh(res.M)
    assert ev.min() >= -1e-12 * max(ev.max(), 1.0)
    return res


def random_state(model, rng, forces=True):
    return (model.random_configuration(rng), model.random_velocity(rng, 2.0), rng.normal(size=model.nv) * 3.0,
            rng.normal(size=(model.n, 6)) if forces else None)


# ----------------------------------------------------------------------- open subsystems
def test_open_chain_in_the_middle_of_a_chain():
    m = chain(9, joint=["revolute", "universal", "spherical", "prismatic", "revolute", "universal",
                        "revolute", "spherical", "revolute"], alternate=True)
    rng = np.random.default_rng(1)
    q, qd, tau, F = random_state(m, rng)
    res = check(m, 3, q, qd, tau, F)
    assert res.base == 2 and res.roots.tolist() == [3] and res.bodies.tolist() == list(range(3, 9))
    check(m, [5, 6, 7, 8], q, qd, tau)         # an explicit list, no external forces


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_branched_subtrees_of_a_random_tree(seed):
    m = random_tree(40, seed=seed, floating_base=bool(seed % 2), max_children=3)
    rng = np.random.default_rng(seed)
    q, qd, tau, F = random_state(m, rng)
    sizes = m.subtree_sizes()
    depth = m.depth()
    # a branched subtree hanging from a moving body in the middle of the tree
    cand = [i for i in range(m.n) if depth[i] >= 2 and sizes[i] >= 4 and any(m.num_children()[subtree(m, i)] >= 2)]
    assert cand
    check(m, int(cand[0]), q, qd, tau, F)
    # by name (a body's joint name names it too)
    res = partree.subsystem_equivalent(m, q, qd, tau, m.joint_names[int(cand[-1])], f_ext=F)
    M, f = brute_force(m, res, q, qd, tau, F)
    assert rel(res.M, M) < TOL and rel(res.f, f) < TOL
    # the whole model from the world
    res = check(m, 0, q, qd, tau, F)
    assert res.base == -1 and rel(res.a0, np.r_[0, 0, 0, -m.gravity]) == 0.0


def test_several_subtrees_on_one_base():
    """Every child subtree of one body together: their wrenches add up."""
    m = random_tree(30, seed=7, max_children=4)
    rng = np.random.default_rng(7)
    q, qd, tau, F = random_state(m, rng)
    node = int(next(i for i in range(1, m.n) if len(m.children(i)) >= 2))
    kids = m.children(node)
    bodies = np.concatenate([subtree(m, int(c)) for c in kids])
    res = check(m, bodies.tolist(), q, qd, tau, F)
    assert sorted(res.roots.tolist()) == sorted(kids.tolist()) and res.base == node
    parts = [partree.subsystem_equivalent(m, q, qd, tau, int(c), f_ext=F) for c in kids]
    assert rel(res.M, sum(p.M for p in parts)) < 1e-13 and rel(res.f, sum(p.f for p in parts)) < 1e-13


# ----------------------------------------------------------------------- closed loops inside
def four_bar_on_carrier(floating=True):
    """A planar four-bar on a ground link welded to a carrier body: crank and rocker on the ground
    link, the coupler on the crank, its tip pinned to the rocker's by a revolute loop.  The carrier
    floats (free joint) or swings on a spherical joint below an arm link."""
    L = 1.0
    b = ModelBuilder("four-bar on a carrier", gravity=(0.3, -9.81, 0.5))
    if floating:
        b.add_body("carrier", None, "free", mass=3.0, com=(0.1, 0.2, -0.1), inertia=(0.3, 0.4, 0.5))
    else:
        b.add_body("arm", None, "revolute", mass=2.0, com=(0.5, 0, 0), inertia=(0.01, 0.2, 0.2), axis=(0, 1, 0))
        b.add_body("carrier", "arm", "spherical", placement=(1.0, 0, 0), mass=3.0, com=(0.1, 0.2, -0.1),
                   inertia=(0.3, 0.4, 0.5))
    R = axis_angle((1.0, 2.0, 0.5), 0.7)
    b.add_body("ground", "carrier", "fixed", placement=(R, (0.2, -0.3, 0.1)), mass=1.5, com=(0.5, 0, 0),
               inertia=(0.01, 0.1, 0.1))
    Ib = (1e-3, L * L / 12, L * L / 12)
    b.add_body("crank", "ground", "revolute", mass=1.0, com=(L / 2, 0, 0), inertia=Ib)
    b.add_body("coupler", "crank", "revolute", placement=(L, 0, 0), mass=1.0, com=(L / 2, 0, 0), inertia=Ib)
    b.add_body("rocker", "ground", "revolute", placement=(1.2 * L, 0, 0), mass=1.0, com=(L / 2, 0, 0), inertia=Ib)
    b.add_loop("pin", "revolute", "coupler", "rocker", (L, 0, 0), (L, 0, 0))
    m = b.build()
    guess = m.neutral()
    guess[m.q_slice("crank")] = 1.0
    guess[m.q_slice("coupler")] = -1.0
    guess[m.q_slice("rocker")] = 1.6
    if floating:
        guess[m.q_slice("carrier")] = np.r_[0.3, -0.2, 0.5, matrix_to_quat(axis_angle((0.3, -1.0, 0.4), 1.1))]
    else:
        guess[m.q_slice("arm")] = 0.4
        guess[m.q_slice("carrier")] = matrix_to_quat(axis_angle((0.3, -1.0, 0.4), 1.1))
    q0 = partree.assemble(m, guess, fixed={"crank": 1.0})
    return m, q0


@pytest.mark.parametrize("floating", [True, False])
def test_four_bar_below_a_moving_carrier(floating):
    m, q0 = four_bar_on_carrier(floating)
    rng = np.random.default_rng(3)
    q, qd = closed_state(m, q0, rng, 1.5)
    tau = rng.normal(size=m.nv) * 2.0
    F = rng.normal(size=(m.n, 6))
    res = check(m, "ground", q, qd, tau, F)
    assert res.base == m.body_names.index("carrier")
    check(m, "ground", q, qd, tau)
    # from the world, the whole mechanism
    check(m, 0, q, qd, tau, F)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_loops_of_every_kind_inside_a_subtree(seed):
    """A subtree in the middle of a random tree, closed by loops of every kind among its bodies
    (loops elsewhere in the tree do not touch it)."""
    rng = np.random.default_rng(10 + seed)
    m = random_tree(40, seed=20 + seed, floating_base=True, max_children=3,
                    joint_types=("revolute", "prismatic", "universal", "spherical"))
    q0 = m.random_configuration(rng)
    sizes, depth = m.subtree_sizes(), m.depth()
    r = int(next(i for i in range(m.n) if depth[i] >= 2 and 10 <= sizes[i] <= 20))
    inside = subtree(m, r)
    outside = np.setdiff1d(np.arange(1, m.n), inside)
    kinds = ["spherical", "revolute", "universal", "distance", "prismatic", "weld"]
    pairs = [tuple(int(x) for x in rng.choice(inside, 2, replace=False)) for _ in range(3)]
    pairs += [tuple(int(x) for x in rng.choice(outside, 2, replace=False))]
    ml = with_closed_loops(m, q0, pairs, [kinds[(k + seed) % 6] for k in range(4)], rng)
    q, qd = closed_state(ml, q0, rng)
    tau = rng.normal(size=ml.nv)
    F = rng.normal(size=(ml.n, 6))
    check(ml, r, q, qd, tau, F)


# ---------------------------------------------------------------------------------- identities
def test_open_subtree_is_abas_articulated_inertia():
    """M = X^T (IA - U D^-1 U^T) X and f = X^T (pA + Ia c + U D^-1 u) of the subtree's root from
    ABA's own first two passes over the whole model."""
    m = random_tree(25, seed=4, floating_base=True)
    rng = np.random.default_rng(4)
    q, qd, tau, F = random_state(m, rng)
    n, nv = m.n, m.nv
    E, r, v, c, IA, pA = (np.zeros((n, 3, 3)), np.zeros((n, 3)), np.zeros((n, 6)), np.zeros((n, 6)),
                          np.zeros((n, 6, 6)), np.zeros((n, 6)))
    S, U, Dinv, u = np.zeros((nv, 6)), np.zeros((nv, 6)), np.zeros((nv, 6)), np.zeros(nv)
    aba_forward_pass1(m.parent, m.jtype, m.axis, m.axis2, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, m.idx_q,
                      m.idx_v, q, qd, F, True, E, r, v, c, IA, pA, S)
    assert aba_backward_pass(m.parent, m.idx_v, tau, E, r, c, IA, pA, S, U, Dinv, u) < 0
    for i in range(1, n):
        sv = m.v_slice(i)
        Ui, Di = U[sv], Dinv[sv][:, :m.nv_j[i]]
        Ia = IA[i] - Ui.T @ Di @ Ui
        pa = pA[i] + Ia @ c[i] + Ui.T @ Di @ u[sv]
        X = motion_xform(E[i], r[i])
        res = partree.subsystem_equivalent(m, q, qd, tau, i, f_ext=F)
        assert rel(res.M, X.T @ Ia @ X) < 1e-12
        assert rel(res.f, X.T @ pa) < 1e-12


def test_a_welded_body_is_its_rigid_inertia():
    rng = np.random.default_rng(5)
    b = ModelBuilder("welded")
    b.add_body("arm", None, "spherical", mass=2.0, com=(0.3, 0, 0), inertia=(0.1, 0.2, 0.3))
    R, p = axis_angle((0.2, 1.0, -0.4), 0.9), np.array([0.4, -0.1, 0.3])
    b.add_body("tool", "arm", "fixed", placement=(R, p), mass=1.7, com=(0.05, 0.1, -0.2),
               inertia=[[0.3, 0.01, 0.02], [0.01, 0.2, 0.0], [0.02, 0.0, 0.25]])
    m = b.build()
    q, qd, _, _ = random_state(m, rng)
    w = rng.normal(size=6)
    res = partree.subsystem_equivalent(m, q, qd, np.zeros(m.nv), "tool", f_ext={"tool": w})
    X = motion_xform(R.T, p)
    I = spatial_inertia(1.7, (0.05, 0.1, -0.2), [[0.3, 0.01, 0.02], [0.01, 0.2, 0.0], [0.02, 0.0, 0.25]])
    assert rel(res.M, X.T @ I @ X) < 1e-14
    vt = X @ partree.forward_kinematics(m, q, qd).v[0]
    assert rel(res.f, X.T @ (crf(vt) @ I @ vt - w)) < 1e-13
    # at rest: the base holds the tool's weight
    res0 = partree.subsystem_equivalent(m, q, np.zeros(m.nv), np.zeros(m.nv), "tool")
    kin = partree.forward_kinematics(m, q)
    assert rel(res0.a0, np.r_[0, 0, 0, -kin.R[0].T @ m.gravity]) < 1e-15
    assert rel(res0.wrench(res0.a0), res0.f_gravity) < 1e-15
    weight_world = kin.R[0] @ res0.f_gravity[3:]
    assert rel(weight_world, -1.7 * m.gravity) < 1e-13
    M, f = res0                                                  # unpacks as (M, f)
    assert M is res0.M and f is res0.f


# ---------------------------------------------------------------------------- the relation in use
def floating_base_acceleration(m, q, qd, tau, F, subs):
    """The free-floating body 0's qdd from its own inertia and its subsystems' equivalents:
    (I_0 + sum M) a = S tau_0 - (v x* I_0 v - f_0) - sum f, a = a0 + S qdd_0 (a free joint)."""
    v = SWAP @ qd[m.v_slice(0)]
    I0 = spatial_inertia(m.mass[0], m.com[0], m.I_com[0])
    res = [partree.subsystem_equivalent(m, q, qd, tau, s, f_ext=F) for s in subs]
    Mt = I0 + sum(r.M for r in res)
    rhs = SWAP @ tau[m.v_slice(0)] - (crf(v) @ I0 @ v - (F[0] if F is not None else 0)) - sum(r.f for r in res)
    a = np.linalg.solve(Mt, rhs)
    return SWAP @ (a - res[0].a0)


def test_floating_base_moves_as_its_subsystems_say():
    m = random_tree(30, seed=8, floating_base=True, max_children=4)
    assert len(m.children(0)) >= 2
    rng = np.random.default_rng(8)
    q, qd, tau, F = random_state(m, rng)
    ref = partree.aba(m, q, qd, tau, f_ext=F)[m.v_slice(0)]
    # one subsystem of everything below, or one per child subtree
    assert rel(floating_base_acceleration(m, q, qd, tau, F, [list(range(1, m.n))]), ref) < 1e-10
    assert rel(floating_base_acceleration(m, q, qd, tau, F, [int(c) for c in m.children(0)]), ref) < 1e-10


def test_floating_carrier_of_a_four_bar_moves_as_constrained_dynamics_says():
    m, q0 = four_bar_on_carrier(floating=True)
    rng = np.random.default_rng(9)
    q, qd = closed_state(m, q0, rng, 1.5)
    tau = rng.normal(size=m.nv) * 2.0
    F = rng.normal(size=(m.n, 6))
    ref = partree.constrained_dynamics(m, q, qd, tau, f_ext=F).qdd[m.v_slice(0)]
    assert rel(floating_base_acceleration(m, q, qd, tau, F, ["ground"]), ref) < 1e-10


def test_a_part_of_the_engine_reports_the_same_relation():
    """The serial engine's part hanging below another reports g_root = M a_in + m0 with H = 0:
    the same M and f."""
    from partree.parallel.serial import SerialEngine

    m = chain(12, joint="universal")
    rng = np.random.default_rng(2)
    q, qd, tau, _ = random_state(m, rng, forces=False)
    eng = SerialEngine(m, 3)
    last = eng.parts[-1]
    assert last.H == 0 and not last.top
    r = int(last.bodies[0])
    res = partree.subsystem_equivalent(m, q, qd, tau, r)
    v_in = partree.forward_kinematics(m, q, qd).v[m.parent[r]]       # the incoming velocity
    last.velocity(q[last.qix], qd[last.vix])
    Mk, mk = last.reduce(v_in, tau[last.vix])[:2]
    assert rel(res.M, Mk) < 1e-14 and rel(res.f, mk) < 1e-14


# ------------------------------------------------------------------------------------- refused
def bad_model():
    m, q0 = four_bar_on_carrier(floating=False)
    return m, q0, np.zeros(m.nv), np.zeros(m.nv)


@pytest.mark.parametrize("bodies, match", [
    ("nope", "'nope' is not a body"),
    (99, "there is no body 99"),
    ([1, "nope"], "'nope' is not a body"),
    ([], "empty"),
    (3.5, "must be a body"),
    (["crank", "rocker"], "left out"),                    # the coupler hangs below the crank
    (["arm", "coupler"], "not one connected subsystem"),
    (["coupler"], "loop 'pin' joins"),                    # the rocker lies outside
    (["crank", "coupler"], "loop 'pin' joins"),
    (["crank", "coupler", "rocker"], "two subtrees of the subsystem that meet only at its base"),
])
def test_bad_input_is_refused(bodies, match):
    m, q, qd, tau = bad_model()
    with pytest.raises(PartreeInputError, match=match):
        partree.subsystem_equivalent(m, q, qd, tau, bodies)


def test_loops_to_the_world_or_the_base_are_refused():
    m, q0 = four_bar_on_carrier(floating=False)
    z = np.zeros(m.nv)
    to_world = m.with_loops([Loop("anchor", "spherical", "rocker", None)])
    with pytest.raises(PartreeInputError, match="loop 'anchor' joins .* to the world outside it"):
        partree.subsystem_equivalent(to_world, q0, z, z, "ground")
    to_base = m.with_loops([Loop("strut", "distance", "coupler", "carrier", length=1.0)])
    with pytest.raises(PartreeInputError, match="loop 'strut' joins .* to the base, body 1"):
        partree.subsystem_equivalent(to_base, q0, z, z, "ground")
    with pytest.raises(PartreeInputError, match="tau"):
        partree.subsystem_equivalent(m, q0, z, z[:-1], "ground")
