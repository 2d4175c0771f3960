"""Simulation of trees with flexible bodies (serial backend): the dynamics function, the state
layout and the initial state of a run whose state is ``q_full = [q; eta]``,
``v_full = [qd; eta_dot]`` (``partree.flexible``).

Each evaluation is :func:`~partree.algorithms.flexible_dynamics.flexible_aba`, or with
prescribed motion of whole joints :func:`~partree.algorithms.flexible_dynamics.flexible_hybrid_dynamics`
(O(N) both).  The joint inputs are those of :class:`~partree.simulation.dynamics.Dynamics`, on
the joints' coordinates: torque callables and springs see ``(t, q, qd)`` of the joints
(``q_full[:nq]``, ``v_full[:nv]``), so a model's inputs run on it rigid or flexible alike.  The
modes move under their elastic, damping and geometric-stiffening forces (part of the dynamics)
and the external loads; no joint input acts on them.  The recorded energy is kinetic + gravity +
elastic (:func:`~partree.algorithms.flexible_dynamics.flexible_energy`), the wrenches those of
:func:`~partree.algorithms.flexible_cfa.flexible_joint_wrenches`.

External loads (``f_ext``): what the flexible functions take
(:func:`~partree.algorithms.flexible_dynamics.flexible_loads`): an (n, 6) array of wrenches at the
body origins, or a dict of those and of loads at nodes ``{(body, node name): wrench}``, checked
once at the start; or a callable ``f_ext(t, q_full, v_full)`` returning either, which sees the
full state (a load on a deformed body may depend on its deformation).

The distributed backends (MPI, Dask) run it on the parallel engine's flexible parts: each rank
integrates its parts' joint and modal coordinates (``LocalLayout``), with the joint inputs of
its joints (:class:`FlexibleLocalInputs`: per-joint callables of t, tables, constants, springs,
dampers, prescribed motion of whole joints) and the constant loads on its bodies (at their
origins and at the nodes of flexible bodies); rank 0 gathers the state at the save points for
the energy, the wrenches and the files.

Not taken: closed loops, the momentum form; on the distributed backends, callables of the whole
state and per-rank results files.
"""
from __future__ import annotations

import numpy as np

from ..algorithms.flexible_cfa import flexible_joint_wrenches
from ..algorithms.flexible_dynamics import (flexible_aba, flexible_bias, flexible_crba, flexible_energy,
                                            flexible_hybrid_dynamics, flexible_loads)
from ..configuration import integrate
from ..errors import PartreeInputError
from ..flexible import refuse
from .dynamics import Dynamics
from .integrators import StateSpace

#: stands for the rigid algorithms' workspace, which a flexible model has none of
_NO_WORKSPACE = object()


def is_flexible(model):
    """Whether ``model`` has flexible bodies."""
    return getattr(model, "flexible", None) is not None


def check_run(model, backend, opts):
    """Refuse what a run of a flexible model cannot do, each with its reason."""
    if backend.name != "serial" and opts.output == "per-rank":
        raise PartreeInputError(f"model {model.name!r} has flexible bodies: output='per-rank' is for rigid trees "
                                f"(rank 0 gathers the results of a distributed run with modes)")
    if len(getattr(model, "loops", ())):
        raise PartreeInputError(f"model {model.name!r} has flexible bodies and closed loops: the flexible "
                                f"dynamics compute trees only")
    if opts.formulation != "velocity":
        raise PartreeInputError(f"model {model.name!r} has flexible bodies: formulation={opts.formulation!r} "
                                f"is for rigid trees; use formulation='velocity'")
    if opts.record_joints is not None:
        raise PartreeInputError(f"model {model.name!r} has flexible bodies: record_joints is for rigid trees "
                                f"(the modal coordinates are recorded with every joint)")


