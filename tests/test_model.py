"""Model construction, validation errors, topology queries, configurations."""
import numpy as np
import pytest

import partree
from partree import PartreeInputError
from partree.model import regular_numbering, renumber
from partree.models import auto_tree
from partree.spatial import axis_angle, force_xform, motion_xform, spatial_inertia


def simple_arrays(n=4):
    return dict(parent=np.arange(-1, n - 1), jtype=np.zeros(n, dtype=int), axis=np.tile([0.0, 0, 1], (n, 1)),
                E_tree=np.tile(np.eye(3), (n, 1, 1)), r_tree=np.tile([1.0, 0, 0], (n, 1)), mass=np.ones(n),
                com=np.tile([0.5, 0, 0], (n, 1)), I_com=np.tile(np.diag([0.01, 0.1, 0.1]), (n, 1, 1)))


def make(**over):
    a = simple_arrays()
    a.update(over)
    return partree.Model(**a)


def test_forward_reference_and_self_parent():
    with pytest.raises(PartreeInputError, match="body 2 .*parent 3"):
        make(parent=np.array([-1, 0, 3, 1]))
    with pytest.raises(PartreeInputError, match="body 1 .*itself"):
        make(parent=np.array([-1, 1, 1, 2]))


def test_regular_numbering_and_cycles():
    parent = np.array([3, -1, 1, 1, 0])
    perm = regular_numbering(parent)
    newp = renumber(parent, perm)
    assert np.all(newp < np.arange(5))
    with pytest.raises(PartreeInputError, match="cycle"):
        regular_numbering(np.array([-1, 2, 3, 1]))
    with pytest.raises(PartreeInputError, match="own parent"):
        regular_numbering(np.array([-1, 1]))
    with pytest.raises(PartreeInputError, match="not a body"):
        regular_numbering(np.array([-1, 7]))


def test_bad_inertias():
    with pytest.raises(PartreeInputError, match="body 2 .*non-positive mass"):
        make(mass=np.array([1.0, 1.0, 0.0, 1.0]))
    with pytest.raises(PartreeInputError, match="body 1 .*non-positive mass"):
        make(mass=np.array([1.0, -2.0, 1.0, 1.0]))
    Ic = np.tile(np.diag([0.01, 0.1, 0.1]), (4, 1, 1))
    Ic[3] = np.diag([0.01, 0.01, 1.0])      # violates the triangle inequality
    with pytest.raises(PartreeInputError, match="body 3 .*triangle"):
        make(I_com=Ic)
    Ic[3] = np.diag([-0.01, 0.1, 0.1])
    with pytest.raises(PartreeInputError, match="body 3"):
        make(I_com=Ic)
    Ic[3] = np.array([[0.1, 0.05, 0], [0.0, 0.1, 0], [0, 0, 0.1]])
    with pytest.raises(PartreeInputError, match="body 3 .*not symmetric"):
        make(I_com=Ic)


def test_bad_shapes_axes_and_types():
    with pytest.raises(PartreeInputError, match="axis has shape"):
        make(axis=np.zeros((3, 3)))
    with pytest.raises(PartreeInputError, match="not a unit vector"):
        make(axis=np.tile([0.0, 0, 2], (4, 1)))
    with pytest.raises(ValueError, match="unknown joint type 'hinge'"):
        make(jtype=["revolute", "hinge", "revolute", "revolute"])
    with pytest.raises(PartreeInputError, match="not a rotation"):
        make(E_tree=np.tile(2 * np.eye(3), (4, 1, 1)))
    with pytest.raises(PartreeInputError, match="r_tree is not finite at body 1"):
        r = np.tile([1.0, 0, 0], (4, 1))
        r[1, 2] = np.nan
        make(r_tree=r)


