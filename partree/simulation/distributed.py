"""Distributed simulation: the state lives in pieces, one per part of the parallel engine.

``simulate(..., backend='mpi', comm=None, parts=P)`` (run on every rank, e.g. under
``mpiexec -n R python script.py``) and ``simulate(..., backend='dask', client=None, parts=P)``
land here (``simulate_mpi`` / ``simulate_dask``).

MPI.  Every rank builds the model and the same partition (``partree.parallel.mpi.MPIEngine``,
rank 0 is the root), keeps only its own parts and the configuration / velocity entries of their
joints (``LocalLayout``: the rank's parts concatenated, each in its local numbering).  The
integrators of ``partree.simulation.integrators`` run unchanged on these local vectors: every
stage combination, ``retract`` and ``dexpinv`` act joint by joint, so they are purely local;
the adaptive error norm is a global sum through the ``StateSpace`` allreduce hook.  One
evaluation of the dynamics (``MPILocalDynamics``) is exactly the engine's two rounds
(Gatherv velocity maps / Scatterv v_in, Gatherv boundary relations / Scatterv a_in and g): O(P)
boundary data, never the state.  The state is gathered to rank 0 only at save points (rank 0
keeps the model: it computes the energy, the optional joint wrenches, and writes the file).

Dask.  The parts are scattered to the workers (``partree.parallel.dask_backend.DaskEngine``)
and each part gets a Dask actor on its worker (``_SimActor``: the part object already there,
its joint forces, its ``StateSpace``) that keeps the part's slices of every vector of the run
(state, stage states, slopes) in its memory across steps, under keys; the client holds only the
keys (``DaskVector``).  The client calls the actors directly (no scheduler in between): one
evaluation of the dynamics (``DaskLocalDynamics``) is two round trips (velocity maps; boundary
relations, the part's joint forces computed there) with the root steps in the client.  The
integrators' per-part arithmetic (stage states, final combinations, the back-substitution that
gives qdd) is queued on the client and runs in the actors at the start of the next call
(``_DaskContext``), so it costs no round trip of its own; the adaptive error norm is one more
call returning per-part partial sums, added in part order.  The client only ever receives
boundary data, the partial sums, and the state at save points and checkpoints.  Lost workers are
not recovered (the state on them is gone): the run ends with ``DaskEngineError``.

Inputs supported in distributed runs: constant torques, per-joint torque callables of t,
torque tables, damping, stiffness, constant external forces.  Torque / force callables of the
full state (q, qd) and prescribed motion need the whole state and raise ``PartreeInputError``;
so do custom dynamics functions and the 'scipy' integrator.

Checkpoints.  The serial driver's format and semantics (``checkpoint.Checkpointer``: atomic
writes, the state in global order, the integrator's state (step size, FSAL derivative),
the recorded rows in segments, model and options fingerprints), written and read by the root
only (rank 0 / the Dask client).  At a checkpoint the state (and the FSAL derivative) is
gathered to the root, which writes; on resume the root loads and validates, every rank learns
the outcome (MPI: a bcast, so a refused checkpoint raises the same ``CheckpointError`` on every
rank, never a hang) and gets its slice back (MPI: Scatterv; Dask: sent to the parts'
workers).  Wall-clock triggers ('30s') are decided on rank 0 and broadcast.  The options that
must match are the serial driver's, so a checkpoint of one backend resumes on another (with
the same backend and part count the resumed trajectory is bit-identical to an uninterrupted
one: the checkpoint holds the exact bits of everything the loop carries from tick to tick).
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from ..model import Model
from ..errors import PartreeInputError
from .checkpoint import CheckpointError, Checkpointer, model_fingerprint
from .dynamics import Dynamics, _Table, _is_table
from .integrators import StateSpace, make_integrator

# ==================================================================== local state layout


class LocalLayout:
    """The joints of a list of parts, concatenated (part after part, each in its own local
    numbering): the model-like object a ``StateSpace`` needs (jtype, idx_q, idx_v, nv_j, nq, nv)
    plus where every piece sits in the global vectors (qsel, vsel, bodies)."""

    def __init__(self, parts):
        self.parts = list(parts)
        jt, nqj, nvj, qsel, vsel, bod = [], [], [], [], [], []
        self.qsl, self.vsl, self.bsl = [], [], []
        oq = ov = ob = 0
        for pk in self.parts:
            jt.append(np.asarray(pk.jtype))
            nqj.append(np.diff(np.append(pk.idx_q, pk.nq)))
            nvj.append(np.diff(np.append(pk.idx_v, pk.nv)))
            qsel.append(pk.qsel)
            vsel.append(pk.vsel)
            bod.append(pk.bodies)
            self.qsl.append(slice(oq, oq + pk.nq))
            self.vsl.append(slice(ov, ov + pk.nv))
            self.bsl.append(slice(ob, ob + pk.m))
            oq += pk.nq
            ov += pk.nv
            ob += pk.m
        cat = (lambda xs, dt=np.int64: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt))  # noqa: E731
        self.jtype = cat(jt, np.asarray(self.parts[0].jtype).dtype if self.parts else np.int64)
        self.nq_j, self.nv_j = cat(nqj), cat(nvj)
        self.idx_q = np.concatenate(([0], np.cumsum(self.nq_j)[:-1])).astype(np.int64) if self.nq_j.size \
            else np.zeros(0, dtype=np.int64)
        self.idx_v = np.concatenate(([0], np.cumsum(self.nv_j)[:-1])).astype(np.int64) if self.nv_j.size \
            else np.zeros(0, dtype=np.int64)
        self.nq, self.nv, self.n = oq, ov, ob
        self.qsel, self.vsel, self.bodies = cat(qsel), cat(vsel), cat(bod)


# ==================================================================== local inputs


class LocalInputs:
    """The joint forces and external forces of a ``Dynamics`` restricted to some joints and
    bodies (global indices ``vsel`` (v layout), ``qsel`` (q layout), ``bodies``).  Computes
    exactly what ``Dynamics.tau`` computes on those entries, element by element."""

    def __init__(self, dyn, model, vsel, qsel, bodies):
        if dyn.prescribed is not None:
            raise PartreeInputError("prescribed motion is not supported by the distributed backends "
                                    "(it needs the whole state); use backend 'serial'")
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
            if _is_table(spec):
                tab = _Table(*spec)
                self.table = _Table(tab.t, tab.values[:, vsel])
            else:
                raise PartreeInputError("a torque callable tau(t, q, qd) is not supported by the distributed "
                                        "backends (it needs the whole state); use per-joint callables of t "
                                        "({joint: f(t)}), a table, or constant torques")
        self.joint = []
        for sl, fn in dyn._tau_joint:
            g = np.arange(nv)[sl]
            loc = vloc[g]
            if np.all(loc >= 0):
                self.joint.append((loc, fn))
            elif np.any(loc >= 0):           # a joint's dofs always belong to one part
                raise PartreeInputError("internal error: a joint's dofs are split over parts")
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
        self.f_ext = None
        if dyn._fext is not None:
            from .. import checks

            F, has = checks.external_forces(model, dyn._fext)
            if has:
                self.f_ext = np.ascontiguousarray(F[np.asarray(bodies, dtype=np.int64)])

    def tau(self, t, q, qd):
        tau = self.const.copy() if self.table is None else self.table(t) + self.const
        for loc, fn in self.joint:
            tau[loc] += np.asarray(fn(t), dtype=float)
        if self.damping is not None:
            tau -= self.damping * qd
        if self.k_vidx is not None and self.k_vidx.size:
            tau[self.k_vidx] -= self.stiffness[self.k_vidx] * (q[self.k_qidx] - self.q_ref)
        return tau


# ==================================================================== shared driver pieces


def _resolve_model(model):
    if isinstance(model, Model):
        return model
    if callable(model):
        return model()
    from ..specs import resolve_model

    return resolve_model(model)


def _check_common(t_end, dt, save_every, record, integrator, dynamics=None, space=None):
    from .simulate import RECORD

    record = str(record).lower()
    if record not in RECORD:
        raise PartreeInputError(f"record must be one of {RECORD}, got {record!r}")
    t_end, dt = float(t_end), float(dt)
    if not (t_end > 0 and dt > 0 and math.isfinite(t_end) and math.isfinite(dt)):
        raise PartreeInputError(f"need t_end > 0 and dt > 0, got t_end = {t_end}, dt = {dt}")
    save_every = int(save_every)
    if save_every < 1:
        raise PartreeInputError("save_every must be >= 1")
    iname = str(integrator).lower()
    if iname.startswith("scipy"):
        raise PartreeInputError("integrator 'scipy' needs the whole state in one process; the distributed "
                                "backends run 'rk4', 'dopri5', 'dop853' or 'symplectic-euler'")
    if dynamics is not None or space is not None:
        raise PartreeInputError("a custom dynamics function / StateSpace cannot be used with the distributed "
                                "backends (they build their own local ones)")
    return t_end, dt, save_every, record, iname


def _integrator_kw(rtol, atol, h0, h_max, max_steps):
    kw = dict(rtol=rtol, atol=atol, h0=h0, max_steps=max_steps)
    if h_max is not None:
        kw["h_max"] = h_max
    return kw


class _Recorder:
    """The rows of the result, on the root only (same quantities as the serial driver)."""

    def __init__(self, model, dyn, record, wids):
        from ..algorithms.energy import energy

        self.model, self.dyn, self.record, self.wids = model, dyn, record, wids
        self._energy = energy
        self.rows = {k: [] for k in ("t", "q", "qd", "kinetic", "potential")}
        if record == "all":
            self.rows.update(qdd=[], tau=[])
        if wids is not None:
            self.rows["joint_wrench"] = []

    @property
    def needs_qdd(self):
        return self.record == "all" or self.wids is not None

    def add(self, t, q, v, qdd=None, tau=None):
        T, V = self._energy(self.model, q, v)
        r = self.rows
        r["t"].append(t)
        r["q"].append(q.copy())
        r["qd"].append(v.copy())
        r["kinetic"].append(T)
        r["potential"].append(V)
        if self.record == "all":
            r["qdd"].append(qdd.copy())
            r["tau"].append(tau.copy())
        if self.wids is not None:
            r["joint_wrench"].append(self.dyn.joint_wrenches(t, q, v, qdd)[self.wids])

    def stacked(self, start=0):
        return {k: np.array(lst[start:], dtype=float) for k, lst in self.rows.items()}

    def load(self, rows):
        """Rows recorded before a checkpoint (from its segments)."""
        for k in self.rows:
            if k in rows:
                self.rows[k] = list(rows[k])


def _wrench_ids(model, record, wrench_joints):
    if wrench_joints is None and record == "all":
        return np.arange(model.n)
    if wrench_joints:
        return np.array([model.joint_id(j) for j in wrench_joints], dtype=np.int64)
    return None


def _initial_state(model, q0, qd0):
    q = model.neutral() if q0 is None else model.normalize(np.asarray(q0, dtype=float))
    v = np.zeros(model.nv) if qd0 is None else np.array(qd0, dtype=float)
    if q.shape != (model.nq,) or v.shape != (model.nv,):
        raise PartreeInputError(f"q0 / qd0 have shapes {q.shape} / {v.shape}; the model needs ({model.nq},) / "
                                f"({model.nv},)")
    return q, v


# ==================================================================== checkpoints


def _checkpoint_config(checkpoint, checkpoint_every, checkpoint_seconds, resume, out):
    """(path, every_steps, every_secs) as the serial driver reads them, or None (no checkpoints)."""
    from .simulate import _parse_every

    ck_steps, ck_secs = _parse_every(checkpoint_every)
    if checkpoint_seconds is not None:
        ck_secs = float(checkpoint_seconds)
    if checkpoint is None and not ck_steps and not ck_secs and not resume:
        return None
    path = checkpoint if checkpoint is not None else (os.fspath(out) + ".ckpt" if out is not None else None)
    if path is None:
        raise PartreeInputError("checkpointing needs a checkpoint path (checkpoint=...) or an output file (out=...)")
    return os.fspath(path), ck_steps, ck_secs


class _Checkpoints:
    """Checkpoints of a distributed run, in the serial driver's format.  Only the root (rank 0 /
    the Dask client) touches the files.  The driver sets ``gather_q`` / ``gather_v`` (local
    vectors -> full ones on the root; collective under MPI), ``integ`` and ``rec``; ``agree(x)``
    returns the root's x on every rank (MPI: a bcast; Dask: the identity)."""

    def __init__(self, config, root, agree, t_wall0, backend):
        self.path, self.every_steps, self.every_secs = config
        self.periodic = bool(self.every_steps or self.every_secs)
        self.root = root
        self.ckpt = Checkpointer(self.path) if root else None
        self.agree = agree
        self.t_wall0 = t_wall0
        self.backend = backend
        self.wall_before = 0.0
        self.n_flushed = 0
        self.last_steps = 0
        self.last_wall = time.perf_counter()
        self.model_fp = self.options_fp = self.fp_opts = None
        self.gather_q = self.gather_v = self.integ = self.rec = None

    def fingerprints(self, model, options):
        """Root only: the fingerprints a checkpoint must match."""
        from .simulate import options_fingerprint

        self.fp_opts, self.options_fp = options_fingerprint(options)
        self.model_fp = model_fingerprint(model)

    def load_root(self, resume):
        """Root only: (meta, state, rows) to resume from, or None for a fresh run (which removes
        an old checkpoint).  Raises ``CheckpointError`` for a corrupt or mismatched one."""
        ck = self.ckpt
        if resume and (resume != "auto" or ck.exists()):
            meta, st, rows = ck.load(self.model_fp, self.options_fp, self.fp_opts)
            n = len(rows.get("t", ()))
            if n != int(meta.get("rows", n)):
                raise CheckpointError(f"checkpoint {ck.path!r}: segments hold {n} rows, expected {meta['rows']}")
            if "q" not in st or "v" not in st or "tick" not in meta:
                raise CheckpointError(f"checkpoint {ck.path!r} holds no state")
            return meta, st, rows
        if not resume and ck.exists():
            ck.remove()                  # a fresh run replaces an old checkpoint
        return None

    @staticmethod
    def summary(loaded):
        """What every rank needs to know of a loaded checkpoint (small, picklable)."""
        if loaded is None:
            return None
        meta, st, _ = loaded
        return {"tick": int(meta["tick"]), "t": float(meta["t"]), "integrator": dict(meta.get("integrator", {})),
                "wall_time": float(meta.get("wall_time", 0.0)), "fsal": "fsal" in st}

    def resumed(self, info, rows):
        """Bookkeeping after a resume (rows: on the root)."""
        self.wall_before = info["wall_time"]
        if self.root:
            self.rec.load(rows)
            self.n_flushed = len(self.rec.rows["t"])
        steps = int(info["integrator"].get("accepted", 0)) if getattr(self.integ, "adaptive", False) \
            else info["tick"]
        self.last_steps = steps
        self.last_wall = time.perf_counter()

    def due(self, steps):
        """Same rule as the serial driver; the same answer on every rank."""
        if self.every_steps and steps - self.last_steps >= self.every_steps:
            return True
        if self.every_secs:
            late = (time.perf_counter() - self.last_wall >= self.every_secs) if self.root else None
            return bool(self.agree(late))
        return False

    def write(self, k, t, steps, q, v):
        """Collective: gather the state (and the FSAL derivative) to the root, which writes."""
        now = time.perf_counter()
        idict = self.integ.state_dict()
        fsal = idict.pop("fsal", None)
        qg, vg = self.gather_q(q), self.gather_v(v)
        fg = None if fsal is None else self.gather_v(fsal)
        if self.root:
            st = {"q": qg, "v": vg}
            if fg is not None:
                st["fsal"] = fg
            rows = self.rec.rows
            meta = {"tick": k, "t": t, "rows": len(rows["t"]), "model_fingerprint": self.model_fp,
                    "options_fingerprint": self.options_fp, "options": self.fp_opts, "integrator": idict,
                    "wall_time": self.wall_before + now - self.t_wall0, "rng": None, "backend": self.backend}
            nrows = len(rows["t"])
            self.ckpt.save(st, meta, self.rec.stacked(self.n_flushed) if nrows > self.n_flushed else None)
            self.n_flushed = nrows
        self.last_steps = steps
        self.last_wall = now

    def finish(self, keep):
        if self.root and not keep:
            self.ckpt.remove()


