"""How each kind of figure is printed: one function per kind, used by the
report (report.md, report.html) and by ``memobench score`` alike, so a figure
reads the same wherever it appears. A measure's unit and digits are its row
in evaluation/measures.py; nothing here chooses them by its name.

* a harness rate or MRR (:func:`level`): ``60.2%``, MRR ``0.7183``, as the
  harness prints them (:func:`printed`);
* a rate given as a fraction, such as an official metric (:func:`percent`):
  ``96.3%``;
* a paired difference with its 95% interval (:func:`difference`): hit@k in
  percentage points, MRR in MRR units;
* p-values, each named by its test (:func:`p_randomization`, :func:`p_test`):
  the randomization p, and the McNemar (hit@k) or paired t-test (MRR) p with,
  beside it, that same p after Holm's correction (the one Holm corrects).
"""

from __future__ import annotations

import math

from decimal import Decimal

from ..evaluation.measures import MEASURES
from ..evaluation.metrics import pct
from ..evaluation.resampling import PERMUTATIONS
from ..core.jsmath import to_fixed


def printed(m: dict, key: str, digits: int | None = None) -> str | None:
    """The value as the harness prints it: ``(100 * count / n).toFixed(1)`` for
    a hit rate (in that order: 100 * (count / n) rounds some ties differently),
    ``(sum / n).toFixed(4)`` for MRR (``digits``: other than the measure's)."""
    measure = MEASURES[key]
    digits = measure.digits if digits is None else digits
    if measure.counted:
        return pct(m[key], m["hit_denominator"], digits) if m.get("hit_denominator") else None
    return to_fixed(m[key], digits) if m.get(key) is not None else None


def level(m: dict, key: str, digits: int | None = None) -> str:
    """A harness rate in its unit: ``60.2%``, MRR ``0.7183``; ``-`` when there is none."""
    text = printed(m, key, digits)
    return "-" if text is None else text + MEASURES[key].unit.suffix


def value_text(x, key: str) -> str:
    """A measure's value given as a fraction, in its unit: ``60.2%``, MRR ``0.7183``; ``-`` for none."""
    measure = MEASURES[key]
    if measure.unit.scale == 100:
        return percent(x)
    return "-" if x is None else f"{x:.{measure.digits}f}"


def percent(x) -> str:
    """A rate given as a fraction, in %, rounded as the harness rounds (JS toFixed: ties away from zero), so a
    rate printed from a fraction reads as the harness's count-based one (77/80: 96.3%)."""
    return "-" if x is None else to_fixed(100 * x, 1) + "%"


def published_diff(m: dict, key: str, theirs: str) -> str:
    """Our value minus a published one at the published value's own precision (0.651 is 3 decimals)."""
    digits = len(theirs.split(".")[1]) if "." in theirs else 0
    d = Decimal(printed(m, key, digits)) - Decimal(theirs)
    return "=" if d == 0 else f"{d:+}"


def at_floor(p: float | None, n_perm: int = PERMUTATIONS) -> bool:
    """No sign flip was as extreme as the observed difference: p is only bounded."""
    return p is not None and p * (1 + n_perm) < 1.5


def fmt_p(p: float | None, n_perm: int = PERMUTATIONS) -> str:
    """``0.0061``; ``< 0.0001`` at the floor of ``n_perm`` flips (p = 1 / (1 + n_perm))."""
    if p is None:
        return "-"
    if at_floor(p, n_perm):
        return f"< {1 / n_perm:.4g}"
    return f"{p:.4f}"


def fmt_ci(m: dict, scale: float, digits: int) -> str:
    """A difference with its 95% interval: ``+2.5 [-1.0, +6.0]`` (scaled, then at ``digits``)."""
    if m["diff"] is None:
        return "-"
    lo, hi = m["ci95"]
    return f"{m['diff'] * scale:+.{digits}f} [{lo * scale:+.{digits}f}, {hi * scale:+.{digits}f}]"


def difference(mm: dict, key: str, digits: int | None = None) -> str:
    """A paired difference with its interval in the measure's unit: percentage
    points for a hit rate, MRR units for MRR (``digits``: other than the measure's)."""
    measure = MEASURES[key]
    return fmt_ci(mm, measure.unit.scale, measure.diff_digits if digits is None else digits)


def mde_text(x, key: str) -> str:
    """A minimum detectable difference in the unit of the measure's differences."""
    measure = MEASURES[key]
    return f"{measure.unit.scale * x:.{measure.diff_digits}f}"


def small_p(p) -> str:
    """A p-value without a permutation floor (McNemar, t-test, Holm's)."""
    return "-" if p is None else "< 0.0001" if p < 0.0001 else f"{p:.4f}"


def p_randomization(mm: dict, n_perm: int = PERMUTATIONS) -> str:
    """The paired randomization test's p, named: ``randomization 0.0061``, ``randomization < 0.0001``."""
    return f"randomization {fmt_p(mm.get('p'), n_perm)}"


def p_test(mm: dict, key: str) -> str | None:
    """The McNemar (hit@k) or paired t-test (MRR) p, named, with the same p
    after Holm's correction beside it where the statistics give one:
    ``McNemar 0.0040, Holm 0.0120``."""
    if mm.get("p_analytic") is None:
        return None
    text = f"{MEASURES[key].test} {small_p(mm['p_analytic'])}"
    return text if mm.get("p_holm") is None else f"{text}, Holm {small_p(mm['p_holm'])}"


def plain(x: float) -> str:
    """A measured quantity (a time, a rate) in plain notation, three significant digits below 1000 and
    whole numbers with thousands separators above: ``34,800``, ``1,010``, ``942``, ``3.48``, ``0.0512``
    (never ``3.48e+04``)."""
    if x is None:
        return "-"
    a = abs(x)
    if a >= 999.5:
        return f"{x:,.0f}"
    if a == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(a)))
    return f"{x:.{digits}f}"
