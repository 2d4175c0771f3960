"""partree.constrained_dynamics against independent references.

* Pinocchio's ``constraintDynamics`` (CONTACT_3D constraints for spherical loops, CONTACT_6D for
  weld loops, written by ``loop_constraints_to_pinocchio``) on random trees (partree's numbering,
  not depth first: ``to_pinocchio`` permutes the joints) closed by random loops: accelerations
  and multipliers;
* the dense KKT system [[M, -J^T], [J, 0]] [qdd; lambda] = [tau - h; gamma] with CRBA's M, RNEA's
  bias h and partree.loop_constraints' J and gamma, for every loop kind, and its minimum-norm
  least-squares solution where rows are redundant (a planar four-bar declared in 3-D, the scissor
  mast's pins);
* RNEA with the loop forces applied, either as J^T lambda or as the cut joints' wrenches on the
  bodies (built here from ``loop_force`` and the frames' poses), and the tree joints' wrenches of
  RNEA / CFA with those forces;
* a body floating on a free joint and held by a loop against the same body on the tree joint of
  the loop's kind (the guide's accelerations, the loop force against the joint's wrench);
* loops the tree already satisfies (no force, ABA's accelerations), a singular configuration
  (rank drops, nothing breaks), a chain of 200 bodies with 50 local loops;
* the inputs refused.

States close the loops: each random loop is built with its two frames coinciding at a random
configuration q0 (frame B's placement computed from frame A's pose), and correct_state projects a
random velocity onto the loops' tangent space.
"""
import functools

import numpy as np
import pytest

import partree
from partree import Loop, ModelBuilder
from partree.errors import PartreeInputError
from partree.loops import AXIAL, KINDS, LoopSet
from partree.models import random_tree
from partree.models.scissor import scissor_mast
from partree.spatial import axis_angle

JOINTS = ("revolute", "prismatic", "universal", "spherical", "fixed")


# ------------------------------------------------------------------------------------- helpers
def rel(a, b):
    """max |a - b| relative to the size of b (absolute where b vanishes)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max(initial=0.0) / max(np.abs(b).max(initial=0.0), 1.0e-12))


def rotation(rng):
    return axis_angle(rng.normal(size=3), rng.uniform(-np.pi, np.pi))


def unit(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def frame_pose(kin, body, R, p):
    """World pose (R, o) of a frame placed at (R, p) in body ``body`` (None or -1: the world)."""
    if body is None or body < 0:
        return R, p
    return kin.R[body] @ R, kin.p[body] + kin.R[body] @ p


def closed_loop(kin, name, kind, a, b, rng):
    """A loop of ``kind`` between bodies a and b, closed at the configuration of ``kin``: frame A
    random on body a, frame B on body b where frame A is (a random rotation for a spherical loop,
    whose rows ignore it; a random point and the distance between them for a distance loop)."""
    Ra, pa = rotation(rng), rng.uniform(-0.4, 0.4, size=3)
    RA, oA = frame_pose(kin, a, Ra, pa)
    Rb_w, pb_w = (np.eye(3), np.zeros(3)) if b is None else (kin.R[b], kin.p[b])
    Rb, pb = Rb_w.T @ RA, Rb_w.T @ (oA - pb_w)
    axis, length = None, None
    if KINDS.index(kind) in AXIAL:
        axis = unit(rng)
    elif kind == "universal":
        u1 = unit(rng)
        u2 = np.cross(u1, unit(rng))
        axis = (u1, u2 / np.linalg.norm(u2))
    elif kind == "spherical":
        Rb = rotation(rng)
    elif kind == "distance":
        pb = rng.uniform(-0.4, 0.4, size=3)
        length = float(np.linalg.norm(frame_pose(kin, b, Rb, pb)[1] - oA))
    return Loop(name, kind, a, b, (Ra, pa), (Rb, pb), axis=axis, length=length)


def full_rank(model, q, cond=1.0e3):
    J = partree.loop_constraints(model, q).J.toarray()
    if J.shape[0] > J.shape[1]:
        return False
    s = np.linalg.svd(J, compute_uv=False)
    return bool(s[-1] > s[0] / cond)


def add_random_loops(model, q0, kinds, rng, to_world=False, max_tries=400):
    """The model with one loop per entry of ``kinds`` between random bodies (or the world), closed
    at q0, each kept only while the loops' rows stay independent (well conditioned) at q0; the
    first one ends on the world with ``to_world``."""
    kin = partree.forward_kinematics(model, q0)
    loops = []
    for _ in range(max_tries):
        if len(loops) == len(kinds):
            break
        a, b = (int(x) - 1 for x in rng.choice(model.n + 1, size=2, replace=False))
        if to_world and not loops:
            a = -1 if a >= 0 and b >= 0 else a
        a, b = (None if a < 0 else a), (None if b < 0 else b)
        if a is None and b is None:
            continue
        lp = closed_loop(kin, f"loop{len(loops)}", kinds[len(loops)], a, b, rng)
        if full_rank(model.with_loops(loops + [lp], replace=True), q0):
            loops.append(lp)
    assert len(loops) == len(kinds), f"only {len(loops)} independent loops of {kinds} on {model}"
    return model.with_loops(loops, replace=True)


def closed_state(model, q0, rng, speed=1.0):
    """(q, qd) on the loops' manifold: q0 polished by correct_state, a random velocity projected."""
    q, qd = partree.correct_state(model, q0, model.random_velocity(rng, speed))
    lc = partree.loop_constraints(model, q, qd)
    assert np.abs(lc.phi).max(initial=0.0) <= 1e-11 and np.abs(lc.velocity).max(initial=0.0) <= 1e-10
    return q, qd


