"""One JSON array read in parts, each on its own core.

A LongMemEval file is one JSON array, read by one streaming parser; on a
2.7 GB file that is most of a cold run, one core working. Here the file is
cut at item boundaries into parts that forked processes read at once; the
first part is read by the job itself, which then appends the others' rows in
file order (:func:`read_in_parts`), so the tables are the same bytes as one
pass's (readers/longmemeval.py).

A cut is found, not proven: :func:`cut_points` looks near each share of the
file for a comma before an item's first key (``,{"question_id":``; in valid
JSON a quote there cannot be inside a string, as a string would end at it).
Each part is then read as a whole array of its own, the first as its bytes
and a ``]``, a later one as a ``[`` and its bytes (and a ``]`` unless it is
the last). If the first reads as an array of at least one item and the rest
does, the file is exactly their items in order: JSON is parsed left to right, and after the
first part's items the parser is where ``[`` leaves it. A part that does not
read (a cut inside a nested object that happens to have that key, malformed
JSON, a bound of the JSON guard) sends the whole file to the one-pass
reading, which names the item and the byte as it always has.

The cutting needs the standard library only (the workflow's plan asks
:func:`parts_for` how many cores a normalize job takes); the driver imports
the reader and pyarrow when it runs.

Workers are forked, never spawned (no interpreter start, no imports), and
only from a process with a single thread (a fork copies no other thread, and
a lock another thread held would stay held in the child); each dies with its
parent (Linux's parent-death signal).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import traceback
from functools import partial
from pathlib import Path

from ..core.layout import TABLE_NAMES
from ..core.progress import Progress


# A part is at least this many bytes: below, a fork and the append of its
# rows cost more than reading it in the same pass.
PART_MIN_BYTES = 32 << 20
MAX_PARTS = 4  # more parts than this gain little on the files we know (the merge is serial)

# A comma before a LongMemEval item (its first key question_id, as in the real files).
ITEM_START = re.compile(rb',\s*\{\s*"question_id"\s*:')
_WINDOW = 1 << 20
_SEARCH_BYTES = 64 << 20  # how far past a share's start a cut is looked for (an M item is 5 MB)


def parts_for(size: int | None, cores: int) -> int:
    """How many parts a file of ``size`` bytes is read in with ``cores`` cores
    (1 when its size is unknown): what the normalize rule asks Snakemake for."""
    if not size:
        return 1
    return max(1, min(cores, MAX_PARTS, size // PART_MIN_BYTES))


def can_fork() -> bool:
    """Whether this process may fork workers: Linux, one thread."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


