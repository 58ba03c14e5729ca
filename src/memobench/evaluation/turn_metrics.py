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

from ..core.errors import DataError
from ..core.formats import FORMATS, LME_FORMATS
from ..core.progress import Progress
from ..core.protocol import TOP
from ..core.tables import read_table, sorted_runs
from .measures import HITS, MEASURES
from ..retrieval.turns import turn_scoring_id  # the rule an imported turn log is read under too
from .official import (CONVENTIONS, KS, LOCOMO_CATEGORIES_1_4, _lme_metrics, average, exclusion, metric_names,
                       read_haystacks, read_questions, with_haystacks)

GRAIN_RULES = "LongMemEval official at turn level, run_retrieval.py --granularity turn (docs/protocol.md#turn-level)"


def strip_turn(scoring_id: str) -> str:
    """The session part of a turn's scoring id (all before its last ``_``)."""
    return "_".join(scoring_id.split("_")[:-1])


def effective_ks(ranked_sessions: list[str], ks, n_corpus: int) -> list[int]:
    """turn2session's k of each k: the fewest first ranked turns holding k
    distinct session ids, from k up; n_corpus + 1 when the list never holds k
    (and k itself when k is past the corpus), as LongMemEval's loop ends."""
    reach: list[int] = [0]  # reach[d]: the first prefix length holding d distinct ids
    seen: set[str] = set()
    for i, s in enumerate(ranked_sessions, 1):
        if s not in seen:
            seen.add(s)
            reach.append(i)
    return [k if k > n_corpus else max(reach[k], k) if k < len(reach) else n_corpus + 1 for k in ks]


def effective_k(ranked_sessions: list[str], k: int, n_corpus: int) -> int:
    return effective_ks(ranked_sessions, (k,), n_corpus)[0]


def turn2session_metrics(positions: list[int], scoring: list[str], ks=KS, stripped: list[str] | None = None
                         ) -> dict[str, float]:
    """LongMemEval's session-level metrics of a turn ranking (``positions``:
    turn corpus indices, best first; ``scoring``: the corpus's turn scoring
    ids; ``stripped``: the same less their suffixes, when the caller has them)."""
    corpus = [strip_turn(s) for s in scoring] if stripped is None else stripped
    gold = {c for c, s in zip(corpus, scoring) if "answer" in s}
    effs = effective_ks([corpus[p] for p in positions], ks, len(corpus))
    m = _lme_metrics(positions, corpus, gold, effs)  # one pass for every k' (a k' repeated gives the same names)
    return {f"{name}@{k}": m[f"{name}@{eff}"] for k, eff in zip(ks, effs)
            for name in ("recall_any", "recall_all", "ndcg_any")}


def harness_over_turns(ranked_ids: list[str], gold) -> dict[str, float]:
    """hit@k of the harness's k and the reciprocal rank within the top 10, of the first gold turn."""
    first = next((r for r, t in enumerate(ranked_ids[:TOP], 1) if t in gold), 0)
    out = {h: (1.0 if 1 <= first <= MEASURES[h].cutoff else 0.0) for h in HITS}
    out["mrr"] = 1.0 / first if first else 0.0
    return out


def gold_turns(fmt: str, question: dict, session_ids: list[str], turns) -> list[str]:
    """A question's gold turns (turn ids, in corpus order; ``turns``: its
    ``turns.HaystackTurns``): LongMemEval's, the user turns with has_answer in
    a session whose id holds ``answer`` (the turn scoring ids that keep
    ``answer``); LoCoMo's, the turns its evidence names (evidence naming no
    turn dropped, as the harness drops it)."""
    if fmt in LME_FORMATS:
        return [t for t, p, h in zip(turns.ids, turns.positions, turns.has_answer)
                if h is True and "answer" in session_ids[p]]
    evidence = set(question["evidence"] or ())
    return [t for t in turns.ids if t in evidence]


def load(fmt: str, questions_path, haystacks_path, events_path, dates: bool = False
         ) -> tuple[list[dict], dict, dict]:
    """(questions, their haystacks, {session_key: its document turns}): what turn scoring reads
    (``dates``: the haystacks' dates too)."""
    from ..retrieval.turns import session_turns

    questions = read_questions(questions_path)
    hids = {q["haystack_id"] for q in questions if q["haystack_id"] >= 0}
    haystacks = read_haystacks(haystacks_path, hids, dates=dates)
    keys = {k for h in haystacks.values() for k in h["keys"]}
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


def read_turn_lists(path) -> dict[int, list[tuple[int, int]]]:
    """{q_index: [(session position, turn index), ...] best first} of a turn table."""
    t = read_table(path, columns=["q_index", "rank", "position", "turn"]).sort_by(
        [("q_index", "ascending"), ("rank", "ascending")])
    qis, pos, turn = (t.column(n).to_pylist() for n in ("q_index", "position", "turn"))
    return {qi: list(zip(pos[lo:hi], turn[lo:hi])) for qi, lo, hi in sorted_runs(qis)}


