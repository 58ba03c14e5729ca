"""The turn_run stage (its rule: ``turn_run``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("turn_run", inputs=["turns", "questions"], outputs=["run"])
def turn_run(job: Job) -> None:
    """A turn variant's turn lists (first 50 ranks) as a TREC run, docnos its turn ids."""
    from ..runs import trec

    trec.write(job.input.turns, job.input.questions, job.wildcards.variant, job.output.run, log=job.log,
               id_column="turn_id")
