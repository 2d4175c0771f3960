"""``partree simulate``: integrate a model's motion, with progress, checkpoints, a results file
and figures.

With no MODEL it runs the built-in job (:func:`default_job`): seed 000's free-floating two-arm
space robot, driven for 4 s by joint torques and coasting for 6 s more, 10 s at a 0.002 s step
(the paper's run), written to ``space_robot.h5`` (``.npz`` without h5py) in the current
directory, with its figures when matplotlib is installed.
"""
from __future__ import annotations

import os
import sys

from .common import INERTIA_HELP, INERTIA_POLICIES

#: the built-in job: seed 000's space robot (``partree.models.seeds.space_robot``) for 10 s at
#: a 0.002 s step, the run of the paper
DEFAULT_T_END = 10.0
DEFAULT_DT = 0.002
#: the drive of the built-in job: one period of a sine, tau_j(t) = A_j sin(2 pi t / T) for
#: 0 <= t < T, zero afterwards, T = DRIVE_PERIOD s; amplitudes A_j in N m per joint.  Arm 1's
#: shoulder yaw L11 turns about 87 degrees and its shoulder (L12) and elbow (L13) pitch about 40
#: and 46 degrees; arm 2 yaws the same way and pitches mirrored.  Both shoulders yaw the same
#: way, so the base turns the other way (about 53 degrees) to keep the angular momentum zero.
#: From T on no torque acts: the robot coasts and its energy is constant, which the summary
#: checks ("energy drift while coasting").
DRIVE_PERIOD = 4.0
DRIVE_AMPLITUDES = {"L11": 8.0, "L12": 10.0, "L13": 5.0, "L21": 8.0, "L22": -10.0, "L23": -5.0}
#: defaults for a model given on the command line
MODEL_T_END = 1.0
MODEL_DT = 1e-3

#: the options of ``partree simulate`` (to rebuild a command line from parsed arguments)
_ACTIONS = []


class SinePulse:
    """One period of a sine, then nothing: ``amplitude * sin(2 pi t / period)`` for
    0 <= t < period, 0 afterwards (a joint torque of the built-in job, a function of t).

    Parameters
    ----------
    amplitude : float
        Peak torque in N m.
    period : float
        Length of the pulse in s.
    """

    def __init__(self, amplitude, period):
        self.amplitude, self.period = float(amplitude), float(period)

    def __call__(self, t):
        import math

        return self.amplitude * math.sin(2.0 * math.pi * t / self.period) if 0.0 <= t < self.period else 0.0

    def __repr__(self):
        return f"SinePulse({self.amplitude!r}, {self.period!r})"


def default_job():
    """The built-in job's model and inputs: seed 000's space robot and its drive
    (:data:`DRIVE_AMPLITUDES`, :data:`DRIVE_PERIOD`), from rest in the neutral configuration (both
    arms stretched out).

    Returns
    -------
    tuple
        ``(model, inputs)``: the model and the keyword arguments of ``simulate`` for its torques.
    """
    from ..models.seeds import space_robot

    model = space_robot()
    torques = {j: SinePulse(a, DRIVE_PERIOD) for j, a in DRIVE_AMPLITUDES.items()}
    return model, {"torques": torques}


