"""Native model files (.npz, .h5/.hdf5, .json): exact round trips, names, versions, errors."""
import json
import re
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import partree
from partree import joints as J
from partree.io import FORMAT_VERSION, load, load_model, load_urdf, save_model
from partree.model import JointNames, Model, PartreeInputError
from partree.models import auto_tree, scissor_mast
from partree.spatial import quat_to_matrix

DATA = Path(__file__).parent / "data"
ARRAYS = ("parent", "jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com", "gravity")
SUFFIXES = [".npz", ".h5", ".hdf5", ".json"]


def mixed_model(n=12, seed=0, names=True):
    """Every joint type, random placements and inertias, full-precision floats."""
    rng = np.random.default_rng(seed)
    parent = np.array([-1] + [int(rng.integers(-1, i)) for i in range(1, n)])
    jtype = np.arange(n) % len(J.NAMES)
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    axis2 = np.zeros((n, 3))
    uni = jtype == J.UNIVERSAL
    a2 = rng.normal(size=(n, 3))
    axis2[uni] = (a2 / np.linalg.norm(a2, axis=1, keepdims=True))[uni]
    E = np.array([quat_to_matrix(rng.normal(size=4)).T for _ in range(n)])
    r = rng.normal(size=(n, 3))
    mass = rng.uniform(0.1, 3.0, n)
    com = rng.normal(scale=0.1, size=(n, 3))
    Icom = np.empty((n, 3, 3))
    for i in range(n):
        R = quat_to_matrix(rng.normal(size=4))
        Icom[i] = R @ np.diag(rng.uniform(0.5, 1.0, 3)) @ R.T
    jn = [f"joint-{i}-é" for i in range(n)] if names else None
    bn = [f"link {i}" for i in range(n)] if names else None
    return Model(parent, jtype, axis, E, r, mass, com, Icom, axis2=axis2, gravity=(0.1, -0.2, -9.80665),
                 joint_names=jn, body_names=bn, name="mixed")


def assert_same(a, b):
    for k in ARRAYS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert x.tobytes() == y.tobytes(), f"{k} differs"
    assert a.name == b.name and a.allow_massless == b.allow_massless and a.inertia_policy == b.inertia_policy
    for key in ("joint_names", "body_names"):
        na, nb = getattr(a, key), getattr(b, key)
        assert (na.explicit is None) == (nb.explicit is None), key
        assert na.prefix == nb.prefix
        assert list(na) == list(nb), key
    assert a.nq == b.nq and a.nv == b.nv
    assert (a.units is None) == (b.units is None)
    if a.units is not None:
        assert b.units.dtype == np.int64 and b.units.tobytes() == a.units.tobytes()


def with_units(m, labels):
    """m with unit labels (validated by the Model)."""
    return Model(m.parent, m.jtype, m.axis, m.E_tree, m.r_tree, m.mass, m.com, m.I_com, axis2=m.axis2,
                 gravity=m.gravity, joint_names=m.joint_names, body_names=m.body_names, name=m.name,
                 units=labels)


MODELS = {
    "mixed": lambda: mixed_model(),
    "mixed-generated-names": lambda: mixed_model(9, seed=3, names=False),
    "autotree": lambda: auto_tree(50, bf=2, skew=0.1, taper=0.95),
    "arm7-urdf": lambda: load_urdf(DATA / "arm7.urdf"),
    "branching-urdf-floating": lambda: load_urdf(DATA / "branching.urdf", floating_base=True),
    "scissor-units": lambda: scissor_mast(4, hub_mass=0.1),
    "autotree-units": lambda: with_units(auto_tree(15, bf=2), [-5, -5, 9, -5, 3, 9, 9, 0, 2, 3, 3, 6, 9, 7, 8]),
}


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("which", list(MODELS))
def test_round_trip_is_exact(tmp_path, which, suffix):
    m = MODELS[which]()
    path = tmp_path / f"model{suffix}"
    assert save_model(m, path) == str(path)
    back = load_model(path)
    assert_same(m, back)
    assert_same(m, load(path))
    assert (back.units is None) == (which not in ("scissor-units", "autotree-units"))


