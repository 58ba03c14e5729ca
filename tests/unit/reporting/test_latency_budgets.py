"""Recall within a token budget against search latency on the latency page (reporting/latency_budgets.py):
services only, a front per budget over (latency, recall), the grains apart, and the panel row drawn."""

from __future__ import annotations

from memobench.core.doc import Table
from memobench.reporting import latency, latency_budgets
from memobench.reporting.frontier import MARK
from memobench.retrieval.timings import MEASURES


def _summary(variant, p50, recalls, measures=MEASURES["system"], grain="session", warm=True):
    phase = {"n": 4, **{q: {"ms": p50 * f, "low": p50 * f, "high": p50 * f} for q, f in (("p50", 1), ("p95", 2))}}
    return {"dataset": "d", "variant": variant, "measures": measures, "warm": phase if warm else {"n": 0},
            "cold": phase, "budgets": {"grain": grain, "tokenizer": {"name": "cl100k_base", "sha256": "ab" * 32},
                                       "budgets": sorted(recalls),
                                       **{f"recall_any@{t}tok": r for t, r in recalls.items()}}}


def test_each_budget_has_its_front_over_the_services_latency():
    fast = _summary("fast", 5.0, {512: 0.2, 1024: 0.6})
    slow = _summary("slow", 50.0, {512: 0.4, 1024: 0.5})  # at 1024 slower and lower: off the front
    local = _summary("bm25s", 0.1, {512: 0.9, 1024: 0.9}, measures=MEASURES["reference"])  # no service
    turns = _summary("turns", 1.0, {512: 0.1, 1024: 0.1}, grain="turn")
    summaries = [fast, slow, local, turns]
    assert {k: [s["variant"] for s in v] for k, v in latency_budgets.groups(summaries).items()} == {
        "d": ["fast", "slow"], "d, turn grain": ["turns"]}
    assert latency_budgets.fronts([fast, slow]) == {("fast", 512): True, ("slow", 512): True,
                                                    ("fast", 1024): True, ("slow", 1024): False}
    tables = [b for b in latency_budgets.blocks(summaries) if isinstance(b, Table)]
    assert [r[1:] for r in tables[0].rows] == [["5.00", "20.0%" + MARK, "60.0%" + MARK], ["50.0", "40.0%" + MARK, "50.0%"]]
    assert latency_budgets.blocks([local]) == []
    # a service with no warm search is placed at its cold p50
    assert latency_budgets.latency_ms(_summary("c", 7.0, {512: 0.1}, warm=False)) == 7.0


def test_the_latency_plot_gets_a_row_of_budget_panels(tmp_path):
    s = [_summary("fast", 5.0, {512: 0.2, 1024: 0.6}), _summary("slow", 50.0, {512: 0.4, 1024: 0.5}),
         _summary("turns", 1.0, {512: 0.1, 1024: 0.1}, grain="turn")]
    for x in s:
        x.update({"hit@5": 0.5, "load": {}})
    latency.plot(s, tmp_path / "latency.png")
    assert (tmp_path / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
