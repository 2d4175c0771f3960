"""Closed scissor masts (seed 004, partree.models.scissor): the planar mast with every pin as a
loop on a slider or pinned support, the spatial (triangle, square) masts, their mobility, the
driving-force law, the geometry of deployment, the spec strings and the inputs refused."""
import pickle

import numpy as np
import pytest

import partree
from partree.algorithms.kinematics import forward_kinematics
from partree.errors import PartreeInputError
from partree.models.scissor import (ScissorDrive, scissor_angle, scissor_drive, scissor_height, scissor_mast)

L = 1.0
G = 9.81
BAR = 2750.0 * 1.0 * 0.005 * 0.030          # kg, the paper's bar
TH0 = np.deg2rad(30.0)


def dense_J(m, q=None, qd=None):
    lc = partree.loop_constraints(m, m.neutral() if q is None else q, qd)
    return lc, lc.J.toarray()


def rank_and_null(Jd):
    """Numerical rank of J (singular values above 1e-9 of the largest) and its null space."""
    _, s, vt = np.linalg.svd(Jd)
    rank = int((s > 1e-9 * s[0]).sum())
    return rank, vt[rank:].T


def point(kin, body, x):
    return kin.p[body] + kin.R[body] @ np.asarray(x, dtype=float)


def rel_residual(lc, qdd):
    """max |J qdd - gamma| relative to the size of its terms."""
    Jq = lc.J @ qdd
    scale = max(np.abs(lc.gamma).max(initial=0.0), np.abs(lc.J).max() * np.abs(qdd).max(), 1e-300)
    return float(np.abs(Jq - lc.gamma).max() / scale)


# ----------------------------------------------------------------------------- closed planar
@pytest.mark.parametrize("units", [1, 3, 10])
@pytest.mark.parametrize("support,hub", [("slider", 0.0), ("pinned", 0.0), ("slider", 0.1)])
def test_closed_planar_mast_is_closed_at_q0(units, support, hub):
    m = scissor_mast(units, closed=True, support=support, hub_mass=hub)
    lay = m.scissor
    lc, Jd = dense_J(m)
    assert np.abs(lc.phi).max() < 1e-12
    rank, N = rank_and_null(Jd)
    for v in N.T:                                             # J qd = 0 along the null space
        assert np.abs(partree.loop_constraints(m, m.neutral(), v).velocity).max() < 1e-12
    # every pin of the mechanism: the loops are the tree's left-out ones, named readably
    assert m.loops.names == ["pin_A0_ground"] + [f"pin_B{k}_B{k + 1}" for k in range(units - 1)]
    assert all(k == "point_on_line" for k in (lp.kind for lp in m.loops))         # the plane's pins, 2 rows
    # unit labels: unit 0 holds the carriage (slider), B_0, A_0 (and hub_0); one unit per label
    per = 3 if hub else 2
    c0 = 1 if support == "slider" else 0
    assert m.units.tolist() == [0] * (c0 + per) + np.repeat(np.arange(1, units), per).tolist()
    assert (lay.carriage == 0) == (support == "slider")
    # the places of q = 0: the paper's initial angle, each unit l sin(angle) high, in the x-z plane
    kin = forward_kinematics(m, m.neutral())
    c, s = np.cos(TH0), np.sin(TH0)
    for k in range(units):
        sign = 1.0 if k % 2 == 0 else -1.0
        for which, x0 in (("A", -sign), ("B", sign)):
            lo, hi = point(kin, *lay.bar_point(which, k, 0, 0.0)), point(kin, *lay.bar_point(which, k, 0, 1.0))
            assert np.allclose(lo, [x0 * c / 2, 0, k * s], atol=1e-14)
            assert np.allclose(hi, [-x0 * c / 2, 0, (k + 1) * s], atol=1e-14)
            assert np.isclose(np.linalg.norm(hi - lo), L)
        if hub:
            assert np.allclose(kin.p[lay.hub(k)], point(kin, *lay.bar_point("A", k, 0, 1.0)))
    assert np.allclose(kin.p[:, 1], 0.0)
    assert np.isclose(scissor_angle(m, m.neutral()), TH0) and np.isclose(scissor_height(m, m.neutral()), units * s)


