"""LongMemEval's official retrieval metrics and LoCoMo's evidence recall,
against hand-computed values for every rule of docs/protocol.md#official-metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memobench.runs import retrieval_log
from memobench.evaluation import official
from memobench.core.errors import DataError
from memobench.datasets.normalize import normalize_locomo, normalize_longmemeval
from memobench.retrieval.memo import RANKINGS

L3 = math.log2(3)


# ------------------------------------------------------------ the rule functions


def test_scoring_id_renames_answer_without_user_has_answer():
    assert official.scoring_id("answer_abc_1", True) == "answer_abc_1"
    assert official.scoring_id("answer_abc_1", False) == "noans_abc_1"
    assert official.scoring_id("xanswer_answer", False) == "xnoans_noans"  # every occurrence
    assert official.scoring_id("sharegpt_1", False) == "sharegpt_1"


def test_dcg_keeps_the_odd_discount():
    # ranks 1 and 2 undiscounted, rank 3 / log2(3), rank 4 / 2
    assert official.dcg([1, 1, 1, 1]) == pytest.approx(1 + 1 + 1 / L3 + 1 / 2)
    assert official.dcg([0, 1]) == 1.0  # textbook DCG would give 1/log2(3)
    assert official.dcg([]) == 0.0


def test_gold_at_rank_two_is_undiscounted():
    scoring = ["f1", "answer_a", "f2"]
    m = official.lme_question_metrics([0, 1, 2], scoring)
    assert m["ndcg_any@1"] == 0.0
    assert m["ndcg_any@3"] == 1.0
    m = official.lme_question_metrics([0, 2, 1], scoring)
    assert m["ndcg_any@3"] == pytest.approx(1 / L3)
    assert m["recall_any@1"] == 0.0 and m["recall_any@3"] == 1.0


def test_duplicates_inside_a_haystack_count_in_the_ideal():
    # "answer_x" twice in the haystack: two relevant documents, one gold id.
    scoring = ["answer_x", "f1", "answer_x", "f2"]
    # a harness list names the id once (its first position)
    m = official.lme_question_metrics([1, 0], scoring)
    assert m["recall_any@1"] == 0.0 and m["recall_all@3"] == 1.0
    # actual [0, 1] -> 1; ideal [1, 1, 0] -> 2
    assert m["ndcg_any@3"] == pytest.approx(0.5)
    # ideal@50 is still [1, 1, 0, 0] -> 2 (the whole haystack, not the list)
    assert m["ndcg_any@50"] == pytest.approx(0.5)
    # a ranker of the whole corpus ranks both copies
    m = official.lme_question_metrics([0, 2, 1, 3], scoring)
    assert m["ndcg_any@1"] == 1.0 and m["ndcg_any@3"] == pytest.approx(1.0)
    m = official.lme_question_metrics([1, 0, 3, 2], scoring)
    # actual [0, 1, 0, 1] = 1 + 1/2; ideal [1, 1, 0, 0] = 2
    assert m["ndcg_any@5"] == pytest.approx(1.5 / 2)


def test_ranked_positions_maps_the_nth_copy_to_the_nth_position():
    hay = ["a", "b", "a", "c"]
    assert official.ranked_positions(["b", "a", "a"], hay) == [1, 0, 2]
    with pytest.raises(DataError, match="ranked more often"):
        official.ranked_positions(["a", "a", "a"], hay)
    with pytest.raises(DataError, match="'z' is not in its haystack"):
        official.ranked_positions(["z"], hay, "r.parquet", "question q1")


def test_empty_gold():
    m = official.lme_question_metrics([0, 1], ["f1", "noans_a"])
    assert m["recall_any@5"] == 0.0  # any over nothing
    assert m["recall_all@5"] == 1.0  # all over nothing
    assert m["ndcg_any@5"] == 0.0  # ideal 0


def test_list_shorter_than_k():
    scoring = ["answer_1", "answer_2", "answer_3", "f1", "f2"]
    m = official.lme_question_metrics([3, 0], scoring)  # only two ranked
    assert m["recall_any@1"] == 0.0 and m["recall_any@3"] == 1.0
    assert m["recall_all@50"] == 0.0  # answer_2, answer_3 never retrieved
    # actual [0, 1] -> 1; ideal@5 [1, 1, 1, 0, 0] -> 2 + 1/log2(3)
    assert m["ndcg_any@5"] == pytest.approx(1 / (2 + 1 / L3))
    m = official.lme_question_metrics([], scoring)
    assert all(v == 0.0 for v in m.values())


def _literal_lme_metrics(positions, scoring, ks=official.KS):
    """lme_question_metrics as first written: a set and a DCG per k."""
    gold = {s for s in scoring if "answer" in s}
    rels = [1.0 if scoring[p] in gold else 0.0 for p in positions]
    ideal_rels = sorted((1.0 if s in gold else 0.0 for s in scoring), reverse=True)
    out = {}
    for k in ks:
        retrieved = {scoring[p] for p in positions[:k]}
        out[f"recall_any@{k}"] = 1.0 if any(g in retrieved for g in gold) else 0.0
        out[f"recall_all@{k}"] = 1.0 if all(g in retrieved for g in gold) else 0.0
    for k in ks:
        ideal = official.dcg(ideal_rels[:k])
        out[f"ndcg_any@{k}"] = official.dcg(rels[:k]) / ideal if ideal else 0.0
    return out


def test_question_metrics_are_the_literal_rules_bit_for_bit():
    """Every value (and the keys' order) as the literal computation gives it,
    float for float, on random haystacks with repeated and renamed ids, lists
    of every length, and ks beyond, at and below the list's length."""
    import random

    rng = random.Random(7)
    for n in range(3000):
        corpus = rng.randint(0, 60)
        names = [rng.choice(["answer_a", "answer_b", "answer_c", "noans_d", "f"]) + str(rng.randint(0, 3))
                 for _ in range(corpus)]
        positions = rng.sample(range(corpus), rng.randint(0, corpus))
        if n % 5 == 0 and corpus:  # a position twice, as the function allows
            positions = [rng.randrange(corpus) for _ in range(rng.randint(0, 70))]
        ks = official.KS if n % 3 else (0, 1, 2, 7, 49, 50, 51, 200, -1, -5)
        got = official.lme_question_metrics(positions, names, ks)
        want = _literal_lme_metrics(positions, names, ks)
        assert list(got.items()) == list(want.items()), (names, positions)
        assert all(type(v) is float for v in got.values())


def test_locomo_recall_over_evidence_sessions():
    m = official.locomo_question_metrics(["s3", "s1", "s2"], ["s1", "s2"])
    assert (m["recall_any@1"], m["recall_any@3"]) == (0.0, 1.0)
    assert (m["recall_all@1"], m["recall_all@3"], m["recall_all@50"]) == (0.0, 1.0, 1.0)


# ------------------------------------------------------------ a whole file


def _turns(*spec):
    """('u'|'a', has_answer) -> turns."""
    out = []
    for i, (who, ha) in enumerate(spec):
        t = {"role": "user" if who == "u" else "assistant", "content": f"turn {i} {who}"}
        if ha is not None:
            t["has_answer"] = ha
        out.append(t)
    return out


def _item(qid, ids, sessions, answers):
    return {"question_id": qid, "question_type": "single-session-user", "question": f"what about {qid}?",
            "answer": "x", "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_dates": ["2023/05/2%d (Sat) 10:00" % i for i in range(len(ids))],
            "haystack_session_ids": ids, "haystack_sessions": sessions, "answer_session_ids": answers}


def lme_file(path):
    target = _turns(("u", True), ("a", False))
    plain = _turns(("u", None), ("a", None))
    asst_only = _turns(("u", False), ("a", True))
    items = [
        # q0: the answer session twice in the haystack (both copies carry the user target)
        _item("q0", ["answer_x", "f1", "answer_x", "f2"], [target, plain, target, plain], ["answer_x"]),
        # q1: abstention
        _item("q1_abs", ["answer_y", "f1"], [target, plain], ["answer_y"]),
        # q2: the target is on the assistant side only: no user target (and answer_z -> noans_z)
        _item("q2", ["answer_z", "f1"], [asst_only, plain], ["answer_z"]),
        # q3: two answer sessions, one of them renamed (only its assistant turn has the answer)
        _item("q3", ["f1", "answer_b_1", "answer_b_2", "f2", "f3"],
              [plain, target, asst_only, plain, plain], ["answer_b_1", "answer_b_2"]),
        # q4: a user target in a session whose id has no "answer": empty gold
        _item("q4", ["f1", "notes_1"], [plain, target], ["notes_1"]),
        # q5: never ranked by the variant (a harness skip): scored with an empty list
        _item("q5", ["answer_c", "f1"], [target, plain], ["answer_c"]),
    ]
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def _rankings(path, lists: dict[int, list[str]]):
    rows = {n: [] for n in RANKINGS.names}
    for qi, sids in lists.items():
        for r, sid in enumerate(sids, 1):
            rows["question_id"].append(f"q{qi}")
            rows["rank"].append(r)
            rows["session_id"].append(sid)
            rows["q_index"].append(qi)
    pq.write_table(pa.table(rows, schema=RANKINGS), path)
    return path


def test_normalized_tables_keep_has_answer_role_and_duplicates(tmp_path):
    out = tmp_path / "norm"
    normalize_longmemeval(lme_file(tmp_path / "lme.json"), out, log=lambda m: None)
    hay = pq.read_table(out / "haystacks.parquet").to_pylist()
    q0 = [(h["position"], h["session_id"]) for h in hay if h["haystack_id"] == 0]
    assert q0 == [(0, "answer_x"), (1, "f1"), (2, "answer_x"), (3, "f2")]
    ev = pq.read_table(out / "events.parquet").to_pylist()
    sessions = {s["session_key"]: s["session_id"] for s in pq.read_table(out / "sessions.parquet").to_pylist()}
    flags = {(sessions[e["session_key"]], e["seq"]): (e["role"], e["has_answer"]) for e in ev}
    assert flags[("answer_x", 0)] == ("user", True)
    assert flags[("answer_x", 1)] == ("assistant", False)
    assert flags[("answer_z", 1)] == ("assistant", True)
    assert flags[("f1", 0)] == ("user", False)  # no has_answer key: false


def test_same_session_with_other_has_answer_is_stored_apart(tmp_path):
    a = _item("q0", ["s1"], [_turns(("u", True))], ["s1"])
    b = _item("q1", ["s1"], [_turns(("u", False))], ["s1"])
    (tmp_path / "f.json").write_text(json.dumps([a, b]), encoding="utf-8")
    normalize_longmemeval(tmp_path / "f.json", tmp_path / "n", log=lambda m: None)
    keys = pq.read_table(tmp_path / "n" / "haystacks.parquet").column("session_key").to_pylist()
    assert keys[0] != keys[1]
    assert official.user_target_sessions(tmp_path / "n" / "events.parquet") == {keys[0]}


def test_official_block_by_hand(tmp_path):
    out = tmp_path / "norm"
    normalize_longmemeval(lme_file(tmp_path / "lme.json"), out, log=lambda m: None)
    rk = _rankings(tmp_path / "rankings.parquet", {
        0: ["f1", "answer_x"],
        1: ["answer_y"],
        2: ["answer_z"],
        3: ["answer_b_2", "answer_b_1", "f1"],
        4: ["notes_1", "f1"],
    })
    block, rows = official.compute("longmemeval", out / "questions.parquet", out / "haystacks.parquet",
                                   out / "events.parquet", rk, log=lambda m: None)
    by = {r["question_id"]: r for r in rows}
    assert by["q1_abs"]["excluded"] == "abstention"
    assert by["q2"]["excluded"] == "no_user_target"
    assert by["q2"]["gold"] == []  # answer_z renamed noans_z
    assert by["q3"]["gold"] == ["answer_b_1"]  # answer_b_2 -> noans_b_2
    assert by["q3"]["scoring"] == ["noans_b_2", "answer_b_1", "f1"]
    assert block["questions"] == 4  # q0, q3, q4, q5
    assert block["excluded"] == {"abstention": 1, "no_user_target": 1}
    assert block["not_ranked"] == 1 and block["empty_gold"] == 1
    assert block["depth"] == 3
    # per question recall_any@1: q0 0, q3 0, q4 0 (empty gold), q5 0
    assert block["recall_any@1"] == 0.0
    # recall_any@3: q0 1, q3 1, q4 0, q5 0
    assert block["recall_any@3"] == 0.5
    # recall_all@1: q0 0, q3 0, q4 1 (all over nothing), q5 0
    assert block["recall_all@1"] == 0.25
    assert block["recall_all@3"] == 0.75
    # ndcg@3: q0 1/2 (ideal counts both copies); q3: [0, 1, 0] / [1] = 1; q4 0; q5 0
    assert block["ndcg_any@3"] == pytest.approx((0.5 + 1.0) / 4)
    assert by["q3"]["metrics"]["ndcg_any@1"] == 0.0
    # ndcg@50 for q0: the ideal is still the haystack's [1, 1, 0, 0]
    assert by["q0"]["metrics"]["ndcg_any@50"] == pytest.approx(0.5)


def test_a_rankers_own_positions_score_the_copy_it_ranked(tmp_path):
    """A repeated session id whose copies differ (only the second carries the
    user target): the deep list of a ranker of documents holds each copy's
    position, and the official scorer and the retrieval log read that copy;
    a harness list (no positions) places the n-th occurrence at the n-th copy."""
    from memobench.evaluation import exports
    from memobench.retrieval.memo import DEEP

    target, plain = _turns(("u", True), ("a", False)), _turns(("u", None))
    (tmp_path / "lme.json").write_text(json.dumps([
        _item("q0", ["answer_d", "f1", "answer_d", "f2"], [plain, plain, target, plain], ["answer_d"])]))
    out = tmp_path / "norm"
    normalize_longmemeval(tmp_path / "lme.json", out, log=lambda m: None)
    retrieval_log.write_session_json(out / "events.parquet", tmp_path / "s.bin", log=lambda m: None)

    def deep(name, positions):
        ids = ["answer_d", "f1", "answer_d"]
        pq.write_table(pa.table({"question_id": ["q0"] * 3, "rank": [1, 2, 3], "session_id": ids,
                                 "q_index": [0] * 3, "score": [3.0, 2.0, 1.0], "position": positions},
                                schema=DEEP), tmp_path / name)
        tables = [out / "questions.parquet", out / "haystacks.parquet", out / "events.parquet", tmp_path / name]
        _, (row,) = official.compute("longmemeval", *tables, log=lambda m: None)
        exports.write_retrievallog("longmemeval", *tables, tmp_path / "log.jsonl", tmp_path / "s.bin",
                                   log=lambda m: None)
        items = json.loads((tmp_path / "log.jsonl").read_text())["retrieval_results"]["ranked_items"]
        return row, [(i["corpus_id"], i["timestamp"]) for i in items]

    row, items = deep("ranker.parquet", [2, 1, 0])  # the target's copy first
    assert row["positions"] == [2, 1, 0] and row["scoring"] == ["answer_d", "f1", "noans_d"]
    assert row["metrics"]["recall_any@1"] == 1.0
    assert items == [("answer_d", "2023/05/22 (Sat) 10:00"), ("f1", "2023/05/21 (Sat) 10:00"),
                     ("noans_d", "2023/05/20 (Sat) 10:00")]
    row, _ = deep("harness.parquet", [None] * 3)
    assert row["positions"] == [0, 1, 2] and row["metrics"]["recall_any@1"] == 0.0
    with pytest.raises(DataError, match=r"bad.parquet: question q0: rank 2: position 3 does not hold"):
        deep("bad.parquet", [2, 3, 0])


def _one_segment(tmp_path) -> Path:
    """A LongMemEval file normalized (its tables' folder returned) and one
    segment's tables of it in ``tmp_path`` (seg1: rankings, outcomes, deep,
    and an empty turns table), with the data summary a merge reads."""
    from types import SimpleNamespace

    from memobench.retrieval.harness import SegmentRows
    from memobench.retrieval.turns import empty_turns

    out = tmp_path / "norm"
    summary = normalize_longmemeval(lme_file(tmp_path / "lme.json"), out, log=lambda m: None)
    (tmp_path / "summary.json").write_text(json.dumps(summary, default=str))
    hay = official.read_haystacks(out / "haystacks.parquet")
    rows = SegmentRows()
    for q in pq.read_table(out / "questions.parquet").to_pylist():
        ids = hay[q["haystack_id"]]["ids"]
        rows.add(q, SimpleNamespace(ids=ids), final=ids[:2], deep=ids[:3])
    for t, name in zip((*rows.tables(), empty_turns()),
                       ("seg1.parquet", "seg1.outcomes.parquet", "seg1.deep.parquet", "seg1.turns.parquet")):
        pq.write_table(t, tmp_path / name)
    return out


def test_the_merge_jobs_work_leaves_pandas_unimported(tmp_path):
    """The merge stage's functions in one process without the jobs' guard
    (stages.adapter.without_pandas), as a caller in one process runs them:
    none builds an Arrow array from Python values, whose pandas probe
    imports pandas (0.3 s)."""
    import subprocess
    import sys

    out = _one_segment(tmp_path)
    spec = {"name": "v", "harness": "h", "description": "", "recipe": {}, "skip": "run"}
    code = f"""
import sys
from memobench.evaluation import official
from memobench.runs import trec
from memobench.evaluation.metrics import concat_rankings, merge_segments
from memobench.core.tables import write_table
d, n, quiet = {str(tmp_path)!r} + "/", {str(out)!r} + "/", lambda m: None
merge_segments("ds", {spec!r}, [d + "seg1.parquet"], [d + "seg1.outcomes.parquet"], d + "summary.json",
               d + "r.parquet", d + "o.parquet", d + "m.json", log=quiet)
write_table(d + "deep.parquet", concat_rankings([d + "seg1.deep.parquet"]))
block, _ = official.compute("longmemeval", n + "questions.parquet", n + "haystacks.parquet", n + "events.parquet",
                            d + "deep.parquet", log=quiet)
run = trec.write(d + "deep.parquet", n + "questions.parquet", "v", d + "run.trec", log=quiet)
print(block["questions"], run["lines"], "pandas" in sys.modules)
"""
    src = Path(official.__file__).resolve().parents[2]
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}).stdout
    assert got.split() == ["4", "14", "False"]


