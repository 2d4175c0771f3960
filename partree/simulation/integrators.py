"""Time integrators for tree dynamics, built around a pluggable dynamics function.

The state is (q, y): the configuration q (nq, quaternions included) and y (nv): the generalised
velocity v in the velocity form, the generalised momenta p = M(q) v in the momentum form (seed
001; ``simulate(..., formulation='momentum')``).  Every integrator only needs

- the dynamics function, in one of two shapes:

  * ``f(t, q, v) -> qdd`` (velocity form: serial ABA or hybrid dynamics, see
    ``partree.simulation.dynamics``; a distributed backend's evaluation over its parts, on the
    local pieces of the state): the configuration moves with y itself;
  * ``f(t, q, y) -> (w, ydot)`` when ``f.returns_rate`` is True (the momentum form,
    ``partree.simulation.dynamics.MomentumDynamics``: w = v = M^-1 p and ydot = pdot): the
    configuration moves with w, which the evaluation solves for; ``f.velocity(t, q, y)`` gives
    w alone;

- a ``StateSpace``: the hooks that know the state layout -- ``retract(q, dq)`` (q ⊕ dq through
  ``partree.integrate``: quaternions move on the sphere and stay unit), ``dexpinv`` (the
  correction that makes the Lie-group Runge-Kutta methods keep their order), the error-scale
  magnitude of q, and the global weighted RMS norm, whose sum goes through ``allreduce`` so an
  MPI backend holding the state in pieces can sum the parts (``StateSpace(model,
  allreduce=lambda s: comm.allreduce(s))``).

Configuration stages are velocity-space increments (Runge-Kutta-Munthe-Kaas): stage i sits at
``q_i = q0 ⊕ Θ_i`` with ``Θ_i = h Σ_j a_ij K_j`` and ``K_j = dexpinv(Θ_j, w_j)``, w_j the stage's
velocity; for joints whose configuration space is a vector space (revolute, prismatic,
universal) ``dexpinv`` is the identity and the method is the classical one, bit for bit.

Integrators:
    RK4                fixed step, order 4
    SymplecticEuler    fixed step, order 1: y1 = y + h f(t, q, y), q1 = q ⊕ h w(q, y1)
                       (symplectic in the velocity form for forces that do not depend on v;
                       in the momentum form, whose Hamiltonian is not separable, it is not)
    Gauss6             fixed step, order 6: the 3-stage Gauss-Legendre collocation method,
                       implicit, symmetric and symplectic (the momentum form's method)
    DormandPrince5     adaptive 5(4), FSAL
    DOP853             adaptive 8(5,3)
    (``scipy``: ``partree.simulation.simulate(..., integrator='scipy')`` hands the flat state to
    ``scipy.integrate.solve_ivp``; serial backend, models without quaternions only.)
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .. import joints as J
from ..configuration import integrate as _integrate
from ..errors import PartreeInputError
from . import tableaus as T



class StateSpace:
    """State layout hooks for one model (or one part of it, for a distributed backend).

    ``allreduce(x)``: sums a float (or small array) over all processes holding a part of the
    state; the identity in serial runs.
    """

    def __init__(self, model, allreduce=None):
        self.model = model
        self.nq, self.nv = model.nq, model.nv
        self.allreduce = allreduce if allreduce is not None else (lambda x: x)
        jt = model.jtype
        sph = np.flatnonzero(jt == J.SPHERICAL)
        free = np.flatnonzero(jt == J.FREE)
        self.has_groups = bool(sph.size or free.size)
        # fast path: no quaternions -> q ⊕ dq is q + dq element by element (idx_q == idx_v)
        self.vector_space = not self.has_groups
        self._sph_v = (model.idx_v[sph][:, None] + np.arange(3)) if sph.size else None
        self._free_v = (model.idx_v[free][:, None] + np.arange(6)) if free.size else None
        if self.has_groups:
            # magnitude of q in velocity layout, for error scales: |q| of simple joints, |position|
            # of free joints, 1 for rotations
            simple = np.flatnonzero(np.isin(jt, (J.REVOLUTE, J.PRISMATIC, J.UNIVERSAL)))
            src, dst = [], []
            for k in range(2):
                sel = simple[model.nv_j[simple] > k]
                src.append(model.idx_q[sel] + k)
                dst.append(model.idx_v[sel] + k)
            if free.size:
                src.append((model.idx_q[free][:, None] + np.arange(3)).ravel())
                dst.append((model.idx_v[free][:, None] + np.arange(3)).ravel())
            self._mag_src = np.concatenate(src).astype(np.int64)
            self._mag_dst = np.concatenate(dst).astype(np.int64)
            self._mag_base = np.ones(self.nv)
            self._mag_base[self._mag_dst] = 0.0

    # ---------------------------------------------------------------- manifold
    def retract(self, q, dq):
        """q ⊕ dq (dq in velocity coordinates, already multiplied by the step)."""
        if self.vector_space:
            return q + dq
        return _integrate(self.model, q, dq)

    def dexpinv(self, theta, v):
        """d/dt Θ for q(t) = q0 ⊕ Θ(t) moving with body velocity v: dexp^{-1}_{-Θ}(v)
        (right trivialisation) on the SO(3) / SE(3) joints; v elsewhere."""
        if not self.has_groups:
            return v
        out = v.copy()
        if self._sph_v is not None:
            k = self._sph_v
            out[k] = _dexpinv_so3(theta[k], v[k])
        if self._free_v is not None:
            k = self._free_v
            out[k] = _dexpinv_se3(theta[k], v[k])
        return out

    def q_magnitude(self, q):
        """The magnitudes ``|q|`` laid out like v (for error scales)."""
        if self.vector_space:
            return np.abs(q)
        m = self._mag_base.copy()
        m[self._mag_dst] = np.abs(q[self._mag_src])
        return m

    # ---------------------------------------------------------------- norms
    def rms_norm(self, *pairs):
        """Global weighted RMS sqrt(Σ (e/s)^2 / count) over (error, scale) pairs, all processes."""
        ss = 0.0
        cnt = 0
        for e, s in pairs:
            r = e / s
            ss += float(r @ r)
            cnt += r.size
        ss, cnt = self.allreduce(np.array([ss, float(cnt)]))
        return math.sqrt(ss / max(cnt, 1.0))


@njit(cache=True)
def _dexpinv_kernel(xi, x, se3):
    """dexp^{-1}_{-Θ}(x) = x + 1/2 ad_Θ x + Σ_k B_2k/(2k)! ad_Θ^{2k} x, row by row.

    so(3) (se3 False): rows of 3, ad_Θ x = Θ × x.  se(3): rows of 6 as [linear; angular],
    ad_ξ X = (φ × X_ρ + ρ × X_φ, φ × X_φ).  The series converges for |Θ| < 2π (steps are far
    smaller) and is cut after B_10 (relative error below 1e-16 for |Θ| < 0.3)."""
    bern = (1.0 / 12.0, -1.0 / 720.0, 1.0 / 30240.0, -1.0 / 1209600.0, 1.0 / 47900160.0)
    k, d = x.shape
    out = np.empty_like(x)
    y = np.empty(d)
    z = np.empty(d)
    for r in range(k):
        if se3:
            r0, r1, r2 = xi[r, 0], xi[r, 1], xi[r, 2]
            p0, p1, p2 = xi[r, 3], xi[r, 4], xi[r, 5]
        else:
            r0 = r1 = r2 = 0.0
            p0, p1, p2 = xi[r, 0], xi[r, 1], xi[r, 2]
        for c in range(d):
            y[c] = x[r, c]
            out[r, c] = x[r, c]
        for it in range(11):
            # z = ad(y)
            if se3:
                z[0] = p1 * y[2] - p2 * y[1] + r1 * y[5] - r2 * y[4]
                z[1] = p2 * y[0] - p0 * y[2] + r2 * y[3] - r0 * y[5]
                z[2] = p0 * y[1] - p1 * y[0] + r0 * y[4] - r1 * y[3]
                z[3] = p1 * y[5] - p2 * y[4]
                z[4] = p2 * y[3] - p0 * y[5]
                z[5] = p0 * y[4] - p1 * y[3]
            else:
                z[0] = p1 * y[2] - p2 * y[1]
                z[1] = p2 * y[0] - p0 * y[2]
                z[2] = p0 * y[1] - p1 * y[0]
            if it == 0:
                coef = 0.5
            elif it % 2 == 1:
                coef = bern[(it - 1) // 2]
            else:
                coef = 0.0
            for c in range(d):
                y[c] = z[c]
                out[r, c] += coef * z[c]
    return out


def _dexpinv_so3(th, w):
    return _dexpinv_kernel(np.ascontiguousarray(th), np.ascontiguousarray(w), False)


def _dexpinv_se3(xi, v):
    return _dexpinv_kernel(np.ascontiguousarray(xi), np.ascontiguousarray(v), True)


# ==================================================================== integrators
class Integrator:
    """Base class. ``f(t, q, v) -> qdd``, or ``f(t, q, y) -> (w, ydot)`` when ``f.returns_rate``
    (module docstring); ``space``: a ``StateSpace``."""

    name = "?"
    adaptive = False
    order = 0

    def __init__(self, f, space):
        self.f = f
        self.space = space
        self.nfev = 0
        #: whether f returns the configuration's velocity with the rate of y (the momentum form)
        self.returns_rate = bool(getattr(f, "returns_rate", False))

    def _f(self, t, q, v):
        self.nfev += 1
        return self.f(t, q, v)

    def _rates(self, t, q, y):
        """(w, ydot): the velocity the configuration moves with and the rate of y.  In the
        velocity form w is y itself (no copy) and ydot = f(t, q, y)."""
        self.nfev += 1
        if self.returns_rate:
            return self.f(t, q, y)
        return y, self.f(t, q, y)

    def _velocity(self, t, q, y):
        """w alone: y in the velocity form, ``f.velocity(t, q, y)`` (M^-1 p) in the momentum form."""
        if self.returns_rate:
            return self.f.velocity(t, q, y)
        return y

    def state_dict(self):
        """What a checkpoint must hold to continue bit for bit (plain floats and arrays)."""
        return {"nfev": self.nfev}

    def load_state_dict(self, d):
        self.nfev = int(d.get("nfev", 0))


class RK4(Integrator):
    """Classical Runge-Kutta 4 (RKMK form on the joint manifolds)."""

    name = "rk4"
    order = 4

    def step(self, t, q, v, h):
        sp = self.space
        w1, a1 = self._rates(t, q, v)
        v2 = v + (0.5 * h) * a1
        th2 = (0.5 * h) * w1
        q2 = sp.retract(q, th2)
        w2, a2 = self._rates(t + 0.5 * h, q2, v2)
        K2 = sp.dexpinv(th2, w2)
        v3 = v + (0.5 * h) * a2
        th3 = (0.5 * h) * K2
        q3 = sp.retract(q, th3)
        w3, a3 = self._rates(t + 0.5 * h, q3, v3)
        K3 = sp.dexpinv(th3, w3)
        v4 = v + h * a3
        th4 = h * K3
        q4 = sp.retract(q, th4)
        w4, a4 = self._rates(t + h, q4, v4)
        K4 = sp.dexpinv(th4, w4)
        h6 = h / 6.0
        q1 = sp.retract(q, h6 * (w1 + 2.0 * K2 + 2.0 * K3 + K4))
        v1 = v + h6 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
        return q1, v1


class SymplecticEuler(Integrator):
    """Semi-implicit Euler: v1 = v + h f(t, q, v); q1 = q ⊕ h v1 (symplectic for forces that do
    not depend on v; order 1).  In the momentum form: p1 = p + h pdot(t, q, p),
    q1 = q ⊕ h M(q)^-1 p1 (order 1, not symplectic: pdot depends on p)."""

    name = "symplectic-euler"
    order = 1

    def step(self, t, q, v, h):
        v1 = v + h * self._rates(t, q, v)[1]
        return self.space.retract(q, h * self._velocity(t, q, v1)), v1


class Gauss6(Integrator):
    """The 3-stage Gauss-Legendre method: implicit Runge-Kutta collocation, order 6, symmetric and
    symplectic (Hairer, Lubich & Wanner, "Geometric Numerical Integration", Secs. II.1.3, VI.4).

    Why this method for the momentum form: seed 001 integrates its equations in generalized
    momenta with a sixth-order Stormer method, which is built for q'' = f(q) or for a separable
    Hamiltonian H = T(p) + V(q).  In generalized momenta H = p^T M(q)^-1 p / 2 + V(q) is not
    separable (M depends on q), so no explicit splitting or Stormer scheme is symplectic for it;
    the Gauss methods are symplectic for every Hamiltonian, and the three-stage one has order
    six, the seed's order.  (A Yoshida composition of a symmetric second-order method would need
    an implicit base method here too, with more stages per step for the same order.)  For
    chains of revolute, prismatic and universal (Cardan) joints, whose momenta are canonical,
    the map (q, p) -> (q1, p1) is symplectic to the accuracy of the stage equations; on the
    quaternion joints it is the Runge-Kutta-Munthe-Kaas form (module docstring), of order six
    but not exactly symplectic.  The same step runs the velocity form (order six, not
    symplectic: (q, v) are not canonical).

    The stage equations Theta_i = h sum_j a_ij K_j, Z_i = h sum_j a_ij Kdot_j (configuration
    increments in velocity coordinates and increments of y) are solved by fixed-point
    iteration, which converges for h L < 1 (L the Lipschitz constant of the rates; the step of an
    explicit method of the same accuracy satisfies this) and needs no Jacobian, so a step stays
    O(N).  The iteration starts from the previous step's collocation polynomial continued over
    the new step (``tableaus.GAUSS6_EXTRAPOLATION``; the first step, or after a change of h,
    from Euler's c_i h f(y0)) and stops when the change of the increments, scaled by
    max(0.1, abs(y0)) per component, falls below the rounding unit or, once below 1e-8, stops
    decreasing (the rounding floor is reached), as in Hairer's GNI codes.  A step whose iteration
    grows three times in a row above that, or does not converge within :attr:`max_iterations`,
    is refused with ``FloatingPointError``: the step is too large for the fixed-point iteration;
    take a smaller dt.
    """

    name = "gauss6"
    order = 6
    #: most fixed-point iterations of one step
    max_iterations = 50

    def __init__(self, f, space):
        super().__init__(f, space)
        self._prev = None          # (h, Kq (3, nv), Ky (3, nv)) of the previous step: the next guess
        self.iterations = 0        # fixed-point iterations so far (each costs 3 evaluations)

    def state_dict(self):
        d = super().state_dict()
        d["iterations"] = self.iterations
        if self._prev is not None:
            d["gauss_h"] = float(self._prev[0])
            d["gauss_kq"] = self._prev[1]
            d["gauss_ky"] = self._prev[2]
        return d

    def load_state_dict(self, d):
        super().load_state_dict(d)
        self.iterations = int(d.get("iterations", 0))
        if d.get("gauss_kq") is not None and d.get("gauss_ky") is not None and d.get("gauss_h") is not None:
            self._prev = (float(d["gauss_h"]), np.array(d["gauss_kq"], dtype=float),
                          np.array(d["gauss_ky"], dtype=float))
        else:
            self._prev = None

    def step(self, t, q, y, h):
        sp = self.space
        A, c, b = T.GAUSS6_A, T.GAUSS6_C, T.GAUSS6_B
        s = c.size
        if self._prev is not None and abs(self._prev[0] - h) <= 1e-9 * abs(h):
            E = T.GAUSS6_EXTRAPOLATION
            th = h * (E @ self._prev[1])
            z = h * (E @ self._prev[2])
        else:
            w0, a0 = self._rates(t, q, y)
            th = (c * h)[:, None] * w0[None, :]
            z = (c * h)[:, None] * a0[None, :]
        scale_q = np.maximum(0.1, sp.q_magnitude(q))
        scale_y = np.maximum(0.1, np.abs(y))
        Kq = np.empty((s, sp.nv))
        Ky = np.empty((s, y.size))
        d_old = np.inf
        growing = 0
        for it in range(1, self.max_iterations + 1):
            for i in range(s):
                wi, Ky[i] = self._rates(t + c[i] * h, sp.retract(q, th[i]), y + z[i])
                Kq[i] = sp.dexpinv(th[i], wi)
            th_new = h * (A @ Kq)
            z_new = h * (A @ Ky)
            d = sp.rms_norm(*[(th_new[i] - th[i], scale_q) for i in range(s)],
                            *[(z_new[i] - z[i], scale_y) for i in range(s)])
            th, z = th_new, z_new
            growing = growing + 1 if d >= d_old else 0
            if not math.isfinite(d) or (growing >= 3 and d > 1e-8):
                raise FloatingPointError(f"gauss6: the fixed-point iteration of the stage equations diverges at "
                                         f"t = {t!r} (h = {h!r}): the step is too large for it; take a smaller dt")
            if d <= 2.220446049250313e-16 or (d >= d_old and d <= 1e-8):
                break
            d_old = d
        else:
            if d > 1e-8:
                raise FloatingPointError(f"gauss6: the fixed-point iteration of the stage equations did not "
                                         f"converge in {self.max_iterations} iterations at t = {t!r} (h = {h!r}); "
                                         f"take a smaller dt")
        self.iterations += it
        self._prev = (h, Kq, Ky)
        q1 = sp.retract(q, h * (b @ Kq))
        y1 = y + h * (b @ Ky)
        return q1, y1


class EmbeddedRK(Integrator):
    """Adaptive explicit embedded Runge-Kutta pair with step-size control.

    Error control: ``err = RMS_i(e_i / (atol + rtol max(|y0_i|, |y1_i|)))`` over the configuration
    increment and the velocity, through ``StateSpace.rms_norm`` (global over processes); a step
    is accepted when err <= 1; the next step is h * min(facmax, max(facmin, safety err^(-1/k)))
    with k = 1 + the lower order.  ``advance(t, q, v, t_target)`` takes steps until t_target,
    shortening the last one to land on it (the controller's proposal is kept for the next call).
    """

    adaptive = True
    c = A = b = None
    err_order = 4      # order of the embedded (error) solution
    fsal = False

    def __init__(self, f, space, rtol=1e-8, atol=1e-10, h0=None, h_max=np.inf, h_min=0.0,
                 safety=0.9, facmin=0.2, facmax=10.0, max_steps=10**9):
        super().__init__(f, space)
        self.rtol, self.atol = float(rtol), float(atol)
        self.h = None if h0 is None else float(h0)
        self.h_max, self.h_min = float(h_max), float(h_min)
        self.safety, self.facmin, self.facmax = safety, facmin, facmax
        self.max_steps = int(max_steps)
        self.accepted = 0
        self.rejected = 0
        self._a0 = None            # FSAL: f at the start of the next step
        self._a0_key = None
        self._w0 = None            # the momentum form: the velocity at the start of the next step
        self._w_last = None        # the momentum form: the last stage's velocity (FSAL)

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self):
        d = super().state_dict()
        d.update(h=self.h, accepted=self.accepted, rejected=self.rejected)
        if self._a0 is not None:
            d["fsal"] = self._a0
        if self.returns_rate and self._w0 is not None:
            d["fsal_rate"] = self._w0
        return d

    def load_state_dict(self, d):
        super().load_state_dict(d)
        self.h = None if d.get("h") is None else float(d["h"])
        self.accepted = int(d.get("accepted", 0))
        self.rejected = int(d.get("rejected", 0))
        self._a0 = d.get("fsal")
        self._a0_key = None if self._a0 is None else "resume"
        self._w0 = d.get("fsal_rate") if self.returns_rate else None
        if self.returns_rate and self._w0 is None:
            self._a0 = None        # both rates or neither: evaluate them again at the start

    # ---------------------------------------------------------------- one attempt
    def _stages(self, t, q, v, h, a0):
        sp = self.space
        s = len(self.c)
        Kq = np.empty((s, sp.nv))
        Kv = np.empty((s, sp.nv))
        Kq[0] = self._w0 if self.returns_rate else v
        Kv[0] = a0
        for i in range(1, s):
            ai = self.A[i, :i]
            nz = np.flatnonzero(ai)
            th = h * (ai[nz] @ Kq[nz])
            vi = v + h * (ai[nz] @ Kv[nz])
            qi = sp.retract(q, th)
            wi, Kv[i] = self._rates(t + self.c[i] * h, qi, vi)
            Kq[i] = sp.dexpinv(th, wi)
            self._w_last = wi if self.returns_rate else None
        return Kq, Kv

    def _error(self, h, Kq, Kv, q, v, q1, v1):
        raise NotImplementedError

    def attempt(self, t, q, v, h, a0):
        Kq, Kv = self._stages(t, q, v, h, a0)
        nz = np.flatnonzero(self.b)
        th = h * (self.b[nz] @ Kq[nz])
        q1 = self.space.retract(q, th)
        v1 = v + h * (self.b[nz] @ Kv[nz])
        err = self._error(h, Kq, Kv, q, v, q1, v1)
        return q1, v1, err, Kv

    def _scales(self, q, v, q1, v1):
        sp = self.space
        sq = self.atol + self.rtol * np.maximum(sp.q_magnitude(q), sp.q_magnitude(q1))
        sv = self.atol + self.rtol * np.maximum(np.abs(v), np.abs(v1))
        return sq, sv

    def initial_step(self, t, q, v, a0, t_span):
        """Hairer's starting-step heuristic (first part): ``h = 0.01 |y| / |y'|``."""
        sq, sv = self._scales(q, v, q, v)
        d0 = self.space.rms_norm((self.space.q_magnitude(q), sq), (v, sv))
        d1 = self.space.rms_norm((self._w0 if self.returns_rate else v, sq), (a0, sv))
        h = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
        return min(h, abs(t_span), self.h_max)

    def advance(self, t, q, v, t_target):
        """Integrate from t to t_target; returns (q, v) at t_target."""
        if self._a0 is None:
            w0, self._a0 = self._rates(t, q, v)
            self._w0 = w0 if self.returns_rate else None
        if self.h is None:
            self.h = self.initial_step(t, q, v, self._a0, t_target - t)
        expo = 1.0 / (self.err_order + 1.0)
        steps = 0
        while t < t_target:
            h_prop = min(self.h, self.h_max)
            last = t + 1.01 * h_prop >= t_target
            h = (t_target - t) if last else h_prop
            rejected_now = False
            while True:
                q1, v1, err, Kv = self.attempt(t, q, v, h, self._a0)
                if not np.isfinite(err):
                    err = np.inf
                if err <= 1.0:
                    break
                self.rejected += 1
                rejected_now = True
                fac = max(self.facmin, self.safety * err ** (-expo)) if np.isfinite(err) else self.facmin
                h = h * min(1.0, fac)
                last = False
                if abs(h) < max(self.h_min, 1e-14 * max(1.0, abs(t))):
                    raise FloatingPointError(f"step size underflow at t = {t!r} (h = {h!r}); the system may "
                                             f"be stiff or the tolerances too tight")
            steps += 1
            self.accepted += 1
            if steps > self.max_steps:
                raise RuntimeError(f"more than {self.max_steps} steps before t = {t_target}")
            fac = self.facmax if err == 0.0 else min(self.facmax, max(self.facmin, self.safety * err ** (-expo)))
            if rejected_now:
                fac = min(1.0, fac)
            h_new = h * fac
            # a shortened final step does not shrink a proposal it had no objection to
            self.h = max(h_new, h_prop) if last and not rejected_now and fac >= 1.0 else h_new
            t = t_target if last else t + h
            q, v = q1, v1
            if self.fsal:
                self._a0, self._w0 = Kv[-1], self._w_last
            else:
                w0, self._a0 = self._rates(t, q, v)
                self._w0 = w0 if self.returns_rate else None
        return q, v


class DormandPrince5(EmbeddedRK):
    """Dormand-Prince 5(4) (the solution is the 5th-order one; FSAL)."""

    name = "dopri5"
    order = 5
    err_order = 4
    fsal = True
    c, A, b, e = T.DOPRI5_C, T.DOPRI5_A, T.DOPRI5_B, T.DOPRI5_E

    def _error(self, h, Kq, Kv, q, v, q1, v1):
        nz = np.flatnonzero(self.e)
        eq = h * (self.e[nz] @ Kq[nz])
        ev = h * (self.e[nz] @ Kv[nz])
        sq, sv = self._scales(q, v, q1, v1)
        return self.space.rms_norm((eq, sq), (ev, sv))


class DOP853(EmbeddedRK):
    """Dormand-Prince 8(5,3): 8th-order solution; error = E5^2 / sqrt(E5^2 + 0.01 E3^2) as in
    Hairer's dop853."""

    name = "dop853"
    order = 8
    err_order = 7
    c, A, b = T.DOP853_C, T.DOP853_A, T.DOP853_B

    def __init__(self, f, space, **kw):
        kw.setdefault("facmin", 0.333)
        kw.setdefault("facmax", 6.0)
        super().__init__(f, space, **kw)

    def _error(self, h, Kq, Kv, q, v, q1, v1):
        sq, sv = self._scales(q, v, q1, v1)
        sp = self.space
        e5, e3 = T.DOP853_E5, T.DOP853_E3
        n5 = sp.rms_norm((e5 @ Kq, sq), (e5 @ Kv, sv))
        n3 = sp.rms_norm((e3 @ Kq, sq), (e3 @ Kv, sv))
        if n5 == 0.0 and n3 == 0.0:
            return 0.0
        return abs(h) * n5 * n5 / math.sqrt(n5 * n5 + 0.01 * n3 * n3)


INTEGRATORS = {"rk4": RK4, "dopri5": DormandPrince5, "dop853": DOP853, "symplectic-euler": SymplecticEuler,
               "gauss6": Gauss6}


#: other names of the integrators
ALIASES = {"rk45": "dopri5", "dopri": "dopri5", "euler": "symplectic-euler", "symplectic": "symplectic-euler",
           "gauss": "gauss6", "gauss-legendre": "gauss6", "gl6": "gauss6"}
#: the methods of ``scipy.integrate.solve_ivp`` (``'scipy:METHOD'``), by lower-case name
SCIPY_METHODS = {"rk45": "RK45", "rk23": "RK23", "dop853": "DOP853", "radau": "Radau", "bdf": "BDF", "lsoda": "LSODA"}


def canonical_integrator(name):
    """The canonical name of an integrator: a key of :data:`INTEGRATORS`, ``'scipy'`` or
    ``'scipy:METHOD'`` (METHOD as ``solve_ivp`` spells it); an unknown name is refused.

    Parameters
    ----------
    name : str
        Any spelling: ``'RK4'``, ``'rk45'``, ``'symplectic_euler'``, ``'scipy:radau'``.

    Returns
    -------
    str
        The canonical name.
    """
    key = str(name).strip().lower().replace("_", "-")
    if key == "scipy":
        return key
    if key.startswith("scipy:"):
        method = key.split(":", 1)[1]
        if method not in SCIPY_METHODS:
            raise PartreeInputError(f"integrator {name!r}: unknown solve_ivp method {method!r}; choose one of "
                                    f"{', '.join(SCIPY_METHODS.values())}")
        return "scipy:" + SCIPY_METHODS[method]
    key = ALIASES.get(key, key)
    if key not in INTEGRATORS:
        raise PartreeInputError(f"unknown integrator {name!r}; choose one of {', '.join(INTEGRATORS)} or 'scipy' "
                                f"(or 'scipy:METHOD')")
    return key


def make_integrator(name, f, space, **kw):
    """An integrator by name ('rk4', 'dopri5', 'dop853', 'symplectic-euler', 'gauss6', or an alias).

    Parameters
    ----------
    name : str
        The integrator's name (see :func:`canonical_integrator`; not 'scipy').
    f : callable
        The dynamics function ``f(t, q, v) -> qdd``.
    space : StateSpace
        The state layout hooks.
    **kw
        Options of the adaptive integrators (rtol, atol, h0, h_max, max_steps, ...).

    Returns
    -------
    Integrator
        The integrator.
    """
    key = canonical_integrator(name)
    if key not in INTEGRATORS:
        raise PartreeInputError(f"integrator {name!r} is not one of {', '.join(INTEGRATORS)}")
    cls = INTEGRATORS[key]
    if cls.adaptive:
        return cls(f, space, **kw)
    return cls(f, space)
