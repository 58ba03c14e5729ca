"""Paired comparisons of variants on the same questions: stats.json.

For each variant against its baseline (the harness's own pairs) and against
``v0.8.0`` (``comparisons``), and for every pair of the compared variants
(``pairs``, the ``statistics.compare`` setting): per question, the difference
in each measure stats.json compares (measures.py ``PAIRED``: hit@1, hit@5 and
reciprocal rank under the harness rules, the first gold rank in the top 10, 0
for a miss), over the questions both evaluated. Each mean difference gets a
bootstrap 95% interval and a randomization p-value on the dataset's shared
draws (resampling.py), a McNemar or t-test p-value (paired.py) with Holm's
correction and the minimum detectable difference (correction.py). A variant
that gives lists for fewer than ``metrics.MIN_COVERAGE`` of its evaluated
questions (an imported run's absent questions count as its misses) is in no
comparison and no pair: stats.json names it under ``left_out``.
"""

from __future__ import annotations

import numpy as np

from ..core.tables import read_table
from .correction import ALPHA, FAMILY, apply_holm, mde, power_summary
from .measures import MEASURES, PAIRED, SATURATED
from .metrics import MIN_COVERAGE, too_few
from .paired import p_analytic
from .published import REFERENCE
from .resampling import BOOTSTRAP, PERMUTATIONS, SEED, Draws, paired, seeded


def read_outcomes(outcome_paths) -> tuple[dict[int, dict[str, float]], dict[int, str]]:
    """A variant's evaluated questions: ({q_index: {hit@1, hit@5, mrr}},
    {q_index: question type} of those the harness counts in its per-type table)."""
    out, types = PerQuestion(), {}
    for p in outcome_paths:
        t = read_table(p, columns=["q_index", "status", "gold_rank", "question_type", "in_types"]).to_pydict()
        for qi, status, rank, qt, in_types in zip(t["q_index"], t["status"], t["gold_rank"], t["question_type"],
                                                  t["in_types"]):
            if status != "evaluated":
                continue
            out[qi] = {m: MEASURES[m].of_rank(rank) for m in PAIRED}
            if in_types:
                types[qi] = qt
    return out, types


def covered(outcome_paths) -> tuple[int, int]:
    """(questions covered, questions evaluated) of a variant's outcomes (metrics.coverage, from its tables)."""
    from ..retrieval.imported import ABSENT

    cov = n = 0
    for p in outcome_paths:
        t = read_table(p, columns=["status", "reason"]).to_pydict()
        for status, reason in zip(t["status"], t["reason"]):
            if status == "evaluated":
                n += 1
                cov += reason != ABSENT
    return cov, n


def per_question(outcome_paths) -> dict[int, dict[str, float]]:
    """{q_index: {hit@1, hit@5, mrr}} of a variant's evaluated questions."""
    return read_outcomes(outcome_paths)[0]


class PerQuestion(dict):
    """{q_index: {measure: value}} of a variant, which also keeps its
    questions as a matrix (one column per measure, q_index ascending), built
    the first time a pair reads it (the dict is not changed after reading): a dataset's pairs take their rows from it
    instead of reading the dicts again for every pair."""

    _matrix: tuple[tuple, np.ndarray, np.ndarray] | None = None

    def rows(self, common, names: tuple = PAIRED) -> np.ndarray:
        """The measures ``names`` (one column each) at the questions ``common``."""
        if self._matrix is None or self._matrix[0] != names:
            keys = sorted(self)
            self._matrix = (names, np.array(keys, dtype=np.int64), np.array(
                [[self[q][m] for m in names] for q in keys], dtype=np.float64).reshape(len(keys), len(names)))
        _, keys, matrix = self._matrix
        return matrix[np.searchsorted(keys, np.asarray(common, dtype=np.int64))]


def _rows_of(x: dict[int, dict], common: list[int]) -> np.ndarray:
    """``x``'s metrics (one column each) at the questions ``common``."""
    return (x if isinstance(x, PerQuestion) else PerQuestion(x)).rows(common)


def _aligned(a: dict[int, dict], b: dict[int, dict], common: list[int]) -> tuple[np.ndarray, np.ndarray]:
    return _rows_of(a, common), _rows_of(b, common)


