"""The MPI backend: every rank integrates only its parts' pieces of the state.

``simulate(..., backend='mpi', comm=None, parts=P)`` is collective: run it on every rank of
``comm`` (default COMM_WORLD), e.g. under ``mpiexec -n R``.  Every rank builds the model and the
same partition (``partree.parallel.mpi.MPIEngine``, rank 0 is the root), keeps only its own parts
and the configuration / velocity entries of their joints (``LocalLayout``: the rank's parts
concatenated, each in its local numbering).  The integrators of ``integrators.py`` run unchanged
on these local vectors: every stage combination, ``retract`` and ``dexpinv`` act joint by joint,
so they are purely local; the adaptive error norm is a global sum through the ``StateSpace``
allreduce hook (:func:`ordered_allreduce`).  One evaluation of the dynamics
(:class:`MPILocalDynamics`) is exactly the engine's two rounds (``MPIEngine.evaluate_local``:
Gatherv velocity maps / Scatterv v_in, Gatherv boundary relations / Scatterv a_in and g): O(P)
boundary data, never the state.  The state is gathered to rank 0 only at save points and
checkpoints (rank 0 keeps the model: it computes the energy, the optional joint wrenches, and
writes the files).  With per-rank output (``SimulationOptions.output``) nothing of the joints'
series is gathered: every rank records and writes its own columns (``sample_split``), and rank 0
gathers the state only for the energy and the wrenches when they are recorded.  In the momentum form the pieces are of (q, p), and an evaluation
(:class:`MPILocalMomentum`) is the engine's momentum rounds (``MPIEngine.momentum_local``).

Besides, the time loop agrees on stopping (a signal reached some rank) and on wall-clock
checkpoints with one ``Allreduce`` of three integers, about every ``loop.POLL_SECONDS`` of wall
time (at every tick when checkpoints are due by wall time); its count is the summary's
``polls``.  Any exception on one rank aborts the job (``AbortOnError``) instead of leaving the
others in a collective; a refused checkpoint or output file raises the same error on every rank.
"""
from __future__ import annotations

import numpy as np

from ..parallel.flexible_part import part_forces
from .dynamics import check_momentum_inputs
from .integrators import StateSpace, make_integrator
from .local import DistributedBackend, LocalLayout


def ordered_allreduce(comm):
    """Sum over the ranks, in rank order, with the same bits on every rank (an allgather of a few
    floats): every rank then takes the same step-size decisions.

    Parameters
    ----------
    comm : mpi4py communicator
        The ranks.

    Returns
    -------
    callable
        ``allreduce(x) -> sum of x over the ranks``.
    """
    def allreduce(x):
        pieces = comm.allgather(np.asarray(x, dtype=np.float64))
        s = pieces[0].copy()
        for p in pieces[1:]:
            s = s + p
        return s
    return allreduce


