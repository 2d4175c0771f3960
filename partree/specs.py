"""Model specs: one string (or path, or Model) wherever a model is expected.

``resolve_model(x)`` accepts

* a ``Model``: returned as it is;
* a path (str or path-like) ending in ``.urdf`` (``partree.io.load_urdf``), ``.xml`` or ``.mjcf``
  (``partree.io.load_mjcf``) or ``.npz``, ``.h5``, ``.hdf5``, ``.json`` (``partree.io.load_model``);
* a generator spec ``name`` or ``name:key=value,key=value``, e.g.
  ``autotree:nb=1000000,bf=2,skew=0.1,taper=0.95``.  Values are parsed as bool
  (true/false/yes/no/on/off), None (none/null), int (``1_000_000``, and ``1e6`` since it has no
  fraction), float, a list in brackets (``gravity=[0,0,-9.81]``), or else kept as a string
  (quotes optional).  Names are case-insensitive and ignore ``_`` and ``-`` (``auto_tree`` =
  ``autotree``).

Generators are extensible: ``register_generator('chain', fn)`` makes ``chain:nb=10`` call
``fn(nb=10)``; the accepted parameters are read from fn's signature (or given explicitly).
Modules can also expose a dict ``GENERATORS = {name: fn}`` in ``partree.models``; it is merged
into the registry the first time a spec is resolved.
"""
from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass, field

from .model import Model
from .errors import PartreeInputError

URDF_SUFFIXES = (".urdf",)
MJCF_SUFFIXES = (".xml", ".mjcf")
NATIVE_SUFFIXES = (".npz", ".h5", ".hdf5", ".json")
FILE_SUFFIXES = URDF_SUFFIXES + MJCF_SUFFIXES + NATIVE_SUFFIXES


@dataclass
class Generator:
    name: str
    fn: object                       # callable, or "module:attr" imported on first use
    params: tuple | None = None      # accepted parameter names; None: from the signature
    doc: str = ""
    _resolved: dict = field(default_factory=dict, repr=False)

    def function(self):
        if isinstance(self.fn, str):
            import importlib

            mod, _, attr = self.fn.partition(":")
            self.fn = getattr(importlib.import_module(mod), attr)
        return self.fn

    def signature(self):
        """(parameter names, required names, defaults, accepts anything)."""
        if not self._resolved:
            fn = self.function()
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                sig = None
            names, required, defaults, anything = [], [], {}, sig is None
            if sig is not None:
                for p in sig.parameters.values():
                    if p.kind is p.VAR_KEYWORD:
                        anything = True
                    elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                        names.append(p.name)
                        if p.default is p.empty:
                            required.append(p.name)
                        else:
                            defaults[p.name] = p.default
            if self.params is not None:
                names = list(self.params)
                required = [r for r in required if r in names]
                anything = False
            self._resolved.update(names=names, required=required, defaults=defaults, anything=anything)
        r = self._resolved
        return r["names"], r["required"], r["defaults"], r["anything"]

    def usage(self):
        names, required, defaults, anything = self.signature()
        def show(x):
            if isinstance(x, (tuple, list)):
                return "[" + ",".join(show(y) for y in x) + "]"
            return repr(x)

        parts = [p if p in required else f"{p}={show(defaults.get(p))}" for p in names]
        if anything:
            parts.append("...")
        return f"{self.name}:{','.join(parts)}" if parts else self.name


_REGISTRY: dict[str, Generator] = {}
_loaded_models_hook = False


def _key(name):
    return re.sub(r"[_\-\s]", "", str(name)).lower()


def register_generator(name, fn, params=None, doc=None, overwrite=False):
    """Make ``name:key=value,...`` call ``fn(key=value, ...)`` (fn returns a Model).

    ``fn`` may be a callable or a lazy ``"module:attribute"`` string.  ``params``: the accepted
    parameter names (default: fn's signature).  Registering an existing name raises unless
    ``overwrite=True``.  Returns fn, so it works as a decorator helper.
    """
    key = _key(name)
    if not key or not re.fullmatch(r"[a-z0-9.]+", key):
        raise ValueError(f"bad generator name {name!r} (letters, digits, '_', '-', '.')")
    if not (callable(fn) or (isinstance(fn, str) and ":" in fn)):
        raise TypeError(f"generator {name!r} must be callable or a 'module:attribute' string")
    if key in _REGISTRY and not overwrite:
        old = _REGISTRY[key]
        if old.fn is fn:
            return fn
        raise ValueError(f"a generator named {name!r} is already registered; pass overwrite=True to replace it")
    if doc is None:
        doc = (inspect.getdoc(fn) or "").split("\n")[0] if callable(fn) else ""
    _REGISTRY[key] = Generator(str(name), fn, None if params is None else tuple(params), doc)
    return fn


def unregister_generator(name):
    """Remove a generator (KeyError if unknown)."""
    del _REGISTRY[_key(name)]


