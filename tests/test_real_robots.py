"""Every URDF that example-robot-data ships: it loads under the default inertia policy ("warn"),
"strict" refuses exactly the files that "warn" warns about (naming a body it lists), "fix"
makes them pass "strict" with MuJoCo's ``balanceinertia`` result, and ABA, RNEA and CRBA agree
with Pinocchio's own model of the same file (fixed and floating base) to 1e-12 relative.

The files that do not load are listed in ``REFUSED`` with the reason, and the reason is checked
against Pinocchio where it can be.
"""
import importlib.metadata
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import partree
from partree import PartreeInertiaWarning, PartreeInputError

pin = pytest.importorskip("pinocchio")


def _robots_dir():
    """The robots folder of the installed example-robot-data (a cmeel wheel), or None."""
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return None
    d = Path(dist.locate_file("cmeel.prefix/share/example-robot-data/robots"))
    return d if d.is_dir() else None


ROBOTS = _robots_dir()
pytestmark = pytest.mark.skipif(ROBOTS is None, reason="example-robot-data is not installed (the test extra has it)")
URDFS = sorted(p.relative_to(ROBOTS).as_posix() for p in ROBOTS.rglob("*.urdf")) if ROBOTS else []
VERSION = importlib.metadata.version("example-robot-data") if ROBOTS else None

#: files (and bases: False fixed, True floating) that do not load, with the message's key words
#: and the reason
REFUSED = {
    "ur_description/urdf/ur3.urdf": {
        fb: (["no <link>"], "a xacro macro file whose <robot> holds no link (Pinocchio refuses it too)")
        for fb in (False, True)},
    "hector_description/robots/quadrotor_base.urdf": {
        False: (["no joints", "floating_base=True"], "one link and no joint: a flying body, which loads with "
                                                    "floating_base=True (Pinocchio's fixed-base model has nv = 0)")},
    "romeo_description/urdf/romeo.urdf": {
        fb: (["24 moving joints", "joint 'LHand'", "no mass and no inertia"],
             "the 24 finger joints move links without <inertial>: their motion is undetermined (Pinocchio's mass "
             "matrix has the same 24 zero diagonal entries, and its ABA returns NaN)")
        for fb in (False, True)},
    "romeo_description/urdf/romeo_laas_small.urdf": {
        False: (["LHipPitch_link", "negative principal moment"],
                "the hip links' inertias have a principal moment of -0.0027 kg m^2 (of 0.054): indefinite"),
        True: (["(body)", "base_link", "negative principal moment"],
               "the trunk's inertia has a principal moment of -0.021 kg m^2 (of 0.099), and so has the floating "
               "base it is welded to: indefinite")},
}

#: bodies whose inertia is not a rigid body's in example-robot-data 6.0.0, per file, fixed base
#: (the floating base adds the base link, listed in ``FLOATING_ONLY``)
FAULTY = {
    "alex_description/urdf/alex_psyonic_hands.urdf": {"LeftPsyonicAbilityBaseLink", "Left_thumb_base",
                                                      "RightPsyonicAbilityBaseLink", "Right_thumb_base"},
    "allegro_hand_description/urdf/allegro_left_hand.urdf": {"link_3.0", "link_7.0", "link_11.0", "link_15.0"},
    "allegro_hand_description/urdf/allegro_right_hand.urdf": {"link_3.0", "link_7.0", "link_11.0", "link_15.0"},
    "anymal_c_simple_description/urdf/anymal.urdf": {"depth_camera_front_camera", "depth_camera_rear_camera",
                                                     "depth_camera_left_camera", "depth_camera_right_camera",
                                                     "hatch"},
    "hyq_description/robots/hyq_no_sensors.urdf": {"lf_foot", "rf_foot", "lh_foot", "rh_foot"},
    "pr2_description/urdf/pr2.urdf": {"sensor_mount_link", "double_stereo_link"},
    "romeo_description/urdf/romeo_small.urdf": {"RShoulderYawLink", "RElbowYawLink"},
    "tiago_description/robots/tiago.urdf": {"base_antenna_left_link", "base_antenna_right_link"},
    "tiago_description/robots/tiago_dual.urdf": {"base_antenna_left_link", "base_antenna_right_link"},
    "tiago_description/robots/tiago_no_hand.urdf": {"base_antenna_left_link", "base_antenna_right_link"},
}
FLOATING_ONLY = {
    "anymal_b_simple_description/robots/anymal-kinova.urdf": {"base"},
    "anymal_b_simple_description/robots/anymal.urdf": {"base"},
    "b1_description/urdf/b1-z1.urdf": {"base"},
    "b1_description/urdf/b1.urdf": {"base"},
    "go1_description/urdf/go1.urdf": {"base"},
    "hyq_description/robots/hyq_no_sensors.urdf": {"base_link"},
}

