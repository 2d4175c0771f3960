"""Loops and Pinocchio's rigid constraints (RigidConstraintModel): from_pinocchio(...,
constraints=...) against the constraint frames Pinocchio computes (``oMc1``, ``oMc2``) at random
configurations, for every joint type that becomes a chain of partree bodies, and round trips
partree -> Pinocchio -> partree of the loops, with loop ends on the world and on fixed bodies;
then what is refused."""
import numpy as np
import pytest

import partree
from partree import ModelBuilder
from partree.errors import PartreeInputError
from partree.spatial import axis_angle

pin = pytest.importorskip("pinocchio")
from partree.io import PinocchioMap, from_pinocchio, loop_constraints_to_pinocchio, to_pinocchio  # noqa: E402

C3, C6 = pin.ContactType.CONTACT_3D, pin.ContactType.CONTACT_6D
LOCAL = pin.ReferenceFrame.LOCAL


def _placement(rng):
    return pin.SE3(axis_angle(rng.normal(size=3), rng.uniform(-np.pi, np.pi)), rng.normal(size=3) * 0.3)


def _inertia(rng):
    a, b, c = rng.uniform(0.05, 0.3, size=3)
    R = axis_angle(rng.normal(size=3), rng.uniform(0, np.pi))
    return pin.Inertia(1.0 + rng.uniform(), rng.normal(size=3) * 0.1,
                       R @ np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) @ R.T / 12)


