"""Paired comparisons of variants on the same questions.

For each variant against its baseline (the harness's own pairs) and against
``v0.8.0`` (``comparisons``), and for every pair of the compared variants
(``pairs``, the ``statistics.compare`` setting): per question, the difference
in hit@1, hit@5 and reciprocal rank (harness rules: the first gold rank in the
top 10, 0 for a miss), over the questions both evaluated. Each mean difference
gets a percentile bootstrap 95% confidence interval (questions resampled with
replacement) and a paired randomization test p-value (signs of the differences
flipped at random, two-sided, ``(1 + #extreme) / (1 + R)``, so its floor is
``1 / (1 + R)``: "p < 1/R").

The random stream is seeded from :data:`SEED` and the dataset's name only, and
drawn over the dataset's question index space: the questions that any of its
variants evaluated, in q_index order (N of them). Every comparison on a
dataset uses those same resamples and sign flips: a comparison over all N
questions exactly as drawn; one over fewer questions (a pair where one variant
skipped some, a question type) the same draws restricted to its questions (a
resample's mean over the drawn copies of them; the sign each of them got). Two
variants with the same per-question outcomes get the same interval and
p-value, and a rerun writes the same bytes.

Multiple comparisons: Holm's step-down correction per dataset and metric, over
every distinct pair of variants the dataset's statistics compare (``pairs``
and ``comparisons`` together), applied to p-values without a permutation
floor (``p_analytic``): McNemar's exact test for hit@1 and hit@5 (the exact
form of the sign-flip test when every difference is 0 or +-1: the wins among
the discordant questions are Binomial(k, 1/2)), the paired t-test for MRR.
Minimum detectable difference (``mde``): ``(z_{1-alpha/2} + z_power) *
sd(d) / sqrt(n)`` with alpha 0.05, power 0.8 and sd(d) the sample standard
deviation of the pair's per-question differences.
"""

from __future__ import annotations

import hashlib
import math
from functools import cached_property, lru_cache

import numpy as np

from ..tables import read_table

SEED = 20240611
BOOTSTRAP = 10_000
PERMUTATIONS = 10_000
SATURATED = 0.95
METRICS = ("hit@1", "hit@5", "mrr")
REFERENCE = "v0.8.0"
ALPHA = 0.05  # the report's level: 95% intervals, two-sided tests
POWER = 0.80  # of the minimum detectable difference
TESTS = {"hit@1": "McNemar exact (two-sided binomial test of the wins among the discordant questions)",
         "hit@5": "McNemar exact (two-sided binomial test of the wins among the discordant questions)",
         "mrr": "paired t-test (two-sided)"}
FAMILY = ("per dataset and metric: every distinct pair of variants these statistics compare (pairs and "
          "comparisons together)")
_TOL = 1e-12


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
            out[qi] = {"hit@1": float(rank == 1), "hit@5": float(1 <= rank <= 5),
                       "mrr": 1.0 / rank if rank > 0 else 0.0}
            if in_types:
                types[qi] = qt
    return out, types


def per_question(outcome_paths) -> dict[int, dict[str, float]]:
    """{q_index: {hit@1, hit@5, mrr}} of a variant's evaluated questions."""
    return read_outcomes(outcome_paths)[0]


def _rng(*names: str) -> np.random.Generator:
    h = hashlib.sha256("\x00".join(names).encode("utf-8")).digest()
    return np.random.default_rng([SEED, int.from_bytes(h[:8], "little")])


