"""The dynamics function of a simulation: (t, q, v) -> qdd, with joint inputs.

(The momentum form, :class:`MomentumDynamics`, evaluates (t, q, p) -> (v, pdot) with the same
joint inputs.)

``Dynamics(model, ...)`` is what the integrators call.  It gathers

- joint torques: an (nv,) array (constant), a callable ``tau(t, q, qd) -> (nv,)``, a table
  ``(t_table (K,), tau_table (K, nv))`` interpolated linearly (held constant outside), or a dict
  ``{joint name: any of those for that joint's dofs}`` (a per-joint callable takes ``t`` only);
- joint-space damping and springs: per-dof arrays (or scalars) ``damping`` (tau -= d * qd) and
  ``stiffness`` (tau -= k * (q - q_ref)) on joints whose coordinates are plain numbers
  (revolute, prismatic, universal);
- external forces: (n, 6) body wrenches [n; f] in body coordinates, a dict {joint: wrench}, or
  a callable ``f_ext(t, q, qd)`` returning either;
- prescribed motion (hybrid dynamics, seed 002): an object with ``prescribed(model, t) ->
  (dofs, q, qd, qdd)`` (``partree.models.seeds.HybridInputs``) or a dict {joint name: callable
  t -> (q, qd, qdd)}.  Those joints follow the given acceleration and the torque they need is
  computed by ``partree.hybrid_dynamics``, ABA's passes with those joints flagged active, O(N).
  A joint of several dofs of which only some are prescribed is not a per-joint flag: such a run
  solves the dense split instead, with M the mass matrix (CRBA) split into active (a) and passive
  (p) blocks and C = bias forces, M_pp qdd_p = tau_p - C_p - M_pa qdd_a and
  tau_a = M_a. qdd + C_a, which is O(nv^3).

Each evaluation runs ``partree.aba`` (``backend='serial'``), or, for ``backend='mpi'`` /
``'dask'``, ``partree.parallel.forward_dynamics`` on the whole state (full vectors in, qdd out:
a way to check the parallel engine inside a serial time loop).  ``simulate(...,
backend='mpi'|'dask')`` does not go through here for its evaluations: it keeps the state in
pieces, one per part, and evaluates the inputs of each piece with :class:`LocalInputs`
(``Dynamics.restrict``), which computes the same numbers entry by entry; with prescribed motion
each piece flags and evaluates its own prescribed joints, and the engine's evaluation is hybrid
dynamics (the active joints' flags in the parts' reductions, ``partree.parallel``), equal to
``partree.hybrid_dynamics``.
"""
from __future__ import annotations

import hashlib

import numpy as np

from .. import checks
from .. import joints as J
from ..algorithms.aba import aba
from ..algorithms.constrained_dynamics import constrained_dynamics
from ..algorithms.loop_constraints import constraint_terms
from ..algorithms.loop_correction import DENSE_LIMIT, mass_metric, simulation_metric, singular_band_acceleration
from ..algorithms.crba import bias_forces, crba
from ..algorithms.hybrid_dynamics import hybrid_dynamics
from ..algorithms.rnea import rnea
from ..errors import PartreeInputError

#: the engines one evaluation can run on
BACKENDS = ("serial", "mpi", "dask")


class TorqueTable:
    """Piecewise-linear interpolation of a table (t (K,), values (K, m)); constant outside.

    Parameters
    ----------
    t : array_like, shape (K,)
        Strictly increasing times.
    values : array_like, shape (K,) or (K, m)
        The values at those times.
    """

    def __init__(self, t, values):
        self.t = np.asarray(t, dtype=float)
        vals = np.asarray(values, dtype=float)
        if vals.ndim == 1:
            vals = vals[:, None]
        if self.t.ndim != 1 or self.t.size < 1 or vals.shape[0] != self.t.size:
            raise PartreeInputError(f"torque table: times {self.t.shape} and values {vals.shape} do not match")
        if np.any(np.diff(self.t) <= 0):
            raise PartreeInputError("torque table: times must be strictly increasing")
        self.values = vals

    def columns(self, sel):
        """The same table restricted to some columns."""
        return TorqueTable(self.t, self.values[:, sel])

    def __call__(self, t):
        """The interpolated values at time ``t`` (a new (m,) array)."""
        ts = self.t
        if t <= ts[0]:
            return self.values[0].copy()
        if t >= ts[-1]:
            return self.values[-1].copy()
        k = int(np.searchsorted(ts, t, side="right")) - 1
        w = (t - ts[k]) / (ts[k + 1] - ts[k])
        return (1.0 - w) * self.values[k] + w * self.values[k + 1]