def kkt(model, q, qd, tau, f_ext=None):
    """The dense reference: M qdd + h = tau + J^T lambda, J qdd = gamma, solved by LU with one
    refinement step, or by numpy's lstsq (the minimum-norm solution) where rows are redundant.
    Returns (qdd, lambda, J, gamma, M, h)."""
    M = partree.crba(model, q)
    h = partree.rnea(model, q, qd, np.zeros(model.nv), f_ext=f_ext)
    lc = partree.loop_constraints(model, q, qd)
    J = lc.J.toarray()
    nv, R = model.nv, J.shape[0]
    K = np.block([[M, -J.T], [J, np.zeros((R, R))]])
    rhs = np.concatenate([tau - h, lc.gamma])
    if np.linalg.matrix_rank(J) == R:
        x = np.linalg.solve(K, rhs)
        x += np.linalg.solve(K, rhs - K @ x)          # one step of iterative refinement
    else:
        x = np.linalg.lstsq(K, rhs, rcond=1e-12)[0]
    return x[:nv], x[nv:], J, lc.gamma, M, h


def cut_joint_wrenches(model, q, loop_force):
    """The cut joints' wrenches on the bodies, (n, 6) [n; f] about each body's origin in its own
    coordinates, from each loop's force [n; f] on body b in frame A's axes at frame A's origin
    (body a gets the opposite)."""
    kin = partree.forward_kinematics(model, q)
    lp = model.loops
    W = np.zeros((model.n, 6))
    for k in range(len(lp)):
        RA, oA = frame_pose(kin, int(lp.body_a[k]), lp.R_a[k], lp.p_a[k])
        n_w, f_w = RA @ loop_force[k, :3], RA @ loop_force[k, 3:]
        for body, sign in ((int(lp.body_b[k]), 1.0), (int(lp.body_a[k]), -1.0)):
            if body < 0:
                continue
            R, p = kin.R[body], kin.p[body]
            W[body, :3] += sign * R.T @ (n_w + np.cross(oA - p, f_w))
            W[body, 3:] += sign * R.T @ f_w
    return W


# --------------------------------------------------------------------------- against Pinocchio
#: (seed, bodies, floating base, joint types, loops)
PIN_CASES = {
    "5 bodies, fixed base": (11, 5, False, ("spherical", "universal"), 1),
    "8 bodies, floating base": (12, 8, True, ("revolute", "spherical", "universal"), 2),
    "12 bodies, fixed joints": (13, 12, False, JOINTS, 2),
    "20 bodies, floating base": (14, 20, True, JOINTS, 3),
    "30 bodies, fixed base": (15, 30, False, ("revolute", "prismatic", "universal", "spherical"), 4),
    "30 bodies, floating base": (16, 30, True, JOINTS, 4),
}


def pinocchio_case(seed, n, floating, joints, nloops):
    """A random tree closed by spherical and weld loops (alternating; for odd seeds the first is a
    spherical loop to the world) at a closed state with random tau."""
    rng = np.random.default_rng(seed)
    m = random_tree(n, seed=seed, joint_types=joints, floating_base=floating)
    q0 = m.random_configuration(rng)
    kinds = [("weld", "spherical")[(k + seed) % 2] for k in range(nloops)]
    ml = add_random_loops(m, q0, kinds, rng, to_world=bool(seed % 2))
    q, qd = closed_state(ml, q0, rng)
    tau = rng.normal(size=ml.nv) * 3.0
    return ml, q, qd, tau


def pinocchio_constraint_dynamics(model, q, qd, tau):
    """Pinocchio's (qdd, lambda_c) for the model's loops: a direct solve (mu = 0, tight accuracy),
    Baumgarte gains left at their zero defaults."""
    pin = pytest.importorskip("pinocchio")
    from partree.io.pinocchio import PinocchioMap, loop_constraints_to_pinocchio, to_pinocchio

    pm, _ = to_pinocchio(model)
    cs = loop_constraints_to_pinocchio(model, pm)
    for c in cs:
        assert c.m_baumgarte_parameters.Kp == 0.0 and c.m_baumgarte_parameters.Kd == 0.0
    mp = PinocchioMap(model, pm)
    data = pm.createData()
    cds = [c.createData() for c in cs]
    pin.initConstraintDynamics(pm, data, cs, cds)
    settings = pin.ProximalSettings(1e-14, 0.0, 200)
    a = pin.constraintDynamics(pm, data, mp.q_to_pinocchio(q), mp.v_to_pinocchio(qd), mp.v_to_pinocchio(tau), cs,
                               cds, settings)
    return mp.v_from_pinocchio(a), np.array(data.lambda_c), [c.type for c in cs]


def as_pinocchio_multipliers(result, types):
    """Pinocchio's lambda_c from partree's loop forces: Pinocchio's multiplier is the force on
    joint1's frame (body a), the opposite of what body a exerts on body b, in frame A's axes; a
    CONTACT_3D constraint has the force alone, a CONTACT_6D one [f; n] (partree: [n; f])."""
    import pinocchio as pin

    out = []
    for k, t in enumerate(types):
        n, f = result.loop_force[k, :3], result.loop_force[k, 3:]
        out.append(-f if t == pin.ContactType.CONTACT_3D else -np.concatenate([f, n]))
    return np.concatenate(out)


@pytest.mark.parametrize("case", list(PIN_CASES))
def test_against_pinocchio_constraint_dynamics(case):
    pytest.importorskip("pinocchio")
    ml, q, qd, tau = pinocchio_case(*PIN_CASES[case])
    r = partree.constrained_dynamics(ml, q, qd, tau)
    assert r.rank == ml.loops.nrow and r.independent.all()
    qdd_pin, lam_pin, types = pinocchio_constraint_dynamics(ml, q, qd, tau)
    assert rel(r.qdd, qdd_pin) < 1e-9
    assert rel(as_pinocchio_multipliers(r, types), lam_pin) < 1e-9
    # the loops' forces are not negligible: the comparison tests them
    assert np.abs(lam_pin).max() > 1e-2 * np.abs(tau).max()


def test_against_pinocchio_on_a_tree_not_numbered_depth_first():
    """Pinocchio's algorithms need every joint's subtree to be a contiguous range of joint ids:
    to_pinocchio adds the joints depth first, a permutation of this tree's numbering."""
    pytest.importorskip("pinocchio")
    from partree.io import depth_first_order

    ml, q, qd, tau = pinocchio_case(1, 8, False, ("revolute", "spherical"), 1)
    assert not np.array_equal(depth_first_order(ml), np.arange(ml.n))
    r = partree.constrained_dynamics(ml, q, qd, tau)
    qdd_pin, lam_pin, types = pinocchio_constraint_dynamics(ml, q, qd, tau)
    assert rel(r.qdd, qdd_pin) < 1e-9
    assert rel(as_pinocchio_multipliers(r, types), lam_pin) < 1e-9


