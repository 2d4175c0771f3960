"""The package's layers point one way and its modules import no cycle.

Kernels and algorithms -> partition -> backends (serial, MPI, Dask) -> simulation -> interfaces
(CLI, plots).  Checked on the source (every import statement, at module level or inside a
function): a lower layer never imports a higher one, and the module-level imports form no cycle.
No private name (``_x``) is imported from another package of partree.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "partree"

#: layer of each package (a module not listed is in the layer of its package, or 0 at the top)
LAYERS = {"algorithms": 1, "parallel": 2, "simulation": 3, "cli": 4, "plotting": 4, "io": 1, "models": 1}
#: what a package may not import, beyond the layer rule
FORBIDDEN = {"algorithms": {"parallel", "simulation", "cli", "plotting"},
             "parallel": {"simulation", "cli", "plotting"},
             "simulation": {"cli"},
             "io": {"parallel", "simulation", "cli", "plotting"},
             "models": {"parallel", "simulation", "cli", "plotting"}}


def _modules():
    out = {}
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(name, path, top_level_only):
    """(imported module, imported names, at module level) of every import in a module."""
    tree = ast.parse(path.read_text())
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((mod, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
    return [(m, n) for m, n in found if m == "partree" or m.startswith("partree.")]


def _package(mod):
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


MODULES = _modules()


@pytest.mark.parametrize("name", sorted(m for m in MODULES if _package(m) in FORBIDDEN))
def test_lower_layers_do_not_import_higher_ones(name):
    pkg = _package(name)
    for mod, names in _imports(name, MODULES[name], top_level_only=False):
        targets = {_package(mod)} | {_package(f"{mod}.{n}") for n in names if f"{mod}.{n}" in MODULES}
        bad = targets & FORBIDDEN[pkg]
        assert not bad, f"{name} imports {mod} ({', '.join(sorted(bad))}): against the layers"


def test_no_import_cycle_at_module_level():
    graph = {}
    for name, path in MODULES.items():
        deps = set()
        for mod, names in _imports(name, path, top_level_only=True):
            for cand in [f"{mod}.{n}" for n in names] + [mod]:
                if cand in MODULES and cand != name:
                    deps.add(cand)
                    break
        graph[name] = deps
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in graph[u]:
            if state.get(v) == 1:
                # a package importing its own submodules is how packages are built: not a cycle
                cyc = stack[stack.index(v):] + [v]
                if not all(b.startswith(a + ".") or a.startswith(b + ".") for a, b in zip(cyc, cyc[1:])):
                    raise AssertionError("import cycle: " + " -> ".join(cyc))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(graph):
        if u not in state:
            visit(u)


def test_no_private_names_imported_across_packages():
    for name, path in MODULES.items():
        for mod, names in _imports(name, path, top_level_only=False):
            if _package(mod) == _package(name):
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            assert not private, f"{name} imports private {private} from {mod}"
