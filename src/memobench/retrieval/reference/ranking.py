"""The result every reference retriever returns, the ranking of documents by
vectors, and :func:`rank`: one haystack ranked by a reference retriever's own
rank function (its catalog row's)."""

from __future__ import annotations

from typing import NamedTuple, Sequence

from ...core.protocol import DEPTH


class Ranking(NamedTuple):
    """A whole haystack ranked: ``positions[r]`` is the haystack position
    (0-based) of the document at rank r+1, ``scores[r]`` its score (higher is
    better; non-increasing with rank). Every position appears exactly once."""

    positions: np.ndarray  # int64
    scores: np.ndarray  # float64

    @classmethod
    def empty(cls) -> "Ranking":
        import numpy as np

        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))

    def top(self, depth: int = DEPTH) -> "Ranking":
        """The first ``depth`` ranks (all of them when the haystack is shorter)."""
        return Ranking(self.positions[:depth], self.scores[:depth])

    def ids(self, session_ids, depth: int = DEPTH) -> list[str]:
        """Session ids of the first ``depth`` ranks."""
        return [session_ids[p] for p in self.positions[:depth].tolist()]


def rank_by_vectors(question_vector: np.ndarray, vectors: np.ndarray, cosine: bool = False) -> Ranking:
    """Documents (``vectors``, rows in haystack order) by their dot product with
    the question's vector in float64, or with ``cosine`` by the cosine (a
    zero vector scores 0); descending, ties by haystack position (stable)."""
    import numpy as np

    q = np.asarray(question_vector, dtype=np.float64)
    v = np.asarray(vectors, dtype=np.float64)
    if cosine:
        qn, vn = np.linalg.norm(q), np.linalg.norm(v, axis=1)
        q = q / (qn if qn > 0 else 1.0)
        v = v / np.where(vn > 0, vn, 1.0)[:, None]
    scores = v @ q
    order = np.argsort(-scores, kind="stable")
    return Ranking(order.astype(np.int64), scores[order])


def rank_embedded(who: str, dim: int, question: str, docs, vectors, encoder, default, cosine: bool = False
                  ) -> Ranking:
    """An embedding retriever's ranking of one haystack (``rank_by_vectors``
    of the question's vector): ``vectors`` (the documents' rows, from the
    embeddings stage) when given, else ``docs`` embedded now; by ``encoder``,
    else ``default()`` (called only when there is a document to rank)."""
    n = len(docs) if vectors is None else len(vectors)
    if n == 0:
        return Ranking.empty()
    enc = encoder or default()
    if vectors is None:
        vectors = enc.encode(docs)
    elif vectors.shape != (n, dim) or (docs is not None and len(docs) and len(docs) != n):
        raise ValueError(f"{who}: vectors of shape {vectors.shape} for {len(docs)} documents")
    return rank_by_vectors(enc.encode([question])[0], vectors, cosine)


def rank(name: str, question: str, docs: Sequence[str], vectors: np.ndarray | None = None,
         encoder=None) -> Ranking:
    """Rank one haystack with the reference retriever ``name``.

    ``docs``: the haystack's documents in haystack order. For an embedding
    retriever, ``vectors`` (one row per document, from the embedding stage)
    is used when given, else the documents are embedded now with ``encoder``
    (default: its shared one)."""
    from ...catalog.registry import names, row

    if name not in names("reference"):
        raise ValueError(f"unknown reference retriever {name!r} (known: {', '.join(names('reference'))})")
    r = row(name)
    if r.embedding:
        return r.rank(question, docs, vectors=vectors, encoder=encoder)
    return r.rank(question, docs)
