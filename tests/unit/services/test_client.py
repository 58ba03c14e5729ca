"""The HTTP client of a memory service (services/client.py) against a real
keep-alive server on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from memobench.retrieval.reference.server import reply
from memobench.services.client import HttpClient


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # a connection stays open between requests

    def log_message(self, *args):
        pass

    def setup(self):
        with self.server.lock:
            self.server.handlers.append(threading.current_thread())
        super().setup()

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        reply(self, 200, body)


def test_close_closes_the_connection_of_every_thread_that_called():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads, server.lock, server.handlers = True, threading.Lock(), []
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    client = HttpClient(f"http://127.0.0.1:{server.server_address[1]}",
                        {"search": {"path": "/search", "body": {"q": "{n}"}}})
    done = threading.Event()
    try:
        answers = []

        def call(n):  # a worker thread that lives on after its request, as a pool's do
            answers.append(client.once("search", {"n": n})[0])
            done.wait(60)

        callers = [threading.Thread(target=call, args=(n,)) for n in range(3)]
        for t in callers:
            t.start()
        while len(answers) < 3 and all(t.is_alive() for t in callers):
            time.sleep(0.01)
        answers.append(client.once("search", {"n": 3})[0])  # and this thread's
        assert sorted(a["q"] for a in answers) == [0, 1, 2, 3]
        assert len(server.handlers) == 4  # a connection each, each holding a handler while open
        client.close()
        deadline = time.monotonic() + 3
        for h in server.handlers:
            h.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not any(h.is_alive() for h in server.handlers)
        # a call after close (from a thread that called before) opens a connection the next close closes
        assert client.once("search", {"n": 9})[0] == {"q": 9} and len(server.handlers) == 5
        client.close()
        server.handlers[-1].join(timeout=3)
        assert not server.handlers[-1].is_alive()
    finally:
        done.set()
        server.shutdown()
        server.server_close()
