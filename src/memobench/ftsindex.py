"""One on-disk SQLite FTS5 index holding every haystack of a dataset.

The harnesses rebuild an in-memory ``fts5(id, body)`` table per question. Here
every (haystack, position) is one row of a single table, with
``rowid = haystack_id * stride + position + 1``. Restricting a query to one
haystack's rowid range gives exactly the per-question table's answer: MATCH is
decided row by row on the same tokens, rows come back in rowid (= haystack)
order, and LIMIT binds in that order. The index is built once per dataset and
shared, read-only, by every retrieval job of every variant.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from .errors import DataError
from .progress import Progress
from .tables import atomic_path


def build_index(haystacks_path, events_path, out, log=print, chunk_rows: int = 50_000) -> dict:
    """Build the index in rowid order (FTS5 flushes its pending data whenever a
    rowid does not increase, so order matters a lot), a chunk of haystacks at a
    time so only that chunk's sessions are held in memory."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    h = pq.read_table(haystacks_path, columns=["haystack_id", "position", "session_key", "session_id"])
    h = h.sort_by([("haystack_id", "ascending"), ("position", "ascending")]).to_pydict()
    n_rows = len(h["position"])
    stride = (max(h["position"]) + 2) if n_rows else 1
    progress = Progress(log, "fts index: rows", total=n_rows)
    with atomic_path(out) as tmp:
        db = sqlite3.connect(tmp)
        try:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER)")
            db.execute("INSERT INTO meta VALUES ('stride', ?), ('rows', ?)", (stride, n_rows))
            db.execute("CREATE VIRTUAL TABLE docs USING fts5(id, body, content='')")
            for lo in range(0, n_rows, chunk_rows):
                hi = min(n_rows, lo + chunk_rows)
                while hi < n_rows and h["haystack_id"][hi] == h["haystack_id"][hi - 1]:
                    hi += 1  # keep a haystack in one chunk
                keys = h["session_key"][lo:hi]
                bodies = _bodies(events_path, set(keys))
                db.executemany(
                    "INSERT INTO docs(rowid, id, body) VALUES (?, ?, ?)",
                    ((hid * stride + pos + 1, sid, bodies.get(key, "")) for hid, pos, sid, key in zip(
                        h["haystack_id"][lo:hi], h["position"][lo:hi], h["session_id"][lo:hi], keys)),
                )
                del bodies
                progress(hi)
            db.execute("INSERT INTO docs(docs) VALUES('optimize')")
            db.commit()
        finally:
            db.close()
    progress(n_rows, " done", force=True)
    return {"rows": n_rows, "stride": stride}


def _bodies(events_path, keys: set[int]) -> dict[int, str]:
    """The FTS body of each wanted session: its event texts joined by "\n" (as
    the harnesses build the row); a session without events has body ""."""
    texts: dict[int, list[str]] = {}
    wanted = np.fromiter(keys, dtype=np.int64)
    for batch in pq.ParquetFile(events_path).iter_batches(batch_size=65536, columns=["session_key", "text"]):
        k = batch.column(0).to_numpy()
        rows = np.flatnonzero(np.isin(k, wanted))
        for key, text in zip(k[rows].tolist(), batch.column(1).take(rows).to_pylist()):
            texts.setdefault(key, []).append(text)
    return {key: "\n".join(t) for key, t in texts.items()}


class FtsIndex:
    """Read-only access to a built index."""

    def __init__(self, path):
        self.path = Path(path).resolve()
        try:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True)
            self.stride = self.db.execute("SELECT value FROM meta WHERE key = 'stride'").fetchone()[0]
        except sqlite3.Error as e:
            raise DataError(self.path, None, f"unreadable FTS index ({e}); delete it and rerun") from None
        # An empty table of the same schema tells a bad MATCH expression (which
        # the harnesses treat as "no rows") from a problem with the index file.
        self.probe = sqlite3.connect(":memory:")
        self.probe.execute("CREATE VIRTUAL TABLE docs USING fts5(id, body, content='')")

    def positions(self, haystack_id: int, match: str, limit: int) -> list[int]:
        """Haystack positions of the rows matching ``match``, in rowid order, at most ``limit``.
        Raises sqlite3.Error only for a MATCH expression FTS5 rejects."""
        base = haystack_id * self.stride
        try:
            return [
                r[0] - base - 1
                for r in self.db.execute(
                    "SELECT rowid FROM docs WHERE docs MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?",
                    (match, base + 1, base + self.stride, limit),
                )
            ]
        except sqlite3.Error as e:
            self.probe.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (match,)).fetchall()  # re-raises
            raise DataError(self.path, None, f"FTS index query failed ({e}); delete it and rerun") from None
