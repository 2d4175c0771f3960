"""MJCF ``<equality>`` constraints as loops, against MuJoCo: the same XML in both, the two frames of
every loop placed by partree's forward kinematics and held against the anchor points and
orientations MuJoCo computes from ``xpos``/``xmat`` (or ``site_xpos``/``site_xmat``) and its
compiled ``eq_data``, and against MuJoCo's constraint residuals ``efc_pos``; then what is refused,
named with its line."""
import warnings
from pathlib import Path

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.io import mujoco_to_partree, partree_to_mujoco

mujoco = pytest.importorskip("mujoco")

MUJOCO_TESTDATA = Path(mujoco.__file__).resolve().parent / "testdata" / "model.xml"
TOL = 1e-12

MIXED = """<mujoco model="mixed">
  <default><default class="s"><site pos="0.1 -0.2 0.05" euler="10 0 -20"/></default></default>
  <worldbody>
    <site name="ws" pos="0.3 -0.4 0.2" euler="0 30 60"/>
    <body name="a" pos="0.1 0.2 0.3" euler="10 20 30">
      <joint type="hinge" axis="0 1 0" ref="15"/>
      <geom size=".1"/>
      <body name="b" pos="0.5 0 0" euler="40 -10 5">
        <joint type="ball" pos="0.05 0.1 -0.02"/>
        <geom size=".1"/>
        <site name="sb" pos="0.1 0.2 -0.1" euler="5 6 7"/>
        <frame pos="0.2 0 0.1" euler="0 0 45"><site name="sf" class="s"/></frame>
      </body>
      <body name="m" pos="0 0.3 0" quat="0.8 0.2 -0.3 0.1">
        <joint name="m1" type="hinge" axis="1 0 0" pos="0.1 0 0"/>
        <joint name="m2" type="slide" axis="0 1 1" pos="0.2 0.1 0" ref="0.05"/>
        <joint name="m3" type="hinge" axis="0 0 1" pos="-0.1 0.05 0.2"/>
        <geom type="capsule" size=".05" fromto="0 0 0 0.3 0 0"/>
        <site name="sc1" type="capsule" size="0.01" fromto="0 0 0 0.1 0.2 0.3"/>
      </body>
    </body>
    <body name="c" pos="1 1 1" quat="0.9 0.1 0.2 0.3">
      <freejoint/>
      <geom size=".1"/>
      <site name="sc" pos="0.3 0 0" euler="30 0 0"/>
    </body>
    <body name="fixed" pos="-0.5 0 0.4" euler="0 0 30"><geom size=".1"/></body>
  </worldbody>
  <equality>
    <connect body1="b" body2="c" anchor="0.1 0.2 0.3"/>
    <weld name="w" body1="b" body2="c" anchor="0.05 -0.1 0.2"/>
    <weld body1="m" body2="c" relpose="0.1 0.2 0.3 0.5 0.5 0.5 0.5" anchor="0.3 0.2 0.1"/>
    <weld body1="a"/>
    <connect body1="m" anchor="0.2 -0.1 0.4"/>
    <connect site1="sb" site2="sc"/>
    <weld site1="sf" site2="sc1"/>
    <weld site1="ws" site2="sc" torquescale="2"/>
    <weld body1="fixed" body2="m" relpose="0 0 0.1 1 0 0 0"/>
    <weld body1="world" body2="b" anchor="0.1 0.1 0.1"/>
    <weld body1="c" body2="m" torquescale="0"/>
  </equality>
</mujoco>"""

FOUR_BAR = """<mujoco model="four-bar">
  <compiler angle="radian"/>
  <worldbody>
    <body name="crank">
      <joint name="crank" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 1" size="0.05"/>
      <body name="coupler" pos="0 0 1">
        <joint name="coupler" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 2 0 0.5" size="0.05"/>
      </body>
    </body>
    <body name="rocker" pos="2 0 0">
      <joint name="rocker" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 1.5" size="0.05"/>
    </body>
  </worldbody>
  <equality>
    <connect name="tip" body1="coupler" body2="rocker" anchor="2 0 0.5"/>
  </equality>
</mujoco>"""