def add_parser(subparsers):
    s = subparsers.add_parser(
        "simulate", help="simulate a model over time (results to .h5 / .npz, figures)",
        description="Integrate the dynamics of a model from rest in its neutral configuration, with progress, "
                    "checkpoints, a results file and figures.  Without MODEL: seed 000's floating two-arm space "
                    f"robot, both arms driven by joint torques for {DRIVE_PERIOD:g} s (one sine period, then "
                    f"none), {DEFAULT_T_END:g} s at a {DEFAULT_DT:g} s step, written to space_robot.h5 (.npz "
                    "without h5py) with its figures in space_robot_plots/.  SIGINT / SIGTERM write a checkpoint "
                    "and the rows so far, and print the command that resumes the run.")
    _ACTIONS.clear()

    def arg(*names, **kw):
        _ACTIONS.append(s.add_argument(*names, **kw))

    arg("model", nargs="?", default=None,
        help="URDF, .npz/.h5/.json model file or spec string (default: the built-in space robot job)")
    arg("--t-end", type=float, default=None,
        help=f"end time in s (default {DEFAULT_T_END:g} for the built-in job, {MODEL_T_END:g} otherwise)")
    arg("--dt", type=float, default=None,
        help=f"step (fixed-step integrators) or output spacing (adaptive); default {DEFAULT_DT:g} for the "
             f"built-in job, {MODEL_DT:g} otherwise")
    arg("--integrator", default="rk4",
        help="rk4 | dopri5 | dop853 | symplectic-euler | gauss6 | scipy[:METHOD] (default rk4); gauss6 is "
             "the 3-stage Gauss-Legendre method (implicit, order 6, symplectic; serial and MPI backends), the "
             "sixth-order method of --formulation momentum")
    arg("--formulation", default="velocity", choices=("velocity", "momentum"),
        help="the equations integrated: velocity (default): the state (q, qd) with ABA's accelerations; "
             "momentum: seed 001's equations in generalized momenta, the state (q, p) with p = M(q) qd, "
             "qd = M^-1 p and dp/dt in O(N) with no accelerations (trees without loops; every backend). "
             "The results hold q, qd and p; e.g. --formulation momentum --integrator gauss6")
    arg("--rtol", type=float, default=1e-8, help="relative tolerance (adaptive; default 1e-8)")
    arg("--atol", type=float, default=1e-10, help="absolute tolerance (adaptive; default 1e-10)")
    arg("--h0", type=float, default=None, help="first step of the adaptive integrators")
    arg("--h-max", type=float, default=None, help="largest step of the adaptive integrators")
    arg("--backend", default="serial", choices=("serial", "mpi", "dask"),
        help="serial (default), mpi (run under mpiexec: the state stays in pieces on the ranks) or "
             "dask (a local cluster: the pieces stay on its workers)")
    arg("--parts", type=int, default=None, help="number of parts for the distributed backends")
    arg("--correct", default="full", choices=("full", "velocity", "none"),
        help="models with loops: after every step project q and qd back onto the loops' constraints "
             "(full, default), only qd (velocity), or nothing (none)")
    arg("--singular-band", type=float, default=0.0,
        help="models with loops: near singular configurations drop the acceleration's normal part along "
             "constraint directions whose QR pivot is below this fraction of the largest (e.g. 1e-2; default 0: off)")
    arg("--out", default=None,
        help="results file: .h5/.hdf5 (needs h5py) or .npz (default for the built-in job: "
             "space_robot.h5, or .npz without h5py; none for a MODEL)")
    arg("--force", action="store_true",
        help="replace existing results, checkpoint and figures (never a model file)")
    arg("--plot", action="store_const", const=True, default=None,
        help="write figures (joint angles, energy, joint forces, configurations; needs matplotlib); "
             "default on for the built-in job when matplotlib is installed, off otherwise")
    arg("--no-plot", dest="plot", action="store_false", help="no figures")
    arg("--plot-dir", default=None,
        help="folder of the figures (default: next to the results file, named after it with _plots)")
    arg("--save-every", type=int, default=None,
        help="record every k-th step/output (default 5 for the built-in job, 1 otherwise)")
    arg("--record", default="joints", metavar="WHAT",
        help="what is recorded besides t: a comma list of q, qd, qdd, tau, energy, wrenches (e.g. q,energy); "
             "joints (default) = q,qd,energy; all = every one")
    arg("--record-joints", nargs="+", default=None, metavar="JOINTS",
        help="record q, qd, qdd, tau of these joints only: names, glob patterns ('arm*'), indices and index "
             "ranges START:STOP (e.g. --record-joints 0:100 'wrist*')")
    arg("--output", default="auto", choices=("auto", "per-rank", "gathered"),
        help="--backend mpi: per-rank: every rank writes its joints' columns to OUT's folder "
             "(NAME.rank0003.h5) and rank 0 writes OUT joining them (HDF5 virtual datasets; load_results "
             "reads it as one); gathered: rank 0 writes one file; auto (default): per rank for .h5 results of "
             "100000 bodies or more on several ranks")
    arg("--wrench-joints", nargs="+", default=None, metavar="JOINT",
        help="record the wrench of these joints (the built-in job records every joint's)")
    arg("--damping", type=float, default=None, help="joint damping (same for every dof)")
    arg("--stiffness", type=float, default=None, help="joint stiffness (same for every dof)")
    arg("--prescribe", default=None, metavar="JSON",
        help="prescribed motion of one-DOF joints (hybrid dynamics, every backend): a JSON object or "
             "file {\"joint\": motion}, motion {\"sine\": {\"amplitude\": A, \"omega\": w, \"phase\": p, "
             "\"offset\": c}} or {\"polynomial\": [c0, c1, ...]}; those joints start on their motion, "
             "e.g. --prescribe '{\"j1\": {\"sine\": {\"amplitude\": 0.05, \"omega\": 1}}}'")
    arg("--drive", action="store_true",
        help="closed scissor masts on a slider (scissor:units=U,closed=true): seed 004's driving force at "
             "the base, the force that holds the mast at rest doubled over 0.1 s, which deploys it "
             "(partree.models.scissor.ScissorDrive, applied on the carriage; every backend)")
    arg("--state", choices=("neutral", "random"), default="neutral",
        help="initial state: neutral at rest (default) or random (seeded)")
    arg("--seed", type=int, default=0, help="seed of --state random")
    arg("--checkpoint", default=None, help="checkpoint path (default OUT.ckpt)")
    arg("--checkpoint-every", default=None,
        help="checkpoint every N steps (N >= 1), or every T seconds of wall time written as e.g. 30s "
             "(all backends; under mpiexec rank 0 writes)")
    arg("--resume", action="store_true",
        help="continue from the checkpoint (same model and options; backend and parts may differ); "
             "the results file of the same run may exist and is replaced")
    arg("--keep-checkpoint", action="store_true", help="keep the checkpoint after the run")
    arg("--no-progress", action="store_true", help="no progress report")
    arg("--floating-base", action="store_true", help="URDF: attach the root link by a free joint")
    arg("--inertia", choices=INERTIA_POLICIES, default=None, help=INERTIA_HELP)
    s.set_defaults(func=run)
    return s


