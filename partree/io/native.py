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

A model's loops (``model.loops``, :class:`partree.loops.LoopSet`) are kept: their names and kinds
(by name) in the metadata (``"loops": {"names": [...], "kinds": [...]}``), their arrays as
``loop_body_a``, ``loop_body_b`` (int64, -1 for the world), ``loop_R_a``, ``loop_p_a``,
``loop_R_b``, ``loop_p_b`` (the placements of frames A and B in their bodies), ``loop_axis``,
``loop_axis2`` and ``loop_length``, bitwise; in JSON as a list ``"loops"`` of objects with
``name``, ``kind``, ``body_a``, ``body_b`` (body numbers, -1 for the world; a hand-written file
may also name the bodies, or give null or "world"), ``placement_a`` and ``placement_b``
(``{"R": 3x3, "p": 3}``, R's columns the frame's axes in body coordinates), and ``axis``,
``axis2`` and ``length`` where the kind has them.  A file of a model with loops is format
version 2, of one without loops version 1 (which every partree reads); files without loops load
as models without loops.

A model's flexible bodies (``model.flexible``, :class:`partree.flexible.FlexibleBody` each) are
kept bit for bit, every field: in the binary forms the metadata has ``"flexible": {"names":
[...], "nodes": [[...], ...]}`` (each flexible body's name and node names, in body order) and
the arrays are ``flex_body`` (int64, the bodies), ``flex_nmodes`` (int64, their numbers of
modes m), ``flex_stiffening`` (int8, 1 where the body has geometric stiffening), the
concatenated flattened (C order) ``flex_first`` (3 m per body), ``flex_xphi`` (9 m),
``flex_phiphi`` (9 m²), ``flex_stiffness`` and ``flex_damping`` (m² each), ``flex_stiffening_G``
(9 m², bodies with stiffening only), and per node, in order, ``flex_node_point`` (n_nodes, 3),
``flex_node_Phi`` and ``flex_node_Psi`` (3 m each, flattened).  In JSON a flexible body's entry
has ``"flexible": {"name", "first", "xphi", "phiphi", "stiffness", "damping", "nodes": {name:
{"point", "Phi", "Psi"}}}`` and ``"stiffening"`` where it has it.  A file of a model with flexible
bodies is format version 3; files without them load as rigid models.
"""
from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from .. import joints as J
from .. import loops as LP
from ..flexible import FlexibleBodies, FlexibleBody
from ..inertia import check_policy, labelled_warnings
from ..model import JointNames, Model
from ..errors import PartreeInputError

FORMAT = "partree-model"
#: the newest format version (2: loops, 3: flexible bodies); a model without loops or flexible
#: bodies is written as version 1, one with loops only as version 2
FORMAT_VERSION = 3
#: the versions this partree reads
READ_VERSIONS = (1, 2, 3)

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
#: loop arrays in the files (``loop_<name>``): name -> (dtype, shape after the loop dimension)
LOOP_ARRAYS = {
    "body_a": (np.int64, ()),
    "body_b": (np.int64, ()),
    "R_a": (np.float64, (3, 3)),
    "p_a": (np.float64, (3,)),
    "R_b": (np.float64, (3, 3)),
    "p_b": (np.float64, (3,)),
    "axis": (np.float64, (3,)),
    "axis2": (np.float64, (3,)),
    "length": (np.float64, ()),
}

#: a flexible body's arrays (``flex_<name>``, flattened): name -> shape for m modes
FLEX_ARRAYS = {
    "first": lambda m: (3, m),
    "xphi": lambda m: (m, 3, 3),
    "phiphi": lambda m: (m, m, 3, 3),
    "stiffness": lambda m: (m, m),
    "damping": lambda m: (m, m),
}

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
def _version(model):
    if getattr(model, "flexible", None) is not None:
        return 3
    return 2 if len(model.loops) else 1


def _flat(parts):
    return np.concatenate([np.ascontiguousarray(a, dtype=np.float64).ravel() for a in parts]) if parts \
        else np.zeros(0)


def _flexible_payload(model):
    """(meta, arrays) of the model's flexible bodies (see the module's notes)."""
    fl = model.flexible
    ids = sorted(fl.bodies)
    bodies = [fl.bodies[i] for i in ids]
    meta = {"names": [b.name for b in bodies], "nodes": [list(b.nodes) for b in bodies]}
    arrays = {"flex_body": np.array(ids, dtype=np.int64),
              "flex_nmodes": np.array([b.m for b in bodies], dtype=np.int64),
              "flex_stiffening": np.array([b.stiffening is not None for b in bodies], dtype=np.int8)}
    for key in FLEX_ARRAYS:
        arrays[f"flex_{key}"] = _flat([getattr(b, key) for b in bodies])
    arrays["flex_stiffening_G"] = _flat([b.stiffening for b in bodies if b.stiffening is not None])
    nodes = [node for b in bodies for node in b.nodes.values()]
    arrays["flex_node_point"] = np.array([pt for pt, _, _ in nodes], dtype=np.float64).reshape(len(nodes), 3)
    arrays["flex_node_Phi"] = _flat([Phi for _, Phi, _ in nodes])
    arrays["flex_node_Psi"] = _flat([Psi for _, _, Psi in nodes])
    return meta, arrays


def _flexible_from_arrays(err, desc, get, n):
    """{body: FlexibleBody} from a binary file's flexible description and arrays."""
    if not isinstance(desc, dict) or not isinstance(desc.get("names"), list) or \
            not isinstance(desc.get("nodes"), list) or len(desc["names"]) != len(desc["nodes"]):
        raise err("bad flexible body description: 'flexible' must hold the lists 'names' and 'nodes', of one "
                  "length")
    F = len(desc["names"])
    node_names = desc["nodes"]
    for k in range(F):
        if not isinstance(desc["names"][k], str) or not isinstance(node_names[k], list) or \
                not all(isinstance(x, str) for x in node_names[k]):
            raise err(f"bad flexible body description: entry {k} needs a name and a list of node names")

    def arr(key, dtype, shape):
        a = get(key)
        if a is None:
            raise err(f"array {key!r} is missing (the file has {F} flexible bodies)")
        if a.dtype != dtype or a.shape != shape:
            raise err(f"array {key!r} has dtype {a.dtype} and shape {a.shape}; expected {np.dtype(dtype)} and "
                      f"{shape}")
        return a

    ids = arr("flex_body", np.int64, (F,))
    ms = arr("flex_nmodes", np.int64, (F,))
    st = arr("flex_stiffening", np.int8, (F,))
    if np.any((ids < 0) | (ids >= n)) or np.unique(ids).size != F:
        raise err(f"array 'flex_body' must hold distinct bodies of the model (0 to {n - 1})")
    if np.any(ms < 1):
        raise err("array 'flex_nmodes': every flexible body needs at least one mode")
    m = [int(x) for x in ms]
    counts = [len(x) for x in node_names]
    sizes = {key: sum(int(np.prod(shape(mk))) for mk in m) for key, shape in FLEX_ARRAYS.items()}
    sizes["stiffening_G"] = sum(9 * mk * mk for mk, s in zip(m, st) if s)
    sizes["node_Phi"] = sizes["node_Psi"] = sum(3 * mk * c for mk, c in zip(m, counts))
    flat = {key: arr(f"flex_{key}", np.float64, (size,)) for key, size in sizes.items()}
    points = arr("flex_node_point", np.float64, (sum(counts), 3))
    offs = dict.fromkeys(flat, 0)

    def take(key, shape):
        k = int(np.prod(shape))
        a = flat[key][offs[key]:offs[key] + k].reshape(shape)
        offs[key] += k
        return a

    bodies = {}
    node = 0
    for k in range(F):
        mk = m[k]
        fields = {key: take(key, shape(mk)) for key, shape in FLEX_ARRAYS.items()}
        G = take("stiffening_G", (3, 3, mk, mk)) if st[k] else None
        nodes = {}
        for nm in node_names[k]:
            nodes[nm] = (points[node], take("node_Phi", (3, mk)), take("node_Psi", (3, mk)))
            node += 1
        bodies[int(ids[k])] = (fields, G, nodes, desc["names"][k])
    return bodies


