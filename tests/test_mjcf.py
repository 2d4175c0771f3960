"""load_mjcf against MuJoCo: the same XML in both, the mass matrix, the bias forces and the forward
dynamics compared at random states, and every body's mass, centre of mass and inertia compared
with MuJoCo's compiled model; then the inputs partree refuses, each named with its line."""
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import partree
from partree import joints as J
from partree.errors import PartreeInputError
from partree.io import mujoco_to_partree, partree_to_mujoco
from partree.spatial import quat_to_matrix

mujoco = pytest.importorskip("mujoco")

DATA = Path(__file__).resolve().parent / "data" / "mjcf"
MUJOCO_TESTDATA = Path(mujoco.__file__).resolve().parent / "testdata" / "model.xml"
TOL = 1e-12


def load(xml, **kw):
    """load_mjcf without the warning about armature and damping (tested on its own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return partree.load_mjcf(xml, **kw)


def mj_model(xml):
    """MuJoCo's model with everything that is not rigid-body dynamics switched off: constraints
    (limits, contacts, equalities), springs and dampers, actuators, armature, gravity
    compensation and fluid forces.  mj_setConst recomputes the constant part of the mass matrix
    that MuJoCo keeps for simple bodies (it holds the armature)."""
    m = mujoco.MjModel.from_xml_string(xml) if xml.lstrip().startswith("<") else mujoco.MjModel.from_xml_path(xml)
    D = mujoco.mjtDisableBit
    m.opt.disableflags |= D.mjDSBL_CONSTRAINT | D.mjDSBL_SPRING | D.mjDSBL_DAMPER | D.mjDSBL_ACTUATION
    m.dof_armature[:] = 0.0
    m.actuator_armature[:] = 0.0
    m.body_gravcomp[:] = 0.0
    m.opt.density = 0.0
    m.opt.viscosity = 0.0
    m.opt.wind[:] = 0.0
    mujoco.mj_setConst(m, mujoco.MjData(m))
    return m


def rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(1.0, np.abs(b).max()))


def compare_dynamics(xml, model=None, trials=3, seed=0):
    """Worst relative errors of CRBA, RNEA(q, qd, 0) and ABA against MuJoCo.

    ABA is judged first by its normwise backward error, the residual of partree's q̈ in MuJoCo's
    equations of motion, ‖M q̈ + c − τ‖ / (‖M‖ ‖q̈‖ + ‖c‖ + ‖τ‖) ("qdd"), then by its forward
    error |q̈ − q̈_mj| ("qdd_forward"), which is bounded by cond(M) times the backward errors of
    the two solves (about 1e-16 each): it is divided by max(1, cond(M) / 1e3), so that the 1e-12
    holds as it is for cond(M) up to 1e3 and grows with cond(M) beyond (2e7 for the
    multi-joint model, whose ball joint carries a small tool).
    """
    model = load(xml) if model is None else model
    m = mj_model(xml)
    d = mujoco.MjData(m)
    assert (m.nq, m.nv) == (model.nq, model.nv)
    rng = np.random.default_rng(seed)
    worst = {"M": 0.0, "bias": 0.0, "qdd": 0.0, "qdd_forward": 0.0}
    for _ in range(trials):
        q, qd = model.random_configuration(rng), model.random_velocity(rng, 2.0)
        tau = rng.normal(size=model.nv) * 3.0
        T, Tdot_qd = np.eye(model.nv), np.zeros(model.nv)
        for i in np.flatnonzero(model.jtype == J.FREE):
            k, kq = model.idx_v[i], model.idx_q[i]
            R = quat_to_matrix(q[kq + 3:kq + 7])
            T[k:k + 3, k:k + 3] = R
            Tdot_qd[k:k + 3] = R @ np.cross(qd[k + 3:k + 6], qd[k:k + 3])
        d.qpos[:], d.qvel[:] = partree_to_mujoco(model, q, qd)
        d.qfrc_applied[:] = T @ tau
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        Mp, cp = T.T @ M @ T, T.T @ (d.qfrc_bias + M @ Tdot_qd)
        worst["M"] = max(worst["M"], rel(partree.crba(model, q), Mp))
        worst["bias"] = max(worst["bias"], rel(partree.rnea(model, q, qd, np.zeros(model.nv)), cp))
        qdd, qdd_mj = partree.aba(model, q, qd, tau), T.T @ (d.qacc - Tdot_qd)
        nrm = lambda x: np.abs(x).max()  # noqa: E731
        backward = nrm(Mp @ qdd + cp - tau) / (np.abs(Mp).sum(axis=1).max() * nrm(qdd) + nrm(cp) + nrm(tau))
        worst["qdd"] = max(worst["qdd"], backward)
        worst["qdd_forward"] = max(worst["qdd_forward"], rel(qdd, qdd_mj) / max(1.0, np.linalg.cond(Mp) / 1e3))
    return worst


def compare_bodies(xml, model=None, seed=1):
    """Every MuJoCo body's mass, and at a random state its centre of mass and its inertia in world
    coordinates, against the partree body of the same name."""
    model = load(xml) if model is None else model
    m = mj_model(xml)
    d = mujoco.MjData(m)
    q = model.random_configuration(np.random.default_rng(seed))
    d.qpos[:] = partree_to_mujoco(model, q)
    mujoco.mj_forward(m, d)
    kin = partree.forward_kinematics(model, q, np.zeros(model.nv))
    names = list(model.body_names)
    err = 0.0
    for k in range(1, m.nbody):
        i = names.index(m.body(k).name or f"body{k}")
        R, p = kin.R[i], kin.p[i]
        assert abs(model.mass[i] - m.body_mass[k]) <= 1e-13 * max(1.0, m.body_mass[k])
        err = max(err, rel(R @ model.com[i] + p, d.xipos[k]))
        Ri = d.ximat[k].reshape(3, 3)
        err = max(err, rel(R @ model.I_com[i] @ R.T, Ri @ np.diag(m.body_inertia[k]) @ Ri.T))
    return err


# ------------------------------------------------------------------------------------------ models
PENDULUM = """
<mujoco model="pendulum">
  <compiler angle="radian"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="swing" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>
      <geom type="sphere" pos="0 0 -0.5" size="0.08" mass="1.5"/>
    </body>
  </worldbody>
