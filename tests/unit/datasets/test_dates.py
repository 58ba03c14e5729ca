"""Tests for memobench.datasets.dates (docs/harnesses.md#dates).

Expected values are computed independently with ``calendar.timegm``; day
overflow and 24:00 are rolled over by hand.  One extra test cross-checks the
V8 ISO rules (month/day/hour/minute ranges) against ``Date.parse`` in node.
"""

from __future__ import annotations

import calendar
import json
import shutil
import subprocess

import pytest

from memobench.datasets.dates import iso_utc_ms, parse_lme, parse_lme_all, parse_locomo


def ms(y, mo, d, h=0, mi=0):
    return calendar.timegm((y, mo, d, h, mi, 0)) * 1000


# ---------------------------------------------------------------------------
# parse_lme
# ---------------------------------------------------------------------------

LME_CASES = [
    # valid
    ("2023/05/20 (Sat) 02:21", ms(2023, 5, 20, 2, 21)),
    ("2023/05/20 02:21", ms(2023, 5, 20, 2, 21)),
    ("2023/05/2002:21", ms(2023, 5, 20, 2, 21)),  # empty middle run
    ("2023/01/01 (Sun) 00:00", ms(2023, 1, 1)),
    ("1999/12/31 (Fri) 23:59", ms(1999, 12, 31, 23, 59)),
    ("1969/12/31 (Wed) 23:59", -60_000),
    ("0000/01/01 00:00", -62167219200000),  # year 0 is valid ISO
    # day overflow is NOT checked against the month: rolls into the next month
    ("2023/02/30 (Thu) 10:00", ms(2023, 3, 2, 10, 0)),
    ("2023/02/31 (Fri) 00:00", ms(2023, 3, 3)),
    ("2024/02/30 (Fri) 00:00", ms(2024, 3, 1)),  # leap year
    ("2023/04/31 (Mon) 12:00", ms(2023, 5, 1, 12)),
    ("2023/12/31 12:00", ms(2023, 12, 31, 12)),
    # 24:00 is the next day 00:00
    ("2023/05/20 (Sat) 24:00", ms(2023, 5, 21, 0, 0)),
    ("2023/12/31 (Sun) 24:00", ms(2024, 1, 1, 0, 0)),
    ("2023/02/31 24:00", ms(2023, 3, 4)),
    # the shortest run: the first dd:dd after the date
    ("2023/05/20 (Sat) 02:21 and 03:45", ms(2023, 5, 20, 2, 21)),
    ("2023/05/20 123:45", ms(2023, 5, 20, 23, 45)),  # "12" is not followed by ":"
    ("2023/05/20 x 99:99 then 01:02", None),  # first candidate 99:99 wins and is invalid
    ("2023/05/20 10:301", ms(2023, 5, 20, 10, 30)),  # trailing text is fine
    ("2023/05/20 (Sat) 02:21 trailing", ms(2023, 5, 20, 2, 21)),
    # invalid ranges
    ("2023/05/20 (Sat) 24:01", None),
    ("2023/05/20 (Sat) 25:00", None),
    ("2023/05/20 (Sat) 23:60", None),
    ("2023/13/01 (Sat) 00:00", None),
    ("2023/00/10 (Sat) 00:00", None),
    ("2023/05/00 (Sat) 00:00", None),
    ("2023/05/32 (Sat) 00:00", None),
    # missing or malformed parts
    ("2023/05/20 (Sat)", None),
    ("2023/05/20", None),
    ("2023/5/20 (Sat) 02:21", None),
    ("23/05/20 (Sat) 02:21", None),
    ("2023-05-20 02:21", None),
    ("2023/05/20 (Sat) 2:21", None),
    ("2023/05/20 (Sat) 02:1", None),
    (" 2023/05/20 (Sat) 02:21", None),  # anchored at the start
    ("x2023/05/20 (Sat) 02:21", None),
    ("", None),
    ("undefined", None),
    ("null", None),
    # line terminators are not matched by JS `.`
    ("2023/05/20 (Sat)\n02:21", None),
    ("2023/05/20 (Sat)\r02:21", None),
    ("2023/05/20 (Sat)\u202802:21", None),
    ("2023/05/20 (Sat)\u202902:21", None),
    ("2023/05/2002:21\n", ms(2023, 5, 20, 2, 21)),
    ("2023/05/20 (Sat)\u0085 02:21", ms(2023, 5, 20, 2, 21)),  # NEL is not a JS line terminator
    # ASCII digits only
    ("\uff12\uff10\uff12\uff13/05/20 02:21", None),
    ("2023/05/20 \u0661\u0662:21", None),
    ("2023/05/20 \u0661\u0662:21 03:04", ms(2023, 5, 20, 3, 4)),
]


