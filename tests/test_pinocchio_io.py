"""The Pinocchio bridge: from_pinocchio against Pinocchio's own ABA, RNEA and CRBA for every joint
type it maps, round trips partree -> Pinocchio -> partree (trees not numbered depth first
included, whose joints to_pinocchio permutes), Pinocchio's URDF and MJCF parsers against
load_urdf and load_mjcf, and the joint types it refuses."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import partree
from partree import joints as J
from partree.errors import PartreeInputError
from partree.models import random_tree
from partree.spatial import axis_angle

pin = pytest.importorskip("pinocchio")
from partree.io import (PinocchioMap, depth_first_order, from_pinocchio, partree_configuration,  # noqa: E402
                        pinocchio_configuration, to_pinocchio)

DATA = Path(__file__).resolve().parent / "data"


def _robots_dir():
    """example-robot-data's robots, shipped in the same cmeel prefix as pinocchio."""
    for base in [Path(pin.__file__).resolve().parents[k] for k in range(3, 6)] + [Path(sys.prefix)]:
        for cand in (base / "share" / "example-robot-data" / "robots",
                     base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
                     / "cmeel.prefix" / "share" / "example-robot-data" / "robots"):
            if cand.is_dir():
                return cand
    return None


ROBOTS = _robots_dir()
ROBOT_FILES = {"talos_reduced": "talos_data/robots/talos_reduced.urdf", "panda": "panda_description/urdf/panda.urdf",
               "solo12": "solo_description/robots/solo12.urdf", "ur5": "ur_description/urdf/ur5_robot.urdf"}


def rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def quiet(f, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kw)


def pin_mass_matrix(pm, d, q):
    """Pinocchio's mass matrix (``crba`` fills the upper triangle)."""
    M = np.triu(pin.crba(pm, d, q))
    return M + np.triu(M, 1).T


def compare_with_pinocchio(model, pm, rng, trials=3):
    """Worst relative error of partree's RNEA and CRBA on ``model`` against Pinocchio's on ``pm``,
    states converted by PinocchioMap, and of its ABA: the backward error of partree's q̈ in
    Pinocchio's RNEA, ‖RNEA_pin(q, v, q̈) − τ‖ / (‖M‖ ‖q̈‖ + ‖τ‖ + ‖RNEA_pin(q, v, 0)‖), and the
    forward error against Pinocchio's ABA divided by max(1, cond(M) / 1e3): the forward error of
    either solve grows with cond(M) (1e6 for a chain of free bodies), the backward error does
    not."""
    mp = PinocchioMap(model, pm)
    d = pm.createData()
    P = np.array([mp.v_to_pinocchio(e) for e in np.eye(model.nv)]).T     # v_pin = P v
    nrm = lambda x: np.abs(x).max()  # noqa: E731
    worst = 0.0
    for _ in range(trials):
        q, qd = model.random_configuration(rng), model.random_velocity(rng, 2.0)
        tau, qdd = rng.normal(size=model.nv) * 3, rng.normal(size=model.nv)
        qp, vp, taup = mp.q_to_pinocchio(q), mp.v_to_pinocchio(qd), mp.v_to_pinocchio(tau)
        M = pin_mass_matrix(pm, d, qp)
        a = mp.v_to_pinocchio(partree.aba(model, q, qd, tau))
        c = pin.rnea(pm, d, qp, vp, np.zeros(pm.nv))
        backward = nrm(pin.rnea(pm, d, qp, vp, a) - taup) / (np.abs(M).sum(axis=1).max() * nrm(a) + nrm(taup) + nrm(c))
        forward = rel(a, pin.aba(pm, d, qp, vp, taup)) / max(1.0, np.linalg.cond(M) / 1e3)
        worst = max(worst, backward, forward,
                    rel(mp.v_to_pinocchio(partree.rnea(model, q, qd, qdd)),
                        pin.rnea(pm, d, qp, vp, mp.v_to_pinocchio(qdd))),
                    rel(P @ partree.crba(model, q) @ P.T, M))
    return worst