class MPILocalDynamics:
    """``f(t, q_loc, v_loc) -> qdd_loc`` on this rank's parts; collective over the engine's comm.

    One call = the engine's two communication rounds, nothing else (no full vector anywhere).

    Parameters
    ----------
    engine : MPIEngine
        The engine (this rank's parts).
    layout : LocalLayout
        Where each part's pieces sit in the local vectors.
    inputs : LocalInputs
        The joint forces of this rank's joints.
    """

    def __init__(self, engine, layout, inputs):
        self.eng, self.layout, self.inputs = engine, layout, inputs
        self.last_tau = None
        self.nevals = 0
        self._split = (None, None)      # (the piece's loads, their parts' shares): split once

    def __call__(self, t, q, v):
        tau = self.inputs.tau(t, q, v)
        active = self.inputs.active
        if active is None:
            self.last_tau = tau
            return self.evaluate(q, v, tau, self.inputs.f_ext)
        # prescribed motion: hybrid dynamics, the prescribed joints' forces computed
        qdd, self.last_tau = self.evaluate(q, v, tau, self.inputs.f_ext, active, self.inputs.prescribed_qdd(t))
        return qdd

    def _part_loads(self, f_ext):
        """Each part's share of the piece's external loads (``flexible_part.part_forces``), or
        None; the run's constant loads are split once, not at every evaluation."""
        if f_ext is None:
            return None
        if f_ext is not self._split[0]:
            L = self.layout
            self._split = (f_ext, [part_forces(f_ext, L.bsl[j]) for j in range(len(self.eng.parts))])
        return self._split[1]

    def evaluate(self, q, v, tau, f_ext=None, active=None, qdd_active=None):
        """qdd of this rank's joints for given local q, v, tau (and external forces); with
        ``active`` (the flags of this rank's bodies) and ``qdd_active`` (the given accelerations
        of this rank's joints) hybrid dynamics, (qdd, tau) (``MPIEngine.evaluate_local``)."""
        L = self.layout
        self.nevals += 1
        P = len(self.eng.parts)
        hyb = {} if active is None else {"actives": [active[L.bsl[j]] for j in range(P)],
                                         "qdds": [qdd_active[L.vsl[j]] for j in range(P)]}
        out = self.eng.evaluate_local([q[L.qsl[j]] for j in range(P)], [v[L.vsl[j]] for j in range(P)],
                                      [tau[L.vsl[j]] for j in range(P)], self._part_loads(f_ext), **hyb)
        qdd = np.empty(L.nv)
        self.last_bytes = self.eng.last_boundary_bytes
        if active is None:
            for j in range(P):
                qdd[L.vsl[j]] = out[j]
            return qdd
        tau_out = np.empty(L.nv)
        for j in range(P):
            qdd[L.vsl[j]], tau_out[L.vsl[j]] = out[j]
        return qdd, tau_out


class MPILocalMomentum(MPILocalDynamics):
    """The momentum form on this rank's parts: ``f(t, q_loc, p_loc) -> (v_loc, pdot_loc)``
    (``returns_rate``), collective over the engine's comm: one ``MPIEngine.momentum_local`` (the
    engine's rounds at rest with the momenta as joint forces) per call, then the joint forces
    at (t, q, v) added to dp/dt, as :class:`~partree.simulation.dynamics.MomentumDynamics` does
    on the whole state."""

    returns_rate = True

    def velocity(self, t, q, p):
        """v = M^-1 p on this rank's joints (collective)."""
        return self._solve(q, p)[0]

    def _solve(self, q, p):
        L = self.layout
        P = len(self.eng.parts)
        f_ext = self.inputs.f_ext
        out = self.eng.momentum_local([q[L.qsl[j]] for j in range(P)], [p[L.vsl[j]] for j in range(P)],
                                      self._part_loads(f_ext))
        v = np.empty(L.nv)
        pdot = np.empty(L.nv)
        for j in range(P):
            v[L.vsl[j]], pdot[L.vsl[j]] = out[j]
        self.nevals += 1
        self.last_bytes = self.eng.last_boundary_bytes
        return v, pdot

    def __call__(self, t, q, p):
        v, pdot = self._solve(q, p)
        tau = self.inputs.tau(t, q, v)
        self.last_tau = tau
        return v, pdot + tau