def lme_turn_rows(questions, haystacks, turns_by_key, ranked: dict, path="turns", progress=None,
                  items: bool = False) -> list[dict]:
    """One row per question with a haystack: its exclusion, turn gold and metrics at both grains;
    ``items``: also its ranked turns as (session position, turn index, scoring id), best first
    (what a turn variant's retrieval log lists).

    The corpus (the user turns, haystack then turn order) is laid out without building it: a
    turn is placed by its session's offset in the corpus and its place among the session's
    document turns, and only gold turns get their scoring id (the metrics compare ids with the
    gold set alone, so every other turn stands as ``""``). A ranked turn outside the corpus (a
    memory service's assistant turn) is added at its end, never gold."""
    local = {key: dict(zip(t.seqs, range(len(t.seqs)))) for key, t in turns_by_key.items()}
    rows = []
    for q, hay in with_haystacks(questions, haystacks, progress):
        listed = ranked.get(q["q_index"], [])
        ids, keys = hay["ids"], hay["keys"]
        starts, scoring, stripped, has_target = [], [], [], False
        for sid, key in zip(ids, keys):
            t = turns_by_key[key]
            starts.append(len(scoring))
            has_target = has_target or any(h is True for h in t.has_answer)
            if "answer" in sid:  # the answer and noans halves (turn_scoring_id, strip_turn)
                noans = sid.replace("answer", "noans")
                scoring += [f"{sid}_{s + 1}" if h else "" for s, h in zip(t.seqs, t.has_answer)]
                stripped += [sid if h else noans for h in t.has_answer]
            else:
                scoring += [""] * len(t.seqs)
                stripped += [sid] * len(t.seqs)
        positions, extra = [], {}
        for r, (p, s) in enumerate(listed, 1):
            i = local[keys[p]].get(s) if 0 <= p < len(keys) else None
            if i is not None:
                positions.append(starts[p] + i)
                continue
            if not 0 <= p < len(keys) or s < 0:
                raise DataError(path, f"question {q['question_id']}",
                                f"rank {r}: session position {p} turn {s} is not in its haystack")
            if (p, s) not in extra:  # not a document turn: never gold
                extra[(p, s)] = len(scoring)
                scoring.append("")
                stripped.append(ids[p].replace("answer", "noans"))
            positions.append(extra[(p, s)])
        if len(set(positions)) != len(positions):
            raise DataError(path, f"question {q['question_id']}", "a turn is ranked twice")
        gold = set(scoring)
        gold.discard("")  # gold_turns' ids, as scoring ids
        rows.append({"q_index": q["q_index"], "question_id": q["question_id"],
                     "question_type": q["question_type"], "excluded": exclusion(q["question_id"], has_target),
                     "ranked": bool(listed), "gold": sorted(gold), "turns": len(scoring),
                     "metrics": _lme_metrics(positions, scoring, gold),
                     "turn2session": turn2session_metrics(positions, scoring, stripped=stripped),
                     "harness": harness_over_turns([scoring[j] for j in positions[:TOP]], gold)})
        if items:  # a turn is gold exactly where its has_answer makes its id an answer id
            rows[-1]["items"] = [(p, s, turn_scoring_id(ids[p], s, scoring[j] != ""))
                                 for (p, s), j in zip(listed, positions)]
    return rows


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


def locomo_turn_rows(questions, haystacks, turns_by_key, ranked: dict, path="turns", progress=None) -> list[dict]:
    rows = []
    for q, hay in with_haystacks(questions, haystacks, progress):
        corpus, positions = _corpus(hay, turns_by_key, ranked.get(q["q_index"], []), path, q["question_id"])
        gold = set(gold_turns("locomo", q, hay["ids"], corpus))
        ids = [corpus.ids[j] for j in positions]
        rows.append({"q_index": q["q_index"], "question_id": q["question_id"], "question_type": q["question_type"],
                     "excluded": None if gold else "no_evidence", "ranked": bool(positions), "gold": sorted(gold),
                     "turns": len(corpus.ids), "metrics": locomo_turn_metrics(ids, gold),
                     "harness": harness_over_turns(ids, gold)})
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


def compute(fmt: str, questions_path, haystacks_path, events_path, turns_path, log=print):
    """(turn block, per-question rows) of a turn variant; (None, []) for a
    session variant (an empty turn table) or a format with no turn gold (the
    embedded zh set)."""
    ranked = read_turn_lists(turns_path)
    locomo = FORMATS[fmt].scorer == "locomo"
    if not ranked or not (fmt in LME_FORMATS or locomo):
        return None, []
    questions, haystacks, turns_by_key = load(fmt, questions_path, haystacks_path, events_path)
    progress = Progress(log, f"turn metrics ({fmt})", total=len(questions), unit="questions")
    depth = max((len(v) for v in ranked.values()), default=0)
    if locomo:
        rows = locomo_turn_rows(questions, haystacks, turns_by_key, ranked, turns_path, progress)
        block = locomo_turn_block(rows, depth)
    else:
        rows = lme_turn_rows(questions, haystacks, turns_by_key, ranked, turns_path, progress)
        block = lme_turn_block(rows, questions, depth)
    progress(len(questions), f", done: {block['questions']} averaged", force=True)
    return block, rows
