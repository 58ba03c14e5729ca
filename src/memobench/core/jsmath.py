"""JavaScript (V8) numeric and string semantics needed for bit-exact harness reproduction.

See docs/harnesses.md#javascript-behaviour-that-decides-lists and docs/harnesses.md#v8s-logarithm.

* :func:`js_log` -- V8's ``Math.log`` (fdlibm ``__ieee754_log``), bit for bit.
* :func:`utf16_len` / :func:`utf16_key` -- JS ``.length`` and JS ``<`` string order.
* :func:`js_string` -- JS ``String(x)`` for values produced by ``json`` or ``ijson``.
* :func:`to_fixed` -- ``Number.prototype.toFixed``.

Standard library only.
"""

from __future__ import annotations

import math
import struct
from decimal import ROUND_HALF_UP, Context, Decimal

__all__ = [
    "MISSING",
    "js_log",
    "utf16_len",
    "utf16_key",
    "js_string",
    "js_number_to_string",
    "to_fixed",
]


class _Missing:
    """Sentinel for a missing value (JS ``undefined``)."""

    _instance = None

    def __new__(cls):  # singleton
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return (_Missing, ())


#: Sentinel for a missing value; ``js_string(MISSING) == "undefined"``.
MISSING = _Missing()


# ---------------------------------------------------------------------------
# Math.log: fdlibm __ieee754_log (FreeBSD e_log.c), as ported by V8.
# ---------------------------------------------------------------------------

_ln2_hi = 6.93147180369123816490e-01  # 3fe62e42 fee00000
_ln2_lo = 1.90821492927058770002e-10  # 3dea39ef 35793c76
_two54 = 1.80143985094819840000e16  # 43500000 00000000
_Lg1 = 6.666666666666735130e-01  # 3FE55555 55555593
_Lg2 = 3.999999999940941908e-01  # 3FD99999 9997FA04
_Lg3 = 2.857142874366239149e-01  # 3FD24924 94229359
_Lg4 = 2.222219843214978396e-01  # 3FCC71C5 1D8E78AF
_Lg5 = 1.818357216161805012e-01  # 3FC74664 96CB03DE
_Lg6 = 1.531383769920937332e-01  # 3FC39A09 D078C69F
_Lg7 = 1.479819860511658591e-01  # 3FC2F112 DF3E5244

_pack_d = struct.Struct("<d").pack
_unpack_d = struct.Struct("<d").unpack
_pack_q = struct.Struct("<Q").pack
_unpack_q = struct.Struct("<Q").unpack
_NEG_INF = float("-inf")
_NAN = float("nan")


def js_log(x: float) -> float:
    """V8 ``Math.log(x)``: a bit-exact port of fdlibm ``__ieee754_log``."""
    x = float(x)
    bits = _unpack_q(_pack_d(x))[0]
    hx = bits >> 32
    if hx & 0x80000000:
        hx -= 0x100000000  # signed high word
    lx = bits & 0xFFFFFFFF

    k = 0
    if hx < 0x00100000:  # x < 2**-1022 (subnormal, zero or negative)
        if ((hx & 0x7FFFFFFF) | lx) == 0:
            return _NEG_INF  # log(+-0) = -inf
        if hx < 0:
            return _NAN  # log(-#) = NaN
        k -= 54
        x *= _two54  # scale up subnormal x
        bits = _unpack_q(_pack_d(x))[0]
        hx = bits >> 32  # x is positive now
        lx = bits & 0xFFFFFFFF
    if hx >= 0x7FF00000:
        return x + x  # inf or NaN
    k += (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    # normalize x or x/2 into [sqrt(2)/2, sqrt(2))
    x = _unpack_d(_pack_q(((hx | (i ^ 0x3FF00000)) << 32) | lx))[0]
    k += i >> 20
    f = x - 1.0
    if (0x000FFFFF & (2 + hx)) < 3:  # -2**-20 <= f < 2**-20
        if f == 0.0:
            if k == 0:
                return 0.0
            dk = float(k)
            return dk * _ln2_hi + dk * _ln2_lo
        R = f * f * (0.5 - 0.33333333333333333 * f)
        if k == 0:
            return f - R
        dk = float(k)
        return dk * _ln2_hi - ((R - dk * _ln2_lo) - f)
    s = f / (2.0 + f)
    dk = float(k)
    z = s * s
    i = hx - 0x6147A
    w = z * z
    j = 0x6B851 - hx
    t1 = w * (_Lg2 + w * (_Lg4 + w * _Lg6))
    t2 = z * (_Lg1 + w * (_Lg3 + w * (_Lg5 + w * _Lg7)))
    i |= j
    R = t2 + t1
    if i > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + R))
        return dk * _ln2_hi - ((hfsq - (s * (hfsq + R) + dk * _ln2_lo)) - f)
    if k == 0:
        return f - s * (f - R)
    return dk * _ln2_hi - ((s * (f - R) - dk * _ln2_lo) - f)


