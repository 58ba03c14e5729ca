"""A memory library in-process, the worked example of a system variant's
``library`` (docs/recipes/README.md): the bm25s library
(https://github.com/xhluca/bm25s) keeping each namespace's sessions in
memory, one BM25 index per namespace, built when a search first needs it.
A session's document is its turns' contents joined by spaces (``documents:
user``: its user turns only), so its lists are the reference ``bm25s``
retriever's, and a run of it can be checked against the reference service's."""

import threading

import bm25s
import numpy as np


class BM25sMemory:
    """reset, ingest, search and count per namespace, as a system variant calls them."""

    def __init__(self, k1: float = 1.5, b: float = 0.75, documents: str = "all"):
        if documents not in ("all", "user"):
            raise ValueError(f"documents is 'all' or 'user', not {documents!r}")
        self.k1, self.b, self.documents = k1, b, documents
        self.sessions: dict[str, list[dict]] = {}  # namespace -> its sessions, in ingestion order
        self.indexes: dict[str, tuple] = {}  # namespace -> (its sessions it indexes, the BM25 index)
        self.lock = threading.Lock()  # the variant's threads ingest several namespaces at once

    def reset(self, namespace: str) -> None:
        with self.lock:
            self.sessions[namespace] = []

    def ingest(self, namespace: str, session: dict) -> None:
        with self.lock:
            # a new list: an index built from the old one is then told apart by identity
            self.sessions[namespace] = [*self.sessions.get(namespace, []), session]

    def count(self, namespace: str) -> int:
        with self.lock:
            return len(self.sessions.get(namespace, []))

    def search(self, namespace: str, query: str, k: int) -> list[tuple[str, float]]:
        with self.lock:
            sessions = self.sessions.get(namespace, [])
            built, index = self.indexes.get(namespace, (None, None))
        if not sessions:
            return []
        if built is not sessions:
            docs = [" ".join(str(t["content"]) for t in s["turns"] if self.documents == "all" or t["role"] == "user")
                    for s in sessions]
            index = bm25s.BM25(k1=self.k1, b=self.b)
            index.index(bm25s.tokenize(docs, return_ids=False, show_progress=False), show_progress=False)
            with self.lock:
                self.indexes[namespace] = (sessions, index)
        tokens = bm25s.tokenize([query], return_ids=False, show_progress=False)[0]
        scores = index.get_scores(tokens) if tokens else np.zeros(len(sessions))
        order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]  # ties: ingestion order
        return [(sessions[i]["id"], float(scores[i])) for i in order]
