"""The table reader every stage uses, and the job processes' import of pandas."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memobench.core.tables import read_table

SRC = Path(__file__).resolve().parents[3] / "src"


@pytest.fixture
def table_path(tmp_path):
    t = pa.table({"k": pa.array([3, 1, None, 2, 1, 7], pa.int32()),
                  "flag": pa.array([True, None, True, False, True, None]),
                  "s": ["c", "a", "n", "b", "a2", "g"]})
    path = tmp_path / "t.parquet"
    pq.write_table(t, path, row_group_size=2)
    return path


@pytest.mark.parametrize("columns", [None, ["s"], ["s", "k"]])
@pytest.mark.parametrize("where, filters", [
    ({"k": [1, 7]}, [("k", "in", [1, 7])]),
    ({"k": []}, None),
    ({"flag": [True]}, [("flag", "=", True)]),
    ({"k": [1, 3], "flag": [True]}, [("k", "in", [1, 3]), ("flag", "=", True)]),
])
def test_read_table_keeps_the_rows_pyarrows_filters_keep(table_path, columns, where, filters):
    """Same rows, order and columns as pyarrow.dataset's filters (nulls never kept)."""
    got = read_table(table_path, columns=columns, where=where)
    if filters is None:
        want = pq.read_table(table_path, columns=columns).slice(0, 0)
    else:
        want = pq.read_table(table_path, columns=[*(columns or ["k", "flag", "s"])], filters=filters)
    assert got.equals(want)


def test_read_table_without_where_is_the_whole_table(table_path):
    assert read_table(table_path).equals(pq.read_table(table_path))
    assert read_table(table_path, columns=["flag"]).column_names == ["flag"]


def _in_fresh_python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}).stdout


def test_a_stage_process_never_imports_pandas_and_pyarrow_still_works(table_path):
    """pyarrow checks for pandas on its first pa.array of a list (0.4 s of
    every job): a job runs without it, and tables still build and read."""
    out = _in_fresh_python(f"""
import sys
from memobench.stages import without_pandas
without_pandas(); without_pandas()
import pyarrow as pa
from memobench.core.tables import read_table
t = pa.Table.from_pydict({{"a": pa.array([1, 2], pa.int8()), "b": ["x", None]}})
n = read_table({str(table_path)!r}, where={{"k": [1]}}).num_rows
print(t.num_rows, n, "pandas" in sys.modules)
try:
    import pandas
except ImportError:
    print("refused")
""")
    assert out.split() == ["2", "2", "False", "refused"]


def test_a_model_stage_keeps_pandas():
    """The stages that run third-party or user model code (the embeddings, a
    user retriever's prepare step) keep their imports; no other stage does."""
    from memobench.stages import all_stages

    stages = all_stages()
    models = {"embeddings", "prepare"}
    assert stages["embeddings"].models and not any(st.models for n, st in stages.items() if n not in models)


# --------------------------------------------------------------------------- atomic writes synced as they grow


@pytest.fixture
def small_sync_step(monkeypatch):
    from memobench.core import atomic

    monkeypatch.setattr(atomic, "SYNC_STEP", 1 << 20)
    monkeypatch.setattr(atomic, "SYNC_POLL_S", 0.005)
    synced: list[int] = []
    real = getattr(os, "fdatasync", os.fsync)

    def record(fd):
        synced.append(os.fstat(fd).st_size)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", record)
    return synced


@pytest.fixture
def failing_sync(monkeypatch, small_sync_step):
    """Every background sync fails as a dying disk would."""

    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", broken)


def _write_slowly(path, chunks: int = 8) -> bytes:
    data = b""
    with open(path, "wb") as f:
        for i in range(chunks):
            piece = bytes([i]) * (512 << 10)
            f.write(piece)
            f.flush()
            data += piece
            time.sleep(0.03)  # the poller's turn
    return data


def test_atomic_path_syncs_a_growing_file_before_it_is_complete(tmp_path, small_sync_step):
    """A file written through atomic_path (by any writer) is synced while it
    grows, each sync covering a larger part, and lands whole."""
    from memobench.core.atomic import atomic_path

    out = tmp_path / "big.bin"
    with atomic_path(out) as tmp:
        data = _write_slowly(tmp)
        assert not out.exists()
    assert out.read_bytes() == data and not (tmp_path / "big.bin.tmp").exists()
    assert small_sync_step and small_sync_step == sorted(small_sync_step)
    assert small_sync_step[0] >= 1 << 20 and small_sync_step[0] < len(data)


def test_a_failed_background_sync_fails_the_write_and_leaves_nothing(tmp_path, failing_sync):
    from memobench.core.atomic import atomic_path

    out = tmp_path / "big.bin"
    with pytest.raises(OSError, match="Input/output error"):
        with atomic_path(out) as tmp:
            _write_slowly(tmp)
    assert not out.exists() and not (tmp_path / "big.bin.tmp").exists()


def test_table_writer_syncs_as_it_grows_and_aborts_cleanly(tmp_path, small_sync_step):
    from memobench.core.tables import TableWriter

    schema = pa.schema([("k", pa.int64()), ("s", pa.string())])
    w = TableWriter(tmp_path / "t.parquet", schema, batch_rows=4096)
    rows = 0
    for i in range(12):
        w.extend(k=list(range(rows, rows + 4096)), s=[os.urandom(96).hex() for _ in range(4096)])
        rows += 4096
        time.sleep(0.02)
    w.close()
    assert pq.ParquetFile(tmp_path / "t.parquet").read().column("k").to_pylist() == list(range(rows))
    assert small_sync_step
    w = TableWriter(tmp_path / "u.parquet", schema)
    w.extend(k=[1], s=["x"])
    w.abort()
    assert not (tmp_path / "u.parquet").exists() and not (tmp_path / "u.parquet.tmp").exists()
    assert not w.behind.is_alive()


def test_a_failed_write_reports_its_own_error_not_the_sync_s(tmp_path, failing_sync):
    """The body's error (a one-line DataError, say) is what the user sees,
    even when the background sync failed too; nothing is left behind."""
    from memobench.core.atomic import atomic_path

    out = tmp_path / "big.bin"
    with pytest.raises(ValueError, match="the body's own error"):
        with atomic_path(out) as tmp:
            _write_slowly(tmp)
            raise ValueError("the body's own error")
    assert not out.exists() and not (tmp_path / "big.bin.tmp").exists()
