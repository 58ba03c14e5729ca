"""normalize's tables are written by a thread while the file is parsed: the
files must be those of writing in place, and a failed write must fail the
job with its own error and leave no file (finished or temporary) behind."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from memobench.datasets import normalize as nz
from memobench.datasets import store


def _items(n=40, sessions=30, turns=6):
    return [{"question_id": f"q{i}", "question_type": "t", "question": f"question {i}?",
             "question_date": "2023/05/30 (Tue) 23:40",
             "haystack_session_ids": [f"s{(i * 7 + j) % 500}" for j in range(sessions)],
             "haystack_dates": ["2023/05/20 (Sat) 02:21"] * sessions,
             "haystack_sessions": [[{"role": "user" if k % 2 else "assistant",
                                     "content": f"turn {k} of session {(i * 7 + j) % 500} \u00e9" * (1 + k % 3)}
                                    for k in range(turns)] for j in range(sessions)],
             "answer_session_ids": [f"s{i * 7 % 500}"]} for i in range(n)]


@pytest.fixture()
def lme(tmp_path):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(_items()), encoding="utf-8")
    return path


def _inline(monkeypatch):
    """Batches written where they are handed over (the former behaviour)."""
    monkeypatch.setattr(store._WriteBehind, "put", lambda self, writer, batch, rows:
                        writer.write_batch(batch, row_group_size=rows))


def test_same_files_as_writing_in_place(lme, tmp_path, monkeypatch):
    monkeypatch.setattr(store._BehindWriter.__init__, "__defaults__", (64,))  # many row groups, many hand-overs
    a = nz.normalize_longmemeval(lme, tmp_path / "behind", log=lambda m: None)
    _inline(monkeypatch)
    b = nz.normalize_longmemeval(lme, tmp_path / "inline", log=lambda m: None)
    assert a == b
    for t in ("questions", "haystacks", "sessions", "events"):
        assert (tmp_path / "behind" / f"{t}.parquet").read_bytes() == (tmp_path / "inline" / f"{t}.parquet").read_bytes()
    assert pq.ParquetFile(tmp_path / "behind" / "events.parquet").metadata.num_row_groups > 10


@pytest.mark.parametrize("fail_at", [1, 3, 10 ** 6])  # the first row group, a later one, none before close
def test_failed_write_fails_the_job(lme, tmp_path, monkeypatch, fail_at):
    monkeypatch.setattr(store._BehindWriter.__init__, "__defaults__", (64,))
    calls = {"n": 0}
    real = pq.ParquetWriter.write_batch

    def write_batch(self, batch, row_group_size=None):
        calls["n"] += 1
        if calls["n"] == fail_at or (fail_at > 10 ** 5 and batch.num_rows < 64 and "text" in batch.schema.names):
            raise OSError(28, "No space left on device (test)")
        return real(self, batch, row_group_size=row_group_size)

    monkeypatch.setattr(pq.ParquetWriter, "write_batch", write_batch)
    out = tmp_path / "out"
    with pytest.raises(OSError, match=r"No space left on device \(test\)"):
        nz.normalize_longmemeval(lme, out, log=lambda m: None)
    assert calls["n"] >= 1
    assert sorted(p.name for p in out.iterdir()) == []