def _flexible_bodies(err, model, raw):
    """Attach the flexible bodies read from a file (``{body: (fields, G, nodes, name)}``)."""
    try:
        bodies = {i: FlexibleBody(f["first"], f["xphi"], f["phiphi"], f["stiffness"], f["damping"], nodes, name,
                                  stiffening=G)
                  for i, (f, G, nodes, name) in raw.items()}
        model.flexible = FlexibleBodies(model, bodies)
    except PartreeInputError as exc:
        raise err(str(exc)) from None


def _meta(model):
    meta = {"format": FORMAT, "version": _version(model), "n": int(model.n), "name": str(model.name),
            "allow_massless": bool(model.allow_massless), "inertia_policy": str(model.inertia_policy)}
    payload = {}
    if getattr(model, "flexible", None) is not None:
        meta["flexible"], flex = _flexible_payload(model)
        payload.update(flex)
    loops = model.loops
    if len(loops):
        meta["loops"] = {"names": list(loops.names), "kinds": [LP.KINDS[int(k)] for k in loops.kind]}
        for key in LOOP_ARRAYS:
            payload[f"loop_{key}"] = np.ascontiguousarray(getattr(loops, key))
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
    if v not in READ_VERSIONS:
        raise err(f"format version {v} is not supported (this partree reads versions "
                  f"{', '.join(map(str, READ_VERSIONS))}); "
                  f"{'upgrade partree' if v > FORMAT_VERSION else 'the file is corrupt'}")
    if "loops" in meta and v < 2:
        raise err(f"the file has loops but format version {v} (loops are version 2)")
    if "flexible" in meta and v < 3:
        raise err(f"the file has flexible bodies but format version {v} (flexible bodies are version 3)")
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
    loops = None
    if "loops" in meta:
        desc = meta["loops"]
        if not isinstance(desc, dict) or not isinstance(desc.get("names"), list) or \
                not isinstance(desc.get("kinds"), list) or len(desc["names"]) != len(desc["kinds"]):
            raise err("bad loop description: 'loops' must hold the lists 'names' and 'kinds', of one length")
        L = len(desc["names"])
        larrs = {}
        for key, (dtype, shape) in LOOP_ARRAYS.items():
            a = get(f"loop_{key}")
            if a is None:
                raise err(f"array 'loop_{key}' is missing (the file has {L} loops)")
            if a.dtype != dtype or a.shape != (L,) + shape:
                raise err(f"array 'loop_{key}' has dtype {a.dtype} and shape {a.shape}; expected "
                          f"{np.dtype(dtype)} and {(L,) + shape}")
            larrs[key] = a
        loops = (desc["names"], desc["kinds"], larrs)
    flex = _flexible_from_arrays(err, meta["flexible"], get, n) if "flexible" in meta else None
    model = _make_model(err, arrs, g, names, meta.get("name", "model"), bool(meta.get("allow_massless", False)),
                        validate, units, meta.get("inertia_policy", "strict") if inertia is None else inertia, loops)
    if flex is not None:
        _flexible_bodies(err, model, flex)
    return model


