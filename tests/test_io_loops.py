"""Loops in partree's own model files (.npz, .h5/.hdf5, .json): every kind, world-ended loops,
bitwise round trips, files without loops, hand-written JSON loops, and malformed loop data."""
import json
import zipfile

import numpy as np
import pytest

import partree
from partree import Loop, ModelBuilder
from partree.errors import PartreeInputError
from partree.io import load_model, save_model
from partree.loops import KINDS
from partree.spatial import quat_to_matrix

SUFFIXES = [".npz", ".h5", ".hdf5", ".json"]


def looped_model(seed=0):
    """A small tree with one loop of every kind, one of them ended on the world, random frames."""
    rng = np.random.default_rng(seed)

    def pose():
        return quat_to_matrix(rng.normal(size=4)), rng.normal(size=3)

    b = ModelBuilder("looped", gravity=(0.0, -0.1, -9.81))
    b.add_body("base", None, "free", mass=3.0, inertia=(0.3, 0.4, 0.5))
    for k, parent in enumerate(["base", "base", "l0", "l1", "l2"]):
        b.add_body(f"l{k}", parent, "revolute", pose(), axis=rng.normal(size=3), mass=1.0 + k,
                   com=rng.normal(size=3) * 0.1, inertia=0.2)
    b.add_loop("rev", "revolute", "l3", "l4", pose(), pose(), axis=rng.normal(size=3))
    b.add_loop("pri", "prismatic", "l2", "base", pose(), pose(), axis=(1.0, 0.0, 0.0))
    b.add_loop("uni", "universal", "l0", "l1", pose(), pose(), axis=(rng.normal(size=3), rng.normal(size=3)))
    b.add_loop("sph", "spherical", "l4", None, pose(), pose())
    b.add_loop("weld", "weld", "world", "l3", pose(), pose())
    b.add_loop("rod", "distance", "l1", "l2", pose(), pose(), length=0.75)
    b.add_loop("line", "point_on_line", "l0", "l4", pose(), pose(), axis=rng.normal(size=3))
    return b.build()


