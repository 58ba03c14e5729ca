"""LongMemEval-CN-shaped files: :func:`write_cn` writes a ``results.jsonl``
whose rows pair (by ``questionId`` minus ``_cn``) with a LongMemEval file's
question ids, with unmatched ids, suffix-less ids, duplicates and blank lines."""

from __future__ import annotations

import json
import os
import re
import zlib

from ...core.tables import escape_lone
from .surrogates import _surrogate_rates, with_surrogates
from .vocabulary import _HARNESS_STOP, _HEX, _ZH_WORDS, _atomic_open, _randstr, _rng

_CN_PREFIX = {
    "single-session-user": "我之前提到的",
    "single-session-assistant": "你上次建议的",
    "single-session-preference": "能给我推荐一些",
    "multi-session": "我总共",
    "temporal-reasoning": "从我",
    "knowledge-update": "我现在的",
}
_CN_SUFFIX = {
    "single-session-user": "是什么？",
    "single-session-assistant": "是什么？",
    "single-session-preference": "吗？",
    "multi-session": "有多少？",
    "temporal-reasoning": "过了多少天？",
    "knowledge-update": "是什么？",
}
_CN_HYPOTHESES = ("我不确定。", "根据之前的对话，", "你提到过这个。", "信息不足，无法回答。")


def _iter_lme_questions(src):
    """Yield dicts with question_id, question, question_type, answer (streamed)."""
    if not isinstance(src, (str, bytes, os.PathLike)):
        for item in src:
            yield item
        return
    try:
        import ijson
    except ImportError:          # pragma: no cover - ijson is a dependency
        ijson = None
    if ijson is None:            # pragma: no cover
        with open(src, encoding="utf-8") as fh:
            yield from json.load(fh)
        return
    wanted = {"item.question_id": "question_id", "item.question": "question",
              "item.question_type": "question_type", "item.answer": "answer"}
    scalar = ("string", "number", "null", "boolean")
    from ...datasets.jsonguard import GuardedReader, restore

    with open(src, "rb") as fh:
        cur: dict = {}
        # the reader that keeps lone surrogate escapes as json.loads does
        for prefix, event, value in ijson.parse(GuardedReader(fh, escapes=True)):
            if prefix == "item":
                if event == "start_map":
                    cur = {}
                elif event == "end_map":
                    yield cur
            elif event in scalar:
                key = wanted.get(prefix)
                if key is not None:
                    if not isinstance(value, (str, int, bool, type(None))):
                        value = float(value)       # ijson's Decimal
                    cur[key] = restore(value)


def _zh_word(w: str) -> str:
    return _ZH_WORDS[zlib.crc32(w.lower().encode("utf-8")) % len(_ZH_WORDS)]


def _cn_question(en, qtype, rng) -> str:
    en = "" if en is None else str(en)
    if not re.search(r"[A-Za-z]", en):          # already Chinese (or empty)
        return en
    if rng.random() < 0.01:                      # left untranslated
        return en
    pieces = []
    toks = re.findall(r"[A-Za-z][A-Za-z0-9'&]*|[0-9]+", en)
    for i, t in enumerate(toks):
        low = t.lower()
        if t[0].isdigit() or (i > 0 and t[0].isupper() and t != "I"):
            pieces.append(("L", t))                          # names, brands, numbers
        elif low in _HARNESS_STOP or len(low) < 3 or low in ("did", "my", "me", "your"):
            continue
        elif rng.random() < 0.12:
            pieces.append(("L", low))                        # an untranslated word
        else:
            pieces.append(("Z", _zh_word(low)))
    out = [_CN_PREFIX.get(qtype, "关于")]
    prev = "Z"
    for kind, s in pieces:
        if kind == "L":
            # glued to the Han text or set off by spaces; never glued to Latin
            glue = prev != "L" and rng.random() < 0.5
            out.append(s if glue else f" {s} ")
        else:
            out.append(s)
        prev = kind
    out.append(_CN_SUFFIX.get(qtype, "？"))
    return re.sub(r" +", " ", "".join(out)).strip()