def _loop_set(err, model, names, kinds, arrs):
    """The LoopSet of a file's loops, checked against the model (the arrays kept bit for bit)."""
    L = len(names)
    for k, nm in enumerate(names):
        if not isinstance(nm, str):
            raise err(f"loop {k}: name {nm!r} is not a string")
    seen = {}
    for k, nm in enumerate(names):
        if nm in seen:
            raise err(f"loop name {nm!r} used twice (loops {seen[nm]} and {k})")
        seen[nm] = k
    codes = np.empty(L, dtype=np.int8)
    for k, kind in enumerate(kinds):
        if not isinstance(kind, str) or kind not in LP.KINDS:
            raise err(f"loop {names[k]!r}: unknown kind {kind!r}; the kinds are {', '.join(LP.KINDS)}")
        codes[k] = LP.KINDS.index(kind)
    for end in ("a", "b"):
        b = arrs[f"body_{end}"]
        bad = np.flatnonzero((b < -1) | (b >= model.n))
        if bad.size:
            k = int(bad[0])
            raise err(f"loop {names[k]!r}: body_{end} {int(b[k])} does not exist (the model has {model.n} bodies; "
                      f"-1 is the world)")
    same = np.flatnonzero(arrs["body_a"] == arrs["body_b"])
    if same.size:
        raise err(f"loop {names[int(same[0])]!r} joins body {int(arrs['body_a'][same[0]])} to itself")
    for key in ("R_a", "p_a", "R_b", "p_b", "axis", "axis2", "length"):
        bad = np.flatnonzero(~np.all(np.isfinite(arrs[key].reshape(L, -1)), axis=1))
        if bad.size:
            raise err(f"loop {names[int(bad[0])]!r}: {key} is not finite")
    for key in ("R_a", "R_b"):
        R = arrs[key]
        orth = np.abs(np.einsum("lji,ljk->lik", R, R) - np.eye(3)).reshape(L, -1).max(axis=1) if L else R
        bad = np.flatnonzero((orth > 1e-6) | (np.linalg.det(R) < 0)) if L else []
        if len(bad):
            raise err(f"loop {names[int(bad[0])]!r}: {key} is not a rotation matrix")
    needs = np.isin(codes, LP.AXIAL + (LP.UNIVERSAL,))
    bad = np.flatnonzero(needs & (np.abs(np.linalg.norm(arrs["axis"], axis=1) - 1.0) > 1e-9))
    bad2 = np.flatnonzero((codes == LP.UNIVERSAL) & (np.abs(np.linalg.norm(arrs["axis2"], axis=1) - 1.0) > 1e-9))
    if bad.size or bad2.size:
        k = int(bad[0]) if bad.size else int(bad2[0])
        raise err(f"loop {names[k]!r}: {'axis' if bad.size else 'axis2'} is not a unit vector")
    bad = np.flatnonzero((codes == LP.DISTANCE) & ~(arrs["length"] > 0.0))
    if bad.size:
        raise err(f"loop {names[int(bad[0])]!r}: a distance loop needs a length > 0")
    return LP.LoopSet(names, codes, *(arrs[k] for k in LOOP_ARRAYS))


