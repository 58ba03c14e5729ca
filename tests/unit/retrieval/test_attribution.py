"""Text attribution (retrieval/attribution.py): each stage, its boundaries, and the index's search held to a
brute-force reading of the same rules."""

import random
import unicodedata

import pytest

from memobench.core.errors import ConfigError
from memobench.retrieval.attribution import (EXACT, NORMALIZED, OVERLAP, UNATTRIBUTED, Tally, TurnIndex, merged,
                                             mode, normalized, ranked, settings_of, stated, text_hash)

TURNS = ["I went to the LGBTQ support group yesterday.",      # 0  session 0
         "That sounds powerful, Caroline!",                    # 1
         "It was. Everyone shared their transition stories.",  # 2
         "What did you paint last week?",                      # 3  session 1
         "A sunrise over the lake, for my kids.",              # 4
         "ok",                                                 # 5
         "ok"]                                                 # 6  session 2
GROUPS = [0, 0, 0, 1, 1, 1, 2]


def index(**settings):
    return TurnIndex(TURNS, GROUPS, settings_of(settings or None, "test"))


def test_normalisation_is_nfkc_casefold_and_non_word_runs_as_one_space():
    assert normalized("  Ｈｅｌｌｏ,   WORLD!!  ﬁne_day ") == "hello world fine day"
    assert normalized("Straße") == "strasse"  # casefold, not lower
    # the rule written out: NFKC, casefold, every run of non-alphanumeric characters one space
    s = "A\u00a0b\t—c…"
    folded = unicodedata.normalize("NFKC", s).casefold()
    assert normalized(s) == " ".join("".join(c if c.isalnum() else " " for c in folded).split())


def test_a_whole_turn_verbatim_is_exact_and_its_part_too():
    ix = index()
    assert ix.attribute(TURNS[4]) == ix.attribute(TURNS[4])
    a = ix.attribute(TURNS[4])
    assert (a.turns, a.kind, a.score) == ((4,), EXACT, None)
    part = ix.attribute("Everyone shared their transition")
    assert (part.turns, part.kind) == ((2,), EXACT)


def test_case_whitespace_and_punctuation_changes_match_after_normalisation():
    ix = index()
    for text in ("i went to the lgbtq SUPPORT group yesterday", "  I  went to\nthe LGBTQ support group yesterday ",
                 "sunrise over THE lake for"):
        a = ix.attribute(text)
        assert a.kind == NORMALIZED and a.turns == ((0,) if "went" in text else (4,)), text


def test_a_span_of_consecutive_turns_maps_to_each_within_one_session_only():
    ix = index()
    a = ix.attribute("support group yesterday. That sounds powerful")
    assert (a.turns, a.kind, a.places) == ((0, 1), NORMALIZED, 1)
    three = ix.attribute(" ".join(TURNS[0:3]))
    assert three.turns == (0, 1, 2)
    # the last turn of one session and the first of the next are not a span
    assert ix.attribute("transition stories. What did you paint").kind == UNATTRIBUTED


def test_unrelated_and_empty_text_is_unattributed():
    ix = index()
    for text in ("The weather in Paris is mild in spring", "", "   ", "!!!", None, 42):
        assert ix.attribute(text).turns == ()
        assert ix.attribute(text).kind == UNATTRIBUTED


def test_a_part_shorter_than_min_tokens_matches_only_as_a_whole_turn():
    ix = index()
    assert ix.attribute("support group").kind == UNATTRIBUTED  # 2 tokens < 3
    assert index(min_tokens=2).attribute("support group").turns == (0,)
    ok = ix.attribute("OK")  # a whole turn, however short; two turns hold it
    assert (ok.turns, ok.kind, ok.ambiguous) == ((5, 6), NORMALIZED, True)


def test_overlap_is_opt_in_keeps_its_share_and_holds_its_threshold():
    fact = "Caroline attended an LGBTQ support group"  # 3 of 6 tokens in turn 0 (lgbtq support group)
    assert index().attribute(fact).kind == UNATTRIBUTED
    a = index(overlap=0.5).attribute(fact)
    assert (a.turns, a.kind, a.score) == ((0,), OVERLAP, 0.5)
    assert index(overlap=0.51).attribute(fact).kind == UNATTRIBUTED


def test_overlap_ties_break_on_dice_then_name_every_tied_turn():
    ix = TurnIndex(["red blue green", "red blue green yellow purple", "red blue green"], [0, 1, 2],
                   settings_of({"overlap": 0.5}, "t"))
    a = ix.attribute("red blue green black")  # 3/4 everywhere; the shorter turns have the higher Dice
    assert (a.turns, a.score, a.ambiguous) == ((0, 2), 0.75, True)


def test_ranked_puts_each_unit_at_the_first_item_that_names_it():
    ix = index()
    items = [ix.attribute("nothing of the kind here"), ix.attribute(TURNS[4]), ix.attribute(TURNS[0] + " " + TURNS[1]),
             ix.attribute(TURNS[3])]
    assert ranked(items, list(range(len(TURNS)))) == ([4, 0, 1, 3], None)
    assert ranked(items, GROUPS, [0.9, 0.8, 0.7, 0.6]) == ([1, 0], [0.8, 0.7])


