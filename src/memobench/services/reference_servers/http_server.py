"""The reference memory service: one of the project's reference retrievers
(bm25s, fts5-bm25, bm25-official, minilm, ...) served over the HTTP API a
system variant drives (``services.operations.api``), with sessions kept in memory per
namespace::

    memobench serve --retriever bm25s --documents all --port 8765

``--documents`` is the rule that makes a session's document from its turns,
as the retrieve stage does (``user``: the user turns, LongMemEval's rule;
``all``: every turn, LoCoMo's), so that a system variant driving this server
gets the lists of the in-process reference variant exactly. A search ranks
the namespace's sessions in the order they were ingested (ties keep that
order) and answers ``{"results": [{"id", "score"}, ...]}``, best first, at
most ``k``; a search of a namespace it does not hold is HTTP 404 (after a
restart it holds none), never an empty list that would pass for a miss. The
first line on stdout says where it listens (``--port 0``: a free port).
``--grain turn`` ranks turns instead (a turn variant's service,
docs/protocol.md#turn-level): every kept turn is a document, and a search
answers turn ids (each turn must come with its ``id``). It is
the test oracle of the system variant and a template for wrapping a memory
system of one's own. ``--mcp stdio|http`` serves the same over MCP
(:mod:`.mcp_server`)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .store import NoNamespace, Store


def reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, server_ms: float | None = None,
          content_type: str = "application/json") -> None:
    """A JSON response (or one of ``content_type``) with its headers and body in one write: end_headers
    would write the headers alone, and the body would wait on Nagle's algorithm and the client's delayed
    ACK (40 ms). ``server_ms``: the time the request took here, sent as a ``Server-Timing`` header."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    if server_ms is not None:
        handler.send_header("Server-Timing", f"app;dur={server_ms:.3f}")
    handler._headers_buffer.append(b"\r\n")
    handler.wfile.write(b"".join(handler._headers_buffer) + body)
    handler._headers_buffer = []


def handler(store: Store):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            # a response in one segment, not held back by Nagle's algorithm waiting on a delayed ACK
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _answer(self, status: int, obj, started: float | None = None) -> None:
            body = json.dumps(obj, ensure_ascii=True).encode("ascii")
            reply(self, status, body, None if started is None else (time.perf_counter() - started) * 1000.0)

        def do_GET(self):
            if self.path == "/info":
                self._answer(200, {"retriever": store.retriever, "documents": store.documents, "grain": store.grain})
            else:
                self._answer(404, {"error": f"no GET {self.path}"})

        def do_POST(self):
            started = time.perf_counter()  # from the request's body on (its headers are parsed by now)
            length = int(self.headers.get("Content-Length") or 0)
            try:
                req = json.loads(self.rfile.read(length) or b"{}")
                ns = req["namespace"]
                if self.path == "/reset":
                    out = store.reset(ns)
                elif self.path == "/ingest":
                    out = store.ingest(ns, req["session"])
                elif self.path == "/count":
                    out = store.count(ns)
                elif self.path == "/search":
                    out = store.search(ns, req["query"], req.get("k", 50))
                else:
                    self._answer(404, {"error": f"no POST {self.path}"})
                    return
            except NoNamespace as e:
                self._answer(404, {"error": str(e)})
                return
            except (ValueError, KeyError, TypeError) as e:
                self._answer(400, {"error": f"{type(e).__name__}: {e}"})
                return
            self._answer(200, out, started)

    Handler.store = store  # the server's sessions (a test empties them as a restart would)
    return Handler


def check_retriever(retriever: str) -> None:
    from ...catalog.registry import names

    if retriever not in names("reference"):
        raise SystemExit(f"memobench: unknown retriever {retriever!r} (known: {', '.join(names('reference'))})")


def serve(retriever: str, documents: str = "all", host: str = "127.0.0.1", port: int = 0,
          grain: str = "session") -> ThreadingHTTPServer:
    """A started-to-be server (call ``serve_forever``); its port is ``server_address[1]``."""
    check_retriever(retriever)
    server = ThreadingHTTPServer((host, port), handler(Store(retriever, documents, grain)))
    server.daemon_threads = True
    return server


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", required=True, help="a reference retriever (docs/baselines.md)")
    p.add_argument("--documents", choices=["user", "all"], default="all",
                   help="a session's document: its user turns (LongMemEval's rule) or all its turns (default)")
    p.add_argument("--grain", choices=["session", "turn"], default="session",
                   help="rank sessions (default) or turns: each kept turn a document, answered by its id "
                        "(for a variant with grain: turn)")
    p.add_argument("--mcp", choices=["stdio", "http"], default=None,
                   help="serve over MCP (the official SDK): over stdin/stdout, or streamable HTTP at /mcp; "
                        "default: the HTTP JSON API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="0: a free port (default 8765; 8766 with --mcp http)")


def main(a: argparse.Namespace) -> int:
    """``memobench serve``: serve until interrupted."""
    if a.mcp is not None:
        from .mcp_server import serve as serve_mcp

        check_retriever(a.retriever)
        try:
            serve_mcp(Store(a.retriever, a.documents, a.grain), a.mcp, a.host, 8766 if a.port is None else a.port)
        except KeyboardInterrupt:
            pass
        if a.mcp == "stdio":
            # the client waits for this process to end once it closes stdin: tearing down the SDK's modules took
            # a fifth of a second of every stdio connection's end, and nothing is left to write but the streams
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return 0
    port = 8765 if a.port is None else a.port
    try:
        server = serve(a.retriever, a.documents, a.host, port, a.grain)
    except OSError as e:  # most often the port is taken (another server, or one left running)
        raise SystemExit(f"memobench: serve: cannot listen on {a.host}:{port}: {e.strerror or e}; stop what "
                         f"listens there or choose another --port (0 for a free one)") from None
    print(f"memobench: serving {a.retriever} ({a.documents} turns{', ranking turns' * (a.grain == 'turn')}) on "
          f"http://{a.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
