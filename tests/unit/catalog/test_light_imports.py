"""A retrieve job whose lists a sibling's job ranked only copies files
(retrieval/sharing.py): it starts without numpy, pyarrow or the engine. Most
jobs of a run of many variants are such jobs, so what the catalog imports to
learn which inputs a variant reads is paid by each of them. The report job
reads JSON files only: it loads no pyarrow. The stats of a dataset with no
pair to test load no scipy, Snakemake's own process no numpy or pyarrow, and
the jobs of a cold run before its merges no pyarrow.compute."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from memobench.catalog.variants import resolve
from memobench.evaluation.context import ENCODINGS
from tests.helpers import REPO

HEAVY = ("numpy", "pyarrow", "pyarrow.compute", "memobench.memo.engine", "memobench.retrieval.harness",
         "memobench.core.tables", "pandas")


def test_the_catalog_and_the_retrieve_stage_load_without_numpy_pyarrow_or_the_engine():
    # every row and retriever registered, every kind's inputs asked, as a job copying a sibling's lists does
    code = ("import json, sys\n"
            "from memobench.stages import retrieve\n"
            "from memobench.retrieval import sharing\n"
            "from memobench.catalog import registry\n"
            "from memobench.catalog.variants import resolve\n"
            "for v in ('v0.8.0', 'v0.8.0-index', 'bm25s', 'minilm', 'wordllama'):\n"
            "    sharing.needed_inputs(resolve(v, 's'))\n"
            "registry.kind_modules()\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_report_stage_loads_without_pyarrow():
    # the report reads JSON files; official.py, whose names it shows, imports pyarrow only where it reads tables
    code = ("import json, sys\n"
            "from memobench.stages import report\n"
            "from memobench.datasets.missing import find_missing, receipts_by_dataset\n"
            "from memobench.reporting.report import build_report\n"
            "from memobench.evaluation.official import LOCOMO_CATEGORIES, CONVENTIONS, metric_names\n"
            "print(json.dumps([m for m in ('pyarrow', 'memobench.core.tables', 'memobench.retrieval.harness') "
            "if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_workflow_s_plan_loads_without_numpy_or_pyarrow():
    # what every Snakemake start imports: common.smk's imports of the package, and what the plan's
    # functions import when called (the latency rule's timings); pyarrow alone was 0.12 s of each start
    lines = [line for line in (REPO / "workflow" / "rules" / "common.smk").read_text(encoding="utf-8").splitlines()
             if line.startswith("from memobench")]
    code = "\n".join(["import json, sys", *lines, "from memobench.retrieval.timings import MEASURES",
                      "print(json.dumps([m for m in ('numpy', 'pyarrow', 'pandas') if m in sys.modules]))"])
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert len(lines) > 5 and json.loads(out.stdout) == []


def test_the_statistics_of_a_dataset_with_no_pair_load_no_scipy():
    # a one-variant run's stats job: the power summary's two quantiles are known to the bit; a pair's
    # tests and another quantile still load scipy.special
    code = ("import json, sys\n"
            "from memobench.evaluation import correction\n"
            "summary = correction.power_summary([], {})\n"
            "before = 'scipy' in sys.modules\n"
            "correction.z(0.99)\n"
            "print(json.dumps([summary['z_alpha'], summary['z_power'], before, 'scipy.special' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    from scipy.special import ndtri

    assert json.loads(out.stdout) == [float(ndtri(0.975)), float(ndtri(0.8)), False, True]


def test_every_job_starts_without_sqlite3_or_pkgutil():
    # the adapter every job goes through asks about SQLite's errors only where sqlite3 is loaded
    code = ("import json, sys\n"
            "from memobench.stages import adapter\n"
            "print(json.dumps([m for m in ('sqlite3', 'pkgutil') if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_sqlite_and_os_failures_are_one_line_with_advice(tmp_path):
    from memobench.stages.adapter import environment_message

    assert environment_message(sqlite3.OperationalError("database or disk is full")).startswith("SQLite: database")
    assert environment_message(sqlite3.OperationalError("no such table: x")) is None
    full = OSError(28, "No space left on device", str(tmp_path / "x"))
    assert environment_message(full) == (f"{tmp_path / 'x'}: no space left on device; free some space and rerun "
                                         "(finished outputs are kept)")


def test_a_job_failing_on_sqlite_exits_in_one_line(tmp_path, capsys):
    from memobench.stages.adapter import run_logged

    def job(_):
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(SystemExit) as e:
        run_logged(tmp_path / "x.log", job, {}, {}, {}, {})
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and "another process is using the same index" in err


def test_a_cold_runs_jobs_before_the_merge_load_no_pyarrow_compute(tmp_path):
    # every job of a cold run before the merges, each through the stage adapter as its job runs it (the jobs' guard
    # included), in one process: normalize reading its file in two parts, the three tokens tables, a retrieve of each
    # memo backend, context_tokens and qrels. Importing pyarrow.compute wraps its ~300 functions in Python, about a
    # sixth of a small retrieve job; the kernels they call are reached without it (core.tables.kernels)
    from memobench.tools.generate.longmemeval import write_longmemeval

    raw = tmp_path / "lme.json"
    write_longmemeval(raw, n_questions=12, sessions_per_question=8, seed=3, spice=True)
    n = "results/ds/normalized/"
    variants = {name: {"name": name, "recipe": {**resolve(name, "s").recipe.__dict__}, "skip": "run"}
                for name in ("v0.8.0", "v0.8.0-index")}
    segment = {"rankings": "{}.parquet", "outcomes": "{}.outcomes.parquet", "deep": "{}.deep.parquet",
               "turns": "{}.turns.parquet"}
    code = f"""
