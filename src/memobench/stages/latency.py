"""The latency stage (its rule: ``latency``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("latency", inputs=["timings", "metrics", "official"], outputs=["md", "html", "json", "png"])
def latency(job: Job) -> None:
    """The latency files of the run's timed variants; each input is matched to its
    (dataset, variant) by what it says of itself (metrics.json's fields, the
    timings table's metadata)."""
    import json
    from pathlib import Path

    from ..reporting.latency import build
    from ..retrieval.timings import read_meta

    metrics, timings = {}, {}
    for p in job.input.metrics:
        m = json.loads(Path(p).read_text(encoding="utf-8"))
        metrics[(m["dataset"], m["variant"])] = m
    for p in job.input.timings:
        meta = read_meta(p)
        timings.setdefault((meta["dataset"], meta["variant"]), []).append(p)
    budgets = {}  # recall within token budgets, beside the latency
    for p in job.input.files("official"):
        o = json.loads(Path(p).read_text(encoding="utf-8"))
        if o.get("budgets"):
            budgets[(o["dataset"], o["variant"])] = o["budgets"]
    build(timings, metrics, job.output.md, job.output.json, job.output.png, job.output.html, log=job.log,
          budgets=budgets)
