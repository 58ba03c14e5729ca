"""A memory server that refuses keys in words, as a real one does, for the
tests of refusals (docs/memory-services.md#failures): over MCP stdio (the
official SDK's server), started as ``python -m tests.helpers.keyed_mcp_server``.
A key may hold only ``[A-Za-z0-9_.:/-]``; any other character makes
``save_context`` answer ``Failed to save context item: Key contains special
characters`` as a normal result (``isError`` false), and keep nothing. It has
no count. Its tools:

- ``clear_context{namespace}``: empties a namespace;
- ``save_context{namespace, key, value}``: keeps ``value`` under ``key`` (a
  key it holds is overwritten), answering ``Saved context item <key>``;
- ``search_context{namespace, query, limit}``: its ranking (:func:`ranking`),
  ``{"results": [{"key", "score"}]}``.

Its ranking: an item scores the distinct words of the query (runs of ``\\w``,
lower-cased) that its value holds; items scoring 0 are left out; ties in the
order saved.
"""

import re

from tests.helpers.shaped_mcp_server import ranking  # the same word-count ranking as the notebook server

KEY = re.compile(r"[A-Za-z0-9_.:/-]+")
REFUSAL = "Failed to save context item: Key contains special characters"


def build():
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("keyed-context", log_level="WARNING")
    held: dict[str, dict[str, str]] = {}  # namespace -> key -> value, in the order saved

    @app.tool(description="Empty a namespace.")
    def clear_context(namespace: str) -> str:
        held.pop(namespace, None)
        return f"Cleared {namespace}"

    @app.tool(description="Save a context item under a key.")
    def save_context(namespace: str, key: str, value: str) -> str:
        if not KEY.fullmatch(key):
            return REFUSAL  # in words, not as a tool error: what the real server did
        held.setdefault(namespace, {})[key] = value
        return f"Saved context item {key}"

    @app.tool(description="Search a namespace's context items.")
    def search_context(namespace: str, query: str, limit: int = 10) -> dict:
        items = list(held.get(namespace, {}).items())
        return {"results": [{"key": items[i][0], "score": float(s)}
                            for i, s in ranking(query, [v for _, v in items])[:limit]]}

    return app


if __name__ == "__main__":
    build().run(transport="stdio")