@pytest.mark.parametrize("units", [1, 3, 10])
def test_mobility_of_the_planar_mast(units):
    """Slider: one degree of freedom (theta_1); both ends pinned: locked, J's independent rows
    square and of full rank."""
    m = scissor_mast(units, closed=True)
    rank, N = rank_and_null(dense_J(m)[1])
    assert m.nv == 2 * units + 1 and m.nv - rank == 1
    # the one motion draws the carriage in and opens every unit alike (B_0's joint is theta_1)
    v = N[:, 0] / N[1, 0]
    assert v[0] > 0                                      # the carriage slides inwards as theta_1 grows

    pinned = scissor_mast(units, closed=True, support="pinned")
    Jp = dense_J(pinned)[1]
    assert pinned.nv == 2 * units and np.linalg.matrix_rank(Jp) == pinned.nv
    r = partree.constrained_dynamics(pinned, pinned.neutral(), np.zeros(pinned.nv), np.ones(pinned.nv))
    assert r.rank == pinned.nv and r.independent.sum() == pinned.nv
    assert np.abs(r.qdd).max() < 1e-9                                   # locked: nothing moves
    hubs = scissor_mast(units, closed=True, hub_mass=0.1)                # welded hubs add no freedom
    assert hubs.nv - rank_and_null(dense_J(hubs)[1])[0] == 1


@pytest.mark.parametrize("section,sides", [("triangle", 3), ("square", 4)])
@pytest.mark.parametrize("units", [1, 3])
def test_mobility_of_the_spatial_masts(section, sides, units):
    """Faces of planar scissor stacks joined at corner hubs: one degree of freedom on the radial
    sliders, none pinned; along the one motion no hub turns and every bar turns about its own
    pin axis only (no spinning bars), and the section shrinks as the mast rises."""
    m = scissor_mast(units, section=section)
    assert m.n == 3 * sides * units + sides and m.nv == m.n
    lc, Jd = dense_J(m)
    assert np.abs(lc.phi).max() < 1e-12
    rank, N = rank_and_null(Jd)
    assert m.nv - rank == 1
    qd = N[:, 0] * np.sign(N[0, 0])                                      # the root slider moving inwards
    assert np.abs(partree.loop_constraints(m, m.neutral(), qd).velocity).max() < 1e-12
    kin = forward_kinematics(m, m.neutral(), qd)
    lay = m.scissor
    hubs = [lay.hub(lv, c) for lv in range(units + 1) for c in range(sides)]
    assert np.abs(kin.v[hubs, :3]).max() < 1e-12                        # hubs translate only
    bars = [lay.bar(w, k, f) for w in "AB" for k in range(units) for f in range(sides)]
    w = kin.v[bars, :3]                                                  # body-frame angular velocities
    assert np.abs(w[:, [0, 2]]).max() < 1e-12 and np.abs(w[:, 1]).min() > 1e-6 * np.abs(w[:, 1]).max()
    assert np.abs(np.abs(w[:, 1]) - np.abs(w[0, 1])).max() < 1e-9 * np.abs(w[0, 1])   # one angle for all
    vz_top = kin.v[lay.hub(units, 0), 3:] @ kin.R[lay.hub(units, 0)].T[2]
    assert vz_top > 0                                                    # drawn in, it rises

    pinned = scissor_mast(units, section=section, support="pinned")
    assert pinned.nv - rank_and_null(dense_J(pinned)[1])[0] == 0


# ----------------------------------------------------------------------------- dynamics
@pytest.mark.parametrize("kw", [{"closed": True}, {"closed": True, "hub_mass": 0.1}, {"section": "triangle"}])
def test_constrained_dynamics_satisfies_the_loops(kw):
    m = scissor_mast(3, **kw)
    rng = np.random.default_rng(3)
    q0 = m.neutral()
    _, N = rank_and_null(dense_J(m)[1])
    qd = N @ rng.normal(size=N.shape[1])
    tau = rng.normal(size=m.nv)
    r = partree.constrained_dynamics(m, q0, qd, tau)
    lc = partree.loop_constraints(m, q0, qd)
    assert rel_residual(lc, r.qdd) < 1e-9
    # the equations of motion: M qdd + h = tau + J^T lambda
    M, h = partree.crba(m, q0), partree.bias_forces(m, q0, qd)
    res = M @ r.qdd + h - tau - lc.J.T @ r.multipliers
    assert np.abs(res).max() < 1e-9 * max(np.abs(tau).max(), np.abs(h).max())