CASES = [(f, fb) for f in URDFS for fb in (False, True)]
LOADABLE = [(f, fb) for f, fb in CASES if fb not in REFUSED.get(f, {})]


def case_id(rel, fb):
    return f"{rel.split('/')[0].removesuffix('_description')}/{rel.rsplit('/', 1)[-1]}-{'floating' if fb else 'fixed'}"


IDS = [case_id(f, fb) for f, fb in LOADABLE]

_cache = {}


def load(rel, fb, inertia="warn"):
    """(model, the PartreeInertiaWarning messages) of a file, cached: each file is read once per policy."""
    key = (rel, fb, inertia)
    if key not in _cache:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                model = partree.load_urdf(ROBOTS / rel, floating_base=fb, inertia=inertia)
            except PartreeInputError as exc:
                model = exc
        _cache[key] = (model, [str(w.message) for w in rec if issubclass(w.category, PartreeInertiaWarning)])
    model, msgs = _cache[key]
    if isinstance(model, Exception):
        raise model
    return model, msgs


def warned_bodies(msgs):
    return set(re.findall(r"^  body \d+ \((.+?)\):", "\n".join(msgs), flags=re.M))


def test_the_collection_is_there():
    assert len(URDFS) >= 60, URDFS
    assert set(REFUSED) <= set(URDFS) and set(FAULTY) <= set(URDFS)


# ---------------------------------------------------------------------- the policies
@pytest.mark.parametrize("rel, fb", LOADABLE, ids=IDS)
def test_loads_under_warn_and_strict_refuses_what_warn_names(rel, fb):
    m, msgs = load(rel, fb)
    assert m.inertia_policy == "warn" and len(msgs) <= 1
    named = warned_bodies(msgs)
    if VERSION == "6.0.0":
        assert named == FAULTY.get(rel, set()) | (FLOATING_ONLY.get(rel, set()) if fb else set())
    if named:
        assert msgs[0].startswith(str(ROBOTS / rel) + ": ")
        with pytest.raises(PartreeInputError) as ei:
            load(rel, fb, "strict")
        body = re.search(r"body \d+ \((.+?)\) has an invalid rotational inertia", str(ei.value))
        assert body and body.group(1) in named, str(ei.value)
        assert str(ei.value).startswith(str(ROBOTS / rel))
    else:
        s, smsgs = load(rel, fb, "strict")
        assert not smsgs and s.I_com.tobytes() == m.I_com.tobytes()


@pytest.mark.parametrize("rel, fb", LOADABLE, ids=IDS)
def test_fix_passes_strict_and_changes_only_the_named_inertias(rel, fb):
    m, msgs = load(rel, fb)
    f, fmsgs = load(rel, fb, "fix")
    changed = {f.body_names[i] for i in np.flatnonzero(np.any(f.I_com != m.I_com, axis=(1, 2)))}
    assert changed >= warned_bodies(msgs)
    assert changed == warned_bodies(fmsgs)          # the fix warning lists every change (noise clipped too)
    for key in ("parent", "jtype", "axis", "E_tree", "r_tree", "mass", "com"):
        assert getattr(f, key).tobytes() == getattr(m, key).tobytes(), key
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        partree.Model(f.parent, f.jtype, f.axis, f.E_tree, f.r_tree, f.mass, f.com, f.I_com, axis2=f.axis2,
                      gravity=f.gravity, joint_names=f.joint_names, body_names=f.body_names,
                      allow_massless=True, inertia="strict")


