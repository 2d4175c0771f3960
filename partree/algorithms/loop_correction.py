"""Putting a state back on the loops' constraint manifold (seed 003, section 2.3).

The column-pivoted QR of the Jacobian's transpose, J^T P = Q R (seed 003, eqs. 8-17), finds the
independent rows (the first ``rank`` pivots, P_n) and orthonormal bases of the normal space (Q_n,
spanned by J's rows) and the tangent space (Q_t) of the constraint manifold:

* coordinates: q <- q - Q_n R_n^-T (P_n^T Phi), repeated (Gauss-Newton; eqs. 25-27);
* velocities: qd <- Q_t Q_t^T qd (eq. 28 for constraints that do not depend on time);
* accelerations at and near singular configurations: qdd <- Q_t Q_t^T qdd + Q_n R_n^-T (P_n^T
  gamma) (eq. 31 with the normal part from the acceleration constraints, eq. 17).

Corrections are steps in v (``partree.integrate``), so quaternions stay unit.  The QR is dense:
for models whose J (rows x nv) exceeds ``DENSE_LIMIT`` entries the corrections use the
minimum-norm least-squares solution of the same linear system by LSMR instead (the same step
where the rows are independent).

Metric.  The steps are the smallest in a metric on v: the Euclidean one (``metric='euclidean'``,
the default of :func:`correct_state`), or the kinetic-energy metric of the mass matrix M(q)
(``metric='mass'``; seed 003's Riemannian variant of the projection), in which the velocity
correction is the change a constraint impulse J^T mu makes, M^-1 J^T mu, and the coordinate steps
lie along M^-1 J^T too.  Simulations use the mass metric (``partree.simulation.closure``): an error
in the accelerations that comes from the constraints' side (the bias gamma, evaluated off the
manifold) is M^-1 J^T dlambda, exactly what the mass-metric corrections remove, whereas the
Euclidean ones remove only its part normal to the manifold and keep the rest as motion along it.
Near a singular configuration (a four-bar whose bars align) that matters: there the
corrections pin the state to its branch only to the rounding level divided by the vanishing
singular value s, the velocity to that over s again, and the bias gamma of the rows losing rank
is divided by s once more, so the multipliers' error grows like 1/s^3 towards the singular
position; with Euclidean corrections each passage left an error along the branch (1e-7 for the
parallelogram four-bar of seed 003 at RK4's 1e-3 s step), with mass-metric ones none beyond the
integrator's.  Both are QR-based: with M = L L^T, the mass-metric step is W = L^-T times the
Euclidean step of J W (``MASS_LIMIT`` bounds the dense M a simulation factors).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import lsmr

from .. import checks
from ..configuration import integrate
from ..errors import PartreeInputError
from .loop_constraints import constraint_terms, loop_constraints

#: the largest J (rows x nv entries) factored by the dense QR
DENSE_LIMIT = 4_000_000


class ConstraintBases:
    """The column-pivoted QR of J^T: ``rank``, ``independent`` (row numbers, pivot order),
    ``Qn`` (nv, rank), ``Qt`` (nv, nv - rank) and ``Rn`` (rank, rank), J^T[:, independent] =
    Qn Rn."""

    def __init__(self, J, rank_tol=1e-8):
        Jd = J.toarray() if hasattr(J, "toarray") else np.asarray(J, dtype=float)
        nv, m = Jd.shape[1], Jd.shape[0]
        if m == 0:
            self.rank, self.independent = 0, np.zeros(0, dtype=np.int64)
            self.Qn, self.Qt, self.Rn = np.zeros((nv, 0)), np.eye(nv), np.zeros((0, 0))
            return
        Q, R, piv = sla.qr(Jd.T, pivoting=True)
        d = np.abs(np.diag(R))
        rank = int(np.count_nonzero(d > rank_tol * max(d[0], 1e-300))) if d.size else 0
        self.rank = rank
        self.independent = piv[:rank]
        self.Qn, self.Qt, self.Rn = Q[:, :rank], Q[:, rank:], R[:rank, :rank]

    def normal_solve(self, rhs):
        """The vector x in the normal space with (J x)[independent] = rhs[independent]."""
        y = sla.solve_triangular(self.Rn, rhs[self.independent], trans="T") if self.rank else np.zeros(0)
        return self.Qn @ y

    def tangent(self, x):
        """Q_t Q_t^T x."""
        return self.Qt @ (self.Qt.T @ x)


#: the metrics of the corrections
METRICS = ("euclidean", "mass")

#: the largest mass matrix (nv x nv entries) a simulation factors for the mass metric
MASS_LIMIT = 65_536


def mass_metric(model, q, metric="euclidean"):
    """The factor of the corrections' metric at q: None for the Euclidean one, or for 'mass'
    W = L^-T with L the lower Cholesky factor of the mass matrix M(q) = L L^T (dense, CRBA), so
    that W W^T = M^-1 (None too where M is not positive definite: the Euclidean metric)."""
    if metric not in METRICS:
        raise PartreeInputError(f"metric must be one of {', '.join(METRICS)}; got {metric!r}")
    if metric == "euclidean":
        return None
    from .crba import crba
    try:
        return np.linalg.inv(np.linalg.cholesky(crba(model, q))).T
    except np.linalg.LinAlgError:
        return None


def simulation_metric(model):
    """The metric of a simulation's corrections: 'mass' where M is within ``MASS_LIMIT`` entries
    and J within ``DENSE_LIMIT`` (dense Cholesky and QR, O(nv^3) per step), 'euclidean' beyond."""
    nv = model.nv
    return "mass" if nv * nv <= MASS_LIMIT and model.loops.nrow * nv <= DENSE_LIMIT else "euclidean"


def _min_norm(J, rhs, rank_tol, W=None):
    """The minimum-norm x with J x = rhs (least squares where inconsistent), in the Euclidean
    norm, or with W = L^-T (M = L L^T) in the mass metric: x = W y with y J W's minimum-norm one."""
    if W is not None:
        return W @ ConstraintBases(J @ W, rank_tol).normal_solve(rhs)
    if J.shape[0] * J.shape[1] <= DENSE_LIMIT:
        return ConstraintBases(J, rank_tol).normal_solve(rhs)
    return lsmr(J, rhs, atol=1e-15, btol=1e-15, maxiter=20 * J.shape[0] + 100)[0]