@pytest.mark.parametrize("s,expected", LME_CASES)
def test_parse_lme(s, expected):
    assert parse_lme(s) == expected


def test_parse_lme_all_is_parse_lme_of_each():
    """The haystack-wide parser (its day and time-of-day caches) gives what
    parse_lme gives, on the table's dates and on random near-dates."""
    import random

    rnd = random.Random(3)
    noise = "0123456789/ :()aZ\n\r\u2028x"
    dates = [s for s, _ in LME_CASES] * 2
    for _ in range(20000):
        day = "%04d/%02d/%02d" % (rnd.randint(0, 9999), rnd.randint(0, 14), rnd.randint(0, 33))
        dates.append(day + "".join(rnd.choices(noise, k=rnd.randint(0, 6)))
                     + "%02d:%02d" % (rnd.randint(0, 26), rnd.randint(0, 61)) + rnd.choice(["", "x", ":00"]))
        dates.append("".join(rnd.choices(noise, k=rnd.randint(0, 20))))
    for i in range(0, len(dates), 700):
        assert parse_lme_all(dates[i : i + 700]) == [parse_lme(s) for s in dates[i : i + 700]]


# ---------------------------------------------------------------------------
# parse_locomo
# ---------------------------------------------------------------------------

LOCOMO_CASES = [
    ("1:56 pm on 8 May, 2023", ms(2023, 5, 8, 13, 56)),
    ("01:56 pm on 08 May, 2023", ms(2023, 5, 8, 13, 56)),
    ("10:37 am on 27 June, 2023", ms(2023, 6, 27, 10, 37)),
    ("1:14 pm on 25 May, 2023", ms(2023, 5, 25, 13, 14)),
    ("9:00 am on 1 January, 2022", ms(2022, 1, 1, 9, 0)),
    ("11:59 pm on 31 December, 1999", ms(1999, 12, 31, 23, 59)),
    # 12 am -> 0, 12 pm -> 12
    ("12:00 am on 8 May, 2023", ms(2023, 5, 8, 0, 0)),
    ("12:30 am on 8 May, 2023", ms(2023, 5, 8, 0, 30)),
    ("12:00 pm on 8 May, 2023", ms(2023, 5, 8, 12, 0)),
    ("12:45 pm on 8 May, 2023", ms(2023, 5, 8, 12, 45)),
    ("0:15 pm on 8 May, 2023", ms(2023, 5, 8, 12, 15)),
    ("0:15 am on 8 May, 2023", ms(2023, 5, 8, 0, 15)),
    # am never adds; 13..24 am stay as they are
    ("13:00 am on 8 May, 2023", ms(2023, 5, 8, 13, 0)),
    ("24:00 am on 8 May, 2023", ms(2023, 5, 9, 0, 0)),
    ("24:01 am on 8 May, 2023", None),
    # hour above 24 after conversion is invalid
    ("13:00 pm on 8 May, 2023", None),
    ("12:60 pm on 8 May, 2023", None),
    ("99:00 am on 8 May, 2023", None),
    # day overflow
    ("1:00 pm on 30 February, 2023", ms(2023, 3, 2, 13, 0)),
    ("1:00 pm on 31 April, 2023", ms(2023, 5, 1, 13, 0)),
    ("1:00 pm on 31 December, 2023", ms(2023, 12, 31, 13, 0)),
    ("1:00 pm on 0 May, 2023", None),
    ("1:00 pm on 32 May, 2023", None),
    # month names: exactly capitalised English names
    ("1:56 pm on 8 may, 2023", None),
    ("1:56 pm on 8 MAY, 2023", None),
    ("1:56 pm on 8 Mayo, 2023", None),
    ("1:56 pm on 8 Sept, 2023", None),
    # am/pm must be lower case; exact single spaces; comma required
    ("1:56 PM on 8 May, 2023", None),
    ("1:56 Pm on 8 May, 2023", None),
    ("1:56pm on 8 May, 2023", None),
    ("1:56  pm on 8 May, 2023", None),
    ("1:56 pm on 8 May 2023", None),
    ("1:56 pm on 8 May,2023", None),
    ("1:56 pm 8 May, 2023", None),
    ("1:56 pm on 123 May, 2023", None),
    ("123:56 pm on 8 May, 2023", None),
    ("1:5 pm on 8 May, 2023", None),
    ("1:56 pm on 8 May, 23", None),
    ("x1:56 pm on 8 May, 2023", None),
    (" 1:56 pm on 8 May, 2023", None),
    # trailing text after the 4-digit year is ignored
    ("1:56 pm on 8 May, 20231", ms(2023, 5, 8, 13, 56)),
    ("1:56 pm on 8 May, 2023 (extra)", ms(2023, 5, 8, 13, 56)),
    # missing value coerced by String()
    ("undefined", None),
    ("null", None),
    ("", None),
]


