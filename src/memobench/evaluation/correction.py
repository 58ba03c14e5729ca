"""Multiple comparisons and power: Holm's step-down correction per dataset and
measure, over every distinct pair of variants the dataset's statistics
compare (``pairs`` and ``comparisons`` together), applied to the paired
tests' p-values (paired.py); the minimum detectable difference (``mde``):
``(z_{1-alpha/2} + z_power) * sd(d) / sqrt(n)`` with alpha 0.05, power 0.8
and sd(d) the sample standard deviation of the pair's per-question
differences."""

from __future__ import annotations

import math

import numpy as np

from .measures import PAIRED

ALPHA = 0.05  # the report's level: 95% intervals, two-sided tests
POWER = 0.80  # of the minimum detectable difference
FAMILY = ("per dataset and metric: every distinct pair of variants these statistics compare (pairs and "
          "comparisons together)")


# ndtri at the two levels every stats.json names, as scipy gives them to the bit (tests/unit/evaluation/
# test_stats_pairs.py holds them to scipy.stats' norm.ppf): a dataset with no pair to test imports no
# scipy (about 0.3 s of a one-variant run's stats job, on its longest path)
_QUANTILES = {1 - ALPHA / 2: 1.959963984540054, POWER: 0.8416212335729143}


def z(q: float) -> float:
    """The standard normal quantile (scipy.stats' norm.ppf is ndtri)."""
    known = _QUANTILES.get(q)
    if known is not None:
        return known
    from scipy.special import ndtri

    return float(ndtri(q))


def mde(d: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The difference a two-sided test at ``alpha`` detects with probability
    ``power`` at this n and spread: (z_{1-alpha/2} + z_power) * sd(d) / sqrt(n).
    None below two questions, and where the differences do not vary (no
    discordant question: identical outcomes): sd 0 would give an MDE of 0,
    which reads as "any difference is detectable" where there is no spread to
    size one from."""
    n = len(d)
    if n < 2:
        return None
    sd = float(d.std(ddof=1))
    if sd == 0:
        return None
    return (z(1 - alpha / 2) + z(power)) * sd / math.sqrt(n)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest
    p times (m - i + 1), made non-decreasing, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj


def apply_holm(rows: list[dict], metrics=PAIRED) -> dict[str, int]:
    """Holm per metric over the distinct pairs among ``rows``; each row's metric
    gets ``p_holm`` (a pair compared twice gets the same). Returns m per metric."""
    family_size = {}
    for m in metrics:
        ps: dict[tuple, float] = {}
        for r in rows:
            p = r["metrics"][m]["p_analytic"]
            if p is not None:
                ps.setdefault(tuple(sorted((r["variant"], r["baseline"]))), p)
        keys = sorted(ps)
        adj = dict(zip(keys, holm([ps[k] for k in keys])))
        family_size[m] = len(keys)
        for r in rows:
            r["metrics"][m]["p_holm"] = adj.get(tuple(sorted((r["variant"], r["baseline"]))))
    return family_size


def power_summary(rows: list[dict], family_size: dict[str, int]) -> dict:
    """The minimum detectable differences of the dataset's distinct pairs, per metric."""
    out = {"alpha": ALPHA, "power": POWER, "z_alpha": z(1 - ALPHA / 2), "z_power": z(POWER),
           "formula": "(z_alpha + z_power) * sd(d) / sqrt(n), sd(d): sample sd of the pair's per-question "
                      "differences", "metrics": {}}
    for m in PAIRED:
        seen, mdes, ns, sds = set(), [], [], []
        for r in rows:
            key = tuple(sorted((r["variant"], r["baseline"])))
            mm = r["metrics"][m]
            if key in seen or mm["mde"] is None:
                continue
            seen.add(key)
            mdes.append(mm["mde"])
            ns.append(r["n"])
            sds.append(mm["sd"])
        if not mdes:
            out["metrics"][m] = {"pairs": 0}
            continue
        k = family_size.get(m) or 1
        z_first = z(1 - ALPHA / (2 * k))  # Holm's first step tests the smallest p at alpha / m
        med_sd, med_n = float(np.median(sds)), float(np.median(ns))
        out["metrics"][m] = {
            "pairs": len(mdes), "n_min": min(ns), "n_max": max(ns), "sd_median": med_sd,
            "mde_median": float(np.median(mdes)), "mde_min": min(mdes), "mde_max": max(mdes),
            "mde_first_holm_step": (z_first + out["z_power"]) * med_sd / math.sqrt(med_n)}
    return out
