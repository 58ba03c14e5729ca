"""Tests for memobench.core.jsmath against V8 (node) as the oracle."""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
from decimal import Decimal

import pytest

from memobench.core.jsmath import MISSING, js_log, js_number_to_string, js_string, to_fixed, utf16_key, utf16_len

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node (V8 oracle) not available")


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def _run_node(script: str, payload: str) -> str:
    proc = subprocess.run(
        [NODE, "-e", script],
        input=payload,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=True,
    )
    return proc.stdout


# ---------------------------------------------------------------------------
# js_log
# ---------------------------------------------------------------------------

N_MAX = 1200
D_MAX = 50

_LOG_NODE = r"""
const fs = require('fs');
const extra = fs.readFileSync(0, 'utf8').split('\n').filter(Boolean);
const f = new Float64Array(1), u = new BigUint64Array(f.buffer);
const out = [];
function put(x) { f[0] = Math.log(x); out.push(u[0].toString(16)); }
for (let N = 1; N <= %d; N++)
  for (let d = 0; d <= Math.min(N, %d); d++) put((N + 1) / (1 + d));
for (const h of extra) { u[0] = BigInt('0x' + h); put(f[0]); }
process.stdout.write(out.join('\n') + '\n');
""" % (N_MAX, D_MAX)


def _extra_log_inputs() -> list[float]:
    rng = random.Random(20240611)
    xs = [
        0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan,
        5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,  # min normal / max subnormal
        1.7976931348623157e308, 0.5, 2.0, math.e, 10.0, 1e-300, 1e300,
        1.0 + 2.0**-52, 1.0 - 2.0**-53, 1.0 + 2.0**-20, 1.0 - 2.0**-21,
        math.sqrt(2.0), math.sqrt(0.5), 0.7071067811865476, 1.4142135623730951,
    ]
    xs += [2.0**e for e in range(-1074, 1024, 7)]
    xs += [rng.uniform(0.0, 1.0) for _ in range(1000)]
    xs += [rng.uniform(1.0, 2.0) for _ in range(1000)]
    xs += [rng.uniform(0.9999, 1.0001) for _ in range(500)]
    xs += [rng.uniform(0.0, 1e6) for _ in range(1000)]
    # random bit patterns: every exponent incl. subnormals, inf/nan, negatives
    xs += [_from_bits(rng.getrandbits(64)) for _ in range(2000)]
    xs += [_from_bits(rng.getrandbits(52)) for _ in range(500)]  # subnormals
    return xs


@needs_node
def test_js_log_bit_exact_vs_v8():
    extra = _extra_log_inputs()
    payload = "\n".join(format(_bits(x), "x") for x in extra) + "\n"
    lines = _run_node(_LOG_NODE, payload).split()

    inputs = [(N + 1) / (1 + d) for N in range(1, N_MAX + 1) for d in range(0, min(N, D_MAX) + 1)]
    grid_count = len(inputs)
    inputs += extra
    assert len(lines) == len(inputs)

    mismatches = []
    libm_diff = 0
    for x, h in zip(inputs[:grid_count], lines[:grid_count]):
        v8 = _from_bits(int(h, 16))
        mine = js_log(x)
        if _bits(mine) != _bits(v8):
            mismatches.append((x, mine, v8))
        if _bits(math.log(x)) != _bits(v8):
            libm_diff += 1
    for x, h in zip(inputs[grid_count:], lines[grid_count:]):
        v8 = _from_bits(int(h, 16))
        mine = js_log(x)
        if math.isnan(v8):
            if not math.isnan(mine):
                mismatches.append((x, mine, v8))
        elif _bits(mine) != _bits(v8):
            mismatches.append((x, mine, v8))
    assert not mismatches, mismatches[:10]
    # The port matters: the platform libm disagrees with V8 on part of the grid.
    assert libm_diff > 0, "math.log agreed with V8 everywhere; the test would prove nothing"


