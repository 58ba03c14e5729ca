"""How each kind of figure is printed: one function per kind, used by the
report (report.md, report.html) and by ``memobench score`` alike, so a figure
reads the same wherever it appears.

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

from ..evaluation.metrics import pct
from ..evaluation.stats import PERMUTATIONS, fmt_ci, fmt_p
from ..jsmath import to_fixed

TESTS = {"hit@1": "McNemar", "hit@5": "McNemar", "hit@10": "McNemar", "mrr": "t-test"}


def printed(m: dict, key: str, digits: int | None = None) -> str | None:
    """The value as the harness prints it: ``(100 * count / n).toFixed(1)`` for
    a hit rate (in that order: 100 * (count / n) rounds some ties differently),
    ``(sum / n).toFixed(4)`` for MRR."""
    if key == "mrr":
        return to_fixed(m["mrr"], 4 if digits is None else digits) if m.get("mrr") is not None else None
    if not m.get("hit_denominator"):
        return None
    return pct(m[key], m["hit_denominator"], 1 if digits is None else digits)


def level(m: dict, key: str, mrr_digits: int = 4) -> str:
    """A harness rate in its unit: ``60.2%``, MRR ``0.7183``; ``-`` when there is none."""
    text = printed(m, key, mrr_digits if key == "mrr" else None)
    return "-" if text is None else text + ("%" if key != "mrr" else "")


def percent(x) -> str:
    """A rate given as a fraction, in %, rounded as the harness rounds (JS toFixed: ties away from zero), so a
    rate printed from a fraction reads as the harness's count-based one (77/80: 96.3%)."""
    return "-" if x is None else to_fixed(100 * x, 1) + "%"


def difference(mm: dict, key: str) -> str:
    """A paired difference with its interval in the metric's unit: percentage
    points for a hit rate, MRR units for MRR."""
    return fmt_ci(mm, 100, 1) if key != "mrr" else fmt_ci(mm, 1, 4)


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
    text = f"{TESTS[key]} {small_p(mm['p_analytic'])}"
    return text if mm.get("p_holm") is None else f"{text}, Holm {small_p(mm['p_holm'])}"