def assert_same_loops(a, b):
    la, lb = a.loops, b.loops
    assert la.names == lb.names
    for key in ("kind", "body_a", "body_b", "R_a", "p_a", "R_b", "p_b", "axis", "axis2", "length", "nrows", "row0"):
        x, y = getattr(la, key), getattr(lb, key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert x.tobytes() == y.tobytes(), f"loop {key} differs"


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("compressed", [False, True])
def test_loops_round_trip_bitwise(tmp_path, suffix, compressed):
    if compressed and suffix == ".json":
        pytest.skip("JSON is not compressed")
    m = looped_model()
    assert sorted(KINDS[int(k)] for k in m.loops.kind) == sorted(KINDS)
    assert -1 in m.loops.body_a and -1 in m.loops.body_b
    path = save_model(m, tmp_path / f"m{suffix}", compressed=compressed)
    back = load_model(path)
    assert_same_loops(m, back)
    assert repr(back) == repr(m) and back.loops.nrow == 5 + 5 + 4 + 3 + 6 + 1 + 2
    for k in ("parent", "jtype", "E_tree", "r_tree", "I_com"):
        assert getattr(back, k).tobytes() == getattr(m, k).tobytes()
    # loop by loop, as partree.Loop objects with the bodies by name
    assert [repr(back.loops.loop(k, back.body_names)) for k in range(len(back.loops))] == \
        [repr(m.loops.loop(k, m.body_names)) for k in range(len(m.loops))]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_model_without_loops_is_version_1_and_loads_without_loops(tmp_path, suffix):
    m = partree.models.chain(5)
    back = load_model(save_model(m, tmp_path / f"c{suffix}"))
    assert len(back.loops) == 0 and back.loops.nrow == 0
    if suffix == ".json":
        assert json.loads((tmp_path / f"c{suffix}").read_text())["version"] == 1
    looped = load_model(save_model(looped_model(), tmp_path / f"l{suffix}"))
    assert len(looped.loops) == 7


def test_loops_of_a_four_bar_survive_and_still_close(tmp_path):
    b = ModelBuilder("four-bar")
    y = (0.0, 1.0, 0.0)
    b.add_body("crank", None, "revolute", axis=y, mass=1.0, com=(0, 0, 0.5), inertia=0.1)
    b.add_body("coupler", "crank", "revolute", placement=(0, 0, 1), axis=y, mass=2.0, com=(1, 0, 0.25), inertia=0.3)
    b.add_body("rocker", None, "revolute", placement=(2, 0, 0), axis=y, mass=1.5, com=(0, 0, 0.75), inertia=0.2)
    b.add_loop("tip", "revolute", "coupler", "rocker", placement_a=(2, 0, 0.5), placement_b=(0, 0, 1.5), axis=y)
    m = b.build()
    for suffix in SUFFIXES:
        back = load_model(save_model(m, tmp_path / f"fb{suffix}"))
        kin = partree.forward_kinematics(back, back.neutral())
        lp = back.loops
        gap = kin.p[1] + kin.R[1] @ lp.p_a[0] - kin.p[2] - kin.R[2] @ lp.p_b[0]
        assert np.abs(gap).max() < 1e-15 and lp.names == ["tip"] and lp.loop(0).kind == "revolute"


def test_json_loops_are_readable_and_may_name_their_bodies(tmp_path):
    m = looped_model()
    path = tmp_path / "m.json"
    save_model(m, path)
    doc = json.loads(path.read_text())
    assert doc["version"] == 2 and [lp["kind"] for lp in doc["loops"]] == [KINDS[int(k)] for k in m.loops.kind]
    world = next(lp for lp in doc["loops"] if lp["name"] == "weld")
    assert world["body_a"] == -1 and "length" not in world and "axis" not in world
    # a hand-written file: bodies by name, null or "world", defaults for the placements
    doc["loops"] = [{"name": "a", "kind": "spherical", "body_a": "l4", "body_b": None},
                    {"name": "b", "kind": "weld", "body_a": "world", "body_b": "l3",
                     "placement_b": {"p": [0.0, 0.0, 1.0]}},
                    {"name": "c", "kind": "revolute", "body_a": 2, "body_b": "l4", "axis": [0.0, 1.0, 0.0]}]
    path.write_text(json.dumps(doc))
    back = load_model(path)
    lp = back.loops
    assert list(lp.body_a) == [back.body_names.index("l4"), -1, 2]
    assert list(lp.body_b) == [-1, back.body_names.index("l3"), back.body_names.index("l4")]
    assert np.array_equal(lp.p_b[1], [0, 0, 1]) and np.array_equal(lp.R_a[0], np.eye(3))
    assert np.array_equal(lp.axis[2], [0, 1, 0])


def _edit_json(path, fn):
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


JSON_BAD = {
    "unknown kind": (lambda d: d["loops"][0].update(kind="hinge"), r"loop 'rev': unknown kind 'hinge'"),
    "unknown body": (lambda d: d["loops"][0].update(body_b="nope"), r"loop 'rev': body_b 'nope' is not a body"),
    "body number": (lambda d: d["loops"][0].update(body_a=99), r"loop 'rev': body_a 99 does not exist"),
    "to itself": (lambda d: d["loops"][0].update(body_b=d["loops"][0]["body_a"]), r"loop 'rev' joins body"),
    "twice": (lambda d: d["loops"][1].update(name="rev"), r"loop name 'rev' used twice"),
    "rotation": (lambda d: d["loops"][0]["placement_a"].update(R=[[1, 0, 0], [0, 1, 0], [0, 0, 2]]),
                 r"loop 'rev': R_a is not a rotation"),
    "axis": (lambda d: d["loops"][0].update(axis=[0, 0, 2]), r"loop 'rev': axis is not a unit vector"),
    "length": (lambda d: d["loops"][5].update(length=-1.0), r"loop 'rod': a distance loop needs a length > 0"),
    "missing": (lambda d: d["loops"][0].pop("body_a"), r"loop 0: missing 'body_a'"),
    "not numeric": (lambda d: d["loops"][0]["placement_b"].update(p=[0, "x", 0]), r"loop 'rev': placement_b p"),
    "not a list": (lambda d: d.update(loops={"a": 1}), r"'loops' must be a list"),
    "old version": (lambda d: d.update(version=1), r"has loops but format version 1"),
}


@pytest.mark.parametrize("case", list(JSON_BAD))
def test_malformed_json_loops_are_refused(tmp_path, case):
    path = tmp_path / "m.json"
    save_model(looped_model(), path)
    fn, pattern = JSON_BAD[case]
    _edit_json(path, fn)
    with pytest.raises(PartreeInputError, match=rf"m\.json: .*{pattern}"):
        load_model(path)


def _rewrite_npz(path, fn):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["meta"].tobytes().decode())
    fn(meta, arrays)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _set(arrays, key, k, value):
    a = arrays[key].copy()
    a[k] = value
    arrays[key] = a


