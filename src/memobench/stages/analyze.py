"""The analyze stage (its rule: ``analyze``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("analyze", inputs=["questions", "haystacks", "events", "tokens"], optional=["fts_tokens"],
       outputs=["rows", "summary", "md"])
def analyze(job: Job) -> None:
    from ..evaluation.analyze import run_analyze

    i, o = job.input, job.output
    run_analyze(i.questions, i.haystacks, i.events, o.rows, o.summary, o.md, job.wildcards.dataset,
                i.tokens, i.get("fts_tokens"), log=job.log)
