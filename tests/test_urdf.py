"""URDF reader: structure, inertias and dynamics against Pinocchio, and error handling."""
import os
from pathlib import Path

import numpy as np
import pytest

import partree
from partree import joints as J
from partree.io import load_urdf
from partree.model import PartreeInputError
from partree.spatial import rpy_to_matrix

pin = pytest.importorskip("pinocchio")

DATA = Path(__file__).parent / "data"
ARM7 = DATA / "arm7.urdf"
BRANCHING = DATA / "branching.urdf"

try:
    from partree.algorithms.rnea import joint_wrenches, rnea
except ImportError:  # pragma: no cover - RNEA arrives separately
    rnea = joint_wrenches = None

try:
    from partree.algorithms.kinematics import forward_kinematics
except ImportError:  # pragma: no cover
    forward_kinematics = None


# ---------------------------------------------------------------------- helpers
def pin_model(path, floating_base):
    if floating_base:
        pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    else:
        pm = pin.buildModelFromUrdf(str(path))
    return pm, pm.createData()


class StateMap:
    """Maps partree states to Pinocchio's joint by joint, by joint name."""

    def __init__(self, model, pm):
        self.model, self.pm = model, pm
        self.vidx = np.empty(model.nv, dtype=np.int64)  # pin v index of each partree v index
        self.joints = []                                 # (body, pin joint id)
        for i in range(model.n):
            if model.nv_j[i] == 0:
                continue
            name = model.joint_names[i]
            assert pm.existJointName(name), f"Pinocchio has no joint {name!r}"
            jid = pm.getJointId(name)
            pj = pm.joints[jid]
            assert pj.nv == model.nv_j[i], name
            assert pj.nq == model.nq_j[i] or (pj.nq == 2 and model.nq_j[i] == 1), name
            self.vidx[model.idx_v[i]:model.idx_v[i] + model.nv_j[i]] = pj.idx_v + np.arange(pj.nv)
            self.joints.append((i, jid))
        # every Pinocchio joint is a partree joint: nothing is left out
        assert sorted(self.vidx) == list(range(pm.nv))
        assert len(self.joints) == pm.njoints - 1

    def q(self, q):
        qp = pin.neutral(self.pm)
        m = self.model
        for i, jid in self.joints:
            pj = self.pm.joints[jid]
            qi = q[m.q_slice(i)]
            if pj.nq == len(qi):
                qp[pj.idx_q:pj.idx_q + pj.nq] = qi
            else:  # continuous joint: (cos, sin)
                qp[pj.idx_q:pj.idx_q + 2] = np.cos(qi[0]), np.sin(qi[0])
        return qp

    def v(self, v):
        vp = np.empty(self.pm.nv)
        vp[self.vidx] = v
        return vp

    def from_pin_v(self, vp):
        return np.asarray(vp)[self.vidx]


def random_state(model, seed):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    qd = model.random_velocity(rng, scale=2.0)
    tau = rng.uniform(-5, 5, model.nv)
    return q, qd, tau


def assert_rel(a, b, rtol=1e-10, what="", scale=None):
    """max|a - b| <= rtol * scale, scale = max(1, max|b|) unless given."""
    a, b = np.asarray(a), np.asarray(b)
    if scale is None:
        scale = max(1.0, float(np.abs(b).max()))
    err = float(np.abs(a - b).max()) / scale
    assert err <= rtol, f"{what}: relative error {err:.3e}\nours {a}\npin  {b}"


CASES = [(ARM7, False), (ARM7, True), (BRANCHING, False), (BRANCHING, True)]
IDS = ["arm7", "arm7-floating", "branching", "branching-floating"]


