"""A retrieve job whose lists a sibling's job ranked only copies files
(retrieval/sharing.py): it starts without numpy, pyarrow or the engine. Most
jobs of a run of many variants are such jobs, so what the catalog imports to
learn which inputs a variant reads is paid by each of them. The report job
reads JSON files only: it loads no pyarrow. The stats of a dataset with no
pair to test load no scipy, and Snakemake's own process no numpy or pyarrow."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

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