def _row(name: str, base: str, a: dict, b: dict, common: list[int], A: np.ndarray, B: np.ndarray,
         tests: list[dict]) -> dict:
    n = len(common)
    obs = (A - B).mean(axis=0) if n else None  # as paired() computes it, whichever path gave the interval
    metrics = {}
    for j, m in enumerate(PAIRED):
        ra = float(A[:, j].mean()) if n else None
        rb = float(B[:, j].mean()) if n else None
        metrics[m] = {"n": n, "variant": ra, "baseline": rb, **tests[j], "diff": float(obs[j]) if n else None,
                      # a rate at 95% or more leaves little room to show a difference
                      "saturated": MEASURES[m].unit.saturates and n > 0 and max(ra, rb) >= SATURATED}
        d = A[:, j] - B[:, j]
        metrics[m]["p_analytic"] = p_analytic(m, d)
        metrics[m]["sd"] = float(d.std(ddof=1)) if n > 1 else None
        metrics[m]["mde"] = mde(d)
    return {"variant": name, "baseline": base, "n": n,
            "only_variant": len(set(a) - set(b)), "only_baseline": len(set(b) - set(a)),
            "metrics": metrics}


def compare(name: str, base: str, a: dict[int, dict], b: dict[int, dict], dataset: str = "",
            draws: Draws | None = None) -> dict:
    """``name`` minus ``base`` over the questions both evaluated. Over the whole
    index space of ``draws`` (or without ``draws``) the draws of :func:`paired`;
    over fewer questions the same draws restricted to them."""
    common = sorted(set(a) & set(b))
    A, B = _aligned(a, b, common)
    if draws is None or common == draws.index:
        tests = paired(A, B, seeded(dataset))  # the dataset's draws, whatever the names compared
    else:
        tests = draws.evaluate([(common, A[:, j] - B[:, j]) for j in range(len(PAIRED))])
    return _row(name, base, a, b, common, A, B, tests)


def _comparison_rows(which: list[tuple[str, str, str]], per: dict, draws: Draws) -> list[dict]:
    """:func:`compare` of each (variant, baseline, why), the comparisons over
    the whole index space computed together (:meth:`Draws.full_paired`)."""
    aligned = []
    for v, b, _ in which:
        common = sorted(set(per[v]) & set(per[b]))
        aligned.append((common, *_aligned(per[v], per[b], common)))
    full = [k for k, (common, _, _) in enumerate(aligned) if common == draws.index]
    tests = dict(zip(full, draws.full_paired([aligned[k][1] - aligned[k][2] for k in full])))
    rows = []
    for k, ((v, b, why), (common, A, B)) in enumerate(zip(which, aligned)):
        if k not in tests:
            tests[k] = draws.evaluate([(common, A[:, j] - B[:, j]) for j in range(len(PAIRED))])
        row = _row(v, b, per[v], per[b], common, A, B, tests[k])
        row["against"] = why
        rows.append(row)
    return rows


def comparisons(variants: dict[str, str]) -> list[tuple[str, str, str]]:
    """(variant, baseline, why) for every variant with its harness baseline in
    the set and every variant against v0.8.0, without repeats."""
    out, seen = [], set()
    for v, base in variants.items():
        for b, why in ((base, "harness baseline"), (REFERENCE, REFERENCE)):
            if b and b != v and b in variants and (v, b) not in seen:
                seen.add((v, b))
                out.append((v, b, why))
    return out


def all_pairs(names: list[str]) -> list[tuple[str, str]]:
    """(later, earlier) for every pair of ``names`` in their order: the later one
    minus the earlier one."""
    return [(names[j], names[i]) for j in range(len(names)) for i in range(j)]


def _type_order(common: list[int], types: dict[int, str]) -> list[str]:
    """Types by their question count over ``common``, descending, ties in order
    of first appearance (the harnesses' per-type tables)."""
    count: dict[str, int] = {}
    for q in common:
        if q in types:
            count[types[q]] = count.get(types[q], 0) + 1
    return sorted(count, key=lambda t: -count[t])


def _by_type_jobs(a: dict, b: dict, types: dict[int, str], names=("a", "b")) -> list[tuple[str, list[int], list]]:
    """Per question type of the questions both evaluated: (type, its
    questions, one :meth:`Draws.evaluate_diffs` job per metric)."""
    common = sorted(set(a) & set(b))
    out = []
    for t in _type_order(common, types):
        qs = [q for q in common if types.get(q) == t]
        A, B = _aligned(a, b, qs)
        out.append((t, qs, [(qs, ((names[0], m), A[:, j]), ((names[1], m), B[:, j])) for j, m in enumerate(PAIRED)]))
    return out


