"""The hierarchical root (partree.parallel.hierarchical_root): merged and split relations give what
the flat root (partree.parallel.root) gives, in one process up to P = 10^4 parts; under real
mpiexec (16 and 32 oversubscribed ranks) the MPI engine's tree root against the flat root and
the serial backend."""
import numpy as np
import pytest

import partree
from partree.models.generators import binary_tree, random_tree
from partree.parallel import hierarchical_root as HR
from partree.parallel import root as R
from partree.parallel.serial import SerialEngine

MIXED = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")


def _rel(a, b):
    a = np.concatenate([np.ravel(x) for x in a]) if isinstance(a, list) else np.ravel(a)
    b = np.concatenate([np.ravel(x) for x in b]) if isinstance(b, list) else np.ravel(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)) if b.size else 0.0


def _boundary(m, parts, seed=0):
    eng = SerialEngine(m, parts=parts)
    rng = np.random.default_rng(seed)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv)
    vel = [pk.velocity(q[pk.qix], qd[pk.vix]) for pk in eng.parts]
    v_in = R.compose_velocities(eng.tree, vel)
    red = [pk.reduce(v_in[k], tau[pk.vix], None) for k, pk in enumerate(eng.parts)]
    return eng, vel, v_in, red


def _check(eng, vel, v_in, red, plan):
    a_in, g = R.solve(eng.tree, red, eng.a0)
    v2 = HR.compose_velocities(eng.tree, vel, plan=plan)
    a2, g2 = HR.solve(eng.tree, red, eng.a0, plan=plan)
    assert _rel(v2, v_in) < 1e-10
    assert _rel(a2, a_in) < 1e-10
    assert _rel(g2, g) < 1e-10
    assert all(x.shape == y.shape for x, y in zip(g, g2))


@pytest.mark.parametrize("name,make,parts", [
    ("chain", lambda: partree.specs.resolve_model("autotree:nb=300,bf=1"), 40),
    ("binary", lambda: binary_tree(255), 40),
    ("random", lambda: random_tree(300, seed=3, floating_base=True, joint_types=MIXED), 60),
    ("long chains", lambda: random_tree(200, seed=5, p_chain=0.8, joint_types=MIXED), 25),
])
@pytest.mark.parametrize("fanin", [2, 3, 5])
def test_tree_root_equals_flat_root(name, make, parts, fanin):
    eng, vel, v_in, red = _boundary(make(), parts)
    owner = np.arange(eng.tree.nparts) % 4          # hosts do not change the result
    _check(eng, vel, v_in, red, HR.make_plan(eng.tree, owner, fanin))


def test_one_part_and_two_parts():
    m = random_tree(30, seed=2, floating_base=True)
    for parts in (1, 2):
        eng, vel, v_in, red = _boundary(m, parts)
        plan = HR.make_plan(eng.tree)
        assert plan.depth == (0 if parts == 1 else 1)
        _check(eng, vel, v_in, red, plan)


def test_chain_of_parts_keeps_two_ports():
    """A chain of parts: every group is a run of segments, one entry and one handle."""
    eng, vel, v_in, red = _boundary(partree.specs.resolve_model("autotree:nb=400,bf=1"), 100)
    plan = HR.make_plan(eng.tree, fanin=2)
    HR.solve(eng.tree, red, eng.a0, plan=plan)
    assert plan.depth == 7
    assert plan.last_stats["max_ports"] <= 2


def test_plan_pieces_cover_every_node_once():
    eng = _boundary(binary_tree(127), 30)[0]
    owner = np.arange(eng.tree.nparts) % 5
    plan = HR.make_plan(eng.tree, owner, 3)
    pieces = [plan.rank_piece(r) for r in range(5)]
    leaves = sorted(p for pc in pieces for p in pc.leaves)
    assert leaves == list(range(eng.tree.nparts))
    groups = sorted(n for pc in pieces for n, _ in pc.groups)
    assert groups == list(range(eng.tree.nparts, len(plan.nodes)))
    assert sorted(plan.order.tolist()) == list(range(eng.tree.nparts))


def test_loops_at_the_root_are_refused():
    tree = R.PartsTree(np.array([-1]), np.array([-1]), np.array([0]), loops=object())
    with pytest.raises(ValueError, match="flat root"):
        HR.make_plan(tree)


