"""Generalized momenta p = M(q) v in O(N), without forming M (seed 001, eqs. 3-6).

With the body velocities v_i = X_up[i] v_parent + S_i qd_i (seed 001's eq. 1 and its matrix form
S v = A qd, eq. 3), the momentum of the subtree rooted at body i, in body i's coordinates, is

    mu_i = I_i v_i + sum over the children j of X_up[j]^T mu_j

(the first equation of eq. 6, M v = S^T mu, read row by row), and the momentum conjugate to
joint i's velocity coordinates is its projection on the joint's motion subspace,

    p_i = S_i^T mu_i          (eq. 6: A^T mu = p).

Summed over the subtree this is row i of M(q) v, since joint i moves exactly the bodies of its
subtree, each along S_i.  Two passes: outward, the joint frames X_up, S_i and the body velocities
v_i (pass 1 of the articulated-body algorithm, ``partree.algorithms.aba.aba_forward_pass1``,
which also sets IA_i = I_i); inward, :func:`momentum_backward_pass`.

Velocities are in partree's v coordinates: for a spherical or free joint v holds body-frame
velocities (nv < nq), and p is conjugate to them (the derivative of the kinetic energy with
respect to those quasi-velocities), not to the quaternion's rate.
"""
import numpy as np
from numba import njit

from .. import checks
from .aba import aba_forward_pass1
from .primitives import xform_force_T_add


@njit(cache=True)
def momentum_backward_pass(parent, idx_v, E, r, v, IA, S, mu, p):
    """Inward: the subtree momenta mu_i = I_i v_i + sum_j X_up[j]^T mu_j (``IA`` holding the
    rigid-body inertias I_i) and p_i = S_i^T mu_i."""
    n = parent.shape[0]
    nvt = S.shape[0]
    for i in range(n):
        for k in range(6):
            mu[i, k] = 0.0
    for i in range(n - 1, -1, -1):
        for k in range(6):
            s = mu[i, k]
            for l in range(6):
                s += IA[i, k, l] * v[i, l]
            mu[i, k] = s
        iv = idx_v[i]
        nv = (idx_v[i + 1] if i + 1 < n else nvt) - iv
        for d in range(nv):
            s = 0.0
            for k in range(6):
                s += S[iv + d, k] * mu[i, k]
            p[iv + d] = s
        p_ = parent[i]
        if p_ >= 0:
            xform_force_T_add(E[i], r[i], mu[i], mu[p_])


@njit(cache=True)
def generalized_momentum_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v,
                                q, qd, E, r, v, c, IA, pA, S, p):
    """The two passes; p (nv,) receives the momenta and pA (n, 6) the subtree momenta mu_i."""
    aba_forward_pass1(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                      np.zeros((1, 6)), False, E, r, v, c, IA, pA, S)
    momentum_backward_pass(parent, idx_v, E, r, v, IA, S, pA, p)


def generalized_momentum(model, q, qd, data=None):
    """Generalized momenta p = M(q) qd (nv,), in O(N) and without forming M.

    Outward the body velocities, inward the subtree momenta mu_i, and p_i = S_i^T mu_i (seed
    001's eq. 6); see the module docstring.

    Parameters
    ----------
    model : Model
    q : ndarray
        Configuration (nq,).
    qd : ndarray
        Velocity (nv,), in partree's v coordinates (body-frame angular, and for a free joint
        linear, velocities for the quaternion joints).
    data : Data, optional
        A reusable workspace (``model.create_data()``); the model's own is used when omitted.

    Returns
    -------
    ndarray
        p (nv,), the momenta conjugate to the v coordinates: p = dT/dqd for the kinetic energy
        T = qd^T M qd / 2.
    """
    q, qd = checks.state(model, q, qd)
    d = checks.data_for(model, data)
    p = np.empty(model.nv)
    generalized_momentum_kernel(*checks.model_args(model), q, qd, d.E, d.r, d.v, d.c, d.IA, d.pA, d.S, p)
    return p
