"""Loop closure in a simulation: the initial state's check and the correction after each step.

A model with loops (``model.loops``) is integrated with :func:`partree.constrained_dynamics`;
the integrator's error moves the state off the constraint manifold, and after every step
:class:`LoopClosure` puts it back (``SimulationOptions.correct``): 'full' projects q (Gauss-Newton)
and qd, 'velocity' qd only, 'none' nothing.  The violation max abs(Phi) is recorded at every save
point.
"""
from __future__ import annotations

import numpy as np

from ..algorithms.loop_constraints import loop_constraints
from ..algorithms.loop_correction import correct_state, phi_and_jacobian, project_velocity
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
    """

    def __init__(self, model, correct="full", tol=1e-12):
        self.model, self.correct, self.tol = model, correct, tol

    def violation(self, q):
        """max abs(Phi(q))."""
        return float(np.abs(phi_and_jacobian(self.model, q)[0]).max(initial=0.0))

    def initial(self, q, v):
        """The initial state, checked: a state that violates the loops by more than
        ``INITIAL_TOLERANCE`` is refused with the violation named; a smaller one is corrected."""
        lc = loop_constraints(self.model, q, v)
        e_q = float(np.abs(lc.phi).max(initial=0.0))
        e_v = float(np.abs(lc.velocity).max(initial=0.0))
        if e_q > INITIAL_TOLERANCE or e_v > INITIAL_TOLERANCE * max(1.0, float(np.abs(v).max(initial=0.0))):
            worst = max(lc.rows, key=lambda nm: float(np.abs(lc.phi[lc.rows[nm]]).max(initial=0.0)))
            raise PartreeInputError(
                f"the initial state does not close the loops of model {self.model.name!r}: max |Phi| = {e_q:.3g} "
                f"(loop {worst!r}), max |J qd| = {e_v:.3g}; partree.assemble(model, q_guess, fixed={{...}}) finds a "
                f"configuration that closes them, and partree.correct_state(model, q, qd) projects a nearly "
                f"consistent state")
        if self.correct == "none":
            return q, v
        return correct_state(self.model, q, v, tol=self.tol)

    def __call__(self, q, v):
        """The state after a step, corrected as ``correct`` says."""
        if self.correct == "full":
            return correct_state(self.model, q, v, tol=self.tol, polish=2)
        if self.correct == "velocity":
            return q, project_velocity(phi_and_jacobian(self.model, q)[1], v)
        return q, v