def initial_state(model, q0, qd0):
    """(q_full, v_full) at the start: ``q0`` of nq entries (the modes undeformed) or nq + n_modal,
    ``qd0`` of nv (the modes at rest) or nv + n_modal; defaults the neutral configuration at
    rest.  The joints' part is checked and its quaternions normalised."""
    from .. import checks

    ne = model.flexible.n_modal
    nq, nv = model.nq, model.nv

    def split(x, n, name, what):
        if x is None:
            return None, np.zeros(ne)
        x = np.asarray(x, dtype=float)
        if x.shape == (n,):
            return x, np.zeros(ne)
        if x.shape == (n + ne,):
            if not np.all(np.isfinite(x[n:])):
                raise PartreeInputError(f"{name}: its modal entries are not finite")
            return x[:n], x[n:].copy()
        raise PartreeInputError(f"{name} has shape {x.shape}; model {model.name!r} takes ({n},) ({what}; the modes "
                                f"{'undeformed' if what == 'nq' else 'at rest'}) or ({n + ne},) with its "
                                f"{ne} modal coordinates after them")

    qj, eta = split(q0, nq, "q0", "nq")
    vj, etad = split(qd0, nv, "qd0", "nv")
    qj = model.neutral() if qj is None else model.normalize(checks.state(model, qj, names=("q0", "qd0"))[0])
    vj = np.zeros(nv) if vj is None else np.array(checks.vector(model, vj, nv, "qd0", "nv"))
    return np.concatenate((qj, eta)), np.concatenate((vj, etad))


class FlexibleStateSpace(StateSpace):
    """The state layout of a flexible model: the joints' coordinates on their manifolds, then the
    modal coordinates, a vector space."""

    def __init__(self, model, allreduce=None):
        super().__init__(model, allreduce)
        ne = model.flexible.n_modal
        self.nq_joints, self.nv_joints = model.nq, model.nv
        self.nq, self.nv = model.nq + ne, model.nv + ne
        if self.has_groups:
            self._mag_src = np.concatenate((self._mag_src, model.nq + np.arange(ne))).astype(np.int64)
            self._mag_dst = np.concatenate((self._mag_dst, model.nv + np.arange(ne))).astype(np.int64)
            self._mag_base = np.concatenate((self._mag_base, np.zeros(ne)))

    def retract(self, q, dq):
        """q ⊕ dq: the joints' part through ``partree.integrate``, the modes added."""
        if self.vector_space:
            return q + dq
        nq, nv = self.nq_joints, self.nv_joints
        return np.concatenate((integrate(self.model, q[:nq], dq[:nv]), q[nq:] + dq[nv:]))


