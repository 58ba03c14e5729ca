"""The harness rules every retriever is measured under: which questions of a
segment count, how each one is recorded, and the three tables a retrieve job
writes. The Memo engine (``retrieval``), the reference retrievers
(``reference.segment``) and a user's retriever (``python``) all go
through these, so a variant's questions, gold and denominators are its
dataset family's whatever ranks it.

A segment is a contiguous range of the source file's items, like the
original M runs (``M_START``/``M_LIMIT``): segment i of S covers items
[floor((i-1)·n/S), floor(i·n/S)). Outputs per segment:

* rankings: one row per evaluated question and rank (``question_id``, ``rank``,
  ``session_id``, plus ``q_index``);
* outcomes: one row per question of the segment, evaluated or skipped, with the
  gold rank, so the merge stage recomputes every count in question order;
* deep: the list to depth 50 with a score strictly decreasing with rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ..core.protocol import DEPTH
from ..core.tables import filter_rows, kernels, read_table, sort_by


# Parquet key-value metadata of a user retriever's outcomes tables: what its
# job checked (python.rank_segment; merged into metrics.json by the merge stage).
CHECKS_KEY = b"memobench.checks"

RANKINGS = pa.schema(
    [("question_id", pa.string()), ("rank", pa.int8()), ("session_id", pa.string()), ("q_index", pa.int32())]
)
# The deep list (to depth 50, engine.deep_list): the rankings' columns plus a
# score strictly decreasing with rank. Most harness lists have no score of their
# own (P entries have none, T's ties are broken by time), so it is 51 - rank.
# ``position``: the ranked document's haystack position where the ranker ranks
# documents (the reference retrievers, a user's retriever: each copy of a
# repeated session id is one); null where a list names session ids (the
# harnesses), whose n-th occurrence of an id then stands for its n-th position
# (official.ranked_positions).
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
        ("gold_in_pool", pa.int32()),  # haystack positions holding a gold session (random baseline)
    ]
)

# a text variant's outcomes column (retrieval/attribution.py): each question's returned items in order, each
# its text's sha256 (16 hex digits), match kind, the turn ids it is attributed to, the overlap share, and,
# where the service named one beside it, the id and whether the text matched that id's content
ATTRIBUTED = ("attributed", pa.list_(pa.struct([
    ("text_sha256", pa.string()), ("kind", pa.string()), ("turn_ids", pa.list_(pa.string())),
    ("score", pa.float64()), ("id", pa.string()), ("id_matches", pa.bool_())])))


def with_attributed(outcomes: pa.Table, items: dict) -> pa.Table:
    """A text variant's outcomes with each question's returned items (``items``: question id -> their
    records, retrieval/attribution.attributed) as :data:`ATTRIBUTED`; empty for a question not ranked."""
    name, kind = ATTRIBUTED
    column = pa.array([items.get(q, []) for q in outcomes.column("question_id").to_pylist()], kind)
    return outcomes.append_column(pa.field(name, kind), column)


def segment_bounds(n: int, segment: int, n_segments: int) -> tuple[int, int]:
    if not 1 <= segment <= n_segments:
        raise ValueError(f"segment {segment} outside 1..{n_segments}")
    return (segment - 1) * n // n_segments, segment * n // n_segments


@dataclass
class Entries:
    """One haystack's entries in order: ``ids[i]`` (session id; a repeated id
    repeats), ``keys[i]`` (the distinct session), ``dates[i]`` (the raw date
    string, None when absent) and ``bases[i]`` (its time in ms, with the
    harness fallback) describe position i."""

    ids: list[str]
    keys: list[int]
    dates: list
    bases: list[int]


@dataclass
class Segment:
    """What a retriever ranks: one segment's ``questions`` (rows of
    ``questions.parquet`` in q_index order), the ``haystacks`` they search
    ({haystack_id: Entries}), the retrieve job's named input files
    (``inputs``: questions, haystacks, events, and what the variants read
    beyond them), the tokens stage's tables ({tokenizer name: path}, for the
    Memo engine) and a ``label`` for log lines."""

    questions: list[dict]
    haystacks: dict[int, Entries]
    inputs: dict
    tokens: dict
    label: str = ""
    # {variant name: its tables' paths} of the job (a memory service's timings lie beside its logs)
    outputs: dict | None = None
    # {variant name: (timings rows, metadata)}, what a retriever timed (retrieval/timings.py)
    timings: dict = field(default_factory=dict)
    # {variant name: its turn table}, of the turn variants (retrieval/turns.py)
    turns: dict = field(default_factory=dict)


def token_tables(seq: str, tokens_path=None, fts_tokens_path=None) -> dict:
    """The ``tokens`` argument of load_segment/write_segments: tokenizer name
    -> tokens stage table, for a recipe's tokenizer and the FTS5 tokens."""
    from ..memo.tokenize import FTS5_TOKENS

    tokens = {seq: tokens_path} if tokens_path else {}
    if fts_tokens_path:
        tokens[FTS5_TOKENS] = fts_tokens_path
    return tokens


