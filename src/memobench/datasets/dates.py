"""Session date parsing (docs/harnesses.md#dates), with V8's ISO date-time rules.

Both parsers return UTC epoch milliseconds as ``int``, or ``None`` where the
JavaScript yields ``NaN`` (the caller then applies the harness fallback).

V8 ISO rules applied after the regex match:

* month 1..12;
* day 1..31, *not* checked against the month (``2023-02-30`` is 2 March);
* hour 0..24, where 24 is allowed only with minute 00 (24:00 = next day 00:00);
* minute 0..59; seconds are always 00; the time zone is UTC.

Standard library only.
"""

from __future__ import annotations

import re

__all__ = ["parse_lme", "parse_lme_all", "parse_locomo", "iso_utc_ms", "MONTHS"]

# JS `.` excludes the line terminators \n, \r, U+2028 and U+2029.
_JS_DOT = "[^\n\r\u2028\u2029]"

# ^(\d{4})/(\d{2})/(\d{2}).*?(\d{2}):(\d{2})  (ASCII digits, shortest run)
_LME_RE = re.compile(
    r"([0-9]{4})/([0-9]{2})/([0-9]{2})" + _JS_DOT + r"*?([0-9]{2}):([0-9]{2})"
)

# ^(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) ([A-Za-z]+), (\d{4})
_LOCOMO_RE = re.compile(
    r"([0-9]{1,2}):([0-9]{2}) (am|pm) on ([0-9]{1,2}) ([A-Za-z]+), ([0-9]{4})"
)

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_INDEX = {name: i + 1 for i, name in enumerate(MONTHS)}

_MS_PER_DAY = 86_400_000


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of the proleptic Gregorian date y-m-d (d may overflow)."""
    y -= m <= 2
    era = y // 400  # floor division (Hinnant's algorithm)
    yoe = y - era * 400
    mp = (m + 9) % 12  # March = 0
    doy = (153 * mp + 2) // 5  # day-of-year (from 1 March) of the 1st of the month
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468 + (d - 1)


def iso_utc_ms(year: int, month: int, day: int, hour: int, minute: int) -> int | None:
    """Epoch ms of ``YYYY-MM-DDThh:mm:00Z`` under V8's ISO rules, or None (NaN)."""
    if not (1 <= month <= 12):
        return None
    if not (1 <= day <= 31):
        return None
    if not (0 <= minute <= 59):
        return None
    if not (0 <= hour <= 24):
        return None
    if hour == 24 and minute != 0:
        return None
    days = _days_from_civil(year, month, day)
    return days * _MS_PER_DAY + (hour * 60 + minute) * 60_000


def parse_lme(s: str) -> int | None:
    """LongMemEval date, e.g. ``2023/05/20 (Sat) 02:21`` -> UTC epoch ms, or None."""
    m = _LME_RE.match(s)
    if m is None:
        return None
    return iso_utc_ms(*map(int, m.groups()))


_DAY_MS: dict[str, int | None] = {}  # "YYYY/MM/DD" -> the day's epoch ms, None if V8 rejects it
_TIME_MS: dict[str, int | None] = {}  # "hhmm" -> ms into the day, None if V8 rejects it
_CACHED = 1 << 16  # entries each cache keeps at most (a file of unique dates cannot grow them)


def parse_lme_all(dates: list[str]) -> list[int | None]:
    """:func:`parse_lme` of each date of a list (a haystack's): the regex
    match alone per date, the day and the time of day each computed once and
    kept (a haystack's dates share days; the times of day are few)."""
    days, times = _DAY_MS, _TIME_MS
    if len(days) > _CACHED:
        days.clear()
    out = []
    for s, m in zip(dates, map(_LME_RE.match, dates)):
        if m is None:
            out.append(None)
            continue
        key = s[:10]  # the three groups and their slashes: the match starts there
        day = days.get(key, MISSING_DAY)
        if day is MISSING_DAY:
            y, mo, d = map(int, m.group(1, 2, 3))
            day = days[key] = (None if not (1 <= mo <= 12 and 1 <= d <= 31)
                               else _days_from_civil(y, mo, d) * _MS_PER_DAY)
        hm = m.group(4) + m.group(5)
        t = times.get(hm, MISSING_DAY)
        if t is MISSING_DAY:
            h, mi = int(m.group(4)), int(m.group(5))
            t = times[hm] = (None if not (0 <= mi <= 59 and 0 <= h <= 24) or (h == 24 and mi != 0)
                             else (h * 60 + mi) * 60_000)
        out.append(None if day is None or t is None else day + t)
    return out


MISSING_DAY = object()


def parse_locomo(s: str) -> int | None:
    """LoCoMo date, e.g. ``1:56 pm on 8 May, 2023`` -> UTC epoch ms, or None."""
    m = _LOCOMO_RE.match(s)
    if m is None:
        return None
    h_s, mi_s, ampm, d_s, mon, y_s = m.groups()
    month = _MONTH_INDEX.get(mon)
    if month is None:
        return None
    h = int(h_s)
    if ampm == "pm" and h != 12:
        h += 12
    elif ampm == "am" and h == 12:
        h = 0
    return iso_utc_ms(int(y_s), month, int(d_s), h, int(mi_s))
