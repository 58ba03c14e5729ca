"""Turn-level metrics (evaluation/turn_metrics.py) against LongMemEval's own
rules as the oracle writes them out (tests/oracles/longmemeval_retrieval.py):
turn ids, turn-level recall/ndcg and turn2session, on seeded random corpora
with answer/noans halves of one session, repeated session ids, lists shorter
than the corpus and k past it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memobench.evaluation import turn_metrics as tm
from memobench.evaluation.official import _lme_metrics
from memobench.retrieval.turns import turn_scoring_id
from tests.oracles import longmemeval_retrieval as lme


def test_turn_ids_follow_longmemeval():
    assert turn_scoring_id("answer_ab", 2, True) == "answer_ab_3"
    assert turn_scoring_id("answer_ab", 0, False) == "noans_ab_1"
    assert turn_scoring_id("answer_ab", 0, None) == "noans_ab_1"  # missing has_answer reads as false
    assert turn_scoring_id("sharegpt_x", 4, False) == "sharegpt_x_5"
    assert turn_scoring_id("sharegpt_x", 4, True) == "sharegpt_x_5"  # no "answer": kept as it is
    assert turn_scoring_id("answer_answer_1", 1, False) == "noans_noans_1_2"  # every "answer" replaced


def _corpus(rng: random.Random) -> list[str]:
    """A question's turn scoring ids: sessions (some repeated) of 1-5 user turns, answer sessions split."""
    sessions = [f"s{rng.randrange(6)}" if rng.random() < 0.3 else f"f{i}" for i in range(rng.randint(1, 9))]
    sessions += [f"answer_{rng.randrange(3)}" for _ in range(rng.randint(0, 3))]
    rng.shuffle(sessions)
    out = []
    for sid in sessions:
        for i in range(rng.randint(1, 5)):
            seq = 2 * i  # user turns sit at even places, assistants between
            out.append(turn_scoring_id(sid, seq, rng.random() < 0.4))
    return out


def test_turn_metrics_equal_longmemeval_on_random_corpora():
    for seed in range(300):
        rng = random.Random(seed)
        scoring = _corpus(rng)
        positions = list(range(len(scoring)))
        rng.shuffle(positions)
        if rng.random() < 0.3:  # a retriever that returned part of the corpus
            positions = positions[:rng.randint(0, len(positions))]
        want = lme.question_metrics(positions, scoring, "turn")["turn"]
        got = _lme_metrics(positions, scoring, {s for s in scoring if "answer" in s})
        for name, w in want.items():
            assert got[name] == pytest.approx(w, rel=1e-12, abs=0), (seed, name)


def _reach(ranked: list[str]) -> list[int]:
    """reach[d]: the first prefix length of ``ranked`` holding d distinct ids."""
    return [0, *(i for i, s in enumerate(ranked, 1) if s not in ranked[:i - 1])]


def test_k_grows_past_repeats_and_stops_past_the_corpus():
    reach = _reach(["a", "a", "b", "a", "c", "d"])
    assert tm.grown_ks(reach, [1, 2, 3], 6) == [1, 3, 5]
    assert tm.grown_ks(reach, [5], 6) == [7]  # never 5 distinct: the corpus size plus one, as the loop ends
    assert tm.grown_ks(reach, [10], 6) == [10]  # k past the corpus: not grown
    assert tm.grown_ks(_reach(["a", "a"]), [2], 6) == [7]  # a short list never holds 2


def test_harness_measures_over_turns():
    scoring = ["x_1", "noans_a_1", "answer_a_3", "answer_a_5"]
    gold = {s for s in scoring if "answer" in s}
    m = tm.harness_over_turns([scoring[p] for p in [1, 0, 2, 3]], gold)
    assert m["hit@1"] == 0.0 and m["hit@5"] == 1.0 and m["mrr"] == pytest.approx(1 / 3)
    m = tm.harness_over_turns([scoring[p] for p in [0, 1]], gold)
    assert m["hit@10"] == 0.0 and m["mrr"] == 0.0