</mujoco>"""

MULTI_JOINT = """
<mujoco>
  <option gravity="0.3 -0.2 -9.7"/>
  <worldbody>
    <body name="base" pos="0.1 0.2 1" euler="10 20 30">
      <joint name="yaw" axis="0 0 1" pos="0.05 0 0"/>
      <joint name="pitch" axis="0 1 0" pos="0 0.1 0.02" ref="25"/>
      <joint name="roll" axis="1 0.2 0" pos="0.03 0 -0.1"/>
      <geom type="box" size="0.1 0.05 0.2" pos="0 0 -0.1"/>
      <body name="slider" pos="0 0 -0.3" quat="0.9 0.1 -0.2 0.3">
        <joint name="lift" type="slide" axis="0 0 1" ref="0.15"/>
        <joint name="twist" axis="0 0 1" pos="0.02 0 0"/>
        <joint name="wrist" type="ball" pos="0 0 -0.05"/>
        <geom type="ellipsoid" size="0.05 0.07 0.12"/>
        <geom type="cylinder" size="0.03 0.1" pos="0.05 0 0" xyaxes="0 1 0 0 0 1"/>
        <body name="tool" pos="0 0 -0.2" zaxis="0 0 -1">
          <geom type="sphere" size="0.04"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""

FULLINERTIA = """
<mujoco>
  <worldbody>
    <body name="a" pos="0 0 0.5" axisangle="1 1 0 40">
      <joint name="j1" axis="1 0 0" pos="0 0 0.1"/>
      <inertial pos="0.1 0.02 -0.03" mass="2.5" fullinertia="0.05 0.06 0.07 0.004 -0.003 0.002"/>
      <body name="b" pos="0.3 0 0" xyaxes="0 1 0 -1 0 0.2">
        <joint name="j2" axis="0 1 0"/>
        <inertial pos="0.05 0 0" quat="0.8 0.2 0.3 0.1" mass="1.2" diaginertia="0.01 0.02 0.025"/>
        <body name="c" pos="0.2 0 0" euler="0 90 0">
          <joint name="j3" axis="0 0 1"/>
          <inertial pos="0 0.04 0" euler="15 -25 35" mass="0.7" diaginertia="0.003 0.004 0.005"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""

GEOMS = """
<mujoco>
  <compiler inertiagrouprange="0 2"/>
  <worldbody>
    <body name="s" pos="0 0 1">
      <joint name="js" axis="1 0 0"/>
      <geom type="sphere" size="0.1" pos="0.1 0 0"/>
      <geom type="sphere" size="0.2" group="3"/>
      <body name="c" pos="0.2 0 0">
        <joint name="jc" axis="0 1 0"/>
        <geom type="capsule" size="0.04 0.1" pos="0 0.1 0" euler="30 0 0" density="800"/>
        <geom type="capsule" fromto="0 0 0 0.1 0.2 -0.3" size="0.05"/>
        <body name="y" pos="0.2 0 0">
          <joint name="jy" axis="0 0 1"/>
          <geom type="cylinder" size="0.05 0.15" quat="0.5 0.5 0.5 0.5" mass="1.3"/>
          <geom type="cylinder" fromto="0 0 0 0 0.3 0.1" size="0.02"/>
          <body name="b" pos="0.3 0 0">
            <joint name="jb" type="slide" axis="1 1 1"/>
            <geom type="box" size="0.1 0.2 0.05" axisangle="0 1 1 30"/>
            <geom type="box" fromto="0 0 0 0.2 0 0.1" size="0.03"/>
            <body name="e" pos="0.3 0 0">
              <joint name="je" type="ball"/>
              <geom type="ellipsoid" size="0.1 0.05 0.07" pos="0 0.05 0" mass="0.4"/>
              <geom type="ellipsoid" fromto="0 0 0 0 0 0.2" size="0.03"/>
              <geom type="box" size="0.01 0.01 0.01" mass="0"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""

