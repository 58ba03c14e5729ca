"""The package's layers (docs/architecture.md#the-package-in-layers): its
subpackages name them, no module-level import cycle, no layer imports a
higher one (lazy imports inside functions included), no cycle inside a subpackage
(lazy imports included), no module over 700 lines, the tools are imported
by nothing the pipeline runs, and the package never imports its tests.

Imports are read from the source (``ast``), so the checks cannot drift from
the code."""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest

from tests.helpers import REPO

PKG = REPO / "src" / "memobench"
# lowest first: a layer imports only the layers before it (and the top-level foundations)
LAYERS = ("core", "datasets", "memo", "runs", "catalog", "retrieval", "services", "evaluation", "reporting", "tools")
TOOLS = "tools"  # the generator and the benchmarks: nothing the pipeline runs imports them


def _dotted(path: Path) -> str:
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


FILES = {_dotted(p): p for p in sorted(PKG.rglob("*.py")) if "__pycache__" not in p.parts}
MODULES = sorted(FILES)  # "" is the package's own __init__


def _exists(name: str) -> bool:
    return name in FILES


@functools.lru_cache(maxsize=None)
def _tree(name: str) -> ast.Module:
    """Module ``name``'s syntax tree, parsed once (every test here reads every module; none changes it)."""
    return ast.parse(FILES[name].read_text(encoding="utf-8"))


def _imports(name: str, module_level_only: bool = False) -> set[str]:
    """Package modules that module ``name`` imports (dotted, below the package)."""
    tree = _tree(name)
    if module_level_only:
        nodes, todo = [], list(tree.body)
        while todo:  # module level: also inside if/try/with at module level, never in a def or class
            n = todo.pop()
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                nodes.append(n)
            elif isinstance(n, (ast.If, ast.Try, ast.With)):
                todo += [c for f in ("body", "orelse", "finalbody", "handlers") for c in getattr(n, f, [])]
            elif isinstance(n, ast.ExceptHandler):
                todo += n.body
    else:
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    here = name.split(".") if FILES[name].name == "__init__.py" else name.split(".")[:-1]
    here = [p for p in here if p]
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.Import):
            out |= {a.name.split(".", 1)[1] for a in n.names if a.name.startswith("memobench.")}
            continue
        if n.level:
            base = here[: len(here) - (n.level - 1)] + (n.module.split(".") if n.module else [])
        elif n.module == "memobench" or (n.module or "").startswith("memobench."):
            base = n.module.split(".")[1:]
        else:
            continue
        if _exists(".".join(base)):
            out.add(".".join(base))
        for a in n.names:
            if _exists(".".join(base + [a.name])):
                out.add(".".join(base + [a.name]))
    out.discard(name)
    out.discard("")  # the package's __init__ (its version)
    return out


def _layer(name: str) -> str:
    """A subpackage is one layer; a top-level module is its own."""
    return name.split(".")[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_at_module_level():
    graph = {m: _imports(m, module_level_only=True) for m in MODULES}
    assert _cycles(graph) == []


MAX_LINES = 700  # a module longer than this holds more than one concern: split it by concern


def test_no_import_cycle_inside_a_subpackage_counting_imports_in_functions():
    """Inside each subpackage (services/ above all: its jobs import lazily, inside functions, to stay
    light) no module reaches itself again through the others, lazy imports counted: each concern can be
    read, and moved, apart from what uses it."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the detector
    found = {}
    for layer in sorted({_layer(m) for m in MODULES if m}):
        inside = {m: {t for t in _imports(m) if _layer(t) == layer} for m in MODULES if m and _layer(m) == layer}
        if _cycles(inside):
            found[layer] = _cycles(inside)
    assert not found, found


def test_services_and_retrieval_share_no_module_name():
    """A reader who finds ``servers.py`` or ``library.py`` knows which of the two it is: the memory
    services' package and the retrievers' name no module alike."""
    def names(layer):
        return {m.rsplit(".", 1)[-1] for m in MODULES if _layer(m) == layer and m != layer}

    assert not names("services") & names("retrieval")


def test_no_module_is_longer_than_700_lines():
    long = {m or "__init__": n for m, path in FILES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_no_layer_imports_a_higher_one():
    """The layer graph (each subpackage one node, each top-level module its
    own) is acyclic, counting imports inside functions too: a lower layer
    never imports a higher one, not even lazily."""
    graph: dict[str, set[str]] = {}
    edges: dict[tuple[str, str], str] = {}
    for m in MODULES:
        if not m:
            continue
        for t in _imports(m):
            a, b = _layer(m), _layer(t)
            if a != b:
                graph.setdefault(a, set()).add(b)
                edges.setdefault((a, b), f"{m} -> {t}")
    cycles = _cycles(graph)
    assert not cycles, [(c, sorted(v for (a, b), v in edges.items() if a in c and b in c)) for c in cycles]
    upward = sorted(v for (a, b), v in edges.items()
                    if a in LAYERS and b in LAYERS and LAYERS.index(b) > LAYERS.index(a))
    assert not upward, f"a layer imports a later one (order: {', '.join(LAYERS)}): {upward}"


def test_tools_are_imported_only_by_tools():
    assert (PKG / TOOLS / "__init__.py").is_file()
    bad = {m: sorted(t for t in _imports(m) if _layer(t) == TOOLS) for m in MODULES if m and _layer(m) != TOOLS}
    assert not {m: t for m, t in bad.items() if t}


def test_the_package_never_imports_its_tests():
    for m in FILES:
        for n in ast.walk(_tree(m)):
            names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                     else [n.module or ""] if isinstance(n, ast.ImportFrom) and not n.level else [])
            for name in names:
                assert name.split(".")[0] not in ("tests", "naive", "reference_experiments", "conftest"), (m, name)


def test_subpackage_inits_import_nothing():
    """A subpackage's __init__ runs before each of its modules and is in every
    one's code fingerprint: an import there would put all of its importees in
    every module's fingerprint (editing one retriever would rerun them all)."""
    inits = sorted(p for p in PKG.rglob("__init__.py") if p.parent != PKG and "__pycache__" not in p.parts
                   and p.parent.name != "stages")  # stages/__init__ re-exports its adapter, in every stage anyway
    assert {p.parent.name for p in inits} >= set(LAYERS)
    for init in inits:
        layer = str(init.parent.relative_to(PKG))
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                    and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")], layer


@pytest.mark.parametrize("name", [m for m in MODULES if m])
def test_every_module_imports(name):
    importlib.import_module(f"memobench.{name}")
