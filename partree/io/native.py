"""partree's own model files: ``save_model(model, path)`` / ``load_model(path)``.

The suffix picks the format:

* ``.npz``  -- numpy archive (``compressed=True`` for zlib); the fastest for big models.
* ``.h5`` / ``.hdf5`` -- HDF5 through h5py (optional dependency, imported only when used);
  ``compressed=True`` gzips the datasets.
* ``.json`` -- readable text for small models: one dict per body with its name, parent, joint
  type, axis, placement and inertia.  Floats are written with ``repr`` precision, so the round
  trip is exact here too.

The binary forms store the model's arrays as they are (bitwise round trip), the model name, the
``allow_massless`` flag, the inertia policy (``inertia_policy``: a model read from a URDF under
"warn" reads back under "warn"; files without it read as "strict"), the gravity vector and the
names.  Generated names (``JointNames``
without an explicit list) are stored as their prefix only, so a 10^7-body model carries no
strings; explicit names are stored as one UTF-8 blob plus offsets.  A model's ``units`` (unit
label of every body, optional) are stored as an int64 array ``units`` (in JSON as each body's
``"unit"``); files without them load as models without units.  Every file carries
``format = "partree-model"`` and a format ``version``; unknown versions and malformed files are
refused with ``PartreeInputError``.
"""
from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from .. import joints as J
from ..inertia import check_policy, labelled_warnings
from ..model import JointNames, Model
from ..errors import PartreeInputError

FORMAT = "partree-model"
FORMAT_VERSION = 1

#: model arrays in the files: name -> (dtype, shape after the body dimension)
ARRAYS = {
    "parent": (np.int64, ()),
    "jtype": (np.int8, ()),
    "axis": (np.float64, (3,)),
    "axis2": (np.float64, (3,)),
    "E_tree": (np.float64, (3, 3)),
    "r_tree": (np.float64, (3,)),
    "mass": (np.float64, ()),
    "com": (np.float64, (3,)),
    "I_com": (np.float64, (3, 3)),
}
_NAME_SETS = (("joint_names", "j"), ("body_names", "b"))

#: full validation (eigenvalues of every inertia, ...) when loading up to this many bodies;
#: bigger models get the cheap structural checks only unless ``validate=True``
VALIDATE_MAX_BODIES = 10**6


def _suffix(path):
    s = os.fspath(path)
    low = s.lower()
    for suf, kind in ((".npz", "npz"), (".h5", "h5"), (".hdf5", "h5"), (".json", "json")):
        if low.endswith(suf):
            return kind
    raise PartreeInputError(f"{s}: unknown model file suffix; use .npz, .h5, .hdf5 or .json "
                            f"(or partree.io.load_urdf for .urdf)")


def _h5py():
    try:
        import h5py
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("HDF5 model files need h5py: pip install h5py (or partree[io])") from None
    return h5py


# ---------------------------------------------------------------------- names
def _encode_names(names: JointNames):
    """(meta, blob, offsets): a generated list is only its prefix."""
    if names.explicit is None:
        return {"prefix": names.prefix}, None, None
    enc = [s.encode("utf-8") for s in names.explicit]
    offsets = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in enc], out=offsets[1:])
    blob = np.frombuffer(b"".join(enc), dtype=np.uint8)
    return {"prefix": names.prefix, "explicit": True}, blob, offsets


def _decode_names(err, key, meta, blob, offsets, n):
    if not isinstance(meta, dict) or not isinstance(meta.get("prefix"), str):
        raise err(f"bad {key} description {meta!r}")
    if not meta.get("explicit"):
        return JointNames(n, None, meta["prefix"])
    if blob is None or offsets is None:
        raise err(f"{key} are marked explicit but their data is missing")
    offsets = np.asarray(offsets)
    blob = np.asarray(blob)
    if (offsets.dtype != np.int64 or blob.dtype != np.uint8 or offsets.shape != (n + 1,)
            or offsets[0] != 0 or offsets[-1] != blob.size or np.any(np.diff(offsets) < 0)):
        raise err(f"{key}: the name table is corrupt")
    raw = blob.tobytes()
    try:
        names = [raw[offsets[k]:offsets[k + 1]].decode("utf-8") for k in range(n)]
    except UnicodeDecodeError:
        raise err(f"{key}: the name table is not UTF-8") from None
    return JointNames(n, names, meta["prefix"])


