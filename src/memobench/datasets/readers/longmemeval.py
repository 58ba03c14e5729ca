"""The LongMemEval format's reader: the file streamed item by item with
ijson so memory stays flat (LongMemEval-M is 2.7 GB), each haystack's
sessions read column by column, with the M harness's element scanner for a
file that does not parse (``lenient``). A large file may instead be read in
parts at once (inparts.py, which appends the parts' rows as this reader
would have written them)."""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from itertools import chain, repeat
from pathlib import Path

import ijson

from ...core.errors import DataError
from ...core.jsmath import MISSING, js_string
from ...core.progress import Progress
from ...core.tables import LONE_SURROGATE, TableWriter, escape_lone, utf8_text
from ..dates import parse_lme_all
from ..jsonguard import MARK, GuardedReader, may_hold_lone, parse_error_offset, restore
from ..store import SessionStore, _Tables
from .common import (DAY_MS, _at, _first_line, _gc_paused, _limit_error, _Lone, _opt_str, _question_text,
                     _question_type, _turn_text)


def _answer_json(item: dict) -> str | None:
    """The raw ``answer`` as JSON text (a lone surrogate written as its
    ``\\udXXX`` escape, as JSON.stringify writes it: the text stays UTF-8)."""
    if "answer" not in item:
        return None
    return escape_lone(json.dumps(item["answer"], ensure_ascii=False, default=float))


def _lme_turns(session) -> tuple[list, list, list]:
    """(texts, roles, has_answer) of a LongMemEval session's turns: the text
    ``String(turn.content)`` ('' for a null turn or no content), the role
    (None unless a scalar) and has_answer as the official scorer tests it
    (Python truthiness; a missing key or a non-object turn is false). Column
    by column with C-level maps when every turn is an object, every content a
    string and every role a string or null, as in real files; the coercions
    value by value otherwise."""
    turns = session if isinstance(session, list) else []
    n = len(turns)
    if not set(map(type, turns)) <= {dict}:
        return ([_turn_text(t, "content") for t in turns],
                [_opt_str(t.get("role")) if isinstance(t, dict) else None for t in turns],
                [isinstance(t, dict) and bool(t.get("has_answer")) for t in turns])
    texts = list(map(dict.get, turns, repeat("content", n), repeat(MISSING, n)))
    if not set(map(type, texts)) <= {str}:
        texts = ["" if v is MISSING else js_string(v) for v in texts]
    roles = list(map(dict.get, turns, repeat("role", n)))
    if not set(map(type, roles)) <= {str, type(None)}:
        roles = [_opt_str(r) for r in roles]
    return texts, roles, list(map(bool, map(dict.get, turns, repeat("has_answer", n))))


_ONE_PLUS = (1).__add__  # has_answer False/True -> flag 1/2


def _restored(values: list) -> list:
    """``restore(values)``: when its values are strings, the list itself if
    none holds a mark (a join and a memchr instead of a call per value), else
    a call for each that does."""
    try:
        if MARK not in "".join(values):
            return values
    except TypeError:  # not all strings
        return restore(values)
    return [restore(v) if MARK in v else v for v in values]


def _lme_columns(sessions: list, marks: bool) -> tuple[list, list, list, list]:
    """(turn counts, texts, roles, has_answer) of a haystack's sessions, each
    column over all its turns in order (as :func:`_lme_turns` gives them
    session by session): one C-level pass per column when every session is a
    list and every turn an object, as in real files. ``marks``: the strings
    are ijson's from :class:`jsonguard.LoneEscapes`' stream, restored here
    (only the columns kept: restoring a turn's keys changes no lookup, since
    a restored key is never one of the plain keys read)."""
    if set(map(type, sessions)) <= {list}:
        turns = list(chain.from_iterable(sessions))
        if set(map(type, turns)) <= {dict}:
            n = len(turns)
            texts = list(map(dict.get, turns, repeat("content", n), repeat(MISSING, n)))
            roles = list(map(dict.get, turns, repeat("role", n)))
            if marks:
                texts, roles = _restored(texts), _restored(roles)
            if not set(map(type, texts)) <= {str}:
                texts = ["" if v is MISSING else js_string(v) for v in texts]
            if not set(map(type, roles)) <= {str, type(None)}:
                roles = [_opt_str(r) for r in roles]
            # has_answer's truthiness is the same before and after restore
            return (list(map(len, sessions)), texts,
                    roles, list(map(bool, map(dict.get, turns, repeat("has_answer", n)))))
    lens, texts, roles, has = [], [], [], []
    for session in sessions:
        t, r, h = _lme_turns(restore(session) if marks else session)
        lens.append(len(t))
        texts += t
        roles += r
        has += h
    return lens, texts, roles, has


