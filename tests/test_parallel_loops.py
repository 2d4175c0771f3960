"""The parallel engine on models with closed loops: every backend against the serial
``partree.constrained_dynamics``.

A part holding loops solves them inside (``partree.parallel.loop_part``); the partitioner keeps
every loop inside one part (except loops between two units) and puts trees that a loop joins
into one part; a loop that a partition splits is solved at the root (``partree.parallel.root``).  Serial engine,
real ``mpiexec -n 2`` / ``-n 3`` and a real Dask ``LocalCluster``."""
import pickle

import numpy as np
import pytest

import partree
from partree import Loop
from partree.errors import PartreeInputError
from partree.parallel import forward_dynamics
from partree.parallel.loop_part import LoopPartKernel
from partree.parallel.partition import partition, partition_from_roots
from partree.parallel.serial import SerialEngine

from loop_models import forest, four_bar, local_loop_models, scissor_pins, spanning_cases, state


def serial(m, q, qd, tau, f_ext=None):
    """The serial reference: ``constrained_dynamics`` with the engine's choice for repeated
    rows (``redundant="drop"``: the rows the pivoting finds dependent carry no force).  The
    states here do not satisfy the loops, where the choice changes qdd as well."""
    return partree.constrained_dynamics(m, q, qd, tau, f_ext=f_ext, redundant="drop")


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def _check(res, ref, tol=1e-10):
    assert rel(res.qdd, ref.qdd) < tol
    assert rel(res.joint_wrench, ref.joint_wrench) < tol
    assert rel(res.constraint_force, ref.constraint_force) < tol
    assert rel(res.drive_force, ref.drive_force) < tol
    assert rel(res.loop_multipliers, ref.multipliers) < tol
    assert rel(res.loop_force, ref.loop_force) < tol


@pytest.mark.parametrize("k", range(3))
def test_serial_engine_equals_constrained_dynamics(k):
    m = local_loop_models()[k]
    q, qd, tau, F = state(m, k)
    ref = serial(m, q, qd, tau, f_ext=F)
    for P in (1, 2, 5, 11):
        eng = SerialEngine(m, P)
        eng.partition.check(m.parent)
        assert any(isinstance(p, LoopPartKernel) for p in eng.parts)
        # parts with loops below other parts and above them: both kinds of boundary relation
        _check(eng.constraint_forces(q, qd, tau, F), ref)
        x = eng.forward_dynamics(q, qd, tau)
        assert rel(x, serial(m, q, qd, tau).qdd) < 1e-10


def test_loop_parts_hold_handles_and_hang_below_others():
    """A loop part with child parts (its handle relations carry the loops) and a loop part that
    hangs from another part (its root relation does)."""
    m = local_loop_models()[1]                       # a chain: parts follow one another
    eng = SerialEngine(m, 9)
    kinds = [(isinstance(p, LoopPartKernel), p.H > 0, not p.top) for p in eng.parts]
    assert (True, True, True) in kinds
    q, qd, tau, F = state(m, 7)
    _check(eng.constraint_forces(q, qd, tau, F), serial(m, q, qd, tau, f_ext=F))


def test_a_loop_parts_boundary_relations_predict_its_solve():
    """For any a_in and handle wrenches g, the back-substitution gives the handle accelerations
    a_h = Psi a_in + Lam g + beta (Psi from reciprocity) and the root joint's wrench
    g_root = M a_in + m0 + Kt g (moved to the root's parent frame)."""
    from partree.algorithms.primitives import xform_force_T_add

    m = local_loop_models()[1]
    eng = SerialEngine(m, 9)
    q, qd, tau, F = state(m, 8)
    rng = np.random.default_rng(1)
    checked = 0
    for pk in eng.parts:
        if not isinstance(pk, LoopPartKernel):
            continue
        pk.velocity(q[pk.qix], qd[pk.vix])
        v_in = np.zeros(6) if pk.top else rng.normal(size=6)
        M, m0, Kt, Psi, Lam, beta = (x.copy() for x in pk.reduce(v_in, tau[pk.vix], F[pk.bix]))
        a_in = pk.a0 if pk.top else rng.normal(size=6)
        g = rng.normal(size=(pk.H, 6))
        pk.solve(a_in, g)
        for k, h in enumerate(pk.handles):
            pred = Psi[k] @ a_in + np.einsum("jab,jb->a", Lam[k], g) + beta[k]
            assert np.abs(pk.a[h] - pred).max() <= 1e-9 * max(1.0, np.abs(pred).max())
        if not pk.top:
            Fr = pk.wrenches()[0][0]
            groot = np.zeros(6)
            xform_force_T_add(pk.E[0], pk.r[0], Fr, groot)
            pred = M @ a_in + m0 + np.einsum("kab,kb->a", Kt, g)
            assert np.abs(groot - pred).max() <= 1e-9 * max(1.0, np.abs(pred).max())
        checked += pk.H > 0 and not pk.top
    assert checked


