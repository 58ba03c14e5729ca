"""The harness metrics' pool facts: a random ranking's hit@k counted over
each question's gold positions (against enumerating every top k), the share
of pools of k sessions or fewer, and both read from the outcomes table the
retrievers write (a repeated gold session id counts at each position)."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest

from memobench.evaluation.metrics import compute, random_hit
from memobench.retrieval.harness import Entries, SegmentRows


def _enumerated(pool: int, gold: int, k: int) -> Fraction:
    """The share of every possible top k (the first min(k, pool) of a random order: a uniform k-subset)
    of positions 0..pool-1, the first ``gold`` of them gold, that holds a gold position."""
    tops = list(combinations(range(pool), min(k, pool)))
    return Fraction(sum(any(p < gold for p in top) for top in tops), len(tops))


@pytest.mark.parametrize("pool", range(1, 9))
def test_random_hit_is_the_share_of_top_ks_holding_a_gold_position(pool):
    for gold in range(pool + 1):
        for k in (1, 2, 3, 5, 10):
            assert random_hit(pool, gold, k) == pytest.approx(float(_enumerated(pool, gold, k)), abs=1e-15), \
                (pool, gold, k)


def test_random_hit_with_more_gold_is_not_one_over_the_pool():
    # the single-gold figure min(k, n) / n undercounts a question with several gold sessions
    assert random_hit(20, 1, 5) == pytest.approx(5 / 20)
    assert random_hit(20, 3, 5) == pytest.approx(1 - (17 * 16 * 15 * 14 * 13) / (20 * 19 * 18 * 17 * 16))
    assert random_hit(20, 3, 5) > 5 / 20
    assert random_hit(4, 0, 10) == 0.0 and random_hit(4, 1, 10) == 1.0


def _row(i, pool, gold, status="evaluated", rank=0):
    return {"q_index": i, "question_id": f"q{i}", "question_type": "t", "status": status,
            "reason": None if status == "evaluated" else "no_gold", "in_types": status == "evaluated",
            "gold_rank": rank, "pool_size": pool, "gold_in_pool": gold}


def test_pool_facts_average_over_the_evaluated_questions_only():
    rows = [_row(0, 4, 1), _row(1, 8, 2, rank=3), _row(2, 30, 1, rank=1), _row(3, 3, 0, status="skipped")]
    m = compute(rows)
    assert m["pool_at_most"] == {"hit@1": 0.0, "hit@5": pytest.approx(1 / 3), "hit@10": pytest.approx(2 / 3)}
    for k, c in (("hit@1", 1), ("hit@5", 5), ("hit@10", 10)):
        want = (random_hit(4, 1, c) + random_hit(8, 2, c) + random_hit(30, 1, c)) / 3
        assert m["random"][k] == pytest.approx(want)
    assert m["mean_pool_size"] == pytest.approx(14)


def test_outcomes_count_each_position_of_a_repeated_gold_session():
    hay = Entries(ids=["a", "b", "a", "c", "d"], keys=[1, 2, 1, 3, 4], dates=[None] * 5, bases=[0] * 5)
    rows = SegmentRows()
    q = {"q_index": 0, "question_id": "q0", "question_type": "t", "gold": ["a", "d", "zz"]}
    rows.add(q, hay, final=["b", "a"], deep=["b", "a"])
    rows.add({**q, "q_index": 1, "question_id": "q1", "gold": []}, hay, skip="no_gold")
    out = rows.tables()[1].to_pylist()
    assert [(r["pool_size"], r["gold_in_pool"], r["gold_rank"]) for r in out] == [(5, 3, 2), (5, 0, 0)]
