"""The reference retrievers inside the retrieve stage: one segment's questions
ranked by each reference variant, written as the same three tables as the
Memo variants' (``retrieval.RANKINGS``, ``OUTCOMES``, ``DEEP``).

* Questions and gold: the variant's skip rule is its dataset family's harness
  rule (``variants.references``), applied by the same function as for the
  Memo variants, so the skipped questions, the evaluated ones and their gold
  (every denominator) are the Memo variants'. The harness's forced misses
  (``empty_seq``: a question with no token of the Memo tokenizer, counted as a
  miss with no list) stay in the denominators, but a reference retriever ranks
  them: that limit is the Memo pipeline's, not the question's.
* Texts: ``bm25-official`` reads the exact turn texts and question (a lone
  surrogate kept, as LongMemEval's own code reads the file), the others the
  stored UTF-8 ones (documents.py).
* Lists: the whole haystack ranked (every copy of a repeated session id is a
  document, as in LongMemEval's own retrieval and its official scorer), cut to
  depth 50; the top 10 is ``rankings``. A list is of positions: hit@k and the
  reciprocal rank count a copy ranked before the gold as a miss at its rank,
  as the official recall does, and the deep list keeps each document's
  haystack position (so the official metrics and the retrieval log read the
  copy that was ranked). The deep list's score is the retriever's own where it is
  strictly decreasing with rank over that question's list, else ``51 - rank``
  (a tie anywhere in the 50), so a TREC tool reads the same order.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, DataError
from ..progress import Progress
from ..retrieval import SegmentRows, _skip_reason
from ..tables import exact_text
from .documents import session_documents, user_turns_only
from .ranking import Ranking

DEPTH = 50
TOP = 10
EXACT_TEXT = frozenset({"bm25-official"})  # the retrievers that read the exact texts (documents.py)


def run_scores(scores: np.ndarray) -> list[float]:
    """The deep list's scores (PROTOCOL.md section 5): the retriever's own when
    finite and strictly decreasing with rank, else ``51 - rank``."""
    s = np.asarray(scores, dtype=np.float64)
    if np.all(np.isfinite(s)) and np.all(np.diff(s) < 0):
        return s.tolist()
    return [float(DEPTH + 1 - r) for r in range(1, len(s) + 1)]


def _vectors(variants, embeddings_path, keys):
    """The embedding stage's table for the segment's sessions, checked against
    the model files and each dense variant's document rule."""
    if embeddings_path is None:
        raise ConfigError(f"{variants[0].name}: no embeddings table (the embeddings stage's output) was given")
    from .dense import default_encoder
    from .embeddings import SessionVectors, read_meta

    meta = read_meta(embeddings_path)
    encoder = default_encoder()
    if meta.get("sha256") != encoder.sha256:
        raise DataError(embeddings_path, None, "was made with other model files; delete it and rerun")
    for v in variants:
        want = "user turns" if user_turns_only(v.recipe.documents) else "all turns"
        if meta.get("documents") != want:
            raise ConfigError(f"variant {v.name!r}: documents {v.recipe.documents!r} ({want}), but "
                              f"{embeddings_path} embeds {meta.get('documents')} (the dataset format's rule)")
    return SessionVectors(embeddings_path, keys=keys), encoder


def rank_segment(variants, questions, haystacks, events_path, embeddings_path=None, log=print,
                 label: str = "") -> dict[str, tuple[pa.Table, pa.Table, pa.Table]]:
    """Rank one segment's ``questions`` (``retrieval.load_segment``'s, with its
    ``haystacks``: {haystack_id: Haystack}) under each reference variant.
    Session documents are read from ``events_path``; ``minilm`` reads its
    session vectors from ``embeddings_path``. Returns {variant name:
    (rankings, outcomes, deep) tables}."""
    from . import rank

    keys = sorted({k for h in haystacks.values() for k in h.keys})
    docs = {(mode, exact): session_documents(events_path, mode, keys=keys, exact=exact) if keys else {}
            for mode, exact in sorted({(v.recipe.documents, v.recipe.backend in EXACT_TEXT) for v in variants})}
    dense = [v for v in variants if v.recipe.backend == "minilm"]
    store, encoder = _vectors(dense, embeddings_path, keys) if dense and keys else (None, None)
    rows = {v.name: SegmentRows() for v in variants}
    progress = Progress(log, label, total=len(questions), unit="questions")
    started = time.monotonic()
    for n, q in enumerate(questions):
        hay = haystacks.get(q["haystack_id"])
        for v in variants:
            skip, _ = _skip_reason(v.skip, q, hay, v)  # a forced miss is ranked (module docstring)
            if skip is not None:
                rows[v.name].add(q, hay, skip=skip)
                continue
            ranking = Ranking.empty()
            if hay is not None and hay.ids:
                exact = v.recipe.backend in EXACT_TEXT
                texts = [docs[v.recipe.documents, exact][k] for k in hay.keys]
                question = exact_text(q["question"], q.get("question_exact")) if exact else q["question"]
                vectors = store.vectors(hay.keys) if v.recipe.backend == "minilm" else None
                ranking = rank(v.recipe.backend, question, texts, vectors=vectors,
                               encoder=encoder).top(DEPTH)
            positions = ranking.positions.tolist()
            ids = [hay.ids[p] for p in positions]
            rows[v.name].add(q, hay, final=ids[:TOP], deep=ids, scores=run_scores(ranking.scores),
                             positions=positions)
        progress(n + 1)
    progress(len(questions), f", done in {time.monotonic() - started:.1f} s", force=True)
    return {name: r.tables() for name, r in rows.items()}