def test_bad_states_named():
    m = auto_tree(5)
    q = np.zeros(5)
    with pytest.raises(PartreeInputError, match=r"q has shape \(4,\)"):
        partree.aba(m, np.zeros(4), q, q)
    bad = q.copy()
    bad[3] = np.nan
    with pytest.raises(PartreeInputError, match=r"qd\[3\] is nan \(joint 'j3', body 3\)"):
        partree.aba(m, q, bad, q)
    bad[3] = np.inf
    with pytest.raises(PartreeInputError, match=r"tau\[3\] is inf"):
        partree.rnea(m, q, q, bad) if False else partree.aba(m, q, q, bad)
    with pytest.raises(PartreeInputError, match=r"f_ext has shape"):
        partree.aba(m, q, q, q, f_ext=np.zeros((4, 6)))
    F = np.zeros((5, 6))
    F[2, 4] = np.nan
    with pytest.raises(PartreeInputError, match=r"f_ext of body 2"):
        partree.aba(m, q, q, q, f_ext=F)


def test_topology_queries():
    m = auto_tree(15, 2)
    assert list(m.children(0)) == [1, 2]
    assert list(m.children(6)) == [13, 14]
    assert len(m.children(7)) == 0
    d = m.depth()
    assert d[0] == 0 and d[14] == 3
    ptr, idx = m.levels()
    assert [list(idx[ptr[k]:ptr[k + 1]]) for k in range(len(ptr) - 1)][:3] == [[0], [1, 2], [3, 4, 5, 6]]
    assert m.subtree_sizes()[0] == 15 and m.subtree_sizes()[1] == 7
    assert list(m.nodes()) == list(range(7))
    c = auto_tree(10, 1)
    ptr, idx = c.chains()
    assert len(ptr) == 2 and list(idx) == list(range(10))
    # a Y: chain 0-1-2, node 2 with two chains 3-4 and 5
    y = partree.Model(parent=[-1, 0, 1, 2, 3, 2], jtype="revolute", axis=np.tile([0, 0, 1.0], (6, 1)),
                      E_tree=np.tile(np.eye(3), (6, 1, 1)), r_tree=np.ones((6, 3)), mass=np.ones(6),
                      com=np.zeros((6, 3)), I_com=np.tile(np.eye(3), (6, 1, 1)))
    ptr, idx = y.chains()
    chains = sorted(list(idx[ptr[k]:ptr[k + 1]]) for k in range(len(ptr) - 1))
    assert chains == [[0, 1, 2], [3, 4], [5]]


def test_slices_names_and_configurations():
    from partree.models import random_tree
    m = random_tree(30, seed=5, floating_base=True)
    q = m.neutral()
    assert q.shape == (m.nq,)
    fb = m.joint_names[0]
    assert m.joint_type(fb) == "free"
    assert m.q_slice(fb) == slice(0, 7) and m.v_slice(fb) == slice(0, 6)
    assert q[6] == 1.0
    qr = m.random_configuration(1)
    k = np.flatnonzero(m.jtype == partree.joints.SPHERICAL)
    for i in k:
        assert abs(np.linalg.norm(qr[m.q_slice(int(i))]) - 1) < 1e-12
    with pytest.raises(KeyError):
        m.q_slice("no-such-joint")


def test_memory_per_body_generated_names():
    m = auto_tree(10**5, 2)
    assert m.joint_names.explicit is None
    assert m.joint_names[12345] == "j12345" and m.joint_id("j12345") == 12345
    per_body = (m.nbytes + m.data.nbytes) / m.n
    assert per_body < 1500


