"""Model generators (partree.models.generators) and the seed papers' examples (partree.models.seeds,
partree.models.scissor)."""
import time

import numpy as np
import pytest

import partree
from partree import joints as J
from partree.models import (binary_tree, cardan_chain, chain, random_tree, space_robot, three_arm_inputs,
                            three_arm_manipulator)
from partree.models.generators import binary_depth, random_parents
from partree.models.scissor import rectangular_bar_inertia, scissor_mast
from partree.models.seeds import hexagonal_prism_inertia, hexagonal_prism_volume, three_arm_link_inertia

ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def run_aba(model, seed=0):
    q = model.random_configuration(seed)
    qd = model.random_velocity(seed + 1)
    tau = np.random.default_rng(seed + 2).uniform(-1, 1, model.nv)
    qdd = partree.aba(model, q, qd, tau)
    assert qdd.shape == (model.nv,)
    assert np.all(np.isfinite(qdd))
    return qdd


def assert_physical(model):
    """Regular numbering, unit axes, rotations, positive masses, valid rotational inertias."""
    n = model.n
    assert np.all(model.parent < np.arange(n)) and np.all(model.parent >= -1)
    assert model.parent[0] == -1
    model.validate()
    assert np.all(model.mass > 0)
    ev = np.linalg.eigvalsh(model.I_com)
    assert np.all(ev[:, 0] > 0)
    assert np.all(ev[:, 0] + ev[:, 1] >= ev[:, 2] * (1 - 1e-12))
    uni = model.jtype == J.UNIVERSAL
    if uni.any():
        assert np.allclose(np.einsum("ij,ij->i", model.axis[uni], model.axis2[uni]), 0.0, atol=1e-12)


# ------------------------------------------------------------------------------------------ chain
@pytest.mark.parametrize("joint", ALL_TYPES)
def test_chain_sizes_and_topology(joint):
    n = 7
    m = chain(n, joint=joint)
    code = J.code_of(joint)
    assert m.n == n
    assert np.array_equal(m.parent, np.arange(n) - 1)
    assert m.nq == n * J.NQ[code] and m.nv == n * J.NV[code]
    ptr, idx = m.chains()
    assert len(ptr) == 2 and np.array_equal(idx, np.arange(n))
    assert np.array_equal(m.depth(), np.arange(n))
    assert_physical(m)
    if m.nv:
        run_aba(m)


def test_chain_geometry_and_alternation():
    m = chain(5, length=[1.0, 2.0, 3.0, 4.0, 5.0], mass=2.0, alternate=True)
    assert np.allclose(m.r_tree[1:, 0], [1, 2, 3, 4])
    assert np.allclose(m.com[:, 0], 0.5 * np.arange(1, 6))
    assert np.allclose(m.axis, [[0, 0, 1], [0, 1, 0], [0, 0, 1], [0, 1, 0], [0, 0, 1]])
    assert np.allclose(chain(3).axis, [[0, 0, 1]] * 3)
    assert m.total_mass() == pytest.approx(10.0)
    # mixed joint types given per body
    mixed = chain(4, joint=["revolute", "spherical", "universal", "prismatic"])
    assert mixed.nq == 1 + 4 + 2 + 1 and mixed.nv == 1 + 3 + 2 + 1
    run_aba(mixed)


def test_chain_rejects_bad_input():
    with pytest.raises(ValueError):
        chain(0)
    with pytest.raises(ValueError):
        chain(3, joint="hinge")
    with pytest.raises(ValueError):
        chain(3, length=[1.0, 2.0])


