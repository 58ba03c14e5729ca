"""The reference MCP server (bm25s over the user turns) with one fault, for
the MCP fault tests: started over stdio as ``python -m
tests.helpers.mcp_fault_server``, the fault named by ``$MB_FAULT`` and
its once-only faults remembered in the folder ``$MB_FAULT_STATE`` (so the
server the client starts again after the fault behaves):

- ``die-ingest:N``: the process exits at its N-th ingest, once;
- ``die-search:N``: the process exits at its N-th search, once, saying so on stderr;
- ``detach``: the process starts two that leave its process group, whose pids it writes to
  ``pids``: one in a session of its own (a "detached" child) and a daemon that forked twice (its
  parent gone at once);
- ``slow-search:S``: the first search sleeps S seconds, once;
- ``slow-start:S``: the process sleeps S seconds before it serves (and writes its pid to ``pid``);
- ``text``: every search answers text that is not JSON;
- ``unknown-id``: every search's first result is an id the haystack lacks;
- ``repeat-id``: every search lists its first result twice;
- ``leak``: ``count`` answers the sessions of every namespace together.
"""

import json
import os
import sys
import time
from pathlib import Path

from memobench.services.reference_servers.mcp_server import build
from memobench.retrieval.reference.ranking import rank
from memobench.services.reference_servers.store import Store


def once(name: str) -> bool:
    """True the first time ``name`` is asked (across the server's restarts)."""
    mark = Path(os.environ["MB_FAULT_STATE"]) / name
    if mark.exists():
        return False
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text("")
    return True


class FaultyStore(Store):
    def __init__(self, fault: str):
        super().__init__("bm25s", "user")
        # the ranker's first use imports it (about a second on a busy machine): done before serving, so a
        # retried search's time is the search's and a timeout says only what the fault made slow
        rank(self.retriever, "warm", ["warm up"])
        self.fault, _, arg = fault.partition(":")
        self.arg = float(arg) if arg else 0.0
        self.calls = {"ingest": 0, "search": 0}

    def ingest(self, namespace, session):
        self.calls["ingest"] += 1
        if self.fault == "die-ingest" and self.calls["ingest"] == self.arg and once("died"):
            os._exit(1)
        return super().ingest(namespace, session)

    def count(self, namespace):
        if self.fault == "leak":
            with self.lock:
                return {"sessions": sum(len(s) for s in self.namespaces.values())}
        return super().count(namespace)

    def search(self, namespace, query, k):
        self.calls["search"] += 1
        if self.fault == "die-search" and self.calls["search"] == self.arg and once("died"):
            print(f"fault server: out of memory at search {self.calls['search']}", file=sys.stderr, flush=True)
            os._exit(1)
        if self.fault == "slow-search" and once("slept"):
            time.sleep(self.arg)
        out = super().search(namespace, query, k)
        if self.fault == "unknown-id":
            out["results"][:1] = [{"id": "no-such-session", "score": 9.0}]
        if self.fault == "repeat-id" and out["results"]:
            out["results"].insert(0, dict(out["results"][0]))
        return out


def detach(state: Path) -> None:
    """A detached child and a twice-forked daemon, each sleeping; their pids in ``state / "pids"``."""
    import subprocess

    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    child = subprocess.Popen(sleep, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    read, write = os.pipe()
    if os.fork() == 0:  # the daemon's parent: forks it, tells its pid, and exits at once
        os.setsid()
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)  # not the server's stdout: a daemon holds none of its parent's pipes to the client
            os.execv(sleep[0], sleep)
        os.write(write, str(pid).encode())
        os._exit(0)
    os.close(write)
    daemon = int(os.read(read, 32))
    state.mkdir(parents=True, exist_ok=True)
    (state / "pids").write_text(f"{child.pid} {daemon}")


def main() -> None:
    fault = os.environ["MB_FAULT"]
    if fault.startswith("slow-start:"):
        state = Path(os.environ["MB_FAULT_STATE"])
        state.mkdir(parents=True, exist_ok=True)
        (state / "pid").write_text(str(os.getpid()))
        time.sleep(float(fault.partition(":")[2]))
    if fault == "detach":
        detach(Path(os.environ["MB_FAULT_STATE"]))
    app = build(FaultyStore(fault))
    if fault == "text":
        app.remove_tool("search")

        @app.tool()
        def search(namespace: str, query: str, k: int = 50, date: str | None = None) -> str:
            return "results: " + json.dumps([])

    print(f"fault server: {fault}", file=sys.stderr, flush=True)
    app.run(transport="stdio")


if __name__ == "__main__":
    main()