def _raise_everywhere(comm, err, root):
    """MPI: every rank learns whether the root failed (one bcast) and raises the same error."""
    what = comm.bcast(None if err is None else (type(err).__name__, str(err)), root=0)
    if what is None:
        return
    if root:
        raise err
    name, text = what
    cls = {"CheckpointError": CheckpointError, "PartreeInputError": PartreeInputError}.get(name)
    raise (cls(text) if cls is not None else RuntimeError(f"rank 0: {name}: {text}"))


def _time_loop(integ, adaptive, tick, n_ticks, t_end, save_mod, q, v, on_save, bar, step_hook=None, k0=0, ck=None):
    """The serial driver's tick loop (same tick times, same save points, same checkpoint points)."""
    def t_of(k):
        return min(k * tick, t_end)

    last_bar = time.perf_counter()
    loop_t0 = time.perf_counter()
    steps_start = int(getattr(integ, "accepted", 0)) if adaptive else k0
    periodic = ck is not None and ck.periodic
    for k in range(k0 + 1, n_ticks + 1):
        t0, t1 = t_of(k - 1), t_of(k)
        if adaptive:
            q, v = integ.advance(t0, q, v, t1)
        else:
            q, v = integ.step(t0, q, v, t1 - t0)
        if k % save_mod == 0 or k == n_ticks:
            on_save(t1, q, v)
        if step_hook is not None:
            step_hook(k, t1, q, v)
        if periodic and k < n_ticks:
            steps = int(integ.accepted) if adaptive else k
            if ck.due(steps):
                ck.write(k, t1, steps, q, v)
        if bar is not None:
            now = time.perf_counter()
            if now - last_bar > 0.25 or k == n_ticks:
                ns = (int(getattr(integ, "accepted", 0)) if adaptive else k) - steps_start
                bar.set_postfix_str(f"{ns / max(now - loop_t0, 1e-9):.3g} steps/s", refresh=False)
                bar.update(t1 - bar.n)
                last_bar = now
    return q, v


