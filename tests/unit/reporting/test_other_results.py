"""One report covers the results folder (the board): the results this run's
config does not make (an earlier overlay's, ``memobench score``'s) join the
run's own tables and paired tests, a stale one is listed apart; the plan names
them, with a digest of each, so that one appearing or changing remakes the
report."""

from __future__ import annotations

import json

from memobench import plan
from memobench.reporting.report import build_report
from tests.helpers import browser
from tests.unit.reporting.test_report import _md_rows, _run


def _build(tmp_path, res, metrics_paths, others):
    out = {k: res / f"report.{k}" for k in ("md", "html")}
    build_report(metrics_paths, [], out["md"], out["html"], res / "hitk.png", log=lambda m: None, others=others)
    return out["md"].read_text(encoding="utf-8"), out["html"].read_text(encoding="utf-8")


def test_every_result_in_the_folder_is_on_the_board(tmp_path):
    res = tmp_path / "results"
    ours, _ = _run(res, "locomo10", "v0.8.0", [1, 2, 0, 1], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    _run(res, "locomo10", "earlier", [1, 1, 1, 0], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo",
         description="an earlier overlay's", baseline="v0.8.0")
    (res / ".score" / "locomo10").mkdir(parents=True)  # memobench score keeps its overlay there
    (res / ".score" / "locomo10" / "scored.yaml").write_text("{}")
    _run(res, "locomo10", "scored", [2, 1, 1, 1], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    (res / "mine" / "broken").mkdir(parents=True)
    (res / "mine" / "broken" / "metrics.json").write_text("{\"dataset\": \"mine\", \"variant\": \"broken\"}")
    md, html = _build(tmp_path, res, [ours], ["locomo10/earlier", "locomo10/scored", "mine/broken"])
    main = next(rows for header, rows in _md_rows(md) if header[1].strip() == "variant")
    # the main table holds every readable result of the folder, the run's own and the others
    assert [r[1].strip() for r in main] == ["v0.8.0", "earlier", "scored"]
    board = next(rows for h, rows in _md_rows(md) if h[2].strip() == "made by")
    # sorted by hit@1 (earlier 3 of 4, v0.8.0 and scored 2 of 4: then by name), with intervals; the
    # others were computed by other code than the installed (the fixture's fingerprint): marked
    assert [(r[0].strip(), r[1].strip(), r[2].strip()) for r in board] == [
        ("1", "earlier (other code)", "an earlier run (another config or overlay)"),
        ("2", "scored (other code)", "memobench score / the Python API"), ("3", "v0.8.0", "this run's config")]
    assert "earlier: computed by other code (source 0123456789ab; installed" in md
    assert board[0][4].strip().startswith("75.0% [")
    # paired tests among them: every pair of the dataset's entries
    paired = [line for line in md.splitlines() if line.startswith("|") and "earlier" in line and "v0.8.0" in line]
    assert paired, "the board's entries are in the paired tests"
    rows = next(r for h, r in _md_rows(md) if h[-1].strip() == "description")
    assert [r[1].strip() for r in rows] == ["broken"]  # an unreadable one is listed apart, saying why
    assert "not shown: its metrics.json cannot be read (KeyError" in rows[0][-1]
    assert md.index("## Board") < md.index("## Per question type")
    assert "id='others'" in html and "href='#others'" in html and "earlier" in html


def test_the_board_fits_the_page_in_a_browser(tmp_path):
    """A long definition (an imported run's path) wraps: nothing wider than the window."""
    res = tmp_path / "results"
    ours, _ = _run(res, "locomo10", "v0.8.0", [1, 2, 0, 1], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    long = "theirs"
    m, _ = _run(res, "locomo10", long, [1, 1, 1, 0], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    data = json.loads(m.read_text())
    data["run"] = {"file": "/" + "/".join(["a-long-folder-name"] * 20) + "/run.json", "format": "json",
                   "sha256": "f" * 64, "ignored": {}, "questions_listed": 4, "absent": 0, "truncated": 0}
    m.write_text(json.dumps(data))
    _build(tmp_path, res, [ours], [f"locomo10/{long}"])
    r = browser.measure(res / "report.html", tmp_path)
    assert r["scrollWidth"] <= browser.WIDTH, r
    assert [x for x in r["rows"] if x[0] != x[1]] == []


def test_a_result_on_another_data_file_is_stale_and_compared_with_nothing(tmp_path):
    res = tmp_path / "results"
    ours, _ = _run(res, "locomo10", "v0.8.0", [1, 2, 0, 1], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    _run(res, "locomo10", "old", [1, 1, 1, 1], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    (res / "locomo10" / "old" / "official.json").write_text(json.dumps(
        {"official": None, "data_file": {"file": "locomo10.json", "bytes": 5, "sha256": "b" * 64, "label": "x"}}))
    manifest = res / "manifest.json"
    manifest.write_text(json.dumps({"files": [{"dataset": "locomo10", "file": "data/locomo10.json", "bytes": 9,
                                               "sha256": "a" * 64}]}))
    out = {k: res / f"report.{k}" for k in ("md", "html")}
    build_report([ours], [], out["md"], out["html"], res / "hitk.png", log=lambda m: None,
                 others=["locomo10/old"], manifest_path=manifest)
    md = out["md"].read_text(encoding="utf-8")
    main = next(rows for header, rows in _md_rows(md) if header[1].strip() == "variant")
    assert [r[1].strip() for r in main] == ["v0.8.0"]  # never mixed in
    stale = next(rows for h, rows in _md_rows(md) if h[3].strip() == "why")
    assert [r[1].strip() for r in stale] == ["old"]
    assert "computed on another data file (sha256 bbbbbbbbbbbb; this folder's aaaaaaaaaaaa)" in stale[0][3]


def test_the_plan_names_the_folders_results_the_run_does_not_make(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Snakemake's working directory
    config = {"run": ["locomo10"], "datasets": {"locomo10": {"variants": ["v0.8.0"]}}}
    assert plan.other_results(config) == {}
    for ds, v in (("locomo10", "v0.8.0"), ("locomo10", "their"), ("mine", "v0.8.0")):
        (tmp_path / "results" / ds / v).mkdir(parents=True)
        (tmp_path / "results" / ds / v / "metrics.json").write_text(json.dumps({"v": v}))
    (tmp_path / "results" / ".score").mkdir()  # score's overlays, and the caches, hold no variant's results
    found = plan.other_results(config)
    assert sorted(found) == ["locomo10/their", "mine/v0.8.0"]
    before = found["locomo10/their"]
    (tmp_path / "results" / "locomo10" / "their" / "metrics.json").write_text(json.dumps({"v": "changed"}))
    assert plan.other_results(config)["locomo10/their"] != before  # a changed result remakes the report
    before = plan.other_results(config)["locomo10/their"]
    (tmp_path / "results" / "locomo10" / "their" / "official.json").write_text("{}")
    assert plan.other_results(config)["locomo10/their"] != before  # its official.json is shown too


def test_a_latency_page_of_an_earlier_run_is_said_to_be_so(tmp_path):
    res = tmp_path / "results"
    ours, _ = _run(res, "locomo10", "v0.8.0", [1, 2, 0, 1], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    (res / "latency.html").write_text("<html></html>")
    (res / "latency.json").write_text(json.dumps([{"dataset": "locomo10", "variant": "svc"}]))
    out = {k: res / f"report.{k}" for k in ("md", "html")}
    for made, said in ((False, True), (True, False), (None, False)):
        build_report([ours], [], out["md"], out["html"], res / "hitk.png", log=lambda m: None, latency_made=made)
        md = out["md"].read_text(encoding="utf-8")
        assert ("`latency.html` beside this report is an earlier run's" in md) is said, made
        assert ("(locomo10/svc)" in md) is said
