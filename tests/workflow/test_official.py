"""The exports and official metrics through the real workflow, cross-checked
with an established evaluator: ir_measures (trec_eval via pytrec_eval) reads
each variant's run.trec and the dataset's qrels.trec and must give the
harness's hit@k (Success@k) and MRR (RR@10) of metrics.json, on the real
LoCoMo file and on a generated LongMemEval file; the same runs then feed the
Snakemake report and the statistics."""

from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from tests.helpers import data_dir, snakemake, write_config
from memobench.evaluation import official
from memobench.tools.generate.longmemeval import write_longmemeval

ir_measures = pytest.importorskip("ir_measures")
from ir_measures import RR, Success  # noqa: E402

LME_VARIANTS = ["v0.8.0", "v0.8.0-index", "v0.5.0", "v0.4.0", "exp-V1", "exp3-T2h", "exp4-A2+15"]
LOCOMO_VARIANTS = ["v0.8.0", "v0.8.0-index", "v0.5.0", "v0.4.0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, locomo_path):
    root = tmp_path_factory.mktemp("official")
    lme = root / "gen.json"
    write_longmemeval(lme, n_questions=80, sessions_per_question=20, seed=11)
    data = data_dir(root, locomo_path)
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=["locomo10", "gen"], datasets={
        "locomo10": {"variants": LOCOMO_VARIANTS},
        "gen": {"format": "longmemeval", "family": "s", "file": str(lme), "bytes": lme.stat().st_size,
                "segments": 2, "variants": LME_VARIANTS},
    }, exports={"retrieval_log": ["gen/v0.8.0", "gen/exp-V1"]})
    snakemake(root, "--cores", "2", configfile=cfg)
    return root, cfg


def _evaluate(results, dataset, variant):
    qrels = list(ir_measures.read_trec_qrels(str(results / dataset / "qrels.trec")))
    run = list(ir_measures.read_trec_run(str(results / dataset / variant / "run.trec")))
    sums = {"hit@1": 0.0, "hit@5": 0.0, "hit@10": 0.0, "mrr_sum": 0.0}
    names = {Success @ 1: "hit@1", Success @ 5: "hit@5", Success @ 10: "hit@10", RR @ 10: "mrr_sum"}
    per_query = {}
    for m in ir_measures.iter_calc(list(names), qrels, run):
        sums[names[m.measure]] += m.value
        per_query.setdefault(m.query_id, {})[names[m.measure]] = m.value
    return sums, per_query


@pytest.mark.parametrize("dataset,variants", [("locomo10", LOCOMO_VARIANTS), ("gen", LME_VARIANTS)])
def test_trec_exports_give_the_harness_numbers_under_trec_eval(runs, dataset, variants):
    results = runs[0] / "results"
    for variant in variants:
        m = json.loads((results / dataset / variant / "metrics.json").read_text())
        sums, per_query = _evaluate(results, dataset, variant)
        # A question the harness evaluates without a list (counted as a miss) adds 0 either way.
        for k in ("hit@1", "hit@5", "hit@10"):
            assert sums[k] == m[k], (dataset, variant, k)
            assert sums[k] / m["hit_denominator"] == m[k + "_rate"]
        assert math.isclose(sums["mrr_sum"], m["mrr_sum"], rel_tol=1e-12), (dataset, variant)
        # question by question: trec_eval's reciprocal rank is the harness's 1/gold_rank
        outcomes = pq.read_table(results / dataset / variant / "segments" / "seg1.outcomes.parquet").to_pylist()
        for o in outcomes:
            if o["status"] == "evaluated" and o["gold_rank"] > 0:
                assert per_query[o["question_id"]]["mrr_sum"] == 1 / o["gold_rank"]


def test_qrels_and_run_format(runs):
    results = runs[0] / "results"
    qrels = (results / "locomo10" / "qrels.trec").read_text().splitlines()
    questions = pq.read_table(results / "locomo10" / "normalized" / "questions.parquet").to_pylist()
    assert len(qrels) == sum(len(q["gold"]) for q in questions)
    assert all(line.split()[1] == "0" and line.split()[3] == "1" for line in qrels)
    run = (results / "locomo10" / "v0.8.0" / "run.trec").read_text().splitlines()
    ranked = pq.read_table(results / "locomo10" / "v0.8.0" / "deep.parquet").to_pylist()  # depth 50
    assert len(run) == len(ranked) > pq.read_metadata(results / "locomo10" / "v0.8.0" / "rankings.parquet").num_rows
    for line, r in zip(run, ranked):
        qid, q0, sid, rank, score, tag = line.split(" ")
        assert (qid, q0, sid, int(rank), int(score), tag) == (r["question_id"], "Q0", r["session_id"], r["rank"],
                                                              51 - r["rank"], "v0.8.0")