def _pair_rows(names: list[tuple[str, str]], per: dict, draws: Draws) -> list[dict]:
    rows, jobs = [], []
    for v, b in names:
        common = sorted(set(per[v]) & set(per[b]))
        A, B = _aligned(per[v], per[b], common)
        rows.append((v, b, common, A, B))
        jobs += [(common, ((v, m), A[:, j]), ((b, m), B[:, j])) for j, m in enumerate(PAIRED)]
    res = draws.evaluate_diffs(jobs)
    k = len(PAIRED)
    return [_row(v, b, per[v], per[b], common, A, B, res[i * k:(i + 1) * k])
            for i, (v, b, common, A, B) in enumerate(rows)]


def left_out_variants(variants, outcomes: dict[str, list]) -> list[dict]:
    """The variants that cover too few of their evaluated questions
    (metrics.MIN_COVERAGE) to be in any comparison or pair."""
    left_out = []
    for v in variants:
        cov, n = covered(outcomes[v])
        if too_few(cov, n):
            left_out.append({"variant": v, "covered": cov, "questions": n})
    return left_out


def compared_variants(variants, compare_set: list[str] | None, left_out: list[dict]) -> list[str]:
    """The variants stats.json compares pair by pair (its ``compared``), in ``variants``' order."""
    gone = {d["variant"] for d in left_out}
    return [v for v in variants if v not in gone and (compare_set is None or v in compare_set)]


def dataset_stats(dataset: str, variants: dict[str, str], outcomes: dict[str, list], log=print,
                  compare_set: list[str] | None = None) -> dict:
    """``variants``: {name: its baseline}; ``outcomes``: {name: outcome files};
    ``compare_set``: the variants compared pairwise (their order, those of
    ``variants`` only; None: every variant). A variant that covers too few
    of its evaluated questions (metrics.MIN_COVERAGE) is in no comparison
    and no pair (``left_out``)."""
    left_out = left_out_variants(variants, outcomes)
    for d in left_out:
        log(f"{dataset}: {d['variant']} left out of the paired tests: covers {d['covered']} of {d['questions']} "
            f"questions")
    gone = {d["variant"] for d in left_out}
    chosen = compared_variants(variants, compare_set, left_out)
    variants = {v: b for v, b in variants.items() if v not in gone}
    read = {v: read_outcomes(outcomes[v]) for v in variants}
    per = {v: r[0] for v, r in read.items()}
    types: dict[int, str] = {}
    for v in variants:
        for q, t in read[v][1].items():
            types.setdefault(q, t)
    draws = Draws(dataset, sorted(set().union(*per.values())) if per else [])
    rows = _comparison_rows(comparisons(variants), per, draws)
    for row in rows:
        v, b = row["variant"], row["baseline"]
        log(f"{dataset}: {v} vs {b}: n {row['n']}, " + ", ".join(
            f"{m} {row['metrics'][m]['diff']:+.4f} p {row['metrics'][m]['p']:.4f}"
            for m in PAIRED if row["metrics"][m]["diff"] is not None))
    # each comparison per question type, on the same draws restricted to the type's questions
    type_jobs = [_by_type_jobs(per[r["variant"]], per[r["baseline"]], types, (r["variant"], r["baseline"]))
                 for r in rows]
    res = iter(draws.evaluate_diffs([job for jobs in type_jobs for _, _, metric_jobs in jobs for job in metric_jobs]))
    for r, jobs in zip(rows, type_jobs):
        r["by_type"] = {}
        for t, qs, metric_jobs in jobs:
            r["by_type"][t] = {"n": len(qs), "metrics": {m: {**next(res), "mde": mde(a - b)}
                                                         for m, (_, (_, a), (_, b)) in zip(PAIRED, metric_jobs)}}
    pairs = _pair_rows(all_pairs(chosen), per, draws)
    log(f"{dataset}: {len(pairs)} pairs of {len(chosen)} variants")
    family_size = apply_holm(rows + pairs)
    return {"dataset": dataset, "seed": SEED, "bootstrap": BOOTSTRAP, "permutations": PERMUTATIONS,
            "saturated_at": SATURATED, "metrics": list(PAIRED), "comparisons": rows,
            "resampled_questions": len(draws.index), "compared": chosen, "pairs": pairs,
            "min_coverage": MIN_COVERAGE, "left_out": left_out,
            "holm": {"alpha": ALPHA, "family": FAMILY, "pairs": family_size,
                     "tests": {m: MEASURES[m].test_text for m in PAIRED}},
            "power": power_summary(rows + pairs, family_size)}
