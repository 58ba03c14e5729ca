"""A turn variant end to end through Snakemake: LongMemEval's flat BM25 at
turn granularity (``grain: turn`` on bm25-official) on a generated
LongMemEval file with repeated session ids, answer sessions whose other user
turns become ``noans`` turns, an abstention question and a question with no
user-side target, in two segments. Its turn lists, per-question metrics at
both grains and averages are held against LongMemEval's own rules run here on
the raw file (tests/oracles/longmemeval_retrieval.py); a session variant beside
it keeps its tables and official.json as before."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from memobench.evaluation import turn_metrics
from tests.helpers import ReferenceServer, snakemake, write_config
from tests.oracles import longmemeval_retrieval as lme
from tests.oracles import token_budgets

VARIANTS = ["bm25-official", "bm25-turns", "py-turns", "py-turn-ids", "their-turns-trec", "their-turns-log",
            "svc-turns", "svc-all-turns", "fused-turns", "minilm-turns"]

# a user's retriever of turns: LongMemEval's flat BM25 over what it is given, returning turn positions
# (rank) or turn ids (rank_ids), after checking the turns it got describe themselves consistently
USER_RETRIEVER = """
import numpy as np
from rank_bm25 import BM25Okapi


def rank(question, turns):
    assert len(turns) == len(turns.texts) == len(turns.sessions) == len(turns.dates)
    for j in range(len(turns)):
        assert turns.ids[j] == f"{turns.sessions[j]}_{turns.indices[j] + 1}" and turns.roles[j] == "user"
        assert 0 <= turns.positions[j] and (j == 0 or turns.positions[j] >= turns.positions[j - 1])
    scores = BM25Okapi([t.split(" ") for t in turns.texts]).get_scores(question.text.split(" "))
    return [int(i) for i in np.argsort(scores)[::-1]]


def rank_ids(question, turns):
    return [turns.ids[i] for i in rank(question, turns)]