# ---------------------------------------------------------------------- save
def _meta(model):
    meta = {"format": FORMAT, "version": FORMAT_VERSION, "n": int(model.n), "name": str(model.name),
            "allow_massless": bool(model.allow_massless), "inertia_policy": str(model.inertia_policy)}
    payload = {}
    for key, _ in _NAME_SETS:
        m, blob, offsets = _encode_names(getattr(model, key))
        meta[key] = m
        if blob is not None:
            payload[f"{key}_blob"] = blob
            payload[f"{key}_offsets"] = offsets
    return meta, payload


def save_model(model: Model, path, compressed=False):
    """Write ``model`` to ``path``; the suffix (.npz, .h5/.hdf5, .json) picks the format.

    ``compressed`` applies to .npz (zlib) and .h5 (gzip).  Returns the path.
    """
    if not isinstance(model, Model):
        raise PartreeInputError(f"save_model needs a partree Model, got {type(model).__name__}")
    kind = _suffix(path)
    path = os.fspath(path)
    if kind == "json":
        _save_json(model, path)
        return path
    meta, payload = _meta(model)
    arrays = {k: getattr(model, k) for k in ARRAYS}
    arrays["gravity"] = model.gravity
    if model.units is not None:
        arrays["units"] = model.units
    arrays.update(payload)
    if kind == "npz":
        meta_arr = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
        # write through a file object: np.savez would otherwise append '.npz' to odd names
        with open(path, "wb") as fh:
            (np.savez_compressed if compressed else np.savez)(fh, meta=meta_arr, **arrays)
    else:
        h5py = _h5py()
        opts = {"compression": "gzip", "compression_opts": 4, "shuffle": True} if compressed else {}
        with h5py.File(path, "w") as f:
            f.attrs["meta"] = json.dumps(meta)
            for k, a in arrays.items():
                a = np.ascontiguousarray(a)
                f.create_dataset(k, data=a, **(opts if a.size > 1 else {}))
    return path


# ---------------------------------------------------------------------- load
def _check_meta(err, meta):
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise err(f"not a partree model file (no '{FORMAT}' format tag)")
    v = meta.get("version")
    if not isinstance(v, int) or isinstance(v, bool):
        raise err(f"bad format version {v!r}")
    if v != FORMAT_VERSION:
        raise err(f"format version {v} is not supported (this partree reads version {FORMAT_VERSION}); "
                  f"{'upgrade partree' if v > FORMAT_VERSION else 'the file is corrupt'}")
    n = meta.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise err(f"bad body count n = {n!r}")
    return n


def _build(err, meta, get, validate, inertia):
    """Model from the checked metadata and an array getter get(key) -> array or None."""
    n = _check_meta(err, meta)
    arrs = {}
    for key, (dtype, shape) in ARRAYS.items():
        a = get(key)
        if a is None:
            raise err(f"array {key!r} is missing")
        if a.dtype != dtype or a.shape != (n,) + shape:
            raise err(f"array {key!r} has dtype {a.dtype} and shape {a.shape}; expected "
                      f"{np.dtype(dtype)} and {(n,) + shape}")
        arrs[key] = a
    g = get("gravity")
    if g is None or g.dtype != np.float64 or g.shape != (3,):
        raise err("array 'gravity' is missing or malformed")
    names = {}
    for key, _ in _NAME_SETS:
        names[key] = _decode_names(err, key, meta.get(key), get(f"{key}_blob"), get(f"{key}_offsets"), n)
    units = get("units")
    if units is not None and (units.dtype != np.int64 or units.shape != (n,)):
        raise err(f"array 'units' has dtype {units.dtype} and shape {units.shape}; expected int64 and {(n,)}")
    return _make_model(err, arrs, g, names, meta.get("name", "model"), bool(meta.get("allow_massless", False)),
                       validate, units, meta.get("inertia_policy", "strict") if inertia is None else inertia)


def _make_model(err, arrs, gravity, names, name, allow_massless, validate, units=None, inertia="strict"):
    n = arrs["parent"].shape[0]
    try:
        check_policy(inertia)
    except PartreeInputError as exc:
        raise err(str(exc)) from None
    if validate is None:
        validate = n <= VALIDATE_MAX_BODIES
    # cheap structural checks always: the kernels index with these without bounds checks
    p, jt = arrs["parent"], arrs["jtype"]
    bad = np.flatnonzero((p >= np.arange(n)) | (p < -1))
    if bad.size:
        i = int(bad[0])
        raise err(f"body {i} has parent {int(p[i])}: not in regular numbering (need -1 <= parent[i] < i)")
    bad = np.flatnonzero((jt < 0) | (jt >= len(J.NAMES)))
    if bad.size:
        raise err(f"body {int(bad[0])} has an unknown joint type code {int(jt[bad[0]])}")
    label = str(err("")).removesuffix(": ")       # the file
    try:
        with labelled_warnings(label, up=3):      # load_model -> _build or _load_json -> here
            return Model(arrs["parent"], arrs["jtype"], arrs["axis"], arrs["E_tree"], arrs["r_tree"], arrs["mass"],
                         arrs["com"], arrs["I_com"], axis2=arrs["axis2"], gravity=gravity,
                         joint_names=names["joint_names"], body_names=names["body_names"], name=name,
                         allow_massless=allow_massless, validate=bool(validate), units=units, inertia=inertia)
    except PartreeInputError as exc:
        raise err(str(exc)) from None


