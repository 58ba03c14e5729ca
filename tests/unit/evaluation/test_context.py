"""The context tokens (evaluation/context.py): the pinned tokenizers are tiktoken's
own encodings (tiktoken's registry builds the oracle from its cache), and each
session's and turn's count is tiktoken's on its rendering, for unicode, lone
surrogates (as the raw files hold them; the tables hold U+FFFD) and very long texts."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memobench.core.errors import ConfigError, DataError
from memobench.evaluation import context
from tests.oracles.token_budgets import encoding

LONE = re.compile("[\ud800-\udfff]")
TEXTS = [
    "",
    "plain ascii, with numbers 12345 and <|endoftext|> written as text",
    "unicode: 日本語のテキスト, emoji 🎉👩‍👩‍👧, Ελληνικά, עברית, combining e\u0301, zero\u200bwidth",
    "lone high \ud83d then a and a lone low \ude00 and a pair \U0001F600 (one character, as JSON reads a pair)",
    "\udfff",
    "word " * 60_000,  # very long: 300,000 characters
    "".join(chr(c) for c in range(0x20, 0x3000, 7)) * 20,
]


@pytest.fixture(scope="module")
def tiktoken_own(tmp_path_factory):
    cache = tmp_path_factory.mktemp("tiktoken_cache")
    return {name: encoding(name, cache) for name in context.ENCODINGS}


@pytest.mark.parametrize("name", sorted(context.ENCODINGS))
def test_pinned_encoding_is_tiktoken_s_own(name, tiktoken_own):
    ours = context.load(context.spec_of(name))
    theirs = tiktoken_own[name]
    assert ours.record() == {"name": name, "sha256": context.ENCODINGS[name][0]}
    # the pattern and the special tokens are tiktoken's (tiktoken_ext/openai_public.py)
    assert context.ENCODINGS[name][1] == theirs._pat_str
    assert context.ENCODINGS[name][2] == theirs._special_tokens
    assert ours.count_batch(TEXTS) == [len(theirs.encode_ordinary(t)) for t in TEXTS]
    # on threads, in contiguous parts: the same counts in the same order
    assert context.load(context.spec_of(name), threads=3).count_batch(TEXTS * 3) == ours.count_batch(TEXTS) * 3


def test_counts_of_sessions_and_turns_equal_tiktoken_s(tmp_path, tiktoken_own):
    """count_sessions and count_turns on tables as normalize writes them (a lone surrogate as U+FFFD), held to
    tiktoken on the raw file's exact strings, rendered as docs/protocol.md#token-budgets says."""
    turns = [(0, 0, "user", TEXTS[1]), (0, 1, "assistant", TEXTS[2]), (2, 0, "Caroline", TEXTS[3]),
             (2, 1, "Melanie", TEXTS[4]), (2, 2, "user", TEXTS[5]), (3, 0, "user", TEXTS[6]), (3, 1, "user", "")]
    events, sessions = tmp_path / "events.parquet", tmp_path / "sessions.parquet"
    pq.write_table(pa.table({"session_key": [k for k, _, _, _ in turns], "seq": [s for _, s, _, _ in turns],
                             "role": [r for _, _, r, _ in turns],
                             "text": [LONE.sub("\ufffd", t) for _, _, _, t in turns]}), events)
    pq.write_table(pa.table({"session_key": [0, 1, 2, 3]}), sessions)  # session 1 has no turn
    enc = tiktoken_own["cl100k_base"]
    ours = context.load(context.spec_of("cl100k_base"))
    context.count_sessions(sessions, events, ours, tmp_path / "s.parquet", log=lambda *_: None)
    context.count_turns(events, ours, tmp_path / "t.parquet", log=lambda *_: None)
    t = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert [r["tokens"] for r in t] == [len(enc.encode_ordinary(f"{r}: {x}")) for _, _, r, x in turns]
    by_session = {}
    for k, _, r, x in turns:
        by_session.setdefault(k, []).append(f"{r}: {x}")
    counts, record = context.read_counts(tmp_path / "s.parquet")
    assert counts == {k: len(enc.encode_ordinary("\n".join(by_session.get(k, [])))) for k in (0, 1, 2, 3)}
    assert counts[1] == 0
    assert record == {"name": "cl100k_base", "sha256": context.ENCODINGS["cl100k_base"][0],
                      "separator_tokens": len(enc.encode_ordinary("\n\n"))}


@pytest.mark.parametrize("layout", ["as normalize writes it", "sessions reordered", "turns shuffled"])
def test_session_renderings_do_not_depend_on_the_tables_order(layout):
    """Arrow renders the sessions where the events table holds each session's turns together in turn
    order (as normalize writes it), whatever the sessions table's order; otherwise Python groups and
    sorts them. Both give render_session's text for every session, "" for one with no turn."""
    import random

    import numpy as np

    rng = random.Random(3)
    rows = [(k, q, rng.choice(["user", "assistant", None, "Bob"]), rng.choice(["hi", "", None, "x\ny ", "日本"]))
            for k in (0, 1, 3, 4, 7) for q in range(rng.randint(1, 4))]
    sessions = [0, 1, 2, 3, 4, 5]  # 2 and 5 have no turn; 7 is in no session
    if layout == "sessions reordered":
        sessions = [4, 2, 0, 5, 3, 1]
    elif layout == "turns shuffled":
        rng.shuffle(rows)
    keys, seqs = np.array([r[0] for r in rows], np.int32), np.array([r[1] for r in rows], np.int32)
    turns = pa.array([context.render_turn(r, t) for _, _, r, t in rows], pa.large_string())
    texts = context._session_texts(keys, seqs, turns, np.array(sessions, np.int32)).to_pylist()
    assert texts == [context.render_session((r, t) for _, _, r, t in sorted(x for x in rows if x[0] == k))
                     for k in sessions]


def test_a_file_without_its_pinned_hash_is_refused():
    with pytest.raises(DataError, match="does not have the pinned sha256"):
        context.load({"name": "cl100k_base", "sha256": "0" * 64})


def test_an_unknown_tokenizer_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="budgets tokenizer 'p50k'"):
        context.spec_of("p50k", root=tmp_path)


def test_a_tokenizers_file_counts_as_tokenizers_does(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, ":": 3, "user": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "tok.json").write_text(tok.to_str(), encoding="utf-8")
    spec = context.spec_of("tok.json", root=tmp_path)
    ours = context.load(spec, root=tmp_path)
    texts = ["user: hello world", "hello, wörld \ufffd", ""]
    assert ours.count_batch(texts) == [len(tok.encode(t, add_special_tokens=False).ids) for t in texts]
    # the file is recorded by its bytes: another file under the same name is refused, not counted with
    (tmp_path / "tok.json").write_text(json.dumps(json.loads(tok.to_str())) + " ", encoding="utf-8")
    with pytest.raises(DataError, match="tokenizers file changed"):
        context.load(spec, root=tmp_path)
