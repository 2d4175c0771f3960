"""partree.ModelBuilder: a model written body by body.  The four-bar of its docstring against the
analytic closure of a four-bar linkage, placements and inertias against the same tree read from a
URDF, and the inputs it refuses."""
import doctest

import numpy as np
import pytest

import partree
import partree.builder
from partree import ModelBuilder
from partree.errors import PartreeInputError
from partree.spatial import rpy_to_matrix

Y = (0.0, 1.0, 0.0)


def four_bar():
    b = ModelBuilder("four-bar")
    b.add_body("crank", None, "revolute", axis=Y, mass=1.0, com=(0, 0, 0.5), inertia=0.1)
    b.add_body("coupler", "crank", "revolute", placement=(0, 0, 1), axis=Y, mass=2.0, com=(1, 0, 0.25), inertia=0.3)
    b.add_body("rocker", None, "revolute", placement=(2, 0, 0), axis=Y, mass=1.5, com=(0, 0, 0.75), inertia=0.2)
    b.add_loop("tip", "revolute", "coupler", "rocker", placement_a=(2, 0, 0.5), placement_b=(0, 0, 1.5), axis=Y)
    return b.build()


def test_docstring_example_runs():
    res = doctest.testmod(partree.builder, raise_on_error=False, verbose=False)
    assert res.attempted >= 5 and res.failed == 0


def _ang(v):
    """Angle of an x-z vector from +z towards +x (a rotation about y adds to it)."""
    return np.arctan2(v[0], v[2])


def closure(theta):
    """q of the four-bar at crank angle theta, solved by hand: the rocker's tip P is on the circle
    of radius 1.5 about the rocker's pivot D and at the coupler's length from the crank's tip C."""
    D = np.array([2.0, 0.0, 0.0])
    C = np.array([np.sin(theta), 0.0, np.cos(theta)])
    w = np.array([2.0, 0.0, 0.5])
    L, r = np.linalg.norm(w), 1.5
    d = np.linalg.norm(D - C)
    a = (L * L - r * r + d * d) / (2 * d)
    h = np.sqrt(L * L - a * a)
    e = (D - C) / d
    n = np.array([-e[2], 0.0, e[0]])
    cands = [C + a * e + s * h * n for s in (1.0, -1.0)]
    P = min(cands, key=lambda x: np.linalg.norm(x - np.array([2.0, 0.0, 1.5])))
    alpha = _ang(P - C) - _ang(w)
    phi = _ang(P - D)
    return np.array([theta, alpha - theta, phi]), P


@pytest.mark.parametrize("theta", [0.0, 0.3, -0.4, 0.9])
def test_four_bar_closes_where_the_analytic_solution_says(theta):
    model = four_bar()
    assert model.n == 3 and list(model.body_names) == ["crank", "coupler", "rocker"]
    assert list(model.parent) == [-1, 0, -1]
    assert len(model.loops) == 1 and model.loops.nrow == 5
    lp = model.loops
    assert lp.body_a[0] == 1 and lp.body_b[0] == 2
    q, P = closure(theta)
    kin = partree.forward_kinematics(model, q)
    RA, pA = kin.R[1] @ lp.R_a[0], kin.p[1] + kin.R[1] @ lp.p_a[0]
    RB, pB = kin.R[2] @ lp.R_b[0], kin.p[2] + kin.R[2] @ lp.p_b[0]
    assert np.abs(pA - P).max() < 1e-12 and np.abs(pB - P).max() < 1e-12
    rel = RA.T @ RB                       # a rotation about the loop's axis y only
    assert np.abs(rel[:, 1] - Y).max() < 1e-12 and np.abs(rel[1, :] - Y).max() < 1e-12
    if theta == 0.0:
        assert np.abs(q).max() < 1e-12    # closed at q = 0


def test_a_generic_crank_angle_does_not_close_without_the_other_joints():
    model = four_bar()
    kin = partree.forward_kinematics(model, np.array([0.3, 0.0, 0.0]))
    lp = model.loops
    gap = kin.p[1] + kin.R[1] @ lp.p_a[0] - kin.p[2] - kin.R[2] @ lp.p_b[0]
    assert np.linalg.norm(gap) > 0.1