class FlexibleDynamics(Dynamics):
    """The dynamics function of a run of a model with flexible bodies: ``dyn(t, q_full, v_full)
    -> qdd_full`` (see the module docstring).  The parameters are :class:`Dynamics`' (``f_ext``
    as the module docstring says; ``backend`` 'serial')."""

    def __init__(self, model, torques=None, damping=None, stiffness=None, q_ref=None, f_ext=None, prescribed=None,
                 backend="serial", parts=None, data=None):
        if str(backend).lower() != "serial":
            refuse(model, f"an evaluation on backend {backend!r}")
        # constant loads are checked and packed once; a callable's answer at each evaluation
        loads = f_ext if (f_ext is None or callable(f_ext)) else flexible_loads(model, f_ext)
        super().__init__(model, torques, damping, stiffness, q_ref, loads, prescribed, "serial", None,
                         data=_NO_WORKSPACE)
        self.f_ext_spec = f_ext
        self.data = None
        self.n_modal = model.flexible.n_modal
        fl = model.flexible
        self._dissipative = any(np.any(b.damping) for b in fl.bodies.values())
        self._stiffening = any(b.stiffening is not None for b in fl.bodies.values())
        if self.prescribed is not None:
            self.passive_dofs = np.setdiff1d(np.arange(model.nv + self.n_modal), self.active_dofs)

    @property
    def conservative(self):
        """Nothing but gravity and the elastic forces act (no modal damping, no geometric
        stiffening, which is a velocity-dependent force): kinetic + gravity + elastic energy is
        then a constant of the motion."""
        return super().conservative and not self._dissipative and not self._stiffening

    def tau_full(self, t, q, v):
        """tau_full (nv + n_modal) at (t, q_full, v_full): the joint inputs, zeros on the modes."""
        m = self.model
        return np.concatenate((self.tau(t, q[:m.nq], v[:m.nv]), np.zeros(self.n_modal)))

    def __call__(self, t, q, v):
        tau = self.tau_full(t, q, v)
        fe = self.f_ext(t, q, v)
        if self.prescribed is not None:
            qdd, tau = self.hybrid(t, q, v, tau, fe)
            self.last_tau = tau
            return qdd
        self.last_tau = tau
        return flexible_aba(self.model, q, v, tau, fe)

    def hybrid(self, t, q, v, tau, fe=None):
        """(qdd_full, tau_full): prescribed qdd on the active joints, given tau on the rest and on
        every mode, under the external loads ``fe`` (whole joints: :func:`flexible_hybrid_dynamics`;
        some dofs of a joint: the dense split with the mass matrix of :func:`flexible_crba`)."""
        dofs, _, _, qdd_a = self.prescribed(t)
        qdd = np.zeros(self.model.nv + self.n_modal)
        qdd[dofs] = qdd_a
        if self._active_joints is not None:
            return flexible_hybrid_dynamics(self.model, q, v, tau, qdd, self._active_joints, fe)
        a, p = self.active_dofs, self.passive_dofs
        M = flexible_crba(self.model, q)
        C = flexible_bias(self.model, q, v, fe)
        qdd[p] = np.linalg.solve(M[np.ix_(p, p)], tau[p] - C[p] - M[np.ix_(p, a)] @ qdd[a])
        tau = tau.copy()
        tau[a] = M[a] @ qdd + C[a]
        return qdd, tau

    def joint_wrenches(self, t, q, v, qdd):
        """(n, 6) joint wrenches [n; f] (child frame) of the motion (q_full, v_full, qdd_full)
        under the external loads at (t, q_full, v_full)."""
        return flexible_joint_wrenches(self.model, q, v, qdd, self.f_ext(t, q, v))[0]

    def energy(self, q, v):
        """(kinetic, gravity potential, elastic) energy of the state."""
        return flexible_energy(self.model, q, v)

    def body_wrenches(self):
        """The constant wrenches at the body origins (n, 6), or None (the loads at nodes:
        :class:`FlexibleLocalInputs` takes them from the packed loads)."""
        loads = self._fext
        if loads is None or not loads.f_ext.shape[0]:
            return None
        return loads.f_ext

    def restrict(self, vsel, qsel, bodies):
        """The inputs of a distributed run's piece (:class:`FlexibleLocalInputs`): ``vsel``,
        ``qsel`` global indices into the full vectors (joints' and modes' entries)."""
        return FlexibleLocalInputs(self, vsel, qsel, bodies)


class FlexibleLocalInputs:
    """The inputs of a piece of a distributed run of a model with flexible bodies (joints' and
    modal entries of some parts, as ``LocalLayout`` lays them out): the joint inputs of
    :class:`~partree.simulation.dynamics.LocalInputs` on the piece's joint entries, zero on its
    modes; the external loads on its bodies (at their origins and at the nodes of flexible
    ones).  Callables of the state need more than the piece and are refused."""

    def __init__(self, dyn, vsel, qsel, bodies):
        from .dynamics import LocalInputs

        model = dyn.model
        vsel = np.asarray(vsel, dtype=np.int64)
        qsel = np.asarray(qsel, dtype=np.int64)
        self.nv = vsel.size
        self.jv = np.flatnonzero(vsel < model.nv)          # the piece's joint entries
        self.jq = np.flatnonzero(qsel < model.nq)
        self.rigid = LocalInputs(dyn, vsel[self.jv], qsel[self.jq], bodies)
        # the wrenches at the piece's body origins (``FlexibleDynamics.body_wrenches``), or with
        # loads at nodes the piece's packed loads (``FlexibleLoads.of_bodies``), which the engine
        # splits by part (``flexible_part.part_forces``)
        self.f_ext = self.rigid.f_ext
        loads = dyn._fext
        if loads is not None and loads.ld_body.shape[0]:
            self.f_ext = loads.of_bodies(bodies)
        self.active = self.rigid.active

    def tau(self, t, q, qd):
        """The piece's forces at (t, q, qd): the joint inputs on its joints, zero on its modes."""
        out = np.zeros(self.nv)
        out[self.jv] = self.rigid.tau(t, q[self.jq], qd[self.jv])
        return out

    def prescribed_qdd(self, t):
        """The piece's prescribed accelerations (its joints'; zero on its modes)."""
        out = np.zeros(self.nv)
        out[self.jv] = self.rigid.prescribed_qdd(t)
        return out