"""


def _as_published(items: list[dict]) -> None:
    """What the published files hold and the generator leaves out: every user
    turn of an answer session says has_answer (false where it is not the
    evidence); then one more abstention question and one question whose
    haystack has no user turn with has_answer."""
    for item in items:
        for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"]):
            for t in session:
                if "answer" in sid and t["role"] == "user":
                    t.setdefault("has_answer", False)
    items[3]["question_id"] += "_abs"
    for session in items[7]["haystack_sessions"]:
        for t in session:
            if t.get("has_answer"):
                t["has_answer"] = False


def _cn_rows(items) -> list[dict]:
    """A LongMemEval-CN file over the generated one: every other question asked again in other words
    (its words reversed, one of them dropped, a Chinese word added), and a row that pairs with none."""
    rows = [{"questionId": it["question_id"] + "_cn",
             "question": " ".join(list(reversed(it["question"].split(" ")))[1:]) + " 什么"} for it in items[::2]]
    return rows + [{"questionId": "unpaired_cn", "question": "什么"}]


@pytest.fixture(scope="module")
def run(tmp_path_factory, locomo_path):
    from memobench.tools.generate.longmemeval import write_longmemeval

    root = tmp_path_factory.mktemp("turns")
    data = root / "data"
    data.mkdir()
    conv = json.loads(locomo_path.read_text(encoding="utf-8"))[0]
    conv = {**conv, "qa": conv["qa"][:60]}
    (data / "locomo1.json").write_text(json.dumps([conv]), encoding="utf-8")
    raw = data / "lme.json"
    write_longmemeval(raw, n_questions=24, sessions_per_question=8, seed=5, turns=(2, 7), words_per_turn=(4, 30),
                      repeat_ids=0.5)
    items = json.loads(raw.read_text(encoding="utf-8"))
    _as_published(items)
    raw.write_text(json.dumps(items), encoding="utf-8")
    oracle = lme.run(items, "turn")
    # another system's turn runs: LongMemEval's own rankings, as a TREC run of turn ids and as its turn
    # retrieval log (corpus ids with noans)
    with open(data / "turns.trec", "w", encoding="utf-8") as f:
        for item, r in zip(items, oracle):
            seen: dict[str, int] = {}
            for rank, j in enumerate(r["rankings"], 1):
                p, i = _corpus_places(item)[j]
                tid = f"{item['haystack_session_ids'][p]}_{i + 1}"
                seen[tid] = seen.get(tid, 0) + 1
                f.write(f"{item['question_id']} Q0 {tid if seen[tid] == 1 else f'{tid}%#{seen[tid]}'} {rank} "
                        f"{1000 - rank} theirs\n")
    with open(data / "turns.jsonl", "w", encoding="utf-8") as f:
        for r in oracle:
            items_ranked = [{"corpus_id": r["corpus_ids"][j]} for j in r["rankings"]]
            f.write(json.dumps({"question_id": r["question_id"], "retrieval_results": {"ranked_items": items_ranked}})
                    + "\n")
    (data / "cn.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _cn_rows(items)),
                                   encoding="utf-8")
    # memory services that rank turns: the reference server over the user turns (LongMemEval's turn corpus)
    # and over every turn (assistant turns ranked too)
    servers = {docs: ReferenceServer(docs, retriever="bm25-official", grain="turn") for docs in ("user", "all")}
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=["lme", "locomo1", "cn"],
                       datasets={"lme": {"format": "longmemeval", "family": "s", "file": "lme.json",
                                         "bytes": raw.stat().st_size, "segments": 2, "variants": VARIANTS},
                                 "locomo1": {"format": "locomo", "file": "locomo1.json", "segments": 1,
                                             "bytes": (data / "locomo1.json").stat().st_size,
                                             "variants": ["bm25-turns", "svc-all-turns"]},
                                 "cn": {"format": "longmemeval_cn", "family": "cn", "file": "cn.jsonl",
                                        "bytes": (data / "cn.jsonl").stat().st_size, "haystacks_from": "lme",
                                        "segments": 1, "variants": ["bm25-turns"]}},
                       variants={"bm25-turns": {"base": "bm25-official", "grain": "turn"},
                                 "py-turns": {"retriever": {"callable": "my_turns.py:rank"}, "grain": "turn"},
                                 "py-turn-ids": {"retriever": {"callable": "my_turns.py:rank_ids"}, "grain": "turn"},
                                 "their-turns-trec": {"run": {"file": str(data / "turns.trec"), "format": "trec"},
                                                      "grain": "turn"},
                                 "their-turns-log": {"run": {"file": str(data / "turns.jsonl"),
                                                             "format": "retrievallog"}, "grain": "turn"},
                                 # k: every turn, as the in-process variant ranks them
                                 "svc-turns": {"system": {"url": servers["user"].url, "k": 1000}, "grain": "turn"},
                                 "svc-all-turns": {"system": {"url": servers["all"].url, "k": 1000},
                                                   "grain": "turn"},
                                 "fused-turns": {"fuse": {"of": ["bm25-turns", "svc-all-turns"]}, "grain": "turn"},
                                 "minilm-turns": {"base": "minilm", "grain": "turn"}})
    work = root / "work"
    work.mkdir()
    (work / "my_turns.py").write_text(USER_RETRIEVER, encoding="utf-8")
    snakemake(work, "--cores", "2", *(f"results/lme/{v}/official.json" for v in VARIANTS),
              "results/locomo1/bm25-turns/official.json", "results/locomo1/svc-all-turns/official.json",
              "results/lme/bm25-turns/retrievallog.jsonl",
              "results/cn/bm25-turns/official.json",
              *(f"results/{ds}/{f}" for ds in ("lme", "locomo1") for f in ("bm25-turns/run.turns.trec",
                                                                           "qrels.turns.trec")), configfile=cfg)
    yield work, items, oracle, conv
    for server in servers.values():
        server.kill()


def _lists(path) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for r in pq.read_table(path).sort_by([("q_index", "ascending"), ("rank", "ascending")]).to_pylist():
        out.setdefault(r["question_id"], []).append(r)
    return out


def _corpus_places(item) -> list[tuple[int, int]]:
    """(haystack position, turn index) of each document of LongMemEval's turn corpus, in its order."""
    return [(p, i) for p, s in enumerate(item["haystack_sessions"]) for i, t in enumerate(s) if t["role"] == "user"]


