"""A turn variant's metrics at both grains (docs/protocol.md#turn-level),
from its turn table (retrieval/turns.py) and the normalized tables.

LongMemEval-format datasets, as LongMemEval's ``run_retrieval.py`` scores a
turn ranking (``--granularity turn``):

* the corpus: the question's user turns in haystack order (every copy of a
  repeated session), each under its scoring id ``{session_id}_{i+1}``, with
  every ``answer`` replaced by ``noans`` for a user turn without
  ``has_answer`` in a session whose id contains ``answer``;
* gold: the distinct scoring ids containing ``answer``;
* turn-level recall_any@k, recall_all@k and ndcg_any@k: the session rules
  (official.py) applied to the turn corpus;
* session level from the turn ranking ("turn2session"): every id less its
  last ``_suffix`` (the ``noans`` half of a session stays apart), and each k
  grown until the first k' ranked turns hold k distinct such ids (or k'
  passes the corpus size), the three metrics then taken at k';
* the same exclusions and both averaging conventions as the session figures.

Beside them, the harness's measures over turns: hit@k (k of the harness)
and the reciprocal rank of the first gold turn in the top 10, averaged over
the questions the run_retrieval convention keeps that have turn gold (a
question without one is a counted skip).

LoCoMo: gold is the question's evidence turns (the turns whose ``dia_id``
its ``evidence`` lists; evidence naming no turn is dropped, as the harness
drops it, and a question left with none is a counted ``no_evidence`` skip).
Per question, at each k: evidence-turn ``recall@k`` (the share of its
evidence turns among the first k ranked turns), ``recall_any@k`` and
``recall_all@k``; and the harness's measures over turns; averaged over every
category and over categories 1-4, as the session figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.errors import DataError
from ..core.formats import FORMATS, LME_FORMATS
from ..core.progress import Progress
from ..core.protocol import TOP
from ..core.tables import BATCH_ROWS, is_in, read_table
from .measures import HITS, MEASURES
from ..retrieval.turns import turn_scoring_id  # the rule an imported turn log is read under too
from .official import (CONVENTIONS, KS, LOCOMO_CATEGORIES_1_4, average, exclusion, metric_names,
                       metrics_from_hits, read_haystacks, read_questions, with_haystacks)

GRAIN_RULES = "LongMemEval official at turn level, run_retrieval.py --granularity turn (docs/protocol.md#turn-level)"


def grown_ks(reach: list[int], ks, n_corpus: int) -> list[int]:
    """turn2session's k' of each k: the fewest first ranked turns holding k distinct session ids
    (``reach[d]``: the first prefix length holding d of them), from k up; n_corpus + 1 when the
    list never holds k (and k itself when k is past the corpus), as LongMemEval's loop ends."""
    return [k if k > n_corpus else max(reach[k], k) if k < len(reach) else n_corpus + 1 for k in ks]


def harness_over_turns(ranked_ids: list[str], gold) -> dict[str, float]:
    """hit@k of the harness's k and the reciprocal rank within the top 10, of the first gold turn."""
    return _harness(next((r for r, t in enumerate(ranked_ids[:TOP], 1) if t in gold), 0))


def _harness(first: int) -> dict[str, float]:
    """harness_over_turns of a list whose first gold turn is at rank ``first`` (1-based; 0: none in the top 10)."""
    out = {h: (1.0 if 1 <= first <= MEASURES[h].cutoff else 0.0) for h in HITS}
    out["mrr"] = 1.0 / first if first else 0.0
    return out


def gold_turns(fmt: str, question: dict, session_ids: list[str], turns) -> list[str]:
    """A question's gold turns (turn ids, in corpus order; ``turns``: its
    ``turns.HaystackTurns``): LongMemEval's, the user turns whose scoring id
    holds ``answer`` (those with has_answer in a session whose id holds it);
    LoCoMo's, the turns its evidence names (evidence naming no
    turn dropped, as the harness drops it)."""
    if fmt in LME_FORMATS:
        return [t for t, p, s, h in zip(turns.ids, turns.positions, turns.seqs, turns.has_answer)
                if "answer" in turn_scoring_id(session_ids[p], s, h is True)]
    evidence = set(question["evidence"] or ())
    return [t for t in turns.ids if t in evidence]


