"""The context_tokens stage (its rule: ``context_tokens``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("context_tokens", inputs=["sessions", "events"], outputs=["sessions", "turns"], params=["tokenizer"])
def context_tokens(job: Job) -> None:
    """Every session's and turn's tokens as a reader receives it, once per
    dataset, read by every variant's merge job (docs/protocol.md#token-budgets)."""
    from ..evaluation.context import count_tables, load

    tokenizer = load(job.params.tokenizer, threads=job.threads)
    count_tables(job.input.sessions, job.input.events, tokenizer, job.output.sessions, job.output.turns, log=job.log)