def is_table(x):
    """True for a torque table ``(t_table, values)`` (a 2-tuple whose first item is not callable)."""
    return isinstance(x, tuple) and len(x) == 2 and not callable(x[0])


def _per_dof(model, x, name):
    if x is None:
        return None
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        a = np.full(model.nv, float(a))
    if a.shape != (model.nv,):
        raise PartreeInputError(f"{name} has shape {a.shape}; expected a scalar or ({model.nv},) per dof")
    return None if not a.any() else a


class Dynamics:
    """The dynamics function of a run with its joint inputs: ``dyn(t, q, v) -> qdd``.

    Parameters
    ----------
    model : Model
        The tree.
    torques : array_like, callable, tuple or dict, optional
        Joint torques (see the module docstring).
    damping, stiffness : float or array_like, optional
        Per-dof damping and spring constants.
    q_ref : array_like, optional
        Rest positions of the springs (nq or nv entries; zero by default).
    f_ext : array_like, dict or callable, optional
        External body wrenches.
    prescribed : object or dict, optional
        Prescribed motion of some joints (hybrid dynamics).
    backend : str
        Engine of each evaluation: 'serial' (``partree.aba``), 'mpi' or 'dask'
        (``partree.parallel.forward_dynamics`` on the whole state).
    parts : int, optional
        Number of parts of the 'mpi' / 'dask' evaluations.
    data : Data, optional
        Workspace of the serial algorithms.
    """

    def __init__(self, model, torques=None, damping=None, stiffness=None, q_ref=None, f_ext=None,
                 prescribed=None, backend="serial", parts=None, data=None):
        self.model = model
        self.backend = str(backend).lower()
        if self.backend not in BACKENDS:
            raise PartreeInputError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        self.parts = parts
        self._fd = None
        self._loops = len(getattr(model, "loops", ())) > 0
        #: models with loops: the band of the tangent-space acceleration correction near singular
        #: configurations (``SimulationOptions.singular_band``; 0: none)
        self.singular_band = 0.0
        if self._loops and prescribed is not None:
            raise PartreeInputError(f"model {model.name!r} has loops: prescribed motion (hybrid dynamics) is for trees")
        if self.backend != "serial":
            from ..parallel import forward_dynamics

            self._fd = forward_dynamics
        self.data = data if data is not None else model.create_data()
        nv = model.nv
        # ---- torques
        self._tau_const = np.zeros(nv)
        self._tau_fn = None
        self._tau_joint = []          # (v-slice, callable(t) -> values)
        self._describe = {}
        if torques is None:
            pass
        elif isinstance(torques, dict):
            for name, spec in torques.items():
                sl = model.v_slice(name)
                if callable(spec):
                    self._tau_joint.append((sl, spec))
                elif is_table(spec):
                    self._tau_joint.append((sl, TorqueTable(*spec)))
                else:
                    self._tau_const[sl] = np.asarray(spec, dtype=float)
        elif callable(torques):
            self._tau_fn = torques
        elif is_table(torques):
            tab = TorqueTable(*torques)
            if tab.values.shape[1] != nv:
                raise PartreeInputError(f"torque table has {tab.values.shape[1]} columns; the model has nv = {nv}")
            self._tau_fn = lambda t, q, qd, _tab=tab: _tab(t)
        else:
            self._tau_const = np.asarray(torques, dtype=float).reshape(nv).copy()
        self.torques_spec = torques
        # ---- springs and dampers
        self.damping = _per_dof(model, damping, "damping")
        self.stiffness = _per_dof(model, stiffness, "stiffness")
        if self.stiffness is not None:
            quat = np.isin(model.jtype, (J.SPHERICAL, J.FREE))
            vq = np.zeros(nv, dtype=bool)
            for i in np.flatnonzero(quat):
                vq[model.v_slice(int(i))] = True
            if np.any(self.stiffness[vq] != 0):
                raise PartreeInputError("stiffness on spherical/free joints is not supported (only on joints "
                                        "whose coordinates are angles or displacements)")
            if model.nq != model.nv:
                # map v indices to q indices for simple joints
                self._k_vidx = np.flatnonzero(self.stiffness)
                jid = np.searchsorted(model.idx_v, self._k_vidx, side="right") - 1
                self._k_qidx = model.idx_q[jid] + (self._k_vidx - model.idx_v[jid])
            else:
                self._k_vidx = self._k_qidx = np.flatnonzero(self.stiffness)
            self.q_ref = np.zeros(nv) if q_ref is None else np.asarray(q_ref, dtype=float).reshape(-1)
            if self.q_ref.size == model.nq and model.nq != model.nv:
                self.q_ref = self.q_ref[self._k_qidx]
            elif self.q_ref.size == nv:
                self.q_ref = self.q_ref[self._k_vidx]
            else:
                raise PartreeInputError(f"q_ref must have nq = {model.nq} or nv = {nv} entries")
        # ---- external forces
        self._fext_fn = f_ext if callable(f_ext) else None
        self._fext = None if (f_ext is None or callable(f_ext)) else f_ext
        self.f_ext_spec = f_ext
        # ---- prescribed motion
        self.prescribed = None
        self.prescribed_spec = prescribed
        self._active_joints = None
        self._prescribed_fns = None   # the dict form: (dof, f(t) -> (q, qd, qdd)) per joint
        if prescribed is not None:
            if hasattr(prescribed, "prescribed"):
                self.prescribed = lambda t, _p=prescribed: _p.prescribed(model, t)
                self.active_dofs = np.asarray(prescribed.active_dofs(model), dtype=np.int64)
            elif isinstance(prescribed, dict):
                dofs = np.array([model.v_slice(n).start for n in prescribed], dtype=np.int64)
                fns = list(prescribed.values())
                self._prescribed_fns = list(zip(dofs.tolist(), fns))

                def presc(t, _d=dofs, _f=fns):
                    vals = np.array([np.asarray(f(t), dtype=float).reshape(3) for f in _f])
                    return _d, vals[:, 0], vals[:, 1], vals[:, 2]
                self.prescribed = presc
                self.active_dofs = dofs
            else:
                raise PartreeInputError("prescribed must be a HybridInputs-like object or {joint: t -> (q, qd, qdd)}")
            self.passive_dofs = np.setdiff1d(np.arange(nv), self.active_dofs)
            # the joints whose every dof is prescribed: the per-joint flags of hybrid_dynamics
            joint_of = np.repeat(np.arange(model.n), model.nv_j)
            mask = np.zeros(model.n, dtype=bool)
            mask[joint_of[self.active_dofs]] = True
            whole = np.array_equal(np.flatnonzero(np.repeat(mask, model.nv_j)), np.unique(self.active_dofs))
            self._active_joints = mask if whole else None
        self.last_tau = None

    # ---------------------------------------------------------------- inputs
    def tau(self, t, q, qd):
        """The applied joint forces at (t, q, qd): inputs - damping - springs (active joints of a
        hybrid run are overwritten by the computed drive torques in ``hybrid``)."""
        tau = self._tau_const.copy() if (self._tau_fn is None) else np.asarray(self._tau_fn(t, q, qd), dtype=float) + self._tau_const
        for sl, fn in self._tau_joint:
            tau[sl] += np.asarray(fn(t), dtype=float)
        if self.damping is not None:
            tau -= self.damping * qd
        if self.stiffness is not None:
            tau[self._k_vidx] -= self.stiffness[self._k_vidx] * (q[self._k_qidx] - self.q_ref)
        return tau

    def f_ext(self, t, q, qd):
        """The external body wrenches at (t, q, qd): None, an (n, 6) array or a dict."""
        return self._fext_fn(t, q, qd) if self._fext_fn is not None else self._fext

    def body_wrenches(self):
        """The constant external wrenches at the body origins as an (n, 6) array, or None (what
        a distributed run's pieces slice, :class:`LocalInputs`)."""
        if self._fext is None:
            return None
        F, has = checks.external_forces(self.model, self._fext)
        return F if has else None

    @property
    def conservative(self):
        """True when nothing but gravity acts (no torques, damping, springs, external forces or
        prescribed motion): the energy T + V is then a constant of the motion."""
        no_tau = self._tau_fn is None and not self._tau_joint and not np.any(self._tau_const)
        return (no_tau and self.damping is None and self.stiffness is None and self.f_ext_spec is None
                and self.prescribed is None)

    def restrict(self, vsel, qsel, bodies):
        """The joint inputs of some joints and bodies only (a distributed run's piece of the state).

        Parameters
        ----------
        vsel, qsel : array_like of int
            Global indices of the piece's velocity and configuration entries, in the piece's order.
        bodies : array_like of int
            Global indices of the piece's bodies (for external forces).

        Returns
        -------
        LocalInputs
            Computes exactly what :meth:`tau` computes on those entries.
        """
        return LocalInputs(self, vsel, qsel, bodies)

    # ---------------------------------------------------------------- evaluations
    def __call__(self, t, q, v):
        tau = self.tau(t, q, v)
        fe = self.f_ext(t, q, v)
        if self.prescribed is not None:
            qdd, tau = self.hybrid(t, q, v, tau, fe)
            self.last_tau = tau
            return qdd
        self.last_tau = tau
        if self._loops:
            if self._fd is not None:        # the engine solves each loop inside its part
                F, has = checks.external_forces(self.model, fe)
                qdd = self._fd(self.model, q, v, tau, backend=self.backend, parts=self.parts,
                               f_ext=F if has else None)
            else:
                qdd = constrained_dynamics(self.model, q, v, tau, fe).qdd
            if self.singular_band and self.model.loops.nrow * self.model.nv <= DENSE_LIMIT:
                _, J, gamma = constraint_terms(self.model, q, v, dense=True)
                W = mass_metric(self.model, q, simulation_metric(self.model))   # the closure's metric
                qdd = singular_band_acceleration(J, gamma, qdd, self.singular_band, W=W)
            return qdd
        if self._fd is not None:
            F, has = checks.external_forces(self.model, fe)
            return self._fd(self.model, q, v, tau, backend=self.backend, parts=self.parts, f_ext=F if has else None)
        return aba(self.model, q, v, tau, fe, self.data)

    def hybrid(self, t, q, v, tau, fe=None):
        """(qdd, tau) of the hybrid problem: prescribed qdd on the active dofs, given tau on the rest."""
        dofs, _, _, qdd_a = self.prescribed(t)
        if self._active_joints is not None:
            qdd = np.zeros(self.model.nv)
            qdd[dofs] = qdd_a
            if self._fd is not None:        # the engine's hybrid dynamics on the whole state
                F, has = checks.external_forces(self.model, fe)
                return self._fd(self.model, q, v, tau, backend=self.backend, parts=self.parts,
                                f_ext=F if has else None, active=self._active_joints, qdd_active=qdd)
            return hybrid_dynamics(self.model, q, v, tau, qdd, self._active_joints, fe, self.data)
        a, p = self.active_dofs, self.passive_dofs
        M = crba(self.model, q, data=self.data)
        C = bias_forces(self.model, q, v, fe, self.data)
        qdd = np.empty(self.model.nv)
        qdd[dofs] = qdd_a
        if p.size:
            rhs = tau[p] - C[p] - M[np.ix_(p, a)] @ qdd[a]
            qdd[p] = np.linalg.solve(M[np.ix_(p, p)], rhs)
        tau = tau.copy()
        tau[a] = M[a] @ qdd + C[a]
        return qdd, tau

    def joint_wrenches(self, t, q, v, qdd):
        """(n, 6) joint wrenches [n; f] (child frame) for the motion (q, v, qdd); with loops, the
        loops' forces of the state included."""
        fe = self.f_ext(t, q, v)
        if self._loops:
            res = constrained_dynamics(self.model, q, v, self.tau(t, q, v), fe)
            F, has = checks.external_forces(self.model, fe)
            fe = res.loop_wrench + (F if has else 0.0)
        return rnea(self.model, q, v, qdd, fe, self.data, return_wrenches=True)[1]

    # ---------------------------------------------------------------- identity (checkpoints)
    def fingerprint(self):
        """A hash of the inputs (arrays by value, callables by qualified name)."""
        h = hashlib.sha256()

        def feed(x):
            if x is None:
                h.update(b"None")
            elif callable(x):
                h.update(f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', repr(type(x)))}".encode())
            elif isinstance(x, dict):
                for k in sorted(x, key=str):
                    h.update(str(k).encode())
                    feed(x[k])
            elif isinstance(x, (tuple, list)):
                for y in x:
                    feed(y)
            elif hasattr(x, "prescribed"):
                h.update(repr(x).encode())
            else:
                h.update(np.ascontiguousarray(np.asarray(x, dtype=float)).tobytes())
        for item in (self.torques_spec, self.damping, self.stiffness, getattr(self, "q_ref", None),
                     self.f_ext_spec, self.prescribed_spec):
            feed(item)
            h.update(b"|")
        if self.prescribed is not None:
            h.update(self.active_dofs.tobytes())
        return h.hexdigest()


def check_momentum_inputs(dyn):
    """Refuse a run in the momentum form that has none (every backend): a model with loops, or
    prescribed motion (see :class:`MomentumDynamics`)."""
    model = dyn.model
    if len(getattr(model, "loops", ())):
        raise PartreeInputError(f"model {model.name!r} has {len(model.loops)} loops: the momentum form is built "
                                f"for trees only (the constrained equations in generalized momenta, with "
                                f"the loops' multipliers, are not); use formulation='velocity'")
    if dyn.prescribed is not None:
        raise PartreeInputError("prescribed motion (hybrid dynamics) has no momentum form: the prescribed "
                                "joints' velocities are inputs, not functions of the momenta; use "
                                "formulation='velocity'")


class MomentumDynamics:
    """The dynamics of a run in generalized momenta (seed 001): ``f(t, q, p) -> (v, pdot)``.

    The state is (q, p) with p = M(q) v (``partree.generalized_momentum``).  One evaluation is one
    ``partree.momentum_rhs``: v from p by the O(N) elimination of seed 001's eq. (6) and pdot
    from its eq. (7), with no accelerations and no mass matrix.  It returns v rather than qdot
    because the integrators step the configuration in velocity coordinates (on the joint
    manifolds); ``returns_rate`` tells them so.

    The joint inputs are those of the velocity form, from the same :class:`Dynamics`: torques
    (constant, tables, callables of t or of (t, q, qd)), damping, springs and external forces,
    where qd is the velocity of the momenta, M(q)^-1 p.  Joint forces enter eq. (7) additively
    (pdot_i = tau_i + ...), so the evaluation solves for v with tau = 0 and adds tau(t, q, v)
    afterwards: one solve per evaluation, even for torques that depend on qd.  Only an external
    force callable f_ext(t, q, qd) needs v before the solve (its wrenches enter the inward
    pass): v is then solved for once more.

    Prescribed motion (hybrid dynamics) and models with loops have no momentum form here: the
    first makes some velocities inputs rather than functions of p, the second needs the
    constrained momentum equations (multipliers of the loops), which are not built.  The
    distributed backends evaluate the same equations on their pieces of the state through the
    parallel engine (``MPIEngine.momentum_local``, the Dask backend's ``DaskLocalMomentum``).

    Parameters
    ----------
    dyn : Dynamics
        The joint inputs (and the model).
    method : {'ldlt', 'sweep'}
        The elimination of M v = p: the seed's block L^T D L scheme or its sweep.
    """

    returns_rate = True

    def __init__(self, dyn, method="ldlt"):
        from ..algorithms.velocity_from_momentum import check_method

        model = dyn.model
        check_momentum_inputs(dyn)
        self.dyn = dyn
        self.model = model
        self.method = check_method(method)
        self.data = model.create_data()
        self.last_tau = None

    def velocity(self, t, q, p):
        """v = M(q)^-1 p (``partree.velocity_from_momentum``)."""
        from ..algorithms.velocity_from_momentum import velocity_from_momentum

        return velocity_from_momentum(self.model, q, p, method=self.method, data=self.data)

    def momentum(self, q, v):
        """p = M(q) v (``partree.generalized_momentum``)."""
        from ..algorithms.generalized_momentum import generalized_momentum

        return generalized_momentum(self.model, q, v, data=self.data)

    def __call__(self, t, q, p):
        from ..algorithms.momentum_rhs import momentum_rhs

        dyn = self.dyn
        fe = dyn._fext
        if dyn._fext_fn is not None:
            fe = dyn._fext_fn(t, q, self.velocity(t, q, p))
        _, pdot, v = momentum_rhs(self.model, t, q, p, np.zeros(self.model.nv), fe, data=self.data,
                                  method=self.method, return_velocity=True)
        tau = dyn.tau(t, q, v)
        pdot += tau
        self.last_tau = tau
        return v, pdot

    @property
    def conservative(self):
        """The same as the joint inputs' (:attr:`Dynamics.conservative`)."""
        return self.dyn.conservative

    def joint_wrenches(self, t, q, v, qdd):
        """(n, 6) joint wrenches of the motion (q, v, qdd) (:meth:`Dynamics.joint_wrenches`)."""
        return self.dyn.joint_wrenches(t, q, v, qdd)

    def fingerprint(self):
        """The joint inputs' fingerprint (the formulation is part of the options')."""
        return self.dyn.fingerprint()


class LocalInputs:
    """The joint forces and external forces of a :class:`Dynamics` restricted to some joints and
    bodies (global indices ``vsel`` (v layout), ``qsel`` (q layout), ``bodies``): what each
    piece of a distributed run evaluates on its own.  ``tau`` computes exactly what
    ``Dynamics.tau`` computes on those entries, element by element.

    Prescribed motion: a prescription is a function of time alone, so each piece evaluates its
    own joints' (:meth:`prescribed_qdd`) and flags them (``active``, per body of the piece, as
    ``partree.hybrid_dynamics`` flags joints); the engine's evaluation then computes their
    forces (``partree.parallel.PartKernel.reduce``).  A piece keeps only its own joints'
    functions of the dict form ``{joint: f(t)}``; the object form (``prescribed(model, t)``,
    e.g. ``partree.models.seeds.HybridInputs``) is called with the model, which the piece then
    holds too (a Dask worker receives a copy of it with each part's inputs).

    Inputs that need the whole state (a torque or force callable of (t, q, qd)) and prescribed
    motion of some but not all of a joint's dofs (solved densely, with the mass matrix, by
    :meth:`Dynamics.hybrid`) are refused with ``PartreeInputError``.
    """

    def __init__(self, dyn, vsel, qsel, bodies):
        model = dyn.model
        if dyn.prescribed is not None and dyn._active_joints is None:
            raise PartreeInputError("prescribed motion of some but not all of a joint's dofs is solved densely (with "
                                    "the mass matrix), on backend 'serial' only; the distributed backends take "
                                    "whole joints")
        if dyn._fext_fn is not None:
            raise PartreeInputError("a callable f_ext(t, q, qd) is not supported by the distributed backends "
                                    "(it needs the whole state); give a constant (n, 6) array or a dict")
        vsel = np.asarray(vsel, dtype=np.int64)
        qsel = np.asarray(qsel, dtype=np.int64)
        nv = model.nv
        vloc = -np.ones(nv, dtype=np.int64)
        vloc[vsel] = np.arange(vsel.size)
        qloc = -np.ones(model.nq, dtype=np.int64)
        qloc[qsel] = np.arange(qsel.size)
        self.nv = vsel.size
        self.const = dyn._tau_const[vsel].copy()
        self.table = None
        if dyn._tau_fn is not None:
            spec = dyn.torques_spec
            if is_table(spec):
                self.table = TorqueTable(*spec).columns(vsel)
            else:
                raise PartreeInputError("a torque callable tau(t, q, qd) is not supported by the distributed "
                                        "backends (it needs the whole state); use per-joint callables of t "
                                        "({joint: f(t)}), a table, or constant torques")
        self.joint = []
        for sl, fn in dyn._tau_joint:
            loc = vloc[np.arange(nv)[sl]]
            if np.all(loc >= 0):
                self.joint.append((loc, fn))
        self.damping = None if dyn.damping is None else dyn.damping[vsel].copy()
        self.k_vidx = None
        if dyn.stiffness is not None:
            lv = vloc[dyn._k_vidx]
            keep = lv >= 0
            self.k_vidx = lv[keep]
            self.k_qidx = qloc[dyn._k_qidx[keep]]
            self.stiffness = np.zeros(self.nv)
            self.stiffness[self.k_vidx] = dyn.stiffness[dyn._k_vidx[keep]]
            self.q_ref = np.asarray(dyn.q_ref)[keep].copy()
        F = dyn.body_wrenches()
        self.f_ext = None if F is None else np.ascontiguousarray(F[np.asarray(bodies, dtype=np.int64)])
        # prescribed motion: the piece's flags and its own joints' prescriptions
        self.active = None
        self._presc_joint = self._presc_all = None
        if dyn.prescribed is not None:
            self.active = np.ascontiguousarray(dyn._active_joints[np.asarray(bodies, dtype=np.int64)])
            if dyn._prescribed_fns is not None:
                self._presc_joint = [(int(vloc[d]), f) for d, f in dyn._prescribed_fns if vloc[d] >= 0]
            else:
                self._presc_all = dyn.prescribed
                self._vorder = np.argsort(vsel, kind="stable")
                self._vsorted = vsel[self._vorder]

    def prescribed_qdd(self, t):
        """The piece's (nv,) accelerations at time ``t``: the prescribed joints' (``active``),
        zero elsewhere (entries the engine does not read)."""
        qdd = np.zeros(self.nv)
        if self._presc_joint is not None:
            for loc, f in self._presc_joint:
                qdd[loc] = np.asarray(f(t), dtype=float).reshape(3)[2]
        else:
            dofs, _, _, qdd_a = self._presc_all(t)
            dofs = np.asarray(dofs, dtype=np.int64)
            pos = np.minimum(np.searchsorted(self._vsorted, dofs), max(self._vsorted.size - 1, 0))
            mine = (self._vsorted[pos] == dofs) if self._vsorted.size else np.zeros(dofs.size, dtype=bool)
            qdd[self._vorder[pos[mine]]] = np.asarray(qdd_a, dtype=float)[mine]
        return qdd

    def tau(self, t, q, qd):
        """The piece's applied joint forces at (t, q, qd) (its own slices of q and qd)."""
        tau = self.const.copy() if self.table is None else self.table(t) + self.const
        for loc, fn in self.joint:
            tau[loc] += np.asarray(fn(t), dtype=float)
        if self.damping is not None:
            tau -= self.damping * qd
        if self.k_vidx is not None and self.k_vidx.size:
            tau[self.k_vidx] -= self.stiffness[self.k_vidx] * (q[self.k_qidx] - self.q_ref)
        return tau