@dataclass(frozen=True)
class UserTurns:
    """The user turns of a LongMemEval-format dataset's sessions, as arrays
    in (session key, seq) order: what its turn scoring reads (ids and
    has_answer, no text). A session's turns are ``seqs[start[key]:][:count[key]]``;
    ``codes`` (``key * stride + seq``, ascending) finds a turn by its key and seq."""

    start: np.ndarray
    count: np.ndarray
    seqs: np.ndarray
    has: np.ndarray  # has_answer is true
    codes: np.ndarray
    stride: int

    def find(self, codes: np.ndarray, table: bool | None = None) -> np.ndarray:
        """Each of ``codes``' place in ``self.codes``, -1 where absent: looked up in a table by code
        (``table``; by default where that table stays within 16 times the turns, as on a pool of
        short sessions), else searched."""
        n = len(self.codes)
        if not n:
            return np.full(len(codes), -1, np.int64)
        top = int(self.codes[-1]) + 1
        if table or (table is None and top <= 16 * n + 65536):
            places = np.full(top + 1, -1, np.int64)  # places[top]: every code past the last
            places[self.codes] = np.arange(n)
            return places[np.where((codes >= 0) & (codes < top), codes, top)]
        found = np.minimum(_search(self.codes, codes), n - 1)
        return np.where(self.codes[found] == codes, found, -1)


def user_turns(events_path, keys) -> UserTurns:
    """:class:`UserTurns` of the sessions ``keys`` (the events table streamed; every key gets a count)."""
    keys = set(keys)
    parts = []
    for batch in pq.ParquetFile(events_path).iter_batches(batch_size=BATCH_ROWS,
                                                         columns=["session_key", "seq", "role", "has_answer"]):
        b = batch.filter(pc.and_(is_in(batch.column(0), keys), pc.fill_null(pc.equal(batch.column(2), "user"), False)))
        if b.num_rows:
            parts.append((b.column(0).to_numpy().astype(np.int64), b.column(1).to_numpy().astype(np.int64),
                          pc.fill_null(b.column(3), False).to_numpy(zero_copy_only=False)))
    key, seq, has = ((np.concatenate(c) for c in zip(*parts)) if parts
                     else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)))
    stride = int(seq.max()) + 1 if len(seq) else 1
    codes = key * stride + seq
    if len(codes) > 1 and not (np.diff(codes) > 0).all():  # in order as normalize writes them; else sorted
        order = np.lexsort((seq, key))
        key, seq, has, codes = key[order], seq[order], has[order], codes[order]
    count = np.bincount(key, minlength=max(keys, default=-1) + 1)
    return UserTurns(np.cumsum(count) - count, count, seq, has.astype(bool), codes, stride)


def load(fmt: str, questions_path, haystacks_path, events_path, dates: bool = False, by_session: bool = False
         ) -> tuple[list[dict], dict, object]:
    """(questions, their haystacks, their turns): what turn scoring reads (``dates``: the haystacks'
    dates too). The turns: a LongMemEval-format dataset's :class:`UserTurns` (what lme_turn_rows
    reads), else (or with ``by_session``) ``{session_key: its document turns}`` (turns.session_turns)."""
    from ..retrieval.turns import session_turns

    questions = read_questions(questions_path)
    hids = {q["haystack_id"] for q in questions if q["haystack_id"] >= 0}
    haystacks = read_haystacks(haystacks_path, hids, dates=dates)
    keys = {k for h in haystacks.values() for k in h["keys"]}
    if fmt in LME_FORMATS and not by_session:
        return questions, haystacks, user_turns(events_path, keys)
    return questions, haystacks, session_turns(events_path, fmt, keys, texts=False) if keys else {}


def _corpus(hay: dict, turns_by_key, listed, path, question_id: str):
    """A question's turn corpus (turns.HaystackTurns) and its turn list as corpus indices, checked
    (LoCoMo's: every turn is a document turn)."""
    from ..retrieval.turns import haystack_turns

    corpus = haystack_turns(hay["ids"], hay["keys"], turns_by_key)
    index = {(p, s): j for j, (p, s) in enumerate(zip(corpus.positions, corpus.seqs))}
    positions = []
    for r, key in enumerate(listed, 1):
        j = index.get(key)
        if j is None:
            raise DataError(path, f"question {question_id}",
                            f"rank {r}: session position {key[0]} has no document turn {key[1]}")
        positions.append(j)
    if len(set(positions)) != len(positions):
        raise DataError(path, f"question {question_id}", "a turn is ranked twice")
    return corpus, positions


