"""A memory server of a shape this project has never seen, driven by config
alone (docs/memory-services.md#servers-with-their-own-shapes): the notebook
server of tests/helpers/shaped_mcp_server.py (its own tool names, argument
shapes and message objects, answers in words, ids it assigns, a reset that
fails on a folder it never held, a count that is a list, titles that
overwrite, a limit on a note's length), over MCP stdio and over streamable
HTTP behind an API key, on a LongMemEval file with a repeated session id
and sessions longer than the limit. Each variant's lists are the server's
own ranking, computed here from the file without memobench's code: its
notes (each session, or each part of a long one, in haystack order) ranked
for the query the variant's transform makes, each session at its best
part. Each test starts real server processes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from memobench.datasets.normalize import normalize_longmemeval
from tests.helpers import REPO
from tests.helpers.services import rank_one_segment
from tests.helpers.shaped_mcp_server import LIMIT, ranking

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the MCP Python SDK is not installed")

ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}
SERVER = [sys.executable, "-m", "tests.helpers.shaped_mcp_server"]
STOP = set((REPO / "src" / "memobench" / "data" / "harness_stop.txt").read_text(encoding="utf-8").split())

TOPICS = {
    "kayak": "I bought a blue kayak at Harbor Outfitters for the lake trip, paddles included",
    "garden": "The tomatoes in the garden need staking and the basil is flowering already",
    "paddles": "Carbon paddles are lighter; my old kayak paddles were aluminium and heavy",
    "fishing": "We went fishing at the lake at dawn and caught two trout near the reeds",
    "violin": "My violin lesson moved to Thursday, the teacher wants scales every morning",
    "bakery": "The bakery on Elm Street sells sourdough and rye bread until noon",
}


def _turns(*texts: str, answer: bool = False) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t,
             **({"has_answer": True} if answer and i == 0 else {})} for i, t in enumerate(texts)]


def _long(topic: str, n: int) -> list[dict]:
    """A session longer than the server's limit: ``n`` turns of about 90 characters, the topic's
    words only in the last turns (a part other than the first)."""
    filler = [f"Day {i}: the weather was mild, we walked the dog and read books in the evening." for i in range(n)]
    return _turns(*filler, TOPICS[topic], "Noted, that sounds like a fine plan for the lake.")


def _file() -> list[dict]:
    """Three questions; the repeated id answer_rep holds other content in each copy (as LongMemEval's
    files repeat ids), and long_1 is longer than a note may be."""
    hay = [("answer_kayak", _turns(TOPICS["kayak"], "Enjoy the trip!", answer=True)),
           ("garden_1", _turns(TOPICS["garden"], "Stake them soon.")),
           ("answer_rep", _turns(TOPICS["paddles"], "Carbon is worth it.")),
           ("long_1", _long("fishing", 9)),
           ("answer_rep", _turns(TOPICS["fishing"], "Trout at dawn, lovely.")),
           ("violin_1", _turns(TOPICS["violin"], "Scales help.")),
           ("bakery_1", _turns(TOPICS["bakery"], "Rye is my favourite."))]
    questions = [("q_kayak", "Where did I buy the blue kayak for the lake trip?", "answer_kayak"),
                 ("q_paddles", "What were my old kayak paddles made of?", "answer_rep"),
                 ("q_trout", "What did we catch when fishing at the lake?", "answer_rep")]
    dates = [f"2023/05/{10 + i:02d} (Wed) 10:00" for i in range(len(hay))]
    return [{"question_id": qid, "question_type": "single-session-user", "question": text, "answer": "x",
             "question_date": "2023/06/01 (Thu) 10:00", "haystack_session_ids": [sid for sid, _ in hay],
             "haystack_dates": dates, "haystack_sessions": [turns for _, turns in hay],
             "answer_session_ids": [gold]} for qid, text, gold in questions]


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    root = tmp_path_factory.mktemp("shapes")
    (root / "lme.json").write_text(json.dumps(_file()), encoding="utf-8")
    normalize_longmemeval(root / "lme.json", root / "norm", log=lambda m: None)
    return root / "norm"


# ---- the expected lists, from the file: the server's ranking over the notes the config makes


def _keywords(question: str) -> str:
    return " ".join(dict.fromkeys(w for w in re.findall(r"\w+", question.lower()) if w not in STOP))


def _long_words(question: str) -> str:
    """The user's query function of the stdio variant (QUERY_FILE)."""
    return " ".join(w for w in re.findall(r"\w+", question) if len(w) > 4)


