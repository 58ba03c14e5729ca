"""Paired statistics and the TREC exports, by hand."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memobench.runs import retrieval_log, trec
from memobench.evaluation import exports, resampling, stats
from memobench.core.errors import DataError
from memobench.reporting.numbers import fmt_p
from memobench.retrieval.memo import OUTCOMES, RANKINGS


def _rng():
    return np.random.default_rng(1)


def test_identical_variants_differ_by_zero_with_p_one():
    a = np.array([[1.0], [0.0], [1.0]])
    (r,) = resampling.paired(a, a.copy(), _rng())
    assert r["diff"] == 0.0 and r["ci95"] == [0.0, 0.0] and r["p"] == 1.0


def test_constant_difference_has_a_tight_interval_and_a_small_p():
    a, b = np.ones((20, 1)), np.zeros((20, 1))
    (r,) = resampling.paired(a, b, _rng(), n_boot=2000, n_perm=2000)
    assert r["diff"] == 1.0 and r["ci95"] == [1.0, 1.0]
    # all 20 signs equal has probability 2 / 2**20: no flip reaches it
    assert r["p"] == 1 / 2001


def test_one_nonzero_difference_is_never_significant():
    # d = [1, 0, 0, 0]: every sign flip gives |mean| = 0.25 = the observed one
    a = np.array([[1.0], [0.0], [0.0], [0.0]])
    (r,) = resampling.paired(a, np.zeros((4, 1)), _rng(), n_boot=1000, n_perm=1000)
    assert r["diff"] == 0.25 and r["p"] == 1.0
    # bootstrap means of d over 4 draws lie in {0, .25, .5, .75, 1}; P(0) = (3/4)^4 > 2.5%
    assert r["ci95"][0] == 0.0 and r["ci95"][1] in (0.75, 1.0)


def _outcomes(path, ranks, status=None):
    n = len(ranks)
    pq.write_table(pa.table({"q_index": list(range(n)), "question_id": [f"q{i}" for i in range(n)],
                             "question_type": ["t"] * n, "status": status or ["evaluated"] * n,
                             "reason": [None] * n, "in_types": [True] * n, "gold_rank": ranks,
                             "pool_size": [10] * n, "gold_in_pool": [1] * n}, schema=OUTCOMES), path)
    return path


def test_dataset_stats_pairs_rates_saturation_and_reruns(tmp_path):
    base = _outcomes(tmp_path / "b.parquet", [1] * 19 + [2])
    var = _outcomes(tmp_path / "v.parquet", [2] * 10 + [1] * 9 + [0],
                    status=["evaluated"] * 19 + ["skipped"])
    variants = {"v0.8.0": "", "mine": "v0.8.0"}
    outcomes = {"v0.8.0": [base], "mine": [var]}
    s = stats.dataset_stats("d", variants, outcomes, log=lambda m: None)
    (c,) = s["comparisons"]  # the harness baseline is v0.8.0: one comparison, not two
    assert (c["variant"], c["baseline"], c["n"], c["only_baseline"]) == ("mine", "v0.8.0", 19, 1)
    h1 = c["metrics"]["hit@1"]
    assert (h1["n"], h1["variant"], h1["baseline"]) == (19, 9 / 19, 1.0)
    assert h1["diff"] == pytest.approx(-10 / 19) and h1["saturated"]  # the baseline is at 100%
    assert c["metrics"]["mrr"]["diff"] == pytest.approx((10 * 0.5 + 9 - 19) / 19)
    assert not c["metrics"]["mrr"]["saturated"]
    again = stats.dataset_stats("d", variants, outcomes, log=lambda m: None)
    assert json.dumps(again) == json.dumps(s)


def test_comparisons_on_a_dataset_draw_the_same_resamples(tmp_path):
    """Seeded per dataset, not per comparison: two variants with the same
    per-question outcomes get the same interval and p-value against v0.8.0,
    whatever their names; another dataset draws other resamples."""
    ranks = [1, 0, 2, 1, 7, 0, 1, 3, 0, 1, 1, 12, 4, 1, 0, 2, 1, 1, 9, 0]
    base = _outcomes(tmp_path / "b.parquet", [1] * 10 + [0] * 10)
    a = _outcomes(tmp_path / "a.parquet", ranks)
    b = _outcomes(tmp_path / "twin.parquet", ranks)
    variants = {"v0.8.0": "", "a": "", "zz-twin": ""}
    s = stats.dataset_stats("d", variants, {"v0.8.0": [base], "a": [a], "zz-twin": [b]}, log=lambda m: None)
    ca, cb = s["comparisons"]
    assert (ca["variant"], cb["variant"]) == ("a", "zz-twin")
    h1 = ca["metrics"]["hit@1"]
    assert h1["ci95"][0] < h1["diff"] < h1["ci95"][1] and 0.001 < h1["p"] < 1  # a real interval, not a degenerate one
    assert ca["metrics"] == cb["metrics"]
    other = stats.dataset_stats("e", variants, {"v0.8.0": [base], "a": [a], "zz-twin": [b]}, log=lambda m: None)
    assert other["comparisons"][0]["metrics"] != ca["metrics"]


def test_p_at_the_permutation_floor_reads_as_a_bound():
    assert fmt_p(1 / 10_001) == "< 0.0001" and fmt_p(2 / 10_001) == "0.0002"
    assert fmt_p(1 / 2001, 2000) == "< 0.0005" and fmt_p(None) == "-" and fmt_p(1.0) == "1.0000"


def test_comparisons_against_baseline_and_reference():
    got = stats.comparisons({"v0.8.0": "", "a": "b", "b": "", "c": "missing"})
    assert got == [("a", "b", "harness baseline"), ("a", "v0.8.0", "v0.8.0"), ("b", "v0.8.0", "v0.8.0"),
                   ("c", "v0.8.0", "v0.8.0")]


def _rankings(path, rows):
    cols = {n: [] for n in RANKINGS.names}
    for qi, qid, sids in rows:
        for r, sid in enumerate(sids, 1):
            cols["question_id"].append(qid)
            cols["rank"].append(r)
            cols["session_id"].append(sid)
            cols["q_index"].append(qi)
    pq.write_table(pa.table(cols, schema=RANKINGS), path)
    return path


def _questions(path, rows):
    """A questions table: (question_id, gold) per question, haystack 0, in q_index order."""
    from memobench.core.tables import QUESTIONS

    pq.write_table(pa.Table.from_pylist(
        [dict(q_index=i, question_id=qid, question="?", question_type="t", question_date=None, haystack_id=0,
              gold=gold, paired_question_id=None, parse_error=False, answer=None, answer_session_ids=[],
              evidence=None)
         for i, (qid, gold) in enumerate(rows)], schema=QUESTIONS), path)
    return path


def test_run_trec_writes_every_position_and_every_question(tmp_path):
    """A session id's later positions and a question id's later questions are
    lines of their own, under the marked ids; the first occurrence keeps its id."""
    qs = _questions(tmp_path / "q.parquet", [("q0", ["a"]), ("q1", ["c"]), ("q0", ["z"])])
    rk = _rankings(tmp_path / "r.parquet", [(0, "q0", ["b", "a", "b", "b"]), (1, "q1", ["c"]), (2, "q0", ["z"])])
    counts = trec.write(rk, qs, "v1", tmp_path / "run.trec", log=lambda m: None)
    assert (tmp_path / "run.trec").read_text() == (
        "q0 Q0 b 1 50 v1\nq0 Q0 a 2 49 v1\nq0 Q0 b%#2 3 48 v1\nq0 Q0 b%#3 4 47 v1\n"
        "q1 Q0 c 1 50 v1\nq0%#2 Q0 z 1 50 v1\n")
    assert (counts["lines"], counts["questions"], counts["repeated_sessions"], counts["repeated_question_ids"]) == (6, 3, 2, 1)
    exports.write_qrels(qs, tmp_path / "qrels.trec", log=lambda m: None)
    assert (tmp_path / "qrels.trec").read_text() == "q0 0 a 1\nq1 0 c 1\nq0%#2 0 z 1\n"


def _literal_run(rankings_path, questions_path, tag):
    """run.trec's text and counts as write_run first wrote them, line by line."""
    from memobench.core.protocol import DEPTH
    from memobench.core.tables import read_table

    tag = trec.trec_id(tag)
    qtok = trec.question_tokens(read_table(questions_path, columns=["q_index", "question_id"]).to_pylist())
    t = read_table(rankings_path).sort_by([("q_index", "ascending"), ("rank", "ascending")]).to_pydict()
    stats = {"questions": 0, "lines": 0, "repeated_question_ids": 0, "repeated_sessions": 0,
             "encoded_question_ids": 0, "encoded_session_ids": 0}
    lines, current, occurrences = [], None, {}
    for rank, sid, qi in zip(t["rank"], t["session_id"], t["q_index"]):
        if rank > DEPTH:
            continue
        if qi != current:
            current, occurrences, qid = qi, {}, qtok[qi]
            stats["questions"] += 1
            stats["repeated_question_ids"] += trec.REPEAT_MARK in qid
            stats["encoded_question_ids"] += "%" in qid.split(trec.REPEAT_MARK)[0]
        n = occurrences[sid] = occurrences.get(sid, 0) + 1
        docno = trec.trec_id(sid, n)
        stats["repeated_sessions"] += n > 1
        stats["encoded_session_ids"] += "%" in docno.split(trec.REPEAT_MARK)[0]
        lines.append(f"{qid} Q0 {docno} {rank} {DEPTH + 1 - rank} {tag}\n")
        stats["lines"] += 1
    return "".join(lines), stats


