"""Token ids (termids.py): the same answers as the joined forms they replace."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from memobench.memo.fts5 import Unicode61
from memobench.memo.termids import (SEPARATOR, Concat, HayEvents, Vocab, id_lists, open_tokens, read_vocab,
                                    token_batches, token_stream, with_separators, write_token_ids)
from memobench.memo.tokenize import ASCII_TOKEN, SEQ, joined_tokens

WORDS = st.sampled_from(["a", "b", "ab", "the", "x1", "漢字", "é"])


# Tokens of up to 8 bytes (encoded by their 64-bit key) and longer ones (by their bytes).
KEYED_WORDS = st.sampled_from(["a", "b", "ab", "the", "x1", "漢字", "é", "abcdefgh", "abcdefghi", "漢字漢",
                               "x" * 20, "\udc80", "a\x00", "abcdefg\u00e9"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(KEYED_WORDS, max_size=6), max_size=12))
def test_encode_strings_gives_ids_in_order_of_first_sight(batches):
    vocab = Vocab()
    for tokens in (batches[:len(batches) // 2], batches[len(batches) // 2:]):
        flat_tokens = [t for ts in tokens for t in ts]
        before = len(vocab)
        ids, new = vocab.encode_strings(pa.array([t.encode("utf-8", "surrogatepass") for t in flat_tokens],
                                                 pa.binary()))
        assert [vocab.tokens()[i] for i in ids] == flat_tokens
        assert new == vocab.tokens()[before:]
    assert vocab.tokens() == list(dict.fromkeys(t for ts in batches for t in ts))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abc  ", max_size=12), max_size=4),
       st.lists(st.text(alphabet="abcd ", max_size=12), max_size=6))
def test_encode_events_gives_each_events_ids_then_a_separator(before, events):
    """Whatever the vocabulary already holds, empty events included: the ids
    a token-by-token definition gives, new tokens in order of first sight."""
    vocab, want_ids = Vocab(), {}
    for text in before:
        assert vocab.encode(text).tolist() == [want_ids.setdefault(t, len(want_ids)) for t in text.split()]
    want = [i for e in events for i in (*[want_ids.setdefault(t, len(want_ids)) for t in e.split()], SEPARATOR)]
    got = vocab.encode_events(events)
    assert got.dtype == np.int32 and got.tolist() == want and vocab.ids == want_ids


# Texts of ASCII (cases, digits, punctuation, runs of separators), of other
# characters whose tokenizers differ (accents, Han, the Kelvin sign whose lower
# case is ASCII, a dotted capital I), and empty ones.
TEXTS = st.lists(st.text(alphabet=st.sampled_from(list("aZ9 _-.'\t\n") + ["é", "漢", "\u212a", "\u0130", "’"]),
                         max_size=12), max_size=10)


def _ids(path) -> list[list[int]]:
    """Each row's ids of a tokens table."""
    return [row for batch in token_batches(path) for row in batch.column("ids").to_pylist()]


def _stream_tokens(texts, joined, ascii_token, long=None):
    tokens, counts = token_stream(pa.array(texts, pa.string()), joined, ascii_token, long)
    flat = [t.decode("utf-8", "surrogatepass") for t in tokens.to_pylist()]
    cuts = np.concatenate([[0], np.cumsum(counts)]).tolist()
    return [flat[a:b] for a, b in zip(cuts, cuts[1:])]


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.sampled_from(sorted(SEQ)))
def test_token_stream_gives_each_js_tokenizers_tokens(texts, seq_name):
    """ASCII texts tokenized on bytes at once, the others by the tokenizer:
    the same tokens as the tokenizer's joined form of each text."""
    seq = SEQ[seq_name]

    def joined(t):
        return joined_tokens(t, seq)

    assert _stream_tokens(texts, joined, ASCII_TOKEN) == [joined(t).split() for t in texts]
    assert _stream_tokens(texts, joined, None) == [joined(t).split() for t in texts]


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_token_stream_gives_unicode61s_tokens(texts):
    u61 = Unicode61()
    assert _stream_tokens(texts, u61.joined, u61.ascii_token, 3) == [u61.joined(t).split() for t in texts]


def test_token_stream_sends_a_text_with_a_long_ascii_token_to_the_tokenizer():
    """FTS5 cuts a token at 32,768 bytes: a longer ASCII run is the tokenizer's."""
    from memobench.memo.fts5 import _LONG, MAX_TOKEN_BYTES

    u61 = Unicode61()
    texts = ["short words", "a " + "x" * (MAX_TOKEN_BYTES + 5) + " b", "Tail"]
    got = _stream_tokens(texts, u61.joined, u61.ascii_token, _LONG)
    assert got == [u61.joined(t).split() for t in texts]
    assert len(got[1][1]) == MAX_TOKEN_BYTES


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
    batches = [(pa.array(range(10 * n, 10 * n + len(b)), pa.int32()), pa.array(b, pa.string()))
               for n, b in enumerate(texts)]
    path = tmp_path / "fts5.arrow"
    write_token_ids(iter(batches), path, u61.joined, u61.ascii_token)
    t = pa.Table.from_batches(list(token_batches(path)))
    vocab = read_vocab(path)
    assert [[vocab.tokens()[i] for i in row] for row in t.column("ids").to_pylist()] == [
        u61.joined(x).split() for b in texts for x in b]
    assert t.column("session_key").to_pylist() == [k for keys, _ in batches for k in keys.to_pylist()]
    assert open_tokens(path).num_record_batches == 3


