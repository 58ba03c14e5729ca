"""The context_tokens stage (its rule: ``context_tokens``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("context_tokens", inputs=["sessions", "events"], outputs=["sessions"], params=["tokenizer"])
def context_tokens(job: Job) -> None:
    """Every session's tokens as a reader receives it, once per dataset, read
    by every session variant's merge job (docs/protocol.md#token-budgets)."""
    from ..evaluation.context import count_sessions, load

    count_sessions(job.input.sessions, job.input.events, load(job.params.tokenizer, threads=job.threads),
                   job.output.sessions, log=job.log)