def cut_points(path, parts: int, pattern: re.Pattern = ITEM_START) -> list[int]:
    """Up to ``parts - 1`` ascending offsets of the commas that ``pattern``
    starts with, one at or after each share (k / parts) of the file; fewer
    where none is found within ``_SEARCH_BYTES``."""
    size = os.path.getsize(path)
    cuts: list[int] = []
    with open(path, "rb") as f:
        for k in range(1, parts):
            at = _next_match(f, max(k * size // parts, cuts[-1] + 1 if cuts else 0), size, pattern)
            if at is not None and at not in cuts:
                cuts.append(at)
    return cuts


def _next_match(f, start: int, size: int, pattern: re.Pattern) -> int | None:
    overlap = 256  # a match that straddles two windows is found in the second
    at = start
    while at < min(size, start + _SEARCH_BYTES):
        f.seek(at)
        data = f.read(_WINDOW + overlap)
        m = pattern.search(data)
        if m is not None:
            return at + m.start()
        if len(data) <= overlap:
            return None
        at += _WINDOW
    return None


class Slice:
    """``prefix``, then bytes ``start`` to ``end`` of the file open as ``fd``,
    then ``suffix``, as a binary file read from the start (``read``; ``seek``
    back to 0 only)."""

    def __init__(self, fd: int, start: int, end: int, prefix: bytes = b"", suffix: bytes = b""):
        self.fd, self.start, self.end, self.prefix, self.suffix = fd, start, end, prefix, suffix
        self.seek(0)

    def read(self, n: int = -1) -> bytes:
        head, body = len(self.prefix), self.end - self.start
        size = head + body + len(self.suffix)
        left = size - self.pos if n is None or n < 0 else min(n, size - self.pos)
        pos, out = self.pos, []
        if left and pos < head:
            out.append(self.prefix[pos:pos + left])
        elif left and pos < head + body:
            out.append(os.pread(self.fd, min(left, head + body - pos), self.start + pos - head))
        elif left:
            out.append(self.suffix[pos - head - body:pos - head - body + left])
        # one piece per read (a short read is allowed): the next read goes on from it
        self.pos += len(out[0]) if out else 0
        return out[0] if out else b""

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) != (0, 0):
            raise ValueError("Slice only rewinds to the start")
        self.pos = 0
        return 0


class Worker:
    """``func()`` in a forked process. :meth:`wait` says whether it returned;
    when it raised, ``error`` holds its one-line reason (from ``error_file``)."""

    def __init__(self, func, error_file: Path):
        self.error_file = Path(error_file)
        self.error: str | None = None
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            code = 1
            try:
                _die_with(parent)
                func()
                code = 0
            except BaseException as e:  # noqa: BLE001 - reported to the parent, which reads in one pass
                try:
                    self.error_file.write_text(f"{type(e).__name__}: {e}\n{traceback.format_exc()}",
                                               encoding="utf-8")
                except BaseException:  # noqa: BLE001
                    pass
            finally:
                os._exit(code)  # no exit handlers, no flush of the parent's buffers

    def wait(self) -> bool:
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        ok = os.waitstatus_to_exitcode(status) == 0
        if not ok:
            try:
                self.error = self.error_file.read_text(encoding="utf-8").splitlines()[0]
            except (OSError, IndexError):
                self.error = f"exit status {os.waitstatus_to_exitcode(status)}"
        return ok

    def kill(self) -> None:
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        self.pid = None


def _die_with(parent: int) -> None:
    """The parent-death signal: the child is killed if the job is."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the signal was set
        os._exit(1)


PART_SUFFIX = ".arrow"  # a part's table, in its worker's folder
_SCRATCH_PREFIX = ".normalize-parts-"  # the workers' folder, in the tables' folder


def _part_paths(part_dir: Path) -> dict:
    """A worker's tables, by name: Arrow files in its folder."""
    return {name: part_dir / f"{name}{PART_SUFFIX}" for name in TABLE_NAMES}


def read_in_parts(path: Path, paths: dict, cuts: list[int], log) -> dict | None:
    """The tables at ``paths`` (by name) of a LongMemEval file cut at ``cuts``
    (:func:`cut_points`), its parts read at once: the job reads the first, a
    forked worker each other one into Arrow files (:func:`_read_part`), and
    the job then appends their rows in file order (:func:`_append_part`).
    None, with the tables and the workers' files gone, when a part does not
    read on its own."""
    from .jsonguard import GuardedReader
    from .readers.common import _first_line, _gc_paused
    from .readers.longmemeval import _LmeTables, _read_items, _Reading

    out_dir = Path(paths["questions"]).parent
    size = path.stat().st_size
    bounds = [0, *cuts, size]
    n = len(bounds) - 1
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(f"{_SCRATCH_PREFIX}*"):  # of a job killed before its cleanup (this one has the lock)
        shutil.rmtree(stale, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=_SCRATCH_PREFIX, dir=out_dir))
    overall = Progress(log, f"normalize {path.name}", unit="items")
    log(f"normalize {path.name}: {n} parts read at once, cut at bytes {', '.join(map(str, cuts))}")
    workers: list[Worker] = []
    tables = None
    try:
        for k in range(1, n):
            part_dir = scratch / f"part{k + 1}"
            part_dir.mkdir()
            read = partial(_read_part, path, bounds[k] + 1, bounds[k + 1], k == n - 1, part_dir, log,
                           f"part {k + 1} of {n}")
            workers.append(Worker(read, part_dir / "error.txt"))
        tables = _LmeTables(path, paths)
        progress = Progress(log, f"normalize {path.name} (part 1 of {n})", unit="items")
        failed = None
        try:
            with open(path, "rb") as raw, _gc_paused():
                f = GuardedReader(Slice(raw.fileno(), 0, bounds[1], suffix=b"]"), escapes=True)
                reading = _Reading()
                _read_items(f, tables, progress, bounds[1], reading)
                if f.error is not None:
                    failed = f"part 1: {f.error}"
                elif reading.index < 0:  # "[ ]" reads, but "[ ,{...}" does not: an item must come before a cut
                    failed = "part 1: no item before the first cut"
        except Exception as e:  # noqa: BLE001 - the one-pass reading reports it, at its place
            failed = f"part 1: {type(e).__name__}: {_first_line(e)}"
        for k, worker in enumerate(workers, 2):
            if failed is None and not worker.wait():
                failed = f"part {k}: {worker.error}"
            if failed is None:
                _append_part(tables, scratch / f"part{k}", log, f"part {k} of {n}")
        if failed is not None:
            log(f"normalize {path.name}: {failed}; reading the file in one pass instead")
            for worker in workers:
                worker.kill()
            tables.abort()
            return None
        tables.close()
    except BaseException:
        for worker in workers:
            worker.kill()
        if tables is not None:
            tables.abort()
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stats = tables.summary()
    overall(stats["items"], ", done", force=True)
    return stats