def _testdata():
    if not MUJOCO_TESTDATA.exists():
        pytest.skip("mujoco ships no testdata/model.xml")
    return MUJOCO_TESTDATA.read_text().replace('type="mesh" mesh="icosahedron" size=".1"', 'type="sphere" size=".1"')


MODELS = {"mixed": lambda: MIXED, "four-bar": lambda: FOUR_BAR, "mujoco-testdata": _testdata}


def load(xml, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return partree.load_mjcf(xml, **kw)


def _mat(wxyz):
    m = np.zeros(9)
    mujoco.mju_quat2Mat(m, np.asarray(wxyz, dtype=float))
    return m.reshape(3, 3)


def mujoco_frames(mm, d, i):
    """MuJoCo's two points (and, for a weld, orientations) of equality constraint i, from xpos,
    xmat and eq_data (or site_xpos and site_xmat), in world coordinates."""
    o1, o2, data = int(mm.eq_obj1id[i]), int(mm.eq_obj2id[i]), mm.eq_data[i]
    if mm.eq_objtype[i] == mujoco.mjtObj.mjOBJ_SITE:
        R1, R2 = d.site_xmat[o1].reshape(3, 3), d.site_xmat[o2].reshape(3, 3)
        return d.site_xpos[o1].copy(), d.site_xpos[o2].copy(), R1, R2
    X1, X2 = d.xmat[o1].reshape(3, 3), d.xmat[o2].reshape(3, 3)
    if mm.eq_type[i] == mujoco.mjtEq.mjEQ_CONNECT:
        return d.xpos[o1] + X1 @ data[0:3], d.xpos[o2] + X2 @ data[3:6], None, None
    return d.xpos[o1] + X1 @ data[3:6], d.xpos[o2] + X2 @ data[0:3], X1 @ _mat(data[6:10]), X2


def partree_frames(model, kin, k):
    lp = model.loops
    out = []
    for b, R, p in ((lp.body_a[k], lp.R_a[k], lp.p_a[k]), (lp.body_b[k], lp.R_b[k], lp.p_b[k])):
        out.append((R, p) if b < 0 else (kin.R[b] @ R, kin.p[b] + kin.R[b] @ p))
    return out


def _vec_of_rotation(R):
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, R.reshape(9).copy())
    return q[1:] * np.sign(q[0] if q[0] != 0 else 1.0)


@pytest.mark.parametrize("name", list(MODELS))
def test_loop_frames_match_mujoco(name):
    xml = MODELS[name]()
    model = load(xml)
    mm = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mm)
    assert len(model.loops) == mm.neq and mm.neq > 0
    rng = np.random.default_rng(7)
    q0 = mujoco_to_partree(model, mm.qpos0)
    for trial in range(4):
        q = q0 if trial == 0 else model.normalize(q0 + rng.uniform(-0.4, 0.4, model.nq))
        d.qpos[:] = partree_to_mujoco(model, q)
        mujoco.mj_forward(mm, d)
        kin = partree.forward_kinematics(model, q)
        for i in range(mm.neq):
            (RA, pA), (RB, pB) = partree_frames(model, kin, i)
            p1, p2, R1, R2 = mujoco_frames(mm, d, i)
            kind = model.loops.loop(i).kind
            assert np.abs(pA - p1).max() < TOL and np.abs(pB - p2).max() < TOL, (name, i, trial)
            weld = mm.eq_type[i] == mujoco.mjtEq.mjEQ_WELD
            assert kind == ("weld" if weld and mm.eq_data[i, 10] != 0 else "spherical")
            if weld:
                assert np.abs(RA - R1).max() < TOL and np.abs(RB - R2).max() < TOL, (name, i, trial)
            # MuJoCo's residual: the position rows are pA - pB; a weld's rotation rows are
            # torquescale times the vector part of the quaternion of RB^T RA
            rows = d.efc_pos[(d.efc_id == i) & (d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)]
            assert np.abs(rows[:3] - (pA - pB)).max() < 1e-10
            if weld:
                v = mm.eq_data[i, 10] * _vec_of_rotation(RB.T @ RA)
                assert min(np.abs(rows[3:] - v).max(), np.abs(rows[3:] + v).max()) < 1e-10
            # without sites and relpose, the two frames coincide at MuJoCo's reference configuration
            if trial == 0 and mm.eq_objtype[i] == mujoco.mjtObj.mjOBJ_BODY and \
                    (not weld or np.linalg.norm(_relpose(xml, i)) == 0):
                assert np.abs(pA - pB).max() < TOL and np.abs(RA - RB).max() < TOL, (name, i)