class MPIGather:
    """Gathers local vectors to rank 0 (save points and checkpoints only) and places them in
    global order; scatters whole vectors from rank 0 (resume).

    Parameters
    ----------
    comm : mpi4py communicator
        The ranks.
    layout : LocalLayout
        This rank's pieces (one gather of their indices at construction).
    """

    def __init__(self, comm, layout):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.lnq, self.lnv = int(layout.nq), int(layout.nv)
        sel = comm.gather((layout.qsel, layout.vsel), root=0)      # once, at setup
        if self.rank == 0:
            self.qidx = np.concatenate([s[0] for s in sel])
            self.vidx = np.concatenate([s[1] for s in sel])
            self.qcounts = [int(s[0].size) for s in sel]
            self.vcounts = [int(s[1].size) for s in sel]
            self.nq, self.nv = self.qidx.size, self.vidx.size

    def _gatherv(self, x, counts):
        recv = None
        if self.rank == 0:
            buf = np.empty(sum(counts))
            recv = [buf, (counts, np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist())]
        self.comm.Gatherv(np.ascontiguousarray(x, dtype=np.float64), recv, root=0)
        return recv[0] if recv is not None else None

    def q(self, x):
        """This rank's piece of q -> the whole q on rank 0 (None elsewhere); collective."""
        b = self._gatherv(x, self.qcounts if self.rank == 0 else None)
        if b is None:
            return None
        out = np.empty(self.nq)
        out[self.qidx] = b
        return out

    def v(self, x):
        """This rank's piece of a velocity-sized vector -> the whole vector on rank 0; collective."""
        b = self._gatherv(x, self.vcounts if self.rank == 0 else None)
        if b is None:
            return None
        out = np.empty(self.nv)
        out[self.vidx] = b
        return out

    def _scatterv(self, full, idx, counts, n_local):
        send = None
        if self.rank == 0:
            send = [np.ascontiguousarray(np.asarray(full, dtype=np.float64)[idx]),
                    (counts, np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist())]
        out = np.empty(n_local)
        self.comm.Scatterv(send, out, root=0)
        return out

    def scatter_q(self, full):
        """Rank 0's whole q -> this rank's piece (collective)."""
        if self.rank == 0:
            return self._scatterv(full, self.qidx, self.qcounts, self.lnq)
        return self._scatterv(None, None, None, self.lnq)

    def scatter_v(self, full):
        """Rank 0's whole velocity-sized vector -> this rank's piece (collective)."""
        if self.rank == 0:
            return self._scatterv(full, self.vidx, self.vcounts, self.lnv)
        return self._scatterv(None, None, None, self.lnv)