def _read_part(path: Path, start: int, end: int, last: bool, part_dir: Path, log, label: str) -> None:
    """A worker's part: the items in bytes ``start`` to ``end`` of ``path``
    (read as ``[`` and those bytes, and ``]`` unless ``last``) into Arrow
    files in ``part_dir``, with each new session's digest in key order and
    the part's counts. Anything amiss raises (the job then reads in one pass)."""
    from .jsonguard import GuardedReader
    from .readers.common import _gc_paused
    from .readers.longmemeval import _LmeTables, _read_items, _Reading

    tables = _LmeTables(path, _part_paths(part_dir), part=True)
    progress = Progress(log, f"normalize {path.name} ({label})", unit="items")
    with open(path, "rb") as raw, _gc_paused():
        f = GuardedReader(Slice(raw.fileno(), start, end, b"[", b"" if last else b"]"), escapes=True)
        _read_items(f, tables, progress, end - start, _Reading())
        if f.error is not None:
            raise f.error
    tables.close()
    (part_dir / "digests.bin").write_bytes(b"".join(tables.store.keys))  # in key order: dicts keep it
    (part_dir / "counts.json").write_text(json.dumps(tables.stats), encoding="utf-8")


def _append_part(tables, part_dir: Path, log, label: str) -> None:
    """A worker's part (:func:`_read_part`) appended to ``tables`` as one pass
    would have written it: item numbers after the items so far; each session
    seen before gets its key and is not stored again, each new one the next
    key, in the order the part first saw them (its own key order); duplicate
    question ids counted against every item before."""
    import pyarrow as pa

    from ..core.tables import filter_rows, kernels, take
    from .store import DIGEST_BYTES

    base = tables.stats["questions"]  # items before this part (a part has no unparseable one)
    digests = (part_dir / "digests.bin").read_bytes()
    keys, mapping, is_new = tables.store.keys, [], []
    for i in range(0, len(digests), DIGEST_BYTES):
        digest = digests[i:i + DIGEST_BYTES]
        key = keys.get(digest)
        is_new.append(key is None)
        if key is None:
            key = keys[digest] = len(keys)
        mapping.append(key)
    seen_before = is_new.count(False)
    mapping, is_new = pa.array(mapping, pa.int32()), pa.array(is_new, pa.bool_())
    offset = pa.scalar(base, pa.int32())
    k = kernels()  # pyarrow.compute's add, by its kernel
    for name, writer in tables.writers().items():
        # read batch by batch, not mapped: every page of a mapped part stays resident here, growing
        # with the file (on the 2.7 GB M file a peak of 1.0 GB against 0.8 GB, for 0.5 s less)
        reader = pa.ipc.open_file(pa.OSFile(str(_part_paths(part_dir)[name])))
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            if name in ("sessions", "events"):  # a session seen before is stored once, already
                batch = filter_rows(batch, take(is_new, batch.column("session_key")))
            columns = dict(zip(batch.schema.names, batch.columns))
            if "session_key" in columns:
                columns["session_key"] = take(mapping, columns["session_key"])
            if "haystack_id" in columns:  # a LongMemEval item's haystack is its own: its number
                columns["haystack_id"] = k.call_function("add", [columns["haystack_id"], offset])
            if name == "questions":
                columns["q_index"] = k.call_function("add", [columns["q_index"], offset])
                for qid in columns["question_id"].to_pylist():
                    tables.stats["duplicate_question_ids"] += qid in tables.seen_ids
                    tables.seen_ids.add(qid)
            elif name == "events":
                tables.store.n_events += batch.num_rows
            writer.extend(**columns)
    counts = json.loads((part_dir / "counts.json").read_text(encoding="utf-8"))
    for name in ("questions", "date_fallbacks"):
        tables.stats[name] += counts[name]
    log(f"normalize {tables.path.name} ({label}): {counts['questions']} items appended, "
        f"{seen_before} of its {len(mapping)} sessions seen before")