# ------------------------------------------------------------------------------------ binary tree
def test_binary_tree_topology():
    n = 2**6 - 1
    m = binary_tree(n)
    i = np.arange(n)
    assert np.array_equal(m.parent[1:], (i[1:] - 1) // 2)
    assert np.array_equal(m.depth(), np.floor(np.log2(i + 1)).astype(int))
    assert np.array_equal(binary_depth(n), m.depth())
    assert m.depth().max() == 5
    # complete tree: 2^d bodies at depth d, every inner body has two children
    assert np.array_equal(np.bincount(m.depth()), 2 ** np.arange(6))
    assert np.array_equal(m.num_children(), np.where(i < n // 2, 2, 0))
    assert np.array_equal(m.subtree_sizes()[:3], [63, 31, 31])
    assert m.nq == m.nv == n
    assert_physical(m)
    run_aba(m)


def test_binary_tree_depth_exact_for_large_indices():
    d = binary_depth(2**20)
    assert d[2**19 - 2] == 18 and d[2**19 - 1] == 19 and d[-1] == 20


@pytest.mark.parametrize("joint", ["prismatic", "universal", "spherical"])
def test_binary_tree_other_joints(joint):
    m = binary_tree(20, joint=joint)
    assert m.nv == 20 * J.NV[J.code_of(joint)]
    run_aba(m)


# ------------------------------------------------------------------------------------ random tree
def test_random_tree_deterministic():
    a = random_tree(300, seed=42)
    b = random_tree(300, seed=42)
    c = random_tree(300, seed=43)
    for k in ("parent", "jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert not np.array_equal(a.parent, c.parent)
    assert not np.array_equal(a.mass, c.mass)
    d = random_tree(300, seed=7, max_children=2)
    e = random_tree(300, seed=7, max_children=2)
    assert np.array_equal(d.parent, e.parent) and np.array_equal(d.I_com, e.I_com)


def test_random_tree_is_valid_and_mixed():
    m = random_tree(2000, seed=1)
    assert_physical(m)
    counts = np.bincount(m.jtype, minlength=len(J.NAMES))
    for t in ("revolute", "prismatic", "universal", "spherical", "fixed"):
        assert counts[J.code_of(t)] > 200, t
    assert counts[J.FREE] == 0
    assert m.nq == int(J.NQ[m.jtype].sum()) and m.nv == int(J.NV[m.jtype].sum())
    # random placements: proper rotations, not all identity
    assert np.allclose(np.linalg.det(m.E_tree), 1.0)
    assert np.abs(m.E_tree - np.eye(3)).max() > 0.5
    # inertias in random orientation: not diagonal
    assert np.abs(m.I_com[:, 0, 1]).max() > 1e-3
    run_aba(m)


def test_random_tree_floating_base():
    m = random_tree(200, seed=5, floating_base=True)
    assert m.jtype[0] == J.FREE and np.count_nonzero(m.jtype == J.FREE) == 1
    assert m.q_slice(m.joint_names[0]) == slice(0, 7)
    assert_physical(m)
    run_aba(m)
    # free joints anywhere
    f = random_tree(100, seed=6, joint_types=("free", "spherical", "revolute"), floating_base=True)
    assert np.count_nonzero(f.jtype == J.FREE) > 10
    run_aba(f)


def test_random_tree_options():
    m = random_tree(500, seed=2, max_children=3)
    assert m.num_children().max() <= 3
    assert m.num_children().max() == 3
    c = random_tree(50, seed=2, max_children=1)
    assert np.array_equal(c.parent, np.arange(50) - 1)
    # long chains
    assert random_tree(500, seed=2, p_chain=0.9).depth().max() > 5 * random_tree(500, seed=2).depth().max()
    # joint type weights and a single type
    w = random_tree(400, seed=3, joint_types={"revolute": 3, "spherical": 1})
    counts = np.bincount(w.jtype, minlength=len(J.NAMES))
    assert counts[J.REVOLUTE] > 2 * counts[J.SPHERICAL] > 0 and counts.sum() == 400
    r = random_tree(30, seed=3, joint_types="universal")
    assert np.all(r.jtype == J.UNIVERSAL) and r.nv == 60
    run_aba(r)
    with pytest.raises(ValueError):
        random_tree(10, joint_types=())
    with pytest.raises(ValueError):
        random_tree(10, max_children=0)


def test_random_parents_regular():
    rng = np.random.default_rng(0)
    for k in (None, 1, 2, 5):
        p = random_parents(1000, rng, max_children=k)
        assert p[0] == -1 and np.all(p[1:] >= 0) and np.all(p < np.arange(1000))
        if k is not None:
            assert np.bincount(p[1:]).max() <= k


def test_large_generators_build_fast():
    chain(1000)
    binary_tree(1000)        # warm up
    for gen in (chain, binary_tree):
        t = time.perf_counter()
        m = gen(10**6)
        dt = time.perf_counter() - t
        assert m.n == 10**6 and m.nv == 10**6
        assert dt < 5.0, f"{gen.__name__}(10**6) took {dt:.2f} s"
    assert binary_tree(10**6).depth().max() == 19


# ------------------------------------------------------------------------------- seed 000: space robot
def test_space_robot_parameters():
    m = space_robot()
    assert m.n == 7 and m.nq == 7 + 6 and m.nv == 6 + 6
    assert m.jtype[0] == J.FREE and np.all(m.jtype[1:] == J.REVOLUTE)
    # the paper's link labels name the joints; L11 is the joint between link L11 and the base
    for k, label in enumerate(["base", "L11", "L12", "L13", "L21", "L22", "L23"]):
        assert m.joint_id(label) == k
        assert m.body_names[k] == label
    assert m.parent[m.joint_id("L11")] == 0 and m.parent[m.joint_id("L21")] == 0
    assert m.parent[m.joint_id("L13")] == m.joint_id("L12")
    assert np.array_equal(m.nodes(), [0])
    # base: hexagonal prism 1.2 m tall, 0.8 m edge, density 200 kg/m^3, frame at the CoM
    vol = 1.5 * np.sqrt(3) * 0.8**2 * 1.2
    assert hexagonal_prism_volume(0.8, 1.2) == pytest.approx(vol)
    assert m.mass[0] == pytest.approx(200.0 * vol)
    assert np.allclose(m.com[0], 0.0)
    mb = m.mass[0]
    assert np.allclose(m.I_com[0], np.diag([mb * (5 * 0.64 / 24 + 1.44 / 12)] * 2 + [5 * mb * 0.64 / 12]))
    # arms: identical, mounted on opposite side faces at the apothem
    assert np.allclose(m.mass[1:], [10, 15, 15, 10, 15, 15])
    assert np.allclose(m.r_tree[1], [0.8 * np.sqrt(3) / 2, 0, 0])
    assert np.allclose(m.r_tree[4], [-0.8 * np.sqrt(3) / 2, 0, 0])
    assert np.allclose(m.r_tree[[2, 3, 5, 6], 0], [0.5, 1.5, 0.5, 1.5])
    assert np.allclose(m.gravity, 0.0)
    assert_physical(m)
    assert space_robot(base_mass=500.0).mass[0] == 500.0
    assert space_robot(link_lengths=(1, 1, 1, 1), link_masses=(5, 5, 5, 5)).n == 9


def test_hexagonal_prism_inertia_against_sampling():
    """The closed form agrees with a Monte Carlo integral over the solid prism."""
    a, h, m = 0.8, 1.2, 1.0
    rng = np.random.default_rng(0)
    p = rng.uniform([-a, -a, -h / 2], [a, a, h / 2], size=(400_000, 3))
    x, y = np.abs(p[:, 0]), np.abs(p[:, 1])
    r3 = np.sqrt(3.0)
    inside = (y <= a * r3 / 2) & (r3 * x + y <= r3 * a)     # vertices at (+-a, 0)
    p = p[inside]
    assert p.shape[0] / 400_000 == pytest.approx(hexagonal_prism_volume(a, h) / (2 * a * 2 * a * h), rel=0.01)
    I = m * np.array([np.mean(p[:, 1] ** 2 + p[:, 2] ** 2), np.mean(p[:, 0] ** 2 + p[:, 2] ** 2),
                      np.mean(p[:, 0] ** 2 + p[:, 1] ** 2)])
    assert np.allclose(np.diag(hexagonal_prism_inertia(m, a, h)), I, rtol=0.01)


def test_space_robot_dynamics():
    m = space_robot()
    # at rest, no torque, no gravity: nothing moves
    qdd = partree.aba(m, m.neutral(), np.zeros(m.nv), np.zeros(m.nv))
    assert np.allclose(qdd, 0.0, atol=1e-14)
    # a shoulder torque spins the floating base the other way (momentum conservation)
    tau = np.zeros(m.nv)
    tau[m.v_slice("L11")] = 1.0
    qdd = partree.aba(m, m.neutral(), np.zeros(m.nv), tau)
    assert qdd[m.v_slice("base")][5] < 0 < qdd[m.v_slice("L11")][0]
    run_aba(m)


# ------------------------------------------------------------------------------ seed 001: Cardan chain
@pytest.mark.parametrize("n", [5, 20, 50])
def test_cardan_chain(n):
    m = cardan_chain(n)
    assert m.n == n and m.nq == m.nv == 2 * n
    assert np.all(m.jtype == J.UNIVERSAL)
    assert np.array_equal(m.parent, np.arange(n) - 1)
    assert len(m.chains()[0]) == 2
    assert np.allclose(m.axis, [0, 1, 0]) and np.allclose(m.axis2, [0, 0, 1])
    assert np.allclose(m.mass, 1.0) and np.allclose(m.r_tree[1:], [1.0, 0, 0])
    assert_physical(m)
    run_aba(m)


# --------------------------------------------------------------------------- seed 002: three-arm tree
def test_three_arm_parameters():
    m = three_arm_manipulator()
    assert m.n == 10 and m.nq == m.nv == 10 and np.all(m.jtype == J.REVOLUTE)
    assert [m.joint_names[i] for i in range(10)] == [f"J{k}" for k in range(1, 11)]
    # three arms on the base: J1-J4, J5-J7, J8-J10
    assert np.array_equal(m.roots(), [0, 4, 7])
    assert np.array_equal(m.parent, [-1, 0, 1, 2, -1, 4, 5, -1, 7, 8])
    ptr, idx = m.chains()
    assert [list(idx[ptr[c]:ptr[c + 1]]) for c in range(3)] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert m.body_names[6] == "arm2_link3"
    # every link: 1 kg, 0.4 m, inertia about the inner joint diag(0.1, 0.13, 0.13), CoM mid-link
    assert np.allclose(m.mass, 1.0)
    assert np.allclose(m.com, [0.2, 0, 0])
    inner = m.parent >= 0
    assert np.allclose(np.linalg.norm(m.r_tree[inner], axis=1), 0.4)
    c = m.com
    I_joint = m.I_com + m.mass[:, None, None] * (np.einsum("ni,ni->n", c, c)[:, None, None] * np.eye(3)
                                                  - np.einsum("ni,nj->nij", c, c))
    assert np.allclose(I_joint, np.diag([0.1, 0.13, 0.13]))
    com, Ic = three_arm_link_inertia()
    assert np.allclose(Ic, np.diag([0.1, 0.09, 0.09]))
    assert_physical(m)
    run_aba(m)


def test_three_arm_floating_base():
    m = three_arm_manipulator(floating_base=True)
    assert m.n == 11 and m.nv == 16 and m.nq == 17          # the paper's 16 rigid DOF
    assert m.jtype[0] == J.FREE and m.joint_names[0] == "base"
    assert np.array_equal(np.flatnonzero(m.parent == 0), [1, 5, 8])
    assert m.joint_id("J1") == 1 and m.joint_id("J10") == 10
    assert_physical(m)
    run_aba(m)


def test_three_arm_inputs():
    inp = three_arm_inputs()
    assert set(inp.active) == {"J1", "J5", "J6"}
    assert set(inp.passive) == {"J2", "J3", "J4", "J7", "J8", "J9", "J10"}
    for floating in (False, True):
        m = three_arm_manipulator(floating_base=floating)
        t = 0.7
        tau = inp.tau(m, t)
        assert tau.shape == (m.nv,)
        assert np.allclose(tau[inp.passive_dofs(m)], 10 * np.sin(t))
        assert np.count_nonzero(tau) == 7
        dofs, q, qd, qdd = inp.prescribed(m, t)
        A = np.deg2rad(3.0)
        assert np.array_equal(dofs, [m.v_slice(j).start for j in ("J1", "J5", "J6")])
        assert np.allclose(q, A * np.sin(t)) and np.allclose(qd, A * np.cos(t)) and np.allclose(qdd, -A * np.sin(t))
        q0, qd0 = inp.initial_state(m)
        assert np.allclose(qd0, 0.0) and np.allclose(q0, m.neutral())
        _, qd0c = inp.initial_state(m, consistent=True)
        assert np.allclose(qd0c[dofs], A)
        # forward dynamics under the passive torques is finite
        qdd_all = partree.aba(m, q0, qd0, tau)
        assert np.all(np.isfinite(qdd_all))


# ------------------------------------------------------------------------- seed 004: scissor mast
def test_scissor_mast_parameters():
    m = scissor_mast()                                   # the paper's 3-level mechanism
    assert m.n == 6 and m.nv == 6 and np.all(m.jtype == J.REVOLUTE)
    assert m.units.dtype == np.int64 and m.units.tolist() == [0, 0, 1, 1, 2, 2]
    assert m.parent.tolist() == [-1, 0, 0, 2, 2, 4]      # A_k on A_{k-1}'s tip, B_k on A_k's midpoint
    assert np.allclose(m.axis, [0.0, 1.0, 0.0])
    bar = 2750.0 * 1.0 * 0.005 * 0.030                   # paper: 1 m, 5 mm x 30 mm, 2750 kg/m^3
    assert np.allclose(m.mass, bar) and np.isclose(bar, 0.4125)
    I = np.diag([bar * (0.005**2 + 0.03**2) / 12, bar * (1 + 0.03**2) / 12, bar * (1 + 0.005**2) / 12])
    assert np.allclose(m.I_com, I)
    assert np.allclose(rectangular_bar_inertia(bar, 1.0, 0.005, 0.03), I)
    assert np.allclose(m.com[0::2], [0.5, 0, 0]) and np.allclose(m.com[1::2], 0.0)
    assert_physical(m)
    run_aba(m)


@pytest.mark.parametrize("units,angle,hub", [(3, 30.0, 0.0), (6, 55.0, 0.0), (5, 30.0, 0.2)])
def test_scissor_mast_geometry(units, angle, hub):
    """At q = 0 the mast stands at the given angle and the pins left out of the tree close."""
    from partree.algorithms.kinematics import forward_kinematics

    m = scissor_mast(units, angle_deg=angle, hub_mass=hub)
    per = 3 if hub else 2
    assert m.n == per * units and m.units.tolist() == np.repeat(np.arange(units), per).tolist()
    kin = forward_kinematics(m, m.neutral())

    def point(i, x):                                     # world position of a point of body i
        return kin.p[i] + kin.R[i] @ np.asarray(x, dtype=float)

    c, s = np.cos(np.deg2rad(angle)), np.sin(np.deg2rad(angle))
    A, B = per * np.arange(units), per * np.arange(units) + 1
    for k in range(units):
        sign = 1.0 if k % 2 == 0 else -1.0
        assert np.allclose(point(A[k], [0, 0, 0]), [-sign * c / 2, 0, k * s])
        assert np.allclose(point(A[k], [1, 0, 0]), [sign * c / 2, 0, (k + 1) * s])
        assert np.allclose(point(B[k], [0, 0, 0]), [0, 0, (k + 0.5) * s])          # the scissor pin
        assert np.allclose(point(B[k], [-0.5, 0, 0]), [sign * c / 2, 0, k * s])
        if k + 1 < units:                                # left-out pin between B_k and B_{k+1}
            assert np.allclose(point(B[k], [0.5, 0, 0]), point(B[k + 1], [-0.5, 0, 0]))
        if hub:
            assert np.allclose(point(A[k] + 2, [0, 0, 0]), point(A[k], [1, 0, 0]))
            assert m.mass[A[k] + 2] == hub
    assert np.allclose(kin.p[:, 1], 0.0)                 # planar: x-z plane
    assert_physical(m)


def test_scissor_mast_rejects_bad_input_and_builds_big():
    for kw in ({"units": 0}, {"angle_deg": 90.0}, {"angle_deg": 0.0}, {"length": -1.0}, {"hub_mass": -1.0},
               {"hub_mass": 1.0, "hub_radius": 0.0}):
        with pytest.raises(ValueError):
            scissor_mast(**kw)
    t = time.perf_counter()
    m = scissor_mast(500_000)
    assert m.n == 10**6 and np.unique(m.units).size == 500_000
    assert time.perf_counter() - t < 10.0


# ----------------------------------------------------------------------------------- spec registry
@pytest.mark.parametrize("spec,nv", [("chain:n=12,joint=universal", 24), ("binary:n=31", 31),
                                     ("random:n=40,seed=3,floating_base=true", None), ("spacerobot", 12),
                                     ("cardan:n=5", 10), ("threearm", 10), ("threearm:floating_base=true", 16),
                                     ("scissor", 6), ("scissor:units=5,hub_mass=0.1", 15)])
def test_specs(spec, nv):
    specs = pytest.importorskip("partree.specs")
    m = specs.resolve_model(spec)
    if nv is not None:
        assert m.nv == nv
    run_aba(m)
    if spec.startswith("random"):
        assert np.array_equal(m.parent, random_tree(40, seed=3, floating_base=True).parent)
    assert (m.units is not None) == spec.startswith("scissor")
