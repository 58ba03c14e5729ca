"""LoCoMo10 end to end through Snakemake, on the real file."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.helpers import browser, memobench_lines
from tests.helpers import REPO, data_dir, dry_run_jobs, snakemake, write_config
from tests.oracles import token_budgets


@pytest.fixture(scope="module")
def locomo_run(tmp_path_factory, locomo_path):
    """One full run of the default target for LoCoMo only."""
    root = tmp_path_factory.mktemp("locomo_run")
    data = data_dir(root, locomo_path)
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=["locomo10"])
    work = root / "work"
    work.mkdir()
    proc = snakemake(work, "--cores", "2", configfile=cfg)
    return work, cfg, proc


def test_normalize_target_counts_and_nothing_to_do(tmp_path, locomo_path):
    data = data_dir(tmp_path, locomo_path)
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["locomo10"])
    target = "results/locomo10/normalized/summary.json"
    snakemake(tmp_path, "--cores", "2", target, configfile=cfg)
    norm = tmp_path / "results" / "locomo10" / "normalized"
    questions = pq.read_table(norm / "questions.parquet")
    haystacks = pq.read_table(norm / "haystacks.parquet")
    assert questions.num_rows == 1986
    assert len(set(haystacks.column("haystack_id").to_pylist())) == 10
    assert pq.read_table(norm / "sessions.parquet").num_rows == 272
    assert pq.read_table(norm / "events.parquet").num_rows == 5882
    summary = json.loads((norm / "summary.json").read_text())
    assert (summary["conversations"], summary["sessions"], summary["events"], summary["questions"]) == (10, 272, 5882, 1986)
    assert dry_run_jobs(tmp_path, target, configfile=cfg) == {}


def test_the_readme_shows_lines_of_this_run_s_report(locomo_run):
    """The README's LoCoMo output ("real output, shortened"): each of its lines
    is a line of this run's report.md, so a changed figure fails here."""
    work, _, _ = locomo_run
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("The LoCoMo run above gives (real output, shortened):", 1)[1].split("```", 2)[1]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    report = set((work / "results" / "report.md").read_text(encoding="utf-8").splitlines())
    assert len(lines) >= 6 and [ln for ln in lines if ln not in report] == []


def test_published_numbers(locomo_run):
    work, _, _ = locomo_run
    expected = {
        "v0.8.0": (1977, 1190, 1724, 1848, "0.7183"),
        "v0.8.0-index": (1977, 1190, 1724, 1848, "0.7183"),
        "v0.5.0": (1977, 1052, 1590, 1801, "0.6508"),
        "v0.4.0": (1977, 863, 1458, 1725, "0.5678"),
    }
    for variant, (n, h1, h5, h10, mrr) in expected.items():
        m = json.loads((work / "results" / "locomo10" / variant / "metrics.json").read_text())
        assert (m["questions"], m["hit@1"], m["hit@5"], m["hit@10"], f"{m['mrr']:.4f}") == (n, h1, h5, h10, mrr), variant
        assert m["skipped"] == {"no_gold": 9}
    m = json.loads((work / "results" / "locomo10" / "v0.8.0" / "metrics.json").read_text())
    cats = {c: (b["questions"], round(100 * b["hit@1_rate"], 1), round(b["mrr"], 3)) for c, b in m["by_type"].items()}
    assert list(cats) == ["4", "5", "2", "1", "3"]
    assert cats["4"] == (841, 66.7, 0.772) and cats["3"] == (89, 37.1, 0.494)


def test_rankings_contract(locomo_run):
    work, _, _ = locomo_run
    t = pq.read_table(work / "results" / "locomo10" / "v0.8.0" / "rankings.parquet")
    assert t.column_names[:3] == ["question_id", "rank", "session_id"]
    rows = t.to_pylist()
    assert len({r["question_id"] for r in rows}) == 1977
    assert {r["rank"] for r in rows} <= set(range(1, 11))
    assert rows[0]["question_id"] == "conv-26#0" and rows[0]["session_id"].startswith("session_")


