"""Memory libraries used in-process as system variants (``library: tests.helpers.memory_libraries:Name``),
each a correct ranking of its own kind, or one whose tie order moves:

- ``OkapiMemory``: rank_bm25's ``BM25Okapi`` over each namespace's sessions (words lower-cased), its
  top k as rank_bm25's ``get_top_n`` gives them (``argsort`` reversed: ties in reverse ingestion order);
- ``SubstringMemory``: the sessions whose text holds the query, lower-cased, as a substring, in ingestion
  order, without scores (an entity store's search; driven with ``query: longest-word``);
- ``StampedMemory``: sessions holding more of the query's words first; ties broken by write order, as a
  server breaks ties of second-resolution timestamps by write time, oldest first in a namespace and newest
  first in the next one holding the same sessions (then oldest first again, and so on): the same sessions in
  a fresh namespace always list ties in another order (a stamp drawn at random let them keep their order
  now and then);
- ``RacyMemory``: sessions holding more of the query's words first, ties in ingestion order, but in reverse
  while another search is in flight (a race between concurrent searches);
- ``TextMemory``: passages of the turns it holds, never their ids (tests/helpers/text_server.py's
  ``answer``); ``TextIdsMemory`` names each passage's session id beside it, ``WrongIdMemory`` too, with
  another session's id in its first result."""

from __future__ import annotations

import re
import threading
import time


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def text_of(session: dict) -> str:
    return " ".join(str(t["content"]) for t in session["turns"])


class _Held:
    def __init__(self):
        self.held: dict[str, list] = {}
        self.lock = threading.Lock()

    def reset(self, namespace: str) -> None:
        with self.lock:
            self.held[namespace] = []

    def count(self, namespace: str) -> int:
        with self.lock:
            return len(self.held.get(namespace, []))

    def _sessions(self, namespace: str) -> list:
        with self.lock:
            return list(self.held.get(namespace, []))


class OkapiMemory(_Held):
    def ingest(self, namespace: str, session: dict) -> None:
        with self.lock:
            self.held.setdefault(namespace, []).append((session["id"], words(text_of(session))))

    def search(self, namespace: str, query: str, k: int):
        import numpy as np
        from rank_bm25 import BM25Okapi

        held = self._sessions(namespace)
        if not held:
            return []
        scores = BM25Okapi([w for _, w in held]).get_scores(words(query))
        top = np.argsort(scores)[::-1][:k]  # rank_bm25's get_top_n
        return [(held[i][0], float(scores[i])) for i in top]


class SubstringMemory(_Held):
    def ingest(self, namespace: str, session: dict) -> None:
        with self.lock:
            self.held.setdefault(namespace, []).append((session["id"], text_of(session).lower()))

    def search(self, namespace: str, query: str, k: int):
        return [sid for sid, text in self._sessions(namespace) if query.lower() in text][:k]


class StampedMemory(_Held):
    def __init__(self):
        super().__init__()
        self.written = 0

    def ingest(self, namespace: str, session: dict) -> None:
        with self.lock:
            self.written += 1
            self.held.setdefault(namespace, []).append((session["id"], set(words(text_of(session))),
                                                        self.written))

    def search(self, namespace: str, query: str, k: int):
        asked = set(words(query))
        with self.lock:
            ids = sorted(sid for sid, _, _ in self.held.get(namespace, []))
            # the namespaces holding these very sessions, in the order they were made: every other one reversed
            twins = [ns for ns, held in self.held.items() if sorted(sid for sid, _, _ in held) == ids]
        newest_first = twins.index(namespace) % 2 if namespace in twins else 0
        scored = [(len(asked & held), -stamp if newest_first else stamp, sid)
                  for sid, held, stamp in self._sessions(namespace)]
        return [(sid, float(n)) for n, _, sid in sorted(scored, key=lambda x: (-x[0], x[1]))[:k]]


class RacyMemory(_Held):
    def __init__(self):
        super().__init__()
        self.flying = 0

    def ingest(self, namespace: str, session: dict) -> None:
        with self.lock:
            self.held.setdefault(namespace, []).append((session["id"], set(words(text_of(session)))))

    def search(self, namespace: str, query: str, k: int):
        with self.lock:
            self.flying += 1
        time.sleep(0.02)  # long enough for another search to start meanwhile
        with self.lock:
            raced = self.flying > 1
        asked = set(words(query))
        scored = [(len(asked & held), -i if raced else i, sid) for i, (sid, held) in enumerate(self._sessions(namespace))]
        with self.lock:
            self.flying -= 1
        return [(sid, float(n)) for n, _, sid in sorted(scored, key=lambda x: (-x[0], x[1]))[:k]]


class TextMemory(_Held):
    ids = wrong_id = False

    def ingest(self, namespace: str, session: dict) -> None:
        with self.lock:
            self.held.setdefault(namespace, []).append(session)

    def search(self, namespace: str, query: str, k: int):
        from tests.helpers.text_server import answer

        return [item for item, _ in answer(self._sessions(namespace), query, k, self.ids, self.wrong_id)]


class TextIdsMemory(TextMemory):
    ids = True


class WrongIdMemory(TextMemory):
    ids = wrong_id = True