def compare_models(a, b, rng, trials=3, pm=None):
    """Worst relative error between two partree models of the same mechanism: RNEA and CRBA, and
    for ABA the backward error of b's q̈ in a's equations of motion and the forward error divided
    by max(1, cond(M) / 1e3) (the forward error of a solve grows with cond(M): 4e-14 at
    cond(M) = 3e4 for the random tree with all joint types).  Without ``pm`` the two have the same
    q and v layout; with it, states go from a's layout to b's through the Pinocchio model ``pm``
    of the mechanism (PinocchioMap of each), and b's results come back."""
    assert (a.nq, a.nv) == (b.nq, b.nv)
    if pm is None:
        q_ab = v_ab = v_ba = lambda x: x  # noqa: E731
    else:
        ma, mb = PinocchioMap(a, pm), PinocchioMap(b, pm)
        q_ab = lambda q: mb.q_from_pinocchio(ma.q_to_pinocchio(q))  # noqa: E731
        v_ab = lambda v: mb.v_from_pinocchio(ma.v_to_pinocchio(v))  # noqa: E731
        v_ba = lambda v: ma.v_from_pinocchio(mb.v_to_pinocchio(v))  # noqa: E731
    P = np.array([v_ba(e) for e in np.eye(b.nv)]).T         # v_a = P v_b
    nrm = lambda x: np.abs(x).max()  # noqa: E731
    worst = 0.0
    for _ in range(trials):
        q, qd = a.random_configuration(rng), a.random_velocity(rng, 2.0)
        tau, qdd = rng.normal(size=a.nv) * 3, rng.normal(size=a.nv)
        qb, qdb = q_ab(q), v_ab(qd)
        M, c = partree.crba(a, q), partree.rnea(a, q, qd, np.zeros(a.nv))
        qdd_b = v_ba(partree.aba(b, qb, qdb, v_ab(tau)))
        backward = nrm(M @ qdd_b + c - tau) / (np.abs(M).sum(axis=1).max() * nrm(qdd_b) + nrm(c) + nrm(tau))
        forward = rel(qdd_b, partree.aba(a, q, qd, tau)) / max(1.0, np.linalg.cond(M) / 1e3)
        worst = max(worst, backward, forward,
                    rel(v_ba(partree.rnea(b, qb, qdb, v_ab(qdd))), partree.rnea(a, q, qd, qdd)),
                    rel(P @ partree.crba(b, qb) @ P.T, M))
    return worst


# ------------------------------------------------------------------------------------------ round trips
ROUND_TRIP = {
    "arm7.urdf": lambda: partree.load_urdf(DATA / "arm7.urdf"),
    "branching.urdf floating": lambda: partree.load_urdf(DATA / "branching.urdf", floating_base=True),
    "random floating": lambda: partree.resolve_model("random:n=30,seed=1,floating_base=true"),
    "random all joints": lambda: random_tree(30, seed=4, floating_base=True,
                                             joint_types=("revolute", "prismatic", "universal", "spherical", "fixed")),
    "spacerobot": lambda: partree.resolve_model("spacerobot"),
    "threearm": lambda: partree.resolve_model("threearm"),
    "autotree": lambda: partree.resolve_model("autotree:nb=20,bf=2"),
    "cardan": lambda: partree.resolve_model("cardan:n=6"),
    "random every joint type": lambda: random_tree(30, seed=6, floating_base=True, joint_types=(
        "revolute", "prismatic", "universal", "spherical", "fixed", "free")),
}


def is_depth_first(parents):
    """Whether every joint's subtree is the contiguous range of ids from it (``parents[0]`` is
    the universe's)."""
    n = len(parents)
    sub = [{j} for j in range(n)]
    for j in range(n - 1, 0, -1):
        assert parents[j] < j
        sub[parents[j]] |= sub[j]
    return all(sub[j] == set(range(j, j + len(sub[j]))) for j in range(n))


@pytest.mark.parametrize("name", list(ROUND_TRIP))
def test_round_trip_through_pinocchio(name, rng):
    m = ROUND_TRIP[name]()
    pm, jid = to_pinocchio(m)
    assert is_depth_first(list(pm.parents))
    moving = [i for i in depth_first_order(m) if m.jtype[i] != J.FIXED]
    assert list(pm.names)[1:] == [m.joint_names[i] for i in moving]
    for i in range(m.n):         # a body's Pinocchio joint: its own, or that of its moving ancestor
        k = i
        while k >= 0 and m.jtype[k] == J.FIXED:
            k = int(m.parent[k])
        assert jid[i] == (0 if k < 0 else pm.getJointId(m.joint_names[k]))
    back = from_pinocchio(pm)
    assert list(back.joint_names) == list(pm.names)[1:]       # fixed joints are merged into their parents
    assert back.nq == m.nq and back.nv == m.nv
    np.testing.assert_array_equal(back.gravity, m.gravity)
    assert compare_models(m, back, rng, trials=4, pm=pm) < 1e-14
    assert compare_with_pinocchio(back, pm, rng) < 1e-12
    assert compare_with_pinocchio(m, pm, rng) < 1e-12


