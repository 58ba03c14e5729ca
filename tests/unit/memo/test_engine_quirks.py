"""Each ranking quirk of docs/harnesses.md pinned by a small hand-made case."""

from __future__ import annotations

import math

import pytest

from memobench.memo.engine import Corpus, Haystack, Ranker, Recipe, merge_final
from memobench.core.jsmath import js_log

DAY = 86_400_000


def make(sessions, bases=None):
    """sessions: list of (id, [event texts]) in haystack order."""
    events = {k: (texts, [len(t) for t in texts]) for k, (_, texts) in enumerate(sessions)}
    ids = [sid for sid, _ in sessions]
    bases = bases or [DAY * (i + 1) for i in range(len(sessions))]
    return Corpus(events), Haystack(ids, list(range(len(sessions))), bases)


def rank(sessions, question, bases=None, **recipe):
    corpus, hay = make(sessions, bases)
    return Ranker(corpus, Recipe(**recipe)).rank(hay, 0, question)


def test_phrase_hits_come_first_then_weighted():
    sessions = [("a", ["blue whale songs are loud"]), ("b", ["whale whale songs"]), ("c", ["nothing here"])]
    r = rank(sessions, "blue whale songs")
    assert r["phrase"] == ["a"]
    assert r["final"][0] == "a" and set(r["final"]) == {"a", "b"}


def test_one_token_window_has_no_weighted_step():
    sessions = [("a", ["zebra"]), ("b", ["zebra zebra"])]
    r = rank(sessions, "the zebra?")  # window: [zebra, the] -> 2 tokens
    assert r["weighted"]
    r = rank(sessions, "zebra?")  # window: [zebra] -> no weighted step
    assert r["window"] == ["zebra"] and r["weighted"] == []
    # the phrase step still runs: "zebra?" quoted is the token zebra
    assert r["final"] == ["b", "a"]  # occ 2 beats occ 1


def test_representative_order_occ_then_length_then_latest():
    # Session order: occ desc, len asc, time desc, id asc, seq desc.
    sessions = [
        ("s1", ["kiwi", "kiwi kiwi long text here"]),  # best event: occ 2, len 24
        ("s2", ["kiwi kiwi"]),  # occ 2, len 9: wins on length
        ("s3", ["kiwi"]),  # occ 1
    ]
    r = rank(sessions, "kiwi")
    assert r["phrase"] == ["s2", "s1", "s3"]


def test_session_id_tie_break_is_utf16_order():
    # Equal occ, len and time: id ascending in UTF-16 order, so session_10 < session_2.
    sessions = [("session_2", ["plum"]), ("session_10", ["plum"])]
    r = rank(sessions, "plum", bases=[DAY, DAY])
    assert r["phrase"] == ["session_10", "session_2"]
    # An astral character sorts before U+FFFD in UTF-16 (surrogates) but after it in code points.
    sessions = [("\ufffd", ["plum"]), ("\U00020000", ["plum"])]
    r = rank(sessions, "plum", bases=[DAY, DAY])
    assert r["phrase"] == ["\U00020000", "\ufffd"]


def test_later_time_wins_before_id():
    sessions = [("a", ["plum"]), ("b", ["plum"])]
    assert rank(sessions, "plum", bases=[2 * DAY, DAY])["phrase"] == ["a", "b"]
    assert rank(sessions, "plum", bases=[DAY, 2 * DAY])["phrase"] == ["b", "a"]


def test_merge_ties_keep_first_appearance_no_id_tiebreak():
    # Equal score and equal repTime: first appearance order, not id order.
    sessions = [("z", ["alpha"]), ("a", ["beta"])]
    r = rank(sessions, "alpha beta", bases=[DAY, DAY], weights="one", pairs=False)
    assert r["weighted"] == ["z", "a"]


def test_rep_time_comes_from_first_list():
    # Both sessions score 2 (gamma + delta). In the gamma list a's event is the
    # later one (k=1 vs k=0); in the delta list b's is (k=3 vs k=2). The merge
    # uses the time recorded in the first list a session appeared in, so a wins;
    # taking the last or the latest time would put b first.
    sessions = [("a", ["x", "gamma", "delta"]), ("b", ["gamma", "x", "x", "delta"])]
    r = rank(sessions, "gamma delta", bases=[DAY, DAY], weights="one", pairs=False)
    assert r["weighted"] == ["a", "b"]


def test_drop_p_removes_phrase_hits():
    assert merge_final(["a"], ["a", "b"], "drop_p") == ["b"]
    assert merge_final(["a"], ["b", "a", "c"]) == ["a", "b", "c"]


