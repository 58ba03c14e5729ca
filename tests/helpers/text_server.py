"""A memory server that answers in text: ``python -m tests.helpers.library_http_server TextMemory`` (its own
process; memory_libraries.TextMemory, TextIdsMemory, WrongIdMemory) speaks the project's HTTP API, but a
search answers ``{"results": [{"text": ...}]}``: passages of the turns it holds, never their ids. It ranks
turns by how many of the query's words each holds (ties in ingestion order), and
says each ranked turn in one of five ways in turn (:func:`answer`): its text as it is; upper-cased with
its spaces doubled; an excerpt (its words but the first and the last); the turn and the next one of its
session as one passage; and, before the turn's own text, an unrelated sentence. With ``ids`` each
result also names its session's id (no unrelated sentence then); with ``wrong_id`` the first result names
another session's id. :func:`answer` is the server's own account of where each passage came from, by
which a test knows the lists attribution must give."""

from __future__ import annotations

import re

UNRELATED = "Unrelated note {n}: the zebra quartet rehearsed a waltz in the empty observatory"


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def answer(sessions: list[dict], query: str, k: int, ids: bool = False, wrong_id: bool = False) -> list[tuple]:
    """[(the result, the (session index, turn index) pairs its text came from)], best first (``sessions``:
    as ingested, ``{id, turns: [{content}]}``)."""
    q = _words(query)
    turns = [(s, t) for s in range(len(sessions)) for t in range(len(sessions[s]["turns"]))]
    scored = [(len(q & _words(sessions[s]["turns"][t]["content"])), i) for i, (s, t) in enumerate(turns)]
    ranked = [turns[i] for n, i in sorted(scored, key=lambda x: (-x[0], x[1])) if n > 0][:k]
    out: list[tuple] = []
    for r, (s, t) in enumerate(ranked):
        text = sessions[s]["turns"][t]["content"]
        words = text.split(" ")
        way = r % 5
        sources = [(s, t)]
        if way == 1:
            text = "  ".join(words).upper()
        elif way == 2 and len(words) >= 6:
            text = " ".join(words[1:-1])
        elif way == 3 and t + 1 < len(sessions[s]["turns"]):
            text = text + "\n" + sessions[s]["turns"][t + 1]["content"]
            sources.append((s, t + 1))
        elif way == 4 and not ids:
            out.append(({"text": UNRELATED.format(n=r)}, []))
        item = {"text": text}
        if ids:
            item["id"] = sessions[s]["id"]
            if wrong_id and not out:
                item["id"] = next(x["id"] for x in sessions if x["id"] != sessions[s]["id"])
        out.append((item, sources))
    return out
