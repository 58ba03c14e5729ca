"""Tokens as integer ids, so the sessions of a haystack are searched at once.

Which sessions of a haystack hold a phrase, and how often each of their
events does, used to be substring searches of every session's joined tokens:
on a LongMemEval-M haystack of 500 sessions that is megabytes scanned per
phrase and per session. Here each token is an id (:class:`Vocab`, one per
tokenizer and corpus), a session is the array of its tokens' ids, and a
haystack is its sessions' arrays back to back with :data:`SEPARATOR` between
them, where a sequence is found with a few vectorized compares (about 0.8 ms
per phrase on such a haystack, against 6 ms). A sequence holding a token no
session has matches nothing. Two layouts:

* :class:`Concat`: the FTS5 body column (fts5.PhraseMatcher), where a phrase
  may run from one event into the next (the harnesses join them with "\n");
* :class:`HayEvents`: the JS tokens, with the separator after every event,
  since an event is what a phrase is counted in (the representative event).

The tokens stage writes every tokenizer's tokens this way
(``tables.TOKEN_IDS``): each event's ids, and the vocabulary as the tokens
first seen in each batch, in id order (:func:`write_token_ids`,
:func:`read_vocab`). The ASCII texts of a batch are tokenized all at once on
their bytes (:func:`token_stream`), the others by their tokenizer, and the
tokens turned into ids by Arrow's dictionary encoding, Python touching only
each batch's distinct tokens (:meth:`Vocab.encode_strings`).
"""

from __future__ import annotations

import functools
from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEPARATOR = -1  # after each session of a Concat, each event of a HayEvents; never a token's id
_SEP = np.array([SEPARATOR], np.int32)
EMPTY_IDS = np.empty(0, np.int32)


