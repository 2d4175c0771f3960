"""Model specs: Model / path / 'generator:key=value,...' strings and the generator registry."""
from pathlib import Path

import numpy as np
import pytest

import partree.models
from partree import specs
from partree.io import load_urdf, save_model
from partree.model import Model, PartreeInputError
from partree.models import auto_tree
from partree.specs import (build, generator_names, parse_spec, parse_value, register_generator, resolve_model,
                           unregister_generator)

DATA = Path(__file__).parent / "data"
ARM7 = DATA / "arm7.urdf"


@pytest.fixture
def registry(monkeypatch):
    """Let a test register generators without leaking them into other tests."""
    monkeypatch.setattr(specs, "_REGISTRY", dict(specs._REGISTRY))
    return specs._REGISTRY


def same_arrays(a, b):
    return all(getattr(a, k).tobytes() == getattr(b, k).tobytes()
               for k in ("parent", "jtype", "axis", "E_tree", "r_tree", "mass", "com", "I_com", "gravity"))


# ---------------------------------------------------------------------- parsing
@pytest.mark.parametrize("text,value", [
    ("10", 10), ("-3", -3), ("1_000_000", 1_000_000), ("1e6", 1_000_000), ("2E3", 2000),
    ("0.5", 0.5), ("1e-3", 1e-3), ("1.5e3", 1500.0), ("-.25", -0.25),
    ("true", True), ("False", False), ("yes", True), ("off", False), ("none", None), ("null", None),
    ("abc", "abc"), ("'x,y'", "x,y"), ('"1"', "1"), ("[0,0,-9.81]", [0, 0, -9.81]), ("[1;2 3]", [1, 2, 3]),
    ("[]", []), (" 7 ", 7),
])
def test_parse_value(text, value):
    v = parse_value(text)
    assert v == value and type(v) is type(value)


def test_parse_spec():
    assert parse_spec("autotree") == ("autotree", {})
    assert parse_spec("autotree:") == ("autotree", {})
    assert parse_spec(" autotree : nb=1000000, bf=2,skew=0.1 ,taper=0.95 ") == \
        ("autotree", {"nb": 1000000, "bf": 2, "skew": 0.1, "taper": 0.95})
    assert parse_spec("x:g=[0,0,-1],s='a,b',f=true") == ("x", {"g": [0, 0, -1], "s": "a,b", "f": True})
    for bad in ("", ":nb=3", "autotree:nb", "autotree:nb=1,nb=2", "auto tree:nb=1", "autotree:1x=2"):
        with pytest.raises(PartreeInputError):
            parse_spec(bad)


# ---------------------------------------------------------------------- resolve_model
def test_model_passes_through():
    m = auto_tree(5)
    assert resolve_model(m) is m


def test_autotree_spec():
    m = resolve_model("autotree:nb=1000,bf=2,skew=0.1,taper=0.95")
    ref = auto_tree(1000, bf=2, skew=0.1, taper=0.95)
    assert m.n == 1000 and same_arrays(m, ref)
    # names are case- and underscore-insensitive; 1e3 is an int
    assert same_arrays(resolve_model("Auto_Tree:nb=1e3,bf=2,skew=0.1,taper=0.95"), ref)
    # int given for a float parameter, list for the gravity tuple
    g = resolve_model("autotree:nb=3,skew=1,gravity=[0,0,0]")
    assert g.gravity.tolist() == [0.0, 0.0, 0.0]
    # overrides win over the spec
    assert resolve_model("autotree:nb=10", nb=4).n == 4


@pytest.mark.parametrize("suffix", [".npz", ".h5", ".hdf5", ".json"])
def test_native_paths(tmp_path, suffix):
    m = auto_tree(20, bf=2, skew=0.2)
    p = tmp_path / f"tree{suffix}"
    save_model(m, p)
    for x in (p, str(p)):
        assert same_arrays(resolve_model(x), m)


def test_urdf_paths_and_generator():
    ref = load_urdf(ARM7)
    assert same_arrays(resolve_model(ARM7), ref)
    assert same_arrays(resolve_model(str(ARM7)), ref)
    fb = resolve_model(str(ARM7), floating_base=True)
    assert fb.joint_names[0] == "root_joint" and fb.n == ref.n + 1
    fb2 = resolve_model(f"urdf:path={ARM7},floating_base=true")
    assert same_arrays(fb, fb2)


