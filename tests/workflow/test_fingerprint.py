"""Stale detection through Snakemake itself, in a scratch copy that ran every
stage once: which package modules each stage really loads when it runs; for
every module, which jobs' recorded code fingerprints an edit changes; and what
Snakemake's dry run plans after edits to a stage, a retriever and a model;
against the scan of tests/unit/core/test_fingerprint.py and
``memobench.core.fingerprint``."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
import yaml

from tests.helpers import REPO, ReferenceServer, copy_project, dry_run_jobs, snakemake, write_config
from tests.unit.core.test_fingerprint import (HAVE_DENSE, HAVE_STATIC, MODULES, STAGES, module_file,
                                              scanned_embedding_modules, scanned_stage_modules,
                                              scanned_variant_modules)
from memobench.core.fingerprint import stage_modules
from memobench.catalog.registry import retriever_of
from memobench.catalog.variants import resolve
from memobench.tools.generate.longmemeval import write_longmemeval


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A scratch copy of the project that ran every stage once (a generated
    LongMemEval file in 2 segments with analyze and an experiment pair, plus
    the embedded zh set), with each stage's loaded modules recorded."""
    root = tmp_path_factory.mktemp("fingerprint")
    server = ReferenceServer("user")
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
                          + ["mine", "fused", "service", "turns"]}},
        variants={"imported": {"run": {"file": str(run), "format": "json"}},
                  # a memory service (the latency stage runs for it)
                  "service": {"system": {"url": server.url}},
                  "mine": {"retriever": {"callable": f"{retr}/mine.py:rank", "prepare": f"{retr}/mine.py:prepare"}},
                  "fused": {"fuse": {"of": ["v0.8.0", "mine"]}},
                  # a turn variant (the turn_run and turn_qrels stages run for it)
                  "turns": {"base": "bm25-official", "grain": "turn"}},
        exports={"retrieval_log": ["lme/v0.8.0"]},  # so that session_json and retrievallog run
    )
    # each job, a new process, records at exit the package modules it imported
    # (tests/helpers/record_imports/sitecustomize.py, which Python loads at start-up)
    dump = root / "imports"
    dump.mkdir()
    recorder = REPO / "tests" / "helpers" / "record_imports"
    try:
        snakemake(proj, "--cores", "2", configfile=cfg, snakefile=proj / "Snakefile",
                  env={"MEMOBENCH_RECORD_IMPORTS": str(dump),
                       "PYTHONPATH": os.pathsep.join(filter(None, [str(recorder), os.environ.get("PYTHONPATH")]))})
    finally:
        server.kill()
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


def _job_graph(proj, cfg) -> tuple[dict[str, str], dict[str, set[str]], dict[str, str], dict[str, list[str]]]:
    """Every job's rule, job -> the jobs that consume its outputs (Snakemake's
    --dag; jobs, not rules: a rule's jobs of different datasets follow different
    jobs), each retrieve job's variant and embeddings job's model, and every
    job's output files (from the dry run of the same DAG: its labels leave some
    wildcards out)."""
    out = snakemake(proj, "--dag", "--forceall", configfile=cfg, snakefile=proj / "Snakefile").stdout
    rule = dict(re.findall(r'\t(\d+)\[label = "(\w+)', out))
    down: dict[str, set[str]] = {job: set() for job in rule}
    for a, b in re.findall(r"\t(\d+) -> (\d+)", out):
        down[a].add(b)
    dry = snakemake(proj, "-n", "--forceall", configfile=cfg, snakefile=proj / "Snakefile").stdout
    variant, outputs = {}, {}
    for name, block in re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):\n((?:    .*\n)+)", dry, re.M):
        job = re.search(r"jobid: (\d+)", block).group(1)
        assert rule[job] == name, (job, name)  # the same DAG, the same job ids
        listed = re.search(r"^    output: (.*)$", block, re.M)
        outputs[job] = listed.group(1).split(", ") if listed else []
        if name == "retrieve":
            variant[job] = re.search(r"variant=([^,\s]+)", block).group(1)
        if name == "embeddings":
            variant[job] = re.search(r"model=([^,\s]+)", block).group(1)
    assert set(variant) == {job for job, r in rule.items() if r in ("retrieve", "embeddings")}
    return rule, down, variant, outputs


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


