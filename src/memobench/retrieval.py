"""Run one variant over one segment of a normalized dataset.

A segment is a contiguous range of the source file's items, like the
original M runs (``M_START``/``M_LIMIT``): segment i of S covers items
[floor((i-1)·n/S), floor(i·n/S)). Outputs per segment:

* rankings: one row per evaluated question and rank (``question_id``, ``rank``,
  ``session_id``, plus ``q_index``);
* outcomes: one row per question of the segment, evaluated or skipped, with the
  gold rank, so the merge stage recomputes every count in question order.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .engine import Corpus, Haystack, Ranker
from .errors import DataError
from .fts5 import FTS5_TOKENS, PhraseMatcher, Unicode61
from .progress import Progress
from .tables import read_table, write_table
from .tokenize import SEQ
from .variants import Variant

RANKINGS = pa.schema(
    [("question_id", pa.string()), ("rank", pa.int8()), ("session_id", pa.string()), ("q_index", pa.int32())]
)
# The deep list (to depth 50, engine.deep_list): the rankings' columns plus a
# score strictly decreasing with rank. Most harness lists have no score of their
# own (P entries have none, T's ties are broken by time), so it is 51 - rank.
# ``position``: the ranked document's haystack position where the ranker ranks
# documents (the reference retrievers: each copy of a repeated session id is
# one); null where a list names session ids (the harnesses), whose n-th
# occurrence of an id then stands for its n-th position (official.ranked_positions).
DEEP = pa.schema(
    [("question_id", pa.string()), ("rank", pa.int8()), ("session_id", pa.string()), ("q_index", pa.int32()),
     ("score", pa.float64()), ("position", pa.int32())]
)
OUTCOMES = pa.schema(
    [
        ("q_index", pa.int32()),
        ("question_id", pa.string()),
        ("question_type", pa.string()),
        ("status", pa.string()),  # evaluated | skipped
        ("reason", pa.string()),  # skip reason, or why an evaluated question is a forced miss
        ("in_types", pa.bool_()),  # counted in the per-type table
        ("gold_rank", pa.int8()),  # 1..10, 0 = miss
        ("pool_size", pa.int32()),  # sessions in the haystack (random baseline)
    ]
)


def segment_bounds(n: int, segment: int, n_segments: int) -> tuple[int, int]:
    if not 1 <= segment <= n_segments:
        raise ValueError(f"segment {segment} outside 1..{n_segments}")
    return (segment - 1) * n // n_segments, segment * n // n_segments


def load_segment(questions_path, haystacks_path, events_path, segment: int, n_segments: int,
                 tokens_path=None, seq_name: str | None = None, texts: bool = True, tokens: dict | None = None,
                 events: bool = True):
    """``tokens`` (tokenizer name -> tokens table) loads several tokenizers'
    tokens at once (one job ranking variants of several tokenizers);
    ``tokens_path``/``seq_name`` is the one-tokenizer form. ``events=False``
    leaves the corpus empty (questions and haystacks only)."""
    tokens = dict(tokens or {})
    if tokens_path is not None:
        tokens[seq_name] = tokens_path
    qtab = read_table(questions_path)
    qtab = qtab.sort_by("q_index")
    lo, hi = segment_bounds(qtab.num_rows, segment, n_segments)
    questions = qtab.slice(lo, hi - lo).to_pylist()
    hids = sorted({q["haystack_id"] for q in questions if q["haystack_id"] >= 0})
    htab = read_table(haystacks_path, where={"haystack_id": hids} if hids else None)
    if not hids:
        htab = htab.slice(0, 0)
    htab = htab.sort_by([("haystack_id", "ascending"), ("position", "ascending")])
    haystacks: dict[int, Haystack] = {}
    cols = htab.to_pydict()
    by_hid: dict[int, tuple[list, list, list]] = {}
    for hid, sid, key, base in zip(cols["haystack_id"], cols["session_id"], cols["session_key"], cols["base_time"]):
        ids, keys, bases = by_hid.setdefault(hid, ([], [], []))
        ids.append(sid)
        keys.append(key)
        bases.append(base)
    for hid, (ids, keys, bases) in by_hid.items():
        haystacks[hid] = Haystack(ids, keys, bases)
    needed = sorted(set(cols["session_key"]))
    del cols, htab
    corpus = Corpus()
    for key in needed:
        corpus.add(key, [], [])
    if needed and events:
        _load_events(corpus, events_path, needed, tokens, texts or not tokens)
    return questions, haystacks, corpus


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
    from .termids import id_lists, read_vocab, with_separators

    wanted = np.asarray(needed, dtype=np.int64)
    tokens = tokens or {}
    seqs = list(tokens)
    js_seqs = [name for name in seqs if name != FTS5_TOKENS]
    fts = FTS5_TOKENS in tokens
    columns = ["session_key", "length", "text"] if texts else ["session_key", "length"]
    batches = pq.ParquetFile(events_path).iter_batches(batch_size=65536, columns=columns)
    readers = [pq.ParquetFile(tokens[name]).iter_batches(batch_size=65536, columns=["session_key", "ids"])
               for name in seqs]
    for name in seqs:
        if name == FTS5_TOKENS:
            corpus.fts_vocab = read_vocab(tokens[name])
        else:
            corpus.vocabs[name] = read_vocab(tokens[name])

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
                # Both tables are written in the same row order and row groups; anything
                # else means a stale or foreign tokens file.
                raise DataError(tokens[name], None, f"not aligned with {events_path}; delete it and rerun")
        rows = np.flatnonzero(np.isin(keys, wanted))
        if not len(rows):
            continue
        lengths = batch.column(1).take(rows).to_pylist()
        text_col = batch.column(2).take(rows).to_pylist() if texts else [None] * len(rows)
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
    pa.default_memory_pool().release_unused()


def _skip_reason(rule: str, q: dict, hay: Haystack | None, variant: Variant) -> tuple[str | None, str | None]:
    """(skip reason, reason an evaluated question gets no list) under the
    harness's rule (HARNESSES.md 6.0). A skipped question is not counted; the
    second reason is ``empty_seq`` (counted as a miss: run, run-m, exp6) or
    ``unrecorded`` (exp4-m/exp5-m: only in the hit-rate denominators)."""
    if q.get("parse_error"):
        return "unparseable", None
    if rule == "cn" and q["haystack_id"] < 0:
        return "unpaired", None
    if rule == "zh":
        return None, None
    if not q["gold"]:
        return "no_gold", None
    if hay is None or not hay.ids:
        return "no_sessions", None
    recipe = variant.recipe
    if rule in ("run", "expm", "exp", "exp3") and not SEQ[recipe.seq](q["question"]):
        if rule == "run":
            return None, "empty_seq"
        if rule == "expm":
            return None, "unrecorded"
        return "empty_seq", None
    if rule == "locomo" and not recipe.window_tokens(q["question"]):
        return "empty_window", None
    if rule == "exp" and len(recipe.window_tokens(q["question"])) <= 1:
        return "short_window", None
    return None, None


# Its public name: every kind of variant (imported runs too) counts its questions by it.
skip_reason = _skip_reason


class SegmentRows:
    """One variant's segment tables, built question by question; every ranker
    (the engine, the reference retrievers) writes them through :meth:`add`."""

    def __init__(self):
        self.rank = {n: [] for n in RANKINGS.names}
        self.out = {n: [] for n in OUTCOMES.names}
        self.deep = {n: [] for n in DEEP.names}

    def add(self, q: dict, hay, skip: str | None = None, miss: str | None = None, final=(), deep=(),
            scores=None, positions=None) -> None:
        """A question: skipped (``skip``), evaluated without a list (``miss``),
        or ranked (``final``: the top 10; ``deep``: to depth 50 with ``scores``,
        51 - rank when None, and the haystack ``positions`` when the ranker has them)."""
        gold_rank = 0
        if skip is None and miss is None:
            n_deep = len(deep)
            self.deep["question_id"].extend([q["question_id"]] * n_deep)
            self.deep["rank"].extend(range(1, n_deep + 1))
            self.deep["session_id"].extend(deep)
            self.deep["q_index"].extend([q["q_index"]] * n_deep)
            self.deep["score"].extend(scores if scores is not None else
                                      [float(51 - r) for r in range(1, n_deep + 1)])
            self.deep["position"].extend(positions if positions is not None else [None] * n_deep)
            gold = set(q["gold"])
            for r, sid in enumerate(final, 1):
                self.rank["question_id"].append(q["question_id"])
                self.rank["rank"].append(r)
                self.rank["session_id"].append(sid)
                self.rank["q_index"].append(q["q_index"])
                if not gold_rank and sid in gold:
                    gold_rank = r
        out = self.out
        out["q_index"].append(q["q_index"])
        out["question_id"].append(q["question_id"])
        out["question_type"].append(q["question_type"])
        out["status"].append("skipped" if skip else "unrecorded" if miss == "unrecorded" else "evaluated")
        out["reason"].append(skip or miss)
        out["in_types"].append(skip is None and miss is None)
        out["gold_rank"].append(gold_rank)
        out["pool_size"].append(len(hay.ids) if hay is not None else 0)

    def tables(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        return (pa.table(self.rank, schema=RANKINGS), pa.table(self.out, schema=OUTCOMES),
                pa.table(self.deep, schema=DEEP))


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
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate variant names in {names}")
    limits = [v.recipe.fts_limit for v in variants if v.recipe.backend == "fts"]
    matcher = (PhraseMatcher(Unicode61(), max(limits), corpus.fts_vocab)
               if limits and not fts_sqlite else None)
    rankers = [Ranker(corpus, v.recipe, matcher) for v in variants]
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
        for variant, ranker in zip(variants, rankers):
            skip, miss = _skip_reason(variant.skip, q, hay, variant)
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


def write_segment(variant: Variant, questions_path, haystacks_path, events_path, segment: int,
                  n_segments: int, rankings_out, outcomes_out, log=print, tokens_path=None,
                  fts_tokens_path=None, deep_out=None, metadata: dict | None = None, embeddings_path=None) -> None:
    outs = {variant.name: {"rankings": rankings_out, "outcomes": outcomes_out, "deep": deep_out}}
    write_segments([variant], questions_path, haystacks_path, events_path, segment, n_segments, outs, log=log,
                   tokens=token_tables(variant.recipe.seq, tokens_path, fts_tokens_path), metadata=metadata,
                   embeddings_path=embeddings_path)


def token_tables(seq: str, tokens_path=None, fts_tokens_path=None) -> dict:
    """The ``tokens`` argument of load_segment/write_segments: tokenizer name
    -> tokens stage table, for a recipe's tokenizer and the FTS5 tokens."""
    tokens = {seq: tokens_path} if tokens_path else {}
    if fts_tokens_path:
        tokens[FTS5_TOKENS] = fts_tokens_path
    return tokens