def test_a_session_variants_merge_job_imports_neither_numpy_nor_pyarrow_compute(tmp_path):
    """The merge stage as its job runs it (the jobs' guard, then the stage
    through run_logged), in a process of its own: a session variant's merge
    imports neither numpy (pyarrow imports it when installed: its import
    and its BLAS threads were a fifth of the job's CPU) nor pyarrow.compute
    (0.04 s of wrappers); one job per variant pays them. The files are
    written all the same."""
    import subprocess
    import sys

    out = _one_segment(tmp_path)
    d, n = f"{tmp_path}/", f"{out}/"
    inputs = {"rankings": [d + "seg1.parquet"], "outcomes": [d + "seg1.outcomes.parquet"],
              "deep": [d + "seg1.deep.parquet"], "turns": [d + "seg1.turns.parquet"], "data_summary": d + "summary.json",
              "questions": n + "questions.parquet", "haystacks": n + "haystacks.parquet", "events": n + "events.parquet"}
    outputs = {name: d + "out/" + name for name in ("rankings", "outcomes", "metrics", "deep", "turns", "official", "run")}
    spec = {"name": "v", "harness": "h", "description": "", "recipe": {}, "skip": "run"}
    code = f"""
import sys
from memobench.stages import adapter, merge
adapter.without_pandas()
adapter.run_logged({d + "merge.log"!r}, merge.merge, {inputs!r}, {outputs!r}, {{"variant": {spec!r}, "fmt": "longmemeval"}},
                   {{"dataset": "ds", "variant": "v"}})
print([m for m in ("numpy", "pyarrow.compute", "pandas") if m in sys.modules])
"""
    src = Path(official.__file__).resolve().parents[2]
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}).stdout
    assert got.strip() == "[]"
    assert json.loads((tmp_path / "out" / "official")
                      .read_text())["official"]["questions"] == 4  # scored as the merge test above scores them
    assert len((tmp_path / "out" / "run").read_text().splitlines()) == 14


