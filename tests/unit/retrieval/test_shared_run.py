"""Variants ranked together in one process (sharing.write_segments: shared
tokens, representatives and FTS rows) give every variant exactly the tables it
gets alone with the per-question FTS5 tables of the harnesses (the path the
independent references check). Every variant's tables made here are also held
to the deep-list rules (test_deep_lists.keeps_top10)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from memobench.datasets import normalize
from memobench.retrieval import memo as retrieval, sharing as retrievers
from memobench.catalog import variants
from memobench.memo.fts5 import PhraseMatcher, Unicode61
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers import token_files
from tests.unit.retrieval.test_deep_lists import keeps_top10

QUIET = lambda *a, **k: None  # noqa: E731


def _check_together_equals_alone(d, family, names, segments) -> dict[str, tuple[int, int]]:
    """{variant: (its ranking rows, its lists past 10)}, over every segment."""
    vs = [variants.resolve(n, family) for n in names]
    counts = {v.name: (0, 0) for v in vs}
    tokens = token_files(d, {v.recipe.seq for v in vs})
    for seg in range(1, segments + 1):
        outs = {v.name: {k: d / f"{v.name}.{seg}.{k}.parquet" for k in ("rankings", "outcomes", "deep")}
                for v in vs}
        retrievers.write_segments(vs, d / "questions.parquet", d / "haystacks.parquet", d / "events.parquet",
                                  seg, segments, outs, log=QUIET, tokens=tokens)
        qs, hs, corpus = retrieval.load_segment(d / "questions.parquet", d / "haystacks.parquet",
                                                d / "events.parquet", seg, segments)
        for v in vs:
            # alone, with the harness's per-haystack FTS5 table and no tokens stage
            alone = retrieval.run_segments([v], qs, hs, corpus, log=QUIET, fts_sqlite=True)[v.name]
            for k, table in zip(("rankings", "outcomes", "deep"), alone):
                assert pq.read_table(outs[v.name][k]).equals(table), (v.name, seg, k)
            rows, longer = counts[v.name]
            counts[v.name] = (rows + alone[0].num_rows, longer + keeps_top10(v.name, alone[0], alone[2]))
    return counts


@pytest.mark.slow  # every variant, 11 s of CPU: the whole suite runs it, the unit run not
def test_all_lme_variants_together(tmp_path):
    raw = tmp_path / "lme.json"
    # 700-session haystacks are not needed here: LIMIT cuts are covered by the matcher's prefix rule below
    write_longmemeval(raw, n_questions=40, sessions_per_question=30, seed=5, spice=True)
    normalize.normalize_longmemeval(raw, tmp_path, log=QUIET)
    names = sorted(variants.builtin("s"))
    assert len(names) >= 35
    counts = _check_together_equals_alone(tmp_path, "s", names, segments=2)
    # V1 counts only t1's list (at most 10 sessions): nothing to continue
    assert [n for n, (_, longer) in counts.items() if not longer] in (["exp-V1"], [])


@pytest.mark.slow  # every variant on the whole real file
def test_locomo_variants_together(tmp_path, locomo_path):
    normalize.normalize_locomo(locomo_path, tmp_path, log=QUIET)
    counts = _check_together_equals_alone(tmp_path, "locomo", sorted(variants.builtin("locomo")), segments=1)
    # most LoCoMo lists go deeper than 10
    assert all(rows > 19000 and longer > 1000 for rows, longer in counts.values()), counts


def test_matcher_rows_cut_to_each_limit(tmp_path):
    """Rows found once at the largest LIMIT, cut per caller, equal a real FTS5
    query at the caller's own LIMIT (the common words hit the cut)."""
    from memobench.memo.engine import FtsBackend

    raw = tmp_path / "lme.json"
    write_longmemeval(raw, n_questions=3, sessions_per_question=40, seed=9)
    normalize.normalize_longmemeval(raw, tmp_path, log=QUIET)
    qs, hs, corpus = retrieval.load_segment(tmp_path / "questions.parquet", tmp_path / "haystacks.parquet",
                                            tmp_path / "events.parquet", 1, 1)
    matcher = PhraseMatcher(Unicode61(), 2000, corpus.fts_vocab)
    seen_cut = False
    for hid, hay in hs.items():
        for limit in (3, 7, 500, 2000):
            shared, real = FtsBackend(corpus, limit, matcher), FtsBackend(corpus, limit)
            shared.load(hay, hid)
            real.load(hay, hid)
            for term in ("the", "i", "a", "to", "the garden", "unterminated\x00"):
                got = shared.rows(term)
                assert got == real.rows(term), (hid, term, limit)
                seen_cut |= 0 < len(got) == limit
    assert seen_cut


def test_a_variant_returning_to_a_haystack_after_a_skip_reloads_the_shared_matcher():
    """v0.8.0 skips the Han-only question (no ascii tokens) that cn-A ranks on
    another haystack; back on the first haystack its FTS rows must be that
    haystack's, not the one cn-A left in the shared matcher."""
    from memobench.memo.engine import Corpus, Haystack

    texts = {0: ["apple pie recipe"], 1: ["banana bread"], 2: ["nothing"],
             10: ["x"], 11: ["y"], 12: ["z"], 13: ["w"], 14: ["cherry tart 苹果"]}
    hays = {0: Haystack(["a", "b", "c"], [0, 1, 2], [1, 2, 3]),
            1: Haystack(["d", "e", "f", "g", "h"], [10, 11, 12, 13, 14], [1, 2, 3, 4, 5])}
    questions = [dict(q_index=i, question_id=f"q{i}", question_type="t", question=text, question_date=None,
                      haystack_id=h, gold=["a"], parse_error=False)
                 for i, (h, text) in enumerate([(0, "apple pie"), (1, "苹果"), (0, "banana bread")])]
    ascii_variant, cn_variant = variants.resolve("v0.8.0", "s"), variants.resolve("cn-A", "cn")

    def rankings(vs):
        corpus = Corpus({k: (t, [len(x) for x in t]) for k, t in texts.items()})
        return retrieval.run_segments(vs, questions, hays, corpus, log=QUIET)[ascii_variant.name][0]

    alone = rankings([ascii_variant])
    assert [s for s, q in zip(alone["session_id"].to_pylist(), alone["q_index"].to_pylist()) if q == 2][0] == "b"
    assert rankings([ascii_variant, cn_variant]).equals(alone)


def test_event_tokens_of_a_session_not_yet_tokenized():
    """Its tokens may be new to the vocabulary when it is asked."""
    from memobench.memo.engine import Corpus

    corpus = Corpus({0: (["Hello world", "again"], [11, 5]), 1: (["new words"], [9])})
    assert corpus.event_tokens(1, "ascii") == [["new", "words"]]
    assert corpus.event_tokens(0, "ascii") == [["hello", "world"], ["again"]]
