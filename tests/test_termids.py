"""Token ids (termids.py): the same answers as the joined forms they replace."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from memobench.fts5 import Unicode61
from memobench.termids import Concat, Vocab, read_vocab, write_fts5_ids

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


def test_fts5_ids_table_round_trips(tmp_path):
    """Batches share one vocabulary, listed on each batch's first row."""
    u61 = Unicode61()
    texts = [["The garden", "", "gärden PLAN"], ["plan b", "!!"], ["new words here", "the"]]
    batches = [(list(range(10 * n, 10 * n + len(b))), [u61.joined(t) for t in b]) for n, b in enumerate(texts)]
    path = tmp_path / "fts5.parquet"
    write_fts5_ids(iter(batches), path)
    t = pq.read_table(path)
    vocab = read_vocab(path)
    back = {i: tok for tok, i in vocab.ids.items()}
    assert [[back[i] for i in row] for row in t.column("ids").to_pylist()] == [
        j.split() for _, b in batches for j in b]
    assert t.column("session_key").to_pylist() == [k for keys, _ in batches for k in keys]
    assert pq.ParquetFile(path).metadata.num_row_groups == 3


def test_a_tokens_table_of_another_layout_is_refused(tmp_path):
    """An fts5 table from before ids (a joined column) names itself and the fix."""
    import pytest

    from memobench.errors import DataError

    path = tmp_path / "fts5.parquet"
    pq.write_table(pa.table({"session_key": pa.array([1], pa.int32()), "joined": [" a "]}), path)
    with pytest.raises(DataError, match="fts5.parquet: not an fts5 tokens table of this version; delete it and rerun"):
        read_vocab(path)