@pytest.mark.parametrize("support,hub", [("slider", 0.0), ("pinned", 0.0), ("slider", 0.1)])
def test_planar_pins_and_revolute_pins_are_the_same_mechanism(support, hub):
    """pins='point_on_line' (2 rows a pin, the default) and pins='revolute' (5 rows, 3 of them
    repeating the tree's planar joints): the same rank and mobility, the same motion, the same
    pin forces (the revolute pins' out-of-plane rows carry none)."""
    units = 6
    m2 = scissor_mast(units, closed=True, support=support, hub_mass=hub)
    m5 = scissor_mast(units, closed=True, support=support, hub_mass=hub, pins="revolute")
    assert m2.loops.names == m5.loops.names
    assert m2.loops.nrow == 2 * len(m2.loops) and m5.loops.nrow == 5 * len(m5.loops)
    r2, N = rank_and_null(dense_J(m2)[1])
    assert r2 == rank_and_null(dense_J(m5)[1])[0] == m2.loops.nrow          # the 2-row pins: independent
    rng = np.random.default_rng(8)
    qd = N @ rng.normal(size=N.shape[1]) if N.shape[1] else np.zeros(m2.nv)
    tau = rng.normal(size=m2.nv)
    a, b = (partree.constrained_dynamics(m, m.neutral(), qd, tau) for m in (m2, m5))
    assert a.rank == b.rank == m2.loops.nrow and a.independent.all()
    assert np.abs(a.qdd - b.qdd).max() < 1e-9 * max(np.abs(b.qdd).max(), 1.0)
    assert np.abs(a.loop_force - b.loop_force).max() < 1e-9 * np.abs(b.loop_force).max()
    out_of_plane = np.abs(a.loop_force[:, [0, 1, 2, 4]]).max()       # moments and the force along the pin (y)
    assert out_of_plane < 1e-14 * np.abs(a.loop_force).max()


def test_holding_force_of_the_drive_is_the_static_balance():
    """F_hold from virtual work: planar, F l sin(th) = m g l cos(th) U^2 (each of the U units' 2
    bars at mid-height of its unit); spatial, the N base hubs pulled in against the bars and the
    corner hubs: F = 2 sin(pi / N) g cot(th) (m U^2 + m_h U (U + 1) / 2)."""
    for U in (1, 3, 10):
        d = ScissorDrive(scissor_mast(U, closed=True))
        assert np.isclose(d.hold, BAR * G * U * U / np.tan(TH0), rtol=1e-9)
        assert np.isclose(scissor_drive(scissor_mast(U, closed=True), top=True).hold, d.hold / 2, rtol=1e-9)
    for sec, N in (("triangle", 3), ("square", 4)):
        U, mh = 3, 0.05
        d = ScissorDrive(scissor_mast(U, section=sec))
        assert np.isclose(d.hold, 2 * np.sin(np.pi / N) * G / np.tan(TH0) * (BAR * U * U + mh * U * (U + 1) / 2),
                          rtol=1e-9)
    # O(N) virtual work: exact on long masts too (a constrained-dynamics balance loses digits there)
    for U in (1000, 10000):
        assert np.isclose(ScissorDrive(scissor_mast(U, closed=True)).hold, BAR * G * U * U / np.tan(TH0), rtol=1e-12)
    U, mh = 300, 0.05
    assert np.isclose(ScissorDrive(scissor_mast(U, section="square")).hold,
                      2 * np.sin(np.pi / 4) * G / np.tan(TH0) * (BAR * U * U + mh * U * (U + 1) / 2), rtol=1e-12)
    for kw in ({"closed": True}, {"closed": True, "gravity": (1.0, 0.5, -9.81)},
               {"section": "square", "gravity": (2.0, -1.0, -9.0)}):
        m = scissor_mast(3, **kw)
        for top in (False, True):
            d = ScissorDrive(m, top=top)
            r = partree.constrained_dynamics(m, m.neutral(), np.zeros(m.nv), d(0.0, m.neutral(), np.zeros(m.nv)))
            assert np.abs(r.qdd).max() < 1e-10                           # at rest in equilibrium
    m = scissor_mast(3, closed=True)
    d = ScissorDrive(m)
    assert d.force(0.0) == d.hold and np.isclose(d.force(0.05), 1.5 * d.hold) and np.isclose(d.force(1), 2 * d.hold)
    assert ScissorDrive(m, force=10.0, ramp=0.0).force(0.0) == 10.0
    assert ScissorDrive(m, force=lambda t: 3.0 * t).force(2.0) == 6.0


@pytest.mark.parametrize("kw,top", [({"closed": True}, False), ({"closed": True}, True),
                                    ({"section": "triangle"}, False)])