def command_line(a):
    """The arguments of this command (after ``partree``): the process's own when it runs
    ``partree simulate``, otherwise rebuilt from the parsed arguments ``a``."""
    if sys.argv[1:2] == ["simulate"]:
        return list(sys.argv[1:])
    args = ["simulate"]
    if a.model is not None:
        args.append(str(a.model))
    seen = {"help", "model"}
    for act in _ACTIONS:
        if not act.option_strings or act.dest in seen:
            continue
        seen.add(act.dest)
        val = getattr(a, act.dest, act.default)
        if val == act.default:
            continue
        flag = act.option_strings[0]
        if act.dest == "plot":
            args.append("--plot" if val else "--no-plot")
        elif act.nargs == 0:
            args.append(flag)
        elif isinstance(val, list):
            args += [flag] + [str(x) for x in val]
        else:
            args += [flag, str(val)]
    return args


def _default_out(name):
    from ..extras import available

    return f"{name}.h5" if available("h5py") else f"{name}.npz"


def _plot_dir(a, out, name):
    if a.plot_dir is not None:
        return a.plot_dir
    if out is not None:
        return os.path.splitext(out)[0] + "_plots"
    return f"{name}_plots"


def _coast_drift(res, t_from):
    """Max |E - E(t_from)| / |E(t_from)| over the samples from t_from on (None when too few)."""
    import numpy as np

    k = int(np.searchsorted(res.t, t_from - 1e-12))
    if k >= len(res.t) - 1:
        return None
    E = res.energy[k:]
    scale = max(abs(float(E[0])), float(np.max(np.abs(res.kinetic[k:]) + np.abs(res.potential[k:]))), 1e-300)
    return float(np.abs(E - E[0]).max() / scale)


def _on_root(comm, root, check):
    """Run a check of the output paths on rank 0 (the process that writes); every rank raises its
    refusal."""
    from ..errors import PartreeInputError

    err = None
    if root:
        try:
            check()
        except PartreeInputError as e:
            err = str(e)
    if comm is not None:
        err = comm.bcast(err, root=0)
    if err is not None:
        raise PartreeInputError(err)