def paired(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, n_boot: int = BOOTSTRAP,
           n_perm: int = PERMUTATIONS, chunk: int = 500) -> dict:
    """Mean difference a - b with its bootstrap CI and randomization p-value.
    ``a`` and ``b`` are aligned per question (2-D: one column per metric)."""
    d = a - b
    n = d.shape[0]
    obs = d.mean(axis=0)
    boots, extreme = [], np.zeros(d.shape[1], dtype=np.int64)
    if n:
        for lo in range(0, n_boot, chunk):
            idx = rng.integers(0, n, size=(min(chunk, n_boot - lo), n))
            boots.append(d[idx].mean(axis=1))
        tol = 1e-12
        for lo in range(0, n_perm, chunk):
            signs = rng.integers(0, 2, size=(min(chunk, n_perm - lo), n)) * 2 - 1
            perm = np.abs(signs @ d) / n
            extreme += (perm >= np.abs(obs) - tol).sum(axis=0)
        boots = np.concatenate(boots)
        low, high = np.percentile(boots, [2.5, 97.5], axis=0)
    out = []
    for j in range(d.shape[1]):
        out.append({"diff": float(obs[j]) if n else None,
                    "ci95": [float(low[j]), float(high[j])] if n else None,
                    "p": float((1 + extreme[j]) / (1 + n_perm)) if n else None})
    return out


def _exact_scale(values: np.ndarray) -> int | None:
    """A factor that makes every value an integer (1 for hits, 2520 = lcm(1..10)
    for reciprocal ranks of the top 10), so the sums below are exact whatever
    order a BLAS adds them in; None when there is none."""
    for s in (1, 2520):
        x = values * s
        if np.all(np.abs(x - np.round(x)) < 1e-6):
            return s
    return None


