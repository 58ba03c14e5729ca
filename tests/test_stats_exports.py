"""Paired statistics and the TREC exports, by hand."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memobench import exports, stats
from memobench.errors import DataError
from memobench.retrieval import OUTCOMES, RANKINGS


def _rng():
    return np.random.default_rng(1)


def test_identical_variants_differ_by_zero_with_p_one():
    a = np.array([[1.0], [0.0], [1.0]])
    (r,) = stats.paired(a, a.copy(), _rng())
    assert r["diff"] == 0.0 and r["ci95"] == [0.0, 0.0] and r["p"] == 1.0


def test_constant_difference_has_a_tight_interval_and_a_small_p():
    a, b = np.ones((20, 1)), np.zeros((20, 1))
    (r,) = stats.paired(a, b, _rng(), n_boot=2000, n_perm=2000)
    assert r["diff"] == 1.0 and r["ci95"] == [1.0, 1.0]
    # all 20 signs equal has probability 2 / 2**20: no flip reaches it
    assert r["p"] == 1 / 2001


def test_one_nonzero_difference_is_never_significant():
    # d = [1, 0, 0, 0]: every sign flip gives |mean| = 0.25 = the observed one
    a = np.array([[1.0], [0.0], [0.0], [0.0]])
    (r,) = stats.paired(a, np.zeros((4, 1)), _rng(), n_boot=1000, n_perm=1000)
    assert r["diff"] == 0.25 and r["p"] == 1.0
    # bootstrap means of d over 4 draws lie in {0, .25, .5, .75, 1}; P(0) = (3/4)^4 > 2.5%
    assert r["ci95"][0] == 0.0 and r["ci95"][1] in (0.75, 1.0)


def _outcomes(path, ranks, status=None):
    n = len(ranks)
    pq.write_table(pa.table({"q_index": list(range(n)), "question_id": [f"q{i}" for i in range(n)],
                             "question_type": ["t"] * n, "status": status or ["evaluated"] * n,
                             "reason": [None] * n, "in_types": [True] * n, "gold_rank": ranks,
                             "pool_size": [10] * n}, schema=OUTCOMES), path)
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
    assert stats.fmt_p(1 / 10_001) == "< 0.0001" and stats.fmt_p(2 / 10_001) == "0.0002"
    assert stats.fmt_p(1 / 2001, 2000) == "< 0.0005" and stats.fmt_p(None) == "-" and stats.fmt_p(1.0) == "1.0000"


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


def test_run_trec_lines_and_repeats(tmp_path):
    rk = _rankings(tmp_path / "r.parquet", [(0, "q0", ["b", "a", "b"]), (1, "q1", ["c"]), (2, "q0", ["z"])])
    st = exports.write_run(rk, "v1", tmp_path / "run.trec", log=lambda m: None)
    assert (tmp_path / "run.trec").read_text() == "q0 Q0 b 1 50 v1\nq0 Q0 a 2 49 v1\nq1 Q0 c 1 50 v1\n"
    assert st["repeated_sessions"] == 1 and st["repeated_question_ids"] == 1


@pytest.mark.parametrize("qid,sid", [("q 0", "a"), ("q0", "a\tb"), ("q0", "")])
def test_whitespace_in_an_id_is_an_error(tmp_path, qid, sid):
    rk = _rankings(tmp_path / "r.parquet", [(0, qid, [sid])])
    with pytest.raises(DataError, match="r.parquet: question .*holds whitespace"):
        exports.write_run(rk, "v1", tmp_path / "run.trec", log=lambda m: None)
    assert not (tmp_path / "run.trec").exists() and not (tmp_path / "run.trec.tmp").exists()


def test_an_id_is_refused_exactly_when_a_character_of_it_is_whitespace():
    """Every code point: refused as an id character iff str.isspace() (TREC splits on it)."""
    bad = []
    for cp in range(0x110000):
        c = chr(cp)
        try:
            exports.check_id(f"a{c}b", "id", "f", None)
            refused = False
        except DataError:
            refused = True
        if refused != c.isspace():
            bad.append(hex(cp))
    assert not bad


def test_qrels_leave_out_questions_without_gold(tmp_path):
    from memobench.tables import QUESTIONS

    rows = [dict(q_index=i, question_id=f"q{i}", question="?", question_type="t", question_date=None,
                 haystack_id=h, gold=g, paired_question_id=None, parse_error=False, answer=None,
                 answer_session_ids=[])
            for i, (h, g) in enumerate([(0, ["a", "b"]), (1, []), (-1, ["x"]), (3, ["c"])])]
    pq.write_table(pa.Table.from_pylist(rows, schema=QUESTIONS), tmp_path / "q.parquet")
    st = exports.write_qrels(tmp_path / "q.parquet", tmp_path / "qrels.trec", log=lambda m: None)
    assert (tmp_path / "qrels.trec").read_text() == "q0 0 a 1\nq0 0 b 1\nq3 0 c 1\n"
    assert st["no_gold"] == 2


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
    exports.write_session_json(tmp_path / "events.parquet", tmp_path / "s.bin", log=lambda m: None)
    store = exports.SessionJson(tmp_path / "s.bin")
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
        exports.SessionJson(tmp_path / "bad.bin")


def test_session_json_equals_json_dumps_across_batches(tmp_path):
    """Against json.dumps of the turns written out: a session running over the
    reader's batch of 65,536 events, turns out of seq order, a null role,
    characters JSON escapes (quotes, backslashes, controls, a line separator)."""
    texts = ['a "b" \\ c', "tab\tnl\n\x01", "\u2028 é ✓", ""]
    rows = [(0, 1, "user", texts[0], True), (0, 0, None, texts[1], False)]
    rows += [(1, i, "user" if i % 3 else "assistant", texts[i % 4] + str(i), i % 7 == 0) for i in range(65540)]
    rows += [(2, 1, "assistant", texts[2], None), (2, 0, "user", texts[3], False)]
    _events(tmp_path / "events.parquet", rows)
    exports.write_session_json(tmp_path / "events.parquet", tmp_path / "s.bin", log=lambda m: None)
    store = exports.SessionJson(tmp_path / "s.bin")
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
        exports.write_session_json(tmp_path / "events.parquet", tmp_path / "s.bin", log=lambda m: None)