def test_errors_list_the_valid_choices(tmp_path):
    with pytest.raises(PartreeInputError) as ei:
        resolve_model("nosuchgen:nb=3")
    msg = str(ei.value)
    assert "nosuchgen" in msg and "autotree" in msg and ".urdf" in msg
    with pytest.raises(PartreeInputError) as ei:
        resolve_model("autotree:nb=3,depth=4")
    msg = str(ei.value)
    assert "'depth'" in msg and all(p in msg for p in ("nb", "bf", "skew", "taper"))
    with pytest.raises(PartreeInputError, match="needs 'nb'"):
        resolve_model("autotree")
    with pytest.raises(PartreeInputError, match="nb >= 1"):
        resolve_model("autotree:nb=0")
    with pytest.raises(PartreeInputError, match="no such"):
        resolve_model(str(tmp_path / "missing.urdf"))
    with pytest.raises(PartreeInputError, match="no such"):
        resolve_model(tmp_path / "missing.npz")
    with pytest.raises(PartreeInputError, match="not a model file"):
        resolve_model(str(tmp_path / "robot.stl"))
    with pytest.raises(PartreeInputError, match="suffix"):
        resolve_model(tmp_path / "robot.stl")
    with pytest.raises(PartreeInputError, match="no such MJCF file"):      # .xml is MJCF
        resolve_model(str(tmp_path / "robot.xml"))
    with pytest.raises(PartreeInputError):
        resolve_model(42)
    with pytest.raises(PartreeInputError):
        resolve_model("   ")
    with pytest.raises(PartreeInputError):
        resolve_model(auto_tree(2), nb=3)


# ---------------------------------------------------------------------- the registry
def test_register_custom_generator(registry):
    calls = []

    def chain(nb, length=1.0, massless_tip=False):
        """A chain of nb bodies."""
        calls.append((nb, length, massless_tip))
        return auto_tree(nb, bf=1, taper=1.0)

    register_generator("my_chain", chain)
    assert "my_chain" in generator_names()
    m = resolve_model("my-chain:nb=4,length=2,massless_tip=1")
    assert m.n == 4
    assert calls[-1] == (4, 2.0, True) and type(calls[-1][1]) is float and type(calls[-1][2]) is bool
    with pytest.raises(PartreeInputError, match="valid: nb, length, massless_tip"):
        resolve_model("mychain:nb=4,width=3")
    with pytest.raises(ValueError, match="already registered"):
        register_generator("MyChain", lambda nb: auto_tree(nb))
    register_generator("mychain", lambda nb, k=0: auto_tree(nb + k), overwrite=True)
    assert resolve_model("mychain:nb=2,k=1").n == 3
    assert specs.get_generator("mychain").usage() == "mychain:nb,k=0"
    unregister_generator("my_chain")
    with pytest.raises(PartreeInputError, match="unknown model generator"):
        resolve_model("mychain:nb=2")


def test_register_variants(registry):
    register_generator("anything", lambda **kw: auto_tree(kw.get("nb", 2)))
    assert resolve_model("anything:nb=3,whatever=x").n == 3
    register_generator("restricted", lambda nb, secret=0: auto_tree(nb), params=["nb"])
    with pytest.raises(PartreeInputError, match="'secret'"):
        resolve_model("restricted:nb=2,secret=1")
    register_generator("lazy", "partree.models.autotree:auto_tree")
    assert resolve_model("lazy:nb=7").n == 7
    register_generator("notamodel", lambda: 3)
    with pytest.raises(PartreeInputError, match="not a Model"):
        resolve_model("notamodel")
    register_generator("raises", lambda n: (_ for _ in ()).throw(ValueError(f"bad n {n}")))
    with pytest.raises(PartreeInputError, match="bad n 5"):
        resolve_model("raises:n=5")
    with pytest.raises(ValueError):
        register_generator("bad name!", lambda: None)
    with pytest.raises(TypeError):
        register_generator("notcallable", 3)
    assert isinstance(build("autotree", {"nb": 2}), Model)


def test_models_generators_hook(registry, monkeypatch):
    """partree.models may expose GENERATORS = {name: fn}; they join the registry."""
    monkeypatch.setattr(partree.models, "GENERATORS", {"tiny": lambda nb=2: auto_tree(nb)}, raising=False)
    monkeypatch.setattr(specs, "_loaded_models_hook", False)
    assert "tiny" in generator_names()
    assert resolve_model("tiny").n == 2
    assert resolve_model("tiny:nb=5").n == 5


def test_generator_spec_with_urdf_suffix_is_not_a_path(registry, tmp_path):
    # 'urdf:path=x.urdf' ends like a file but is a spec; a plain existing path always wins
    assert resolve_model(f"urdf:path={ARM7}").n == load_urdf(ARM7).n
    np.testing.assert_array_equal(resolve_model(str(ARM7)).parent, load_urdf(ARM7).parent)