def test_the_drive_deploys_the_mast_in_its_one_dof_motion(kw, top):
    """Gravity and the drive law for 0.2 s (0.1 s for the triangle): the loops stay closed, the
    angle grows from rest, every unit keeps the same angle (height U l sin(theta_1), every bar at
    theta_1), and the drive's work is the change of energy."""
    m = scissor_mast(3, **kw)
    drive = ScissorDrive(m, top=top)
    t_end = 0.1 if "section" in kw else 0.2
    res = partree.simulate(m, t_end, 1e-3, torques=drive, progress=False, integrator="rk4")
    assert res.violation is not None and res.violation.max() < 1e-10
    assert res.summary["loops"]["max_violation"] < 1e-10
    th = np.array([scissor_angle(m, q) for q in res.q])
    assert th[0] == pytest.approx(TH0) and np.all(np.diff(th) > 0) and th[-1] > TH0 + np.deg2rad(0.25)
    H = np.array([scissor_height(m, q) for q in res.q])
    assert np.abs(H - 3 * L * np.sin(th)).max() < 1e-9
    lay = m.scissor
    for q, t1 in zip(res.q[::20], th[::20]):
        kin = forward_kinematics(m, q)
        for which in "AB":
            for k in range(3):
                for f in range(lay.sides):
                    b = lay.bar(which, k, f)
                    x = kin.R[b][:, 0]
                    assert np.isclose(np.arcsin(x[2]), t1, atol=1e-9)
    power = np.array([drive(t, q, qd) @ qd for t, q, qd in zip(res.t, res.q, res.qd)])
    work = np.concatenate(([0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * np.diff(res.t))))
    dE = res.energy - res.energy[0]
    assert np.abs(dE - work).max() < 1e-4 * np.abs(dE).max()


@pytest.mark.parametrize("kw", [{"closed": True}, {"section": "triangle"}, {"section": "square"}])
def test_height_of_the_top_follows_the_planar_geometry(kw):
    """Closed at other angles (assembled with the driving joint held): the top stands at
    U l sin(theta_1), the same as the mast built at that angle."""
    U = 4
    m = scissor_mast(U, **kw)
    lay = m.scissor
    for deg in (10.0, 45.0, 75.0):
        th = np.deg2rad(deg)
        if lay.sides == 1:                                  # theta_1 = angle + q of B_0's joint
            fixed = {int(lay.bar("B", 0)): th - TH0}
        else:                                               # the root hub's inward slide shrinks the section
            fixed = {0: (np.cos(TH0) - np.cos(th)) * L / (2 * np.sin(np.pi / lay.sides))}
        q = partree.assemble(m, m.neutral(), fixed=fixed)
        assert np.abs(partree.loop_constraints(m, q).phi).max() < 1e-10
        assert np.isclose(scissor_angle(m, q), th, atol=1e-10)
        assert np.isclose(scissor_height(m, q), U * L * np.sin(th), atol=1e-10)
        other = scissor_mast(U, angle_deg=deg, **kw)
        assert np.isclose(scissor_height(other, other.neutral()), U * L * np.sin(th))


# ----------------------------------------------------------------------------- specs, inputs
def test_spec_strings():
    m = partree.resolve_model("scissor:units=3,closed=true,support=slider")
    assert m.nv == 7 and len(m.loops) == 3 and m.scissor.support == "slider" and m.loops.nrow == 6
    assert partree.resolve_model("scissor:units=3,closed=true,pins=revolute").loops.nrow == 15
    p = partree.resolve_model("scissor:units=5,closed=true,support=pinned")
    assert p.nv == 10 and p.scissor.support == "pinned"
    t = partree.resolve_model("scissor:units=2,section=triangle")
    assert t.nv == 21 and t.scissor.section == "triangle" and t.scissor.closed
    h = partree.resolve_model("scissor:units=3,closed=true,unit_height=0.7071067811865476")
    assert np.isclose(scissor_angle(h, h.neutral()), np.pi / 4)
    assert partree.resolve_model("scissor:units=3").nv == 6 and not len(partree.resolve_model("scissor").loops)
    with pytest.raises(PartreeInputError, match="support"):
        partree.resolve_model("scissor:units=3,closed=true,support=roller")


