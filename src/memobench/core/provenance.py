"""What produced a result: package and source fingerprint, Python, SQLite (with
whether FTS5 is compiled in), pyarrow and ijson (with its backend), and the
installed versions of Snakemake, numpy, pandas and scipy. Recorded in
``results/manifest.json`` and every ``metrics.json``, so a rerun on another
SQLite or another package version is visible next to its numbers."""

from __future__ import annotations

import hashlib
import os
import platform
import sqlite3
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# Parquet key-value metadata key under which a retrieve job records its provenance.
PROVENANCE_KEY = b"memobench.core.provenance"
# read from the installed distributions' metadata, not imported: the package never imports Snakemake
DISTRIBUTIONS = ("snakemake", "numpy", "pandas", "scipy")


def source_fingerprint() -> str:
    """sha256 (16 hex) over every source file of the package, by relative name."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".txt", ".json") and "__pycache__" not in path.parts:
            h.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def fts5_available() -> bool:
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


def distribution_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


@lru_cache(maxsize=1)
def provenance() -> dict:
    import ijson
    import pyarrow

    from .. import __version__

    return {
        "memobench": __version__,
        "source": source_fingerprint(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "fts5": fts5_available(),
        "pyarrow": pyarrow.__version__,
        "ijson": f"{ijson.__version__} ({ijson.backend})",
        **{name: distribution_version(name) for name in DISTRIBUTIONS},
    }


def file_stamp(path) -> dict:
    """Size, modification time and inode: a replaced file changes at least one,
    whatever its size (the verify rule's rerun trigger)."""
    st = os.stat(path)
    return {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def file_digest(path) -> dict:
    """Size and sha256 of ``path``'s bytes: a rerun trigger that changes exactly when its content does. A
    file rewritten with the same bytes (a new mtime) keeps it; one replaced by other bytes, even with an
    older mtime, changes it. Hashed once per stamp (:func:`file_stamp`) in this process: Snakemake asks
    for each job's params more than once."""
    st = os.stat(path)
    return dict(_digest(str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ino))


@lru_cache(maxsize=256)
def _digest(path: str, size: int, mtime_ns: int, inode: int) -> tuple:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return (("bytes", size), ("sha256", h.hexdigest()))