def test_settings_are_checked_in_one_line():
    assert settings_of(None, "w") == {"overlap": None, "min_tokens": 3}
    assert settings_of({"overlap": 1}, "w")["overlap"] == 1.0
    assert mode(settings_of({"overlap": 0.6}, "w")) == "exact+normalized+overlap>=0.6"
    for bad, said in (({"overlap": 0}, "overlap must be"), ({"overlap": True}, "overlap must be"),
                      ({"min_tokens": 0}, "min_tokens"), ({"threshold": 1}, "unknown key"), ([1], "mapping")):
        with pytest.raises(ConfigError, match=said):
            settings_of(bad, "variant 'x': system")


def test_tally_merges_and_states_every_count():
    ix = index()
    t = Tally(settings_of(None, "t"))
    for text in (TURNS[0], "i WENT to the lgbtq support group yesterday", "unrelated words of no turn", "ok",
                 TURNS[0] + " " + TURNS[1]):
        t.add(ix.attribute(text))
    t.checked += 2
    t.mismatch("q1", 3, "session_9")
    a = merged([t.summary(), t.summary()])
    assert a["items"] == 10 and a["attributed"] == 8 and a["attributed_share"] == 0.8
    assert a["kinds"] == {EXACT: 4, NORMALIZED: 4, OVERLAP: 0, UNATTRIBUTED: 2}
    assert a["ambiguous"] == 2 and a["spans"] == 2 and a["ids_checked"] == 4 and a["ids_mismatched"] == 2
    assert a["mismatches"] == [{"question": "q1", "rank": 3, "id": "session_9"}] * 2
    said = stated(a)
    for part in ("exact+normalized", "8 of 10", "80.0%", "4 exact", "4 after normalisation", "0 by overlap",
                 "2 unattributed"):
        assert part in said
    assert text_hash("ok") == text_hash("ok") != text_hash("OK") and len(text_hash("ok")) == 16


def _brute(texts, groups, item, min_tokens=3):
    """The rules read plainly: whole turn verbatim; a verbatim part of one turn; a normalised whole turn; the
    runs of consecutive turns of one group whose normalised texts, joined by spaces, hold the item from their
    first turn to their last."""
    n = normalized(item)
    part_ok = len(n.split()) >= min_tokens
    if not item.strip():
        return set(), UNATTRIBUTED
    whole = [j for j, t in enumerate(texts) if t == item]
    if whole:
        return set(whole), EXACT
    part = [j for j, t in enumerate(texts) if part_ok and item in t]
    if part:
        return set(part), EXACT
    if not n:
        return set(), UNATTRIBUTED
    whole = [j for j, t in enumerate(texts) if normalized(t) == n]
    if whole:
        return set(whole), NORMALIZED
    found = set()
    if part_ok:
        for i in range(len(texts)):
            for j in range(i, len(texts)):
                if groups[j] != groups[i]:
                    break
                run = [k for k in range(i, j + 1) if normalized(texts[k])]
                if not run or run[0] != i or run[-1] != j:
                    continue
                joined = " ".join(normalized(texts[k]) for k in run)
                head, tail = len(normalized(texts[i])), len(joined) - len(normalized(texts[j]))
                # an occurrence that starts in the run's first turn and ends in its last
                if any(joined.startswith(n, s) and s < head and s + len(n) > tail for s in range(len(joined))):
                    found.update(run)
    return found, (NORMALIZED if found else UNATTRIBUTED)


def test_the_index_agrees_with_a_brute_force_reading_of_the_rules():
    rng = random.Random(7)
    words = ["a", "b", "c", "dd", "A", "B,", "c.", " ", "-"]
    for _ in range(300):
        n = rng.randint(1, 7)
        texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 5))) for _ in range(n)]
        groups = sorted(rng.randint(0, 2) for _ in range(n))
        ix = TurnIndex(texts, groups, settings_of({"min_tokens": 2}, "t"))
        for _ in range(10):
            if rng.random() < 0.5:
                i = rng.randrange(n)
                j = min(n - 1, i + rng.randint(0, 2))
                joined = " ".join(texts[i:j + 1])
                s = rng.randrange(len(joined))
                item = joined[s:s + rng.randint(1, len(joined) - s)]
            else:
                item = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
            got = ix.attribute(item)
            assert (set(got.turns), got.kind) == _brute(texts, groups, item, 2), (texts, groups, item)


def test_every_mismatch_is_counted_and_the_first_listed():
    from memobench.retrieval.attribution import LISTED

    t = Tally(settings_of(None, "t"))
    for r in range(LISTED + 5):
        t.mismatch("q", r + 1, f"s{r}")
    a = merged([t.summary(), t.summary()])
    assert a["ids_mismatched"] == 2 * (LISTED + 5) and len(a["mismatches"]) == LISTED
    assert a["mismatches"][0]["rank"] == 1