def _lme_haystack(item: dict, hid: int, store: SessionStore, haystacks: TableWriter,
                  lone: _Lone | None = None, marks: bool = False) -> tuple[list[str], int]:
    """Write one LongMemEval item's haystack; returns (session ids, date
    fallbacks). ``lone``: the item may hold lone surrogates (their checks);
    ``marks``: its sessions' strings are still to be restored (jsonguard)."""
    sessions = item.get("haystack_sessions")
    sessions = sessions if isinstance(sessions, list) else []
    ids = item.get("haystack_session_ids")
    ids = ids if isinstance(ids, list) else []
    dates = item.get("haystack_dates")
    dates = dates if isinstance(dates, list) else []
    n = len(sessions)
    sids = ids[:n]
    if len(sids) < n or not set(map(type, sids)) <= {str}:
        padded = chain(sids, repeat(None, n - len(sids)))  # a missing id reads as null
        sids = ["s" + str(i) if raw is None else js_string(raw) for i, raw in enumerate(padded)]
    raw_dates = dates[:n]
    if len(raw_dates) == n and set(map(type, raw_dates)) <= {str}:
        strs = raw_dates
    else:
        strs = [js_string(d) for d in raw_dates] + [js_string(MISSING)] * (n - len(raw_dates))
        raw_dates = [None if d is None else x for d, x in zip(raw_dates, strs)] + [None] * (n - len(raw_dates))
    bases = parse_lme_all(strs)
    fallbacks = [b is None for b in bases]
    if True in fallbacks:
        bases = [(len(dates) - i) * DAY_MS if b is None else b for i, b in enumerate(bases)]
    lens, texts, roles, has = _lme_columns(sessions, marks)
    if lone is not None and any(LONE_SURROGATE.search("".join(col)) for col in (sids, strs, filter(None, roles))):
        a = 0  # the first of them, in the order the checks were made session by session
        for sid, date, k in zip(sids, strs, lens):
            lone("haystack_session_ids", sid)
            lone("haystack_dates", date)
            lone.all("role", roles[a : a + k])
            a += k
    keys = store.haystack(sids, lens, texts, roles, has, lone=lone is not None)
    haystacks.extend(haystack_id=[hid] * n, position=range(n), session_key=keys, session_id=sids,
                     date=raw_dates, base_time=bases, date_fallback=fallbacks)
    return sids, sum(fallbacks)


def _lme_gold(raw_ids, answers) -> list[str]:
    """The harnesses' gold (docs/harnesses.md#sessions-and-events): each ``String(answer)`` found among
    ``String()`` of the raw ``haystack_session_ids``, first occurrences in answer
    order. The raw list, not the session ids: an id past the last session is
    gold (and never ranked), a session's ``"s<i>"`` fallback id is not, and a
    null id is the string ``"null"``. A string of answers is iterated by code
    point, as ``for (const id of ...)`` does; any other non-list gives none."""
    id_set = {js_string(x) for x in raw_ids} if isinstance(raw_ids, list) else set()
    gold: list[str] = []
    for a in answers if isinstance(answers, (list, str)) else ():
        a = js_string(a)
        if a in id_set and a not in gold:
            gold.append(a)
    return gold