URDF = """<robot name="r">
  <link name="base"/>
  <link name="l1"><inertial><origin xyz="0.1 0.2 0.3"/><mass value="1.5"/>
    <inertia ixx="0.3" ixy="0.01" ixz="-0.02" iyy="0.4" iyz="0.03" izz="0.5"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0 0 0.4"/><mass value="0.7"/>
    <inertia ixx="0.2" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.1"/></inertial></link>
  <link name="l3"><inertial><origin xyz="0 0 0"/><mass value="0.2"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0.5 -0.25 1.0" rpy="0.3 -0.7 1.1"/><axis xyz="0 0.6 0.8"/><limit effort="1" velocity="1"/></joint>
  <joint name="j2" type="prismatic"><parent link="l1"/><child link="l2"/>
    <origin xyz="0 0 0.6" rpy="-1.2 0.4 0.2"/><axis xyz="1 0 0"/><limit effort="1" velocity="1"/></joint>
  <joint name="j3" type="fixed"><parent link="l2"/><child link="l3"/>
    <origin xyz="0.1 0 0" rpy="0 0 1.5707963267948966"/></joint>
</robot>"""


@pytest.mark.parametrize("form", ["pair", "matrix"])
def test_placements_and_inertias_match_the_urdf_reader(form):
    ref = partree.load_urdf(URDF)

    def pl(xyz, rpy):
        R = rpy_to_matrix(rpy)
        if form == "pair":
            return (R, xyz)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, xyz
        return T

    b = ModelBuilder("r")
    b.add_body("l1", None, "revolute", pl((0.5, -0.25, 1.0), (0.3, -0.7, 1.1)), mass=1.5, com=(0.1, 0.2, 0.3),
               inertia=[[0.3, 0.01, -0.02], [0.01, 0.4, 0.03], [-0.02, 0.03, 0.5]], axis=(0, 0.6, 0.8),
               joint_name="j1")
    b.add_body("l2", "l1", "prismatic", pl((0, 0, 0.6), (-1.2, 0.4, 0.2)), mass=0.7, com=(0, 0, 0.4),
               inertia=(0.2, 0.2, 0.1), axis=(1, 0, 0), joint_name="j2")
    b.add_body("l3", "l2", "fixed", pl((0.1, 0, 0), (0, 0, np.pi / 2)), mass=0.2, inertia=0.01, joint_name="j3")
    m = b.build()
    assert list(m.joint_names) == list(ref.joint_names) and list(m.body_names) == list(ref.body_names)
    assert np.array_equal(m.parent, ref.parent) and np.array_equal(m.jtype, ref.jtype)
    for k in ("axis", "E_tree", "r_tree", "mass", "com", "I_com", "gravity"):
        assert np.abs(getattr(m, k) - getattr(ref, k)).max() < 1e-14, k
    q = m.random_configuration(1)
    assert np.abs(partree.forward_kinematics(m, q).p - partree.forward_kinematics(ref, q).p).max() < 1e-13


def test_every_joint_type_and_the_defaults():
    b = ModelBuilder("all", gravity=(0, 0, -1.62))
    b.add_body("base", None, "free", mass=10.0, inertia=(1.0, 2.0, 2.5))
    b.add_body("u", "base", "universal", placement=(0, 0, 0.1), axis=((0, 1, 0), (0, 0, 1)), mass=1.0, inertia=0.1)
    b.add_body("s", "u", "spherical", placement=(0, 0, 0.2), mass=1.0, inertia=0.1)
    b.add_body("r", 2, "revolute", mass=1.0, inertia=0.1)
    b.add_body("p", "r", "prismatic", mass=1.0, inertia=0.1)
    b.add_body("tool", "p", "fixed", joint_name="flange")
    m = b.build()
    assert [partree.joints.NAMES[c] for c in m.jtype] == ["free", "universal", "spherical", "revolute", "prismatic",
                                                          "fixed"]
    assert m.nq == 7 + 2 + 4 + 1 + 1 and m.nv == 6 + 2 + 3 + 1 + 1
    assert np.array_equal(m.axis[1], [0, 1, 0]) and np.array_equal(m.axis2[1], [0, 0, 1])
    assert np.array_equal(m.axis[3], [0, 0, 1]) and np.array_equal(m.axis[4], [0, 0, 1])
    assert np.array_equal(m.gravity, [0, 0, -1.62]) and np.array_equal(m.I_com[0], np.diag([1.0, 2.0, 2.5]))
    assert m.joint_names[5] == "flange" and m.body_names[5] == "tool" and m.mass[5] == 0.0
    assert m.joint_id("r") == 3 and len(m.loops) == 0 and len(b) == 6