def _load_models_hook():
    """Import partree.models once (its modules may register generators) and merge its
    ``GENERATORS`` dict, if any."""
    global _loaded_models_hook
    if _loaded_models_hook:
        return
    _loaded_models_hook = True
    from . import models

    for name, fn in dict(getattr(models, "GENERATORS", {}) or {}).items():
        if _key(name) not in _REGISTRY:
            register_generator(name, fn)


def generators():
    """{name: Generator} of every registered generator, sorted by name."""
    _load_models_hook()
    return {g.name: g for _, g in sorted(_REGISTRY.items())}


def generator_names():
    return list(generators())


def get_generator(name) -> Generator:
    _load_models_hook()
    g = _REGISTRY.get(_key(name))
    if g is None:
        raise PartreeInputError(f"unknown model generator {name!r}; known generators: "
                                f"{', '.join(generator_names()) or '(none)'}; or give a model file ending in "
                                f"{', '.join(FILE_SUFFIXES)}")
    return g


# ---------------------------------------------------------------------- parsing
_INT = re.compile(r"[+-]?\d[\d_]*")
_SCI_INT = re.compile(r"[+-]?\d+[eE]\+?\d+")


def parse_value(text):
    """A spec value: bool, None, int, float, list (in brackets) or str."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        return [parse_value(x) for x in re.split(r"[,;\s]+", inner)] if inner else []
    low = t.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    if _INT.fullmatch(t):
        return int(t)
    try:
        x = float(t)
    except ValueError:
        return t
    if _SCI_INT.fullmatch(t) and x.is_integer() and abs(x) < 2**63:
        return int(x)     # 1e6 -> 1000000
    return x


def _split_top(text, sep=","):
    """Split on sep outside brackets and quotes."""
    out, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return out


def parse_spec(spec):
    """``'name:k=v,k=v'`` -> (name, {k: value}).  No validation against the generator."""
    s = str(spec).strip()
    name, sep, rest = s.partition(":")
    name = name.strip()
    if not name or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise PartreeInputError(f"model spec {spec!r}: expected 'name' or 'name:key=value,...'")
    params = {}
    if sep and rest.strip():
        for item in _split_top(rest):
            if not item.strip():
                continue
            k, eq, v = item.partition("=")
            k = k.strip()
            if not eq or not re.fullmatch(r"[A-Za-z_]\w*", k):
                raise PartreeInputError(f"model spec {spec!r}: {item.strip()!r} is not key=value")
            if k in params:
                raise PartreeInputError(f"model spec {spec!r}: parameter {k!r} given twice")
            params[k] = parse_value(v)
    return name, params


def _coerce(value, default):
    """Adapt a parsed value to the type of the parameter's default where that is lossless."""
    if isinstance(default, bool):
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            return bool(value)
    elif isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif isinstance(default, float):
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, tuple) and isinstance(value, list):
        return tuple(value)
    return value


#: parameters of the built-in generators that count things (bodies, units, a seed): integers only
#: (``nb=10.9`` is refused, not rounded; ``bf=1.5``, a fractional branching factor, is a number)
COUNT_PARAMS = ("n", "nb", "units", "seed")

#: peak bytes per body of building a model and its workspace (1-DOF joints: model arrays,
#: workspace and the generators' temporaries, as measured by ``scripts/benchmarks/bench_core.py``),
#: with a margin; multi-DOF joints take more, counted per velocity coordinate
BYTES_PER_BODY = 1400
BYTES_PER_DOF = 300


def _body_count(name, kwargs):
    """The number of bodies a built-in generator will make, from its parameters (None: unknown)."""
    key = _key(name)
    for p in ("nb", "n"):
        if p in kwargs and isinstance(kwargs[p], (int, float)) and not isinstance(kwargs[p], bool):
            return kwargs[p]
    if key == "scissor" and isinstance(kwargs.get("units"), (int, float)):
        # planar: at most 3 bodies a unit (with hubs); spatial sections: 3 per side and unit
        sides = {"triangle": 3, "square": 4}.get(str(kwargs.get("section", "planar")).lower(), 1)
        return 3 * sides * kwargs["units"] + (sides if sides > 1 else 1)
    return None


