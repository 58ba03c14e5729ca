"""The record_run stage (its rule: ``record_run``, import_run.smk)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("record_run", inputs=["run"], outputs=["record"])
def record_run(job: Job) -> None:
    """An imported run's file recorded once, before its segments read it:
    its size and sha256, which each ``import_run`` job checks the bytes it
    read against (a file replaced between two segments' jobs fails there,
    never a result that mixes two files)."""
    from ..core.atomic import write_json
    from ..datasets.download import sha256_of
    from ..core.provenance import file_stamp

    path = job.input.run
    stamp = file_stamp(path)
    digest = sha256_of(path)
    job.log(f"{path}: {stamp['bytes']} bytes, sha256 {digest}")
    write_json(job.output.record, {"file": str(path), "bytes": stamp["bytes"], "sha256": digest, "stamp": stamp})
