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
:func:`read_vocab`). Joined forms are turned into ids by Arrow (split,
dictionary-encode), Python touching only each batch's distinct tokens
(:meth:`Vocab.encode_column`).
"""

from __future__ import annotations

from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEPARATOR = -1  # after each session of a Concat, each event of a HayEvents; never a token's id
_NO_TOKEN = -2  # the empty pieces of a split joined form, dropped
_SEP = np.array([SEPARATOR], np.int32)
EMPTY_IDS = np.empty(0, np.int32)


class Vocab:
    """Token -> id, ids given in order of first sight."""

    def __init__(self, tokens=()):
        self.ids: dict[str, int] = {t: i for i, t in enumerate(tokens)}

    def __len__(self) -> int:
        return len(self.ids)

    def encode(self, joined: str) -> np.ndarray:
        """The ids of one joined form's tokens (tokens never hold whitespace)."""
        ids = self.ids
        return np.array([ids.setdefault(t, len(ids)) for t in joined.split()], np.int32)

    def tokens(self) -> list[str]:
        """Every token, at its id (ids are given in order, and dicts keep it)."""
        return list(self.ids)

    def encode_events(self, joined: list[str]) -> np.ndarray:
        """The ids of several events' joined forms, each followed by :data:`SEPARATOR`
        (a :class:`HayEvents` session)."""
        ids = self.ids
        out = []
        for j in joined:
            out += [ids.setdefault(t, len(ids)) for t in j.split()]
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

    def encode_column(self, joined: pa.Array) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(every row's token ids back to back, row offsets: n + 1 values, the
        tokens first seen here in id order) of a column of joined forms. A
        form's outer spaces are trimmed and the rest split at each pair of
        spaces (tokens never hold a space; a form of no tokens leaves one
        empty piece, dropped), so the tokens are exactly ``str.split``'s."""
        lists = pc.split_pattern(pc.ascii_trim(joined, " "), "  ")
        offsets = lists.offsets.to_numpy().astype(np.int64)
        values = lists.values.slice(offsets[0], offsets[-1] - offsets[0])
        offsets -= offsets[0]
        if not len(values):
            return EMPTY_IDS, offsets, []
        # the dictionary lists each distinct piece once, in order of first occurrence
        encoded = pc.dictionary_encode(values)
        ids, new, remap = self.ids, [], []
        for t in encoded.dictionary.to_pylist():
            i = ids.get(t, _NO_TOKEN) if t else _NO_TOKEN
            if i == _NO_TOKEN and t:
                i = ids[t] = len(ids)
                new.append(t)
            remap.append(i)
        all_ids = np.array(remap, np.int32)[encoded.indices.to_numpy()]
        keep = all_ids != _NO_TOKEN
        kept_before = np.zeros(len(all_ids) + 1, np.int64)
        np.cumsum(keep, dtype=np.int64, out=kept_before[1:])
        return all_ids[keep], kept_before[offsets], new


def id_lists(lists: pa.ListArray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(the rows' ids back to back, row offsets: n + 1 values) of a column of
    id lists, the form :meth:`Vocab.encode_column` gives for joined forms;
    with ``rows`` (ascending) only those rows. The ids are selected with a
    mask over the values, not gathered list by list (Arrow's take), which is
    what a retrieve job reading half an M tokens table spent its time on."""
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


def write_token_ids(batches, out, log_progress=None) -> None:
    """A tokens stage table (``tables.TOKEN_IDS``) from (session keys, joined
    forms) batches: one row group per batch."""
    import pyarrow.parquet as pq

    from .tables import TOKEN_IDS, atomic_path

    vocab = Vocab()
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, TOKEN_IDS, compression="zstd") as writer:
        for keys, joined in batches:
            flat, offsets, new = vocab.encode_column(pa.array(joined, pa.string()))
            ids = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.int32()))
            new_tokens = pa.array([new] + [[]] * (len(keys) - 1), pa.list_(pa.string()))
            writer.write_batch(pa.record_batch([pa.array(keys, pa.int32()), ids, new_tokens], schema=TOKEN_IDS),
                               row_group_size=max(len(keys), 1))
            if log_progress:
                log_progress(len(keys))


def read_vocab(path) -> Vocab:
    """The vocabulary of a ``tables.TOKEN_IDS`` table: its ``new_tokens`` in row order."""
    import pyarrow.parquet as pq

    from .errors import DataError
    from .tables import TOKEN_IDS

    f = pq.ParquetFile(path)
    if not f.schema_arrow.equals(TOKEN_IDS):
        raise DataError(path, None, "not a tokens table of this version; delete it and rerun")
    tokens = f.read(columns=["new_tokens"]).column(0).combine_chunks().flatten().to_pylist()
    vocab = Vocab(tokens)
    if len(vocab) != len(tokens):
        raise DataError(path, None, "its vocabulary lists a token twice; delete it and rerun")
    return vocab


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
        if not ids:
            return []
        cat = self.cat
        pos = np.flatnonzero(cat == ids[0])
        for j in range(1, len(ids)):
            if not len(pos):
                return []
            # pos + j is in range: cat[pos + j - 1] matched a token, and the
            # array ends with a separator
            pos = pos[cat[pos + j] == ids[j]]
        if not len(pos):
            return []
        return np.unique(np.searchsorted(self.starts, pos, side="right") - 1).tolist()


class HayEvents:
    """One haystack's sessions under one JS tokenizer: their events' token ids
    back to back, :data:`SEPARATOR` after each event (so no match spans two),
    for the representative event of a phrase in every session at once
    (HARNESSES.md 3.2).

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
        ids = self.vocab.lookup(phrase) if phrase else None
        if not ids:
            return {}
        cat = self.cat
        pos = np.flatnonzero(cat == ids[0])
        for j in range(1, len(ids)):
            if not len(pos):
                return {}
            # in range: cat[pos + j - 1] is a token, and every event ends with a separator
            pos = pos[cat[pos + j] == ids[j]]
        if not len(pos):
            return {}
        events, occ = np.unique(np.searchsorted(self.ends, pos), return_counts=True)
        at, length, k = self.ev_pos[events], self.ev_len[events], self.ev_k[events]
        # by position, then ascending (occ, -len, k): each position's last is its best
        order = np.lexsort((k, -length, occ, at))
        at, occ, length, k = at[order], occ[order], length[order], k[order]
        last = np.flatnonzero(np.append(at[1:] != at[:-1], True))
        return dict(zip(at[last].tolist(), zip(occ[last].tolist(), length[last].tolist(), k[last].tolist())))
