"""Reference retrievers run under the benchmark's protocol
(docs/protocol.md#reference-retrievers): LongMemEval's flat BM25 (``bm25-official``), the bm25s
library (``bm25s``), SQLite FTS5's ``bm25()`` (``fts5-bm25``), the dense
all-MiniLM-L6-v2 (``minilm``, optional extra ``[dense]``) and WordLlama's static
token vectors (``wordllama``, optional extra ``[static]``).

A retriever ranks one question's haystack::

    ranking = rank("bm25-official", question_text, docs)       # docs in haystack order
    ranking.positions[:50], ranking.scores[:50]

and for ``minilm`` and ``wordllama`` the documents' vectors come from the cached
embedding stage (:func:`memobench.retrievers.baselines.embeddings.embed_sessions`)::

    ranking = rank("minilm", question_text, docs, vectors=doc_vectors)

Documents are built by :mod:`memobench.retrievers.documents`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..documents import HaystackDocs, haystack_documents, session_documents, user_turns_only
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


__all__ = ["NAMES", "LEXICAL", "DENSE", "Ranking", "rank", "rank_bm25_official", "rank_bm25s", "rank_fts5_bm25",
           "HaystackDocs", "haystack_documents", "session_documents", "user_turns_only"]
