"""The import_run stage (its rule: ``import_run``)."""

from __future__ import annotations

import json

from .adapter import Job, stage


@stage("import_run", inputs=["run", "record", "questions", "haystacks"], optional=["events"],
       outputs=["rankings", "outcomes", "deep", "timings", "turns"], params=["variant", "segment", "n_segments", "fmt"])
def import_run(job: Job) -> None:
    """An imported run's segment: another system's lists read from its file
    (imported.py) into the tables a retrieve job writes, under the variant's
    skip rule; what the import counted goes into the outcomes' metadata."""
    from ..retrieval.imported import import_segment
    from ..evaluation.metrics import IMPORTED_KEY
    from ..core.provenance import PROVENANCE_KEY, provenance
    from ..core.tables import write_table
    from ..catalog.variant import from_spec
    from ..retrieval.timings import UNTIMED_RUN, write_untimed

    i, o, p = job.input, job.output, job.params
    (rankings, outcomes, deep, turns), summary = import_segment(
        from_spec(p.variant), i.run, i.questions, i.haystacks, i.get("events"), job.wildcards.dataset, p.segment,
        p.n_segments, log=job.log, record=i.record, fmt=p.fmt)
    meta = {PROVENANCE_KEY: json.dumps(provenance(), sort_keys=True), IMPORTED_KEY: json.dumps(summary, sort_keys=True)}
    write_table(o.outcomes, outcomes.replace_schema_metadata(meta))
    write_table(o.deep, deep)
    write_table(o.rankings, rankings)
    write_table(o.turns, turns)  # a turn run's turn lists (empty for a session run)
    write_untimed(o.timings, job.wildcards.dataset, p.variant["name"], UNTIMED_RUN)