def load_questions(questions_path, haystacks_path, segment: int, n_segments: int
                   ) -> tuple[list[dict], dict[int, Entries]]:
    """The segment's questions (rows of ``questions.parquet`` in q_index order)
    and the haystacks they search ({haystack_id: Entries})."""
    qtab = sort_by(read_table(questions_path), "q_index")
    lo, hi = segment_bounds(qtab.num_rows, segment, n_segments)
    questions = qtab.slice(lo, hi - lo).to_pylist()
    hids = sorted({q["haystack_id"] for q in questions if q["haystack_id"] >= 0})
    haystacks: dict[int, Entries] = {}
    if not hids:
        return questions, haystacks
    htab = read_table(haystacks_path, columns=["haystack_id", "position", "session_id", "session_key", "date",
                                               "base_time"], where={"haystack_id": hids})
    cols = sort_by(htab, [("haystack_id", "ascending"), ("position", "ascending")]).to_pydict()
    for hid, sid, key, date, base in zip(cols["haystack_id"], cols["session_id"], cols["session_key"],
                                         cols["date"], cols["base_time"]):
        h = haystacks.get(hid)
        if h is None:
            h = haystacks[hid] = Entries([], [], [], [])
        h.ids.append(sid)
        h.keys.append(key)
        h.dates.append(date)
        h.bases.append(base)
    return questions, haystacks


def skip_reason(rule: str, q: dict, hay, variant) -> tuple[str | None, str | None]:
    """(skip reason, reason an evaluated question gets no list) under the
    harness's rule (docs/harnesses.md#skips-and-denominators; ``variant.skip``). A skipped question is
    not counted; the second reason is ``empty_seq`` (counted as a miss: run,
    run-m, exp6) or ``unrecorded`` (exp4-m/exp5-m: only in the hit-rate
    denominators). ``hay``: anything with the haystack's ``ids`` (None when
    the question has none)."""
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
    from ..memo.tokenize import SEQ  # here, not at the top: the merge job reads the official rules below

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


def run_scores(scores) -> list[float]:
    """The deep list's scores (docs/protocol.md#deep-lists-and-exports): the retriever's own when
    finite and strictly decreasing with rank, else ``51 - rank``."""
    import numpy as np

    s = np.asarray(scores, dtype=np.float64)
    if np.all(np.isfinite(s)) and np.all(np.diff(s) < 0):
        return s.tolist()
    return [float(DEPTH + 1 - r) for r in range(1, len(s) + 1)]


class SegmentRows:
    """One variant's segment tables, built question by question; every
    retriever writes them through :meth:`add`."""

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
        gold = set(q.get("gold") or ())
        if skip is None and miss is None:
            n_deep = len(deep)
            self.deep["question_id"].extend([q["question_id"]] * n_deep)
            self.deep["rank"].extend(range(1, n_deep + 1))
            self.deep["session_id"].extend(deep)
            self.deep["q_index"].extend([q["q_index"]] * n_deep)
            self.deep["score"].extend(scores if scores is not None else
                                      [float(DEPTH + 1 - r) for r in range(1, n_deep + 1)])
            self.deep["position"].extend(positions if positions is not None else [None] * n_deep)
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
        out["gold_in_pool"].append(sum(sid in gold for sid in hay.ids) if hay is not None else 0)

    def tables(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        return (pa.table(self.rank, schema=RANKINGS), pa.table(self.out, schema=OUTCOMES),
                pa.table(self.deep, schema=DEEP))


# LongMemEval's official scoring rules (evaluation.official), which an imported retrieval log is read under too


def scoring_id(session_id: str, user_has_answer: bool) -> str:
    """The id a document is scored under: ``answer`` -> ``noans`` when none of
    the session's user turns has ``has_answer`` (a session with no user turn
    has none)."""
    if "answer" in session_id and not user_has_answer:
        return session_id.replace("answer", "noans")
    return session_id


def user_target_sessions(events_path) -> set[int]:
    """Session keys with at least one user turn whose ``has_answer`` is true."""
    k = kernels()
    t = read_table(events_path, columns=["session_key", "role", "has_answer"])
    has_answer = t.column("has_answer")
    # true, not false or null
    t = filter_rows(t, k.call_function("and_kleene", [k.call_function("is_valid", [has_answer]), has_answer]))
    return {k for k, r in zip(t.column("session_key").to_pylist(), t.column("role").to_pylist()) if r == "user"}
