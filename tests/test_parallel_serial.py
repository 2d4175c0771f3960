"""The parallel decomposition run serially equals ABA."""
import numpy as np
import pytest

import partree
from partree.models import auto_tree
from partree.models.generators import binary_tree, chain, random_tree
from partree.parallel.partition import partition_from_roots
from partree.parallel.serial import SerialEngine, forward_dynamics_serial

MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def _models():
    return {
        "chain": chain(40, joint=["revolute", "prismatic", "universal", "spherical"] * 10, alternate=True),
        "autochain": auto_tree(30, skew=0.4, taper=0.97),
        "binary": binary_tree(63, joint=["revolute", "universal", "spherical"] * 21),
        "random": random_tree(120, seed=7, joint_types=MIXED),
        "random_fb": random_tree(90, seed=8, floating_base=True),
        "random_chains": random_tree(100, seed=9, p_chain=0.8, floating_base=True, joint_types=MIXED),
    }


def _rel(a, b):
    return float(np.abs(a - b).max() / max(1e-300, np.abs(b).max()))


def _state(m, seed):
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)


@pytest.mark.parametrize("name", list(_models()))
def test_equals_aba(name):
    m = _models()[name]
    q, qd, tau = _state(m, 1)
    ref = partree.aba(m, q, qd, tau)
    nchains = m.chains()[0].size - 1
    for P in [1, 2, 3, 5, 8, nchains + 3, m.n]:
        P = min(P, m.n)
        eng = SerialEngine(m, P)
        assert eng.partition.nparts == P
        x = eng.forward_dynamics(q, qd, tau)
        assert _rel(x, ref) < 1e-10, (name, P, _rel(x, ref))
        # reusable: a second state through the same engine
        q2, qd2, tau2 = _state(m, 2)
        assert _rel(eng.forward_dynamics(q2, qd2, tau2), partree.aba(m, q2, qd2, tau2)) < 1e-10
        # the kinematics of every body in the velocity step (as the MPI / Dask backends do)
        ek = SerialEngine(m, eng.partition, early_kinematics=True)
        assert np.array_equal(ek.forward_dynamics(q, qd, tau), x)


def test_many_children_on_one_handle_and_nested_handles():
    m = random_tree(80, seed=11, joint_types=MIXED, floating_base=True)
    q, qd, tau = _state(m, 3)
    ref = partree.aba(m, q, qd, tau)
    # every child of body 0 a part (several parts on one handle), plus deeper cuts
    kids = list(m.children(0))
    roots = kids + [i for i in range(10, 80, 7)]
    pt = partition_from_roots(m, roots)
    assert max(pt.child_parts(k).size for k in range(pt.nparts)) >= 2
    x = forward_dynamics_serial(m, q, qd, tau, parts=pt)
    assert _rel(x, ref) < 1e-10


def test_zero_velocity_and_gravity_free():
    m = binary_tree(31)
    q = m.random_configuration(0)
    qd = np.zeros(m.nv)
    tau = np.zeros(m.nv)
    assert _rel(forward_dynamics_serial(m, q, qd, tau, parts=4), partree.aba(m, q, qd, tau)) < 1e-10
    m2 = random_tree(40, seed=1, gravity=(0.0, 0.0, 0.0))
    q, qd, tau = _state(m2, 5)
    assert _rel(forward_dynamics_serial(m2, q, qd, tau, parts=5), partree.aba(m2, q, qd, tau)) < 1e-10


def test_larger_model():
    m = auto_tree(3000, bf=1.3, skew=0.2)
    q, qd, tau = _state(m, 6)
    ref = partree.aba(m, q, qd, tau)
    for P in (2, 7, 32):
        assert _rel(forward_dynamics_serial(m, q, qd, tau, parts=P), ref) < 1e-10


def test_bad_input_message():
    m = auto_tree(10)
    q, qd, tau = _state(m, 0)
    q[3] = np.nan
    with pytest.raises(partree.PartreeInputError, match=r"q\[3\]"):
        forward_dynamics_serial(m, q, qd, tau, parts=2)


