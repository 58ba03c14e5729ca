"""stats.json's token budgets (evaluation/budget_stats.py): per-question recall within a budget read
back from the merged outcomes' columns, paired over the questions both variants count, McNemar's
p from scipy's binomial test, Holm over the pairs, and the grains kept apart."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memobench.evaluation import budget_stats

BUDGETS = [512, 1024]
TOKENIZER = {"name": "cl100k_base", "sha256": "ab" * 32}


def _variant(tmp_path, name, first, complete, counted, grain="session", budgets=BUDGETS):
    folder = tmp_path / name
    folder.mkdir()
    n = len(first)
    pq.write_table(pa.table({"q_index": pa.array(range(n), pa.int32()), "in_budgets": pa.array(counted, pa.bool_()),
                             "first_gold_tokens": pa.array(first, pa.int32()),
                             "all_gold_tokens": pa.array(complete, pa.int32())}), folder / "outcomes.parquet")
    (folder / "official.json").write_text(json.dumps(
        {"budgets": {"grain": grain, "tokenizer": TOKENIZER, "budgets": budgets}}))
    return budget_stats.read_variant(folder / "outcomes.parquet", folder / "official.json")


def test_recall_within_a_budget_is_read_back_from_the_outcomes(tmp_path):
    v = _variant(tmp_path, "a", [100, 600, None, 1024], [100, 2000, None, 0], [True, True, True, False])
    assert v["per_question"] == {
        0: {"recall_any@512tok": 1.0, "recall_all@512tok": 1.0, "recall_any@1024tok": 1.0, "recall_all@1024tok": 1.0},
        1: {"recall_any@512tok": 0.0, "recall_all@512tok": 0.0, "recall_any@1024tok": 1.0, "recall_all@1024tok": 0.0},
        2: {"recall_any@512tok": 0.0, "recall_all@512tok": 0.0, "recall_any@1024tok": 0.0, "recall_all@1024tok": 0.0}}
    folder = tmp_path / "none"
    folder.mkdir()
    (folder / "official.json").write_text(json.dumps({"official": None}))
    assert budget_stats.read_variant(folder / "outcomes.parquet", folder / "official.json") is None


def test_pairs_over_the_questions_both_count_with_mcnemar_and_holm(tmp_path):
    from scipy.stats import binomtest  # here, not at the top: each test process collects this file (1 s)

    # a finds the gold within 512 tokens on 0..19, b on 0..4 and 20..21; question 29 counted by a only
    n = 30
    a = _variant(tmp_path, "a", [100 if q < 20 else None for q in range(n)], [None] * n, [True] * n)
    b = _variant(tmp_path, "b", [100 if q < 5 or q in (20, 21) else None for q in range(n)], [None] * n,
                 [q != 29 for q in range(n)])
    c = _variant(tmp_path, "c", [100] * n, [100] * n, [True] * n, grain="turn")
    s = budget_stats.budget_stats("d", ["a", "b", "c", "none"], {"a": a, "b": b, "c": c, "none": None},
                                  log=lambda line: None)
    assert s["measures"] == ["recall_any@512tok", "recall_all@512tok", "recall_any@1024tok", "recall_all@1024tok"]
    assert [(p["variant"], p["baseline"]) for p in s["pairs"]] == [("b", "a")]  # c: another grain
    (pair,) = s["pairs"]
    m = pair["metrics"]["recall_any@512tok"]
    assert pair["n"] == m["n"] == 29 and pair["only_baseline"] == 1
    assert m["variant"] == pytest.approx(7 / 29) and m["baseline"] == pytest.approx(20 / 29)
    assert m["diff"] == pytest.approx((7 - 20) / 29)
    assert m["p_analytic"] == pytest.approx(binomtest(2, 17, 0.5).pvalue)  # 2 wins of 17 discordant
    assert m["p_holm"] == m["p_analytic"] and s["holm"]["pairs"]["recall_any@512tok"] == 1
    lo, hi = m["ci95"]
    assert lo <= m["diff"] <= hi < 0 and 0 < m["p"] < 0.01
    assert pair["metrics"]["recall_all@512tok"]["diff"] == 0 and pair["metrics"]["recall_all@512tok"]["mde"] is None


def test_a_variant_counted_under_other_budgets_pairs_with_none(tmp_path):
    a = _variant(tmp_path, "a", [100, None], [100, None], [True, True])
    b = _variant(tmp_path, "b", [100, 100], [100, 100], [True, True], budgets=[2048])
    s = budget_stats.budget_stats("d", ["a", "b"], {"a": a, "b": b}, log=lambda line: None)
    assert s["pairs"] == [] and s["left_out"] == [{"variant": "b", "why": "other tokenizer or budgets"}]
    assert budget_stats.budget_stats("d", ["a"], {"a": None}) is None