QUERY_FILE = '''import re


def long_words(question):
    return " ".join(w for w in re.findall(r"\\w+", question) if len(w) > 4)
'''


def _notes(turns: list[dict], header: str | None) -> list[str]:
    """A session's notes: its ``role: content`` lines packed greedily into notes of at most LIMIT
    characters, the header line first in each."""
    room = LIMIT - (len(header) + 1 if header is not None else 0)
    parts: list[list[str]] = [[]]
    for line in (f"{t['role']}: {t['content']}" for t in turns):
        assert len(line) <= room  # this file's turns each fit in a note
        if parts[-1] and len("\n".join(parts[-1] + [line])) > room:
            parts.append([])
        parts[-1].append(line)
    return ["\n".join(([header] if header is not None else []) + p) for p in parts]


def _expected(query, header: bool) -> dict[str, list[tuple[int, float]]]:
    """question id -> [(haystack position, score)], each session at its best note."""
    out = {}
    for q in _file():
        notes = [(pos, text) for pos, (turns, date) in enumerate(zip(q["haystack_sessions"], q["haystack_dates"]))
                 for text in _notes(turns, date if header else None)]
        ranked, seen = [], set()
        for i, score in ranking(query(q["question"]), [text for _, text in notes])[:50]:
            if notes[i][0] not in seen:
                seen.add(notes[i][0])
                ranked.append((notes[i][0], float(score)))
        out[q["question_id"]] = ranked
    return out


def _deep(expected: dict, scores: bool = True) -> dict[str, list[tuple[int, float]]]:
    """The expected lists as a deep table holds them: a list's scores where they strictly decrease (and
    the service gives any), else 51 - rank."""
    def kept(ranked):
        s = [x for _, x in ranked]
        keep = scores and all(a > b for a, b in zip(s, s[1:]))
        return [(p, x if keep else 51.0 - r) for r, (p, x) in enumerate(ranked, 1)]

    return {qid: kept(ranked) for qid, ranked in expected.items()}


def _lists(deep) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list] = {}
    for r in sorted(deep.to_pylist(), key=lambda r: (r["question_id"], r["rank"])):
        out.setdefault(r["question_id"], []).append((r["position"], r["score"]))
    return out


def _timings(root: Path, name: str) -> list[dict]:
    return pq.read_table(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name,
                                     segment="seg1")).to_pylist()


# ---- the variants: the server's shapes, in config


def _batch_tools() -> dict:
    """Every session of a haystack in one call, as message objects; the ids the server assigns read
    from its words; a reset that fails on a folder never held; its ranking in words; a count that is
    the length of a list."""
    return {"reset": {"tool": "wipe_folder", "arguments": {"folder": "{namespace}"}, "may_fail": True},
            "ingest": {"tool": "file_notes", "arguments": {"folder": "{namespace}", "notes": "{sessions}"},
                       "session": {"title": "{session.key}", "entries": "{session.messages}"},
                       "id_pattern": r"#(\d+)"},
            "search": {"tool": "find", "arguments": {"folder": "{namespace}", "words": "{query}", "top": "{k}"}},
            "count": {"tool": "list_notes", "arguments": {"folder": "{namespace}"}, "sessions": "notes",
                      "length": True}}


def _batch(mcp: dict, **over) -> dict:
    return {"system": {"mcp": mcp, "backoff_s": 0.05, "tools": _batch_tools(), "answer": "plain",
                       "render": {"turn": {"who": "{turn.role}", "said": "{turn.content}"}, "max_chars": LIMIT},
                       "query": "keywords", "results": {"list": "", "pattern": r"#(\d+)"}, **over}}


