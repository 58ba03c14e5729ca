"""The context_turns stage (its rule: ``context_turns``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("context_turns", inputs=["events"], outputs=["turns"], params=["tokenizer"])
def context_turns(job: Job) -> None:
    """Every turn's tokens as a reader receives it, once per dataset, read by
    every turn variant's merge job (docs/protocol.md#token-budgets); a run
    without a turn variant makes none."""
    from ..evaluation.context import count_turns, load

    count_turns(job.input.events, load(job.params.tokenizer, threads=job.threads), job.output.turns, log=job.log)
