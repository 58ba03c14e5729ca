"""The one atomic writer (no third-party imports, so light jobs start fast).

A file is written under a temporary name beside its final one and moved into
place only when complete; on any failure the temporary file is removed, so a
half-written file is never visible under its final name.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path


def tmp_path(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def commit(tmp: Path, final: Path) -> None:
    """Move a finished temporary file into place (atomic on one filesystem)."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)


@contextmanager
def atomic_path(path):
    """Yields a temporary path beside ``path``; on success the file is moved
    into place, on any failure it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path(path)
    tmp.unlink(missing_ok=True)
    try:
        yield tmp
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