def _single(query: str) -> dict:
    """One note per session copy, titled by its key (the title overwrites), its text with the date first;
    no reset at all; JSON results whose ids sit inside a reference string."""
    return {"system": {"mcp": {"command": SERVER, "env": ENV}, "backoff_s": 0.05, "query": query,
                       "render": {"header": "{session.date}", "max_chars": LIMIT},
                       "tools": {"reset": None,
                                 "ingest": {"tool": "write_note", "arguments": {
                                     "folder": "{namespace}", "title": "{session.key}", "body": "{session.text}"}},
                                 "search": {"tool": "search_folder", "arguments": {
                                     "folder": "{namespace}", "text": "{query}", "limit": "{k}"}},
                                 "count": {"tool": "list_notes", "arguments": {"folder": "{namespace}"},
                                           "sessions": "notes", "length": True}},
                       "results": {"list": "matches.items", "id": "note.ref", "score": "relevance",
                                   "pattern": "^note:(.+)$"}}}


def test_the_expected_lists_depend_on_the_shapes():
    # what the lists below would be without the transform or the split: the test can tell them apart
    assert _expected(_keywords, False) != _expected(lambda q: q, False)
    whole = {q["question_id"]: q for q in _file()}["q_trout"]
    assert len(_notes(whole["haystack_sessions"][3], None)) > 1  # long_1 is split
    # the long session at its last part (its first holds no word of the query), then the second copy
    assert [p for p, _ in _expected(_keywords, False)["q_trout"]][:2] == [3, 4]


def test_a_stdio_server_of_its_own_shape_gives_its_own_ranking(norm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myqueries.py").write_text(QUERY_FILE, encoding="utf-8")
    (_, _, deep), lines = rank_one_segment(norm, tmp_path, "notes", _single("myqueries.py:long_words"))
    assert _lists(deep) == _deep(_expected(_long_words, header=True))
    # its check skips what a server without reset cannot show, and says so
    assert any("passed its conformance check (reset skipped" in line for line in lines), lines
    assert "reset" not in {r["operation"] for r in _timings(tmp_path, "notes")}


@pytest.fixture
def http_server(tmp_path):
    proc = subprocess.Popen([*SERVER, "--http", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **ENV, "NOTEBOOK_KEY": "n0tebook-s3cret"})
    try:
        line = proc.stdout.readline()
        assert "http://" in line, proc.stderr.read()
        yield line.split(" on ")[1].strip()
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_server_behind_a_key_assigning_its_own_ids_is_confirmed_and_read_back_in_a_later_job(
        norm, tmp_path, http_server, monkeypatch):
    monkeypatch.setenv("MB_NOTEBOOK_KEY", "n0tebook-s3cret")
    entry = _batch({"url": http_server}, headers={"Authorization": "Bearer $MB_NOTEBOOK_KEY"})
    expected = _expected(_keywords, header=False)
    (_, _, deep), lines = rank_one_segment(norm, tmp_path, "nb", entry)
    assert _lists(deep) == _deep(expected, scores=False)  # no scores in its words: 51 - rank
    assert any("passed its conformance check" in line for line in lines), lines
    ledger = [json.loads(x) for f in (tmp_path / "results").rglob("*.jsonl") for x in f.read_text().splitlines()]
    assert ledger and all(set(d["ids"].values()) >= {"answer_rep", "answer_rep~2", "long_1~p1", "long_1~p2"}
                          for d in ledger)
    assert {"ingest", "search", "count"} <= {r["operation"] for r in _timings(tmp_path, "nb")}
    # a later job confirms the namespace by count and reads the ids the server gave from the ledger
    (_, _, again), _ = rank_one_segment(norm, tmp_path, "nb", entry)
    assert again.equals(deep)
    assert not {"ingest", "reset"} & {r["operation"] for r in _timings(tmp_path, "nb")}
    for f in tmp_path.rglob("*"):
        assert not f.is_file() or b"n0tebook-s3cret" not in f.read_bytes(), f