def test_partitions_keep_every_loop_inside_one_part():
    for m in local_loop_models() + [forest()]:
        for P in (2, 4, 8):
            pt = partition(m, P + 1)
            eng = SerialEngine(m, P)
            for p in (eng.partition,):
                for a, b in zip(m.loops.body_a, m.loops.body_b):
                    ends = [x for x in (a, b) if x >= 0]
                    assert len({int(p.part_of[x]) for x in ends}) == 1
                    if len(ends) == 1:
                        assert p.part_parent[p.part_of[ends[0]]] == -1
            assert pt.nparts >= 1


def test_trees_joined_by_a_loop_share_a_part():
    m = forest()
    q, qd, tau, F = state(m, 3)
    ref = serial(m, q, qd, tau, f_ext=F)
    for P in (2, 3, 6):
        eng = SerialEngine(m, P)
        eng.partition.check(m.parent)
        assert eng.partition.nparts == P
        top = eng.partition.part_of[0]
        assert eng.partition.part_of[30] == top        # the first two trees' roots
        _check(eng.constraint_forces(q, qd, tau, F), ref)
    with pytest.raises(PartreeInputError, match="nparts must be >= 2"):
        SerialEngine(m, 1)
    fb = four_bar()
    q = np.array([np.pi / 4, -np.pi / 4, np.pi / 4])
    qd, tau = np.array([0.3, -0.3, 0.3]), np.array([0.5, 0.0, 0.0])
    x = forward_dynamics(fb, q, qd, tau, backend="serial", parts=1)
    assert rel(x, serial(fb, q, qd, tau).qdd) < 1e-13
    with pytest.raises(PartreeInputError, match="leave at most 1"):
        SerialEngine(fb, 2)


def test_loops_that_span_parts_are_solved_at_the_root():
    """An explicit partition that splits loops: their ends become handles of their parts and
    the root solves their rows; every result equals the serial constrained solve."""
    for m, roots in spanning_cases():
        q, qd, tau, F = state(m, len(roots))
        ref = serial(m, q, qd, tau, f_ext=F)
        pt = partition_from_roots(m, roots)
        eng = SerialEngine(m, pt)
        assert eng.tree.loops is not None and len(eng.tree.loops.ids) >= 1
        ends = eng.partition.loop_ends
        for k in range(pt.nparts):           # a loop end is a handle of its part
            assert set(ends[pt.part_of[ends] == k].tolist()) <= set(pt.handles(k).tolist())
        _check(eng.constraint_forces(q, qd, tau, F), ref)
        assert rel(forward_dynamics(m, q, qd, tau, parts=pt, f_ext=F), ref.qdd) < 1e-10
    # the partitioner itself still keeps a loop inside one part: bodies 6..12 never start a part
    m = spanning_cases()[0][0]
    for P in range(2, 12):
        assert not set(SerialEngine(m, P).partition.roots.tolist()) & set(range(6, 13))
        assert SerialEngine(m, P).tree.loops is None


def test_loops_between_units_span_parts():
    """The scissor mast's pins join neighbouring units, which the partitioner keeps whole: the
    cut between two units splits a pin, solved at the root; the mast's rows are planar (3 of each
    pin's 5 vanish), which the root's pivoting finds as the serial solve does."""
    m = scissor_pins(12)
    rng = np.random.default_rng(2)
    q = np.zeros(m.nq)
    lc = partree.loop_constraints(m, q)
    J = lc.J.toarray() if hasattr(lc.J, "toarray") else np.asarray(lc.J)
    _, s, vt = np.linalg.svd(J)
    null = vt[int(np.count_nonzero(s > 1e-9 * s[0])):]
    qd = null.T @ rng.normal(size=null.shape[0])
    tau = rng.normal(size=m.nv)
    ref = serial(m, q, qd, tau)
    for P in (2, 3, 5):
        eng = SerialEngine(m, P)
        roots = eng.partition.roots
        assert np.all(roots % 2 == 0)                       # parts start at a unit's first bar
        assert len(eng.tree.loops.ids) == P - 1
        _check(eng.constraint_forces(q, qd, tau), ref)


