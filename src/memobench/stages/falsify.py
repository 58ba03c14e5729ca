"""The falsify stage (its rule: ``falsify``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("falsify", inputs=["metrics"], outputs=["json", "md"])
def falsify(job: Job) -> None:
    from ..evaluation.falsifier import compare, markdown
    from ..core.atomic import write_text

    metrics = {}
    for path in job.input.metrics:
        m = json.loads(Path(path).read_text(encoding="utf-8"))
        metrics[m["variant"]] = m
    rows = compare(metrics)
    write_json(job.output.json, {"dataset": job.wildcards.dataset, "comparisons": rows})
    write_text(job.output.md, markdown(job.wildcards.dataset, rows))
    job.log(f"falsifier {job.wildcards.dataset}: {len(rows)} comparisons")