def write_cn(path, longmemeval_path_or_items, seed=0, fraction=1.0, surrogates=False):
    """Write a ``results.jsonl`` of Chinese questions paired to a LongMemEval file.

    ``longmemeval_path_or_items`` is a path (read with ijson, streamed) or an
    iterable of item dicts.  Each selected item (probability ``fraction``)
    gives a row ``{"questionId": id + "_cn", "question": <Chinese text with
    the English names, brands, numbers and some words left in Latin>,
    "question_type", "answer", "hypothesis", "label"}``.  About 3% of the rows
    have no ``_cn`` suffix, about 2% are duplicated, about 2% of extra rows
    have ids that pair with nothing (including an ``_cn_cn`` id), and about
    2% of the lines are blank; each kind occurs at least once when there is
    at least one row.  ``surrogates``: :data:`SURROGATE_CASES` in about 5% of
    the questions (:func:`with_surrogates`; a number: that share).  Returns a summary dict.
    """
    rng = _rng(seed, "cn")
    entries: list = []          # dict rows, or None for a blank line
    kinds = {"no_suffix": 0, "unmatched": 0, "duplicate": 0, "blank": 0}
    paired = 0
    for item in _iter_lme_questions(longmemeval_path_or_items):
        if fraction < 1.0 and rng.random() >= fraction:
            continue
        qid = item.get("question_id")
        qid = "undefined" if qid is None and "question_id" not in item else qid
        qid = json.dumps(qid) if not isinstance(qid, str) else qid
        qtype = item.get("question_type")
        row = {"questionId": qid + "_cn",
               "question": _cn_question(item.get("question"), qtype, rng),
               "question_type": qtype if qtype is not None else "unknown",
               "answer": item.get("answer"),
               "hypothesis": rng.choice(_CN_HYPOTHESES),
               "label": rng.random() < 0.6}
        if rng.random() < 0.03:
            row["questionId"] = qid
            kinds["no_suffix"] += 1
        entries.append(row)
        paired += 1
        r = rng.random()
        if r < 0.02:
            entries.append(dict(row))
            kinds["duplicate"] += 1
        elif r < 0.04:
            entries.append(_cn_unmatched(rng))
            kinds["unmatched"] += 1
        elif r < 0.06:
            entries.append(None)
            kinds["blank"] += 1
    rows = [e for e in entries if e is not None]
    if rows:
        if not kinds["no_suffix"]:
            rows[0]["questionId"] = rows[0]["questionId"][:-3]
            kinds["no_suffix"] += 1
        if not kinds["duplicate"]:
            k = rng.randrange(len(entries))
            while entries[k] is None:
                k = rng.randrange(len(entries))
            entries.insert(k + 1, dict(entries[k]))
            kinds["duplicate"] += 1
        if not kinds["unmatched"]:
            entries.insert(rng.randint(0, len(entries)), _cn_unmatched(rng))
            kinds["unmatched"] += 1
        if not kinds["blank"]:
            entries.insert(rng.randint(1, len(entries)), None)
            kinds["blank"] += 1
    n_surrogates, rates = 0, _surrogate_rates(surrogates)
    with _atomic_open(path) as f:
        for e in entries:
            line = "" if e is None else escape_lone(json.dumps(e, ensure_ascii=False))
            if surrogates and e is not None:
                line, k = with_surrogates(line, "question", rates[1], seed)
                n_surrogates += k
            f.write(line + "\n")
    return {"path": os.fspath(path), "rows": sum(e is not None for e in entries),
            "paired_rows": paired, "lines": len(entries), **kinds,
            **({"surrogate_strings": n_surrogates} if surrogates else {})}


def _cn_unmatched(rng):
    if rng.random() < 0.3:
        qid = _randstr(rng, _HEX, 8) + "_cn_cn"
    else:
        qid = "zz" + _randstr(rng, _HEX, 6) + "_cn"
    return {"questionId": qid, "question": "这个问题在英文数据里没有对应的条目？",
            "question_type": "unknown", "answer": None,
            "hypothesis": rng.choice(_CN_HYPOTHESES), "label": False}
