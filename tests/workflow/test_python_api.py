"""The Python API (docs/python-api.md) on the real LoCoMo file: the page's
example runs as written, in a copy of the project set up as the README says
(the LoCoMo file in `data/`), and the API's figures for a run file are
`memobench score`'s and the pipeline's metrics.json, to the last digit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO
from tests.helpers.doc_examples import blocks, user_project

PAGE = REPO / "docs" / "python-api.md"


@pytest.fixture(scope="module")
def example(tmp_path_factory, locomo_path):
    """The page's Python block run in the project's copy: (the copy, the block's namespace, what it printed)."""
    (code,) = blocks(PAGE.read_text(encoding="utf-8"), "python")
    proj, _ = user_project(tmp_path_factory.mktemp("python_api") / "memobench", locomo_path)
    namespace: dict = {"__name__": "__example__"}
    here = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.chdir(proj)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(code, str(PAGE), "exec"), namespace)
    finally:
        os.chdir(here)
    return proj, namespace, out.getvalue() + err.getvalue()


def test_the_page_example_runs_as_written(example):
    proj, ns, printed = example
    result, res = ns["result"], ns["res"]
    assert (result.dataset, result.variant, result.against) == ("locomo10", "recency", "v0.8.0")
    assert "memobench" not in printed and "steps" not in printed  # quiet: only the example's own prints
    assert set(res.outcomes["variant"]) == {"recency", "v0.8.0"}
    by_category = ns["by_category"]
    assert list(by_category.columns) == ["recency", "v0.8.0"]
    assert set(by_category.index) == {"1", "2", "3", "4", "5"}  # LoCoMo's categories
    m = json.loads((proj / "results" / "locomo10" / "v0.8.0" / "metrics.json").read_text())
    for qtype, block in m["by_type"].items():  # the per-type table's questions: the same mean as the harness's
        assert by_category.loc[qtype, "v0.8.0"] == pytest.approx(block["hit@1_rate"], abs=1e-12)


def test_api_figures_are_memobench_scores_and_the_pipelines(example):
    proj, ns, _ = example
    import memobench

    result = ns["result"]
    m = json.loads((proj / "results" / "locomo10" / "recency" / "metrics.json").read_text())
    off = json.loads((proj / "results" / "locomo10" / "recency" / "official.json").read_text())
    # the same figures as metrics.json and official.json, to the last digit
    for k, v in result.metrics.items():
        assert v == m[k], k
    assert {k: m[k] for k in ("questions", "hit@1", "hit@5", "hit@10", "hit@1_rate", "hit@5_rate", "hit@10_rate",
                              "mrr", "mrr_sum", "items")} == {k: result.metrics[k] for k in (
        "questions", "hit@1", "hit@5", "hit@10", "hit@1_rate", "hit@5_rate", "hit@10_rate", "mrr", "mrr_sum",
        "items")}
    assert result.official == off["official"]
    # memobench score prints the very text the API computed: the same figures, to the digit printed
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "memobench.cli", "score", "runs/recency.json", "--dataset",
                           "locomo10", "--against", "v0.8.0"], cwd=proj, capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == result.text + "\n"
    # the same run configured as a variant of the pipeline's own: the same metrics.json figures
    (proj / "mine.yaml").write_text(
        "run: [locomo10]\nvariants:\n  recency-cfg:\n    run: {file: runs/recency.json, format: json}\n"
        "datasets:\n  locomo10:\n    variants: [v0.8.0, recency-cfg]\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "mine.yaml", "--",
                           "results/locomo10/recency-cfg/metrics.json"], cwd=proj, capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pipeline = json.loads((proj / "results" / "locomo10" / "recency-cfg" / "metrics.json").read_text())
    for k, v in result.metrics.items():
        assert v == pipeline[k], k
    # load() reads the same files: its long-form rates are metrics.json's, its per-question hits sum to its counts
    res = memobench.load(proj / "results")
    got = res.metrics[(res.metrics["variant"] == "recency") & res.metrics["question_type"].isna()]
    assert dict(zip(got["metric"], got["value"])) == {"hit@1": m["hit@1_rate"], "hit@5": m["hit@5_rate"],
                                                       "hit@10": m["hit@10_rate"], "mrr": m["mrr"]}
    rows = res.outcomes[res.outcomes["variant"] == "recency"]
    assert [int(rows[k].sum()) for k in ("hit@1", "hit@5", "hit@10")] == [m["hit@1"], m["hit@5"], m["hit@10"]]
    assert rows["mrr"].sum() == pytest.approx(m["mrr_sum"], rel=1e-12)
    official = res.official[(res.official["variant"] == "recency") & (res.official["subset"] == "all")]
    assert dict(zip(official["metric"], official["value"])) == {
        k: v for k, v in off["official"].items() if "@" in k}
