"""Paired comparisons of variants on the same questions.

For each variant against its baseline (the harness's own pairs) and against
``v0.8.0``: per question, the difference in hit@1, hit@5 and reciprocal rank
(harness rules: the first gold rank in the top 10, 0 for a miss), over the
questions both evaluated. Each mean difference gets a percentile bootstrap
95% confidence interval (questions resampled with replacement) and a paired
randomization test p-value (signs of the differences flipped at random,
two-sided, ``(1 + #extreme) / (1 + R)``, so its floor is ``1 / (1 + R)``: "p <
1/R"). The random stream is seeded from :data:`SEED` and the dataset's name
only: every comparison on a dataset over the same questions draws the same
resamples and the same sign flips, so two variants with the same per-question
outcomes get the same interval and p-value, and a rerun writes the same bytes.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .tables import read_table

SEED = 20240611
BOOTSTRAP = 10_000
PERMUTATIONS = 10_000
SATURATED = 0.95
METRICS = ("hit@1", "hit@5", "mrr")
REFERENCE = "v0.8.0"


def per_question(outcome_paths) -> dict[int, dict[str, float]]:
    """{q_index: {hit@1, hit@5, mrr}} of a variant's evaluated questions."""
    out = {}
    for p in outcome_paths:
        t = read_table(p, columns=["q_index", "status", "gold_rank"]).to_pydict()
        for qi, status, rank in zip(t["q_index"], t["status"], t["gold_rank"]):
            if status != "evaluated":
                continue
            out[qi] = {"hit@1": float(rank == 1), "hit@5": float(1 <= rank <= 5),
                       "mrr": 1.0 / rank if rank > 0 else 0.0}
    return out


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


def compare(name: str, base: str, a: dict[int, dict], b: dict[int, dict], dataset: str = "") -> dict:
    common = sorted(set(a) & set(b))
    rng = _rng(dataset)  # the dataset's draws, whatever the names compared
    A = np.array([[a[q][m] for m in METRICS] for q in common], dtype=np.float64).reshape(len(common), len(METRICS))
    B = np.array([[b[q][m] for m in METRICS] for q in common], dtype=np.float64).reshape(len(common), len(METRICS))
    tests = paired(A, B, rng)
    n = len(common)
    metrics = {}
    for j, m in enumerate(METRICS):
        ra = float(A[:, j].mean()) if n else None
        rb = float(B[:, j].mean()) if n else None
        metrics[m] = {"n": n, "variant": ra, "baseline": rb, **tests[j],
                      # a rate at 95% or more leaves little room to show a difference
                      "saturated": m != "mrr" and n > 0 and max(ra, rb) >= SATURATED}
    return {"variant": name, "baseline": base, "n": n,
            "only_variant": len(set(a) - set(b)), "only_baseline": len(set(b) - set(a)),
            "metrics": metrics}


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


def dataset_stats(dataset: str, variants: dict[str, str], outcomes: dict[str, list], log=print) -> dict:
    """``variants``: {name: its baseline}; ``outcomes``: {name: outcome files}."""
    per = {v: per_question(outcomes[v]) for v in variants}
    rows = []
    for v, b, why in comparisons(variants):
        row = compare(v, b, per[v], per[b], dataset)
        row["against"] = why
        rows.append(row)
        log(f"{dataset}: {v} vs {b}: n {row['n']}, " + ", ".join(
            f"{m} {row['metrics'][m]['diff']:+.4f} p {row['metrics'][m]['p']:.4f}"
            for m in METRICS if row["metrics"][m]["diff"] is not None))
    return {"dataset": dataset, "seed": SEED, "bootstrap": BOOTSTRAP, "permutations": PERMUTATIONS,
            "saturated_at": SATURATED, "metrics": list(METRICS), "comparisons": rows}


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
