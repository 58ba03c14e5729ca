"""Tokens as integer ids, so the sessions of a haystack are searched at once.

Which sessions of a haystack hold an FTS5 phrase (fts5.PhraseMatcher) used
to be a substring search of every session's joined tokens: on a
LongMemEval-M haystack of 500 sessions that is megabytes scanned per phrase.
Here each token is an id (:class:`Vocab`, one per corpus), a session is the
array of its tokens' ids, and a haystack is its sessions' arrays back to back
with :data:`SEPARATOR` between them (:class:`Concat`), where a sequence is
found with a few vectorized compares (about 0.8 ms per phrase on such a
haystack, against 6 ms). A sequence holding a token no session has matches
nothing. The exp6 index backend keeps the joined forms: it asks few terms per
haystack, and the JS tokens' ids would cost the retrieve job more to load
than they save.

The tokens stage writes the ``fts5`` tokens this way (``tables.FTS5_IDS``):
each event's ids, and the vocabulary as the tokens first seen in each batch,
in id order (:func:`write_fts5_ids`, :func:`read_vocab`). Joined forms are
turned into ids by Arrow (split, dictionary-encode), Python touching only each
batch's distinct tokens (:meth:`Vocab.encode_column`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEPARATOR = -1  # between sessions in a Concat; never a token's id
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


def id_lists(lists: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """(the rows' ids back to back, row offsets: n + 1 values) of a column of
    id lists, the form :meth:`Vocab.encode_column` gives for joined forms."""
    offsets = lists.offsets.to_numpy().astype(np.int64)
    return lists.flatten().to_numpy(), offsets - offsets[0]


def write_fts5_ids(batches, out, log_progress=None) -> None:
    """The tokens stage's ``fts5`` table (``tables.FTS5_IDS``) from
    (session keys, joined forms) batches: one row group per batch."""
    import pyarrow.parquet as pq

    from .tables import FTS5_IDS, atomic_path

    vocab = Vocab()
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, FTS5_IDS, compression="zstd") as writer:
        for keys, joined in batches:
            flat, offsets, new = vocab.encode_column(pa.array(joined, pa.string()))
            ids = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.int32()))
            new_tokens = pa.array([new] + [[]] * (len(keys) - 1), pa.list_(pa.string()))
            writer.write_batch(pa.record_batch([pa.array(keys, pa.int32()), ids, new_tokens], schema=FTS5_IDS),
                               row_group_size=max(len(keys), 1))
            if log_progress:
                log_progress(len(keys))


def read_vocab(path) -> Vocab:
    """The vocabulary of a ``tables.FTS5_IDS`` table: its ``new_tokens`` in row order."""
    import pyarrow.parquet as pq

    from .errors import DataError
    from .tables import FTS5_IDS

    f = pq.ParquetFile(path)
    if not f.schema_arrow.equals(FTS5_IDS):
        raise DataError(path, None, "not an fts5 tokens table of this version; delete it and rerun")
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
