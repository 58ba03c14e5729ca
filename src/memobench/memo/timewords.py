"""exp3's time-aware pieces (docs/harnesses.md#exp3cjs): the relative window that sets
the hard filter's threshold, and the date words T1 appends to the window.

Matching is case-insensitive on the raw question with ASCII word boundaries
(JS regular expressions without the u flag); ``\\s`` is JS's whitespace class.
"""

from __future__ import annotations

import re

from ..datasets.dates import parse_lme

DAY_MS = 86_400_000
_B = r"(?<![A-Za-z0-9_])"  # JS \b before a word character (ASCII)
_E = r"(?![A-Za-z0-9_])"  # JS \b after a word character
_S = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+"

# (pattern, days), the first match wins.
RELATIVE = [
    (rf"{_B}yesterday{_E}", 1),
    (rf"{_B}today{_E}", 1),
    (rf"{_B}(?:last|past|this){_S}(?:week|weekend){_E}", 7),
    (rf"{_B}(?:last|past|this){_S}month{_E}", 30),
    (rf"{_B}(?:last|past|this){_S}year{_E}", 365),
    (rf"(?:{_B}(?:a{_S}few|couple{_S}of|few){_S})?{_B}days{_S}ago{_E}", 5),
    (rf"{_B}recent(?:ly)?{_E}", 14),
    (rf"{_B}last{_S}(?:summer|winter|spring|autumn|fall){_E}", 90),
]
RELATIVE = [(re.compile(p, re.IGNORECASE | re.ASCII), d) for p, d in RELATIVE]

_DATE_WORDS = re.compile(
    rf"{_B}(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june"
    rf"|july|august|september|october|november|december|weekend|summer|winter|spring|autumn|fall"
    rf"|(?:19|20)[0-9][0-9]){_E}",
    re.IGNORECASE | re.ASCII,
)


def relative_days(question: str) -> int | None:
    for pattern, days in RELATIVE:
        if pattern.search(question):
            return days
    return None


def relative_min_time(question: str, question_date: str | None) -> int | None:
    """anchor - days * 1 day, or None when no pattern matches or the anchor is NaN."""
    days = relative_days(question)
    if days is None:
        return None
    anchor = parse_lme(question_date if question_date is not None else "undefined")
    if anchor is None:
        return None
    return anchor - days * DAY_MS


def date_words(question: str) -> list[str]:
    """Whole-word date words of the raw question, lowercased, de-duplicated in order."""
    out: list[str] = []
    for m in _DATE_WORDS.finditer(question):
        w = m.group(0).lower()
        if w not in out:
            out.append(w)
    return out