class Draws:
    """The dataset's bootstrap resamples and sign flips over its question index
    space (``index``: the q_index of each position), from the same stream and
    in the same order as :func:`paired` draws them over ``len(index)``
    questions. Kept as counts (how often each question is drawn in each
    resample) and signs, so any subset of the questions reads the same draws:
    a resample's mean over the subset is sum(count * d) / sum(count) over its
    questions, the sign-flip sum is sum(sign * d)."""

    def __init__(self, dataset: str, index, n_boot: int = BOOTSTRAP, n_perm: int = PERMUTATIONS,
                 chunk: int = 500):
        self.dataset = dataset
        self.index = list(index)
        self.pos = {q: i for i, q in enumerate(self.index)}
        self.n_boot, self.n_perm, self._chunk = n_boot, n_perm, chunk

    @cached_property
    def _stream(self) -> tuple[list, list, list]:
        """(counts, draws, signs), drawn on first use: a dataset with nothing
        to compare (one variant, say) never pays for its resamples."""
        big, chunk = len(self.index), self._chunk
        counts, draws, signs = [], [], []
        if not big:
            return counts, draws, signs
        rng = _rng(self.dataset)
        dtype = np.uint16 if big < 2 ** 16 else np.int32
        for lo in range(0, self.n_boot, chunk):
            c = min(chunk, self.n_boot - lo)
            idx = rng.integers(0, big, size=(c, big))
            draws.append(idx.astype(dtype))
            flat = (idx + (np.arange(c) * big)[:, None]).ravel()
            counts.append(np.bincount(flat, minlength=c * big).reshape(c, big).astype(dtype))
        for lo in range(0, self.n_perm, chunk):
            c = min(chunk, self.n_perm - lo)
            signs.append((rng.integers(0, 2, size=(c, big)) * 2 - 1).astype(np.int8))
        return counts, draws, signs

    @property
    def counts(self) -> list[np.ndarray]:
        """How often each question is drawn in each resample, in chunks of resamples."""
        return self._stream[0]

    @property
    def draws(self) -> list[np.ndarray]:
        """The draws themselves, in order (full_paired sums some of them in that order)."""
        return self._stream[1]

    @property
    def signs(self) -> list[np.ndarray]:
        """Each sign flip's signs (+1 / -1), in chunks of flips."""
        return self._stream[2]

    def _exact_products(self, draws: list[np.ndarray], x: np.ndarray) -> np.ndarray:
        """Every resample's (or sign flip's) sums of the integer columns ``x``
        (float64, exact). A resample's counts add up to N (the index space)
        and a sign is +-1, so a sum is at most N times the largest value: where
        that stays under 2^24 float32 holds every partial sum exactly, in
        whatever order BLAS adds them, at half the cost; beyond it, float64
        (exact under 2^53)."""
        if len(self.index) * float(np.abs(x).max(initial=0)) < 2 ** 24:
            x32 = x.astype(np.float32)
            return np.concatenate([c.astype(np.float32) @ x32 for c in draws]).astype(np.float64)
        return np.concatenate([c.astype(np.float64) @ x for c in draws])

    def full_paired(self, ds: list[np.ndarray], block: int = 25) -> list[list[dict]]:
        """What :func:`paired` gives over the whole index space for each ``d``
        (per-question differences, one column per metric, in index order),
        bit for bit, all at once instead of drawing the stream again for each.
        Its bootstrap means are sums over the drawn questions in draw order,
        over n: for a column of integers (hits) any order gives the same sum,
        so they come from the counts; for another column (reciprocal ranks)
        the drawn values are added in draw order, as ``d[idx].mean(axis=1)``
        adds them. Its sign-flip sums, on columns that are integers at a
        scale (``_exact_scale``), are compared exactly; a ``d`` with a column
        that is not goes through :func:`paired` itself."""
        n = len(self.index)
        out: list = [None] * len(ds)
        todo = []
        for i, d in enumerate(ds):
            d = np.asarray(d, dtype=np.float64)
            scales = [_exact_scale(d[:, j]) for j in range(d.shape[1])]
            if not n or None in scales:
                out[i] = paired(d, np.zeros_like(d), _rng(self.dataset), self.n_boot, self.n_perm)
            else:
                todo.append((i, d, scales))
        if not todo:
            return out
        cols = [(k, j) for k, (_, d, _) in enumerate(todo) for j in range(d.shape[1])]
        boots = [np.empty((self.n_boot, d.shape[1])) for _, d, _ in todo]
        whole = [c for c in cols if todo[c[0]][2][c[1]] == 1]
        drawn = [c for c in cols if todo[c[0]][2][c[1]] != 1]
        if whole:
            x = np.stack([todo[k][1][:, j] for k, j in whole], axis=1)
            sums = self._exact_products(self.counts, x) / n
            for col, (k, j) in enumerate(whole):
                boots[k][:, j] = sums[:, col]
        if drawn:
            # at least two columns, so the summed axis is never the innermost one
            # (numpy sums that one pairwise, not in order)
            x = np.stack([todo[k][1][:, j] for k, j in drawn] + [np.zeros(n)] * (len(drawn) < 2), axis=1)
            parts = [np.add.reduce(x[idx[lo:lo + block]], axis=1) / n
                     for idx in self.draws for lo in range(0, len(idx), block)]
            sums = np.concatenate(parts)
            for col, (k, j) in enumerate(drawn):
                boots[k][:, j] = sums[:, col]
        scaled = np.stack([np.round(todo[k][1][:, j] * todo[k][2][j]) for k, j in cols], axis=1)
        flips = self._exact_products(self.signs, scaled)
        extreme = (np.abs(flips) >= np.abs(scaled.sum(axis=0)) - 0.5).sum(axis=0)
        col_of = {c: col for col, c in enumerate(cols)}
        for k, (i, d, _) in enumerate(todo):
            obs = d.mean(axis=0)
            low, high = np.percentile(boots[k], [2.5, 97.5], axis=0)
            out[i] = [{"diff": float(obs[j]), "ci95": [float(low[j]), float(high[j])],
                       "p": float((1 + int(extreme[col_of[(k, j)]])) / (1 + self.n_perm))}
                      for j in range(d.shape[1])]
        return out

    def evaluate_diffs(self, jobs: list[tuple[list[int], tuple, tuple]]) -> list[dict]:
        """:meth:`evaluate` of jobs given as two named columns each: (q_indexes,
        (name_a, a), (name_b, b)), the job's differences ``a - b``. The
        resample and sign-flip sums are linear, so where ``a``, ``b`` and
        ``a - b`` are integers at one scale (``_exact_scale``) a job's sums
        are those of ``a`` less those of ``b``: each column's are computed
        once for all the jobs that read it over the same questions, from the
        draws of those questions only. The same integers, so the same figures
        as :meth:`evaluate`, which the other jobs go through."""
        out: list[dict] = [{} for _ in jobs]
        linear, other = [], []
        for j, (qs, (name_a, a), (name_b, b)) in enumerate(jobs):
            a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            d = a - b
            scales = (_exact_scale(a), _exact_scale(b), _exact_scale(d)) if len(qs) else (None,)
            if None in scales:
                other.append((j, (qs, d)))
            else:
                linear.append((j, qs, d, 2520 if 2520 in scales else 1, ((name_a, a), (name_b, b))))
        for (j, _), res in zip(other, self.evaluate([job for _, job in other])):
            out[j] = res
        # the jobs by their questions: {positions: [(job, its two columns' keys)]}, {positions: {key: values}}
        groups: dict[tuple, list] = {}
        columns: dict[tuple, dict] = {}
        for j, qs, d, scale, named in linear:
            pos = tuple(self.pos[q] for q in qs)
            cols = columns.setdefault(pos, {})
            keys = []
            for name, x in named:
                key = (name, scale)
                if key not in cols:
                    cols[key] = np.round(x * scale)
                keys.append(key)
            groups.setdefault(pos, []).append((j, d, scale, keys))
        for pos, members in groups.items():
            at = np.asarray(pos, dtype=np.int64)
            index = {key: i for i, key in enumerate(columns[pos])}
            x = np.stack(list(columns[pos].values()), axis=1)
            totals = x.sum(axis=0)
            counts = [c[:, at] for c in self.counts]
            sums = self._exact_products(counts, x)
            drawn = self._exact_products(counts, np.ones((len(at), 1)))[:, 0]
            flips = self._exact_products([s[:, at] for s in self.signs], x)
            for j, d, scale, (ka, kb) in members:
                ca, cb = index[ka], index[kb]
                out[j] = self._summary(d, sums[:, ca] - sums[:, cb], drawn, scale, flips[:, ca] - flips[:, cb],
                                       totals[ca] - totals[cb], 0.5)
        return out

    def evaluate(self, jobs: list[tuple[list[int], np.ndarray]], block: int = 256) -> list[dict]:
        """``jobs``: (q_indexes, per-question differences) each; per job its
        mean, bootstrap 95% interval and randomization p over the draws
        restricted to its questions. A resample that drew none of a job's
        questions has no mean and is left out of its percentiles."""
        out: list[dict] = [{} for _ in jobs]
        big = len(self.index)
        todo = []
        for j, (qs, d) in enumerate(jobs):
            d = np.asarray(d, dtype=np.float64)
            if not len(qs):
                out[j] = {"diff": None, "ci95": None, "p": None}
                continue
            scale = _exact_scale(d)
            todo.append((j, [self.pos[q] for q in qs], d, scale))
        for lo in range(0, len(todo), block):
            part = todo[lo:lo + block]
            num = np.zeros((big, len(part)))
            mask_of: dict[tuple, int] = {}
            masks = []
            for k, (_, pos, d, scale) in enumerate(part):
                num[pos, k] = np.round(d * scale) if scale else d
                key = tuple(pos)
                if key not in mask_of:
                    mask_of[key] = len(masks)
                    m = np.zeros(big)
                    m[pos] = 1.0
                    masks.append(m)
            masks = np.stack(masks, axis=1)
            sums = np.concatenate([c.astype(np.float64) @ num for c in self.counts])
            drawn = np.concatenate([c.astype(np.float64) @ masks for c in self.counts])
            flips = np.concatenate([s.astype(np.float64) @ num for s in self.signs])
            for k, (j, pos, d, scale) in enumerate(part):
                # exact integer sums when scaled; a tolerance for float ones
                out[j] = self._summary(d, sums[:, k], drawn[:, mask_of[tuple(pos)]], scale or 1, flips[:, k],
                                       num[:, k].sum(), 0.5 if scale else _TOL * len(pos))
        return out

    def _summary(self, d, sums, drawn, scale, flips, total, tol) -> dict:
        """A job's mean, bootstrap 95% interval and randomization p from its
        resamples' sums and drawn counts and its sign-flip sums (at ``scale``;
        ``total``: the sum of its scaled differences)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            boots = sums / (drawn * scale)
        boots = boots[drawn > 0]
        extreme = int((np.abs(flips) >= abs(total) - tol).sum())
        ci = [float(x) for x in np.percentile(boots, [2.5, 97.5])] if boots.size else None
        return {"diff": float(d.mean()), "ci95": ci, "p": float((1 + extreme) / (1 + self.n_perm))}


def p_analytic(metric: str, d: np.ndarray) -> float | None:
    """A two-sided p-value without a permutation floor, for Holm's correction:
    McNemar's exact test for a hit rate (differences 0 or +-1), the paired
    t-test for MRR."""
    n = len(d)
    if not n:
        return None
    if metric.startswith("hit@"):
        k = int(np.count_nonzero(d))
        return _mcnemar(int((d > 0).sum()), k) if k else 1.0
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
    ``discordant`` at 1/2 (many pairs of a dataset share the same counts)."""
    from scipy import stats as sps

    return float(sps.binomtest(wins, discordant, 0.5).pvalue)