def test_official_rejects_a_ranked_session_outside_the_haystack(tmp_path):
    out = tmp_path / "norm"
    normalize_longmemeval(lme_file(tmp_path / "lme.json"), out, log=lambda m: None)
    rk = _rankings(tmp_path / "bad.parquet", {0: ["nope"]})
    with pytest.raises(DataError, match=r"bad.parquet: question q0: ranked session 'nope'"):
        official.compute("longmemeval", out / "questions.parquet", out / "haystacks.parquet",
                         out / "events.parquet", rk)


def test_locomo_block_and_categories_1_4(tmp_path):
    def turn(i, s):
        return {"speaker": "A", "dia_id": f"D{s}:{i}", "text": f"words {s} {i}"}

    conv = {"session_1": [turn(1, 1), turn(2, 1)], "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": [turn(1, 2)], "session_2_date_time": "1:56 pm on 9 May, 2023",
            "session_3": [turn(1, 3)], "session_3_date_time": "1:56 pm on 10 May, 2023"}
    qa = [{"question": "a?", "evidence": ["D1:1", "D2:1"], "category": 1},
          {"question": "b?", "evidence": ["D3:1"], "category": 2},
          {"question": "c?", "evidence": ["D2:1"], "category": 5},
          {"question": "d?", "evidence": ["nothing"], "category": 4}]
    (tmp_path / "l.json").write_text(json.dumps([{"sample_id": "c0", "conversation": conv, "qa": qa}]))
    out = tmp_path / "n"
    normalize_locomo(tmp_path / "l.json", out, log=lambda m: None)
    rk = _rankings(tmp_path / "r.parquet", {0: ["session_2", "session_1"], 1: ["session_1", "session_3"],
                                            2: ["session_2"]})
    block, _ = official.compute("locomo", out / "questions.parquet", out / "haystacks.parquet",
                                out / "events.parquet", rk, log=lambda m: None)
    assert block["excluded"] == {"no_evidence": 1}
    assert block["questions"] == 3
    assert block["recall_any@1"] == pytest.approx(2 / 3)  # q0 yes, q1 no, q2 yes
    assert block["recall_all@1"] == pytest.approx(1 / 3)  # q2 only
    assert block["recall_all@3"] == 1.0
    assert "ndcg_any@1" not in block
    c = block["categories_1_4"]
    assert c["questions"] == 2
    assert c["recall_any@1"] == 0.5 and c["recall_all@1"] == 0.0 and c["recall_all@3"] == 1.0


