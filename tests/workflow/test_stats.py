"""The pairwise statistics through the real workflow, on the real LoCoMo
file's first conversation: statistics.compare chooses the pairs, stats.json
holds them Holm-corrected with per-category intervals and the dataset's
minimum detectable differences, the report's matrix shows them, and changing
the setting reruns the statistics and the report only."""

from __future__ import annotations

import json

import pytest

from tests.helpers import dry_run_jobs, memobench_lines, snakemake, write_config
from tests.oracles import token_budgets
from memobench.evaluation.official import LOCOMO_CATEGORIES

VARIANTS = ["v0.8.0", "v0.8.0-index", "v0.5.0", "v0.4.0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, locomo_path):
    root = tmp_path_factory.mktemp("stats_run")
    data = root / "data"
    data.mkdir()
    convs = json.loads(locomo_path.read_text(encoding="utf-8"))
    (data / "locomo1.json").write_text(json.dumps([convs[0]]), encoding="utf-8")
    datasets = {"locomo1": {"format": "locomo", "file": "locomo1.json", "bytes": (data / "locomo1.json").stat().st_size,
                            "segments": 1, "variants": VARIANTS}}

    def config(name, compare):
        return write_config(root / name, data_dir=str(data), run=["locomo1"], datasets=datasets,
                            statistics={"compare": compare})

    work = root / "work"
    work.mkdir()
    chosen = config("cfg.yaml", ["v0.4.0", "v0.8.0", "v0.5.0"])
    snakemake(work, "--cores", "2", configfile=chosen)
    return work, config, chosen


def test_compare_chooses_the_pairs_and_the_family_holds_the_comparisons(run):
    work, _, _ = run
    s = json.loads((work / "results/locomo1/stats.json").read_text())
    assert s["compared"] == ["v0.8.0", "v0.5.0", "v0.4.0"]  # the dataset's order
    assert [(p["variant"], p["baseline"]) for p in s["pairs"]] == [
        ("v0.5.0", "v0.8.0"), ("v0.4.0", "v0.8.0"), ("v0.4.0", "v0.5.0")]
    # comparisons: v0.8.0-index, v0.5.0 and v0.4.0 against v0.8.0 (their harness baseline); one pair only there
    assert {(c["variant"], c["baseline"]) for c in s["comparisons"]} == {
        ("v0.8.0-index", "v0.8.0"), ("v0.5.0", "v0.8.0"), ("v0.4.0", "v0.8.0")}
    assert s["holm"]["pairs"] == {"hit@1": 4, "hit@5": 4, "mrr": 4}
    n = s["resampled_questions"]
    assert n > 100 and all(p["n"] == n for p in s["pairs"])
    for p in s["pairs"] + s["comparisons"]:
        for m, mm in p["metrics"].items():
            assert mm["p_holm"] >= mm["p_analytic"]
            # no MDE where the differences do not vary (identical outcomes), a positive one elsewhere
            assert (mm["mde"] is None) == (mm["sd"] == 0) and (mm["mde"] is None or mm["mde"] > 0), (
                p["variant"], p["baseline"], m)
    same = next(c for c in s["comparisons"] if c["variant"] == "v0.8.0-index")  # the same lists as v0.8.0
    assert all(mm["diff"] == 0 and mm["p_holm"] == 1 for mm in same["metrics"].values())
    # the power summary reads the pairs whose differences vary: v0.8.0-index's identical lists are not one
    assert set(s["power"]["metrics"]) == {"hit@1", "hit@5", "mrr"} and s["power"]["metrics"]["mrr"]["pairs"] == 3


def test_token_budget_pairs_are_the_independent_counts_paired(run, tmp_path):
    """stats.json's budgets: each pair's per-question differences in recall within each budget, as
    tests/oracles/token_budgets.py counts them from the raw file, McNemar's p by scipy, Holm over the pairs."""
    from scipy.stats import binomtest

    work, _, _ = run
    s = json.loads((work / "results/locomo1/stats.json").read_text())["budgets"]
    assert [(p["variant"], p["baseline"]) for p in s["pairs"]] == [
        ("v0.5.0", "v0.8.0"), ("v0.4.0", "v0.8.0"), ("v0.4.0", "v0.5.0")]
    assert s["grains"] == {"v0.8.0": "session", "v0.5.0": "session", "v0.4.0": "session"}
    assert s["holm"]["pairs"] == {m: 3 for m in s["measures"]} and len(s["measures"]) == 2 * len(s["budgets"])
    enc = token_budgets.encoding("cl100k_base", tmp_path)
    want = {v: token_budgets.figures("locomo", work.parent / "data/locomo1.json",
                                     work / f"results/locomo1/{v}/deep.parquet", enc, s["budgets"])["per_question"]
            for v in s["grains"]}
    differ = 0
    for p in s["pairs"]:
        a, b = want[p["variant"]], want[p["baseline"]]
        qs = [q for q, r in a.items() if "all_categories" in r["views"]]
        for m in s["measures"]:
            d = [a[q][m] - b[q][m] for q in qs]
            mm = p["metrics"][m]
            k, wins = sum(x != 0 for x in d), sum(x > 0 for x in d)
            assert mm["n"] == len(qs) and mm["diff"] == pytest.approx(sum(d) / len(d), abs=1e-12), (p, m)
            assert mm["p_analytic"] == pytest.approx(binomtest(wins, k).pvalue if k else 1.0), (p, m)
            assert mm["p_holm"] >= mm["p_analytic"] and mm["ci95"][0] <= mm["diff"] <= mm["ci95"][1]
            differ += k > 0
    assert differ  # some pair differs somewhere: the test can fail


def test_per_category_intervals(run):
    work, _, _ = run
    s = json.loads((work / "results/locomo1/stats.json").read_text())
    m = json.loads((work / "results/locomo1/v0.4.0/metrics.json").read_text())
    c = next(c for c in s["comparisons"] if c["variant"] == "v0.4.0")
    assert list(c["by_type"]) == list(m["by_type"])  # the harness's category order
    assert set(c["by_type"]) <= set(LOCOMO_CATEGORIES)
    for cat, b in c["by_type"].items():
        assert b["n"] == m["by_type"][cat]["questions"]
        lo, hi = b["metrics"]["hit@1"]["ci95"]
        assert lo <= b["metrics"]["hit@1"]["diff"] <= hi


def test_report_matrix_and_mde(run):
    work, _, _ = run
    md = (work / "results/report.md").read_text()
    section = md.split("## Who beats whom")[1].split("\n## ")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ")]
    assert [r.split("|")[2].strip() for r in rows[1:]] == ["v0.8.0", "v0.5.0", "v0.4.0"]
    assert "Minimum detectable difference" in section and "α / 4" in section
    assert "## Paired differences per question type" in md and "4 (single-hop) (n " in md
    html = (work / "results/report.html").read_text()
    assert "class='matrix'" in html and "href='#matrix'" in html


def test_changing_compare_reruns_the_statistics_only(run):
    work, config, _ = run
    every = config("all.yaml", "all")
    jobs = dry_run_jobs(work, configfile=every)
    assert "stats" in jobs and set(jobs) <= {"stats", "report", "datasets", "all"}, jobs
    snakemake(work, "--cores", "2", configfile=every)
    s = json.loads((work / "results/locomo1/stats.json").read_text())
    assert s["compared"] == VARIANTS and len(s["pairs"]) == 6 and s["holm"]["pairs"]["mrr"] == 6
    before = (work / "results/locomo1/stats.json").read_bytes()
    snakemake(work, "--cores", "1", "--forcerun", "stats", "results/locomo1/stats.json", configfile=every)
    assert (work / "results/locomo1/stats.json").read_bytes() == before
    assert dry_run_jobs(work, configfile=every) == {}


def test_compare_naming_no_variant_fails_in_one_line(run, tmp_path):
    work, config, _ = run
    bad = config("bad.yaml", ["v0.8.0", "v9.9"])
    proc = snakemake(work, "-n", configfile=bad, check=False)
    assert proc.returncode != 0
    line = memobench_lines(proc.stderr)
    assert line == ["memobench: config: statistics.compare names 'v9.9', which no dataset lists under variants"], \
        proc.stderr[-2000:]
