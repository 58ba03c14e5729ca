"""JSON surrogate escapes, paired and lone, put into string literals of a
generated file's JSON text (:data:`SURROGATE_CASES`, :func:`with_surrogates`)."""

from __future__ import annotations

import re

from .vocabulary import _rng

#: What ``surrogates=True`` puts into about :data:`SURROGATE_RATE` of the turn
#: texts (and :data:`SURROGATE_QUESTION_RATE` of the questions): JSON
#: fragments inserted into the string literal, one or two per chosen string.
#: JavaScript's ``JSON.parse`` keeps a lone surrogate as a lone UTF-16 code
#: unit; a high one followed by an escaped ASCII letter stays two units.
SURROGATE_CASES = (
    "lone_high",         # \ud83d before the text that was there
    "lone_low",          # \udc00
    "high_then_ascii",   # \ud83d\u0061: a high surrogate, then an escaped ASCII letter
    "pair_escaped",      # a valid pair as two escapes (an emoji, or Han Extension B)
    "astral_raw",        # an astral character as raw UTF-8 (an emoji, or Han Extension B)
    "low_then_high",     # \udc00\ud83d: two lone surrogates in the wrong order
    "high_before_pair",  # \ud83d\ud83d\ude00: a lone high, then a pair
    "high_at_end",       # a lone high surrogate closing the string
)
SURROGATE_RATE = 0.02
SURROGATE_QUESTION_RATE = 0.05
_ASTRAL = ("\U0001F600", "\U0001F44D", "\U00020000", "\U0002A700", "\U00010400")
_LITERAL_PART = re.compile(r'\\u[0-9a-fA-F]{4}|\\.|[^\\]', re.S)  # one character of a literal's body


def _esc(rng, unit: int) -> str:
    """``unit`` as a JSON escape, its hex digits in either case (JSON allows both)."""
    h = f"{unit:04x}"
    return "\\u" + (h.upper() if rng.random() < 0.25 else h)


def _pair(rng, ch: str) -> str:
    u = ch.encode("utf-16-be")
    return _esc(rng, int.from_bytes(u[:2], "big")) + _esc(rng, int.from_bytes(u[2:], "big"))


def _surrogate_fragment(rng, case: str) -> str:
    high, low = rng.randrange(0xD800, 0xDC00), rng.randrange(0xDC00, 0xE000)
    if case in ("lone_high", "high_at_end"):
        return _esc(rng, high)
    if case == "lone_low":
        return _esc(rng, low)
    if case == "high_then_ascii":
        return _esc(rng, high) + _esc(rng, ord(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")))
    if case == "pair_escaped":
        return _pair(rng, rng.choice(_ASTRAL))
    if case == "astral_raw":
        return rng.choice(_ASTRAL)
    if case == "low_then_high":
        return _esc(rng, low) + _esc(rng, high)
    if case == "high_before_pair":
        return _esc(rng, high) + _pair(rng, rng.choice(_ASTRAL))
    raise ValueError(f"unknown surrogate case {case!r}")  # pragma: no cover


def _surrogate_body(body: str, rng) -> str:
    """A string literal's body (JSON text between the quotes) with one or two
    fragments inserted between its characters (never inside an escape)."""
    parts = _LITERAL_PART.findall(body)
    cases = rng.sample(SURROGATE_CASES, rng.choice((1, 1, 2)))
    for case in sorted(cases, key=lambda c: c == "high_at_end"):
        pos = len(parts) if case == "high_at_end" else rng.randrange(len(parts) + 1)
        parts.insert(pos, _surrogate_fragment(rng, case))
    return "".join(parts)


def _surrogate_rates(surrogates) -> tuple[float, float]:
    """(turn rate, question rate) of a ``surrogates`` argument: True for the
    defaults, a number for that rate in both."""
    if surrogates is True:
        return SURROGATE_RATE, SURROGATE_QUESTION_RATE
    return float(surrogates), float(surrogates)


def with_surrogates(json_text: str, key: str, rate: float, seed) -> tuple[str, int]:
    """``json_text`` with :func:`_surrogate_body`'s fragments in about ``rate``
    of the string values of ``key`` (``"key": "..."``, as json.dumps writes
    them), and how many were changed. Whether and how a string changes
    depends only on the seed, the key and the string, so a session that
    recurs in many haystacks carries the same text in each."""
    n = 0

    def sub(m):
        nonlocal n
        rng = _rng(seed, "surrogates", key, m.group(2))
        if rng.random() >= rate:
            return m.group(0)
        n += 1
        return m.group(1) + _surrogate_body(m.group(2), rng) + '"'

    pattern = re.compile('("' + re.escape(key) + r'": ")((?:[^"\\]|\\.)*)"')
    return pattern.sub(sub, json_text), n