def phi_and_jacobian(model, q):
    """Phi and J at q (checked), J dense where the dense QR takes it (``DENSE_LIMIT``)."""
    terms, J, _ = constraint_terms(model, q, dense=model.loops.nrow * model.nv <= DENSE_LIMIT, need_gamma=False)
    return terms.phi, J


def _project_positions(model, q, tol, max_iter, rank_tol, free=None, what="correct_state", polish=0, W=None):
    """Gauss-Newton steps until max |Phi| <= tol, then up to ``polish`` more while they still
    reduce it (down to the rounding floor); the steps in the mass metric with W (``mass_metric``,
    all dofs free).  Returns (q, violation, steps, J at q)."""
    phi0 = None
    phi, Jq = phi_and_jacobian(model, q)
    err = float(np.abs(phi).max(initial=0.0))
    phi0 = err
    extra = 0
    for it in range(max_iter + polish + 1):
        if err <= tol:
            if extra >= polish or err == 0.0:
                return q, err, it, Jq
            extra += 1
        elif it >= max_iter:
            break
        J = Jq if free is None else Jq[:, free]
        step = _min_norm(J, -phi, rank_tol, W)
        dv = np.zeros(model.nv)
        if free is None:
            dv[:] = step
        else:
            dv[free] = step
        # a Gauss-Newton step, shortened while it does not reduce the violation (a polishing step
        # is not: at the rounding floor none would)
        s = 1.0
        for _ in range(30):
            qn = integrate(model, q, s * dv)
            phin, Jn = phi_and_jacobian(model, qn)
            en = float(np.abs(phin).max(initial=0.0))
            if en < err or s < 1e-6 or err <= tol:
                break
            s *= 0.5
        if en >= err and err <= tol:
            return q, err, it, Jq         # the rounding floor: no step reduces it further
        q, phi, Jq, err = qn, phin, Jn, en
    raise PartreeInputError(f"{what}: the loops could not be closed: violation {err:.3g} (from {phi0:.3g}) after "
                            f"{max_iter} Gauss-Newton steps; the configuration may be too far from one that "
                            f"closes them (partree.assemble with a better guess or some joints fixed), or no "
                            f"configuration closes them")


def correct_state(model, q, qd=None, tol=1e-12, max_iter=20, rank_tol=1e-8, polish=0, metric="euclidean"):
    """Project a state onto the loops' constraint manifold: q with Phi(q) = 0, qd with J qd = 0.

    Coordinates by Gauss-Newton steps in the normal space (seed 003's eqs. 25-27, with the
    column-pivoted QR of J^T), velocities by the tangent-space projection Q_t Q_t^T qd (eq. 28):
    the smallest changes in the Euclidean norm of v, or with ``metric='mass'`` in the
    kinetic-energy norm (the same steps for J L^-T, M = L L^T; see the module docstring).

    Parameters
    ----------
    model : Model
        A model with loops.
    q : ndarray (nq,)
    qd : ndarray (nv,), optional
        Projected too when given.
    tol : float
        The largest violation max abs(Phi) accepted.
    max_iter : int
        Gauss-Newton steps at most.
    rank_tol : float
        Relative size of R's diagonal below which a row counts as dependent.
    polish : int
        Gauss-Newton steps taken beyond ``tol`` while they still reduce the violation (to the
        rounding floor): near a singular configuration the violation left is divided by a
        vanishing singular value, so simulations polish.
    metric : str
        'euclidean' (default) or 'mass': the norm of v in which the changes are smallest (the
        mass matrix at the given q).  Simulations use 'mass' (``partree.simulate``).

    Returns
    -------
    q, or (q, qd) when qd is given.

    Raises
    ------
    PartreeInputError
        When the loops cannot be closed from q (the violation is in the message).
    """
    q, qd_ = checks.state(model, q, np.zeros(model.nv) if qd is None else qd)
    if not len(model.loops):
        return q.copy() if qd is None else (q.copy(), qd_.copy())
    W = mass_metric(model, q, metric)
    q, _, _, J = _project_positions(model, q.copy(), tol, max_iter, rank_tol, polish=int(polish), W=W)
    if qd is None:
        return q
    return q, project_velocity(J, qd_, rank_tol, W)


