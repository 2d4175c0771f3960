"""``partree simulate``: integrate a model's motion, with progress, checkpoints and a results file."""
from __future__ import annotations

import sys

DEFAULT_MODEL = "threearm"


def _default_model_and_inputs():
    """The bundled default: seed 002's three-arm manipulator with its hybrid inputs."""
    from ..models.seeds import three_arm_inputs, three_arm_manipulator
    m = three_arm_manipulator()
    inp = three_arm_inputs()
    q0, qd0 = inp.initial_state(m, consistent=True)
    torques = {j: (lambda t, _i=inp: _i.torque(t)) for j in inp.passive}
    return m, dict(prescribed=inp, torques=torques, q0=q0, qd0=qd0)


def add_parser(subparsers):
    s = subparsers.add_parser(
        "simulate", help="simulate a model over time (results to .h5 / .npz)",
        description="Integrate the dynamics of a model from rest in its neutral configuration (or the bundled "
                    "three-arm manipulator of seed 002 with its hybrid inputs when MODEL is left out), with "
                    "progress, checkpoints and HDF5/npz output.")
    s.add_argument("model", nargs="?", default=None,
                   help="URDF, .npz/.h5/.json model file or spec string (default: the seed-002 three-arm "
                        "manipulator with its inputs)")
    s.add_argument("--t-end", type=float, default=1.0, help="end time in s (default 1)")
    s.add_argument("--dt", type=float, default=1e-3,
                   help="step (fixed-step integrators) or output spacing (adaptive); default 1e-3")
    s.add_argument("--integrator", default="rk4",
                   help="rk4 | dopri5 | dop853 | symplectic-euler | scipy[:METHOD] (default rk4)")
    s.add_argument("--rtol", type=float, default=1e-8, help="relative tolerance (adaptive; default 1e-8)")
    s.add_argument("--atol", type=float, default=1e-10, help="absolute tolerance (adaptive; default 1e-10)")
    s.add_argument("--backend", default="serial", choices=("serial", "mpi", "dask"),
                   help="dynamics engine (default serial; mpi/dask when the parallel engine is available)")
    s.add_argument("--parts", type=int, default=None, help="number of parts for the parallel backends")
    s.add_argument("--out", default=None, help="results file: .h5/.hdf5 or .npz")
    s.add_argument("--save-every", type=int, default=1, help="record every k-th step/output (default 1)")
    s.add_argument("--record", choices=("joints", "all"), default="joints",
                   help="joints: t, q, qd, energy; all: also qdd, tau and every joint's wrench")
    s.add_argument("--wrench-joints", nargs="+", default=None, metavar="JOINT",
                   help="record the wrench of these joints")
    s.add_argument("--damping", type=float, default=None, help="joint damping (same for every dof)")
    s.add_argument("--stiffness", type=float, default=None, help="joint stiffness (same for every dof)")
    s.add_argument("--state", choices=("neutral", "random"), default="neutral",
                   help="initial state: neutral at rest (default) or random (seeded)")
    s.add_argument("--seed", type=int, default=0, help="seed of --state random")
    s.add_argument("--checkpoint", default=None, help="checkpoint path (default OUT.ckpt)")
    s.add_argument("--checkpoint-every", default=None,
                   help="checkpoint every N steps, or every T seconds of wall time written as e.g. 30s "
                        "(all backends; under mpiexec rank 0 writes)")
    s.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint (same model and options; backend and parts may differ)")
    s.add_argument("--keep-checkpoint", action="store_true", help="keep the checkpoint after the run")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--floating-base", action="store_true", help="URDF: attach the root link by a free joint")
    s.set_defaults(func=run)
    return s


def run(a):
    import numpy as np

    from ..errors import PartreeInputError
    from ..simulation import simulate
    if a.model is None:
        model, kw = _default_model_and_inputs()
    else:
        if a.floating_base and str(a.model).lower().endswith(".urdf"):
            from ..io import load_urdf
            model = load_urdf(a.model, floating_base=True)
        else:
            from ..specs import resolve_model
            model = resolve_model(a.model)
        kw = {}
        if a.state == "random":
            rng = np.random.default_rng(a.seed)
            kw.update(q0=model.random_configuration(rng, 0.5), qd0=model.random_velocity(rng, 0.5))
    if a.checkpoint_every is not None and a.out is None and a.checkpoint is None:
        print("partree simulate: error: --checkpoint-every needs --out or --checkpoint", file=sys.stderr)
        return 2
    # under mpiexec every rank runs this command; rank 0 talks, the others only compute
    root = True
    if str(a.backend).lower() == "mpi":
        from mpi4py import MPI
        root = MPI.COMM_WORLD.Get_rank() == 0
    if root:
        print(f"{model!r}")
    try:
        res = simulate(model, a.t_end, a.dt, integrator=a.integrator, rtol=a.rtol, atol=a.atol,
                       damping=a.damping, stiffness=a.stiffness, save_every=a.save_every, record=a.record,
                       wrench_joints=a.wrench_joints, out=a.out, checkpoint=a.checkpoint,
                       checkpoint_every=a.checkpoint_every, resume=a.resume, keep_checkpoint=a.keep_checkpoint,
                       progress=not a.no_progress, verbose=root, backend=a.backend, parts=a.parts, **kw)
    except PartreeInputError:
        if not root:             # raised on every rank (e.g. a refused checkpoint): rank 0 reports it
            return 2
        raise
    if not root:
        return 0                 # the result lives on rank 0; a failure anywhere aborts the whole job
    if a.out is None:
        print("(no --out given: results not written)")
    return 0 if res is not None else 1