def z(q: float) -> float:
    """The standard normal quantile (scipy.stats' norm.ppf is ndtri)."""
    from scipy.special import ndtri

    return float(ndtri(q))


def mde(d: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The difference a two-sided test at ``alpha`` detects with probability
    ``power`` at this n and spread: (z_{1-alpha/2} + z_power) * sd(d) / sqrt(n)."""
    n = len(d)
    if n < 2:
        return None
    return (z(1 - alpha / 2) + z(power)) * float(d.std(ddof=1)) / math.sqrt(n)


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


class PerQuestion(dict):
    """{q_index: {hit@1, hit@5, mrr}} of a variant, which also keeps its
    questions as a matrix (one column per metric, q_index ascending), built
    the first time a pair reads it (the dict is not changed after reading): a dataset's pairs take their rows from it
    instead of reading the dicts again for every pair."""

    _matrix: tuple[np.ndarray, np.ndarray] | None = None

    def rows(self, common) -> np.ndarray:
        if self._matrix is None:
            keys = sorted(self)
            self._matrix = (np.array(keys, dtype=np.int64), np.array(
                [[self[q][m] for m in METRICS] for q in keys], dtype=np.float64).reshape(len(keys), len(METRICS)))
        keys, matrix = self._matrix
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
    for j, m in enumerate(METRICS):
        ra = float(A[:, j].mean()) if n else None
        rb = float(B[:, j].mean()) if n else None
        metrics[m] = {"n": n, "variant": ra, "baseline": rb, **tests[j], "diff": float(obs[j]) if n else None,
                      # a rate at 95% or more leaves little room to show a difference
                      "saturated": m != "mrr" and n > 0 and max(ra, rb) >= SATURATED}
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
        tests = paired(A, B, _rng(dataset))  # the dataset's draws, whatever the names compared
    else:
        tests = draws.evaluate([(common, A[:, j] - B[:, j]) for j in range(len(METRICS))])
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
            tests[k] = draws.evaluate([(common, A[:, j] - B[:, j]) for j in range(len(METRICS))])
        row = _row(v, b, per[v], per[b], common, A, B, tests[k])
        row["against"] = why
        rows.append(row)
    return rows


def comparisons(variants: dict[str, str]) -> list[tuple[str, str, str]]:
    """(variant, baseline, why) for every variant with its harness baseline in
    the set and every variant against v0.8.0, without repeats."""
    out, seen = [], set()
    for v, base in variants.items():
        for b, why in ((base, "harness baseline"), (REFERENCE, "v0.8.0")):
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
        out.append((t, qs, [(qs, ((names[0], m), A[:, j]), ((names[1], m), B[:, j])) for j, m in enumerate(METRICS)]))
    return out


def _pair_rows(names: list[tuple[str, str]], per: dict, draws: Draws) -> list[dict]:
    rows, jobs = [], []
    for v, b in names:
        common = sorted(set(per[v]) & set(per[b]))
        A, B = _aligned(per[v], per[b], common)
        rows.append((v, b, common, A, B))
        jobs += [(common, ((v, m), A[:, j]), ((b, m), B[:, j])) for j, m in enumerate(METRICS)]
    res = draws.evaluate_diffs(jobs)
    k = len(METRICS)
    return [_row(v, b, per[v], per[b], common, A, B, res[i * k:(i + 1) * k])
            for i, (v, b, common, A, B) in enumerate(rows)]


def _apply_holm(rows: list[dict]) -> dict[str, int]:
    """Holm per metric over the distinct pairs among ``rows``; each row's metric
    gets ``p_holm`` (a pair compared twice gets the same). Returns m per metric."""
    family_size = {}
    for m in METRICS:
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


def _power(rows: list[dict], family_size: dict[str, int]) -> dict:
    """The minimum detectable differences of the dataset's distinct pairs, per metric."""
    out = {"alpha": ALPHA, "power": POWER, "z_alpha": z(1 - ALPHA / 2), "z_power": z(POWER),
           "formula": "(z_alpha + z_power) * sd(d) / sqrt(n), sd(d): sample sd of the pair's per-question "
                      "differences", "metrics": {}}
    for m in METRICS:
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


def dataset_stats(dataset: str, variants: dict[str, str], outcomes: dict[str, list], log=print,
                  compare_set: list[str] | None = None) -> dict:
    """``variants``: {name: its baseline}; ``outcomes``: {name: outcome files};
    ``compare_set``: the variants compared pairwise (their order, those of
    ``variants`` only; None: every variant)."""
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
            for m in METRICS if row["metrics"][m]["diff"] is not None))
    # each comparison per question type, on the same draws restricted to the type's questions
    type_jobs = [_by_type_jobs(per[r["variant"]], per[r["baseline"]], types, (r["variant"], r["baseline"]))
                 for r in rows]
    res = iter(draws.evaluate_diffs([job for jobs in type_jobs for _, _, metric_jobs in jobs for job in metric_jobs]))
    for r, jobs in zip(rows, type_jobs):
        r["by_type"] = {}
        for t, qs, metric_jobs in jobs:
            r["by_type"][t] = {"n": len(qs), "metrics": {m: {**next(res), "mde": mde(a - b)}
                                                         for m, (_, (_, a), (_, b)) in zip(METRICS, metric_jobs)}}
    chosen = [v for v in variants if compare_set is None or v in compare_set]
    pairs = _pair_rows(all_pairs(chosen), per, draws)
    log(f"{dataset}: {len(pairs)} pairs of {len(chosen)} variants")
    family_size = _apply_holm(rows + pairs)
    return {"dataset": dataset, "seed": SEED, "bootstrap": BOOTSTRAP, "permutations": PERMUTATIONS,
            "saturated_at": SATURATED, "metrics": list(METRICS), "comparisons": rows,
            "resampled_questions": len(draws.index), "compared": chosen, "pairs": pairs,
            "holm": {"alpha": ALPHA, "family": FAMILY, "pairs": family_size, "tests": {m: TESTS[m] for m in METRICS}},
            "power": _power(rows + pairs, family_size)}


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


def fmt_ci(m: dict, scale: float = 100.0, digits: int = 1) -> str:
    if m["diff"] is None:
        return "-"
    lo, hi = m["ci95"]
    return f"{m['diff'] * scale:+.{digits}f} [{lo * scale:+.{digits}f}, {hi * scale:+.{digits}f}]"
