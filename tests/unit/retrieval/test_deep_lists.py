"""Deep lists (docs/protocol.md#deep-lists-and-exports): every variant's ranking to depth 50.

For every built-in variant: ranks 1-10 of the deep list are exactly the
harness's top-10 (the rankings table), the list is the harness ordering
continued (engine.deep_list), scores fall strictly with rank, no session is
listed twice, and a list goes past 10 only when the harness's list is full
(:func:`keeps_top10`). The M variants are checked here on a generated spiced
LongMemEval-format file; the S and LoCoMo variants on the tables
test_shared_run.py makes of every variant anyway (a generated spiced file and
the real LoCoMo file), so those rankings are not made twice.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow.parquet as pq
import pytest

from memobench.evaluation import analyze
from memobench.datasets import normalize
from memobench.retrieval import memo as retrieval, sharing
from memobench.catalog import variants
from memobench.memo.engine import Ranker, deep_list, merge_final
from memobench.core.protocol import DEPTH as DEEP
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers import token_files

QUIET = lambda *a, **k: None  # noqa: E731


@pytest.fixture(scope="module")
def lme_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("deep_lme")
    raw = root / "lme.json"
    write_longmemeval(raw, n_questions=60, sessions_per_question=40, seed=31, spice=True)
    normalize.normalize_longmemeval(raw, root, log=QUIET)
    return root


def _lists(table, score=False):
    out = defaultdict(list)
    for r in table.to_pylist():
        out[r["q_index"]].append((r["rank"], r["session_id"], r["question_id"]) + ((r["score"],) if score else ()))
    return out


def keeps_top10(name, rankings, deep) -> int:
    """Check a variant's deep list against its top 10 (the module's rules);
    returns how many of its lists go past 10."""
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


@pytest.mark.slow  # every M variant on 60 questions x 40 sessions: the whole suite runs it, the unit run not
def test_every_m_variant_keeps_its_top10(lme_dir):
    # ranked together, as the retrieve stage ranks siblings (test_shared_run.py: the same tables as alone)
    vs = [variants.resolve(n, "m") for n in sorted(variants.builtin("m"))]
    assert len(vs) >= 4
    tokens = token_files(lme_dir, {v.recipe.seq for v in vs})
    outs = {v.name: {k: lme_dir / f"m.{v.name}.{k}.parquet" for k in ("rankings", "outcomes", "deep")} for v in vs}
    sharing.write_segments(vs, lme_dir / "questions.parquet", lme_dir / "haystacks.parquet",
                           lme_dir / "events.parquet", 1, 1, outs, log=QUIET, tokens=tokens)
    for v in vs:
        keeps_top10(v.name, pq.read_table(outs[v.name]["rankings"]), pq.read_table(outs[v.name]["deep"]))


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