NPZ_BAD = {
    "missing array": (lambda m, a: a.pop("loop_p_b"), r"array 'loop_p_b' is missing"),
    "wrong dtype": (lambda m, a: a.update(loop_body_a=a["loop_body_a"].astype(np.int32)), r"'loop_body_a' has dtype"),
    "wrong length": (lambda m, a: a.update(loop_length=a["loop_length"][:2]), r"'loop_length' has dtype .* shape"),
    "names and kinds": (lambda m, a: m["loops"]["kinds"].pop(), r"bad loop description"),
    "kind": (lambda m, a: m["loops"]["kinds"].__setitem__(0, "hinge"), r"loop 'rev': unknown kind 'hinge'"),
    "body": (lambda m, a: _set(a, "loop_body_b", 0, 6), r"loop 'rev': body_b 6 does not exist"),
    "below world": (lambda m, a: _set(a, "loop_body_a", 1, -2), r"loop 'pri': body_a -2 does not exist"),
    "not finite": (lambda m, a: _set(a, "loop_p_a", 3, np.nan), r"loop 'sph': p_a is not finite"),
    "reflection": (lambda m, a: _set(a, "loop_R_b", 2, -np.eye(3)), r"loop 'uni': R_b is not a rotation"),
    "axis2": (lambda m, a: _set(a, "loop_axis2", 2, 0.0), r"loop 'uni': axis2 is not a unit vector"),
    "version 1": (lambda m, a: m.update(version=1), r"has loops but format version 1"),
}


@pytest.mark.parametrize("case", list(NPZ_BAD))
def test_malformed_binary_loops_are_refused(tmp_path, case):
    path = tmp_path / "m.npz"
    save_model(looped_model(), path)
    fn, pattern = NPZ_BAD[case]
    _rewrite_npz(path, fn)
    with pytest.raises(PartreeInputError, match=rf"m\.npz: .*{pattern}"):
        load_model(path)


def test_h5_loop_datasets(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = save_model(looped_model(), tmp_path / "m.h5")
    with h5py.File(path, "r") as f:
        meta = json.loads(f.attrs["meta"])
        assert meta["version"] == 2 and meta["loops"]["names"] == ["rev", "pri", "uni", "sph", "weld", "rod", "line"]
        assert f["loop_R_a"].shape == (7, 3, 3) and f["loop_body_a"].dtype == np.int64
    with h5py.File(path, "a") as f:
        del f["loop_axis"]
    with pytest.raises(PartreeInputError, match="array 'loop_axis' is missing"):
        load_model(path)


def test_npz_with_loops_is_a_plain_zip(tmp_path):
    path = save_model(looped_model(), tmp_path / "m.npz")
    with zipfile.ZipFile(path) as z:
        assert {f"loop_{k}.npy" for k in ("body_a", "R_a", "p_b", "length")} <= set(z.namelist())


def test_with_loops_then_saved(tmp_path):
    m = partree.models.chain(4)
    m2 = m.with_loops([Loop("close", "spherical", 3, None, placement_a=(0.0, 0.0, 0.5))])
    back = load_model(save_model(m2, tmp_path / "c.npz"))
    assert_same_loops(m2, back)
    assert len(load_model(save_model(m, tmp_path / "plain.npz")).loops) == 0
