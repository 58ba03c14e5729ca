"""Session documents for the reference retrievers (PROTOCOL.md section 5).

* LongMemEval-format datasets (``longmemeval``, and ``longmemeval_cn`` whose
  haystacks are LongMemEval-S's): a session's document is the text of its
  **user** turns (events whose ``role`` is exactly ``"user"``) joined with single
  spaces, as LongMemEval's ``run_retrieval.py`` builds it; a session with no
  user turn has the empty text.
* Every other format (LoCoMo, the embedded zh set): all its turns' texts, in
  turn order, joined with single spaces (the speaker's name is not added).

Everything is read from the normalized tables: ``events.parquet``
(``session_key``, ``seq``, ``text``, ``role`` = LongMemEval's ``role`` or
LoCoMo's ``speaker``, and ``text_exact`` for the exact texts) and
``haystacks.parquet`` (each haystack's sessions in order). No column beyond
those is needed.

A turn text with a lone surrogate (a JSON escape of U+D800 to U+DFFF that is
not half of a pair) is, by default, its ``text`` column: U+FFFD for each lone
surrogate, as SQLite FTS5 (UTF-8 only) and the MiniLM tokenizer must take it,
and the same tokens for bm25s (neither character is a word character).
``exact=True`` gives the text as the file holds it (``tables.exact_text``):
LongMemEval's own BM25 (``str.split(" ")`` tokens) reads the file with
``json.load``, which keeps lone surrogates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..tables import exact_text, read_table

USER_TURNS_ONLY = frozenset({"longmemeval", "longmemeval_cn"})


def user_turns_only(fmt: str) -> bool:
    """True when the documents keep only user turns: ``fmt`` is a dataset
    format, or a recipe's ``documents`` value (``"user"`` or ``"all"``)."""
    return fmt in USER_TURNS_ONLY or fmt == "user"


def session_documents(events_path, fmt: str, keys=None, batch_rows: int = 65536, exact: bool = False) -> dict[int, str]:
    """``{session_key: document text}`` for the wanted sessions (all when ``keys``
    is None). Streams the events table a batch at a time; every wanted session
    gets an entry, the empty text when it has no kept turn. ``exact``: the
    turns' exact texts (module docstring)."""
    only_user = user_turns_only(fmt)
    wanted = None if keys is None else np.fromiter(set(keys), dtype=np.int64)
    parts: dict[int, list[tuple[int, str]]] = {}
    if wanted is not None:
        for k in wanted.tolist():
            parts[k] = []
    f = pq.ParquetFile(events_path)
    columns = ["session_key", "seq", "text", "role", *(["text_exact"] if exact else [])]
    for batch in f.iter_batches(batch_size=batch_rows, columns=columns):
        k = batch.column(0).to_numpy()
        mask = np.ones(len(k), dtype=bool) if wanted is None else np.isin(k, wanted)
        if only_user:
            mask &= pc.fill_null(pc.equal(batch.column(3), "user"), False).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(mask)
        if wanted is None:
            for key in np.unique(k).tolist():
                parts.setdefault(key, [])
        if not len(rows):
            continue
        seqs = batch.column(1).take(rows).to_pylist()
        texts = batch.column(2).take(rows).to_pylist()
        if exact:
            texts = list(map(exact_text, texts, batch.column(4).take(rows).to_pylist()))
        for key, seq, text in zip(k[rows].tolist(), seqs, texts):
            parts[key].append((seq, text))
    return {key: " ".join(t for _, t in sorted(p)) for key, p in parts.items()}


@dataclass(frozen=True)
class HaystackDocs:
    """One haystack in order: ``session_ids[i]``, ``keys[i]`` (session_key) and
    ``docs[i]`` (document text) describe position i; duplicates are kept."""

    haystack_id: int
    session_ids: list[str]
    keys: list[int]
    docs: list[str]


def haystack_documents(haystacks_path, events_path, fmt: str, haystack_ids=None,
                       exact: bool = False) -> dict[int, HaystackDocs]:
    """Each wanted haystack (all when ``haystack_ids`` is None) with its
    documents in haystack order (``exact``: as :func:`session_documents`)."""
    where = None if haystack_ids is None else {"haystack_id": sorted(set(haystack_ids))}
    t = read_table(haystacks_path, columns=["haystack_id", "position", "session_key", "session_id"], where=where)
    t = t.sort_by([("haystack_id", "ascending"), ("position", "ascending")]).to_pydict()
    texts = session_documents(events_path, fmt, keys=set(t["session_key"]), exact=exact) if t["session_key"] else {}
    out: dict[int, HaystackDocs] = {}
    for hid, sid, key in zip(t["haystack_id"], t["session_id"], t["session_key"]):
        h = out.get(hid)
        if h is None:
            h = out[hid] = HaystackDocs(hid, [], [], [])
        h.session_ids.append(sid)
        h.keys.append(key)
        h.docs.append(texts[key])
    return out