@pytest.mark.parametrize("name", ["chain", "random", "random_fb"])
def test_external_forces(name):
    m = _models()[name]
    q, qd, tau = _state(m, 7)
    F = np.random.default_rng(3).normal(size=(m.n, 6))
    ref = partree.aba(m, q, qd, tau, f_ext=F)
    for P in (1, 3, 7):
        assert _rel(forward_dynamics_serial(m, q, qd, tau, parts=P, f_ext=F), ref) < 1e-10
    # the dict form, as for aba
    d = {m.joint_names[2]: F[2]}
    assert _rel(SerialEngine(m, 4).forward_dynamics(q, qd, tau, d), partree.aba(m, q, qd, tau, f_ext=d)) < 1e-10


def test_bad_arguments_clear_errors_before_work():
    from partree.parallel import forward_dynamics

    m = auto_tree(12)
    q, qd, tau = _state(m, 0)
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        forward_dynamics(m, q, qd, tau, backend="gpu", parts=2)
    with pytest.raises(partree.PartreeInputError, match="parts=13"):
        forward_dynamics(m, q, qd, tau, parts=13)
    with pytest.raises(partree.PartreeInputError, match="parts=0"):
        forward_dynamics(m, q, qd, tau, parts=0)
    other = auto_tree(13)                       # a model that does not match the state
    with pytest.raises(partree.PartreeInputError, match=r"q has shape \(12,\)"):
        forward_dynamics(other, q, qd, tau, parts=2)
    with pytest.raises(partree.PartreeInputError, match="f_ext"):
        forward_dynamics(m, q, qd, tau, parts=2, f_ext=np.zeros((5, 6)))


def test_one_part_engine_is_plain_aba_cost():
    """The 1-part engine fuses the kinematics into pass 1: no velocity work, same arrays as ABA."""
    m = auto_tree(500)
    eng = SerialEngine(m, 1)
    pk = eng.parts[0]
    assert pk.H == 0 and pk.pbod.size == 0 and pk.G.shape[0] == 0
    assert isinstance(pk.qix, slice) and isinstance(pk.vix, slice)


@pytest.mark.parametrize("skew", [0.0, 0.5])
def test_long_chain_walk_stops_where_the_handle_influence_dies_out(skew):
    """On a long chain the handle's sensitivity dies out along the path: on the planar chain
    (skew 0) Y becomes exactly zero past the first bodies (the out-of-plane columns of G~ are
    transmitted rigidly and meet no joint axis), on the 3-D chain G~ vanishes and the walk stops.
    Either way only a short stretch of Y is non-zero, and the result still equals ABA."""
    m = auto_tree(20000, skew=skew)
    q, qd, tau = _state(m, 4)
    ref = partree.aba(m, q, qd, tau)
    eng = SerialEngine(m, 2)
    x = eng.forward_dynamics(q, qd, tau)
    assert _rel(x, ref) < 1e-10
    top = eng.parts[0]
    L = top.path_idx.size
    depth = L - int(top.ylo[0])                 # path positions (from the handle) with Y not zero
    assert L > 8000 and 0 < depth < L // 2, (L, depth)
    assert np.all(top.Yst[:int(top.ylo[0])] == 0) or skew > 0   # (3-D: the walk stopped, rows unread)
    if skew > 0:
        assert np.all(top.Kt == 0)              # G~ died out: the base feels no handle wrench
    else:
        assert np.abs(top.Kt).max() > 0.1       # planar: the out-of-plane columns go through
    # a second state through the same engine (the stopping point moves; stale Y must not leak)
    q2, qd2, tau2 = _state(m, 5)
    assert _rel(eng.forward_dynamics(q2, qd2, tau2), partree.aba(m, q2, qd2, tau2)) < 1e-10
    # the rows the back-substitution reads (from ylo on) are those a fresh engine writes: the walk
    # writes only the rows with Y not zero and fills the gaps between them with zeros
    fresh = SerialEngine(m, 2)
    fresh.forward_dynamics(q2, qd2, tau2)
    lo = int(top.ylo[0])
    assert lo == int(fresh.parts[0].ylo[0])
    assert np.array_equal(top.Yst[lo:], fresh.parts[0].Yst[lo:])


