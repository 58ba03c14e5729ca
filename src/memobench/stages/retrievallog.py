"""The retrievallog stage (its rule: ``retrievallog``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("retrievallog", inputs=["deep", "questions", "haystacks", "events", "sessions"], optional=["turns"],
       outputs=["retrievallog"], params=["fmt"])
def retrievallog(job: Job) -> None:
    """A variant's retrieval log (LongMemEval formats), from its merged deep
    list (a turn variant's: its merged turn lists), the official metrics of
    each question and the sessions' JSON."""
    from ..evaluation.exports import write_retrievallog

    i = job.input
    write_retrievallog(job.params.fmt, i.questions, i.haystacks, i.events, i.deep, job.output.retrievallog,
                       i.sessions, log=job.log, turns_path=i.get("turns"))
