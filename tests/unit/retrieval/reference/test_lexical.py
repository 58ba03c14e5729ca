"""The lexical reference retrievers: bm25-official against a direct
call of rank_bm25 + numpy as LongMemEval makes it, bm25s against the bm25s
library, fts5-bm25's per-haystack statistics, and the session documents."""

from __future__ import annotations

import json
import math
import random
import sqlite3
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memobench.tools.generate.longmemeval import write_longmemeval
from memobench.retrieval.reference.ranking import rank
from memobench.retrieval.documents import haystack_documents, session_documents
from memobench.retrieval.reference import lexical
from memobench.retrieval.reference.lexical import Fts5Bm25, bm25s_tokenize
from memobench.datasets.normalize import normalize_locomo, normalize_longmemeval

rank_bm25 = pytest.importorskip("rank_bm25")


@pytest.fixture(scope="module")
def lme(tmp_path_factory):
    """A generated LongMemEval file (40 questions x 30 sessions) and its tables."""
    root = tmp_path_factory.mktemp("lme")
    raw = root / "lme.json"
    write_longmemeval(raw, 40, 30, seed=11)
    normalize_longmemeval(raw, root / "norm", log=lambda m: None)
    return json.loads(raw.read_text(encoding="utf-8")), root / "norm"


def official_corpus(item) -> list[str]:
    """LongMemEval run_retrieval.py's session corpus, from the raw item."""
    return [" ".join(t["content"] for t in sess if t["role"] == "user") for sess in item["haystack_sessions"]]


def official_bm25_order(question: str, corpus: list[str]):
    bm25 = rank_bm25.BM25Okapi([d.split(" ") for d in corpus])
    scores = bm25.get_scores(question.split(" "))
    return np.argsort(scores)[::-1], scores, bm25


def test_documents_equal_longmemeval_corpus(lme):
    items, norm = lme
    hays = haystack_documents(norm / "haystacks.parquet", norm / "events.parquet", "longmemeval")
    assert len(hays) == len(items)
    for hid, item in enumerate(items):
        assert hays[hid].docs == official_corpus(item)
        assert hays[hid].session_ids == item["haystack_session_ids"]


def test_bm25_official_equals_rank_bm25_and_numpy(lme):
    """Whole haystacks, every question: the same order and scores as the
    direct call; the data must exercise ties and negative-IDF flooring."""
    items, norm = lme
    hays = haystack_documents(norm / "haystacks.parquet", norm / "events.parquet", "longmemeval")
    tied = floored = 0
    for hid, item in enumerate(items):
        order, scores, bm25 = official_bm25_order(item["question"], official_corpus(item))
        got = rank("bm25-official", item["question"], hays[hid].docs)
        assert got.positions.tolist() == order.tolist(), item["question_id"]
        assert got.scores.tolist() == scores[order].tolist()
        assert sorted(got.positions.tolist()) == list(range(len(item["haystack_sessions"])))
        tied += len(np.unique(scores)) < len(scores)
        n = bm25.corpus_size
        floored += any(bm25.doc_freqs and sum(1 for d in bm25.doc_freqs if t in d) > n / 2
                       for t in item["question"].split(" "))
    assert tied > 0 and floored > 0, (tied, floored)


def test_bm25_official_tie_order_is_numpys():
    """Equal scores come out as numpy's reversed argsort leaves them, not by position."""
    docs = ["x y", "a b", "x y", "c d", "x y", "e f", "x z"]
    got = rank("bm25-official", "x", docs)
    scores = rank_bm25.BM25Okapi([d.split(" ") for d in docs]).get_scores(["x"])
    assert got.positions.tolist() == np.argsort(scores)[::-1].tolist()
    # 'x' is in 4 of 7 documents: its raw IDF is negative and rank_bm25 floors it
    assert got.scores[0] > 0 and len(set(got.scores[:4].tolist())) == 1


