"""Checkpoints: atomic, resumable bit for bit, refused when corrupt or mismatched."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import partree
from partree.simulation import CheckpointError, load_results, simulate

MODEL = "chain:n=4,alternate=true"


def run(**kw):
    kw.setdefault("progress", False)
    kw.setdefault("verbose", False)
    return simulate(partree.resolve_model(MODEL), **kw)


def _interrupt_after(k_stop):
    class Stop(Exception):
        pass

    def hook(k, t, q, v):
        if k == k_stop:
            raise Stop
    return Stop, hook


@pytest.mark.parametrize("integ", ["rk4", "dopri5", "dop853"])
def test_resume_equals_uninterrupted(tmp_path, integ):
    kw = dict(t_end=0.5, dt=0.01, integrator=integ, rtol=1e-9, atol=1e-11, q0=np.full(4, 0.4), save_every=2)
    ref = run(**kw)
    out = tmp_path / "r.npz"
    Stop, hook = _interrupt_after(17)
    with pytest.raises(Stop):
        run(out=out, checkpoint_every=5, _step_hook=hook, **kw)
    assert os.path.exists(str(out) + ".ckpt") and not out.exists()
    res = run(out=out, checkpoint_every=5, resume=True, **kw)
    assert res.summary["resumed_from"] > 0
    for k in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(res, k), getattr(ref, k)), k      # bit for bit
    assert not os.path.exists(str(out) + ".ckpt")                       # cleaned up


def test_corrupt_and_mismatched_checkpoints_refused(tmp_path):
    kw = dict(t_end=0.3, dt=0.01, q0=np.full(4, 0.4))
    ck = tmp_path / "c.ckpt"
    Stop, hook = _interrupt_after(12)
    with pytest.raises(Stop):
        run(checkpoint=ck, checkpoint_every=5, _step_hook=hook, **kw)
    # different options
    with pytest.raises(CheckpointError, match="different options.*dt"):
        run(checkpoint=ck, resume=True, **dict(kw, dt=0.02))
    # different model
    with pytest.raises(CheckpointError, match="different model"):
        simulate("chain:n=4", checkpoint=ck, resume=True, progress=False, verbose=False, **kw)
    # different inputs
    with pytest.raises(CheckpointError, match="different options"):
        run(checkpoint=ck, resume=True, damping=0.1, **kw)
    # corrupt: flip bytes in the middle of the file
    data = bytearray(ck.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0xFF
    ck.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        run(checkpoint=ck, resume=True, **kw)
    # truncated
    ck.write_bytes(bytes(data[:100]))
    with pytest.raises(CheckpointError, match="corrupt"):
        run(checkpoint=ck, resume=True, **kw)
    # missing
    ck.unlink()
    with pytest.raises(CheckpointError, match="no checkpoint"):
        run(checkpoint=ck, resume=True, **kw)


CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    import partree
    from partree.simulation import simulate
    def slow(k, t, q, v):
        time.sleep(0.004)
    simulate(partree.resolve_model({model!r}), t_end=2.0, dt=0.002, integrator="rk4", q0=np.full(4, 0.4),
             out={out!r}, checkpoint_every=50, save_every=5, progress=False, verbose=False, _step_hook=slow)
""")


def test_sigkill_then_resume_matches(tmp_path):
    out = str(tmp_path / "run.h5")
    ck = out + ".ckpt"
    p = subprocess.Popen([sys.executable, "-c", CHILD.format(model=MODEL, out=out)])
    try:
        deadline = time.time() + 60
        # wait for the second checkpoint (a segment 2 exists), then kill -9 mid-interval
        while not os.path.exists(ck + ".seg000002.npz"):
            assert p.poll() is None, "the child run ended before it was killed"
            assert time.time() < deadline
            time.sleep(0.02)
        time.sleep(0.1)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == -signal.SIGKILL
    assert not os.path.exists(out)
    res = simulate(partree.resolve_model(MODEL), t_end=2.0, dt=0.002, integrator="rk4", q0=np.full(4, 0.4),
                   out=out, checkpoint_every=50, save_every=5, resume=True, progress=False, verbose=False)
    lost = 0.002 * 50
    assert 0 < res.summary["resumed_from"] and 2.0 - res.summary["resumed_from"] > lost
    ref = simulate(partree.resolve_model(MODEL), t_end=2.0, dt=0.002, integrator="rk4", q0=np.full(4, 0.4),
                   save_every=5, progress=False, verbose=False)
    back = load_results(out)
    for k in ("t", "q", "qd", "energy"):
        assert np.array_equal(getattr(back, k), getattr(ref, k)), k
