"""Retrievers that rank whole session documents (the reference retrievers
and a user's Python retriever): each session's document, and the segment
ranked question by question under the harness rules.

Session documents (docs/protocol.md#deep-lists-and-exports):

* LongMemEval-format datasets (``longmemeval``, and ``longmemeval_cn`` whose
  haystacks are LongMemEval-S's): a session's document is the text of its
  **user** turns (events whose ``role`` is exactly ``"user"``) joined with single
  spaces, as LongMemEval's ``run_retrieval.py`` builds it; a session with no
  user turn has the empty text.
* Every other format (LoCoMo, the embedded zh set): all its turns' texts, in
  turn order, joined with single spaces (the speaker's name is not added).

Everything is read from the normalized tables: ``events.parquet``
(``session_key``, ``seq``, ``text``, ``role`` = LongMemEval's ``role`` or
LoCoMo's ``speaker``) and ``haystacks.parquet`` (each haystack's sessions in
order). No column beyond those is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.formats import user_turns_only
from ..core.errors import DataError
from .harness import SegmentRows, run_scores, skip_reason
from ..core.progress import Progress
from ..core.protocol import DEPTH, TOP
from ..core.tables import BATCH_ROWS, exact_text, read_table


def session_documents(events_path, fmt: str, keys=None, batch_rows: int = BATCH_ROWS,
                      exact: bool = False) -> dict[int, str]:
    """``{session_key: document text}`` for the wanted sessions (all when ``keys``
    is None). Streams the events table a batch at a time; every wanted session
    gets an entry, the empty text when it has no kept turn.

    A turn text with a lone surrogate (a JSON escape of U+D800 to U+DFFF that
    is not half of a pair) is, by default, its ``text`` column: U+FFFD for each
    lone surrogate, as SQLite FTS5 (UTF-8 only) and the MiniLM tokenizer must
    take it, and the same tokens for bm25s (neither is a word character).
    ``exact=True`` gives the text as the file holds it (``tables.exact_text``):
    LongMemEval's own BM25 reads the file with ``json.load``, which keeps lone
    surrogates."""
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


def iter_session_documents(events_path, fmt: str, batch_rows: int = BATCH_ROWS):
    """``(session_key, document)`` for every session of the events table, in
    table order, streaming (LongMemEval-M's table does not fit as one dict of
    texts comfortably). The table holds each session's events together, in
    seq order (normalize writes a session at once); anything else is an error."""
    only_user = user_turns_only(fmt)
    key, parts, seen = None, [], set()
    f = pq.ParquetFile(events_path)
    for batch in f.iter_batches(batch_size=batch_rows, columns=["session_key", "text", "role"]):
        keys = batch.column(0).to_pylist()
        texts = batch.column(1).to_pylist()
        keep = (pc.fill_null(pc.equal(batch.column(2), "user"), False).to_pylist() if only_user
                else [True] * len(keys))
        for k, text, ok in zip(keys, texts, keep):
            if k != key:
                if key is not None:
                    yield key, " ".join(parts)
                if k in seen:
                    raise DataError(events_path, f"session_key {k}", "events of one session are not together")
                seen.add(k)
                key, parts = k, []
            if ok:
                parts.append(text)
    if key is not None:
        yield key, " ".join(parts)


@dataclass(frozen=True)
class HaystackDocs:
    """One haystack in order: ``session_ids[i]``, ``keys[i]`` (session_key) and
    ``docs[i]`` (document text) describe position i; duplicates are kept."""

    haystack_id: int
    session_ids: list[str]
    keys: list[int]
    docs: list[str]


def haystack_documents(haystacks_path, events_path, fmt: str, haystack_ids=None) -> dict[int, HaystackDocs]:
    """Each wanted haystack (all when ``haystack_ids`` is None) with its
    documents in haystack order."""
    where = None if haystack_ids is None else {"haystack_id": sorted(set(haystack_ids))}
    t = read_table(haystacks_path, columns=["haystack_id", "position", "session_key", "session_id"], where=where)
    t = t.sort_by([("haystack_id", "ascending"), ("position", "ascending")]).to_pydict()
    texts = session_documents(events_path, fmt, keys=set(t["session_key"])) if t["session_key"] else {}
    out: dict[int, HaystackDocs] = {}
    for hid, sid, key in zip(t["haystack_id"], t["session_id"], t["session_key"]):
        h = out.get(hid)
        if h is None:
            h = out[hid] = HaystackDocs(hid, [], [], [])
        h.session_ids.append(sid)
        h.keys.append(key)
        h.docs.append(texts[key])
    return out


def segment_documents(segment, modes) -> dict:
    """{documents rule: {session key: document}} for every session of a
    segment's haystacks (``harness.Segment``), under each rule in ``modes``;
    a mode ``(rule, True)`` gives the exact texts (:func:`session_documents`)."""
    keys = sorted({k for h in segment.haystacks.values() for k in h.keys})
    out = {}
    for mode in sorted(set(modes), key=repr):
        rule, exact = mode if isinstance(mode, tuple) else (mode, False)
        out[mode] = session_documents(segment.inputs["events"], rule, keys=keys, exact=exact) if keys else {}
    return out


def _mode(variant, exact) -> str | tuple:
    """The documents a variant reads: its rule, and whether the texts are exact."""
    return (variant.recipe.documents, True) if variant.name in exact else variant.recipe.documents


def rank_by_documents(variants, segment, rankers: dict, log=print, docs: dict | None = None,
                      exact=frozenset(), timed=None) -> dict:
    """Rank one segment (``harness.Segment``) under document retrievers:
    ``rankers[variant name](q, hay, documents)`` ranks question row ``q`` over
    its haystack ``hay`` (``harness.Entries``) whose documents, in haystack
    order, are ``documents`` (the texts under the variant's ``documents``
    rule), and returns ``(positions, scores)``: haystack positions best first,
    and their scores or None. A turn variant's ranker gets the haystack's
    turns (``turns.HaystackTurns``) and returns their positions, the whole
    list (kept in ``segment.turns``); its sessions are ranked at their best
    turn. The skip rule is the variant's family's (``harness.skip_reason``);
    a forced miss of the Memo pipeline (``empty_seq``) is ranked, since that
    limit is the Memo tokenizer's, not the question's. Lists are cut to depth
    50 (``deep``) and 10 (``rankings``); the deep score is the retriever's own
    where it strictly decreases, else ``51 - rank`` (``harness.run_scores``).
    ``docs``: :func:`segment_documents`' result, when the caller has it.
    ``exact``: the names of the variants that read the exact texts.
    Each ranker call is timed into ``segment.timings`` (``timings.CallTimes``),
    for the variants named in ``timed`` (default: all; a ranker that times
    its own calls is left out).
    Returns {variant name: (rankings, outcomes, deep) tables}."""
    import time

    from .timings import CallTimes
    from .turns import TurnRows, sessions_by_best_turn

    questions, haystacks = segment.questions, segment.haystacks
    times = {v.name: CallTimes() for v in variants if timed is None or v.name in timed}
    by_session = [v for v in variants if v.grain == "session"]
    if docs is None:
        docs = segment_documents(segment, {_mode(v, exact) for v in by_session})
    turn_docs = segment_turns(segment, {_mode(v, exact) for v in variants if v.grain == "turn"})
    rows = {v.name: SegmentRows() for v in variants}
    turn_rows = {v.name: TurnRows() for v in variants if v.grain == "turn"}
    progress = Progress(log, segment.label, total=len(questions), unit="questions")
    started = time.monotonic()
    for n, q in enumerate(questions):
        hay = haystacks.get(q["haystack_id"])
        for v in variants:
            skip, _ = skip_reason(v.skip, q, hay, v)  # a forced miss is ranked (docstring)
            if skip is not None:
                rows[v.name].add(q, hay, skip=skip)
                continue
            positions, scores = [], None
            if hay is not None and hay.ids:
                if v.grain == "turn":
                    documents = turns = turn_docs[_mode(v, exact)](q["haystack_id"], hay)
                else:
                    mode = docs[_mode(v, exact)]
                    documents = [mode[k] for k in hay.keys]
                called = time.perf_counter()
                positions, scores = rankers[v.name](q, hay, documents)
                if v.name in times:
                    times[v.name].add(q["haystack_id"], q["question_id"], time.perf_counter() - called)
                if v.grain == "turn":
                    turn_rows[v.name].add(q, hay.ids, turns, positions, scores)
                    positions, scores = sessions_by_best_turn(positions, turns, scores)
            positions = positions[:DEPTH]
            ids = [hay.ids[p] for p in positions]
            rows[v.name].add(q, hay, final=ids[:TOP], deep=ids,
                             scores=None if scores is None else run_scores(scores[:DEPTH]),
                             positions=positions)
        progress(n + 1)
    progress(len(questions), f", done in {time.monotonic() - started:.1f} s", force=True)
    for name, t in times.items():
        segment.timings[name] = (t.rows, {})
    for name, t in turn_rows.items():
        segment.turns[name] = t.table()
    return {name: r.tables() for name, r in rows.items()}


def segment_turns(segment, modes) -> dict:
    """{documents mode: turns(haystack_id, hay) -> turns.HaystackTurns} for a
    segment's turn variants (each haystack's turns built once per mode)."""
    from .turns import haystack_turns, session_turns

    keys = sorted({k for h in segment.haystacks.values() for k in h.keys})
    out = {}
    for mode in modes:
        rule, exact = mode if isinstance(mode, tuple) else (mode, False)
        by_key = session_turns(segment.inputs["events"], rule, keys, exact=exact) if keys else {}
        built: dict[int, object] = {}

        def turns(hid, hay, by_key=by_key, built=built):
            if hid not in built:
                built[hid] = haystack_turns(hay.ids, hay.keys, by_key)
            return built[hid]

        out[mode] = turns
    return out