def _make_bar(progress, t_end, name, iname, initial=0.0):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=t_end, initial=initial, unit="s", unit_scale=False, dynamic_ncols=True,
                desc=f"simulate {name} [{iname}]",
                bar_format="{desc}: {percentage:3.0f}%|{bar}| t={n:.4g}/{total:.4g} s [{elapsed}<{remaining}{postfix}]")


def _finish(model, dyn, rec, integ, adaptive, n_ticks, iname, options, t_end, wall, backend, wnames, out, verbose,
            extra):
    """Result object, summary, file, as the serial driver does."""
    from .results import SimulationResult, format_summary

    series = rec.stacked()
    series["energy"] = series["kinetic"] + series["potential"]
    E = series["energy"]
    E0 = E[0]
    scale = max(abs(E0), float(np.max(np.abs(series["kinetic"]) + np.abs(series["potential"]))), 1e-300)
    nsteps = int(integ.accepted) if adaptive else n_ticks
    summary = {"integrator": iname, "steps": nsteps, "rejected": int(getattr(integ, "rejected", 0)),
               "f_evals": int(getattr(integ, "nfev", 0)), "t_end": t_end, "wall_time": wall,
               "steps_per_second": nsteps / wall if wall > 0 else 0.0, "samples": int(E.size),
               "resumed_from": None, "backend": backend,
               "energy": {"initial": float(E0), "final": float(E[-1]), "max_abs_drift": float(np.abs(E - E0).max()),
                          "max_rel_drift": float(np.abs(E - E0).max() / scale), "scale": float(scale)}}
    summary.update(extra)
    if rec.wids is not None and len(rec.wids):
        W = series["joint_wrench"]
        fn = np.linalg.norm(W[:, :, 3:], axis=2)
        nn = np.linalg.norm(W[:, :, :3], axis=2)
        kf = np.unravel_index(int(np.argmax(fn)), fn.shape)
        kn = np.unravel_index(int(np.argmax(nn)), nn.shape)
        summary["wrench"] = {"max_force": float(fn[kf]), "max_force_joint": wnames[kf[1]],
                             "max_force_time": float(series["t"][kf[0]]), "max_torque": float(nn[kn]),
                             "max_torque_joint": wnames[kn[1]], "max_torque_time": float(series["t"][kn[0]])}
    if out is not None:
        summary["out"] = os.fspath(out)
    res = SimulationResult(series, options, summary, model, wnames, None, model_fingerprint(model))
    if out is not None:
        res.save(out)
    if verbose:
        print(format_summary(summary))
    return res


