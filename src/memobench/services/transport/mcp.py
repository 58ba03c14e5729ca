"""The client of a memory service over MCP, through the official MCP Python
SDK (``mcp``) with its real handshake: a server started from a command and
spoken to over its stdin and stdout (``stdio``), or reached at a
streamable-HTTP URL. Each operation is a tool call (:data:`.api.DEFAULT_TOOLS`),
with the same promises as :class:`.client.HttpClient`: one call timed on the
monotonic clock, a timeout, retries with exponential backoff for a transient
failure (the connection closed, a server process that died, a timeout, a
connection refused), :class:`.client.ServiceError` at once for an answer
that cannot be used (a tool error, a protocol error, a result that is not
JSON), :class:`.client.Unavailable` when the retries run out.

A tool's answer is its structured content, or else (none sent, or
``answer="text"``: a server whose tools return JSON as a string, which
the SDK's servers wrap as ``{"result": text}``) its text blocks, joined and
parsed as JSON; with ``answer="plain"`` its text blocks joined, as a string
(a server that answers in words, read by config's patterns). ``headers``
go with every request to a streamable-HTTP server. A server may say how long it worked in the result's
``_meta`` under ``server-timing`` (the HTTP ``Server-Timing`` syntax), as the
project's reference server does.

The SDK is asynchronous; this client runs its own event loop in a thread, so
the system variant's worker threads call it as they call the HTTP client
(requests from several threads are in flight at once on one connection). A
lost connection is opened again (a stdio server is started again: a new
process, which holds nothing unless it keeps its own store) and counted in
``breaks``."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import json
import logging
import os
import shlex
import sys
import threading
import time

from ...core.errors import excerpt
from ..operations.api import fill, reads_json
from .client import REFUSED, Call, ServiceError, StartFailed, Unavailable, attempts, server_seconds, shown_url

META_TIMING = "server-timing"  # the result ``_meta`` key a server's own time is read from
# Opening a connection (a stdio server's process start and the handshake) may take this long even when
# timeout_s, a request's limit, is shorter: a server that loads its index or a model starts slower
# than it answers, and a start cut short by a search's limit would never be usable.
START_TIMEOUT_S = 60.0


def sdk_missing() -> bool:
    """True when the MCP Python SDK (2.x: ``mcp.Client``) cannot be imported."""
    import importlib

    try:
        mcp = importlib.import_module("mcp")
        importlib.import_module("mcp_types")
    except ImportError:
        return True
    return not hasattr(mcp, "Client")


def _sdk():
    import mcp
    import mcp_types

    _quiet_sdk()
    return mcp, mcp_types


class _SdkLines(logging.Handler):
    """The SDK's log records as one line each: a stdio server's stdout line that is not JSON-RPC (a
    banner before the handshake) is logged by the SDK with a pydantic traceback, then ignored; a
    user reads that it was ignored, and what it said, not the traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        errors = getattr(record.exc_info[1] if record.exc_info else None, "errors", None)
        if callable(errors):
            try:
                text += f": {excerpt(str(errors()[0].get('input', '')))}"
            except Exception:  # the record is said without it
                pass
        print(f"memobench: the MCP SDK says: {text} (ignored)", file=sys.stderr, flush=True)


def _quiet_sdk() -> None:
    """The SDK's warnings and errors through :class:`_SdkLines` (once), not its own handlers."""
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, _SdkLines) for h in sdk.handlers):
        handler = _SdkLines(level=logging.WARNING)
        sdk.addHandler(handler)
        sdk.propagate = False


# the stdio server process the SDK is starting, told to the connection that asked for it (_hook_spawn)
_SPAWNED: contextvars.ContextVar = contextvars.ContextVar("memobench_mcp_spawned", default=None)
_hook_lock = threading.Lock()
_hooked = False
# held while a stdio server is being started and until it is known, and while orphans are ended: a server
# starting in another thread is never taken for what a stopped one left
_spawn_lock = threading.Lock()
_running: set[int] = set()  # the pids of the stdio servers of this process that run now
_started: set[int] = set()  # every stdio server's pid this process started


def _hook_spawn() -> None:
    """The SDK's stdio transport keeps its server process to itself; its exit status and pid are asked for
    here, through the function that starts it (where this SDK has it; elsewhere both stay unknown)."""
    global _hooked
    with _hook_lock:
        if _hooked:
            return
        _hooked = True
        from mcp.client import stdio

        original = getattr(stdio, "_create_platform_compatible_process", None)
        if original is None:
            return

        async def spawn(*args, **kwargs):
            with _spawn_lock:  # a moment: the process started and its pid known (held in this loop's thread only)
                process = await original(*args, **kwargs)
                told = _SPAWNED.get()
                if told is not None:
                    told(process)
            return process

        stdio._create_platform_compatible_process = spawn