def test_loops_to_the_world_and_by_number():
    b = ModelBuilder()
    b.add_body("a", None, "revolute", mass=1.0, inertia=0.1, axis=Y)
    b.add_loop("pin", "spherical", "a", None, placement_a=(1, 0, 0), placement_b=(1, 0, 0))
    b.add_loop("rod", "distance", 0, "world", length=2.0)
    m = b.build()
    assert list(m.loops.names) == ["pin", "rod"] and list(m.loops.body_b) == [-1, -1]
    assert list(m.loops.body_a) == [0, 0] and m.loops.nrow == 4 and m.loops.length[1] == 2.0


def test_a_loop_may_name_a_body_added_after_it():
    b = ModelBuilder()
    b.add_body("a", None, "revolute", mass=1.0, inertia=0.1)
    b.add_loop("w", "weld", "a", "b")
    b.add_body("b", "a", "revolute", mass=1.0, inertia=0.1)
    assert b.build().loops.body_b[0] == 1


REFUSED = {
    "unknown parent": (lambda b: b.add_body("c", "nope", "revolute"), r"body 'c': parent 'nope' is not a body added"),
    "parent number": (lambda b: b.add_body("c", 7, "revolute"), r"parent 7 is not a body added"),
    "duplicate body": (lambda b: b.add_body("a", None, "revolute"), r"body name 'a' is used twice"),
    "duplicate joint": (lambda b: b.add_body("c", None, "revolute", joint_name="a"), r"joint name 'a' is used twice"),
    "world name": (lambda b: b.add_body("world", None, "revolute"), r"'world' names the fixed world"),
    "joint type": (lambda b: b.add_body("c", None, "hinge"), r"body 'c': unknown joint type 'hinge'"),
    "axis on a ball": (lambda b: b.add_body("c", None, "spherical", axis=(1, 0, 0)), r"axis is for revolute"),
    "zero axis": (lambda b: b.add_body("c", None, "revolute", axis=(0, 0, 0)), r"body 'c': axis is a zero vector"),
    "parallel universal": (lambda b: b.add_body("c", None, "universal", axis=((1, 0, 0), (2, 0, 0))), "parallel"),
    "bad placement": (lambda b: b.add_body("c", None, "revolute", placement=(1, 2)), r"body 'c': placement must be"),
    "not a rotation": (lambda b: b.add_body("c", None, "revolute", placement=(np.ones((3, 3)), (0, 0, 0))),
                       r"body 'c': placement: R is not a rotation"),
    "bad inertia": (lambda b: b.add_body("c", None, "revolute", inertia=(1, 2)), r"body 'c': inertia must be"),
    "bad com": (lambda b: b.add_body("c", None, "revolute", com=(0, 0)), r"body 'c': com must be"),
    "duplicate loop": (lambda b: [b.add_loop("L", "weld", "a", None) for _ in range(2)],
                       r"loop name 'L' is used twice"),
    "loop kind": (lambda b: b.add_loop("L", "hinge", "a", None), r"loop 'L': unknown kind 'hinge'"),
    "loop body": (lambda b: (b.add_loop("L", "weld", "a", "zz"), b.build()), r"loop 'L': body_b 'zz' is not a body"),
    "loop to itself": (lambda b: (b.add_loop("L", "weld", "a", "a"), b.build()), r"loop 'L' joins body 0 \(a\)"),
    "massless joint": (lambda b: (b.add_body("c", "a", "revolute"), b.build()),
                       r"joint .c. \(body 1, revolute\).*no mass"),
    "build argument": (lambda b: b.build(parent=[-1]), r"'parent' comes from the builder"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_are_clear(case):
    b = ModelBuilder()
    b.add_body("a", None, "revolute", mass=1.0, inertia=0.1)
    with pytest.raises(PartreeInputError, match=REFUSED[case][1]):
        REFUSED[case][0](b)


def test_an_empty_builder_is_refused():
    with pytest.raises(PartreeInputError, match="has no bodies"):
        ModelBuilder("empty").build()
