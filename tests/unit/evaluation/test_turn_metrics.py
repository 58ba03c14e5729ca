"""Turn-level metrics (evaluation/turn_metrics.py) against LongMemEval's own
rules as the oracle writes them out (tests/oracles/longmemeval_retrieval.py):
turn ids, turn-level recall/ndcg and turn2session, on seeded random corpora
with answer/noans halves of one session, repeated session ids, lists shorter
than the corpus and k past it."""

from __future__ import annotations

import random

import pytest

from memobench.evaluation import turn_metrics as tm
from memobench.retrieval.turns import turn_scoring_id
from tests.oracles import longmemeval_retrieval as lme


def test_turn_ids_follow_longmemeval():
    assert turn_scoring_id("answer_ab", 2, True) == "answer_ab_3"
    assert turn_scoring_id("answer_ab", 0, False) == "noans_ab_1"
    assert turn_scoring_id("answer_ab", 0, None) == "noans_ab_1"  # missing has_answer reads as false
    assert turn_scoring_id("sharegpt_x", 4, False) == "sharegpt_x_5"
    assert turn_scoring_id("sharegpt_x", 4, True) == "sharegpt_x_5"  # no "answer": kept as it is
    assert turn_scoring_id("answer_answer_1", 1, False) == "noans_noans_1_2"  # every "answer" replaced
    assert tm.strip_turn("noans_ab_2") == "noans_ab" and tm.strip_turn("answer_a_b_12") == "answer_a_b"


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


def test_metrics_equal_longmemeval_on_random_corpora():
    for seed in range(300):
        _check_random_corpus(seed)


def _check_random_corpus(seed):
    rng = random.Random(seed)
    scoring = _corpus(rng)
    positions = list(range(len(scoring)))
    rng.shuffle(positions)
    if rng.random() < 0.3:  # a retriever that returned part of the corpus
        positions = positions[:rng.randint(0, len(positions))]
    want = lme.question_metrics(positions, scoring, "turn")
    gold = {s for s in scoring if "answer" in s}
    got_turn = tm._lme_metrics(positions, scoring, gold)
    got_session = tm.turn2session_metrics(positions, scoring)
    for name, w in want["turn"].items():
        assert got_turn[name] == pytest.approx(w, rel=1e-12, abs=0), (seed, name)
    for name, w in want["session"].items():
        assert got_session[name] == pytest.approx(w, rel=1e-12, abs=0), (seed, name)
        if not name.startswith("ndcg"):
            assert got_session[name] == w  # recall is 0.0 or 1.0: no rounding to excuse


def test_effective_k_grows_past_repeats_and_stops_past_the_corpus():
    ranked = ["a", "a", "b", "a", "c", "d"]
    assert tm.effective_k(ranked, 1, 6) == 1
    assert tm.effective_k(ranked, 2, 6) == 3
    assert tm.effective_k(ranked, 3, 6) == 5
    assert tm.effective_k(ranked, 5, 6) == 7  # never 5 distinct: the corpus size plus one, as the loop ends
    assert tm.effective_k(ranked, 10, 6) == 10  # k past the corpus: not grown
    assert tm.effective_k(ranked[:2], 2, 6) == 7  # a short list never holds 2


def test_harness_measures_over_turns():
    scoring = ["x_1", "noans_a_1", "answer_a_3", "answer_a_5"]
    gold = {s for s in scoring if "answer" in s}
    m = tm.harness_over_turns([scoring[p] for p in [1, 0, 2, 3]], gold)
    assert m["hit@1"] == 0.0 and m["hit@5"] == 1.0 and m["mrr"] == pytest.approx(1 / 3)
    m = tm.harness_over_turns([scoring[p] for p in [0, 1]], gold)
    assert m["hit@10"] == 0.0 and m["mrr"] == 0.0
