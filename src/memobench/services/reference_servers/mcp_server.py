"""The reference memory service over MCP (the official SDK's server): the same
sessions and searches as the HTTP server (:class:`.store.Store`), as four
tools, ``reset``, ``ingest``, ``search`` and ``count``, whose arguments are
the HTTP API's bodies::

    memobench serve --mcp stdio --retriever bm25s --documents all           # started by the client
    memobench serve --mcp http --retriever bm25s --documents all --port 8766  # http://127.0.0.1:8766/mcp

Each answer is the HTTP answer's JSON, as structured content and as text,
with the time the tool took in the result's ``_meta`` (``server-timing``,
``app;dur=<ms>``); a search of a namespace it does not hold is a tool error.
Over stdio nothing but the protocol is written to stdout (the line saying
what it serves goes to stderr, the client's stderr)."""

# no "from __future__ import annotations": the SDK reads the tools' annotations, CallToolResult
# among them, from their functions, where it is a local name
import json
import sys
import time


def build(store):
    """The MCP server of ``store`` (a :class:`.store.Store`)."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult, TextContent

    from ... import __version__
    from ..transport.mcp import META_TIMING
    from .store import NoNamespace

    # its version is in its serverInfo: what a run records as the server that served it (services/identity.py)
    app = MCPServer("memobench-reference", version=__version__, instructions=f"{store.retriever} over "
                    f"{store.documents} turns, sessions kept in memory per namespace", log_level="WARNING")

    def answer(work, *args) -> CallToolResult:
        started = time.perf_counter()
        try:
            out = work(*args)
        except (NoNamespace, ValueError, TypeError) as e:
            return CallToolResult(content=[TextContent(type="text", text=str(e))], is_error=True)
        meta = {META_TIMING: f"app;dur={(time.perf_counter() - started) * 1000.0:.3f}"}
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(out, ensure_ascii=True))],
                              structured_content=out, _meta=meta)

    @app.tool(description="Empty a namespace (create it when new).")
    def reset(namespace: str) -> CallToolResult:
        return answer(store.reset, namespace)

    @app.tool(description="Add one session {id, date, turns: [{role, content}]} to a namespace.")
    def ingest(namespace: str, session: dict) -> CallToolResult:
        return answer(store.ingest, namespace, session)

    @app.tool(description="The number of sessions a namespace holds: {sessions}.")
    def count(namespace: str) -> CallToolResult:
        return answer(store.count, namespace)

    @app.tool(description="A namespace's sessions ranked for a query, best first: {results: [{id, score}]}.")
    def search(namespace: str, query: str, k: int = 50, date: str | None = None) -> CallToolResult:
        return answer(store.search, namespace, query, k)

    return app


def serve(store, transport: str, host: str = "127.0.0.1", port: int = 8766) -> None:
    """Serve ``store`` over MCP until interrupted (``transport``: stdio or http)."""
    app = build(store)
    what = f"{store.retriever} ({store.documents} turns)"
    if transport == "stdio":
        # not a "memobench:" line: on the client's stderr, that prefix is for errors
        print(f"memobench serve: {what} over MCP stdio", file=sys.stderr, flush=True)
        app.run(transport="stdio")
        return
    import socket

    import anyio
    import uvicorn

    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on a socket that says it is TCP, and without it each
    # answer waits on Nagle's algorithm and the client's delayed ACK (40 ms)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))  # port 0: a free one, said below
    print(f"memobench: serving {what} over MCP on http://{host}:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(app.streamable_http_app(host=host), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])
