"""The lexical reference retrievers: LongMemEval's flat BM25 (rank_bm25),
bm25s, and SQLite FTS5's ``bm25()``.

Each ranks one haystack: it takes the question text and the haystack's
documents in haystack order, and returns the whole haystack as a
:class:`~memobench.retrieval.reference.Ranking` (positions best first, with the score of
each). Statistics (IDF, average length) are always those of that haystack
alone, as in LongMemEval's own retrieval, where the corpus is the question's
haystack.

Each builds one index per distinct haystack, not one per question: the last
few haystacks' indexes are kept, keyed by their documents in order
(:class:`_Indexes`), and a question over the same documents is scored on the
index already built. LoCoMo's 1,986 questions search ten conversations; a
LongMemEval haystack is mostly one question's. An index is a pure function of
its documents and scoring reads it only, so this changes time, never a list
or a score (tests/unit/retrieval/reference/test_lexical.py holds the cached
rankings against fresh ones).
"""

from __future__ import annotations

import re
import sqlite3
from functools import lru_cache
from typing import Sequence

from ...catalog.row import Row, register
from .ranking import Ranking


class _Indexes:
    """The indexes of the last ``size`` distinct haystacks, keyed by their
    documents in order (a tuple of the texts: equal texts, equal key, however
    the list was built)."""

    def __init__(self, build, size: int = 4):
        self.build = build
        self.size = size
        self.built: dict[tuple[str, ...], object] = {}

    def __call__(self, docs: Sequence[str]):
        key = tuple(docs)
        index = self.built.pop(key, None)
        if index is None:
            index = self.build(key)
        self.built[key] = index  # most recently used last
        while len(self.built) > self.size:
            del self.built[next(iter(self.built))]
        return index


def _rank_bm25_index(docs: tuple[str, ...]):
    from rank_bm25 import BM25Okapi

    return BM25Okapi([d.split(" ") for d in docs])


_rank_bm25_indexes = _Indexes(_rank_bm25_index)


def rank_bm25_official(question: str, docs: Sequence[str]) -> Ranking:
    """LongMemEval's ``flat-bm25`` exactly (docs/baselines.md#the-five-retrievers): rank_bm25's
    ``BM25Okapi`` with its defaults (k1 1.5, b 0.75, epsilon 0.25: an IDF below
    zero is floored at ``epsilon * average_idf``), documents and question
    tokenized by ``str.split(" ")``, the order ``numpy.argsort(scores)[::-1]``
    (numpy's default sort, reversed: ties are ordered as numpy leaves them)."""
    import numpy as np

    if not docs:
        return Ranking.empty()
    scores = _rank_bm25_indexes(docs).get_scores(question.split(" "))
    order = np.argsort(scores)[::-1]
    return Ranking(order.astype(np.int64), np.asarray(scores, dtype=np.float64)[order])


@lru_cache(maxsize=1)
def _bm25s_splitter():
    from bm25s.stopwords import STOPWORDS_EN

    return re.compile(r"(?u)\b\w\w+\b").findall, frozenset(STOPWORDS_EN)


def bm25s_tokenize(texts: list[str]) -> list[list[str]]:
    """bm25s's default tokenizer (``bm25s.tokenize`` with its defaults, as
    strings): each text lower-cased, its ``(?u)\\b\\w\\w+\\b`` tokens in order,
    bm25s's English stop words removed, no stemmer. Written here because the
    library's call builds progress bars per call, more than the rest of a
    question's scoring; tests/unit/retrieval/reference/test_lexical.py holds it
    equal to the library's on real and generated texts."""
    findall, stop = _bm25s_splitter()
    return [[t for t in findall(text.lower()) if t not in stop] for text in texts]


class _TokenCache:
    """The last ``size`` documents' bm25s tokens (sessions recur across
    haystacks). Tokens of a text do not depend on the other texts of a call,
    so caching them changes nothing but time."""

    def __init__(self, size: int = 2048):
        self.size = size
        self.tokens: dict[str, list[str]] = {}

    def __call__(self, texts: list[str]) -> list[list[str]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.tokens))
        if missing:
            for t, toks in zip(missing, bm25s_tokenize(missing)):
                self.tokens[t] = toks
        out = [self.tokens[t] for t in texts]
        for t in texts:  # most recently used last
            self.tokens[t] = self.tokens.pop(t)
        while len(self.tokens) > self.size:
            del self.tokens[next(iter(self.tokens))]
        return out


_bm25s_tokens = _TokenCache()


def _bm25s_index(docs: tuple[str, ...]):
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(_bm25s_tokens(list(docs)), show_progress=False)
    return retriever


