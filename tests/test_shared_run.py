"""Variants ranked together in one process (retrieval.write_segments: shared
tokens, representatives and FTS rows) give every variant exactly the tables it
gets alone with the per-question FTS5 tables of the harnesses (the path the
independent references check)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from memobench import normalize, retrieval, tokenize, variants
from memobench.fts5 import PhraseMatcher, Unicode61
from memobench.generate import write_longmemeval

QUIET = lambda *a, **k: None  # noqa: E731


def _prepare(d, seqs):
    tokens = {}
    for seq in {*seqs, "fts5"}:
        tokens[seq] = d / f"tokens_{seq}.parquet"
        tokenize.write_tokens(d / "events.parquet", seq, tokens[seq], log=QUIET)
    return tokens


def _check_together_equals_alone(d, family, names, segments):
    vs = [variants.resolve(n, family) for n in names]
    tokens = _prepare(d, {v.recipe.seq for v in vs})
    for seg in range(1, segments + 1):
        outs = {v.name: {k: d / f"{v.name}.{seg}.{k}.parquet" for k in ("rankings", "outcomes", "deep")}
                for v in vs}
        retrieval.write_segments(vs, d / "questions.parquet", d / "haystacks.parquet", d / "events.parquet",
                                 seg, segments, outs, log=QUIET, tokens=tokens)
        qs, hs, corpus = retrieval.load_segment(d / "questions.parquet", d / "haystacks.parquet",
                                                d / "events.parquet", seg, segments)
        for v in vs:
            # alone, with the harness's per-haystack FTS5 table and no tokens stage
            alone = retrieval.run_segments([v], qs, hs, corpus, log=QUIET, fts_sqlite=True)[v.name]
            for k, table in zip(("rankings", "outcomes", "deep"), alone):
                assert pq.read_table(outs[v.name][k]).equals(table), (v.name, seg, k)


def test_all_lme_variants_together(tmp_path):
    raw = tmp_path / "lme.json"
    # 700-session haystacks are not needed here: LIMIT cuts are covered by the matcher's prefix rule below
    write_longmemeval(raw, n_questions=40, sessions_per_question=30, seed=5, spice=True)
    normalize.normalize_longmemeval(raw, tmp_path, log=QUIET)
    _check_together_equals_alone(tmp_path, "s", sorted(variants.builtin("s")), segments=2)


def test_locomo_variants_together(tmp_path, locomo_path):
    normalize.normalize_locomo(locomo_path, tmp_path, log=QUIET)
    _check_together_equals_alone(tmp_path, "locomo", sorted(variants.builtin("locomo")), segments=1)


def test_matcher_rows_cut_to_each_limit(tmp_path):
    """Rows found once at the largest LIMIT, cut per caller, equal a real FTS5
    query at the caller's own LIMIT (the common words hit the cut)."""
    from memobench.engine import Corpus, FtsBackend

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
