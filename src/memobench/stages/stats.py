"""The stats stage (its rule: ``stats``)."""

from __future__ import annotations

from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("stats", inputs=["outcomes", "merged", "official"], outputs=["stats"], params=["baselines", "compare"])
def stats(job: Job) -> None:
    """Paired statistics of a dataset's variants; outcome files are grouped by
    their variant directory (results/{dataset}/{variant}/segments/...)."""
    from ..evaluation.stats import dataset_stats

    variants = dict(job.params.baselines)
    outcomes: dict[str, list] = {v: [] for v in variants}
    for p in job.input.outcomes:
        outcomes[Path(p).parent.parent.name].append(p)
    out = dataset_stats(job.wildcards.dataset, variants, outcomes, log=job.log, compare_set=list(job.params.compare))
    # recall within token budgets, from the merged outcomes (their budget columns) and official.json
    from ..evaluation.budget_stats import budget_stats, read_variant

    merged = {Path(p).parent.name: p for p in job.input.files("merged")}
    official = {Path(p).parent.name: p for p in job.input.files("official")}
    budgets = budget_stats(job.wildcards.dataset, out["compared"],
                           {v: read_variant(merged[v], official[v]) for v in out["compared"]}, log=job.log)
    if budgets is not None:
        out["budgets"] = budgets
    write_json(job.output.stats, out)
