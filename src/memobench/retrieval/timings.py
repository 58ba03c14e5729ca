"""A retrieve job's timings table (``layout.TIMINGS``): every request a
memory service variant made, and every call of an in-process retriever (a
reference retriever, a Python retriever, a fusion's step), timed on the
monotonic clock. The one output that differs from run to run, so it lies
with the logs, outside the results the byte-identity checks compare; every
retrieve job writes one, empty for the variants that are not timed (the Memo
variants, an imported run: its metadata says why)."""

from __future__ import annotations

import json

# operation: reset | ingest | count | search, and for a service's own costs: start (a stdio server's process
# start and handshake; with a server per namespace, one row each), ingestion (a namespace's ingest requests,
# first to last: its wall time, value its sessions), ready (ingested to searchable: system.ready, phase its
# condition; attempts the polls), confirm (an ingested item searched for by its own words: system.confirm),
# memory (a stdio server's peak resident memory: value in bytes, VmHWM of it
# and its descendants), load and load_window (system.load, phase the concurrency: services/job/load.py);
# phase (searches): cold, the first of a namespace since
# this job ingested it (in-process: the first call on its haystack in the job, which builds what is
# built per haystack), else warm; namespace: in-process, the haystack's id; seconds: from the first attempt to
# the answer (the waits between retries included); attempts: how many it took; ok: False for
# a request that still failed (its seconds null); server_seconds: what the server said it spent (its
# Server-Timing header), null when it does not say; value: what a row counts beyond time (above), else null
# (the types as pyarrow names them: pyarrow is imported where a table is written, as the workflow's plan
# reads MEASURES at every Snakemake start)
COLUMNS = (("operation", "string"), ("phase", "string"), ("namespace", "string"), ("question_id", "string"),
           ("seconds", "float64"), ("attempts", "int32"), ("ok", "bool_"), ("server_seconds", "float64"),
           ("value", "int64"))
META_KEY = b"memobench.timings"
# why a variant's table is empty
UNTIMED_MEMO = ("the Memo engine ranks its variants in one shared pass (one segment load, shared tokens and "
                "indexes): no time of one variant's searches")
UNTIMED_RUN = "lists read from a run file: timed by no one here"
# what a timed variant's rows measure (its table's metadata, the latency page's column)
MEASURES = {"system": "service requests", "reference": "in-process calls", "python": "in-process calls",
            "fusion": "the fusion step alone (its inputs' searches are in their own tables)"}
# what a cold search of each kind holds (the latency page's rows): a service's cold and an in-process cold
# time different work, so a row says which
COLD = {"system": "the namespace's first search after this job ingested it (the ingestion is not in it: its own "
                  "columns)",
        "reference": "the first call on its haystack in the job: it builds the retriever's per-haystack index, "
                     "then ranks",
        "python": "the first call of your function on its haystack in the job, with whatever it builds per haystack "
                  "(prepare's values, computed per session beforehand, are not in it)",
        "fusion": "the fusion step on its haystack's first question (its inputs' searches are not in it)"}


class CallTimes:
    """Per-call timings of an in-process retriever: one ``search`` row per call, ``cold`` when it is the
    first call on its haystack in this job."""

    def __init__(self):
        self.rows: list[tuple] = []
        self._seen: set = set()

    def add(self, haystack, question_id: str, seconds: float, ok: bool = True) -> None:
        phase = "warm" if haystack in self._seen else "cold"
        self._seen.add(haystack)
        self.rows.append(("search", phase, str(haystack), question_id, seconds, 1, ok, None))


def write_timings(path, rows: list[tuple], meta: dict) -> None:
    """``rows``: tuples in :data:`COLUMNS`' order."""
    import pyarrow as pa

    from ..core.tables import write_table

    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in COLUMNS])
    # a row may leave out its last columns (value): null there
    rows = [tuple(r) + (None,) * (len(schema) - len(r)) for r in rows]
    cols = list(zip(*rows)) if rows else [[] for _ in schema]
    table = pa.table([pa.array(c, f.type) for c, f in zip(cols, schema)], schema=schema)
    write_table(path, table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True)}))


def write_untimed(path, dataset: str, variant: str, why: str) -> None:
    write_timings(path, [], {"dataset": dataset, "variant": variant, "timed": False, "why": why})


def read_meta(path) -> dict:
    import pyarrow.parquet as pq

    return schema_meta(pq.read_schema(path))


def schema_meta(schema) -> dict:
    """What a timings table says of itself (its dataset, variant, whether and what it times)."""
    return json.loads((schema.metadata or {}).get(META_KEY, b"{}"))