# ---------------------------------------------------------------- every loop kind, dense KKT
#: loops per kind, so that their rows are independent on a 14-body tree
KIND_LOOPS = {"revolute": 2, "prismatic": 2, "universal": 2, "spherical": 3, "weld": 2, "distance": 4, "point_on_line": 3}


@functools.lru_cache(maxsize=None)
def kind_case(kind):
    """A branched random tree (partree's own numbering, a floating base for some kinds) with
    independent loops of ``kind``, at a closed state, with random tau and external wrenches."""
    seed = 100 + KINDS.index(kind)
    rng = np.random.default_rng(seed)
    m = random_tree(14, seed=seed, joint_types=("revolute", "prismatic", "universal", "spherical", "fixed"),
                    floating_base=kind in ("universal", "weld", "distance"))
    q0 = m.random_configuration(rng)
    ml = add_random_loops(m, q0, [kind] * KIND_LOOPS[kind], rng, to_world=kind in ("prismatic", "spherical"))
    q, qd = closed_state(ml, q0, rng)
    tau = rng.normal(size=ml.nv) * 3.0
    F = rng.normal(size=(ml.n, 6))
    return ml, q, qd, tau, F, partree.constrained_dynamics(ml, q, qd, tau, f_ext=F)


@pytest.mark.parametrize("kind", KINDS)
def test_every_loop_kind_against_the_dense_kkt_system(kind):
    ml, q, qd, tau, F, r = kind_case(kind)
    assert r.rank == ml.loops.nrow
    qdd, lam, J, gamma, M, h = kkt(ml, q, qd, tau, F)
    assert rel(r.qdd, qdd) < 1e-9
    assert rel(r.multipliers, lam) < 1e-9
    assert np.abs(lam).max() > 1e-2 * np.abs(tau).max()
    # the equations themselves, with CRBA's M and the bias at qdd = 0
    scale = np.abs(M @ r.qdd).max() + np.abs(h).max() + np.abs(tau).max()
    assert np.abs(M @ r.qdd + h - tau - J.T @ r.multipliers).max() < 1e-10 * scale
    assert np.abs(J @ r.qdd - gamma).max() < 1e-10 * max(np.abs(J).max() * np.abs(r.qdd).max(), np.abs(gamma).max())
    # the loop force is T lambda, lambda the multipliers of the loop's rows
    for k, name in enumerate(ml.loops.names):
        assert np.array_equal(r.loop_force_of(name), r.loop_force[k])
        assert np.array_equal(r.multipliers_of(name), r.multipliers[ml.loops.rows_of(name)])


@pytest.mark.parametrize("kind", KINDS)
def test_loop_forces_reproduce_the_motion(kind):
    ml, q, qd, tau, F, r = kind_case(kind)
    J = partree.loop_constraints(ml, q, qd).J
    t = partree.rnea(ml, q, qd, r.qdd, f_ext=F)
    assert rel(t - J.T @ r.multipliers, tau) < 1e-10
    # the cut joints' wrenches, placed on the bodies from loop_force and the frames' poses
    W = cut_joint_wrenches(ml, q, r.loop_force)
    assert rel(r.loop_wrench, W) < 1e-10
    assert rel(partree.rnea(ml, q, qd, r.qdd, f_ext=F + W), tau) < 1e-10
    # and the tree under tau, F and those wrenches moves as the closed mechanism does
    assert rel(partree.aba(ml, q, qd, tau, f_ext=F + W), r.qdd) < 1e-9


@pytest.mark.parametrize("kind", KINDS)
def test_joint_wrenches_include_the_loop_forces(kind):
    ml, q, qd, tau, F, r = kind_case(kind)
    W = cut_joint_wrenches(ml, q, r.loop_force)
    _, ref = partree.rnea(ml, q, qd, r.qdd, f_ext=F + W, return_wrenches=True)
    assert rel(r.joint_wrench, ref) < 1e-10
    # F_S = W_j^T F_j in each joint's constraint basis
    Wt, idx_s = partree.constraint_bases(ml, q)
    FS = np.concatenate([Wt[idx_s[j]:idx_s[j] + 6 - ml.nv_j[j]] @ ref[j] for j in range(ml.n)])
    assert rel(r.constraint_force, FS) < 1e-10
    c = partree.cfa(ml, q, qd, tau, f_ext=F + W)
    assert rel(r.constraint_force, c.constraint_force) < 1e-10 and rel(r.drive_force, c.drive_force) < 1e-12
    # without the loop forces the joints would carry other wrenches
    assert rel(partree.rnea(ml, q, qd, r.qdd, f_ext=F, return_wrenches=True)[1], ref) > 1e-3


def test_result_without_external_forces_matches_the_dense_kkt():
    ml, q, qd, tau, _, _ = kind_case("weld")
    r = partree.constrained_dynamics(ml, q, qd, tau)
    qdd, lam, *_ = kkt(ml, q, qd, tau)
    assert rel(r.qdd, qdd) < 1e-9 and rel(r.multipliers, lam) < 1e-9
    _, ref = partree.rnea(ml, q, qd, r.qdd, f_ext=cut_joint_wrenches(ml, q, r.loop_force), return_wrenches=True)
    assert rel(r.joint_wrench, ref) < 1e-10


# ------------------------------------------------------------------- loops the tree satisfies
def joint_copy(model, i, name):
    """A loop of the kind of body i's joint, between its joint frame on the parent (or the world)
    and body i's frame: what the tree's joint already allows, so its rows vanish identically."""
    kind = partree.joints.NAMES[int(model.jtype[i])]
    p = int(model.parent[i])
    axis = {"revolute": model.axis[i], "prismatic": model.axis[i], "universal": (model.axis[i], model.axis2[i])}
    return Loop(name, kind, None if p < 0 else p, i, (model.E_tree[i].T, model.r_tree[i]), None, axis=axis.get(kind))