DEFAULTS = """
<mujoco>
  <default>
    <geom type="capsule" size="0.05 0.2" density="500"/>
    <default class="limb">
      <geom type="box" size="0.03"/>
      <default class="finger">
        <joint axis="0 0 1" type="slide"/>
        <geom type="sphere" size="0.02 0.5 0.5" mass="0.2"/>
      </default>
      <joint pos="0 0 0.05"/>
    </default>
    <joint axis="0 1 0" ref="10"/>
  </default>
  <worldbody>
    <body name="root" pos="0 0 1">
      <joint name="r"/>
      <geom/>
      <body name="limb" pos="0.3 0 0" childclass="limb">
        <joint name="l1"/>
        <geom size="0.03 0.04 0.05"/>
        <body name="sub" pos="0 0 -0.2">
          <joint name="l2" class="main"/>
          <geom size="0.05 0.04 0.03"/>
          <frame pos="0.1 0 0" euler="0 0 30" childclass="finger">
            <body name="tip" pos="0.05 0 0">
              <joint name="f1"/>
              <geom/>
            </body>
          </frame>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""

FRAMES = """
<mujoco>
  <worldbody>
    <frame pos="0 0 1" euler="0 0 45">
      <body name="a" pos="0.1 0 0">
        <joint name="ja"/>
        <frame pos="0 0.1 0" quat="0 1 0 0">
          <joint name="jb" axis="1 0 0" pos="0 0 0.05"/>
          <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.03"/>
          <body name="b" pos="0.2 0 0">
            <joint name="jc" axis="0 1 0"/>
            <geom type="sphere" size="0.05"/>
          </body>
        </frame>
        <geom type="box" size="0.05 0.05 0.05"/>
        <body name="c" pos="0 0 -0.2">
          <joint name="jd" type="slide"/>
          <frame pos="0.05 0 0" axisangle="0 0 1 90">
            <inertial pos="0 0.1 0" quat="0.6 0.8 0 0" mass="0.6" diaginertia="0.002 0.003 0.004"/>
          </frame>
        </body>
      </body>
    </frame>
  </worldbody>
