"""The embeddings stage (its rule: ``embeddings``)."""

from __future__ import annotations

import json

from .adapter import Job, stage


@stage("embeddings", inputs=["events", "sessions"], outputs=["embeddings"], params=["format", "model"],
       models=True)
def embeddings(job: Job) -> None:
    """An embedding retriever's vectors of every distinct session of a
    dataset, once: all-MiniLM-L6-v2 (``minilm``; on a CUDA GPU through
    PyTorch when both are present, else numpy on the CPU) or WordLlama
    (``wordllama``, numpy)."""
    from ..retrieval.reference.embeddings import embed_sessions

    stats = embed_sessions(job.input.events, job.params.format, job.output.embeddings, log=job.log,
                           sessions_path=job.input.sessions, model=job.params.model)
    job.log(f"embeddings: {json.dumps(stats, sort_keys=True)}")