def test_bm25s_equals_library_per_haystack(lme):
    import bm25s

    items, norm = lme
    hays = haystack_documents(norm / "haystacks.parquet", norm / "events.parquet", "longmemeval")
    for hid, item in enumerate(items[:10]):
        docs = hays[hid].docs
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(docs, show_progress=False), show_progress=False)
        q = bm25s.tokenize([item["question"]], return_ids=False, show_progress=False)[0]
        expected = np.asarray(retriever.get_scores(q), dtype=np.float64)
        got = rank("bm25s", item["question"], docs)
        assert np.array_equal(got.scores, np.sort(expected)[::-1])
        assert got.positions.tolist() == np.argsort(-expected, kind="stable").tolist()


def _fresh_bm25s(question, docs):
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(docs), show_progress=False), show_progress=False)
    q = bm25s.tokenize([question], return_ids=False, show_progress=False)[0]
    ids = retriever.get_tokens_ids(q)
    scores = np.asarray(retriever.get_scores_from_ids(ids) if ids else np.zeros(len(docs)), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    return order.tolist(), scores[order].tolist()


def _fresh_official(question, docs):
    order, scores, _ = official_bm25_order(question, list(docs))
    return order.tolist(), scores[order].tolist()


def _fresh_fts5(question, docs):
    got = Fts5Bm25()(question, docs)  # a new connection, a new table
    return got.positions.tolist(), got.scores.tolist()


@pytest.mark.parametrize("name,fresh", [("bm25-official", _fresh_official), ("bm25s", _fresh_bm25s),
                                        ("fts5-bm25", _fresh_fts5)])
def test_an_index_built_once_per_haystack_ranks_as_a_fresh_one(lme, name, fresh):
    """Questions that come back to haystacks already indexed (in runs of one
    haystack, as LoCoMo's, and past the number of indexes kept), each asked
    over documents of another question's haystack too: every list and score
    equals those of an index built for that call alone."""
    items, norm = lme
    hays = haystack_documents(norm / "haystacks.parquet", norm / "events.parquet", "longmemeval")
    visits = [0, 0, 0, 1, 1, 2, 3, 4, 5, 0, 1, 6, 0, 2, 2, 7]  # more distinct haystacks than are kept
    for n, hid in enumerate(visits):
        docs = list(hays[hid].docs)  # a new list each time, as the retrieve loop builds it
        for question in (items[hid]["question"], items[(hid + n + 1) % len(items)]["question"]):
            got = rank(name, question, docs)
            assert (got.positions.tolist(), got.scores.tolist()) == fresh(question, docs), (name, n, hid)


def test_indexes_are_built_once_per_distinct_documents_and_the_oldest_dropped():
    built = []
    indexes = lexical._Indexes(lambda docs: built.append(docs) or len(built), size=2)
    a, b, c = ["x", "y"], ["x", "z"], ["w"]
    assert [indexes(list(d)) for d in (a, a, b, a, b)] == [1, 1, 2, 1, 2]
    assert indexes(c) == 3 and indexes(b) == 2  # a (least recently used) dropped, b kept
    assert indexes(a) == 4 and built == [tuple(a), tuple(b), tuple(c), tuple(a)]


def _library_tokens(texts):
    import bm25s

    return bm25s.tokenize(list(texts), return_ids=False, show_progress=False)


def test_bm25s_tokenizer_equals_the_library_on_locomo(locomo_path):
    """Every turn, question and answer text of the real LoCoMo file: the same tokens as bm25s.tokenize."""
    data = json.loads(locomo_path.read_text(encoding="utf-8"))
    texts = [str(t.get("text", "")) for conv in data for k, v in conv["conversation"].items()
             if k.startswith("session_") and isinstance(v, list) for t in v]
    texts += [str(q.get(f, "")) for conv in data for q in conv["qa"] for f in ("question", "answer")]
    assert len(texts) > 5000
    assert bm25s_tokenize(texts) == _library_tokens(texts)


_PIECES = list("aAbZ zİıßΣσς1_-'é\u0301\u00a0\t\n.,") + ["the", "The ", "don't", "İstanbul", "ǅ", "Ⅻ", "𝐀", "٣"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join), max_size=6))
def test_bm25s_tokenizer_equals_the_library_on_generated_texts(texts):
    """Case folding that changes a text's length (İ), combining marks, stop
    words in any case, digits of other scripts, underscores."""
    assert bm25s_tokenize(texts) == _library_tokens(texts)


