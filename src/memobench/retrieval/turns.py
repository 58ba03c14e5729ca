"""A question's turns as documents, for a turn variant (``grain: turn``;
docs/protocol.md#turn-level).

* Which turns: those a session document keeps (``formats.user_turns_only``):
  a LongMemEval-format dataset's **user** turns, every turn elsewhere; one
  document each, its text alone, in haystack order then turn order (a
  session id repeated in a haystack gives its turns once per copy, as
  LongMemEval's ``run_retrieval.py`` builds its turn corpus).
* A turn's index is its 0-based place among **all** its session's turns
  (assistant turns counted), the events table's ``seq``.
* A turn's id: ``{session_id}_{index + 1}`` (LongMemEval's corpus id before
  its ``answer``/``noans`` rule, :func:`turn_scoring_id`, which scoring and a
  LongMemEval turn log read), LoCoMo's ``dia_id`` (``D1:3``) where the turn
  has one.

The turn table (``TURNS``) holds a turn variant's whole ranked list, not 50:
LongMemEval's session scores from a turn ranking read turns until k
distinct sessions are found.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.tables import BATCH_ROWS, exact_text, is_in, kernels
from ..core.formats import user_turns_only

TURNS = pa.schema(
    [
        ("q_index", pa.int32()),
        ("question_id", pa.string()),
        ("rank", pa.int32()),  # 1-based, over the whole list
        ("position", pa.int32()),  # the turn's session's haystack position
        ("session_id", pa.string()),
        ("turn", pa.int32()),  # the turn's 0-based index in its session (every turn counted)
        ("turn_id", pa.string()),
        ("score", pa.float64()),  # the retriever's own score, null where it gives none
    ]
)


@dataclass(frozen=True)
class SessionTurns:
    """One session's document turns: each one's index (``seq``), text, role, LoCoMo ``dia_id`` and
    LongMemEval ``has_answer``."""

    seqs: list[int]
    texts: list[str]
    roles: list
    dia_ids: list
    has_answer: list


@dataclass(frozen=True)
class HaystackTurns:
    """A haystack's turn documents in order: turn ``j`` is ``texts[j]``, the
    ``seqs[j]``-th turn of the session at haystack ``positions[j]``."""

    positions: list[int]
    seqs: list[int]
    texts: list[str]
    ids: list[str]
    roles: list
    has_answer: list


def turn_id(session_id: str, seq: int, dia_id=None) -> str:
    return dia_id if dia_id else f"{session_id}_{seq + 1}"


def turn_scoring_id(session_id: str, seq: int, has_answer) -> str:
    """LongMemEval's id of a user turn (``seq``: its 0-based index among all
    its session's turns): ``answer`` made ``noans`` in an answer session's
    turn without has_answer (docs/protocol.md#turn-level)."""
    tid = f"{session_id}_{seq + 1}"
    if "answer" in session_id and not has_answer:
        return tid.replace("answer", "noans")
    return tid


def session_turns(events_path, fmt: str, keys, exact: bool = False, texts: bool = True,
                  batch_rows: int = BATCH_ROWS) -> dict[int, SessionTurns]:
    """``{session_key: SessionTurns}`` of the wanted sessions (every one gets
    an entry), streaming the events table; ``exact``: the texts as the file
    holds them (a lone surrogate kept: documents.session_documents);
    ``texts=False``: empty texts (scoring reads ids only)."""
    only_user = user_turns_only(fmt)
    keys = set(keys)
    rows: dict[int, list[tuple]] = {k: [] for k in keys}
    columns = ["session_key", "seq", "role", "dia_id", "has_answer", *(["text"] if texts else []),
               *(["text_exact"] if texts and exact else [])]
    for batch in pq.ParquetFile(events_path).iter_batches(batch_size=batch_rows, columns=columns):
        mask = is_in(batch.column(0), keys)
        if only_user:  # pc.and_(mask, pc.fill_null(pc.equal(role, "user"), False)), by its kernels
            k = kernels()
            user = k.call_function("equal", [batch.column(2), pa.scalar("user")])
            mask = k.call_function("and", [mask, k.call_function("coalesce", [user, pa.scalar(False)])])
        b = batch.filter(mask)
        if not b.num_rows:
            continue
        if not texts:
            words = [""] * b.num_rows
        else:
            words = b.column(5).to_pylist()
            if exact:
                words = list(map(exact_text, words, b.column(6).to_pylist()))
        for key, seq, text, role, dia, has in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), words,
                                                  b.column(2).to_pylist(), b.column(3).to_pylist(),
                                                  b.column(4).to_pylist()):
            rows[key].append((seq, text, role, dia, has))
    out = {}
    for key, turns in rows.items():
        turns.sort(key=lambda t: t[0])  # seq order (as normalize writes a session, so usually a no-op)
        out[key] = SessionTurns(*(list(c) for c in zip(*turns))) if turns else SessionTurns([], [], [], [], [])
    return out


def haystack_turns(session_ids: list[str], keys: list[int], by_key: dict[int, SessionTurns]) -> HaystackTurns:
    """A haystack's turn documents (its sessions' ``session_turns``, in haystack order)."""
    positions, seqs, texts, ids, roles, has = [], [], [], [], [], []
    for p, (sid, key) in enumerate(zip(session_ids, keys)):
        s = by_key[key]
        positions += [p] * len(s.seqs)
        seqs += s.seqs
        texts += s.texts
        ids += [turn_id(sid, q, d) for q, d in zip(s.seqs, s.dia_ids)]
        roles += s.roles
        has += s.has_answer
    return HaystackTurns(positions, seqs, texts, ids, roles, has)


def sessions_by_best_turn(turn_positions: list[int], haystack: HaystackTurns, scores=None):
    """The session ranking a turn ranking gives (each haystack position at
    its best-ranked turn, in that order): (positions, their best turns' scores or None)."""
    seen: set[int] = set()
    positions, best = [], []
    for j, t in enumerate(turn_positions):
        p = haystack.positions[t]
        if p not in seen:
            seen.add(p)
            positions.append(p)
            if scores is not None:
                best.append(scores[j])
    return positions, (best if scores is not None else None)


class TurnRows:
    """A turn variant's turn table, built question by question."""

    def __init__(self):
        self.cols = {n: [] for n in TURNS.names}

    def add(self, q: dict, session_ids: list[str], haystack: HaystackTurns, ranked: list[int], scores=None):
        """A question's list: ``ranked`` turns of ``haystack`` (indices), best first."""
        self.append(q, session_ids, [haystack.positions[t] for t in ranked], [haystack.seqs[t] for t in ranked],
                    [haystack.ids[t] for t in ranked], scores)

    def append(self, q: dict, session_ids: list[str], positions: list[int], seqs: list[int], turn_ids: list[str],
               scores=None):
        """A question's list given turn by turn: each one's session position, index and id, best first."""
        n = len(positions)
        c = self.cols
        c["q_index"] += [q["q_index"]] * n
        c["question_id"] += [q["question_id"]] * n
        c["rank"] += range(1, n + 1)
        c["position"] += positions
        c["session_id"] += [session_ids[p] for p in positions]
        c["turn"] += seqs
        c["turn_id"] += turn_ids
        c["score"] += [None] * n if scores is None else [float(s) for s in scores]

    def table(self) -> pa.Table:
        return pa.table(self.cols, schema=TURNS)


def empty_turns() -> pa.Table:
    """The turn table of a session variant."""
    return TURNS.empty_table()
