"""One report covers the results folder: the results this run's config does
not make (an earlier overlay's, ``memobench score``'s) are listed apart, with
their figures as their metrics.json gives them; the plan names them, with a
digest of each, so that one appearing or changing remakes the report."""

from __future__ import annotations

import json

from memobench import plan
from memobench.reporting.report import build_report
from tests.unit.reporting.test_report import _md_rows, _run


def _build(tmp_path, res, metrics_paths, others):
    out = {k: res / f"report.{k}" for k in ("md", "html")}
    build_report(metrics_paths, [], out["md"], out["html"], res / "hitk.png", log=lambda m: None, others=others)
    return out["md"].read_text(encoding="utf-8"), out["html"].read_text(encoding="utf-8")


def test_results_this_run_does_not_make_are_listed_apart(tmp_path):
    res = tmp_path / "results"
    ours, _ = _run(res, "locomo10", "v0.8.0", [1, 2, 0, 1], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo")
    _run(res, "locomo10", "earlier", [1, 1, 1, 0], ["4", "5", "2", "1"], fmt="locomo", skip_rule="locomo",
         description="an earlier overlay's")
    (res / "mine" / "broken").mkdir(parents=True)
    (res / "mine" / "broken" / "metrics.json").write_text("{\"dataset\": \"mine\", \"variant\": \"broken\"}")
    md, html = _build(tmp_path, res, [ours], ["locomo10/earlier", "mine/broken"])
    main = next(rows for header, rows in _md_rows(md) if header[1].strip() == "variant")
    assert [r[1].strip() for r in main] == ["v0.8.0"]  # the run's own table holds its own variants only
    rows = next(r for h, r in _md_rows(md) if h[-1].strip() == "description")
    assert [r[1].strip() for r in rows] == ["earlier", "broken"]
    assert [c.strip() for c in rows[0][2:7]] == ["4", "75.0%", "75.0%", "75.0%", "0.7500"]
    assert rows[0][-1].strip() == "an earlier overlay's"
    assert "not shown: its metrics.json cannot be read (KeyError" in rows[1][-1]
    assert md.index("## Other results in this folder") < md.index("## Per question type")
    assert "id='others'" in html and "href='#others'" in html and "earlier" in html
    # none: no section, and the HTML's navigation names none
    md, html = _build(tmp_path, res, [ours], [])
    assert "Other results" not in md and "Other results" not in html


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
