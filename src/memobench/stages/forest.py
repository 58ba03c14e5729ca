"""The forest stage (its rule: ``forest``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("forest", inputs=["stats"], outputs=["forest"])
def forest(job: Job) -> None:
    from ..reporting.report import draw_forest

    stats = job.input.files("stats")
    draw_forest(stats, job.output.forest)
    job.log(f"forest: {len(stats)} stats files")