def test_run_trec_is_the_line_by_line_text(tmp_path):
    """Random lists, rows in any order, repeated and hostile ids, ranks past
    the depth (a question with nothing above it has no line): the same file
    and counts as the line-by-line writing."""
    import random

    from memobench.core.protocol import DEPTH

    rng = random.Random(3)
    ids = ["a", "b", "", "x y", "50%", "p%#2", "answer_1", "é\u2028", "c\x00d", "%"]
    for n in range(60):
        qs = _questions(tmp_path / "q.parquet", [(rng.choice(["q0", "q1", "", "q 2"]), []) for _ in range(8)])
        cols = {c: [] for c in RANKINGS.names}
        for qi in rng.sample(range(8), rng.randint(0, 8)):
            ranks = list(range(1, rng.randint(1, 60) + 1))
            if n % 4 == 0:  # only ranks past the depth
                ranks = [r + DEPTH for r in ranks]
            for r in ranks:
                cols["question_id"].append("q")
                cols["rank"].append(min(r, 127))
                cols["session_id"].append(rng.choice(ids))
                cols["q_index"].append(qi)
        order = rng.sample(range(len(cols["rank"])), len(cols["rank"]))
        pq.write_table(pa.table({c: [v[i] for i in order] for c, v in cols.items()}, schema=RANKINGS),
                       tmp_path / "r.parquet")
        counts = trec.write(tmp_path / "r.parquet", qs, "tag 1", tmp_path / "run.trec", log=lambda m: None)
        text, want = _literal_run(tmp_path / "r.parquet", qs, "tag 1")
        assert (tmp_path / "run.trec").read_text(encoding="utf-8") == text
        assert list(counts.items()) == list(want.items())