def test_a_tokens_table_of_another_layout_is_refused(tmp_path):
    """A tokens table of an earlier version (Parquet; or ids as a joined
    column), or one cut short, names itself and the fix."""
    import pytest

    from memobench.core.errors import DataError

    old = pa.table({"session_key": pa.array([1], pa.int32()), "joined": [" a "]})
    parquet = tmp_path / "fts5.parquet"
    pq.write_table(old, parquet)
    other = tmp_path / "other.arrow"
    with pa.OSFile(str(other), "wb") as sink, pa.ipc.new_file(sink, old.schema) as writer:
        writer.write_table(old)
    cut = tmp_path / "cut.arrow"
    u61 = Unicode61()
    write_token_ids(iter([(pa.array([0], pa.int32()), pa.array(["a b"]))]), cut, u61.joined, u61.ascii_token)
    cut.write_bytes(cut.read_bytes()[:-10])
    for path in (parquet, other, cut):
        with pytest.raises(DataError, match=f"{path.name}: not a tokens table of this version.*; delete it and rerun"):
            read_vocab(path)


def _naive_representative(events: list[list[str]], lengths: list[int], phrase: list[str]):
    """docs/harnesses.md#representative-event-and-session-order as written: per event, every start of the phrase; the
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


@settings(max_examples=100, deadline=None)
@given(TEXTS, st.integers(1, 12))
def test_a_batch_cut_into_pieces_gives_the_same_table(tmp_path_factory, texts, size):
    """The pieces a batch is tokenized in (a bound on memory) change no id."""
    import memobench.memo.termids as termids

    u61 = Unicode61()
    batch = [(pa.array(range(len(texts)), pa.int32()), pa.array(texts, pa.string()))]
    pieces = termids._pieces(batch[0][1], size)
    assert [t for p in pieces for t in p.to_pylist()] == texts
    whole, cut = (tmp_path_factory.mktemp("t") / name for name in ("whole.arrow", "cut.arrow"))
    write_token_ids(iter(batch), whole, u61.joined, u61.ascii_token)
    saved = termids.PIECE_BYTES
    termids.PIECE_BYTES = size
    try:
        write_token_ids(iter(batch), cut, u61.joined, u61.ascii_token)
    finally:
        termids.PIECE_BYTES = saved
    assert whole.read_bytes() == cut.read_bytes()


def test_a_token_fts5_cuts_inside_a_character_round_trips(tmp_path):
    """FTS5 cuts a token at 32,768 bytes, here inside a three-byte character:
    the cut token (a lone surrogate at its end) is written and read back, and
    is the one a query of that text asks."""
    from memobench.memo.fts5 import _LONG

    u61 = Unicode61()
    texts = ["a " + "漢" * 10923 + " b", "漢漢"]
    want = [u61.joined(t).split() for t in texts]
    assert any("\udc80" <= c <= "\udcff" for c in want[0][1])
    path = tmp_path / "fts5.arrow"
    write_token_ids(iter([(pa.array([0, 1], pa.int32()), pa.array(texts, pa.string()))]), path,
                    u61.joined, u61.ascii_token, _LONG)
    vocab = read_vocab(path)
    assert [[vocab.tokens()[i] for i in row] for row in _ids(path)] == want
    assert vocab.lookup(u61.joined(texts[0]).split()) is not None


def test_token_stream_cuts_a_run_at_each_text_boundary():
    """ASCII texts back to back with no separator between them (a run going
    on through several texts, empty ones among them) give each its own tokens."""
    texts = ["ab", "", "Cd", "e", "f g", "", "h"]
    got = _stream_tokens(texts, lambda t: joined_tokens(t, SEQ["ascii"]), ASCII_TOKEN)
    assert got == [["ab"], [], ["cd"], ["e"], ["f", "g"], [], ["h"]]


def test_encode_strings_of_tokens_holding_spaces():
    """Tokens never hold a space; given some, the ids are still one per token."""
    vocab = Vocab()
    ids, new = vocab.encode_strings(pa.chunked_array([pa.array(["a ", "a"]), pa.array(["a", "a b", "a "])]))
    assert ids.tolist() == [0, 1, 1, 2, 0] and new == ["a ", "a", "a b"]


# Words and what may come between them (nothing: a longer token), tokens of
# more than 8 bytes among them
PARTS = st.lists(st.sampled_from(["ab", "Xyz9", "abcdefgh", "ABCDEFGHIJ", "漢字", "漢字漢", "é", "\u212a",
                                  " ", "", "-", "\n", "’"]), max_size=8).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(PARTS, max_size=8), st.sampled_from(["fts5", *sorted(SEQ)]), st.integers(1, 40), st.data())
def test_a_token_ids_table_holds_each_tokenizers_tokens(tmp_path_factory, texts, name, size, data):
    """Batches in pieces of any size: each row is the tokenizer's tokens of its text."""
    import memobench.memo.termids as termids

    if name == "fts5":
        u61 = Unicode61()
        joined, ascii_token, long = u61.joined, u61.ascii_token, 3
    else:
        def joined(t):
            return joined_tokens(t, SEQ[name])
        ascii_token, long = ASCII_TOKEN, None
    cut = data.draw(st.integers(0, len(texts)))
    batches = [(pa.array(range(a, b), pa.int32()), pa.array(texts[a:b], pa.string()))
               for a, b in ((0, cut), (cut, len(texts)))]
    path = tmp_path_factory.mktemp("t") / "tokens.arrow"
    saved = termids.PIECE_BYTES
    termids.PIECE_BYTES = size
    try:
        write_token_ids(iter(batches), path, joined, ascii_token, long)
    finally:
        termids.PIECE_BYTES = saved
    vocab = read_vocab(path)
    rows = _ids(path)
    assert [[vocab.tokens()[i] for i in row] for row in rows] == [joined(t).split() for t in texts]
