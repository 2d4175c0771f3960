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
and every part's slice of (q, v) stays there as a future across steps (``DaskVector``: one
future per part, pinned to the part's worker).  The integrators' arithmetic is the serial one,
fused into one task per part and stage (``_dask_integrator``: stage state, final combination,
error partial sums), chained on the workers without waiting.  Each dynamics evaluation is the
engine's three per-part tasks (velocity, reduce with the part's joint forces, solve) with the
root solve in the client; the client only ever receives boundary data, the partial sums of the
error norm, and the state at save points.  Lost workers are not recovered (the state on them is
gone): the run ends with ``DaskEngineError``.

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
rank, never a hang) and gets its slice back (MPI: Scatterv; Dask: scattered to the parts'
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

from ..model import Model, PartreeInputError
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
            from ..algorithms import _checks

            F, has = _checks.external_forces(model, dyn._fext)
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
        from ..parallel.mpi import _check_finite

        self.eng, self.layout, self.inputs = engine, layout, inputs
        self._check_finite = _check_finite
        self.last_tau = None
        self.nevals = 0

    def __call__(self, t, q, v):
        tau = self.inputs.tau(t, q, v)
        self.last_tau = tau
        return self.evaluate(q, v, tau, self.inputs.f_ext)

    def evaluate(self, q, v, tau, f_ext=None):
        from ..parallel import root as R

        eng, L = self.eng, self.layout
        cf = self._check_finite
        eng._bytes = 0
        self.nevals += 1
        # (a) velocity round
        bufs = []
        for j, pk in enumerate(eng.parts):
            ql, vl = q[L.qsl[j]], v[L.vsl[j]]
            cf(ql, pk.qsel, "q", pk.idx_q, pk)
            cf(vl, pk.vsel, "qd", pk.idx_v, pk)
            TE, Tr, vrel = pk.velocity(ql, vl)
            bufs.append(np.concatenate((TE.ravel(), Tr.ravel(), vrel.ravel())))
        allv = eng._gather("vel", np.concatenate(bufs) if bufs else np.zeros(0))
        vin_full = None
        if eng.rank == 0:
            pieces = eng._split(allv, eng._vel_len)
            vel = []
            for k in range(eng.nparts):
                H = int(eng.nh[k])
                b = pieces[k]
                vel.append((b[:9 * H].reshape(H, 3, 3), b[9 * H:12 * H].reshape(H, 3), b[12 * H:].reshape(H, 6)))
            v_in = R.compose_velocities(eng.tree, vel)
            vin_full = np.ascontiguousarray(v_in[eng._perm]).ravel()
        v_loc = eng._scatter("v", vin_full).reshape(-1, 6)
        # (b) reduction round
        bufs = []
        for j, pk in enumerate(eng.parts):
            tl = tau[L.vsl[j]]
            cf(tl, pk.vsel, "tau", pk.idx_v, pk)
            fl = None if f_ext is None else f_ext[L.bsl[j]]
            M, m0, Kt, Psi, Lam, beta = pk.reduce(v_loc[j], tl, fl)
            bufs.append(np.concatenate((M.ravel(), m0, Kt.ravel(), Lam.ravel(), beta.ravel())))
        allr = eng._gather("red", np.concatenate(bufs) if bufs else np.zeros(0))
        sol_full = None
        if eng.rank == 0:
            pieces = eng._split(allr, eng._red_len)
            red = []
            for k in range(eng.nparts):
                H = int(eng.nh[k])
                b = pieces[k]
                o = 42
                Kt = b[o:o + 36 * H].reshape(H, 6, 6)
                o += 36 * H
                Lam = b[o:o + 36 * H * H].reshape(H, H, 6, 6)
                o += 36 * H * H
                red.append((b[:36].reshape(6, 6), b[36:42], Kt, Kt.transpose(0, 2, 1), Lam,
                            b[o:o + 6 * H].reshape(H, 6)))
            a_in, g = R.solve(eng.tree, red, eng.a0)
            sol_full = np.concatenate([np.concatenate((a_in[k], g[k].ravel())) for k in eng._perm])
        sol = eng._scatter("sol", sol_full)
        # back-substitution
        qdd = np.empty(L.nv)
        o = 0
        for j, pk in enumerate(eng.parts):
            a_in = sol[o:o + 6]
            g = sol[o + 6:o + 6 + 6 * pk.H].reshape(pk.H, 6)
            o += 6 + 6 * pk.H
            qdd[L.vsl[j]] = pk.solve(a_in, g)
        self.last_bytes = eng._bytes
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
    from ..parallel.mpi import MPIEngine, _Abort
    from ..parallel.serial import PATH_WEIGHT

    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    root = rank == 0
    t_wall0 = time.perf_counter()
    with _Abort(comm):
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
    with _Abort(comm):
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
# per-part tasks (module level: they travel to the workers by reference)

def _t_add(a, b):
    return a + b


def _t_scale(s, a):
    return s * a


def _t_retract(sp, q, dq):
    return sp.retract(q, dq)


def _t_dexpinv(sp, th, v):
    return sp.dexpinv(th, v)


def _t_qmag(sp, q):
    return sp.q_magnitude(q)


def _t_scales(sp, atol, rtol, q, v, q1, v1):
    return _scales_np(sp, atol, rtol, q, v, q1, v1)


def _t_item(x, i):
    return x[i]


def _t_sumsq(*ev):
    ss, cnt = _sumsq_np(*ev)
    return np.array([ss, float(cnt)])


def _t_solve(pk, a_in, g):
    return pk.solve(a_in, g).copy()


def _g(x, i):
    return x if i is None else x[i]


def _t_vel(pk, qx, qi, vx, vi, _after=None):
    TE, Tr, vrel = pk.velocity(_g(qx, qi), _g(vx, vi))
    return TE.copy(), Tr.copy(), vrel.copy()


def _t_red(pk, inputs, t, qx, qi, vx, vi, v_in):
    tau = inputs.tau(t, _g(qx, qi), _g(vx, vi))
    return tuple(x.copy() for x in pk.reduce(v_in, tau, inputs.f_ext))


def _t_tau2(inputs, t, qx, qi, vx, vi):
    return inputs.tau(t, _g(qx, qi), _g(vx, vi))


# fused Runge-Kutta pieces: the serial integrators' arithmetic on one part, in one task
def _t_rk4_stage(sp, qx, qi, vx, vi, a, prev, h, full):
    """RK4 stages 2..4 on one part: (q_i, v_i, K_i) from the previous slope a and K_{i-1}
    (prev[2]; None for stage 2, which uses v).  ``full``: 1 for stage 4 (step h), else 0.5."""
    q, v = _g(qx, qi), _g(vx, vi)
    c = full * h
    vs = v + c * a
    th = c * (v if prev is None else prev[2])
    return sp.retract(q, th), vs, sp.dexpinv(th, vs)


def _t_rk4_final(sp, qx, qi, vx, vi, a1, a2, a3, a4, s2, s3, s4, h):
    q, v = _g(qx, qi), _g(vx, vi)
    h6 = h / 6.0
    q1 = sp.retract(q, h6 * (v + 2.0 * s2[2] + 2.0 * s3[2] + s4[2]))
    v1 = v + h6 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
    return q1, v1


def _t_erk_stage(sp, qx, qi, vx, vi, h, coefs, nk, *K):
    """Embedded RK stage: th = h (a @ Kq), v_i = v + h (a @ Kv), q_i = q + th, Kq_i = dexpinv.
    K: nk Kq entries (each (x, item)) then nk Kv entries, flattened."""
    q, v = _g(qx, qi), _g(vx, vi)
    Kq = np.stack([_g(K[2 * j], K[2 * j + 1]) for j in range(nk)])
    Kv = np.stack([_g(K[2 * (nk + j)], K[2 * (nk + j) + 1]) for j in range(nk)])
    th = h * (coefs @ Kq)
    vs = v + h * (coefs @ Kv)
    return sp.retract(q, th), vs, sp.dexpinv(th, vs)


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


def _t_erk_error(sp, kind, qx, qi, vx, vi, q1v1, h, atol, rtol, coefs, coefs2, nk, *K):
    """Partial sums of the error norm(s) on one part: [ss, cnt] (dopri5) or [ss5, cnt, ss3, cnt]."""
    q, v = _g(qx, qi), _g(vx, vi)
    q1, v1 = q1v1[0], q1v1[1]
    Kq = np.stack([_g(K[2 * j], K[2 * j + 1]) for j in range(nk)])
    Kv = np.stack([_g(K[2 * (nk + j)], K[2 * (nk + j) + 1]) for j in range(nk)])
    sq, sv = _scales_np(sp, atol, rtol, q, v, q1, v1)
    if kind == "dopri5":
        ss, cnt = _sumsq_np(h * (coefs @ Kq), sq, h * (coefs @ Kv), sv)
        return np.array([ss, float(cnt)])
    s5, c5 = _sumsq_np(coefs @ Kq, sq, coefs @ Kv, sv)
    s3, c3 = _sumsq_np(coefs2 @ Kq, sq, coefs2 @ Kv, sv)
    return np.array([s5, float(c5), s3, float(c3)])


class DaskVector:
    """A state-sized vector kept on the workers: one future per part (on the part's worker),
    or the ``item``-th entry of the tuples those futures hold.  Arithmetic submits one task per
    part and returns at once (nothing is fetched)."""

    __array_ufunc__ = None          # numpy scalars * DaskVector -> DaskVector.__rmul__

    def __init__(self, ctx, futures, item=None):
        self.ctx = ctx
        self.raw = list(futures)
        self.item = item
        self._f = None if item is not None else self.raw

    @property
    def f(self):
        """Futures of the arrays themselves."""
        if self._f is None:
            self._f = self.ctx.map(_t_item, self.raw, self.item)
        return self._f

    def a(self, k):
        """(future, item) of part k, for the fused tasks."""
        return self.raw[k], self.item

    def _map(self, fn, *args):
        return DaskVector(self.ctx, self.ctx.map(fn, *args))

    def __add__(self, other):
        if not isinstance(other, DaskVector):
            return NotImplemented
        return self._map(_t_add, self.f, other.f)

    def __mul__(self, s):
        if isinstance(s, DaskVector):
            return NotImplemented
        return self._map(_t_scale, float(s), self.f)

    __rmul__ = __mul__

    def fetch(self):
        return [_g(x, self.item) for x in self.ctx.client.gather(self.raw)]


class _DaskContext:
    """Submits per-part tasks pinned to the parts' workers."""

    def __init__(self, client, workers):
        self.client = client
        self.workers = workers

    def submit(self, k, fn, *args):
        return self.client.submit(fn, *args, workers=[self.workers[k]], allow_other_workers=False, pure=False)

    def map(self, fn, *args):
        """One task per part; an argument that is a list is taken element by element."""
        P = len(self.workers)
        return [self.submit(k, fn, *[a[k] if isinstance(a, list) else a for a in args]) for k in range(P)]


class DaskSpace:
    """The ``StateSpace`` hooks on ``DaskVector`` s (per-part StateSpaces live on the workers);
    the norm's partial sums come to the client and are added in part order."""

    def __init__(self, ctx, spaces):
        self.ctx = ctx
        self.spaces = spaces                 # futures of per-part StateSpace objects

    def _v(self, futs, item=None):
        return DaskVector(self.ctx, futs, item)

    def retract(self, q, dq):
        return self._v(self.ctx.map(_t_retract, self.spaces, q.f, dq.f))

    def dexpinv(self, theta, v):
        return self._v(self.ctx.map(_t_dexpinv, self.spaces, theta.f, v.f))

    def q_magnitude(self, q):
        return self._v(self.ctx.map(_t_qmag, self.spaces, q.f))

    def scales(self, atol, rtol, q, v, q1, v1):
        both = self.ctx.map(_t_scales, self.spaces, float(atol), float(rtol), q.f, v.f, q1.f, v1.f)
        return self._v(both, 0), self._v(both, 1)

    def partial_sums(self, futs):
        """Gather per-part partial sums and add them in part order (same bits every time)."""
        parts = self.ctx.client.gather(futs)
        s = parts[0].copy()
        for p in parts[1:]:
            s = s + p
        return s

    def rms_norm(self, *pairs):
        P = len(self.spaces)
        futs = [self.ctx.submit(k, _t_sumsq, *[x.f[k] for pr in pairs for x in pr]) for k in range(P)]
        ss, cnt = self.partial_sums(futs)
        return math.sqrt(ss / max(cnt, 1.0))


def _dask_integrator(iname, f, space, **kw):
    """The integrators of ``integrators.py`` with their stages fused into one task per part."""
    from . import integrators as I

    def flatK(Kq, Kv, idx, k):
        out = []
        for K in (Kq, Kv):
            for j in idx:
                out.extend(K[j].a(k))
        return out

    class DaskRK4(I.RK4):
        def step(self, t, q, v, h):
            sp, ctx = self.space, self.space.ctx
            P = len(sp.spaces)
            h = float(h)
            a1 = self._f(t, q, v)
            s2 = [ctx.submit(k, _t_rk4_stage, sp.spaces[k], *q.a(k), *v.a(k), a1.f[k], None, h, 0.5) for k in range(P)]
            a2 = self._f(t + 0.5 * h, DaskVector(ctx, s2, 0), DaskVector(ctx, s2, 1))
            s3 = [ctx.submit(k, _t_rk4_stage, sp.spaces[k], *q.a(k), *v.a(k), a2.f[k], s2[k], h, 0.5) for k in range(P)]
            a3 = self._f(t + 0.5 * h, DaskVector(ctx, s3, 0), DaskVector(ctx, s3, 1))
            s4 = [ctx.submit(k, _t_rk4_stage, sp.spaces[k], *q.a(k), *v.a(k), a3.f[k], s3[k], h, 1.0) for k in range(P)]
            a4 = self._f(t + h, DaskVector(ctx, s4, 0), DaskVector(ctx, s4, 1))
            fin = [ctx.submit(k, _t_rk4_final, sp.spaces[k], *q.a(k), *v.a(k), a1.f[k], a2.f[k], a3.f[k], a4.f[k],
                              s2[k], s3[k], s4[k], h) for k in range(P)]
            return DaskVector(ctx, fin, 0), DaskVector(ctx, fin, 1)

    class _Fused:
        def _stages(self, t, q, v, h, a0):
            sp, ctx = self.space, self.space.ctx
            P = len(sp.spaces)
            s = len(self.c)
            Kq, Kv = [None] * s, [None] * s
            Kq[0], Kv[0] = v, a0
            for i in range(1, s):
                ai = self.A[i, :i]
                nz = np.flatnonzero(ai)
                st = [ctx.submit(k, _t_erk_stage, sp.spaces[k], *q.a(k), *v.a(k), float(h), ai[nz], nz.size,
                                 *flatK(Kq, Kv, nz, k)) for k in range(P)]
                Kv[i] = self._f(t + self.c[i] * h, DaskVector(ctx, st, 0), DaskVector(ctx, st, 1))
                Kq[i] = DaskVector(ctx, st, 2)
            return Kq, Kv

        def attempt(self, t, q, v, h, a0):
            sp, ctx = self.space, self.space.ctx
            P = len(sp.spaces)
            Kq, Kv = self._stages(t, q, v, h, a0)
            nz = np.flatnonzero(self.b)
            # the same arithmetic as a stage (th = h b.Kq, v1 = v + h b.Kv, q1 = q + th)
            fin = [ctx.submit(k, _t_erk_stage, sp.spaces[k], *q.a(k), *v.a(k), float(h), self.b[nz], nz.size,
                              *flatK(Kq, Kv, nz, k)) for k in range(P)]
            err = self._fused_error(h, Kq, Kv, q, v, fin)
            return DaskVector(ctx, fin, 0), DaskVector(ctx, fin, 1), err, Kv

        def _scales(self, q, v, q1, v1):
            return self.space.scales(self.atol, self.rtol, q, v, q1, v1)

    class DaskDOPRI5(_Fused, I.DormandPrince5):
        def _fused_error(self, h, Kq, Kv, q, v, fin):
            sp, ctx = self.space, self.space.ctx
            nz = np.flatnonzero(self.e)
            futs = [ctx.submit(k, _t_erk_error, sp.spaces[k], "dopri5", *q.a(k), *v.a(k), fin[k], float(h),
                               self.atol, self.rtol, self.e[nz], None, nz.size, *flatK(Kq, Kv, nz, k))
                    for k in range(len(sp.spaces))]
            ss, cnt = sp.partial_sums(futs)
            return math.sqrt(ss / max(cnt, 1.0))

    class DaskDOP853(_Fused, I.DOP853):
        def _fused_error(self, h, Kq, Kv, q, v, fin):
            sp, ctx = self.space, self.space.ctx
            e5, e3 = I.T.DOP853_E5, I.T.DOP853_E3
            allk = np.arange(len(self.c))
            futs = [ctx.submit(k, _t_erk_error, sp.spaces[k], "dop853", *q.a(k), *v.a(k), fin[k], float(h),
                               self.atol, self.rtol, e5, e3, allk.size, *flatK(Kq, Kv, allk, k))
                    for k in range(len(sp.spaces))]
            s5, c5, s3, c3 = sp.partial_sums(futs)
            n5 = math.sqrt(s5 / max(c5, 1.0))
            n3 = math.sqrt(s3 / max(c3, 1.0))
            if n5 == 0.0 and n3 == 0.0:
                return 0.0
            return abs(h) * n5 * n5 / math.sqrt(n5 * n5 + 0.01 * n3 * n3)

    proto = make_integrator(iname, lambda t, q, v: None, None, **kw)     # name checks and aliases
    cls = {"rk4": DaskRK4, "symplectic-euler": I.SymplecticEuler, "dopri5": DaskDOPRI5,
           "dop853": DaskDOP853}[proto.name]
    return cls(f, space, **kw) if cls.adaptive else cls(f, space)


class DaskLocalDynamics:
    """f(t, q, v) -> qdd on ``DaskVector`` s: the engine's three per-part tasks with the root
    solve in the client (the part's joint forces are computed inside its reduce task); only
    boundary data comes back, qdd stays on the workers."""

    def __init__(self, engine, ctx, inputs):
        self.eng, self.ctx, self.inputs = engine, ctx, inputs
        self._after = [None] * len(ctx.workers)       # the last solve of each part (workspace order)

    def _collect(self, futs, name):
        from ..parallel.dask_backend import DaskEngineError, _WorkerLost

        try:
            return self.eng._collect(futs, time.monotonic() + self.eng.timeout, name)
        except _WorkerLost as e:
            raise DaskEngineError(f"Dask worker lost during a distributed simulation ({e}); the state on it is "
                                  f"gone (restart the run)") from None

    def __call__(self, t, q, v):
        from ..parallel import root as R

        eng, ctx = self.eng, self.ctx
        P = len(ctx.workers)
        t = float(t)
        vel = self._collect([ctx.submit(k, _t_vel, eng.futures[k], *q.a(k), *v.a(k), self._after[k])
                             for k in range(P)], "velocity")
        v_in = R.compose_velocities(eng.tree, vel)
        red = self._collect([ctx.submit(k, _t_red, eng.futures[k], self.inputs[k], t, *q.a(k), *v.a(k), v_in[k])
                             for k in range(P)], "reduce")
        a_in, g = R.solve(eng.tree, red, eng.a0)
        qdd = [ctx.submit(k, _t_solve, eng.futures[k], a_in[k], g[k]) for k in range(P)]
        self._after = qdd
        return DaskVector(ctx, qdd)

    def tau(self, t, q, v):
        """The joint forces at (t, q, v) (a DaskVector; for recording)."""
        return DaskVector(self.ctx, [self.ctx.submit(k, _t_tau2, self.inputs[k], float(t), *q.a(k), *v.a(k))
                                     for k in range(len(self.ctx.workers))])


def simulate_dask(model, t_end, dt, integrator="rk4", rtol=1e-8, atol=1e-10, q0=None, qd0=None, torques=None,
                  damping=None, stiffness=None, q_ref=None, f_ext=None, prescribed=None, save_every=1,
                  record="joints", wrench_joints=None, out=None, progress=True, parts=None, client=None, h0=None,
                  h_max=None, max_steps=10**9, verbose=None, path_weight=None, checkpoint=None,
                  checkpoint_every=None, checkpoint_seconds=None, resume=False, keep_checkpoint=False,
                  _step_hook=None, _probe=None):
    """``simulate`` over Dask: the parts and their slices of the state live on the workers as
    futures for the whole run; the client runs the root solve, the step-size control and the
    recording (state fetched at save points and checkpoints only; the client writes the
    checkpoints, and a resume scatters the loaded state to the parts' workers).  ``client``: a
    ``distributed.Client`` (None: a LocalCluster with 2 single-threaded workers, closed at the
    end).  ``_step_hook(k, t, q, v)`` gets ``DaskVector`` s."""
    from ..parallel.dask_backend import DaskEngine
    from ..parallel.serial import PATH_WEIGHT, build_part

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
    eng = DaskEngine(model, client=client, parts=parts,
                     path_weight=PATH_WEIGHT if path_weight is None else path_weight)
    try:
        ctx = _DaskContext(eng.client, list(eng.workers))
        P = len(eng.futures)
        layouts, inputs = [], []
        for k in range(P):
            L = LocalLayout([build_part(model, eng.partition, k)])
            L.parts = []                                      # drop the kernel (the worker has it)
            layouts.append(L)
            inputs.append(LocalInputs(dyn, model, L.vsel, L.qsel, L.bodies))
        # hash=False: runs on the same client scatter equal objects (same model, same q0); content
        # keys would be shared with the previous run's futures, which are being released
        sc = lambda k, x: eng.client.scatter(x, workers=[ctx.workers[k]], direct=False, hash=False)  # noqa: E731
        spaces = [sc(k, StateSpace(layouts[k])) for k in range(P)]
        in_f = [sc(k, inputs[k]) for k in range(P)]
        q = DaskVector(ctx, [sc(k, q_full[layouts[k].qsel].copy()) for k in range(P)])
        v = DaskVector(ctx, [sc(k, v_full[layouts[k].vsel].copy()) for k in range(P)])
        f = DaskLocalDynamics(eng, ctx, in_f)
        space = DaskSpace(ctx, spaces)
        integ = _dask_integrator(iname, f, space, **kw)
        adaptive = bool(integ.adaptive)
        tick = dt * save_every if adaptive else dt
        n_ticks = max(1, int(math.ceil(t_end / tick - 1e-9)))
        save_mod = 1 if adaptive else save_every
        options["parts"] = P
        rec = _Recorder(model, dyn, record, wids)
        del q_full, v_full

        def full(vec, sel):
            out_ = np.empty(int(sum(s.size for s in sel)))
            for s, x in zip(sel, vec.fetch()):
                out_[s] = x
            return out_

        qsel = [L.qsel for L in layouts]
        vsel = [L.vsel for L in layouts]
        k0 = 0
        if ck is not None:
            ck.gather_q = lambda x: full(x, qsel)
            ck.gather_v = lambda x: full(x, vsel)
            ck.integ, ck.rec = integ, rec
            if info is not None:
                istate = dict(info["integrator"])
                if info["fsal"]:
                    fs = loaded[1]["fsal"]
                    istate["fsal"] = DaskVector(ctx, [sc(k, fs[vsel[k]].copy()) for k in range(P)])
                integ.load_state_dict(istate)
                ck.resumed(info, loaded[2])
                k0 = info["tick"]
            loaded = None

        def on_save(t, q, v):
            qdd = tau = None
            if rec.needs_qdd:
                qdd = full(f(t, q, v), vsel)
                tau = full(f.tau(t, q, v), vsel)
            rec.add(t, full(q, qsel), full(v, vsel), qdd, tau)

        if k0 == 0:
            on_save(0.0, q, v)
        if _probe is not None:
            _probe(integ)              # benchmarks: the integrator (and its dynamics function integ.f)
        bar = _make_bar(progress, t_end, model.name, iname, min(k0 * tick, t_end))
        try:
            q, v = _time_loop(integ, adaptive, tick, n_ticks, t_end, save_mod, q, v, on_save, bar, _step_hook,
                              k0, ck)
        finally:
            if bar is not None:
                bar.close()
        wall = (ck.wall_before if ck is not None else 0.0) + time.perf_counter() - t_wall0
        extra = {"nparts": P, "workers": len(set(ctx.workers)), "resumed_from": None if info is None else info["t"]}
        res = _finish(model, dyn, rec, integ, adaptive, n_ticks, iname, options, t_end, wall, "dask", wnames, out,
                      verbose, extra)
        if ck is not None:
            ck.finish(keep_checkpoint)
        return res
    finally:
        eng.close()