def _relpose(xml, i):
    """The quaternion of equality constraint i's relpose in the file (zeros when not given)."""
    import xml.etree.ElementTree as ET

    eqs = [e for sec in ET.fromstring(xml).iter("equality") for e in sec]
    rel = eqs[i].get("relpose")
    return np.zeros(4) if rel is None else np.array(rel.split(), dtype=float)[3:]


def test_mixed_model_loop_names_bodies_and_kinds():
    m = load(MIXED)
    lp = m.loops
    assert lp.names == ["connect0", "w", "weld2", "weld3", "connect4", "connect5", "weld6", "weld7", "weld8",
                        "weld9", "weld10"]
    kinds = [lp.loop(k).kind for k in range(len(lp))]
    assert kinds == ["spherical", "weld", "weld", "weld", "spherical", "spherical", "weld", "weld", "weld", "weld",
                     "spherical"]
    names = m.body_names
    ends = [(names[a] if a >= 0 else None, names[b] if b >= 0 else None) for a, b in zip(lp.body_a, lp.body_b)]
    assert ends[0] == ("b", "c") and ends[3] == ("a", None) and ends[4] == ("m", None) and ends[9] == (None, "b")
    assert lp.nrow == 3 + 6 + 6 + 6 + 3 + 3 + 6 + 6 + 6 + 6 + 3


def test_four_bar_from_mjcf_closes_like_the_builder_one():
    m = load(FOUR_BAR)
    b = partree.ModelBuilder("four-bar")
    y = (0.0, 1.0, 0.0)
    b.add_body("crank", None, "revolute", axis=y, mass=1.0, inertia=0.1)
    b.add_body("coupler", "crank", "revolute", placement=(0, 0, 1), axis=y, mass=1.0, inertia=0.1)
    b.add_body("rocker", None, "revolute", placement=(2, 0, 0), axis=y, mass=1.0, inertia=0.1)
    b.add_loop("tip", "spherical", "coupler", "rocker", placement_a=(2, 0, 0.5), placement_b=(0, 0, 1.5))
    ref = b.build()
    for k in ("body_a", "body_b", "R_a", "p_a", "R_b", "p_b"):
        assert np.abs(getattr(m.loops, k) - getattr(ref.loops, k)).max() < 1e-15, k


def test_testdata_weld_to_the_world_by_default():
    m = load(_testdata())
    assert len(m.loops) == 1 and m.loops.loop(0, m.body_names).kind == "weld"
    assert m.loops.body_a[0] == -1 and m.body_names[int(m.loops.body_b[0])] == "cylinder"


def _eq(*items, bodies=None):
    body = bodies or ('<body name="b"><joint name="j"/><geom size="0.1"/><site name="s"/></body>'
                      '<body name="c" pos="1 0 0"><joint name="k"/><geom size="0.1"/></body>')
    return "\n".join(["<mujoco>", "<worldbody>", body, "</worldbody>", "<equality>", *items, "</equality>",
                      "</mujoco>"])


