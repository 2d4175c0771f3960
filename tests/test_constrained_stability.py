"""partree.constrained_dynamics on long spatial scissor masts against a dense null-space solve.

The spatial masts (``scissor_mast(units, section="triangle")`` or ``"square"``) repeat their
constraints about three times over (30 rows a unit of rank 9 for the triangle): each loop group
that closes at a body is redundant, and the multipliers its kept rows alone would carry grow
from unit to unit along the mast, and the rounding with them.  The reference here forms
M, h, J and gamma densely and solves M qdd + h = tau + J^T lambda, J qdd = gamma in the null space
of J (its SVD), which has no such growth.
"""
import numpy as np
import pytest

import partree
from partree.models.scissor import scissor_mast


def null_space_reference(model, q, qd, tau):
    """qdd from the dense equations, projected onto J's null space (rank: singular values above
    1e-9 of the largest), with J, gamma, M and h."""
    M = partree.crba(model, q)
    h = partree.bias_forces(model, q, qd)
    lc = partree.loop_constraints(model, q, qd)
    J, gamma = lc.J.toarray(), lc.gamma
    U, s, Vt = np.linalg.svd(J)
    rank = int((s > 1e-9 * s[0]).sum())
    Z = Vt[rank:].T
    qp = Vt[:rank].T @ ((U[:, :rank].T @ gamma) / s[:rank])
    y = np.linalg.solve(Z.T @ M @ Z, Z.T @ (tau - h - M @ qp))
    return qp + Z @ y, J, gamma, M, h, Z


@pytest.mark.parametrize("section, units", [("triangle", 24), ("square", 16)])
def test_long_spatial_mast_matches_the_null_space_solve(section, units):
    model = scissor_mast(units, section=section)
    q = model.neutral()
    assert np.abs(partree.loop_constraints(model, q).phi).max() < 1e-12
    rng = np.random.default_rng(units)
    _, _, _, _, _, Z = null_space_reference(model, q, np.zeros(model.nv), np.zeros(model.nv))
    assert Z.shape[1] == 1                                  # one degree of freedom: the deployment
    qd = Z @ rng.standard_normal(Z.shape[1])
    tau = rng.standard_normal(model.nv)
    ref, J, gamma, M, h, _ = null_space_reference(model, q, qd, tau)
    r = partree.constrained_dynamics(model, q, qd, tau)
    assert np.linalg.norm(r.qdd - ref) <= 1e-9 * np.linalg.norm(ref)
    scale = np.linalg.norm(J, 2) * np.linalg.norm(ref)
    assert np.linalg.norm(J @ r.qdd - gamma) <= 1e-10 * scale
    # the multipliers balance the motion: M qdd + h - tau = J^T lambda
    lhs = M @ r.qdd + h - tau
    assert np.linalg.norm(lhs - J.T @ r.multipliers) <= 1e-9 * max(np.linalg.norm(lhs), np.linalg.norm(tau))



def _mast_state(model, seed):
    q = model.neutral()
    rng = np.random.default_rng(seed)
    _, _, _, _, _, Z = null_space_reference(model, q, np.zeros(model.nv), np.zeros(model.nv))
    return q, Z @ rng.standard_normal(Z.shape[1]), rng.standard_normal(model.nv)


def test_redundant_drop_and_share():
    """``redundant="drop"`` (the rows the pivoting leaves out carry no force: the parallel
    engine's solution) against the default "share".  On the planar mast no group repeats its
    rows and both are the same solve; on a short spatial mast both have the null-space solve's
    qdd, both multiplier sets balance the motion, and the shared ones are the smaller.  A call
    does not depend on the calls before it: "drop" after "share" is "drop" on a fresh model."""
    model = scissor_mast(6, closed=True)
    q, qd, tau = _mast_state(model, 6)
    ref, *_ = null_space_reference(model, q, qd, tau)
    share = partree.constrained_dynamics(model, q, qd, tau)
    drop = partree.constrained_dynamics(model, q, qd, tau, redundant="drop")
    assert np.array_equal(share.qdd, drop.qdd) and np.array_equal(share.multipliers, drop.multipliers)
    assert np.linalg.norm(share.qdd - ref) <= 1e-12 * np.linalg.norm(ref)

    q, qd, tau = _mast_state(scissor_mast(3, section="triangle"), 3)
    fresh = partree.constrained_dynamics(scissor_mast(3, section="triangle"), q, qd, tau, redundant="drop")
    model = scissor_mast(3, section="triangle")
    ref, J, gamma, M, h, _ = null_space_reference(model, q, qd, tau)
    share = partree.constrained_dynamics(model, q, qd, tau)
    drop = partree.constrained_dynamics(model, q, qd, tau, redundant="drop")
    assert np.array_equal(drop.qdd, fresh.qdd) and np.array_equal(drop.multipliers, fresh.multipliers)
    assert np.array_equal(partree.constrained_dynamics(model, q, qd, tau).qdd, share.qdd)
    for r in (share, drop):
        assert np.linalg.norm(r.qdd - ref) <= 1e-9 * np.linalg.norm(ref)
        lhs = M @ r.qdd + h - tau
        assert np.linalg.norm(lhs - J.T @ r.multipliers) <= 1e-12 * np.linalg.norm(lhs)
    assert np.count_nonzero(drop.multipliers) == drop.rank < np.count_nonzero(share.multipliers)
    assert np.linalg.norm(share.multipliers) < np.linalg.norm(drop.multipliers)
    with pytest.raises(partree.PartreeInputError, match="redundant must be 'share' or 'drop'"):
        partree.constrained_dynamics(model, q, qd, tau, redundant="pinv")