</mujoco>"""

FLOATING_TREE = """
<mujoco model="floating">
  <worldbody>
    <body name="static" pos="0 0 2">
      <geom type="box" size="0.5 0.5 0.01"/>
      <body name="static_child" pos="0 0 0.1"><geom type="sphere" size="0.1"/></body>
    </body>
    <body name="mocap" mocap="true" pos="1 0 0"><geom type="sphere" size="0.1"/></body>
    <body name="pelvis" pos="0 0 1" quat="0.9 0 0.1 0.2">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.15 0.05"/>
      <body name="chest" pos="0 0 0.2">
        <joint name="waist" type="ball" pos="0 0 -0.05"/>
        <geom type="capsule" fromto="0 -0.1 0.1 0 0.1 0.1" size="0.08"/>
        <body name="head" pos="0 0 0.3">
          <joint name="neck" type="ball"/>
          <geom type="sphere" size="0.1"/>
        </body>
        <body name="shoulder" pos="0 0.2 0.1">
          <geom type="sphere" size="0.04"/>
          <body name="arm" pos="0 0.05 0">
            <joint name="shoulder" type="ball" pos="0 0 0.02"/>
            <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.04"/>
            <body name="forearm" pos="0 0 -0.3">
              <joint name="elbow" axis="0 1 0" pos="0 0 0.01"/>
              <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.03"/>
            </body>
          </body>
        </body>
      </body>
      <body name="leg" pos="0 -0.1 -0.1">
        <joint name="hip_x" axis="1 0 0"/>
        <joint name="hip_y" axis="0 1 0"/>
        <joint name="hip_z" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.06"/>
      </body>
    </body>
    <body pos="2 0 1">
      <joint type="free"/>
      <geom type="sphere" size="0.1"/>
    </body>
  </worldbody>
</mujoco>"""

COMPILER_BOUNDS = """
<mujoco>
  <compiler boundmass="0.5" boundinertia="0.002" balanceinertia="true"/>
  <worldbody>
    <body pos="0 0 1">
      <joint axis="1 0 0"/>
      <inertial pos="0 0 -0.1" mass="0.1" diaginertia="0.001 0.01 0.003"/>
      <body pos="0 0 -0.3">
        <joint axis="0 1 0"/>
        <geom type="sphere" size="0.01"/>
        <body pos="0 0 -0.1">
          <joint axis="0 0 1"/>
          <inertial pos="0 0 0" mass="2" diaginertia="0.1 0.01 0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""

INERTIA_FROM_GEOM = """
<mujoco>
  <compiler inertiafromgeom="{mode}"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint axis="1 0 0"/>
      <inertial pos="0 0 -0.1" mass="2" diaginertia="0.02 0.03 0.04"/>
      <geom type="box" size="0.1 0.1 0.2" pos="0 0 -0.2"/>
      <body name="b" pos="0 0 -0.4">
        <joint axis="0 1 0"/>
        <inertial pos="0.05 0 0" mass="0.5" diaginertia="0.002 0.003 0.004"/>
        <body name="c" pos="0.2 0 0">
          <joint axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
          <inertial pos="0.1 0 0" mass="0.3" diaginertia="0.001 0.002 0.002"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""

GRAVITY_OFF = PENDULUM.replace("<worldbody>", "<option><flag gravity='disable'/></option><worldbody>")

MODELS = {"pendulum": PENDULUM, "multi_joint": MULTI_JOINT, "fullinertia": FULLINERTIA, "geoms": GEOMS,
          "defaults": DEFAULTS, "frames": FRAMES, "floating_tree": FLOATING_TREE,
          "compiler_bounds": COMPILER_BOUNDS, "gravity_off": GRAVITY_OFF,
          **{f"inertiafromgeom={k}": INERTIA_FROM_GEOM.format(mode=k) for k in ("auto", "true", "false")},
          "humanoid": str(DATA / "humanoid.xml")}

EULER_BODY = """
<mujoco>
  <compiler angle="{unit}" eulerseq="{seq}"/>
  <worldbody>
    <body pos="0 0 1" euler="{a}">
      <joint axis="1 0 0"/>
      <geom type="box" size="0.1 0.2 0.3" pos="0.1 0 0" euler="{b}"/>
      <body pos="0.2 0 0" euler="{b}">
        <joint axis="0 1 0" ref="{ref}"/>
        <inertial pos="0.1 0.05 0" euler="{a}" mass="1" diaginertia="0.01 0.02 0.025"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def _euler_xml(seq, unit):
    a, b, ref = np.array([20.0, -35.0, 50.0]), np.array([-70.0, 15.0, 120.0]), 30.0
    if unit == "radian":
        a, b, ref = np.radians(a), np.radians(b), np.radians(ref)
    f = lambda v: " ".join(repr(float(x)) for x in v)  # noqa: E731
    return EULER_BODY.format(unit=unit, seq=seq, a=f(a), b=f(b), ref=repr(float(ref)))


