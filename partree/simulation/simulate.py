"""``simulate``: the time-stepping driver (serial state; distributed dynamics plug in).

The run is a loop over *ticks*: for fixed-step integrators a tick is one step of ``dt``; for
adaptive ones (and scipy) a tick is one output interval ``dt * save_every``, inside which the
integrator takes as many steps as its error control needs (the last one shortened to land on
the output time).  Tick k ends at t = k * tick (an integer count times the step, never a running
sum, so a resumed run lands on the same times bit for bit).
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np

from ..algorithms.energy import energy as _energy
from ..model import Model
from ..errors import PartreeInputError
from .checkpoint import Checkpointer, model_fingerprint
from .dynamics import Dynamics
from .integrators import StateSpace, make_integrator
from .results import SimulationResult, format_summary

RECORD = ("joints", "all")


def _hash_array(x):
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(x, dtype=float).tobytes()).hexdigest()[:16]


class _ScipyStepper:
    """``scipy.integrate.solve_ivp`` over the flat state [q; v] (no quaternions), restarted at
    every tick (so checkpoints work the same way)."""

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
        from scipy.integrate import solve_ivp
        nq = q.size

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
        return {"nfev": self.nfev, "h": self.h, "accepted": self.accepted}

    def load_state_dict(self, d):
        self.nfev = int(d.get("nfev", 0))
        self.h = d.get("h")
        self.accepted = int(d.get("accepted", 0))


class _PlainDynamics:
    """Adapter for a user's bare f(t, q, v) -> qdd."""

    def __init__(self, model, f):
        self.model, self.f, self.last_tau = model, f, None

    def __call__(self, t, q, v):
        return self.f(t, q, v)

    def joint_wrenches(self, t, q, v, qdd):
        from ..algorithms.rnea import rnea
        return rnea(self.model, q, v, qdd, return_wrenches=True)[1]

    def fingerprint(self):
        return f"{getattr(self.f, '__module__', '')}.{getattr(self.f, '__qualname__', type(self.f).__name__)}"


# options that must match on resume (t_end may grow; backend/parts may change)
FP_KEYS = ("dt", "integrator", "rtol", "atol", "save_every", "record", "wrench_joints", "h0", "h_max",
           "q0", "qd0", "inputs")


def options_fingerprint(options):
    """(the options that must match on resume, their SHA-256): shared by all backends, so a
    checkpoint written by one backend resumes on another."""
    import hashlib
    fp_opts = {k: options[k] for k in FP_KEYS}
    return fp_opts, hashlib.sha256(json.dumps(fp_opts, sort_keys=True).encode()).hexdigest()


def _parse_every(x):
    """checkpoint_every: int steps, or 'Ns' / float seconds given as a string like '30s'."""
    if x is None:
        return None, None
    if isinstance(x, str):
        s = x.strip().lower()
        if s.endswith("s"):
            return None, float(s[:-1])
        return int(s), None
    return int(x), None


