"""The one atomic writer (no third-party imports, so light jobs start fast).

A file is written under a temporary name beside its final one and moved into
place only when complete; on any failure the temporary file is removed, so a
half-written file is never visible under its final name.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path

# A large output is synced to disk while it is being written (SyncBehind), so
# the fsync before its rename waits for the last few MB, not the whole file
# (a large retrieval log's fsync alone is otherwise a long wait).
SYNC_STEP = 16 << 20
SYNC_POLL_S = 0.05


def tmp_path(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def commit(tmp: Path, final: Path) -> None:
    """Move a finished temporary file into place (atomic on one filesystem)."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)


class SyncBehind(threading.Thread):
    """Syncs a file to disk while another writer (any library, through its own
    file handle) grows it: whenever :data:`SYNC_STEP` more bytes are there, an
    ``fdatasync`` (the kernel writes the inode's dirty pages, whoever wrote
    them) runs here, with the GIL released, while the writer goes on."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path = path
        self.done = threading.Event()
        self.error: OSError | None = None

    def run(self) -> None:
        sync = getattr(os, "fdatasync", os.fsync)
        fd, synced = None, 0
        try:
            while not self.done.wait(SYNC_POLL_S):
                try:
                    size = os.stat(self.path).st_size
                    if size - synced < SYNC_STEP:
                        continue
                    if fd is None:
                        fd = os.open(self.path, os.O_RDONLY)
                except FileNotFoundError:  # not written yet
                    continue
                sync(fd)
                synced = size
        except OSError as e:  # raised by the writer's thread (finish)
            self.error = e
        finally:
            if fd is not None:
                os.close(fd)

    def finish(self, quiet: bool = False) -> None:
        """Stop and wait; raise the sync's error unless ``quiet`` (the write
        failed already: its own error is the one to report)."""
        self.done.set()
        self.join()
        if self.error is not None and not quiet:
            raise self.error


@contextmanager
def atomic_path(path):
    """Yields a temporary path beside ``path``; on success the file is moved
    into place, on any failure it is removed. What is written there is synced
    to disk as it grows (:class:`SyncBehind`), the rest before the move."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path(path)
    tmp.unlink(missing_ok=True)
    behind = SyncBehind(tmp)
    behind.start()
    try:
        try:
            yield tmp
        except BaseException:
            behind.finish(quiet=True)
            raise
        behind.finish()
        commit(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path, text: str) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


@contextmanager
def locked(path):
    """Holds an exclusive lock on the file at ``path`` (made when missing) across processes; yields
    whether it is held (False on a filesystem without locks, where the caller's work must stay
    correct unlocked)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
