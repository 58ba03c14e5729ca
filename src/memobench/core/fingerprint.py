"""Code fingerprints for Snakemake's rerun triggers, computed, never listed.

A stage's fingerprint hashes the source of every package module the stage can
run: the adapter (``stages/adapter.py``), the stage's own module
(``stages/<stage>.py``), and, transitively, every module those import anywhere
(module level or inside a function); never another stage's module. Editing a
module therefore reruns exactly the stages whose closure holds it, and what
follows them: one stage's module reruns that stage, the adapter every stage;
a module no stage imports (the CLI, the generator, the benchmark) reruns
nothing.

Imports are read from the source (``ast``), so the closure cannot drift from
the code. Only intra-package imports count: third-party versions are recorded
as provenance instead of rerunning everything after an upgrade. Every
Snakemake start computes the fingerprints, so a module's imports are found by
parsing only its import statements (located by a line scan), not the whole
module, which would cost every start far more. A test checks the two agree
on every module.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path

PACKAGE = "memobench"
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the memobench package (this module is in core/)
ADAPTER = "stages.adapter"  # the adapter every rule's job goes through


@lru_cache(maxsize=None)
def module_path(name: str) -> Path | None:
    """The file of package module ``name`` (dotted, without the package prefix);
    found once per process, as a module's imports are (:func:`imports_of`)."""
    base = PACKAGE_DIR.joinpath(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _resolve(node: ast.AST, current: str) -> set[str]:
    """Package modules named by one import statement of module ``current``."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] == PACKAGE and len(parts) > 1:
                found.add(".".join(parts[1:]))
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            pkg = current.split(".")[:-1]  # the package holding ``current``
            if module_path(current) is not None and module_path(current).name == "__init__.py":
                pkg = current.split(".")
            pkg = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
            base = pkg + (node.module.split(".") if node.module else [])
        elif node.module and node.module.split(".")[0] == PACKAGE:
            base = node.module.split(".")[1:]
        else:
            return found
        if base:
            found.add(".".join(base))
        for alias in node.names:  # ``from . import x`` / ``from .pkg import sub``
            sub = ".".join(base + [alias.name])
            if module_path(sub) is not None:
                found.add(sub)
    return {m for m in found if module_path(m) is not None}


# a line that starts an import statement (at any indentation)
_IMPORT_LINE = re.compile(r"^[ \t\f]*(?:from(?:[ \t]+|(?=\.))[.\w]+[ \t]*import\b|import[ \t]+\w)", re.M)
# an import this line scan would not see: after ";" or ":" on one line
_INLINE_IMPORT = re.compile(r"[;:][ \t]*(?:from|import)\b")


def import_statements(text: str) -> list:
    """The import statements of a module's source. Each line that starts one
    is parsed alone, with its parenthesized or backslash-continued rest. A
    line of a string that reads like an import names at worst a module it
    could import (an extra rerun). Where the scan cannot be sure, the whole
    module is parsed and walked instead: a statement that does not parse
    alone (a comment holding a parenthesis inside an import list, say), or
    an import that may follow ``;`` or ``:`` on its line. A missed import
    would leave a stage's cache stale, an extra one only reruns it."""
    if _INLINE_IMPORT.search(text):
        return _walked(text)
    found = []
    for m in _IMPORT_LINE.finditer(text):
        end = text.find("\n", m.start())
        end = len(text) if end < 0 else end
        line = text[m.start():end]
        if "(" in line and ")" not in line:
            close = text.find(")", end)
            end = len(text) if close < 0 else close + 1
        else:
            while line.endswith("\\") and end < len(text):
                nxt = text.find("\n", end + 1)
                end = len(text) if nxt < 0 else nxt
                line = text[m.start():end]
        try:
            found += ast.parse(text[m.start():end].lstrip(" \t\f")).body
        except SyntaxError:
            return _walked(text)
    return found


def _walked(text: str) -> list:
    return [n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Import, ast.ImportFrom))]


