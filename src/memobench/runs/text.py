"""A run file's text: decoded as UTF-8 (a line-numbered error otherwise),
positions to line numbers, and whether a field parses."""

from __future__ import annotations

import bisect

from ..core.errors import DataError


def line_of(starts: list[int], pos: int) -> int:
    return bisect.bisect_right(starts, pos)


def decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(path, f"line {line}", "is not UTF-8 text; write the run file in UTF-8") from None


def parses(kind, text: str) -> bool:
    try:
        kind(text)
        return True
    except ValueError:
        return False