_bm25s_indexes = _Indexes(_bm25s_index)


def rank_bm25s(question: str, docs: Sequence[str]) -> Ranking:
    """The bm25s library with its defaults (``BM25()``: method ``lucene``,
    k1 1.5, b 0.75, float32 scores) and its default tokenizer
    (:func:`bm25s_tokenize`), one index per distinct haystack (so IDF and
    average length are the haystack's). A query token not in the haystack's
    vocabulary scores nothing; a question with no token scores every document
    0. Order: score descending, ties by haystack position ascending (a stable
    sort of the negated scores)."""
    import numpy as np

    if not docs:
        return Ranking.empty()
    retriever = _bm25s_indexes(docs)
    query = bm25s_tokenize([question])[0]
    ids = retriever.get_tokens_ids(query) if query else []
    if ids:
        scores = np.asarray(retriever.get_scores_from_ids(ids), dtype=np.float64)
    else:
        scores = np.zeros(len(docs), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    return Ranking(order.astype(np.int64), scores[order])




def _phrase(term: str) -> str:
    """An FTS5 query phrase holding exactly ``term``."""
    return '"' + term.replace('"', '""') + '"'


class Fts5Bm25:
    """SQLite FTS5's ``bm25()`` (its defaults: k1 1.2, b 0.75, column weight 1;
    default ``unicode61`` tokenizer) over one haystack at a time: an in-memory
    ``fts5(body)`` table holds exactly that haystack's documents (filled anew
    when a question's documents differ from the last one's), so FTS5's
    table-wide IDF and average length are the haystack's.

    The scores are those of FTS5's ``bm25()`` for the question as an OR of
    its tokens, each quoted, in question order (:meth:`rank_or`, FTS5 asked
    directly); its tokens are the ones FTS5's own tokenizer makes of it, read
    back through an ``fts5vocab`` table. FTS5 scores each phrase of such a
    query on its own and adds the phrases' terms in query order, so a token
    repeated n times is n equal phrases: its term is added n times (BM25's
    query term frequency), once at each place it occurs. Asked directly, FTS5
    pays for every repeat with every other (its instance list of a row walks
    all phrases for each instance), a cost growing with the square of the
    question's length. So the scores are made from one single-phrase query
    per distinct token (its ``bm25()`` is exactly that phrase's term: the same
    IDF, row length and frequency), added per document in the question's
    token order, which is FTS5's own sum step by step (the same floating-point
    result; adding the count times the term instead is not: it differs in the
    last bits), in time linear in the question's length.

    Matching documents come first, by ``bm25()`` ascending (FTS5's scores are
    negative; ``score`` here is ``-bm25()``, so higher is better), ties by
    position; then the documents that match no token, in haystack order, with
    score 0.0. FTS5 floors a term's IDF at 1e-6, so every matching document
    scores above 0.

    Reproducing the sum assumes SQLite adds each term as a rounded double (a
    build that fuses the multiply-add, as compilers may on some CPUs, sums
    otherwise). Each instance checks that on a small fixed haystack against
    :meth:`rank_or` and, where they differ, asks FTS5 directly
    (:attr:`by_token` is False)."""

    def __init__(self):
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE q USING fts5(body)")
        self.db.execute("CREATE VIRTUAL TABLE q_terms USING fts5vocab(q, 'instance')")
        self.loaded: tuple[str, ...] | None = None  # the documents table h holds (none yet)
        self.by_token = True
        question, docs = _probe()
        self.by_token = _identical(self.rank_or(question, docs), self(question, docs))

    def query_terms(self, question: str) -> list[str]:
        """The question's tokens as FTS5's tokenizer makes them, in order."""
        self.db.execute("INSERT INTO q(rowid, body) VALUES (1, ?)", (question,))
        terms = [r[0] for r in self.db.execute("SELECT term FROM q_terms ORDER BY offset")]
        self.db.execute("DELETE FROM q")
        return terms

    def __call__(self, question: str, docs: Sequence[str]) -> Ranking:
        return self._rank(question, docs, self._by_token if self.by_token else self._or_query)

    def rank_or(self, question: str, docs: Sequence[str]) -> Ranking:
        """The same ranking, FTS5 asked directly: one OR query of all the
        question's tokens (quadratic in the question's length)."""
        return self._rank(question, docs, self._or_query)

    def _rank(self, question, docs, score_rows) -> Ranking:
        import numpy as np

        n = len(docs)
        if not n:
            return Ranking.empty()
        terms = self.query_terms(question)
        positions = np.zeros(0, dtype=np.int64)
        scores = np.zeros(0, dtype=np.float64)
        if terms:
            self._load(docs)
            positions, scores = score_rows(terms, n)
        rest = np.ones(n, dtype=bool)
        rest[positions] = False
        return Ranking(np.concatenate([positions, np.flatnonzero(rest)]).astype(np.int64),
                       np.concatenate([scores, np.zeros(n - len(positions))]))

    def _load(self, docs: Sequence[str]) -> None:
        """Table ``h`` holding exactly ``docs`` (rowid = position + 1): the
        table of the last haystack kept while the next question searches the
        same documents."""
        key = tuple(docs)
        if key == self.loaded:
            return
        if self.loaded is not None:
            self.db.execute("DROP TABLE h")
            self.loaded = None
        self.db.execute("CREATE VIRTUAL TABLE h USING fts5(body)")
        try:
            self.db.executemany("INSERT INTO h(rowid, body) VALUES (?, ?)", ((i + 1, d) for i, d in enumerate(docs)))
        except BaseException:
            self.db.execute("DROP TABLE h")
            raise
        self.loaded = key

    def _or_query(self, terms: list[str], n: int) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        rows = self.db.execute("SELECT rowid - 1, -bm25(h) FROM h WHERE h MATCH ? ORDER BY bm25(h), rowid",
                               (" OR ".join(map(_phrase, terms)),)).fetchall()
        return (np.asarray([r[0] for r in rows], dtype=np.int64),
                np.asarray([r[1] for r in rows], dtype=np.float64))

    def _by_token(self, terms: list[str], n: int) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        hits = {}
        for t in dict.fromkeys(terms):
            rows = self.db.execute("SELECT rowid - 1, -bm25(h) FROM h WHERE h MATCH ?", (_phrase(t),)).fetchall()
            if rows:
                hits[t] = (np.asarray([r[0] for r in rows], dtype=np.int64),
                           np.asarray([r[1] for r in rows], dtype=np.float64))
        score = np.zeros(n, dtype=np.float64)
        matched = np.zeros(n, dtype=bool)
        for t in terms:  # FTS5's order of addition; a phrase absent from a row adds +0.0
            hit = hits.get(t)
            if hit is not None:
                score[hit[0]] += hit[1]
                matched[hit[0]] = True
        positions = np.flatnonzero(matched)
        order = np.argsort(-score[positions], kind="stable")  # bm25() ascending, then rowid
        return positions[order], score[positions][order]


def _identical(a: Ranking, b: Ranking) -> bool:
    """The same positions and bit for bit the same scores."""
    return a.positions.tobytes() == b.positions.tobytes() and a.scores.tobytes() == b.scores.tobytes()


def _probe() -> tuple[str, list[str]]:
    """A small fixed haystack and a question with repeated tokens, on which a
    sum of rounded terms and a fused multiply-add sum differ."""
    import random

    rng = random.Random(5)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    docs = [" ".join(rng.choices(words, weights=range(10, 0, -1), k=rng.randint(1, 30))) for _ in range(48)]
    docs += docs[:4]  # ties
    return " ".join(rng.choices(words, k=40)), docs


_fts5 = None


def forget_indexes() -> None:
    """Drop every kept index, so the next question builds its own (the
    benchmark's one-index-per-question baseline: memobench.tools.bench_baselines)."""
    _rank_bm25_indexes.built.clear()
    _bm25s_indexes.built.clear()
    if _fts5 is not None and _fts5.loaded is not None:
        _fts5.db.execute("DROP TABLE h")
        _fts5.loaded = None


def rank_fts5_bm25(question: str, docs: Sequence[str]) -> Ranking:
    """:class:`Fts5Bm25` on a per-process connection."""
    global _fts5
    if _fts5 is None:
        _fts5 = Fts5Bm25()
    return _fts5(question, docs)


register(Row("bm25-official", "reference", label="LongMemEval flat-bm25",
             description="LongMemEval's flat BM25 exactly: rank_bm25 BM25Okapi defaults, split(' ') tokens, numpy "
                         "argsort order", module=__name__, rank=rank_bm25_official, exact=True, all_turns=True,
             turns=True))
register(Row("bm25s", "reference", label="bm25s 0.3.16",
             description="the bm25s library with its defaults (lucene BM25, k1 1.5, b 0.75) and default tokenizer, "
                         "one index per haystack", module=__name__, rank=rank_bm25s, turns=True))
register(Row("fts5-bm25", "reference", label="SQLite FTS5 bm25()",
             description="SQLite FTS5's own bm25() (k1 1.2, b 0.75, unicode61), one table per haystack",
             module=__name__, rank=rank_fts5_bm25, turns=True))