def _make_model(err, arrs, gravity, names, name, allow_massless, validate, units=None, inertia="strict", loops=None):
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
            model = Model(arrs["parent"], arrs["jtype"], arrs["axis"], arrs["E_tree"], arrs["r_tree"], arrs["mass"],
                          arrs["com"], arrs["I_com"], axis2=arrs["axis2"], gravity=gravity,
                          joint_names=names["joint_names"], body_names=names["body_names"], name=name,
                          allow_massless=allow_massless, validate=bool(validate), units=units, inertia=inertia)
    except PartreeInputError as exc:
        raise err(str(exc)) from None
    if loops is not None:
        model.loops = _loop_set(err, model, *loops) if not callable(loops) else loops(model)
    return model


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
        if getattr(model, "flexible", None) is not None and i in model.flexible.bodies:
            b["flexible"] = _json_flexible(model.flexible.bodies[i])
        bodies.append(b)
    doc = {"format": FORMAT, "version": _version(model), "name": str(model.name), "n": int(model.n),
           "gravity": model.gravity.tolist(), "allow_massless": bool(model.allow_massless),
           "inertia_policy": str(model.inertia_policy),
           "generated_names": generated, "bodies": bodies}
    # json writes floats with repr (shortest round-trip form): exact.  One body (and loop) per line.
    head = {k: v for k, v in doc.items() if k != "bodies"}
    text = json.dumps(head, allow_nan=False)[:-1]
    lines = ",\n  ".join(json.dumps(b, allow_nan=False) for b in bodies)
    tail = ""
    if len(model.loops):
        loops = ",\n  ".join(json.dumps(lp, allow_nan=False) for lp in _json_loops(model.loops))
        tail = f', "loops": [\n  {loops}\n]'
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f'{text}, "bodies": [\n  {lines}\n]{tail}}}\n')


def _json_flexible(body):
    d = {"name": body.name}
    for key in FLEX_ARRAYS:
        d[key] = getattr(body, key).tolist()
    if body.stiffening is not None:
        d["stiffening"] = body.stiffening.tolist()
    d["nodes"] = {nm: {"point": pt.tolist(), "Phi": Phi.tolist(), "Psi": Psi.tolist()}
                  for nm, (pt, Phi, Psi) in body.nodes.items()}
    return d


def _json_flexible_body(err, i, d, num):
    """(fields, G, nodes, name) of body i's JSON ``flexible`` entry."""
    where = f"body {i}: flexible"
    if not isinstance(d, dict):
        raise err(f"{where} must be an object")
    for key in FLEX_ARRAYS:
        if key == "damping":
            continue
        if key not in d:
            raise err(f"{where}: missing {key!r}")
    first = d["first"]
    if not isinstance(first, list) or len(first) != 3 or not isinstance(first[0], list) or not first[0]:
        raise err(f"{where}: 'first' must be a 3 x m array")
    m = len(first[0])
    fields = {key: num(i, f"flexible {key}", d[key], shape(m)) for key, shape in FLEX_ARRAYS.items() if key in d}
    fields.setdefault("damping", None)
    G = num(i, "flexible stiffening", d["stiffening"], (3, 3, m, m)) if "stiffening" in d else None
    nodes = {}
    raw = d.get("nodes", {})
    if not isinstance(raw, dict):
        raise err(f"{where}: 'nodes' must be an object (name -> point, Phi, Psi)")
    for nm, nd in raw.items():
        if not isinstance(nd, dict) or not all(k in nd for k in ("point", "Phi", "Psi")):
            raise err(f"{where}: node {nm!r} must be an object with 'point', 'Phi' and 'Psi'")
        nodes[nm] = (num(i, f"flexible node {nm!r} point", nd["point"], (3,)),
                     num(i, f"flexible node {nm!r} Phi", nd["Phi"], (3, m)),
                     num(i, f"flexible node {nm!r} Psi", nd["Psi"], (3, m)))
    return fields, G, nodes, str(d.get("name", "flexible"))