def test_deep_lists_extend_the_rankings(locomo_run):
    """deep.parquet: the rankings' columns plus score and position (null: a
    harness list names ids), ranks 1-10 equal to rankings.parquet, lists to
    depth 50 (docs/protocol.md#deep-lists-and-exports)."""
    work, _, _ = locomo_run
    for variant in ("v0.8.0", "v0.8.0-index", "v0.5.0", "v0.4.0"):
        d = work / "results" / "locomo10" / variant
        top = pq.read_table(d / "rankings.parquet")
        deep = pq.read_table(d / "deep.parquet")
        assert deep.column_names == top.column_names + ["score", "position"]
        assert deep.column("position").null_count == deep.num_rows
        assert deep.equals(pq.read_table(d / "segments" / "seg1.deep.parquet"))
        cut = deep.filter(pc.less_equal(deep.column("rank"), 10)).drop_columns(["score", "position"])
        assert cut.equals(top), variant
        assert 10 < max(deep.column("rank").to_pylist()) <= 32  # a conversation has at most 32 sessions


def test_token_budgets_on_the_real_file_equal_an_independent_count(locomo_run, locomo_path, tmp_path):
    """Recall within token budgets of the Memo harness's lists on the real file, as
    tests/oracles/token_budgets.py computes them with tiktoken from the raw JSON."""
    work, _, _ = locomo_run
    token_budgets.assert_run_as_counted(work / "results", "locomo10", "locomo", locomo_path, ["v0.8.0"], tmp_path)


def test_report_and_manifest(locomo_run, locomo_path):
    work, _, _ = locomo_run
    report = (work / "results" / "report.md").read_text()
    assert "| locomo10 | v0.8.0 | 1977 | 60.2% (1190) / 60.2 = |" in report
    assert "0.6508 / 0.651 =" in report  # compared at the published precision
    assert (work / "results" / "hitk.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((work / "results" / "manifest.json").read_text())
    (entry,) = manifest["files"]
    assert entry["bytes"] == 2805274
    assert entry["sha256"] == "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"


def test_report_as_a_reader_sees_it(locomo_run, tmp_path):
    """report.html of the real run in headless chromium at 1400 pixels: every
    table and plot fits the page, no Markdown leaks into it (a backtick, a row
    split on a data character), the plots load, the screenshot is not blank."""
    work, _, _ = locomo_run
    html = work / "results" / "report.html"
    r = browser.measure(html, tmp_path)
    assert r["scrollWidth"] <= browser.WIDTH, r["scrollWidth"]
    assert max(r["tables"]) <= browser.WIDTH and all(right <= browser.WIDTH for _, right in r["images"])
    assert len(r["images"]) == 4 and all(w > 0 for w, _ in r["images"])  # hitk, forest, heatmap, frontier loaded
    assert r["rows"] and [x for x in r["rows"] if x[0] != x[1]] == []
    assert not r["backtickCells"] and not r["backtickText"] and r["scripts"] == 1
    text = html.read_text()
    assert "4 (single-hop)" in text and "5 (adversarial)" in text and "v0.8.0 (v0.8.0)" not in text
    assert "&lt; 0.0001" in text  # v0.4.0 against v0.8.0: at the floor of the sign flips
    ink = browser.screenshot(html, tmp_path / "report.png", tmp_path)
    assert 0.03 < ink < 0.9, ink


def test_second_run_has_nothing_to_do(locomo_run):
    work, cfg, _ = locomo_run
    assert dry_run_jobs(work, configfile=cfg) == {}


def test_truncated_file_stops_with_one_line(tmp_path, locomo_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "locomo10.json").write_bytes(locomo_path.read_bytes()[:1_000_000])
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["locomo10"])
    proc = snakemake(tmp_path, "--cores", "2", configfile=cfg, check=False)
    assert proc.returncode != 0
    ours = memobench_lines(proc.stderr)
    assert ours == ["memobench: locomo10.json: expected 2805274 bytes, got 1000000"] or (
        len(ours) == 1 and "2805274" in ours[0] and "1000000" in ours[0]
    ), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not list((tmp_path / "results").rglob("*.parquet"))


def test_bad_config_one_line(tmp_path):
    cfg = write_config(tmp_path / "cfg.yaml", data_dir="x", datasets={"locomo10": {"format": "locomo", "file": "a", "bytes": "many"}})
    proc = snakemake(tmp_path, "-n", configfile=cfg, check=False)
    assert proc.returncode != 0
    assert "memobench: config: datasets.locomo10.bytes: 'many' is not valid" in proc.stderr
    assert "Traceback" not in proc.stderr
    cfg = write_config(tmp_path / "cfg2.yaml", data_dir="x", datasets={"locomo10": {"format": "locomo", "file": "a", "bytes": 1, "variants": ["v9"]}})
    proc = snakemake(tmp_path, "-n", configfile=cfg, check=False)
    assert proc.returncode != 0 and "unknown variant 'v9'" in proc.stderr
