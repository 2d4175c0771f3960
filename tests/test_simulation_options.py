"""SimulationOptions: every value checked at entry with a message naming the option; the
fingerprint a checkpoint must match; one simulate entry point for every backend."""
import os
import subprocess
import sys

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.simulation import SimulationOptions, simulate
from partree.simulation.options import FINGERPRINT_KEYS, parse_checkpoint_every

BAD = [
    (dict(t_end=0), "t_end"), (dict(t_end=-1.0), "t_end"), (dict(t_end=float("inf")), "t_end"),
    (dict(t_end=float("nan")), "t_end"), (dict(t_end="1"), "t_end"), (dict(dt=0.0), "dt"), (dict(dt=-1e-3), "dt"),
    (dict(rtol=0.0), "rtol"), (dict(atol=-1e-9), "atol"), (dict(h0=0.0), "h0"), (dict(h_max=-1.0), "h_max"),
    (dict(max_steps=0), "max_steps"), (dict(save_every=0), "save_every"), (dict(save_every=2.5), "save_every"),
    (dict(save_every=True), "save_every"), (dict(record="most"), "record"), (dict(integrator="rk5"), "rk5"),
    (dict(integrator="scipy:euler"), "solve_ivp method"), (dict(backend="cuda"), "unknown backend"),
    (dict(parts=0), "parts"), (dict(path_weight=-1.0), "path_weight"), (dict(out="r.csv"), ".npz"),
    (dict(out="r.npz", checkpoint_every=0), "checkpoint_every"),
    (dict(out="r.npz", checkpoint_every=-5), "checkpoint_every"),
    (dict(out="r.npz", checkpoint_every="-5"), "checkpoint_every"),
    (dict(out="r.npz", checkpoint_every="0s"), "checkpoint_every"),
    (dict(out="r.npz", checkpoint_every="often"), "checkpoint_every"),
    (dict(out="r.npz", checkpoint_every=2.5), "checkpoint_every"),
    (dict(out="r.npz", checkpoint_seconds=0), "checkpoint_seconds"),
    (dict(out="r.npz", checkpoint_every="30s", checkpoint_seconds=30), "not both"),
    (dict(checkpoint_every=10), "checkpoint path"), (dict(resume=True), "checkpoint path"),
    (dict(out="r.npz", resume="sometimes"), "resume"), (dict(overwrite="yes"), "overwrite"),
    (dict(progress=1), "progress"), (dict(wrench_joints=[1, 2]), "wrench_joints"),
    (dict(backend="mpi", integrator="scipy"), "scipy"), (dict(command="partree simulate"), "command"),
]


@pytest.mark.parametrize("bad,name", BAD)
def test_every_bad_value_is_refused_with_the_option_named(bad, name):
    kw = dict(t_end=1.0, dt=1e-3)
    kw.update(bad)
    with pytest.raises(PartreeInputError, match=name.replace("(", r"\(")):
        SimulationOptions(**kw).validate()


def test_refused_before_any_work():
    """simulate checks the options before it builds the model (a loader that must not run)."""
    def loader():
        raise AssertionError("the model was built before the options were checked")
    for bad, name in BAD[:6]:
        kw = dict(t_end=1.0, dt=1e-3)
        kw.update(bad)
        with pytest.raises(PartreeInputError, match=name):
            simulate(loader, progress=False, **kw)
    with pytest.raises(PartreeInputError, match="unknown simulation option.*intgrator"):
        simulate(loader, 1.0, 1e-3, intgrator="rk4")
    with pytest.raises(PartreeInputError, match="needs t_end"):
        simulate(loader, dt=1e-3)
    with pytest.raises(PartreeInputError, match="wrench_joints.*no joint named 'nope'"):
        simulate(partree.models.chain(2), 0.01, 0.01, wrench_joints=["nope"], progress=False)
    with pytest.raises(PartreeInputError, match="comm is for backend 'mpi'"):
        simulate(loader, 1.0, 1e-3, comm=object(), progress=False)


