"""The catalog is the one home of a retriever's facts: each row is
registered by the module that defines the retriever, and nothing else in the
package spells a reference retriever's name or label (the config schema and
the docs' recipe table are generated from the catalog and checked against
it: tests/test_registry.py)."""

from __future__ import annotations

import ast
import functools

import pytest

from tests.helpers import REPO
from memobench.catalog import registry
from memobench.catalog.variants import references, resolve

PKG = REPO / "src" / "memobench"
# where another module names a retriever for a reason of its own (never to state the retriever's facts)
ALLOWED = {
    # LongMemEval's published figure is of its flat BM25 over user turns: the match names the retriever
    ("evaluation/published.py", "bm25-official"),
    # the reference retrievers' benchmark (a tool): its flags and its FTS5 OR-query comparison name what they time
    ("tools/bench_baselines.py", "fts5-bm25"), ("tools/bench_baselines.py", "minilm"),
    ("tools/bench_baselines.py", "wordllama"),
    # its --turns mode times LongMemEval's own flat BM25 at turn grain as a turn variant of it
    ("tools/bench_baselines.py", "bm25-official"),
}


@functools.lru_cache(maxsize=None)
def _strings(path) -> tuple[str, ...]:
    """Every string constant of a module's code (docstrings left out), with f-strings' literal parts
    (parsed once: every retriever's test reads every module)."""
    return tuple(_constants(ast.parse(path.read_text(encoding="utf-8"))))


def _constants(tree):
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value


@pytest.mark.parametrize("name", registry.names("reference"))
def test_a_reference_retriever_is_spelled_in_its_own_module_only(name):
    row = registry.row(name)
    own = PKG.joinpath(*row.module.split(".")).with_suffix(".py")
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if path == own or (rel, name) in ALLOWED:
            continue
        for s in _strings(path):
            if s == name or s.startswith(f"{name}:") or (row.label in s and len(row.label) > 6):
                found.append((rel, s))
    assert not found, f"{name} is the catalog's ({row.module}); spelled again in {found}"


def test_every_row_is_registered_by_its_own_module():
    for r in registry.rows():
        text = PKG.joinpath(*r.module.split(".")).with_suffix(".py").read_text(encoding="utf-8")
        assert "register(Row(" in text and f'"{r.name}"' in text, r.name
    assert set(registry.kind_modules()) == {"memo", "reference", "python", "fusion", "imported", "system"}


def test_reference_variants_are_the_rows():
    for family in ("s", "locomo"):
        got = references(family)
        for r in registry.rows("reference"):
            v = got[r.name]
            assert v.harness == "reference retriever: " + r.label and v.description.startswith(r.description)


@pytest.mark.parametrize("name,kind", [("v0.8.0", "memo"), ("v0.8.0-index", "memo"), ("bm25s", "reference"),
                                       ("bm25-official-all", "reference")])
def test_kind_of_a_variant_and_of_its_spec(name, kind):
    from memobench.catalog.variant import to_spec

    v = resolve(name, "s")
    assert registry.kind_of(v) == kind == registry.kind_of(to_spec(v))


def test_kind_of_user_variants():
    custom = {"mine": {"retriever": {"callable": "my.py:rank"}}, "fused": {"fuse": {"of": ["v0.8.0", "bm25s"]}},
              "theirs": {"run": {"file": "run.json", "format": "json"}},
              "service": {"system": {"url": "http://127.0.0.1:8765"}}}
    assert {n: registry.kind_of(resolve(n, "s", custom)) for n in custom} == {
        "mine": "python", "fused": "fusion", "theirs": "imported", "service": "system"}


def test_run_formats_are_the_runs_modules():
    """One module per run format (runs/), each reading it; the config schema's
    run.format enum, ``memobench score --format`` and the imported runs'
    readers are its FORMATS."""
    import importlib

    import yaml

    from memobench import runs
    from memobench.retrieval.imported import readers

    for name, module in runs.FORMATS.items():
        assert importlib.import_module(f"memobench.runs.{module}").NAME == name
    assert list(readers()) == list(runs.FORMATS)
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text(encoding="utf-8"))
    run = schema["properties"]["variants"]["additionalProperties"]["properties"]["run"]
    assert run["properties"]["format"]["enum"] == list(runs.FORMATS)