# Every job's code fingerprint, recomputed by the package in the scratch copy after each module edit: the
# stage's (each stage), each variant's retrieve job's, each model's embeddings job's, the prepare job's.
FINGERPRINTS = r"""
import json, sys
from pathlib import Path

import yaml
from snakemake.utils import update_config

import memobench
from memobench import plan
from memobench.catalog.variant import from_spec
from memobench.catalog.registry import code_fingerprint
from memobench.core.fingerprint import stage_fingerprint
from memobench.retrieval.python import prepare_fingerprint
from memobench.retrieval.reference import embeddings
from memobench.stages import all_stages

proj, cfg_path, todo = Path.cwd(), Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
assert Path(memobench.__file__).resolve().is_relative_to(proj.resolve()), memobench.__file__  # the copy's package, not the checkout's
config = yaml.safe_load((proj / "config.yaml").read_text())
update_config(config, yaml.safe_load(cfg_path.read_text()))  # as Snakemake merges --configfile
script = proj / "workflow" / "scripts" / "stage.py"

def fingerprints():
    out = {f"stage {s}": stage_fingerprint(s, script) for s in all_stages()}
    for ds, specs in plan.variant_specs(config).items():
        for name, spec in specs.items():
            if "run" not in spec:  # an imported run's segments are import_run's jobs
                out[f"retrieve {ds}/{name}"] = code_fingerprint(from_spec(spec), script)
    for model in todo["models"]:
        out[f"embeddings {model}"] = embeddings.code_fingerprint(model, script)
    for ds, name in todo["prepared"]:
        out[f"prepare {ds}/{name}"] = prepare_fingerprint(from_spec(plan.prepare_spec(config, ds, name)), script)
    return out

result = {"": fingerprints()}
for module, file in todo["modules"].items():
    path = proj / file
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# an edit\n")
        result[module] = fingerprints()
    finally:
        path.write_bytes(original)
print(json.dumps(result))
"""


def _recorded_params(proj) -> dict[str, list]:
    """Snakemake's own record of each output file's params ({output path: params, each as its repr}),
    from its metadata folder (one file per output, named by the path in url-safe
    base64, cut into "@"-prefixed folders when long)."""
    import base64

    folder = proj / ".snakemake" / "metadata"
    out = {}
    for f in folder.rglob("*"):
        if f.is_file():
            b64 = "".join(part.lstrip("@") for part in f.relative_to(folder).parts)
            recorded = json.loads(f.read_text()).get("params") or []
            # each rule's one params entry is its job (common.smk, stage_params), recorded as its repr:
            # its params, each as its repr
            out[base64.urlsafe_b64decode(b64).decode()] = [
                repr(v) for r in recorded for v in ast.literal_eval(ast.literal_eval(r))["params"].values()]
    return out