@pytest.mark.parametrize("s,expected", LOCOMO_CASES)
def test_parse_locomo(s, expected):
    assert parse_locomo(s) == expected


def test_results_are_ints():
    assert type(parse_lme("2023/05/20 (Sat) 02:21")) is int
    assert type(parse_locomo("1:56 pm on 8 May, 2023")) is int


# ---------------------------------------------------------------------------
# V8 ISO rules cross-check (Date.parse of YYYY-MM-DDThh:mm:00Z)
# ---------------------------------------------------------------------------

NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node (V8 oracle) not available")
def test_iso_rules_vs_v8():
    combos = []
    for y in (0, 1, 99, 100, 1900, 1969, 1970, 2000, 2023, 2024, 9999):
        for mo in (0, 1, 2, 3, 4, 12, 13, 99):
            for d in (0, 1, 28, 29, 30, 31, 32, 99):
                for h, mi in ((0, 0), (23, 59), (24, 0), (24, 1), (25, 0), (12, 60), (99, 99)):
                    combos.append((y, mo, d, h, mi))
    script = r"""
const items = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const p = (n, w) => String(n).padStart(w, '0');
const out = items.map(([y, mo, d, h, mi]) => {
  const t = Date.parse(`${p(y,4)}-${p(mo,2)}-${p(d,2)}T${p(h,2)}:${p(mi,2)}:00Z`);
  return Number.isNaN(t) ? null : t;
});
process.stdout.write(JSON.stringify(out));
"""
    out = subprocess.run(
        [NODE, "-e", script], input=json.dumps(combos), capture_output=True, text=True,
        timeout=60, check=True,
    ).stdout
    expected = json.loads(out)
    bad = []
    for (y, mo, d, h, mi), exp in zip(combos, expected):
        got = iso_utc_ms(y, mo, d, h, mi)
        via_lme = parse_lme(f"{y:04d}/{mo:02d}/{d:02d} (Xyz) {h:02d}:{mi:02d}")
        if got != exp or via_lme != exp:
            bad.append(((y, mo, d, h, mi), exp, got, via_lme))
    assert not bad, bad[:10]
