"""Variants ranked together in one process (retrieval.write_segments: shared
tokens, representatives and FTS rows) give every variant exactly the tables it
gets alone, and alone it matches the per-question FTS tables of the harnesses
(the path the independent references check)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from memobench import normalize, retrieval, tokenize, variants
from memobench.ftsindex import build_index
from memobench.generate import write_longmemeval

QUIET = lambda *a, **k: None  # noqa: E731


def _prepare(d, seqs):
    build_index(d / "haystacks.parquet", d / "events.parquet", d / "index.sqlite", log=QUIET)
    tokens = {}
    for seq in seqs:
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
                                 seg, segments, outs, log=QUIET, tokens=tokens, fts_index_path=d / "index.sqlite")
        qs, hs, corpus = retrieval.load_segment(d / "questions.parquet", d / "haystacks.parquet",
                                                d / "events.parquet", seg, segments)
        for v in vs:
            # alone, with the harness's per-haystack in-memory FTS table and no tokens stage
            alone = retrieval.run_segments([v], qs, hs, corpus, log=QUIET)[v.name]
            for k, table in zip(("rankings", "outcomes", "deep"), alone):
                assert pq.read_table(outs[v.name][k]).equals(table), (v.name, seg, k)


def test_all_lme_variants_together(tmp_path):
    raw = tmp_path / "lme.json"
    # 700-session haystacks are not needed here: LIMIT cuts are covered by SharedRows' prefix rule below
    write_longmemeval(raw, n_questions=40, sessions_per_question=30, seed=5, spice=True)
    normalize.normalize_longmemeval(raw, tmp_path, log=QUIET)
    _check_together_equals_alone(tmp_path, "s", sorted(variants.builtin("s")), segments=2)


def test_locomo_variants_together(tmp_path, locomo_path):
    normalize.normalize_locomo(locomo_path, tmp_path, log=QUIET)
    _check_together_equals_alone(tmp_path, "locomo", sorted(variants.builtin("locomo")), segments=1)


def test_shared_rows_cut_to_each_limit(tmp_path):
    """Rows fetched once at the largest LIMIT, cut per caller, equal a query at
    the caller's own LIMIT; a rejected MATCH raises for every caller."""
    import sqlite3

    from memobench.ftsindex import FtsIndex

    raw = tmp_path / "lme.json"
    write_longmemeval(raw, n_questions=3, sessions_per_question=40, seed=9)
    normalize.normalize_longmemeval(raw, tmp_path, log=QUIET)
    build_index(tmp_path / "haystacks.parquet", tmp_path / "events.parquet", tmp_path / "index.sqlite", log=QUIET)
    index = FtsIndex(tmp_path / "index.sqlite")
    shared = retrieval.SharedRows(index, 2000)
    seen_cut = False
    for hid in range(3):
        for term in ('"the"', '"i"', '"a"', '"to"'):
            for limit in (3, 7, 500, 2000):
                got = shared.positions(hid, term, limit)
                assert got == index.positions(hid, term, limit)
                seen_cut |= 0 < len(got) == limit
        with pytest.raises(sqlite3.Error):
            shared.positions(hid, '"unterminated', 10)
        with pytest.raises(sqlite3.Error):
            shared.positions(hid, '"unterminated', 500)
    assert seen_cut
