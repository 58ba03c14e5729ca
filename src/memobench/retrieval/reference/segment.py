"""The reference retrievers inside the retrieve stage: one segment's questions
ranked by each reference variant through the document retrievers' loop
(``documents.rank_by_documents``), written as the same three tables as the
Memo variants' (``harness.RANKINGS``, ``OUTCOMES``, ``DEEP``).

* Questions and gold: the variant's skip rule is its dataset family's harness
  rule (``variants.references``), applied by the same function as for the
  Memo variants (``harness.skip_reason``), so the skipped questions, the
  evaluated ones and their gold (every denominator) are the Memo variants'.
  The harness's forced misses (``empty_seq``: a question with no token of the
  Memo tokenizer, counted as a miss with no list) stay in the denominators,
  but a reference retriever ranks them: that limit is the Memo pipeline's,
  not the question's.
* Texts: a retriever whose row says ``exact`` (LongMemEval's flat BM25)
  reads the exact turn texts and question (a lone surrogate kept, as
  LongMemEval's own code reads the file), the others the stored UTF-8 ones
  (``documents.session_documents``).
* Lists: the whole haystack ranked (every copy of a repeated session id is a
  document, as in LongMemEval's own retrieval and its official scorer), cut to
  depth 50; the top 10 is ``rankings``. A list is of positions: hit@k and the
  reciprocal rank count a copy ranked before the gold as a miss at its rank,
  as the official recall does, and the deep list keeps each document's
  haystack position (so the official metrics and the retrieval log read the
  copy that was ranked). The deep list's score is the retriever's own where it is
  strictly decreasing with rank over that question's list, else ``51 - rank``
  (a tie anywhere in the 50), so a TREC tool reads the same order.
* Turns (a variant with ``grain: turn``): each turn document ranked, the whole
  list kept; an embedding retriever embeds a haystack's turns in the job
  (its embeddings stage's vectors are the sessions'), once per haystack.
"""

from __future__ import annotations

from ...catalog.registry import embedding_inputs, row
from ...catalog.row import Retriever, register_retriever
from ...core.formats import user_turns_only
from ...core.errors import ConfigError, DataError
from ...core.protocol import DEPTH


def _vectors(variants, embeddings_path, keys):
    """The embedding stage's table of one embedding retriever (every variant
    in ``variants`` has its backend) for the segment's sessions, checked
    against the model files and each variant's document rule."""
    backend = variants[0].recipe.backend
    if embeddings_path is None:
        raise ConfigError(f"{variants[0].name}: no embeddings table (the embeddings stage's output) was given")
    from .embeddings import SessionVectors, read_meta

    meta = read_meta(embeddings_path)
    encoder = row(backend).default_encoder()
    if meta.get("sha256") != encoder.sha256:
        raise DataError(embeddings_path, None, "was made with other model files; delete it and rerun")
    for v in variants:
        want = "user turns" if user_turns_only(v.recipe.documents) else "all turns"
        if meta.get("documents") != want:
            raise ConfigError(f"variant {v.name!r}: documents {v.recipe.documents!r} ({want}), but "
                              f"{embeddings_path} embeds {meta.get('documents')} (the dataset format's rule)")
    return SessionVectors(embeddings_path, keys=keys), encoder


class _QuestionsTogether:
    """An encoder whose ``encode([text])`` of one of the segment's questions
    is that question's row from all of them embedded at first use with
    ``encode_each`` (the same bytes as ``encode([text])``, many at once);
    anything else is the encoder's own."""

    def __init__(self, encoder, questions: list[str]):
        self._encoder, self._questions, self._rows = encoder, questions, None

    def __getattr__(self, name):
        return getattr(self._encoder, name)

    def encode(self, texts, on_batch=None):
        if len(texts) == 1:
            if self._rows is None:
                distinct = list(dict.fromkeys(self._questions))
                self._rows = dict(zip(distinct, self._encoder.encode_each(distinct)))
            if texts[0] in self._rows:
                return self._rows[texts[0]][None, :]
        return self._encoder.encode(texts, on_batch=on_batch)


def rank_segment(variants, segment, log=print) -> dict:
    """Rank one segment (``harness.Segment``) under each reference variant.
    Session documents are read from the ``events`` input; an embedding
    retriever reads its session vectors from its embeddings input (its row's
    ``embedding``). Returns {variant name:
    (rankings, outcomes, deep) tables}."""
    from ...core.tables import exact_text
    from ..documents import rank_by_documents
    from .ranking import rank

    keys = sorted({k for h in segment.haystacks.values() for k in h.keys})
    stores = {}
    for backend, name in embedding_inputs().items():
        dense = [v for v in variants if v.recipe.backend == backend and v.grain == "session"]
        if dense and keys:
            stores[backend] = _vectors(dense, segment.inputs.get(name), keys)

    def ranker(backend: str, depth: int | None):
        store, encoder = stores.get(backend, (None, None))
        exact = row(backend).exact

        def text_of(q):
            return exact_text(q["question"], q.get("question_exact")) if exact else q["question"]

        if row(backend).embedding and segment.questions:
            encoder = encoder or row(backend).default_encoder()
            if hasattr(encoder, "encode_each"):
                encoder = _QuestionsTogether(encoder, [text_of(q) for q in segment.questions])
        turn_vectors: dict = {}  # an embedding retriever's turn vectors of the haystack at hand

        def ranked(q, hay, documents):
            question = text_of(q)
            if depth is None:  # a turn variant: its haystack's turns, the whole list
                vectors = None
                if row(backend).embedding and documents.texts:
                    if q["haystack_id"] not in turn_vectors:  # questions come haystack by haystack
                        turn_vectors.clear()
                        turn_vectors[q["haystack_id"]] = (encoder or row(backend).default_encoder()).encode(
                            documents.texts)
                    vectors = turn_vectors[q["haystack_id"]]
                r = rank(backend, question, documents.texts, vectors=vectors, encoder=encoder)
            else:
                vectors = store.vectors(hay.keys) if store is not None else None
                r = rank(backend, question, documents, vectors=vectors, encoder=encoder).top(depth)
            return r.positions.tolist(), r.scores

        return ranked

    # a turn variant's whole list is kept (retrieval/turns.py), a session variant's to depth 50
    rankers = {v.name: ranker(v.recipe.backend, DEPTH if v.grain == "session" else None) for v in variants}
    return rank_by_documents(variants, segment, rankers, log,
                             exact={v.name for v in variants if row(v.recipe.backend).exact})


# the reference retrievers' seam: the rows of kind reference, each registered by the module that defines it
register_retriever(Retriever("reference", __name__, rank_segment))
