"""The manifest stage (its rule: ``manifest``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic import write_json
from .adapter import Job, stage


@stage("manifest", inputs=["verified"], outputs=["manifest"])
def manifest(job: Job) -> None:
    from ..provenance import provenance

    paths = job.input.verified if isinstance(job.input.verified, list) else [job.input.verified]
    entries = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    write_json(job.output.manifest, {"provenance": provenance(), "files": entries})
    job.log(f"manifest: {len(entries)} files")
