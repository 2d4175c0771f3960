"""Results files describe themselves (units, the joint and component of every column, version,
command line, options), load_results reads every format version, and refuses a truncated file, a
model file and a file that is not partree's with a clear PartreeInputError."""
import json

import numpy as np
import pytest

import partree
from partree.errors import PartreeInputError
from partree.simulation import load_results, simulate
from partree.simulation.results import describe_columns

h5py = pytest.importorskip("h5py")


@pytest.fixture(scope="module")
def robot_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("res")
    m = partree.models.space_robot()
    rng = np.random.default_rng(0)
    kw = dict(qd0=m.random_velocity(rng, 0.3), record="all", progress=False, verbose=False,
              command=["partree", "simulate", "--t-end", "0.05"])
    runs = {sfx: simulate(m, 0.05, 0.01, out=d / f"r{sfx}", **kw) for sfx in (".h5", ".npz")}
    return m, d, runs


BASE_Q = ["m", "m", "m", "1", "1", "1", "1"]
BASE_V = ["m/s"] * 3 + ["rad/s"] * 3


def test_columns_and_units_of_a_floating_robot(robot_run):
    m, d, runs = robot_run
    c = describe_columns(m)
    assert list(c["q_joint"][:8]) == ["base"] * 7 + ["L11"] and list(c["q_index"][:8]) == [0, 1, 2, 3, 4, 5, 6, 0]
    assert list(c["q_units"][:8]) == BASE_Q + ["rad"]
    assert list(c["qd_units"][:7]) == BASE_V + ["rad/s"]
    assert list(c["qdd_units"][:7]) == ["m/s^2"] * 3 + ["rad/s^2"] * 4
    assert list(c["tau_units"][:7]) == ["N"] * 3 + ["N m"] * 4
    assert list(c["v_joint"][:7]) == ["base"] * 6 + ["L11"] and c["q_slices"][1].tolist() == [7, 8]
    assert list(c["joint_types"][:2]) == ["free", "revolute"] and c["v_slices"][1].tolist() == [6, 7]
    p = partree.models.chain(2, joint="prismatic")
    cp = describe_columns(p)
    assert list(cp["q_units"]) == ["m", "m"] and list(cp["tau_units"]) == ["N", "N"]
    u = describe_columns(partree.models.chain(1, joint="universal"))
    assert list(u["q_units"]) == ["rad", "rad"] and list(u["q_index"]) == [0, 1]
    s = describe_columns(partree.models.chain(1, joint="spherical"))
    assert list(s["q_units"]) == ["1"] * 4 and list(s["qd_units"]) == ["rad/s"] * 3


def test_files_describe_themselves(robot_run):
    m, d, runs = robot_run
    with h5py.File(d / "r.h5") as f:
        assert f.attrs["format"] == "partree-simulation" and int(f.attrs["format_version"]) == 2
        assert f.attrs["partree_version"] == partree.__version__
        assert json.loads(f.attrs["command"]) == ["partree", "simulate", "--t-end", "0.05"]
        opts = json.loads(f.attrs["options"])
        assert opts["integrator"] == "rk4" and opts["dt"] == 0.01 and opts["model"] == "space_robot"
        assert f["t"].attrs["units"] == "s" and f["energy"].attrs["units"] == "J"
        assert [x.decode() for x in f["q"].attrs["units"][:8]] == BASE_Q + ["rad"]
        assert [x.decode() for x in f["joint_wrench"].attrs["units"]] == ["N m"] * 3 + ["N"] * 3
        assert [x.decode() for x in f["q_joint"][:8]] == ["base"] * 7 + ["L11"]
        assert [x.decode() for x in f["tau_units"][:7]] == ["N"] * 3 + ["N m"] * 4
        assert json.loads(f.attrs["units"])["t"] == "s"
        assert {"q_index", "v_joint", "v_index", "joint_names", "q_slices", "v_slices", "wrench_joints"} <= set(f)
    with np.load(d / "r.npz") as z:
        meta = json.loads(bytes(z["meta"]).decode())
        assert meta["format_version"] == 2 and meta["command"][0] == "partree"
        assert list(z["q_units"][:8]) == BASE_Q + ["rad"] and list(z["q_joint"][:7]) == ["base"] * 7
        assert meta["units"]["qd"][:6] == BASE_V
    for sfx, r in runs.items():
        back = load_results(d / f"r{sfx}")
        for k in ("t", "q", "qd", "qdd", "tau", "joint_wrench", "energy"):
            assert np.array_equal(getattr(back, k), getattr(r, k)), (sfx, k)
        assert back.format_version == 2 and back.command == ["partree", "simulate", "--t-end", "0.05"]
        assert back.partree_version == partree.__version__
        assert list(back.columns["q_units"]) == list(describe_columns(m)["q_units"])
        assert list(back.units["q"][:7]) == BASE_Q and back.units["t"] == "s"
        assert back.options_fingerprint == r.options_fingerprint and back.model_fingerprint == r.model_fingerprint