def test_bm25s_default_tokenizer_and_empty_question():
    assert bm25s_tokenize(["The Cats, and a dog's toys"]) == [["cats", "dog", "toys"]]
    got = rank("bm25s", "the a of", ["cats", "dogs", "birds"])
    assert got.positions.tolist() == [0, 1, 2] and got.scores.tolist() == [0.0, 0.0, 0.0]


def test_fts5_statistics_are_the_haystacks_own():
    """A question's scores over haystack A are the same whatever else was ranked
    before, and differ from those of one shared table holding A and B (so a
    leak of B's documents into A's statistics would be seen)."""
    a = ["apple pie recipe", "banana bread", "apple cider and apple tart", "car repair"]
    b = ["apple " * 3, "apple orchard", "apple store", "apple", "apple juice", "apple tree"]
    q = "apple tart"
    fts = Fts5Bm25()
    first = fts(q, a)
    fts(q, b)
    again = fts(q, a)
    assert first.positions.tolist() == again.positions.tolist() == [2, 0, 1, 3]
    assert first.scores.tolist() == again.scores.tolist()
    assert first.scores[-2:].tolist() == [0.0, 0.0]  # no match: haystack order, score 0
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", enumerate(a + b, 1))
    shared = dict(db.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH '\"apple\" OR \"tart\"'"))
    assert shared[3] != pytest.approx(first.scores[0])


def test_fts5_matches_bm25_formula():
    """FTS5's documented BM25 (k1 1.2, b 0.75, IDF log((N-n+0.5)/(n+0.5)),
    floored at 1e-6), computed by hand on the haystack alone."""
    docs = ["red fish blue fish", "one fish two fish", "red car", "blue sky over the sea", "green"]
    q = "Red FISH"
    got = rank("fts5-bm25", q, docs)
    toks = [d.split() for d in docs]
    avg = sum(map(len, toks)) / len(toks)
    expected = []
    for t in toks:
        s = 0.0
        for term in ("red", "fish"):
            n = sum(term in d for d in toks)
            idf = max(np.log((len(toks) - n + 0.5) / (n + 0.5)), 1e-6)
            f = t.count(term)
            s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(t) / avg))
        expected.append(s)
    by_pos = dict(zip(got.positions.tolist(), got.scores.tolist()))
    for i, e in enumerate(expected):
        assert by_pos[i] == pytest.approx(e, rel=1e-9, abs=1e-12)
    assert got.positions.tolist()[:3] == sorted(range(3), key=lambda i: -expected[i])


