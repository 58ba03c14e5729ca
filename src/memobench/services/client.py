"""The client of a memory service over HTTP: one call of an operation
(:mod:`.api`), timed on the monotonic clock, with a timeout, and retried
with exponential backoff when the failure is transient (a refused or reset
connection, a timeout, HTTP 5xx or 429). A response that cannot be used
(HTTP 4xx, a body that is not JSON) is :class:`ServiceError` at once; a
transient failure that outlasts the retries is :class:`Unavailable`. Each
thread keeps its own connection (HTTP/1.1 keep-alive). A server that says
how long it worked (a ``Server-Timing`` header) has that time recorded beside
the client's, so the time spent outside the server is known. ``breaks``
counts the connections lost: a server that restarted may have lost what it
held, and the caller confirms its namespaces again (``retrieval.system``)."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..core.errors import excerpt
from .api import fill, fill_path

# HTTP statuses worth another try: the server's own failures and "too many requests"
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class ServiceError(Exception):
    """A response that cannot be used (its message is one line)."""


class Unavailable(Exception):
    """A transient failure that outlasted the retries (its message is one line)."""


class StartFailed(Exception):
    """A server the client starts itself (an MCP server over stdio) that could not start: its command
    was not found, or it exited before the handshake. Never retried: starting it again fails the same
    way, and each question would wait out the retries (its message is one line)."""


@dataclass(frozen=True)
class Call:
    """One operation's last attempt: its time (seconds, monotonic), how many attempts it took, and the
    time the server says it spent (its ``Server-Timing`` header's durations, summed), when it says."""

    seconds: float
    attempts: int
    server_seconds: float | None = None


_DURATION = re.compile(r"(?:^|;)\s*dur\s*=\s*\"?([0-9.]+)")


def server_seconds(header: str | None) -> float | None:
    """The durations of a ``Server-Timing`` header (W3C: ``app;dur=0.42, db;dur=1.2``, milliseconds), summed,
    in seconds; None without one."""
    if not header:
        return None
    found = [float(m.group(1)) for part in header.split(",") for m in [_DURATION.search(part)] if m]
    return sum(found) / 1000.0 if found else None


def _short(data: bytes, n: int = 120) -> str:
    return excerpt(data.decode("utf-8", "replace"), n)


def attempts(tries: int, backoff_s: float):
    """1 to ``tries``, waiting before each retry: ``backoff_s``, doubled each time (exponential backoff)."""
    for attempt in range(1, tries + 1):
        if attempt > 1:
            time.sleep(backoff_s * 2 ** (attempt - 2))
        yield attempt


class _HTTPNoDelay(http.client.HTTPConnection):
    """A connection whose requests go out in one segment, not held back waiting on the server's
    delayed ACK (Nagle's algorithm); a reconnection after the server closed the last one too."""

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _HTTPSNoDelay(http.client.HTTPSConnection):
    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class HttpClient:
    """Calls the operations of the service at ``url`` (``http://host:port``,
    optionally with a path prefix) whose endpoints are ``endpoints``
    (:func:`.api.endpoints`)."""

    def __init__(self, url: str, endpoints: dict, timeout_s: float = 30.0, retries: int = 3,
                 backoff_s: float = 0.1, headers: dict | None = None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url, self.endpoints = url, endpoints
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self._host, self._port, self._https = parts.hostname, parts.port, parts.scheme == "https"
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        self._local = threading.local()  # one kept-alive connection per calling thread
        self._opened: set = set()  # all of them, for close()
        self._lock = threading.Lock()
        self.breaks = 0  # connections lost (a reset, a refusal, a timeout)

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = _HTTPSNoDelay if self._https else _HTTPNoDelay
            conn = self._local.conn = cls(self._host, self._port, timeout=self.timeout_s)
            with self._lock:
                self._opened.add(conn)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._lock:
                self._opened.discard(conn)

    def close(self) -> None:
        """Closes every thread's connection: worker threads end without closing theirs, and a
        connection left open holds one of the service's request handlers until it is collected."""
        with self._lock:
            opened, self._opened = self._opened, set()
            self._local = threading.local()  # a later call opens (and registers) a new one
        for conn in opened:
            conn.close()

    def once(self, op: str, values: dict, retries: int | None = None) -> tuple[object, Call]:
        """(the decoded JSON response, its :class:`Call`) of one operation."""
        e = self.endpoints[op]
        path = self._prefix + fill_path(e["path"], values)
        body = json.dumps(fill(e.get("body", {}), values), ensure_ascii=True).encode("ascii")
        tries = (self.retries if retries is None else retries) + 1
        why = ""
        for attempt in attempts(tries, self.backoff_s):
            started = time.monotonic()
            try:
                conn = self._connection()
                conn.request("POST", path, body=body, headers=self._headers)
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                self.breaks += 1
                kind = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else type(exc).__name__
                why = f"{kind} after {time.monotonic() - started:.3g} s" if kind == "timed out" else \
                    f"{kind}: {exc}" if str(exc) else kind
                continue
            seconds = time.monotonic() - started
            if resp.status in TRANSIENT_STATUS:
                why = f"HTTP {resp.status} {_short(data, 80)}".rstrip()
                continue
            if resp.status >= 300:
                raise ServiceError(f"{op} {path} answered HTTP {resp.status}: {_short(data)}")
            try:
                obj = json.loads(data)
            except ValueError:
                raise ServiceError(f"{op} {path} answered a body that is not JSON: {_short(data)!r}") from None
            return obj, Call(seconds, attempt, server_seconds(resp.getheader("Server-Timing")))
        raise Unavailable(f"{op} {path} failed {tries} time(s), last: {why}")
