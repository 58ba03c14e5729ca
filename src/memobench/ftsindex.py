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

import os
import sqlite3
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from .tables import tmp_path


def build_index(haystacks_path, events_path, out, log=print) -> dict:
    from .normalize import Progress

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    h = pq.read_table(haystacks_path, columns=["haystack_id", "position", "session_key", "session_id"]).to_pydict()
    stride = (max(h["position"]) + 2) if h["position"] else 1
    refs: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for hid, pos, key, sid in zip(h["haystack_id"], h["position"], h["session_key"], h["session_id"]):
        refs[key].append((hid * stride + pos + 1, sid))
    n_rows = len(h["position"])
    del h
    tmp = tmp_path(out)
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER)")
    db.execute("INSERT INTO meta VALUES ('stride', ?), ('rows', ?)", (stride, n_rows))
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(id, body, content='')")
    progress = Progress(log, "fts index: rows", total=n_rows)
    done = 0
    inserted: set[int] = set()

    def insert(key, texts):
        nonlocal done
        inserted.add(key)
        body = "\n".join(texts)
        rows = refs.get(key, ())
        db.executemany("INSERT INTO docs(rowid, id, body) VALUES (?, ?, ?)", ((r, sid, body) for r, sid in rows))
        done += len(rows)
        progress(done)

    try:
        # Sessions stream in key order; each is inserted once per haystack slot.
        pending_key, pending = None, []
        for batch in pq.ParquetFile(events_path).iter_batches(batch_size=65536, columns=["session_key", "text"]):
            for key, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                if key != pending_key:
                    if pending_key is not None:
                        insert(pending_key, pending)
                    pending_key, pending = key, []
                pending.append(text)
        if pending_key is not None:
            insert(pending_key, pending)
        # Sessions without events are rows too (an empty body still has an id).
        for key in [k for k in refs if k not in inserted]:
            insert(key, [])
        db.execute("INSERT INTO docs(docs) VALUES('optimize')")
        db.commit()
        db.close()
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        db.close()
        tmp.unlink(missing_ok=True)
        raise
    progress(done, " done", force=True)
    return {"rows": n_rows, "stride": stride}


class FtsIndex:
    """Read-only access to a built index."""

    def __init__(self, path):
        self.db = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro&immutable=1", uri=True)
        self.stride = self.db.execute("SELECT value FROM meta WHERE key = 'stride'").fetchone()[0]

    def positions(self, haystack_id: int, match: str, limit: int) -> list[int]:
        """Haystack positions of the rows matching ``match``, in rowid order, at most ``limit``."""
        base = haystack_id * self.stride
        return [
            r[0] - base - 1
            for r in self.db.execute(
                "SELECT rowid FROM docs WHERE docs MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?",
                (match, base + 1, base + self.stride, limit),
            )
        ]