def test_walk_reach_is_the_frame0_components_of_the_path():
    """``reach`` (the components the path bodies' S~ and e~ can occupy in frame 0): a planar chain
    of z revolutes moves in (omega_z, v_x, v_y) only; an out-of-plane v_in, a 3-D chain, a prismatic
    joint along z or a joint of several DOF reach further."""
    from partree.joints import PRISMATIC, SPHERICAL
    from partree.parallel.kernels import walk_reach

    def top_reach(m, v_in=np.zeros(6)):
        eng = SerialEngine(m, 2)
        q, qd, tau = _state(m, 3)
        eng.forward_dynamics(q, qd, tau)
        return int(walk_reach(eng.parts[0].reach[0], v_in))

    planar = 0b011100
    assert top_reach(auto_tree(400)) == planar
    assert top_reach(auto_tree(400), np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])) == planar | 0b100000
    assert top_reach(auto_tree(400), np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])) == 0b111111
    assert top_reach(auto_tree(400), np.array([0.0, 0.0, 2.0, 1.0, 0.0, 0.0])) == planar
    assert top_reach(auto_tree(400, skew=0.5)) == 0b111111
    for jt, want in ((PRISMATIC, planar | 0b100000), (SPHERICAL, 0b111111)):
        m = auto_tree(400)
        m.jtype[20] = jt
        if jt == SPHERICAL:
            m = partree.Model(m.parent, m.jtype, m.axis, m.E_tree, m.r_tree, m.mass, m.com, m.I_com)
        assert top_reach(m) == want


def test_planar_walk_stops_once_the_reached_rows_of_G_are_zero():
    """On a planar chain the walk stops where the in-plane columns of G~ have died out: the rows
    of G~ in ``reach`` are then zero, and the bodies above add exact zeros.  The bodies above are
    not read: made NaN there, the walk returns the same relations bit for bit; walked with every
    component reachable (no stop), it reads them and returns NaN."""
    from partree.parallel import kernels as K

    m = auto_tree(20000)
    q, qd, tau = _state(m, 4)
    eng = SerialEngine(m, 2)
    assert _rel(eng.forward_dynamics(q, qd, tau), partree.aba(m, q, qd, tau)) < 1e-10
    top = eng.parts[0]
    top.velocity(q[top.qix], qd[top.vix])
    top.reduce(np.zeros(6), tau[top.vix])
    want = [x.copy() for x in (top.Kt, top.Lam, top.beta, top.Yst)]
    lo = int(top.ylo[0])
    assert top.H == 1 and top.path_idx.size > 8000 and lo > top.path_idx.size // 2
    c = top.c.copy()
    c[:lo] = np.nan                         # the bodies above the last update
    reach = int(K.walk_reach(top.reach[0], np.zeros(6)))
    for every, finite in ((reach, True), (63, False)):
        top.Yst[:] = want[3]
        K._sensitivities(top.m, top.nv, top.idx_v, top.path_ptr, top.path_idx, top.cp, top.slot, top.TEb,
                         top.Trb, top.yptr, top.Yst, top.ylo, top.S, c, top.U, top.Dinv, top.u, top.G, top.Kt,
                         top.Psi, top.Lam, top.beta, every)
        assert np.all(np.isfinite(top.beta)) == finite
        if finite:
            for x, w in zip((top.Kt, top.Lam, top.beta, top.Yst[lo:]), want[:3] + [want[3][lo:]]):
                assert np.array_equal(x, w)


def test_walk_writes_every_row_it_leaves_to_the_back_substitution():
    """The walk stores only the rows of Y that are not zero and fills the gaps between them with
    zeros.  A planar chain with one prismatic joint along z deep in the top part: past the first
    bodies from the handle Y is exactly zero (the out-of-plane columns of G~ meet only z
    revolutes), until that joint, which meets them; so the rows the back-substitution reads have
    a long zero gap, whose extent changes with the state.  Neither rows left from the previous
    state nor rows poisoned with NaN may reach the result."""
    from partree.joints import PRISMATIC

    m = auto_tree(20000)
    k = 2000                                       # in the top part, ~7400 bodies from its handle
    m.jtype[k] = PRISMATIC
    eng = SerialEngine(m, 2)
    top = eng.parts[0]
    assert top.path_idx.size > 8000 and top.bodies[0] <= k < top.bodies[-1] - 5000
    gaps = []
    for seed in (4, 5, 4):
        q, qd, tau = _state(m, seed)
        assert _rel(eng.forward_dynamics(q, qd, tau), partree.aba(m, q, qd, tau)) < 1e-10
        lo = int(top.ylo[0])
        fresh = SerialEngine(m, 2)
        fresh.forward_dynamics(q, qd, tau)
        assert lo == int(fresh.parts[0].ylo[0]) and np.array_equal(top.Yst[lo:], fresh.parts[0].Yst[lo:])
        rows = np.any(top.Yst[lo:] != 0, axis=1)
        assert rows[0] and rows[-1]
        gaps.append(int((~rows).sum()))
        top.Yst[:] = np.nan
    assert min(gaps) > 1000 and gaps[0] != gaps[1]


