"""Exports for the field's own tools (PROTOCOL.md section 5).

* ``run.trec``: TREC run lines ``qid Q0 docid rank score tag`` (depth as the
  ranking given, at most :data:`DEPTH`), score strictly decreasing with rank;
* ``qrels.trec``: ``qid 0 docid 1`` for the gold the harness scores against
  (LongMemEval ``answer_session_ids`` found in the haystack, LoCoMo evidence
  sessions), questions with no gold (the harness skips them) left out;
* ``retrievallog.jsonl``: LongMemEval's retrieval-log format, one line per
  question, ``metrics.session`` holding that question's official metrics.

A question id or session id holding whitespace cannot be written as TREC and
is an error. TREC has one list per qid: when a question id repeats in the
file, the first question with it is written and the others are left out (and
counted in the log); a session id ranked twice in one list (a ranker of the
whole corpus ranking both copies of a duplicated session) is written at its
first rank only, later ranks keeping their numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from . import official
from .errors import DataError
from .tables import commit, tmp_path

DEPTH = 50


def check_id(value: str, kind: str, path, item) -> str:
    if not value or any(c.isspace() for c in value):
        raise DataError(path, item, f"{kind} {value!r} is empty or holds whitespace: it cannot be written as TREC")
    return value


class _AtomicText:
    """A text file written under a temporary name and moved into place on success."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp_path(self.path)

    def __enter__(self):
        self.f = open(self.tmp, "w", encoding="utf-8", newline="\n")
        return self.f

    def __exit__(self, exc_type, exc, tb):
        self.f.close()
        if exc_type is None:
            commit(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def write_run(rankings_path, tag: str, out, log=print) -> dict:
    """``run.trec`` from a rankings table of any depth (first :data:`DEPTH` ranks)."""
    check_id(tag, "run tag (variant name)", rankings_path, None)
    t = pq.read_table(rankings_path, columns=["question_id", "rank", "session_id", "q_index"])
    t = t.sort_by([("q_index", "ascending"), ("rank", "ascending")]).to_pydict()
    seen_q: dict[str, int] = {}
    dropped_q: set[int] = set()
    listed: set[tuple[int, str]] = set()
    stats = {"questions": 0, "lines": 0, "repeated_question_ids": 0, "repeated_sessions": 0}
    with _AtomicText(out) as f:
        for qid, rank, sid, qi in zip(t["question_id"], t["rank"], t["session_id"], t["q_index"]):
            if rank > DEPTH:
                continue
            item = f"question {qid}"
            check_id(qid, "question id", rankings_path, item)
            check_id(sid, "session id", rankings_path, item)
            first = seen_q.setdefault(qid, qi)
            if first != qi:
                if qi not in dropped_q:
                    dropped_q.add(qi)
                    stats["repeated_question_ids"] += 1
                continue
            if (qi, sid) in listed:
                stats["repeated_sessions"] += 1
                continue
            listed.add((qi, sid))
            f.write(f"{qid} Q0 {sid} {rank} {DEPTH + 1 - rank} {tag}\n")
            stats["lines"] += 1
        stats["questions"] = len(seen_q)
    log(f"run.trec {tag}: {stats}")
    return stats


def write_qrels(questions_path, out, log=print) -> dict:
    """``qrels.trec``: the harness's gold per question (``questions.gold``)."""
    rows = pq.read_table(questions_path, columns=["q_index", "question_id", "gold", "haystack_id", "parse_error"])
    rows = rows.sort_by("q_index").to_pylist()
    seen: set[str] = set()
    stats = {"questions": 0, "lines": 0, "no_gold": 0, "repeated_question_ids": 0}
    with _AtomicText(out) as f:
        for q in rows:
            if q["parse_error"] or q["haystack_id"] < 0 or not q["gold"]:
                stats["no_gold"] += 1
                continue
            qid = check_id(q["question_id"], "question id", questions_path, f"question {q['question_id']}")
            if qid in seen:
                stats["repeated_question_ids"] += 1
                continue
            seen.add(qid)
            stats["questions"] += 1
            for sid in q["gold"]:
                f.write(f"{qid} 0 {check_id(sid, 'session id', questions_path, f'question {qid}')} 1\n")
                stats["lines"] += 1
    log(f"qrels.trec: {stats}")
    return stats


def _sessions(events_path, keys) -> dict[int, list[dict]]:
    t = pq.read_table(events_path, columns=["session_key", "seq", "role", "text", "has_answer"],
                      filters=[("session_key", "in", sorted(keys))] if keys else None)
    t = t.sort_by([("session_key", "ascending"), ("seq", "ascending")]).to_pydict()
    out: dict[int, list[dict]] = {k: [] for k in keys}
    for key, role, text, ha in zip(t["session_key"], t["role"], t["text"], t["has_answer"]):
        turn = {"role": role, "content": text}
        if ha:
            turn["has_answer"] = True
        out[key].append(turn)
    return out


def write_retrievallog(fmt: str, questions_path, haystacks_path, events_path, rankings_path, out,
                       sessions: bool = True, chunk: int = 50, log=print) -> dict:
    """``retrievallog.jsonl`` (LongMemEval-format datasets): each question's
    fields, then ``retrieval_results`` with the ranked documents (scoring id,
    user-turn text, the haystack's date) to :data:`DEPTH` and the question's
    official session metrics. ``sessions=False`` leaves out ``haystack_sessions``
    (the bulk of each line)."""
    if fmt not in official.LME_FORMATS:
        raise DataError(questions_path, None, f"format {fmt!r} has no LongMemEval retrieval log")
    _, rows = official.compute(fmt, questions_path, haystacks_path, events_path, rankings_path, log=log)
    cols = ["q_index", "question", "question_date", "answer", "answer_session_ids", "haystack_id"]
    qs = {q["q_index"]: q for q in pq.read_table(questions_path, columns=cols).to_pylist()}
    hay = official.read_haystacks(haystacks_path, {qs[r["q_index"]]["haystack_id"] for r in rows})
    with _AtomicText(out) as f:
        for lo in range(0, len(rows), chunk):
            part = rows[lo:lo + chunk]
            keys = {k for r in part for k in hay[qs[r["q_index"]]["haystack_id"]]["keys"]}
            turns = _sessions(events_path, keys)
            for r in part:
                q = qs[r["q_index"]]
                h = hay[q["haystack_id"]]
                items = []
                for p, sid in zip(r["positions"][:DEPTH], r["scoring"][:DEPTH]):
                    text = " ".join(t["content"] for t in turns[h["keys"][p]] if t["role"] == "user")
                    items.append({"corpus_id": sid, "text": text, "timestamp": h["dates"][p]})
                line = {"question_id": r["question_id"], "question_type": r["question_type"],
                        "question": q["question"],
                        "answer": json.loads(q["answer"]) if q["answer"] is not None else None,
                        "question_date": q["question_date"], "haystack_dates": h["dates"]}
                if sessions:
                    line["haystack_sessions"] = [turns[k] for k in h["keys"]]
                line["haystack_session_ids"] = h["ids"]
                line["answer_session_ids"] = q["answer_session_ids"]
                line["retrieval_results"] = {"query": q["question"], "ranked_items": items,
                                             "metrics": {"session": r["metrics"], "turn": {}}}
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
    log(f"retrievallog: {len(rows)} questions")
    return {"questions": len(rows)}