# a module that imports modules by name (the catalog loading the modules that register its rows) lists
# them in a tuple of dotted names at the start of a line: ``LOADS = ("a.b", ...)``
_LOADS = re.compile(r"^LOADS = \(([^)]*)\)", re.M)


def loads(text: str) -> set[str]:
    """The package modules a module's ``LOADS`` tuple names (imported by name, so read as its imports)."""
    m = _LOADS.search(text)
    return set(re.findall(r"[\"']([\w.]+)[\"']", m.group(1))) if m else set()


@lru_cache(maxsize=None)
def imports_of(name: str) -> frozenset[str]:
    """Every package module that module ``name`` imports, anywhere in its
    source, and those its ``LOADS`` names."""
    out: set[str] = set()
    text = module_path(name).read_text(encoding="utf-8")
    for node in import_statements(text):
        out |= _resolve(node, name)
    out |= {m for m in loads(text) if module_path(m) is not None}
    # a submodule's package __init__ runs first
    parts = name.split(".")
    for i in range(1, len(parts)):
        if module_path(".".join(parts[:i])) is not None:
            out.add(".".join(parts[:i]))
    out.discard(name)
    return frozenset(out)


def closure(roots, stop=frozenset(), exclude=frozenset()) -> set[str]:
    """``roots`` and every module they import, transitively; modules in ``stop``
    are included but not followed, modules in ``exclude`` neither."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        m = todo.pop()
        if m in seen or m in exclude:
            continue
        seen.add(m)
        if m not in stop:
            todo.extend(imports_of(m) - seen)
    return seen


def stage_module(stage: str) -> str:
    """The module (dotted) that holds stage ``stage``: ``stages.<stage>``."""
    name = f"stages.{stage}"
    if name == ADAPTER or module_path(name) is None:
        raise KeyError(f"no stage {stage!r} in stages/")
    return name


def stage_modules(stage: str, exclude=frozenset()) -> set[str]:
    """The package modules stage ``stage`` can run: the adapter, the stage's
    own module and their closure (the adapter imports no stage module, so no
    other stage's code is in it). Modules in ``exclude`` are left out, with
    what only they import (the retriever seam's implementations:
    ``catalog.registry.code_fingerprint``)."""
    return set(_stage_modules(stage, frozenset(exclude)))


@lru_cache(maxsize=None)
def _stage_modules(stage: str, exclude: frozenset) -> frozenset[str]:
    # the package's own __init__ runs first
    return frozenset(closure([ADAPTER, stage_module(stage)], exclude=exclude) | {"__init__"})


@lru_cache(maxsize=None)
def _sha256(path: str, size: int, mtime_ns: int) -> bytes:
    return hashlib.sha256(Path(path).read_bytes()).digest()


def file_sha256(path) -> bytes:
    """sha256 of a file's bytes, hashed once per process for each (path, size,
    mtime): a Snakemake start computes every rule's fingerprint, and each
    module is in many of them. An edit changes the size or the mtime; a
    rewrite with the same size inside one mtime tick, between two reads by
    one process, is not a case a workflow's parse meets."""
    st = os.stat(path)
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


def digest(modules, files=()) -> str:
    """sha256 (16 hex) of package ``modules`` (dotted names) and ``files``:
    of each one's name and its bytes' sha256, in order."""
    h = hashlib.sha256()
    for m in sorted(modules):
        path = PACKAGE_DIR / "__init__.py" if m == "__init__" else module_path(m)
        h.update(m.encode() + b"\0" + file_sha256(path) + b"\0")
    for f in files:
        h.update(file_sha256(f) + b"\0")
    return h.hexdigest()[:16]


def stage_fingerprint(stage: str, *extra_files) -> str:
    """sha256 (16 hex) of the stage's module closure plus ``extra_files`` (its script)."""
    return digest(stage_modules(stage), extra_files)
