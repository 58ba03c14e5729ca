"""The download stage (its rule: ``download``)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("download", outputs=["receipt"], params=["raw", "urls", "bytes", "sha256", "attempt"])
def download(job: Job) -> None:
    """Fetch the raw file unless it is already there (the verify stage judges a
    file that is there: a wrong one is reported, never replaced or deleted). A
    download that fails is recorded in the receipt, not a failed job
    (missing.py): a run of every dataset goes on with the others and says at
    its end what to place where; a target of this dataset stops at its verify
    job with that line. ``attempt`` (missing.attempt_param; the receipt keeps
    it) is the rerun trigger that retries it."""
    from ..datasets.download import DownloadError, fetch
    from ..datasets.missing import missing_receipt, present_receipt, retry_line

    p, dest = job.params, Path(job.params.raw)
    if dest.exists():
        job.log(f"{dest}: present ({dest.stat().st_size} bytes), not downloaded")
    else:
        retry = retry_line(dest.name, p.attempt)
        if retry:
            job.log(retry)
            print(f"memobench: {retry}", file=sys.stderr)
        try:
            fetch(p.urls, dest, p.bytes, sha256=p.sha256, log=job.log)
        except DownloadError as e:
            job.log(f"MISSING: {e}")
            print(f"memobench: {dest.name}: {e.brief}; dataset {job.wildcards.dataset} is missing "
                  f"(the run says at its end where to place the file)", file=sys.stderr)
            write_json(job.output.receipt,
                       missing_receipt(dest, str(e), p.bytes, p.sha256, p.urls, p.attempt, brief=e.brief))
            return
    write_json(job.output.receipt, present_receipt(dest, p.attempt))