class _Server:
    """One stdio server process: its pid and exit status (where the SDK tells them), and the last lines of
    its stderr, which pass on to this process's stderr as they come."""

    TAIL = 8

    def __init__(self):
        self.process = None
        self.tail: collections.deque = collections.deque(maxlen=self.TAIL)
        self.tree: list[int] = []  # its descendants when its connection ended
        read, write = os.pipe()
        self.errlog = os.fdopen(write, "w")
        self._ended = threading.Event()
        threading.Thread(target=self._tee, args=(read,), name="mcp-server-stderr", daemon=True).start()

    def spawned(self, process) -> None:
        self.process = process
        _running.add(process.pid)
        _started.add(process.pid)

    def _tee(self, fd: int) -> None:
        from ...core.secrets import mask

        with open(fd, "rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.tail.append(line)
                try:
                    # starred: a server that logs its configuration, a key included, would print it on the console
                    print(mask(line), file=sys.stderr, flush=True)
                except (OSError, ValueError):
                    pass  # a closed stderr: the tail is still kept
        self._ended.set()

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def exited(self, wait_s: float = 2.0) -> str:
        """How the process ended, in words (its exit status and the end of its stderr), waiting up to
        ``wait_s`` for them: a connection that closed is a process that exited, or is exiting."""
        deadline = time.monotonic() + wait_s
        while self.process is not None and self.process.returncode is None and time.monotonic() < deadline:
            time.sleep(0.02)
        self._ended.wait(max(0.0, min(1.0, deadline - time.monotonic())))
        code = None if self.process is None else self.process.returncode
        said = ("the server process exited" if code is None else f"the server process exited with status {code}"
                if code >= 0 else f"the server process was ended by signal {-code}")
        lines = [line.strip() for line in self.tail if line.strip()]
        return said + (f" (its stderr ended: {excerpt(' | '.join(lines[-3:]))!r})" if lines else "")


@contextlib.asynccontextmanager
async def _stdio(params, server: _Server):
    """The SDK's stdio transport of ``params``, its process told to ``server``; once the SDK has stopped it
    (its process group), what is left of its descendants is ended too (processes.py)."""
    from mcp.client.stdio import stdio_client

    from .processes import descendants, end

    _hook_spawn()
    _SPAWNED.set(server.spawned)  # this task's context: the SDK starts the process in it
    try:
        async with stdio_client(params, errlog=server.errlog) as streams:
            _SPAWNED.set(None)
            server.errlog.close()  # the process holds its own copy: its end is the tee's end of file
            try:
                yield streams
            finally:
                if server.pid is not None:
                    server.tree = descendants(server.pid)  # before the SDK ends its group
    finally:
        _SPAWNED.set(None)
        if not server.errlog.closed:
            server.errlog.close()
        if server.pid is not None:
            _running.discard(server.pid)
            if server.tree:
                await asyncio.to_thread(end, server.tree)


class McpClient:
    """Calls the operations (``tools``: :func:`.api.tools`) of the MCP server
    started by ``command`` (a list: the program and its arguments) or
    reached at ``url``."""

    def __init__(self, tools: dict, command: list[str] | None = None, url: str | None = None,
                 env: dict | None = None, timeout_s: float = 30.0, retries: int = 3, backoff_s: float = 0.1,
                 answer: str = "structured", headers: dict | None = None):
        if (command is None) == (url is None):
            raise ValueError("an MCP service is a command or a url, one of them")
        self.tools, self.command, self.url, self.env, self.answer = tools, command, url, env, answer
        self.headers = headers or None
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.start_timeout_s = max(timeout_s, START_TIMEOUT_S)
        self.breaks = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()  # one thread opens or replaces the connection
        self._conn = None  # (the SDK's client, the event that ends it, the task that holds it)
        self._generation = 0
        self._opened = False  # a connection was once opened: a later failure to open is transient
        self._start_failed = None  # the StartFailed of a server that could not start, told to every caller
        self._refused = None  # HTTP 401 or 403, the last a streamable-HTTP server answered (the SDK hides it)
        self.server_info = None  # {name, version} of the server's initialize answer (serverInfo), once connected
        self._server = None  # a stdio server being started: its process (_Server)
        self._servers: dict[int, _Server] = {}  # generation -> its stdio server
        if command is not None:
            from .processes import adopt_orphans

            adopt_orphans()  # a detached grandchild whose parent exits becomes this process's to end

    # ---- the connection, held open by one task of the loop

    def _target(self):
        mcp, _ = _sdk()
        if self.url is not None:
            return _over_http(self.url, self.headers, self._answered)
        # the SDK passes a server only a safe part of the environment (HOME, PATH, ...); env adds to it
        # (its $NAMEs already read from this process's environment: system.client_of)
        env = None if self.env is None else {**mcp.client.stdio.get_default_environment(), **self.env}
        self._server = _Server()
        return _stdio(mcp.StdioServerParameters(command=self.command[0], args=list(self.command[1:]), env=env),
                      self._server)

    async def _open(self):
        mcp, _ = _sdk()
        ready = self._loop.create_future()
        stop = asyncio.Event()

        async def hold():
            try:
                # cache=None: every call reaches the server (a cached answer would be timed as a search)
                async with mcp.Client(self._target(), read_timeout_seconds=self.timeout_s, cache=None) as client:
                    ready.set_result(client)
                    await stop.wait()
            except BaseException as e:  # noqa: BLE001 - reported to the caller that waits on ready
                if not ready.done():
                    ready.set_exception(e)

        task = self._loop.create_task(hold())
        try:
            client = await asyncio.wait_for(ready, self.start_timeout_s)
        except BaseException:
            task.cancel()  # a server still starting is stopped, not left running
            await asyncio.wait({task}, timeout=5.0)
            raise
        return client, stop, task

    async def _shut(self, conn) -> None:
        _, stop, task = conn
        stop.set()
        try:
            await asyncio.wait_for(task, 5.0)
        except BaseException:  # noqa: BLE001 - a connection already broken ends as it can
            task.cancel()

    def _run(self, coro, timeout: float):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _connection(self):
        with self._lock:
            if self._start_failed is not None:
                raise self._start_failed
            if self._conn is None:
                try:
                    self._conn = self._run(self._open(), self.start_timeout_s + 10.0)
                except Exception as e:  # noqa: BLE001 - a start failure is told apart from the others here
                    if self.command is not None and not self._opened and not isinstance(e, TimeoutError):
                        why = _start_failure(e)
                        if self._server is not None and self._server.pid is not None:
                            why += f"; {self._server.exited(wait_s=1.0)}"
                        self._start_failed = StartFailed(f"{shlex.join(self.command)}: {why}")
                        raise self._start_failed from None
                    raise
                self._opened = True
                info = getattr(self._conn[0], "server_info", None)
                if info is not None:  # what the server says it is (services/identity.py)
                    self.server_info = {"name": str(info.name), "version": str(info.version)}
                if self._server is not None:
                    # the last few connections' servers: a thread may ask how an earlier one ended
                    self._servers = {g: x for g, x in self._servers.items() if g > self._generation - 4}
                    self._servers[self._generation] = self._server
            return self._conn[0], self._generation

    def start(self) -> float | None:
        """Open the connection now (a stdio server's process start and the handshake): its seconds on the
        monotonic clock, told apart from the first request's (0.0 when it is already open; None when it
        failed for a reason worth another try, which the first request then makes, with its retries)."""
        started = time.monotonic()
        with self._lock:
            was_open = self._conn is not None
        try:
            self._connection()
        except StartFailed:
            raise
        except Exception:  # noqa: BLE001 - transient: once() tries again and says why
            return None
        return 0.0 if was_open else time.monotonic() - started

    def peak_memory(self) -> int | None:
        """A stdio server's peak resident memory in bytes (its process and descendants: .processes), while
        it runs; None over HTTP or where the system does not say."""
        from .processes import peak_memory, started_by_us

        if self.command is None or self._conn is None:
            return None
        server = self._servers.get(self._generation)
        pids = [server.pid] if server is not None and server.pid is not None else started_by_us(self.command, self.env)
        return peak_memory(pids[0]) if len(pids) == 1 else None

    def _lost(self, generation: int) -> None:
        """The connection of ``generation`` is broken: closed here once, whichever thread saw it first."""
        with self._lock:
            if generation != self._generation:
                return
            self._generation += 1
            self.breaks += 1
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                self._run(self._shut(conn), 10.0)
            except Exception:  # noqa: BLE001 - what is left of it is dropped
                pass

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        try:
            if conn is not None:
                self._run(self._shut(conn), 10.0)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5.0)
            if not self._thread.is_alive():
                self._loop.close()
            if self.command is not None:
                from .processes import end, orphans

                with _spawn_lock:  # no server of this process runs: what a stopped one left goes too
                    left = [] if _running else orphans(_started)
                end(left)

    async def _answered(self, response) -> None:
        """Every HTTP answer of a streamable-HTTP server: a refusal of the credentials is kept, since the
        SDK turns it into an internal error without its status."""
        if response.status_code in REFUSED:
            self._refused = response.status_code

    def _refusal(self, op: str, tool: str) -> ServiceError | None:
        """The one line of a server that refused the credentials (never retried: each try is refused
        alike); its answer is not shown, since it may quote them."""
        if self._refused is None:
            return None
        return ServiceError(f"{op} tool {tool!r}: the server at {shown_url(self.url)} answered HTTP {self._refused} "
                            f"{REFUSED[self._refused]}: it refused the credentials (system.headers, or the url's "
                            f"user or key)")

    def _exited(self, generation: int) -> str | None:
        """How the stdio server of ``generation`` ended (_Server.exited), or None over HTTP or when unknown."""
        server = self._servers.get(generation)
        return None if server is None or server.pid is None else server.exited()

    def _shown(self, text: str) -> str:
        """``text`` with the server's URL starred (the SDK's messages name it, and it may hold a secret)."""
        return text.replace(self.url, shown_url(self.url)) if self.url else text

    # ---- one operation

    def once(self, op: str, values: dict, retries: int | None = None) -> tuple[object, Call]:
        """(the tool's answer as JSON, its :class:`.client.Call`) of one operation."""
        _, mcp_types = _sdk()
        from mcp.shared.exceptions import MCPError

        tool = self.tools[op]["tool"]
        arguments = fill(self.tools[op].get("arguments", {}), values)
        tries = (self.retries if retries is None else retries) + 1
        why, first = "", time.monotonic()
        exited = ""  # a stdio server that exited during this call: the cause of what a new one answers
        for attempt in attempts(tries, self.backoff_s):
            started = time.monotonic()
            generation = self._generation
            try:
                client, generation = self._connection()
                result = self._run(client.call_tool(tool, arguments, read_timeout_seconds=self.timeout_s),
                                   self.timeout_s + 5.0)
            except StartFailed:
                raise
            except MCPError as e:
                refused = self._refusal(op, tool)
                if refused is not None:
                    raise refused from None
                code = e.error.code
                if code == mcp_types.REQUEST_TIMEOUT:
                    why = f"timed out after {time.monotonic() - started:.3g} s"
                    continue
                if code == mcp_types.CONNECTION_CLOSED:
                    self._lost(generation)
                    why = self._exited(generation) or "the connection closed (the server stopped)"
                    exited = f" (after {why}; a new server process was started and answered this)" \
                        if self.command is not None else ""
                    continue
                raise ServiceError(f"{op} tool {tool!r} answered error {code}: {excerpt(e.error.message)}"
                                   f"{exited}") from None
            except Exception as e:  # noqa: BLE001 - a server that cannot be reached or started, or a transport failure
                self._lost(generation)
                refused = self._refusal(op, tool)
                if refused is not None:
                    raise refused from None
                e = _leaf(e)
                why = f"{type(e).__name__}: {excerpt(self._shown(str(e)))}" if str(e) else type(e).__name__
                continue
            seconds = time.monotonic() - first  # from the first attempt: the retries' waits are the call's time
            text = "".join(getattr(block, "text", "") for block in result.content or [])
            if result.is_error:
                raise ServiceError(f"{op} tool {tool!r} answered an error: {excerpt(text) or '(no text)'}{exited}")
            if self.answer == "plain":
                answer = text  # a server that answers in words: config's patterns read it
            elif result.structured_content is not None and self.answer == "structured":
                answer = result.structured_content
            else:
                try:
                    answer = json.loads(text)
                except ValueError:
                    if reads_json(op, self.tools[op]):
                        raise ServiceError(f"{op} tool {tool!r} answered text that is not JSON: "
                                           f"{excerpt(text)!r}") from None
                    answer = text  # read only for an id the server assigns (ingest's id_pattern); "" for none
            meta = result.meta or {}
            return answer, Call(seconds, attempt, server_seconds(meta.get(META_TIMING)))
        raise Unavailable(f"{op} tool {tool!r} failed {tries} time(s), last: {why}")


@contextlib.asynccontextmanager
async def _over_http(url: str, headers: dict | None, answered):
    """The SDK's streamable-HTTP transport to ``url`` through an HTTP client of one's own (closed here),
    which sends ``headers`` with every request and hands each answer to ``answered`` (the SDK takes
    headers, and shows an answer's status, only so)."""
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    async with create_mcp_http_client(headers=headers) as http:
        http.event_hooks["response"].append(answered)
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def _start_failure(e: BaseException) -> str:
    """Why a stdio server did not start, in words: its program not found (the usual cause: an
    environment not activated), another failure to run it, or the process gone before the handshake."""
    e = _leaf(e)
    said = f"{type(e).__name__}: {excerpt(str(e))}" if str(e) else type(e).__name__
    if isinstance(e, FileNotFoundError):
        return f"{said} (not on PATH: activate the environment that has it, or give its full path)"
    if isinstance(e, OSError):
        return said
    return f"it exited before the MCP handshake ({said}); run the command yourself to see why"


def _leaf(e: BaseException) -> BaseException:
    """The first failure inside a task group's exception group (what went wrong, not where)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e