def _model_blob(model, tmp_path):
    p = tmp_path / "blob.npz"
    partree.save_model(model, p)
    return np.frombuffer(p.read_bytes(), dtype=np.uint8)


def test_version_1_files_load(robot_run, tmp_path):
    """Files of format version 1 (no column descriptions, no version, no command)."""
    m, d, runs = robot_run
    r = runs[".npz"]
    series = {k: getattr(r, k) for k in ("t", "q", "qd", "energy", "kinetic", "potential")}
    meta = {"format": "partree-simulation", "options": r.options, "summary": r.summary,
            "model_fingerprint": r.model_fingerprint, "wrench_joints": [], "model_name": "space_robot",
            "partree_version": "0.1.0"}
    blob = _model_blob(m, tmp_path)
    np.savez(tmp_path / "v1.npz", meta=np.frombuffer(json.dumps(meta, default=str).encode(), dtype=np.uint8),
             model_npz=blob, **series)
    with h5py.File(tmp_path / "v1.h5", "w") as f:
        for k, a in series.items():
            f.create_dataset(k, data=a)
        f.create_dataset("model_npz", data=blob)
        for k, v in meta.items():
            f.attrs[k] = json.dumps(v, default=str) if isinstance(v, (dict, list)) else v
    for name in ("v1.npz", "v1.h5"):
        back = load_results(tmp_path / name)
        assert back.format_version == 1 and back.command is None and back.options_fingerprint is None
        assert np.array_equal(back.q, r.q) and back.options["integrator"] == "rk4"
        assert list(back.columns["q_units"][:7]) == BASE_Q            # derived from the stored model
        assert back.units["qd"][:6].tolist() == BASE_V
        assert back.model.name == "space_robot"


def _refused(path, match):
    with pytest.raises(PartreeInputError, match=match) as info:
        load_results(path)
    assert type(info.value) is PartreeInputError         # never a raw OSError / EOFError / KeyError
    return info.value


def test_truncated_model_and_foreign_files_refused_clearly(robot_run, tmp_path):
    m, d, runs = robot_run
    for sfx in (".h5", ".npz"):
        data = (d / f"r{sfx}").read_bytes()
        for cut in (len(data) // 2, 100, 9):
            (tmp_path / f"cut{sfx}").write_bytes(data[:cut])
            _refused(tmp_path / f"cut{sfx}", "truncated or corrupt")
        (tmp_path / f"empty{sfx}").write_bytes(b"")
        _refused(tmp_path / f"empty{sfx}", "empty")
    for name in ("m.npz", "m.h5", "m.json"):
        partree.save_model(m, tmp_path / name)
        _refused(tmp_path / name, "this is a model file, not simulation results")
    (tmp_path / "r.urdf").write_text("<robot name='r'/>")
    _refused(tmp_path / "r.urdf", "this is a model file")
    np.savez(tmp_path / "plain.npz", x=np.arange(3))
    _refused(tmp_path / "plain.npz", "not a partree simulation results file")
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f.create_dataset("x", data=np.arange(3))
    _refused(tmp_path / "plain.h5", "not a partree simulation results file")
    (tmp_path / "text.h5").write_text("hello")
    _refused(tmp_path / "text.h5", "not an HDF5 file")
    (tmp_path / "text.npz").write_text("hello")
    _refused(tmp_path / "text.npz", "not an .npz archive")
    (tmp_path / "doc.json").write_text('{"a": 1}')
    _refused(tmp_path / "doc.json", "not a partree results file")
    (tmp_path / "notes.txt").write_text("hello")
    _refused(tmp_path / "notes.txt", "not a partree results file")
    np.savez(tmp_path / "newer.npz", meta=np.frombuffer(json.dumps({"format": "partree-simulation",
                                                                    "format_version": 99}).encode(), dtype=np.uint8))
    _refused(tmp_path / "newer.npz", "newer than this partree reads")
    (tmp_path / "dir.npz").mkdir()
    _refused(tmp_path / "dir.npz", "directory")
    with pytest.raises(FileNotFoundError, match="no results file"):
        load_results(tmp_path / "missing.h5")
