"""The recall-tokens frontier (reporting/frontier.py): the Pareto front over every variant's
(budget, recall) points, the report's table and its plot."""

from __future__ import annotations

from memobench.core.doc import Table
from memobench.reporting import frontier


def _run(variant: str, recalls: dict[int, float]) -> dict:
    return {"dataset": "d", "variant": variant, "kind": "reference",
            "budgets": {"budgets": sorted(recalls), "convention": "run_retrieval", "questions": 10,
                        "tokenizer": {"name": "cl100k_base", "sha256": "ab" * 32},
                        "context_tokens@10": 5000.0, "tokens_to_first_gold_median": 700,
                        **{f"recall_any@{t}tok": r for t, r in recalls.items()}}}


def test_a_point_is_on_the_front_when_none_reaches_as_much_within_as_few_tokens():
    assert frontier.pareto([(512, 0.2), (1024, 0.5), (1024, 0.4), (2048, 0.5), (2048, 0.6)]) == {0, 1, 4}
    # equal points dominate neither
    assert frontier.pareto([(512, 0.3), (512, 0.3)]) == {0, 1}
    runs = [_run("a", {512: 0.30, 1024: 0.50, 2048: 0.70}), _run("b", {512: 0.10, 1024: 0.60, 2048: 0.60})]
    assert frontier.fronts(runs) == {("a", 512): True, ("a", 1024): False, ("a", 2048): True,
                                     ("b", 512): False, ("b", 1024): True, ("b", 2048): False}


def test_the_table_marks_the_front_and_the_plot_is_drawn(tmp_path):
    runs = [_run("a", {512: 0.30, 1024: 0.50}), _run("b", {512: 0.10, 1024: 0.60}), {"dataset": "d", "variant": "t"}]
    blocks = frontier.frontier_blocks(runs, "frontier.png")
    (table,) = [b for b in blocks if isinstance(b, Table)]
    assert [r[3:5] for r in table.rows] == [["30.0%" + frontier.MARK, "50.0%"], ["10.0%", "60.0%" + frontier.MARK]]
    assert len(table.rows) == 2  # a run without budgets (a turn variant) has no row
    assert frontier.frontier_blocks([{"dataset": "d", "variant": "t"}]) == []
    frontier.frontier_plot(runs, tmp_path / "frontier.png")
    assert (tmp_path / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_turn_variant_has_its_own_front_and_table():
    """Recall of gold turns is not recall of gold sessions: a turn variant's points are never on,
    nor push off, the session variants' front."""
    turn = _run("t", {512: 0.90, 1024: 0.95})
    turn["budgets"]["grain"] = "turn"
    runs = [_run("a", {512: 0.30, 1024: 0.50}), turn]
    assert list(frontier.by_grain(runs)) == ["d", "d, turn grain"]
    tables = [b for b in frontier.frontier_blocks(runs) if isinstance(b, Table)]
    assert [[r[3:5] for r in t.rows] for t in tables] == [[["30.0%" + frontier.MARK, "50.0%" + frontier.MARK]],
                                                          [["90.0%" + frontier.MARK, "95.0%" + frontier.MARK]]]