def test_normalised_values():
    o = SimulationOptions(t_end=1, dt=np.float32(1e-3), integrator="RK45", save_every=np.int64(2),
                          checkpoint_every="20", out=os.path.join("d", "r.npz"), resume="AUTO").validate()
    assert o.integrator == "dopri5" and isinstance(o.t_end, float) and o.save_every == 2
    assert o.checkpoint_every == 20 and o.resume == "auto" and o.checkpoint_path() == os.path.join("d", "r.npz.ckpt")
    o = SimulationOptions(t_end=1, dt=1e-3, checkpoint="c.ckpt", checkpoint_every="1.5s", integrator="scipy:radau")
    o.validate()
    assert o.checkpoint_every is None and o.checkpoint_seconds == 1.5 and o.integrator == "scipy:Radau"
    assert parse_checkpoint_every("30s") == (None, 30.0) and parse_checkpoint_every(7) == (7, None)
    assert o.verbose is True                                 # follows progress
    d = o.to_dict()
    assert set(d) == set(SimulationOptions.names()) and d["checkpoint_seconds"] == 1.5


def test_fingerprint_is_what_a_checkpoint_must_match():
    q0, qd0 = np.zeros(3), np.ones(3)
    base = SimulationOptions(t_end=1.0, dt=1e-3).validate()
    vals, fp = base.fingerprint(q0, qd0, "a" * 64, [])
    assert tuple(sorted(vals)) == tuple(sorted(FINGERPRINT_KEYS))
    # the same on any backend, part count, end time, output, progress
    for change in (dict(backend="mpi"), dict(parts=4), dict(t_end=5.0), dict(out="x.npz", checkpoint_every=3),
                   dict(progress=False), dict(keep_checkpoint=True), dict(max_steps=10)):
        o = SimulationOptions.build(base, **change)
        assert o.fingerprint(q0, qd0, "a" * 64, [])[1] == fp, change
    # different for what changes the trajectory
    for change in (dict(dt=2e-3), dict(integrator="dopri5"), dict(rtol=1e-6), dict(save_every=2), dict(record="all"),
                   dict(h0=1e-4), dict(h_max=0.1)):
        o = SimulationOptions.build(base, **change)
        assert o.fingerprint(q0, qd0, "a" * 64, [])[1] != fp, change
    assert base.fingerprint(q0 + 1, qd0, "a" * 64, [])[1] != fp
    assert base.fingerprint(q0, qd0, "b" * 64, [])[1] != fp
    assert base.fingerprint(q0, qd0, "a" * 64, ["j0"])[1] != fp


def test_options_object_and_keywords_give_the_same_run():
    m = partree.models.chain(3, alternate=True)
    opts = SimulationOptions(t_end=0.05, dt=0.01, integrator="dopri5", progress=False, verbose=False)
    a = simulate(m, options=opts, q0=np.full(3, 0.3))
    b = simulate(m, 0.05, 0.01, integrator="dopri5", progress=False, verbose=False, q0=np.full(3, 0.3))
    c = simulate(m, options=opts, t_end=0.1, q0=np.full(3, 0.3))       # keywords override
    assert np.array_equal(a.q, b.q) and c.t[-1] == 0.1 and opts.t_end == 0.05
    assert a.options["integrator"] == "dopri5" and a.options["model"] == m.name


def test_cli_refuses_bad_options_at_once(tmp_path):
    for args, name in ((["--checkpoint-every", "0"], "--checkpoint-every"),
                       (["--checkpoint-every", "-5"], "--checkpoint-every"), (["--dt", "0"], "--dt"),
                       (["--t-end", "-1"], "--t-end"), (["--save-every", "0"], "--save-every")):
        p = subprocess.run([sys.executable, "-m", "partree", "simulate", "chain:n=3", "--out", "r.npz", *args],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert p.returncode == 2 and name in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
        assert os.listdir(tmp_path) == [], args                     # nothing written
