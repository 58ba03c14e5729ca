"""The prepare stage (its rule: ``prepare``)."""

from __future__ import annotations

import json

from .adapter import Job, stage


@stage("prepare", inputs=["events", "sessions"], outputs=["prepared"], params=["variant"], models=True)
def prepare(job: Job) -> None:
    """A user's retriever's per-session work (its ``prepare`` callable), once
    per distinct session document of a dataset, for every segment and rerun."""
    from ..retrieval.python import prepare_sessions
    from ..catalog.variant import from_spec

    stats = prepare_sessions(from_spec(job.params.variant), job.input.events, job.output.prepared, log=job.log,
                             sessions_path=job.input.sessions)
    job.log(f"prepare: {json.dumps(stats, sort_keys=True)}")
