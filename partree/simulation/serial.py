"""The serial backend: one process, the whole state, ``partree.aba`` (or hybrid dynamics) for
each evaluation; the reference the distributed backends are checked against.  Models with
flexible bodies run here only, on the state [q; eta] (:mod:`partree.simulation.flexible`)."""
from __future__ import annotations

import numpy as np

from ..errors import PartreeInputError
from .dynamics import Dynamics, MomentumDynamics
from .integrators import StateSpace, make_integrator
from .loop import INTEGRATOR_ARRAY, Backend


class ScipyStepper:
    """``scipy.integrate.solve_ivp`` over the flat state [q; v] (no quaternions), restarted at
    every tick (so checkpoints work the same way as for the built-in integrators).

    Parameters
    ----------
    f : callable
        The dynamics function ``f(t, q, v) -> qdd``.
    space : StateSpace
        The state layout (must be a vector space: no spherical / free joints).
    method : str
        The ``solve_ivp`` method.
    rtol, atol : float
        Tolerances.
    h0 : float or None
        First step.
    h_max : float
        Largest step.
    """

    adaptive = True
    name = "scipy"

    def __init__(self, f, space, method="DOP853", rtol=1e-8, atol=1e-10, h0=None, h_max=np.inf):
        if not space.vector_space:
            raise PartreeInputError("integrator 'scipy' needs a model without spherical/free joints (quaternions); "
                                    "use 'rk4', 'dopri5' or 'dop853', which integrate on the joint manifolds")
        self.f, self.space, self.method = f, space, method
        self.rtol, self.atol, self.h, self.h_max = rtol, atol, h0, h_max
        self.nfev = 0
        self.accepted = 0
        self.rejected = 0

    def advance(self, t, q, v, t_target):
        """Integrate from t to t_target; returns (q, v) at t_target."""
        from scipy.integrate import solve_ivp
        nq = q.size

        if getattr(self.f, "returns_rate", False):      # the momentum form: (v, pdot); qdot = v here
            def rhs(tt, y):
                return np.concatenate(self.f(tt, y[:nq], y[nq:]))
        else:
            def rhs(tt, y):
                return np.concatenate([y[nq:], self.f(tt, y[:nq], y[nq:])])
        kw = {"first_step": min(self.h, t_target - t)} if self.h else {}
        sol = solve_ivp(rhs, (t, t_target), np.concatenate([q, v]), method=self.method, rtol=self.rtol,
                        atol=self.atol, max_step=self.h_max, **kw)
        if not sol.success:
            raise FloatingPointError(f"scipy solve_ivp failed at t = {t}: {sol.message}")
        self.nfev += sol.nfev
        self.accepted += max(len(sol.t) - 1, 0)
        if len(sol.t) > 1:
            self.h = float(sol.t[-1] - sol.t[-2])
        y = sol.y[:, -1]
        return y[:nq].copy(), y[nq:].copy()

    def state_dict(self):
        """What a checkpoint holds of the stepper."""
        return {"nfev": self.nfev, "h": self.h, "accepted": self.accepted}

    def load_state_dict(self, d):
        """Continue from a checkpoint's ``state_dict``."""
        self.nfev = int(d.get("nfev", 0))
        self.h = d.get("h")
        self.accepted = int(d.get("accepted", 0))


class PlainDynamics:
    """A user's bare ``f(t, q, v) -> qdd`` with what the loop asks of a dynamics function (the
    joint wrenches of a motion, a fingerprint for checkpoints).

    Parameters
    ----------
    model : Model
        The model.
    f : callable
        The dynamics function.
    """

    conservative = True

    def __init__(self, model, f):
        self.model, self.f, self.last_tau = model, f, None

    def __call__(self, t, q, v):
        return self.f(t, q, v)

    def joint_wrenches(self, t, q, v, qdd):
        """(n, 6) joint wrenches [n; f] of the motion (q, v, qdd), without external forces."""
        from ..algorithms.rnea import rnea
        return rnea(self.model, q, v, qdd, return_wrenches=True)[1]

    def fingerprint(self):
        """The function's qualified name."""
        return f"{getattr(self.f, '__module__', '')}.{getattr(self.f, '__qualname__', type(self.f).__name__)}"


class SerialBackend(Backend):
    """One process holds the whole state; each evaluation is ``Dynamics`` (``partree.aba``, or
    hybrid dynamics with prescribed motion), or a custom dynamics function and ``StateSpace``.
    In the momentum form (``formulation='momentum'``) the state is (q, p) and each evaluation is
    :class:`~partree.simulation.dynamics.MomentumDynamics` (``partree.momentum_rhs``) with the
    same joint inputs; save points solve v = M^-1 p."""

    name = "serial"
    momentum = None        # the MomentumDynamics of a momentum-form run

    def dynamics(self, model, inputs, custom=None):
        if custom is None:
            if getattr(model, "flexible", None) is not None:
                from .flexible import FlexibleDynamics
                return FlexibleDynamics(model, **inputs)
            return Dynamics(model, **inputs)
        if any(v is not None for v in inputs.values()):
            raise PartreeInputError(f"a custom dynamics function takes no joint inputs "
                                    f"({', '.join(k for k, v in inputs.items() if v is not None)}): apply them in it")
        if isinstance(custom, Dynamics) or hasattr(custom, "joint_wrenches"):
            return custom
        return PlainDynamics(model, custom)

    def start(self, model, dyn, opts, q, v, space=None):
        if space is None and getattr(model, "flexible", None) is not None:
            from .flexible import FlexibleStateSpace
            space = FlexibleStateSpace(model)            # [q; eta]: the joints' manifolds, then the modes
        space = space or StateSpace(model)
        f = dyn
        if opts.formulation == "momentum":
            if not isinstance(dyn, Dynamics):
                raise PartreeInputError("a custom dynamics function f(t, q, v) -> qdd has no momentum form; use "
                                        "formulation='velocity', or give the joint inputs instead")
            f = self.momentum = MomentumDynamics(dyn)
            v = f.momentum(q, v)                  # the state is (q, p)
        if opts.integrator.startswith("scipy"):
            method = opts.integrator.split(":", 1)[1] if ":" in opts.integrator else "DOP853"
            integ = ScipyStepper(f, space, method, opts.rtol, opts.atol, opts.h0,
                                 np.inf if opts.h_max is None else opts.h_max)
        else:
            kw = dict(rtol=opts.rtol, atol=opts.atol, h0=opts.h0, max_steps=opts.max_steps)
            if opts.h_max is not None:
                kw["h_max"] = opts.h_max
            integ = make_integrator(opts.integrator, f, space, **kw)
        self.model, self.dyn = model, dyn
        return integ, q, v

    def put_state(self, integ, info, state):
        istate = dict(info["integrator"])
        if "fsal" in state:
            istate["fsal"] = state["fsal"].copy()
        for key in istate.pop("arrays", []):
            istate[key] = state[INTEGRATOR_ARRAY + key].copy()
        integ.load_state_dict(istate)
        return state["q"].copy(), state["v"].copy()

    def gather_q(self, q):
        return q

    def gather_v(self, v):
        return v

    def sample(self, t, q, v, need_qdd):
        p = None
        if self.momentum is not None:
            p, v = v, self.momentum.velocity(t, q, v)
        if not need_qdd:
            got = (q, v, None, None)
        else:
            qdd = self.dyn(t, q, v)
            tau = getattr(self.dyn, "last_tau", None)
            got = (q, v, qdd, (np.zeros(np.size(v)) if tau is None else np.asarray(tau, dtype=float).copy()))
        return got if p is None else got + (p,)
