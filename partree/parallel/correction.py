"""The loops' corrections through the parallel engine: coordinates and velocities put back on
the constraint manifold in the kinetic-energy metric, in O(N) on every backend.

The smallest change dx in the metric of the mass matrix M with J dx = r is dx = M^-1 J^T mu,
J M^-1 J^T mu = r: the solution of the constrained equations M x = J^T mu, J x = r, which is
the engine's forward dynamics with no joint forces, no velocity products, no gravity and the
loops' rows set equal to r instead of gamma (``PartKernel.reduce(..., rows=...)``): r = -Phi for
a Gauss-Newton step of the coordinates (seed 003's eqs. 25-27 in the mass metric) and
r = -J qd for the velocity projection (eq. 28).  The loops inside parts are eliminated there, the
loops a partition splits at the root, as in the dynamics; no mass matrix or Jacobian is formed.

:func:`correct` holds the iteration, written once for every backend: it takes the backend's
``step(q, qd, rows) -> (dx, max abs(Phi) at q)`` (collective where the state is distributed: the
violation is the maximum over all processes, so that all take the same decisions), its
``retract(q, dv, s) -> q (+) s dv`` and ``add(qd, dx) -> qd + dx`` (the vectors may live on
workers: the iteration only combines them through these).  The steps and their line search are those of
``partree.algorithms.loop_correction`` (``correct_state`` with ``metric='mass'``), whose metric
is M at the first iterate while these take M at each one: the results agree to the square of
the violation corrected.
"""
from __future__ import annotations

from ..errors import PartreeInputError


#: a violation no Gauss-Newton step reduces any more is the rounding floor when below this (the
#: floor grows with the mechanism's size: about 1e-12 m for a mast of 10^4 units, 10 km tall)
FLOOR_TOL = 1e-9


def project_positions(step, retract, q, qd, tol=1e-12, max_iter=20, polish=0):
    """Gauss-Newton steps in the mass metric until max abs(Phi) <= tol, then up to ``polish`` more
    while they still reduce it.  A violation above ``tol`` that no step reduces any more (the
    line search exhausted) is accepted as the rounding floor when it is below ``FLOOR_TOL``.
    Returns (q, violation)."""
    dv, err = step(q, qd, "position")
    err0 = err
    extra = 0
    for it in range(max_iter + polish + 1):
        if err <= tol:
            if extra >= polish or err == 0.0:
                return q, err
            extra += 1
        elif it >= max_iter:
            break
        s = 1.0
        for _ in range(30):
            qn = retract(q, dv, s)
            dvn, en = step(qn, qd, "position")
            if en < err or s < 1e-6 or err <= max(tol, FLOOR_TOL):
                break
            s *= 0.5
        if en >= err and err <= max(tol, FLOOR_TOL):
            return q, err                 # the rounding floor: no step reduces it further
        q, dv, err = qn, dvn, en
    raise PartreeInputError(f"the loops could not be closed: violation {err:.3g} (from {err0:.3g}) after "
                            f"{max_iter} Gauss-Newton steps")


def correct(step, retract, q, qd, tol=1e-12, max_iter=20, polish=0, positions=True, add=None):
    """(q, qd) on the manifold: the coordinates by :func:`project_positions` (unless
    ``positions`` is False), then qd + dx with J dx = -J qd in the mass metric."""
    if positions:
        q, _ = project_positions(step, retract, q, qd, tol, max_iter, polish)
    dx, _ = step(q, qd, "velocity")
    return q, (qd + dx) if add is None else add(qd, dx)