def test_fix_is_mujocos_balanceinertia():
    """Every inertia the fix balances, given to MuJoCo as a body's fullinertia with
    ``<compiler balanceinertia="true"/>``, compiles to the same principal moments.  MuJoCo has no
    tolerance for rounding noise below zero, so it gets the inertia with the noise clipped (as the
    fix does first); it refuses a truly negative moment, which "fix" accepts only inside a
    positive semi-definite rigid body (tiago's antennas): those are checked to be the mean."""
    mujoco = pytest.importorskip("mujoco")
    from partree.inertia import Principal

    compared = negative = 0
    for rel in sorted(set(FAULTY) | set(FLOATING_ONLY)):
        if rel not in URDFS:
            continue
        m, _ = load(rel, True)
        f, _ = load(rel, True, "fix")
        P = Principal(m.I_com)
        for i in np.flatnonzero(P.triangle | P.negative):
            new = np.linalg.eigvalsh(f.I_com[i])
            if P.negative[i]:
                np.testing.assert_allclose(new, np.full(3, P.ev[i].mean()), rtol=1e-14)
                negative += 1
                continue
            if np.array_equal(P.clipped[i], P.ev[i]):
                Ic = m.I_com[i]
                spec = "fullinertia=\"" + " ".join(repr(float(Ic[a, b])) for a, b in
                                                   ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))) + "\""
            else:       # noise clipped: MuJoCo refuses a full inertia whose eigenvalues come out at -1e-22
                spec = "diaginertia=\"" + " ".join(repr(float(x)) for x in P.clipped[i]) + "\""
            xml = (f'<mujoco><compiler balanceinertia="true"/><worldbody><body name="b"><joint type="hinge"/>'
                   f'<inertial pos="0 0 0" mass="{float(m.mass[i])!r}" {spec}/></body></worldbody></mujoco>')
            ref = np.sort(mujoco.MjModel.from_xml_string(xml).body_inertia[1])
            np.testing.assert_allclose(new, ref, rtol=1e-13, err_msg=f"{rel} {m.body_names[i]}")
            compared += 1
    if VERSION == "6.0.0":
        assert compared == 31 and negative == 6


def test_rounding_noise_is_accepted_by_strict():
    """icub's ankles have principal moments [-1.36e-20 0 1.36e-20]: zero, written with noise."""
    rel = "icub_description/robots/icub.urdf"
    if rel not in URDFS:
        pytest.skip(f"{rel} is not in this example-robot-data")
    m, msgs = load(rel, True, "strict")
    assert not msgs
    assert np.linalg.eigvalsh(m.I_com[m.body_names.index("l_ankle_2")])[0] < 0       # kept as written
    f, fmsgs = load(rel, True, "fix")
    assert "l_ankle_2" in warned_bodies(fmsgs) and "rounding noise clipped" in fmsgs[0]


# ---------------------------------------------------------------------- the files that do not load
REFUSED_CASES = [(f, fb) for f in sorted(REFUSED) if f in URDFS for fb in REFUSED[f]]


@pytest.mark.parametrize("rel, fb", REFUSED_CASES,
                         ids=[case_id(f, fb) for f, fb in REFUSED_CASES])
def test_refused_files_say_why(rel, fb):
    needles, _reason = REFUSED[rel][fb]
    for policy in ("warn", "fix", "strict"):
        with pytest.raises(PartreeInputError) as ei:
            load(rel, fb, policy)
        msg = str(ei.value)
        assert msg.startswith(str(ROBOTS / rel))
        for needle in needles:
            assert needle in msg, f"{needle!r} not in {msg!r}"


def test_refusals_agree_with_pinocchio():
    path = lambda rel: str(ROBOTS / rel)     # noqa: E731
    if "ur_description/urdf/ur3.urdf" in URDFS:
        with pytest.raises(Exception, match="valid URDF"):
            pin.buildModelFromUrdf(path("ur_description/urdf/ur3.urdf"))
    if "hector_description/robots/quadrotor_base.urdf" in URDFS:
        assert pin.buildModelFromUrdf(path("hector_description/robots/quadrotor_base.urdf")).nv == 0
        assert partree.load_urdf(path("hector_description/robots/quadrotor_base.urdf"), floating_base=True).nv == 6
    rel = "romeo_description/urdf/romeo.urdf"
    if rel in URDFS:
        with pytest.raises(PartreeInputError) as ei:
            load(rel, False)
        ours = re.findall(r"joint '([^']+)' \(body \d+, \w+\): the", str(ei.value))
        count = int(re.search(r"(\d+) moving joints", str(ei.value)).group(1))
        pm = pin.buildModelFromUrdf(path(rel))
        pd = pm.createData()
        rng = np.random.default_rng(3)
        q = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
        M = pin.crba(pm, pd, q)
        d = np.diag(M)
        zero = {pm.names[j] for j in range(1, pm.njoints) if d[pm.joints[j].idx_v] <= 1e-14 * d.max()}
        assert count == len(zero) == 24 and set(ours) <= zero and len(ours) == 20
        assert np.isnan(pin.aba(pm, pd, q, rng.normal(size=pm.nv), rng.normal(size=pm.nv))).any()
    rel = "romeo_description/urdf/romeo_laas_small.urdf"
    if rel in URDFS:
        pm = pin.buildModelFromUrdf(path(rel))
        ev = np.linalg.eigvalsh(pm.inertias[pm.getJointId("LHipPitch_joint")].inertia)
        assert ev[0] < -1e-3 * ev[2]


