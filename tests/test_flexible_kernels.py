"""The compiled articulated-body recursion for flexible bodies (partree.algorithms.flexible_kernels,
behind flexible_aba and flexible_hybrid_dynamics) against the NumPy recursion of
partree.algorithms.flexible_dynamics, which the dense solves of tests/test_flexible.py check."""
import pickle

import numpy as np
import pytest

import partree
from partree.algorithms.flexible_dynamics import (_flexible_aba_reference, _flexible_hybrid_dynamics_reference,
                                                   _flexible_rnea_reference, _outward, _S_hat, flexible_aba, flexible_crba,
                                                   flexible_hybrid_dynamics, flexible_rnea, flexible_state_size)
from partree.algorithms.flexible_kernels import flexible_pack
from partree.errors import PartreeInputError
from partree.model import Model
from partree.models.beam import euler_bernoulli_beam
from partree.models.generators import random_parents
from partree.spatial import spatial_inertia


def _rel(x, ref):
    return np.abs(x - ref).max() / max(np.abs(ref).max(), 1e-300)


def _state(model, rng, eta_scale=0.01):
    nq, nv = flexible_state_size(model)
    q = np.concatenate((model.random_configuration(rng), eta_scale * rng.normal(size=nq - model.nq)))
    return q, rng.normal(size=nv)


def _random_beam_tree(n, seed, joints=("revolute", "prismatic", "universal", "spherical", "free", "fixed"), I_rigid=0.1):
    """A random tree of beams and rigid bodies: every joint type, three kinds of beams (6 modes in
    both planes with damping, 3 modes in one plane, 4 modes with geometric stiffening), rigid
    bodies among them, a child of a beam at the beam's tip."""
    rng = np.random.default_rng(seed)
    parent = random_parents(n, rng)
    L = 0.7
    kinds = [euler_bernoulli_beam(L, 40.0, 2.0, 6, bending="yz", polar=0.05, damping_ratio=0.02, name="six"),
             euler_bernoulli_beam(L, 25.0, 1.5, 3, bending="z", polar=0.05, name="three"),
             euler_bernoulli_beam(L, 60.0, 2.5, 4, bending="yz", polar=0.05, stiffening=True, name="stiff")]
    pick = rng.integers(-1, 3, size=n)          # -1: a rigid body
    jt = [joints[k] for k in rng.integers(0, len(joints), size=n)]
    jt[0] = "free"
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1)[:, None]
    axis2 = np.cross(axis, rng.normal(size=(n, 3)))
    axis2 /= np.linalg.norm(axis2, axis=1)[:, None]
    E = np.empty((n, 3, 3))
    for i in range(n):
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        E[i] = Q * np.sign(np.linalg.det(Q))
    r = rng.uniform(-0.4, 0.4, size=(n, 3))
    r[0] = 0.0
    mass, com, I_com = np.empty(n), np.empty((n, 3)), np.empty((n, 3, 3))
    flex = {}
    for i in range(n):
        if pick[i] >= 0:
            body, mass[i], com[i], I_com[i] = kinds[pick[i]]
            flex[i] = body
        else:
            mass[i], com[i], I_com[i] = 1.0 + rng.random(), rng.uniform(-0.2, 0.2, 3), I_rigid * np.diag([1.0, 1.5, 2.0])
        p = parent[i]
        if p >= 0 and pick[p] >= 0:
            r[i] = (L, 0.0, 0.0)                 # at the beam's tip node
    return Model(parent, jt, axis, E, r, mass, com, I_com, axis2=axis2, flexible=flex)