def test_run_trec_refuses_a_list_of_no_question(tmp_path):
    qs = _questions(tmp_path / "q.parquet", [("q0", [])])
    rk = _rankings(tmp_path / "r.parquet", [(0, "q0", ["a"]), (5, "q5", ["b"])])
    with pytest.raises(DataError, match=r"r.parquet: q_index 5: is not a question of .*q.parquet"):
        trec.write(rk, qs, "v1", tmp_path / "run.trec", log=lambda m: None)
    assert not (tmp_path / "run.trec").exists()


def test_run_and_qrels_number_a_question_id_over_the_whole_file(tmp_path):
    """The first question of an id may have no list (a skip) and no gold: the
    second is still the id's second occurrence in both files."""
    qs = _questions(tmp_path / "q.parquet", [("q", []), ("q", ["a"])])
    rk = _rankings(tmp_path / "r.parquet", [(1, "q", ["a"])])
    trec.write(rk, qs, "v1", tmp_path / "run.trec", log=lambda m: None)
    exports.write_qrels(qs, tmp_path / "qrels.trec", log=lambda m: None)
    assert (tmp_path / "run.trec").read_text() == "q%#2 Q0 a 1 50 v1\n"
    assert (tmp_path / "qrels.trec").read_text() == "q%#2 0 a 1\n"