def test_multi_handle_parts_on_long_paths():
    """Parts with several handles keep G~ per path position for the cross terms; with long decaying
    paths the zero-Y skip must leave those cross terms right."""
    m = auto_tree(4000, bf=1.002, skew=0.3)
    q, qd, tau = _state(m, 8)
    ref = partree.aba(m, q, qd, tau)
    # a branching body near the base, and a cut ~1000 bodies down each of its two branches:
    # the top part then has two handles whose paths share the way from the base to the branch
    kids = np.bincount(m.parent[m.parent >= 0], minlength=m.n)
    b = int(np.flatnonzero(kids >= 2)[0])
    cuts = []
    for c in m.children(b)[:2]:
        i, d = int(c), 0
        while d < 1000 and kids[i] > 0:
            i, d = int(m.children(i)[0]), d + 1
        cuts.append(i)
    eng = SerialEngine(m, partition_from_roots(m, cuts))
    assert eng.parts[0].H == 2 and min(np.diff(eng.parts[0].path_ptr)) > 900
    assert _rel(eng.forward_dynamics(q, qd, tau), ref) < 1e-10


def test_partition_for_ranks_engine_equals_aba():
    from partree.parallel.partition import partition_for_ranks

    m = auto_tree(3000, bf=2)
    q, qd, tau = _state(m, 9)
    ref = partree.aba(m, q, qd, tau)
    for R in (2, 3, 4):
        pt = partition_for_ranks(m, R, path_weight=0.22)
        assert _rel(forward_dynamics_serial(m, q, qd, tau, parts=pt), ref) < 1e-10


def test_early_kinematics_only_where_a_rank_walks_a_long_path():
    from partree.parallel.partition import partition_for_ranks
    from partree.parallel.part import early_kinematics_wanted

    chain_m = auto_tree(5000)
    pt = partition_for_ranks(chain_m, 2, path_weight=0.22)
    assert early_kinematics_wanted(chain_m, pt, pt.owner)       # rank 0 walks ~45% of the chain
    tree_m = auto_tree(5000, bf=2)
    pt = partition_for_ranks(tree_m, 2, path_weight=0.22)
    assert not early_kinematics_wanted(tree_m, pt, pt.owner)    # paths of ~12 bodies
    assert not early_kinematics_wanted(tree_m, pt, np.zeros(pt.nparts, dtype=np.int64))   # one rank


def test_part_pickles_without_its_workspace():
    """A part sent to an MPI rank or a Dask worker carries its slice of the model, not its workspace;
    the copy allocates its own and evaluates to the same result."""
    import pickle

    import numpy as np

    import partree
    from partree.parallel import root as R
    from partree.parallel.serial import SerialEngine

    m = partree.models.auto_tree(400, bf=1.5)
    rng = np.random.default_rng(3)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    eng = SerialEngine(m, 3)
    ref = eng.forward_dynamics(q, qd, tau).copy()
    blobs = [pickle.dumps(pk, protocol=5) for pk in eng.parts]
    for pk, b in zip(eng.parts, blobs):
        assert len(b) < 0.5 * pk.nbytes
    eng.parts = [pickle.loads(b) for b in blobs]
    vel = [pk.velocity(q[pk.qix], qd[pk.vix]) for pk in eng.parts]
    v_in = R.compose_velocities(eng.tree, vel)
    red = [pk.reduce(v_in[k], tau[pk.vix]) for k, pk in enumerate(eng.parts)]
    a_in, g = R.solve(eng.tree, red, eng.a0)
    x = np.empty(m.nv)
    for k, pk in enumerate(eng.parts):
        x[pk.vsel] = pk.solve(a_in[k], g[k])
    assert np.array_equal(x, ref)


