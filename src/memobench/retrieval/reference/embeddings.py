"""The embedding stage of the embedding retrievers (the catalog's rows with
an ``embedding`` input): every distinct session of a dataset embedded once, shared by
all segments, questions and reruns.

``embeddings/{model}.parquet``: one row per session (``session_key`` int32,
``vector`` fixed-size list of float32, the model's width): the sessions of ``events.parquet`` in
session-key order, then (given ``sessions.parquet``) each session with no
event at all, whose document is the empty text. Its schema metadata records
the model, its files' sha256, the document rule and the device, so a stale
or foreign file is refused rather than silently used.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...core.errors import ConfigError, DataError
from ...core.progress import Progress
from ...core.tables import TableWriter, read_table
from ...core.formats import user_turns_only
from ..documents import iter_session_documents



def _model(model: str):
    """The catalog row of an embedding retriever."""
    from ...catalog.registry import embedding_inputs, row

    if model not in embedding_inputs():
        raise ConfigError(f"unknown embedding model {model!r} (known: {', '.join(embedding_inputs())})")
    return row(model)


def schema(dim: int) -> pa.Schema:
    return pa.schema([("session_key", pa.int32()), ("vector", pa.list_(pa.float32(), dim))])



def encoder_for(model: str, device: str = "auto", batch_size: int | None = None):
    """The encoder of an embedding retriever (on ``device`` where it can choose)."""
    return _model(model).encoder(device, batch_size)


def code_fingerprint(model: str, script) -> str:
    """The embeddings job's code fingerprint for ``model``: the stage's
    modules less every retriever's (the catalog's registering modules), plus
    this model's (and ``script``)."""
    from ...catalog.registry import kind_modules
    from ...core.fingerprint import closure, digest, stage_modules

    own = _model(model).module
    others = frozenset().union(*kind_modules().values())
    shared = stage_modules("embeddings", exclude=others)
    # the catalog loads every retriever's module to read its row: not this job's code
    return digest(shared | closure([own], exclude=others - {own}), [script])


def embed_sessions(events_path, fmt: str, out, log=print, device: str = "auto", batch_size: int | None = None,
                   chunk_sessions: int = 4096, encoder=None, sessions_path=None, model: str | None = None) -> dict:
    """Write ``out`` (embeddings/{model}.parquet) with ``model``'s encoder
    (or ``encoder``). Sessions are embedded in chunks of ``chunk_sessions`` in
    session-key order (minilm: within a chunk, by token length). With
    ``sessions_path`` (sessions.parquet), the sessions that have no event
    follow, with the empty document."""
    enc = encoder or encoder_for(model, device, batch_size)
    meta = {**enc.meta, "sha256": enc.sha256, "documents": "user turns" if user_turns_only(fmt) else "all turns",
            "format": fmt, "device": enc.device}
    table_schema = schema(enc.dim).with_metadata({"memobench": json.dumps(meta, sort_keys=True)})
    n_rows = pq.ParquetFile(events_path).metadata.num_rows
    # every session has a row in sessions.parquet; without it, the total is unknown
    total = pq.ParquetFile(sessions_path).metadata.num_rows if sessions_path is not None else None
    batches = f", batches of {enc.batch_size}" if getattr(enc, "batch_size", None) else ""
    log(f"{enc.name} embeddings ({enc.device}{batches}): {total if total is not None else 'all'} "
        f"sessions of {events_path}")
    writer = TableWriter(out, table_schema, batch_rows=chunk_sessions)
    progress = Progress(log, f"{enc.name} embeddings ({enc.device})", total=total, unit="sessions")
    done = 0
    keys: list[int] = []
    docs: list[str] = []

    def flush():
        nonlocal done
        vecs = enc.encode(docs, on_batch=lambda n: progress(done + n))
        writer.extend(session_key=keys, vector=list(vecs))
        done += len(keys)
        keys.clear()
        docs.clear()

    seen: set[int] = set()

    def add(key, doc):
        keys.append(key)
        docs.append(doc)
        if len(keys) >= chunk_sessions:
            flush()

    try:
        for key, doc in iter_session_documents(events_path, fmt):
            seen.add(key)
            add(key, doc)
        if sessions_path is not None:
            all_keys = read_table(sessions_path, columns=["session_key"]).column(0).to_pylist()
            for key in sorted(set(all_keys) - seen):
                add(key, "")
        if keys:
            flush()
        writer.close()
    except BaseException:
        writer.abort()
        raise
    progress(done, f", done ({n_rows} events)", force=True)
    return {"sessions": done, **meta}


def read_meta(path) -> dict:
    md = pq.read_schema(path).metadata or {}
    raw = md.get(b"memobench")
    if raw is None:
        raise DataError(path, None, "not a memobench embeddings table; delete it and rerun")
    return json.loads(raw)


class SessionVectors:
    """The embeddings table in memory: ``vectors(keys)`` gives the rows of the
    given session keys in the given order (duplicates repeated)."""

    def __init__(self, path, keys=None):
        t = read_table(path, where={"session_key": sorted(set(keys))} if keys is not None else None)
        self.path = path
        self.meta = read_meta(path)
        k = t.column("session_key").to_numpy()
        dim = t.schema.field("vector").type.list_size
        flat = t.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        self.matrix = np.asarray(flat, dtype=np.float32).reshape(len(k), dim)
        self.row = {int(key): i for i, key in enumerate(k.tolist())}

    def vectors(self, keys) -> np.ndarray:
        try:
            return self.matrix[[self.row[int(k)] for k in keys]]
        except KeyError as e:
            raise DataError(self.path, f"session_key {e.args[0]}", "has no embedding; delete the "
                            "embeddings table and rerun") from None