def assert_copies_change_nothing(m, copies, rng):
    """Loops the tree satisfies at every state: no rank, no force, ABA's accelerations; next to
    loops that do close the tree, they change neither its motion nor its forces."""
    mc = m.with_loops(copies)
    for _ in range(3):
        q, qd = m.random_configuration(rng), m.random_velocity(rng, 2.0)
        tau, F = rng.normal(size=m.nv), rng.normal(size=(m.n, 6))
        lc = partree.loop_constraints(mc, q, qd)
        assert np.abs(lc.phi).max() < 1e-12 and abs(lc.J).max() < 1e-12 and np.abs(lc.gamma).max() < 1e-11
        r = partree.constrained_dynamics(mc, q, qd, tau, f_ext=F)
        assert rel(r.qdd, partree.aba(m, q, qd, tau, f_ext=F)) < 1e-12
        assert r.rank == 0 and not r.independent.any()
        assert np.array_equal(r.multipliers, np.zeros(mc.loops.nrow)) and not r.loop_force.any()
    q0 = m.random_configuration(rng)
    closing = add_random_loops(m, q0, ["weld", "spherical"], rng)
    both = closing.with_loops(copies)
    q, qd = closed_state(closing, q0, rng)
    tau = rng.normal(size=m.nv)
    r1 = partree.constrained_dynamics(closing, q, qd, tau)
    r2 = partree.constrained_dynamics(both, q, qd, tau)
    assert rel(r2.qdd, r1.qdd) < 1e-11
    assert r2.rank == r1.rank == closing.loops.nrow
    assert rel(r2.loop_force[:2], r1.loop_force) < 1e-11 and not r2.loop_force[2:].any()


def tree_for_copies(kinds):
    m = random_tree(16, seed=7, joint_types=("revolute", "universal", "spherical"))
    picks = [i for kind in kinds for i in [i for i in range(m.n) if partree.joints.NAMES[int(m.jtype[i])] == kind][:3]]
    assert len(picks) == 3 * len(kinds)
    return m, [joint_copy(m, i, f"copy{i}") for i in picks]


def test_the_elimination_floors_bound_is_the_rigid_inertias_inverse_trace():
    """The bound the inward pass tries before the floor's factorisation: trace(I^-1) of a body's
    spatial inertia in closed form, against numpy's inverse; at least trace(IA^-1) of any inertia
    that adds positive semi-definite terms to it; inf for a massless or flat body."""
    from partree.algorithms.constrained_dynamics import elimination_floor
    from partree.algorithms.primitives import inertia_from_compact, inertia_inverse_trace

    rng = np.random.default_rng(12)
    I6 = np.empty((6, 6))
    for _ in range(20):
        m, c = rng.uniform(0.1, 5.0), rng.normal(size=3)
        R = rotation(rng)
        Ic = R @ np.diag(rng.uniform(1e-4, 1.0, size=3)) @ R.T
        inertia_from_compact(m, c, Ic, I6)
        t = inertia_inverse_trace(m, c, Ic)
        assert np.isclose(t, np.trace(np.linalg.inv(I6)), rtol=1e-9)
        B = rng.normal(size=(6, 4))
        IA = (I6 + B @ B.T)[None]
        g2 = rng.uniform(0.5, 2.0)
        args = (0, 1, np.array([-1]), IA, np.array([m]), c[None], Ic[None], g2)
        bound = elimination_floor(*args, True, np.empty((6, 6)))
        assert bound == pytest.approx(g2 * t) and bound >= elimination_floor(*args, False, np.empty((6, 6)))
    assert inertia_inverse_trace(0.0, np.zeros(3), np.eye(3)) == np.inf
    assert inertia_inverse_trace(1.0, np.zeros(3), np.diag([1.0, 1.0, 0.0])) == np.inf


def test_the_2x2_pivoted_cholesky_decides_and_factors_as_the_general_one():
    """The factorisation ``pivoted_cholesky`` gives a 2-row block (``pivoted_cholesky_2``, written
    out) against its steps for any size (``pivoted_cholesky_rows``) on the same block: the same
    rank, pivots and stored values, bit for bit,
    over blocks that need the pivots swapped, that are singular, that lie below the relative
    threshold or the noise floor, and ties; and against numpy's Cholesky of the pivoted block."""
    from partree.algorithms.constrained_dynamics import NOISE, pivoted_cholesky, pivoted_cholesky_rows

    rng = np.random.default_rng(21)
    blocks = []
    for _ in range(200):
        B = rng.normal(size=(2, rng.integers(1, 4))) * rng.uniform(1e-3, 1e3)
        blocks.append(B @ B.T)                                     # full rank or rank 1
    blocks += [np.diag([1.0, 4.0]), np.diag([4.0, 1.0]), np.diag([2.0, 2.0]), np.zeros((2, 2)),
               np.outer([1.0, 2.0], [1.0, 2.0]), np.diag([1.0, 1e-16]), np.diag([1e-16, 1.0]),
               np.array([[1.0, 1.0 - 1e-9], [1.0 - 1e-9, 1.0]])]
    ranks = set()
    for K2 in blocks:
        for tol, dfloor in ((1e-14, 0.0), (1e-14, 1e20), (1e-6, 0.0), (1e-14, 1e24)):
            w, p = 5, 3                                            # the block at rows/columns 3, 4
            Kw = rng.normal(size=3 + w * w)
            Kw[3 + p * w + p:3 + p * w + p + 2] = K2[0]
            Kw[3 + (p + 1) * w + p:3 + (p + 1) * w + p + 2] = K2[1]
            Kg, Ks = Kw.copy(), Kw.copy()
            perm_g, perm_s = np.full(7, -1), np.full(7, -1)
            rg = pivoted_cholesky_rows(Kg, 3, w, p, 2, perm_g[4:6], tol, dfloor)
            rs = pivoted_cholesky(Ks, 3, w, p, 2, perm_s[4:6], tol, dfloor)
            assert rs == rg and np.array_equal(perm_s, perm_g) and np.array_equal(Ks, Kg)
            ranks.add(rs)
            if rs == 2:
                P = K2[np.ix_(perm_s[4:6], perm_s[4:6])]
                L = np.linalg.cholesky(P)
                got = np.array([[Ks[3 + p * w + p], 0.0], [Ks[3 + (p + 1) * w + p], Ks[3 + (p + 1) * w + p + 1]]])
                assert np.allclose(got, L, rtol=1e-6, atol=1e-9 * np.sqrt(np.abs(K2).max()))
            if dfloor * NOISE > np.abs(K2).max():
                assert rs == 0
    assert ranks == {0, 1, 2}