def sqlite_or_bm25(question: str, docs: list[str]):
    """Real SQLite, asked in the test: the question's unicode61 tokens (read
    back through fts5vocab) as an OR of quoted phrases in question order, over
    a fresh table of the documents; (position, -bm25) by bm25 then rowid, the
    documents matching nothing after them in order with 0.0."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE qt USING fts5(body)")
    db.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(qt, 'instance')")
    db.execute("INSERT INTO qt(rowid, body) VALUES (1, ?)", (question,))
    terms = [r[0] for r in db.execute("SELECT term FROM qv ORDER BY offset")]
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", enumerate(docs, 1))
    rows = []
    if terms:
        rows = [(r - 1, -s) for r, s in db.execute(
            "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid",
            (" OR ".join('"' + x.replace('"', '""') + '"' for x in terms),))]
    seen = {p for p, _ in rows}
    rows += [(p, 0.0) for p in range(len(docs)) if p not in seen]
    return terms, rows


def assert_same_as_sqlite(fts: Fts5Bm25, question: str, docs: list[str], direct: bool = True):
    """Positions equal, scores bit for bit (float.hex); the direct OR path too."""
    terms, expected = sqlite_or_bm25(question, docs)
    for got in (fts(question, docs), *([fts.rank_or(question, docs)] if direct else [])):
        assert list(zip(got.positions.tolist(), map(float.hex, got.scores.tolist()))) == \
            [(p, s.hex()) for p, s in expected], question
    return terms, expected


WORDS = ["Apple", "apple", "BANANA", "café", "cafe", "naïve", "x", "o'neil", 'say"hi', "near", "OR", "and",
         "ünïcode", "42", "2023-05-01", "a.b", "straße"]


def random_case(rng: random.Random, vocab: int, n_docs: int, q_words: int):
    words = rng.sample(WORDS, min(vocab, len(WORDS))) + [f"w{i}" for i in range(max(0, vocab - len(WORDS)))]
    weights = [1 / (r + 1) for r in range(len(words))]
    docs = [" ".join(rng.choices(words, weights, k=rng.randint(0, 40))) for _ in range(n_docs)]
    docs += rng.sample(docs, k=n_docs // 5)  # identical documents: exact ties
    rng.shuffle(docs)
    question = " ".join(rng.choices(words + ["absent", "?", "*", ":"], k=q_words))
    return question, docs


def test_fts5_repeated_tokens_equal_sqlite_on_seeded_random_inputs():
    """Random haystacks (with exact ties: duplicated documents) and questions
    with many repeated tokens, case and diacritic variants, FTS5 syntax words
    and quotes: the same list and bit-identical scores as real SQLite's OR
    query. The inputs must exercise repeats, ties and unmatched documents."""
    fts = Fts5Bm25()
    assert fts.by_token
    rng = random.Random(20240611)
    repeats = ties = unmatched = 0
    for _ in range(60):
        question, docs = random_case(rng, rng.randint(2, 30), rng.randint(1, 40), rng.randint(0, 60))
        terms, expected = assert_same_as_sqlite(fts, question, docs)
        repeats += len(terms) > len(set(terms))
        matched = [s for _, s in expected if s > 0]
        ties += len(set(matched)) < len(matched)
        unmatched += len(matched) < len(docs)
    assert repeats > 30 and ties > 10 and unmatched > 10, (repeats, ties, unmatched)


_shared = []


def rank_fts5() -> Fts5Bm25:
    """One instance for all of hypothesis's examples."""
    if not _shared:
        _shared.append(Fts5Bm25())
    assert _shared[0].by_token
    return _shared[0]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS[:8]), max_size=12).map(" ".join), min_size=1, max_size=12),
       st.lists(st.sampled_from(WORDS[:10]), max_size=30).map(" ".join))
def test_fts5_repeated_tokens_equal_sqlite_property(docs, question):
    assert_same_as_sqlite(rank_fts5(), question, docs)


def test_fts5_long_question_equals_sqlite():
    """A 1,200-word question (a few dozen distinct tokens, each repeated many
    times) over 250 documents: the same list and scores as SQLite's OR query
    of its 1,200-odd phrases; adding each distinct token's term times its count would
    not give these scores (the order of FTS5's additions matters)."""
    rng = random.Random(7)
    question, docs = random_case(rng, 60, 250, 1200)
    fts = Fts5Bm25()
    assert fts.by_token
    terms, expected = assert_same_as_sqlite(fts, question, docs, direct=False)
    assert len(terms) >= 1200 and len(set(terms)) < 100
    singles = {}
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", enumerate(docs, 1))
    for x in set(terms):
        for r, s in db.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ?", ('"' + x.replace('"', '""') + '"',)):
            singles[r - 1] = singles.get(r - 1, 0.0) - s * terms.count(x)
    assert sum(singles[p] != s for p, s in expected if s > 0) > 0


def c_bm25_terms(question_terms: list[str], docs_terms: list[list[str]]):
    """FTS5's bm25 per phrase as its C source computes it, in Python doubles:
    (idf, the frequency factor) for every document and phrase."""
    n = len(docs_terms)
    avgdl = float(sum(map(len, docs_terms))) / float(n)
    out = []
    for d in docs_terms:
        row = []
        for t in question_terms:
            hit = sum(t in x for x in docs_terms)
            idf = math.log((n - hit + 0.5) / (hit + 0.5))
            idf = 1e-6 if idf <= 0.0 else idf
            f = float(d.count(t))
            row.append((idf, (f * (1.2 + 1.0)) / (f + 1.2 * (1 - 0.75 + 0.75 * len(d) / avgdl))))
        out.append(row)
    return out