# ------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("name", list(MODELS))
def test_dynamics_match_mujoco(name):
    err = compare_dynamics(MODELS[name])
    assert max(err.values()) < TOL, err


@pytest.mark.parametrize("name", list(MODELS))
def test_bodies_match_mujoco(name):
    assert compare_bodies(MODELS[name]) < TOL


def test_mujoco_testdata_model():
    """The model MuJoCo's wheel ships for its tests: free bodies, two hinges per hip, a ball, boxes
    and cylinders by fromto, gravity compensation, fluid forces, tendons and actuators.  Its mesh
    geom (whose inertia partree does not compute) becomes a sphere and its weld is ignored."""
    if not MUJOCO_TESTDATA.exists():
        pytest.skip("mujoco ships no testdata/model.xml")
    xml = MUJOCO_TESTDATA.read_text().replace('type="mesh" mesh="icosahedron" size=".1"', 'type="sphere" size=".1"')
    with pytest.warns(UserWarning) as rec:
        model = partree.load_mjcf(xml, equality="ignore")
    assert any("equality constraints ignored" in str(w.message) for w in rec)
    err = compare_dynamics(xml, model)
    assert max(err.values()) < TOL, err
    assert compare_bodies(xml, model) < TOL


@pytest.mark.parametrize("seq", ["xyz", "XYZ", "zyx", "ZYX", "xYz", "zxz", "YXY"])
@pytest.mark.parametrize("unit", ["degree", "radian"])
def test_euler_sequences_and_angle_units(seq, unit):
    xml = _euler_xml(seq, unit)
    err = compare_dynamics(xml)
    assert max(err.values()) < TOL, err
    assert compare_bodies(xml) < TOL


def test_degrees_and_radians_give_the_same_model():
    a, b = load(_euler_xml("xyz", "degree")), load(_euler_xml("xyz", "radian"))
    for k in ("E_tree", "r_tree", "axis", "mass", "com", "I_com"):
        assert np.allclose(getattr(a, k), getattr(b, k), rtol=0, atol=1e-14), k


def test_model_structure():
    m = load(MULTI_JOINT)
    # one body per joint: the base's three hinges and the slider's three joints, and the welded tool
    assert list(m.joint_names) == ["yaw", "pitch", "roll", "lift", "twist", "wrist", "tool_fixed"]
    assert list(m.body_names) == ["base/yaw", "base/pitch", "base", "slider/lift", "slider/twist", "slider", "tool"]
    assert [m.joint_type(j) for j in range(m.n)] == ["revolute"] * 3 + ["prismatic", "revolute", "spherical", "fixed"]
    assert list(m.parent) == [-1, 0, 1, 2, 3, 4, 5]
    assert m.mass[[0, 1, 3, 4]].tolist() == [0.0] * 4      # the intermediate bodies are massless
    np.testing.assert_allclose(m.gravity, [0.3, -0.2, -9.7])
    f = load(FLOATING_TREE)
    assert f.joint_type("root") == "free" and f.parent[f.joint_id("root")] == -1
    static = f.joint_id("static_fixed")
    assert f.parent[static] == -1 and f.parent[f.joint_id("static_child_fixed")] == static
    np.testing.assert_array_equal(load(GRAVITY_OFF).gravity, 0.0)
    np.testing.assert_array_equal(load(PENDULUM, gravity=(0, 0, -1)).gravity, [0, 0, -1])
    assert load(PENDULUM.encode()).joint_names[0] == "swing"
    assert load(PENDULUM).name == "pendulum" and load(PENDULUM, name="p").name == "p"


def test_unnamed_elements_get_mujoco_ids():
    m = load(FLOATING_TREE)
    mm = mj_model(FLOATING_TREE)
    assert f"body{mm.nbody - 1}" in list(m.body_names)             # the unnamed last body
    assert f"joint{mm.njnt - 1}" in list(m.joint_names)            # its unnamed free joint