# ---------------------------------------------------------------------- structure
def test_arm7_structure():
    m = load_urdf(ARM7)
    assert m.name == "arm7"
    assert m.n == 8 and m.nq == 7 and m.nv == 7
    assert list(m.joint_names) == [f"joint{k}" for k in range(1, 8)] + ["tool_joint"]
    assert list(m.body_names) == [f"link{k}" for k in range(1, 8)] + ["tool0"]
    assert list(m.parent) == [-1, 0, 1, 2, 3, 4, 5, 6]
    assert list(m.jtype) == [J.REVOLUTE] * 7 + [J.FIXED]
    # placements: E_tree = R^T, r_tree = xyz
    np.testing.assert_allclose(m.E_tree[2], rpy_to_matrix([0.3, -0.2, 0.1]).T, atol=0)
    np.testing.assert_array_equal(m.r_tree[2], [0.01, 0.0, 0.3])
    # joint6 has neither origin nor axis
    np.testing.assert_array_equal(m.E_tree[5], np.eye(3))
    np.testing.assert_array_equal(m.r_tree[5], np.zeros(3))
    np.testing.assert_array_equal(m.axis[5], [1.0, 0.0, 0.0])
    # axes are normalised
    np.testing.assert_allclose(m.axis[2], [0.0, 0.6, -0.8], atol=1e-15)
    np.testing.assert_allclose(m.axis[3], [2 ** -0.5, 2 ** -0.5, 0.0], atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(m.axis[:7], axis=1), 1.0, atol=1e-15)
    # rotated inertial: I_link = R I R^T, com = xyz
    R = rpy_to_matrix([0.3, -0.2, 0.5])
    I = np.array([[0.031, 0.0012, -0.0007], [0.0012, 0.028, 0.0009], [-0.0007, 0.0009, 0.012]])
    np.testing.assert_allclose(m.I_com[0], R @ I @ R.T, rtol=1e-14, atol=1e-18)
    np.testing.assert_array_equal(m.com[0], [0.0, 0.01, 0.12])
    assert m.mass[0] == 3.2
    # massless tool frame
    assert m.mass[7] == 0.0 and not m.I_com[7].any() and m.allow_massless


def test_branching_structure():
    m = load_urdf(BRANCHING)
    names = list(m.joint_names)
    # depth-first from the root, children in file order, whatever the order of the joints
    assert names == ["spine", "l_slide", "l_elbow", "l_wrist_fixed", "l_finger_joint", "r_shoulder",
                     "r_sensor", "r_elbow", "drone_joint", "head_fixed", "neck_cam"]
    assert np.all(m.parent < np.arange(m.n))
    assert m.parent[names.index("head_fixed")] == -1 and m.parent[names.index("spine")] == -1
    assert m.body_names[names.index("r_elbow")] == "r_fore"
    assert m.parent[names.index("r_elbow")] == names.index("r_sensor")
    assert m.joint_type("spine") == "revolute"          # continuous
    assert m.joint_type("l_slide") == "prismatic"
    assert m.joint_type("r_sensor") == "fixed"
    assert m.joint_type("drone_joint") == "free"        # floating
    assert m.nq == 14 and m.nv == 13


def test_floating_base_structure():
    m = load_urdf(ARM7, floating_base=True)
    assert m.n == 9 and m.nq == 14 and m.nv == 13
    assert m.joint_names[0] == "root_joint" and m.body_names[0] == "base_link"
    assert m.jtype[0] == J.FREE and m.parent[0] == -1
    assert list(m.parent[1:]) == list(range(8))
    assert m.mass[0] == 4.0


def test_string_and_pathlike_input_match_file():
    a = load_urdf(str(ARM7))
    b = load_urdf(ARM7.read_text())
    c = load_urdf(ARM7.read_bytes())
    for m in (b, c):
        for k in ("parent", "jtype", "axis", "E_tree", "r_tree", "mass", "com", "I_com"):
            np.testing.assert_array_equal(getattr(a, k), getattr(m, k))
        assert list(m.joint_names) == list(a.joint_names)