def test_spherical_loops_the_tree_already_satisfies_change_nothing():
    m, copies = tree_for_copies(["spherical"])
    assert_copies_change_nothing(m, copies, np.random.default_rng(7))



def test_hinge_loops_the_tree_already_satisfies_change_nothing():
    """Revolute and universal loops that repeat the tree's own revolute and universal joints (one
    of them the root's, a loop to the world)."""
    m, copies = tree_for_copies(["universal", "revolute"])
    assert_copies_change_nothing(m, copies, np.random.default_rng(8))


# ------------------------------------------------------------ a loop against its tree joint
#: the tree joint each loop kind stands for
TREE_JOINT = {"revolute": "revolute", "prismatic": "prismatic", "universal": "universal", "spherical": "spherical",
              "weld": "fixed"}


def body_inertia(rng, mass):
    """A rigid body's inertia about its centre of mass: a random box in a random orientation."""
    a, b, c = rng.uniform(0.1, 0.6, size=3)
    R = rotation(rng)
    return mass * R @ np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) @ R.T / 12


def tree_and_loop_twins(kind, rng):
    """A guide (a revolute root and a spherical joint) carrying a body through a tree joint of
    the kind's type, and its twin in which that body floats (a free joint) held to the guide by
    a loop of the kind, frame A the tree joint's frame, frame B the body's."""
    u, w = unit(rng), unit(rng)
    w = np.cross(u, w) / np.linalg.norm(np.cross(u, w))
    axis = {"revolute": u, "prismatic": u, "universal": (u, w)}.get(kind)
    joint_frame = (rotation(rng), rng.uniform(-0.5, 0.5, size=3))
    twins = []
    for looped in (False, True):
        b = ModelBuilder(f"{kind} {'loop' if looped else 'tree'}")
        r = np.random.default_rng(1)         # the same bodies in both
        b.add_body("g0", None, "revolute", axis=(0.3, 0.4, 1.0), mass=1.0, com=r.uniform(-0.2, 0.2, 3),
                   inertia=body_inertia(r, 1.0))
        b.add_body("g1", "g0", "spherical", (rotation(r), (0.6, 0.1, -0.2)), mass=0.8, com=r.uniform(-0.2, 0.2, 3),
                   inertia=body_inertia(r, 0.8))
        props = dict(mass=1.3, com=r.uniform(-0.2, 0.2, 3), inertia=body_inertia(r, 1.3))
        if looped:
            b.add_body("body", None, "free", **props)
            b.add_loop("cut", kind, "g1", "body", joint_frame, None, axis=axis)
        else:
            b.add_body("body", "g1", TREE_JOINT[kind], joint_frame, axis=axis, **props)
        twins.append(b.build())
    return twins


@pytest.mark.parametrize("kind", list(TREE_JOINT))
def test_a_loop_moves_as_the_tree_joint_of_its_kind(kind):
    """The floating body held by the loop moves as the body on the tree joint: the guide's
    accelerations agree, and the loop's force is the tree joint's wrench (moved to frame A)."""
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(21 + KINDS.index(kind))
    tree, looped = tree_and_loop_twins(kind, rng)
    for _ in range(3):
        q, qd = tree.random_configuration(rng), tree.random_velocity(rng, 2.0)
        tau = np.concatenate([rng.normal(size=4), np.zeros(tree.nv - 4)])
        kin = partree.forward_kinematics(tree, q, qd)
        Rc, pc, vc = kin.R[2], kin.p[2], kin.v[2]
        q_l = np.concatenate([q[:5], pc, Rotation.from_matrix(Rc).as_quat()])
        qd_l = np.concatenate([qd[:4], vc[3:], vc[:3]])
        lc = partree.loop_constraints(looped, q_l, qd_l)
        assert np.abs(lc.phi).max() < 1e-12
        qdd = partree.aba(tree, q, qd, tau)
        r = partree.constrained_dynamics(looped, q_l, qd_l, np.concatenate([tau[:4], np.zeros(6)]))
        assert r.rank == looped.loops.nrow
        assert rel(r.qdd[:4], qdd[:4]) < 1e-10
        # the tree joint's wrench on the body [n; f] (body axes, about its origin) in frame A
        W = partree.rnea(tree, q, qd, qdd, return_wrenches=True)[1][2]
        RA, oA = frame_pose(kin, 1, *looped.loops.loop(0).placement_a)
        n_w, f_w = Rc @ W[:3] + np.cross(pc - oA, Rc @ W[3:]), Rc @ W[3:]
        assert rel(r.loop_force[0], np.concatenate([RA.T @ n_w, RA.T @ f_w])) < 1e-10
        # the tree's motion leaves the loop's rows at zero
        assert np.abs(lc.velocity).max() < 1e-12


# ------------------------------------------------------------------------------ redundant rows
def planar_four_bar():
    """A crank-rocker four-bar in the x-y plane (joints about z, gravity along -y), ground pivots
    2.5 m apart, crank 1 m, coupler 2.2 m, rocker 1.8 m; the coupler's tip pinned to the rocker's
    by a revolute loop declared in 3-D (5 rows, 2 independent)."""
    Z = (0.0, 0.0, 1.0)
    b = ModelBuilder("crank-rocker", gravity=(0.0, -9.81, 0.0))
    b.add_body("crank", None, "revolute", axis=Z, mass=1.0, com=(0.5, 0.02, 0.0), inertia=(0.01, 0.09, 0.09))
    b.add_body("coupler", "crank", "revolute", (1.0, 0.0, 0.0), axis=Z, mass=2.0, com=(1.1, -0.05, 0.01),
               inertia=(0.02, 0.8, 0.8))
    b.add_body("rocker", None, "revolute", (2.5, 0.0, 0.0), axis=Z, mass=1.5, com=(0.9, 0.0, 0.0),
               inertia=(0.015, 0.4, 0.4))
    b.add_loop("pin", "revolute", "coupler", "rocker", (2.2, 0.0, 0.0), (1.8, 0.0, 0.0), axis=Z)
    return b.build()