class MPIBackend(DistributedBackend):
    """The state in pieces on the ranks of ``comm`` (see the module docstring).

    Parameters
    ----------
    comm : mpi4py communicator or None
        Default ``MPI.COMM_WORLD``.
    """

    name = "mpi"
    #: keywords for the ``MPIEngine`` (a subclass over another communicator may restrict them)
    engine_options = {}

    def __init__(self, comm=None):
        if comm is None:
            from ..extras import require

            comm = require("mpi4py.MPI", "backend 'mpi'").COMM_WORLD
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.root = self.rank == 0
        self.polls_every_tick = self.size == 1
        self.eng = None

    def guard(self):
        from ..parallel.mpi import AbortOnError

        return AbortOnError(self.comm)

    def agree(self, value):
        return self.comm.bcast(value, root=0)

    def poll(self, values):
        if self.size == 1:
            return values
        from mpi4py import MPI

        out = np.empty_like(values)
        self.comm.Allreduce(values, out, op=MPI.MAX)
        return out

    def start(self, model, dyn, opts, q, v, space=None):
        from ..parallel.mpi import MPIEngine
        from ..parallel.partition import PATH_WEIGHT

        momentum = opts.formulation == "momentum"
        if momentum:
            check_momentum_inputs(dyn)
        self.eng = MPIEngine(model, comm=self.comm, parts=opts.parts, gather=False, poses=momentum,
                             path_weight=PATH_WEIGHT if opts.path_weight is None else opts.path_weight,
                             **self.engine_options)
        L = LocalLayout(self.eng.parts)
        inputs = dyn.restrict(L.vsel, L.qsel, L.bodies)
        self.vf = MPILocalDynamics(self.eng, L, inputs)
        self.f = MPILocalMomentum(self.eng, L, inputs) if momentum else self.vf
        if momentum:
            from ..algorithms.generalized_momentum import generalized_momentum

            v = generalized_momentum(model, q, v)          # the state is (q, p); every rank has the model here
        space = self.space = StateSpace(L, allreduce=ordered_allreduce(self.comm))
        kw = dict(rtol=opts.rtol, atol=opts.atol, h0=opts.h0, max_steps=opts.max_steps)
        if opts.h_max is not None:
            kw["h_max"] = opts.h_max
        integ = make_integrator(opts.integrator, self.f, space, **kw)
        self.gather = MPIGather(self.comm, L)
        return integ, q[L.qsel].copy(), v[L.vsel].copy()

    def step_closure(self, closure):
        """The loops' correction on this rank's pieces (:class:`~.closure.EngineLoopClosure`):
        each step is one engine evaluation (``MPIEngine.correction_step_local``)."""
        from .closure import EngineLoopClosure

        L = self.f.layout
        P = len(self.eng.parts)

        def step(q, v, rows):
            out, err = self.eng.correction_step_local([q[L.qsl[j]] for j in range(P)],
                                                      [v[L.vsl[j]] for j in range(P)], rows)
            dx = np.empty(L.nv)
            for j in range(P):
                dx[L.vsl[j]] = out[j]
            return dx, err

        return EngineLoopClosure(step, lambda q, dv, s: self.space.retract(q, s * dv), closure.correct, closure.tol)

    def put_state(self, integ, info, state):
        st = state if self.root else {}
        q = self.gather.scatter_q(st.get("q"))
        v = self.gather.scatter_v(st.get("v"))
        istate = dict(info["integrator"])
        if info["fsal"]:
            istate["fsal"] = self.gather.scatter_v(st.get("fsal"))
        from .loop import INTEGRATOR_ARRAY

        for key in istate.pop("arrays", []):        # velocity-sized rows (``CheckpointBook.write``)
            full = st.get(INTEGRATOR_ARRAY + key)
            shape = self.comm.bcast(None if full is None else full.shape, root=0)
            if len(shape) == 1:
                istate[key] = self.gather.scatter_v(full)
            else:
                istate[key] = np.stack([self.gather.scatter_v(None if full is None else full[i])
                                        for i in range(shape[0])])
        integ.load_state_dict(istate)
        return q, v

    def gather_q(self, q):
        return self.gather.q(q)

    def gather_v(self, v):
        return self.gather.v(v)

    def sample(self, t, q, v, need_qdd):
        p = None
        if self.f is not self.vf:             # the momentum form: v carries p; solve for the velocity
            p, v = v, self.f.velocity(t, q, v)
        qg, vg = self.gather.q(q), self.gather.v(v)
        qdd = tau = None
        if need_qdd:
            qdd_l = self.vf(t, q, v)           # collective: every rank evaluates at the save point
            qdd = self.gather.v(qdd_l)
            tau = self.gather.v(self.vf.last_tau)
        got = (qg, vg, qdd, tau) if p is None else (qg, vg, qdd, tau, self.gather.v(p))
        return got if self.root else None

    # ---------------------------------------------------------------- per-rank output
    def per_rank_output(self, opts, model):
        """Per-rank results files (``SimulationOptions.output``): asked for, or ``'auto'`` with
        .h5 results of a model of ``PER_RANK_MIN_BODIES`` bodies or more on several ranks."""
        from .options import PER_RANK_MIN_BODIES, results_kind

        if self.name != "mpi" or opts.out is None or results_kind(opts.out) != "h5":
            return False
        if getattr(model, "flexible", None) is not None:     # gathered on rank 0 (``flexible.check_run``)
            return False
        if opts.output == "per-rank":
            return True
        return opts.output == "auto" and self.size > 1 and model.n >= PER_RANK_MIN_BODIES

    def gather_objects(self, obj):
        return self.comm.gather(obj, root=0)

    def local_columns(self):
        """The global columns of this rank's pieces of q and of the velocity-sized vectors."""
        L = self.f.layout
        return np.asarray(L.qsel, dtype=np.int64), np.asarray(L.vsel, dtype=np.int64)

    def sample_split(self, t, q, v, need_qdd, need_full):
        """A save point of a per-rank run: ``(mine, whole)``, this rank's ``(q, v, qdd, tau, p)``
        and on rank 0, when ``need_full`` (energy, wrenches), the whole ``(q, v, qdd, tau)``
        (``()`` elsewhere or without it); collective."""
        p = None
        if self.f is not self.vf:             # the momentum form: v carries p; solve for the velocity
            p, v = v, self.f.velocity(t, q, v)
        qdd = tau = None
        if need_qdd:
            qdd = self.vf(t, q, v)             # collective: every rank evaluates at the save point
            tau = self.vf.last_tau
        whole = ()
        if need_full:
            got = (self.gather.q(q), self.gather.v(v)) + ((self.gather.v(qdd), self.gather.v(tau)) if need_qdd
                                                          else (None, None))
            whole = got if self.root else ()
        return (q, v, qdd, tau, p), whole

    def summary(self):
        return {"ranks": self.size, "nparts": int(self.eng.nparts) if self.eng is not None else None}
