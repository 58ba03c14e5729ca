"""The normalize stage (its rule: ``normalize``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


@stage("normalize", optional=["verified", "base_questions"],
       outputs=["questions", "haystacks", "sessions", "events", "summary"], params=["raw", "format", "lenient"])
def normalize(job: Job) -> None:
    from ..datasets import normalize as nz
    from ..core.formats import FORMATS
    from ..core.layout import TABLE_NAMES

    p = job.params
    fmt = FORMATS[p.format]  # its reader and what the reader reads
    sources = [p.raw] if fmt.raw_file else []
    if fmt.searches_haystacks_of:
        sources.append(job.input.base_questions)
    out = {name: getattr(job.output, name) for name in TABLE_NAMES}  # the rule's outputs, by table name
    options = {"lenient": True} if p.lenient else {}  # the M family's streamed harnesses (longmemeval only)
    if fmt.reads_in_parts:
        options["workers"] = job.threads
    stats = getattr(nz, fmt.reader)(*sources, out, log=job.log, **options)
    # CN rows search another dataset's haystacks: their own tables stay empty
    from ..core.tables import TABLES, write_table

    for name, schema in TABLES.items():
        if not Path(getattr(job.output, name)).exists():
            write_table(getattr(job.output, name), schema.empty_table())
    job.log(json.dumps(stats))
    write_json(job.output.summary, {"format": p.format, "source": str(p.raw) if p.raw else "embedded", **stats})