def test_pinocchio_joints_depth_first_on_a_tree_numbered_otherwise():
    """A tree partree numbers parent before child but not depth first (parent = [-1, 0, 1, 0, 1, 4]):
    Pinocchio's joints come depth first (j0 j1 j2 j4 j5 j3), and its CRBA, RNEA and ABA, through
    PinocchioMap, are partree's.  In partree's order Pinocchio's CRBA was wrong by 0.1."""
    m = random_tree(6, seed=7, joint_types=("revolute",))
    assert list(m.parent) == [-1, 0, 1, 0, 1, 4]
    np.testing.assert_array_equal(depth_first_order(m), [0, 1, 2, 4, 5, 3])
    assert not is_depth_first([0] + list(m.parent + 1))
    pm, jid = to_pinocchio(m)
    assert list(pm.names) == ["universe", "j0", "j1", "j2", "j4", "j5", "j3"]
    assert is_depth_first(list(pm.parents))
    assert list(pm.parents) == [0, 0, 1, 2, 2, 4, 1]
    np.testing.assert_array_equal(jid, [1, 2, 3, 6, 4, 5])
    mp = PinocchioMap(m, pm)
    np.testing.assert_array_equal(mp.v_to_pinocchio(np.arange(6.0)), [0, 1, 2, 4, 5, 3])
    np.testing.assert_array_equal(mp.v_from_pinocchio(mp.v_to_pinocchio(np.arange(6.0))), np.arange(6.0))
    q = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert np.array_equal(mp.q_from_pinocchio(mp.q_to_pinocchio(q)), q)
    d = pm.createData()
    P = np.array([mp.v_to_pinocchio(e) for e in np.eye(m.nv)]).T     # v_pin = P v
    assert rel(P @ partree.crba(m, q) @ P.T, pin_mass_matrix(pm, d, mp.q_to_pinocchio(q))) < 1e-14
    assert compare_with_pinocchio(m, pm, np.random.default_rng(0)) < 1e-12
    # and the model read back is numbered depth first, the same mechanism
    back = from_pinocchio(pm)
    assert list(back.joint_names) == ["j0", "j1", "j2", "j4", "j5", "j3"]
    np.testing.assert_array_equal(depth_first_order(back), np.arange(6))
    assert compare_models(m, back, np.random.default_rng(1), pm=pm) < 1e-14
    pm2, jid2 = to_pinocchio(back)                                  # identity order
    assert list(pm2.names) == list(pm.names) and list(jid2) == [1, 2, 3, 4, 5, 6]


def test_depth_first_order_of_models_numbered_depth_first():
    for m in (partree.load_urdf(DATA / "branching.urdf"), partree.resolve_model("threearm"),
              partree.resolve_model("autotree:nb=20,bf=1")):
        np.testing.assert_array_equal(depth_first_order(m), np.arange(m.n))
    m = partree.resolve_model("autotree:nb=20,bf=2")
    order = depth_first_order(m)
    assert sorted(order) == list(range(m.n)) and not np.array_equal(order, np.arange(m.n))


# ------------------------------------------------------------------------------------------ joint types
def _placement(rng):
    return pin.SE3(axis_angle(rng.normal(size=3), rng.uniform(-np.pi, np.pi)), rng.normal(size=3) * 0.3)


def _inertia(rng):
    a, b, c = rng.uniform(0.05, 0.3, size=3)
    R = axis_angle(rng.normal(size=3), rng.uniform(0, np.pi))
    I = R @ np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) @ R.T / 12
    return pin.Inertia(1.0 + rng.uniform(), rng.normal(size=3) * 0.1, I)


