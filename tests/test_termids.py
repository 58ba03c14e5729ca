"""Token ids (termids.py): the same answers as the joined forms they replace."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from memobench.fts5 import Unicode61
from memobench.termids import (SEPARATOR, Concat, HayEvents, Vocab, id_lists, read_vocab, with_separators,
                               write_token_ids)

WORDS = st.sampled_from(["a", "b", "ab", "the", "x1", "漢字", "é"])
JOINED = st.lists(WORDS, max_size=6).map(lambda ts: " " + "  ".join(ts) + " ")


@settings(max_examples=200, deadline=None)
@given(st.lists(JOINED, max_size=12))
def test_encode_column_gives_each_rows_tokens(rows):
    vocab = Vocab()
    flat, offsets, new = vocab.encode_column(pa.array(rows, pa.string()))
    back = {i: t for t, i in vocab.ids.items()}
    assert [[back[i] for i in flat[a:b]] for a, b in zip(offsets, offsets[1:])] == [r.split() for r in rows]
    # ids in order of first sight: the new tokens are the vocabulary, in id order
    assert new == list(vocab.ids) == list(dict.fromkeys(t for r in rows for t in r.split()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(WORDS, max_size=8), max_size=10), st.lists(WORDS, min_size=1, max_size=3))
def test_concat_rows_are_the_sessions_holding_the_sequence(sessions, phrase):
    vocab = Vocab()
    arrays = [vocab.encode(" ".join(s)) for s in sessions]
    ids = vocab.lookup(phrase)
    got = Concat(arrays).rows(ids) if ids else []
    n = len(phrase)
    want = [p for p, s in enumerate(sessions) if any(s[i:i + n] == phrase for i in range(len(s) - n + 1))]
    assert got == want


def test_token_ids_table_round_trips(tmp_path):
    """Batches share one vocabulary, listed on each batch's first row."""
    u61 = Unicode61()
    texts = [["The garden", "", "gärden PLAN"], ["plan b", "!!"], ["new words here", "the"]]
    batches = [(list(range(10 * n, 10 * n + len(b))), [u61.joined(t) for t in b]) for n, b in enumerate(texts)]
    path = tmp_path / "fts5.parquet"
    write_token_ids(iter(batches), path)
    t = pq.read_table(path)
    vocab = read_vocab(path)
    back = {i: tok for tok, i in vocab.ids.items()}
    assert [[back[i] for i in row] for row in t.column("ids").to_pylist()] == [
        j.split() for _, b in batches for j in b]
    assert t.column("session_key").to_pylist() == [k for keys, _ in batches for k in keys]
    assert pq.ParquetFile(path).metadata.num_row_groups == 3


def test_a_tokens_table_of_another_layout_is_refused(tmp_path):
    """A tokens table from before ids (a joined column) names itself and the fix."""
    import pytest

    from memobench.errors import DataError

    path = tmp_path / "fts5.parquet"
    pq.write_table(pa.table({"session_key": pa.array([1], pa.int32()), "joined": [" a "]}), path)
    with pytest.raises(DataError, match="fts5.parquet: not a tokens table of this version; delete it and rerun"):
        read_vocab(path)


def _naive_representative(events: list[list[str]], lengths: list[int], phrase: list[str]):
    """HARNESSES.md 3.2 as written: per event, every start of the phrase; the
    best event has the most, then the shortest, then the last."""
    n, best = len(phrase), None
    for k, tokens in enumerate(events):
        occ = sum(tokens[i:i + n] == phrase for i in range(len(tokens) - n + 1))
        if occ and (best is None or (occ, -lengths[k], k) > best):
            best = (occ, -lengths[k], k)
    return None if best is None else (best[0], -best[1], best[2])


EVENTS = st.lists(st.lists(WORDS, max_size=6), max_size=5)


@settings(max_examples=400, deadline=None)
@given(st.lists(EVENTS, max_size=8), st.lists(WORDS, min_size=1, max_size=3), st.data())
def test_hay_events_reps_are_each_sessions_representative(sessions, phrase, data):
    """Overlapping starts count ("a a" twice in "a a a"), ties on occ go to
    the shorter event, then the later one; no match runs into the next event."""
    lengths = [data.draw(st.lists(st.integers(0, 3), min_size=len(s), max_size=len(s))) for s in sessions]
    vocab = Vocab()
    arrays = [vocab.encode_events([" " + "  ".join(e) + " " if e else "" for e in s]) for s in sessions]
    got = HayEvents(arrays, lengths, vocab).reps(tuple(phrase))
    want = {p: r for p, s in enumerate(sessions)
            if (r := _naive_representative(s, lengths[p], phrase)) is not None}
    assert got == want
    assert list(got) == sorted(got)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=5), max_size=8))
def test_with_separators_puts_one_after_each_row(rows):
    flat = np.array([i for r in rows for i in r], np.int32)
    offsets = np.array([0, *np.cumsum([len(r) for r in rows])], np.int64)
    out, starts = with_separators(flat, offsets)
    assert out.tolist() == [i for r in rows for i in (*r, SEPARATOR)]
    assert [out[a:b].tolist() for a, b in zip(starts, starts[1:])] == [[*r, SEPARATOR] for r in rows]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=5), max_size=8), st.data())
def test_id_lists_gives_the_selected_rows(rows, data):
    """Also on a slice of the column (a batch's offsets need not start at 0)."""
    lists = pa.array([[0, 1]] + rows, pa.list_(pa.int32())).slice(1)
    picked = sorted(data.draw(st.sets(st.integers(0, max(len(rows) - 1, 0)), max_size=len(rows)))) if rows else []
    flat, offsets = id_lists(lists, np.array(picked, np.int64))
    assert [flat[a:b].tolist() for a, b in zip(offsets, offsets[1:])] == [rows[i] for i in picked]
    flat, offsets = id_lists(lists)
    assert [flat[a:b].tolist() for a, b in zip(offsets, offsets[1:])] == rows