def test_spatial_kernels_against_6x6(rng):
    """The compact kernels agree with the textbook 6x6 matrices."""
    from partree.algorithms import primitives as S
    E = axis_angle(rng.normal(size=3), 0.7).T
    r = rng.normal(size=3)
    I6 = spatial_inertia(2.0, rng.normal(size=3), np.diag([0.3, 0.4, 0.5]))
    X = motion_xform(E, r)
    m = rng.normal(size=6)
    out = np.zeros(6)
    S.xform_motion(E, r, m, out)
    assert np.allclose(out, X @ m)
    acc = np.zeros(6)
    S.xform_force_T_add(E, r, m, acc)
    assert np.allclose(acc, X.T @ m)
    assert np.allclose(force_xform(E, r), np.linalg.inv(X).T)
    A = np.zeros((6, 6))
    S.congruence_add(E, r, I6, A, np.zeros((6, 6)))
    assert np.allclose(A, X.T @ I6 @ X)
    Ic = np.zeros((6, 6))
    c = rng.normal(size=3)
    S.inertia_from_compact(1.5, c, np.diag([0.3, 0.4, 0.5]), Ic)
    assert np.allclose(Ic, spatial_inertia(1.5, c, np.diag([0.3, 0.4, 0.5])))


def test_integrate_matches_pinocchio(rng):
    pin = pytest.importorskip("pinocchio")
    from partree.configuration import integrate
    from partree.io.pinocchio import PinocchioMap, to_pinocchio
    from partree.models import random_tree
    m = random_tree(20, seed=4, floating_base=True, joint_types=("revolute", "spherical", "universal"))
    p, _ = to_pinocchio(m)
    mp = PinocchioMap(m, p)      # Pinocchio's joints are partree's in depth-first order
    q = m.random_configuration(rng)
    v = m.random_velocity(rng, 2.0)
    assert np.allclose(integrate(m, q, v), mp.q_from_pinocchio(pin.integrate(p, mp.q_to_pinocchio(q),
                                                                             mp.v_to_pinocchio(v))), atol=1e-12)


# ---------------------------------------------------------------------- inertia policy
def _tri_I():
    Ic = np.tile(np.diag([0.01, 0.1, 0.1]), (4, 1, 1))
    Ic[3] = np.diag([0.01, 0.01, 1.0])      # breaks the triangle inequality
    return Ic


def test_inertia_policy_keyword():
    assert make().inertia_policy == "strict"
    for bad in ("lenient", None, 1):
        with pytest.raises(PartreeInputError, match="inertia="):
            make(inertia=bad)
    assert make(inertia="warn").select([0, 1]).inertia_policy == "warn"


def test_inertia_warn_accepts_triangle_violation_and_names_the_body():
    Ic = _tri_I()
    with pytest.warns(partree.PartreeInertiaWarning, match=r"(?s)1 body has.*body 3 \(b3\).*triangle") as rec:
        m = make(I_com=Ic, inertia="warn")
    assert len(rec) == 1
    np.testing.assert_array_equal(m.I_com, Ic)


def test_inertia_fix_balances_to_the_mean_and_passes_strict():
    Ic = _tri_I()
    R = axis_angle(np.array([1.0, 2.0, 2.0]) / 3.0, 0.7)
    Ic[2] = R @ np.diag([0.02, 0.03, 0.09]) @ R.T      # rotated, also broken
    with pytest.warns(partree.PartreeInertiaWarning,
                      match=r"(?s)inertia of 2 bodies were changed.*body 2 \(b2\).*body 3 \(b3\)"):
        m = make(I_com=Ic.copy(), inertia="fix")
    np.testing.assert_allclose(m.I_com[3], np.eye(3) * (0.01 + 0.01 + 1.0) / 3, rtol=1e-15)
    np.testing.assert_allclose(m.I_com[2], np.eye(3) * (0.02 + 0.03 + 0.09) / 3, rtol=1e-12)
    np.testing.assert_array_equal(m.I_com[:2], Ic[:2])
    assert np.abs(Ic[3] - np.diag([0.01, 0.01, 1.0])).max() == 0.0    # the caller's array is untouched
    make(I_com=m.I_com)                                                # strict accepts the repair