# ------------------------------------------------------------ averaging conventions


def _by_the_rules(items, lists, k):
    """recall_any@k, recall_all@k, ndcg_any@k per question, straight from
    docs/protocol.md#official-metrics on the raw items (not the normalized tables)."""
    out = {}
    for qi, it in enumerate(items):
        user_ans = [any(t["role"] == "user" and t.get("has_answer") is True for t in s)
                    for s in it["haystack_sessions"]]
        scoring = [sid.replace("answer", "noans") if "answer" in sid and not ua else sid
                   for sid, ua in zip(it["haystack_session_ids"], user_ans)]
        gold = {s for s in scoring if "answer" in s}
        used, ranked = set(), []
        for sid in lists.get(qi, []):  # the n-th time an id is ranked: its n-th copy
            p = next(p for p, h in enumerate(it["haystack_session_ids"]) if h == sid and p not in used)
            used.add(p)
            ranked.append(scoring[p])
        top = set(ranked[:k])

        def dcg(r):
            return sum(x if i < 2 else x / math.log2(i + 1) for i, x in enumerate(r))

        ideal = dcg(sorted((s in gold for s in scoring), reverse=True)[:k])
        out[it["question_id"]] = {
            "abs": "_abs" in it["question_id"], "nut": not any(user_ans),
            "recall_any": float(bool(gold & top)), "recall_all": float(gold <= top),
            "ndcg_any": dcg([s in gold for s in ranked[:k]]) / ideal if ideal else 0.0}
    return out