def available_memory():
    """Bytes this process may allocate: ``PARTREE_MAX_MEMORY`` (e.g. ``64G``, ``500M``; the CLI's
    ``--max-memory``) if set, else the machine's available memory (MemAvailable), else None."""
    env = os.environ.get("PARTREE_MAX_MEMORY")
    if env:
        return parse_size(env)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def parse_size(text):
    """Bytes from ``'64G'``, ``'500M'``, ``'2.5GB'``, ``'1e9'``."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", str(text))
    if not m:
        raise PartreeInputError(f"{text!r} is not a memory size (e.g. 64G, 500M)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " "))


def check_size(label, n):
    """Refuse, before allocating, a model of ``n`` bodies that will not fit in the memory this
    process may use (:func:`available_memory`), naming the size and the limit."""
    limit = available_memory()
    need = n * BYTES_PER_BODY
    if limit is not None and need > limit:
        def size(b):
            return f"{b / 2**30:.1f} GiB" if b >= 2**30 else f"{b / 2**20:.1f} MiB"

        raise PartreeInputError(f"model spec {label!r}: {int(n):,} bodies need about {size(need)} "
                                f"({BYTES_PER_BODY} B per body with its workspace), more than the "
                                f"{size(limit)} available; choose fewer bodies, or raise the limit "
                                f"with --max-memory / PARTREE_MAX_MEMORY if you know better")


def build(name, params=None, spec=None):
    """Call the generator ``name`` with ``params`` after checking them against its parameters.

    Integer parameters refuse non-integers (``nb=10.9``), and a model that would not fit in the
    available memory is refused before anything is allocated (:func:`check_size`)."""
    g = get_generator(name)
    params = dict(params or {})
    names, required, defaults, anything = g.signature()
    label = spec if spec is not None else name
    unknown = [k for k in params if k not in names] if not anything else []
    if unknown:
        raise PartreeInputError(f"model spec {label!r}: unknown parameter{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(map(repr, unknown))} for generator {g.name!r}; valid: "
                                f"{', '.join(names) or '(none)'} (usage: {g.usage()})")
    missing = [k for k in required if k not in params]
    if missing:
        raise PartreeInputError(f"model spec {label!r}: generator {g.name!r} needs "
                                f"{', '.join(map(repr, missing))} (usage: {g.usage()})")
    kwargs = {k: _coerce(v, defaults.get(k)) for k, v in params.items()}
    for k, v in kwargs.items():
        if k in COUNT_PARAMS and isinstance(v, float):
            raise PartreeInputError(f"model spec {label!r}: parameter {k!r} must be an integer, got {v!r}")
    n = _body_count(g.name, kwargs)
    if n is not None and n >= 1:          # (the generators refuse n < 1 themselves)
        check_size(label, n)
    try:
        model = g.function()(**kwargs)
    except PartreeInputError as exc:
        raise PartreeInputError(f"model spec {label!r}: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise PartreeInputError(f"model spec {label!r}: {exc}") from exc
    if not isinstance(model, Model):
        raise PartreeInputError(f"generator {g.name!r} returned {type(model).__name__}, not a Model")
    return model


def _looks_like_file(s):
    return s.lower().endswith(FILE_SUFFIXES)


def load_file(path, **kwargs):
    """Load a model file by suffix (kwargs go to load_urdf, load_mjcf or load_model)."""
    from .io import load_mjcf, load_model, load_urdf

    p = os.fspath(path)
    low = p.lower()
    if low.endswith(URDF_SUFFIXES):
        return load_urdf(p, **kwargs)
    if low.endswith(MJCF_SUFFIXES):
        return load_mjcf(p, **kwargs)
    if low.endswith(NATIVE_SUFFIXES):
        return load_model(p, **kwargs)
    raise PartreeInputError(f"{p}: unknown model file suffix; known: {', '.join(FILE_SUFFIXES)}")


def resolve_model(spec, **overrides) -> Model:
    """A Model from a Model, a model file path, or a generator spec (see the module doc).

    ``overrides`` are extra keyword arguments: generator parameters (they win over the spec's),
    or options of the file reader (e.g. ``floating_base=True`` for a URDF).
    """
    if isinstance(spec, Model):
        if overrides:
            raise PartreeInputError(f"resolve_model got a Model and options {sorted(overrides)}")
        return spec
    if isinstance(spec, os.PathLike):
        return load_file(spec, **overrides)
    if not isinstance(spec, str):
        raise PartreeInputError(f"a model must be a Model, a file path or a spec string, got {type(spec).__name__}")
    s = spec.strip()
    if not s:
        raise PartreeInputError("empty model spec")
    if _looks_like_file(s):
        head = s.partition(":")[0]
        # 'urdf:path=robot.urdf' is a generator spec; 'C:\robots\arm.urdf' or 'arm.urdf' is a file
        if os.path.exists(s) or ":" not in s or _key(head) not in _registry_keys():
            return load_file(s, **overrides)
    elif os.sep in s or (os.altsep and os.altsep in s) or os.path.isfile(s):
        if ":" not in s or _key(s.partition(":")[0]) not in _registry_keys():
            raise PartreeInputError(f"{s}: not a model file (known suffixes: {', '.join(FILE_SUFFIXES)}) "
                                    f"and not a generator spec")
    name, params = parse_spec(s)
    params.update(overrides)
    return build(name, params, spec=s)


def _registry_keys():
    _load_models_hook()
    return _REGISTRY.keys()


# ---------------------------------------------------------------------- built-in generators
def _urdf(path, floating_base=False, gravity=(0.0, 0.0, -9.81), inertia="warn"):
    """A URDF file (``urdf:path=robot.urdf,floating_base=true,inertia=fix``)."""
    from .io import load_urdf

    return load_urdf(str(path), floating_base=floating_base, gravity=gravity, inertia=inertia)


register_generator("autotree", "partree.models.autotree:auto_tree",
                   doc="Featherstone's autoTree: nb bodies, branching factor bf, skew, taper")
register_generator("urdf", _urdf)

__all__ = ["resolve_model", "register_generator", "unregister_generator", "generators", "generator_names",
           "get_generator", "parse_spec", "parse_value", "build", "load_file", "Generator"]