def test_a_loop_part_travels_without_its_workspace():
    m = local_loop_models()[0]
    eng = SerialEngine(m, 4)
    q, qd, tau, F = state(m, 2)
    x = eng.forward_dynamics(q, qd, tau, F)
    eng.parts = [pickle.loads(pickle.dumps(p)) for p in eng.parts]
    assert np.array_equal(eng.forward_dynamics(q, qd, tau, F), x)
    lp = [p for p in eng.parts if isinstance(p, LoopPartKernel) and p.H][0]
    assert len(pickle.dumps(lp)) < lp.nbytes
    # the walk's column buffers and what is derived from the part's topology are made where it runs
    assert not {"_ugbuf", "_pagbuf", "_kwbuf", "ug", "PAg", "kwg", "pvptr", "kix", "pflag"} & set(lp.__getstate__())


# ------------------------------------------------------------------------------------- MPI
def test_mpi_equals_constrained_dynamics():
    pytest.importorskip("mpi4py")
    from test_mpi import MPIEXEC, _ok_line
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    for n in (2, 3):
        (err,) = _ok_line(n, "loops_check.py")
        assert float(err) < 1e-10


# ------------------------------------------------------------------------------------- Dask
def test_dask_equals_constrained_dynamics():
    distributed = pytest.importorskip("distributed")
    from partree.parallel.dask_backend import DaskEngine

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        spans = [(m, partition_from_roots(m, roots)) for m, roots in spanning_cases()[2:5]]
        for m, P in [(local_loop_models()[0], 4), (forest(), 3), (four_bar(), 1), (scissor_pins(8), 3)] + spans:
            q, qd, tau, F = state(m, 5)
            ref = serial(m, q, qd, tau, f_ext=F)
            eng = DaskEngine(m, client=client, parts=P)
            _check(eng.constraint_forces(q, qd, tau, F), ref)
            assert rel(eng.forward_dynamics(q, qd, tau, F), ref.qdd) < 1e-10
            eng.close()
        m = local_loop_models()[2]
        q, qd, tau, F = state(m, 6)
        x = forward_dynamics(m, q, qd, tau, backend="dask", parts=3, client=client, f_ext=F)
        assert rel(x, serial(m, q, qd, tau, f_ext=F).qdd) < 1e-10
    finally:
        client.close()
        cluster.close()


def test_dynamics_function_on_the_engine():
    """``Dynamics`` with an engine backend evaluates a model with loops through the engine (one
    MPI process here), equal to the serial constrained solve with the engine's choice for repeated
    rows."""
    pytest.importorskip("mpi4py")
    from partree.simulation.dynamics import Dynamics

    m = local_loop_models()[2]
    q, qd, tau, _ = state(m, 4)
    assert rel(Dynamics(m, torques=tau)(0.0, q, qd), partree.constrained_dynamics(m, q, qd, tau).qdd) < 1e-12
    x = Dynamics(m, torques=tau, backend="mpi", parts=3)(0.0, q, qd)
    assert rel(x, serial(m, q, qd, tau).qdd) < 1e-10


def test_the_engines_corrections_are_the_mass_metric_projections():
    """``SerialEngine.correct_state`` (Gauss-Newton and the velocity projection through the
    decomposition, ``partree.parallel.correction``) against the dense mass-metric projections of
    ``partree.correct_state``: the coordinates to the square of the violation corrected (the
    metric is taken at each iterate rather than the first), the velocity projection at the
    corrected coordinates exactly; loops inside parts and at the root."""
    from partree.algorithms.loop_correction import mass_metric, phi_and_jacobian, project_velocity

    rng = np.random.default_rng(4)
    cases = [(scissor_pins(8), P) for P in (1, 2, 3, 5)]
    cases += [(m, partition_from_roots(m, roots)) for m, roots in spanning_cases()[:4]]
    for m, P in cases:
        q0 = np.zeros(m.nq)
        if np.abs(partree.loop_constraints(m, q0).phi).max() > 1e-12:
            q0 = partree.assemble(m, 0.1 * rng.normal(size=m.nq))
        q = q0 + 1e-6 * rng.normal(size=m.nq)
        qd = rng.normal(size=m.nv)
        q_ref = partree.correct_state(m, q, metric="mass")
        qe, ve = SerialEngine(m, P).correct_state(q, qd)
        assert np.abs(qe - q_ref).max() < 1e-10
        assert np.abs(partree.loop_constraints(m, qe).phi).max() < 1e-12
        J = phi_and_jacobian(m, qe)[1]
        v_ref = project_velocity(J, qd, W=mass_metric(m, qe, "mass"))
        assert rel(ve, v_ref) < 1e-10
        assert np.abs(partree.loop_constraints(m, qe, ve).velocity).max() < 1e-12 * np.abs(qd).max() * 10