def test_ten_thousand_parts():
    """P = 10^4 parts of a random tree of 2 10^4 bodies (real parts' relations), fan-in 2:
    velocities, a_in and every handle's g equal the flat root's."""
    m = random_tree(20000, seed=3, floating_base=True)
    eng, vel, v_in, red = _boundary(m, 10000)
    assert eng.tree.nparts == 10000
    plan = HR.make_plan(eng.tree, np.arange(10000) // 100, 2)      # 100 parts per "rank"
    _check(eng, vel, v_in, red, plan)
    assert plan.depth == 14
    assert plan.last_stats["max_ports"] < 40


def test_one_rank_engine_with_the_tree_root():
    """MPIEngine(root='tree') on a one-rank communicator: every merge local, the same result."""
    MPI = pytest.importorskip("mpi4py.MPI")
    from partree.parallel.mpi import MPIEngine

    m = random_tree(120, seed=7, floating_base=True, joint_types=MIXED)
    rng = np.random.default_rng(1)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    eng = MPIEngine(m, comm=MPI.COMM_SELF, parts=9, root="tree", fanin=3)
    assert eng.root_mode == "tree" and eng.root_stats["depth"] == 2
    assert _rel(eng.forward_dynamics(q, qd, tau), partree.aba(m, q, qd, tau)) < 1e-10
    assert MPIEngine(m, comm=MPI.COMM_SELF, parts=9).root_mode == "flat"          # auto, few parts
    with pytest.raises(ValueError, match="root must be"):
        MPIEngine(m, comm=MPI.COMM_SELF, parts=9, root="star")


def test_tree_root_with_loops_inside_parts():
    """Loops inside parts: forward dynamics and the position correction's step through the tree
    root equal the flat root's (one-rank communicator)."""
    MPI = pytest.importorskip("mpi4py.MPI")
    from loop_models import local_loop_models, state

    from partree.parallel.mpi import MPIEngine

    for m in local_loop_models()[:2]:
        q, qd, tau = state(m, 0)[:3]
        flat = MPIEngine(m, comm=MPI.COMM_SELF, parts=9, root="flat")
        tree = MPIEngine(m, comm=MPI.COMM_SELF, parts=9, root="tree")
        assert tree.root_mode == "tree"
        assert _rel(tree.forward_dynamics(q, qd, tau), flat.forward_dynamics(q, qd, tau)) < 1e-10
        steps = [e.correction_step_local([q[pk.qix] for pk in e.parts], [qd[pk.vix] for pk in e.parts], "position")
                 for e in (flat, tree)]
        assert _rel(steps[1][0], steps[0][0]) < 1e-10
        assert steps[1][1] == pytest.approx(steps[0][1], rel=1e-12, abs=1e-15)


def test_loops_at_the_root_take_the_flat_root():
    MPI = pytest.importorskip("mpi4py.MPI")
    from loop_models import spanning_cases, state

    from partree.parallel.mpi import MPIEngine
    from partree.parallel.partition import partition_from_roots

    m, roots = spanning_cases()[1]
    q, qd, tau = state(m, 1)[:3]
    eng = MPIEngine(m, comm=MPI.COMM_SELF, parts=partition_from_roots(m, roots), root="tree")
    assert eng.root_mode == "flat"
    assert np.all(np.isfinite(eng.forward_dynamics(q, qd, tau)))


# ---------------------------------------------------------------------- under mpiexec
def _mpi_ok(n, *args, timeout=900):
    from test_mpi import MPIEXEC, _run

    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    p, _ = _run(n, "tree_root_check.py", *args, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    line = [s for s in p.stdout.splitlines() if s.startswith("OK")]
    assert line, p.stdout + p.stderr
    return line[0].split()[1:]


@pytest.mark.parametrize("n,args", [(16, ()), (32, ("light",))])
def test_mpi_tree_root_matches_flat_and_serial(n, args):
    pytest.importorskip("mpi4py")
    err, largest, depth, tree_bytes, flat_bytes = _mpi_ok(n, *args)
    assert float(err) < 1e-10
    assert int(depth) >= 5
    assert 0 < int(largest)


@pytest.mark.parametrize("name,make,parts", [
    ("chain", lambda: partree.specs.resolve_model("autotree:nb=300,bf=1"), 40),
    ("binary", lambda: binary_tree(255), 40),
    ("random", lambda: random_tree(300, seed=3, floating_base=True, joint_types=MIXED), 60),
])
@pytest.mark.parametrize("fanin", [2, 3])
def test_momentum_rounds_equal_flat_root(name, make, parts, fanin):
    """The momentum form's rounds through the reduction tree: the gravity field in every part's
    frame 0 and the sums of the parts' totals at every handle equal the flat root's
    (``root.compose_field``, ``root.subtree_totals``), on random totals and parts built with
    poses (the parts hanging from the base report their handles' transforms)."""
    m = make()
    eng = SerialEngine(m, parts=parts, poses=True)
    rng = np.random.default_rng(4)
    q = m.random_configuration(rng)
    vel = [tuple(np.copy(x) for x in pk.velocity(q[pk.qix], np.zeros(pk.nv))) for pk in eng.parts]
    plan = HR.make_plan(eng.tree, np.arange(eng.tree.nparts) % 3, fanin)
    top = -eng.a0
    assert _rel(HR.compose_field(eng.tree, vel, top, plan=plan), R.compose_field(eng.tree, vel, top)) < 1e-12
    up = rng.normal(size=(eng.tree.nparts, 6))
    got, ref = HR.subtree_totals(eng.tree, vel, up, plan=plan), R.subtree_totals(eng.tree, vel, up)
    assert [g.shape for g in got] == [r.shape for r in ref]
    assert _rel(got, ref) < 1e-12


def test_one_rank_engine_momentum_form_with_the_tree_root():
    """The momentum form's right-hand side through MPIEngine(root='tree') on a one-rank
    communicator equals the flat root's and partree.momentum_rhs, with external wrenches."""
    MPI = pytest.importorskip("mpi4py.MPI")
    from partree.parallel.mpi import MPIEngine

    m = random_tree(120, seed=8, floating_base=True, joint_types=MIXED)
    rng = np.random.default_rng(2)
    q, p, F = m.random_configuration(rng), rng.normal(size=m.nv), rng.normal(size=(m.n, 6))
    tree = MPIEngine(m, comm=MPI.COMM_SELF, parts=9, root="tree", fanin=3, poses=True)
    assert tree.root_mode == "tree"
    got = tree.momentum_rhs(q, p, f_ext=F)
    flat = MPIEngine(m, comm=MPI.COMM_SELF, parts=9, root="flat", poses=True).momentum_rhs(q, p, f_ext=F)
    ref = partree.momentum_rhs(m, 0.0, q, p, np.zeros(m.nv), f_ext=F)
    for k in range(2):
        assert _rel(got[k], flat[k]) < 1e-10
        assert _rel(got[k], ref[k]) < 1e-10
