"""The retrieve stage (its rule: ``retrieve``)."""

from __future__ import annotations

import json

from .adapter import Job, stage



@stage("retrieve", inputs=["questions", "haystacks"],
       optional=["events", "tokens", "fts_tokens", "embeddings", "wordllama_embeddings", "prepared", "fused"],
       outputs=["rankings", "outcomes", "deep", "timings", "turns"], params=["variant", "segment", "n_segments"])
def retrieve(job: Job) -> None:
    """One variant's segment, ranked by its retriever (catalog.registry.retriever_of); its
    sibling variants' lists are computed in the same pass when their jobs have
    not run yet (sharing.py: the invocation's plan names them), each keyed by
    its own code fingerprint."""
    from ..core.provenance import PROVENANCE_KEY, provenance
    from ..catalog.registry import code_fingerprint
    from ..retrieval.sharing import write_segment_shared
    from ..catalog.variant import from_spec

    i, o, p = job.input, job.output, job.params
    names = ("questions", "haystacks", "events", "tokens", "fts_tokens", "embeddings", "wordllama_embeddings",
             "prepared", "fused")
    write_segment_shared(from_spec(p.variant), None, job.wildcards.dataset, p.segment, p.n_segments,
                         {n: i.get(n) for n in names}, {"rankings": o.rankings, "outcomes": o.outcomes,
                                                        "deep": o.deep, "timings": o.timings, "turns": o.turns}, p.code, log=job.log,
                         # where this segment was computed (SQLite and the rest), for metrics.json
                         metadata=lambda: {PROVENANCE_KEY: json.dumps(provenance(), sort_keys=True)},
                         code_of=lambda v: code_fingerprint(v, job.script))