@dataclass(frozen=True)
class TurnLists:
    """A turn table's lists, best first, as arrays sorted by (q_index, rank):
    list ``i`` is question ``qis[i]``'s, rows ``bounds[i]:bounds[i + 1]`` of
    ``positions`` (its turns' session positions) and ``turns`` (their turn indices)."""

    qis: np.ndarray
    bounds: np.ndarray
    positions: np.ndarray
    turns: np.ndarray

    def __bool__(self) -> bool:
        return len(self.qis) > 0

    @property
    def depth(self) -> int:
        return int(np.diff(self.bounds).max()) if len(self.qis) else 0

    def pairs(self, q_index: int) -> list[tuple[int, int]]:
        """Question ``q_index``'s list as (session position, turn index) pairs ([] when it has none)."""
        i = int(np.searchsorted(self.qis, q_index))
        if i == len(self.qis) or self.qis[i] != q_index:
            return []
        lo, hi = self.bounds[i], self.bounds[i + 1]
        return list(zip(self.positions[lo:hi].tolist(), self.turns[lo:hi].tolist()))


def read_turn_lists(path) -> TurnLists:
    t = read_table(path, columns=["q_index", "rank", "position", "turn"])
    qis, rank, pos, turn = (t.column(n).to_numpy().astype(np.int64) for n in ("q_index", "rank", "position", "turn"))
    step = np.diff(qis)
    if not ((step > 0) | ((step == 0) & (np.diff(rank) > 0))).all():  # the retrieve stage writes them in order
        order = np.lexsort((rank, qis))
        qis, pos, turn = qis[order], pos[order], turn[order]
    starts = np.flatnonzero(np.diff(qis, prepend=-1)) if len(qis) else np.zeros(0, np.int64)
    return TurnLists(qis[starts], np.append(starts, len(qis)), pos, turn)


