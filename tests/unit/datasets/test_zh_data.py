"""Checks for the project's own Chinese functional set (memobench.datasets.zh_data).

* structure (docs/harnesses.md#the-zh-set): ten sessions, eleven queries, their golds,
  where each query's leading Han run comes from, the ceiling control, and
  that the ASCII-only window W-CF (variant A) sees nothing;
* the FTS body the engine indexes ("\\n".join(pieces)) tokenizes exactly like
  the full session text the original indexed (checked with fts5vocab);
* the published outcome through the engine: variant A 0/11, variant B 10/11
  with every hit at rank 1, the control missing under both.
"""

from __future__ import annotations

import re
import sqlite3

import pytest

from memobench.memo.engine import Corpus, Haystack, Ranker, Recipe
from memobench.memo.tokenize import HAN_CLASS, seq_ascii, seq_zh, window_070, window_cf
from memobench.datasets.zh_data import QUERIES, SESSIONS, pieces

HAN_RUN = re.compile("[" + HAN_CLASS + "]+")  # maximal Script=Han runs, any length
ZH_PUNCT = "，。？！；：、"
USER, ASSISTANT = "用户：", " 助手："
GOLDS = [f"s{i}" for i in range(1, 11)] + ["s7"]
TEXT = dict(SESSIONS)


def _parts(text: str) -> tuple[str, str]:
    """(user question, assistant reply) of a session."""
    user, reply = text.split(ASSISTANT)
    return user[len(USER):], reply


def _piece_tokens() -> list[set[str]]:
    """The S-ZH tokens of every session (all its pieces)."""
    return [{t for p in pieces(text) for t in seq_zh(p)} for _, text in SESSIONS]


# --------------------------------------------------------------------------- structure


def test_sessions_shape():
    assert [sid for sid, _ in SESSIONS] == [f"s{i}" for i in range(1, 11)]
    for sid, text in SESSIONS:
        assert text.startswith(USER), sid
        assert text.count(ASSISTANT) == 1 and text.count("用户：") == 1, sid
        user, reply = _parts(text)
        assert user.strip() and reply.strip(), sid
        # Full-width colons and sentence punctuation only (ASCII "." is only
        # allowed inside the file name of the notes path).
        assert not re.search(r"[,:;?!]", text), sid
        assert text.rstrip()[-1] in "。！？", sid
        assert any(c in text for c in "，。？"), sid


def test_sessions_embed_ascii_words():
    with_ascii = [sid for sid, text in SESSIONS if seq_ascii(text)]
    assert len(with_ascii) >= 5
    every = " ".join(text for _, text in SESSIONS)
    for word in ("npm", "GitHub", "tag", "release", "JSON", "benchmark", "unicode61", "token",
                 "snake_case", "Nord"):
        assert word in every, word
    assert re.search(r"\$DSH_HOME/\S+\.jsonl", TEXT["s6"])
    assert "unicode61" in TEXT["s7"] and "token" in TEXT["s7"]


def test_queries_shape():
    assert len(QUERIES) == 11
    assert [gold for _, gold in QUERIES] == GOLDS
    assert len({q for q, _ in QUERIES}) == 11


@pytest.mark.parametrize("n", range(10))
def test_query_leading_run_from_gold(n):
    query, gold = QUERIES[n]
    text = TEXT[gold]
    # One maximal Han run, Chinese punctuation, a different follow-up Han run.
    m = re.fullmatch("([" + HAN_CLASS + "]+)([" + ZH_PUNCT + "])([" + HAN_CLASS + "]+)", query)
    assert m, query
    first, follow = m.group(1), m.group(3)
    assert HAN_RUN.findall(query)[0] == first
    assert first != follow
    # The gold session contains the leading run verbatim, never the whole query.
    assert first in text
    assert query not in text
    # ...as a whole S-ZH token of one of its pieces (it is a maximal run there
    # too, not glued to Latin letters or digits), so both FTS (unicode61: one
    # token per Han run) and the JS check can find it ...
    tokens = _piece_tokens()
    gold_k = [sid for sid, _ in SESSIONS].index(gold)
    assert first in tokens[gold_k]
    # ... and in no other session, so the gold session is the only candidate.
    for sid, other in SESSIONS:
        if sid != gold:
            assert first not in other, (query, sid)
    # The follow-up run is a token of no session (it must not pull others in).
    assert all(follow not in t for t in tokens)
    # The clause comes from the user's question, except in the fifth query,
    # where it comes from the assistant's reply.
    user, reply = _parts(text)
    if n == 4:
        assert first in reply and first not in user
    else:
        assert first in user