# ---------------------------------------------------------------------- dynamics against Pinocchio
class PinTwin:
    """Pinocchio's own model of the file and the maps of q and v between the two, by joint name."""

    def __init__(self, model, path, floating):
        args = (pin.JointModelFreeFlyer(),) if floating else ()
        self.p = pin.buildModelFromUrdf(str(path), *args)
        self.d = self.p.createData()
        assert self.p.nv == model.nv
        self.vmap = np.zeros(model.nv, dtype=np.int64)
        self.q_parts = []
        for i in np.flatnonzero(model.nv_j > 0):
            jm = self.p.joints[self.p.getJointId(model.joint_names[i])]
            vs = model.v_slice(i)
            assert jm.nv == vs.stop - vs.start, model.joint_names[i]
            self.vmap[vs] = np.arange(jm.idx_v, jm.idx_v + jm.nv)
            self.q_parts.append((model.q_slice(i), jm.idx_q, jm.nq))

    def q(self, q):
        out = np.zeros(self.p.nq)
        for sl, iq, nq in self.q_parts:
            if nq == 2 and sl.stop - sl.start == 1:      # continuous joint: Pinocchio stores (cos, sin)
                out[iq:iq + 2] = np.cos(q[sl.start]), np.sin(q[sl.start])
            else:
                out[iq:iq + nq] = q[sl]
        return out

    def v(self, x):
        out = np.zeros(self.p.nv)
        out[self.vmap] = x
        return out


def rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(b).max())


@pytest.mark.parametrize("rel_path, fb", LOADABLE, ids=IDS)
def test_dynamics_against_pinocchio(rel_path, fb):
    """CRBA and RNEA to 1e-12 relative.  ABA's accelerations are as exact as the mass matrix's
    condition number allows (icub's is 1e8: both libraries' answers carry its rounding): the
    forward error is held to 1e-15 cond(M) (floored at 1e-12) and the backward error, Pinocchio's
    RNEA of our accelerations against the torques, to 1e-12 of ||M|| ||qdd|| + ||tau||."""
    m, _ = load(rel_path, fb)
    t = PinTwin(m, ROBOTS / rel_path, fb)
    if m.nv == 0:       # every joint fixed (iris_simple on a fixed base): nothing moves
        return
    rng = np.random.default_rng(7)
    for _ in range(2):
        q = m.random_configuration(rng)
        qd = m.random_velocity(rng, 2.0)
        qdd = rng.normal(size=m.nv)
        tau = rng.normal(size=m.nv)
        qp = t.q(q)
        M = partree.crba(m, q)
        Mp = pin.crba(t.p, t.d, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert rel(M, Mp[np.ix_(t.vmap, t.vmap)]) < 1e-12
        tau_p = pin.rnea(t.p, t.d, qp, t.v(qd), t.v(qdd))[t.vmap]
        assert rel(partree.rnea(m, q, qd, qdd), tau_p) < 1e-12
        a = partree.aba(m, q, qd, tau)
        a_p = pin.aba(t.p, t.d, qp, t.v(qd), t.v(tau))[t.vmap]
        cond = np.linalg.cond(M)
        assert rel(a, a_p) < max(1e-12, 1e-15 * cond), cond
        back = pin.rnea(t.p, t.d, qp, t.v(qd), t.v(a))[t.vmap] - tau
        assert np.linalg.norm(back) < 1e-12 * (np.linalg.norm(M, 2) * np.linalg.norm(a) + np.linalg.norm(tau))