def test_official_locomo_recall_any_is_hit_at_k_over_the_same_questions(runs):
    """On LoCoMo, with the harness's lists, recall_any@k counts the questions
    with an evidence session in the top k: hit@k's count (the questions the
    harness skips for an empty window count as misses in the official view)."""
    results = runs[0] / "results"
    for variant in LOCOMO_VARIANTS:
        m = json.loads((results / "locomo10" / variant / "metrics.json").read_text())
        o = json.loads((results / "locomo10" / variant / "official.json").read_text())["official"]
        assert o["questions"] == m["questions"] + m["skipped"].get("empty_window", 0)
        assert o["excluded"]["no_evidence"] == m["skipped"].get("no_gold", 0)
        for k in (1, 5, 10):
            assert round(o[f"recall_any@{k}"] * o["questions"]) == m[f"hit@{k}"]
        deep = pq.read_table(results / "locomo10" / variant / "deep.parquet").column("rank").to_pylist()
        assert o["depth"] == max(deep) > 10  # the deep lists (a LoCoMo haystack has at most ~35 sessions)
        c = o["categories_1_4"]
        assert 0 < c["questions"] < o["questions"]


def test_retrievallog_matches_official_json(runs):
    results = runs[0] / "results"
    norm = results / "gen" / "normalized"
    for variant in ("v0.8.0", "exp-V1"):
        o = json.loads((results / "gen" / variant / "official.json").read_text())["official"]
        text = (results / "gen" / variant / "retrievallog.jsonl").read_text().splitlines()
        lines = [json.loads(x) for x in text]
        assert len(lines) == 80
        # each line is the JSON of one object as json.dumps writes it (the sessions are joined ready-made)
        assert all(x == json.dumps(y, ensure_ascii=False) for x, y in zip(text, lines))
        raw = {e["question_id"]: e for e in json.loads((runs[0] / "gen.json").read_text())}
        hay = official.read_haystacks(norm / "haystacks.parquet")
        kept = []
        for i, line in enumerate(lines):
            rr = line["retrieval_results"]
            assert rr["query"] == line["question"]
            # in the order LongMemEval's log lists them
            assert list(rr["metrics"]["session"]) == [f"{m}@{k}" for k in (1, 3, 5, 10, 30, 50)
                                                      for m in ("recall_any", "recall_all", "ndcg_any")]
            assert line["haystack_session_ids"] == hay[i]["ids"]
            assert line["haystack_sessions"] == raw[line["question_id"]]["haystack_sessions"]
            for item in rr["ranked_items"]:
                assert item["corpus_id"].replace("noans", "answer") in hay[i]["ids"]
            has_target = any(t.get("has_answer") and t["role"] == "user" for s in line["haystack_sessions"] for t in s)
            if "_abs" not in line["question_id"] and has_target:
                kept.append(rr["metrics"]["session"])
        assert len(kept) == o["questions"] and o["excluded"]["no_user_target"] > 0
        for name in ("recall_any@5", "recall_all@10", "ndcg_any@10"):
            assert math.fsum(s[name] for s in kept) / len(kept) == pytest.approx(o[name], abs=1e-12)


def test_stats_and_report(runs):
    root, cfg = runs
    results = root / "results"
    stats = json.loads((results / "gen" / "stats.json").read_text())
    pairs = {(c["variant"], c["baseline"]) for c in stats["comparisons"]}
    assert ("v0.4.0", "v0.8.0") in pairs and ("v0.8.0-index", "v0.8.0") in pairs
    assert all(c["n"] > 0 for c in stats["comparisons"])
    html = (results / "report.html").read_text()
    assert "<pre>" not in html and "<table>" in html
    assert "HARNESS metrics" in html and "OFFICIAL metrics" in html and "recall_all@10" in html
    assert "forest.png" in html and "heatmap.png" in html
    # Snakemake's own report over the finished run
    snakemake(root, "--report", str(root / "snake-report.html"), configfile=cfg)
    assert (root / "snake-report.html").stat().st_size > 10_000
    # nothing left to do, and the statistics are byte-identical when recomputed
    before = (results / "gen" / "stats.json").read_bytes()
    snakemake(root, "--cores", "1", "--forcerun", "stats", "results/gen/stats.json", configfile=cfg)
    assert (results / "gen" / "stats.json").read_bytes() == before