import json, sys
from memobench.datasets import inparts
from memobench.stages import adapter
inparts.PART_MIN_BYTES = 1  # two parts, as a file of 64 MB or more is read
def job(rule, threads, inputs, outputs, params, wildcards):
    job_text = adapter.job_literal({{**params, "code": "c"}}, wildcards) + "\\n" + adapter.files_literal(inputs, outputs)
    adapter.main([rule, str(threads), f"results/logs/{{rule}}.log"], job_text)
tables = {{t: "{n}" + t + ".parquet" for t in ("questions", "haystacks", "sessions", "events")}}
job("normalize", 2, {{}}, {{**tables, "summary": "{n}summary.json"}}, {{"raw": {str(raw)!r}, "format": "longmemeval",
    "lenient": False}}, {{"dataset": "ds"}})
for tokenizer in ("fts5", "ascii", "exp6"):
    job("tokens", 1, {{"events": tables["events"]}}, {{"tokens": f"results/ds/tokens/{{tokenizer}}.arrow"}}, {{}},
        {{"dataset": "ds", "tokenizer": tokenizer}})
for name, spec, tokens in ((v, {variants!r}[v], t) for v, t in (("v0.8.0", {{"tokens": "ascii", "fts_tokens": "fts5"}}),
                                                               ("v0.8.0-index", {{"tokens": "exp6"}}))):
    job("retrieve", 1, {{"questions": tables["questions"], "haystacks": tables["haystacks"], "events": tables["events"],
                         **{{k: f"results/ds/tokens/{{t}}.arrow" for k, t in tokens.items()}}}},
        {{**{{k: f"results/ds/{{name}}/segments/" + p.format("seg1") for k, p in {segment!r}.items()}},
          "timings": f"results/logs/timings/ds/{{name}}/seg1.parquet"}},
        {{"variant": spec, "segment": 1, "n_segments": 1}}, {{"dataset": "ds", "variant": name, "segment": "seg1"}})
job("context_tokens", 1, {{"sessions": tables["sessions"], "events": tables["events"]}},
    {{"sessions": "results/ds/context_tokens/sessions.parquet"}},
    {{"tokenizer": {{"name": "cl100k_base", "sha256": {ENCODINGS["cl100k_base"][0]!r}}}}}, {{"dataset": "ds"}})
job("qrels", 1, {{"questions": tables["questions"]}}, {{"qrels": "results/ds/qrels.trec"}}, {{}}, {{"dataset": "ds"}})
print(json.dumps([m for m in ("pyarrow.compute", "pandas") if m in sys.modules]))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == []
    normalized = (tmp_path / "results" / "logs" / "normalize.log").read_text()
    assert "parts read at once" in normalized and "one pass" not in normalized
    for name in ("v0.8.0", "v0.8.0-index"):  # ranked: every question has its list
        assert pq.read_table(tmp_path / f"results/ds/{name}/segments/seg1.parquet").num_rows >= 12
    counts = pq.read_table(tmp_path / "results/ds/context_tokens/sessions.parquet")
    assert counts.num_rows == pq.read_table(tmp_path / "results/ds/normalized/sessions.parquet").num_rows
    assert sum(counts.column("tokens").to_pylist()) > 0
    assert len((tmp_path / "results/ds/qrels.trec").read_text().splitlines()) >= 12
