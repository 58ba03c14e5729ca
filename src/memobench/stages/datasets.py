"""The datasets stage (its rule: ``datasets``)."""

from __future__ import annotations

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("datasets", optional=["receipts"], outputs=["datasets"],
       params=["run", "needs"])
def datasets(job: Job) -> None:
    """The run's last step: results/datasets.json, which of the config's
    datasets (``run``) are there and which are missing (missing.py); the end
    of the run (datasets.smk) prints its lines and exits non-zero while one
    is missing."""
    from ..datasets.missing import datasets_record, receipts_by_dataset

    record = datasets_record(job.params.run, receipts_by_dataset(job.input.get("receipts", [])), job.params.needs)
    for line in record["lines"]:
        job.log(line)
    write_json(job.output.datasets, record)
