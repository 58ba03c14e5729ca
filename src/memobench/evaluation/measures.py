"""The measures: one row per measure the project reports, the one place its
facts are spelled (docs/protocol.md explains what each measures).

A row says what the measure is called in the result files (``name``: the
key in metrics.json, official.json and stats.json) and in the report
(``label``), its unit, how it is printed, and whether the paired statistics
compare it (``test``, stats.json) and mark it in the who-beats-whom matrix
(``matrix``). Statistics (stats.py), the report (reporting/) and
``memobench score`` read these rows; none of them chooses a unit or a
number of digits by a measure's name.

Units:

* ``rate``: a share of the questions, printed in percent (its differences in
  percentage points); a harness rate is a count over the harness's
  denominator (``counted``);
* ``score``: a mean from 0 to 1 that is not a share of questions (nDCG),
  printed in percent like a rate, never shaded as saturated;
* ``fraction``: a mean from 0 to 1 printed as it is (MRR, as the harness
  prints it), its differences in its own units.

Adding a measure: add its row here (and its computation: metrics.py for the
harness's, official.py for the official ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

HARNESS, OFFICIAL = "harness", "official"
SATURATED = 0.95  # a rate at this or more leaves little room to show a difference (shaded in the report)


@dataclass(frozen=True)
class Unit:
    name: str
    scale: int  # printed value = scale * value: 100 for percent
    suffix: str  # after a printed value
    saturates: bool  # a value at SATURATED or more is saturated


RATE = Unit("rate", 100, "%", True)
SCORE = Unit("score", 100, "%", False)
FRACTION = Unit("fraction", 1, "", False)


@dataclass(frozen=True)
class Measure:
    name: str  # the key in metrics.json / official.json / stats.json
    label: str  # as the report and memobench score print it
    family: str  # HARNESS (the Memo harness's rules) or OFFICIAL (LongMemEval's / LoCoMo's scoring)
    unit: Unit
    digits: int  # printed digits of a value (harness: as the harness prints it)
    diff_digits: int  # printed digits of a paired difference, in the difference's unit
    type_digits: int  # printed digits of a value per question type (the harness's per-type table)
    of_rank: Callable[[int], float] | None = None  # the per-question value from the first gold rank (0: none)
    cutoff: int | None = None  # a hit@k's k
    test: str = ""  # the paired test's name (stats.json compares the measure when set)
    test_text: str = ""  # the test in full, as stats.json's holm.tests says it
    matrix: bool = False  # in the who-beats-whom matrix (it still discriminates where hit@5 and hit@10 saturate)
    score_formats: tuple[str, ...] = ()  # an official measure: the dataset formats memobench score prints it for
    lme_only: bool = False  # an official measure LongMemEval's rules give and LoCoMo's do not

    @property
    def counted(self) -> bool:
        """A harness rate: a count (metrics.json ``name``) over ``hit_denominator``."""
        return self.family == HARNESS and self.unit is RATE

    @property
    def diff_unit(self) -> str:
        """The unit of a paired difference, in full."""
        return "percentage points" if self.unit.scale == 100 else f"{self.label} units"

    @property
    def diff_unit_short(self) -> str:
        """The unit of a paired difference in a table header."""
        return "points" if self.unit.scale == 100 else f"{self.label} units"

    @property
    def mde_suffix(self) -> str:
        """After a minimum detectable difference: its unit where it is not the measure's own."""
        return " points" if self.unit.scale == 100 else ""


def _hit_at(k: int) -> Callable[[int], float]:
    return lambda rank: float(1 <= rank <= k)


def _reciprocal_rank(rank: int) -> float:
    return 1.0 / rank if rank > 0 else 0.0


MCNEMAR, T_TEST = "McNemar", "t-test"  # the paired tests' names (paired.py computes them)
_MCNEMAR_TEXT = "McNemar exact (two-sided binomial test of the wins among the discordant questions)"


def _hit(k: int, test: bool, matrix: bool = False) -> Measure:
    return Measure(f"hit@{k}", f"hit@{k}", HARNESS, RATE, 1, 1, 1, _hit_at(k), k,
                   MCNEMAR if test else "", _MCNEMAR_TEXT if test else "", matrix)


def _official(name: str, k: int, unit: Unit, score_formats: tuple[str, ...], lme_only: bool = False) -> Measure:
    return Measure(f"{name}@{k}", f"{name}@{k}", OFFICIAL, unit, 1, 1, 1, cutoff=k, score_formats=score_formats,
                   lme_only=lme_only)


MEASURES: dict[str, Measure] = {m.name: m for m in [
    _hit(1, test=True, matrix=True),
    _hit(5, test=True),
    _hit(10, test=False),  # not in stats.json's comparisons
    Measure("mrr", "MRR", HARNESS, FRACTION, 4, 4, 3, _reciprocal_rank, None, T_TEST, "paired t-test (two-sided)",
            matrix=True),
    # the official measures reported, at k 5 and 10 (official.py computes them at every k of its KS)
    *(m for k in (5, 10) for m in (
        _official("recall_any", k, RATE, ("locomo",)),
        _official("recall_all", k, RATE, ("lme", "locomo")),
        _official("ndcg_any", k, SCORE, ("lme",), lme_only=True))),
]}

HARNESS_MEASURES = tuple(m.name for m in MEASURES.values() if m.family == HARNESS)  # hit@1, hit@5, hit@10, mrr
HITS = tuple(m.name for m in MEASURES.values() if m.counted)  # the harness's hit rates
PAIRED = tuple(m.name for m in MEASURES.values() if m.test)  # what stats.json compares
MATRIX = tuple(m.name for m in MEASURES.values() if m.matrix)  # the comparison matrix's measures
OFFICIAL_MEASURES = tuple(m.name for m in MEASURES.values() if m.family == OFFICIAL)  # in k order


def label(name: str) -> str:
    """A measure's name as the report prints it."""
    return MEASURES[name].label
