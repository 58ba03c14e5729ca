"""Experiment harnesses (exp..exp5, CN, zh, analyze, falsifier): the quirks
that define their published numbers, checked on generated data and the
embedded zh set."""

from __future__ import annotations

import pytest

from memobench.evaluation.analyze import RECIPE as ANALYZE_RECIPE
from memobench.evaluation.analyze import analyze_question
from memobench.memo.engine import Ranker
from memobench.evaluation.falsifier import verdict
from memobench.tools.generate.longmemeval import write_longmemeval
from memobench.evaluation.metrics import compute
from memobench.datasets.normalize import normalize_longmemeval
from memobench.retrieval.memo import load_segment, run_segment
from memobench.memo.timewords import date_words, relative_days, relative_min_time
from memobench.catalog.variants import resolve


@pytest.fixture(scope="module")
def lme(tmp_path_factory):
    root = tmp_path_factory.mktemp("exp")
    raw = root / "s.json"
    write_longmemeval(raw, n_questions=60, sessions_per_question=30, seed=21, spice=True)
    normalize_longmemeval(raw, root / "n", log=lambda m: None)
    return raw, root / "n"


@pytest.fixture(scope="module")
def segment(lme):
    n = lme[1]
    return load_segment(n / "questions.parquet", n / "haystacks.parquet", n / "events.parquet", 1, 1)


def lists(segment, name, family="s"):
    questions, haystacks, corpus = segment
    rankings, outcomes = run_segment(resolve(name, family), questions, haystacks, corpus, log=lambda m: None)
    by_q: dict[int, list[str]] = {}
    for r in rankings.to_pylist():
        by_q.setdefault(r["q_index"], []).append(r["session_id"])
    return by_q, outcomes.to_pylist()


@pytest.mark.parametrize("a,b", [("exp3-T2s", "exp3-V6"), ("exp3-T3", "exp3-T1"), ("exp4-B-hard", "exp4-C-len")])
def test_identical_by_construction(segment, a, b):
    assert lists(segment, a) == lists(segment, b)


def test_t2h_filter_changes_something_and_t2m_keeps_v6_after_t2h(segment):
    v6, _ = lists(segment, "exp3-V6")
    t2h, _ = lists(segment, "exp3-T2h")
    t2m, _ = lists(segment, "exp3-T2m")
    for q in v6:
        expected = list(dict.fromkeys(t2h.get(q, []) + v6[q]))[:10]
        assert t2m.get(q, []) == expected


def test_exp_v1_counts_only_the_first_tokens_list(segment):
    questions, haystacks, corpus = segment
    variant = resolve("exp-V1", "s")
    ranker = Ranker(corpus, variant.recipe)
    checked = 0
    for q in questions:
        hay = haystacks.get(q["haystack_id"])
        window = variant.recipe.window_tokens(q["question"])
        if hay is None or len(window) < 2:
            continue
        ranker.backend.load(hay, q["haystack_id"])
        first = ranker.candidates(hay, window[0], "token")[:10]
        # all weights are 1: t1's top-10 re-sorted by representative time, stable
        expected = [hay.ids[i] for i, _ in sorted(first, key=lambda c: -c[1])]
        assert ranker.rank(hay, q["haystack_id"], q["question"])["weighted"] == expected
        checked += 1
    assert checked > 20


def test_analyze_baseline_equals_exp5_base(segment):
    questions, haystacks, corpus = segment
    by_q, _ = lists(segment, "exp5-base")
    ranker = Ranker(corpus, ANALYZE_RECIPE)
    n = 0
    for q in questions:
        hay = haystacks.get(q["haystack_id"])
        row = analyze_question(ranker, corpus, hay, q["haystack_id"], q) if hay else None
        if row is None:
            continue
        gold = set(q["gold"])
        ours = by_q.get(q["q_index"], [])
        rank = next((r for r, s in enumerate(ours, 1) if s in gold), 0)
        assert row["rank"] == rank
        assert row["cause"] != "merge-cut"  # structurally impossible
        if row["rank"]:
            assert row["ceiling_top10"] and row["ceiling_union"]
        n += 1
    assert n > 20


def test_expm_hit_rates_divide_by_evaluated(segment):
    _, outcomes = lists(segment, "exp4m-base", family="m")
    m = compute(outcomes)
    assert m["unrecorded"] >= 0
    assert m["hit@1_rate"] == m["hit@1"] / (m["questions"] + m["unrecorded"])
    assert m["mrr"] == m["mrr_sum"] / m["questions"]


def test_stem_variants_differ_from_base_somewhere(segment):
    base, _ = lists(segment, "exp5-base")
    s1, _ = lists(segment, "exp5-S1")
    assert base != s1  # S1 double-counts stems equal to their tokens


def test_timewords():
    assert relative_days("What did I do yesterday?") == 1
    assert relative_days("Anything from last  weekend?") == 7
    assert relative_days("in the past month") == 30
    assert relative_days("a couple of days ago") == 5
    assert relative_days("recently") == 14
    assert relative_days("last fall we met") == 90
    assert relative_days("lastweek") is None
    assert relative_min_time("today?", "2023/05/30 (Tue) 23:40") == 1685490000000 - 86_400_000
    assert relative_min_time("today?", "not a date") is None
    assert date_words("In June 2023, on Monday and june again; summertime") == ["june", "2023", "monday"]


def test_falsifier_verdicts():
    assert verdict([34, 0, -4]).startswith("inconsistent")
    assert verdict([0, 0, 0]) == "no change in any segment"
    assert verdict([1, 2, 3]).startswith("consistent: better")
    assert verdict([-1, -2]).startswith("consistent: worse")


def test_printed_percentages_round_like_the_harness():
    from memobench.evaluation.metrics import pct
    from memobench.reporting.numbers import printed

    # 100 * 23 / 80 is exactly 28.75 and toFixed rounds the tie up; 100 * (23 / 80)
    # is 28.749999... and would print 28.7.
    assert pct(23, 80) == "28.8"
    assert printed({"hit@1": 23, "hit_denominator": 80}, "hit@1") == "28.8"