def _events(path, sessions):
    """An events table of ``sessions`` ({key: [(role, has_answer), ...]}), rows out of order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [(key, seq, role, has) for key, turns in sessions.items() for seq, (role, has) in enumerate(turns)]
    random.Random(1).shuffle(rows)
    pq.write_table(pa.table({"session_key": pa.array([r[0] for r in rows], pa.int64()),
                             "seq": pa.array([r[1] for r in rows], pa.int32()),
                             "role": [r[2] for r in rows], "has_answer": pa.array([r[3] for r in rows], pa.bool_())}),
                   path)


def test_rows_equal_longmemeval_question_by_question(tmp_path):
    """lme_turn_rows, which lays every question's corpus out at once, against LongMemEval's rules
    run on each question's own corpus of scoring ids (the oracle): repeated and empty sessions,
    answer sessions with and without has_answer, an id whose noans form still holds "answer",
    partial and empty lists, an abstention question and one without a list; a ranked assistant
    turn (a memory service's) is added at the corpus's end, never gold; a bad place or a turn
    ranked twice stops in one line naming the question."""
    from memobench.core.errors import DataError
    from memobench.retrieval.turns import turn_scoring_id

    rng = random.Random(7)
    sids = ["answer_a", "answer_b", "f1", "f2", "f3", "ansanswerwer_c", "s", ""]
    sessions = {k: [(("user", "assistant")[i % 2] if rng.random() < 0.9 else "user",
                     rng.choice([True, False, None])) for i in range(rng.randint(0, 7))] for k in range(40)}
    sessions[3] = []  # a session with no turn
    _events(tmp_path / "events.parquet", sessions)
    questions, haystacks, qis, bounds, positions, turns, want, added = [], {}, [], [0], [], [], {}, 0
    for qi in range(200):
        hay = {"ids": [rng.choice(sids) for _ in range(rng.randint(0, 9))]}
        hay["keys"] = [rng.randrange(40) for _ in hay["ids"]]
        questions.append({"q_index": qi, "question_id": f"q{qi}" + ("_abs" if qi % 17 == 5 else ""),
                          "question_type": "t", "haystack_id": qi, "parse_error": False})
        haystacks[qi] = hay
        corpus = [(p, s) for p, key in enumerate(hay["keys"]) for s, (role, _) in enumerate(sessions[key])
                  if role == "user"]
        scoring = [turn_scoring_id(hay["ids"][p], s, sessions[hay["keys"][p]][s][1] is True) for p, s in corpus]
        listed = rng.sample(range(len(corpus)), rng.randint(0, len(corpus)))
        extras = [(p, s) for p, key in enumerate(hay["keys"]) for s, (role, _) in enumerate(sessions[key])
                  if role == "assistant" and "answer" not in hay["ids"][p].replace("answer", "noans")]
        extras = rng.sample(extras, min(len(extras), rng.randint(0, 2)))
        order = [("doc", j) for j in listed] + [("extra", e) for e in extras] if qi % 13 != 4 else []  # or no list
        rng.shuffle(order)
        ranked, ids = [], list(scoring)
        for kind, x in order:
            if kind == "doc":
                ranked.append(x)
            else:  # its id as LongMemEval would write it, after the corpus
                ranked.append(len(ids))
                ids.append(turn_scoring_id(hay["ids"][x[0]], x[1], False))
        pairs = [corpus[x] if kind == "doc" else x for kind, x in order]
        if pairs:
            qis.append(qi)
            positions += [p for p, _ in pairs]
            turns += [s for _, s in pairs]
            bounds.append(len(positions))
        want[qi] = (lme.question_metrics(ranked, ids, "turn"), sorted({s for s in scoring if "answer" in s}),
                    len(ids), bool(pairs))
        added += len(ids) - len(scoring)
    # the cases are there: a noans id still holding "answer" is gold, a question has none
    assert any(g.startswith("ansnoanswer") for _, gold, _, _ in want.values() for g in gold)
    assert any(not gold for _, gold, _, _ in want.values()) and added
    lists = tm.TurnLists(*(np.asarray(x, np.int64) for x in (qis, bounds, positions, turns)))
    user = tm.user_turns(tmp_path / "events.parquet", range(40))
    codes = np.arange(-3, user.codes[-1] + 5)  # both ways of finding a ranked turn give the same places
    assert (user.find(codes, table=True) == user.find(codes, table=False)).all()
    assert sorted(user.find(codes, table=True)[user.find(codes, table=True) >= 0]) == list(range(len(user.codes)))
    rows = tm.lme_turn_rows(questions, haystacks, user, lists)
    assert [r["q_index"] for r in rows] == list(range(200))
    for r in rows:
        metrics, gold, n, ranked = want[r["q_index"]]
        assert (r["gold"], r["turns"], r["ranked"]) == (gold, n, ranked), r["q_index"]
        for grain, got in (("turn", r["metrics"]), ("session", r["turn2session"])):
            assert got.keys() == metrics[grain].keys()
            for name, w in metrics[grain].items():
                assert got[name] == pytest.approx(w, rel=1e-12, abs=0), (r["q_index"], grain, name)
    for bad, what in (((0, 99), "rank 1: session position 99 turn 0 is not in its haystack"),
                      ((1, 1), "a turn is ranked twice")):
        q = next(q for q in rows if q["turns"] >= 2 and len(haystacks[q["q_index"]]["ids"]) >= 1)["q_index"]
        p, s = (bad[1], 0) if bad[0] == 0 else next((p, s) for p, key in enumerate(haystacks[q]["keys"])
                                                     for s, (role, _) in enumerate(sessions[key]) if role == "user")
        broken = tm.TurnLists(np.asarray([q]), np.asarray([0, 2]), np.asarray([p, p]), np.asarray([s, s]))
        with pytest.raises(DataError, match=f"question q{q}.*{what}"):
            tm.lme_turn_rows(questions, haystacks, user, broken)


def test_turn_lists_read_in_rank_order_whatever_the_table_order(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [(q, r, q + r, 2 * r) for q in (4, 1, 9) for r in range(1, 4 + q)]
    for name, order in (("sorted", sorted(rows)), ("shuffled", random.Random(3).sample(rows, len(rows)))):
        pq.write_table(pa.table({k: pa.array([row[i] for row in order], pa.int32())
                                 for i, k in enumerate(("q_index", "rank", "position", "turn"))}), tmp_path / name)
        lists = tm.read_turn_lists(tmp_path / name)
        assert lists.qis.tolist() == [1, 4, 9] and lists.depth == 12
        for q in (1, 4, 9):
            assert lists.pairs(q) == [(q + r, 2 * r) for r in range(1, 4 + q)], name
        assert lists.pairs(2) == [] and lists.pairs(10) == []
