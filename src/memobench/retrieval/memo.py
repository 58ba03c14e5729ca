"""The Memo engine as a retriever: one segment ranked under Memo variants
(recipes of the engine, ``backend`` fts or index), each question's list by
``engine.Ranker`` over the corpus of the segment's sessions (their events
and tokens), recorded under the harness rules (``harness``).

The retrieve stage calls :func:`rank_segment` (this module registers the
``memo`` retriever and its backends ``fts`` and ``index`` in the catalog); the harness
rules and tables are ``harness``'s (re-exported here: ``RANKINGS``,
``OUTCOMES``, ``DEEP``, ``segment_bounds``).
"""

from __future__ import annotations

import time

from ..core.errors import DataError
from ..memo.tokenize import FTS5_TOKENS
from ..catalog.row import Retriever, Row, register, register_retriever
from ..catalog.variant import Variant

# numpy, pyarrow, the engine and the harness are imported where a segment is ranked, not here: the
# catalog imports this module to learn what a variant reads, and a retrieve job whose lists a
# sibling's job ranked only copies files (retrieval/sharing.py), without them
__all__ = ["DEEP", "OUTCOMES", "RANKINGS", "segment_bounds", "load_segment", "run_segment", "run_segments",
           "rank_segment", "token_tables"]
_FROM_HARNESS = ("DEEP", "OUTCOMES", "RANKINGS", "segment_bounds", "token_tables")