class _LmeTables(_Tables):
    """The tables of a LongMemEval-format file, filled item by item."""

    def __init__(self, path: Path, paths: dict, part: bool = False):
        super().__init__(paths, part)
        self.path = path
        self.stats = {"questions": 0, "date_fallbacks": 0, "duplicate_question_ids": 0, "unparseable_items": 0}
        self.seen_ids: set[str] = set()

    def add(self, index: int, item, lone: _Lone | None = None, marks: bool = False) -> None:
        """``lone``: the item may hold lone surrogates (their checks);
        ``marks``: its strings are ijson's from :class:`jsonguard.LoneEscapes`'
        stream, to be restored (all but its sessions' here, where they are
        read: restoring the whole item, every turn object again, would cost
        more than the rest of its reading)."""
        if not isinstance(item, dict):
            raise DataError(self.path, f"item {index}", f"expected an object, got {type(item).__name__}")
        if marks:
            item = {k: v if k == "haystack_sessions" else restore(v) for k, v in item.items()}
        qid = js_string(item.get("question_id", MISSING))
        if qid in self.seen_ids:
            self.stats["duplicate_question_ids"] += 1
        self.seen_ids.add(qid)
        question = _question_text(self.path, index, item)
        question_type = _question_type(item.get("question_type", MISSING))
        question_date = _opt_str(item.get("question_date"))
        answers = item.get("answer_session_ids")
        answer_ids = [js_string(a) for a in answers] if isinstance(answers, list) else []
        if lone is not None:
            lone("question_id", qid)
            lone("question_type", question_type)
            lone("question_date", question_date)
            lone.all("answer_session_ids", answer_ids)
        _, fallbacks = _lme_haystack(item, index, self.store, self.haystacks, lone, marks)
        self.stats["date_fallbacks"] += fallbacks
        gold = _lme_gold(item.get("haystack_session_ids"), answers)
        question, question_exact = utf8_text(question) if lone is not None else (question, None)
        self.questions.append(
            q_index=index, question_id=qid, question=question, question_type=question_type,
            question_date=question_date, haystack_id=index, gold=gold,
            paired_question_id=None, parse_error=False, answer=_answer_json(item),
            answer_session_ids=answer_ids, question_exact=question_exact, evidence=None,
        )
        self.stats["questions"] += 1

    def add_unparseable(self, index: int) -> None:
        """An element the M harness's scanner emits but JSON.parse rejects: it is
        skipped, yet it still counts toward the segment offsets."""
        self.questions.append(
            q_index=index, question_id=f"#unparseable-{index}", question="", question_type="unknown",
            question_date=None, haystack_id=-1, gold=[], paired_question_id=None, parse_error=True,
            answer=None, answer_session_ids=[], question_exact=None, evidence=None,
        )
        self.stats["unparseable_items"] += 1

    def summary(self) -> dict:
        return {**self.stats, "items": self.stats["questions"] + self.stats["unparseable_items"],
                "sessions": len(self.store.keys), "events": self.store.n_events}


def read_longmemeval(path: Path, paths: dict, log=print, lenient: bool = False) -> dict:
    """Stream a LongMemEval JSON array into the tables at ``paths`` (by table name).

    ``lenient`` follows the streamed M harnesses (run-m, exp*-m): an element
    that does not parse is skipped and counted instead of stopping the run
    (docs/harnesses.md#streaming-the-m-file). Otherwise, like run.cjs's JSON.parse of the whole file,
    malformed JSON is an error naming the item and the exact byte. Either way
    the bytes pass :mod:`jsonguard` first: nesting deeper than ``MAX_DEPTH`` or
    a number literal longer than ``MAX_NUMBER`` characters is an error."""
    size = path.stat().st_size
    progress = Progress(log, f"normalize {path.name}", unit="items")
    tables = _LmeTables(path, paths)
    reading = _Reading()
    try:
        with open(path, "rb") as raw, _gc_paused():
            f = GuardedReader(raw, escapes=True)
            try:
                _read_items(f, tables, progress, size, reading)
            except ijson.JSONError as e:
                index = reading.index
                where = parse_error_offset(GuardedReader(raw, escapes=True), f.handed, hint=f.handed - f.last)
                if f.error is not None and (where is None or where >= f.handed):
                    raise _limit_error(path, f"item {index + 1}", f.error) from None
                where = f.escapes.to_raw(f.handed if where is None else where)
                if not lenient:
                    what = "invalid UTF-8" if "UTF8" in _first_line(e) else "invalid or truncated JSON"
                    raise DataError(path, f"item {index + 1}", f"{what} at byte {_at(where, size)}: "
                                    f"{_first_line(e)}") from None
                log(f"malformed JSON after item {index} (at byte {where}): re-reading with the M harness's "
                    "element scanner, which skips elements that do not parse")
                tables.abort()
                tables = _LmeTables(path, paths)
                _normalize_scanned(GuardedReader(raw), tables, progress, size)
            else:
                if f.error is not None:  # the bytes before the violation were a complete document
                    raise _limit_error(path, f"item {reading.index + 1}", f.error)
        if tables.stats["questions"] + tables.stats["unparseable_items"] == 0:
            raise DataError(path, None, "no items: expected a JSON array of LongMemEval objects")
        tables.close()
        stats = tables.summary()
    except BaseException:
        tables.abort()
        raise
    progress(stats["items"], ", done", force=True)
    return stats