# ---------------------------------------------------------------------------
# UTF-16 helpers
# ---------------------------------------------------------------------------


def utf16_len(s: str) -> int:
    """JS ``s.length``: the number of UTF-16 code units (astral characters count 2)."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) >> 1


def utf16_key(s: str) -> bytes:
    """Sort key reproducing JS ``<`` on strings (UTF-16 code unit order)."""
    return s.encode("utf-16-be", "surrogatepass")


# ---------------------------------------------------------------------------
# String(x)
# ---------------------------------------------------------------------------


def _to_double(v) -> float:
    """The double JS would hold for a JSON number parsed by json/ijson."""
    if isinstance(v, float):
        return v
    if isinstance(v, int):
        try:
            return float(v)  # correctly rounded (ties to even), like JSON.parse
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if isinstance(v, Decimal):
        # Decimal.__float__ goes through the decimal string: correctly rounded.
        return float(v)
    return float(v)


def js_number_to_string(x: float) -> str:
    """ECMAScript ``Number::toString(x)`` (radix 10)."""
    if x != x:
        return "NaN"
    if x == 0.0:
        return "0"  # also -0
    if x == math.inf:
        return "Infinity"
    if x == -math.inf:
        return "-Infinity"
    sign = "-" if x < 0 else ""
    r = repr(abs(x))  # shortest round-trip digits, closest to the value
    mant, _, e = r.partition("e")
    exp10 = int(e) if e else 0
    ip, _, fp = mant.partition(".")
    digits = ip + fp
    exp10 -= len(fp)
    digits = digits.lstrip("0")
    stripped = digits.rstrip("0")
    exp10 += len(digits) - len(stripped)
    s = stripped
    k = len(s)
    n = exp10 + k  # value = 0.s * 10**n
    if k <= n <= 21:
        out = s + "0" * (n - k)
    elif 0 < n <= 21:
        out = s[:n] + "." + s[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + s
    else:
        ee = n - 1
        es = ("+" if ee >= 0 else "-") + str(abs(ee))
        out = (s if k == 1 else s[0] + "." + s[1:]) + "e" + es
    return sign + out


def js_string(v) -> str:
    """JS ``String(v)`` for a value coming out of ``json`` or ``ijson``.

    ``None`` -> ``"null"``, :data:`MISSING` -> ``"undefined"``, bools ->
    ``"true"``/``"false"``, numbers (int, float, Decimal) -> JS number text,
    lists -> elements joined by ``","`` (null/undefined elements give ``""``),
    dicts -> ``"[object Object]"``, strings unchanged.
    """
    if isinstance(v, str):
        return v
    if v is None:
        return "null"
    if v is MISSING:
        return "undefined"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float, Decimal)):
        return js_number_to_string(_to_double(v))
    if isinstance(v, (list, tuple)):
        return ",".join("" if (e is None or e is MISSING) else js_string(e) for e in v)
    if isinstance(v, dict):
        return "[object Object]"
    raise TypeError(f"js_string: unsupported type {type(v).__name__}")


# ---------------------------------------------------------------------------
# toFixed
# ---------------------------------------------------------------------------

_FIXED_CTX = Context(prec=400, rounding=ROUND_HALF_UP)


def to_fixed(x: float, k: int) -> str:
    """JS ``x.toFixed(k)``: exact binary value, exact ties rounded away from zero."""
    x = _to_double(x)
    k = int(k)
    if not 0 <= k <= 100:
        raise ValueError("toFixed() digits argument must be between 0 and 100")
    if x != x:
        return "NaN"
    sign = ""
    if x < 0:  # note: -0 is not < 0, so (-0).toFixed(k) has no sign
        sign = "-"
    x = abs(x)  # also turns -0 into +0
    if x >= 1e21:  # includes Infinity
        return sign + js_number_to_string(x)
    d = Decimal(x).quantize(Decimal(1).scaleb(-k), context=_FIXED_CTX)
    return sign + format(d, "f")
