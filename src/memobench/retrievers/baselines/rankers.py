"""One entry point for the reference retrievers: :func:`rank` ranks with a
retriever's own rank function, its catalog row's (the package docstring
shows its use)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...catalog.registry import names, row
from .ranking import Ranking


def rank(name: str, question: str, docs: Sequence[str], vectors: np.ndarray | None = None,
         encoder=None) -> Ranking:
    """Rank one haystack with the reference retriever ``name``.

    ``docs``: the haystack's documents in haystack order. For an embedding
    retriever, ``vectors`` (one row per document, from the embedding stage)
    is used when given, else the documents are embedded now with ``encoder``
    (default: its shared one)."""
    if name not in names("reference"):
        raise ValueError(f"unknown reference retriever {name!r} (known: {', '.join(names('reference'))})")
    r = row(name)
    if r.embedding:
        return r.rank(question, docs, vectors=vectors, encoder=encoder)
    return r.rank(question, docs)


__all__ = ["Ranking", "rank"]