@pytest.mark.parametrize("qid,sid,line", [
    ("q 0", "a", "q%200 Q0 a 1 50 v1\n"), ("q0", "a\tb", "q0 Q0 a%09b 1 50 v1\n"), ("q0", "", "q0 Q0 % 1 50 v1\n"),
    ("q\x00", "e\x00f", "q%00 Q0 e%00f 1 50 v1\n"), ("", "50%", "% Q0 50%25 1 50 v1\n"),
    ("q0", "filler session", "q0 Q0 filler%20session 1 50 v1\n"), ("q0", "é\u2028", "q0 Q0 é%E2%80%A8 1 50 v1\n")])
def test_an_id_trec_cannot_hold_is_percent_encoded(tmp_path, qid, sid, line):
    qs = _questions(tmp_path / "q.parquet", [(qid, [sid])])
    rk = _rankings(tmp_path / "r.parquet", [(0, qid, [sid])])
    counts = trec.write(rk, qs, "v1", tmp_path / "run.trec", log=lambda m: None)
    assert (tmp_path / "run.trec").read_text(encoding="utf-8") == line
    assert (counts["encoded_question_ids"], counts["encoded_session_ids"]) == (qid != "q0", sid != "a")
    exports.write_qrels(qs, tmp_path / "qrels.trec", log=lambda m: None)
    qid_tok, _, sid_tok = line.split()[:3]
    assert (tmp_path / "qrels.trec").read_text(encoding="utf-8") == f"{qid_tok} 0 {sid_tok} 1\n"
    assert trec.decode_trec_id(qid_tok) == (qid, 1) and trec.decode_trec_id(sid_tok) == (sid, 1)


def _must_encode(c: str) -> bool:
    cp = ord(c)
    return c == "%" or c.isspace() or cp < 0x20 or 0x7F <= cp <= 0x9F or 0xD800 <= cp <= 0xDFFF


def test_a_character_is_encoded_exactly_when_trec_cannot_hold_it():
    """Every code point: written as is unless it is '%', whitespace to
    str.isspace() (what str.split, and so ir_measures, splits on), a C0/C1
    control or DEL, or a lone surrogate; written, a token is one field of one
    line to str.split and str.splitlines."""
    bad = []
    for cp in range(0x110000):
        c = chr(cp)
        tok = trec.trec_id(f"a{c}b")
        if (tok != f"a{c}b") != _must_encode(c) or tok.split() != [tok] or tok.splitlines() != [tok]:
            bad.append(hex(cp))
    assert not bad


ids = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)


@given(ids, st.integers(1, 10_000))
@settings(max_examples=500, deadline=None)
def test_trec_ids_round_trip(value, n):
    tok = trec.trec_id(value, n)
    assert trec.decode_trec_id(tok) == (value, n)
    assert tok and tok.split() == [tok] and tok.encode("utf-8")  # one field; valid UTF-8
    assert not any(_must_encode(c) for c in tok.replace("%", ""))
    assert (trec.REPEAT_MARK in tok) == (n > 1)


@given(st.text(st.sampled_from("%#0123456789ABCDEFaef x\x00"), max_size=10))
@settings(max_examples=500, deadline=None)
def test_a_token_has_one_spelling(tok):
    """decode_trec_id takes what trec_id writes and nothing else (a token is
    the image of exactly one (id, occurrence))."""
    try:
        value, n = trec.decode_trec_id(tok)
    except ValueError:
        return
    assert trec.trec_id(value, n) == tok