def test_fts_id_column_counts_toward_df():
    # Token "10" matches the id of session_10 in FTS (df = 1) but no event text.
    sessions = [("session_10", ["apples"]), ("x", ["pears"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe())
    ranker.backend.load(hay, 0)
    assert ranker.backend.df(hay, "10", "ascii") == 1
    assert ranker.candidates(hay, "10", "token") == []  # the JS check looks at events only


def test_fts_limit_binds_in_haystack_order():
    sessions = [(f"s{i}", ["fig"]) for i in range(5)]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe(fts_limit=3))
    ranker.backend.load(hay, 0)
    assert ranker.backend.rows("fig") == [0, 1, 2]
    assert ranker.backend.df(hay, "fig", "ascii") == 3


def test_fts_diacritics_fold_but_js_does_not():
    # FTS finds "cafe" in "café" (df 2), but the JS check only accepts literal cafe.
    sessions = [("a", ["the café"]), ("b", ["a cafe"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe())
    ranker.backend.load(hay, 0)
    assert ranker.backend.df(hay, "cafe", "ascii") == 2
    assert [hay.ids[i] for i, _ in ranker.candidates(hay, "cafe", "token")] == ["b"]


def test_duplicate_ids_resolve_to_last_session_and_count_twice():
    sessions = [("d", ["old text"]), ("e", ["other"]), ("d", ["mango"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe())
    ranker.backend.load(hay, 0)
    cands = ranker.candidates(hay, "mango", "token")
    # Only the last "d" contains mango, but the FTS row of the first "d" has id d
    # too... it does not match "mango", so one row; a token in both rows gives two.
    assert [hay.ids[i] for i, _ in cands] == ["d"]
    sessions = [("d", ["mango"]), ("d", ["mango pie"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe())
    ranker.backend.load(hay, 0)
    assert [i for i, _ in ranker.candidates(hay, "mango", "token")] == [1, 1]


INDEX = dict(backend="index", seq="exp6", window="exp6")  # v0.8.0-index (exp6.cjs)


def test_index_repeated_id_entries_are_candidates_with_their_own_events():
    # exp6: each entry of x is matched on its own events (docs/edge-cases.md); under
    # FTS both rows of x resolve to the last x.
    sessions = [("x", ["fig", "fig fig"]), ("y", ["fig"]), ("x", ["fig"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe(**INDEX))
    ranker.backend.load(hay, 0)
    # first x: occ 2 ("fig fig", k=1); last x beats y on time; positions name the id
    assert ranker.candidates(hay, "fig", "token") == [(2, DAY + 1), (2, 3 * DAY), (1, 2 * DAY)]
    fts = Ranker(corpus, Recipe())
    fts.backend.load(hay, 0)
    assert fts.candidates(hay, "fig", "token") == [(2, 3 * DAY), (2, 3 * DAY), (1, 2 * DAY)]


def test_index_repeated_id_df_counts_distinct_ids_and_n_every_entry():
    sessions = [("x", ["kiwi"]), ("x", ["kiwi"]), ("y", ["kiwi"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe(**INDEX))
    ranker.backend.load(hay, 0)
    from memobench.memo.engine import Scorer

    assert Scorer(ranker.backend, hay, ranker.recipe).idf("kiwi") == js_log(4 / 3)  # N 3, df 2


def test_index_repeated_id_adds_its_weight_once_per_place():
    # kiwi: z (newer), x; lime: w (newest), x. Keyed by id, x scores two token
    # weights and comes first; counted per entry it would tie with w and z and
    # sort by time: [w, x, z].
    sessions = [("x", ["kiwi"]), ("z", ["kiwi"]), ("x", ["lime"]), ("w", ["lime"])]
    r = rank(sessions, "kiwi lime", **INDEX)
    assert r["phrase"] == [] and r["window"] == ["kiwi", "lime"]
    assert r["final"] == ["x", "w", "z"]


def test_overlapping_occurrences_count():
    sessions = [("a", ["go go go"]), ("b", ["go go x go go"])]
    # "go go": 2 in a (overlapping), 2 in b; a is shorter -> first.
    r = rank(sessions, "go go", weights="len")
    assert r["phrase"] == ["a", "b"]
    corpus, hay = make(sessions)
    assert corpus.hay_events(hay, "ascii").reps(("go", "go")) == {0: (2, 8, 0), 1: (2, 13, 0)}


def test_idf_uses_fdlibm_log_and_cap():
    sessions = [(f"s{i}", ["common"] if i < 3 else ["rare"]) for i in range(60)]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe())
    ranker.backend.load(hay, 0)
    from memobench.memo.engine import Scorer

    sc = Scorer(ranker.backend, hay, ranker.recipe)
    assert sc.idf("common") == js_log(61 / 4)
    assert sc.idf("rare") == js_log(61 / 51)  # df 57 capped at 50
    assert sc.idf("rare", capped=False) == js_log(61 / 58)


def test_fdlibm_log_differs_from_math_log_somewhere():
    diffs = [(n, d) for n in range(1, 300) for d in range(0, 50) if js_log((n + 1) / (1 + d)) != math.log((n + 1) / (1 + d))]
    assert diffs, "expected at least one input where V8's log differs from the platform log"


def test_raw_split_phrase_never_matches_capitalised_question():
    sessions = [("a", ["what is love"])]
    r = rank(sessions, "What is love?", question_check="raw_split")
    assert r["phrase"] == []
    r = rank(sessions, "what is love", question_check="raw_split")
    assert r["phrase"] == ["a"]
    r = rank(sessions, "what  is love", question_check="raw_split")  # empty piece
    assert r["phrase"] == []


def test_index_backend_has_no_id_or_diacritic_effects():
    sessions = [("session_10", ["apples"]), ("b", ["café"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe(backend="index", seq="exp6", window="exp6"))
    ranker.backend.load(hay, 0)
    assert ranker.backend.df(hay, "10", "exp6") == 0
    assert ranker.backend.df(hay, "caf", "exp6") == 1
    assert ranker.backend.df(hay, "cafe", "exp6") == 0


@pytest.mark.parametrize("backend,seq,window", [("fts", "ascii", "cf"), ("index", "exp6", "exp6")])
def test_han_token_never_a_candidate_under_ascii_but_is_under_exp6(backend, seq, window):
    sessions = [("a", ["我们 讨论 项目"]), ("b", ["nothing"])]
    corpus, hay = make(sessions)
    ranker = Ranker(corpus, Recipe(backend=backend, seq=seq, window=window))
    ranker.backend.load(hay, 0)
    got = [hay.ids[i] for i, _ in ranker.candidates(hay, "讨论", "token")]
    assert got == ([] if seq == "ascii" else ["a"])
