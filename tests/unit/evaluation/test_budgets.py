"""Recall within token budgets (evaluation/budgets.py): where each item ends, when a gold
item is inside a budget, and the per-question figures, by the rules of
docs/protocol.md#token-budgets (the figures of whole runs are held to an independent
oracle in tests/workflow/test_reference_retrievers.py and test_locomo.py)."""

from __future__ import annotations

from memobench.evaluation import budgets


def test_ends_count_each_separator_between_two_items():
    assert budgets.ends([100, 50, 7], 1) == [100, 151, 159]
    assert budgets.ends([100, 50, 7], 0) == [100, 150, 157]
    assert budgets.ends([], 3) == []


def test_a_gold_item_is_inside_when_its_whole_rendering_is():
    ends = budgets.ends([500, 12, 600], 1)  # 500, 513, 1114
    first, complete = budgets.gold_reach(ends, [None, "a", "b"], 2)
    assert (first, complete) == (513, 1114)
    f = budgets.question_figures(first, complete, ends, (512, 513, 1113, 1114), ks=(1, 2, 5))
    assert [f[budgets.any_name(t)] for t in (512, 513, 1113, 1114)] == [0.0, 1.0, 1.0, 1.0]
    assert [f[budgets.all_name(t)] for t in (512, 513, 1113, 1114)] == [0.0, 0.0, 0.0, 1.0]
    # context tokens at k: the end of the k-th item, or of the last one of a shorter list
    assert [f[budgets.context_name(k)] for k in (1, 2, 5)] == [500, 513, 1114]


def test_a_repeated_gold_id_counts_at_its_first_listing():
    ends = [10, 20, 30, 40]
    assert budgets.gold_reach(ends, ["a", "a", None, "b"], 2) == (10, 40)
    assert budgets.gold_reach(ends, ["a", "a", None, None], 2) == (10, None)


def test_empty_gold_and_empty_lists_follow_the_official_rules():
    # no gold: recall_any 0, recall_all 1, whatever is listed
    first, complete = budgets.gold_reach([10, 20], [None, None], 0)
    assert (first, complete) == (None, 0)
    f = budgets.question_figures(first, complete, [10, 20], (512,), ks=(1,))
    assert (f["recall_any@512tok"], f["recall_all@512tok"]) == (0.0, 1.0)
    # an empty list: nothing delivered, no tokens
    f = budgets.question_figures(*budgets.gold_reach([], [], 1), [], (512,), ks=(1, 10))
    assert (f["recall_any@512tok"], f["recall_all@512tok"], f["context_tokens@10"]) == (0.0, 0.0, 0)


def test_summary_takes_tokens_to_the_first_gold_over_the_questions_that_list_one():
    rows = [{"first_gold_tokens": t, "budgets": budgets.question_figures(t, t, [t or 5], (100,), ks=(1,))}
            for t in (40, None, 90, 200)]
    s = budgets.summary(rows, (100,), ks=(1,))
    assert s["questions"] == 4 and s["first_gold_listed"] == 3
    assert s["recall_any@100tok"] == 0.5
    assert (s["tokens_to_first_gold_mean"], s["tokens_to_first_gold_median"]) == (110.0, 90)
    assert s["context_tokens@1"] == (40 + 5 + 90 + 200) / 4


def _turn_tables(tmp_path):
    """A question over two sessions (keys 7 and 9) and a turns count table holding 9's turns 0 and 1 only."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"q_index": [0], "question_id": ["q"], "question_type": ["t"], "haystack_id": [0],
                             "gold": [["s1"]], "parse_error": [None], "evidence": [None]}), tmp_path / "q.parquet")
    pq.write_table(pa.table({"haystack_id": [0, 0], "position": [0, 1], "session_id": ["s0", "s1"],
                             "session_key": [7, 9]}), tmp_path / "h.parquet")
    meta = {"memobench.tokenizer": json.dumps({"name": "cl100k_base", "sha256": "ab" * 32, "separator_tokens": 1})}
    pq.write_table(pa.table({"session_key": pa.array([9, 9], pa.int32()), "seq": pa.array([0, 1], pa.int32()),
                             "tokens": pa.array([300, 40], pa.int32())}).replace_schema_metadata(meta),
                   tmp_path / "turns.parquet")
    return [tmp_path / n for n in ("q.parquet", "h.parquet", "turns.parquet")]


def test_a_turn_list_is_counted_turn_by_turn_against_the_turn_gold(tmp_path):
    q, h, counts = _turn_tables(tmp_path)
    row = {"q_index": 0, "question_id": "q", "question_type": "t", "excluded": None, "gold": ["s1_2"],
           "items": [(1, 0, "s1_1"), (1, 1, "s1_2")]}
    block, per_question = budgets.compute_turns("longmemeval", [row], q, h, counts, (300, 341))
    assert per_question[0] == (341, 341, [300, 341], True)
    assert block["grain"] == "turn" and block["depth"] == 2
    assert (block["recall_any@300tok"], block["recall_any@341tok"]) == (0.0, 1.0)


def test_a_listed_turn_without_a_count_fails_naming_it(tmp_path):
    import pytest

    from memobench.core.errors import DataError

    q, h, counts = _turn_tables(tmp_path)
    row = {"q_index": 0, "question_id": "q", "question_type": "t", "excluded": None, "gold": [],
           "items": [(1, 1, "s1_2"), (0, 3, "s0_4")]}
    with pytest.raises(DataError, match=r"turns\.parquet: question q: rank 2: session position 0 has no turn 3"):
        budgets.compute_turns("longmemeval", [row], q, h, counts, (512,), turns_path="turns.parquet")
