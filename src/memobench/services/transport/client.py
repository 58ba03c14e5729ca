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
held, and the caller confirms its namespaces again (``services.job.service``)."""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from ...core.errors import excerpt
from ..operations.api import fill, fill_path, reads_json

# HTTP statuses worth another try: the server's own failures and "too many requests"
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
# HTTP statuses of credentials refused: never transient, and their answer is never shown (it may quote them)
REFUSED = {401: "Unauthorized", 403: "Forbidden"}


class ServiceError(Exception):
    """A response that cannot be used (its message is one line)."""


class Unavailable(Exception):
    """A transient failure that outlasted the retries (its message is one line); ``retry_after``: the
    wait the service last asked for (:func:`retry_after`), 0 when it asked none."""

    def __init__(self, message: str, retry_after: float = 0.0):
        super().__init__(message)
        self.retry_after = retry_after


# the longest wait a Retry-After header is honoured for: one asking more is retried after this
RETRY_AFTER_MAX_S = 60.0


def retry_after(header: str | None) -> float:
    """The seconds a ``Retry-After`` header asks to wait (RFC 9110: seconds, or an HTTP date), at most
    :data:`RETRY_AFTER_MAX_S`; 0 without one or for one that cannot be read."""
    if not header:
        return 0.0
    header = header.strip()
    seconds = float(header) if header.replace(".", "", 1).isdigit() else None
    if seconds is None:
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(header).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return 0.0
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


class StartFailed(Exception):
    """A server the client starts itself (an MCP server over stdio) that could not start: its command
    was not found, or it exited before the handshake. Never retried: starting it again fails the same
    way, and each question would wait out the retries (its message is one line)."""


@dataclass(frozen=True)
class Call:
    """One operation: its time (seconds, monotonic) from its first attempt to its answer (the waits
    between retries included: its caller waited them), how many attempts it took, and the time the
    server says its last attempt spent (its ``Server-Timing`` header's durations, summed), when it says."""

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


def shown_url(url: str) -> str:
    """A URL as any file or message shows it: its user information and query values starred
    (``http://***@host/api?api_key=***``), since either may hold a secret."""
    parts = urlsplit(url)
    netloc = "***@" + parts.netloc.rsplit("@", 1)[1] if "@" in parts.netloc else parts.netloc
    query = "&".join(k + ("=***" if eq else "") for k, eq, _ in (q.partition("=") for q in parts.query.split("&")))
    return urlunsplit((parts.scheme, netloc, parts.path, query if parts.query else "", ""))


def _short(data: bytes, n: int = 120) -> str:
    return excerpt(data.decode("utf-8", "replace"), n)


def attempts(tries: int, backoff_s: float, at_least=None):
    """1 to ``tries``, waiting before each retry: ``backoff_s``, doubled each time (exponential backoff),
    or ``at_least()`` seconds when that is longer (what the service asked: :func:`retry_after`)."""
    for attempt in range(1, tries + 1):
        if attempt > 1:
            time.sleep(max(backoff_s * 2 ** (attempt - 2), at_least() if at_least else 0.0))
        yield attempt


# the largest answer read (system.max_response_mb's default): a service that answers without end would
# otherwise fill the job's memory
MAX_RESPONSE_BYTES = 64 * 2**20


class _Deadlines:
    """One thread that cuts a request's connection at its deadline: a socket's timeout bounds each
    read only, and an answer that trickles a byte at a time would never reach it."""

    def __init__(self):
        self._cv = threading.Condition()
        self._due: dict = {}  # connection -> its request's deadline (monotonic)
        self._fired: set = set()
        self._thread = None
        self._stopped = False

    def arm(self, conn, at: float) -> None:
        with self._cv:
            self._due[conn] = at
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="http-deadlines", daemon=True)
                self._thread.start()
            self._cv.notify()

    def disarm(self, conn) -> bool:
        """True when the deadline cut the connection."""
        with self._cv:
            self._due.pop(conn, None)
            fired = conn in self._fired
            self._fired.discard(conn)
            return fired

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()

    def _run(self) -> None:
        with self._cv:
            while not self._stopped:
                now = time.monotonic()
                for conn, at in list(self._due.items()):
                    if at <= now:
                        self._fired.add(conn)
                        sock = conn.sock
                        if sock is None:  # still connecting (a name lookup no socket timeout bounds): cut it
                            self._due[conn] = now + 0.05  # as soon as its socket exists
                            continue
                        del self._due[conn]
                        try:
                            sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns at once
                        except OSError:
                            pass
                self._cv.wait(min(self._due.values()) - now if self._due else None)


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
    (:func:`.api.endpoints`); ``headers`` go with every request, ``plain``
    reads every answer as text."""

    def __init__(self, url: str, endpoints: dict, timeout_s: float = 30.0, retries: int = 3,
                 backoff_s: float = 0.1, headers: dict | None = None,
                 max_response_bytes: int = MAX_RESPONSE_BYTES, plain: bool = False):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {shown_url(url)!r}")
        self.url, self.endpoints = shown_url(url), endpoints  # the URL itself may hold a secret: kept out
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self._host, self._port, self._https = parts.hostname, parts.port, parts.scheme == "https"
        self._prefix = parts.path.rstrip("/")
        # the URL's query (an API key, say) goes with every request; its user information is Basic auth
        self._query = parts.query
        auth = {}
        if parts.username is not None or parts.password is not None:
            pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode("utf-8")
            auth = {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", **auth,
                         **(headers or {})}
        self.max_response_bytes = max_response_bytes
        self.plain = plain  # every answer read as text (a service that answers in words; config's patterns read it)
        self._deadlines = _Deadlines()
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
            deadlines, self._deadlines = self._deadlines, _Deadlines()
        deadlines.stop()
        for conn in opened:
            conn.close()

    def _body(self, resp, op: str, path: str) -> bytes:
        """The answer's body, read up to :attr:`max_response_bytes` (more is a ServiceError)."""
        limit = self.max_response_bytes
        length = resp.getheader("Content-Length")
        chunks, n = [], 0
        while not (length and length.isdigit() and int(length) > limit):
            chunk = resp.read(min(65536, limit + 1 - n))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            n += len(chunk)
            if n > limit:
                break
        raise ServiceError(f"{op} {path} answered more than {limit / 2**20:g} MiB (system.max_response_mb)")

    def once(self, op: str, values: dict, retries: int | None = None) -> tuple[object, Call]:
        """(the decoded JSON response, its :class:`Call`) of one operation."""
        e = self.endpoints[op]
        path = self._prefix + fill_path(e["path"], values)
        target = path + ("&" if "?" in path else "?") + self._query if self._query else path  # path: messages
        body = json.dumps(fill(e.get("body", {}), values), ensure_ascii=True).encode("ascii")
        tries = (self.retries if retries is None else retries) + 1
        why, asked = "", [0.0]  # asked: the wait the last answer's Retry-After asks for
        first = time.monotonic()
        for attempt in attempts(tries, self.backoff_s, lambda: asked[0]):
            asked[0] = 0.0
            started = time.monotonic()
            conn, deadlines = self._connection(), self._deadlines
            # timeout_s bounds the whole request (connecting, sending, the headers, the body)
            deadlines.arm(conn, started + self.timeout_s)
            try:
                conn.request("POST", target, body=body, headers=self._headers)
                resp = conn.getresponse()
                data = self._body(resp, op, path)
                if deadlines.disarm(conn):
                    raise TimeoutError  # cut at its deadline: what was read may be a part
            except http.client.InvalidURL:
                deadlines.disarm(conn)
                # a path no request can carry (a space, a control character): the config's, never transient;
                # named by its path, since the target may hold the URL's query (a key)
                raise ServiceError(f"{op} {path!r}: not a path an HTTP request can carry (check "
                                   f"endpoints.{op}.path)") from None
            except (OSError, ValueError, http.client.HTTPException) as exc:
                cut = deadlines.disarm(conn)
                self._drop()
                with self._lock:  # threads ingesting at once read it to tell a lost connection
                    self.breaks += 1
                kind = "timed out" if cut or isinstance(exc, TimeoutError) else type(exc).__name__
                why = f"{kind} after {time.monotonic() - started:.3g} s" if kind == "timed out" else \
                    f"{kind}: {exc}" if str(exc) else kind
                continue
            except ServiceError:
                deadlines.disarm(conn)
                self._drop()  # the rest of the answer is unread
                raise
            seconds = time.monotonic() - first
            if resp.status in TRANSIENT_STATUS:
                why = f"HTTP {resp.status} {_short(data, 80)}".rstrip()
                asked[0] = retry_after(resp.getheader("Retry-After"))
                continue
            if resp.status in REFUSED:
                # its answer is left out: it may quote the credentials (a header, a key)
                raise ServiceError(f"{op} {path} answered HTTP {resp.status} {REFUSED[resp.status]}: the service refused the "
                                   f"credentials (system.headers, or the url's user or key)")
            if resp.status >= 300:
                raise ServiceError(f"{op} {path} answered HTTP {resp.status}: {_short(data)}")
            try:
                obj = data.decode("utf-8", "replace") if self.plain else json.loads(data)
            except ValueError:
                if reads_json(op, e):
                    raise ServiceError(f"{op} {path} answered a body that is not JSON: {_short(data)!r}") from None
                # an answer read only for an id a server assigns (ingest's id_pattern) may be text ("OK", an
                # empty 204: "")
                obj = data.decode("utf-8", "replace")
            return obj, Call(seconds, attempt, server_seconds(resp.getheader("Server-Timing")))
        raise Unavailable(f"{op} {path} failed {tries} time(s), last: {why}", asked[0])