def test_both_lme_conventions_by_hand(tmp_path):
    """run_retrieval leaves out the abstention and the no-user-target question;
    print_retrieval_metrics only the abstention, the no-user-target question
    (q2) averaged in with its empty gold; the top level stays run_retrieval's."""
    lists = {0: ["f1", "answer_x"], 1: ["answer_y"], 2: ["answer_z", "f1"], 3: ["answer_b_2", "answer_b_1", "f1"],
             4: ["notes_1", "f1"]}
    src = lme_file(tmp_path / "lme.json")
    out = tmp_path / "norm"
    normalize_longmemeval(src, out, log=lambda m: None)
    rk = _rankings(tmp_path / "rankings.parquet", lists)
    block, _ = official.compute("longmemeval", out / "questions.parquet", out / "haystacks.parquet",
                                out / "events.parquet", rk, log=lambda m: None)
    conv = block["conventions"]
    rr, prm = conv["run_retrieval"], conv["print_retrieval_metrics"]
    assert rr["questions"] == 4 and rr["excluded"] == {"abstention": 1, "no_user_target": 1}
    assert prm["questions"] == 5 and prm["excluded"] == {"abstention": 1}
    assert prm["no_user_target_included"] == 1 and rr["no_user_target_included"] == 0
    assert prm["empty_gold"] == 2 and prm["not_ranked"] == 1  # q2 and q4; q5
    assert "run_retrieval.py" in rr["convention"] and "print_retrieval_metrics.py" in prm["convention"]
    items = json.loads(src.read_text())
    for k in official.KS:
        want = _by_the_rules(items, lists, k)
        for name in ("recall_any", "recall_all", "ndcg_any"):
            for c, keep in ((rr, lambda w: not w["abs"] and not w["nut"]), (prm, lambda w: not w["abs"])):
                vals = [w[name] for w in want.values() if keep(w)]
                assert c[f"{name}@{k}"] == pytest.approx(sum(vals) / len(vals)), (name, k, c["convention"])
            assert block[f"{name}@{k}"] == rr[f"{name}@{k}"]  # the top level is run_retrieval's
    # q2 ranks its (renamed) answer session first: recall_all 1 over no gold, recall_any 0
    assert prm["recall_all@1"] == pytest.approx((0 + 0 + 1 + 1 + 0) / 5)
    assert prm["recall_any@3"] == pytest.approx((1 + 0 + 1 + 0 + 0) / 5)