def _options(model, t_end, dt, iname, rtol, atol, save_every, record, wnames, backend, parts, h0, h_max, q, v, dyn):
    from .simulate import _hash_array

    return {"model": model.name, "t_end": t_end, "dt": dt, "integrator": iname, "rtol": rtol, "atol": atol,
            "save_every": save_every, "record": record, "wrench_joints": wnames, "backend": backend,
            "parts": parts if parts is None or isinstance(parts, int) else int(parts.nparts), "h0": h0,
            "h_max": h_max, "q0": _hash_array(q), "qd0": _hash_array(v), "inputs": dyn.fingerprint()[:16]}


# ==================================================================== MPI


def ordered_allreduce(comm):
    """Sum over the ranks, in rank order, with the same bits on every rank (an allgather of a few
    floats): every rank then takes the same step-size decisions."""
    def allreduce(x):
        pieces = comm.allgather(np.asarray(x, dtype=np.float64))
        s = pieces[0].copy()
        for p in pieces[1:]:
            s = s + p
        return s
    return allreduce


class MPILocalDynamics:
    """``f(t, q_loc, v_loc) -> qdd_loc`` on this rank's parts; collective over the engine's comm.

    One call = the engine's two communication rounds, nothing else (no full vector anywhere)."""

    def __init__(self, engine, layout, inputs):
        self.eng, self.layout, self.inputs = engine, layout, inputs
        self.last_tau = None
        self.nevals = 0

    def __call__(self, t, q, v):
        tau = self.inputs.tau(t, q, v)
        self.last_tau = tau
        return self.evaluate(q, v, tau, self.inputs.f_ext)

    def evaluate(self, q, v, tau, f_ext=None):
        L = self.layout
        self.nevals += 1
        P = len(self.eng.parts)
        out = self.eng.evaluate_local([q[L.qsl[j]] for j in range(P)], [v[L.vsl[j]] for j in range(P)],
                                      [tau[L.vsl[j]] for j in range(P)],
                                      None if f_ext is None else [f_ext[L.bsl[j]] for j in range(P)])
        qdd = np.empty(L.nv)
        for j in range(P):
            qdd[L.vsl[j]] = out[j]
        self.last_bytes = self.eng.last_boundary_bytes
        return qdd


