"""The stats stage (its rule: ``stats``)."""

from __future__ import annotations

from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("stats", inputs=["outcomes"], outputs=["stats"], params=["baselines", "compare"])
def stats(job: Job) -> None:
    """Paired statistics of a dataset's variants; outcome files are grouped by
    their variant directory (results/{dataset}/{variant}/segments/...)."""
    from ..evaluation.stats import dataset_stats

    variants = dict(job.params.baselines)
    outcomes: dict[str, list] = {v: [] for v in variants}
    for p in job.input.outcomes:
        outcomes[Path(p).parent.parent.name].append(p)
    write_json(job.output.stats, dataset_stats(job.wildcards.dataset, variants, outcomes, log=job.log,
                                               compare_set=list(job.params.compare)))