def test_state_conversion_round_trip():
    m = load(FLOATING_TREE)
    rng = np.random.default_rng(3)
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    qpos, qvel = partree_to_mujoco(m, q, qd)
    assert qpos[3] == q[6] and np.array_equal(qpos[4:7], q[3:6])    # the root's (w, x, y, z)
    q2, qd2 = mujoco_to_partree(m, qpos, qvel)
    np.testing.assert_allclose(q2, q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(qd2, qd, rtol=0, atol=1e-14)
    assert np.array_equal(mujoco_to_partree(m, qpos), q2)
    with pytest.raises(PartreeInputError, match="qpos has shape"):
        mujoco_to_partree(m, qpos[:-1])


def test_mujoco_initial_state_is_the_file_pose():
    """MuJoCo's qpos0 (the bodies as written in the file) is a valid partree q: the free body sits
    where the file puts it and the hinge with a ref is at its ref angle."""
    m = load(MULTI_JOINT)
    mm = mj_model(MULTI_JOINT)
    d = mujoco.MjData(mm)
    mujoco.mj_forward(mm, d)
    kin = partree.forward_kinematics(m, mujoco_to_partree(m, mm.qpos0.copy()), np.zeros(m.nv))
    i = list(m.body_names).index("tool")
    np.testing.assert_allclose(kin.p[i], d.xpos[mm.body("tool").id], rtol=0, atol=1e-14)
    np.testing.assert_allclose(kin.R[i], d.xmat[mm.body("tool").id].reshape(3, 3), rtol=0, atol=1e-14)


def test_include_and_load_by_suffix(tmp_path):
    with pytest.warns(UserWarning, match="armature"):
        a = partree.io.load(DATA / "humanoid.xml")
    assert a.nv == 27 and "right_hip_y" in list(a.joint_names)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "body.xml").write_text(
        '<mujoco><worldbody><body name="b"><joint name="j"/><geom size="0.1"/></body></worldbody></mujoco>')
    (tmp_path / "main.xml").write_text('<mujoco model="m">\n<include file="sub/body.xml"/>\n</mujoco>')
    m = partree.load_mjcf(tmp_path / "main.xml")
    assert list(m.joint_names) == ["j"] and m.name == "m"