class _Reading:
    """Where a pass over a file's items is: the index of the last item read."""

    index = -1


def _read_items(f: GuardedReader, tables: _LmeTables, progress, size: int, reading: _Reading) -> None:
    """Every item ijson reads from ``f`` (a GuardedReader of ``size`` raw
    bytes, with escapes) into ``tables``, ``reading.index`` kept up to date."""
    escapes = f.escapes.offsets  # raw offsets of the rewrites so far, in order; grows in place
    start = 0  # a byte at or before the next item's first
    for reading.index, item in enumerate(ijson.items(f, "item")):
        index = reading.index
        # Rewrites (rare) since ``start`` may be in this item: its strings are turned back
        # and checked. None there: it has no lone surrogate and no NUL, nothing to do.
        if escapes and bisect_left(escapes, start) < len(escapes):
            tables.add(index, item, _Lone(tables.path, f"item {index}", start), marks=True)
        else:
            tables.add(index, item)
        start = f.escapes.to_raw(f.handed - f.last)
        progress(index + 1, f", {f.tell() * 100 // max(size, 1)}% of bytes")

_SCAN = re.compile(rb'[{}"\\]')


def _normalize_scanned(f: GuardedReader, tables: _LmeTables, progress, size: int) -> int:
    """run-m's brace-depth scanner (docs/harnesses.md#streaming-the-m-file): every top-level object is
    emitted once in file order and parsed on its own; a failure skips it. The
    guard ends the bytes at a violation of its bounds, which is then an error."""
    index = -1
    start = 0  # a byte at or before the next element's first
    for element in scan_elements(f):
        if element is None and f.error is not None:
            break
        if element is None:  # the file ends inside an element: never emitted
            tables.stats["truncated_tail"] = 1
            continue
        index += 1
        try:
            item = json.loads(element.decode("utf-8", "replace"))
        except ValueError:
            tables.add_unparseable(index)
            continue
        tables.add(index, item, _Lone(tables.path, f"item {index}", start) if may_hold_lone(element) else None)
        start = max(0, f.tell() - SCAN_CHUNK)
        progress(index + 1, f", {f.tell() * 100 // max(size, 1)}% of bytes (scanner)")
    if f.error is not None:
        raise _limit_error(tables.path, f"item {index + 1}", f.error)
    return index


SCAN_CHUNK = 1 << 20


def scan_elements(f, chunk_size: int = SCAN_CHUNK):
    """Yield the bytes of each top-level ``{...}`` element of ``f`` (opened in
    binary mode, read from the start), then None if the file ends inside one.
    Structure characters are ASCII, so scanning UTF-8 bytes equals scanning
    the decoded text."""
    f.seek(0)
    depth, in_string, skip_until = 0, False, 0
    parts: list[bytes] = []
    start = None  # offset of the open element's "{" in the current chunk
    offset = 0
    while True:
        chunk = f.read(chunk_size)
        if not chunk:
            if depth > 0:
                yield None
            return
        for m in _SCAN.finditer(chunk):
            pos = m.start()
            if offset + pos < skip_until:
                continue  # the character after a backslash inside a string
            ch = chunk[pos]
            if in_string:
                if ch == 0x5C:  # backslash
                    skip_until = offset + pos + 2
                elif ch == 0x22:
                    in_string = False
            elif ch == 0x22:
                in_string = True
            elif ch == 0x7B:  # {
                if depth == 0:
                    start, parts = pos, []
                depth += 1
            elif ch == 0x7D:  # }  (a stray one drives depth negative, as in the original)
                depth -= 1
                if depth == 0:
                    parts.append(chunk[start : pos + 1])
                    yield b"".join(parts)
                    parts, start = [], None
        if start is not None:
            parts.append(chunk[start:])
            start = 0
        offset += len(chunk)
