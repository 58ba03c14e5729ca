"""The dataset's resamples and sign flips, and the paired bootstrap interval
and randomization test computed over them (stats.py compares variants with
them).

Per question, a difference ``a - b``: its mean gets a percentile bootstrap
95% confidence interval (questions resampled with replacement) and a paired
randomization test p-value (signs of the differences flipped at random,
two-sided, ``(1 + #extreme) / (1 + R)``, so its floor is ``1 / (1 + R)``:
"p < 1/R").

The random stream is seeded from :data:`SEED` and the dataset's name only, and
drawn over the dataset's question index space: the questions that any of its
variants evaluated, in q_index order (N of them). Every comparison on a
dataset uses those same resamples and sign flips: a comparison over all N
questions exactly as drawn; one over fewer questions (a pair where one variant
skipped some, a question type) the same draws restricted to its questions (a
resample's mean over the drawn copies of them; the sign each of them got). Two
variants with the same per-question outcomes get the same interval and
p-value, and a rerun writes the same bytes.
"""

from __future__ import annotations

import hashlib
from functools import cached_property, lru_cache

import numpy as np

SEED = 20240611
BOOTSTRAP = 10_000
PERMUTATIONS = 10_000
_TOL = 1e-12


def seeded(*names: str) -> np.random.Generator:
    """The stream of the names (a dataset's: its resamples and sign flips), from :data:`SEED`."""
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