def test_locomo_conventions(tmp_path):
    def turn(i, s):
        return {"speaker": "A", "dia_id": f"D{s}:{i}", "text": f"words {s} {i}"}

    conv = {"session_1": [turn(1, 1)], "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": [turn(1, 2)], "session_2_date_time": "1:56 pm on 9 May, 2023"}
    qa = [{"question": "a?", "evidence": ["D1:1"], "category": 1},
          {"question": "b?", "evidence": ["D2:1"], "category": 5, "adversarial_answer": "no"},
          {"question": "c?", "evidence": ["D2:1"], "category": 3},
          {"question": "d?", "evidence": ["nothing"], "category": 4}]
    (tmp_path / "l.json").write_text(json.dumps([{"sample_id": "c0", "conversation": conv, "qa": qa}]))
    out = tmp_path / "n"
    normalize_locomo(tmp_path / "l.json", out, log=lambda m: None)
    rk = _rankings(tmp_path / "r.parquet", {0: ["session_1"], 1: ["session_2"], 2: ["session_1", "session_2"]})
    block, _ = official.compute("locomo", out / "questions.parquet", out / "haystacks.parquet",
                                out / "events.parquet", rk, log=lambda m: None)
    a, c = block["conventions"]["all_categories"], block["conventions"]["categories_1_4"]
    assert a["questions"] == 3 and a["recall_any@1"] == pytest.approx(2 / 3)  # q0 yes, q1 yes, q2 no
    assert c["questions"] == 2 and c["recall_any@1"] == 0.5 and c["recall_any@3"] == 1.0
    assert {k: v for k, v in c.items() if k != "convention"} == block["categories_1_4"]
    assert a["recall_all@3"] == block["recall_all@3"] and "categories 1-4" in c["convention"]