def four_bar_closure(theta):
    """q of the four-bar at crank angle theta, the elbow-up branch, by intersecting two circles."""
    C = np.array([np.cos(theta), np.sin(theta)])
    D = np.array([2.5, 0.0])
    L, r = 2.2, 1.8
    d = np.linalg.norm(D - C)
    a = (L * L - r * r + d * d) / (2 * d)
    e = (D - C) / d
    P = C + a * e + np.sqrt(L * L - a * a) * np.array([-e[1], e[0]])
    ang = lambda v: np.arctan2(v[1], v[0])  # noqa: E731
    return np.array([theta, ang(P - C) - theta, ang(P - D)])


@pytest.mark.parametrize("theta", [0.3, 1.4, -2.0])
def test_planar_four_bar_redundant_rows_against_the_minimum_norm_kkt(theta):
    rng = np.random.default_rng(3)
    m = planar_four_bar()
    q0 = four_bar_closure(theta)
    assert np.abs(partree.loop_constraints(m, q0).phi).max() < 1e-12
    q, qd = closed_state(m, q0, rng, speed=2.0)
    tau = rng.normal(size=3)
    r = partree.constrained_dynamics(m, q, qd, tau)
    assert r.rank == 2 and r.independent.sum() == 2
    assert np.array_equal(r.multipliers[~r.independent], np.zeros(3))
    qdd, lam, J, gamma, M, h = kkt(m, q, qd, tau)
    assert np.linalg.matrix_rank(J) == 2
    assert rel(r.qdd, qdd) < 1e-9
    # the generalized constraint force is unique; lambda too, the dependent rows being J's zero
    # (out-of-plane) rows, on which the minimum-norm solution puts no force either
    assert rel(J.T @ r.multipliers, J.T @ lam) < 1e-9
    assert rel(r.multipliers, lam) < 1e-9
    assert np.abs(M @ r.qdd + h - tau - J.T @ r.multipliers).max() < 1e-10 * np.abs(h).max()
    assert np.abs(J @ r.qdd - gamma).max() < 1e-10 * max(1.0, np.abs(gamma).max())
    # the pin transmits an in-plane force only
    f = r.loop_force_of("pin")
    assert np.abs(f[[0, 1, 5]]).max() < 1e-12 * np.abs(f).max() and np.abs(f[3:5]).max() > 1.0


