"""partree.hybrid_dynamics against independent references: ABA (every joint passive), RNEA (every
joint active), the dense partitioned solve with CRBA's mass matrix for any split, RNEA's joint
wrenches of the resulting motion; seed 002's three-arm manipulator; the joint-name form; errors."""
import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.models import chain, random_tree, three_arm_inputs, three_arm_manipulator

ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def rel(a, b):
    """Largest difference relative to the largest reference entry."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def tree(seed, floating_base, n=24):
    return random_tree(n, seed=seed, floating_base=floating_base, joint_types=ALL_TYPES)


def state(m, rng, with_fext):
    q, qd = m.random_configuration(rng), m.random_velocity(rng, 1.5)
    tau, qdd = rng.normal(size=m.nv), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6)) if with_fext else None
    return q, qd, tau, qdd, F


def dense_split(m, q, qd, tau, qdd, mask, F=None, dof_active=None):
    """The partitioned solve with M from CRBA and the bias C = rnea(q, qd, 0):
    M_pp qdd_p = tau_p - C_p - M_pa qdd_a, then tau_a = M_ap qdd_p + M_aa qdd_a + C_a.
    ``mask`` flags joints; ``dof_active``, when given, flags dofs instead."""
    M = partree.crba(m, q)
    C = partree.rnea(m, q, qd, np.zeros(m.nv), F)
    if dof_active is None:
        dof_active = np.repeat(np.asarray(mask, dtype=bool), m.nv_j)
    a, p = np.flatnonzero(dof_active), np.flatnonzero(~dof_active)
    qdd_full = np.array(qdd, dtype=float)
    qdd_full[p] = np.linalg.solve(M[np.ix_(p, p)], tau[p] - C[p] - M[np.ix_(p, a)] @ qdd_full[a])
    tau_full = np.array(tau, dtype=float)
    tau_full[a] = M[np.ix_(a, p)] @ qdd_full[p] + M[np.ix_(a, a)] @ qdd_full[a] + C[a]
    return qdd_full, tau_full


CASES = [(seed, fb, fe) for seed in (1, 2, 3) for fb in (False, True) for fe in (False, True)]


@pytest.mark.parametrize("seed,floating_base,with_fext", CASES)
def test_all_passive_is_aba(seed, floating_base, with_fext):
    m = tree(seed, floating_base)
    rng = np.random.default_rng(seed)
    q, qd, tau, qdd, F = state(m, rng, with_fext)
    qdd_h, tau_h = partree.hybrid_dynamics(m, q, qd, tau, qdd, np.zeros(m.n, dtype=bool), F)
    assert rel(qdd_h, partree.aba(m, q, qd, tau, F)) < 1e-12
    assert np.array_equal(tau_h, tau)


@pytest.mark.parametrize("seed,floating_base,with_fext", CASES)
def test_all_active_is_rnea(seed, floating_base, with_fext):
    m = tree(seed, floating_base)
    rng = np.random.default_rng(100 + seed)
    q, qd, tau, qdd, F = state(m, rng, with_fext)
    qdd_h, tau_h = partree.hybrid_dynamics(m, q, qd, tau, qdd, np.ones(m.n, dtype=bool), F)
    assert rel(tau_h, partree.rnea(m, q, qd, qdd, F)) < 1e-12
    assert np.array_equal(qdd_h, qdd)


@pytest.mark.parametrize("seed,floating_base,with_fext", CASES)
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_random_masks_equal_the_dense_partitioned_solve(seed, floating_base, with_fext, fraction):
    m = tree(seed, floating_base, n=30)
    rng = np.random.default_rng(1000 * seed + int(10 * fraction))
    for _ in range(3):
        q, qd, tau, qdd, F = state(m, rng, with_fext)
        mask = rng.random(m.n) < fraction
        qdd_h, tau_h = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F)
        qdd_d, tau_d = dense_split(m, q, qd, tau, qdd, mask, F)
        assert rel(qdd_h, qdd_d) < 1e-10
        assert rel(tau_h, tau_d) < 1e-10
        dof_active = np.repeat(mask, m.nv_j)
        assert np.array_equal(qdd_h[dof_active], qdd[dof_active])
        assert np.array_equal(tau_h[~dof_active], tau[~dof_active])


def test_the_random_trees_hold_every_joint_type():
    """The trees above exercise each kernel branch: 1-DOF, multi-DOF and fixed joints."""
    from partree import joints as J

    types = set()
    for seed in (1, 2, 3):
        for fb in (False, True):
            types |= set(tree(seed, fb, n=30).jtype.tolist())
    assert types == {J.REVOLUTE, J.PRISMATIC, J.UNIVERSAL, J.SPHERICAL, J.FREE, J.FIXED}


def same_forces(got, ref, tol=1e-10):
    """Two CFAResults agree: qdd, every joint wrench, constraint and drive force."""
    for a in ("qdd", "joint_wrench", "constraint_force", "drive_force"):
        assert rel(getattr(got, a), getattr(ref, a)) < tol, a


@pytest.mark.parametrize("seed,floating_base,with_fext", CASES)
def test_reaction_forces_are_cfas_with_the_full_joint_forces(seed, floating_base, with_fext):
    """return_forces: the CFAResult of the motion equals partree.cfa run with the full joint
    forces hybrid dynamics found (forward dynamics of them gives back the same motion)."""
    m = tree(seed, floating_base)
    rng = np.random.default_rng(30 + seed)
    q, qd, tau, qdd, F = state(m, rng, with_fext)
    for mask in (rng.random(m.n) < 0.5, np.zeros(m.n, dtype=bool), np.ones(m.n, dtype=bool)):
        qdd_h, tau_h, res = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F, return_forces=True)
        ref = partree.cfa(m, q, qd, tau_h, F)
        same_forces(res, ref)
        assert np.array_equal(res.qdd, qdd_h) and res.method == "hybrid"
        # the constraint basis of a joint and its reaction wrench come with the result
        j = m.joint_names[m.n // 2]
        assert rel(res.constraint_wrench_of(j), ref.constraint_wrench_of(j)) < 1e-10
    out = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F, return_wrenches=True, return_forces=True)
    assert len(out) == 4 and rel(out[2], out[3].joint_wrench) < 1e-12


@pytest.mark.parametrize("seed,floating_base,with_fext", CASES[:4])
def test_wrenches_are_rneas_for_the_resulting_motion(seed, floating_base, with_fext):
    m = tree(seed, floating_base)
    rng = np.random.default_rng(7 + seed)
    q, qd, tau, qdd, F = state(m, rng, with_fext)
    for mask in (rng.random(m.n) < 0.5, np.zeros(m.n, dtype=bool), np.ones(m.n, dtype=bool)):
        qdd_h, tau_h, W = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F, return_wrenches=True)
        tau_r, W_r = partree.rnea(m, q, qd, qdd_h, F, return_wrenches=True)
        assert W.shape == (m.n, 6)
        assert rel(W, W_r) < 1e-10
        assert rel(tau_h, tau_r) < 1e-10


def test_fixed_joint_flags_change_nothing(rng):
    m = tree(4, True, n=30)
    fixed = m.nv_j == 0
    assert fixed.any()
    q, qd, tau, qdd, F = state(m, rng, True)
    mask = rng.random(m.n) < 0.5
    r1 = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask & ~fixed, F)
    r2 = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask | fixed, F)
    assert rel(r1[0], r2[0]) < 1e-13 and rel(r1[1], r2[1]) < 1e-13


def test_three_arm_manipulator_equals_the_dense_split(rng):
    """Seed 002: motion prescribed on J1, J5, J6, torques 10 sin t on the other seven joints."""
    inputs = three_arm_inputs()
    for floating_base in (False, True):
        m = three_arm_manipulator(floating_base=floating_base)
        for t in (0.3, 1.7, 4.0):
            dofs, qa, qda, qdda = inputs.prescribed(m, t)
            q, qd = m.random_configuration(rng, 0.5), m.random_velocity(rng, 0.5)
            q[[m.q_slice(j).start for j in inputs.active]] = qa
            qd[dofs] = qda
            qdd = np.full(m.nv, np.nan)
            qdd[dofs] = qdda
            tau = inputs.tau(m, t)
            tau[dofs] = np.nan
            qdd_h, tau_h = partree.hybrid_dynamics(m, q, qd, tau, qdd, list(inputs.active))
            qdd_d, tau_d = dense_split(m, q, qd, np.nan_to_num(tau), np.nan_to_num(qdd),
                                       [name in inputs.active for name in m.joint_names])
            assert np.isfinite(qdd_h).all() and np.isfinite(tau_h).all()
            assert rel(qdd_h, qdd_d) < 1e-10
            assert rel(tau_h, tau_d) < 1e-10
            assert np.array_equal(qdd_h[dofs], qdda)
            assert np.array_equal(tau_h[inputs.passive_dofs(m)], inputs.tau(m, t)[inputs.passive_dofs(m)])


def test_joint_names_form_equals_the_mask(rng):
    m = tree(5, True)
    q, qd, tau, qdd, F = state(m, rng, False)
    mask = rng.random(m.n) < 0.4
    names = [m.joint_names[i] for i in np.flatnonzero(mask)]
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask)
    for form in (names, tuple(names), set(names), np.array(names)):
        got = partree.hybrid_dynamics(m, q, qd, tau, qdd, form)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])
    one = partree.hybrid_dynamics(m, q, qd, tau, qdd, m.joint_names[2])
    mask1 = np.zeros(m.n, dtype=bool)
    mask1[2] = True
    assert np.array_equal(one[0], partree.hybrid_dynamics(m, q, qd, tau, qdd, mask1)[0])
    none = partree.hybrid_dynamics(m, q, qd, tau, qdd, [])
    assert rel(none[0], partree.aba(m, q, qd, tau)) < 1e-12


def test_workspace_and_list_inputs(rng):
    m = tree(6, False)
    q, qd, tau, qdd, F = state(m, rng, True)
    mask = rng.random(m.n) < 0.5
    ref = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask, F)
    d = m.create_data()
    got = partree.hybrid_dynamics(m, q.tolist(), qd.tolist(), tau.tolist(), qdd.tolist(), mask.tolist(), F, data=d)
    assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])


def test_bad_inputs_are_refused_clearly(rng):
    m = tree(7, False, n=10)
    q, qd, tau, qdd, _ = state(m, rng, False)
    with pytest.raises(PartreeInputError, match=r"does not have: \['nope', 'neither'\]"):
        partree.hybrid_dynamics(m, q, qd, tau, qdd, [m.joint_names[0], "nope", "neither"])
    with pytest.raises(PartreeInputError, match=r"active has shape \(9,\).*\(10,\)"):
        partree.hybrid_dynamics(m, q, qd, tau, qdd, np.ones(9, dtype=bool))
    with pytest.raises(PartreeInputError, match="joint indices are not accepted"):
        partree.hybrid_dynamics(m, q, qd, tau, qdd, [0, 2])
    with pytest.raises(PartreeInputError, match="tau has shape"):
        partree.hybrid_dynamics(m, q, qd, tau[:-1], qdd, np.zeros(m.n, dtype=bool))
    with pytest.raises(PartreeInputError, match="qdd is None"):
        partree.hybrid_dynamics(m, q, qd, tau, None, np.zeros(m.n, dtype=bool))
    with pytest.raises(PartreeInputError, match="q has shape"):
        partree.hybrid_dynamics(m, q[:-1], qd, tau, qdd, np.zeros(m.n, dtype=bool))
    with pytest.raises(PartreeInputError, match="f_ext has shape"):
        partree.hybrid_dynamics(m, q, qd, tau, qdd, np.zeros(m.n, dtype=bool), np.zeros((m.n - 1, 6)))
    # NaN where an entry is read is refused; where it is ignored, it is ignored
    mask = np.zeros(m.n, dtype=bool)
    mask[m.nv_j > 0] = True
    k = int(np.flatnonzero(m.nv_j > 0)[0])
    mask[k] = False
    bad_tau = tau.copy()
    bad_tau[m.idx_v[k]] = np.nan
    with pytest.raises(PartreeInputError, match=rf"tau\[{m.idx_v[k]}\] is nan"):
        partree.hybrid_dynamics(m, q, qd, bad_tau, qdd, mask)
    bad_qdd = qdd.copy()
    bad_qdd[m.idx_v[k]] = np.nan
    got = partree.hybrid_dynamics(m, q, qd, tau, bad_qdd, mask)
    assert np.isfinite(got[0]).all() and np.isfinite(got[1]).all()


def massless_leaf_chain():
    """Four revolute links, the last one massless: its joint moves no inertia."""
    src = chain(4, alternate=True)
    mass, Ic = src.mass.copy(), src.I_com.copy()
    mass[3], Ic[3] = 0.0, 0.0
    n = src.n
    return partree.Model(src.parent, "revolute", src.axis, src.E_tree, src.r_tree, mass, src.com, Ic,
                         axis2=np.zeros((n, 3)), joint_names=[f"joint{i}" for i in range(n)],
                         allow_massless=True, validate=False)


def test_singular_passive_joint_names_the_joint_and_an_active_one_is_fine(rng):
    m = massless_leaf_chain()
    q, qd, tau, qdd, _ = state(m, rng, False)
    with pytest.raises(PartreeInputError, match=r"passive joint 'joint3' \(body 3\): its subtree has a singular"):
        partree.hybrid_dynamics(m, q, qd, tau, qdd, np.zeros(m.n, dtype=bool))
    mask = np.array([False, True, False, True])
    qdd_h, tau_h = partree.hybrid_dynamics(m, q, qd, tau, qdd, mask)
    qdd_d, tau_d = dense_split(m, q, qd, tau, qdd, mask)
    assert rel(qdd_h, qdd_d) < 1e-10 and rel(tau_h, tau_d) < 1e-10
    assert tau_h[3] == pytest.approx(0.0, abs=1e-12)      # a massless link needs no force


def test_simulation_dynamics_prescribed_motion(rng):
    """``Dynamics(prescribed=...)``: whole joints prescribed go through hybrid_dynamics; a joint of
    several dofs with its first dof alone prescribed (the dict form) keeps the dense split."""
    from partree.simulation.dynamics import Dynamics

    m = random_tree(12, seed=8, joint_types=("revolute", "spherical", "universal"))
    rev = [m.joint_names[i] for i in range(m.n) if m.nv_j[i] == 1][:2]
    multi = [m.joint_names[i] for i in range(m.n) if m.nv_j[i] > 1][:1]
    assert len(rev) == 2 and len(multi) == 1

    def motion(t):
        return (0.1 * np.sin(t), 0.1 * np.cos(t), -0.1 * np.sin(t))

    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    tau = rng.normal(size=m.nv)
    for names, whole in ((rev, True), (rev + multi, False)):
        dyn = Dynamics(m, prescribed={j: motion for j in names})
        assert (dyn._active_joints is not None) == whole
        qdd_h, tau_h = dyn.hybrid(0.4, q, qd, tau)
        dofs = np.array([m.v_slice(j).start for j in names])
        dof_active = np.zeros(m.nv, dtype=bool)
        dof_active[dofs] = True
        qdd = np.zeros(m.nv)
        qdd[dofs] = motion(0.4)[2]
        qdd_d, tau_d = dense_split(m, q, qd, tau, qdd, None, dof_active=dof_active)
        assert rel(qdd_h, qdd_d) < 1e-10 and rel(tau_h, tau_d) < 1e-10