def test_the_engines_corrections_stop_at_the_rounding_floor():
    """A tolerance below what rounding allows (a mast of 10^4 units, 10 km tall, cannot close its
    pins better than about 1e-12 m) ends at the floor instead of failing; a state too far to
    close within the steps allowed is still refused, with its violation."""
    m = scissor_pins(8)
    rng = np.random.default_rng(0)
    q, qd = 1e-6 * rng.normal(size=m.nq), rng.normal(size=m.nv)
    qe, _ = SerialEngine(m, 3).correct_state(q, qd, tol=1e-22)
    assert np.abs(partree.loop_constraints(m, qe).phi).max() < 1e-14
    with pytest.raises(PartreeInputError, match="could not be closed: violation"):
        SerialEngine(m, 3).correct_state(q + 0.5, qd, tol=1e-22, max_iter=1)


def test_planar_loop_parts_walk_the_in_plane_columns_only():
    """A planar scissor mast's loop parts carry the 3 in-plane columns of each handle's wrench
    through their walk (``planar_axis``): the out-of-plane ones meet no joint and no loop row.  The
    relations equal those of the walk with all 6 H columns (``planar_walk`` False) to rounding,
    and the engine equals ``constrained_dynamics``; a path with one coupling entry or one joint
    motion out of the plane is not planar."""
    from partree.parallel.loop_part import planar_axis, planar_components

    m = partree.resolve_model("scissor:units=60,closed=true,support=slider")
    rng = np.random.default_rng(1)
    q, qd, tau = m.neutral(), 0.1 * rng.normal(size=m.nv), rng.normal(size=m.nv)
    engines = []
    for planar in (True, False):
        eng = SerialEngine.for_ranks(m, 4)
        parts = [p for p in eng.parts if isinstance(p, LoopPartKernel) and p.H]
        assert len(parts) >= 3
        for p in parts:
            p.planar_walk = planar
        x = eng.forward_dynamics(q, qd, tau)
        assert all(p.ncols == (3 if planar else 6) * p.H for p in parts)
        engines.append((x, parts))
    (x, parts), (y, full) = engines
    # the plane is taken over from one evaluation to the next and verified by the walk: a wrong
    # one is found out at the first body and looked for again, with the same result
    eng = SerialEngine.for_ranks(m, 4)
    x0 = eng.forward_dynamics(q, qd, tau)
    lp = [p for p in eng.parts if isinstance(p, LoopPartKernel) and p.H]
    axes = [p._ax for p in lp]
    assert min(axes) >= 0 and all(p._nk == 3 for p in lp)
    for p in lp:
        p._ax = (p._ax + 1) % 3
    assert np.array_equal(eng.forward_dynamics(q, qd, tau), x0)
    assert [p._ax for p in lp] == axes
    for p, f in zip(parts, full):
        for name in ("Kt", "Lam", "beta", "M", "m0"):
            a, b = getattr(p, name), getattr(f, name)
            assert np.abs(a - b).max() <= 1e-13 * max(np.abs(b).max(), 1.0), name
    ref = partree.constrained_dynamics(m, q, qd, tau, redundant="drop").qdd
    assert np.abs(x - y).max() <= 1e-10 * np.abs(y).max()
    assert np.abs(x - ref).max() <= 1e-9 * np.abs(ref).max()
    p = parts[0]
    ax = planar_axis(p.pbod, p.idx_v, p.E, p.r, p.S)
    assert ax >= 0
    b = (ax + 1) % 3
    i = int(p.pbod[len(p.pbod) // 2])
    E = p.E.copy()
    E[i, ax, b] = 1e-17
    assert planar_axis(p.pbod, p.idx_v, E, p.r, p.S) == -1
    S = p.S.copy()
    S[p.idx_v[i], 3 + ax] = 1e-17
    assert planar_axis(p.pbod, p.idx_v, p.E, p.r, S) == -1
    # the in-plane columns keep to the 3 in-plane components (planar_components), unless a path
    # joint's U = IA S or a row a path node eliminates has an entry out of the plane
    t = p.topo
    kc = np.zeros(6, dtype=np.int64)
    b, c = sorted(((ax + 1) % 3, (ax + 2) % 3))
    assert planar_components(ax, p.pbod, p.idx_v, p.U, p.Cw, t.cptr, t.wrows, t.prow, kc) == 3
    assert list(kc[:3]) == [ax, 3 + b, 3 + c]
    assert planar_components(-1, p.pbod, p.idx_v, p.U, p.Cw, t.cptr, t.wrows, t.prow, kc) == 6
    U = p.U.copy()
    U[p.idx_v[i], b] = 1e-17
    assert planar_components(ax, p.pbod, p.idx_v, U, p.Cw, t.cptr, t.wrows, t.prow, kc) == 6
    assert list(kc) == list(range(6))
    j = next(int(x) for x in p.pbod if t.wrows[x] > t.prow[x])
    Cw = p.Cw.copy()
    Cw[t.cptr[j] + 6 * int(t.prow[j]) + 3 + ax] = 1e-17
    assert planar_components(ax, p.pbod, p.idx_v, p.U, Cw, t.cptr, t.wrows, t.prow, kc) == 6


@pytest.mark.parametrize("a", [0, 1, 2])
def test_planar_force_transform_is_the_full_one_on_in_plane_wrenches(a):
    """``force_cols_T_add_planar`` gives what ``force_cols_T_add`` gives, to the bit, on wrenches
    in the plane normal to axis a carried by a rotation about a and an offset in the plane, and
    leaves the out-of-plane rows alone."""
    from numba import njit

    from partree.algorithms.primitives import force_cols_T_add, force_cols_T_add_planar
    from partree.spatial import axis_angle

    full, planar = njit(force_cols_T_add.py_func), njit(force_cols_T_add_planar.py_func)
    rng = np.random.default_rng(a)
    b, c = (a + 1) % 3, (a + 2) % 3
    ax = np.zeros(3)
    ax[a] = 1.0
    E = np.ascontiguousarray(axis_angle(ax, 0.7))
    for i in range(3):              # exact zeros, as a joint's rotation about a leaves them
        if i != a:
            E[a, i] = E[i, a] = 0.0
    r = np.zeros(3)
    r[[b, c]] = rng.normal(size=2)
    f = np.zeros((6, 5))
    f[[a, 3 + b, 3 + c]] = rng.normal(size=(3, 5))
    out0 = rng.normal(size=(6, 5))
    out0[[b, c, 3 + a]] = 0.0
    o1, o2 = out0.copy(), out0.copy()
    full(E, r, f, o1, 5)
    planar(E, r, f, o2, 5, a)
    assert np.array_equal(o1, o2)


def test_the_walk_holds_a_few_rows_of_columns_however_long_its_paths():
    """The walk's pA columns live in rows that a body holds from the walk's first write to it
    (its first path child's step, or the start for a handle) to its own step: no two bodies
    whose times overlap share a row, and a long chain's walk needs a few rows, not one per
    path body.  Checked against the times computed here from the walk order, on parts with
    several handles (branching paths) and on a long chain."""
    from partree.models.generators import chain
    from partree.models.local_loops import with_local_loops

    models = [(local_loop_models()[k], P) for k in range(3) for P in (5, 11)]
    models.append((with_local_loops(chain(3000), 30, seed=2), 2))
    models.append((partree.resolve_model("scissor:units=600,closed=true,support=slider"), 2))
    branched = 0
    for m, P in models:
        for pk in SerialEngine(m, P).parts:
            if not isinstance(pk, LoopPartKernel) or not pk.H:
                continue
            pos = {int(x): i for i, x in enumerate(pk.pbod[::-1])}        # walk order: children first
            start = {x: (0 if x in set(pk.handles.tolist()) else len(pos)) for x in pos}
            for x in pos:
                up = int(pk.parent[x])
                if up >= 0:
                    start[up] = min(start[up], pos[x])
            rows = {}
            for x in pos:
                assert start[x] <= pos[x]
                rows.setdefault(int(pk.arow[pk.slot[x]]), []).append((start[x], pos[x]))
            for spans in rows.values():
                spans.sort()
                assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
            assert len(rows) == pk._npa == pk.PAg.shape[0]
            branched += len(pk.handles) > 1 and pk.ns > 1
            if pk.ns > 200:
                assert pk._npa <= 4
    assert branched


def test_the_walk_changes_basis_where_the_handles_paths_meet():
    """From the body where the handles' paths meet (``walk_basis``: their deepest common
    ancestor, found here from the subtrees) the handle wrenches' columns reach nothing but that
    body's pA columns and the loop rows its path children hand it: the walk goes on with those
    as its columns where they are fewer (a planar mast's base part: 2 + 3 for 2 handles' 6
    in-plane columns) and takes its sums back at the end.  The part's relations and the
    engine's result equal those of the walk that carries every column (the change switched
    off), on branched parts and on planar and spatial masts."""
    models = [(local_loop_models()[k], P) for k in range(3) for P in (5, 11)]
    models.append((partree.resolve_model("scissor:units=12,closed=true,support=slider"), 2))
    models.append((partree.resolve_model("scissor:units=6,closed=true,section=square"), 3))
    changed = 0
    for i, (m, P) in enumerate(models):
        q, qd, tau, F = state(m, i)
        if getattr(m, "scissor", None) is not None:
            q, qd = m.neutral(), np.zeros(m.nv)         # on the loops: off them a long mast's qdd
                                                        # depends on the rounding
        eng = SerialEngine(m, P)
        x = eng.forward_dynamics(q, qd, tau, F)
        parts = [pk for pk in eng.parts if isinstance(pk, LoopPartKernel) and pk.H > 1]
        rel_on = []
        for pk in parts:
            h = set(int(b) for b in pk.handles)
            below = {}                          # the handles in each body's subtree
            for b in range(pk.m - 1, -1, -1):
                below[b] = below.get(b, 0) + (b in h)
                if pk.parent[b] >= 0:
                    below[int(pk.parent[b])] = below.get(int(pk.parent[b]), 0) + below[b]
            meet = [b for b in range(pk.m) if below[b] == len(h)]
            assert (pk.pbod[pk._cslot] if pk._cslot >= 0 else None) == (max(meet) if meet else None)
            rel_on.append([a.copy() for a in (pk.M, pk.m0, pk.Kt, pk.Psi, pk.Lam, pk.beta)])
            changed += int(pk._cr[0]) > 0
            if int(pk._cr[0]):
                assert int(pk._cr[0]) < pk.ncols
        for pk in parts:
            pk._cslot = -1
        y = eng.forward_dynamics(q, qd, tau, F)
        for pk, on in zip(parts, rel_on):
            assert int(pk._cr[0]) == 0
            for a, b in zip(on, (pk.M, pk.m0, pk.Kt, pk.Psi, pk.Lam, pk.beta)):
                assert np.abs(a - b).max() <= 1e-11 * max(np.abs(b).max(), 1.0)
        # (the square mast's redundant rows: its engine and serial results differ by 2e-10 as well)
        assert rel(x, y) < (1e-10 if getattr(m, "scissor", None) is None or m.scissor.section == "planar" else 1e-9)
    assert changed >= 3


def test_loop_walk_passes_over_the_bodies_its_columns_no_longer_reach():
    """On a long 3-D chain with local loops the handle wrenches' columns fade to nothing along the
    walk (each joint turns them about another axis): the walk flushes them once they are below
    ``TINY_ABS`` and passes over the rest of the path (a body whose one path child's columns are
    all zero gets none).  The path bodies near the root then have no column of u, and the
    engine still equals ``constrained_dynamics``."""
    from partree.models.generators import chain
    from partree.models.local_loops import with_local_loops

    m = with_local_loops(chain(6000, alternate=True), 60, seed=1, kinds=("distance", "spherical"))
    rng = np.random.default_rng(0)
    q, qd, tau = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    eng = SerialEngine(m, 2)
    x = eng.forward_dynamics(q, qd, tau)
    (p,) = [p for p in eng.parts if p.H]
    zero = np.all(p.ug == 0.0, axis=1)          # by path dof, root first
    assert zero[0] and zero.sum() > p.ns // 4 and not zero[-1]
    ref = partree.constrained_dynamics(m, q, qd, tau, redundant="drop")
    assert rel(x, ref.qdd) < 1e-10
    res = eng.constraint_forces(q, qd, tau)
    assert rel(res.qdd, ref.qdd) < 1e-10
