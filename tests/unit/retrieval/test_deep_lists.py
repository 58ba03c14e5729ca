"""Deep lists (docs/protocol.md#deep-lists-and-exports): every variant's ranking to depth 50.

For every built-in variant, on the real LoCoMo file and on a generated spiced
LongMemEval-format file: ranks 1-10 of the deep list are exactly the harness's
top-10 (the rankings table), the list is the harness ordering continued
(engine.deep_list), scores fall strictly with rank, no session is listed twice,
and a list goes past 10 only when the harness's list is full.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from memobench.evaluation import analyze
from memobench.datasets import normalize
from memobench.retrieval import memo as retrieval
from memobench.catalog import variants
from memobench.memo.engine import Ranker, deep_list, merge_final
from memobench.core.protocol import DEPTH as DEEP
from memobench.tools.generate.longmemeval import write_longmemeval

QUIET = lambda *a, **k: None  # noqa: E731


@pytest.fixture(scope="module")
def lme_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("deep_lme")
    raw = root / "lme.json"
    write_longmemeval(raw, n_questions=60, sessions_per_question=40, seed=31, spice=True)
    normalize.normalize_longmemeval(raw, root, log=QUIET)
    return root


@pytest.fixture(scope="module")
def locomo_dir(tmp_path_factory, locomo_path):
    root = tmp_path_factory.mktemp("deep_locomo")
    normalize.normalize_locomo(locomo_path, root, log=QUIET)
    return root


def _run(name, family, d):
    qs, hs, corpus = retrieval.load_segment(d / "questions.parquet", d / "haystacks.parquet",
                                            d / "events.parquet", 1, 1)
    return retrieval.run_segment(variants.resolve(name, family), qs, hs, corpus, log=QUIET, deep=True)


def _lists(table, score=False):
    out = defaultdict(list)
    for r in table.to_pylist():
        out[r["q_index"]].append((r["rank"], r["session_id"], r["question_id"]) + ((r["score"],) if score else ()))
    return out


def _check(name, rankings, deep):
    top, dl = _lists(rankings), _lists(deep, score=True)
    assert set(dl) == set(top), name
    longer = 0
    for q, rows in dl.items():
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1)), (name, q)
        assert [r[:3] for r in rows[:10]] == top[q], (name, q)  # ranks 1-10 unchanged
        assert len(rows) <= DEEP
        ids = [r[1] for r in rows]
        assert len(set(ids)) == len(ids), (name, q)
        scores = [r[3] for r in rows]
        assert all(a > b for a, b in zip(scores, scores[1:])), (name, q)
        if len(rows) > 10:
            assert len(top[q]) == 10, (name, q)
            longer += 1
    return longer


@pytest.mark.slow  # every variant on 60 questions x 40 sessions: the whole suite runs it, the unit run not
@pytest.mark.parametrize("family", ["s", "m"])
def test_every_lme_variant_keeps_its_top10(lme_dir, family):
    names = sorted(variants.builtin(family))
    assert len(names) >= 35 if family == "s" else len(names) >= 4
    short = []
    for name in names:
        rankings, _, deep = _run(name, family, lme_dir)
        if not _check(name, rankings, deep):
            short.append(name)
    # V1 counts only t1's list (at most 10 sessions): nothing to continue
    assert short == ["exp-V1"] or short == [], short


# every variant on the whole real file: the whole suite runs it, the unit run leaves it out
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(variants.builtin("locomo")))
def test_every_locomo_variant_keeps_its_top10(locomo_dir, name):
    rankings, _, deep = _run(name, "locomo", locomo_dir)
    assert rankings.num_rows > 19000
    assert _check(name, rankings, deep) > 1000  # most LoCoMo lists go deeper than 10


def test_deep_list_equals_analyze_merged_list(lme_dir):
    """exp5-base is analyze.cjs's baseline (W-070, length weights, S-ASCII,
    LIMIT 2000); analyze keeps the uncut merged list (P, then all of T), and
    the deep list is that list cut to 50."""
    qs, hs, corpus = retrieval.load_segment(lme_dir / "questions.parquet", lme_dir / "haystacks.parquet",
                                            lme_dir / "events.parquet", 1, 1)
    _, outcomes, deep = retrieval.run_segment(variants.resolve("exp5-base", "s"), qs, hs, corpus, log=QUIET,
                                              deep=True)
    lists = {q: [r[1] for r in rows] for q, rows in _lists(deep).items()}
    ranker = Ranker(corpus, analyze.RECIPE)
    compared = deeper = 0
    for q in qs:
        hay = hs.get(q["haystack_id"])
        row = analyze.analyze_question(ranker, corpus, hay, q["haystack_id"], q) if hay else None
        if row is None or q["q_index"] not in lists:
            continue
        ours = lists[q["q_index"]]
        rank = next((r for r, s in enumerate(ours, 1) if s in set(q["gold"])), 0)
        assert rank == (row["merged_rank"] if row["merged_rank"] <= DEEP else 0), q["question_id"]
        compared += 1
        if len(ours) > 10:
            # the deepest entry sits at the same place in analyze's merged list
            probe = analyze.analyze_question(ranker, corpus, hay, q["haystack_id"], dict(q, gold=[ours[-1]]))
            assert probe["merged_rank"] == len(ours), q["question_id"]
            deeper += 1
    assert compared > 30 and deeper > 30


def test_continuation_rules():
    final = [f"s{i}" for i in range(10)]
    # prepend: P then all of T, de-duplicated
    p, t = ["s0", "s1"], [f"s{i}" for i in range(1, 70)]
    assert merge_final(p, t[:10]) == final
    assert deep_list(final, p + t) == [f"s{i}" for i in range(50)]
    # a list the harness leaves short is not filled (drop_p removed P's entries)
    assert deep_list(final[:8], [f"s{i}" for i in range(30)]) == final[:8]
    # continuation never repeats what the top 10 already holds
    assert deep_list(final, final[::-1] + ["x", "s3", "y"]) == final + ["x", "y"]