REFUSED = {
    "unknown body": (_eq('<connect body1="nope" anchor="0 0 0"/>'), r"line 6: <connect>: body1='nope' is not a named"),
    "unknown body2": (_eq('<weld body1="b" body2="zz"/>'), r"line 6: <weld>: body2='zz' is not a named body"),
    "unknown site": (_eq('<weld site1="s" site2="t"/>'), r"line 6: <weld>: site2='t' is not a named site"),
    "one site": (_eq('<connect site1="s"/>'), r"line 6: <connect>: missing required attribute 'site2'"),
    "both forms": (_eq('<weld site1="s" site2="s" body1="b"/>'), r"line 6: <weld>: both the site form"),
    "no anchor": (_eq('<connect body1="b"/>'), r"line 6: <connect>: missing required attribute 'anchor'"),
    "no body1": (_eq('<weld body2="b"/>'), r"line 6: <weld>: missing required attribute 'body1'"),
    "to itself": (_eq('<connect body1="b" body2="b" anchor="0 0 0"/>'), r"line 6: <connect>: .*joins one body"),
    "world to world": (_eq('<weld body1="world"/>'), r"line 6: <weld>: .*joins the world to itself"),
    "relpose": (_eq('<weld body1="b" relpose="0 0 0 1"/>'), r"line 6: <weld>: relpose=.*expected 7 numbers"),
    "joint": (_eq('', '<joint name="jj" joint1="j" joint2="k"/>'),
              r"line 7: <joint>: equality constraint 'jj': partree's loops hold <connect> and <weld>.*ignore-others"),
    "tendon": (_eq('<tendon tendon1="t"/>'), r"line 6: <tendon>: .*not <tendon>"),
    "unknown": (_eq('<spring body1="b"/>'), r"line 6: <spring>: unknown equality constraint"),
    "active": (_eq('<weld body1="b" active="maybe"/>'), r"line 6: <weld>: active='maybe'"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_name_the_element_and_its_line(case):
    xml, pattern = REFUSED[case]
    with pytest.raises(PartreeInputError, match=pattern):
        load(xml)


def test_other_kinds_can_be_left_out_and_inactive_ones_are():
    xml = _eq('<weld body1="b" body2="c"/>', '<joint joint1="j" joint2="k"/>', '<connect body1="c" anchor="0 0 0" '
              'active="false"/>')
    with pytest.warns(UserWarning) as rec:
        m = partree.load_mjcf(xml, equality="ignore-others")
    msgs = [str(w.message) for w in rec]
    assert any("equality constraints ignored" in s and "<joint> at line 7" in s for s in msgs), msgs
    assert any("inactive equality constraints" in s and "<connect> at line 8" in s for s in msgs), msgs
    assert len(m.loops) == 1 and m.loops.loop(0).kind == "weld"
    with pytest.warns(UserWarning, match=r"equality constraints ignored \(the model is the tree"):
        assert len(partree.load_mjcf(xml, equality="ignore").loops) == 0
    with pytest.raises(PartreeInputError, match="line 6: <weld>: .*refused"):
        partree.load_mjcf(xml, equality="error")
    with pytest.raises(PartreeInputError, match="equality='nope': expected one of 'loops'"):
        partree.load_mjcf(xml, equality="nope")


def test_equality_defaults_and_generated_names_stay_unique():
    xml = _eq('<weld name="weld1" body1="b"/>', '<weld body1="c"/>').replace(
        "<mujoco>", '<mujoco><default><equality active="false"/><default class="on"><equality active="true"/>'
        '</default></default>').replace('<weld body1="c"/>', '<weld body1="c" class="on"/>').replace(
        '<weld name="weld1" body1="b"/>', '<weld name="weld1" body1="b" class="on"/><weld body1="b"/>')
    with pytest.warns(UserWarning, match="inactive equality constraints"):
        m = partree.load_mjcf(xml)
    assert m.loops.names == ["weld1", "weld2"]


def test_duplicate_site_names_are_refused():
    xml = _eq('<weld site1="s" site2="s"/>', bodies='<body name="b"><joint/><geom size="0.1"/><site name="s"/>'
              '<site name="s"/></body>')
    with pytest.raises(PartreeInputError, match=r"<site>: site name 's' is used twice"):
        load(xml)