def test_point_on_line_loop_measures_the_distance_from_the_line():
    """A point_on_line loop's Phi: B's origin's offset from the line through A's origin along u,
    in A's axes: its two components normal to u, whose squares sum to the offset's squared
    distance from the line (computed from the world positions)."""
    from partree.models.generators import random_tree

    rng = np.random.default_rng(11)
    u = unit(rng)
    m = random_tree(10, seed=4).with_loops([Loop("L", "point_on_line", 3, 9, (rotation(rng), (0.1, 0.2, 0.0)),
                                                 (rotation(rng), (0.0, 0.1, 0.3)), axis=u)])
    lp = m.loops
    for _ in range(3):
        q = m.random_configuration(rng)
        kin = partree.forward_kinematics(m, q)
        RA, oA = frame_pose(kin, 3, lp.R_a[0], lp.p_a[0])
        oB = frame_pose(kin, 9, lp.R_b[0], lp.p_b[0])[1]
        d = RA.T @ (oB - oA)
        phi = partree.loop_constraints(m, q).phi
        assert phi.shape == (2,)
        assert np.isclose(phi @ phi, d @ d - (d @ u) ** 2, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("theta", [0.3, -2.0])
def test_planar_four_bar_with_the_pin_as_point_on_line(theta):
    """The planar four-bar's pin as a point_on_line loop about z: 2 rows, both independent (no
    dependent rows), the dense KKT system regular; the same motion and the same in-plane pin force
    as with the 3-D revolute pin."""
    rng = np.random.default_rng(4)
    m5 = planar_four_bar()
    lp = m5.loops
    m2 = m5.with_loops([Loop("pin", "point_on_line", "coupler", "rocker", (lp.R_a[0], lp.p_a[0]),
                             (lp.R_b[0], lp.p_b[0]), axis=(0.0, 0.0, 1.0))], replace=True)
    q, qd = closed_state(m5, four_bar_closure(theta), rng, speed=2.0)
    tau = rng.normal(size=3)
    r2, r5 = partree.constrained_dynamics(m2, q, qd, tau), partree.constrained_dynamics(m5, q, qd, tau)
    assert m2.loops.nrow == 2 and r2.rank == 2 and r2.independent.all()
    qdd, lam, J, gamma, M, h = kkt(m2, q, qd, tau)
    assert J.shape == (2, 3) and np.linalg.matrix_rank(J) == 2
    assert rel(r2.qdd, qdd) < 1e-10 and rel(r2.multipliers, lam) < 1e-10
    assert rel(r2.qdd, r5.qdd) < 1e-10
    assert rel(r2.loop_force_of("pin"), r5.loop_force_of("pin")) < 1e-10
    f = r2.loop_force_of("pin")
    assert np.abs(f[[0, 1, 2, 5]]).max() < 1e-13 * np.abs(f).max()        # no moment, no force along z


def test_singular_configuration_is_reported_through_the_rank():
    """A planar two-link arm whose tip is pinned (spherical loop) to a point of the world at the
    arm's full reach: stretched out, the tip can only move across the arm, one independent row of
    three; short of it, two."""
    Z = (0.0, 0.0, 1.0)
    b = ModelBuilder("arm", gravity=(0.0, -9.81, 0.0))
    b.add_body("upper", None, "revolute", axis=Z, mass=1.0, com=(0.5, 0, 0), inertia=(0.01, 0.08, 0.08))
    b.add_body("fore", "upper", "revolute", (1.0, 0, 0), axis=Z, mass=1.0, com=(0.5, 0, 0), inertia=(0.01, 0.08, 0.08))
    stretched = b.build().with_loops([Loop("tip", "spherical", "fore", None, (1.0, 0, 0), (2.0, 0, 0))])
    q, qd, tau = np.zeros(2), np.array([1.5, -3.0]), np.array([0.3, -0.2])
    lc = partree.loop_constraints(stretched, q, qd)
    assert np.abs(lc.phi).max() == 0.0 and np.abs(lc.velocity).max() < 1e-15
    r = partree.constrained_dynamics(stretched, q, qd, tau)
    assert r.rank == 1 and r.independent.sum() == 1
    assert np.all(np.isfinite(r.qdd)) and np.all(np.isfinite(r.multipliers)) and np.all(np.isfinite(r.loop_force))
    assert np.array_equal(r.multipliers[~r.independent], np.zeros(2))
    J = lc.J.toarray()
    assert np.abs((J @ r.qdd - lc.gamma)[r.independent]).max() < 1e-12
    M, h = partree.crba(stretched, q), partree.rnea(stretched, q, qd, np.zeros(2))
    assert np.abs(M @ r.qdd + h - tau - J.T @ r.multipliers).max() < 1e-12 * np.abs(h).max()
    # bent: the tip point at 2 cos(0.5) along x closes at (0.5, -1.0)
    bent = stretched.with_loops([Loop("tip", "spherical", "fore", None, (1.0, 0, 0), (2 * np.cos(0.5), 0, 0))],
                                replace=True)
    qb = np.array([0.5, -1.0])
    assert np.abs(partree.loop_constraints(bent, qb).phi).max() < 1e-15
    assert partree.constrained_dynamics(bent, qb, np.zeros(2), tau).rank == 2


# ----------------------------------------------------------------------------- many local loops
def test_scissor_mast_pins_against_the_minimum_norm_kkt():
    """The scissor mast's 50 pins between neighbouring units (the tree leaves them out), closed at
    q = 0, as revolute loops about the pin axis y: 250 rows, 100 independent."""
    units, l = 51, 1.0
    m = scissor_mast(units=units, length=l)
    pins = [Loop(f"pin{k}", "revolute", 2 * k + 1, 2 * k + 3, (l / 2, 0, 0), (-l / 2, 0, 0), axis=(0, 1, 0))
            for k in range(units - 1)]
    ml = m.with_loops(pins)
    rng = np.random.default_rng(5)
    q, qd = closed_state(ml, np.zeros(ml.nq), rng, speed=0.5)
    tau = rng.normal(size=ml.nv)
    r = partree.constrained_dynamics(ml, q, qd, tau)
    assert r.rank == 2 * (units - 1) and r.independent.sum() == r.rank
    qdd, lam, J, gamma, M, h = kkt(ml, q, qd, tau)
    assert np.linalg.matrix_rank(J) == r.rank
    # the mast's M has a condition number of about 5e6 and the KKT matrix is singular (the
    # out-of-plane rows): lstsq's solution agrees to 4e-10 and solves the equations less well
    # than partree's, which does to rounding
    assert rel(r.qdd, qdd) < 1e-8
    assert rel(r.multipliers, lam) < 1e-8
    assert np.array_equal(r.multipliers[~r.independent], np.zeros(ml.loops.nrow - r.rank))
    scale = np.abs(M).max() * np.abs(r.qdd).max() + np.abs(h).max() + np.abs(tau).max()
    assert np.abs(M @ r.qdd + h - tau - J.T @ r.multipliers).max() < 1e-12 * scale
    assert np.abs(J @ r.qdd - gamma).max() < 1e-10 * max(np.abs(J).max() * np.abs(r.qdd).max(), np.abs(gamma).max())


def test_chain_of_200_bodies_with_50_local_loops_against_the_dense_kkt():
    """A random chain of 200 bodies, loop k joining bodies 4k and 4k + 3 (every kind, drawn at
    random until its rows are independent), closed at a random configuration."""
    rng = np.random.default_rng(9)
    m = random_tree(200, seed=9, joint_types={"spherical": 3, "universal": 1, "revolute": 1, "prismatic": 1},
                    max_children=1, offset_scale=0.3)
    q0 = m.random_configuration(rng)
    kin = partree.forward_kinematics(m, q0)
    loops = []
    for k in range(50):
        for kind in rng.permutation(KINDS):
            lp = closed_loop(kin, f"loop{k}", str(kind), 4 * k, 4 * k + 3, rng)
            if full_rank(m.with_loops([lp]), q0, cond=1e2):
                loops.append(lp)
                break
    assert len(loops) == 50 and len({lp.kind for lp in loops}) == len(KINDS)
    ml = m.with_loops(loops)
    q, qd = closed_state(ml, q0, rng)
    tau = rng.normal(size=ml.nv) * 3.0
    r = partree.constrained_dynamics(ml, q, qd, tau)
    assert r.rank == ml.loops.nrow
    qdd, lam, J, gamma, M, h = kkt(ml, q, qd, tau)
    assert np.linalg.matrix_rank(J) == ml.loops.nrow
    # M's condition number is about 7e7 on this chain: the solutions agree to what it allows, and
    # partree's solves the equations to rounding
    assert rel(r.qdd, qdd) < 1e-8
    assert rel(r.multipliers, lam) < 1e-8
    scale = np.abs(M).max() * np.abs(r.qdd).max() + np.abs(h).max() + np.abs(tau).max()
    assert np.abs(M @ r.qdd + h - tau - J.T @ r.multipliers).max() < 1e-12 * scale
    assert np.abs(J @ r.qdd - gamma).max() < 1e-12 * np.abs(J).max() * np.abs(r.qdd).max()
    W = cut_joint_wrenches(ml, q, r.loop_force)
    assert rel(partree.rnea(ml, q, qd, r.qdd, f_ext=W), tau) < 1e-10


def test_repeated_calls_leave_nothing_in_the_workspace():
    """Each call writes every workspace value it reads (each node's rows zeroed where they are
    first written): a call after others on the same model, with other states and loads, equals
    the same call on fresh buffers, bit for bit; on the closed scissor mast, on a tree with loops
    of every kind and on a model whose loops end on the world."""
    rng = np.random.default_rng(31)
    models = [scissor_mast(7, closed=True), scissor_mast(2, section="triangle"),
              kind_case("spherical")[0], kind_case("weld")[0], kind_case("point_on_line")[0]]
    for m in models:
        states = [(m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)) for _ in range(3)]
        for q, qd, tau in states:
            partree.constrained_dynamics(m, q, qd, tau)
        q, qd, tau = states[0]
        again = partree.constrained_dynamics(m, q, qd, tau)
        lp = m.loops                                 # the same arrays, new buffers
        same = m.with_loops(LoopSet(list(lp.names), lp.kind, lp.body_a, lp.body_b, lp.R_a, lp.p_a, lp.R_b, lp.p_b,
                                    lp.axis, lp.axis2, lp.length), replace=True)
        fresh = partree.constrained_dynamics(same, q, qd, tau)
        assert np.array_equal(again.qdd, fresh.qdd) and np.array_equal(again.multipliers, fresh.multipliers)


