"""A memory server that answers in text (tests/helpers/text_server.py's passages, served by a real process) scored through
attribution (docs/memory-services.md#services-that-answer-in-text): its passages (turns as they are, altered
in case and spacing, excerpts, two turns as one passage, unrelated sentences) give the lists the server's
own account of their sources gives, the unrelated ones unattributed and counted; a server that names ids
beside its texts, one of them wrong in every answer, is caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memobench.datasets.normalize import normalize_longmemeval
from memobench.evaluation.metrics import checks_summary, service_warnings
from memobench.retrieval.attribution import stated
from tests.helpers import REPO
from tests.helpers.services import rank_one_segment
from tests.helpers.text_server import answer

ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}

SESSIONS = [
    ("s_kayak", ["I bought a blue kayak at Harbor Outfitters for the lake trip",
                 "Enjoy the trip, a kayak on the lake at dawn is lovely",
                 "The paddles came with it, made of light carbon fibre"]),
    ("s_garden", ["The tomatoes in my garden need staking before the storm",
                  "Stake them soon and tie the stems loosely with twine",
                  "My basil is flowering already, should I pinch the buds?"]),
    ("s_violin", ["My violin lesson moved to Thursday evening this month",
                  "The teacher wants scales every morning before breakfast",
                  "Practising scales daily will help your intonation a lot"]),
    ("s_bakery", ["The bakery on Elm Street sells sourdough until noon",
                  "Their rye bread is my favourite for sandwiches on weekends",
                  "Try the seeded loaf too, it keeps fresh for days"]),
]
QUESTIONS = [("q_kayak", "Where did I buy the blue kayak for the lake trip?", "s_kayak"),
             ("q_scales", "When does the teacher want me to practise scales?", "s_violin"),
             ("q_bread", "Which bread from the bakery do I like for sandwiches?", "s_bakery")]


def _file() -> list[dict]:
    hay = [(sid, [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)])
           for sid, turns in SESSIONS]
    return [{"question_id": qid, "question_type": "single-session-user", "question": text, "answer": "x",
             "question_date": "2023/06/01 (Thu) 10:00", "haystack_session_ids": [sid for sid, _ in hay],
             "haystack_dates": [f"2023/05/{10 + i:02d} (Wed) 10:00" for i in range(len(hay))],
             "haystack_sessions": [turns for _, turns in hay], "answer_session_ids": [gold]}
            for qid, text, gold in QUESTIONS]


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    root = tmp_path_factory.mktemp("text")
    (root / "lme.json").write_text(json.dumps(_file()), encoding="utf-8")
    normalize_longmemeval(root / "lme.json", root / "norm", log=lambda m: None)
    return root / "norm"


@pytest.fixture
def server():
    started = []

    def start(memory: str = "TextMemory") -> str:
        proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.library_http_server", memory],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **ENV})
        started.append(proc)
        line = proc.stdout.readline()
        assert "http://" in line, proc.stderr.read()
        return line.split(" on ")[1].strip()

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(10)


def _sessions() -> list[dict]:
    return [{"id": sid, "turns": [{"content": t} for t in turns]} for sid, turns in SESSIONS]


def _expected(grain: str, ids: bool = False) -> dict[str, list[int]]:
    """question id -> the haystack positions (a session variant) or turn indices (a turn variant) the
    server's own account of its passages' sources gives, each at its first passage."""
    starts = [sum(len(t) for _, t in SESSIONS[:s]) for s in range(len(SESSIONS))]
    out = {}
    for qid, text, _ in QUESTIONS:
        ranked: list[int] = []
        for _, sources in answer(_sessions(), text, 50, ids=ids):
            for s, t in sources:
                unit = s if grain == "session" else starts[s] + t
                if unit not in ranked:
                    ranked.append(unit)
        out[qid] = ranked
    return out


def _lists(deep) -> dict[str, list[int]]:
    out: dict[str, list] = {}
    for r in sorted(deep.to_pylist(), key=lambda r: (r["question_id"], r["rank"])):
        out.setdefault(r["question_id"], []).append(r["position"])
    return out


def _turn_lists(root) -> dict[str, list[int]]:
    import pyarrow.parquet as pq

    found = list(root.rglob("turns.parquet"))
    assert len(found) == 1, sorted(p.name for p in root.rglob("*.parquet"))
    out: dict[str, list] = {}
    turns = [t for _, ts in SESSIONS for t in ts]
    starts = [sum(len(t) for _, t in SESSIONS[:s]) for s in range(len(SESSIONS))]
    for r in sorted(pq.read_table(found[0]).to_pylist(), key=lambda r: (r["question_id"], r["rank"])):
        out.setdefault(r["question_id"], []).append(starts[r["position"]] + r["turn"])
    assert all(0 <= j < len(turns) for v in out.values() for j in v)
    return out


def _text_variant(url: str, **over) -> dict:
    return {"system": {"url": url, "backoff_s": 0.05, "results": {"list": "results", "id": None, "text": "text"},
                       **over}}


def test_the_server_says_every_way_of_passing_a_turn():
    said = [item["text"] for qid, text, _ in QUESTIONS for item, _ in answer(_sessions(), text, 50)]
    turns = {t for _, ts in SESSIONS for t in ts}
    assert any(t in turns for t in said)  # as it is
    assert any(t.isupper() and "  " in t for t in said)  # case and spacing altered
    assert any(t not in turns and any(t in x for x in turns) for t in said)  # an excerpt
    assert any("\n" in t for t in said)  # two turns as one passage
    assert any(t.startswith("Unrelated note") for t in said)


def test_a_text_server_is_scored_as_its_own_sources_say(norm, tmp_path, server):
    url = server()
    (_, outcomes, deep), lines = rank_one_segment(norm, tmp_path, "texts", _text_variant(url))
    assert _lists(deep) == _expected("session")
    assert any("passed its conformance check" in line for line in lines), lines
    a = checks_summary([outcomes])["attribution"]
    items = [x for qid, text, _ in QUESTIONS for x in answer(_sessions(), text, 50)]
    unrelated = sum(1 for _, sources in items if not sources)
    assert a["items"] == len(items) and a["kinds"]["unattributed"] == unrelated > 0
    assert a["attributed"] == len(items) - unrelated and a["kinds"]["normalized"] > 0 and a["kinds"]["exact"] > 0
    assert a["spans"] == sum(1 for _, sources in items if len(sources) == 2) > 0
    assert a["mode"] == "exact+normalized" and a["ambiguous"] == 0 and a["ids_checked"] == 0
    assert f"{a['attributed']} of {a['items']} items attributed" in stated(a)


def test_a_text_server_ranks_turns_as_its_own_sources_say(norm, tmp_path, server):
    url = server()
    rank_one_segment(norm, tmp_path, "text-turns", {**_text_variant(url), "grain": "turn"})
    assert _turn_lists(tmp_path / "results") == _expected("turn")


def test_a_wrong_id_beside_a_text_is_caught(norm, tmp_path, server):
    url = server("WrongIdMemory")
    entry = {"system": {"url": url, "backoff_s": 0.05, "check": False,
                        "results": {"list": "results", "id": "id", "text": "text"}}}
    (_, outcomes, deep), _ = rank_one_segment(norm, tmp_path, "ids-and-texts", entry)
    checks = checks_summary([outcomes])
    a = checks["attribution"]
    items = [x for qid, text, _ in QUESTIONS for x in answer(_sessions(), text, 50, ids=True)]
    assert a["ids_checked"] == len(items) and a["kinds"]["unattributed"] == 0
    # each answer's first id names another session than its text's: one per question, at rank 1
    assert [(m["question"], m["rank"]) for m in a["mismatches"]] == [(q, 1) for q, _, _ in QUESTIONS]
    said = service_warnings(checks, entry["system"])
    assert any(f"{len(QUESTIONS)} of {len(items)} ids it returned beside a text" in w for w in said), said
    # the list is the ids as returned (the wrong one included)
    first = {qid: next(iter(answer(_sessions(), text, 50, ids=True, wrong_id=True)))[0]["id"]
             for qid, text, _ in QUESTIONS}
    ids = [sid for sid, _ in SESSIONS]
    assert {q: ids[v[0]] for q, v in _lists(deep).items()} == first


def test_the_same_server_without_a_wrong_id_passes_the_check(norm, tmp_path, server):
    url = server("TextIdsMemory")
    entry = {"system": {"url": url, "backoff_s": 0.05, "results": {"list": "results", "id": "id", "text": "text"}}}
    (_, outcomes, _), _ = rank_one_segment(norm, tmp_path, "ids-right", entry)
    a = checks_summary([outcomes])["attribution"]
    assert a["ids_checked"] > 0 and a["ids_mismatched"] == 0 and a["mismatches"] == []


def test_the_outcomes_keep_each_item_s_hash_kind_and_turns(norm, tmp_path, server):
    from memobench.retrieval.attribution import text_hash

    url = server()
    (_, outcomes, _), _ = rank_one_segment(norm, tmp_path, "texts", _text_variant(url))
    ids = [f"{sid}_{t + 1}" for sid, turns in SESSIONS for t in range(len(turns))]
    for row in outcomes.to_pylist():
        text = next(t for q, t, _ in QUESTIONS if q == row["question_id"])
        said = answer(_sessions(), text, 50)
        assert [i["text_sha256"] for i in row["attributed"]] == [text_hash(x["text"]) for x, _ in said]
        assert [i["turn_ids"] for i in row["attributed"]] == [
            [ids[sum(len(t) for _, t in SESSIONS[:s]) + t] for s, t in sources] for _, sources in said]
        assert [i["kind"] == "unattributed" for i in row["attributed"]] == [not sources for _, sources in said]


# a Python retriever that returns text (returns: text): the same passages, made in-process
RETRIEVER = '''from tests.helpers.text_server import answer


def rank(question, turns):
    """The text server's passages of the turns it ranks (grain: turn, every turn)."""
    sessions = {}
    for p, text in zip(turns.positions, turns.texts):
        sessions.setdefault(p, []).append({"content": text})
    held = [{"id": str(p), "turns": t} for p, t in sorted(sessions.items())]
    return [item["text"] for item, _ in answer(held, question.text, 50)]