def test_warns_once_about_terms_it_ignores():
    with pytest.warns(UserWarning, match="armature.*damping.*stiffness") as rec:
        partree.load_mjcf(DATA / "humanoid.xml")
    assert len([w for w in rec if "rigid-body" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        partree.load_mjcf(PENDULUM)
    tendon = PENDULUM.replace("</mujoco>", '<tendon><fixed name="t" armature="0.1"><joint joint="swing" coef="1"/>'
                                            "</fixed></tendon></mujoco>")
    with pytest.warns(UserWarning, match=r"tendon armature \('t'\)"):
        partree.load_mjcf(tendon)


def test_inertia_policy_is_forwarded():
    bad = PENDULUM.replace('<geom type="sphere" pos="0 0 -0.5" size="0.08" mass="1.5"/>', "").replace(
        '<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>',
        '<inertial pos="0 0 -0.5" mass="1" diaginertia="0.1 0.1 0.3"/>')
    with pytest.warns(partree.PartreeInertiaWarning, match="<MJCF string>: ") as rec:
        assert partree.load_mjcf(bad).inertia_policy == "warn"
    assert rec[0].filename == __file__                     # it points at the caller
    with pytest.raises(PartreeInputError, match="triangle"):
        partree.load_mjcf(bad, inertia="strict")


def test_mesh_inertia_needs_an_inertial():
    mesh = PENDULUM.replace('<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>',
                            '<geom type="mesh" mesh="arm"/>')
    with pytest.raises(PartreeInputError, match=r"line 6: <geom>: .*'mesh' geom.*<inertial>"):
        load(mesh)
    ok = mesh.replace('<geom type="mesh" mesh="arm"/>', '<geom type="mesh" mesh="arm"/>'
                      '<inertial pos="0 0 -0.3" mass="1" diaginertia="0.1 0.1 0.01"/>')
    assert load(ok).mass[0] == 1.0
    # a body welded to the world needs no inertia: its meshes load (with zero mass)
    static = PENDULUM.replace("<worldbody>", '<worldbody><body name="table"><geom type="mesh" mesh="t"/></body>')
    assert load(static).mass[0] == 0.0


# ------------------------------------------------------------------------------------------ refusals
def _lines(*body):
    return "\n".join(("<mujoco>",) + body + ("</mujoco>",))


BODY = '<body name="b"><joint name="j"/><geom size="0.1"/></body>'
#: equality constraints that load as loops by default, and that equality="error" refuses
EQUALITY = {
    "equality": (_lines("<worldbody>", BODY, "</worldbody>", "<equality>", '  <connect body1="b" anchor="0 0 0"/>',
                        "</equality>"), r"line 6: <connect>: equality constraint: equality constraints are refused"),
    "weld": (_lines("<worldbody>", BODY, "</worldbody>", "<equality>", "", '<weld body1="b"/>', "</equality>"),
             r"line 7: <weld>: equality constraint: equality constraints are refused"),
}
REFUSED = {
    "joint-equality": (_lines("<worldbody>", BODY, "</worldbody>", '<equality><joint joint1="j"/></equality>'),
                       r"line 5: <joint>: equality constraint: partree's loops hold <connect> and <weld>"),
    "joint type": (_lines("<worldbody>", '<body><joint type="helical"/><geom size="1"/></body>', "</worldbody>"),
                   r"line 3: <joint>: type='helical'"),
    "composite": (_lines("<worldbody>", "<body>", '<composite type="grid" count="2 2 1"/>', "</body>", "</worldbody>"),
                  r"line 4: <composite>"),
    "flexcomp": (_lines("<worldbody>", '<flexcomp type="grid" count="2 2 1"/>', "</worldbody>"), r"line 3: <flexcomp>"),
    "replicate": (_lines("<worldbody>", '<replicate count="3">', BODY, "</replicate>", "</worldbody>"),
                  r"line 3: <replicate>"),
    "flex": (_lines("<deformable>", '<flex name="f"/>', "</deformable>", "<worldbody>", BODY, "</worldbody>"),
             r"line 3: <flex>"),
    "unknown element": (_lines("<worldbody>", "<body>", '<joint/><geom size="1"/>', "<spring/>", "</body>",
                               "</worldbody>"), r"line 5: <spring>: unknown"),
    "unknown section": (_lines("<robot/>"), r"line 2: <robot>: unknown"),
    "geom type": (_lines("<worldbody>", '<body><joint/><geom type="cone" size="1"/></body>', "</worldbody>"),
                  r"line 3: <geom>: unknown geom type 'cone'"),
    "free not top": (_lines("<worldbody>", BODY.replace("</body>", '<body><freejoint/><geom size="1"/></body></body>'),
                            "</worldbody>"), r"line 3: <freejoint>: .*top-level"),
    "align free": (_lines("<worldbody>", '<body><freejoint align="true"/><geom size="1"/></body>', "</worldbody>"),
                   r"line 3: <freejoint>: .*aligned"),
    "two orientations": (_lines("<worldbody>", '<body quat="1 0 0 0" euler="0 0 1"><joint/><geom size="1"/></body>',
                                "</worldbody>"), r"line 3: <body>: several orientations"),
    "zero axis": (_lines("<worldbody>", '<body><joint axis="0 0 0"/><geom size="1"/></body>', "</worldbody>"),
                  r"line 3: <joint>: .*axis .* is zero"),
    "bad number": (_lines("<worldbody>", '<body pos="0 x 0"><joint/><geom size="1"/></body>', "</worldbody>"),
                   r"line 3: <body>: pos='0 x 0' is not numeric"),
    "class": (_lines("<worldbody>", '<body><joint class="nope"/><geom size="1"/></body>', "</worldbody>"),
              r"line 3: <joint>: default class 'nope' is not defined"),
    "global": (_lines('<compiler coordinate="global"/>', "<worldbody>", BODY, "</worldbody>"),
               r"line 2: <compiler>: coordinate='global'"),
    "shell": (_lines("<worldbody>", '<body><joint/><geom size="1" shellinertia="true"/></body>', "</worldbody>"),
              r"line 3: <geom>: .*shellinertia"),
    "malformed": (_lines("<worldbody>", "<body>", "</worldbody>"), r"line 4: malformed XML"),
    "root": ("<robot/>", r"line 1: <robot>: the root element must be <mujoco>"),
    "duplicate joint": (_lines("<worldbody>", BODY, BODY.replace('name="b"', 'name="c"'), "</worldbody>"),
                        r"line 4: <joint>: joint name 'j' is used twice \(first at line 3\)"),
    "duplicate body": (_lines("<worldbody>", BODY, BODY.replace('name="j"', 'name="k"'), "</worldbody>"),
                       r"line 4: <body>: body name 'b' is used twice"),
    "pos and fromto": (_lines("<worldbody>", '<body><joint/><geom type="capsule" size="0.1" pos="1 0 0" '
                              'fromto="0 0 0 0 0 1"/></body>', "</worldbody>"), r"line 3: <geom>: both pos and fromto"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_name_the_element_and_its_line(case):
    xml, pattern = REFUSED[case]
    with pytest.raises(PartreeInputError, match=pattern):
        load(xml)


@pytest.mark.parametrize("case", list(EQUALITY))
def test_connect_and_weld_are_loops_unless_refused(case):
    xml, pattern = EQUALITY[case]
    m = load(xml)
    assert len(m.loops) == 1 and m.loops.loop(0).kind == ("spherical" if case == "equality" else "weld")
    with pytest.raises(PartreeInputError, match=pattern):
        load(xml, equality="error")


def test_equality_can_be_ignored_with_a_warning():
    xml = EQUALITY["equality"][0]
    with pytest.warns(UserWarning, match=r"equality constraints ignored .*<connect> at line 6"):
        m = partree.load_mjcf(xml, equality="ignore")
    assert list(m.joint_names) == ["j"] and len(m.loops) == 0


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(PartreeInputError, match="no such MJCF file"):
        partree.load_mjcf(tmp_path / "none.xml")
    main = tmp_path / "main.xml"
    main.write_text("<mujoco>\n\n  <include file='missing.xml'/>\n</mujoco>")
    with pytest.raises(PartreeInputError, match=rf"{main}, line 3: <include>: .*missing.xml: no such included"):
        partree.load_mjcf(main)
    (tmp_path / "notmj.xml").write_text("<robot/>")
    main.write_text("<mujoco><include file='notmj.xml'/></mujoco>")
    with pytest.raises(PartreeInputError, match="notmj.xml, line 1: <robot>: an included file must have <mujoco>"):
        partree.load_mjcf(main)
    main.write_text("<mujoco><include file='main.xml'/></mujoco>")
    with pytest.raises(PartreeInputError, match="includes itself"):
        partree.load_mjcf(main)
    bad = tmp_path / "bad.xml"
    bad.write_text(_lines("<worldbody>", '<body><joint type="screw"/><geom size="1"/></body>', "</worldbody>"))
    with pytest.raises(PartreeInputError, match=rf"{bad}, line 3: <joint>"):
        partree.load_mjcf(bad)
    with pytest.raises(PartreeInputError, match="equality="):
        partree.load_mjcf(PENDULUM, equality="maybe")


def test_refused_element_in_an_included_file_names_that_file(tmp_path):
    (tmp_path / "parts.xml").write_text("<mujoco>\n<worldbody>\n<body><joint/><geom size='1'/>\n"
                                        "<composite type='grid' count='2 2 1'/></body>\n</worldbody>\n</mujoco>")
    (tmp_path / "main.xml").write_text("<mujoco><include file='parts.xml'/></mujoco>")
    with pytest.raises(PartreeInputError, match=r"parts.xml, line 4: <composite>"):
        partree.load_mjcf(tmp_path / "main.xml")




def test_deep_chain_builds_iteratively():
    n = 3000
    xml = ("<mujoco><worldbody>" + "".join(f'<body pos="0 0 -0.1"><joint name="j{k}"/><geom size="0.02"/>'
                                           for k in range(n)) + "</body>" * n + "</worldbody></mujoco>")
    m = load(xml)
    assert m.n == n and list(m.parent[:3]) == [-1, 0, 1] and m.joint_names[n - 1] == f"j{n - 1}"


def test_mjcf_files_are_model_files(tmp_path):
    """Wherever a model is expected an .xml file is MJCF, and an output never overwrites one."""
    from partree.outputs import check_output_file, model_file_kind

    path = tmp_path / "robot.xml"
    path.write_text(PENDULUM)
    assert partree.resolve_model(str(path)).joint_names[0] == "swing"
    assert model_file_kind(path) == "mjcf"
    with pytest.raises(PartreeInputError, match="is a model file; it is never overwritten"):
        check_output_file(path, "output file", overwrite=True)
