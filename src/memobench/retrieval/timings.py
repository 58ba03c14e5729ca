"""A retrieve job's timings table (``layout.TIMINGS``): every request a
memory service variant made, timed on the monotonic clock. The one output
that differs from run to run, so it lies with the logs, outside the results
the byte-identity checks compare; every retrieve job writes one, empty for
the variants that are not timed (its metadata says why)."""

from __future__ import annotations

import json

import pyarrow as pa

# operation: reset | ingest | count | search; phase (searches): cold, the first of a namespace since
# this job ingested it, else warm; seconds: the last attempt's; attempts: how many it took; ok: False for
# a request that still failed (its seconds null); server_seconds: what the server said it spent (its
# Server-Timing header), null when it does not say
SCHEMA = pa.schema([("operation", pa.string()), ("phase", pa.string()), ("namespace", pa.string()),
                    ("question_id", pa.string()), ("seconds", pa.float64()), ("attempts", pa.int32()),
                    ("ok", pa.bool_()), ("server_seconds", pa.float64())])
META_KEY = b"memobench.timings"
UNTIMED = ("lists computed in a pass shared with other variants, or from a run file: no time of one "
           "product's searches")


def write_timings(path, rows: list[tuple], meta: dict) -> None:
    """``rows``: tuples in :data:`SCHEMA`'s column order."""
    from ..core.tables import write_table

    cols = list(zip(*rows)) if rows else [[] for _ in SCHEMA]
    table = pa.table([pa.array(c, f.type) for c, f in zip(cols, SCHEMA)], schema=SCHEMA)
    write_table(path, table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True)}))


def write_untimed(path, dataset: str, variant: str) -> None:
    write_timings(path, [], {"dataset": dataset, "variant": variant, "timed": False, "why": UNTIMED})


def read_meta(path) -> dict:
    import pyarrow.parquet as pq

    return json.loads((pq.read_schema(path).metadata or {}).get(META_KEY, b"{}"))