def test_the_file_holds_the_cases(run):
    _, items, oracle, _ = run
    assert any(len(set(i["haystack_session_ids"])) < len(i["haystack_session_ids"]) for i in items)
    assert any(c.startswith("noans") for r in oracle for c in r["corpus_ids"])
    assert sum("_abs" in i["question_id"] for i in items) >= 2


@pytest.mark.parametrize("variant", ["bm25-turns", "py-turns", "py-turn-ids", "their-turns-trec", "their-turns-log"])
def test_turn_lists_equal_longmemeval_flat_bm25(run, variant):
    work, items, oracle, _ = run
    got = _lists(work / f"results/lme/{variant}/turns.parquet")
    assert len(got) == len(items)  # every question ranked
    for item, want in zip(items, oracle):
        places = _corpus_places(item)
        rows = got[item["question_id"]]
        ids = [f"{item['haystack_session_ids'][places[j][0]]}_{places[j][1] + 1}" for j in want["rankings"]]
        assert [r["turn_id"] for r in rows] == ids, item["question_id"]
        if variant in ("bm25-turns", "py-turns"):  # ids name a repeated session's turn per copy, in haystack order
            assert [places.index((r["position"], r["turn"])) for r in rows] == want["rankings"], item["question_id"]


def test_session_lists_are_sessions_at_their_best_turn(run):
    work, items, oracle, _ = run
    deep = _lists(work / "results/lme/bm25-turns/deep.parquet")
    for item, want in zip(items, oracle):
        places = _corpus_places(item)
        firsts = list(dict.fromkeys(places[j][0] for j in want["rankings"]))[:50]
        assert [r["position"] for r in deep[item["question_id"]]] == firsts


def test_metrics_at_both_grains_equal_longmemeval(run):
    work, items, oracle, _ = run
    res = work / "results/lme"

    def table(name):
        return work / layout.path(layout.NORMALIZED_TABLE, dataset="lme", table=name)

    _, rows = turn_metrics.compute("longmemeval", table("questions"), table("haystacks"), table("events"),
                                   res / "bm25-turns/turns.parquet")
    by_id = {r["question_id"]: r for r in rows}
    for want in oracle:
        row = by_id[want["question_id"]]
        for name, w in want["metrics"]["turn"].items():
            assert row["metrics"][name] == pytest.approx(w, rel=1e-12, abs=0), (want["question_id"], name)
        for name, w in want["metrics"]["session"].items():
            assert row["turn2session"][name] == pytest.approx(w, rel=1e-12, abs=0), (want["question_id"], name)
    block = json.loads((res / "bm25-turns/official.json").read_text())["turn"]
    means = lme.averaged(oracle)
    assert means["no_user_target"] >= 1 and means["abstention"] >= 2
    assert block["questions"] == means["questions"]
    assert block["excluded"] == {"abstention": means["abstention"], "no_user_target": means["no_user_target"]}
    for name, w in means["turn"].items():
        assert block[name] == pytest.approx(w, rel=1e-12), name
    for name, w in means["session"].items():
        assert block["turn2session"][name] == pytest.approx(w, rel=1e-12), name