@pytest.mark.parametrize("suffix", [".npz", ".h5"])
def test_compressed_round_trip(tmp_path, suffix):
    m = mixed_model(30, seed=5)
    plain, packed = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    save_model(m, plain)
    save_model(m, packed, compressed=True)
    assert_same(m, load_model(packed))
    big = auto_tree(20000, bf=2)
    save_model(big, plain)
    save_model(big, packed, compressed=True)
    assert packed.stat().st_size < plain.stat().st_size
    assert_same(big, load_model(packed))


def test_dynamics_identical_after_round_trip(tmp_path):
    m = load_urdf(DATA / "branching.urdf", floating_base=True)
    save_model(m, tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    q = m.random_configuration(1)
    qd = m.random_velocity(2)
    tau = m.random_velocity(3)
    assert partree.aba(m, q, qd, tau).tobytes() == partree.aba(back, q, qd, tau).tobytes()


@pytest.mark.parametrize("suffix", [".npz", ".h5"])
def test_generated_names_are_not_materialised(tmp_path, suffix):
    n = 50_000
    m = auto_tree(n, bf=3)
    m.joint_names = JointNames(n, None, "hinge_")
    path = tmp_path / f"big{suffix}"
    save_model(m, path)
    if suffix == ".npz":
        with np.load(path) as z:
            assert not any("names" in k for k in z.files)
    else:
        import h5py

        with h5py.File(path) as f:
            assert not any("names" in k for k in f.keys())
    # the arrays only (257 bytes per body) and a little metadata; nothing per name
    per_body = sum(getattr(m, k)[0].nbytes for k in ARRAYS if k != "gravity")
    assert per_body == 257
    assert path.stat().st_size < per_body * n + 64 * 1024
    back = load_model(path)
    assert back.joint_names.explicit is None and back.body_names.explicit is None
    assert back.joint_names.prefix == "hinge_" and back.joint_names[n - 1] == f"hinge_{n - 1}"
    assert back.joint_id(f"hinge_{n - 1}") == n - 1
    assert back.parent.tobytes() == m.parent.tobytes()


def test_json_is_readable(tmp_path):
    m = load_urdf(DATA / "arm7.urdf")
    path = tmp_path / "arm.json"
    save_model(m, path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "partree-model" and doc["version"] == 1      # version 2 only for a model with loops
    b = doc["bodies"][2]
    assert b["name"] == "joint3" and b["body"] == "link3" and b["parent"] == 1 and b["type"] == "revolute"
    assert set(b) >= {"name", "parent", "type", "axis", "placement", "inertia"}
    assert set(b["placement"]) == {"E", "r"} and set(b["inertia"]) == {"mass", "com", "I_com"}
    # one body per line
    assert len(path.read_text().splitlines()) >= m.n


def test_json_hand_written_with_defaults_and_parent_names(tmp_path):
    doc = {"format": "partree-model", "version": 1, "name": "hand",
           "bodies": [
               {"name": "shoulder", "parent": -1, "type": "revolute", "axis": [0, 0, 1],
                "inertia": {"mass": 2, "com": [0.1, 0, 0], "I_com": [[0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]]}},
               {"name": "elbow", "parent": "shoulder", "type": "revolute", "axis": [0, 0, 1],
                "placement": {"r": [0.5, 0, 0]},
                "inertia": {"mass": 1, "I_com": [[0.05, 0, 0], [0, 0.05, 0], [0, 0, 0.05]]}},
           ]}
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(doc))
    m = load_model(path)
    assert list(m.parent) == [-1, 0] and list(m.joint_names) == ["shoulder", "elbow"]
    np.testing.assert_array_equal(m.E_tree[1], np.eye(3))
    np.testing.assert_array_equal(m.r_tree[1], [0.5, 0, 0])
    np.testing.assert_array_equal(m.gravity, [0, 0, -9.81])


# ---------------------------------------------------------------------- errors
def test_unknown_suffix_and_missing_file(tmp_path):
    m = auto_tree(3)
    with pytest.raises(PartreeInputError, match="suffix"):
        save_model(m, tmp_path / "m.pkl")
    with pytest.raises(PartreeInputError, match="suffix"):
        load_model(tmp_path / "m.txt")
    with pytest.raises(PartreeInputError, match="no such model file"):
        load_model(tmp_path / "missing.npz")
    with pytest.raises(PartreeInputError, match="Model"):
        save_model("autotree:nb=3", tmp_path / "m.npz")


def _rewrite_npz(src, dst, edit):
    with np.load(src) as z:
        d = {k: z[k] for k in z.files}
    edit(d)
    with open(dst, "wb") as fh:
        np.savez(fh, **d)


def _set_meta(d, **kw):
    meta = json.loads(d["meta"].tobytes())
    meta.update(kw)
    d["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)


NPZ_CORRUPTIONS = {
    "future-version": (lambda d: _set_meta(d, version=FORMAT_VERSION + 1),
                       f"version {FORMAT_VERSION + 1} is not supported"),
    "string-version": (lambda d: _set_meta(d, version="1"), "bad format version"),
    "foreign-format": (lambda d: _set_meta(d, format="other"), "not a partree model file"),
    "no-meta": (lambda d: d.pop("meta"), "not a partree model file"),
    "missing-array": (lambda d: d.pop("I_com"), "'I_com' is missing"),
    "wrong-shape": (lambda d: d.__setitem__("com", d["com"][:, :2].copy()), "'com'"),
    "wrong-dtype": (lambda d: d.__setitem__("parent", d["parent"].astype(np.int32)), "'parent'"),
    "bad-parent": (lambda d: d["parent"].__setitem__(1, 5), "regular numbering"),
    "bad-jtype": (lambda d: d["jtype"].__setitem__(0, 42), "joint type"),
    "bad-count": (lambda d: _set_meta(d, n=-3), "body count"),
    "bad-names": (lambda d: d.__setitem__("joint_names_offsets", d["joint_names_offsets"][::-1].copy()),
                  "name table"),
    "negative-mass": (lambda d: d["mass"].__setitem__(2, -1.0), "non-positive mass"),
}


@pytest.mark.parametrize("case", list(NPZ_CORRUPTIONS))
def test_corrupt_npz_is_refused(tmp_path, case):
    edit, needle = NPZ_CORRUPTIONS[case]
    good = tmp_path / "good.npz"
    save_model(mixed_model(6), good)
    bad = tmp_path / "bad.npz"
    _rewrite_npz(good, bad, edit)
    with pytest.raises(PartreeInputError, match=needle) as ei:
        load_model(bad)
    assert str(bad) in str(ei.value)


def test_validation_can_be_skipped(tmp_path):
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    save_model(mixed_model(6), good)
    _rewrite_npz(good, bad, lambda d: d["mass"].__setitem__(2, -1.0))
    assert load_model(bad, validate=False).mass[2] == -1.0   # structural checks only


TRIANGLE_URDF = ('<robot name="tri"><link name="a"/><link name="b"><inertial><mass value="1"/>'
                 '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="5"/></inertial></link>'
                 '<joint name="j" type="revolute"><parent link="a"/><child link="b"/></joint></robot>')


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_inertia_policy_is_kept_in_the_file(tmp_path, suffix):
    """A model read from a URDF under 'warn' reads back under 'warn' (with the file named in the
    warning); the caller can ask for 'strict'; files that store no policy read as 'strict'."""
    with pytest.warns(partree.PartreeInertiaWarning):
        m = load_urdf(TRIANGLE_URDF)
    path = tmp_path / f"tri{suffix}"
    save_model(m, path)
    with pytest.warns(partree.PartreeInertiaWarning, match=f"(?s)^{re.escape(str(path))}: .*body 0 \\(b\\)") as rec:
        back = load_model(path)
    assert len(rec) == 1 and rec[0].filename == __file__
    assert_same(m, back)
    with pytest.raises(PartreeInputError, match=f"^{re.escape(str(path))}: body 0 \\(b\\) has an invalid"):
        load_model(path, inertia="strict")
    with pytest.raises(PartreeInputError, match="inertia='loose'"):
        load_model(path, inertia="loose")
    with pytest.warns(partree.PartreeInertiaWarning, match="balanced"):
        fixed = load_model(path, inertia="fix")
    save_model(fixed, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_model(path, inertia="strict")
    if suffix == ".npz":
        old = tmp_path / "old.npz"
        save_model(m, path)
        _rewrite_npz(path, old, lambda d: _set_meta(d, inertia_policy="strict"))
        with pytest.raises(PartreeInputError, match="invalid rotational inertia"):
            load_model(old)
        def drop(d):
            meta = json.loads(d["meta"].tobytes())
            del meta["inertia_policy"]
            d["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        _rewrite_npz(path, old, drop)
        with pytest.raises(PartreeInputError, match="invalid rotational inertia"):
            load_model(old)


def test_garbage_files_are_refused(tmp_path):
    for name, content in (("g.npz", b"not a zip at all"), ("g.h5", b"\x00" * 64), ("g.json", b"{ nope")):
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(PartreeInputError) as ei:
            load_model(p)
        assert str(p) in str(ei.value)
    p = tmp_path / "plain.npz"
    np.savez(p, x=np.arange(3))
    with pytest.raises(PartreeInputError, match="not a partree model file"):
        load_model(p)
    p = tmp_path / "list.json"
    p.write_text("[1, 2]")
    with pytest.raises(PartreeInputError, match="not a partree model file"):
        load_model(p)


def test_corrupt_h5_is_refused(tmp_path):
    h5py = pytest.importorskip("h5py")
    p = tmp_path / "m.h5"
    save_model(mixed_model(5), p)
    with h5py.File(p, "r+") as f:
        meta = json.loads(f.attrs["meta"])
        meta["version"] = 99
        f.attrs["meta"] = json.dumps(meta)
    with pytest.raises(PartreeInputError, match="version 99 is not supported"):
        load_model(p)
    p2 = tmp_path / "nometa.h5"
    with h5py.File(p2, "w") as f:
        f["parent"] = np.array([-1])
    with pytest.raises(PartreeInputError, match="not a partree model file"):
        load_model(p2)
    p3 = tmp_path / "m3.hdf5"
    save_model(mixed_model(5), p3)
    with h5py.File(p3, "r+") as f:
        del f["E_tree"]
    with pytest.raises(PartreeInputError, match="'E_tree' is missing"):
        load_model(p3)


JSON_CORRUPTIONS = {
    "future-version": (lambda d: d.__setitem__("version", 7), "version 7 is not supported"),
    "no-format": (lambda d: d.pop("format"), "not a partree model file"),
    "no-bodies": (lambda d: d.__setitem__("bodies", []), "non-empty list"),
    "string-number": (lambda d: d["bodies"][1]["inertia"].__setitem__("mass", "1.0"), "not numeric"),
    "string-in-list": (lambda d: d["bodies"][0].__setitem__("axis", [0, "1", 0]), "not numeric"),
    "short-axis": (lambda d: d["bodies"][0].__setitem__("axis", [0, 1]), "shape"),
    "unknown-type": (lambda d: d["bodies"][0].__setitem__("type", "ball"), "unknown joint type"),
    "bad-parent-name": (lambda d: d["bodies"][1].__setitem__("parent", "nobody"), "not an earlier body"),
    "later-parent": (lambda d: d["bodies"][0].__setitem__("parent", 3), "regular numbering"),
    "n-mismatch": (lambda d: d.__setitem__("n", 99), "n = 99"),
    "missing-inertia": (lambda d: d["bodies"][2].pop("inertia"), "missing 'inertia'"),
}


@pytest.mark.parametrize("case", list(JSON_CORRUPTIONS))
def test_corrupt_json_is_refused(tmp_path, case):
    edit, needle = JSON_CORRUPTIONS[case]
    p = tmp_path / "m.json"
    save_model(mixed_model(6), p)
    doc = json.loads(p.read_text())
    edit(doc)
    p.write_text(json.dumps(doc))
    with pytest.raises(PartreeInputError, match=needle) as ei:
        load_model(p)
    assert str(p) in str(ei.value)


def test_units_files(tmp_path):
    """Units travel in every format, keep the engine's partition, and bad units are refused."""
    from partree.parallel.partition import partition

    m = scissor_mast(6)
    for suffix in (".npz", ".h5", ".json"):
        back = load_model(save_model(m, tmp_path / f"m{suffix}"))
        assert back.units.tolist() == m.units.tolist()
        assert np.array_equal(partition(back, 4).roots, partition(m, 4).roots)
    doc = json.loads((tmp_path / "m.json").read_text())
    assert [b["unit"] for b in doc["bodies"]] == m.units.tolist()
    # JSON: a unit for some bodies only; not an integer; a unit that is not connected
    for edit, needle in ((lambda d: d["bodies"][3].pop("unit"), "'unit' is given for some bodies only"),
                         (lambda d: d["bodies"][3].__setitem__("unit", "1"), "not an integer"),
                         (lambda d: d["bodies"][3].__setitem__("unit", 0), "unit 0 is not connected")):
        d = json.loads(json.dumps(doc))
        edit(d)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(d))
        with pytest.raises(PartreeInputError, match=needle) as ei:
            load_model(p)
        assert str(p) in str(ei.value)
    # npz: wrong dtype, wrong length, not connected
    for edit, needle in ((lambda d: d.__setitem__("units", d["units"].astype(np.int32)), "'units' has dtype int32"),
                         (lambda d: d.__setitem__("units", d["units"][:-1].copy()), "'units'"),
                         (lambda d: d["units"].__setitem__(4, 0), "unit 0 is not connected")):
        _rewrite_npz(tmp_path / "m.npz", tmp_path / "bad.npz", edit)
        with pytest.raises(PartreeInputError, match=needle):
            load_model(tmp_path / "bad.npz")
    # a file without units (as written before units existed) loads as a model without units
    _rewrite_npz(tmp_path / "m.npz", tmp_path / "old.npz", lambda d: d.pop("units"))
    assert load_model(tmp_path / "old.npz").units is None
    with np.load(save_model(auto_tree(5), tmp_path / "plain.npz")) as z:
        assert "units" not in z.files
    assert "unit" not in json.loads(Path(save_model(auto_tree(5), tmp_path / "plain.json")).read_text())["bodies"][0]


def test_missing_h5py_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)   # makes `import h5py` fail
    with pytest.raises(ImportError, match="pip install h5py"):
        save_model(auto_tree(3), tmp_path / "m.h5")
    # the other formats don't need it
    save_model(auto_tree(3), tmp_path / "m.npz")


def test_npz_is_a_plain_zip_of_arrays(tmp_path):
    """No pickles: the file loads with allow_pickle=False and holds only .npy members."""
    p = tmp_path / "m.npz"
    save_model(mixed_model(4), p)
    with zipfile.ZipFile(p) as z:
        assert all(name.endswith(".npy") for name in z.namelist())
    with np.load(p, allow_pickle=False) as z:
        assert z["parent"].dtype == np.int64


# ---------------------------------------------------------------------- flexible bodies
def flexible_model():
    """Flexible bodies of different mode counts, with damping, geometric stiffening, two nodes on
    one body, flexible and rigid children of flexible parents, explicit names and a loop."""
    from partree.flexible import FlexibleBody
    from partree.models.beam import euler_bernoulli_beam

    L = 0.8
    b3, mass, com, I_com = euler_bernoulli_beam(L, 50.0, 2.0, 3, bending="yz", polar=1e-3, damping_ratio=0.02,
                                                name="three")
    b2 = euler_bernoulli_beam(L, 80.0, 2.0, 2, bending="y", polar=1e-3, stiffening=True, name="two")[0]
    rng = np.random.default_rng(4)
    mid = (np.array([L / 2, 0.0, 0.0]), rng.normal(size=(3, 3)), rng.normal(size=(3, 3)))
    b3m = FlexibleBody(b3.first, b3.xphi, b3.phiphi, b3.stiffness, b3.damping, {**b3.nodes, "mid": mid}, "three mid")
    parent = [-1, 0, 1, 0, -1, 4]
    r = np.array([[0, 0, 0], [L, 0, 0], [L, 0, 0], [L / 2, 0, 0], [0, 0.3, 0], [L, 0, 0]], dtype=float)
    n = len(parent)
    rigid = Model(parent, ["revolute", "universal", "revolute", "spherical", "free", "prismatic"],
                  np.tile([0, 0, 1.0], (n, 1)), np.tile(np.eye(3), (n, 1, 1)), r, [mass] * n, np.tile(com, (n, 1)),
                  np.tile(I_com, (n, 1, 1)), axis2=np.tile([0, 1.0, 0], (n, 1)),
                  joint_names=[f"joint {i}" for i in range(n)], name="flexible tree")
    rigid = rigid.with_loops([partree.Loop("ball", "spherical", 2, 5)])
    return rigid.with_flexible({0: b3m, 1: b2, 4: b3})


def _flexible_state(model, seed=1):
    from partree.algorithms.flexible_dynamics import flexible_state_size

    rng = np.random.default_rng(seed)
    nq, nv = flexible_state_size(model)
    q = np.concatenate((model.random_configuration(rng), 0.01 * rng.normal(size=nq - model.nq)))
    return q, rng.normal(size=nv), rng.normal(size=nv)


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_flexible_bodies_round_trip(tmp_path, suffix, compressed):
    from partree.algorithms.flexible_dynamics import flexible_aba

    if suffix in (".h5", ".hdf5"):
        pytest.importorskip("h5py")
    if suffix == ".json" and compressed:
        pytest.skip("json is not compressed")
    m = flexible_model()
    back = load_model(save_model(m, tmp_path / f"flex{suffix}", compressed=compressed))
    fa, fb = m.flexible, back.flexible
    assert fb is not None and sorted(fb.bodies) == sorted(fa.bodies) == [0, 1, 4]
    assert np.array_equal(fb.nmodes, fa.nmodes) and np.array_equal(fb.idx_eta, fa.idx_eta)
    assert fb.node_of == fa.node_of == {1: "tip", 2: "tip", 3: "mid", 5: "tip"}
    for i, a in fa.bodies.items():
        b = fb.bodies[i]
        assert b.name == a.name and b.m == a.m
        for key in ("first", "xphi", "phiphi", "stiffness", "damping"):
            x, y = getattr(a, key), getattr(b, key)
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), key
        assert (a.stiffening is None) == (b.stiffening is None)
        if a.stiffening is not None:
            assert a.stiffening.tobytes() == b.stiffening.tobytes()
        assert list(b.nodes) == list(a.nodes)
        for nm, (pt, Phi, Psi) in a.nodes.items():
            assert all(x.tobytes() == y.tobytes() for x, y in zip((pt, Phi, Psi), b.nodes[nm]))
    assert len(back.loops) == 1 and back.joint_names[3] == "joint 3"
    for seed in range(3):
        q, qd, tau = _flexible_state(m, seed)
        assert flexible_aba(back, q, qd, tau).tobytes() == flexible_aba(m, q, qd, tau).tobytes()
    with pytest.raises(PartreeInputError, match="flexible bod.*flexible_aba"):
        partree.aba(back, back.neutral(), np.zeros(back.nv), np.zeros(back.nv))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_flexible_file_versions(tmp_path, suffix):
    """Version 3 only for flexible bodies; rigid models stay readable as before."""
    if suffix in (".h5", ".hdf5"):
        pytest.importorskip("h5py")
    m = flexible_model()
    rigid = m.with_flexible({})
    back = load_model(save_model(rigid, tmp_path / f"rigid{suffix}"))
    assert back.flexible is None and len(back.loops) == 1
    if suffix == ".json":
        doc = json.loads(Path(save_model(m, tmp_path / "f.json")).read_text())
        assert doc["version"] == 3
        assert json.loads((tmp_path / f"rigid{suffix}").read_text())["version"] == 2
        doc["version"] = 2
        (tmp_path / "old.json").write_text(json.dumps(doc))
        with pytest.raises(PartreeInputError, match="flexible bodies are version 3"):
            load_model(tmp_path / "old.json")


def test_flexible_npz_corrupt_is_refused(tmp_path):
    p = save_model(flexible_model(), tmp_path / "f.npz")
    with np.load(p) as z:
        d = {k: z[k] for k in z.files}
    meta = json.loads(d["meta"].tobytes().decode())
    assert meta["version"] == 3 and meta["flexible"]["nodes"] == [["tip", "mid"], ["tip"], ["tip"]]

    def write(name, **changes):
        dd = dict(d)
        dd.update(changes)
        q = tmp_path / name
        with open(q, "wb") as fh:
            np.savez(fh, **dd)
        return q

    with pytest.raises(PartreeInputError, match="'flex_phiphi' has dtype"):
        load_model(write("a.npz", flex_phiphi=d["flex_phiphi"][:-1]))
    with pytest.raises(PartreeInputError, match="distinct bodies"):
        load_model(write("b.npz", flex_body=np.array([0, 1, 9], dtype=np.int64)))
    old = dict(meta, version=2)
    with pytest.raises(PartreeInputError, match="flexible bodies are version 3"):
        load_model(write("c.npz", meta=np.frombuffer(json.dumps(old).encode(), dtype=np.uint8)))
    bad = d["flex_stiffness"].copy()
    bad[0] = -1e3
    with pytest.raises(PartreeInputError, match=r"f\.npz|e\.npz"):
        load_model(write("e.npz", flex_stiffness=bad))