def test_distinct_ids_and_occurrences_never_share_a_token():
    values = ["", "%", "%#2", "a", "a%#2", "a%232", "a%", "%%", " ", "%20", "\x00", "%00"]
    toks = [trec.trec_id(v, n) for v in values for n in (1, 2, 12)]
    assert len(set(toks)) == len(toks)


def test_trec_eval_reads_the_positions_the_harness_counts(tmp_path):
    """pytrec_eval (Success@k) and ir_measures (RR@10) on the written files
    give, question by question, the harness's hit@k and 1/gold_rank counted
    over positions: ten repeats before the gold, a repeated gold, hostile
    ids, two NUL question ids and a repeated question id."""
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR, Success

    rows = [("rep10", ["g"], ["r"] * 10 + ["g", "x"]),
            ("q\x00one", ["g\tg"], ["", "g\tg", "g\tg", "filler session"]),
            ("q\x00two", ["\x00"], ["e\x00f", "", "", "\x00"]),
            ("", ["g"], ["a b"] * 4 + ["g"]),
            ("rep10", ["y"], ["x"] * 3 + ["y"])]
    qs = _questions(tmp_path / "q.parquet", [(qid, gold) for qid, gold, _ in rows])
    rk = _rankings(tmp_path / "r.parquet", [(i, qid, lst) for i, (qid, _, lst) in enumerate(rows)])
    trec.write(rk, qs, "v1", tmp_path / "run.trec", log=lambda m: None)
    exports.write_qrels(qs, tmp_path / "qrels.trec", log=lambda m: None)
    for f in ("run.trec", "qrels.trec"):  # raw NUL would abort pytrec_eval: none is written
        assert not any(_must_encode(c) for c in (tmp_path / f).read_text(encoding="utf-8").replace(" ", "")
                       .replace("\n", "").replace("%", ""))
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "qrels.trec")))
    run = list(ir_measures.read_trec_run(str(tmp_path / "run.trec")))
    got: dict = {}
    for m in ir_measures.pytrec_eval.iter_calc([Success @ 1, Success @ 5, Success @ 10], qrels, run):
        got.setdefault(m.query_id, {})[str(m.measure)] = m.value
    for m in ir_measures.iter_calc([RR @ 10], qrels, run):
        got[m.query_id][str(m.measure)] = m.value
    assert len(got) == len(rows)
    toks = trec.question_tokens([{"q_index": i, "question_id": r[0]} for i, r in enumerate(rows)])
    for i, (qid, gold, lst) in enumerate(rows):
        rank = next((r for r, sid in enumerate(lst[:10], 1) if sid in gold), 0)
        want = {f"Success@{k}": float(0 < rank <= k) for k in (1, 5, 10)}
        want["RR@10"] = 1 / rank if rank else 0.0
        assert got[toks[i]] == want, (qid, lst)
    assert got["rep10"]["Success@10"] == 0.0 and got["rep10%#2"]["RR@10"] == 0.25


def test_qrels_leave_out_questions_without_gold(tmp_path):
    from memobench.core.tables import QUESTIONS

    rows = [dict(q_index=i, question_id=f"q{i}", question="?", question_type="t", question_date=None,
                 haystack_id=h, gold=g, paired_question_id=None, parse_error=False, answer=None,
                 answer_session_ids=[])
            for i, (h, g) in enumerate([(0, ["a", "b"]), (1, []), (-1, ["x"]), (3, ["c"])])]
    pq.write_table(pa.Table.from_pylist(rows, schema=QUESTIONS), tmp_path / "q.parquet")
    counts = exports.write_qrels(tmp_path / "q.parquet", tmp_path / "qrels.trec", log=lambda m: None)
    assert (tmp_path / "qrels.trec").read_text() == "q0 0 a 1\nq0 0 b 1\nq3 0 c 1\n"
    assert counts["no_gold"] == 2


