"""Paired statistics of recall within token budgets (stats.json's ``budgets``;
docs/statistics.md#token-budgets): for every pair of the compared variants
measured at the same grain, with the same tokenizer and budgets, per budget T
the per-question difference in recall_any@T and recall_all@T over the
questions both count in their budgets' top-level means, with stats.py's
bootstrap interval and randomization p (the dataset's draws over those
questions, resampling.py), McNemar's exact p (paired.py) Holm-corrected over
the pairs (correction.py) and the minimum detectable difference.

Each question's figures come from its merged outcomes (``in_budgets``,
``first_gold_tokens``, ``all_gold_tokens``: recall_any@T is ``first <= T``,
recall_all@T ``all <= T``) and the variant's official.json names the grain,
tokenizer and budgets they were counted under (budgets.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core.tables import read_table
from .budgets import all_name, any_name
from .correction import ALPHA, apply_holm, mde
from .measures import MEASURES
from .paired import mcnemar
from .resampling import Draws
from .stats import PerQuestion

# recall within a budget is a hit rate per question (0 or 1), tested as hit@1 is
TEST = f"{MEASURES['hit@1'].test_text}, Holm-corrected per measure over the dataset's pairs"


def read_variant(outcomes_path, official_path) -> dict | None:
    """A variant's budgets (``grain``, ``tokenizer``, ``budgets``) and
    ``per_question`` {q_index: {measure: 0 or 1}} of its counted questions;
    None when it has no budgets."""
    block = json.loads(Path(official_path).read_text(encoding="utf-8")).get("budgets")
    if not block:
        return None
    t = read_table(outcomes_path, columns=["q_index", "in_budgets", "first_gold_tokens", "all_gold_tokens"])
    t = t.to_pydict()
    per = {}
    for q, counted, first, complete in zip(t["q_index"], t["in_budgets"], t["first_gold_tokens"],
                                           t["all_gold_tokens"]):
        if counted:
            per[q] = {**{any_name(b): float(first is not None and first <= b) for b in block["budgets"]},
                      **{all_name(b): float(complete is not None and complete <= b) for b in block["budgets"]}}
    return {"grain": block["grain"], "tokenizer": block["tokenizer"], "budgets": block["budgets"],
            "per_question": per}


def measures(budgets) -> list[str]:
    return [f(b) for b in budgets for f in (any_name, all_name)]


def budget_stats(dataset: str, compared: list[str], read: dict[str, dict | None], log=print) -> dict | None:
    """stats.json's ``budgets`` of the ``compared`` variants (in their order), ``read``:
    {variant: :func:`read_variant`}; None when none of them has budgets."""
    have = [v for v in compared if read.get(v)]
    if not have:
        return None
    first = read[have[0]]
    convention = (first["tokenizer"], first["budgets"])
    # a variant counted under another tokenizer or other budgets (an earlier run's) pairs with none
    left_out = [{"variant": v, "why": "other tokenizer or budgets"} for v in have
                if (read[v]["tokenizer"], read[v]["budgets"]) != convention]
    kept = [v for v in have if (read[v]["tokenizer"], read[v]["budgets"]) == convention]
    names = tuple(measures(first["budgets"]))
    per = {v: PerQuestion(read[v]["per_question"]) for v in kept}
    draws = Draws(dataset, sorted(set().union(*per.values())))
    pairs = [(kept[j], kept[i]) for j in range(len(kept)) for i in range(j)
             if read[kept[j]]["grain"] == read[kept[i]]["grain"]]  # a turn's gold is not a session's
    rows, jobs = [], []
    for v, b in pairs:
        common = sorted(set(per[v]) & set(per[b]))
        A, B = per[v].rows(common, names), per[b].rows(common, names)
        rows.append((v, b, common, A, B))
        jobs += [(common, ((v, m), A[:, k]), ((b, m), B[:, k])) for k, m in enumerate(names)]
    res = draws.evaluate_diffs(jobs)
    out = []
    for i, (v, b, common, A, B) in enumerate(rows):
        n, metrics = len(common), {}
        for k, m in enumerate(names):
            d = A[:, k] - B[:, k]
            metrics[m] = {"n": n, "variant": float(A[:, k].mean()) if n else None,
                          "baseline": float(B[:, k].mean()) if n else None, **res[i * len(names) + k],
                          "p_analytic": mcnemar(d) if n else None, "sd": float(d.std(ddof=1)) if n > 1 else None,
                          "mde": mde(d)}
        out.append({"variant": v, "baseline": b, "grain": read[v]["grain"], "n": n,
                    "only_variant": len(set(per[v]) - set(per[b])), "only_baseline": len(set(per[b]) - set(per[v])),
                    "metrics": metrics})
    family = apply_holm(out, names)
    log(f"{dataset}: token budgets, {len(out)} pairs of {len(kept)} variants")
    return {"tokenizer": first["tokenizer"], "budgets": first["budgets"], "measures": list(names),
            "grains": {v: read[v]["grain"] for v in kept}, "resampled_questions": len(draws.index),
            "pairs": out, "left_out": left_out,
            "holm": {"alpha": ALPHA, "test": TEST, "pairs": family}}
