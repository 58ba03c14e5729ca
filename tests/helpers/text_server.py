"""A memory server that answers in text, as its own process: ``python -m tests.helpers.text_server [ids]
[wrong-id]`` prints ``serving on http://...`` and speaks the project's HTTP API (/reset, /ingest, /count,
/search), but a search answers ``{"results": [{"text": ...}]}``: passages of the turns it holds, never
their ids. It ranks turns by how many of the query's words each holds (ties in ingestion order), and
says each ranked turn in one of five ways in turn (:func:`answer`): its text as it is; upper-cased with
its spaces doubled; an excerpt (its words but the first and the last); the turn and the next one of its
session as one passage; and, before the turn's own text, an unrelated sentence. With ``ids`` each
result also names its session's id (no unrelated sentence then); ``wrong-id`` names another session's
id in the first result. :func:`answer` is the server's own account of where each passage came from, by
which a test knows the lists attribution must give."""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def main() -> None:
    flags = set(sys.argv[1:])
    store: dict[str, list[dict]] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            from memobench.services.reference_servers.http_server import reply

            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            held = store.setdefault(req["namespace"], [])
            out: dict = {}
            if self.path == "/reset":
                held.clear()
            elif self.path == "/ingest":
                held.append(req["session"])
            elif self.path == "/count":
                out = {"sessions": len(held)}
            elif self.path == "/search":
                out = {"results": [item for item, _ in answer(held, req["query"], int(req["k"]), "ids" in flags,
                                                              "wrong-id" in flags)]}
            else:
                reply(self, 404, b'{"error": "no such path"}')
                return
            reply(self, 200, json.dumps(out).encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"serving on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