def _json_loops(loops):
    out = []
    for k in range(len(loops)):
        code = int(loops.kind[k])
        d = {"name": loops.names[k], "kind": LP.KINDS[code], "body_a": int(loops.body_a[k]),
             "body_b": int(loops.body_b[k]),
             "placement_a": {"R": loops.R_a[k].tolist(), "p": loops.p_a[k].tolist()},
             "placement_b": {"R": loops.R_b[k].tolist(), "p": loops.p_b[k].tolist()}}
        if code in LP.AXIAL + (LP.UNIVERSAL,) or np.any(loops.axis[k] != (0.0, 0.0, 1.0)):
            d["axis"] = loops.axis[k].tolist()
        if code == LP.UNIVERSAL or np.any(loops.axis2[k] != 0.0):
            d["axis2"] = loops.axis2[k].tolist()
        if code == LP.DISTANCE or loops.length[k] != 0.0:
            d["length"] = float(loops.length[k])
        out.append(d)
    return out


def _body_by_name(err, model, b, loop, end):
    if b == LP.WORLD:
        return -1
    for names in (model.body_names, model.joint_names):      # a body may be named by its joint
        try:
            return names.index(b)
        except (KeyError, ValueError):
            pass
    raise err(f"loop {loop!r}: body_{end} {b!r} is not a body of the model (nor the name of a joint)")


def _json_loop_reader(err, entries, num):
    """A function model -> LoopSet of the JSON ``loops`` list (bodies by number, name, null or
    'world')."""
    if not isinstance(entries, list):
        raise err("'loops' must be a list of objects")
    names, kinds = [], []
    L = len(entries)
    arrs = {k: np.zeros((L,) + shape, dtype=dtype) for k, (dtype, shape) in LOOP_ARRAYS.items()}
    arrs["axis"][:] = (0.0, 0.0, 1.0)
    arrs["R_a"][:] = np.eye(3)
    arrs["R_b"][:] = np.eye(3)
    ends = []
    for k, e in enumerate(entries):
        if not isinstance(e, dict):
            raise err(f"loop {k} is not an object")
        for key in ("name", "kind", "body_a", "body_b"):
            if key not in e:
                raise err(f"loop {k}: missing {key!r}")
        nm = e["name"]
        names.append(nm)
        kinds.append(e["kind"])
        where = f"loop {nm!r}"
        for end in ("a", "b"):
            pl = e.get(f"placement_{end}", {})
            if not isinstance(pl, dict):
                raise err(f"{where}: 'placement_{end}' must be an object with 'R' and 'p'")
            arrs[f"R_{end}"][k] = num(-1, f"{where}: placement_{end} R", pl.get("R", np.eye(3).tolist()), (3, 3))
            arrs[f"p_{end}"][k] = num(-1, f"{where}: placement_{end} p", pl.get("p", [0.0, 0.0, 0.0]), (3,))
        for key, shape in (("axis", (3,)), ("axis2", (3,)), ("length", ())):
            if key in e:
                arrs[key][k] = num(-1, f"{where}: {key}", e[key], shape)
        ends.append((e["body_a"], e["body_b"]))

    def build(model):
        for k, pair in enumerate(ends):
            for end, b in zip("ab", pair):
                if isinstance(b, bool):
                    raise err(f"loop {names[k]!r}: body_{end} {b!r} is not a body")
                if b is None or isinstance(b, int):
                    arrs[f"body_{end}"][k] = -1 if b is None else b
                elif isinstance(b, str):
                    arrs[f"body_{end}"][k] = _body_by_name(err, model, b, names[k], end)
                else:
                    raise err(f"loop {names[k]!r}: body_{end} {b!r} is not a body number or name")
        return _loop_set(err, model, names, kinds, arrs)

    return build


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
    flex = {}
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
        if "flexible" in b:
            if meta["version"] < 3:
                raise err(f"body {i} ({nm!r}) is flexible but the file has format version {meta['version']} "
                          f"(flexible bodies are version 3)")
            flex[i] = _json_flexible_body(err, i, b["flexible"], num)
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
    loops = None
    if "loops" in doc:
        if meta["version"] < 2:
            raise err(f"the file has loops but format version {meta['version']} (loops are version 2)")
        loops = _json_loop_reader(err, doc["loops"], num)
    model = _make_model(err, arrs, gravity, names, str(doc.get("name", "model")),
                        bool(doc.get("allow_massless", False)), validate, units,
                        doc.get("inertia_policy", "strict") if inertia is None else inertia, loops)
    if flex:
        _flexible_bodies(err, model, flex)
    return model
