"""A memory server of a shape this project has never seen, for the tests of
servers with their own shapes (docs/memory-services.md): a notebook of
folders of notes, over MCP stdio (the official SDK's server), started as
``python -m tests.helpers.shaped_mcp_server``. Its tools:

- ``wipe_folder{folder}``: empties a folder; a folder it never held is a
  tool error ("no folder ..."), as basic-memory's delete_note is;
- ``file_notes{folder, notes: [{title, entries: [{who, said}]}]}``: files
  many notes at once, answering in words with the ids it assigns
  (``Filed 3 notes: #7, #8, #9.``);
- ``write_note{folder, title, body}``: writes one note, answering nothing;
  a title the folder holds is overwritten (the title is the key);
- ``find{folder, words, top}``: its ranking, answered in words
  (``- #7 "title" (2 words)`` a line);
- ``search_folder{folder, text, limit}``: the same ranking as JSON,
  ``{"matches": {"items": [{"note": {"ref": "note:<title>", "id": 7},
  "relevance": 2.0}]}}``;
- ``list_notes{folder}``: ``{"folder", "notes": [titles]}`` (no number).

A note's text is at most :data:`LIMIT` characters (a longer one is a tool
error): a note's entries as ``who: said`` lines, or its body. Its ranking
(:func:`ranking`): a note scores the distinct words of the query (runs of
``\\w``, lower-cased) that its text holds; notes scoring 0 are left out;
ties in the order filed.
"""

import re
import sys
from itertools import count

LIMIT = 400


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def ranking(query: str, texts: list[str]) -> list[tuple[int, int]]:
    """(index, score) of the texts holding any of the query's words, best first, ties in order."""
    asked = words(query)
    scored = [(i, len(asked & words(t))) for i, t in enumerate(texts)]
    return sorted((x for x in scored if x[1] > 0), key=lambda x: (-x[1], x[0]))


def build():
    from mcp.server.mcpserver import MCPServer
    from pydantic import BaseModel

    class Entry(BaseModel):
        who: str
        said: str

    class Note(BaseModel):
        title: str
        entries: list[Entry]

    app = MCPServer("notebook", log_level="WARNING")
    folders: dict[str, dict[str, dict]] = {}  # folder -> title -> {id, text}, in the order filed
    ids = count(1)

    def keep(folder: str, title: str, text: str) -> int:
        if len(text) > LIMIT:
            raise ValueError(f"note {title!r} is too long ({len(text)} > {LIMIT} characters)")
        notes = folders.setdefault(folder, {})
        nid = next(ids)
        notes[title] = {"id": nid, "text": text}
        return nid

    def ranked(folder: str, query: str, top: int) -> list[tuple[str, dict, int]]:
        notes = list(folders.get(folder, {}).items())
        return [(notes[i][0], notes[i][1], score) for i, score in ranking(query, [n["text"] for _, n in notes])][:top]

    @app.tool(description="Empty a folder.")
    def wipe_folder(folder: str) -> str:
        if folder not in folders:
            raise ValueError(f"no folder {folder!r}")
        folders[folder].clear()
        return f"Wiped {folder}."

    @app.tool(description="File notes, each a title and its entries.")
    def file_notes(folder: str, notes: list[Note]) -> str:
        filed = [keep(folder, n.title, "\n".join(f"{e.who}: {e.said}" for e in n.entries)) for n in notes]
        return f"Filed {len(filed)} notes: " + ", ".join(f"#{i}" for i in filed) + "."

    @app.tool(description="Write one note.")
    def write_note(folder: str, title: str, body: str) -> str:
        keep(folder, title, body)
        return ""

    @app.tool(description="Find notes, in words.")
    def find(folder: str, words: str, top: int = 10) -> str:
        hits = ranked(folder, words, top)
        return f"{len(hits)} notes found\n" + "".join(f"- #{n['id']} {title!r} ({s} words)\n" for title, n, s in hits)

    @app.tool(description="Search a folder.")
    def search_folder(folder: str, text: str, limit: int = 10) -> dict:
        return {"matches": {"items": [{"note": {"ref": f"note:{title}", "id": n["id"]}, "relevance": float(s)}
                                      for title, n, s in ranked(folder, text, limit)]}}

    @app.tool(description="List a folder's notes.")
    def list_notes(folder: str) -> dict:
        return {"folder": folder, "notes": list(folders.get(folder, {}))}

    return app


def serve_http(port: int, key: str) -> None:
    """Over streamable HTTP on 127.0.0.1:``port`` (0: a free one, printed), answering 401 to a request
    without ``Authorization: Bearer <key>``."""
    import socket

    import anyio
    import uvicorn

    inner = build().streamable_http_app(host="127.0.0.1")

    async def gate(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != f"Bearer {key}".encode():
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await inner(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    print(f"notebook server on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(gate, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    import os

    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        serve_http(int(sys.argv[2]), os.environ["NOTEBOOK_KEY"])
    else:
        print("notebook server over stdio", file=sys.stderr, flush=True)
        build().run(transport="stdio")
