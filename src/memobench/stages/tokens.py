"""The tokens stage (its rule: ``tokens``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("tokens", inputs=["events"], outputs=["tokens"])
def tokens(job: Job) -> None:
    from ..memo.tokenize import write_tokens

    write_tokens(job.input.events, job.wildcards.tokenizer, job.output.tokens, log=job.log)
