"""partree.algorithms.crba: the mass matrix against finite differences of RNEA in qdd and against
the kinetic energy, its symmetry / definiteness / sparsity, the sparse and matrix-free forms,
``bias_forces`` (RNEA with qdd = 0, and Lagrange's equations), and the error paths."""
import numpy as np
import pytest
import scipy.sparse as sp

import partree
from partree.algorithms.crba import bias_forces, crba, mass_matrix_operator
from partree.errors import PartreeInputError
from partree.models import auto_tree, binary_tree, chain, random_tree

from conftest import rel_err

ALL_TYPES = ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
G = np.array([0.2, -0.6, -9.81])


def mixed_tree():
    return random_tree(40, seed=17, floating_base=True, joint_types=ALL_TYPES, gravity=G)


def euclidean_chain():
    """A 3-D chain whose coordinates are all angles or displacements (q and v coincide)."""
    seq = ["revolute", "prismatic", "universal", "revolute", "revolute", "prismatic", "universal", "revolute"]
    return chain(len(seq), joint=seq, alternate=True, gravity=G)


def test_mass_matrix_is_the_derivative_of_rnea_in_qdd(rng):
    """M[:, k] = d tau / d qdd_k (central differences at a random qdd, velocity and forces, which M
    does not depend on)."""
    m = mixed_tree()
    q, qd, x = m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    h = 0.5
    ref = np.empty((m.nv, m.nv))
    for k in range(m.nv):
        e = np.zeros(m.nv)
        e[k] = h
        ref[:, k] = (partree.rnea(m, q, qd, x + e, f_ext=F) - partree.rnea(m, q, qd, x - e, f_ext=F)) / (2 * h)
    M = crba(m, q)
    assert M.shape == (m.nv, m.nv)
    assert rel_err(M, ref) < 1e-11


def test_mass_matrix_is_the_hessian_of_the_kinetic_energy(rng):
    """T(qd) = 1/2 qd^T M qd, and by polarisation M_jk = T(e_j + e_k) - T(e_j) - T(e_k) with T from
    the body velocities and inertias (``partree.kinetic_energy``), no dynamics involved."""
    m = random_tree(15, seed=4, floating_base=True, joint_types=ALL_TYPES)
    q = m.random_configuration(rng)
    M = crba(m, q)
    E = np.eye(m.nv)
    T1 = np.array([partree.kinetic_energy(m, q, E[k]) for k in range(m.nv)])
    ref = np.empty((m.nv, m.nv))
    for j in range(m.nv):
        for k in range(m.nv):
            ref[j, k] = partree.kinetic_energy(m, q, E[j] + E[k]) - T1[j] - T1[k] if j != k else 2 * T1[j]
    assert rel_err(M, ref) < 1e-12
    qd = m.random_velocity(rng)
    assert abs(0.5 * qd @ M @ qd - partree.kinetic_energy(m, q, qd)) < 1e-12 * max(1, abs(qd @ M @ qd))


@pytest.mark.parametrize("make", [mixed_tree, lambda: auto_tree(60, 2, skew=0.5, taper=0.95),
                                  lambda: chain(30, joint="spherical")])
def test_symmetric_positive_definite(make, rng):
    m = make()
    for _ in range(3):
        M = crba(m, m.random_configuration(rng))
        assert np.array_equal(M, M.T)
        np.linalg.cholesky(M)                     # raises if not positive definite
        assert np.all(np.diag(M) > 0)


def test_floating_base_mass_matrix_does_not_depend_on_the_base_pose(rng):
    """Velocities are in body coordinates: moving or turning the whole floating tree leaves M."""
    m = mixed_tree()
    q = m.random_configuration(rng)
    M = crba(m, q)
    q2 = q.copy()
    q2[:3] = rng.normal(size=3) * 10
    q2[3:7] = rng.normal(size=4)
    assert rel_err(crba(m, q2), M) < 1e-13
    q3 = m.random_configuration(rng)
    assert rel_err(crba(m, q3), M) > 1e-3            # (the rest of the configuration does matter)


def ancestor_pairs(m):
    """DOF pairs (j, k) whose joints lie on one path from the base (one is an ancestor of the other)."""
    anc = np.zeros((m.n, m.n), dtype=bool)
    for i in range(m.n):
        j = i
        while j >= 0:
            anc[i, j] = anc[j, i] = True
            j = m.parent[j]
    dof_body = np.repeat(np.arange(m.n), m.nv_j)
    return anc[np.ix_(dof_body, dof_body)]


