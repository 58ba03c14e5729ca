"""The qrels stage (its rule: ``qrels``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("qrels", inputs=["questions"], outputs=["qrels"])
def qrels(job: Job) -> None:
    from ..evaluation.exports import write_qrels

    write_qrels(job.input.questions, job.output.qrels, log=job.log)
