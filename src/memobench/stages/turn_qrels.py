"""The turn_qrels stage (its rule: ``turn_qrels``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("turn_qrels", inputs=["questions", "haystacks", "events"], outputs=["qrels"], params=["fmt"])
def turn_qrels(job: Job) -> None:
    from ..evaluation.exports import write_turn_qrels

    write_turn_qrels(job.params.fmt, job.input.questions, job.input.haystacks, job.input.events, job.output.qrels,
                     log=job.log)
