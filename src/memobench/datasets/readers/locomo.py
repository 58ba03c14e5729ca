"""The LoCoMo format's reader: one JSON document of conversations, their
sessions in numeric session-key order, each question's gold the sessions
of its evidence ``dia_id``s (an exact lookup)."""

from __future__ import annotations

import re
from pathlib import Path

from ...core.errors import DataError
from ...core.jsmath import MISSING, js_string
from ...core.progress import Progress
from ...core.tables import utf8_text
from ..dates import parse_locomo
from ..store import _Tables
from .common import DAY_MS, _Lone, _load_json, _opt_str, _question_text, _turn_text


SESSION_KEY_RE = re.compile(r"session_([0-9]+)\Z")


def _sample_id(conv: dict, ci: int) -> str:
    sample = conv.get("sample_id", MISSING)
    return js_string(sample) if sample is not MISSING else f"conv{ci}"


def _check_sample_ids(path, data: list) -> None:
    """Question ids are ``<sample_id>#<n>``: two conversations with one
    sample_id would give every question of both a twin."""
    where: dict[str, list[int]] = {}
    for ci, conv in enumerate(data):
        if isinstance(conv, dict):
            where.setdefault(_sample_id(conv, ci), []).append(ci)
    dups = {sid: cis for sid, cis in where.items() if len(cis) > 1}
    if dups:
        listed = "; ".join(f"{sid!r} (conversations {', '.join(map(str, cis))})" for sid, cis in dups.items())
        raise DataError(path, None, f"duplicate sample_id: {listed}")


def read_locomo(path: Path, paths: dict, log=print) -> dict:
    """A LoCoMo file into the tables at ``paths`` (by table name)."""
    data, lone = _load_json(path)
    if not isinstance(data, list):
        raise DataError(path, None, "expected a JSON array of conversations")
    _check_sample_ids(path, data)
    tables = _Tables(paths)
    store, questions, haystacks = tables.store, tables.questions, tables.haystacks
    stats = {"conversations": len(data), "questions": 0, "date_fallbacks": 0, "evidence_unmatched": 0}
    q_index = 0
    progress = Progress(log, f"normalize {path.name}", total=len(data), unit="conversations")
    with tables:
        for ci, conv in enumerate(data):
            if not isinstance(conv, dict) or not isinstance(conv.get("conversation"), dict):
                raise DataError(path, f"conversation {ci}", "expected an object with a 'conversation' object")
            c = conv["conversation"]
            sample_id = _sample_id(conv, ci)
            check = _Lone(path, f"conversation {ci}") if lone else None
            if check is not None:
                check("sample_id", sample_id)
            keys = sorted(
                (k for k in c if SESSION_KEY_RE.match(k) and isinstance(c[k], list)),
                key=lambda k: int(SESSION_KEY_RE.match(k).group(1)),
            )
            dia: dict[str, str] = {}
            for i, key in enumerate(keys):
                date_raw = c.get(key + "_date_time", MISSING)
                date = js_string(date_raw)
                base = parse_locomo(date)
                fallback = base is None
                if fallback:
                    base = i * DAY_MS
                    stats["date_fallbacks"] += 1
                events = []
                for turn in c[key]:
                    d = turn.get("dia_id") if isinstance(turn, dict) else None
                    dia_id = js_string(d) if d not in (None, "", 0, False) else None
                    speaker = _opt_str(turn.get("speaker")) if isinstance(turn, dict) else None
                    events.append((_turn_text(turn, "text"), speaker, dia_id))
                    if dia_id is not None:
                        dia[dia_id] = key
                    if check is not None:
                        check("speaker", speaker)
                        check("dia_id", dia_id)
                if check is not None:
                    check(key + "_date_time", date)
                skey = store.key(key, events, scope=f"conversation {ci}", lone=check is not None)
                haystacks.append(
                    haystack_id=ci, position=i, session_key=skey, session_id=key,
                    date=None if date_raw is MISSING or date_raw is None else date,
                    base_time=base, date_fallback=fallback,
                )
            qa = conv.get("qa")
            for qi, item in enumerate(qa if isinstance(qa, list) else []):
                if not isinstance(item, dict):
                    raise DataError(path, f"{sample_id} qa {qi}", "expected an object")
                evidence = item.get("evidence")
                listed = [js_string(e) for e in evidence] if isinstance(evidence, list) else []
                gold = []
                for e in listed:
                    s = dia.get(e)
                    if s is None:
                        stats["evidence_unmatched"] += 1
                    elif s not in gold:
                        gold.append(s)
                cat = item.get("category", MISSING)
                question = _question_text(path, f"{sample_id} qa {qi}", item)
                question_type = "unknown" if cat is MISSING else js_string(cat)
                question, question_exact = (question, None) if check is None else utf8_text(question)
                if check is not None:
                    check("category", question_type)
                questions.append(
                    q_index=q_index, question_id=f"{sample_id}#{qi}", question=question,
                    question_type=question_type, question_date=None, haystack_id=ci, gold=gold,
                    paired_question_id=None, parse_error=False, answer=None, answer_session_ids=[],
                    question_exact=question_exact, evidence=listed,
                )
                q_index += 1
            progress(ci + 1)
        stats["questions"] = q_index
        tables.close()
    stats.update(sessions=len(store.keys), events=store.n_events, haystacks=len(data))
    progress(len(data), ", done", force=True)
    return stats
