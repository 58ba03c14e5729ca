"""A server per namespace, for an MCP server that keeps one global store: when
its command or environment names ``{namespace}`` or ``{workdir}``, each
namespace gets its own server process, started with those filled in (the
namespace's name; a working folder made for it here, empty), and stopped,
its folder removed, when the namespace's work is done. :class:`NamespaceServers`
is a client with the same ``once`` as the others: each call goes to the
server of the namespace it names (started when none runs). ``serving`` binds a
thread to one namespace's server, whose lost connections ``breaks`` then
counts (a namespace is confirmed again only when its own server restarted)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from pathlib import Path

PLACEHOLDERS = ("{namespace}", "{workdir}")


def per_namespace(mcp: dict) -> bool:
    """True when an MCP server's command or env names ``{namespace}`` or ``{workdir}``."""
    command = mcp.get("command")
    parts = ([command] if isinstance(command, str) else list(command or [])) + list((mcp.get("env") or {}).values())
    return any(p in str(part) for part in parts for p in PLACEHOLDERS)


def filled(text: str, namespace: str, workdir: str) -> str:
    """``text`` with ``{namespace}`` and ``{workdir}`` filled (nothing else: a command's own braces stay)."""
    return text.replace("{namespace}", namespace).replace("{workdir}", workdir)


class NamespaceServers:
    """The servers of a command with ``{namespace}``/``{workdir}`` (``make(command, env)``: the client of one
    server, an McpClient not yet started); their working folders under ``root`` (made here, removed with it)."""

    def __init__(self, make, command: list[str], env: dict | None, root: Path | None = None):
        self.make, self.command, self.env = make, list(command), env
        root = Path(root).resolve() if root is not None else None  # the server may start elsewhere
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
        self.shared = root  # the folder every job of the variant shares (None: this client's alone)
        # a folder of this client's own: two jobs serving one namespace at once never share a folder
        self.root = Path(tempfile.mkdtemp(prefix="servers-", dir=root))
        self._servers: dict[str, tuple] = {}  # namespace -> (its client, its folder)
        self._lock = threading.Lock()
        self._bound = threading.local()
        self._breaks = 0  # lost connections of the servers already stopped
        self.peaks: dict[str, int] = {}  # namespace -> its server's peak memory (bytes), read as it stopped

    def _client(self, namespace: str):
        with self._lock:
            got = self._servers.get(namespace)
            if got is None:
                # a folder per namespace, named by its order: a namespace's name is the service's, not a safe path
                workdir = self.root / f"ns{len(self.peaks) + len(self._servers) + 1:05d}"
                while workdir.exists():
                    workdir = workdir.with_name(workdir.name + "-")
                workdir.mkdir()
                command = [filled(c, namespace, str(workdir)) for c in self.command]
                env = None if self.env is None else {k: filled(v, namespace, str(workdir)) for k, v in self.env.items()}
                got = self._servers[namespace] = (self.make(command, env), workdir)
            return got[0]

    def start(self, namespace: str) -> float | None:
        """Start ``namespace``'s server now: the seconds its start took (process and handshake; McpClient.start)."""
        return self._client(namespace).start()

    def stop(self, namespace: str) -> None:
        """Stop ``namespace``'s server (its peak memory read first) and remove its folder."""
        with self._lock:
            got = self._servers.pop(namespace, None)
        if got is None:
            return
        client, workdir = got
        try:
            peak = client.peak_memory()
            if peak is not None:
                self.peaks[namespace] = peak
            self._breaks += client.breaks
        finally:
            client.close()
            shutil.rmtree(workdir, ignore_errors=True)

    @contextlib.contextmanager
    def serving(self, namespace: str):
        """This thread's calls, and ``breaks``, are ``namespace``'s server's while inside; it is stopped after."""
        self._bound.namespace = namespace
        try:
            yield self
        finally:
            self._bound.namespace = None
            self.stop(namespace)

    def alive(self) -> int:
        with self._lock:
            return len(self._servers)

    @property
    def breaks(self) -> int:
        bound = getattr(self._bound, "namespace", None)
        with self._lock:
            if bound is not None:
                got = self._servers.get(bound)
                return got[0].breaks if got else 0
            return self._breaks + sum(c.breaks for c, _ in self._servers.values())

    def once(self, op: str, values: dict, retries: int | None = None):
        return self._client(values["namespace"]).once(op, values, retries=retries)

    def peak_memory(self, namespace: str | None = None) -> int | None:
        """The peak memory of ``namespace``'s server (running or stopped), or the largest of all."""
        with self._lock:
            running = dict(self._servers)
        if namespace is not None:
            return running[namespace][0].peak_memory() if namespace in running else self.peaks.get(namespace)
        return max(self.peaks.values(), default=None)

    def close_servers(self) -> None:
        """Stop every server running now (those a conformance check started, say)."""
        for namespace in list(self._servers):
            self.stop(namespace)

    def close(self) -> None:
        self.close_servers()
        shutil.rmtree(self.root, ignore_errors=True)
