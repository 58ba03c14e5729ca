"""The LongMemEval-CN format's reader: a results.jsonl whose rows pair (by
``questionId`` minus ``_cn``) with a LongMemEval dataset's questions, whose
haystacks they search."""

from __future__ import annotations

from pathlib import Path

from ...core.errors import DataError
from ...core.jsmath import MISSING, js_string
from ...core.progress import Progress
from ...core.tables import QUESTIONS, TableWriter, read_table, utf8_text
from ..jsonguard import may_hold_lone
from ..store import QUESTION_BATCH_ROWS
from .common import _Lone, _loads, _question_text


def read_cn(path: Path, base_questions: Path, paths: dict, log=print) -> dict:
    """CN rows paired to the normalized LongMemEval-S questions (the table
    ``base_questions``; docs/harnesses.md#cn-pairing).

    Only the questions table is written; haystacks, sessions and events are
    the base dataset's. Unpaired rows are kept with ``haystack_id = -1`` so the
    retrieval stage counts them as skips.
    """
    base_dir = base_questions.parent
    base = read_table(base_questions, columns=["question_id", "haystack_id", "gold", "question_type",
                                               "question_date"]).to_pylist()
    by_id = {row["question_id"]: row for row in base}  # last entry per id wins
    questions = TableWriter(paths["questions"], QUESTIONS, batch_rows=QUESTION_BATCH_ROWS)
    stats = {"rows": 0, "paired": 0, "unpaired": 0}
    size = path.stat().st_size
    progress = Progress(log, f"normalize {path.name}", unit="rows")
    try:
        with open(path, "rb") as f:
            offset = 0
            for lineno, raw in enumerate(f, 1):
                progress(stats["rows"], f", {offset * 100 // max(size, 1)}% of bytes")
                start, offset = offset, offset + len(raw)
                if not raw.decode("utf-8", "replace").strip():
                    continue
                row = _loads(path, raw, f"line {lineno}", start)
                if not isinstance(row, dict):
                    raise DataError(path, f"line {lineno}", "expected a JSON object")
                qid = js_string(row.get("questionId", MISSING))
                lone = may_hold_lone(raw)
                if lone:
                    _Lone(path, f"line {lineno}", start)("questionId", qid)
                orig = qid[:-3] if qid.endswith("_cn") else qid
                pair = by_id.get(orig)
                stats["paired" if pair else "unpaired"] += 1
                # cn.cjs skips an unpaired row before reading its question
                question = _question_text(path, f"line {lineno}", row) if pair else ""
                question, question_exact = utf8_text(question) if lone else (question, None)
                questions.append(
                    q_index=stats["rows"], question_id=qid, question=question,
                    question_type=pair["question_type"] if pair else "unknown",
                    question_date=pair["question_date"] if pair else None,
                    haystack_id=pair["haystack_id"] if pair else -1,
                    gold=pair["gold"] if pair else [],
                    paired_question_id=orig if pair else None, parse_error=False,
                    answer=None, answer_session_ids=[], question_exact=question_exact, evidence=None,
                )
                stats["rows"] += 1
        if stats["rows"] and not stats["paired"]:
            raise DataError(path, None, f"none of its {stats['rows']} rows pairs with a question of {base_dir} "
                            "(questionId minus '_cn'): haystacks_from must name the LongMemEval-S dataset "
                            "these rows translate")
        questions.close()
    except BaseException:
        questions.abort()
        raise
    progress(stats["rows"], f", done: {stats['paired']} paired, {stats['unpaired']} unpaired", force=True)
    return stats