MODELS = {
    "threearm": lambda: partree.resolve_model("threearm:flexible=true,modes=6"),
    "threearm-floating": lambda: partree.resolve_model("threearm:flexible=true,modes=6,floating_base=true"),
    # every joint type (free at the base only: a free joint inside the tree under a beam with
    # clamped modes makes a poorly conditioned mass matrix, checked by its backward error below)
    "random-beams": lambda: _random_beam_tree(30, 11, ("revolute", "prismatic", "universal", "spherical", "fixed")),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


def test_aba_equals_the_numpy_recursion(model):
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, qd = _state(model, rng)
        tau = rng.normal(size=qd.size)
        assert _rel(flexible_aba(model, q, qd, tau), _flexible_aba_reference(model, q, qd, tau)) < 1e-10


def test_rnea_equals_the_numpy_recursion(model):
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, qd = _state(model, rng)
        qdd = rng.normal(size=qd.size)
        assert _rel(flexible_rnea(model, q, qd, qdd), _flexible_rnea_reference(model, q, qd, qdd)) < 1e-10
    tau = rng.normal(size=qd.size)
    assert _rel(flexible_rnea(model, q, qd, flexible_aba(model, q, qd, tau)), tau) < 1e-10 * max(
        1.0, np.abs(_flexible_rnea_reference(model, q, qd, np.zeros(qd.size))).max())


def test_hybrid_equals_the_numpy_recursion(model):
    rng = np.random.default_rng(2)
    q, qd = _state(model, rng)
    tau, qdd = rng.normal(size=qd.size), rng.normal(size=qd.size)
    n = model.n
    for mask in (np.zeros(n, dtype=bool), np.ones(n, dtype=bool), rng.random(n) < 0.3, rng.random(n) < 0.7):
        got = flexible_hybrid_dynamics(model, q, qd, tau, qdd, mask)
        ref = _flexible_hybrid_dynamics_reference(model, q, qd, tau, qdd, mask)
        for x, y in zip(got, ref):
            assert _rel(x, y) < 1e-10
        dof = np.repeat(mask, model.nv_j)
        assert np.array_equal(got[0][:model.nv][dof], qdd[:model.nv][dof])


def test_backward_error_on_a_poorly_conditioned_tree():
    """Free joints inside a tree of beams (cond(M) ~ 1e9): the compiled accelerations put back into
    the NumPy inverse dynamics give the forces back; the passive ones of a hybrid call too."""
    m = _random_beam_tree(40, 7)
    rng = np.random.default_rng(8)
    q, qd = _state(m, rng)
    tau, qdd = rng.normal(size=qd.size), rng.normal(size=qd.size)
    b = _flexible_rnea_reference(m, q, qd, np.zeros(qd.size))
    got = flexible_aba(m, q, qd, tau)
    assert np.abs(_flexible_rnea_reference(m, q, qd, got) - tau).max() < 1e-10 * np.abs(b).max()
    mask = rng.random(m.n) < 0.5
    acc, frc = flexible_hybrid_dynamics(m, q, qd, tau, qdd, mask)
    dof = np.zeros(qd.size, dtype=bool)
    dof[:m.nv] = np.repeat(mask, m.nv_j)
    want = np.where(dof, frc, tau)
    assert np.abs(_flexible_rnea_reference(m, q, qd, acc) - want).max() < 1e-10 * np.abs(b).max()


def test_random_beam_tree_is_the_dense_solve():
    """The random tree holds every joint type and kind of beam; the compiled recursion equals the
    dense solve of the mass matrix with the bias of inverse dynamics: its residual in the dense
    equations is rounding (1e-14 of their terms), and the two solutions differ by no more than
    the mass matrix's condition number allows (cond(M) ~ 3e8 here: 1e-10 is at the edge of what
    LAPACK's own solve holds, and differs between builds)."""
    m = _random_beam_tree(12, 3)
    assert set(m.jtype.tolist()) == set(range(6)) or len(set(m.jtype.tolist())) >= 4
    assert len({id(b) for b in m.flexible.bodies.values()}) >= 2
    rng = np.random.default_rng(4)
    q, qd = _state(m, rng)
    tau = rng.normal(size=qd.size)
    M = flexible_crba(m, q)
    rhs = tau - _flexible_rnea_reference(m, q, qd, np.zeros(qd.size))
    got = flexible_aba(m, q, qd, tau)
    assert np.abs(M @ got - rhs).max() < 1e-14 * (np.abs(M).max() * np.abs(got).max() + np.abs(rhs).max())
    assert _rel(got, np.linalg.solve(M, rhs)) < max(1e-10, 10 * np.finfo(float).eps * np.linalg.cond(M))


def test_the_pack_is_kept_and_rebuilt():
    m = MODELS["threearm"]()
    rng = np.random.default_rng(5)
    q, qd = _state(m, rng)
    tau = rng.normal(size=qd.size)
    first = flexible_aba(m, q, qd, tau)
    pk = flexible_pack(m)
    assert flexible_pack(m) is pk
    assert np.array_equal(flexible_aba(m, q, qd, tau), first)
    # another set of flexible bodies (the rigid skeleton): another pack, the rigid dynamics
    rigid = m.with_flexible({})
    assert flexible_pack(rigid) is not pk
    qr, qdr = q[:m.nq], qd[:m.nv]
    assert _rel(flexible_aba(rigid, qr, qdr, tau[:m.nv]), partree.aba(rigid, qr, qdr, tau[:m.nv])) < 1e-10
    # a pickled model builds its pack again and gives the same bits
    copy = pickle.loads(pickle.dumps(m))
    assert np.array_equal(flexible_aba(copy, q, qd, tau), first)


def test_singular_and_wrong_sizes_are_refused():
    m = MODELS["threearm"]()
    rng = np.random.default_rng(6)
    q, qd = _state(m, rng)
    tau = rng.normal(size=qd.size)
    with pytest.raises(PartreeInputError, match="shape"):
        flexible_aba(m, q, qd, tau[:-1])
    with pytest.raises(PartreeInputError, match="shape"):
        flexible_aba(m, q[:-1], qd, tau)
    body, mass, com, I_com = euler_bernoulli_beam(0.5, 10.0, 1.0, 2)
    # a massless rigid leaf on a prismatic joint along nothing it could push: D = 0
    bad = Model([-1, 0], ["revolute", "prismatic"], [[0, 0, 1.0], [1.0, 0, 0]], [np.eye(3)] * 2,
                [[0, 0, 0], [0.5, 0, 0]], [mass, 0.0], [com, [0, 0, 0]], [I_com, np.zeros((3, 3))],
                validate=False).with_flexible({0: body})
    q, qd = _state(bad, rng)
    with pytest.raises(PartreeInputError, match="singular"):
        flexible_aba(bad, q, qd, np.zeros(qd.size))


def test_pass1_mass_matrices_and_pass2_articulated_inertias(model):
    """Pass 1 writes every body's M(eta) into IA (its rigid and modal blocks' lower triangles) and
    U (its coupling block's rows) (against partree.flexible.body_mass_matrix); pass 2 turns it into
    the articulated inertia (against the NumPy recursion's)."""
    from partree.algorithms import flexible_kernels as fk
    from partree.flexible import body_mass_matrix
    q, qd = _state(model, np.random.default_rng(5))
    tau = np.random.default_rng(6).normal(size=qd.shape)
    pk = flexible_pack(model)
    m = model
    # each body's two triangles follow the previous body's, and IA holds nothing else; U a row
    # per coordinate
    sizes = 21 + fk.tri_size(pk.body[:, fk.B_NM])
    assert np.array_equal(pk.body[1:, fk.B_I], np.cumsum(sizes)[:-1]) and pk.IA.size == sizes.sum()
    assert pk.U.shape == (6 * qd.size,)
    fk.flexible_forward_pass1(m.parent, m.jtype, m.axis, m.axis2, m.E_tree, m.r_tree, m.mass, m.com, m.I_com,
                              m.idx_q, m.idx_v, m.nq, m.nv, pk.body, pk.kinfo, pk.first, pk.xphi, pk.sparse_i,
                              pk.sparse_v, pk.Mee, pk.Kst, pk.Dmp, pk.Gs, pk.nodes, pk.mmax, q, qd, pk.E, pk.r, pk.v,
                              pk.c, pk.S, pk.IA, pk.pA, pk.Y, pk.U)

    def blocks():
        for i in range(m.n):
            yield i, int(pk.body[i, fk.B_NM]), fk.body_inertia(pk, m.nv, i)

    for i, nm, M in blocks():
        if nm:
            e = q[m.nq + pk.body[i, fk.B_IE]:][:nm]
            ref = body_mass_matrix(m.mass[i], m.com[i], m.I_com[i], m.flexible.bodies[i], e)
        else:
            ref = spatial_inertia(m.mass[i], m.com[i], m.I_com[i])
        assert _rel(M, ref) < 1e-13
    active = np.zeros(m.n, dtype=np.bool_)
    assert fk.flexible_backward_pass(m.parent, m.idx_v, m.nv, pk.body, pk.mmax, active, tau, np.zeros_like(tau), pk.E,
                                     pk.r, pk.c, pk.S, pk.IA, pk.pA, pk.Y, pk.U, pk.u, pk.L) == -1
    # the articulated inertias as the NumPy recursion accumulates them (all coordinates passive)
    bodies = _outward(m, q, qd)
    art = [B.M.copy() for B in bodies]
    for i in range(m.n - 1, -1, -1):
        p = int(m.parent[i])
        if p >= 0:
            Sp = _S_hat(bodies[i])
            U = art[i] @ Sp
            Ia = art[i] - U @ np.linalg.solve(Sp.T @ U, U.T)
            art[p] += bodies[i].T.T @ Ia[:6, :6] @ bodies[i].T
    for i, nm, M in blocks():
        assert _rel(M, art[i]) < 1e-10
