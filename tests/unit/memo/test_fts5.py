"""The in-memory FTS5 discovery (src/memobench/memo/fts5.py) against real SQLite
FTS5, the oracle: the unicode61 tokens of any text, the rows of any phrase on
any haystack (LIMIT, both columns, empty and duplicate rows), and whole
segments' lists equal to those of the per-haystack FTS5 tables the harnesses
rebuild, with the tokens from the tokens stage or tokenized in the job."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memobench.memo.engine import fts_quote
from memobench.memo.fts5 import MAX_TOKEN_BYTES, PhraseMatcher, Unicode61
from memobench.tools.generate.longmemeval import write_longmemeval
from memobench.datasets.normalize import normalize_locomo, normalize_longmemeval
from memobench.retrieval.memo import load_segment, run_segment
from memobench.memo.termids import Vocab
from memobench.memo.tokenize import SEQ, write_tokens
from memobench.catalog.variants import resolve

U61 = Unicode61()


def fts5_tokens(text: str) -> list[str]:
    """What FTS5 itself indexes for ``text`` (fts5vocab, in position order)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    db.execute("INSERT INTO t(rowid, body) VALUES (1, ?)", (text,))
    return [r[0] for r in db.execute("SELECT term FROM v ORDER BY offset")]


def fts5_rows(rows: list[tuple], phrase: str, limit: int) -> list[int]:
    """The harnesses' query on a real contentless fts5(id, body) table (positions from 0)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(id, body, content='')")
    db.executemany("INSERT INTO docs(rowid, id, body) VALUES (?, ?, ?)",
                   [(n, sid, body) for n, (sid, body) in enumerate(rows, 1)])
    try:
        return [r[0] - 1 for r in db.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rowid LIMIT ?", (fts_quote(phrase), limit))]
    except sqlite3.Error:
        return []  # as the harnesses catch it


def matcher_rows(rows: list[tuple], phrase: str, limit: int, tokenizer=U61) -> list[int]:
    vocab = Vocab()
    m = PhraseMatcher(tokenizer, max(limit, 1), vocab)
    # the body column: its events' (the parts between "\n") tokens in order, as ids
    bodies = [vocab.encode("".join(tokenizer.joined(part) for part in (body or "").split("\n"))) for _, body in rows]
    m.load(object(), [sid for sid, _ in rows], bodies)
    return m.rows(phrase, limit)


# Characters chosen to hit every class: ASCII letters, digits and punctuation,
# precomposed and combining diacritics, the few non-alnum diacritics, Han,
# full-width, Turkish dotted I, sharp s, private use, whitespace of every kind,
# NUL, astral letters and symbols, and what Python calls whitespace.
ALPHABET = st.sampled_from(list(
    "aAbBzZ09 _-.,'\"*:()^+\n\t\r\x00\x0b\x1c\x85\xa0éÉçÇñÑüÜßẞİıøØæœ\u0301\u0308\u0300\u02b9\u02c6\u00b4`^¨"
    "漢字中文语言全角ＡＢ１２\ue000\u2028\u2029\u3000\u200b\u200d\ufeff🙂𝐀𐐀𝔸ǅǈⅫ①"))
TEXT = st.lists(st.one_of(ALPHABET, st.characters(blacklist_categories=("Cs",))), max_size=40).map("".join)
# ASCII text takes the tokenizer's C path (bytes translate and split)
ASCII_TEXT = st.text(alphabet=st.characters(max_codepoint=127), max_size=60)


@settings(max_examples=400, deadline=None)
@given(st.one_of(TEXT, ASCII_TEXT))
def test_tokens_equal_fts5(text):
    assert U61.tokens(text) == fts5_tokens(text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), TEXT), TEXT), min_size=1, max_size=8), TEXT,
       st.integers(min_value=1, max_value=9))
def test_rows_equal_fts5(rows, phrase, limit):
    assert matcher_rows(rows, phrase, limit) == fts5_rows(rows, phrase, limit)


WORDS = st.sampled_from(["the", "The", "garden", "GARDEN", "gärden", "plan", "s1", "s2", "x", "漢字", "",
                         "café", "cafe\u0301", "ß", "i̇"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), WORDS), st.lists(WORDS, max_size=8).map(" ".join)),
                min_size=1, max_size=10),
       st.lists(WORDS, min_size=1, max_size=3).map(" ".join), st.integers(min_value=1, max_value=12))
def test_rows_of_likely_phrases_equal_fts5(rows, phrase, limit):
    """Small vocabularies, so phrases do match: multi-token phrases, matches
    in the id column only, case and diacritic folding, LIMIT cutting."""
    assert matcher_rows(rows, phrase, limit) == fts5_rows(rows, phrase, limit)


def test_phrases_fts5_rejects_or_cannot_match():
    rows = [("s1", "ab cd"), ("s2", "ab"), ("ab", "x"), ("s4", "cd ab")]
    for phrase in ("ab\x00cd", "", "!!", " ", 'a"b'):
        assert matcher_rows(rows, phrase, 10) == fts5_rows(rows, phrase, 10)
    assert matcher_rows(rows, "ab", 10) == [0, 1, 2, 3]  # the id column counts
    assert matcher_rows(rows, "s1 ab", 10) == []  # a phrase never spans columns


def test_long_tokens_are_cut_like_fts5():
    """FTS5 cuts tokens at 32,768 UTF-8 bytes, even inside a character."""
    for filler in ("a", "é", "漢", "🙂"):
        n = MAX_TOKEN_BYTES // len(filler.encode()) + 3
        long_doc = filler * n
        rows = [("s1", long_doc), ("s2", filler * (n - 5)), ("s3", long_doc[:-1] + "b")]
        for phrase in (long_doc, long_doc + "z", filler * (n - 5), long_doc[:-1] + "b" + " q"):
            assert matcher_rows(rows, phrase, 10) == fts5_rows(rows, phrase, 10), (filler, len(phrase))
        if filler in ("a", "🙂"):  # cut between characters: the indexed term reads back as text
            assert U61.tokens(long_doc + "zz yy") == fts5_tokens(long_doc + "zz yy")
    # a cut inside a character: two tokens differing only in that character's bytes stay apart
    base = "a" * (MAX_TOKEN_BYTES - 1)
    rows = [("s1", base + "é" + "x"), ("s2", base + "ā" + "x")]
    for phrase in (base + "é", base + "ā", base + "ǣ"):
        assert matcher_rows(rows, phrase, 10) == fts5_rows(rows, phrase, 10)


def test_lone_surrogates_read_as_replacement_characters():
    """JSON can hold a lone surrogate; Node hands SQLite U+FFFD for it."""
    text = "ab\ud800cd \udfffe"
    assert U61.tokens(text) == fts5_tokens(text.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd"))


def test_whitespace_always_separates():
    """The joined form relies on it: no token holds a character str.split() splits at."""
    spaces = [chr(c) for c in range(0x3001) if chr(c).isspace()]
    U61.learn(spaces)
    assert set(spaces) <= U61.separators


def test_body_column_spans_events():
    """Events are joined by "\\n" in the harnesses' body: a phrase may span two
    events, and an event without tokens does not break it."""
    rows = [("s1", "the garden\n\n!!\nplan today")]
    for phrase in ("garden plan", "the garden plan today", "garden  plan"):
        assert matcher_rows(rows, phrase, 10) == fts5_rows(rows, phrase, 10) == [0]


def _big_haystack_item():
    sessions = [[{"role": "user", "content": f"note {i}: we talked about the garden plan"}] for i in range(620)]
    sessions[610] = [{"role": "user", "content": "the garden plan with roses, finally"}]
    sessions[3] = []  # an empty session is a row too
    ids = [f"s{i}" for i in range(620)]
    ids[5] = ids[7]  # a duplicate id
    return {"question_id": "big", "question_type": "multi-session", "question": "What was the garden plan?",
            "question_date": "2023/05/30 (Tue) 23:40", "haystack_session_ids": ids,
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * 620, "haystack_sessions": sessions,
            "answer_session_ids": ["s610"]}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, locomo_path):
    root = tmp_path_factory.mktemp("fts5")
    lme = root / "lme.json"
    write_longmemeval(lme, n_questions=50, sessions_per_question=20, seed=13, spice=True)
    items = json.loads(lme.read_text())
    items.append(_big_haystack_item())
    lme.write_text(json.dumps(items, ensure_ascii=False))
    normalize_longmemeval(lme, root / "lme", log=lambda m: None)
    normalize_locomo(locomo_path, root / "locomo", log=lambda m: None)
    for d in ("lme", "locomo"):
        for seq in ("fts5", *SEQ):
            write_tokens(root / d / "events.parquet", seq, root / d / f"{seq}.arrow", log=lambda m: None)
    return root


# whole segments of generated S and M files and of the real LoCoMo file: the whole suite runs them,
# the unit run checks the same rows on single haystacks (test_rows_equal_fts5 and the ones above)
@pytest.mark.parametrize("name,family,variants", [
    pytest.param("lme", "s", ["v0.8.0", "v0.5.0", "exp4-C-idfProxy", "exp-V1", "exp3-T2h"], marks=pytest.mark.slow),
    pytest.param("lme", "m", ["v0.8.0", "exp5m-S2"], marks=pytest.mark.slow),
    pytest.param("locomo", "locomo", ["v0.8.0", "v0.4.0"], marks=pytest.mark.slow),  # the whole real file
])
def test_segments_equal_per_haystack_fts5_tables(datasets, name, family, variants):
    d = datasets / name
    for v in variants:
        variant = resolve(v, family)
        tables = {}
        for how, kwargs in {"sqlite": {}, "memory": {},
                            "tokens stage": {"tokens": {"fts5": d / "fts5.arrow",
                                                        variant.recipe.seq: d / f"{variant.recipe.seq}.arrow"},
                                             "texts": False}}.items():
            qs, hs, corpus = load_segment(d / "questions.parquet", d / "haystacks.parquet", d / "events.parquet",
                                          1, 1, **kwargs)
            tables[how] = run_segment(variant, qs, hs, corpus, log=lambda m: None, deep=True,
                                      fts_sqlite=how == "sqlite")
        for how in ("memory", "tokens stage"):
            assert all(a.equals(b) for a, b in zip(tables["sqlite"], tables[how])), (v, how)