# -------------------------------------------------------------------------------- bad input
def _chain():
    return partree.models.chain(3)


REFUSED = {
    "body number": (lambda m: m.with_loops([Loop("L", "weld", 3, None)]), r"loop 'L': body_a 3 does not exist"),
    "negative body": (lambda m: m.with_loops([Loop("L", "weld", 0, -2)]), r"loop 'L': body_b -2 does not exist"),
    "body name": (lambda m: partree.Model(m.parent, m.jtype, m.axis, m.E_tree, m.r_tree, m.mass, m.com, m.I_com,
                                          loops=[Loop("L", "spherical", "nope", None)]),
                  r"loop 'L': body_a 'nope' is not a body of model"),
    "to itself": (lambda m: m.with_loops([Loop("L", "spherical", 1, "b1")]),
                  r"loop 'L' joins body 1 \(b1\) to itself"),
    "world to world": (lambda m: m.with_loops([Loop("L", "weld", None, "world")]),
                       r"loop 'L' joins the world to itself"),
    "kind case": (lambda m: Loop("L", "Revolute", 0, 1), r"loop 'L': unknown kind 'Revolute'; the kinds are revolute"),
    "kind code": (lambda m: Loop("L", 4, 0, 1), r"loop 'L': unknown kind 4"),
    "no length": (lambda m: Loop("L", "distance", 0, 1), r"loop 'L': a distance loop needs a length > 0; got None"),
    "zero length": (lambda m: Loop("L", "distance", 0, 1, length=0.0), r"needs a length > 0; got 0.0"),
    "length of a weld": (lambda m: Loop("L", "weld", 0, 1, length=1.0), r"length is only for a 'distance' loop"),
    "zero axis": (lambda m: Loop("L", "prismatic", 0, 1, axis=(0, 0, 0)), r"loop 'L': axis is a zero vector"),
    "not a rotation": (lambda m: Loop("L", "weld", 0, 1, placement_a=(2 * np.eye(3), np.zeros(3))),
                       r"loop 'L': placement_a: R is not a rotation"),
    "not a loop": (lambda m: m.with_loops([("L", "weld", 0, 1)]), r"loops must be partree.Loop objects; got tuple"),
    "name twice": (lambda m: m.with_loops([Loop("L", "weld", 0, 1)]).with_loops([Loop("L", "weld", 1, 2)]),
                   r"loop name 'L' used twice"),
    "coincident rod ends": (lambda m: partree.constrained_dynamics(
        m.with_loops([Loop("rod", "distance", 0, None, length=1.0)]), np.zeros(3), np.zeros(3), np.zeros(3)),
        r"distance loop 'rod': its two points coincide"),
    "coincident rod ends, constraints": (lambda m: partree.loop_constraints(
        m.with_loops([Loop("rod", "distance", 2, 1, (0, 0, 0), (1, 0, 0), length=0.5)]), np.zeros(3)),
        r"distance loop 'rod': its two points coincide"),
    "rank_tol": (lambda m: partree.constrained_dynamics(m.with_loops([Loop("L", "spherical", 2, None)]), np.zeros(3),
                                                        np.zeros(3), np.zeros(3), rank_tol=1.0),
                 r"rank_tol must lie in \(0, 1\)"),
    "tau size": (lambda m: partree.constrained_dynamics(m.with_loops([Loop("L", "spherical", 2, None)]), np.zeros(3),
                                                        np.zeros(3), np.zeros(4)), r"tau"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_input_is_refused_clearly(case):
    fn, pattern = REFUSED[case]
    with pytest.raises(PartreeInputError, match=pattern):
        fn(_chain())


@pytest.mark.parametrize("kind", ["weld", "prismatic", "revolute", "universal", "spherical", "distance",
                                  "point_on_line"])
def test_loop_constraints_are_the_derivatives_of_phi_off_closure(kind):
    """J = Phi_q and gamma = -J' qd at a configuration that does not close the loop (the
    rotation-vector rows of weld and prismatic loops through the inverse left Jacobian of
    SO(3)), against central differences along a motion."""
    from partree.configuration import integrate
    from partree.models.generators import random_tree

    rng = np.random.default_rng(7)
    extra = {"length": 0.7} if kind == "distance" else {}
    m = random_tree(12, seed=2).with_loops([Loop("L", kind, 8, 11, (rotation(rng), (0.1, 0.2, 0.0)),
                                                 (rotation(rng), (0.0, 0.1, 0.3)), **extra)])
    q, qd, qdd = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    lc = partree.loop_constraints(m, q, qd)
    assert np.abs(lc.phi).max() > 0.04                      # far from closed
    J = lc.J.toarray()
    h = 1e-6
    for v in (qd, rng.normal(size=m.nv)):
        fd = (partree.loop_constraints(m, integrate(m, q, h * v)).phi -
              partree.loop_constraints(m, integrate(m, q, -h * v)).phi) / (2 * h)
        assert np.abs(J @ v - fd).max() < 1e-7 * max(1.0, np.abs(fd).max())
    assert np.abs(J @ qd - lc.velocity).max() < 1e-12

    def rows(t):
        return partree.loop_constraints(m, integrate(m, q, t * qd + 0.5 * t * t * qdd), qd + t * qdd).velocity
    fd2 = (rows(h) - rows(-h)) / (2 * h)
    assert np.abs(fd2 - (J @ qdd - lc.gamma)).max() < 1e-6 * max(1.0, np.abs(fd2).max())