def simulate(model, t_end, dt, integrator="rk4", rtol=1e-8, atol=1e-10, q0=None, qd0=None, torques=None,
             damping=None, stiffness=None, q_ref=None, f_ext=None, prescribed=None, save_every=1,
             record="joints", wrench_joints=None, out=None, checkpoint=None, checkpoint_every=None,
             checkpoint_seconds=None, resume=False, keep_checkpoint=False, progress=True, backend="serial",
             parts=None, dynamics=None, space=None, h0=None, h_max=None, max_steps=10**9, verbose=None,
             _step_hook=None, comm=None, client=None, _probe=None):
    """Simulate a tree from t = 0 to ``t_end``.

    model            a partree Model, or anything ``partree.resolve_model`` takes
    t_end, dt        end time; step (fixed-step integrators) or output spacing and first step
                     (adaptive ones: outputs every dt * save_every)
    integrator       'rk4' | 'dopri5' | 'dop853' | 'symplectic-euler' | 'scipy' (or 'scipy:RK45' ...)
    rtol, atol       tolerances of the adaptive integrators (weighted RMS norm)
    q0, qd0          initial state (neutral configuration, rest by default)
    torques, damping, stiffness, q_ref, f_ext, prescribed
                     joint inputs (see ``partree.simulation.dynamics.Dynamics``)
    save_every       record every k-th tick (the initial state is always recorded)
    record           'joints': t, q, qd, energy; 'all': also qdd, tau and every joint's wrench
    wrench_joints    names of joints whose wrench [n; f] (child frame) is recorded (any record)
    out              write the results to this .h5/.hdf5 or .npz file
    checkpoint       checkpoint path (default ``out + '.ckpt'`` when checkpointing)
    checkpoint_every steps between checkpoints (int), or '30s' for wall seconds;
    checkpoint_seconds  wall seconds between checkpoints
    resume           True: continue from the checkpoint (it must exist and match); 'auto': if one exists
    keep_checkpoint  keep the checkpoint after a successful run (it is deleted otherwise)
    progress         tqdm progress bar (simulated time, steps/s, ETA) and a printed summary
    backend, parts   'serial' | 'mpi' | 'dask' dynamics engine and its number of parts; 'mpi' and 'dask'
                     run distributed (``partree.simulation.distributed``): the state stays in pieces,
                     one per part, on the ranks / workers.  'mpi' is collective: call it on every rank
                     of ``comm`` (default COMM_WORLD); the result is returned on rank 0 (None elsewhere).
                     Checkpoints work the same on every backend (same file format; rank 0 / the Dask
                     client writes them; a checkpoint may be resumed on another backend or part count)
    comm, client     MPI communicator (backend 'mpi') / dask.distributed Client (backend 'dask'; default:
                     a local cluster, closed at the end)
    dynamics         a custom dynamics function f(t, q, v) -> qdd (or a ``Dynamics``) instead of the
                     one built from the inputs
    space            a ``StateSpace`` (state layout and global-norm hooks)
    h0, h_max        first / largest step of the adaptive integrators

    Returns a ``SimulationResult``.
    """
    bk = str(backend).lower()
    if bk in ("mpi", "dask") and dynamics is None and space is None:
        from . import distributed as D
        kw = dict(checkpoint=checkpoint, checkpoint_every=checkpoint_every, checkpoint_seconds=checkpoint_seconds,
                  resume=resume, keep_checkpoint=keep_checkpoint, integrator=integrator, rtol=rtol, atol=atol,
                  q0=q0, qd0=qd0, torques=torques, damping=damping, stiffness=stiffness, q_ref=q_ref, f_ext=f_ext,
                  prescribed=prescribed, save_every=save_every, record=record, wrench_joints=wrench_joints, out=out,
                  progress=progress, parts=parts, h0=h0, h_max=h_max, max_steps=max_steps, verbose=verbose,
                  _step_hook=_step_hook, _probe=_probe)
        if bk == "mpi":
            return D.simulate_mpi(model, t_end, dt, comm=comm, **kw)
        return D.simulate_dask(model, t_end, dt, client=client, **kw)
    t_wall0 = time.perf_counter()
    if not isinstance(model, Model):
        from ..specs import resolve_model
        model = resolve_model(model)
    if verbose is None:
        verbose = bool(progress)
    record = str(record).lower()
    if record not in RECORD:
        raise PartreeInputError(f"record must be one of {RECORD}, got {record!r}")
    t_end, dt = float(t_end), float(dt)
    if not (t_end > 0 and dt > 0 and math.isfinite(t_end) and math.isfinite(dt)):
        raise PartreeInputError(f"need t_end > 0 and dt > 0, got t_end = {t_end}, dt = {dt}")
    save_every = int(save_every)
    if save_every < 1:
        raise PartreeInputError("save_every must be >= 1")
    # ---------------------------------------------------------------- dynamics and integrator
    if dynamics is None:
        dyn = Dynamics(model, torques=torques, damping=damping, stiffness=stiffness, q_ref=q_ref, f_ext=f_ext,
                       prescribed=prescribed, backend=backend, parts=parts)
    elif isinstance(dynamics, Dynamics) or hasattr(dynamics, "joint_wrenches"):
        dyn = dynamics
    else:
        dyn = _PlainDynamics(model, dynamics)
    space = space or StateSpace(model)
    iname = str(integrator).lower()
    if iname.startswith("scipy"):
        method = iname.split(":", 1)[1].upper() if ":" in iname else "DOP853"
        method = {"RK45": "RK45", "DOP853": "DOP853", "RK23": "RK23", "RADAU": "Radau", "BDF": "BDF",
                  "LSODA": "LSODA"}.get(method, method)
        integ = _ScipyStepper(dyn, space, method, rtol, atol, h0, np.inf if h_max is None else h_max)
    else:
        kw = dict(rtol=rtol, atol=atol, h0=h0, max_steps=max_steps)
        if h_max is not None:
            kw["h_max"] = h_max
        integ = make_integrator(iname, dyn, space, **kw)
    adaptive = bool(getattr(integ, "adaptive", False))
    tick = dt * save_every if adaptive else dt
    n_ticks = max(1, int(math.ceil(t_end / tick - 1e-9)))
    save_mod = 1 if adaptive else save_every

    def t_of(k):
        return min(k * tick, t_end)

    # ---------------------------------------------------------------- initial state
    q = model.neutral() if q0 is None else model.normalize(np.asarray(q0, dtype=float))
    v = np.zeros(model.nv) if qd0 is None else np.array(qd0, dtype=float)
    if q.shape != (model.nq,) or v.shape != (model.nv,):
        raise PartreeInputError(f"q0 / qd0 have shapes {q.shape} / {v.shape}; the model needs ({model.nq},) / "
                                f"({model.nv},)")
    if wrench_joints is None and record == "all":
        wids = np.arange(model.n)
    elif wrench_joints:
        wids = np.array([model.joint_id(j) for j in wrench_joints], dtype=np.int64)
    else:
        wids = None
    wnames = [model.joint_names[int(i)] for i in wids] if wids is not None else []

    options = {"model": model.name, "t_end": t_end, "dt": dt, "integrator": iname, "rtol": rtol, "atol": atol,
               "save_every": save_every, "record": record, "wrench_joints": wnames, "backend": str(backend),
               "parts": parts, "h0": h0, "h_max": h_max, "q0": _hash_array(q), "qd0": _hash_array(v),
               "inputs": dyn.fingerprint()[:16]}
    fp_opts, options_fp = options_fingerprint(options)
    model_fp = model_fingerprint(model)

    ck_steps, ck_secs = _parse_every(checkpoint_every)
    if checkpoint_seconds is not None:
        ck_secs = float(checkpoint_seconds)
    ckpt = None
    if checkpoint is not None or ck_steps or ck_secs or resume:
        cpath = checkpoint if checkpoint is not None else (os.fspath(out) + ".ckpt" if out is not None else None)
        if cpath is None:
            raise PartreeInputError("checkpointing needs a checkpoint path (checkpoint=...) or an output file (out=...)")
        ckpt = Checkpointer(cpath)

    # ---------------------------------------------------------------- recording
    rows = {k: [] for k in ("t", "q", "qd", "kinetic", "potential")}
    if record == "all":
        rows.update(qdd=[], tau=[])
    if wids is not None:
        rows["joint_wrench"] = []
    n_flushed = 0      # rows already in checkpoint segments

    def record_row(t, q, v):
        T, V = _energy(model, q, v)
        rows["t"].append(t)
        rows["q"].append(q.copy())
        rows["qd"].append(v.copy())
        rows["kinetic"].append(T)
        rows["potential"].append(V)
        if record == "all" or wids is not None:
            qdd = dyn(t, q, v)
            if record == "all":
                rows["qdd"].append(qdd)
                tau = getattr(dyn, "last_tau", None)
                rows["tau"].append(np.zeros(model.nv) if tau is None else np.asarray(tau, dtype=float).copy())
            if wids is not None:
                rows["joint_wrench"].append(dyn.joint_wrenches(t, q, v, qdd)[wids])

    def stacked(start=0):
        out_ = {}
        for k, lst in rows.items():
            out_[k] = np.array(lst[start:], dtype=float)
        return out_

    # ---------------------------------------------------------------- resume
    k0 = 0
    wall_before = 0.0
    resumed_from = None
    if ckpt is not None and resume and (resume != "auto" or ckpt.exists()):
        meta, st, old = ckpt.load(model_fp, options_fp, fp_opts)
        k0 = int(meta["tick"])
        q, v = st["q"].copy(), st["v"].copy()
        istate = dict(meta.get("integrator", {}))
        if "fsal" in st:
            istate["fsal"] = st["fsal"].copy()
        integ.load_state_dict(istate)
        wall_before = float(meta.get("wall_time", 0.0))
        resumed_from = float(meta["t"])
        for k in rows:
            if k in old:
                rows[k] = list(old[k])
        n_flushed = len(rows["t"])
        if n_flushed != int(meta.get("rows", n_flushed)):
            raise PartreeInputError(f"checkpoint {ckpt.path!r}: segments hold {n_flushed} rows, expected {meta['rows']}")
    elif ckpt is not None and not resume and ckpt.exists():
        ckpt.remove()              # a fresh run replaces an old checkpoint
    if k0 == 0:
        record_row(0.0, q, v)

    def write_checkpoint(k):
        nonlocal n_flushed
        st = {"q": q, "v": v}
        idict = integ.state_dict()
        if idict.get("fsal") is not None:
            st["fsal"] = np.asarray(idict.pop("fsal"))
        idict.pop("fsal", None)
        meta = {"tick": k, "t": t_of(k), "rows": len(rows["t"]), "model_fingerprint": model_fp,
                "options_fingerprint": options_fp, "options": fp_opts, "integrator": idict,
                "wall_time": wall_before + time.perf_counter() - t_wall0, "rng": None}
        ckpt.save(st, meta, stacked(n_flushed) if len(rows["t"]) > n_flushed else None)
        n_flushed = len(rows["t"])

    # ---------------------------------------------------------------- the loop
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=t_end, initial=t_of(k0), unit="s", unit_scale=False, dynamic_ncols=True,
                   desc=f"simulate {model.name} [{iname}]",
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| t={n:.4g}/{total:.4g} s [{elapsed}<{remaining}{postfix}]")
    steps_at = lambda: int(getattr(integ, "accepted", 0)) if adaptive else None  # noqa: E731
    fixed_steps = k0 if not adaptive else 0
    last_ck_steps = (steps_at() if adaptive else k0)
    last_ck_wall = time.perf_counter()
    last_bar = time.perf_counter()
    loop_t0 = time.perf_counter()
    steps_start = steps_at() if adaptive else k0
    if _probe is not None:
        _probe(integ)              # benchmarks: the integrator (and its dynamics function integ.f)
    try:
        for k in range(k0 + 1, n_ticks + 1):
            t0, t1 = t_of(k - 1), t_of(k)
            if adaptive:
                q, v = integ.advance(t0, q, v, t1)
            else:
                q, v = integ.step(t0, q, v, t1 - t0)
                fixed_steps = k
            if k % save_mod == 0 or k == n_ticks:
                record_row(t1, q, v)
            if _step_hook is not None:
                _step_hook(k, t1, q, v)
            if ckpt is not None and k < n_ticks and (ck_steps or ck_secs):
                done = (steps_at() if adaptive else k) - last_ck_steps
                now = time.perf_counter()
                if (ck_steps and done >= ck_steps) or (ck_secs and now - last_ck_wall >= ck_secs):
                    write_checkpoint(k)
                    last_ck_steps = steps_at() if adaptive else k
                    last_ck_wall = now
            if bar is not None:
                now = time.perf_counter()
                if now - last_bar > 0.25 or k == n_ticks:
                    ns = (steps_at() if adaptive else k) - steps_start
                    bar.set_postfix_str(f"{ns / max(now - loop_t0, 1e-9):.3g} steps/s", refresh=False)
                    bar.update(t1 - bar.n)
                    last_bar = now
    finally:
        if bar is not None:
            bar.close()
    wall = wall_before + time.perf_counter() - t_wall0

    # ---------------------------------------------------------------- result and summary
    series = stacked(0)
    series["energy"] = series["kinetic"] + series["potential"]
    E = series["energy"]
    E0 = E[0]
    # drift relative to the run's energy scale (|E(0)|, or the largest |T| + |V| when E(0) ~ 0)
    scale = max(abs(E0), float(np.max(np.abs(series["kinetic"]) + np.abs(series["potential"]))), 1e-300)
    nsteps = int(integ.accepted) if adaptive else fixed_steps
    summary = {"integrator": iname, "steps": nsteps, "rejected": int(getattr(integ, "rejected", 0)),
               "f_evals": int(getattr(integ, "nfev", 0)), "t_end": t_end, "wall_time": wall,
               "steps_per_second": nsteps / wall if wall > 0 else 0.0, "samples": int(E.size),
               "resumed_from": resumed_from, "backend": str(backend),
               "energy": {"initial": float(E0), "final": float(E[-1]), "max_abs_drift": float(np.abs(E - E0).max()),
                          "max_rel_drift": float(np.abs(E - E0).max() / scale), "scale": float(scale)}}
    if wids is not None and len(wids):
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
    res = SimulationResult(series, options, summary, model, wnames, None, model_fp)
    if out is not None:
        res.save(out)
    if ckpt is not None and not keep_checkpoint:
        ckpt.remove()
    if verbose:
        print(format_summary(summary))
    return res