def run(a):
    import numpy as np

    from ..errors import MissingDependencyError, PartreeInputError
    from ..extras import available, require
    from ..simulation import SimulationInterrupted, SimulationOptions, simulate
    from ..simulation.loop import check_outputs, resume_command
    from ..outputs import check_output_dir

    builtin = a.model is None
    comm = None
    root = True
    if str(a.backend).lower() == "mpi":
        try:
            comm = require("mpi4py.MPI", "--backend mpi").COMM_WORLD
        except MissingDependencyError as e:
            print(f"partree simulate: error: {e}", file=sys.stderr)
            return 2
        root = comm.Get_rank() == 0
    argv = command_line(a)
    try:
        # every option is checked (and the results file's extra, h5py) before the model is built
        out = a.out if a.out is not None or not builtin else _default_out("space_robot")
        opts = SimulationOptions.build(
            t_end=a.t_end if a.t_end is not None else (DEFAULT_T_END if builtin else MODEL_T_END),
            dt=a.dt if a.dt is not None else (DEFAULT_DT if builtin else MODEL_DT),
            integrator=a.integrator, formulation=a.formulation, rtol=a.rtol, atol=a.atol, h0=a.h0, h_max=a.h_max,
            save_every=a.save_every if a.save_every is not None else (5 if builtin else 1), record=a.record,
            record_joints=a.record_joints, output=a.output, wrench_joints=a.wrench_joints, out=out,
            overwrite=a.force, checkpoint=a.checkpoint,
            checkpoint_every=a.checkpoint_every, resume=a.resume, keep_checkpoint=a.keep_checkpoint,
            progress=not a.no_progress, verbose=root, backend=a.backend, parts=a.parts, correct=a.correct, singular_band=a.singular_band,
            command=["partree"] + argv)
        plot = a.plot
        if plot is None:
            plot = builtin and available("matplotlib")
        elif plot:
            require("matplotlib", "drawing figures (--plot)")
        plot_dir = None
        if plot:
            name = "space_robot" if builtin else os.path.splitext(os.path.basename(str(a.model)))[0].split(":")[0]
            plot_dir = _plot_dir(a, opts.out, name)
        _on_root(comm, root, lambda: check_outputs(opts))
        if plot:
            _on_root(comm, root, lambda: check_output_dir(plot_dir, "figures", overwrite=a.force or a.resume))
        elif builtin and a.plot is None and root:
            print("(matplotlib is not installed: no figures; pip install 'partree[plot]' for them)")
        if builtin:
            model, kw = default_job()
            if a.wrench_joints is None:
                opts.wrench_joints = list(model.joint_names)
        else:
            from .common import load_model

            model = load_model(a.model, a.floating_base, a.inertia)
            kw = {}
            if a.state == "random":
                rng = np.random.default_rng(a.seed)
                kw.update(q0=model.random_configuration(rng, 0.5), qd0=model.random_velocity(rng, 0.5))
            if a.prescribe is not None:
                from ..simulation.motions import initial_state, prescribed_from_json

                kw["prescribed"] = prescribed_from_json(a.prescribe, model)
                kw["q0"], kw["qd0"] = initial_state(model, kw["prescribed"], kw.get("q0", model.neutral()),
                                                    kw.get("qd0", np.zeros(model.nv)))
            if a.drive:
                from ..models.scissor import ScissorDrive

                if getattr(model, "scissor", None) is None:
                    raise PartreeInputError(f"--drive is for closed scissor masts (scissor:units=U,closed=true); "
                                            f"model {model.name!r} has no drive law")
                try:
                    kw["torques"] = ScissorDrive(model).carriage_torques()
                except ValueError as e:
                    raise PartreeInputError(f"--drive: {e}") from None
        if root:
            print(f"{model!r}")
            if builtin:
                drive = ", ".join(f"{j} {amp:g}" for j, amp in DRIVE_AMPLITUDES.items())
                print(f"built-in job: joint torques A sin(2 pi t / {DRIVE_PERIOD:g} s) for t < {DRIVE_PERIOD:g} s, "
                      f"then none; A in N m: {drive}")
        res = simulate(model, options=opts, damping=a.damping, stiffness=a.stiffness, comm=comm, **kw)
    except SimulationInterrupted as e:
        if root:
            launcher = ["mpiexec", "-n", str(comm.Get_size())] if comm is not None and comm.Get_size() > 1 else None
            if e.checkpoint:
                print(f"interrupted at t = {e.t:.6g} s; resume with: {resume_command(argv, launcher)}",
                      file=sys.stderr, flush=True)
            else:
                print(f"interrupted at t = {e.t:.6g} s; nothing was saved (give --out or --checkpoint to make a run "
                      f"resumable)", file=sys.stderr, flush=True)
        return e.exit_code
    except MissingDependencyError as e:
        if root:
            print(f"partree simulate: error: {e}", file=sys.stderr)
        return 2
    except PartreeInputError:
        if not root:             # raised on every rank (e.g. a refused checkpoint): rank 0 reports it
            return 2
        raise
    if not root:
        return 0                 # the result lives on rank 0; a failure anywhere aborts the whole job
    if builtin and opts.t_end > DRIVE_PERIOD and res.energy is not None:
        d = _coast_drift(res, DRIVE_PERIOD)
        if d is not None:
            print(f"coasting    energy drift while no torque acts (t >= {DRIVE_PERIOD:g} s): max |E - E({DRIVE_PERIOD:g} s)|"
                  f" / E = {d:.3g}")
    if opts.out is None:
        print("(no --out given: results not written)")
    if plot:
        from ..plotting import plot_results

        files = plot_results(res, out_dir=plot_dir, overwrite=True)      # the folder was checked before the run
        print(f"figures     {', '.join(files)}")
    return 0