def test_js_log_specials_without_node():
    assert js_log(1.0) == 0.0 and math.copysign(1.0, js_log(1.0)) == 1.0
    assert js_log(0.0) == -math.inf
    assert js_log(-0.0) == -math.inf
    assert math.isnan(js_log(-1.0))
    assert math.isnan(js_log(math.nan))
    assert js_log(math.inf) == math.inf
    assert math.isnan(js_log(-math.inf))
    assert js_log(5e-324) == pytest.approx(-744.4400719213812)
    assert js_log(math.e) == pytest.approx(1.0)


# ---------------------------------------------------------------------------
# utf16 helpers
# ---------------------------------------------------------------------------


def test_utf16_len_and_key():
    assert utf16_len("") == 0
    assert utf16_len("abc") == 3
    assert utf16_len("中文") == 2
    assert utf16_len("\U00020000") == 2
    assert utf16_len("a\U00020000b") == 4
    assert utf16_len("😀") == 2
    assert utf16_len("\ud800") == 1  # lone surrogate (possible from JSON escapes)
    assert sorted(["session_2", "session_10"], key=utf16_key) == ["session_10", "session_2"]
    # U+FF5E (BMP) sorts above an astral character (surrogate D840) in UTF-16 order,
    # unlike Python's code point order.
    assert utf16_key("\U00020000") < utf16_key("\uff5e")
    assert "\U00020000" > "\uff5e"


# ---------------------------------------------------------------------------
# js_string / to_fixed
# ---------------------------------------------------------------------------

_NUMBER_LITERALS = [
    "0", "-0", "0.0", "-0.0", "1", "-1", "1.0", "100", "1e2", "1E2", "1e+2",
    "123456789", "9007199254740993", "12345678901234567890",
    "123456789012345678901", "999999999999999999999", "1e21", "1e+21", "1.5e21",
    "100000000000000000000", "1e20", "1e-6", "1e-7", "1.5e-7", "0.000001",
    "0.0000001", "0.00000123", "0.1", "0.2", "0.30000000000000004", "1.5", "-2.5",
    "3.14159", "123.456", "1.7976931348623157e308", "5e-324", "2.2250738585072014e-308",
    "1e400", "-1e400", "1e-400", "-1e-400", "4.35", "0.1000000000000000055511151231257827",
    "1234567890123456789012345678901234567890", "25.0e-1", "1e100", "1.2e-10",
    "123e-20", "6.02214076e23", "-1.5e-7", "0.5", "1000000000000000128",
    "144115188075855877", "1e-323", "9.999999999999999e20", "9.9999999999999999e20",
]


def _random_number_literals() -> list[str]:
    rng = random.Random(7)
    out = []
    for _ in range(400):
        x = _from_bits(rng.getrandbits(64))
        if math.isfinite(x):
            out.append(repr(x))
    for _ in range(200):
        x = rng.uniform(-1e6, 1e6)
        out.append(repr(x))
        out.append(repr(round(x, rng.randint(0, 6))))
    for _ in range(100):
        e = rng.randint(-30, 30)
        out.append(f"{rng.randint(1, 999999)}e{e}")
    return out


_STRING_NODE = r"""
const fs = require('fs');
const items = JSON.parse(fs.readFileSync(0, 'utf8'));
const out = items.map(t => String(JSON.parse(t)));
process.stdout.write(JSON.stringify(out));
"""


@needs_node
def test_js_string_vs_v8():
    ijson = pytest.importorskip("ijson")
    numbers = _NUMBER_LITERALS + _random_number_literals()
    others = [
        "null", "true", "false", '"abc"', '""', '"null"', "[]", "[null]", "[null,null]",
        "[1,null,2]", '[1,[2,[3,null]],"a",{"x":1},true]', "{}", '{"a":[1]}',
        "[1.5e-7,1e21,-0]", '[[],[[]],""]', '["a","b"]', "[0.1,0.2]",
    ]
    literals = numbers + others
    expected = json.loads(_run_node(_STRING_NODE, json.dumps(literals)))
    assert len(expected) == len(literals)
    bad = []
    for lit, exp in zip(literals, expected):
        got_json = js_string(json.loads(lit))
        # ijson: Decimal for non-integer numbers, int for integers
        got_ijson = js_string(next(ijson.items(lit.encode(), "")))
        if got_json != exp or got_ijson != exp:
            bad.append((lit, exp, got_json, got_ijson))
    assert not bad, bad[:10]