@pytest.mark.parametrize("make", [mixed_tree, lambda: binary_tree(31, joint=["revolute", "universal", "fixed"] * 10
                                                                  + ["spherical"]),
                                  euclidean_chain])
def test_sparse_equals_dense_with_the_tree_sparsity(make, rng):
    """sparse=True: CSR with exactly the ancestor / descendant blocks stored, equal to the dense M
    (to rounding: the dense form mirrors a multi-DOF joint's diagonal block, the sparse one stores
    both triangles as computed, one ulp apart); the dense M is zero (exactly) on every other pair."""
    m = make()
    q = m.random_configuration(rng)
    M = crba(m, q)
    Ms = crba(m, q, sparse=True)
    assert sp.isspmatrix_csr(Ms) and Ms.shape == (m.nv, m.nv)
    assert rel_err(Ms.toarray(), M) < 1e-15
    assert abs(Ms - Ms.T).max() < 1e-15 * abs(Ms).max()
    pattern = ancestor_pairs(m)
    stored = np.zeros_like(pattern)
    coo = Ms.tocoo()
    stored[coo.row, coo.col] = True
    assert np.array_equal(stored, pattern)
    assert Ms.nnz == pattern.sum()
    assert not M[~pattern].any()


def test_mass_matrix_operator_against_dense(rng):
    """The matrix-free M(q): matvec, matmat, rmatvec and solve against the dense M; it ignores the
    model's gravity, and the other calls on the model do not disturb it."""
    m = mixed_tree()
    q = m.random_configuration(rng)
    M = crba(m, q)
    op = mass_matrix_operator(m, q)
    assert op.shape == (m.nv, m.nv) and op.dtype == np.float64
    x = rng.normal(size=m.nv)
    X = rng.normal(size=(m.nv, 3))
    assert rel_err(op @ x, M @ x) < 1e-12
    assert rel_err(op.matvec(x), M @ x) < 1e-12
    assert rel_err(op @ X, M @ X) < 1e-12
    assert rel_err(op.rmatvec(x), M.T @ x) < 1e-12
    assert rel_err(op.T @ x, M @ x) < 1e-12
    assert rel_err(op.solve(M @ x), x) < 1e-10
    y = rng.normal(size=m.nv)
    assert rel_err(op.solve(y), np.linalg.solve(M, y)) < 1e-10
    partree.aba(m, m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv))
    partree.crba(m, m.random_configuration(rng))
    assert rel_err(op @ x, M @ x) < 1e-12
    assert rel_err(op.solve(y), np.linalg.solve(M, y)) < 1e-10
    # a scipy iterative solver takes it as it is
    from scipy.sparse.linalg import cg

    z, info = cg(op, y, rtol=1e-12, maxiter=10 * m.nv)
    assert info == 0 and rel_err(M @ z, y) < 1e-9


def test_mass_matrix_operator_keeps_its_configuration(rng):
    m = euclidean_chain()
    q = m.random_configuration(rng)
    M = crba(m, q)
    op = mass_matrix_operator(m, q)
    x = rng.normal(size=m.nv)
    q += 0.5                                         # the caller moves on (an integrator's state)
    assert rel_err(op @ x, M @ x) < 1e-12


def test_mass_matrix_operator_errors(rng):
    m = euclidean_chain()
    op = mass_matrix_operator(m, m.neutral())
    with pytest.raises(PartreeInputError, match=r"y has shape \(3,\)"):
        op.solve(np.zeros(3))
    with pytest.raises(PartreeInputError, match=r"q has shape \(2,\)"):
        mass_matrix_operator(m, np.zeros(2))
    # a point mass on its own revolute axis at the tip: M is singular there
    src = chain(4, alternate=True)
    com, Ic = src.com.copy(), src.I_com.copy()
    com[3], Ic[3] = 0.3 * src.axis[3], 0.0
    args = (src.parent, src.jtype, src.axis, src.E_tree, src.r_tree, src.mass, com, Ic)
    # the model itself refuses joint d; the operator's own check is tested without that check
    with pytest.raises(PartreeInputError, match=r"joint 'd' \(body 3, revolute\)"):
        partree.Model(*args, joint_names=["a", "b", "c", "d"])
    s = partree.Model(*args, joint_names=["a", "b", "c", "d"], validate=False)
    q = s.random_configuration(rng)
    with pytest.raises(PartreeInputError, match="mass matrix is singular at joint 'd'"):
        mass_matrix_operator(s, q).solve(np.ones(4))
    M = crba(s, q)
    assert not M[3].any() and not M[:, 3].any()      # no inertia along joint d


