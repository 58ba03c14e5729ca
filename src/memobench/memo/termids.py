"""Tokens as integer ids, so the sessions of a haystack are searched at once.

Which sessions of a haystack hold a phrase, and how often each of their
events does, used to be substring searches of every session's joined tokens:
on a LongMemEval-M haystack of 500 sessions that is megabytes scanned per
phrase and per session. Here each token is an id (:class:`Vocab`, one per
tokenizer and corpus), a session is the array of its tokens' ids, and a
haystack is its sessions' arrays back to back with :data:`SEPARATOR` between
them, where a sequence is found with a few vectorized compares instead of a
scan of strings. A sequence holding a token no
session has matches nothing. Two layouts:

* :class:`Concat`: the FTS5 body column (fts5.PhraseMatcher), where a phrase
  may run from one event into the next (the harnesses join them with "\n");
* :class:`HayEvents`: the JS tokens, with the separator after every event,
  since an event is what a phrase is counted in (the representative event).

The tokens stage writes every tokenizer's tokens this way
(``tables.TOKEN_IDS``, an Arrow IPC file: :func:`open_tokens`): each event's
ids, and the vocabulary as the tokens first seen in each batch, in id order
(:func:`write_token_ids`, :func:`read_vocab`). The ASCII texts of a batch are tokenized all at once on
their bytes (:func:`token_stream`), the others by their tokenizer, and the
tokens turned into ids by Arrow's dictionary encoding of a 64-bit key per
token, Python touching only each batch's distinct tokens
(:meth:`Vocab.encode_keys`).
"""

from __future__ import annotations

import functools
from itertools import chain

import numpy as np
import pyarrow as pa

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
        return self._ids_of(joined.split())

    def _ids_of(self, tokens: list) -> np.ndarray:
        """The ids of ``tokens``, a new token given the next id where first
        seen. Most tokens are known: looked up all at once, the new ones
        added only when a lookup misses."""
        ids = self.ids
        try:
            return np.fromiter(map(ids.__getitem__, tokens), np.int32, len(tokens))
        except KeyError:
            for t in tokens:
                if t not in ids:
                    ids[t] = len(ids)
            return np.fromiter(map(ids.__getitem__, tokens), np.int32, len(tokens))

    def tokens(self) -> list[str]:
        """Every token, at its id (ids are given in order, and dicts keep it)."""
        if len(self._tokens) != len(self.ids):
            self._tokens = list(self.ids)
        return self._tokens

    def encode_events(self, joined: list[str]) -> np.ndarray:
        """The ids of several events' joined forms, each followed by :data:`SEPARATOR`
        (a :class:`HayEvents` session)."""
        events = [j.split() for j in joined]
        try:
            return self._known_events(events)
        except KeyError:  # as in _ids_of: the new tokens get their ids, then the lookup again
            self._ids_of([t for tokens in events for t in tokens])
            return self._known_events(events)

    def _known_events(self, events: list[list[str]]) -> np.ndarray:
        get = self.ids.__getitem__
        out: list[int] = []
        for tokens in events:
            out += map(get, tokens)
            out.append(SEPARATOR)
        return np.array(out, np.int32)

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
        them, in one array or several chunks; as everywhere here, none holds
        a space (one that does sends the array to Arrow's encoding of the
        bytes themselves). Encoded as their keys (:meth:`encode_keys`)."""
        if not len(tokens):
            return EMPTY_IDS, []
        chunks = tokens.chunks if isinstance(tokens, pa.ChunkedArray) else [tokens]
        keyed = [_array_keys(c) for c in chunks]
        if any(k is None for k in keyed):
            dictionary, indices = _dictionary(_kernel("dictionary_encode", tokens))
            return self._ids(dictionary.to_pylist(), indices)
        longer = pa.chunked_array([_kernel("filter", c, pa.array(is_long)) for c, (_, is_long) in zip(chunks, keyed)],
                                  chunks[0].type)  # each chunk's longer tokens (Array.filter's kernel)
        return self.encode_keys([k for k, _ in keyed], [is_long for _, is_long in keyed], longer)

    def encode_keys(self, keys: list[np.ndarray], is_long: list[np.ndarray],
                    longer: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
        """:meth:`encode_strings` of tokens given as their keys (:func:`_keys`),
        in pieces, ``is_long`` marking those of more than 8 bytes, whose bytes
        are ``longer``, in order. Arrow dictionary-encodes the keys (about
        three times as fast as bytes), a longer token's key replaced by its
        index among the longer ones (by the same encoding of their bytes) over
        a space; its dictionary lists them in order of first occurrence, so
        ids stay in order of first sight, Python touching each distinct token
        once. The pieces stay apart (Arrow encodes them as one), so no copy
        of all the keys is made."""
        if not sum(map(len, keys)):
            return EMPTY_IDS, []
        names = []
        if len(longer):
            dictionary, indices = _dictionary(_kernel("dictionary_encode", longer))
            escaped = (indices.astype(np.uint64) << np.uint64(8)) | np.uint64(_SPACE)
            at = 0
            for piece, marked in zip(keys, is_long):
                n = np.count_nonzero(marked)
                piece[marked] = escaped[at:at + n]
                at += n
            names = dictionary.to_pylist()
        all_keys = pa.chunked_array(map(pa.array, keys), pa.uint64())
        dictionary, indices = _dictionary(_kernel("dictionary_encode", all_keys))
        return self._ids([names[k >> 8] if (k & 0xFF) == _SPACE else k.to_bytes(8, "little").rstrip(b" ")
                          for k in dictionary.to_pylist()], indices)

    def _ids(self, distinct: list, indices: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """(the ids, the tokens first seen here) of tokens given as the distinct
        ones in order of first occurrence (strings or UTF-8 bytes) and each
        token's index among them."""
        ids, new, remap = self.ids, [], []
        for t in distinct:
            if isinstance(t, bytes):
                t = t.decode("utf-8", "surrogatepass")
            i = ids.get(t)
            if i is None:
                i = ids[t] = len(ids)
                new.append(t)
            remap.append(i)
        return np.array(remap, np.int32)[indices], new