def test_js_string_without_node():
    assert js_string(None) == "null"
    assert js_string(MISSING) == "undefined"
    assert js_string(True) == "true"
    assert js_string(False) == "false"
    assert js_string(-0.0) == "0"
    assert js_string(Decimal("-0.0")) == "0"
    assert js_string(1e21) == "1e+21"
    assert js_string(1e20) == "100000000000000000000"
    assert js_string(1.5e-7) == "1.5e-7"
    assert js_string(0.000001) == "0.000001"
    assert js_string(Decimal("0.1")) == "0.1"
    assert js_string(10**400) == "Infinity"
    assert js_string(-(10**400)) == "-Infinity"
    assert js_string([1, None, MISSING, [2, None], {}]) == "1,,,2,,[object Object]"
    assert js_string({"a": 1}) == "[object Object]"
    assert js_string("x") == "x"
    assert js_number_to_string(math.nan) == "NaN"


_FIXED_NODE = r"""
const fs = require('fs');
const items = JSON.parse(fs.readFileSync(0, 'utf8'));
const f = new Float64Array(1), u = new BigUint64Array(f.buffer);
const out = items.map(([h, k]) => { u[0] = BigInt('0x' + h); return f[0].toFixed(k); });
process.stdout.write(JSON.stringify(out));
"""


@needs_node
def test_to_fixed_vs_v8():
    rng = random.Random(99)
    vals = [
        0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.125, 0.375, 1.005, 1.45, 1.55, 2.675, -1.005,
        -0.0001, 0.0001, 1e-10, -1e-10, 123.456, 1e20, 1e21, -1e21, 1.5e21, 999999999999999.9,
        math.inf, -math.inf, math.nan, 5e-324, 0.05, 0.15, 0.25, 0.35, 0.45, 8.345, 1.0 / 3,
        2.0 / 3, 12345.6789, 0.9999, 0.99999, 9.995, 99.95, 4.35, 1.45e-5,
    ]
    vals += [rng.uniform(-1000, 1000) for _ in range(300)]
    vals += [rng.randint(-100000, 100000) / 8 for _ in range(100)]  # exact ties
    vals += [rng.randint(-100000, 100000) / 1000 for _ in range(100)]
    cases = [(x, k) for x in vals for k in (0, 1, 2, 3, 4)]
    cases += [(x, k) for x in vals[:40] for k in (5, 10, 17, 20, 25, 50, 100)]
    payload = json.dumps([[format(_bits(x), "x"), k] for x, k in cases])
    expected = json.loads(_run_node(_FIXED_NODE, payload))
    bad = [(x, k, e, to_fixed(x, k)) for (x, k), e in zip(cases, expected) if to_fixed(x, k) != e]
    assert not bad, bad[:10]


def test_to_fixed_without_node():
    assert to_fixed(2.5, 0) == "3"
    assert to_fixed(-2.5, 0) == "-3"
    assert to_fixed(1.005, 2) == "1.00"  # exact binary value is below the tie
    assert to_fixed(0.125, 2) == "0.13"  # exact tie rounds up (Python '%.2f' gives 0.12)
    assert "%.2f" % 0.125 == "0.12"
    assert to_fixed(-0.0, 2) == "0.00"
    assert to_fixed(-0.0001, 2) == "-0.00"
    assert to_fixed(1e21, 2) == "1e+21"
    assert to_fixed(math.nan, 1) == "NaN"
    assert to_fixed(0.6457, 4) == "0.6457"
