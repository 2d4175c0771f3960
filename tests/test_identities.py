"""Cross-algorithm identities on large random trees (no reference implementation involved)."""
import numpy as np
import pytest

import partree
from partree.models import auto_tree, random_tree

from conftest import rel_err

LARGE = {
    "random-2000": lambda: random_tree(2000, seed=7, joint_types=("revolute", "prismatic", "universal",
                                                                   "spherical", "fixed")),
    "random-floating-2000": lambda: random_tree(2000, seed=8, floating_base=True),
    "binary-4095": lambda: auto_tree(4095, 2, skew=0.2, taper=0.99),
    "chain-1000": lambda: auto_tree(1000, 1, skew=0.1, taper=0.999),
}


@pytest.mark.parametrize("name", list(LARGE))
def test_aba_inverts_rnea(name, rng):
    m = LARGE[name]()
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    qdd = rng.normal(size=m.nv)
    F = rng.normal(size=(m.n, 6))
    tau = partree.rnea(m, q, qd, qdd, f_ext=F)
    back = partree.aba(m, q, qd, tau, f_ext=F)
    # backward error: RNEA of the computed acceleration reproduces tau
    assert rel_err(partree.rnea(m, q, qd, back, f_ext=F), tau) < 1e-9
    if m.n <= 2000:
        assert rel_err(back, qdd) < 1e-6   # forward error grows with the conditioning of M


@pytest.mark.parametrize("name", ["random-2000", "binary-4095"])
def test_crba_and_bias(name, rng):
    m = LARGE[name]()
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    qdd = rng.normal(size=m.nv)
    Ms = partree.crba(m, q, sparse=True)
    b = partree.bias_forces(m, q, qd)
    assert rel_err(Ms @ qdd + b, partree.rnea(m, q, qd, qdd)) < 1e-10
    op = partree.mass_matrix_operator(m, q)
    assert rel_err(op @ qdd, Ms @ qdd) < 1e-10
    y = Ms @ qdd
    assert rel_err(Ms @ op.solve(y), y) < 1e-9
    if m.nv <= 2500:
        M = partree.crba(m, q)
        assert rel_err(M, Ms.toarray()) < 1e-12
        assert np.allclose(M, M.T)
        assert np.linalg.eigvalsh(M)[0] > 0


@pytest.mark.parametrize("name", ["random-floating-2000", "chain-1000"])
def test_power_balance(name, rng):
    """d(T + V)/dt = qd . tau (no external forces), by central differences along the motion."""
    m = LARGE[name]()
    if name == "chain-1000":
        m = auto_tree(60, 1, skew=0.1)
    q, qd = m.random_configuration(rng, 0.5), m.random_velocity(rng, 0.5)
    tau = rng.normal(size=m.nv)
    qdd = partree.aba(m, q, qd, tau)

    def state(h):
        # second-order Taylor step of (q, qd), quaternions handled through the body-frame rates
        from partree.configuration import integrate as integrate_configuration
        return integrate_configuration(m, q, qd * h + 0.5 * qdd * h * h), qd + qdd * h

    h = 1e-4
    qp, qdp = state(h)
    qm, qdm = state(-h)
    Ep = sum(partree.energy(m, qp, qdp))
    Em = sum(partree.energy(m, qm, qdm))
    dE = (Ep - Em) / (2 * h)
    assert abs(dE - qd @ tau) < 1e-6 * max(1.0, abs(qd @ tau), sum(map(abs, partree.energy(m, q, qd))))


def test_free_fall_momentum(rng):
    """Without gravity or torques a floating tree keeps its spatial momentum: dh/dt = 0."""
    m = random_tree(60, seed=11, floating_base=True)
    m.gravity[:] = 0.0
    q, qd = m.random_configuration(rng), m.random_velocity(rng)
    qdd = partree.aba(m, q, qd, np.zeros(m.nv))
    from partree.configuration import integrate as integrate_configuration
    h = 1e-5
    hp = partree.momentum(m, integrate_configuration(m, q, qd * h + 0.5 * qdd * h * h), qd + qdd * h)
    hm = partree.momentum(m, integrate_configuration(m, q, -qd * h + 0.5 * qdd * h * h), qd - qdd * h)
    h0 = partree.momentum(m, q, qd)
    assert np.abs((hp - hm) / (2 * h)).max() < 1e-6 * max(1.0, np.abs(h0).max())