def _kernel(name: str, *args, options=None):
    """pyarrow.compute's function ``name`` of ``args``, called as core.tables.kernels calls it
    (pyarrow.compute's import is a sixth of a small retrieve job)."""
    from ..core.tables import kernels

    return kernels().call_function(name, list(args), options)


def _dictionary(encoded: pa.DictionaryArray | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """(the dictionary, the indices) of a dictionary-encoded array or chunked array."""
    if isinstance(encoded, pa.ChunkedArray):
        # Arrow gives every chunk the one dictionary of them all (DictEncodeFinalize)
        return encoded.chunk(0).dictionary, np.concatenate([c.indices.to_numpy() for c in encoded.chunks])
    return encoded.dictionary, encoded.indices.to_numpy()


_SPACE = 32
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_SPACES = np.uint64(0x2020_2020_2020_2020)
_KEY_PAD = b" " * 8  # after the last token of a buffer keys are read from


def _keys(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The key of each token of ``data`` (``lengths`` bytes at ``starts``;
    8 bytes readable from each start): its first 8 bytes as a little-endian
    integer, spaces after a shorter token. A token never holds a space, so two
    tokens of up to 8 bytes have one key only when they are equal, and the
    low byte of a key is never a space."""
    windows = np.ndarray((len(data) - 7,), "<u8", data, strides=(1,))
    after = np.left_shift(_ALL, lengths.astype(np.uint64) << np.uint64(3))  # the bits past the token: none from 8 bytes
    return (np.take(windows, starts) & ~after) | (_SPACES & after)


def _array_keys(tokens: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """(the keys, which are longer than 8 bytes) of a string or binary array
    of tokens; None where one holds a space."""
    n = len(tokens)
    offsets = np.frombuffer(tokens.buffers()[1], np.int32)[tokens.offset:tokens.offset + n + 1]
    first, size = int(offsets[0]), int(offsets[-1] - offsets[0])
    data = tokens.buffers()[2].to_pybytes()[first:first + size] if size else b""
    if b" " in data:
        return None
    lengths = np.diff(offsets)
    return _keys(data + _KEY_PAD, offsets[:-1] - first, lengths), lengths > 8


def _runs_bytes(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """The runs of ``data`` at ``starts``, ``lengths`` bytes each, as a binary array."""
    offsets = np.zeros(len(starts) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    at = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
    return pa.Array.from_buffers(pa.binary(), len(starts),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(np.frombuffer(data, np.uint8)[at])])


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
    lowercased, the others spaces), the texts joined by spaces; then the runs
    are found with a few vectorized passes (:func:`_spaced_runs`), and the
    tokens are the runs' bytes back to back."""
    spaced, starts, lengths, counts = _spaced_runs(texts, joined, ascii_token, long)
    token_offsets = np.zeros(len(starts) + 1, np.int32)
    np.cumsum(lengths, out=token_offsets[1:])
    # the tokens' bytes: the spaces deleted, in one C pass (a mask's gather costs more)
    tokens = pa.Array.from_buffers(pa.binary(), len(starts),
                                   [None, pa.py_buffer(token_offsets), pa.py_buffer(spaced.translate(None, b" "))])
    return tokens, counts


def _spaced_runs(texts: pa.Array, joined, ascii_token: bytes | None = None,
                 long: int | None = None) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """(the texts' spaced forms, each followed by a space, then 8 more; the
    start and the length of each run of non-space bytes in it; each text's
    number of runs): :func:`token_stream`'s tokens, before they are copied
    out."""
    n = len(texts)
    offsets, buf = _string_buffers(texts)
    raw = b"" if ascii_token is None else buf.tobytes()
    if ascii_token is None:
        plain = np.zeros(n, bool)
    elif raw.isascii():  # the usual case, one C pass: string_is_ascii costs several times more
        plain = np.ones(n, bool)
    else:
        plain = _kernel("string_is_ascii", texts).to_numpy(zero_copy_only=False)
    translated = raw.translate(_lowered(ascii_token)) if plain.any() else b""
    bounds, strings = offsets.tolist(), None
    while True:
        if plain.all():
            forms = [translated[a:b] for a, b in zip(bounds, bounds[1:])]
            form_at = offsets + np.arange(n + 1)
        else:
            strings = texts.to_pylist() if strings is None else strings
            forms = [translated[a:b] if p else joined(t).encode("utf-8", "surrogatepass")
                     for a, b, t, p in zip(bounds, bounds[1:], strings, plain)]
            form_at = np.zeros(n + 1, np.int64)
            np.cumsum([len(f) + 1 for f in forms], out=form_at[1:])
        # a space after each text, so no run goes on into the next one
        spaced = b" ".join([*forms, _KEY_PAD])
        # where the mask of token bytes changes: starts and ends alternately
        # (it ends in spaces, and is False before the first byte)
        is_token = np.zeros(len(spaced) + 1, bool)
        np.not_equal(np.frombuffer(spaced, np.uint8), _SPACE, out=is_token[1:])
        edges = np.flatnonzero(is_token[1:] != is_token[:-1])
        starts = edges[0::2]
        lengths = edges[1::2] - starts
        if long is not None and plain.any():
            text_of = np.searchsorted(form_at, starts[lengths > long], side="right") - 1
            text_of = text_of[plain[text_of]]
            if len(text_of):
                plain = plain.copy()
                plain[text_of] = False
                continue
        return spaced, starts, lengths, np.diff(np.searchsorted(starts, form_at))


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
    """A tokens stage table (``tables.TOKEN_IDS``, an Arrow IPC file) from
    (session keys, texts) batches of Arrow arrays, tokenized as
    :func:`token_stream` does: one record batch per batch."""
    from ..core.atomic import atomic_path
    from ..core.tables import TOKEN_IDS, kernels

    vocab = Vocab()
    options = pa.ipc.IpcWriteOptions(compression=TOKENS_COMPRESSION)
    with atomic_path(out) as tmp, pa.OSFile(str(tmp), "wb") as sink, \
            pa.ipc.new_file(sink, TOKEN_IDS, options=options) as writer:
        for keys, texts in batches:
            if not len(keys):
                continue
            token_keys, is_long, longer, counts = [], [], [], []
            for piece in _pieces(texts, PIECE_BYTES):
                spaced, starts, lengths, piece_counts = _spaced_runs(piece, joined, ascii_token, long)
                # keys while the piece is in the caches; only the longer tokens' bytes are copied out
                token_keys.append(_keys(spaced, starts, lengths))
                is_long.append(lengths > 8)
                longer.append(_runs_bytes(spaced, starts[is_long[-1]], lengths[is_long[-1]]))
                counts.append(piece_counts)
            flat, new = vocab.encode_keys(token_keys, is_long, pa.chunked_array(longer, pa.binary()))
            counts = np.concatenate(counts)
            offsets = np.zeros(len(counts) + 1, np.int32)
            np.cumsum(counts, out=offsets[1:])
            ids = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.int32()))
            new_tokens = pa.array([[t.encode("utf-8", "surrogatepass") for t in new]] + [[]] * (len(keys) - 1),
                                  pa.list_(pa.binary()))
            keys = _kernel("cast", keys, options=kernels().CastOptions.safe(pa.int32()))  # keys.cast(pa.int32())
            writer.write_batch(pa.record_batch([keys, ids, new_tokens], schema=TOKEN_IDS))
            if log_progress:
                log_progress(len(keys))


