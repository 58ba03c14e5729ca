"""The normalize stage (its rule: ``normalize``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic import write_json
from .adapter import Job, stage


@stage("normalize", optional=["verified", "base_questions"],
       outputs=["questions", "haystacks", "sessions", "events", "summary"], params=["raw", "format", "lenient"])
def normalize(job: Job) -> None:
    from ..datasets import normalize as nz

    p, out_dir = job.params, str(Path(job.output.summary).parent)
    readers = {
        "longmemeval": lambda: nz.normalize_longmemeval(p.raw, out_dir, log=job.log, lenient=p.lenient),
        "locomo": lambda: nz.normalize_locomo(p.raw, out_dir, log=job.log),
        "longmemeval_cn": lambda: nz.normalize_cn(p.raw, str(Path(job.input.base_questions).parent), out_dir,
                                                  log=job.log),
        "embedded": lambda: nz.normalize_zh(out_dir, log=job.log),
    }
    stats = readers[p.format]()
    # CN rows search another dataset's haystacks: their own tables stay empty
    from ..tables import TABLES, write_table

    for name, schema in TABLES.items():
        if not Path(getattr(job.output, name)).exists():
            write_table(getattr(job.output, name), schema.empty_table())
    job.log(json.dumps(stats))
    write_json(job.output.summary, {"format": p.format, "source": str(p.raw) if p.raw else "embedded", **stats})