def project_velocity(J, qd, rank_tol=1e-8, W=None):
    """qd minus its component in the normal space: J qd = 0 (minimum change; in the mass metric
    with W = ``mass_metric(model, q, 'mass')``: minus M^-1 J^T mu)."""
    return qd - _min_norm(J, J @ qd, rank_tol, W)


def tangent_acceleration(J, gamma, qdd, rank_tol=1e-8):
    """qdd with its normal-space part replaced by the one the acceleration constraints give:
    Q_t Q_t^T qdd + Q_n R_n^-T (P_n^T gamma) (seed 003, eqs. 17 and 31).  At a singular
    configuration the reduced equations leave qdd's normal part undetermined along the
    vanishing directions; this fixes it from the constraints alone."""
    if J.shape[0] * J.shape[1] <= DENSE_LIMIT:
        B = ConstraintBases(J, rank_tol)
        return B.tangent(qdd) + B.normal_solve(gamma)
    return qdd - _min_norm(J, J @ qdd - gamma, rank_tol)


def singular_band_acceleration(J, gamma, qdd, band, rank_tol=1e-12, W=None):
    """qdd with its normal-space part rebuilt from the well-conditioned constraint rows only.

    The column-pivoted QR of J^T (J^T P = Q R) orders the normal directions by the size of R's
    diagonal.  Directions with R_jj >= band * R_00 take their component from the acceleration
    constraints (forward substitution with R^T, eq. 17); directions with R_jj below it (rows
    near a singular configuration, where the constraints' curvature term divides by the
    vanishing R_jj) get none; the tangent part Q_t Q_t^T qdd is kept (seed 003, eq. 31).  Where
    no direction is near singular this is qdd itself.  With W (``mass_metric``) the same in the
    mass metric: the QR of (J W)^T, applied to W^-1 qdd, the result mapped back by W (so that the
    change lies along M^-1 J^T, which the simulation's mass-metric corrections remove)."""
    Jd = J.toarray() if hasattr(J, "toarray") else np.asarray(J, dtype=float)
    if Jd.shape[0] == 0:
        return qdd
    if W is not None:
        out = singular_band_acceleration(Jd @ W, gamma, np.linalg.solve(W, qdd), band, rank_tol)
        return W @ out
    Q, R, piv = sla.qr(Jd.T, pivoting=True)
    d = np.abs(np.diag(R))
    if d.size == 0 or d[0] == 0.0:
        return qdd
    rank = int(np.count_nonzero(d > rank_tol * d[0]))
    weak = d[:rank] < band * d[0]
    if not weak.any():
        return qdd
    y = np.zeros(rank)
    g = gamma[piv[:rank]]
    for j in range(rank):
        if weak[j]:
            continue
        y[j] = (g[j] - R[:j, j] @ y[:j]) / R[j, j]
    Qt = Q[:, rank:]
    return Qt @ (Qt.T @ qdd) + Q[:, :rank] @ y


def assemble(model, q_guess=None, fixed=None, tol=1e-12, max_iter=50, rank_tol=1e-8):
    """A configuration that closes every loop, near ``q_guess``, with some joints held.

    Parameters
    ----------
    model : Model
        A model with loops.
    q_guess : ndarray (nq,), optional
        Starting configuration (default: the neutral one).
    fixed : dict, optional
        {joint name or body number: value}: joints held at these coordinates (a number for a
        1-DOF joint, an array of its nq coordinates otherwise); the others move.  The driving
        joint of a mechanism is the usual one to fix.
    tol, max_iter, rank_tol
        As for :func:`correct_state`.

    Returns
    -------
    q : ndarray (nq,)

    Raises
    ------
    PartreeInputError
        When no configuration near the guess closes the loops (the violation is in the message).
    """
    q = model.neutral() if q_guess is None else checks.state(model, q_guess)[0].copy()
    free = np.ones(model.nv, dtype=bool)
    for name, value in (fixed or {}).items():
        try:
            i = model.joint_id(name)
        except KeyError:
            raise PartreeInputError(f"assemble: fixed names no joint {name!r}") from None
        sl = model.q_slice(i)
        val = np.atleast_1d(np.asarray(value, dtype=float))
        if val.size != sl.stop - sl.start:
            raise PartreeInputError(f"assemble: joint {model.joint_names[i]!r} has {sl.stop - sl.start} "
                                    f"coordinates; got {val.size} values")
        q[sl] = val
        free[model.v_slice(i)] = False
    if not len(model.loops):
        return q
    q, _, _, _ = _project_positions(model, q, tol, max_iter, rank_tol, np.flatnonzero(free), "assemble")
    return q