def test_gravity_option():
    m = load_urdf(ARM7, gravity=(0.0, 0.0, 0.0))
    np.testing.assert_array_equal(m.gravity, 0.0)
    pm, pd = pin_model(ARM7, False)
    pm.gravity.linear = np.zeros(3)
    sm = StateMap(m, pm)
    q, qd, tau = random_state(m, 3)
    ref = pin.aba(pm, pd, sm.q(q), sm.v(qd), sm.v(tau))
    assert_rel(partree.aba(m, q, qd, tau), sm.from_pin_v(ref), what="aba without gravity")


# ---------------------------------------------------------------------- against Pinocchio
def test_inertias_match_pinocchio():
    """Link by link, Pinocchio's parsed inertias equal ours (no fixed joints merge mass in arm7)."""
    m = load_urdf(ARM7)
    pm, _ = pin_model(ARM7, False)
    for i in range(7):
        Y = pm.inertias[pm.getJointId(m.joint_names[i])]
        assert Y.mass == pytest.approx(m.mass[i], rel=1e-14)
        np.testing.assert_allclose(Y.lever, m.com[i], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(Y.inertia, m.I_com[i], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(pm.jointPlacements[i + 1].rotation, m.E_tree[i].T, atol=1e-15)
        np.testing.assert_allclose(pm.jointPlacements[i + 1].translation, m.r_tree[i], atol=1e-15)


@pytest.mark.parametrize("path,floating", CASES, ids=IDS)
def test_aba_matches_pinocchio(path, floating):
    m = load_urdf(path, floating_base=floating)
    pm, pd = pin_model(path, floating)
    sm = StateMap(m, pm)
    for seed in range(5):
        q, qd, tau = random_state(m, seed)
        ours = partree.aba(m, q, qd, tau)
        ref = sm.from_pin_v(pin.aba(pm, pd, sm.q(q), sm.v(qd), sm.v(tau)))
        scale = max(1.0, float(np.abs(ref).max()))
        for i, _ in sm.joints:   # joint by joint, for a readable failure
            s = m.v_slice(i)
            assert_rel(ours[s], ref[s], scale=scale, what=f"aba, joint {m.joint_names[i]!r}, seed {seed}")
        assert_rel(ours, ref, what=f"aba, seed {seed}")


@pytest.mark.skipif(rnea is None, reason="partree.algorithms.rnea not available")
@pytest.mark.parametrize("path,floating", CASES, ids=IDS)
def test_rnea_and_joint_wrenches_match_pinocchio(path, floating):
    m = load_urdf(path, floating_base=floating)
    pm, pd = pin_model(path, floating)
    sm = StateMap(m, pm)
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        q = m.random_configuration(rng)
        qd = m.random_velocity(rng, 2.0)
        qdd = m.random_velocity(rng, 3.0)
        tau, W = rnea(m, q, qd, qdd, return_wrenches=True)
        ref = sm.from_pin_v(pin.rnea(pm, pd, sm.q(q), sm.v(qd), sm.v(qdd)))
        assert_rel(tau, ref, what=f"rnea, seed {seed}")
        # wrench across each moving joint, in the joint (body) frame; Pinocchio's bodies include
        # the links welded on by fixed joints, like partree's subtrees
        for i, jid in sm.joints:
            f = pd.f[jid]
            assert_rel(W[i], np.concatenate([f.angular, f.linear]),
                       what=f"wrench of joint {m.joint_names[i]!r}, seed {seed}")


@pytest.mark.skipif(forward_kinematics is None, reason="forward_kinematics not available")
@pytest.mark.parametrize("path,floating", CASES, ids=IDS)
def test_link_poses_match_pinocchio(path, floating):
    """Every link frame (also those behind fixed joints) is where Pinocchio puts it."""
    m = load_urdf(path, floating_base=floating)
    pm, pd = pin_model(path, floating)
    sm = StateMap(m, pm)
    q = m.random_configuration(7)
    pin.framesForwardKinematics(pm, pd, sm.q(q))
    kin = forward_kinematics(m, q)
    for i in range(m.n):
        fid = pm.getFrameId(m.body_names[i], pin.FrameType.BODY)
        assert fid < len(pm.frames), m.body_names[i]
        np.testing.assert_allclose(kin.R[i], pd.oMf[fid].rotation, atol=1e-12, err_msg=m.body_names[i])
        np.testing.assert_allclose(kin.p[i], pd.oMf[fid].translation, atol=1e-12, err_msg=m.body_names[i])


def test_fixed_joint_keeps_reaction_body():
    """A fixed joint is a body with nv = 0 that shows up in the body list with its link's mass."""
    m = load_urdf(BRANCHING)
    i = m.joint_id("l_wrist_fixed")
    assert m.nv_j[i] == 0 and m.nq_j[i] == 0 and m.mass[i] == 0.5 and m.body_names[i] == "l_hand"


@pytest.mark.skipif(joint_wrenches is None, reason="partree.algorithms.rnea not available")
@pytest.mark.parametrize("path,floating", CASES, ids=IDS)
def test_all_joint_wrenches_from_pinocchio_kinematics(path, floating):
    """Every joint's wrench, fixed joints included: the sum over the joint's subtree of the link
    forces I a + v x* I v, with every link's v and a taken from Pinocchio (frames rigidly attached
    to Pinocchio's joints) and moved to the joint frame with Pinocchio's placements."""
    m = load_urdf(path, floating_base=floating)
    pm, pd = pin_model(path, floating)
    sm = StateMap(m, pm)
    rng = np.random.default_rng(11)
    q = m.random_configuration(rng)
    qd = m.random_velocity(rng, 2.0)
    qdd = m.random_velocity(rng, 3.0)
    W = joint_wrenches(m, q, qd, qdd)
    pin.framesForwardKinematics(pm, pd, sm.q(q))        # oMf
    pin.rnea(pm, pd, sm.q(q), sm.v(qd), sm.v(qdd))      # v, a_gf (spatial, with gravity)
    fids = [pm.getFrameId(m.body_names[i], pin.FrameType.BODY) for i in range(m.n)]
    link_force = []
    for i, fid in enumerate(fids):
        fr = pm.frames[fid]
        v = fr.placement.actInv(pd.v[fr.parentJoint])
        a = fr.placement.actInv(pd.a_gf[fr.parentJoint])
        Y = pin.Inertia(m.mass[i], m.com[i], m.I_com[i])
        link_force.append(Y * a + v.cross(Y * v))
    sub = m.subtree_sizes()
    scale = max(1.0, float(np.abs(W).max()))
    for k in range(m.n):   # regular numbering: the subtree of k is k .. k + size - 1
        total = pin.Force.Zero()
        for b in range(k, k + int(sub[k])):
            total += (pd.oMf[fids[k]].inverse() * pd.oMf[fids[b]]).act(link_force[b])
        assert_rel(W[k], np.concatenate([total.angular, total.linear]), scale=scale,
                   what=f"wrench of {m.joint_type(k)} joint {m.joint_names[k]!r}")


def test_deep_chain_builds_iteratively():
    """No recursion: a 3000-link chain is fine and numbered 0..n-1."""
    n = 3000
    inertial = ('<inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" '
                'izz="0.1"/></inertial>')
    parts = ['<robot name="chain"><link name="l0"/>']
    for k in range(1, n + 1):
        parts.append(f'<link name="l{k}">{inertial}</link>')
        parts.append(f'<joint name="j{k}" type="revolute"><parent link="l{k - 1}"/><child link="l{k}"/>'
                     f'<origin xyz="0 0 0.1"/><axis xyz="0 1 0"/></joint>')
    parts.append("</robot>")
    m = load_urdf("".join(parts))
    assert m.n == n and list(m.parent[:3]) == [-1, 0, 1] and m.joint_names[-1] == f"j{n}"


# ---------------------------------------------------------------------- errors
def _robot(body):
    return f'<?xml version="1.0"?>\n<robot name="r">{body}</robot>'


INERT = '<inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'
LINKS = f'<link name="a"/><link name="b">{INERT}</link>'


def _joint(name="j", jtype="revolute", parent="a", child="b", extra=""):
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'{extra}</joint>')


ERRORS = {
    "planar": (LINKS + _joint(jtype="planar"), ["'j'", "planar"]),
    "unknown-type": (LINKS + _joint(jtype="spherical"), ["'j'", "spherical"]),
    "missing-type": (LINKS + '<joint name="j"><parent link="a"/><child link="b"/></joint>', ["'j'", "type"]),
    "missing-joint-name": (LINKS + '<joint type="fixed"><parent link="a"/><child link="b"/></joint>',
                           ["joint", "name"]),
    "missing-link-name": ('<link/>' + LINKS, ["link", "name"]),
    "missing-child": (LINKS + '<joint name="j" type="fixed"><parent link="a"/></joint>', ["'j'", "child"]),
    "missing-link-attr": (LINKS + '<joint name="j" type="fixed"><parent link="a"/><child/></joint>',
                          ["'j'", "child", "link"]),
    "missing-link": (LINKS + _joint(child="ghost"), ["'j'", "ghost"]),
    "two-parents": ('<link name="a"/><link name="c"/><link name="b"/>' + _joint("j1", "fixed")
                    + _joint("j2", "fixed", parent="c"), ["'b'", "j1", "j2"]),
    "two-roots": ('<link name="a"/><link name="c"/>' + f'<link name="b">{INERT}</link>' + _joint(),
                  ["root", "'a'", "'c'"]),
    "self-loop": (LINKS + _joint(parent="b", child="b") + _joint("j0", parent="a", child="b"), ["'j'", "cycle"]),
    "negative-mass": ('<link name="a"/><link name="b"><inertial><mass value="-1"/>'
                      '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>' + _joint(),
                      ["'b'", "negative mass"]),
    "non-numeric-mass": ('<link name="a"/><link name="b"><inertial><mass value="heavy"/>'
                         '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>' + _joint(),
                         ["'b'", "heavy", "not numeric"]),
    "missing-inertia-attr": ('<link name="a"/><link name="b"><inertial><mass value="1"/>'
                             '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0"/></inertial></link>' + _joint(),
                             ["'b'", "izz"]),
    "missing-mass": ('<link name="a"/><link name="b"><inertial>'
                     '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>' + _joint(),
                     ["'b'", "mass"]),
    "non-numeric-origin": (LINKS + _joint(extra='<origin xyz="0 one 0"/>'), ["'j'", "origin", "not numeric"]),
    "short-rpy": (LINKS + _joint(extra='<origin rpy="0 1"/>'), ["'j'", "rpy", "3 numbers"]),
    "nan-axis": (LINKS + _joint(extra='<axis xyz="nan 0 1"/>'), ["'j'", "axis", "finite"]),
    "zero-axis": (LINKS + _joint(extra='<axis xyz="0 0 0"/>'), ["'j'", "axis", "zero"]),
    "duplicate-link": (LINKS + '<link name="a"/>' + _joint(), ["'a'", "twice"]),
    "duplicate-joint": ('<link name="a"/><link name="b"/><link name="c"/>' + _joint(child="b", jtype="fixed")
                        + _joint(child="c", jtype="fixed"), ["'j'", "twice"]),
    "no-joints": ('<link name="a"/>', ["no joints", "'a'"]),
    "negative-inertia": ('<link name="a"/><link name="b"><inertial><mass value="1"/>'
                         '<inertia ixx="1" ixy="0" ixz="0" iyy="-0.5" iyz="0" izz="1"/></inertial></link>' + _joint(),
                         ["(b)", "negative principal moment"]),
    # a massless link on a revolute joint with nothing below it: its motion is undetermined
    "massless-leaf": ('<link name="a"/><link name="b"/>' + _joint(), ["joint 'j'", "no mass and no inertia"]),
}
TRIANGLE = ('<link name="a"/><link name="b"><inertial><mass value="1"/>'
            '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="5"/></inertial></link>' + _joint())


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_the_element(case):
    body, needles = ERRORS[case]
    with pytest.raises(PartreeInputError) as ei:
        load_urdf(_robot(body))
    msg = str(ei.value)
    assert "<URDF string>" in msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_inertia_policies():
    """The default 'warn' accepts a broken triangle inequality with one warning naming the string
    and the link; 'strict' refuses it; 'fix' balances it to the mean of the moments."""
    with pytest.warns(partree.PartreeInertiaWarning, match=r"^<URDF string>: .*\n  body 0 \(b\): principal moments "
                                                           r"\[1\. 1\. 5\.\] break the triangle") as rec:
        m = load_urdf(_robot(TRIANGLE))
    assert len(rec) == 1 and rec[0].filename == __file__ and m.inertia_policy == "warn"
    np.testing.assert_array_equal(m.I_com[0], np.diag([1.0, 1.0, 5.0]))
    with pytest.raises(PartreeInputError) as ei:
        load_urdf(_robot(TRIANGLE), inertia="strict")
    for needle in ("<URDF string>", "(b)", "inertia", "triangle"):
        assert needle in str(ei.value)
    with pytest.warns(partree.PartreeInertiaWarning, match=r"\[1\. 1\. 5\.\] -> \[2\.333333 2\.333333 2\.333333\]"):
        m = load_urdf(_robot(TRIANGLE), inertia="fix")
    np.testing.assert_allclose(m.I_com[0], np.eye(3) * 7 / 3, rtol=1e-15)
    with pytest.raises(PartreeInputError, match="<URDF string>: inertia='lenient'"):
        load_urdf(_robot(TRIANGLE), inertia="lenient")


def test_error_files_name_the_file():
    for fname, needles in (("bad_xml.urdf", ["malformed XML", "line"]),
                           ("cycle.urdf", ["cycle", "j_bc"]),
                           ("planar.urdf", ["plane_joint", "planar"])):
        with pytest.raises(PartreeInputError) as ei:
            load_urdf(DATA / fname)
        msg = str(ei.value)
        assert str(DATA / fname) in msg, msg
        for needle in needles:
            assert needle in msg, f"{needle!r} not in {msg!r}"


def test_other_input_errors(tmp_path):
    with pytest.raises(PartreeInputError, match="no such URDF file"):
        load_urdf(tmp_path / "missing.urdf")
    with pytest.raises(PartreeInputError, match="expected <robot>"):
        load_urdf("<model/>")
    with pytest.raises(PartreeInputError, match="root_joint"):
        load_urdf(_robot(LINKS + _joint(name="root_joint")), floating_base=True)
    with pytest.raises(PartreeInputError, match="every link"):
        load_urdf(_robot(f'<link name="a">{INERT}</link><link name="b">{INERT}</link>'
                         + _joint("j1", parent="a", child="b") + _joint("j2", parent="b", child="a")))
    # a lone link is fine as a floating body
    m = load_urdf(_robot(f'<link name="a">{INERT}</link>'), floating_base=True)
    assert m.n == 1 and m.jtype[0] == J.FREE and m.body_names[0] == "a"


def test_ignores_unneeded_elements():
    extra = ('<limit lower="0" upper="1" effort="1" velocity="1"/><dynamics damping="0.1"/>'
             '<mimic joint="x"/><safety_controller k_velocity="1"/>')
    m = load_urdf(_robot('<material name="red"/>' + LINKS + _joint(extra=extra)
                         + '<transmission name="t"/><gazebo/>'))
    assert m.n == 1 and m.jtype[0] == J.REVOLUTE


def test_env_independent_paths():
    # os.PathLike and str paths both work; the model name falls back to the file name for strings
    m = load_urdf(os.fspath(ARM7), name="custom")
    assert m.name == "custom"
