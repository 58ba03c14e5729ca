"""The reference servers' store: a reference retriever's namespaces of sessions, in ingestion order,
served alike over HTTP (http_server.py) and MCP (mcp_server.py)."""

from __future__ import annotations

import threading


class NoNamespace(Exception):
    """A search of a namespace the server does not hold."""


class Store:
    """Namespaces of sessions, in ingestion order."""

    def __init__(self, retriever: str, documents: str, grain: str = "session"):
        self.retriever, self.documents, self.grain = retriever, documents, grain
        self.namespaces: dict[str, list[dict]] = {}
        self.lock = threading.Lock()

    def kept(self, session: dict) -> list[dict]:
        """The session's turns its document keeps (``--documents``)."""
        return [t for t in session.get("turns") or [] if self.documents == "all" or t.get("role") == "user"]

    def document(self, session: dict) -> str:
        return " ".join(str(t.get("content", "")) for t in self.kept(session))

    def units(self, sessions: list[dict]) -> tuple[list[str], list[str]]:
        """(ids, documents) of what a search ranks: the sessions, or (``--grain turn``) their kept turns."""
        if self.grain == "turn":
            turns = [t for s in sessions for t in self.kept(s)]
            return [t["id"] for t in turns], [str(t.get("content", "")) for t in turns]
        return [s["id"] for s in sessions], [self.document(s) for s in sessions]

    def reset(self, namespace: str) -> dict:
        with self.lock:
            self.namespaces[namespace] = []
        return {}

    def ingest(self, namespace: str, session: dict) -> dict:
        if not isinstance(session, dict) or not isinstance(session.get("id"), str):
            raise ValueError("session must be an object with a string id")
        if self.grain == "turn" and not all(isinstance(t, dict) and isinstance(t.get("id"), str)
                                            for t in session.get("turns") or []):
            raise ValueError("a turn-grain server needs each turn's string id (a variant with grain: turn sends it)")
        with self.lock:
            self.namespaces.setdefault(namespace, []).append(session)
        return {}

    def count(self, namespace: str) -> dict:
        with self.lock:
            return {"sessions": len(self.namespaces.get(namespace, []))}

    def search(self, namespace: str, query: str, k: int) -> dict:
        from ...retrieval.reference.ranking import rank

        with self.lock:
            if namespace not in self.namespaces:
                raise NoNamespace(f"no namespace {namespace!r} (never reset or ingested, or the server restarted)")
            sessions = list(self.namespaces[namespace])
        ids, docs = self.units(sessions)
        if not docs:
            return {"results": []}
        ranked = rank(self.retriever, query, docs).top(int(k))
        return {"results": [{"id": ids[p], "score": float(s)}
                            for p, s in zip(ranked.positions.tolist(), ranked.scores.tolist())]}