class _MPIGather:
    """Gathers local vectors to rank 0 (save points and checkpoints only) and places them in
    global order; scatters full vectors from rank 0 (resume)."""

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
        b = self._gatherv(x, self.qcounts if self.rank == 0 else None)
        if b is None:
            return None
        out = np.empty(self.nq)
        out[self.qidx] = b
        return out

    def v(self, x):
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
        """Rank 0's full q -> this rank's slice (collective)."""
        if self.rank == 0:
            return self._scatterv(full, self.qidx, self.qcounts, self.lnq)
        return self._scatterv(None, None, None, self.lnq)

    def scatter_v(self, full):
        if self.rank == 0:
            return self._scatterv(full, self.vidx, self.vcounts, self.lnv)
        return self._scatterv(None, None, None, self.lnv)


def simulate_mpi(model, t_end, dt, integrator="rk4", rtol=1e-8, atol=1e-10, q0=None, qd0=None, torques=None,
                 damping=None, stiffness=None, q_ref=None, f_ext=None, prescribed=None, save_every=1,
                 record="joints", wrench_joints=None, out=None, progress=True, parts=None, comm=None, h0=None,
                 h_max=None, max_steps=10**9, verbose=None, path_weight=None, checkpoint=None,
                 checkpoint_every=None, checkpoint_seconds=None, resume=False, keep_checkpoint=False,
                 _step_hook=None, _probe=None):
    """``simulate`` over MPI: collective, call it on every rank of ``comm`` (default COMM_WORLD)
    with the same arguments.  ``parts``: number of parts (default: the number of ranks) or a
    Partition.  Returns the ``SimulationResult`` on rank 0 and None on the other ranks (rank 0
    writes ``out`` and the checkpoints; ``checkpoint``, ``checkpoint_every``, ``checkpoint_seconds``,
    ``resume``, ``keep_checkpoint`` as in ``simulate``; a refused checkpoint raises the same
    ``CheckpointError`` on every rank).  ``_step_hook(k, t, q_loc, v_loc)`` sees each rank's
    local state."""
    from ..parallel.mpi import AbortOnError, MPIEngine
    from ..parallel.partition import PATH_WEIGHT

    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    root = rank == 0
    t_wall0 = time.perf_counter()
    with AbortOnError(comm):
        t_end, dt, save_every, record, iname = _check_common(t_end, dt, save_every, record, integrator)
        ckcfg = _checkpoint_config(checkpoint, checkpoint_every, checkpoint_seconds, resume, out)
        if verbose is None:
            verbose = bool(progress)
        model = _resolve_model(model)
        dyn = Dynamics(model, torques=torques, damping=damping, stiffness=stiffness, q_ref=q_ref, f_ext=f_ext,
                       prescribed=prescribed, backend="serial")
        q_full, v_full = _initial_state(model, q0, qd0)
        wids = _wrench_ids(model, record, wrench_joints)
        wnames = [model.joint_names[int(i)] for i in wids] if wids is not None else []
        options = _options(model, t_end, dt, iname, rtol, atol, save_every, record, wnames, "mpi", parts, h0, h_max,
                           q_full, v_full, dyn) if root else None
    # checkpoint to resume from: rank 0 loads and validates, every rank learns the outcome
    ck = loaded = info = None
    if ckcfg is not None:
        ck = _Checkpoints(ckcfg, root, lambda x: comm.bcast(x, root=0), t_wall0, "mpi")
        err = None
        if root:
            try:
                ck.fingerprints(model, options)
                loaded = ck.load_root(resume)
            except Exception as e:      # noqa: BLE001 -- re-raised on every rank
                err = e
        _raise_everywhere(comm, err, root)
        info = comm.bcast(_Checkpoints.summary(loaded) if root else None, root=0)
    eng = MPIEngine(model, comm=comm, parts=parts, path_weight=PATH_WEIGHT if path_weight is None else path_weight,
                    gather=False)
    with AbortOnError(comm):
        L = LocalLayout(eng.parts)
        inputs = LocalInputs(dyn, model, L.vsel, L.qsel, L.bodies)
        q = q_full[L.qsel].copy()
        v = v_full[L.vsel].copy()
        f = MPILocalDynamics(eng, L, inputs)
        space = StateSpace(L, allreduce=ordered_allreduce(comm))
        integ = make_integrator(iname, f, space, **_integrator_kw(rtol, atol, h0, h_max, max_steps))
        adaptive = bool(integ.adaptive)
        tick = dt * save_every if adaptive else dt
        n_ticks = max(1, int(math.ceil(t_end / tick - 1e-9)))
        save_mod = 1 if adaptive else save_every
        gather = _MPIGather(comm, L)
        rec = _Recorder(model, dyn, record, wids) if root else None
        k0 = 0
        if ck is not None:
            ck.gather_q, ck.gather_v, ck.integ, ck.rec = gather.q, gather.v, integ, rec
            if info is not None:                 # resume: every rank gets its slice
                st = loaded[1] if root else {}
                q = gather.scatter_q(st.get("q"))
                v = gather.scatter_v(st.get("v"))
                istate = dict(info["integrator"])
                if info["fsal"]:
                    istate["fsal"] = gather.scatter_v(st.get("fsal"))
                integ.load_state_dict(istate)
                ck.resumed(info, loaded[2] if root else None)
                k0 = info["tick"]
            loaded = None
        if not root:
            model = dyn = q_full = v_full = None          # only rank 0 keeps the whole model
        else:
            del q_full, v_full

        def on_save(t, q, v):
            qg, vg = gather.q(q), gather.v(v)
            qdd = tau = None
            if record == "all" or wids is not None:
                qdd_l = f(t, q, v)            # collective: every rank evaluates at the save point
                qdd = gather.v(qdd_l)
                tau = gather.v(f.last_tau)
            if root:
                rec.add(t, qg, vg, qdd, tau)

        if k0 == 0:
            on_save(0.0, q, v)
        if _probe is not None:
            _probe(integ)              # benchmarks: the integrator (and its dynamics function integ.f)
        bar = _make_bar(progress and root, t_end, options["model"] if root else "", iname,
                        min(k0 * tick, t_end))
        try:
            q, v = _time_loop(integ, adaptive, tick, n_ticks, t_end, save_mod, q, v, on_save, bar, _step_hook,
                              k0, ck)
        finally:
            if bar is not None:
                bar.close()
        wall = (ck.wall_before if ck is not None else 0.0) + time.perf_counter() - t_wall0
        if not root:
            return None
        extra = {"ranks": comm.Get_size(), "nparts": int(eng.nparts),
                 "resumed_from": None if info is None else info["t"]}
        res = _finish(model, dyn, rec, integ, adaptive, n_ticks, iname, options, t_end, wall, "mpi", wnames, out,
                      verbose, extra)
        if ck is not None:
            ck.finish(keep_checkpoint)
        return res