def _unit(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def _universal(rng):
    a = _unit(rng)
    b = _unit(rng)
    b = b - (b @ a) * a
    return pin.JointModelUniversal(a, b / np.linalg.norm(b))


def _composite(rng):
    c = pin.JointModelComposite()
    c.addJoint(pin.JointModelRX(), _placement(rng))
    c.addJoint(pin.JointModelPrismaticUnaligned(_unit(rng)), _placement(rng))
    c.addJoint(pin.JointModelSpherical(), _placement(rng))
    return c


JOINTS = {
    "RX": lambda r: pin.JointModelRX(), "RY": lambda r: pin.JointModelRY(), "RZ": lambda r: pin.JointModelRZ(),
    "revolute unaligned": lambda r: pin.JointModelRevoluteUnaligned(_unit(r)),
    "RUBX": lambda r: pin.JointModelRUBX(), "RUBY": lambda r: pin.JointModelRUBY(),
    "RUBZ": lambda r: pin.JointModelRUBZ(),
    "PX": lambda r: pin.JointModelPX(), "PY": lambda r: pin.JointModelPY(), "PZ": lambda r: pin.JointModelPZ(),
    "prismatic unaligned": lambda r: pin.JointModelPrismaticUnaligned(_unit(r)),
    "spherical": lambda r: pin.JointModelSpherical(), "spherical ZYX": lambda r: pin.JointModelSphericalZYX(),
    "free flyer": lambda r: pin.JointModelFreeFlyer(), "translation": lambda r: pin.JointModelTranslation(),
    "universal": _universal,
    "composite": _composite,
}


def _chain_of(kind, rng, n=4):
    """A Pinocchio tree of ``kind`` joints (a chain with a side branch) under a revolute root."""
    pm = pin.Model()
    pm.gravity = pin.Motion(np.array([0.5, -1.0, -9.81]), np.zeros(3))
    parent = pm.addJoint(0, pin.JointModelRY(), _placement(rng), "root")
    pm.appendBodyToJoint(parent, _inertia(rng), pin.SE3.Identity())
    for k in range(n):
        jm = JOINTS[kind](rng)
        j = pm.addJoint(parent if k != n - 1 else 1, jm, _placement(rng), f"{kind} {k}")
        pm.appendBodyToJoint(j, _inertia(rng), _placement(rng))
        pm.addBodyFrame(f"link {k}", j, pin.SE3.Identity(), 0)
        parent = j
    return pm


@pytest.mark.parametrize("kind", list(JOINTS))
def test_from_pinocchio_matches_pinocchio(kind, rng):
    pm = _chain_of(kind, rng)
    m = from_pinocchio(pm)
    assert compare_with_pinocchio(m, pm, rng) < 1e-12
    np.testing.assert_array_equal(m.gravity, pm.gravity.linear)


def test_chains_and_names():
    rng = np.random.default_rng(0)
    m = from_pinocchio(_chain_of("spherical ZYX", rng, n=1))
    assert list(m.joint_names) == ["root", "spherical ZYX 0/0", "spherical ZYX 0/1", "spherical ZYX 0/2"]
    assert list(m.body_names) == ["root", "link 0/0", "link 0/1", "link 0"]
    assert [m.joint_type(i) for i in range(m.n)] == ["revolute"] * 4
    assert m.mass[1] == m.mass[2] == 0.0 and m.mass[3] > 0     # the intermediate bodies are massless
    m = from_pinocchio(_chain_of("composite", rng, n=1))
    assert [m.joint_type(i) for i in range(m.n)] == ["revolute", "revolute", "prismatic", "spherical"]


def test_continuous_joints_convert_cos_sin():
    rng = np.random.default_rng(1)
    pm = _chain_of("RUBZ", rng, n=2)
    m = from_pinocchio(pm)
    assert m.nq == pm.nq - 2 and m.nv == pm.nv
    q = m.random_configuration(rng)
    qp = pinocchio_configuration(m, pm, q)
    k = pm.joints[2].idx_q
    assert np.allclose(qp[k:k + 2], [np.cos(q[1]), np.sin(q[1])])
    np.testing.assert_allclose(partree_configuration(m, pm, qp), q, rtol=0, atol=1e-15)


# ------------------------------------------------------------------------------------------ parsers
@pytest.mark.skipif(ROBOTS is None, reason="example-robot-data is not installed")
@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("robot", list(ROBOT_FILES))
def test_pinocchio_urdf_parser_against_load_urdf(robot, floating, rng):
    path = str(ROBOTS / ROBOT_FILES[robot])
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
    ours = quiet(partree.load_urdf, path, floating_base=floating)
    theirs = quiet(from_pinocchio, pm)
    a, b = PinocchioMap(ours, pm), PinocchioMap(theirs, pm)
    P = lambda mp, m: np.array([mp.v_to_pinocchio(e) for e in np.eye(m.nv)]).T  # noqa: E731  (v_pin = P v)
    worst = 0.0
    for _ in range(3):
        q, qd = ours.random_configuration(rng), ours.random_velocity(rng)
        tau, qdd = rng.normal(size=ours.nv), rng.normal(size=ours.nv)
        q2 = b.q_from_pinocchio(a.q_to_pinocchio(q))
        to2 = lambda x: b.v_from_pinocchio(a.v_to_pinocchio(x))  # noqa: E731
        worst = max(worst,
                    rel(b.v_to_pinocchio(partree.aba(theirs, q2, to2(qd), to2(tau))),
                        a.v_to_pinocchio(partree.aba(ours, q, qd, tau))),
                    rel(b.v_to_pinocchio(partree.rnea(theirs, q2, to2(qd), to2(qdd))),
                        a.v_to_pinocchio(partree.rnea(ours, q, qd, qdd))),
                    rel(P(b, theirs) @ partree.crba(theirs, q2) @ P(b, theirs).T,
                        P(a, ours) @ partree.crba(ours, q) @ P(a, ours).T))
    assert worst < 1e-12
    # the bodies are the URDF links at the moving joints
    assert set(theirs.body_names) <= set(ours.body_names) | {"root_joint"}


MJCF_MODELS = {
    "pendulum": """<mujoco><worldbody><body name="arm" pos="0 0 1"><joint name="swing" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/></body></worldbody></mujoco>""",
    "floating": """<mujoco><worldbody>
        <body name="a" pos="0 0 1"><freejoint name="root"/><geom type="sphere" size="0.1"/>
          <body name="b" pos="0.2 0 0" euler="10 20 30">
            <joint name="h1" axis="1 0 0"/><joint name="h2" axis="0 1 0" pos="0 0 0.1"/>
            <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.03"/>
            <body name="c" pos="0.2 0 0">
              <joint name="h3" axis="0 0 1" range="-30 30"/><joint name="s" type="slide" axis="1 0 0"/>
              <geom type="box" size="0.1 0.05 0.02"/>
              <body name="d"><joint name="bj" type="ball"/><geom type="ellipsoid" size="0.05 0.04 0.03"/></body>
            </body>
          </body>
        </body></worldbody></mujoco>""",
    "inertials": """<mujoco><worldbody><body name="a" pos="0 0 0.5" xyaxes="0 1 0 -1 0 0">
        <joint name="j1" axis="1 0 0" pos="0 0 0.1"/>
        <inertial pos="0.1 0.02 -0.03" mass="2.5" fullinertia="0.05 0.06 0.07 0.004 -0.003 0.002"/>
        <body name="b" pos="0.3 0 0" quat="0.5 0.5 0.5 0.5"><joint name="j2" axis="0 1 0"/>
          <inertial pos="0.05 0 0" mass="1.2" diaginertia="0.01 0.02 0.025"/></body></body></worldbody></mujoco>""",
}


@pytest.mark.parametrize("name", list(MJCF_MODELS))
def test_pinocchio_mjcf_parser_against_load_mjcf(name, tmp_path, rng):
    """Pinocchio's MJCF parser makes a composite joint of a body's several joints, named
    'Composite_<first joint>'; the q and v layouts are the same as load_mjcf's (both MuJoCo's).
    The models are ones Pinocchio's parser reads as MuJoCo does: it does not normalise an
    axisangle axis, and ignores joint ref, <option gravity>, inertiagrouprange and the compiler's
    mass and inertia bounds (load_mjcf follows MuJoCo there, see test_mjcf.py)."""
    path = tmp_path / "model.xml"
    path.write_text(MJCF_MODELS[name])
    pm = pin.buildModelFromMJCF(str(path))
    ours, theirs = partree.load_mjcf(path), quiet(from_pinocchio, pm)
    moving = lambda m: [int(m.jtype[i]) for i in range(m.n) if m.nv_j[i]]  # noqa: E731
    assert moving(ours) == moving(theirs)
    assert compare_models(ours, theirs, rng) < 1e-12


# ------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("kind", ["JointModelPlanar", "JointModelHZ"])
def test_refused_joint_types_are_named(kind):
    pm = pin.Model()
    j = pm.addJoint(0, getattr(pin, kind)(), pin.SE3.Identity(), "odd")
    pm.appendBodyToJoint(j, pin.Inertia.FromSphere(1.0, 0.1), pin.SE3.Identity())
    with pytest.raises(PartreeInputError, match=rf"Pinocchio joint 'odd' is a {kind}, which partree does not support"):
        from_pinocchio(pm)


def test_map_refuses_models_that_do_not_match():
    m = partree.resolve_model("threearm")
    pm, _ = to_pinocchio(partree.resolve_model("spacerobot"))
    with pytest.raises(PartreeInputError, match="has no partree joint of that name"):
        PinocchioMap(m, pm)
    pm2, _ = to_pinocchio(m.select(np.arange(m.n - 1)))
    with pytest.raises(PartreeInputError, match="has no Pinocchio joint"):
        PinocchioMap(m, pm2)