def _cfa_errors(res, ref):
    return [_rel(res.qdd, ref.qdd), _rel(res.joint_wrench, ref.joint_wrench),
            _rel(res.constraint_force, ref.constraint_force), _rel(res.drive_force, ref.drive_force),
            float(np.abs(res.constraint_rows - ref.constraint_rows).max())]


@pytest.mark.parametrize("name", list(_models()))
def test_constraint_forces_equal_cfa(name):
    """Joint wrenches, constraint and drive forces through the decomposition equal serial CFA's
    for every part count, more parts than chains and one body per part included."""
    from partree.parallel import constraint_forces

    m = _models()[name]
    q, qd, tau = _state(m, 3)
    F = np.random.default_rng(4).normal(size=(m.n, 6))
    nchains = m.chains()[0].size - 1
    for f in (None, F):
        ref = partree.cfa(m, q, qd, tau, f_ext=f)
        for P in [1, 2, 5, min(nchains + 3, m.n), m.n]:
            res = constraint_forces(m, q, qd, tau, backend="serial", parts=P, f_ext=f)
            assert max(_cfa_errors(res, ref)) < 1e-10, (P, _cfa_errors(res, ref))
            assert res.method == "parallel-serial"
    # and RNEA's wrenches of ABA's motion (an independent reference: no CFA code involved)
    _, W = partree.rnea(m, q, qd, partree.aba(m, q, qd, tau, f_ext=F), f_ext=F, return_wrenches=True)
    assert _rel(res.joint_wrench, W) < 1e-10
    j = m.joint_names[m.n // 2]
    assert np.allclose(res.constraint_wrench_of(j), ref.constraint_wrench_of(j), rtol=0, atol=1e-9)


def test_constraint_forces_engine_reuse_and_handle_wrenches():
    """An engine reused for several states, with a part whose handles carry several child parts:
    the handle wrenches g of the root solve are what the wrench pass needs."""
    m = random_tree(200, seed=12, max_children=4, joint_types=MIXED)
    roots = [int(r) for r in np.flatnonzero(np.bincount(m.parent[m.parent >= 0], minlength=m.n) >= 2)[:3]]
    kids = np.flatnonzero(np.isin(m.parent, roots))
    pt = partition_from_roots(m, kids[:8])
    eng = SerialEngine(m, pt)
    assert np.any(np.bincount(pt.handle[pt.handle >= 0]) >= 2)
    for s in range(3):
        q, qd, tau = _state(m, 20 + s)
        res = eng.constraint_forces(q, qd, tau)
        assert max(_cfa_errors(res, partree.cfa(m, q, qd, tau))) < 1e-10


def test_run_index_puts_and_takes_as_the_index_does():
    """RunIndex.put and take (slice copies per run where the runs are few) equal dst[index] = src
    and src[index], and Take those of a slice or an index array: one run, a few runs, a
    permutation (many runs: the index itself), nothing."""
    from partree.parallel.part import RunIndex, Take, fast_index

    rng = np.random.default_rng(0)
    n = 5000
    cases = [np.arange(100, 3100), np.concatenate((np.arange(4000, 4500), np.arange(0, 1000), np.arange(2000, 2001))),
             rng.permutation(n), np.zeros(0, dtype=np.int64)]
    for idx in cases:
        ri = RunIndex(idx)
        src = rng.normal(size=idx.size)
        a, b = np.zeros(n), np.zeros(n)
        a[idx] = src
        ri.put(b, src)
        assert np.array_equal(a, b)
        x = rng.normal(size=n)
        got = ri.take(x)
        assert np.array_equal(got, x[idx]) and not np.shares_memory(got, x)
        assert np.array_equal(Take(fast_index(idx))(x), x[idx])
    assert RunIndex(cases[1]).runs is not None and len(RunIndex(cases[1]).runs) == 3
    assert RunIndex(cases[2]).runs is None
    assert isinstance(fast_index(cases[0]), slice) and np.shares_memory(Take(fast_index(cases[0]))(x), x)
