"""One retrieve job of a variant, run in-process on a normalized dataset: how the
memory-service tests compare a service's lists with the in-process retriever's;
and a fake memory service with one fault, for the conformance check's tests."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq

from memobench.catalog.variants import resolve
from memobench.core import layout
from memobench.services.reference_servers.http_server import reply
from memobench.retrieval.sharing import write_segment


def rank_one_segment(norm: Path, root: Path, name: str, entry: dict | None = None, log=None):
    """One segment of ``name`` (a variant, a system one when ``entry`` is given) written under ``root``:
    (rankings, outcomes, deep) tables, and the job's log lines (a turn variant's turn lists go to
    ``turns.parquet`` in the segment's folder)."""
    lines = []
    v = resolve(name, "s", {name: entry} if entry else {})
    out = {kind: Path(layout.path(layout.SEGMENT_TABLE, root=root / "results", dataset="lme", variant=name,
                                  segment="seg1", suffix=suffix)) for kind, suffix in layout.SEGMENT_SUFFIXES.items()}
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    t = layout.table_paths(norm)
    timings = Path(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name, segment="seg1"))
    write_segment(v, t["questions"], t["haystacks"], t["events"], 1, 1, out["rankings"], out["outcomes"],
                  deep_out=out["deep"], log=log or lines.append, timings_out=timings, dataset="lme",
                  turns_out=out["rankings"].parent / "turns.parquet" if v.grain == "turn" else None)
    return tuple(pq.read_table(out[k]) for k in ("rankings", "outcomes", "deep")), lines


def start(server) -> str:
    """``server`` serving in a thread: its URL."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


class Fake(ThreadingHTTPServer):
    """A memory service of the project's API that answers a namespace's sessions holding any of the query's
    words, by how many (ties in ingestion order), with one fault: ``leak`` (one store for every namespace),
    ``first:N`` (keeps a namespace's first N sessions), ``unique`` (skips an id the namespace holds, as
    server-memory skips an entity's name), ``no-reset`` (reset does nothing), ``lower`` (answers ids
    lower-cased), ``shift`` (answers each session by the id of the one ingested after it), ``503-at:N``
    (keeps its N-th ingest, then answers it 503, as a server whose proxy timed out), ``unpadded`` (answers
    ids without leading zeros), ``favourite`` (lists the namespace's last session first, above all),
    ``overwrite`` (a second copy of an id replaces the first), ``pad`` (lists every session, at score 0
    where no word matches), ``score:X`` (every score the JSON text X: NaN, Infinity, "high"); faults
    joined by commas apply together."""

    daemon_threads = True

    def __init__(self, fault: str = ""):
        self.fault = fault
        self.store: dict[str, list[dict]] = {}
        self.lock = threading.Lock()
        self.namespaces: set[str] = set()  # every namespace asked for (what a check used)
        super().__init__(("127.0.0.1", 0), _FakeHandler)

    def held(self, namespace: str) -> list[dict]:
        return self.store.setdefault("" if self.fault == "leak" else namespace, [])


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class _FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        s: Fake = self.server
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        ns = req["namespace"]
        with s.lock:
            s.namespaces.add(ns)
            held = s.held(ns)
            out: dict = {}
            if self.path == "/reset" and s.fault != "no-reset":
                held.clear()
            elif self.path == "/ingest":
                session = req["session"]
                s.ingests = getattr(s, "ingests", 0) + 1
                if s.fault.startswith("503-at:") and s.ingests == int(s.fault.split(":")[1]):
                    held.append(session)
                    reply(self, 503, b'{"error": "upstream timed out"}')
                    return
                kept = not (s.fault.startswith("first:") and len(held) >= int(s.fault.split(":")[1]))
                if s.fault == "unique" and any(x["id"] == session["id"] for x in held):
                    kept = False
                if "overwrite" in s.fault.split(","):
                    held[:] = [x for x in held if x["id"] != session["id"]]
                if kept:
                    held.append(session)
            elif self.path == "/count":
                out = {"sessions": len(held)}
            elif self.path == "/search":
                query = set(_words(req["query"]))
                scored = [(sum(w in query for w in _words(" ".join(t["content"] for t in x["turns"]))), i, x["id"])
                          for i, x in enumerate(held)]
                faults = s.fault.split(",")
                if "favourite" in faults and scored:
                    scored[-1] = (100, scored[-1][1], scored[-1][2])
                ranked = sorted((x for x in scored if x[0] > 0 or "pad" in faults),
                                key=lambda t: (-t[0], t[1]))[: int(req["k"])]
                if s.fault == "shift":
                    ranked = [(sc, i, held[(i + 1) % len(held)]["id"]) for sc, i, _ in ranked]
                ids = [sid.lower() if s.fault == "lower" else sid.lstrip("0") if s.fault == "unpadded" else sid
                       for _, _, sid in ranked]
                out = {"results": [{"id": sid, "score": float(sc)} for sid, (sc, _, _) in zip(ids, ranked)]}
                if s.fault.startswith("score:"):
                    text = json.dumps(out).replace('"score": ', '"score": ' + s.fault[6:] + ' #')
                    reply(self, 200, re.sub(r"#[-0-9.e]+", "", text).encode())
                    return
        reply(self, 200, json.dumps(out).encode())
