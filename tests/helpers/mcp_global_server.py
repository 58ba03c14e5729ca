"""An MCP memory server with one global store, as many third-party servers are
(a knowledge graph in one file): the reference MCP server's tools (bm25s over the
user turns), every namespace argument ignored. Started over stdio as ``python -m
tests.helpers.mcp_global_server [FOLDER]``: with a FOLDER (which must exist:
the working folder memobench makes for a server per namespace) it writes its pid
to ``FOLDER/pid`` (and to ``$MB_SEEN``, when set, a line with the folder and the servers alive
beside it) and each session it is sent to ``FOLDER/sessions.jsonl``.
``$MB_LAG`` (seconds): the sessions sent are seen by count and search only
that long after the last ingest answered (an asynchronous index)."""

import json
import os
import sys
import time
from pathlib import Path

from memobench.services.reference_servers.mcp_server import build
from memobench.retrieval.reference.ranking import rank
from memobench.services.reference_servers.store import Store

GLOBAL = "global"


class GlobalStore(Store):
    def __init__(self, folder: Path | None, lag: float):
        super().__init__("bm25s", "user")
        rank(self.retriever, "warm", ["warm up"])
        self.folder, self.lag = folder, lag
        self.sent: list[tuple[float, dict]] = []  # (when it was ingested, the session)

    def _seen(self) -> None:
        """The sessions sent, moved into the store searched once ``lag`` has passed since the last one (an
        index rebuilt when the writes have quieted)."""
        with self.lock:
            if self.sent and time.monotonic() - self.sent[-1][0] >= self.lag:
                self.namespaces.setdefault(GLOBAL, []).extend(s for _, s in self.sent)
                self.sent = []

    def reset(self, namespace):
        with self.lock:
            self.sent = []
        return super().reset(GLOBAL)

    def ingest(self, namespace, session):
        if self.folder is not None:
            with open(self.folder / "sessions.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(session) + "\n")
        with self.lock:
            self.sent.append((time.monotonic(), session))
        return {}

    def count(self, namespace):
        self._seen()
        return super().count(GLOBAL)

    def search(self, namespace, query, k):
        self._seen()
        return super().search(GLOBAL, query, k)


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if folder is not None:
        if not folder.is_dir():
            sys.exit(f"global server: no folder {folder}")
        (folder / "pid").write_text(str(os.getpid()))
        if os.environ.get("MB_SEEN"):
            # the servers alive now: the folders beside this one (memobench removes each when its server stops)
            alive = sum(1 for d in folder.parent.iterdir() if (d / "pid").exists())
            with open(os.environ["MB_SEEN"], "a", encoding="utf-8") as f:
                f.write(json.dumps({"folder": str(folder), "alive": alive}) + "\n")
    app = build(GlobalStore(folder, float(os.environ.get("MB_LAG", "0"))))
    print(f"global server in {folder}", file=sys.stderr, flush=True)
    app.run(transport="stdio")


if __name__ == "__main__":
    main()
