"""The paired tests without a permutation floor, whose p-values Holm's
correction adjusts (correction.py): McNemar's exact test for a hit rate (the
exact form of the sign-flip test when every difference is 0 or +-1: the wins
among the discordant questions are Binomial(k, 1/2)), the paired t-test for
MRR. Which test a measure gets is its row's ``test`` (measures.py)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .measures import MCNEMAR, MEASURES, T_TEST


def p_analytic(metric: str, d: np.ndarray) -> float | None:
    """A two-sided p-value without a permutation floor, for Holm's correction:
    the test of the measure's row (``None`` without questions)."""
    if not len(d):
        return None
    return TESTS[MEASURES[metric].test](d)


def mcnemar(d: np.ndarray) -> float:
    """McNemar's exact test of per-question differences of a hit rate (0 or +-1)."""
    k = int(np.count_nonzero(d))
    return _mcnemar(int((d > 0).sum()), k) if k else 1.0


def t_test(d: np.ndarray) -> float:
    """The paired t-test of per-question differences."""
    n = len(d)
    if n < 2:
        return 1.0
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    t = mean / (sd / math.sqrt(n))
    # scipy.stats' t.sf(x, df) is this function (stdtr(df, -x)); scipy.special
    # alone imports in about half the time of scipy.stats
    from scipy.special import stdtr

    return float(min(1.0, 2 * stdtr(n - 1, -abs(t))))


@lru_cache(maxsize=None)
def _mcnemar(wins: int, discordant: int) -> float:
    """McNemar's exact p: the two-sided binomial test of ``wins`` of
    ``discordant`` at 1/2, which by symmetry is twice the lower tail of the
    smaller count (scipy.stats.binomtest's value, which the tests hold it
    to), summed in integers and divided once. Not scipy.stats: its import
    alone is most of a small stats job's time (many pairs of a dataset share
    the same counts, hence the cache)."""
    least = min(wins, discordant - wins)
    if 2 * least == discordant:
        return 1.0
    term = tail = 1  # C(discordant, 0)
    for i in range(least):
        term = term * (discordant - i) // (i + 1)
        tail += term
    return min(1.0, tail / (1 << (discordant - 1)))


TESTS = {MCNEMAR: mcnemar, T_TEST: t_test}  # a measure's ``test`` -> its p-value of the differences
