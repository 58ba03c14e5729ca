"""One JSON array read in parts, each on its own core.

A LongMemEval file is one JSON array, read by one streaming parser; on a
2.7 GB file that is most of a cold run, one core working. Here the file is
cut at item boundaries into parts that forked processes read at once; the
first part is read by the job itself, which then appends the others' rows in
file order (normalize.py), so the tables are the same bytes as one pass's.

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

Workers are forked, never spawned (no interpreter start, no imports), and
only from a process with a single thread (a fork copies no other thread, and
a lock another thread held would stay held in the child); each dies with its
parent (Linux's parent-death signal).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import traceback
from pathlib import Path

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
