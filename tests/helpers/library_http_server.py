"""A memory library of tests/helpers/memory_libraries.py served over the project's HTTP API, as its own
process: ``python -m tests.helpers.library_http_server OkapiMemory`` prints ``serving on http://...``
and answers /reset, /ingest, /search ({"results": [{"id", "score"}]}) and /count until killed. One real
server per ranking: rank_bm25's BM25Okapi (OkapiMemory), or ties broken by a stamp drawn at write time
(StampedMemory), whose lists move between fresh namespaces; or passages of text, with or without ids
(TextMemory, TextIdsMemory, WrongIdMemory: tests/helpers/text_server.py)."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from memobench.services.reference_servers.http_server import reply
from tests.helpers import memory_libraries


def main() -> None:
    memory = getattr(memory_libraries, sys.argv[1])()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            ns, out = req["namespace"], {}
            if self.path == "/reset":
                memory.reset(ns)
            elif self.path == "/ingest":
                memory.ingest(ns, req["session"])
            elif self.path == "/count":
                out = {"sessions": memory.count(ns)}
            elif self.path == "/search":
                found = memory.search(ns, req["query"], int(req["k"]))
                # a result as the library gives it where it is one already (a passage, with or without an id)
                out = {"results": [x if isinstance(x, dict) else {"id": x[0], "score": x[1]} if isinstance(x, tuple)
                                   else {"id": x} for x in found]}
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
