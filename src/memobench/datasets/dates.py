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

__all__ = ["parse_lme", "parse_locomo", "iso_utc_ms", "MONTHS"]

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