# ==================================================================== Dask
# the per-part arithmetic (the serial integrators' operations on one part's slices)

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


def _init_norms(sp, atol, rtol, q, v, a0):
    """Partial sums of the two norms of the starting-step heuristic: [ss0, cnt0, ss1, cnt1]."""
    sq, sv = _scales_np(sp, atol, rtol, q, v, q, v)
    s0, c0 = _sumsq_np(sp.q_magnitude(q), sq, v, sv)
    s1, c1 = _sumsq_np(v, sq, a0, sv)
    return np.array([s0, float(c0), s1, float(c1)])


class _SimActor:
    """One part of a Dask simulation, as a Dask actor on the part's worker: the part (the object
    the engine scattered there, not a copy), its joint forces (``LocalInputs``), its
    ``StateSpace`` and its named local vectors (key -> array: state, stage states, slopes) that
    persist across steps.  Every call first runs the operations the client queued since the
    previous call (stage arithmetic, back-substitutions, puts, drops: see ``_DaskContext``), in
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
        tau = self.inputs.tau(t, self.x[q], self.x[v])
        return tuple(a.copy() for a in self.pk.reduce(v_in, tau, self.inputs.f_ext))

    def erk_error(self, ops, kind, q, v, q1, v1, h, atol, rtol, coefs, coefs2, Kq, Kv):
        self._run(ops)
        x = self.x
        return _erk_error(self.sp, kind, x[q], x[v], x[q1], x[v1], h, atol, rtol, coefs, coefs2,
                          [x[k] for k in Kq], [x[k] for k in Kv])

    def init_norms(self, ops, atol, rtol, q, v, a0):
        self._run(ops)
        return _init_norms(self.sp, atol, rtol, self.x[q], self.x[v], self.x[a0])

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


class _DaskContext:
    """The parts' actors (``_SimActor``, one per part, on the part's worker) and the queue of
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
        from ..parallel.dask_backend import DaskEngineError, WorkerLost

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