# The tokens table is an Arrow IPC file, not Parquet: every retrieve job reads
# whole tables of it, and decoding Parquet's list levels was most of a job's
# read. Its buffers are not compressed: a job maps the file and reads them in
# place, where LZ4 had each job decompress every table it reads again; the
# price is a larger file (docs/benchmarks.md).
TOKENS_COMPRESSION = None
TOKEN_LIST = pa.list_(pa.binary())  # the type of a tokens table's new_tokens


def open_tokens(path) -> "pa.ipc.RecordBatchFileReader":
    """A tokens stage table's reader (one record batch per batch of events);
    a file of another format or schema (a tokens table of an earlier version)
    is a DataError naming it and the fix."""
    from ..core.errors import DataError
    from ..core.tables import TOKEN_IDS

    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path)))
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(path, None, f"not a tokens table of this version ({e}); delete it and rerun") from None
    if not reader.schema.equals(TOKEN_IDS):
        raise DataError(path, None, "not a tokens table of this version; delete it and rerun")
    return reader


def token_batches(path):
    """A tokens stage table's record batches, in row order."""
    reader = open_tokens(path)
    return (reader.get_batch(i) for i in range(reader.num_record_batches))


def read_vocab(path) -> Vocab:
    """The vocabulary of a ``tables.TOKEN_IDS`` table: its ``new_tokens`` in row order."""
    reader = open_tokens(path)
    return vocab_of([reader.get_batch(i).column(2) for i in range(reader.num_record_batches)], path)


def vocab_of(new_tokens: list, path) -> Vocab:
    """The vocabulary of a tokens table (``path``, named in errors) from its
    batches' ``new_tokens`` columns, in order: what a job reading all its
    batches anyway collects on the way, instead of reading them twice."""
    from ..core.errors import DataError

    tokens = [t.decode("utf-8", "surrogatepass")
              for t in _kernel("list_flatten", pa.chunked_array(new_tokens, TOKEN_LIST).combine_chunks()).to_pylist()]
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
