"""Long stages say how far they are: done / total, the percentage and the
rate in the job's log as they go, and on the console once a job has run for
a while (memobench.core.progress); the embeddings stage reports each batch."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers import REPO
from memobench.core import progress as pr

LINE = re.compile(r"^(?P<what>.+): (?P<done>\d+) / (?P<total>\d+) (?P<unit>\w+) \((?P<pct>\d+)%, "
                  r"(?P<rate>[\d,.]+) (?P=unit)/s(, (?P<left>\d+ (s|min)) left)?\)")


class Clock:
    """time.monotonic for progress.py: ``t``, advanced by ``step`` at every call."""

    def __init__(self):
        self.t, self.step = 1000.0, 0.0

    def __call__(self):
        self.t += self.step
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(pr.time, "monotonic", c)
    monkeypatch.setattr(pr, "_console", None)
    return c


def test_lines_give_done_total_share_and_rate_at_most_every_interval(clock):
    log, console = [], []
    pr.set_console(console.append)
    p = pr.Progress(log.append, "tokens js", total=1000, every_s=5, unit="events")
    for i in range(1, 1001):
        clock.t += 0.1  # 100 s in all, 10 events a second
        p(i)
    p(1000, ", done", force=True)
    assert 19 <= len(log) <= 21, log  # one line per 5 s
    m = LINE.match(log[0])
    assert m and m["what"] == "tokens js" and m["total"] == "1000" and m["unit"] == "events"
    assert float(m["rate"]) == pytest.approx(10, rel=0.05)
    # the time left at that rate: what is left at 10 events a second (the first line's 950: 95 s, 2 min)
    left_s = (1000 - int(m["done"])) / 10
    assert m["left"] == (f"{left_s:.0f} s" if left_s < 90 else f"{left_s / 60:.0f} min"), log[0]
    # every line says it until the last, when nothing is left
    assert all(LINE.match(x)["left"] for x in log[:-1]) and LINE.match(log[-1])["left"] is None, log
    assert log[-1] == "tokens js: 1000 / 1000 events (100%, 10.0 events/s), done"
    # the console: a line once the job has run 30 s, then every 30 s, and the last one
    assert 3 <= len(console) <= 4 and console[-1] == log[-1] and set(console) <= set(log)
    assert int(LINE.match(console[0])["done"]) >= 300


def test_a_short_job_prints_nothing_on_the_console(clock):
    log, console = [], []
    pr.set_console(console.append)
    p = pr.Progress(log.append, "retrieve", total=10, every_s=5, unit="questions")
    for i in range(1, 11):
        clock.t += 1
        p(i)
    p(10, ", done", force=True)
    assert log and console == []


def test_a_stage_run_by_the_workflow_reports_on_the_console(tmp_path):
    """run_logged (every rule's job) puts a long job's progress on stderr
    under the job's name; the log has every line."""
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from memobench.core import progress as pr\n"
            "from memobench.stages import run_logged\n"
            "t = [0.0]\n"
            "pr.time.monotonic = lambda: t[0]\n"
            "def stage(job):\n"
            "    p = pr.Progress(job.log, 'normalize x.json', total=100, unit='items')\n"
            "    for i in range(1, 101):\n"
            "        t[0] += 1\n"
            "        p(i)\n"
            "    p(100, ', done', force=True)\n"
            "run_logged(sys.argv[2], stage, {}, {}, {}, {}, console='normalize mine')\n")
    log = tmp_path / "x.log"
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "src"), str(log)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and all(ln.startswith("memobench: normalize mine: normalize x.json: ") for ln in lines)
    assert lines[-1] == "memobench: normalize mine: normalize x.json: 100 / 100 items (100%, 1.0 items/s), done"
    assert len(log.read_text().splitlines()) == 21  # every 5 s, and the end


def test_embeddings_report_each_batch_with_the_total(clock, tmp_path):
    """The MiniLM stage used to log nothing until a chunk of 4096 sessions was
    done (166 s of silence on LoCoMo's 272 sessions): now every batch, out of
    the total."""
    dense = pytest.importorskip("memobench.retrieval.reference.dense")
    from memobench.retrieval.reference.embeddings import embed_sessions
    from memobench.core.errors import ConfigError
    from memobench.tools.generate.longmemeval import write_longmemeval
    from memobench.datasets.normalize import normalize_longmemeval

    try:
        model = dense.MiniLM(device="cpu", batch_size=4)
    except ConfigError as e:
        pytest.skip(str(e))
    raw = tmp_path / "s.json"
    write_longmemeval(raw, 3, 4, seed=2, turns=(2, 3), words_per_turn=(3, 8))
    norm = tmp_path / "norm"
    normalize_longmemeval(raw, norm, log=lambda m: None)
    log: list[str] = []
    clock.step = 10  # every call is due
    stats = embed_sessions(norm / "events.parquet", "longmemeval", tmp_path / "e.parquet", log=log.append,
                           encoder=model, sessions_path=norm / "sessions.parquet")
    rows = [m for m in map(LINE.match, log) if m]
    n = stats["sessions"]
    assert n >= 8 and len(rows) >= n // 4 + 1, log  # a line per batch of 4, and the end
    assert {m["total"] for m in rows} == {str(n)} and rows[-1]["done"] == str(n)
    assert [int(m["done"]) for m in rows] == sorted(int(m["done"]) for m in rows)


@pytest.mark.parametrize("names", [("bm25s",), ("v0.8.0",), ("v0.8.0", "bm25s")])
def test_a_segments_progress_line_reads_what_then_counts(tmp_path, names):
    """The retrieve job's last progress line names the variant and segment
    once, then the counts: ``bm25s segment 1/1: 9 / 9 questions (...)``."""
    from memobench.datasets import normalize
    from memobench.catalog import variants
    from memobench.retrieval import sharing as retrievers

    normalize.normalize_longmemeval(REPO / ".test/data/lme_tiny.json", tmp_path, log=lambda m: None)
    vs = [variants.resolve(n, "s") for n in names]
    outs = {v.name: {k: tmp_path / f"{v.name}.{k}.parquet" for k in ("rankings", "outcomes", "deep")} for v in vs}
    lines = []
    retrievers.write_segments(vs, tmp_path / "questions.parquet", tmp_path / "haystacks.parquet",
                              tmp_path / "events.parquet", 1, 1, outs, log=lines.append)
    counted = [ln for ln in lines if re.search(r": \d+ / \d+ questions", ln)]
    assert counted, lines
    label = names[0] if len(names) == 1 else f"{len(names)} variants"
    for ln in counted:
        m = LINE.match(ln)
        assert m and m["what"].startswith(f"{label} segment 1/1") and "::" not in ln, ln