def _events(path, rows):
    cols = ["session_key", "seq", "role", "text", "has_answer"]
    pq.write_table(pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)},
                            schema=pa.schema([("session_key", pa.int64()), ("seq", pa.int32()), ("role", pa.string()),
                                              ("text", pa.string()), ("has_answer", pa.bool_())])), path)


def test_session_json_is_each_sessions_turns_as_json(tmp_path):
    """Turns in seq order with has_answer only where true; user text joined by
    one space; a session without events reads as no turns; a foreign file is refused."""
    rows = [(1, 1, "assistant", "b é", False), (1, 0, "user", "a \"q\"", True), (1, 2, "user", "c", None),
            (4, 0, "assistant", "x", False)]
    rows += [(k, 0, "user", f"t{k} ✓", False) for k in range(5, 40)]
    _events(tmp_path / "events.parquet", rows)
    retrieval_log.write_session_json(tmp_path / "events.parquet", tmp_path / "s.bin", log=lambda m: None)
    store = retrieval_log.SessionJson(tmp_path / "s.bin")
    turns = store.turns(1).decode("utf-8")
    assert json.loads(turns) == [{"role": "user", "content": "a \"q\"", "has_answer": True},
                                 {"role": "assistant", "content": "b é"}, {"role": "user", "content": "c"}]
    assert turns == json.dumps(json.loads(turns), ensure_ascii=False) and store.user_text(1) == "a \"q\" c"
    assert (store.turns(4), store.user_text(4)) == (b'[{"role": "assistant", "content": "x"}]', "")
    for k in (0, 2, 3, 40, -5):
        assert (store.turns(k), store.user_text(k)) == (b"[]", "")
    for k in reversed(range(5, 40)):
        assert store.turns(k) == json.dumps([{"role": "user", "content": f"t{k} ✓"}], ensure_ascii=False).encode()
        assert store.user_text(k) == f"t{k} ✓"
    store.close()
    (tmp_path / "bad.bin").write_bytes(b"x" * 100)
    with pytest.raises(DataError, match="not a session JSON file"):
        retrieval_log.SessionJson(tmp_path / "bad.bin")


def test_session_json_equals_json_dumps_across_batches(tmp_path):
    """Against json.dumps of the turns written out: a session running over the
    reader's batch of 65,536 events, turns out of seq order, a null role,
    characters JSON escapes (quotes, backslashes, controls, a line separator)."""
    texts = ['a "b" \\ c', "tab\tnl\n\x01", "\u2028 é ✓", ""]
    rows = [(0, 1, "user", texts[0], True), (0, 0, None, texts[1], False)]
    rows += [(1, i, "user" if i % 3 else "assistant", texts[i % 4] + str(i), i % 7 == 0) for i in range(65540)]
    rows += [(2, 1, "assistant", texts[2], None), (2, 0, "user", texts[3], False)]
    _events(tmp_path / "events.parquet", rows)
    retrieval_log.write_session_json(tmp_path / "events.parquet", tmp_path / "s.bin", log=lambda m: None)
    store = retrieval_log.SessionJson(tmp_path / "s.bin")
    for key in (0, 1, 2):
        turns = sorted((r for r in rows if r[0] == key), key=lambda r: r[1])
        want = [{"role": r, "content": t, **({"has_answer": True} if ha else {})} for _, _, r, t, ha in turns]
        assert store.turns(key) == json.dumps(want, ensure_ascii=False).encode("utf-8")
        user = " ".join(t for _, _, r, t, _ in turns if r == "user")
        assert store.user_text_json(key) == json.dumps(user, ensure_ascii=False).encode("utf-8")
    store.close()


def test_session_json_refuses_unordered_events(tmp_path):
    _events(tmp_path / "events.parquet", [(2, 0, "user", "a", False), (1, 0, "user", "b", False)])
    with pytest.raises(DataError, match="session-key order"):
        retrieval_log.write_session_json(tmp_path / "events.parquet", tmp_path / "s.bin", log=lambda m: None)