def test_max_dense_bytes_refusal():
    m = random_tree(50, seed=1, floating_base=True, joint_types=ALL_TYPES)
    q = m.neutral()
    need = 8 * m.nv * m.nv
    assert crba(m, q, max_dense_bytes=need).shape == (m.nv, m.nv)
    msg = (rf"a dense {m.nv}x{m.nv} mass matrix needs 0\.0 GiB; use crba\(\.\.\., sparse=True\) or "
           rf"mass_matrix_operator\(model, q\) for large models")
    with pytest.raises(PartreeInputError, match=msg):
        crba(m, q, max_dense_bytes=need - 1)
    assert crba(m, q, sparse=True).shape == (m.nv, m.nv)
    with pytest.raises(PartreeInputError, match="sparse mass matrix .* nonzeros .* mass_matrix_operator"):
        crba(m, q, sparse=True, max_dense_bytes=0)             # its arrays count too


def test_bias_forces_are_rnea_with_zero_acceleration(rng):
    m = mixed_tree()
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    F = rng.normal(size=(m.n, 6))
    z = np.zeros(m.nv)
    assert np.array_equal(bias_forces(m, q, qd), partree.rnea(m, q, qd, z))
    assert np.array_equal(partree.bias_forces(m, q, qd, f_ext=F), partree.rnea(m, q, qd, z, f_ext=F))
    assert np.array_equal(bias_forces(m, q, qd, F, m.create_data()), partree.rnea(m, q, qd, z, f_ext=F))
    # M qdd + b = tau, and the forward dynamics solves it
    tau = rng.normal(size=m.nv)
    qdd = np.linalg.solve(crba(m, q), tau - bias_forces(m, q, qd, f_ext=F))
    assert rel_err(qdd, partree.aba(m, q, qd, tau, f_ext=F)) < 1e-10


def test_bias_forces_by_lagrange(rng):
    """Lagrange's equations with q and v alike (angles and displacements):
    b(q, qd) = dM/dt qd - 1/2 d(qd^T M qd)/dq + dV/dq, every derivative by central differences
    of crba and of the potential energy."""
    m = euclidean_chain()
    q, qd = rng.normal(size=m.nv), rng.normal(size=m.nv)
    h = 1e-5
    Mdot = (crba(m, q + h * qd) - crba(m, q - h * qd)) / (2 * h)
    grad_T = np.empty(m.nv)
    grad_V = np.empty(m.nv)
    for k in range(m.nv):
        e = np.zeros(m.nv)
        e[k] = h
        grad_T[k] = (qd @ crba(m, q + e) @ qd - qd @ crba(m, q - e) @ qd) / (2 * h)
        grad_V[k] = (partree.potential_energy(m, q + e) - partree.potential_energy(m, q - e)) / (2 * h)
    ref = Mdot @ qd - 0.5 * grad_T + grad_V
    assert rel_err(bias_forces(m, q, qd), ref) < 1e-8
    assert rel_err(bias_forces(m, q, np.zeros(m.nv)), grad_V) < 1e-8


def test_workspace_and_input_errors(rng):
    m = mixed_tree()
    q = m.random_configuration(rng)
    M = crba(m, q)
    d = m.create_data()
    partree.aba(m, m.random_configuration(rng), m.random_velocity(rng), rng.normal(size=m.nv), data=d)
    assert np.array_equal(crba(m, q, data=d), M)
    assert np.array_equal(crba(m, q, sparse=True, data=d).toarray(), crba(m, q, sparse=True).toarray())
    with pytest.raises(PartreeInputError, match="different model"):
        crba(m, q, data=chain(3).create_data())
    bad = q.copy()
    bad[9] = np.nan
    with pytest.raises(PartreeInputError, match=r"q\[9\] is nan"):
        crba(m, bad)
    with pytest.raises(PartreeInputError, match=r"q has shape"):
        crba(m, q[:-1], sparse=True)
