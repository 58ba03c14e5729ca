"""Schemas of the normalized Parquet tables and an atomic, batched writer.

Every normalized dataset is four tables (see docs/tables.md):

* ``questions``: one row per question (LongMemEval item, LoCoMo qa item, CN row);
* ``haystacks``: the sessions each question searches, in haystack order, with that
  haystack's own date for each session;
* ``sessions``: each distinct session once;
* ``events``: one row per turn of each distinct session.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .atomic import SyncBehind, atomic_path, commit, tmp_path
from .layout import TABLE_NAMES  # the names here; layout.py has them so that the Snakemake process needs no pyarrow

QUESTIONS = pa.schema(
    [
        ("q_index", pa.int32()),  # position of the item in the source file (0-based)
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("question_type", pa.string()),  # LongMemEval type, LoCoMo category
        ("question_date", pa.string()),
        ("haystack_id", pa.int32()),  # -1: no haystack (CN row with no paired question)
        ("gold", pa.list_(pa.string())),  # the harness gold: answer ids among the raw haystack ids
        ("paired_question_id", pa.string()),  # CN: the English question it pairs to
        ("parse_error", pa.bool_()),  # an M-stream element that did not parse (skipped)
        ("answer", pa.string()),  # LongMemEval: the raw `answer` as JSON text (null elsewhere)
        ("answer_session_ids", pa.list_(pa.string())),  # LongMemEval: String() of each raw id, as listed
        ("question_exact", pa.binary()),  # null, or the exact question where `question` has a U+FFFD for a lone surrogate
        ("evidence", pa.list_(pa.string())),  # LoCoMo: each `evidence` element as a string, as listed (null elsewhere)
    ]
)

HAYSTACKS = pa.schema(
    [
        ("haystack_id", pa.int32()),
        ("position", pa.int32()),
        ("session_key", pa.int32()),
        ("session_id", pa.string()),
        ("date", pa.string()),  # the raw date string, null when absent
        ("base_time", pa.int64()),  # UTC ms, or the harness fallback
        ("date_fallback", pa.bool_()),
    ]
)

SESSIONS = pa.schema(
    [
        ("session_key", pa.int32()),
        ("session_id", pa.string()),
        ("n_events", pa.int32()),
    ]
)

EVENTS = pa.schema(
    [
        ("session_key", pa.int32()),
        ("seq", pa.int32()),
        ("text", pa.string()),
        ("length", pa.int32()),  # code points
        ("role", pa.string()),  # LongMemEval role, LoCoMo speaker
        ("dia_id", pa.string()),  # LoCoMo turn id
        ("has_answer", pa.bool_()),  # LongMemEval turn's has_answer (Python truthiness); null elsewhere
        ("text_exact", pa.binary()),  # null, or the exact text where `text` has a U+FFFD for a lone surrogate
    ]
)

# The tokens stage's table: every event's tokens under one tokenizer (a JS one, or
# fts5's unicode61) as ids (termids.py), row-aligned with events, the vocabulary
# being the tokens first seen in each batch, listed on its first row in id order, as
# UTF-8 bytes (binary: a token FTS5 cut inside a character keeps its lone surrogate).
TOKEN_IDS = pa.schema([("session_key", pa.int32()), ("ids", pa.list_(pa.int32())),
                       ("new_tokens", pa.list_(pa.binary()))])

# Strings that hold a lone surrogate (a JSON \ud800-\udfff escape that is not half
# of a pair) are not UTF-8; Arrow's strings must be. `text` and `question` hold such
# a string with U+FFFD for each lone surrogate (the same tokens and code-point length
# under every JS tokenizer, and the same FTS5 tokens as the surrogate's own bytes),
# and `text_exact` / `question_exact` the exact string as UTF-8 with 'surrogatepass'
# (a lone surrogate as its 3 bytes ED A0 80 to ED BF BF): see docs/tables.md.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> tuple[str, bytes | None]:
    """``text`` as stored: (the string with U+FFFD for each lone surrogate,
    None) when it has none, else (that string, its exact 'surrogatepass' bytes)."""
    if text.isascii() or not LONE_SURROGATE.search(text):
        return text, None
    return LONE_SURROGATE.sub("\ufffd", text), text.encode("utf-8", "surrogatepass")


def exact_text(text: str, exact: bytes | None) -> str:
    """The string a `text` / `*_exact` pair holds (utf8_text reversed)."""
    return text if exact is None else exact.decode("utf-8", "surrogatepass")


def escape_lone(json_text: str) -> str:
    """JSON text (json.dumps with ensure_ascii=False) with each lone surrogate
    written as its lower-case ``\\udXXX`` escape, as JSON.stringify and
    ensure_ascii write it: valid UTF-8 that reads back to the same value."""
    if json_text.isascii() or not LONE_SURROGATE.search(json_text):
        return json_text
    return LONE_SURROGATE.sub(_escape_unit, json_text)


def _escape_unit(m) -> str:
    return "\\u%04x" % ord(m.group())


# Rows per row group of the normalized tables, and per batch where they are read
# back: a tokens table's record batches are the events table's batches of this
# size, which a retrieve job reads in step with them (retrieval._load_events).
BATCH_ROWS = 65536

TABLES = dict(zip(TABLE_NAMES, (QUESTIONS, HAYSTACKS, SESSIONS, EVENTS)))


class TableWriter:
    """Buffers rows column-wise and writes Parquet row groups to a temporary file.

    ``close()`` renames the file into place; ``abort()`` removes it, so a
    half-written table is never visible under its final name.
    """

    def __init__(self, path, schema: pa.Schema, batch_rows: int = BATCH_ROWS):
        self.path = Path(path)
        self.schema = schema
        self.batch_rows = batch_rows
        self.columns = {name: [] for name in schema.names}
        self.arrays: dict[str, list] = {name: [] for name in schema.names}  # Arrow pieces before the values in columns
        self.pending = 0
        self.rows = 0
        self._open()

    def _open(self) -> None:
        """The temporary file and its writer (a subclass may write another format)."""
        self.tmp = tmp_path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(self.tmp, self.schema, compression="zstd")
        self.behind = SyncBehind(self.tmp)  # on disk as it grows (atomic.py)
        self.behind.start()

    def append(self, **row) -> None:
        for name, col in self.columns.items():
            col.append(row[name])
        self.pending += 1
        if self.pending >= self.batch_rows:
            self.flush()

    def extend(self, **columns) -> None:
        """Append whole columns (equal lengths) at once. Row groups are cut
        where row-by-row :meth:`append` would cut them, so the file is the same.
        A column may be given as an Arrow array of its type (built from
        buffers at hand, without a Python object per value): the batch holds
        the same values, so the file is the same too."""
        n = len(columns[self.schema.names[0]])
        done = 0
        while done < n:
            take = min(n - done, self.batch_rows - self.pending)
            whole = take == n
            for name, col in self.columns.items():
                values = columns[name] if whole else columns[name][done : done + take]
                if isinstance(values, pa.Array):
                    if col:
                        self.arrays[name].append(pa.array(col, type=values.type))
                        col.clear()
                    self.arrays[name].append(values)
                else:
                    col.extend(values)
            done += take
            self.pending += take
            if self.pending >= self.batch_rows:
                self.flush()

    def _column(self, field: pa.Field) -> pa.Array:
        pieces, values = self.arrays[field.name], self.columns[field.name]
        if not pieces:
            return pa.array(values, type=field.type)
        if values:
            pieces.append(pa.array(values, type=field.type))
        return pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)

    def flush(self) -> None:
        if not self.pending:
            return
        self._write(pa.record_batch([self._column(f) for f in self.schema], schema=self.schema))
        self.rows += self.pending
        self.columns = {name: [] for name in self.schema.names}
        self.arrays = {name: [] for name in self.schema.names}
        self.pending = 0

    def _write(self, batch: pa.RecordBatch) -> None:
        """One row group of the table (a subclass may hand it to another thread)."""
        self.writer.write_batch(batch, row_group_size=self.batch_rows)

    def close(self) -> None:
        try:
            self.flush()
            self.writer.close()
        except BaseException:
            self.behind.finish(quiet=True)
            raise
        self.behind.finish()
        commit(self.tmp, self.path)

    def abort(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass
        self.behind.finish(quiet=True)
        self.tmp.unlink(missing_ok=True)


def read_table(path, columns: list[str] | None = None, where: dict | None = None) -> pa.Table:
    """A table's columns (all when None) and, with ``where`` ({column: allowed
    values}), only the rows whose values are all allowed (a null is never
    allowed). Read through ``ParquetFile``, not ``pq.read_table``: that one
    goes through pyarrow.dataset, which imports pandas (about 0.4 s of every
    job's start)."""
    if not where:
        return pq.ParquetFile(path).read(columns=columns)
    k = kernels()  # pc.fill_null(pc.is_in(column, value_set), False), and pc.and_, by their kernels
    wanted = None if columns is None else list(dict.fromkeys([*columns, *where]))
    t = pq.ParquetFile(path).read(columns=wanted)
    mask = None
    for name, values in where.items():
        value_set = pa.array(list(values), t.schema.field(name).type)
        m = k.call_function("coalesce", [k.call_function("is_in", [t.column(name)], k.SetLookupOptions(value_set)),
                                         pa.scalar(False)])
        mask = m if mask is None else k.call_function("and", [mask, m])
    t = filter_rows(t, mask)
    return t if columns is None else t.select(columns)


def write_table(path, table: pa.Table) -> None:
    """Write a whole table atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def sorted_runs(values: list):
    """(value, start, end) of each run of equal values of a sorted list (a
    null run last, as Arrow sorts it), by binary search: a loop per run, not
    per row."""
    lo, n = 0, len(values)
    while lo < n:
        v = values[lo]
        hi = n if v is None else bisect_right(values, v, lo)
        yield v, lo, hi
        lo = hi


def is_in(column, values):
    """Where an integer column holds one of ``values`` (never at a null). Not
    read_table's ``where``: its value set is a pa.array of Python values,
    whose pandas probe imports pandas (0.3 s) wherever the jobs' guard
    (stages.adapter.without_pandas) is not in place; this one is built on a
    buffer. pyarrow.compute's kernels, called as :func:`kernels` calls them."""
    k = kernels()
    wanted = array("q", sorted(set(values)))
    value_set = k.call_function("cast", [pa.Array.from_buffers(pa.int64(), len(wanted), [None, pa.py_buffer(wanted)])],
                                k.CastOptions.safe(column.type))
    m = k.call_function("is_in", [column], k.SetLookupOptions(value_set, skip_nulls=False))
    return k.call_function("and_kleene", [k.call_function("is_valid", [m]), m])


def kernels():
    """pyarrow's compute kernels by name (``call_function``) and their options
    classes, without pyarrow.compute: that module wraps each of its ~300
    functions in Python when imported (0.04 s of CPU, a tenth of a merge job)
    and a job that sorts and filters a few tables needs four of them. The
    kernels, so the results, are pyarrow.compute's own."""
    try:
        from pyarrow import _compute as found
    except ImportError:  # a pyarrow laid out otherwise: its public module has the same names
        import pyarrow.compute as found
    return found


def sort_by(table: pa.Table, sorting) -> pa.Table:
    """``table.sort_by(sorting)`` as pyarrow does it (the sort_indices kernel,
    then take; stable), without importing pyarrow.compute (:func:`kernels`)."""
    k = kernels()
    if isinstance(sorting, str):
        sorting = [(sorting, "ascending", "at_end")]
    indices = k.call_function("sort_indices", [table], k.SortOptions(sort_keys=sorting))
    return k.call_function("take", [table, indices], k.TakeOptions(boundscheck=True))


def take(values, indices):
    """``values.take(indices)`` (an array, or a table's rows; ``indices`` may
    be a numpy array), without importing pyarrow.compute (:func:`kernels`)."""
    k = kernels()
    return k.call_function("take", [values, indices], k.TakeOptions(boundscheck=True))


def filter_rows(table: pa.Table, mask) -> pa.Table:
    """``table.filter(mask)`` (a null in the mask drops its row), without
    importing pyarrow.compute (:func:`kernels`)."""
    k = kernels()
    return k.call_function("filter", [table, mask], k.FilterOptions("drop"))