def _unit(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def _composite(rng):
    c = pin.JointModelComposite()
    c.addJoint(pin.JointModelRX(), _placement(rng))
    c.addJoint(pin.JointModelPrismaticUnaligned(_unit(rng)), _placement(rng))
    c.addJoint(pin.JointModelSpherical(), _placement(rng))
    return c


JOINTS = {
    "revolute unaligned": lambda r: pin.JointModelRevoluteUnaligned(_unit(r)),
    "continuous": lambda r: pin.JointModelRUBZ(),
    "spherical": lambda r: pin.JointModelSpherical(),
    "spherical ZYX": lambda r: pin.JointModelSphericalZYX(),
    "translation": lambda r: pin.JointModelTranslation(),
    "free flyer": lambda r: pin.JointModelFreeFlyer(),
    "composite": _composite,
}


def pin_tree(kind, rng, n=4):
    """A Pinocchio tree: a revolute root, then ``kind`` joints in a chain with a side branch."""
    pm = pin.Model()
    parent = pm.addJoint(0, pin.JointModelRY(), _placement(rng), "root")
    pm.appendBodyToJoint(parent, _inertia(rng), pin.SE3.Identity())
    for k in range(n):
        j = pm.addJoint(parent if k != n - 1 else 1, JOINTS[kind](rng), _placement(rng), f"{kind} {k}")
        pm.appendBodyToJoint(j, _inertia(rng), pin.SE3.Identity())
        parent = j
    return pm


def pin_constraints(pm, rng):
    cs = [pin.RigidConstraintModel(C3, pm, 2, _placement(rng), 4, _placement(rng), LOCAL),
          pin.RigidConstraintModel(C6, pm, 0, _placement(rng), 3, _placement(rng), LOCAL),
          pin.RigidConstraintModel(C6, pm, 5, _placement(rng), 1, _placement(rng), LOCAL),
          pin.RigidConstraintModel(C3, pm, 3, _placement(rng), 0, _placement(rng), LOCAL)]
    cs[1].name = "to the world"
    return cs


def partree_frames(model, kin, k):
    lp = model.loops
    out = []
    for b, R, p in ((lp.body_a[k], lp.R_a[k], lp.p_a[k]), (lp.body_b[k], lp.R_b[k], lp.p_b[k])):
        out.append((R, p) if b < 0 else (kin.R[b] @ R, kin.p[b] + kin.R[b] @ p))
    return out


def assert_frames_match_pinocchio(model, pm, cs, rng, trials=3):
    """Both frames of every loop, placed by partree's forward kinematics, are Pinocchio's oMc1 and
    oMc2 of the matching constraint at random configurations."""
    mp = PinocchioMap(model, pm)
    d = pm.createData()
    for _ in range(trials):
        q = model.random_configuration(rng)
        pin.forwardKinematics(pm, d, mp.q_to_pinocchio(q))
        kin = partree.forward_kinematics(model, q)
        for k, c in enumerate(cs):
            cd = c.createData()
            c.calc(pm, d, cd)
            (RA, pA), (RB, pB) = partree_frames(model, kin, k)
            assert np.abs(RA - cd.oMc1.rotation).max() < 1e-12 and np.abs(pA - cd.oMc1.translation).max() < 1e-12
            assert np.abs(RB - cd.oMc2.rotation).max() < 1e-12 and np.abs(pB - cd.oMc2.translation).max() < 1e-12


def assert_same_constraints(a, b, tol=1e-14):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.type == y.type and x.name == y.name
        assert (x.joint1_id, x.joint2_id) == (y.joint1_id, y.joint2_id)
        for key in ("joint1_placement", "joint2_placement"):
            assert np.abs(getattr(x, key).homogeneous - getattr(y, key).homogeneous).max() < tol, key


@pytest.mark.parametrize("kind", list(JOINTS))
def test_constraints_become_loops_on_the_joint_frames(kind):
    rng = np.random.default_rng(3)
    pm = pin_tree(kind, rng)
    cs = pin_constraints(pm, rng)
    m = from_pinocchio(pm, constraints=cs)
    lp = m.loops
    assert lp.names == ["constraint0", "to the world", "constraint2", "constraint3"]
    assert [lp.loop(k).kind for k in range(4)] == ["spherical", "weld", "weld", "spherical"]
    assert lp.body_a[1] == -1 and lp.body_b[3] == -1
    # a joint that became a chain carries its constraints on the chain's last body
    last = {j: m.joint_names.index(pm.names[j]) if pm.names[j] in list(m.joint_names) else
            max(i for i in range(m.n) if m.joint_names[i].startswith(pm.names[j] + "/")) for j in range(1, pm.njoints)}
    assert lp.body_a[0] == last[2] and lp.body_b[0] == last[4] and lp.body_a[2] == last[5]
    assert np.abs(lp.R_a[0] - cs[0].joint1_placement.rotation).max() < 1e-15     # (orthonormalised)
    assert_frames_match_pinocchio(m, pm, cs, rng)
    # and back: the same constraints of the same Pinocchio model
    back = loop_constraints_to_pinocchio(m, pm)
    for c in cs:
        c.name = c.name or f"constraint{cs.index(c)}"
    assert_same_constraints(back, cs)


def looped_model(depth_first=True):
    """spherical and weld loops, ends on the world, no fixed bodies; the bodies base, u, s, r, p
    numbered depth first, or base, u, r, s, p (parent before child, not depth first)."""
    rng = np.random.default_rng(5)

    def pose():
        return axis_angle(rng.normal(size=3), rng.uniform(-3, 3)), rng.normal(size=3)

    bodies = {"base": (None, "free", None, dict(mass=2.0, inertia=(0.2, 0.3, 0.4)))}
    bodies["u"] = ("base", "universal", pose(), dict(axis=((1, 0, 0), (0, 1, 0)), mass=1.0, inertia=0.1))
    bodies["s"] = ("u", "spherical", pose(), dict(mass=1.0, inertia=0.1))
    bodies["r"] = ("base", "revolute", pose(), dict(axis=_unit(rng), mass=1.0, inertia=0.1))
    bodies["p"] = ("r", "prismatic", pose(), dict(axis=_unit(rng), mass=1.0, inertia=0.1))
    b = ModelBuilder("looped")
    for name in ("base", "u", "s", "r", "p") if depth_first else ("base", "u", "r", "s", "p"):
        parent, joint, placement, kw = bodies[name]
        b.add_body(name, parent, joint, placement, **kw)
    b.add_loop("ball", "spherical", "s", "p", pose(), pose())
    b.add_loop("weld", "weld", "p", None, pose(), pose())
    b.add_loop("ground", "spherical", None, "u", pose(), pose())
    b.add_loop("glue", "weld", "r", "s", pose(), pose())
    return b.build()


def test_partree_loops_round_trip_through_pinocchio():
    rng = np.random.default_rng(11)
    m = looped_model()
    pm, jid = to_pinocchio(m)
    cs = loop_constraints_to_pinocchio(m, pm)
    assert [c.type for c in cs] == [C3, C6, C3, C6] and [c.name for c in cs] == m.loops.names
    assert [c.joint1_id for c in cs] == [jid[2], jid[4], 0, jid[3]]
    assert_frames_match_pinocchio(m, pm, cs, rng)
    back = from_pinocchio(pm, constraints=cs)
    assert back.loops.names == m.loops.names
    for key in ("kind", "body_a", "body_b"):
        assert np.array_equal(getattr(back.loops, key), getattr(m.loops, key)), key
    for key in ("R_a", "p_a", "R_b", "p_b"):
        assert np.abs(getattr(back.loops, key) - getattr(m.loops, key)).max() < 1e-14, key


def test_loops_round_trip_on_a_tree_not_numbered_depth_first():
    """to_pinocchio adds the joints depth first (base u s r p), the loops' ends follow their bodies,
    and the model read back has the same loops on the same (renumbered) bodies."""
    rng = np.random.default_rng(12)
    m = looped_model(depth_first=False)
    assert list(m.body_names) == ["base", "u", "r", "s", "p"] and list(m.parent) == [-1, 0, 0, 1, 2]
    pm, jid = to_pinocchio(m)
    assert list(pm.names) == ["universe", "base", "u", "s", "r", "p"] and list(jid) == [1, 2, 4, 3, 5]
    cs = loop_constraints_to_pinocchio(m, pm)
    assert [(c.joint1_id, c.joint2_id) for c in cs] == [(3, 5), (5, 0), (0, 2), (4, 3)]
    assert_frames_match_pinocchio(m, pm, cs, rng)
    back = from_pinocchio(pm, constraints=cs)
    assert list(back.body_names) == ["base", "u", "s", "r", "p"] and back.loops.names == m.loops.names
    to_back = np.array([back.body_names.index(nm) for nm in m.body_names] + [-1])     # [-1]: the world
    for key in ("body_a", "body_b"):
        np.testing.assert_array_equal(getattr(back.loops, key), to_back[getattr(m.loops, key)])
    for key in ("R_a", "p_a", "R_b", "p_b"):
        assert np.abs(getattr(back.loops, key) - getattr(m.loops, key)).max() < 1e-14, key
    assert_frames_match_pinocchio(back, pm, cs, rng)
    # the loops' frames of both models coincide, states mapped through Pinocchio's
    a, b = PinocchioMap(m, pm), PinocchioMap(back, pm)
    for _ in range(3):
        q = m.random_configuration(rng)
        k1 = partree.forward_kinematics(m, q)
        k2 = partree.forward_kinematics(back, b.q_from_pinocchio(a.q_to_pinocchio(q)))
        for k in range(len(cs)):
            for (Ra, pa), (Rb, pb) in zip(partree_frames(m, k1, k), partree_frames(back, k2, k)):
                assert np.abs(Ra - Rb).max() < 1e-13 and np.abs(pa - pb).max() < 1e-13


def test_loop_ends_on_fixed_bodies_go_to_their_moving_joint():
    rng = np.random.default_rng(2)
    b = ModelBuilder("tool")
    b.add_body("arm", None, "revolute", (np.eye(3), (0, 0, 0.5)), axis=(0, 1, 0), mass=1.0, inertia=0.1)
    b.add_body("flange", "arm", "fixed", (axis_angle((1, 2, 3), 0.7), (0.1, 0.2, 0.3)), mass=0.5, inertia=0.01)
    b.add_body("tool", "flange", "fixed", (axis_angle((0, 0, 1), 1.1), (0, 0, 0.2)))
    b.add_body("stand", None, "fixed", (np.eye(3), (1.0, 0, 0)))
    b.add_body("slider", "stand", "prismatic", axis=(1, 0, 0), mass=1.0, inertia=0.1)
    b.add_loop("grip", "weld", "tool", "slider", (axis_angle((1, 0, 0), 0.4), (0, 0, 0.1)), (np.eye(3), (0.2, 0, 0)))
    b.add_loop("pin", "spherical", "stand", "flange", (0.0, 0.1, 0.0), (0.3, 0.0, 0.0))
    m = b.build()
    pm, jid = to_pinocchio(m)
    cs = loop_constraints_to_pinocchio(m, pm)
    assert [(c.joint1_id, c.joint2_id) for c in cs] == [(jid[0], jid[4]), (0, jid[0])]
    assert_frames_match_pinocchio(m, pm, cs, rng)
    back = from_pinocchio(pm, constraints=cs)                 # fixed bodies merged into their joints
    assert back.n == 2 and back.loops.names == ["grip", "pin"]
    for _ in range(3):
        q = m.random_configuration(rng)
        k1, k2 = partree.forward_kinematics(m, q), partree.forward_kinematics(back, q)
        for k in range(2):
            for (Ra, pa), (Rb, pb) in zip(partree_frames(m, k1, k), partree_frames(back, k2, k)):
                assert np.abs(Ra - Rb).max() < 1e-13 and np.abs(pa - pb).max() < 1e-13


def test_pinocchio_urdf_model_takes_the_loops_of_load_urdf():
    from pathlib import Path

    path = Path(__file__).resolve().parent / "data" / "arm7.urdf"
    m = partree.load_urdf(path)
    m = m.with_loops([partree.Loop("tip", "spherical", m.n - 1, None, placement_a=(0.0, 0.0, 0.1),
                                   placement_b=(0.3, 0.2, 0.5))])
    pm = pin.buildModelFromUrdf(str(path))
    cs = loop_constraints_to_pinocchio(m, pm)
    assert_frames_match_pinocchio(m, pm, cs, np.random.default_rng(0))


REFUSED = {
    "revolute loop": (lambda m, pm: loop_constraints_to_pinocchio(m.with_loops(
        [partree.Loop("hinge", "revolute", 1, 3)], replace=True), pm), r"loop 'hinge' is a revolute loop"),
    "distance loop": (lambda m, pm: loop_constraints_to_pinocchio(m.with_loops(
        [partree.Loop("rod", "distance", 1, 3, length=1.0)], replace=True), pm), r"loop 'rod' is a distance loop"),
    "no such joint": (lambda m, pm: loop_constraints_to_pinocchio(m, to_pinocchio(partree.models.chain(2))[0]),
                      r"loop 'ball': body 2 \(s\) has no Pinocchio joint named 's'"),
    "not a constraint": (lambda m, pm: from_pinocchio(pm, constraints=["x"]), r"constraint 0 is a str"),
    "desired placement": (lambda m, pm: from_pinocchio(pm, constraints=[_desired(pm)]),
                          r"constraint 0 \('constraint0'\) has a desired_contact_placement"),
    "to itself": (lambda m, pm: from_pinocchio(pm, constraints=[pin.RigidConstraintModel(C3, pm, 2, LOCAL)]) and
                  from_pinocchio(pm, constraints=[pin.RigidConstraintModel(C6, pm, 2, pin.SE3.Identity(), 2,
                                                                           pin.SE3.Identity(), LOCAL)]),
                  r"joins joint 2 to itself"),
}


def _desired(pm):
    c = pin.RigidConstraintModel(C6, pm, 1, pin.SE3.Identity(), 2, pin.SE3.Identity(), LOCAL)
    c.desired_contact_placement = pin.SE3(np.eye(3), np.array([0.0, 0.0, 1.0]))
    return c


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals(case):
    m = looped_model()
    pm, _ = to_pinocchio(m)
    fn, pattern = REFUSED[case]
    with pytest.raises(PartreeInputError, match=pattern):
        fn(m, pm)


def test_intermediate_chain_body_is_refused():
    rng = np.random.default_rng(0)
    pm = pin_tree("spherical ZYX", rng, n=1)
    m = from_pinocchio(pm)
    m = m.with_loops([partree.Loop("mid", "weld", "spherical ZYX 0/0", None)])
    with pytest.raises(PartreeInputError, match=r"loop 'mid': body 1 .* intermediate body of the chain"):
        loop_constraints_to_pinocchio(m, pm)