@lru_cache(maxsize=1)
def _stream(dataset: str, big: int, n_boot: int, n_perm: int, chunk: int) -> tuple[list, list, list]:
    """The stream of :class:`Draws` over ``big`` positions: it depends on the
    dataset and the size of the index space only, so the stats job's paired
    tests and its token budgets' (over the same number of questions) read
    one drawing. Read-only arrays, shared by every Draws that reads them."""
    counts, draws, signs = [], [], []
    if not big:
        return counts, draws, signs
    rng = seeded(dataset)
    dtype = np.uint16 if big < 2 ** 16 else np.int32
    for lo in range(0, n_boot, chunk):
        c = min(chunk, n_boot - lo)
        idx = rng.integers(0, big, size=(c, big))
        draws.append(idx.astype(dtype))
        flat = (idx + (np.arange(c) * big)[:, None]).ravel()
        counts.append(np.bincount(flat, minlength=c * big).reshape(c, big).astype(dtype))
    for lo in range(0, n_perm, chunk):
        c = min(chunk, n_perm - lo)
        signs.append((rng.integers(0, 2, size=(c, big)) * 2 - 1).astype(np.int8))
    for a in (*counts, *draws, *signs):
        a.flags.writeable = False
    return counts, draws, signs


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
        return _stream(self.dataset, len(self.index), self.n_boot, self.n_perm, self._chunk)

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

    def _exact_products(self, draws: list[np.ndarray], x: np.ndarray, by_column: bool = False) -> np.ndarray:
        """Every resample's (or sign flip's) sums of the integer columns ``x``
        (float64, exact), one row per resample, or with ``by_column`` one row
        per column of ``x``. A resample's counts add up to N (the index space)
        and a sign is +-1, so a sum is at most N times the largest value: where
        that stays under 2^24 float32 holds every partial sum exactly, in
        whatever order BLAS adds them, at half the cost; beyond it, float64
        (exact under 2^53)."""
        dtype = np.float32 if len(self.index) * float(np.abs(x).max(initial=0)) < 2 ** 24 else np.float64
        # equal columns (variants with the same outcomes, budgets every list fits) have equal sums: each once
        x, copies = np.unique(x.astype(dtype), axis=1, return_inverse=True)
        copies = copies.reshape(-1)
        sums = np.concatenate([c.astype(dtype) @ x for c in draws]).astype(np.float64)
        # (the products by column are the transpose of these: BLAS is several times slower computing them so)
        return np.ascontiguousarray(sums.T)[copies] if by_column else sums[:, copies]

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
                out[i] = paired(d, np.zeros_like(d), seeded(self.dataset), self.n_boot, self.n_perm)
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
            # (equal columns, as of two variants with the same lists, summed once)
            x, copies = np.unique(np.stack([todo[k][1][:, j] for k, j in drawn], axis=1), axis=1, return_inverse=True)
            x = np.concatenate([x, np.zeros((n, 1))], axis=1) if x.shape[1] < 2 else x
            parts = [np.add.reduce(x[idx[lo:lo + block]], axis=1) / n
                     for idx in self.draws for lo in range(0, len(idx), block)]
            sums = np.concatenate(parts)[:, copies.reshape(-1)]
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

    def evaluate_diffs(self, jobs: list[tuple[list[int], tuple, tuple]], block: int = 256) -> list[dict]:
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
        # the jobs by their questions: {positions: [(job, its two columns' keys)]}, {positions: {key: values}};
        # a pair's jobs (one per measure) share one list of questions, so its positions are found once
        groups: dict[tuple, list] = {}
        columns: dict[tuple, dict] = {}
        positions: dict[int, tuple] = {}
        for j, qs, d, scale, named in linear:
            pos = positions.get(id(qs))
            if pos is None:
                pos = positions[id(qs)] = tuple(map(self.pos.__getitem__, qs))
            cols = columns.setdefault(pos, {})
            keys = []
            for name, x in named:
                key = (name, scale)
                if key not in cols:
                    cols[key] = np.round(x * scale)
                keys.append(key)
            groups.setdefault(pos, []).append((j, d, scale, keys))
        whole = tuple(range(len(self.index)))
        for pos, members in groups.items():
            at = np.asarray(pos, dtype=np.int64)
            index = {key: i for i, key in enumerate(columns[pos])}
            # equal columns (variants with the same outcomes) once, and so each distinct job once
            x, copies = np.unique(np.stack(list(columns[pos].values()), axis=1), axis=1, return_inverse=True)
            copies = copies.reshape(-1)
            totals = x.sum(axis=0)
            # every question in index order (a pair over all of them): the draws as they are
            counts = self.counts if pos == whole else [c[:, at] for c in self.counts]
            signs = self.signs if pos == whole else [s[:, at] for s in self.signs]
            sums = self._exact_products(counts, x, by_column=True)
            # integers, so the same as the products of a column of ones
            drawn = np.concatenate([c.sum(axis=1, dtype=np.int64) for c in counts]).astype(np.float64)
            flips = self._exact_products(signs, x, by_column=True)
            distinct: dict[tuple, int] = {}
            for _, _, scale, (ka, kb) in members:
                distinct.setdefault((copies[index[ka]], copies[index[kb]], scale), len(distinct))
            ca, cb, scales = (np.array(c) for c in zip(*distinct))
            tests = []
            for lo in range(0, len(ca), block):
                at_ = slice(lo, lo + block)
                tests += self._tests(sums[ca[at_]] - sums[cb[at_]], drawn, scales[at_],
                                     flips[ca[at_]] - flips[cb[at_]], totals[ca[at_]] - totals[cb[at_]], 0.5)
            for j, d, scale, (ka, kb) in members:
                out[j] = {"diff": float(d.mean()), **tests[distinct[copies[index[ka]], copies[index[kb]], scale]]}
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

    def _tests(self, sums, drawn, scales, flips, totals, tol) -> list[dict]:
        """The interval and p of :meth:`_summary` for several jobs at once, one
        row each of ``sums`` and ``flips`` and one entry each of ``scales`` and
        ``totals``, over the same ``drawn``: the same element-wise arithmetic,
        and the percentiles of each row as of the row alone, so the same figures."""
        with np.errstate(invalid="ignore", divide="ignore"):
            boots = sums / (drawn[None, :] * scales[:, None])
        if not (drawn > 0).all():
            boots = boots[:, drawn > 0]
        extreme = (np.abs(flips) >= (np.abs(totals) - tol)[:, None]).sum(axis=1)
        cis = np.percentile(boots, [2.5, 97.5], axis=1).T.tolist() if boots.shape[1] else [None] * len(scales)
        return [{"ci95": ci, "p": float((1 + int(e)) / (1 + self.n_perm))} for ci, e in zip(cis, extreme)]