def test_fts5_sum_is_of_rounded_terms_and_the_probe_tells_a_fused_sum():
    """FTS5's score is ``score += idf * factor`` over the phrases in query
    order. Computed in Python doubles, that equals real SQLite bit for bit on
    the built-in probe haystack; the same sum with each step a fused
    multiply-add (what a build with FMA contraction computes) differs on it,
    so the check each Fts5Bm25 makes at start would see such a build."""
    question, docs = lexical._probe()
    terms, expected = sqlite_or_bm25(question, docs)
    tokens = [d.lower().split() for d in docs]
    plain, fused = [], []
    for row in c_bm25_terms(terms, tokens):
        a = b = 0.0
        for idf, factor in row:
            a += idf * factor
            b = float(Fraction(idf) * Fraction(factor) + Fraction(b))
        plain.append(a)
        fused.append(b)
    by_pos = dict(expected)
    assert [by_pos[p] for p in range(len(docs))] == plain
    assert plain != fused


def test_fts5_falls_back_to_sqlite_where_the_sum_is_not_reproduced(monkeypatch):
    """Where the token-by-token sum does not reproduce SQLite on the probe,
    every ranking is SQLite's OR query."""
    def off_by_one_ulp(self, terms, n):
        positions, scores = by_token(self, terms, n)
        return positions, np.nextafter(scores, np.inf)

    by_token = Fts5Bm25._by_token
    monkeypatch.setattr(Fts5Bm25, "_by_token", off_by_one_ulp)
    fts = Fts5Bm25()
    assert not fts.by_token
    question, docs = random_case(random.Random(3), 12, 30, 50)
    assert_same_as_sqlite(fts, question, docs)


def test_fts5_question_with_quotes_and_keywords():
    got = rank("fts5-bm25", 'what "NEAR" OR AND not*', ["near and or", "nothing here"])
    assert got.positions.tolist() == [0, 1] and got.scores[0] > 0 and got.scores[1] == 0.0


def test_empty_haystack_and_empty_documents():
    for name in ("bm25-official", "bm25s", "fts5-bm25"):
        assert rank(name, "q", []).positions.tolist() == []
        r = rank(name, "hello", ["", "hello world", ""])
        assert r.positions[0] == 1 and sorted(r.positions.tolist()) == [0, 1, 2]


def test_locomo_documents_join_all_turns(locomo_path, tmp_path):
    normalize_locomo(locomo_path, tmp_path, log=lambda m: None)
    raw = json.loads(locomo_path.read_text(encoding="utf-8"))
    conv = raw[0]["conversation"]
    hays = haystack_documents(tmp_path / "haystacks.parquet", tmp_path / "events.parquet", "locomo", [0])
    h = hays[0]
    assert h.session_ids[0] == "session_1"
    assert h.docs[0] == " ".join(t["text"] for t in conv["session_1"])
    assert len(h.docs) == len([k for k in conv if k.startswith("session_") and not k.endswith("date_time")])


def test_session_documents_keep_user_turns_only(tmp_path):
    raw = tmp_path / "x.json"
    raw.write_text(json.dumps([{
        "question_id": "q1", "question": "hi", "question_type": "t", "answer": "a",
        "haystack_session_ids": ["s1", "s2"], "haystack_dates": ["2023/01/01 (Sun) 10:00"] * 2,
        "answer_session_ids": ["s1"],
        "haystack_sessions": [
            [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
             {"role": "user", "content": "three"}],
            [{"role": "assistant", "content": "only"}, {"role": "User", "content": "not user"}],
        ]}]), encoding="utf-8")
    normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    docs = session_documents(tmp_path / "n" / "events.parquet", "longmemeval")
    keys = pq.read_table(tmp_path / "n" / "haystacks.parquet").to_pydict()["session_key"]
    assert [docs[k] for k in keys] == ["one three", ""]
    assert [session_documents(tmp_path / "n" / "events.parquet", "locomo")[k] for k in keys] == \
        ["one two three", "only not user"]
