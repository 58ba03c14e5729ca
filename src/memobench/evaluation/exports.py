"""Exports for the field's own tools (docs/protocol.md#deep-lists-and-exports).

* ``run.trec`` (runs.trec.write): TREC run lines ``qid Q0 docno rank score tag``,
  one per position of the ranking given (at most DEPTH), score ``51 - rank``;
* ``qrels.trec``: ``qid 0 docno 1`` for the gold the harness scores against
  (LongMemEval ``answer_session_ids`` found in the haystack, LoCoMo evidence
  sessions), questions with no gold (the harness skips them) left out, in the
  TREC ids of runs.trec;
* ``retrievallog.jsonl`` (runs.retrieval_log.write): LongMemEval's
  retrieval-log format, one line per question, ``metrics.session`` holding
  that question's official metrics (:func:`write_retrievallog` computes them);
  a turn variant's lists its turns, with ``metrics.turn`` and turn2session's
  ``metrics.session`` (docs/protocol.md#turn-level).
"""

from __future__ import annotations

from . import official
from ..runs import retrieval_log
from ..runs.trec import REPEAT_MARK, question_tokens, trec_id
from ..core.atomic import atomic_path
from ..core.tables import read_table, sort_by


def write_qrels(questions_path, out, log=print) -> dict:
    """``qrels.trec``: the harness's gold per question (``questions.gold``),
    ids as :func:`trec_id` writes them (a gold id's first occurrence)."""
    rows = read_table(questions_path, columns=["q_index", "question_id", "gold", "haystack_id", "parse_error"])
    rows = sort_by(rows, "q_index").to_pylist()
    qtok = question_tokens(rows)
    stats = {"questions": 0, "lines": 0, "no_gold": 0, "repeated_question_ids": 0}
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for q in rows:
            if q["parse_error"] or q["haystack_id"] < 0 or not q["gold"]:
                stats["no_gold"] += 1
                continue
            qid = qtok[q["q_index"]]
            stats["questions"] += 1
            stats["repeated_question_ids"] += REPEAT_MARK in qid
            for sid in dict.fromkeys(q["gold"]):
                f.write(f"{qid} 0 {trec_id(sid)} 1\n")
                stats["lines"] += 1
    log(f"qrels.trec: {stats}")
    return stats


def write_turn_qrels(fmt: str, questions_path, haystacks_path, events_path, out, log=print) -> dict:
    """``qrels.turns.trec``: each question's gold turns (turn_metrics.gold_turns)
    by their turn ids (retrieval/turns.py), the docnos of ``run.turns.trec``.
    A turn id repeated in a haystack is gold at its first occurrence (as qrels.trec)."""
    from ..core.formats import FORMATS, LME_FORMATS
    from ..retrieval.turns import haystack_turns
    from .official import with_haystacks
    from .turn_metrics import gold_turns, load

    questions, haystacks, by_key = load(fmt, questions_path, haystacks_path, events_path, by_session=True)
    qtok = question_tokens(questions)
    scored = fmt in LME_FORMATS or FORMATS[fmt].scorer == "locomo"
    stats = {"questions": 0, "lines": 0, "no_gold": 0}
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for q, hay in with_haystacks(questions, haystacks):
            gold = gold_turns(fmt, q, hay["ids"], haystack_turns(hay["ids"], hay["keys"], by_key)) if scored else []
            if not gold:
                stats["no_gold"] += 1
                continue
            stats["questions"] += 1
            for tid in dict.fromkeys(gold):
                f.write(f"{qtok[q['q_index']]} 0 {trec_id(tid)} 1\n")
                stats["lines"] += 1
    log(f"qrels.turns.trec: {stats}")
    return stats


# sessions.bin: every session's two strings (UTF-8) back to back, then the
# index: n sorted session keys and 2n + 1 offsets (string 2i is session i's
# turns JSON, 2i + 1 its user text as a JSON string), then a footer: n, the
# index's offset, magic.


def write_retrievallog(fmt: str, questions_path, haystacks_path, events_path, rankings_path, out,
                       session_json_path, sessions: bool = True, log=print, rows: list | None = None,
                       haystacks: dict | None = None, turns_path=None) -> dict:
    """``retrievallog.jsonl`` (runs.retrieval_log.write) with each question's
    official session metrics: ``rows`` and ``haystacks``, the per-question
    rows of ``official.compute`` on the same tables and the haystacks it
    read, when the caller has them; else they are computed here (the
    retrievallog job). ``turns_path``: a turn variant's turn table, whose
    turns the log then lists, with the metrics of both grains."""
    from . import turn_metrics

    ranked = turn_metrics.read_turn_lists(turns_path) if turns_path is not None else {}
    if ranked and fmt in official.LME_FORMATS:
        questions, haystacks, by_key = turn_metrics.load(fmt, questions_path, haystacks_path, events_path,
                                                         dates=True)
        rows = turn_metrics.lme_turn_rows(questions, haystacks, by_key, ranked, turns_path, items=True)
    elif rows is not None:
        qs = {q["q_index"]: q["haystack_id"] for q in read_table(questions_path, columns=["q_index", "haystack_id"])
              .to_pylist()}
        needed = {qs[r["q_index"]] for r in rows}
        if haystacks is None or not needed <= haystacks.keys():
            haystacks = official.read_haystacks(haystacks_path, needed)
    elif fmt in official.LME_FORMATS:
        haystacks = {}
        _, rows = official.compute(fmt, questions_path, haystacks_path, events_path, rankings_path, log=log,
                                   haystacks_out=haystacks)
    return retrieval_log.write(fmt, questions_path, rows or [], haystacks or {}, out, session_json_path, sessions,
                               log)
