"""The session_json stage (its rule: ``session_json``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("session_json", inputs=["events"], outputs=["sessions"])
def session_json(job: Job) -> None:
    """Each session's retrieval-log JSON, once per dataset (every variant's log joins it)."""
    from ..runs.retrieval_log import write_session_json

    write_session_json(job.input.events, job.output.sessions, log=job.log)