def rank_pairs(question, haystack):
    """Each session document's first words beside its id, best first by shared words; the first id wrong."""
    words = set(question.text.lower().split())
    order = sorted(range(len(haystack)), key=lambda p: (-len(words & set(haystack.texts[p].lower().split())), p))
    pairs = [(haystack.ids[p], " ".join(haystack.texts[p].split()[:6])) for p in order]
    return [(pairs[1][0], pairs[0][1])] + pairs[1:]
'''


def test_a_python_retriever_that_returns_text_is_scored_as_its_sources_say(norm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "texts.py").write_text(RETRIEVER, encoding="utf-8")
    entry = {"retriever": {"callable": "texts.py:rank", "returns": "text", "documents": "all"}, "grain": "turn"}
    (_, outcomes, _), _ = rank_one_segment(norm, tmp_path, "py-texts", entry)
    assert _turn_lists(tmp_path / "results") == _expected("turn")
    a = checks_summary([outcomes])["attribution"]
    items = [x for qid, text, _ in QUESTIONS for x in answer(_sessions(), text, 50)]
    assert a["items"] == len(items) and a["kinds"]["unattributed"] == sum(1 for _, s in items if not s) > 0
    assert [len(r["attributed"]) for r in outcomes.to_pylist()] == [
        len(answer(_sessions(), t, 50)) for q, t, _ in QUESTIONS]


def test_a_python_retriever_s_wrong_id_beside_its_text_is_caught(norm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pairs.py").write_text(RETRIEVER, encoding="utf-8")  # a module name of its own in this process
    entry = {"retriever": {"callable": "pairs.py:rank_pairs", "returns": "text", "documents": "all"}}
    (_, outcomes, deep), _ = rank_one_segment(norm, tmp_path, "py-pairs", entry)
    a = checks_summary([outcomes])["attribution"]
    assert a["ids_checked"] == len(QUESTIONS) * len(SESSIONS) and a["kinds"]["unattributed"] == 0
    assert [(m["question"], m["rank"]) for m in a["mismatches"]] == [(q, 1) for q, _, _ in QUESTIONS]
    # ranked by its ids, each once at its first item: the wrong id first, the session it hid never listed
    assert all(len(v) == len(SESSIONS) - 1 for v in _lists(deep).values())