def __getattr__(name: str):
    """The harness's tables and segment bounds, re-exported, imported when first asked for."""
    if name in _FROM_HARNESS:
        from . import harness

        return getattr(harness, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_segment(questions_path, haystacks_path, events_path, segment: int, n_segments: int,
                 tokens_path=None, seq_name: str | None = None, texts: bool = True, tokens: dict | None = None,
                 events: bool = True):
    """``tokens`` (tokenizer name -> tokens table) loads several tokenizers'
    tokens at once (one job ranking variants of several tokenizers);
    ``tokens_path``/``seq_name`` is the one-tokenizer form. ``events=False``
    leaves the corpus empty (questions and haystacks only)."""
    from .harness import load_questions

    tokens = dict(tokens or {})
    if tokens_path is not None:
        tokens[seq_name] = tokens_path
    questions, entries = load_questions(questions_path, haystacks_path, segment, n_segments)
    haystacks, corpus = _corpus(entries, events_path, tokens, texts, events)
    return questions, haystacks, corpus


def _corpus(entries: dict, events_path, tokens: dict, texts: bool = True, events: bool = True):
    """The engine's haystacks ({haystack_id: Haystack}) and the corpus of
    their sessions (events, and each tokenizer's tokens)."""
    from ..memo.engine import Corpus, Haystack

    haystacks = {hid: Haystack(e.ids, e.keys, e.bases) for hid, e in entries.items()}
    needed = sorted({k for e in entries.values() for k in e.keys})
    corpus = Corpus()
    for key in needed:
        corpus.add(key, [], [])
    if needed and events:
        _load_events(corpus, events_path, needed, tokens, texts or not tokens)
    return haystacks, corpus


def _load_events(corpus: Corpus, events_path, needed: list[int], tokens: dict | None = None,
                 texts: bool = True) -> None:
    """Stream the events table (written in session-key, seq order) batch by
    batch, keeping the needed sessions: the peak stays near one batch plus the
    corpus instead of the whole table twice (LongMemEval-M segments). Each
    tokens table (``tokens``: tokenizer name -> path) has the same rows in the
    same order, and holds token ids under its own vocabulary: the ``fts5``
    table's become each session's FTS5 body column (``Corpus.fts_ids``); a JS
    tokenizer's its events' ids, each followed by a separator
    (``Corpus.token_ids``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..memo.termids import id_lists, token_batches, vocab_of, with_separators
    from ..core.tables import BATCH_ROWS, take

    wanted = np.asarray(needed, dtype=np.int64)
    tokens = tokens or {}
    seqs = list(tokens)
    js_seqs = [name for name in seqs if name != FTS5_TOKENS]
    fts = FTS5_TOKENS in tokens
    columns = ["session_key", "length", "text"] if texts else ["session_key", "length"]
    batches = pq.ParquetFile(events_path).iter_batches(batch_size=BATCH_ROWS, columns=columns)
    readers = [token_batches(tokens[name]) for name in seqs]
    new_tokens = {name: [] for name in seqs}  # each table's vocabulary, batch by batch (termids.vocab_of)

    def new_pending():
        return [], [], {name: [] for name in js_seqs}, []

    def one_array(parts):
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def flush():
        texts_, lengths, js_parts, fts_parts = pending
        corpus.add(pending_key, texts_ if texts else None, lengths)
        for name, parts in js_parts.items():
            corpus.ids[(name, pending_key)] = one_array(parts)
        if fts:
            corpus.fts[pending_key] = one_array(fts_parts)

    pending_key, pending = None, new_pending()
    for batch in batches:
        keys = batch.column(0).to_numpy()
        tok_batches = [next(r, None) for r in readers]
        for name, tb in zip(seqs, tok_batches):
            if tb is None or not np.array_equal(tb.column(0).to_numpy(), keys):
                # Both tables are written in the same row order and batches (a row group
                # of events, a record batch of tokens); anything else means a stale or
                # foreign tokens file.
                raise DataError(tokens[name], None, f"not aligned with {events_path}; delete it and rerun")
            new_tokens[name].append(tb.column(2))
        rows = np.flatnonzero(np.isin(keys, wanted))
        if not len(rows):
            continue
        lengths = take(batch.column(1), rows).to_pylist()
        text_col = take(batch.column(2), rows).to_pylist() if texts else [None] * len(rows)
        by_name = dict(zip(seqs, tok_batches))
        js_ids = {name: with_separators(*id_lists(by_name[name].column(1), rows)) for name in js_seqs}
        fts_ids = id_lists(by_name[FTS5_TOKENS].column(1), rows) if fts else None
        # the selected rows, one run per session (rows are in session-key order)
        sel = keys[rows]
        cuts = [0, *(np.flatnonzero(sel[1:] != sel[:-1]) + 1).tolist(), len(rows)]
        for a, b in zip(cuts, cuts[1:]):
            key = int(sel[a])
            if key != pending_key:
                if pending_key is not None:
                    flush()
                pending_key, pending = key, new_pending()
            pending[0].extend(text_col[a:b])
            pending[1].extend(lengths[a:b])
            for name, (flat, offsets) in js_ids.items():
                pending[2][name].append(flat[offsets[a]:offsets[b]])
            if fts:
                flat, offsets = fts_ids
                pending[3].append(flat[offsets[a]:offsets[b]])
    if pending_key is not None:
        flush()
    for name, r in zip(seqs, readers):
        if next(r, None) is not None:
            raise DataError(tokens[name], None, f"has more rows than {events_path}; delete it and rerun")
    for name in seqs:
        if name == FTS5_TOKENS:
            corpus.fts_vocab = vocab_of(new_tokens[name], tokens[name])
        else:
            corpus.vocabs[name] = vocab_of(new_tokens[name], tokens[name])
    pa.default_memory_pool().release_unused()


def run_segment(variant: Variant, questions, haystacks, corpus: Corpus, log=print, label: str = "",
                release: bool = False, deep: bool = False, fts_sqlite: bool = False):
    """Rank every question of the segment; returns (rankings table, outcomes
    table), and with ``deep`` the deep-list table third.

    ``release`` frees each session's text after its last question (the corpus
    cannot be reused afterwards), which keeps LongMemEval-M segments small."""
    tables = run_segments([variant], questions, haystacks, corpus, log, label, release, fts_sqlite)[variant.name]
    return tables if deep else tables[:2]


def run_segments(variants: list[Variant], questions, haystacks, corpus: Corpus, log=print, label: str = "",
                 release: bool = False, fts_sqlite: bool = False) -> dict[str, tuple]:
    """Rank every question of the segment under each variant, question by
    question, so the variants share the work they have in common: the
    tokenized sessions and representative events (per tokenizer, in the
    corpus) and the FTS rows (one ``fts5.PhraseMatcher``). Each variant's
    lists are those it gets alone (the same Ranker, the same inputs).
    ``fts_sqlite`` asks real FTS5 tables instead (the harnesses' way: the
    tests' oracle). Returns {variant name: (rankings, outcomes, deep) tables}."""
    from ..core.progress import Progress
    from ..memo.engine import Ranker
    from ..memo.fts5 import PhraseMatcher, Unicode61
    from .harness import SegmentRows, skip_reason

    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate variant names in {names}")
    limits = [v.recipe.fts_limit for v in variants if v.recipe.backend == "fts"]
    matcher = (PhraseMatcher(Unicode61(), max(limits), corpus.fts_vocab)
               if limits and not fts_sqlite else None)
    # the variants' candidate lists of the current question, each computed once
    # (a list depends on the tokenizer, backend, check mode, phrase and min_time)
    shared: dict = {}
    rankers = [Ranker(corpus, v.recipe, matcher, shared) for v in variants]
    last_use: dict[int, int] = {}
    for n, q in enumerate(questions):
        hay = haystacks.get(q["haystack_id"])
        if hay is not None:
            for key in hay.keys:
                last_use[key] = n
    rows = {v.name: SegmentRows() for v in variants}
    progress = Progress(log, label, total=len(questions), unit="questions")
    started = time.monotonic()
    for n, q in enumerate(questions):
        hay = haystacks.get(q["haystack_id"])
        shared.clear()
        for variant, ranker in zip(variants, rankers):
            skip, miss = skip_reason(variant.skip, q, hay, variant)
            if skip is None and miss is None:
                ranked = ranker.rank(hay, q["haystack_id"], q["question"], q["question_date"])
                rows[variant.name].add(q, hay, final=ranked["final"], deep=ranked["deep"])
            else:
                rows[variant.name].add(q, hay, skip=skip, miss=miss)
        if hay is not None:
            corpus.drop([k for k in hay.keys if last_use.get(k) == n], texts=release)
        progress(n + 1)
    progress(len(questions), f", done in {time.monotonic() - started:.1f} s", force=True)
    return {name: r.tables() for name, r in rows.items()}


def rank_segment(variants: list[Variant], segment, log=print) -> dict[str, tuple]:
    """The seam's entry (``retrievers``): rank one segment (``harness.Segment``)
    under Memo variants, question by question (:func:`run_segments`), over the
    corpus of its sessions. With the tokens of every variant's tokenizer and
    (for FTS) the ``fts5`` tokens in ``segment.tokens``, no event text is read.
    Each session's text is freed after its last question."""
    wanted = {v.recipe.seq for v in variants} | ({FTS5_TOKENS} if any(v.recipe.backend == "fts" for v in variants)
                                                   else set())
    tokens = {name: path for name, path in (segment.tokens or {}).items() if name in wanted}
    texts = not wanted <= set(tokens)
    haystacks, corpus = _corpus(segment.haystacks, segment.inputs["events"], tokens, texts=texts)
    return run_segments(variants, segment.questions, haystacks, corpus, log, label=segment.label, release=True)


register(Row("fts", "memo", label="the Memo engine, SQLite FTS5 discovery",
             description="discovery: SQLite FTS5 + JS-token check (run.cjs)", module=__name__,
             inputs=("tokens", "fts_tokens")))
register(Row("index", "memo", label="the Memo engine, in-memory inverted index",
             description="discovery: the in-memory inverted index (exp6.cjs)", module=__name__, inputs=("tokens",)))
register_retriever(Retriever("memo", __name__, rank_segment))