def _dask_integrator(iname, f, ctx, **kw):
    """The integrators of ``integrators.py`` with their per-part stage arithmetic queued on the
    parts' actors (it runs at the start of the next call there: no round trip of its own)."""
    from . import integrators as I

    class DaskRK4(I.RK4):
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

    class DaskSymplecticEuler(I.SymplecticEuler):
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
            Kq[0], Kv[0] = v, a0
            for i in range(1, s):
                ai = self.A[i, :i]
                nz = np.flatnonzero(ai)
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
            s0, c0, s1, c1 = ctx.partial_sums("init_norms", self.atol, self.rtol, q, v, a0)
            d0 = math.sqrt(s0 / max(c0, 1.0))
            d1 = math.sqrt(s1 / max(c1, 1.0))
            h = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
            return min(h, abs(t_span), self.h_max)

    class DaskDOPRI5(_Fused, I.DormandPrince5):
        def _fused_error(self, h, Kq, Kv, q, v, q1, v1):
            nz = np.flatnonzero(self.e)
            ss, cnt = ctx.partial_sums("erk_error", "dopri5", q, v, q1, v1, h, self.atol, self.rtol, self.e[nz],
                                       None, tuple(_k(Kq[j]) for j in nz), tuple(_k(Kv[j]) for j in nz))
            return math.sqrt(ss / max(cnt, 1.0))

    class DaskDOP853(_Fused, I.DOP853):
        def _fused_error(self, h, Kq, Kv, q, v, q1, v1):
            e5, e3 = I.T.DOP853_E5, I.T.DOP853_E3
            s5, c5, s3, c3 = ctx.partial_sums("erk_error", "dop853", q, v, q1, v1, h, self.atol, self.rtol, e5, e3,
                                              tuple(_k(x) for x in Kq), tuple(_k(x) for x in Kv))
            n5 = math.sqrt(s5 / max(c5, 1.0))
            n3 = math.sqrt(s3 / max(c3, 1.0))
            if n5 == 0.0 and n3 == 0.0:
                return 0.0
            return abs(h) * n5 * n5 / math.sqrt(n5 * n5 + 0.01 * n3 * n3)

    proto = make_integrator(iname, lambda t, q, v: None, None, **kw)     # name checks and aliases
    cls = {"rk4": DaskRK4, "symplectic-euler": DaskSymplecticEuler, "dopri5": DaskDOPRI5,
           "dop853": DaskDOP853}[proto.name]
    return cls(f, ctx, **kw) if cls.adaptive else cls(f, ctx)


class DaskLocalDynamics:
    """f(t, q, v) -> qdd on ``DaskVector`` s: two round trips to the parts' actors (velocity
    maps; boundary relation, with the part's joint forces computed there) and the root solve in
    the client; the back-substitution is queued (it runs at the start of the next call), so qdd
    stays on the workers.  Only boundary data crosses the network."""

    def __init__(self, engine, ctx):
        from ..parallel import root as R

        self.eng, self.ctx, self.R = engine, ctx, R

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

    def tau(self, t, q, v):
        """The joint forces at (t, q, v) (a DaskVector; for recording)."""
        out = self.ctx.new()
        self.ctx.queue("tau", out, float(t), q, v)
        return out


