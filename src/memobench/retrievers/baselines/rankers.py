"""One entry point for the reference retrievers: :func:`rank` dispatches a
retriever's name to its ranker (the package docstring shows its use)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .lexical import rank_bm25_official, rank_bm25s, rank_fts5_bm25
from .ranking import Ranking

LEXICAL = {
    "bm25-official": rank_bm25_official,
    "bm25s": rank_bm25s,
    "fts5-bm25": rank_fts5_bm25,
}
DENSE = ("minilm", "wordllama")
NAMES = (*LEXICAL, *DENSE)


def rank(name: str, question: str, docs: Sequence[str], vectors: np.ndarray | None = None,
         encoder=None) -> Ranking:
    """Rank one haystack with the retriever ``name``.

    ``docs``: the haystack's documents in haystack order. For ``minilm`` and
    ``wordllama``, ``vectors`` (one row per document, from the embedding
    stage) is used when given, else the documents are embedded now with
    ``encoder`` (default: the shared :class:`~memobench.retrievers.baselines.dense.MiniLM`
    or :class:`~memobench.retrievers.baselines.static.WordLlama`)."""
    fn = LEXICAL.get(name)
    if fn is not None:
        return fn(question, docs)
    if name == "minilm":
        from .dense import rank_minilm

        return rank_minilm(question, docs, vectors=vectors, encoder=encoder)
    if name == "wordllama":
        from .static import rank_wordllama

        return rank_wordllama(question, docs, vectors=vectors, encoder=encoder)
    raise ValueError(f"unknown reference retriever {name!r} (known: {', '.join(NAMES)})")


__all__ = ["NAMES", "LEXICAL", "DENSE", "Ranking", "rank", "rank_bm25_official", "rank_bm25s", "rank_fts5_bm25"]