def test_editing_each_module_reruns_exactly_its_importers_and_what_follows(scratch, job_graph):
    """For every package module: the jobs whose code fingerprint an edit of
    it changes, with every job that follows them in Snakemake's DAG, are
    exactly the jobs of the stages whose scanned closure holds it (a retrieve
    job: only where its variant's retriever runs it; an embeddings job: only
    where its model does). A job's fingerprint is the one Snakemake recorded
    in its params when it ran (matched to what the package computes for each
    stage, variant and model), recomputed by the scratch copy's package after
    the edit: one process for all the modules instead of a Snakemake start
    each. That Snakemake reruns a job whose recorded params differ is its
    params trigger, which the tests below check with real dry runs after
    edits."""
    proj, cfg, _ = scratch
    rule, down, variant, outputs = job_graph
    spec = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    own = {job: retriever_of(resolve(v, "zh" if v.startswith("zh-") else "s", spec.get("variants"))).name
           for job, v in variant.items() if rule[job] == "retrieve"}
    todo = proj.parent / "fingerprint-todo.json"
    todo.write_text(json.dumps({
        "modules": {m: str(module_file(m).relative_to(REPO)) for m in MODULES},
        "models": sorted({variant[j] for j, r in rule.items() if r == "embeddings"}),
        "prepared": [["lme", "mine"]],
    }), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(proj / "src")}
    proc = subprocess.run([sys.executable, "-c", FINGERPRINTS, str(cfg), str(todo)], cwd=proj, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    computed = json.loads(proc.stdout)
    base = computed.pop("")
    recorded = _recorded_params(proj)
    # each job's fingerprint: the one value of its recorded params (each recorded as its repr) that the
    # package computes for some job kind
    keys_of: dict[str, set[str]] = {}
    for key, value in base.items():
        keys_of.setdefault(repr(value), set()).add(key)
    job_keys = {}
    for job, r in rule.items():
        if r == "all":
            continue
        params = {p for out in outputs[job] for p in recorded.get(out, ())}
        assert outputs[job] and all(out in recorded for out in outputs[job]), (r, outputs[job])
        found = [keys_of[p] for p in params if p in keys_of]
        assert len(found) == 1, f"job {job} ({r}): {len(found)} code fingerprints among its recorded params"
        job_keys[job] = found[0]
    assert len(computed) == len(MODULES)
    # the scan's view, once: each stage's modules, and each retrieve or embeddings job's own
    stage_scan = {st: scanned_stage_modules(st) for st in STAGES}
    job_scan = {job: (scanned_variant_modules(own[job]) if r == "retrieve" else scanned_embedding_modules(variant[job]))
                for job, r in rule.items() if r in ("retrieve", "embeddings")}
    for module in MODULES:
        reached = _with_downstream({job for job, r in rule.items() if module in stage_scan.get(r, ())
                                    and (job not in job_scan or module in job_scan[job])}, down)
        changed = {job for job, keys in job_keys.items() if any(computed[module][k] != base[k] for k in keys)}
        got = Counter(rule[job] for job in _with_downstream(changed, down))
        assert got == Counter(rule[job] for job in reached), f"editing {module}.py"


# an early stage, one in the middle, the last one, and the adapter (None) that every stage runs
@pytest.mark.parametrize("stage,upstream", [
    ("verify", {"download"}),
    ("merge", {"download", "verify", "normalize", "tokens", "context_tokens", "context_turns", "retrieve", "embeddings",
               "prepare", "import_run", "record_run"}),
    ("report", {"download", "verify", "normalize", "retrieve", "merge", "stats", "falsify", "analyze", "manifest"}),
    (None, set()),
])
def test_editing_one_stage_reruns_that_stage_and_what_follows_only(scratch, job_graph, stage, upstream):
    """Each stage's code is its own module (stages/<stage>.py) and the
    adapter: a statement added to one stage's module plans exactly that
    stage's jobs and the jobs that follow them, nothing upstream; one added
    to the adapter plans every job."""
    proj, cfg, _ = scratch
    rule, down, _, _ = job_graph
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
    ("src/memobench/retrieval/reference/lexical.py", REFERENCE + ["turns"]),
    # the fusion of v0.8.0 and mine follows its inputs
    ("src/memobench/memo/engine.py", ["v0.8.0", "v0.8.0-index", "exp3-V6", "exp3-T1", "zh-A", "zh-B", "fused"]),
    ("src/memobench/retrieval/python.py", ["mine", "fused"]),
    ("src/memobench/retrieval/fusion.py", ["fused"]),
    ("src/memobench/retrieval/harness.py", ["v0.8.0", "v0.8.0-index", "exp3-V6", "exp3-T1", "zh-A", "zh-B", "mine", "fused",
                                            "service", "turns"] + REFERENCE),
    # a memory service's variant and the HTTP client it drives the service with
    ("src/memobench/services/job/rank.py", ["service"]),
    ("src/memobench/services/transport/client.py", ["service"]),
])
def test_editing_one_retriever_reruns_only_its_variants(scratch, edited, variants):
    """Each retrieve job's code is its variant's retriever's: an edit to the
    lexical reference retrievers reruns the reference variants' segments and
    no Memo variant's, an edit to the engine the Memo variants' only (and the
    fusion of one of them), an edit to the fusion the fusion's only, an edit
    to the harness rules every variant's, an edit to the memory service's
    client its variant's only."""
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
