#!/usr/bin/env python
"""Profile partree's compiled kernels with Linux ``perf``, by function.

``perf`` samples numba's compiled code, but it sees anonymous memory: no symbol names.  This
script compiles the call afresh (in a throw-away numba cache, so that the compiled object code
is at hand), reads the object's symbol table with ``nm`` (every compiled function and its size),
asks the JIT where it placed each, writes ``/tmp/perf-<pid>.map``, where ``perf report`` looks for the symbols of code generated at
run time, and then repeats the call for ``--seconds``.  Functions that the compiler inlined are
counted in their caller.

    perf record -F 4000 -o perf.data python scripts/benchmarks/perf_kernels.py \\
        --model scissor:units=10000,closed=true,support=slider --call constrained_dynamics --seconds 20
    perf report -i perf.data --no-children --sort sym --dsos '[JIT] tid <pid>' --percentage relative

Calls: ``constrained_dynamics`` (its compiled call ``constrained_call``), ``aba`` (``aba_call``)
and ``rnea`` (``rnea_call``), at the model's neutral configuration with a random velocity and
random joint forces (fixed seed).  The first call compiles, which takes a minute for
``constrained_dynamics``: ``--dsos`` with the process's JIT ("[JIT] tid <pid>", the pid the
script prints) and ``--percentage relative`` give the shares of the compiled code alone.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="partree-perf-")     # before numba is imported

import numpy as np  # noqa: E402

import partree  # noqa: E402
from partree.algorithms import aba as aba_module  # noqa: E402
from partree.algorithms import constrained_dynamics as cd_module  # noqa: E402
from partree.algorithms import rnea as rnea_module  # noqa: E402

CALLS = {"constrained_dynamics": (partree.constrained_dynamics, cd_module.constrained_call),
         "aba": (partree.aba, aba_module.aba_call),
         "rnea": (partree.rnea, rnea_module.rnea_call)}


def elf_object(library):
    """The ELF object code of a numba code library compiled in this process."""
    def find(x):
        if isinstance(x, (bytes, bytearray)) and bytes(x[:4]) == b"\x7fELF":
            return bytes(x)
        if isinstance(x, (tuple, list)):
            for y in x:
                r = find(y)
                if r is not None:
                    return r
        return None
    obj = find(library.serialize_using_object_code())
    if obj is None:
        raise RuntimeError("no object code in the compiled library")
    return obj


def short_name(mangled, demangled):
    """module::function of a compiled function: c++filt's name, or the length-prefixed parts of
    an Itanium nested name that c++filt leaves as it is (numba's ABI tags)."""
    name = demangled
    if name.startswith("_ZN"):
        parts, i = [], 3
        while i < len(mangled) and mangled[i].isdigit():
            j = i
            while mangled[j].isdigit():
                j += 1
            k = int(mangled[i:j])
            parts.append(mangled[j:j + k])
            i = j + k
        name = "::".join(parts) or mangled
    return name.split("[abi")[0].split("(")[0].replace("partree::algorithms::", "").replace(" ", "_")


def perf_map(dispatcher, path):
    """Write the perf map of the compiled functions of ``dispatcher``'s one overload to ``path``;
    returns their number."""
    (cres,) = dispatcher.overloads.values()
    lib = cres.library
    engine = lib._codegen._engine
    with tempfile.NamedTemporaryFile(suffix=".o") as f:
        f.write(elf_object(lib))
        f.flush()
        offset = {}
        for line in subprocess.run(["nm", "-S", "--defined-only", f.name], capture_output=True, text=True,
                                   check=True).stdout.splitlines():
            p = line.split()
            if len(p) == 4 and p[2] in "tTWw":
                offset[p[3]] = (int(p[0], 16), int(p[1], 16))
        names = subprocess.run(["c++filt"], input="\n".join(offset), capture_output=True, text=True,
                               check=True).stdout.splitlines()
    rows = []
    for (mangled, (off, size)), name in zip(offset.items(), names):
        address = engine.get_function_address(mangled)      # where the JIT placed it (sections move apart)
        if address:
            rows.append((address, size, short_name(mangled, name)))
    with open(path, "w") as out:
        for a, size, name in sorted(rows):
            out.write(f"{a:x} {size:x} {name}\n")
    return len(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a model spec (partree.resolve_model)")
    ap.add_argument("--call", choices=sorted(CALLS), default="constrained_dynamics")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long to repeat the call (default 20)")
    a = ap.parse_args(argv)
    model = partree.resolve_model(a.model)
    rng = np.random.default_rng(0)
    q = model.neutral()
    qd = 0.1 * rng.normal(size=model.nv)
    tau = rng.normal(size=model.nv)
    fn, dispatcher = CALLS[a.call]
    args = (model, q, qd, np.zeros(model.nv)) if a.call == "rnea" else (model, q, qd, tau)
    t0 = time.perf_counter()
    fn(*args)
    n = perf_map(dispatcher, f"/tmp/perf-{os.getpid()}.map")
    print(f"pid {os.getpid()}: compiled in {time.perf_counter() - t0:.1f} s; {n} functions in "
          f"/tmp/perf-{os.getpid()}.map; calling {a.call} for {a.seconds:g} s", flush=True)
    calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        fn(*args)
        calls += 1
    print(f"{calls} calls, {1e3 * (time.perf_counter() - t0) / calls:.3f} ms each")


if __name__ == "__main__":
    sys.exit(main())
