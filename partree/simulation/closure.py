"""Loop closure in a simulation: the initial state's check and the correction after each step.

A model with loops (``model.loops``) is integrated with :func:`partree.constrained_dynamics`;
the integrator's error moves the state off the constraint manifold, and after every step
:class:`LoopClosure` puts it back (``SimulationOptions.correct``): 'full' projects q (Gauss-Newton)
and qd, 'velocity' qd only, 'none' nothing.  The violation max abs(Phi) is recorded at every save
point.

The corrections are the smallest in the kinetic-energy metric: ``metric='mass'`` of
:func:`partree.correct_state` (dense) up to 256 degrees of freedom (``loop_correction.MASS_LIMIT``),
beyond that and on the distributed backends (MPI, Dask) the engine's corrections in the same
metric, O(N), never forming M or J, and on the distributed backends never on the whole state
(:class:`EngineLoopClosure`, ``partree.parallel.correction``).  The violation and the initial
check take the loops' rows alone (``loop_rows``: O(N)).  This is what carries a run through singular
configurations (a four-bar whose bars align): there the integrator's error in the directions
losing rank is divided by a vanishing singular value, and it enters the accelerations as
M^-1 J^T dlambda, which a mass-metric correction removes whole while a Euclidean one keeps part
of it as motion along the manifold, an error that each passage adds to.
"""
from __future__ import annotations

import numpy as np

from ..algorithms.loop_constraints import loop_rows
from ..configuration import integrate
from ..parallel.correction import correct as engine_correct
from ..algorithms.loop_correction import (correct_state, mass_metric, phi_and_jacobian, project_velocity,
                                          simulation_metric)
from ..errors import PartreeInputError

#: the largest violation of an initial state that a run corrects rather than refuses
INITIAL_TOLERANCE = 1e-6


class LoopClosure:
    """The loops' correction of a run.

    Parameters
    ----------
    model : Model
        A model with loops.
    correct : str
        'full', 'velocity' or 'none'.
    tol : float
        The violation max abs(Phi) the position projection reaches.
    metric : str, optional
        'mass' (dense, :func:`partree.correct_state`), 'euclidean' (dense QR or LSMR) or
        'engine' (the mass metric through ``partree.parallel.serial.SerialEngine``, O(N));
        default: 'mass' up to 256 degrees of freedom (``simulation_metric``), 'engine' beyond.
    """

    def __init__(self, model, correct="full", tol=1e-12, metric=None):
        self.model, self.correct, self.tol = model, correct, tol
        if metric is None:
            metric = "mass" if simulation_metric(model) == "mass" else "engine"
        self.metric = metric
        self._engine = None

    def violation(self, q):
        """max abs(Phi(q))."""
        return float(np.abs(loop_rows(self.model, q).phi).max(initial=0.0))

    def _engine_correct(self, q, v, positions):
        from ..parallel.serial import SerialEngine

        if self._engine is None:
            self._engine = SerialEngine(self.model, 1)
        eng = self._engine
        return engine_correct(eng.correction_step, lambda x, dv, s: integrate(self.model, x, s * dv), q, v,
                              tol=self.tol, polish=2, positions=positions)

    def initial(self, q, v):
        """The initial state, checked: a state that violates the loops by more than
        ``INITIAL_TOLERANCE`` is refused with the violation named; a smaller one is corrected."""
        lc = loop_rows(self.model, q, v)
        e_q = float(np.abs(lc.phi).max(initial=0.0))
        e_v = float(np.abs(lc.velocity).max(initial=0.0))
        if e_q > INITIAL_TOLERANCE or e_v > INITIAL_TOLERANCE * max(1.0, float(np.abs(v).max(initial=0.0))):
            lp = self.model.loops
            worst = lp.names[max(range(len(lp)), key=lambda k: float(np.abs(lc.phi[lp.rows_of(k)]).max(initial=0.0)))]
            raise PartreeInputError(
                f"the initial state does not close the loops of model {self.model.name!r}: max |Phi| = {e_q:.3g} "
                f"(loop {worst!r}), max |J qd| = {e_v:.3g}; partree.assemble(model, q_guess, fixed={{...}}) finds a "
                f"configuration that closes them, and partree.correct_state(model, q, qd) projects a nearly "
                f"consistent state")
        if self.correct == "none":
            return q, v
        if self.metric == "engine":
            return self._engine_correct(q, v, True)
        return correct_state(self.model, q, v, tol=self.tol, metric=self.metric)

    def __call__(self, q, v):
        """The state after a step, corrected as ``correct`` says."""
        if self.metric == "engine" and self.correct in ("full", "velocity"):
            return self._engine_correct(q, v, self.correct == "full")
        if self.correct == "full":
            return correct_state(self.model, q, v, tol=self.tol, polish=2, metric=self.metric)
        if self.correct == "velocity":
            return q, project_velocity(phi_and_jacobian(self.model, q)[1], v,
                                    W=mass_metric(self.model, q, self.metric))
        return q, v


class EngineLoopClosure:
    """The loops' correction of a distributed run, on the pieces of the state each process holds:
    :func:`partree.parallel.correction.correct` with the backend's collective correction step.

    Parameters
    ----------
    step : callable
        ``step(q, qd, rows) -> (dx, max abs(Phi))`` over this process's pieces (collective).
    retract : callable
        ``retract(q, dv, s) -> q (+) s dv`` on the same pieces (``StateSpace.retract``).
    correct, tol :
        As for :class:`LoopClosure` ('full' projects q and qd, 'velocity' qd only).
    add : callable, optional
        ``add(v, dx) -> v + dx`` for vectors that are not arrays (the Dask backend's).
    """

    def __init__(self, step, retract, correct="full", tol=1e-12, add=None):
        self.step, self.retract, self.correct, self.tol, self.add = step, retract, correct, tol, add

    def __call__(self, q, v):
        if self.correct == "none":
            return q, v
        return engine_correct(self.step, self.retract, q, v, tol=self.tol, polish=2,
                              positions=self.correct == "full", add=self.add)
