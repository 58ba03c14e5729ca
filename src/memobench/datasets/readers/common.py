"""What the format readers share: JS ``String()`` coercions of a turn's and a
question's fields, the lone-surrogate checks of the strings the tables keep,
JSON read within the :mod:`jsonguard` bounds with errors at their exact byte,
and the garbage collector paused while a file is read."""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager

from ...core.errors import DataError
from ...core.jsmath import MISSING, js_string
from ...core.tables import LONE_SURROGATE
from ..jsonguard import LimitExceeded, check_bytes, lone_escape_byte, may_hold_lone

DAY_MS = 86_400_000  # a day, in ms: the date fallbacks' step


def _turn_text(turn, field: str) -> str:
    """``String(turn.<field>)``; a null turn or a missing field gives ''."""
    if not isinstance(turn, dict) or field not in turn:
        return ""
    return js_string(turn[field])


def _opt_str(value):
    return None if value is None or isinstance(value, (dict, list)) else js_string(value)


class _Lone:
    """The checks of one item whose bytes may hold lone surrogates (a JSON
    escape of U+D800 to U+DFFF that is not half of a pair). Turn texts,
    questions and answers keep them (tables.utf8_text); every other string
    that the tables keep (ids, dates, types, roles) must hold none: those are
    written to outputs that must be valid UTF-8 (rankings, TREC runs, reports),
    and replacing one would merge or reorder ids. ``start``: a byte at or
    before the item's first, where the error's byte is looked for."""

    def __init__(self, path, item, start: int = 0):
        self.path, self.item, self.start = path, item, start

    def __call__(self, field: str, value):
        if type(value) is str and not value.isascii() and LONE_SURROGATE.search(value):
            unit = ord(LONE_SURROGATE.search(value).group())
            at = lone_escape_byte(self.path, self.start, value)
            where = "" if at is None else f" at byte {at}"
            raise DataError(self.path, self.item, f"field {field!r} holds a lone surrogate (\\u{unit:04x}){where}; "
                            "memobench keeps those only in turn texts, questions and answers")
        return value

    def all(self, field: str, values) -> None:
        for v in values:
            self(field, v)


def _question_type(value) -> str:
    if value is MISSING or value is None or value == "":
        return "unknown"
    return js_string(value)


def _question_text(path, index: int, item: dict) -> str:
    q = item.get("question", MISSING)
    if not isinstance(q, str):
        got = "missing" if q is MISSING else type(q).__name__
        raise DataError(path, f"item {index}", f"field 'question' must be a string, got {got}")
    return q


def _first_line(e: Exception) -> str:
    text = e.args[0] if e.args else str(e)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return str(text).strip().splitlines()[0] if str(text).strip() else type(e).__name__


@contextmanager
def _gc_paused():
    """The cyclic garbage collector off while a file is read: ijson makes
    millions of objects (every turn an object), none in a cycle, freed by
    their reference counts, and each of the collector's passes over the young
    ones costs time for nothing (about a tenth of the stage)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _at(offset: int, size: int) -> str:
    return f"{offset} (end of file)" if offset >= size else str(offset)


def _limit_error(path, item, e: LimitExceeded) -> DataError:
    return DataError(path, item, f"{e.what} at byte {e.offset} (a bound of memobench, see the README)")


def _loads(path, data: bytes, item=None, start: int = 0):
    """``json.loads`` of one document (a file, or a line at file offset
    ``start``) within the :mod:`jsonguard` bounds. The first problem in byte
    order is reported, at its exact file offset: a limit violation, invalid
    UTF-8 (the first bad byte) or invalid JSON (where Python's parser stops:
    the start of the token it cannot use, or the end of the data)."""
    limit = None
    try:
        check_bytes(data, start=start)
    except LimitExceeded as e:
        limit, data = e, data[: e.offset - start]  # the parser never sees the offending bytes
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(path, item, f"invalid UTF-8 at byte {start + e.start} ({e.reason})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        where = start + len(text[: e.pos].encode("utf-8"))
        if limit is None or where < limit.offset:
            msg = e.msg.removesuffix(" at")  # "Unterminated string starting at"
            raise DataError(path, item, f"invalid or truncated JSON: {msg} at byte {where}") from None
    if limit is not None:
        raise _limit_error(path, item, limit)
    return value


def _load_json(path):
    """The file's JSON value, and whether it may hold lone surrogates."""
    with open(path, "rb") as f:
        data = f.read()
    return _loads(path, data), may_hold_lone(data)
