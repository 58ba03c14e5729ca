"""The HTTP client of a memory service (services/transport/client.py) against a real
keep-alive server on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memobench.services.reference_servers.http_server import reply
from memobench.services.transport.client import HttpClient


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


class _Trickle(BaseHTTPRequestHandler):
    """Headers at once, then the body one byte at a time (``trickle`` seconds apart), or a body
    bigger than asked (``size`` bytes, with or without its length)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        s = self.server
        try:
            if s.trickle:
                self.send_response(200)
                self.send_header("Content-Length", "40")
                self.end_headers()
                for _ in range(40):  # bounded: 40 bytes, at most 40 * trickle seconds
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(s.trickle)
                return
            self.send_response(200)
            if s.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(s.size))
            self.end_headers()
            block = b" " * 65536
            for start in range(0, s.size, len(block)):
                part = block[:min(len(block), s.size - start)]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if s.chunked else part)
            if s.chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client gave up on it


def _serve(handler, **attrs):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    for k, v in attrs.items():
        setattr(server, k, v)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return server


def test_timeout_s_bounds_the_whole_request_not_each_read():
    import pytest

    from memobench.services.transport.client import Unavailable

    server = _serve(_Trickle, trickle=0.1, size=0, chunked=False)
    client = HttpClient(f"http://127.0.0.1:{server.server_address[1]}", {"search": {"path": "/s", "body": {}}},
                        timeout_s=0.5, retries=0)
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable) as e:
            client.once("search", {})
        assert time.monotonic() - started < 2.0  # a byte every 0.1 s: each read is quick, the whole is 4 s
        assert "timed out after 0.5" in str(e.value), str(e.value)
    finally:
        client.close()
        server.shutdown()
        server.server_close()


def test_an_answer_over_the_size_limit_is_one_line():
    import pytest

    from memobench.services.transport.client import ServiceError

    for chunked in (False, True):
        server = _serve(_Trickle, trickle=0, size=3 * 2**20, chunked=chunked)
        client = HttpClient(f"http://127.0.0.1:{server.server_address[1]}", {"search": {"path": "/s", "body": {}}},
                            retries=0, max_response_bytes=2**20)
        try:
            with pytest.raises(ServiceError) as e:
                client.once("search", {})
            assert str(e.value) == "search /s answered more than 1 MiB (system.max_response_mb)", str(e.value)
        finally:
            client.close()
            server.shutdown()
            server.server_close()


class _Busy(BaseHTTPRequestHandler):
    """HTTP 429 with ``server.retry_after`` for the first ``server.busy`` requests, then ``{}``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        s = self.server
        with s.lock:
            s.times.append(time.monotonic())
            busy = len(s.times) <= s.busy
        if busy:
            self.send_response(getattr(s, "status", 429))
            self.send_header("Retry-After", s.retry_after())
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            reply(self, 200, b"{}")


def test_retry_after_is_honoured_in_seconds_or_as_a_date_within_a_bound(monkeypatch):
    from email.utils import formatdate

    from memobench.services.transport import client as client_module

    from concurrent.futures import ThreadPoolExecutor

    def case(header, busy, least, most):
        server = _serve(_Busy, busy=busy, retry_after=header, times=[], lock=threading.Lock())
        client = HttpClient(f"http://127.0.0.1:{server.server_address[1]}", {"search": {"path": "/s", "body": {}}},
                            retries=3, backoff_s=0.01)
        try:
            answer, call = client.once("search", {})
            assert answer == {} and call.attempts == busy + 1
            waited = server.times[-1] - server.times[0]
            assert least <= waited <= most, (header(), waited)
        finally:
            client.close()
            server.shutdown()
            server.server_close()

    # the two under the default bound wait their seconds side by side: each has its own server and client
    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(case, lambda: "1", 2, 1.9, 4.0),
                     pool.submit(case, lambda: formatdate(time.time() + 2, usegmt=True), 1, 0.9, 3.5)]:
            done.result()
    monkeypatch.setattr(client_module, "RETRY_AFTER_MAX_S", 0.5)
    case(lambda: "3600", 1, 0.4, 2.0)  # past the bound: the bound (0.5 s here)


def test_a_retried_call_is_timed_from_its_first_attempt_to_its_answer():
    server = _serve(_Busy, busy=3, status=503, retry_after=lambda: "0", times=[], lock=threading.Lock())
    client = HttpClient(f"http://127.0.0.1:{server.server_address[1]}", {"search": {"path": "/s", "body": {}}},
                        retries=3, backoff_s=0.05)
    try:
        answer, call = client.once("search", {})
        assert answer == {} and call.attempts == 4
        assert call.seconds >= 0.35  # the waits between tries (0.05, 0.1, 0.2 s) are the search's time too
    finally:
        client.close()
        server.shutdown()
        server.server_close()


def test_an_mcp_failure_naming_the_url_stars_its_secrets():
    import pytest

    pytest.importorskip("mcp")
    from memobench.services.transport.mcp import McpClient

    client = McpClient({"reset": {"tool": "reset"}}, url="http://alice:pw@127.0.0.1:9/mcp?api_key=k3y")
    try:
        said = client._shown("Client error '401' for url 'http://alice:pw@127.0.0.1:9/mcp?api_key=k3y'")
        assert said == "Client error '401' for url 'http://***@127.0.0.1:9/mcp?api_key=***'"
    finally:
        client.close()


def test_a_path_no_request_can_carry_is_one_line_at_once_without_the_query():
    """A configured path with a space is the config's mistake, not a transient failure: no retry, and the
    line names the path, not the target that carries the URL's query (a key)."""
    from memobench.services.transport.client import HttpClient, ServiceError

    client = HttpClient("http://127.0.0.1:9?api_key=S3CRET", {"search": {"path": "/a b", "body": {}}},
                        retries=3, backoff_s=5)
    started = time.monotonic()
    try:
        with pytest.raises(ServiceError) as e:
            client.once("search", {})
    finally:
        client.close()  # its deadline thread with it: a later test's process may need to fork
    assert time.monotonic() - started < 2  # no backoff waited
    assert str(e.value) == "search '/a b': not a path an HTTP request can carry (check endpoints.search.path)"
    assert client.breaks == 0


def test_a_deadline_that_passes_before_the_socket_exists_cuts_it_once_it_does():
    """A request whose deadline passed while it was still connecting (a name lookup no socket timeout
    bounds) is cut as soon as its socket exists, not left to read without end."""
    import http.client
    import socket

    from memobench.services.transport.client import _Deadlines

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        conn = http.client.HTTPConnection("127.0.0.1", server.getsockname()[1], timeout=30)
        deadlines = _Deadlines()
        try:
            deadlines.arm(conn, time.monotonic() - 1)  # due already, and no socket yet
            time.sleep(0.1)
            conn.connect()
            peer, _ = server.accept()
            started = time.monotonic()
            assert conn.sock.recv(1) == b""  # cut: a blocked read returns at once
            assert time.monotonic() - started < 5 and deadlines.disarm(conn)
            peer.close()
        finally:
            deadlines.stop()
            conn.close()