def test_a_turn_variants_retrieval_log_is_longmemevals_turn_log(run):
    """Line by line, what LongMemEval's run_retrieval.py --granularity turn writes for the same file:
    every user turn ranked (its scoring id, its own text, its session's date), the turn metrics and the
    session metrics from the turns (floats to 1e-12: numpy sums pairwise); has_answer written where true."""
    work, items, oracle, _ = run
    text = (work / "results/lme/bm25-turns/retrievallog.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(text) == len(items)
    for line, item, want in zip(text, items, oracle):
        got = json.loads(line)
        assert line == json.dumps(got, ensure_ascii=False)
        docs, _ = lme.corpus(item, "turn")
        places = _corpus_places(item)
        expected = {k: item[k] for k in ("question_id", "question_type", "question", "answer", "question_date",
                                         "haystack_dates")}
        expected["haystack_sessions"] = [[{k: v for k, v in t.items() if k != "has_answer" or v} for t in s]
                                         for s in item["haystack_sessions"]]
        expected.update({k: item[k] for k in ("haystack_session_ids", "answer_session_ids")})
        ranked = [{"corpus_id": want["corpus_ids"][j], "text": docs[j],
                   "timestamp": item["haystack_dates"][places[j][0]]} for j in want["rankings"]]
        metrics = got["retrieval_results"].pop("metrics")
        expected["retrieval_results"] = {"query": item["question"], "ranked_items": ranked}
        assert got == expected and list(got) == list(expected), item["question_id"]
        assert list(metrics) == ["session", "turn"]
        for grain in ("session", "turn"):
            assert list(metrics[grain]) == list(want["metrics"][grain])
            for name, w in want["metrics"][grain].items():
                assert metrics[grain][name] == pytest.approx(w, rel=1e-12, abs=0), (item["question_id"], name)


def test_cn_at_turn_level_is_longmemeval_over_its_base_turns(run):
    """CN questions over LongMemEval-S's turns: the turn lists and both grains' metrics LongMemEval's rules
    give for the same haystacks asked the CN question; the unpaired row a counted skip; official.json names
    both files."""
    work, items, _, _ = run
    by_id = {it["question_id"]: it for it in items}
    cn = [r for r in _cn_rows(items) if r["questionId"][:-3] in by_id]
    asked = [{**by_id[r["questionId"][:-3]], "question_id": r["questionId"], "question": r["question"]} for r in cn]
    oracle = lme.run(asked, "turn")
    got = _lists(work / "results/cn/bm25-turns/turns.parquet")
    assert set(got) == {r["questionId"] for r in cn}
    for item, want in zip(asked, oracle):
        places = _corpus_places(item)
        assert [places.index((r["position"], r["turn"])) for r in got[item["question_id"]]] == want["rankings"]
    official = json.loads((work / "results/cn/bm25-turns/official.json").read_text())
    block, means = official["turn"], lme.averaged(oracle)
    assert block["questions"] == means["questions"] and block["excluded"]["no_haystack"] == 1
    for name, w in means["turn"].items():
        assert block[name] == pytest.approx(w, rel=1e-12), name
    for name, w in means["session"].items():
        assert block["turn2session"][name] == pytest.approx(w, rel=1e-12), name
    assert official["data_file"]["file"] == "cn.jsonl" and official["haystacks_data_file"]["file"] == "lme.json"


def test_a_session_variant_has_no_turn_figures(run):
    work, _, _, _ = run
    official = json.loads((work / "results/lme/bm25-official/official.json").read_text())
    assert "turn" not in official and "turn_rankings" not in official
    # the data file is named, and known not to be a published release
    size = (work.parent / "data" / "lme.json").stat().st_size
    assert official["data_file"] == {"file": "lme.json", "bytes": size, "sha256": None, "release": None,
                                     "label": "not a published release", "matched_by": None}
    assert pq.read_table(work / "results/lme/bm25-official/turns.parquet").num_rows == 0


def test_locomo_turn_lists_and_evidence_turn_recall_equal_an_independent_count(run):
    """LoCoMo's first conversation: every turn a document (its text as the file holds it), ranked by
    flat BM25 here; evidence-turn recall counted here from the file's evidence dia_ids."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    work, _, _, conv = run
    c = conv["conversation"]
    keys = sorted((k for k in c if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
    turns = [t for k in keys for t in c[k]]
    bm25 = BM25Okapi([str(t.get("text", "")).split(" ") for t in turns])
    got = _lists(work / "results/locomo1/bm25-turns/turns.parquet")
    dia = {t["dia_id"] for t in turns}
    per_k = {k: [] for k in (1, 5, 10, 50)}
    cats = []
    for qi, qa in enumerate(conv["qa"]):
        qid = f"{conv['sample_id']}#{qi}"
        gold = {str(e) for e in qa.get("evidence", [])} & dia
        if not gold:
            continue  # no evidence turn: skipped at turn level, as the session figures skip it
        order = np.argsort(bm25.get_scores(qa["question"].split(" ")))[::-1]
        ids = [r["turn_id"] for r in got[qid]]
        assert ids == [turns[j]["dia_id"] for j in order], qid
        for k in per_k:
            per_k[k].append(len(gold & set(ids[:k])) / len(gold))
        cats.append(str(qa["category"]) in "1234")
    block = json.loads((work / "results/locomo1/bm25-turns/official.json").read_text())["turn"]
    assert block["questions"] == len(per_k[1]) and block["excluded"]["no_evidence"] == len(conv["qa"]) - len(cats)
    for k, shares in per_k.items():
        assert block[f"recall@{k}"] == pytest.approx(sum(shares) / len(shares), rel=1e-12), k
    c14 = [share for share, keep in zip(per_k[10], cats) if keep]
    assert block["conventions"]["categories_1_4"]["recall@10"] == pytest.approx(sum(c14) / len(c14), rel=1e-12)


@pytest.mark.parametrize("dataset", ["lme", "locomo1"])
def test_turn_exports_give_the_turn_figures_under_trec_eval(run, dataset):
    """run.turns.trec with qrels.turns.trec: trec_eval's Success@k and RR@10 per question are the turn
    hit@k and reciprocal rank of the per-question turn rows."""
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR, Success

    work = run[0]
    res = work / "results" / dataset

    def table(name):
        return work / layout.path(layout.NORMALIZED_TABLE, dataset=dataset, table=name)

    fmt = "longmemeval" if dataset == "lme" else "locomo"
    _, rows = turn_metrics.compute(fmt, table("questions"), table("haystacks"), table("events"),
                                   res / "bm25-turns/turns.parquet")
    qrels = list(ir_measures.read_trec_qrels(str(work / layout.path(layout.TURN_QRELS, dataset=dataset))))
    trec = list(ir_measures.read_trec_run(str(work / layout.path(layout.TURN_RUN_TREC, dataset=dataset,
                                                                   variant="bm25-turns"))))
    names = {Success @ 1: "hit@1", Success @ 5: "hit@5", Success @ 10: "hit@10", RR @ 10: "mrr"}
    got: dict[str, dict] = {}
    for m in ir_measures.iter_calc(list(names), qrels, trec):
        got.setdefault(m.query_id, {})[names[m.measure]] = m.value
    with_gold = [r for r in rows if r["gold"]]
    assert {q for q, _, _, _ in qrels} == {r["question_id"] for r in with_gold}
    assert len(with_gold) > 10
    for r in with_gold:
        for name, value in r["harness"].items():
            assert got[r["question_id"]][name] == pytest.approx(value, rel=1e-12), (r["question_id"], name)


@pytest.mark.parametrize("variant", ["py-turns", "py-turn-ids", "their-turns-trec", "their-turns-log"])
def test_every_kind_of_turn_variant_scores_as_the_reference_one(run, variant):
    """The same turn lists given by a Python retriever or read from another system's TREC run or
    LongMemEval turn log: the same figures at both grains (a copy of a repeated session scores as the
    other copy), the same session lists where the turns are given by position."""
    work = run[0]
    res = work / "results/lme"
    want = json.loads((res / "bm25-turns/official.json").read_text())
    got = json.loads((res / variant / "official.json").read_text())
    assert got["turn"] == want["turn"] and got["official"] == want["official"]
    if variant == "py-turns":  # by positions; a list of ids gives a repeated session's turns to its first copy
        assert pq.read_table(res / variant / "deep.parquet").column("session_id").to_pylist() == \
            pq.read_table(res / "bm25-turns/deep.parquet").column("session_id").to_pylist()


@pytest.mark.parametrize("ds,service", [("lme", "svc-turns"), ("locomo1", "svc-all-turns")])
def test_a_memory_service_ranking_turns_gives_the_in_process_reference_turn_variant(run, ds, service):
    """The reference server ranking turns (their ids sent with each session), driven as a system variant:
    the in-process turn variant's turn lists and figures at both grains (a service answers ids: a repeated
    session's turn goes to its first copy, as an imported run's, so the positions are not compared)."""
    res = run[0] / "results" / ds
    cols = ["question_id", "rank", "session_id", "turn", "turn_id"]
    assert pq.read_table(res / service / "turns.parquet", columns=cols).equals(
        pq.read_table(res / "bm25-turns" / "turns.parquet", columns=cols))
    got, want = (json.loads((res / v / "official.json").read_text()) for v in (service, "bm25-turns"))
    assert got["turn"] == want["turn"] and got["official"] == want["official"]


def test_a_memory_service_ranking_assistant_turns_has_them_scored_as_never_gold(run):
    """Over every turn (LongMemEval's turn corpus holds the user turns only), the service's turns:
    each ranked assistant turn takes its rank and is never gold, at both grains (counted here from the
    raw file with LongMemEval's rules over a corpus of every turn)."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    work, items, _, _ = run
    got = _lists(work / "results/lme/svc-all-turns/turns.parquet")
    _, rows = turn_metrics.compute("longmemeval", *(work / layout.path(layout.NORMALIZED_TABLE, dataset="lme",
                                                                        table=t)
                                                    for t in ("questions", "haystacks", "events")),
                                   work / "results/lme/svc-all-turns/turns.parquet")
    by_id = {r["question_id"]: r for r in rows}
    assistant = 0
    for item in items:
        turns = [(p, i, t) for p, sess in enumerate(item["haystack_sessions"]) for i, t in enumerate(sess)]
        ids = []
        for p, i, t in turns:
            tid = f"{item['haystack_session_ids'][p]}_{i + 1}"
            ids.append(tid if t["role"] == "user" and t.get("has_answer") else tid.replace("answer", "noans"))
        order = np.argsort(BM25Okapi([t["content"].split(" ") for _, _, t in turns])
                           .get_scores(item["question"].split(" ")))[::-1].tolist()
        assert [r["turn_id"] for r in got[item["question_id"]]] == [
            f"{item['haystack_session_ids'][turns[j][0]]}_{turns[j][1] + 1}" for j in order]
        assistant += sum(turns[j][2]["role"] != "user" for j in order)
        want = lme.question_metrics(order, ids, "turn")
        row = by_id[item["question_id"]]
        for name, w in want["turn"].items():
            assert row["metrics"][name] == pytest.approx(w, rel=1e-12, abs=0), (item["question_id"], name)
        for name, w in want["session"].items():
            assert row["turn2session"][name] == pytest.approx(w, rel=1e-12, abs=0), (item["question_id"], name)
    assert assistant > 0


def test_a_turn_fusion_is_reciprocal_rank_fusion_of_the_turn_lists(run):
    """RRF (k 60) of two turn variants' whole turn lists by turn id, counted here with fractions (ties by
    best rank, then input); its sessions at their best turns."""
    from fractions import Fraction

    res = run[0] / "results/lme"
    inputs = [_lists(res / v / "turns.parquet") for v in ("bm25-turns", "svc-all-turns")]
    got = _lists(res / "fused-turns/turns.parquet")
    deep = _lists(res / "fused-turns/deep.parquet")
    assert set(got) == set(inputs[0])
    for qid, rows in got.items():
        score, best = {}, {}
        for i, listed in enumerate(inputs):
            once = list(dict.fromkeys(row["turn_id"] for row in listed.get(qid, [])))  # a turn at its first rank
            for r, tid in enumerate(once, 1):
                score[tid] = score.get(tid, Fraction(0)) + Fraction(1, 60 + r)
                best[tid] = min(best.get(tid, (r, i)), (r, i))
        want = sorted(score, key=lambda t: (-score[t], best[t]))
        assert [r["turn_id"] for r in rows] == want, qid
        sessions = list(dict.fromkeys((r["position"], r["session_id"]) for r in rows))[:50]
        assert [(r["position"], r["session_id"]) for r in deep[qid]] == sessions, qid
    official = json.loads((res / "fused-turns/official.json").read_text())
    assert official["turn"]["questions"] > 0


def test_minilm_at_turn_level_ranks_each_user_turn_by_cosine(run):
    """MiniLM over LongMemEval's turn corpus: each user turn of the raw file embedded alone, ranked by
    cosine to the question (ties by corpus order), the whole list. The job's scores are the cosines
    computed here up to float32 rounding (the job batches other texts together, and a batch's padding
    changes the last bits); its order is exactly its scores' order."""
    import numpy as np

    from memobench.catalog.registry import row

    work, items, _, _ = run
    got = _lists(work / "results/lme/minilm-turns/turns.parquet")
    # each distinct text embedded once (haystacks repeat sessions): the same vectors up to the batches' last bits
    texts = sorted({item["haystack_sessions"][p][i]["content"] for item in items for p, i in _corpus_places(item)}
                   | {item["question"] for item in items})
    vector = dict(zip(texts, np.asarray(row("minilm").default_encoder().encode(texts), dtype=np.float64)))
    for item in items:
        places = _corpus_places(item)
        vectors = np.array([vector[item["haystack_sessions"][p][i]["content"]] for p, i in places])
        scores = vectors @ vector[item["question"]]
        rows = got[item["question_id"]]
        ranked = [places.index((r["position"], r["turn"])) for r in rows]
        assert sorted(ranked) == list(range(len(places)))  # every user turn, once
        assert ranked == sorted(ranked, key=lambda d: (-rows[ranked.index(d)]["score"], d))
        assert np.allclose([r["score"] for r in rows], scores[ranked], rtol=0, atol=1e-5)
    assert json.loads((work / "results/lme/minilm-turns/official.json").read_text())["turn"]["questions"] > 0
    # turns are embedded in the job: no session vectors were made
    assert not (work / layout.path(layout.EMBEDDINGS, dataset="lme", model="minilm")).exists()


def test_memobench_score_scores_a_turn_run_at_both_grains(run):
    import os
    import subprocess
    import sys

    from memobench.reporting.numbers import percent
    from tests.helpers import REPO

    work = run[0]
    cmd = [sys.executable, "-m", "memobench.cli", "score", str(work.parent / "data" / "turns.trec"), "--dataset",
           "lme", "--grain", "turn", "--name", "scored-turns", "--against", "bm25-turns", "--configfile",
           str(work.parent / "cfg.yaml"), "-d", str(work), "--cores", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = json.loads((work / "results/lme/bm25-turns/official.json").read_text())["turn"]
    out = proc.stdout
    assert "official metrics of its sessions at their best turn" in out and "turn level (LongMemEval" in out
    assert f"turn: recall_all@5 {percent(want['recall_all@5'])}" in out
    assert f"turn2session: recall_all@5 {percent(want['turn2session']['recall_all@5'])}" in out
    assert "data file: lme.json" in out and "not a published release" in out


@pytest.mark.parametrize("ds,fmt,variant", [("lme", "longmemeval", "bm25-turns"), ("lme", "longmemeval", "svc-all-turns"),
                                            ("locomo1", "locomo", "bm25-turns")])
def test_token_budgets_at_turn_grain_equal_an_independent_count(run, ds, fmt, variant, tmp_path):
    """A turn variant's recall within token budgets is of the turns it lists (an assistant turn a
    service ranks counted too, never gold), as tests/oracles/token_budgets.py counts them with
    tiktoken from the raw file; a session variant beside it keeps session grain."""
    work = run[0]
    token_budgets.assert_run_as_counted(work / "results", ds, fmt, work.parent / "data" / f"{ds}.json", [variant],
                                        tmp_path)
    official = json.loads((work / f"results/{ds}/{variant}/official.json").read_text())
    longest = max(len(v) for v in _lists(work / f"results/{ds}/{variant}/turns.parquet").values())
    assert official["budgets"]["grain"] == "turn" and official["budgets"]["depth"] == longest
    session = json.loads((work / "results/lme/bm25-official/official.json").read_text())["budgets"]
    assert session["grain"] == "session" and session["depth"] <= 50