class Vocab:
    """Token -> id, ids given in order of first sight."""

    def __init__(self, tokens=()):
        self.ids: dict[str, int] = {t: i for i, t in enumerate(tokens)}
        self._tokens: list[str] = []  # tokens(), rebuilt only when ids has grown

    def __len__(self) -> int:
        return len(self.ids)

    def encode(self, joined: str) -> np.ndarray:
        """The ids of one joined form's tokens (tokens never hold whitespace)."""
        ids = self.ids
        return np.array([ids.setdefault(t, len(ids)) for t in joined.split()], np.int32)

    def tokens(self) -> list[str]:
        """Every token, at its id (ids are given in order, and dicts keep it)."""
        if len(self._tokens) != len(self.ids):
            self._tokens = list(self.ids)
        return self._tokens

    def encode_events(self, joined: list[str]) -> np.ndarray:
        """The ids of several events' joined forms, each followed by :data:`SEPARATOR`
        (a :class:`HayEvents` session)."""
        return np.concatenate([part for j in joined for part in (self.encode(j), _SEP)] or [EMPTY_IDS])

    def lookup(self, tokens) -> tuple[int, ...] | None:
        """The ids of ``tokens``, or None when one of them was never seen (the
        sequence is in no session of this vocabulary)."""
        out = []
        for t in tokens:
            i = self.ids.get(t)
            if i is None:
                return None
            out.append(i)
        return tuple(out)

    def encode_strings(self, tokens: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
        """(the ids of an array of tokens, the tokens first seen here in id
        order). Tokens are strings, or bytes as :func:`token_stream` gives
        them, in one array or several chunks. Arrow dictionary-encodes them,
        Python touching each distinct token once; its dictionary lists them in
        order of first occurrence, so ids stay in order of first sight."""
        if not len(tokens):
            return EMPTY_IDS, []
        encoded = pc.dictionary_encode(tokens)
        if isinstance(encoded, pa.ChunkedArray):
            # Arrow gives every chunk the one dictionary of them all (DictEncodeFinalize)
            dictionary = encoded.chunk(0).dictionary
            indices = np.concatenate([c.indices.to_numpy() for c in encoded.chunks])
        else:
            dictionary, indices = encoded.dictionary, encoded.indices.to_numpy()
        ids, new, remap = self.ids, [], []
        for t in dictionary.to_pylist():
            if isinstance(t, bytes):
                t = t.decode("utf-8", "surrogatepass")
            i = ids.get(t)
            if i is None:
                i = ids[t] = len(ids)
                new.append(t)
            remap.append(i)
        return np.array(remap, np.int32)[indices], new


_SPACE = 32


def token_stream(texts: pa.Array, joined, ascii_token: bytes | None = None,
                 long: int | None = None) -> tuple[pa.Array, np.ndarray]:
    """(every text's tokens, text after text, as one binary array of their
    UTF-8; each text's number of tokens) under a tokenizer: ``joined`` gives a text's
    joined form (" t1  t2 ", tokens never hold whitespace). A text that is
    ASCII is tokenized here instead, with the whole batch at once: its tokens
    are the maximal runs of the bytes ``ascii_token`` marks (256 flags),
    lowercased, which is what every JS tokenizer and unicode61 make of ASCII
    text (``ascii_token`` None: no text is). A run longer than ``long``
    bytes sends its text to ``joined`` (FTS5 cuts long tokens, and a cut
    inside a character leaves a lone surrogate: its bytes are as
    ``surrogatepass`` writes them, which :meth:`Vocab.encode_strings` reads).

    Every text becomes a string whose tokens are separated by spaces (an
    ASCII text through one ``bytes.translate`` of the batch: token bytes
    lowercased, the others spaces); then the runs are found with a few
    vectorized passes, and the tokens are the runs' bytes back to back."""
    n = len(texts)
    offsets, buf = _string_buffers(texts)
    raw = b"" if ascii_token is None else buf.tobytes()
    if ascii_token is None:
        plain = np.zeros(n, bool)
    elif raw.isascii():  # the usual case, one C pass: string_is_ascii costs several times more
        plain = np.ones(n, bool)
    else:
        plain = pc.string_is_ascii(texts).to_numpy(zero_copy_only=False)
    translated = raw.translate(_lowered(ascii_token)) if plain.any() else b""
    while True:
        if plain.all():
            offsets_now, spaced = offsets, translated
        else:
            forms = pa.array([translated[offsets[i]:offsets[i + 1]] if p
                              else joined(t).encode("utf-8", "surrogatepass")
                              for i, (t, p) in enumerate(zip(texts.to_pylist(), plain))], pa.binary())
            offsets_now, data = _string_buffers(forms)
            spaced = data.tobytes()
        token_offsets, counts = _runs(spaced, offsets_now)
        if long is not None and plain.any():
            too_long = np.flatnonzero(np.diff(token_offsets) > long)
            text_of = np.searchsorted(np.cumsum(counts), too_long, side="right")
            text_of = text_of[plain[text_of]]
            if len(text_of):
                plain = plain.copy()
                plain[text_of] = False
                continue
        break
    # the tokens' bytes: the spaces deleted, in one C pass (a mask's gather costs more)
    tokens = pa.Array.from_buffers(pa.binary(), len(token_offsets) - 1,
                                   [None, pa.py_buffer(token_offsets), pa.py_buffer(spaced.translate(None, b" "))])
    return tokens, counts


@functools.lru_cache(maxsize=8)
def _lowered(ascii_token: bytes) -> bytes:
    """The ``bytes.translate`` table of ``ascii_token``: token bytes lowercased, the others spaces."""
    return bytes((c + 32 if 65 <= c <= 90 else c) if ascii_token[c] else _SPACE for c in range(256))


def _string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(n + 1 byte offsets from 0, the bytes) of a string or binary array."""
    n = len(strings)
    _, offsets_buffer, data_buffer = strings.buffers()
    if not n:
        return np.zeros(1, np.int64), np.empty(0, np.uint8)
    offsets = np.frombuffer(offsets_buffer, np.int32)[strings.offset:strings.offset + n + 1].astype(np.int64)
    data = (np.frombuffer(data_buffer, np.uint8)[offsets[0]:offsets[-1]] if offsets[-1] > offsets[0]
            else np.empty(0, np.uint8))
    return offsets - offsets[0], data


def _runs(data: bytes, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the n + 1 offsets of the runs' bytes back to back, each string's
    count) of the runs of non-space bytes of strings given back to back; no
    run crosses from one string into the next."""
    size = len(data)
    # the mask between two non-token bytes: a run's edges are where it
    # changes, starts and ends alternately (one pass for both)
    padded = np.zeros(size + 2, bool)
    np.not_equal(np.frombuffer(data, np.uint8), _SPACE, out=padded[1:-1])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = edges[0::2], edges[1::2]
    token_offsets = np.zeros(len(starts) + 1, np.int32)
    np.cumsum(ends - starts, out=token_offsets[1:])
    # a run going on from one string into the next is cut there: one more
    # token offset, inside the run's (the only array it is inserted into)
    inner = offsets[1:-1]
    inner = inner[(inner > 0) & (inner < size)]
    cut = np.unique(inner[padded[inner] & padded[inner + 1]])
    begun = np.searchsorted(starts, offsets)  # runs begun before each string
    if len(cut):
        run = np.searchsorted(starts, cut, side="right") - 1
        token_offsets = np.insert(token_offsets, run + 1, token_offsets[run] + (cut - starts[run]))
        begun += np.searchsorted(cut, offsets)
    return token_offsets, np.diff(begun)


def id_lists(lists: pa.ListArray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(the rows' ids back to back, row offsets: n + 1 values) of a column of
    id lists (a tokens table's ``ids``); with ``rows`` (ascending) only those
    rows. The ids are selected with a mask over the values, not gathered list
    by list (Arrow's take), which is what a retrieve job reading half an M
    tokens table spent its time on."""
    offsets = lists.offsets.to_numpy().astype(np.int64)
    values = lists.values.to_numpy()[offsets[0]:offsets[-1]]
    if rows is None:
        return values, offsets - offsets[0]
    lengths = np.diff(offsets)
    keep = np.zeros(len(lengths), bool)
    keep[rows] = True
    selected = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths[rows], out=selected[1:])
    return values[np.repeat(keep, lengths)], selected


def with_separators(flat: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows given as (ids back to back, n + 1 offsets), each row followed by
    :data:`SEPARATOR`: (the new array, its n + 1 row offsets, separators included)."""
    n = len(offsets) - 1
    starts = offsets + np.arange(n + 1)
    out = np.full(len(flat) + n, SEPARATOR, np.int32)
    is_token = np.ones(len(out), bool)
    is_token[starts[1:] - 1] = False
    out[is_token] = flat
    return out, starts


# Text tokenized at once: token_stream's arrays (about ten times this) stay in
# the caches and the allocator's free lists, not fresh pages of big arrays.
PIECE_BYTES = 256 << 10


def _pieces(texts: pa.Array, size: int) -> list[pa.Array]:
    """``texts`` cut into consecutive slices of about ``size`` bytes each (a
    longer text alone), so a batch of long texts stays within memory."""
    offsets, _ = _string_buffers(texts)
    if offsets[-1] <= size:
        return [texts]
    cuts = np.unique(np.searchsorted(offsets, np.arange(size, offsets[-1], size), side="right") - 1)
    cuts = [0, *cuts[cuts > 0].tolist(), len(texts)]
    return [texts.slice(a, b - a) for a, b in zip(cuts, cuts[1:]) if b > a]


def write_token_ids(batches, out, joined, ascii_token: bytes | None = None, long: int | None = None,
                    log_progress=None) -> None:
    """A tokens stage table (``tables.TOKEN_IDS``) from (session keys, texts)
    batches of Arrow arrays, tokenized as :func:`token_stream` does: one row
    group per batch."""
    import pyarrow.parquet as pq

    from ..tables import TOKEN_IDS, atomic_path

    vocab = Vocab()
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, TOKEN_IDS, compression="zstd") as writer:
        for keys, texts in batches:
            if not len(keys):
                continue
            chunks, counts = [], []
            for piece in _pieces(texts, PIECE_BYTES):
                tokens, piece_counts = token_stream(piece, joined, ascii_token, long)
                chunks.append(tokens)
                counts.append(piece_counts)
            flat, new = vocab.encode_strings(pa.chunked_array(chunks, pa.binary()))
            counts = np.concatenate(counts)
            offsets = np.zeros(len(counts) + 1, np.int32)
            np.cumsum(counts, out=offsets[1:])
            ids = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.int32()))
            new_tokens = pa.array([[t.encode("utf-8", "surrogatepass") for t in new]] + [[]] * (len(keys) - 1),
                                  pa.list_(pa.binary()))
            writer.write_batch(pa.record_batch([keys.cast(pa.int32()), ids, new_tokens], schema=TOKEN_IDS),
                               row_group_size=max(len(keys), 1))
            if log_progress:
                log_progress(len(keys))


def read_vocab(path) -> Vocab:
    """The vocabulary of a ``tables.TOKEN_IDS`` table: its ``new_tokens`` in row order."""
    import pyarrow.parquet as pq

    from ..errors import DataError
    from ..tables import TOKEN_IDS

    f = pq.ParquetFile(path)
    if not f.schema_arrow.equals(TOKEN_IDS):
        raise DataError(path, None, "not a tokens table of this version; delete it and rerun")
    tokens = [t.decode("utf-8", "surrogatepass")
              for t in f.read(columns=["new_tokens"]).column(0).combine_chunks().flatten().to_pylist()]
    vocab = Vocab(tokens)
    if len(vocab) != len(tokens):
        raise DataError(path, None, "its vocabulary lists a token twice; delete it and rerun")
    return vocab


def _starts(cat: np.ndarray, ids) -> np.ndarray:
    """Every position of ``cat`` where the token ids ``ids`` (None or empty:
    nothing) start, one after another; ``cat`` ends with a separator."""
    if not ids:
        return EMPTY_IDS
    pos = np.flatnonzero(cat == ids[0])
    for j in range(1, len(ids)):
        if not len(pos):
            break
        # in range: cat[pos + j - 1] matched a token, and a separator comes last
        pos = pos[cat[pos + j] == ids[j]]
    return pos


class Concat:
    """A haystack's sessions' token ids back to back, :data:`SEPARATOR` after
    each, so no match spans two sessions."""

    __slots__ = ("cat", "starts")

    def __init__(self, arrays: list[np.ndarray]):
        lengths = np.fromiter((len(a) + 1 for a in arrays), np.int64, len(arrays))
        self.starts = np.zeros(len(arrays), np.int64)
        if len(arrays) > 1:
            np.cumsum(lengths[:-1], out=self.starts[1:])
        parts = []
        for a in arrays:
            parts += (a, _SEP)
        self.cat = np.concatenate(parts) if parts else EMPTY_IDS

    def rows(self, ids: tuple[int, ...]) -> list[int]:
        """The sessions (positions, ascending) holding ``ids`` as consecutive tokens."""
        pos = _starts(self.cat, ids)
        if not len(pos):
            return []
        return np.unique(np.searchsorted(self.starts, pos, side="right") - 1).tolist()


class HayEvents:
    """One haystack's sessions under one JS tokenizer: their events' token ids
    back to back, :data:`SEPARATOR` after each event (so no match spans two),
    for the representative event of a phrase in every session at once
    (docs/harnesses.md#representative-event-and-session-order).

    ``sessions``: each haystack position's array (:meth:`Vocab.encode_events`
    form); ``lengths``: each position's events' code-point lengths."""

    __slots__ = ("cat", "ends", "ev_pos", "ev_k", "ev_len", "vocab", "_reps")

    def __init__(self, sessions: list[np.ndarray], lengths: list[list[int]], vocab: Vocab):
        self.cat = np.concatenate(sessions) if sessions else EMPTY_IDS
        self.ends = np.flatnonzero(self.cat == SEPARATOR)  # event e ends at ends[e]
        n_ev = np.fromiter(map(len, lengths), np.int64, len(lengths))
        total = int(n_ev.sum())
        if total != len(self.ends):
            raise ValueError(f"{len(self.ends)} events in the token ids, {total} in the lengths")
        self.ev_pos = np.repeat(np.arange(len(lengths)), n_ev)  # haystack position of each event
        self.ev_k = np.arange(total) - np.repeat(np.cumsum(n_ev) - n_ev, n_ev)  # its index in the session
        self.ev_len = np.fromiter(chain.from_iterable(lengths), np.int64, total)
        self.vocab = vocab
        self._reps: dict[tuple, dict] = {}

    def reps(self, phrase: tuple) -> dict[int, tuple[int, int, int]]:
        """For each haystack position whose session holds the token sequence
        ``phrase``, in ascending order: (occ, len, k) of its representative
        event, the one with the most occurrences (every start counts, so
        overlapping ones do), then the shortest (code points), then the last."""
        found = self._reps.get(phrase)
        if found is None:
            found = self._reps[phrase] = self._find(phrase)
        return found

    def _find(self, phrase: tuple) -> dict:
        pos = _starts(self.cat, self.vocab.lookup(phrase) if phrase else None)
        if not len(pos):
            return {}
        events, occ = np.unique(np.searchsorted(self.ends, pos), return_counts=True)
        at, length, k = self.ev_pos[events], self.ev_len[events], self.ev_k[events]
        # by position, then ascending (occ, -len, k): each position's last is its best
        order = np.lexsort((k, -length, occ, at))
        at, occ, length, k = at[order], occ[order], length[order], k[order]
        last = np.flatnonzero(np.append(at[1:] != at[:-1], True))
        return dict(zip(at[last].tolist(), zip(occ[last].tolist(), length[last].tolist(), k[last].tolist())))
