"""Serial backend: the parallel engine's decomposition run part by part in one process.

It is the reference the MPI and Dask backends must match: :class:`SerialEngine` drives every
part's steps (:class:`partree.parallel.part.PartKernel`) with the root solve in between.
"""
from __future__ import annotations

import numpy as np

from .. import checks
from . import root as R
from .part import (PartLayout, assemble_constraint_forces, attach_loop_forces, build_part, check_momentum_parts,
                   early_kinematics_wanted, gravity_a0, hybrid_arguments)
from .flexible_part import engine_forces, flexible_hybrid_arguments, flexible_state, part_forces, refuse_flexible
from .partition import PATH_WEIGHT, make_partition


class SerialEngine:
    """The decomposition in one process.  ``parts``: a number of parts or a Partition.
    ``poses``: build the parts for the momentum form too (:meth:`momentum_rhs`; see
    ``build_part``)."""

    def __init__(self, model, parts=None, path_weight=PATH_WEIGHT, early_kinematics=False, poses=False):
        self.model = model
        self.partition = make_partition(model, parts, path_weight)
        self.tree = R.PartsTree.from_partition(self.partition, model)
        self.parts = [build_part(model, self.partition, k, early_kinematics, poses=poses)
                      for k in range(self.partition.nparts)]
        self.a0 = gravity_a0(model.gravity)
        self.owner = np.zeros(self.partition.nparts, dtype=np.int64)
        self._layout = None

    def __repr__(self):
        return f"<SerialEngine {self.model.name!r}: {self.model.n} bodies in {self.partition.nparts} parts>"

    @classmethod
    def for_ranks(cls, model, nranks, path_weight=PATH_WEIGHT):
        """The decomposition the MPI backend uses on ``nranks`` ranks (its partition, its rank of
        every part in ``owner``, its choice of early kinematics), run in one process: for
        profiling what each rank's share costs."""
        nranks = int(nranks)
        pt = make_partition(model, None, path_weight, nranks=nranks)
        owner = pt.owner_for(nranks) if nranks > 1 else np.zeros(pt.nparts, dtype=np.int64)
        early = early_kinematics_wanted(model, pt, owner) if nranks > 1 else False
        eng = cls(model, pt, path_weight, early_kinematics=early)
        eng.owner = np.asarray(owner, dtype=np.int64)
        return eng

    def forward_dynamics(self, q, qd, tau, f_ext=None, active=None, qdd_active=None):
        """qdd for the state (q, qd), joint forces tau and optional external body wrenches f_ext
        ((n, 6) in body coordinates, or a dict {joint: wrench}, as for ``partree.aba``; with
        flexible bodies also loads at their nodes, keys ``(body, node name)``, as the flexible
        functions take them).

        Hybrid dynamics with ``active`` (a boolean mask over the joints or joint names, as
        ``partree.hybrid_dynamics`` takes it): the active joints' accelerations are given in
        ``qdd_active`` ((nv,), read at those joints) and their forces computed, the others' the
        reverse; returns (qdd, tau), the full vectors ``partree.hybrid_dynamics`` returns.  The
        rounds are the same (the parts' reduction flags the active joints, see
        ``PartKernel.reduce``)."""
        model = self.model
        if model.flexible is not None:
            return self._flexible_dynamics(q, qd, tau, f_ext, active, qdd_active)
        q, qd = checks.state(model, q, qd)
        if active is None:
            tau = checks.vector(model, tau, model.nv, "tau", "nv")
            hyb = None
        else:
            mask, tau, qdd = hybrid_arguments(model, active, qdd_active, tau)
            hyb = (mask, qdd) if mask.any() else None
        F, has_f = checks.external_forces(model, f_ext)
        qdd = self._evaluate(q, qd, tau, F if has_f else None, "dynamics", hyb)
        if active is None:
            return qdd
        return (qdd, self._tau) if hyb is not None else (qdd, tau.copy())

    def _flexible_dynamics(self, q, qd, tau, f_ext, active, qdd_active):
        """``forward_dynamics`` of a model with flexible bodies: the full vectors ([q; eta],
        [qd; eta_dot], tau of the joints then the modes), as ``flexible_aba`` and
        ``flexible_hybrid_dynamics`` take and return them."""
        model = self.model
        F, has_f = engine_forces(model, f_ext)
        q, qd, tau_c = flexible_state(model, q, qd, None if active is not None else tau)
        hyb = None
        if active is not None:
            mask, tau_c, qdd = flexible_hybrid_arguments(model, active, qdd_active, tau)
            hyb = (mask, qdd) if mask.any() else None
        qdd = self._evaluate(q, qd, tau_c, F if has_f else None, "dynamics", hyb)
        if active is None:
            return qdd
        return (qdd, self._tau) if hyb is not None else (qdd, tau_c.copy())

    def _evaluate(self, q, qd, tau, F, rows, hyb=None):
        """One evaluation; ``hyb``: None, or (mask (n,), qdd (nv,)) of hybrid dynamics, which
        also leaves every joint force in ``_tau``."""
        vel = [pk.velocity(q[pk.qix], qd[pk.vix]) for pk in self.parts]
        v_in = R.compose_velocities(self.tree, vel)
        if hyb is None:
            red = [pk.reduce(v_in[k], tau[pk.vix], part_forces(F, pk.bix), rows=rows)
                   for k, pk in enumerate(self.parts)]
        else:
            mask, qdd_a = hyb
            red = [pk.reduce(v_in[k], tau[pk.vix], part_forces(F, pk.bix), rows=rows,
                             active=mask[pk.bix], qdd=qdd_a[pk.vix]) for k, pk in enumerate(self.parts)]
        a_in, g = R.solve(self.tree, red, self.a0 if rows == "dynamics" else np.zeros(6), rows=rows)
        qdd = np.empty(qd.size)
        for k, pk in enumerate(self.parts):
            qdd[pk.vix] = pk.solve(a_in[k], g[k])
        if hyb is not None:
            self._tau = np.empty(qd.size)
            for pk in self.parts:
                self._tau[pk.vix] = pk.joint_forces
        return qdd

    def momentum_rhs(self, q, p, tau=None, f_ext=None):
        """The equations of motion in generalized momenta through the decomposition, equal to
        ``partree.momentum_rhs``: returns (qdot, pdot, v) for the state (q, p), joint forces tau
        (default zero) and external body wrenches f_ext.  One evaluation at rest with p as the
        joint forces (the parts' reduction, the root solve and the back-substitution give
        v = M^-1 p, the body velocities and, in the handle wrenches, the child parts' subtree
        momenta) plus the parts' totals of gravity and external wrenches summed up the parts tree
        at the root (:func:`~partree.parallel.root.subtree_totals`); then each part's dp/dt
        (seed 001's eq. 7).  The engine must be built with ``poses``."""
        from ..algorithms.momentum_rhs import configuration_rate

        model = self.model
        refuse_flexible(model, "the momentum form")
        check_momentum_parts(len(model.loops), self.parts)
        q, p = checks.state(model, q, p, names=("q", "p"))
        tau = np.zeros(model.nv) if tau is None else checks.vector(model, tau, model.nv, "tau", "nv")
        F, has_f = checks.external_forces(model, f_ext)
        F = F if has_f else None
        zero = np.zeros(model.nv)
        vel = [pk.velocity(q[pk.qix], zero[pk.vix]) for pk in self.parts]
        g_in = R.compose_field(self.tree, vel, -self.a0)
        red, up = [], []
        for k, pk in enumerate(self.parts):
            red.append(pk.reduce(np.zeros(6), p[pk.vix], None, rows="position"))
            up.append(pk.momentum_forces(g_in[k, 3:], part_forces(F, pk.bix)).copy())
        a_in, g = R.solve(self.tree, red, np.zeros(6), rows="position")
        Fh = R.subtree_totals(self.tree, vel, up)
        v = np.empty(model.nv)
        pdot = np.empty(model.nv)
        for k, pk in enumerate(self.parts):
            pk.solve(a_in[k], g[k])
            v[pk.vix], pdot[pk.vix] = pk.momentum_rate(Fh[k])
        pdot += tau
        return configuration_rate(model, q, v), pdot, v

    def correction_step(self, q, qd, rows):
        """One step of the loops' corrections through the decomposition (see
        :mod:`partree.parallel.correction`): (dx, max abs(Phi) at q), dx the smallest change in the
        kinetic-energy metric with J dx = -Phi (``rows='position'``) or J dx = -J qd
        (``'velocity'``)."""
        dx = self._evaluate(q, qd, np.zeros(self.model.nv), None, rows)
        err = max([pk.loop_violation() for pk in self.parts] + [R.root_violation(self.tree)])
        return dx, err

    def correct_state(self, q, qd, tol=1e-12, max_iter=20, polish=0):
        """``partree.correct_state(model, q, qd, metric='mass')`` through the decomposition, in
        O(N) (:func:`partree.parallel.correction.correct`)."""
        from ..configuration import integrate
        from .correction import correct

        q, qd = checks.state(self.model, q, qd)
        return correct(self.correction_step, lambda x, dv, s: integrate(self.model, x, s * dv), q, qd, tol=tol,
                       max_iter=max_iter, polish=polish)

    def constraint_forces(self, q, qd, tau, f_ext=None, active=None, qdd_active=None):
        """The constraint force algorithm through the decomposition: a ``CFAResult`` (qdd, every
        joint's wrench, its constraint force F_S and drive force F_T) equal to ``partree.cfa``'s.
        One forward-dynamics evaluation, then each part's wrenches (``PartKernel.wrenches``).  For
        a model with closed loops the wrenches include the loop forces (as
        ``partree.constrained_dynamics`` gives them), and the result also holds
        ``loop_multipliers`` and ``loop_force``.

        With ``active`` and ``qdd_active`` (as :meth:`forward_dynamics` takes them) the evaluation
        is hybrid dynamics: the result is ``partree.hybrid_dynamics(..., return_forces=True)``'s,
        its qdd the full accelerations and F_T formed from the full joint forces (the parts keep
        their active joints' computed forces for ``wrenches``).

        With flexible bodies: q, qd, tau the full vectors, and the result
        :func:`partree.algorithms.flexible_cfa.flexible_cfa`'s (with ``active``,
        ``flexible_hybrid_forces``')  (``FlexiblePartKernel.wrenches``)."""
        if active is None:
            qdd = self.forward_dynamics(q, qd, tau, f_ext)      # checks the arguments
        else:
            qdd = self.forward_dynamics(q, qd, tau, f_ext, active=active, qdd_active=qdd_active)[0]
        if self._layout is None:
            self._layout = [PartLayout(self.model, pk) for pk in self.parts]
        pieces = [pk.wrenches() for pk in self.parts]
        res = assemble_constraint_forces(self.model, q, qdd, self._layout, pieces, method="parallel-serial")
        if len(self.model.loops):
            attach_loop_forces(res, len(self.model.loops), [pk.loop_pieces() for pk in self.parts] + R.root_pieces(self.tree))
        return res


def constraint_forces_serial(model, q, qd, tau, parts=None, path_weight=PATH_WEIGHT, f_ext=None, active=None,
                             qdd_active=None):
    """The constraint force algorithm through the parallel decomposition, in one process (with
    ``active``: of hybrid dynamics, see ``SerialEngine.constraint_forces``)."""
    return SerialEngine(model, parts, path_weight).constraint_forces(q, qd, tau, f_ext, active=active,
                                                                     qdd_active=qdd_active)


def forward_dynamics_serial(model, q, qd, tau, parts=None, path_weight=PATH_WEIGHT, f_ext=None, active=None,
                            qdd_active=None):
    """Forward dynamics through the parallel decomposition, in one process (with ``active``:
    hybrid dynamics, (qdd, tau); see ``SerialEngine.forward_dynamics``)."""
    eng = SerialEngine(model, parts, path_weight)
    if active is None:
        return eng.forward_dynamics(q, qd, tau, f_ext)
    return eng.forward_dynamics(q, qd, tau, f_ext, active=active, qdd_active=qdd_active)