def _search(sorted_codes: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """np.searchsorted(sorted_codes, codes), the codes searched in their sorted order (several
    times faster than in rank order, which visits the sorted codes at random)."""
    order = np.argsort(codes)
    out = np.empty_like(order)
    out[order] = np.searchsorted(sorted_codes, codes[order])
    return out


def lme_turn_rows(questions, haystacks, turns: UserTurns, ranked: TurnLists, path="turns", progress=None,
                  items: bool = False) -> list[dict]:
    """One row per question with a haystack: its exclusion, turn gold and metrics at both grains;
    ``items``: also its ranked turns as (session position, turn index, scoring id), best first
    (what a turn variant's retrieval log lists).

    Every question's corpus is laid out at once, as arrays, never as ids: the questions'
    haystack slots one after another, each slot's user turns (its session's, turn order), each
    turn's id less its suffix (its session id, or that id with ``answer`` made ``noans``:
    turn_scoring_id) as a code, and each ranked turn as its place among those turns. A turn is
    gold where its code's id holds ``answer``; the per-question work left is over the relevant
    turns alone. A ranked turn outside the corpus (a memory service's assistant turn) is added
    at its question's end, never gold."""
    kept = list(with_haystacks(questions, haystacks, progress))
    n_q = len(kept)
    sids = [sid for _, hay in kept for sid in hay["ids"]]
    slot_keys = np.fromiter((k for _, hay in kept for k in hay["keys"]), np.int64, len(sids))
    per_q = np.fromiter((len(hay["ids"]) for _, hay in kept), np.int64, n_q)
    first_slot = np.cumsum(per_q) - per_q
    slot_q = np.repeat(np.arange(n_q), per_q)
    # each slot's id less its suffix, as it is and in its noans form, as a code per question and string
    ids_seen: dict[str, int] = {}
    slot_id = np.fromiter((ids_seen.setdefault(sid, len(ids_seen)) for sid in sids), np.int64, len(sids))
    answer_slots = [g for g, sid in enumerate(sids) if "answer" in sid]
    noans_id = [ids_seen.setdefault(sids[g].replace("answer", "noans"), len(ids_seen)) for g in answer_slots]
    n_ids = max(len(ids_seen), 1)
    pairs, inverse = np.unique(np.concatenate([slot_q * n_ids + slot_id,
                                               slot_q[answer_slots] * n_ids + np.asarray(noans_id, np.int64)]),
                               return_inverse=True)
    as_is = inverse[:len(sids)]
    noans = as_is.copy()
    noans[answer_slots] = inverse[len(sids):]
    code_q, code_id = pairs // n_ids, pairs % n_ids
    id_strings = list(ids_seen)
    holds_answer = np.fromiter(("answer" in x for x in id_strings), bool, len(id_strings))[code_id]
    # the document turns: slot by slot
    per_slot = turns.count[slot_keys]
    slot_first_turn = np.cumsum(per_slot) - per_slot
    n_doc = np.bincount(slot_q, weights=per_slot, minlength=n_q).astype(np.int64)
    turn_slot = np.repeat(np.arange(len(sids)), per_slot)
    at = np.repeat(turns.start[slot_keys] - slot_first_turn, per_slot) + np.arange(len(turn_slot))
    turn_seq, turn_has = turns.seqs[at], turns.has[at]
    # the ranked turns of the kept questions, as turn indices
    q_of = {q["q_index"]: j for j, (q, _) in enumerate(kept)}
    list_q = np.fromiter((q_of.get(qi, -1) for qi in ranked.qis.tolist()), np.int64, len(ranked.qis))
    lengths, keep = np.diff(ranked.bounds), list_q >= 0
    P, S = ranked.positions, ranked.turns
    if not keep.all():  # a list of a question without a haystack: not scored
        P, S = P[np.repeat(keep, lengths)], S[np.repeat(keep, lengths)]
    listed = np.zeros(n_q, np.int64)
    listed[list_q[keep]] = lengths[keep]
    row_lo = np.cumsum(listed) - listed
    row_q = np.repeat(np.arange(n_q), listed)
    bad = (P < 0) | (P >= per_q[row_q]) | (S < 0)
    row_slot = np.minimum(first_slot[row_q] + np.where(bad, 0, P), max(len(sids) - 1, 0))
    key = slot_keys[row_slot] if len(sids) else row_slot
    code = key * turns.stride + S
    found = turns.find(code)
    ok = ~bad & (S < turns.stride) & (found >= 0)
    row_turn = np.where(ok, slot_first_turn[row_slot] + found - turns.start[key], -1) if len(sids) else row_slot
    # the rest: a bad place stops the run; a turn that is no document turn is added, never gold
    errors: dict[int, tuple[int, str]] = {}  # question: (rank, what), the first error of each
    extra: dict[tuple[int, int], int] = {}  # (slot, turn index): its turn index
    for r in np.flatnonzero(~ok).tolist():
        j, p, s = int(row_q[r]), int(P[r]), int(S[r])
        if bad[r]:
            errors.setdefault(j, (r - int(row_lo[j]) + 1, f"session position {p} turn {s} is not in its haystack"))
        else:
            row_turn[r] = extra.setdefault((int(row_slot[r]), s), len(turn_slot) + len(extra))
    doubled = np.flatnonzero(np.bincount(row_turn[row_turn >= 0]) > 1) if len(row_turn) else []
    for t in (doubled.tolist() if len(doubled) else []):
        j = int(row_q[np.flatnonzero(row_turn == t)[0]])
        errors.setdefault(j, (0, "a turn is ranked twice"))
    if errors:
        j = min(errors)
        rank, what = errors[j]
        raise DataError(path, f"question {kept[j][0]['question_id']}", f"rank {rank}: {what}" if rank else what)
    n_extra = np.bincount(slot_q[[sl for sl, _ in extra]], minlength=n_q) if extra else np.zeros(n_q, np.int64)
    turn_slot = np.concatenate([turn_slot, np.fromiter((sl for sl, _ in extra), np.int64, len(extra))])
    turn_seq = np.concatenate([turn_seq, np.fromiter((x for _, x in extra), np.int64, len(extra))])
    turn_doc = np.arange(len(turn_slot)) < len(turn_slot) - len(extra)
    turn_has = np.concatenate([turn_has, np.zeros(len(extra), bool)])
    # each turn's code, gold turns, and the sessions (codes) holding one
    turn_q = slot_q[turn_slot]
    turn_code = np.where(turn_has, as_is[turn_slot], noans[turn_slot])
    gold = holds_answer[turn_code] & turn_doc
    gold_session = np.zeros(len(pairs), bool)
    gold_session[turn_code[gold]] = True
    in_gold_session = gold_session[turn_code]
    n_relevant = np.bincount(turn_q[gold], minlength=n_q)
    n_relevant_sessions = np.bincount(turn_q[in_gold_session], minlength=n_q)
    n_gold_sessions = np.bincount(code_q[gold_session], minlength=n_q)
    has_target = np.bincount(turn_q[turn_has & turn_doc], minlength=n_q) > 0
    gold_turns: list[dict[tuple[int, int], None]] = [{} for _ in range(n_q)]
    for t in np.flatnonzero(gold).tolist():
        gold_turns[turn_q[t]][(int(turn_code[t]), int(turn_seq[t]))] = None
    # per ranked turn: relevant at either grain; each question's first rank of each session code
    row_code = turn_code[row_turn]
    row_rank = np.arange(len(row_turn)) - row_lo[row_q]
    hits: list[dict] = [{} for _ in range(n_q)]  # turn id: its first rank, in rank order
    hit_ranks: list[list[int]] = [[] for _ in range(n_q)]
    for r in np.flatnonzero(gold[row_turn]).tolist():
        j, t, rank = int(row_q[r]), int(row_turn[r]), int(row_rank[r])
        hit_ranks[j].append(rank)
        hits[j].setdefault((int(turn_code[t]), int(turn_seq[t])), rank)
    s_hits: list[dict] = [{} for _ in range(n_q)]
    s_hit_ranks: list[list[int]] = [[] for _ in range(n_q)]
    for r in np.flatnonzero(in_gold_session[row_turn]).tolist():
        j, rank = int(row_q[r]), int(row_rank[r])
        s_hit_ranks[j].append(rank)
        s_hits[j].setdefault(int(row_code[r]), rank)
    first_row = np.full(len(pairs), len(row_code))
    np.minimum.at(first_row, row_code, np.arange(len(row_code)))
    first_rows = np.sort(first_row[first_row < len(row_code)])
    # each question's reach (grown_ks): the 1-based ranks at which its session codes first appear
    first_ranks = (row_rank[first_rows] + 1).tolist()
    reach_at = [0, *np.cumsum(np.bincount(row_q[first_rows], minlength=n_q)).tolist()]
    n_corpus = (n_doc + n_extra).tolist()
    out = []
    for j, (q, hay) in enumerate(kept):
        n, total = int(listed[j]), n_corpus[j]
        effs = grown_ks([0, *first_ranks[reach_at[j]:reach_at[j + 1]]], KS, total)
        metrics = metrics_from_hits(hit_ranks[j], list(hits[j].values()), len(gold_turns[j]), n, total,
                                    int(n_relevant[j]))
        turn2session = metrics_from_hits(s_hit_ranks[j], list(s_hits[j].values()), int(n_gold_sessions[j]), n,
                                         total, int(n_relevant_sessions[j]), effs, labels=KS)
        first = hit_ranks[j][0] + 1 if hit_ranks[j] and hit_ranks[j][0] < TOP else 0
        out.append({"q_index": q["q_index"], "question_id": q["question_id"], "question_type": q["question_type"],
                    "excluded": exclusion(q["question_id"], bool(has_target[j])), "ranked": bool(n),
                    "gold": sorted(f"{id_strings[code_id[c]]}_{x + 1}" for c, x in gold_turns[j]), "turns": total,
                    "metrics": metrics,
                    "turn2session": turn2session,
                    "harness": _harness(first)})
        if items:
            lo, ids = int(row_lo[j]), hay["ids"]
            has = turn_has[row_turn[lo:lo + n]].tolist()
            out[-1]["items"] = [(p, x, turn_scoring_id(ids[p], x, h))
                                for p, x, h in zip(P[lo:lo + n].tolist(), S[lo:lo + n].tolist(), has)]
    return out


def lme_turn_block(rows: list[dict], questions: list[dict], depth: int) -> dict:
    names = metric_names("longmemeval")
    other = len(questions) - len(rows)

    def view(dropped):
        kept = [r for r in rows if r["excluded"] not in dropped]
        excluded = {d: sum(r["excluded"] == d for r in rows) for d in dropped}
        if other:
            excluded["no_haystack"] = other
        with_gold = [r for r in kept if r["gold"]]
        harness = {m: (math.fsum(r["harness"][m] for r in with_gold) / len(with_gold) if with_gold else None)
                   for m in (*HITS, "mrr")}
        return {"questions": len(kept), "excluded": excluded,
                "not_ranked": sum(not r["ranked"] for r in kept), "empty_gold": sum(not r["gold"] for r in kept),
                **average(kept, names),
                "turn2session": average([{"metrics": r["turn2session"]} for r in kept], names),
                "harness_over_turns": {"questions": len(with_gold),
                                       "skipped_no_turn_gold": len(kept) - len(with_gold), **harness}}

    run_retrieval = view(("abstention", "no_user_target"))
    return {"rules": GRAIN_RULES, "grain": "turn", "depth": depth,
            "turns_per_question": (math.fsum(r["turns"] for r in rows) / len(rows)) if rows else None,
            **run_retrieval,
            "conventions": {"run_retrieval": {"convention": CONVENTIONS["run_retrieval"], **run_retrieval},
                            "print_retrieval_metrics": {"convention": CONVENTIONS["print_retrieval_metrics"],
                                                        **view(("abstention",))}}}


def locomo_turn_metrics(ranked_ids: list[str], gold: set[str], ks=KS) -> dict[str, float]:
    """Evidence-turn recall@k (the share of gold ids among the first k), recall_any@k and recall_all@k."""
    out = {}
    for k in ks:
        found = len(gold.intersection(ranked_ids[:k]))
        out[f"recall@{k}"] = found / len(gold) if gold else 0.0
        out[f"recall_any@{k}"] = 1.0 if found else 0.0
        out[f"recall_all@{k}"] = 1.0 if found == len(gold) else 0.0
    return out


LOCOMO_TURN_NAMES = [f"{m}@{k}" for m in ("recall", "recall_any", "recall_all") for k in KS]


def locomo_turn_rows(questions, haystacks, turns_by_key, ranked: TurnLists, path="turns", progress=None,
                     items: bool = False) -> list[dict]:
    """lme_turn_rows' rows of a LoCoMo-format dataset (``items``: its ranked turns as
    (session position, turn index, turn id), best first)."""
    rows = []
    for q, hay in with_haystacks(questions, haystacks, progress):
        corpus, positions = _corpus(hay, turns_by_key, ranked.pairs(q["q_index"]), path, q["question_id"])
        gold = set(gold_turns("locomo", q, hay["ids"], corpus))
        ids = [corpus.ids[j] for j in positions]
        rows.append({"q_index": q["q_index"], "question_id": q["question_id"], "question_type": q["question_type"],
                     "excluded": None if gold else "no_evidence", "ranked": bool(positions), "gold": sorted(gold),
                     "turns": len(corpus.ids), "metrics": locomo_turn_metrics(ids, gold),
                     "harness": harness_over_turns(ids, gold)})
        if items:
            rows[-1]["items"] = [(corpus.positions[j], corpus.seqs[j], corpus.ids[j]) for j in positions]
    return rows


def locomo_turn_block(rows: list[dict], depth: int) -> dict:
    def view(sel):
        kept = [r for r in sel if r["excluded"] is None]
        harness = {m: (math.fsum(r["harness"][m] for r in kept) / len(kept) if kept else None) for m in (*HITS, "mrr")}
        return {"questions": len(kept), "not_ranked": sum(not r["ranked"] for r in kept),
                **average(kept, LOCOMO_TURN_NAMES), "harness_over_turns": {"questions": len(kept), **harness}}

    every = view(rows)
    return {"rules": "LoCoMo evidence turns (docs/protocol.md#turn-level)", "grain": "turn", "depth": depth,
            "turns_per_question": (math.fsum(r["turns"] for r in rows) / len(rows)) if rows else None,
            "excluded": {"no_evidence": sum(r["excluded"] == "no_evidence" for r in rows)}, **every,
            "conventions": {"all_categories": {"convention": CONVENTIONS["all_categories"], **every},
                            "categories_1_4": {"convention": CONVENTIONS["categories_1_4"],
                                               **view([r for r in rows
                                                       if r["question_type"] in LOCOMO_CATEGORIES_1_4])}}}


def compute(fmt: str, questions_path, haystacks_path, events_path, turns_path, log=print, items: bool = False):
    """(turn block, per-question rows) of a turn variant; (None, []) for a
    session variant (an empty turn table) or a format with no turn gold (the
    embedded zh set); ``items``: each row with its ranked turns (lme_turn_rows)."""
    ranked = read_turn_lists(turns_path)
    locomo = FORMATS[fmt].scorer == "locomo"
    if not ranked or not (fmt in LME_FORMATS or locomo):
        return None, []
    questions, haystacks, turns_by_key = load(fmt, questions_path, haystacks_path, events_path)
    progress = Progress(log, f"turn metrics ({fmt})", total=len(questions), unit="questions")
    depth = ranked.depth
    if locomo:
        rows = locomo_turn_rows(questions, haystacks, turns_by_key, ranked, turns_path, progress, items)
        block = locomo_turn_block(rows, depth)
    else:
        rows = lme_turn_rows(questions, haystacks, turns_by_key, ranked, turns_path, progress, items)
        block = lme_turn_block(rows, questions, depth)
    progress(len(questions), f", done: {block['questions']} averaged", force=True)
    return block, rows
