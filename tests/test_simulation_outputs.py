"""Every output path is checked before any work: the directory must exist and be writable, an
existing file is kept unless overwrite / --force, a model file is never overwritten, a resumed
run may replace its own files; optional packages are asked for before the run."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import partree
from partree.errors import MissingDependencyError, PartreeInputError
from partree.simulation import SimulationInterrupted, load_results, simulate


def _never():
    raise AssertionError("the model was built before the outputs were checked")


def run(model, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("verbose", False)
    return simulate(model, **kw)


@pytest.fixture(scope="module")
def chain():
    return partree.models.chain(3, alternate=True)


def test_missing_directory_refused_at_once_naming_it(tmp_path):
    for key, path in (("out", tmp_path / "nonexist" / "r.h5"), ("checkpoint", tmp_path / "nonexist" / "c.ckpt")):
        with pytest.raises(PartreeInputError, match=f"directory '{tmp_path / 'nonexist'}' does not exist"):
            run(_never, t_end=0.1, dt=0.01, **{key: path})
    assert os.listdir(tmp_path) == []
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "chain:n=3", "--out", "nonexist/r.npz"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and "the directory" in p.stderr and "nonexist" in p.stderr, p.stderr
    assert ".tmp" not in p.stderr and "Traceback" not in p.stderr and os.listdir(tmp_path) == []


def test_read_only_directory_refused(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):          # root writes anywhere: let the check see what a user would
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: False if os.fspath(p) == str(ro) else real(p, mode))
    try:
        with pytest.raises(PartreeInputError, match=f"directory '{ro}' is not writable"):
            run(_never, t_end=0.1, dt=0.01, out=ro / "r.npz")
    finally:
        ro.chmod(0o700)


def test_existing_results_kept_unless_overwrite(tmp_path, chain):
    out = tmp_path / "r.npz"
    run(chain, t_end=0.02, dt=0.01, out=out)
    before = out.read_bytes()
    with pytest.raises(PartreeInputError, match="exists; use --force"):
        run(_never, t_end=0.02, dt=0.01, out=out)
    assert out.read_bytes() == before
    res = run(chain, t_end=0.03, dt=0.01, out=out, overwrite=True)
    assert np.array_equal(load_results(out).t, res.t) and len(res.t) == 4
    with pytest.raises(PartreeInputError, match="exists"):
        res.save(out)
    res.save(out, overwrite=True)


def test_model_files_are_never_overwritten(tmp_path, chain):
    files = {}
    for name in ("m.npz", "m.h5", "m.json"):
        partree.save_model(chain, tmp_path / name)
        files[name] = (tmp_path / name).read_bytes()
    urdf = tmp_path / "robot.urdf"
    urdf.write_text("<robot name='r'><link name='a'/></robot>")
    files["robot.urdf"] = urdf.read_bytes()
    for name in ("m.npz", "m.h5"):
        with pytest.raises(PartreeInputError, match="is a model file; it is never overwritten"):
            run(_never, t_end=0.02, dt=0.01, out=tmp_path / name, overwrite=True)
    for name in ("m.json", "robot.urdf", "m.npz"):
        with pytest.raises(PartreeInputError, match="is a model file"):
            run(_never, t_end=0.02, dt=0.01, checkpoint=tmp_path / name, checkpoint_every=1, overwrite=True)
    res = run(chain, t_end=0.02, dt=0.01)
    with pytest.raises(PartreeInputError, match="model file"):
        res.save(tmp_path / "m.npz", overwrite=True)
    for name, data in files.items():
        assert (tmp_path / name).read_bytes() == data, name
    # the model's own file, named as the output of its simulation
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "m.npz", "--out", "m.npz", "--force"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and "model file" in p.stderr and (tmp_path / "m.npz").read_bytes() == files["m.npz"]


def test_checkpoint_of_an_interrupted_run_is_kept_and_resumed(tmp_path, chain):
    out = tmp_path / "r.npz"
    kw = dict(t_end=0.1, dt=0.01, q0=np.full(3, 0.4))

    def stop(k, t, q, v):
        if k == 4:
            os.kill(os.getpid(), 2)
    with pytest.raises(SimulationInterrupted):
        run(chain, out=out, _step_hook=stop, **kw)
    ck = tmp_path / "r.npz.ckpt"
    assert ck.exists() and out.exists()
    # a fresh run may not replace them
    with pytest.raises(PartreeInputError, match="left a checkpoint: resume it with --resume"):
        run(_never, out=out, **kw)
    with pytest.raises(PartreeInputError, match="checkpoint .* exists; it belongs to an interrupted run"):
        run(_never, checkpoint=ck, **kw)
    # the results file of another run is not replaced by a resume
    other = tmp_path / "other.npz"
    run(chain, out=other, **dict(kw, dt=0.02))
    saved = out.read_bytes()
    shutil.copy(other, out)
    with pytest.raises(PartreeInputError, match="results of another run"):
        run(chain, out=out, resume=True, **kw)
    out.write_bytes(saved)
    ref = run(chain, **kw)
    res = run(chain, out=out, resume=True, **kw)             # its own partial results: replaced
    assert res.summary["resumed_from"] == 0.04 and np.array_equal(load_results(out).q, ref.q)
    # resume='auto' without a checkpoint is a fresh run: an existing results file is kept
    with pytest.raises(PartreeInputError, match="no checkpoint to resume"):
        run(chain, out=out, resume="auto", **kw)
    # --force starts afresh, removing an old checkpoint
    with pytest.raises(SimulationInterrupted):
        run(chain, out=out, overwrite=True, _step_hook=stop, **kw)
    res = run(chain, out=out, overwrite=True, **kw)
    assert res.summary["resumed_from"] is None and not ck.exists()
    with pytest.raises(PartreeInputError, match="same file"):
        run(_never, out=out, checkpoint=out, **kw)


def _core(args, cwd, code=None):
    """partree simulate (or a Python snippet) as on the core install: h5py and matplotlib blocked."""
    block = "import sys; sys.modules['h5py'] = None; sys.modules['matplotlib'] = None; "
    if code is None:
        code = block + "from partree.cli import main; sys.exit(main(sys.argv[1:]))"
    else:
        code = block + code
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_optional_packages_asked_for_before_any_work(tmp_path):
    p = _core(["simulate", "chain:n=3", "--out", "r.h5"], tmp_path)
    assert p.returncode == 2 and "h5py" in p.stderr and "partree[io]" in p.stderr and ".npz" in p.stderr, p.stderr
    assert "integrator" not in p.stdout and os.listdir(tmp_path) == []
    p = _core(["simulate", "chain:n=3", "--out", "r.npz", "--plot"], tmp_path)
    assert p.returncode == 2 and "matplotlib" in p.stderr and "partree[plot]" in p.stderr, p.stderr
    assert os.listdir(tmp_path) == []
    p = _core([], tmp_path, code=(
        "from partree.errors import MissingDependencyError\n"
        "from partree.simulation import simulate\n"
        "def never(): raise AssertionError('model built')\n"
        "try:\n    simulate(never, 1.0, 1e-3, out='r.h5')\n"
        "except MissingDependencyError as e:\n    print('REFUSED', e)\n"))
    assert "REFUSED" in p.stdout and "partree[io]" in p.stdout and ".npz" in p.stdout, p.stdout + p.stderr
    assert issubclass(MissingDependencyError, ImportError)


def test_builtin_job_on_the_core_install(tmp_path):
    """No h5py, no matplotlib: the built-in job writes space_robot.npz and says why there are no
    figures."""
    p = _core(["simulate", "--t-end", "1"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "matplotlib is not installed: no figures" in p.stdout and "output      space_robot.npz" in p.stdout
    assert sorted(os.listdir(tmp_path)) == ["space_robot.npz"]
    assert load_results(tmp_path / "space_robot.npz").model.name == "space_robot"


def test_figure_directory_checked_before_the_run(tmp_path):
    pytest.importorskip("matplotlib")
    figs = tmp_path / "figs"
    figs.mkdir()
    (figs / "joints.png").write_bytes(b"not ours")
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "chain:n=3", "--t-end", "0.02", "--dt", "0.01",
                        "--out", "r.npz", "--plot", "--plot-dir", "figs", "--no-progress"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and "is not empty" in p.stderr and not (tmp_path / "r.npz").exists(), p.stderr
    p = subprocess.run([sys.executable, "-m", "partree", "simulate", "chain:n=3", "--t-end", "0.02", "--dt", "0.01",
                        "--out", "r.npz", "--plot", "--plot-dir", "figs", "--no-progress", "--force"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (figs / "joints.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