def test_locomo_conventions_name_what_each_leaves_out(tmp_path):
    """Each LoCoMo convention says what it leaves out, as LongMemEval's do: the
    question without evidence in both, the adversarial category in
    categories_1_4; n and the excluded counts add up to the file's questions
    (the convention table and the Official metrics table agree)."""
    def turn(i, s):
        return {"speaker": "A", "dia_id": f"D{s}:{i}", "text": f"words {s} {i}"}

    conv = {"session_1": [turn(1, 1)], "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": [turn(1, 2)], "session_2_date_time": "1:56 pm on 9 May, 2023"}
    qa = [{"question": "a?", "evidence": ["D1:1"], "category": 1},
          {"question": "b?", "evidence": ["D2:1"], "category": 5, "adversarial_answer": "no"},
          {"question": "c?", "evidence": ["D2:1"], "category": 5, "adversarial_answer": "no"},
          {"question": "d?", "evidence": ["nothing"], "category": 5}]
    (tmp_path / "l.json").write_text(json.dumps([{"sample_id": "c0", "conversation": conv, "qa": qa}]))
    out = tmp_path / "n"
    normalize_locomo(tmp_path / "l.json", out, log=lambda m: None)
    rk = _rankings(tmp_path / "r.parquet", {0: ["session_1"], 1: ["session_2"], 2: ["session_2"]})
    block, _ = official.compute("locomo", out / "questions.parquet", out / "haystacks.parquet",
                                out / "events.parquet", rk, log=lambda m: None)
    a, c = block["conventions"]["all_categories"], block["conventions"]["categories_1_4"]
    assert a["excluded"] == block["excluded"] == {"no_evidence": 1}
    assert c["excluded"] == {"no_evidence": 1, "category_5": 2}
    for v in (a, c):
        assert v["questions"] + sum(v["excluded"].values()) == len(qa)