def simulate_dask(model, t_end, dt, integrator="rk4", rtol=1e-8, atol=1e-10, q0=None, qd0=None, torques=None,
                  damping=None, stiffness=None, q_ref=None, f_ext=None, prescribed=None, save_every=1,
                  record="joints", wrench_joints=None, out=None, progress=True, parts=None, client=None, h0=None,
                  h_max=None, max_steps=10**9, verbose=None, path_weight=None, checkpoint=None,
                  checkpoint_every=None, checkpoint_seconds=None, resume=False, keep_checkpoint=False,
                  _step_hook=None, _probe=None):
    """``simulate`` over Dask: the parts and their slices of the state live in per-part actors on
    the workers for the whole run; the client runs the root solve, the step-size control and the
    recording (state fetched at save points and checkpoints only; the client writes the
    checkpoints, and a resume sends the loaded state to the parts' actors).  ``client``: a
    ``distributed.Client`` (None: a LocalCluster with 2 single-threaded workers, closed at the
    end).  ``_step_hook(k, t, q, v)`` gets ``DaskVector`` s."""
    from ..parallel.dask_backend import DaskEngine
    from ..parallel.part import build_part
    from ..parallel.partition import PATH_WEIGHT

    t_wall0 = time.perf_counter()
    t_end, dt, save_every, record, iname = _check_common(t_end, dt, save_every, record, integrator)
    ckcfg = _checkpoint_config(checkpoint, checkpoint_every, checkpoint_seconds, resume, out)
    if verbose is None:
        verbose = bool(progress)
    model = _resolve_model(model)
    dyn = Dynamics(model, torques=torques, damping=damping, stiffness=stiffness, q_ref=q_ref, f_ext=f_ext,
                   prescribed=prescribed, backend="serial")
    q_full, v_full = _initial_state(model, q0, qd0)
    wids = _wrench_ids(model, record, wrench_joints)
    wnames = [model.joint_names[int(i)] for i in wids] if wids is not None else []
    kw = _integrator_kw(rtol, atol, h0, h_max, max_steps)
    _dask_integrator(iname, None, None, **kw)           # bad integrator names fail before the cluster starts
    options = _options(model, t_end, dt, iname, rtol, atol, save_every, record, wnames, "dask", parts, h0, h_max,
                       q_full, v_full, dyn)
    # checkpoint to resume from: loaded and validated before the cluster starts
    ck = loaded = info = None
    if ckcfg is not None:
        ck = _Checkpoints(ckcfg, True, lambda x: x, t_wall0, "dask")
        ck.fingerprints(model, options)
        loaded = ck.load_root(resume)
        info = _Checkpoints.summary(loaded)
        if loaded is not None:
            q_full, v_full = loaded[1]["q"], loaded[1]["v"]
    eng = DaskEngine(model, client=client, parts=parts, evaluate=False,
                     path_weight=PATH_WEIGHT if path_weight is None else path_weight)
    ctx = None
    try:
        P = len(eng.futures)
        layouts, afuts = [], []
        for k in range(P):
            L = LocalLayout([build_part(model, eng.partition, k)])
            L.parts = []                                      # drop the kernel (the worker has it)
            layouts.append(L)
            # the actor wraps the part the engine scattered to its worker (no copy)
            afuts.append(eng.client.submit(_SimActor, eng.futures[k], LocalInputs(dyn, model, L.vsel, L.qsel, L.bodies),
                                           StateSpace(L), workers=[eng.workers[k]], allow_other_workers=False,
                                           actor=True, pure=False))
        ctx = _DaskContext(eng, [a.result(timeout=eng.timeout) for a in afuts])
        qsel = [L.qsel for L in layouts]
        vsel = [L.vsel for L in layouts]
        q = ctx.put([q_full[s_] for s_ in qsel])
        v = ctx.put([v_full[s_] for s_ in vsel])
        f = DaskLocalDynamics(eng, ctx)
        integ = _dask_integrator(iname, f, ctx, **kw)
        adaptive = bool(integ.adaptive)
        tick = dt * save_every if adaptive else dt
        n_ticks = max(1, int(math.ceil(t_end / tick - 1e-9)))
        save_mod = 1 if adaptive else save_every
        options["parts"] = P
        rec = _Recorder(model, dyn, record, wids)
        del q_full, v_full

        def full(pieces, sel):
            out_ = np.empty(int(sum(s_.size for s_ in sel)))
            for s_, x in zip(sel, pieces):
                out_[s_] = x
            return out_

        k0 = 0
        if ck is not None:
            ck.gather_q = lambda x: full(x.fetch(), qsel)
            ck.gather_v = lambda x: full(x.fetch(), vsel)
            ck.integ, ck.rec = integ, rec
            if info is not None:
                istate = dict(info["integrator"])
                if info["fsal"]:
                    fs = loaded[1]["fsal"]
                    istate["fsal"] = ctx.put([fs[s_] for s_ in vsel])
                integ.load_state_dict(istate)
                ck.resumed(info, loaded[2])
                k0 = info["tick"]
            loaded = None

        def on_save(t, q, v):              # one round trip (two more for qdd: an evaluation)
            vecs = [q, v]
            if rec.needs_qdd:
                vecs += [f(t, q, v), f.tau(t, q, v)]
            got = ctx.fetch(vecs)
            qdd, tau = (full(got[2], vsel), full(got[3], vsel)) if rec.needs_qdd else (None, None)
            rec.add(t, full(got[0], qsel), full(got[1], vsel), qdd, tau)

        if k0 == 0:
            on_save(0.0, q, v)
        if _probe is not None:
            _probe(integ)              # benchmarks: the integrator (and its dynamics function integ.f)
        bar = _make_bar(progress, t_end, model.name, iname, min(k0 * tick, t_end))
        qv = [q, v]
        del q, v                       # only the loop holds the state (the actors drop it once it moves on)
        try:
            qv = _time_loop(integ, adaptive, tick, n_ticks, t_end, save_mod, qv.pop(0), qv.pop(0), on_save, bar,
                            _step_hook, k0, ck)
        finally:
            if bar is not None:
                bar.close()
        wall = (ck.wall_before if ck is not None else 0.0) + time.perf_counter() - t_wall0
        extra = {"nparts": P, "workers": len(set(eng.workers)), "resumed_from": None if info is None else info["t"]}
        res = _finish(model, dyn, rec, integ, adaptive, n_ticks, iname, options, t_end, wall, "dask", wnames, out,
                      verbose, extra)
        if ck is not None:
            ck.finish(keep_checkpoint)
        return res
    finally:
        # the actors (and every vector they hold) go with their futures
        if ctx is not None:
            ctx.actors = []
        afuts = None
        eng.close()
