"""The Dask backend: the parts and their pieces of the state live in actors on the workers.

``simulate(..., backend='dask', client=None, parts=P)``: the parts are scattered to the workers
(``partree.parallel.dask_backend.DaskEngine``) and each part gets a Dask actor on its worker
(:class:`SimActor`: the part object already there, its joint forces, its ``StateSpace``) that
keeps the part's slices of every vector of the run (state, stage states, slopes) in its memory
across steps, under keys; the client holds only the keys (:class:`DaskVector`).  The client calls
the actors directly (no scheduler in between): one evaluation of the dynamics
(:class:`DaskLocalDynamics`) is two round trips (velocity maps; boundary relations, the part's
joint forces computed there) with the root steps in the client.  The integrators' per-part
arithmetic (stage states, final combinations, the back-substitution that gives qdd) is queued on
the client and runs in the actors at the start of the next call (:class:`DaskContext`), so it
costs no round trip of its own; the adaptive error norm is one more call returning per-part
partial sums, added in part order.  The client only ever receives boundary data, the partial
sums, and the state at save points and checkpoints (the client writes the files; a resume sends
the loaded state to the parts' actors).  Lost workers are not recovered (the state on them is
gone): the run ends with ``DaskEngineError``.  In the momentum form (:class:`DaskLocalMomentum`;
RK4, DOPRI5, DOP853) an evaluation is three round trips: the engine's momentum rounds.
``client=None`` starts a LocalCluster with 2 single-threaded workers, closed at the end.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..errors import DaskEngineError
from .dynamics import check_momentum_inputs
from .integrators import DOP853, RK4, DormandPrince5, StateSpace, SymplecticEuler, make_integrator
from .local import DistributedBackend, LocalLayout
from .tableaus import DOP853_E3, DOP853_E5


# ==================================================================== the per-part arithmetic
# (the serial integrators' operations on one part's slices)

def _rk4_stage(sp, q, v, a, prev, h, full):
    """RK4 stages 2..4 on one part: (q_i, v_i, K_i) from the previous slope a and K_{i-1}
    (prev; None for stage 2, which uses v).  ``full``: 1 for stage 4 (step h), else 0.5."""
    c = full * h
    vs = v + c * a
    th = c * (v if prev is None else prev)
    return sp.retract(q, th), vs, sp.dexpinv(th, vs)


def _rk4_final(sp, q, v, a1, a2, a3, a4, K2, K3, K4, h):
    h6 = h / 6.0
    q1 = sp.retract(q, h6 * (v + 2.0 * K2 + 2.0 * K3 + K4))
    v1 = v + h6 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
    return q1, v1


def _erk_stage(sp, q, v, h, coefs, Kq, Kv, with_k=True):
    """Embedded RK stage: th = h (a @ Kq), v_i = v + h (a @ Kv), q_i = q + th, Kq_i = dexpinv
    (Kq, Kv: lists of the stages' arrays that the nonzero coefficients pick)."""
    th = h * (coefs @ np.stack(Kq))
    vs = v + h * (coefs @ np.stack(Kv))
    return sp.retract(q, th), vs, (sp.dexpinv(th, vs) if with_k else None)


def _scales_np(sp, atol, rtol, q, v, q1, v1):
    sq = atol + rtol * np.maximum(sp.q_magnitude(q), sp.q_magnitude(q1))
    sv = atol + rtol * np.maximum(np.abs(v), np.abs(v1))
    return sq, sv


def _sumsq_np(*ev):
    ss = 0.0
    cnt = 0
    for k in range(0, len(ev), 2):
        r = ev[k] / ev[k + 1]
        ss += float(r @ r)
        cnt += r.size
    return ss, cnt


def _erk_error(sp, kind, q, v, q1, v1, h, atol, rtol, coefs, coefs2, Kq, Kv):
    """Partial sums of the error norm(s) on one part: [ss, cnt] (dopri5) or [ss5, cnt, ss3, cnt]."""
    Kq, Kv = np.stack(Kq), np.stack(Kv)
    sq, sv = _scales_np(sp, atol, rtol, q, v, q1, v1)
    if kind == "dopri5":
        ss, cnt = _sumsq_np(h * (coefs @ Kq), sq, h * (coefs @ Kv), sv)
        return np.array([ss, float(cnt)])
    s5, c5 = _sumsq_np(coefs @ Kq, sq, coefs @ Kv, sv)
    s3, c3 = _sumsq_np(coefs2 @ Kq, sq, coefs2 @ Kv, sv)
    return np.array([s5, float(c5), s3, float(c3)])


def _init_norms(sp, atol, rtol, q, v, a0, w):
    """Partial sums of the two norms of the starting-step heuristic: [ss0, cnt0, ss1, cnt1]
    (w: the configuration's velocity, v itself in the velocity form)."""
    sq, sv = _scales_np(sp, atol, rtol, q, v, q, v)
    s0, c0 = _sumsq_np(sp.q_magnitude(q), sq, v, sv)
    s1, c1 = _sumsq_np(w, sq, a0, sv)
    return np.array([s0, float(c0), s1, float(c1)])


class SimActor:
    """One part of a Dask simulation, as a Dask actor on the part's worker: the part (the object
    the engine scattered there, not a copy), its joint forces (``LocalInputs``), its
    ``StateSpace`` and its named local vectors (key -> array: state, stage states, slopes) that
    persist across steps.  Every call first runs the operations the client queued since the
    previous call (stage arithmetic, back-substitutions, puts, drops: see ``DaskContext``), in
    order, then its own work; so the integrator's arithmetic rides on the next round trip."""

    def __init__(self, pk, inputs, space):
        self.pk, self.inputs, self.sp = pk, inputs, space
        self.x = {}

    # ---------------------------------------------------------------- queued operations
    def _run(self, ops):
        for name, args in ops:
            getattr(self, "_op_" + name)(*args)

    def _op_put(self, key, arr):
        self.x[key] = arr

    def _op_drop(self, keys):
        for key in keys:
            self.x.pop(key, None)

    def _op_solve(self, key, a_in, g):
        self.x[key] = self.pk.solve(a_in, g).copy()

    def _op_forces(self, key):
        """The part's joint forces of the evaluation just solved (with prescribed motion: the
        prescribed joints' computed forces in place)."""
        self.x[key] = self.pk.joint_forces.copy()

    def _op_tau(self, key, t, q, v):
        self.x[key] = self.inputs.tau(t, self.x[q], self.x[v])

    def _op_rk4_stage(self, out, q, v, a, prev, h, full):
        res = _rk4_stage(self.sp, self.x[q], self.x[v], self.x[a], None if prev is None else self.x[prev], h, full)
        for key, arr in zip(out, res):
            self.x[key] = arr

    def _op_rk4_final(self, out, q, v, a1, a2, a3, a4, K2, K3, K4, h):
        x = self.x
        x[out[0]], x[out[1]] = _rk4_final(self.sp, x[q], x[v], x[a1], x[a2], x[a3], x[a4], x[K2], x[K3], x[K4], h)

    def _op_erk_stage(self, out, q, v, h, coefs, Kq, Kv):
        x = self.x
        res = _erk_stage(self.sp, x[q], x[v], h, coefs, [x[k] for k in Kq], [x[k] for k in Kv], out[2] is not None)
        for key, arr in zip(out, res):
            if key is not None:
                x[key] = arr

    def _op_retract(self, out, q, dv, s):
        self.x[out[0]] = self.sp.retract(self.x[q], s * self.x[dv])

    def _op_add(self, out, v, dx):
        self.x[out[0]] = self.x[v] + self.x[dx]

    def _op_momentum_solve(self, out, t, q, a_in, g, Fh):
        """The momentum form's back-substitution: (v, pdot + tau(t, q, v)) under ``out``."""
        pk = self.pk
        pk.solve(a_in, g)
        v, pdot = pk.momentum_rate(Fh)
        v = v.copy()
        self.x[out[0]], self.x[out[1]] = v, pdot + self.inputs.tau(t, self.x[q], v)

    def _op_mstage(self, out, q, y, K, a, c):
        """A momentum-form RK4 stage: q + c K (retracted), y + c a."""
        self.x[out[0]], self.x[out[1]] = self.sp.retract(self.x[q], c * self.x[K]), self.x[y] + c * self.x[a]

    def _op_erk_mstage(self, out, q, y, h, coefs, Kq, Ky):
        """A momentum-form embedded RK stage: th = h (a @ Kq) (kept under out[2]: the stage's
        dexp^-1 needs its velocity, known after the evaluation), q + th retracted, y + h (a @ Ky)."""
        x = self.x
        th = h * (coefs @ np.stack([x[k] for k in Kq]))
        x[out[0]] = self.sp.retract(x[q], th)
        x[out[1]] = x[y] + h * (coefs @ np.stack([x[k] for k in Ky]))
        x[out[2]] = th

    def _op_dexp_th(self, out, th, w):
        """dexp^-1 of the step th at the stage velocity w."""
        self.x[out[0]] = self.sp.dexpinv(self.x[th], self.x[w])

    def _op_mdexp(self, out, K, w, c):
        """dexp^-1 of the step c K at the stage velocity w."""
        self.x[out[0]] = self.sp.dexpinv(c * self.x[K], self.x[w])

    def _op_mfinal(self, out, q, y, w1, a1, a2, a3, a4, K2, K3, K4, h):
        x = self.x
        h6 = h / 6.0
        x[out[0]] = self.sp.retract(x[q], h6 * (x[w1] + 2.0 * x[K2] + 2.0 * x[K3] + x[K4]))
        x[out[1]] = x[y] + h6 * (x[a1] + 2.0 * x[a2] + 2.0 * x[a3] + x[a4])

    def _op_se_step(self, out, q, v, a, h):
        x = self.x
        v1 = x[v] + h * x[a]
        x[out[0]], x[out[1]] = self.sp.retract(x[q], h * v1), v1

    # ---------------------------------------------------------------- calls (one round trip each)
    def velocity(self, ops, q, v):
        self._run(ops)
        TE, Tr, vrel = self.pk.velocity(self.x[q], self.x[v])
        return TE.copy(), Tr.copy(), vrel.copy()

    def reduce(self, ops, t, q, v, v_in):
        self._run(ops)
        inp = self.inputs
        tau = inp.tau(t, self.x[q], self.x[v])
        if inp.active is None:
            return tuple(a.copy() for a in self.pk.reduce(v_in, tau, inp.f_ext))
        # prescribed motion: the part's own prescribed joints flagged, their accelerations at t
        return tuple(a.copy() for a in self.pk.reduce(v_in, tau, inp.f_ext, active=inp.active,
                                                      qdd=inp.prescribed_qdd(t)))

    def momentum_velocity(self, ops, q):
        """The momentum form's velocity round: the handle maps at rest."""
        self._run(ops)
        TE, Tr, vrel = self.pk.velocity(self.x[q], np.zeros(self.pk.nv))
        return TE.copy(), Tr.copy(), vrel.copy()

    def momentum_reduce(self, ops, q, p, g_in):
        """The momentum form's reduction at rest (p as the joint forces) and the part's total of
        gravity and external wrenches (``PartKernel.momentum_forces``)."""
        self._run(ops)
        red = tuple(a.copy() for a in self.pk.reduce(np.zeros(6), self.x[p], None, rows="position"))
        return red, self.pk.momentum_forces(g_in[3:], self.inputs.f_ext).copy()

    def reduce_rows(self, ops, q, v, v_in, rows):
        """A loop correction's reduction (no joint forces; ``PartKernel.reduce(..., rows)``) and
        the part's loop violation max |Phi|."""
        self._run(ops)
        red = tuple(a.copy() for a in self.pk.reduce(v_in, np.zeros(self.pk.nv), None, rows=rows))
        return red, self.pk.loop_violation()

    def erk_error(self, ops, kind, q, v, q1, v1, h, atol, rtol, coefs, coefs2, Kq, Kv):
        self._run(ops)
        x = self.x
        return _erk_error(self.sp, kind, x[q], x[v], x[q1], x[v1], h, atol, rtol, coefs, coefs2,
                          [x[k] for k in Kq], [x[k] for k in Kv])

    def init_norms(self, ops, atol, rtol, q, v, a0, w):
        self._run(ops)
        return _init_norms(self.sp, atol, rtol, self.x[q], self.x[v], self.x[a0], self.x[w])

    def get(self, ops, keys):
        self._run(ops)
        return [self.x[k] for k in keys]

    def nkeys(self, ops):
        self._run(ops)
        return len(self.x)


class DaskVector:
    """A state-sized vector kept on the workers: every part's slice lives in the part's actor
    under ``key`` (the client holds no data).  The vector may still be pending: the operation
    that defines it is queued and runs on the workers at the start of the next call.  When the
    handle is garbage collected the slices are dropped (queued too)."""

    def __init__(self, ctx, key):
        self.ctx = ctx
        self.key = key

    @property
    def raw(self):
        """Per-part handles (part, key); not Dask futures (there is nothing to wait for)."""
        return [(k, self.key) for k in range(self.ctx.nparts)]

    def fetch(self):
        """The parts' slices (one round trip)."""
        return self.ctx.fetch([self])[0]

    def __del__(self):
        try:
            self.ctx._dead.append(self.key)
        except Exception:      # noqa: BLE001 -- interpreter shutdown
            pass


def _k(x):
    return x.key if isinstance(x, DaskVector) else x


class DaskContext:
    """The parts' actors (``SimActor``, one per part, on the part's worker) and the queue of
    operations not yet sent.  Queued operations (stage arithmetic, back-substitutions, puts,
    drops) go out with the next call to each actor, ahead of its own work, so one evaluation of
    the dynamics is two round trips (velocity, reduce) and the stage arithmetic none."""

    def __init__(self, eng, actors):
        self.eng = eng
        self.actors = actors
        self.nparts = len(actors)
        self._pending = [[] for _ in actors]
        self._dead = []
        self._next = 0
        self.calls = 0                      # round trips (for tests / reports)

    def new(self):
        self._next += 1
        return DaskVector(self, self._next)

    def queue(self, name, *args):
        """The same operation on every part (arguments: DaskVectors -> keys, tuples of them)."""
        args = tuple(tuple(_k(a) for a in x) if isinstance(x, (tuple, list)) else _k(x) for x in args)
        op = (name, args)
        for p in self._pending:
            p.append(op)

    def queue_each(self, name, per_part):
        """One operation per part with its own arguments (per_part[k]: a tuple)."""
        for p, args in zip(self._pending, per_part):
            p.append((name, args))

    def op(self, name, nout, *args):
        """Queue an operation writing ``nout`` new vectors; returns their handles."""
        out = [self.new() for _ in range(nout)]
        self.queue(name, tuple(out), *args)
        return out

    def put(self, slices):
        """A new vector from the parts' slices (sent with the next call)."""
        out = self.new()
        self.queue_each("put", [(out.key, np.ascontiguousarray(s)) for s in slices])
        return out

    def call(self, method, per_part, name=None):
        """One round trip: ``method`` of every part's actor with its queued operations first;
        per_part[k]: part k's arguments (a tuple), or one tuple for every part."""
        from ..parallel.dask_backend import WorkerLost

        P = self.nparts
        ops, self._pending = self._pending, [[] for _ in range(P)]
        if self._dead:
            drop = ("drop", (self._dead,))
            self._dead = []
            for o in ops:
                o.append(drop)
        if isinstance(per_part, tuple):
            per_part = [per_part] * P
        name = name or method
        self.calls += 1
        try:
            futs = [self._send(k, method, ops[k], *[_k(a) for a in per_part[k]]) for k in range(P)]
            return self.eng.collect(futs, time.monotonic() + self.eng.timeout, name)
        except WorkerLost as e:
            raise DaskEngineError(f"Dask worker lost during a distributed simulation ({e}); the state on it is "
                                  f"gone (restart the run)") from None

    def _send(self, k, method, *args):
        from ..parallel.dask_backend import WorkerLost

        try:
            return getattr(self.actors[k], method)(*args)
        except RuntimeError as e:            # "Worker holding Actor was lost"
            if "lost" not in str(e):
                raise
            raise WorkerLost(f"part {k}: {e}") from None

    def fetch(self, vecs):
        """The parts' slices of some vectors, in one round trip: a list (per vector) of lists (per part)."""
        got = self.call("get", ([v.key for v in vecs],), "fetch")
        return [[got[k][i] for k in range(self.nparts)] for i in range(len(vecs))]

    def partial_sums(self, method, *args):
        """Per-part partial sums, added in part order (same bits every time)."""
        parts = self.call(method, args)
        s = parts[0].copy()
        for p in parts[1:]:
            s = s + p
        return s


def dask_integrator(iname, f, ctx, **kw):
    """The integrators of ``integrators.py`` with their per-part stage arithmetic queued on the
    parts' actors (it runs at the start of the next call there: no round trip of its own)."""
    class DaskRK4(RK4):
        def step(self, t, q, v, h):
            h = float(h)
            a1 = self._f(t, q, v)
            q2, v2, K2 = ctx.op("rk4_stage", 3, q, v, a1, None, h, 0.5)
            a2 = self._f(t + 0.5 * h, q2, v2)
            q3, v3, K3 = ctx.op("rk4_stage", 3, q, v, a2, K2, h, 0.5)
            a3 = self._f(t + 0.5 * h, q3, v3)
            q4, v4, K4 = ctx.op("rk4_stage", 3, q, v, a3, K3, h, 1.0)
            a4 = self._f(t + h, q4, v4)
            q1, v1 = ctx.op("rk4_final", 2, q, v, a1, a2, a3, a4, K2, K3, K4, h)
            return q1, v1

    class DaskSymplecticEuler(SymplecticEuler):
        def step(self, t, q, v, h):
            a = self._f(t, q, v)
            return tuple(ctx.op("se_step", 2, q, v, a, float(h)))

    class _Fused:
        def _stage(self, q, v, h, coefs, Kq, Kv, with_k=True):
            out = (ctx.new(), ctx.new(), ctx.new() if with_k else None)
            ctx.queue("erk_stage", out, q, v, float(h), coefs, tuple(Kq), tuple(Kv))
            return out

        def _stages(self, t, q, v, h, a0):
            s = len(self.c)
            Kq, Kv = [None] * s, [None] * s
            Kq[0], Kv[0] = (self._w0 if self.returns_rate else v), a0
            for i in range(1, s):
                ai = self.A[i, :i]
                nz = np.flatnonzero(ai)
                if self.returns_rate:
                    # the momentum form: the stage's velocity comes with its rate
                    qi, yi, th = ctx.new(), ctx.new(), ctx.new()
                    ctx.queue("erk_mstage", (qi, yi, th), q, v, float(h), ai[nz], tuple(Kq[j] for j in nz),
                              tuple(Kv[j] for j in nz))
                    wi, Kv[i] = self._rates(t + self.c[i] * h, qi, yi)
                    (Kq[i],) = ctx.op("dexp_th", 1, th, wi)
                    self._w_last = wi
                else:
                    qi, vi, Kq[i] = self._stage(q, v, h, ai[nz], [Kq[j] for j in nz], [Kv[j] for j in nz])
                    Kv[i] = self._f(t + self.c[i] * h, qi, vi)
            return Kq, Kv

        def attempt(self, t, q, v, h, a0):
            Kq, Kv = self._stages(t, q, v, h, a0)
            nz = np.flatnonzero(self.b)
            q1, v1, _ = self._stage(q, v, h, self.b[nz], [Kq[j] for j in nz], [Kv[j] for j in nz], False)
            err = self._fused_error(float(h), Kq, Kv, q, v, q1, v1)
            return q1, v1, err, Kv

        def initial_step(self, t, q, v, a0, t_span):
            s0, c0, s1, c1 = ctx.partial_sums("init_norms", self.atol, self.rtol, q, v, a0,
                                              self._w0 if self.returns_rate else v)
            d0 = math.sqrt(s0 / max(c0, 1.0))
            d1 = math.sqrt(s1 / max(c1, 1.0))
            h = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
            return min(h, abs(t_span), self.h_max)

    class DaskDOPRI5(_Fused, DormandPrince5):
        def _fused_error(self, h, Kq, Kv, q, v, q1, v1):
            nz = np.flatnonzero(self.e)
            ss, cnt = ctx.partial_sums("erk_error", "dopri5", q, v, q1, v1, h, self.atol, self.rtol, self.e[nz],
                                       None, tuple(_k(Kq[j]) for j in nz), tuple(_k(Kv[j]) for j in nz))
            return math.sqrt(ss / max(cnt, 1.0))

    class DaskDOP853(_Fused, DOP853):
        def _fused_error(self, h, Kq, Kv, q, v, q1, v1):
            e5, e3 = DOP853_E5, DOP853_E3
            s5, c5, s3, c3 = ctx.partial_sums("erk_error", "dop853", q, v, q1, v1, h, self.atol, self.rtol, e5, e3,
                                              tuple(_k(x) for x in Kq), tuple(_k(x) for x in Kv))
            n5 = math.sqrt(s5 / max(c5, 1.0))
            n3 = math.sqrt(s3 / max(c3, 1.0))
            if n5 == 0.0 and n3 == 0.0:
                return 0.0
            return abs(h) * n5 * n5 / math.sqrt(n5 * n5 + 0.01 * n3 * n3)

    class DaskMomentumRK4(RK4):
        """RK4 in the momentum form (the RKMK stages of ``RK4.step`` with f returning (w, pdot))."""

        def step(self, t, q, y, h):
            h = float(h)
            w1, a1 = self._rates(t, q, y)
            q2, y2 = ctx.op("mstage", 2, q, y, w1, a1, 0.5 * h)
            w2, a2 = self._rates(t + 0.5 * h, q2, y2)
            (K2,) = ctx.op("mdexp", 1, w1, w2, 0.5 * h)
            q3, y3 = ctx.op("mstage", 2, q, y, K2, a2, 0.5 * h)
            w3, a3 = self._rates(t + 0.5 * h, q3, y3)
            (K3,) = ctx.op("mdexp", 1, K2, w3, 0.5 * h)
            q4, y4 = ctx.op("mstage", 2, q, y, K3, a3, h)
            w4, a4 = self._rates(t + h, q4, y4)
            (K4,) = ctx.op("mdexp", 1, K3, w4, h)
            return tuple(ctx.op("mfinal", 2, q, y, w1, a1, a2, a3, a4, K2, K3, K4, h))

    proto = make_integrator(iname, lambda t, q, v: None, None, **kw)     # name checks and aliases
    if getattr(f, "returns_rate", False) and proto.name in ("rk4", "symplectic-euler"):
        if proto.name != "rk4":
            from ..errors import PartreeInputError

            raise PartreeInputError(f"the momentum form on the Dask backend integrates with 'rk4', 'dopri5' or "
                                    f"'dop853', not {proto.name!r}; use backend 'mpi' or 'serial' for it")
        return DaskMomentumRK4(f, ctx)
    cls = {"rk4": DaskRK4, "symplectic-euler": DaskSymplecticEuler, "dopri5": DaskDOPRI5,
           "dop853": DaskDOP853}[proto.name]
    return cls(f, ctx, **kw) if cls.adaptive else cls(f, ctx)


class DaskLocalDynamics:
    """f(t, q, v) -> qdd on ``DaskVector`` s: two round trips to the parts' actors (velocity
    maps; boundary relation, with the part's joint forces computed there) and the root solve in
    the client; the back-substitution is queued (it runs at the start of the next call), so qdd
    stays on the workers.  Only boundary data crosses the network."""

    def __init__(self, engine, ctx, prescribed=False):
        from ..parallel import root as R

        self.eng, self.ctx, self.R = engine, ctx, R
        self.prescribed = bool(prescribed)

    def __call__(self, t, q, v):
        eng, ctx, R = self.eng, self.ctx, self.R
        t = float(t)
        vel = ctx.call("velocity", (q, v))
        v_in = R.compose_velocities(eng.tree, vel)
        red = ctx.call("reduce", [(t, q, v, v_in[k]) for k in range(ctx.nparts)])
        a_in, g = R.solve(eng.tree, red, eng.a0)
        qdd = ctx.new()
        ctx.queue_each("solve", [(qdd.key, a_in[k], g[k]) for k in range(ctx.nparts)])
        return qdd

    def correction_step(self, q, v, rows):
        """One step of the loops' corrections (``partree.parallel.correction``): two round
        trips as for an evaluation; dx stays on the workers, the violation comes back."""
        eng, ctx, R = self.eng, self.ctx, self.R
        vel = ctx.call("velocity", (q, v))
        v_in = R.compose_velocities(eng.tree, vel)
        got = ctx.call("reduce_rows", [(q, v, v_in[k], rows) for k in range(ctx.nparts)])
        a_in, g = R.solve(eng.tree, [x[0] for x in got], np.zeros(6), rows=rows)
        err = max([float(x[1]) for x in got] + [R.root_violation(eng.tree)])
        dx = ctx.new()
        ctx.queue_each("solve", [(dx.key, a_in[k], g[k]) for k in range(ctx.nparts)])
        return dx, err

    def tau(self, t, q, v):
        """The joint forces at (t, q, v) (a DaskVector; for recording).  With prescribed motion
        they are those of the evaluation queued last, which must be the one at (t, q, v): the
        prescribed joints' forces are computed by it."""
        out = self.ctx.new()
        if self.prescribed:
            self.ctx.queue("forces", out)
        else:
            self.ctx.queue("tau", out, float(t), q, v)
        return out


class DaskLocalMomentum(DaskLocalDynamics):
    """The momentum form on ``DaskVector`` s: ``f(t, q, p) -> (v, pdot)`` (``returns_rate``) in
    three round trips to the parts' actors (velocity maps at rest; the reduction with the
    momenta as joint forces and the parts' totals of gravity and external wrenches; the
    back-substitution and dp/dt queued, with the joint forces at (t, q, v) added there), the
    root solve and the sums up the parts tree in the client."""

    returns_rate = True

    def __call__(self, t, q, p):
        eng, ctx, R = self.eng, self.ctx, self.R
        vel = ctx.call("momentum_velocity", (q,))
        g_in = R.compose_field(eng.tree, vel, -eng.a0)
        got = ctx.call("momentum_reduce", [(q, p, g_in[k]) for k in range(ctx.nparts)])
        a_in, g = R.solve(eng.tree, [x[0] for x in got], np.zeros(6), rows="position")
        Fh = R.subtree_totals(eng.tree, vel, [x[1] for x in got])
        w, pdot = ctx.new(), ctx.new()
        ctx.queue_each("momentum_solve", [((w.key, pdot.key), float(t), _k(q), a_in[k], g[k], Fh[k])
                                          for k in range(ctx.nparts)])
        return w, pdot

    def velocity(self, t, q, p):
        """v = M^-1 p (a DaskVector)."""
        return self(t, q, p)[0]


class DaskBackend(DistributedBackend):
    """The parts and the state's pieces in actors on the workers of ``client`` (see the module
    docstring).

    Parameters
    ----------
    client : distributed.Client or None
        None: a LocalCluster with 2 single-threaded workers (:func:`partree.parallel.dask_backend.start_local_cluster`), closed
        at the end.
    """

    name = "dask"

    def __init__(self, client=None):
        from ..extras import require

        require("distributed", "backend 'dask'")
        self.client = client
        self.eng = self.ctx = None
        self._afuts = None
        self._own = None

    def start(self, model, dyn, opts, q, v, space=None):
        from ..parallel.dask_backend import DaskEngine
        from ..parallel.part import build_part
        from ..parallel.partition import PATH_WEIGHT

        if self.client is None:
            from ..parallel.dask_backend import start_local_cluster

            self._own = start_local_cluster()
            self.client = self._own[0]
        momentum = opts.formulation == "momentum"
        if momentum:
            check_momentum_inputs(dyn)
        eng = self.eng = DaskEngine(model, client=self.client, parts=opts.parts, evaluate=False, poses=momentum,
                                    path_weight=PATH_WEIGHT if opts.path_weight is None else opts.path_weight)
        P = self.nparts = len(eng.futures)
        layouts, afuts = [], []
        for k in range(P):
            L = LocalLayout([build_part(model, eng.partition, k, poses=momentum)])
            L.parts = []                                      # drop the kernel (the worker has it)
            layouts.append(L)
            # the actor wraps the part the engine scattered to its worker (no copy)
            afuts.append(eng.client.submit(SimActor, eng.futures[k], dyn.restrict(L.vsel, L.qsel, L.bodies),
                                           StateSpace(L), workers=[eng.workers[k]], allow_other_workers=False,
                                           actor=True, pure=False))
        self._afuts = afuts
        ctx = self.ctx = DaskContext(eng, [a.result(timeout=eng.timeout) for a in afuts])
        self.qsel = [L.qsel for L in layouts]
        self.vsel = [L.vsel for L in layouts]
        self.vf = DaskLocalDynamics(eng, ctx, prescribed=dyn.prescribed is not None)
        self.f = DaskLocalMomentum(eng, ctx) if momentum else self.vf
        kw = dict(rtol=opts.rtol, atol=opts.atol, h0=opts.h0, max_steps=opts.max_steps)
        if opts.h_max is not None:
            kw["h_max"] = opts.h_max
        integ = dask_integrator(opts.integrator, self.f, ctx, **kw)
        if momentum:
            from ..algorithms.generalized_momentum import generalized_momentum

            v = generalized_momentum(model, q, v)          # the state is (q, p)
        return integ, ctx.put([q[s_] for s_ in self.qsel]), ctx.put([v[s_] for s_ in self.vsel])

    def step_closure(self, closure):
        """The loops' correction on the workers (:class:`~.closure.EngineLoopClosure`): each
        step two round trips, the retractions and the final sum queued on the actors."""
        from .closure import EngineLoopClosure

        ctx = self.ctx
        return EngineLoopClosure(self.f.correction_step, lambda q, dv, s: ctx.op("retract", 1, q, dv, float(s))[0],
                                 closure.correct, closure.tol, add=lambda v, dx: ctx.op("add", 1, v, dx)[0])

    def put_state(self, integ, info, state):
        istate = dict(info["integrator"])
        if info["fsal"]:
            istate["fsal"] = self.ctx.put([state["fsal"][s_] for s_ in self.vsel])
        integ.load_state_dict(istate)
        return (self.ctx.put([state["q"][s_] for s_ in self.qsel]),
                self.ctx.put([state["v"][s_] for s_ in self.vsel]))

    @staticmethod
    def _full(pieces, sel):
        out = np.empty(int(sum(s_.size for s_ in sel)))
        for s_, x in zip(sel, pieces):
            out[s_] = x
        return out

    def gather_q(self, q):
        return self._full(q.fetch(), self.qsel)

    def gather_v(self, v):
        return self._full(v.fetch(), self.vsel)

    def sample(self, t, q, v, need_qdd):
        p = None
        if self.f is not self.vf:      # the momentum form: v carries p; solve for the velocity
            p, v = v, self.f.velocity(t, q, v)
        vecs = [q, v]                  # one round trip (two more for qdd: an evaluation)
        if need_qdd:
            qdd = self.vf(t, q, v)
            vecs += [qdd, self.vf.tau(t, q, v)]      # (the forces of that evaluation)
        if p is not None:
            vecs.append(p)
        got = self.ctx.fetch(vecs)
        qdd, tau = (self._full(got[2], self.vsel), self._full(got[3], self.vsel)) if need_qdd else (None, None)
        out = self._full(got[0], self.qsel), self._full(got[1], self.vsel), qdd, tau
        return out if p is None else out + (self._full(got[-1], self.vsel),)

    def summary(self):
        if self.eng is None:
            return {}
        return {"nparts": self.nparts, "workers": len(set(self.eng.workers))}

    def close(self):
        # the actors (and every vector they hold) go with their futures
        if self.ctx is not None:
            self.ctx.actors = []
        self._afuts = None
        if self.eng is not None:
            self.eng.close()
        if self._own is not None:
            client, cluster = self._own
            self._own = None
            client.close()
            cluster.close()