@pytest.mark.parametrize("kw,match", [
    ({"angle_deg": 0.0, "closed": True}, "lock-up"),
    ({"angle_deg": 90.0, "closed": True}, "lock-up"),
    ({"angle_deg": 95.0}, "lock-up"),
    ({"angle_deg": -10.0}, "lock-up"),
    ({"angle_deg": float("nan"), "closed": True}, "angle_deg"),
    ({"angle_deg": 90.0 - 1e-6, "closed": True}, "lock-up"),
    ({"unit_height": 1.0, "closed": True}, "cannot be"),
    ({"unit_height": 1.5}, "cannot be"),
    ({"unit_height": 0.0, "section": "triangle"}, "cannot be"),
    ({"unit_height": 0.5, "angle_deg": 30.0}, "not both"),
    ({"closed": True, "support": "roller"}, "unknown support"),
    ({"section": "hexagon"}, "unknown section"),
    ({"support": "slider"}, "closed"),
    ({"section": "triangle", "closed": False}, "only closed"),
    ({"section": "triangle", "hub_mass": 0.0}, "hubs"),
    ({"closed": True, "carriage_mass": 0.0}, "carriage_mass"),
    ({"closed": True, "length": -1.0}, "length"),
    ({"closed": True, "pins": "spherical"}, "unknown pins"),
    ({"pins": "revolute"}, "closed"),
    ({"section": "square", "pins": "point_on_line"}, "planar"),
])
def test_bad_input_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        scissor_mast(3, **kw)


def test_the_drive_refuses_masts_it_cannot_drive():
    with pytest.raises(ValueError, match="pinned"):
        ScissorDrive(scissor_mast(3, closed=True, support="pinned"))
    with pytest.raises(ValueError, match="open"):
        ScissorDrive(scissor_mast(3))
    with pytest.raises(ValueError, match="scissor layout"):
        ScissorDrive(partree.resolve_model("chain:n=3"))
    with pytest.raises(ValueError, match="ramp"):
        ScissorDrive(scissor_mast(3, closed=True), ramp=-1.0)


def test_the_carriage_force_alone_gives_the_drives_motion_on_every_backend_form():
    """``carriage_torques``: the drive's force on the carriage as a per-joint function of time
    (what the distributed backends and ``partree simulate --drive`` take) moves the mast as the
    whole ScissorDrive does (the fixed pin's end force only adds to its pin's reaction)."""
    m = partree.resolve_model("scissor:units=3,closed=true,support=slider")
    drive = ScissorDrive(m)
    ct = drive.carriage_torques()
    assert list(ct) == [m.joint_names[m.scissor.carriage]]
    f = next(iter(ct.values()))
    assert f(0.0) == pytest.approx(drive.hold) and f(1.0) == pytest.approx(2 * drive.hold)
    assert pickle.loads(pickle.dumps(f))(0.05) == f(0.05)
    a = partree.simulate(m, 0.2, 1e-3, torques=drive, progress=False)
    b = partree.simulate(m, 0.2, 1e-3, torques=ct, progress=False)
    assert np.abs(a.q - b.q).max() < 1e-10
    with pytest.raises(ValueError, match="carriage_torques"):
        ScissorDrive(m, top=True).carriage_torques()
    with pytest.raises(ValueError, match="carriage_torques"):
        ScissorDrive(partree.resolve_model("scissor:units=2,section=triangle")).carriage_torques()


def test_cli_drive(tmp_path):
    """``partree simulate ... --drive`` deploys a closed mast; other models are refused."""
    import subprocess
    import sys

    out = tmp_path / "mast.npz"
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "scissor:units=3,closed=true,support=slider",
                        "--drive", "--t-end", "0.1", "--dt", "1e-3", "--out", str(out), "--no-progress"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = partree.load_results(str(out))
    assert res.violation.max() < 1e-9
    m = partree.resolve_model("scissor:units=3,closed=true,support=slider")
    angle = [scissor_angle(m, q) for q in res.q]
    assert angle[-1] > angle[0]
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "chain:n=3", "--drive", "--t-end", "0.01",
                        "--no-progress"], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode != 0 and "--drive" in p.stderr


def test_lock_up_is_refused_by_the_drive_and_stays_finite_with_the_carriage_force():
    """Driven hard, the mast reaches lock-up (base ends together, every bar upright): the
    ScissorDrive refuses the state with a clear error; the carriage force (a function of time,
    blind to the state) carries the run through it, finite and closed: the carriage passes the
    fixed pin and the planar mechanism opens again the other way (the model has no stop)."""
    m = partree.resolve_model("scissor:units=3,closed=true,support=slider")
    with pytest.raises(PartreeInputError, match="lock-up"):
        partree.simulate(m, 0.6, 1e-3, torques=ScissorDrive(m, force=2000.0, ramp=0.0), progress=False)
    res = partree.simulate(m, 0.6, 1e-3, torques=ScissorDrive(m, force=2000.0, ramp=0.0).carriage_torques(),
                           progress=False, save_every=20)
    assert np.all(np.isfinite(res.q)) and np.all(np.isfinite(res.qd))
    assert res.violation.max() < 1e-9
    c = m.scissor.carriage
    assert res.q[:, m.idx_q[c]].max() > m.scissor.length * np.cos(m.scissor.angle)     # past the fixed pin
