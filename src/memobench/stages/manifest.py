"""The manifest stage (its rule: ``manifest``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("manifest", inputs=["verified"], outputs=["manifest"])
def manifest(job: Job) -> None:
    from ..core.provenance import provenance

    entries = [json.loads(Path(p).read_text(encoding="utf-8")) for p in job.input.files("verified")]
    for entry in entries:
        if entry["sha256"] is None:  # verify checked its byte count only (no sha256 configured)
            entry["sha256"] = _accepted_sha256(entry, job.log)
    write_json(job.output.manifest, {"provenance": provenance(), "files": entries})
    job.log(f"manifest: {len(entries)} files")


def _accepted_sha256(entry: dict, log) -> str:
    """The sha256 of the file verify accepted (``entry``, its verified.json):
    its stamp (size, mtime, inode) must be the one verify recorded, before and
    after hashing, or this is another file, and the error says to rerun (which
    verifies the new file first: the stamp is verify's rerun trigger)."""
    from ..datasets.download import DownloadError, sha256_of
    from ..core.provenance import file_stamp

    path = Path(entry["file"])

    def same_file():
        if not path.exists() or file_stamp(path) != entry["stamp"]:
            raise DownloadError(f"{path.name}: changed since verify accepted it ({path}); run again to verify it")

    same_file()
    digest = sha256_of(path, log)
    same_file()
    return digest