def test_inertia_rounding_noise_is_zero_in_every_policy():
    Ic = np.tile(np.diag([0.01, 0.1, 0.1]), (4, 1, 1))
    R = axis_angle(np.array([0.0, 0.6, 0.8]), 0.3)
    Ic[1] = R @ np.diag([-2e-14, 0.05, 0.05]) @ R.T     # a rod's zero moment, written with noise
    Ic[2] = np.diag([-1.36e-20, 0.0, 1.36e-20])          # all noise (far below the model's moments)
    for policy in ("strict", "warn"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m = make(I_com=Ic, inertia=policy)
        np.testing.assert_array_equal(m.I_com, Ic)
    with pytest.warns(partree.PartreeInertiaWarning, match=r"(?s)body 1 \(b1\).*noise clipped.*body 2 \(b2\)"):
        m = make(I_com=Ic, inertia="fix")
    ev = np.linalg.eigvalsh(m.I_com)
    assert ev.min() >= -1e-17 and abs(ev[1, 0]) < 1e-17
    np.testing.assert_allclose(ev[1, 1:], [0.05, 0.05], rtol=1e-12)


def test_inertia_negative_moment_refused_in_every_policy():
    Ic = np.tile(np.diag([0.01, 0.1, 0.1]), (4, 1, 1))
    Ic[3] = np.diag([-1e-9, 0.1, 0.1])       # far beyond rounding of 0.1
    for policy in ("strict", "warn", "fix"):
        with pytest.raises(PartreeInputError, match=r"body 3 \(b3\) has a negative principal moment.*-1"):
            make(I_com=Ic, inertia=policy)


def _tiny(jtype, mass, com, I_com, axis=None, parent=None, **kw):
    n = len(jtype)
    a = dict(parent=np.arange(-1, n - 1) if parent is None else np.asarray(parent), jtype=jtype,
             axis=np.tile([0.0, 0, 1], (n, 1)) if axis is None else np.asarray(axis, dtype=float),
             E_tree=np.tile(np.eye(3), (n, 1, 1)), r_tree=np.tile([0.3, 0.1, 0], (n, 1)), mass=np.asarray(mass, float),
             com=np.asarray(com, float), I_com=np.asarray(I_com, float), allow_massless=True)
    a.update(kw)
    return partree.Model(**a)


def test_fixed_parts_are_judged_with_their_rigid_body():
    R = axis_angle(np.array([0.0, 0.6, 0.8]), 0.4)
    Ic = [np.diag([0.1, 0.2, 0.25]), np.diag([0.3, 0.3, 0.4]), R @ np.diag([-0.01, 0.02, 0.04]) @ R.T]
    args = (["revolute", "revolute", "fixed"], [1.0, 2.0, 0.5], [[0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]], Ic)
    with pytest.raises(PartreeInputError, match=r"body 2 \(b2\) has an invalid rotational inertia"):
        _tiny(*args)
    with pytest.warns(partree.PartreeInertiaWarning,
                      match=r"body 2 \(b2\): principal moments .* have a negative one; the rigid body it is part of "
                            r"\(body 1 \(b1\) and the 1 body fixed to it\) is a rigid body's") as rec:
        m = _tiny(*args, inertia="warn")
    assert len(rec) == 1
    np.testing.assert_array_equal(m.I_com[2], Ic[2])
    with pytest.warns(partree.PartreeInertiaWarning, match=r"body 2 \(b2\).*balanced"):
        m = _tiny(*args, inertia="fix")
    np.testing.assert_allclose(m.I_com[2], np.eye(3) * 0.05 / 3, rtol=1e-12)
    _tiny(args[0], args[1], args[2], m.I_com)          # strict accepts the repair
    # the rigid body itself indefinite: refused in every policy, with its parts named
    Ic[1] = np.diag([0.001, 0.001, 0.001])
    for policy in ("strict", "warn", "fix"):
        with pytest.raises(PartreeInputError, match=r"body 2 \(b2\) has a negative .*fixed to it \(1 \(b1\)"):
            _tiny(args[0], args[1], args[2], Ic, inertia=policy)


def test_floating_base_with_its_mass_in_a_fixed_child():
    """A floating base link of ~0 inertia whose mass sits in a trunk welded to it."""
    Ic = [np.diag([1e-22, 2e-23, 3e-6]), np.diag([0.3, 0.5, 0.6]), np.diag([0.01, 0.02, 0.02])]
    args = (["free", "fixed", "revolute"], [1e-3, 20.0, 1.0], np.zeros((3, 3)), Ic)
    with pytest.raises(PartreeInputError, match=r"body 0 \(b0\) has an invalid"):
        _tiny(*args)
    with pytest.warns(partree.PartreeInertiaWarning,
                      match=r"body 0 \(b0\): .* triangle .* forms with the 1 body fixed to it is a rigid body's"):
        m = _tiny(*args, inertia="warn")
    # the dynamics is well-posed: the mass matrix is positive definite
    assert np.linalg.eigvalsh(partree.crba(m, m.random_configuration(0)))[0] > 1e-4


def _min_eig_M(m, q):
    M = partree.crba(m, q)
    return np.linalg.eigvalsh(M)[0] / np.linalg.eigvalsh(M)[-1]


def test_joint_that_moves_no_inertia_is_refused_naming_it():
    ok = np.diag([0.1, 0.2, 0.25])
    cases = {
        # a massless link on a revolute joint, nothing below it
        "massless-leaf": (["revolute", "revolute"], [1.0, 0.0], np.zeros((2, 3)), [ok, np.zeros((3, 3))], None,
                          r"joint 'j1' \(body 1, revolute\): the 1 body it moves \(b1\) has no mass and no inertia"),
        # a rod on the joint's axis: mass, but no inertia about the axis
        "rod-on-axis": (["revolute", "revolute"], [1.0, 1.0], [[0, 0, 0], [0, 0, 0.5]], [ok, np.diag([0.1, 0.1, 0])],
                        None, r"joint 'j1' .*\(mass 1 kg\) has no inertia along its motion"),
        # a massless subtree of two bodies on a prismatic joint
        "massless-prismatic": (["revolute", "prismatic", "revolute"], [1.0, 0.0, 0.0], np.zeros((3, 3)),
                               [ok, np.zeros((3, 3)), np.zeros((3, 3))], None,
                               r"2 moving joints .*joint 'j1' \(body 1, prismatic\): the 2 bodies it moves"),
        # a free point mass: its rotation is undetermined
        "point-mass-free": (["free"], [1.0], np.zeros((1, 3)), [np.zeros((3, 3))], None,
                            r"joint 'j0' \(body 0, free\)"),
    }
    for key, (jt, mass, com, Ic, axis, msg) in cases.items():
        for policy in ("strict", "warn", "fix"):
            with pytest.raises(PartreeInputError, match=msg):
                _tiny(jt, mass, com, Ic, axis=axis, inertia=policy)
        # the reason is real: the mass matrix is singular at any configuration
        m = _tiny(jt, mass, com, Ic, axis=axis, validate=False)
        for seed in range(3):
            assert _min_eig_M(m, m.random_configuration(seed)) < 1e-14, key
    # the same rod across the axis moves inertia: accepted
    m = _tiny(["revolute", "revolute"], [1.0, 1.0], [[0, 0, 0], [0, 0, 0.5]], [ok, np.diag([0.1, 0.1, 0])],
              axis=[[0, 0, 1], [1, 0, 0]])
    assert _min_eig_M(m, m.random_configuration(0)) > 1e-6


def test_joint_singular_only_at_the_neutral_configuration_is_accepted():
    """A point mass that slides through a revolute joint's axis: the mass matrix is singular where
    it sits on the axis (the neutral configuration), not elsewhere."""
    m = _tiny(["revolute", "prismatic"], [0.0, 1.0], np.zeros((2, 3)), np.zeros((2, 3, 3)),
              axis=[[0, 0, 1], [1, 0, 0]], r_tree=np.zeros((2, 3)))
    assert _min_eig_M(m, m.neutral()) < 1e-14
    assert _min_eig_M(m, m.random_configuration(0)) > 1e-6