def load_model(path, validate=None, inertia=None) -> Model:
    """Read a model written by ``save_model`` (.npz, .h5/.hdf5 or .json).

    ``validate``: run the model's full validation (None: only for models of up to
    ``VALIDATE_MAX_BODIES`` bodies; the structural checks always run).  ``inertia``: the inertia
    policy of that validation (``Model``); None takes the one stored in the file, "strict" for
    files that store none.
    """
    kind = _suffix(path)
    path = os.fspath(path)

    def err(msg):
        return PartreeInputError(f"{path}: {msg}")

    if not os.path.exists(path):
        raise err("no such model file")
    if kind == "json":
        return _load_json(err, path, validate, inertia)
    if kind == "npz":
        try:
            npz = np.load(path, allow_pickle=False)
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise err(f"not a readable .npz file ({exc})") from None
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise err("not a .npz archive")
        with npz:
            files = set(npz.files)
            if "meta" not in files:
                raise err(f"not a partree model file (no '{FORMAT}' metadata)")
            try:
                meta = json.loads(npz["meta"].tobytes().decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise err("the metadata is not valid JSON") from None

            def get(key):
                if key not in files:
                    return None
                try:
                    return npz[key]
                except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
                    raise err(f"array {key!r} is unreadable ({exc})") from None

            return _build(err, meta, get, validate, inertia)
    h5py = _h5py()
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise err(f"not a readable HDF5 file ({exc})") from None
    with f:
        raw = f.attrs.get("meta")
        if raw is None:
            raise err(f"not a partree model file (no '{FORMAT}' metadata)")
        try:
            meta = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
        except (ValueError, UnicodeDecodeError):
            raise err("the metadata is not valid JSON") from None

        def get(key):
            if key not in f:
                return None
            ds = f[key]
            if not isinstance(ds, h5py.Dataset):
                raise err(f"{key!r} is not a dataset")
            return ds[()] if ds.shape == () else ds[...]

        return _build(err, meta, get, validate, inertia)


# ---------------------------------------------------------------------- JSON
def _save_json(model, path):
    generated = {}
    for key, _ in _NAME_SETS:
        names = getattr(model, key)
        if names.explicit is None:
            generated[key] = names.prefix
    bodies = []
    for i in range(model.n):
        jt = int(model.jtype[i])
        b = {"name": model.joint_names[i], "body": model.body_names[i], "parent": int(model.parent[i]),
             "type": J.NAMES[jt], "axis": model.axis[i].tolist()}
        if jt == J.UNIVERSAL or np.any(model.axis2[i] != 0.0):
            b["axis2"] = model.axis2[i].tolist()
        b["placement"] = {"E": model.E_tree[i].tolist(), "r": model.r_tree[i].tolist()}
        b["inertia"] = {"mass": float(model.mass[i]), "com": model.com[i].tolist(), "I_com": model.I_com[i].tolist()}
        if model.units is not None:
            b["unit"] = int(model.units[i])
        bodies.append(b)
    doc = {"format": FORMAT, "version": FORMAT_VERSION, "name": str(model.name), "n": int(model.n),
           "gravity": model.gravity.tolist(), "allow_massless": bool(model.allow_massless),
           "inertia_policy": str(model.inertia_policy),
           "generated_names": generated, "bodies": bodies}
    # json writes floats with repr (shortest round-trip form): exact.  One body per line.
    head = {k: v for k, v in doc.items() if k != "bodies"}
    text = json.dumps(head, allow_nan=False)[:-1]
    lines = ",\n  ".join(json.dumps(b, allow_nan=False) for b in bodies)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f'{text}, "bodies": [\n  {lines}\n]}}\n')