def test_control_runs_occur_nowhere():
    query, gold = QUERIES[10]
    assert gold == "s7"
    runs = HAN_RUN.findall(query)
    assert len(runs) >= 2
    for run in runs:
        for sid, text in SESSIONS:
            assert run not in text, (run, sid)


@pytest.mark.parametrize("query", [q for q, _ in QUERIES])
def test_queries_have_no_ascii_window(query):
    # Variant A's window (W-CF) is built from ASCII words only; a window token
    # occurring in no session could retrieve nothing anyway.
    every = set().union(*_piece_tokens())
    assert all(t not in every for t in window_cf(query))
    assert not re.search("[A-Za-z0-9]", query)  # in fact, no ASCII word at all
    assert window_cf(query) == []
    # Variant B's window holds the query's Han runs (at least 2: the weighted
    # step runs).
    assert len(window_070(query)) >= 2


def test_pieces():
    for sid, text in SESSIONS:
        ps = pieces(text)
        assert ps, sid
        for p in ps:
            assert p == p.strip() and p
            assert not re.search("[。！？]", p)
        # Nothing but the sentence ends and surrounding whitespace is lost.
        assert re.sub(r"[。！？\s]", "", text) == re.sub(r"\s", "", "".join(ps))
    assert pieces(" 。 甲乙！？\n丙 ") == ["甲乙", "丙"]


# --------------------------------------------------------------------------- FTS body


def test_fts_body_tokens_match_full_text():
    # The original FTS row held the full session text; the engine indexes the
    # pieces joined by "\n" (Corpus.body).  unicode61 sees the same token
    # sequence: 。！？ (category Po) and whitespace (Zs, Cc) are separators, so
    # cutting the text at them, trimming whitespace at the cut and gluing the
    # pieces with another separator ("\n") neither merges, splits nor drops a
    # token; a dropped blank piece held no token.  Verified here for all ten
    # sessions with fts5vocab (instance: term per position).
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")
    db.execute("CREATE VIRTUAL TABLE voc USING fts5vocab(docs, instance)")

    def tokens(rowid):
        return [r[0] for r in db.execute("SELECT term FROM voc WHERE doc = ? ORDER BY offset", (rowid,))]

    for k, (sid, text) in enumerate(SESSIONS):
        db.execute("INSERT INTO docs(rowid, body) VALUES (?, ?)", (2 * k + 1, text))
        db.execute("INSERT INTO docs(rowid, body) VALUES (?, ?)", (2 * k + 2, "\n".join(pieces(text))))
        full, joined = tokens(2 * k + 1), tokens(2 * k + 2)
        assert full and full == joined, sid


# --------------------------------------------------------------------------- engine


def _ranks(window: str) -> list[int]:
    texts = {k: pieces(text) for k, (sid, text) in enumerate(SESSIONS)}
    corpus = Corpus({k: (p, [len(x) for x in p]) for k, p in texts.items()})
    # time = base 0 + k, seq = k; N = 10 distinct ids.
    hay = Haystack([sid for sid, _ in SESSIONS], list(range(len(SESSIONS))), [0] * len(SESSIONS))
    assert hay.n_sessions("distinct") == 10
    ranker = Ranker(corpus, Recipe(seq="zh", window=window, n_mode="distinct"))
    ranks = []
    for query, gold in QUERIES:
        final = ranker.rank(hay, 0, query)["final"]
        ranks.append(final.index(gold) + 1 if gold in final else 0)
    return ranks


def test_variant_a_finds_nothing():
    assert _ranks("cf") == [0] * 11


def test_variant_b_ten_of_eleven_at_rank_1():
    ranks = _ranks("070")
    assert ranks == [1] * 10 + [0]
    assert sum(r == 1 for r in ranks) == 10  # hit@1 10/11, MRR 10/11
