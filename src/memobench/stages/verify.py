"""The verify stage (its rule: ``verify``)."""

from __future__ import annotations

from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("verify", inputs=["receipt", "raw"], outputs=["verified"], params=["bytes", "sha256"])
def verify(job: Job) -> None:
    """Check the raw file; a dataset whose download failed has none (raw_file
    in common.smk) and fails here, the one job a target of it reaches."""
    from ..datasets.download import DownloadError, check_bytes
    from ..datasets.download import verify as verify_file
    from ..core.provenance import file_stamp

    raw, p = job.input.raw, job.params
    if not raw:  # the download failed (missing.py): what to place where
        from ..datasets.missing import how_to_get, read_receipt

        raise DownloadError(how_to_get(job.wildcards.dataset, read_receipt(job.input.receipt)))
    job.log(f"verifying {raw}: expecting {p.bytes} bytes" + (f" and sha256 {p.sha256}" if p.sha256 else ""))
    if p.sha256:
        digest = verify_file(raw, p.bytes, p.sha256, log=job.log)
    else:
        # nothing to check a hash against: the manifest job records it (stages/manifest.py),
        # beside normalize instead of before it (hashing a large file would delay normalize)
        check_bytes(raw, p.bytes)
        digest = None
    size = Path(raw).stat().st_size
    job.log(f"ok: {size} bytes" + (f", sha256 {digest}" if digest else ", no sha256 configured"))
    write_json(job.output.verified, {"dataset": job.wildcards.dataset, "file": str(raw), "bytes": size,
                                     "sha256": digest, "sha256_checked": bool(p.sha256),
                                     "stamp": file_stamp(raw)})