def _load_json(err, path, validate, inertia):
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except UnicodeDecodeError:
        raise err("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise err(f"malformed JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise err("not a partree model file (the top level is not an object)")
    bodies = doc.get("bodies")
    if not isinstance(bodies, list) or not bodies:
        raise err("'bodies' must be a non-empty list")
    meta = dict(doc)
    meta.setdefault("n", len(bodies))
    n = _check_meta(err, meta)
    if n != len(bodies):
        raise err(f"n = {n} but 'bodies' has {len(bodies)} entries")

    def leaves_ok(x):
        if isinstance(x, list):
            return all(leaves_ok(y) for y in x)
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    def num(i, key, x, shape):
        where = f"body {i}: {key}" if i >= 0 else key
        if not leaves_ok(x):
            raise err(f"{where} = {x!r} is not numeric")
        a = np.array(x, dtype=np.float64)
        if a.shape != shape:
            raise err(f"{where} has shape {a.shape}, expected {shape}")
        return a

    arrs = {k: np.zeros((n,) + shape, dtype=dtype) for k, (dtype, shape) in ARRAYS.items()}
    arrs["E_tree"][:] = np.eye(3)
    units = np.zeros(n, dtype=np.int64) if isinstance(bodies[0], dict) and "unit" in bodies[0] else None
    jn, bn = [], []
    name_index = {}
    for i, b in enumerate(bodies):
        if not isinstance(b, dict):
            raise err(f"body {i} is not an object")
        for key in ("type", "inertia"):
            if key not in b:
                raise err(f"body {i}: missing {key!r}")
        nm = b.get("name", f"{doc.get('generated_names', {}).get('joint_names', 'j')}{i}")
        jn.append(str(nm))
        bn.append(str(b.get("body", f"b{i}")))
        name_index.setdefault(str(nm), i)
        par = b.get("parent", -1)
        if isinstance(par, str):
            if par not in name_index or name_index[par] >= i:
                raise err(f"body {i}: parent {par!r} is not an earlier body's joint name")
            par = name_index[par]
        if not isinstance(par, int) or isinstance(par, bool):
            raise err(f"body {i}: parent {par!r} is not an integer")
        arrs["parent"][i] = par
        try:
            arrs["jtype"][i] = J.code_of(b["type"]) if isinstance(b["type"], str) else -1
        except ValueError as exc:
            raise err(f"body {i} ({nm!r}): {exc}") from None
        if arrs["jtype"][i] < 0:
            raise err(f"body {i} ({nm!r}): joint type {b['type']!r} is not a name")
        arrs["axis"][i] = num(i, "axis", b.get("axis", [0.0, 0.0, 0.0]), (3,))
        arrs["axis2"][i] = num(i, "axis2", b.get("axis2", [0.0, 0.0, 0.0]), (3,))
        pl = b.get("placement", {})
        if not isinstance(pl, dict):
            raise err(f"body {i}: 'placement' must be an object with 'E' and 'r'")
        arrs["E_tree"][i] = num(i, "placement E", pl.get("E", np.eye(3).tolist()), (3, 3))
        arrs["r_tree"][i] = num(i, "placement r", pl.get("r", [0.0, 0.0, 0.0]), (3,))
        inr = b["inertia"]
        if not isinstance(inr, dict) or "mass" not in inr:
            raise err(f"body {i}: 'inertia' must be an object with 'mass', 'com' and 'I_com'")
        arrs["mass"][i] = num(i, "mass", inr["mass"], ())
        arrs["com"][i] = num(i, "com", inr.get("com", [0.0, 0.0, 0.0]), (3,))
        arrs["I_com"][i] = num(i, "I_com", inr.get("I_com", np.zeros((3, 3)).tolist()), (3, 3))
        if ("unit" in b) != (units is not None):
            raise err(f"body {i} ({nm!r}): 'unit' is given for some bodies only (give it for every body or none)")
        if units is not None:
            u = b["unit"]
            if not isinstance(u, int) or isinstance(u, bool) or not -2**63 <= u < 2**63:
                raise err(f"body {i} ({nm!r}): unit {u!r} is not an integer")
            units[i] = u
    gravity = np.array(num(-1, "gravity", doc.get("gravity", [0.0, 0.0, -9.81]), (3,)))
    gen = doc.get("generated_names", {})
    if not isinstance(gen, dict):
        raise err("'generated_names' must be an object")
    names = {}
    for key, lst in (("joint_names", jn), ("body_names", bn)):
        prefix = gen.get(key)
        if isinstance(prefix, str) and all(s == f"{prefix}{k}" for k, s in enumerate(lst)):
            names[key] = JointNames(n, None, prefix)
        else:
            names[key] = JointNames(n, lst, dict(_NAME_SETS)[key])
    return _make_model(err, arrs, gravity, names, str(doc.get("name", "model")),
                       bool(doc.get("allow_massless", False)), validate, units,
                       doc.get("inertia_policy", "strict") if inertia is None else inertia)
