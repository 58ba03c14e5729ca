"""Timings of the in-process retrievers (retrieval/timings.py): every call of
a reference retriever, a Python retriever (its determinism check's second
call a warm repeat) and a fusion's step is one row, cold on the first call of
its haystack in the job; a Memo variant's table is empty and says why; and
the latency page is planned for them only beside a memory service or when
config asks for it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from memobench.catalog.variants import resolve
from memobench.core import layout
from memobench.datasets.normalize import normalize_longmemeval
from memobench.retrieval.python import DETERMINISM_SAMPLE
from memobench.retrieval.sharing import _write_timings, write_segment
from memobench.retrieval.timings import MEASURES, UNTIMED_MEMO, read_meta
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers.services import rank_one_segment

RANKER = '''
def rank(question, haystack):
    words = set(question.text.lower().split())
    return sorted(range(len(haystack.ids)), key=lambda i: -len(words & set(haystack.texts[i].lower().split())))
'''


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    root = tmp_path_factory.mktemp("timings")
    raw = root / "lme.json"
    write_longmemeval(raw, 6, 6, seed=4, turns=(2, 4), words_per_turn=(4, 20))
    normalize_longmemeval(raw, root / "norm", log=lambda m: None)
    return root / "norm"


def _timings(root: Path, name: str) -> tuple[list[dict], dict]:
    path = layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name, segment="seg1")
    return pq.read_table(path).to_pylist(), read_meta(path)


def _ranked(outcomes) -> int:
    """The questions a variant ranked (not skipped)."""
    return sum(1 for r in outcomes.to_pylist() if r["status"] == "evaluated")


def test_a_reference_retriever_is_timed_per_call_and_a_memo_variant_says_why_not(norm, tmp_path):
    (_, outcomes, _), _ = rank_one_segment(norm, tmp_path, "bm25s")
    rows, meta = _timings(tmp_path, "bm25s")
    assert meta["timed"] and meta["measures"] == MEASURES["reference"] and meta["variant"] == "bm25s"
    assert len(rows) == _ranked(outcomes) > 0
    assert all(r["operation"] == "search" and r["ok"] and r["seconds"] > 0 and r["attempts"] == 1 for r in rows)
    # one cold call per distinct haystack: the first, which builds that haystack's index
    firsts = {}
    for r in rows:
        firsts.setdefault(r["namespace"], r["question_id"])
    assert {r["question_id"] for r in rows if r["phase"] == "cold"} == set(firsts.values())
    # the Memo engine ranks its variants in one pass: nothing of one variant's is timed
    memo = tmp_path / "memo.parquet"
    _write_timings(memo, resolve("v0.8.0", "s"), SimpleNamespace(timings={}), "lme")
    assert pq.read_table(memo).num_rows == 0
    assert read_meta(memo) == {"dataset": "lme", "variant": "v0.8.0", "timed": False, "why": UNTIMED_MEMO}


def test_a_python_retriever_and_a_fusion_are_timed(norm, tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(RANKER, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    entry = {"retriever": {"callable": "mine.py:rank"}}
    (_, outcomes, _), _ = rank_one_segment(norm, tmp_path, "mine", entry)
    rows, meta = _timings(tmp_path, "mine")
    assert meta["measures"] == MEASURES["python"]
    ranked = _ranked(outcomes)
    # every call of the function: the determinism check calls the first questions twice (timed as warm)
    assert len(rows) == ranked + min(DETERMINISM_SAMPLE, ranked)
    first = rows[0]["question_id"]
    assert [r["phase"] for r in rows if r["question_id"] == first][:2] == ["cold", "warm"]

    rank_one_segment(norm, tmp_path, "bm25s")
    deep = [layout.path(layout.SEGMENT_TABLE, root=tmp_path / "results", dataset="lme", variant=n, segment="seg1",
                        suffix=layout.SEGMENT_SUFFIXES["deep"]) for n in ("bm25s", "mine")]
    v = resolve("fused", "s", {"mine": entry, "fused": {"fuse": {"of": ["bm25s", "mine"]}}})
    t = layout.table_paths(norm)
    outs = {k: tmp_path / f"fused.{k}.parquet" for k in ("rankings", "outcomes", "deep", "timings")}
    write_segment(v, t["questions"], t["haystacks"], None, 1, 1, outs["rankings"], outs["outcomes"],
                  deep_out=outs["deep"], log=lambda m: None, timings_out=outs["timings"], dataset="lme",
                  inputs={"fused": deep})
    rows = pq.read_table(outs["timings"]).to_pylist()
    assert read_meta(outs["timings"])["measures"] == MEASURES["fusion"]
    assert len(rows) == _ranked(pq.read_table(outs["outcomes"])) and all(r["seconds"] >= 0 for r in rows)


def test_the_latency_page_is_planned_beside_a_service_or_when_asked(tmp_path):
    from memobench import plan
    from memobench.catalog.variant import to_spec

    def pairs(variants, latency=False, custom=None):
        config = {"run": ["lme"], "latency": latency, "variants": custom or {},
                  "datasets": {"lme": {"format": "longmemeval", "family": "s", "segments": 1, "variants": variants}}}
        specs = {"lme": {v: to_spec(resolve(v, "s", custom or {})) for v in variants}}
        return plan.timed_pairs(config, specs)

    assert pairs(["v0.8.0", "bm25s"]) == []
    assert pairs(["v0.8.0", "bm25s"], latency=True) == [("lme", "bm25s")]
    svc = {"svc": {"system": {"url": "http://127.0.0.1:9"}}}
    assert pairs(["v0.8.0", "bm25s", "svc"], custom=svc) == [("lme", "bm25s"), ("lme", "svc")]
    assert json.dumps(MEASURES, sort_keys=True)  # every timed kind says what its rows measure


def test_each_latency_row_says_what_its_cold_search_includes():
    """An in-process retriever's cold p50 holds its index build, a service's
    its first search after ingestion: the row of each says which."""
    from memobench.reporting.latency import blocks
    from memobench.retrieval.timings import COLD

    def summary(variant, kind, measures):
        q = {"ms": 5.0, "low": 4.0, "high": 6.0}
        return {"dataset": "lme", "variant": variant, "hit@5": 0.5, "searches": 2, "failed": 0, "kind": kind,
                "measures": measures, "cold": {"n": 1, "p50": q}, "warm": {"n": 1, "p50": q, "p95": q, "p99": q},
                "outside_server": {"n": 0}, "ingest": {"sessions": 0, "p50_ms": None, "sessions_per_s": None}}

    page = blocks([summary("bm25s", "reference", MEASURES["reference"]),
                   summary("svc", "system", MEASURES["system"])], "latency.png")
    (table,) = [b for b in page if hasattr(b, "rows")]
    col = table.header.index("a cold search includes")
    assert table.header[col - 1] == "cold p50 (ms)"
    assert [r[col] for r in table.rows] == [COLD["reference"], COLD["system"]]
    assert "index" in COLD["reference"] and "ingestion is not in it" in COLD["system"]


def test_failed_and_retried_searches_are_counted_beside_the_percentiles():
    """A failed search is out of the percentiles and counted; a search answered after retries is in them,
    timed from its first attempt, and counted as retried."""
    from memobench.evaluation.latency import summarize
    from memobench.reporting.latency import blocks

    def row(seconds, attempts, ok, phase="warm"):
        return {"operation": "search", "phase": phase, "seconds": seconds, "attempts": attempts, "ok": ok,
                "server_seconds": None}

    rows = [row(0.01, 1, True, "cold"), row(0.02, 1, True), row(3.5, 4, True), row(2.0, 4, False)]
    s = summarize("lme", "svc", rows, {"hit@5_rate": 0.5})
    assert (s["searches"], s["failed"], s["retried"]) == (4, 1, 1)
    assert s["warm"]["n"] == 2 and s["warm"]["p99"]["ms"] > 3000  # the retried search's whole time
    page = blocks([{**s, "kind": "system", "measures": MEASURES["system"]}], "latency.png")
    (table,) = [b for b in page if hasattr(b, "rows")]
    col = table.header.index("searches (cold / warm, failed, retried)")
    assert table.rows[0][col] == "1 / 2, 1, 1"


def test_ingested_sessions_are_counted_by_session_not_by_request():
    """A batch ingest sends a haystack in one request, and a session sent in parts takes several: the
    sessions ingested (and sessions/s) come from the namespaces' ingestion rows, not the request count."""
    from memobench.evaluation.latency import summarize

    def row(operation, seconds, value=None):
        return {"operation": operation, "phase": "", "seconds": seconds, "attempts": 1, "ok": True,
                "server_seconds": None, "value": value}

    batch = [row("ingest", 0.5), row("ingestion", 0.5, 10), row("ingest", 0.5), row("ingestion", 0.5, 10)]
    s = summarize("lme", "svc", batch, {})["ingest"]
    assert s["sessions"] == 20 and s["sessions_per_s"] == pytest.approx(20.0) and s["per_session_ms"] == 50.0
    parts = [row("ingest", 0.1) for _ in range(4)] + [row("ingestion", 0.4, 2)]  # 2 sessions in 4 parts
    s = summarize("lme", "svc", parts, {})["ingest"]
    assert s["sessions"] == 2 and s["sessions_per_s"] == pytest.approx(5.0)
    # timings written before ingestion rows: one request per session, as then
    s = summarize("lme", "svc", [row("ingest", 0.1), row("ingest", 0.3)], {})["ingest"]
    assert s["sessions"] == 2 and s["sessions_per_s"] == pytest.approx(5.0)


def test_a_load_level_measured_in_several_segments_is_their_searches_over_their_windows():
    """Each retrieve job (segment) measures its own load curve; the variant's figure for a level is every
    segment's answered searches over the sum of their windows, not all searches over one window."""
    from memobench.evaluation.latency import summarize

    rows = []
    for ns in ("a", "b"):  # two segments, each 40 searches at 1 in flight in 0.4 s
        rows += [{"operation": "load", "phase": "1", "namespace": ns, "seconds": 0.01, "attempts": 1, "ok": True,
                  "server_seconds": None, "value": None} for _ in range(40)]
        rows.append({"operation": "load_window", "phase": "1", "namespace": ns, "seconds": 0.4, "attempts": None,
                     "ok": True, "server_seconds": None, "value": 40})
    got = summarize("lme", "svc", rows, {})["load"]["1"]
    assert got["searches"] == 80 and got["seconds"] == pytest.approx(0.8)
    assert got["searches_per_s"] == pytest.approx(100.0)