def write_segments(variants: list[Variant], questions_path, haystacks_path, events_path, segment: int,
                   n_segments: int, outs: dict, log=print, tokens: dict | None = None,
                   metadata: dict | None = None, variant_metadata: dict[str, dict] | None = None,
                   embeddings_path=None) -> None:
    """Rank one segment under several variants in one process (``run_segments``)
    and write each variant's tables: ``outs`` maps a variant name to its
    ``rankings``, ``outcomes`` and (optional) ``deep`` paths. ``tokens`` maps
    tokenizer names to the tokens stage's tables; with the tokens of every
    variant's tokenizer and (for FTS) the ``fts5`` tokens, no event text is read.
    ``metadata`` goes into each outcomes table's Parquet key-value metadata
    (the retrieve job's provenance), with ``variant_metadata[name]`` added
    for that variant. Reference retrievers (``recipe.reference``) are ranked by
    ``baselines.segment.rank_segment`` over the same questions;
    ``embeddings_path`` is the embeddings stage's table (``minilm``)."""
    memo = [v for v in variants if not v.recipe.reference]
    reference = [v for v in variants if v.recipe.reference]
    tokens = tokens or {}
    wanted = {v.recipe.seq for v in memo} | ({FTS5_TOKENS} if any(v.recipe.backend == "fts" for v in memo) else set())
    tokens = {name: path for name, path in tokens.items() if name in wanted}
    texts = not wanted <= set(tokens)
    questions, haystacks, corpus = load_segment(questions_path, haystacks_path, events_path, segment, n_segments,
                                                texts=texts, tokens=tokens, events=bool(memo))
    label = variants[0].name if len(variants) == 1 else f"{len(variants)} variants"
    log(f"{label} segment {segment}/{n_segments}: {len(questions)} questions, {len(corpus)} distinct sessions")
    tables = {}
    if reference:
        from .baselines.segment import rank_segment

        tables.update(rank_segment(reference, questions, haystacks, events_path, embeddings_path, log,
                                   label=f"{label} segment {segment}/{n_segments}:"))
    if memo:
        tables.update(run_segments(memo, questions, haystacks, corpus, log,
                                   label=f"{label} segment {segment}/{n_segments}:", release=True))
    for v in variants:
        out = outs[v.name]
        rankings, outcomes, deep = tables[v.name]
        meta = {**(metadata or {}), **((variant_metadata or {}).get(v.name) or {})}
        write_table(out["outcomes"], outcomes.replace_schema_metadata(meta) if meta else outcomes)
        if out.get("deep") is not None:
            write_table(out["deep"], deep)
        write_table(out["rankings"], rankings)
