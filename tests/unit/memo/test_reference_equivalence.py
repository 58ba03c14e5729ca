"""The project's retrieval against an independent, literal reading of docs/harnesses.md.

``memobench.naive`` (the reference) re-implements run.cjs / run-m.cjs / locomo.cjs /
exp6.cjs naively from docs/harnesses.md (without the project's engine, normalize,
retrieval or variants code). Here the project's public entry points
(``normalize_longmemeval`` / ``normalize_locomo`` -> ``write_segment`` with
``variants.resolve``) are run on

* the real ``locomo10.json`` (all 10 conversations; family ``locomo``), two of
  its conversations with spiced structure (missing/invalid dates tied on
  everything but the fallback time, shuffled keys, an orphan date key, an
  empty session, turns without ``text`` or with null/numeric text, falsy,
  numeric and duplicate ``dia_id``s, numeric evidence, an empty window, a
  missing category), and ``memobench.tools.generate.write_locomo(spice=True)``;
* small LongMemEval-format files built below: a clean one and spiced ones
  (accents, Han, astral characters, Kelvin sign, dotted I, unparseable or
  missing dates, missing/null/numeric ids, empty and null sessions, turns
  without ``content`` or with ``content: null``, pure-Chinese and
  single-token questions, quotes and FTS operators, gold ids not in the
  haystack, ids containing question words, duplicate ids inside one
  haystack, and one haystack of 700 sessions so that FTS LIMIT 500 vs 2000
  binds), plus hand-made haystacks that each pin one rule (T ties without an
  id tie-break, UTF-16 id order, the dates fallback against a 1970 date, the
  n >= 2 gate, null ids/contents, duplicate ids in P and T, UTF-16 pair
  lengths in exp6), under families ``s`` and ``m``;
* files from ``memobench.tools.generate.write_longmemeval`` when that module exists,
  two of them with session ids repeated inside haystacks (``repeat_ids``; one
  where the entries of an id may differ in length, which exp6.cjs rejects and
  exp6-m.cjs ranks, docs/edge-cases.md), and one whose ``haystack_session_ids``
  lists are shorter or longer than the sessions (``uneven_ids``: the gold
  comes from the raw list, so an answer id with no session is gold and a
  session's ``s<i>`` fallback id is not);

and every question's status, rank and final top-10 list must equal the
reference's. Segmenting (3 segments vs 1) must not change any list.
"""

from __future__ import annotations

import json
import random
import re

import pandas as pd
import pytest

from tests.oracles.naive import reference_exp6, reference_locomo, reference_run

from memobench.datasets import normalize
from memobench.retrieval import sharing as retrievers
from memobench.catalog import variants

VARIANTS = ["v0.8.0", "v0.5.0", "v0.4.0", "v0.8.0-index"]

try:  # written concurrently by someone else; used when present
    from memobench.tools.generate.locomo import write_locomo  # type: ignore
    from memobench.tools.generate.longmemeval import write_longmemeval
except Exception:  # pragma: no cover - depends on the tree state
    write_longmemeval = write_locomo = None


# ---------------------------------------------------------------------------
# A small spiced LongMemEval-format generator (independent of memobench.tools.generate)
# ---------------------------------------------------------------------------

WORDS = (
    "store buy milk coffee tea car blue red garden dog cat walk park book read movie "
    "friend sister brother mother father trip paris london tokyo hotel flight ticket "
    "price cheap expensive recipe cake bread bake oven kitchen job work office meeting "
    "project deadline email phone call doctor appointment health run gym yoga swim "
    "music guitar piano song concert band album camera photo picture bike ride mountain "
    "lake river beach summer winter spring autumn snow rain weather birthday party gift "
    "wedding dress shoes shirt jacket laptop computer game play team score goal coach "
    "school class teacher exam study math science history art paint draw museum "
    "restaurant dinner lunch breakfast pizza pasta salad soup wine beer juice water "
    "plant flower tree seed grow harvest farm market sell money bank save loan rent "
    "house apartment move neighbor city town village road bus train station airport 10 "
    "2 2023 5 new old big small good great first last week month year day time"
).split()
STOPS = "what did i do you the a to of in on at for when where how is was".split()
SPICE_TEXTS = [
    "We met at the café near the école",
    "e\u0301cole and cafe are not the same word",
    "my naïve friend lives on the straße",
    "我喜欢咖啡 and tea every morning",
    "abc中文def is a mixed token",
    "foo 的 bar and foo é bar",
    "the \U00020000\U00020001 character and an emoji \U0001F600 here",
    "temperature in \u212aelvin is absolute",
    "İstanbul trip with the KELVIN scale",
    "x² ﬁnance ｆｕｌｌ Ωmega words",
    "a line\nbreak and a\r\ncarriage return",
    "soft\u00adhyphen zero\u200bwidth it's don’t snake_case dash-word a.b",
    "中文 咖啡 我",
]
SPICE_QUESTIONS = [
    "我喜欢咖啡吗？",  # pure Chinese: empty S-ASCII seq (counted miss), exp6 evaluates it
    "咖啡",
    "coffee?",  # single token: no weighted step
    "What?",  # only a stop word
    "???",
    "a",
    'What did I say about "blue car" and the "red" bike?',
    "coffee AND tea OR NEAR(milk) * col:price -dash ^caret",
    "Where is the café near the école?",
    "When did I visit İstanbul with KELVIN?",
    "Tell me about \u212aelvin temperature and the abc中文def token",
    "What about foo bar and 中文 咖啡 mixed words?",
    "what did i do on the first day of the new year in the big city with my old friend",
    "session 10 store notes",
    "Is 2023 the year of the \U00020000\U00020001 character?",
]
ODD_IDS = [42, 1.5, True, None, "session_10", "session_2", "store_notes_buy", "sé\U00020000", "Session_1", "10"]
ODD_DATES = [
    None,
    "not a date",
    "2023/02/30 (Thu) 24:00",
    "2023/13/01 (Fri) 10:00",
    "2023/05/20 (Sat) 24:01",
    "2023/05/20 02:21",
    "",
    12345,
]


def _date(rng):
    return f"{rng.randint(2021, 2023)}/{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d} (Mon) {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"


def _sentence(rng, n=None):
    n = n or rng.randint(3, 14)
    # Zipf-ish: early words are much more frequent
    return " ".join(WORDS[min(int(rng.paretovariate(0.9)) - 1, len(WORDS) - 1)] if rng.random() < 0.5 else rng.choice(WORDS) for _ in range(n))


def make_lme(path, seed, n_questions=40, sessions_per_question=30, spice=True, big=700):
    rng = random.Random(seed)
    pool = []  # shared sessions (same id and content across questions)
    for j in range(120):
        turns = []
        for _ in range(rng.randint(1, 6)):
            text = _sentence(rng)
            if spice and rng.random() < 0.2:
                text = text + " " + rng.choice(SPICE_TEXTS) + " " + _sentence(rng, 3)
            turns.append({"role": rng.choice(["user", "assistant"]), "content": text})
        pool.append((f"sess_{j}", turns))
    # identical twins: same content, ids that sort differently as strings
    pool.append(("session_10", [{"role": "user", "content": "twin words store coffee garden"}]))
    pool.append(("session_2", [{"role": "user", "content": "twin words store coffee garden"}]))
    entries = []
    for qi in range(n_questions):
        n_sess = sessions_per_question
        if spice and qi == 3:
            n_sess = big  # FTS LIMIT 500 (run) vs 2000 (run-m) binds here
        chosen = [rng.choice(pool) for _ in range(n_sess)] if n_sess > len(pool) else rng.sample(pool, n_sess)
        ids = [c[0] if n_sess <= len(pool) else f"{c[0]}_{k}" for k, c in enumerate(chosen)]
        sessions = [json.loads(json.dumps(c[1])) for c in chosen]
        dates = [_date(rng) for _ in chosen]
        if qi % 5 == 0:
            dates.sort()
        # the question: words from a gold session
        gi = rng.randrange(len(sessions))
        if spice and qi == 3:
            gi = len(sessions) - 5  # gold beyond row 500
            common = "zebra quokka"
            for s in sessions:
                s.append({"role": "user", "content": common + " " + _sentence(rng, 4)})
            sessions[gi] = [{"role": "user", "content": "the unique platypus walked near " + common}]
            ids[gi] = "gold_late"
        gold_turn = rng.choice(sessions[gi]) if sessions[gi] else {"content": "x"}
        gwords = str(gold_turn.get("content", "")).split()
        if gwords:
            a = rng.randrange(len(gwords))
            chunk = gwords[a : a + rng.randint(1, 6)]
        else:
            chunk = ["nothing"]
        extra = [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
        question = " ".join(rng.sample(STOPS, rng.randint(0, 3)) + chunk + extra) + "?"
        if spice and qi == 3:
            question = "Where did the unique platypus walk near zebra quokka?"
        answer = [ids[gi]]
        entry = {
            "question_id": f"q{seed}_{qi}",
            "question_type": rng.choice(["single-session-user", "multi-session", "temporal-reasoning"]),
            "question": question,
            "question_date": _date(rng),
            "answer": "whatever",
            "haystack_session_ids": ids,
            "haystack_dates": dates,
            "haystack_sessions": sessions,
            "answer_session_ids": answer,
        }
        if spice:
            _spice(rng, entry, qi, gi)
        entries.append(entry)
    if spice:
        entries.extend(scenarios(rng, seed))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(entries, f, ensure_ascii=rng.random() < 0.5)
    return path


def _spice(rng, e, qi, gi):
    ids, dates, sessions = e["haystack_session_ids"], e["haystack_dates"], e["haystack_sessions"]
    if qi < len(SPICE_QUESTIONS) and qi != 3:
        e["question"] = SPICE_QUESTIONS[qi]
        if qi in (0, 1, 8, 9, 10, 11):  # make the spiced words findable in the gold session
            sessions[gi].append({"role": "user", "content": rng.choice(SPICE_TEXTS) + " " + e["question"]})
    if qi == 3:
        return  # keep the big haystack clean apart from its LIMIT role
    # the 15 spiced questions get the non-skipping kinds; the rest cycle through all kinds
    kind = [4, 0, 1, 2, 5, 9, 10, 11, 4, 0, 1, 2, 5, 10, 11][qi] if qi < len(SPICE_QUESTIONS) else qi % 12
    n = len(sessions)
    if kind == 0:  # odd ids (coerced with String(), null -> "s"+i)
        for k, v in enumerate(rng.sample(ODD_IDS, 5)):
            if k != gi:
                ids[k] = v
    elif kind == 1:  # odd dates, and a short dates array (fallback counts from its length)
        for k in range(0, n, 3):
            dates[k] = rng.choice(ODD_DATES)
        del dates[n - 4 :]
    elif kind == 2:  # missing ids (short ids array)
        if gi < n - 3:
            del ids[n - 3 :]
    elif kind == 3:  # more ids than sessions; the gold id has no session (1.2: ids come
        # from the session loop, so the gold is not among the haystack ids)
        if gi > 0:
            del sessions[gi:]
    elif kind == 4:  # empty and null sessions, odd turns
        for k in range(n):
            if k == gi:
                continue
            r = rng.random()
            if r < 0.1:
                sessions[k] = []
            elif r < 0.2:
                sessions[k] = None
            elif r < 0.4 and sessions[k]:
                sessions[k].insert(0, rng.choice([{"role": "user"}, {"role": "user", "content": None}, None, {"content": 7}, {"content": [1, "store"]}, {"content": {"a": 1}}]))
    elif kind == 5:  # duplicate ids inside one haystack
        for k in range(0, n - 1, 4):
            if k != gi and k + 1 != gi:
                ids[k] = ids[k + 1]
    elif kind == 6:  # gold ids not in the haystack, numeric gold
        e["answer_session_ids"] = ["not_there", ids[gi], 99999]
        ids[0] = 99999 if gi != 0 else ids[0]
    elif kind == 7:  # gold entirely outside the haystack: skipped (no gold)
        e["answer_session_ids"] = ["not_there"]
    elif kind == 8:  # no sessions at all (the ids and dates arrays are kept)
        e["haystack_sessions"] = []
    elif kind == 9:  # session ids made of question words; verbatim question in a session
        for k in range(min(5, n)):
            if k != gi:
                ids[k] = "_".join(rng.sample(e["question"].lower().replace("?", "").split() or ["x"], 1)) + f"_{k}"
        sessions[gi].append({"role": "assistant", "content": "You asked: " + e["question"] + " yes."})
        other = (gi + 1) % n
        if sessions[other] is not None:
            sessions[other].append({"role": "user", "content": e["question"]})
    elif kind == 10:  # same content and date in several sessions (ties)
        for k in range(min(6, n)):
            if k != gi and sessions[gi]:
                sessions[k] = json.loads(json.dumps(sessions[gi]))
                dates[k] = dates[gi]
    elif kind == 11:  # dates: all unparseable
        for k in range(len(dates)):
            dates[k] = "garbage"


def scenarios(rng, seed):
    """Hand-made haystacks that each pin one rule (checked by mutating the reference)."""

    def entry(name, question, ids, texts, answer, dates=None):
        sessions = [[{"role": "user", "content": t} for t in (ts if isinstance(ts, list) else [ts])] for ts in texts]
        return {
            "question_id": f"scn{seed}_{name}",
            "question_type": "scenario",
            "question": question,
            "haystack_session_ids": ids,
            "haystack_dates": dates if dates is not None else ["2023/05/20 (Sat) 10:00"] * len(ids),
            "haystack_sessions": sessions,
            "answer_session_ids": answer,
        }

    fill = [_sentence(rng) for _ in range(12)]
    out = []
    # T ties (score and repTime) keep first-appearance order: no id tie-break (merge and final list)
    out.append(entry("t-order", "alpha beta delta?", ["zz_short", "aa_long"] + [f"f{k}" for k in range(12)],
                     ["alpha beta", "alpha beta gamma"] + fill, ["aa_long"]))
    # session order compares ids in UTF-16 code units (emoji < U+FF21 there, not in code points)
    out.append(entry("utf16-ids", "omega zeta kappa?", ["\uff21x", "\U0001F600x", "\uff41y"] + [f"f{k}" for k in range(12)],
                     ["omega zeta", "omega zeta", "omega zeta"] + fill, ["\uff21x"]))
    # date fallback (len(dates) - i) days, against a parsed date near the epoch
    out.append(entry("fallback", "sigma tau upsilon?", [f"d{k}" for k in range(8)], ["sigma tau"] * 8, ["d0"],
                     dates=["1970/01/03 (Sat) 00:00", "garbage", None, "garbage", "garbage", "1970/01/02 (Fri) 12:00"]))
    # a single window token plus 1-letter words: no weighted step (gate n >= 2)
    out.append(entry("gate", "a coffee b?", [f"g{k}" for k in range(12)], fill, ["g0"]))
    # null id -> "s"+i; content null -> "null"; missing content -> ""
    e = entry("nulls", "the null value undefined?", [None, "x1", "x2"] + [f"f{k}" for k in range(12)],
              ["value", "null value", "the value"] + fill, ["s0"])
    e["haystack_sessions"][0] = [{"role": "user", "content": None}, {"role": "user"}, None, {"content": "value undefined"}]
    out.append(e)
    e = entry("null-content", "null?", [f"n{k}" for k in range(4)], ["", "null value", "nothing", "nil"], ["n0"])
    e["haystack_sessions"][0] = [{"role": "user", "content": None}]
    out.append(e)
    # duplicate ids: both FTS rows resolve to the last session (docs/edge-cases.md), in P and in T
    out.append(entry("dup-ids", "tell me the story about pears", ["dup", "other", "dup", "d3", "d4"],
                     ["tell me the story about pears and apples", "pears pears", "tell me the story about pears", "story", "about pears"],
                     ["dup"]))
    out.append(entry("dup-weights", "quince jam recipe", ["q1", "dupq", "q2", "dupq", "q4"],
                     ["quince jam", "jam", "quince recipe jam", "quince", "recipe"], ["q2"]))
    # exp6 pair weight uses the UTF-16 length (an astral Han pair token counts 2 per character)
    han = "\U00020000\U00020001"
    texts = ["year " + han, "year foo zeta bar " + han] + [han + " one"] * 4 + ["year two"] * 6 + ["three four"] * 8
    out.append(entry("astral-len", f"year {han} zeta?", [f"h{k}" for k in range(len(texts))], texts, ["h0"]))
    return out


def make_locomo_spiced(path, seed, locomo_path):
    """Two real LoCoMo conversations with spiced structure (dates, LoCoMo conversations)."""
    rng = random.Random(seed)
    with open(locomo_path, encoding="utf-8") as f:
        convs = json.load(f)[:2]
    for ci, conv in enumerate(convs):
        c = conv["conversation"]
        skeys = sorted((k for k in c if re.fullmatch(r"session_[0-9]+", k)), key=lambda k: int(k[8:]))
        if ci == 0:
            del c[skeys[1] + "_date_time"]  # missing date: fallback = index in days
            c[skeys[9] + "_date_time"] = "13:00 pm on 8 May, 2023"  # invalid hour
            c[skeys[2] + "_date_time"] = ""  # empty
            # the three fallback sessions (session_2, session_3, session_10) tie on everything
            # but time, which is their index in the numeric session order, in days
            for k in (1, 2, 9):
                c[skeys[k]][0]["text"] = "marmalade sandwich"
            c[skeys[3] + "_date_time"] = "1:56 pm on 31 February, 2023"  # rolls into March
            c[skeys[4] + "_date_time"] = "1:56 PM on 8 may, 2023"  # wrong case
            c["session_99_date_time"] = "1:56 pm on 8 May, 2023"  # orphan date key
            c[skeys[5]] = []  # empty session
            s6 = c[skeys[6]]
            del s6[0]["text"]  # no text -> ""
            s6[1]["text"] = None  # -> "null"
            s6[2]["text"] = 12345  # -> "12345"
            s6[3]["dia_id"] = ""  # falsy: not mapped
            s6[4]["dia_id"] = 0  # falsy
            del s6[5]["dia_id"]
            s6[6]["dia_id"] = 7  # truthy number -> "7"
            s6[7]["dia_id"] = c[skeys[0]][0]["dia_id"]  # duplicate: the last one wins
            s6[8]["text"] = "Café İstanbul \u212aelvin 中文 \U00020000\U00020001 straße " + str(s6[8].get("text"))
        # shuffle the key order (sessions are sorted numerically, not by position)
        items = list(c.items())
        rng.shuffle(items)
        conv["conversation"] = dict(items)
        qa = conv["qa"][:60]
        qa.append({"question": "a?", "evidence": ["D1:1"], "category": 1})  # empty window
        qa.append({"question": "What null 12345?", "evidence": [7, "D1:1"]})  # no category; numeric evidence
        qa.append({"question": "Where did the Café İstanbul trip go?", "evidence": ["D1:3; D1:4"], "category": 2})
        qa.append({"question": "Tell me about \u212aelvin and 中文", "evidence": [c[skeys[0]][0]["dia_id"]], "category": 4})
        qa.append({"question": "Hey!", "evidence": [], "category": 5})
        qa.append({"question": "Any marmalade sandwich recipe?", "evidence": [c[skeys[9]][1]["dia_id"]], "category": 1})
        qa.append({"question": "undefined?", "evidence": [7], "category": 1})  # numeric evidence only
        qa.append({"question": "What about null?", "evidence": ["0"], "category": 1})  # dia_id 0 is falsy
        qa.append({"question": "What about nothing?", "evidence": [""], "category": 1})  # dia_id "" is falsy
        conv["qa"] = qa
    with open(path, "w", encoding="utf-8") as f:
        json.dump(convs, f, ensure_ascii=False)
    return path


# ---------------------------------------------------------------------------
# Running the project
# ---------------------------------------------------------------------------


def run_project(norm_dir, variant_name, family, out_dir, n_segments=1):
    variant = variants.resolve(variant_name, family)
    out_dir.mkdir(parents=True, exist_ok=True)
    rankings, outcomes = [], []
    for seg in range(1, n_segments + 1):
        rk = out_dir / f"{variant_name}.{family}.{seg}of{n_segments}.rankings.parquet"
        oc = out_dir / f"{variant_name}.{family}.{seg}of{n_segments}.outcomes.parquet"
        retrievers.write_segment(
            variant,
            str(norm_dir / "questions.parquet"),
            str(norm_dir / "haystacks.parquet"),
            str(norm_dir / "events.parquet"),
            seg,
            n_segments,
            str(rk),
            str(oc),
            log=lambda *a, **k: None,
        )
        rankings.append(pd.read_parquet(rk))
        outcomes.append(pd.read_parquet(oc))
    return pd.concat(rankings, ignore_index=True), pd.concat(outcomes, ignore_index=True)


def project_lists(rankings):
    lists = {}
    for row in rankings.sort_values(["q_index", "rank"], kind="stable").itertuples(index=False):
        lists.setdefault(int(row.q_index), []).append(row.session_id)
    return lists


def compare(ref, rankings, outcomes, label):
    lists = project_lists(rankings)
    oc = {int(r.q_index): r for r in outcomes.itertuples(index=False)}
    assert set(oc) == {r["q_index"] for r in ref}, f"{label}: question sets differ"
    checked = 0
    for r in ref:
        q = r["q_index"]
        o = oc[q]
        ctx = f"{label}: question q_index={q} id={r['question_id']!r}"
        assert str(o.question_id) == r["question_id"], f"{ctx}: question_id {o.question_id!r}"
        reason = o.reason if isinstance(o.reason, str) else None
        assert (o.status, reason) == (r["status"], r["reason"]), (
            f"{ctx}: status project={o.status!r} ({reason!r}) reference={r['status']!r} ({r['reason']!r})"
        )
        if r["status"] != "evaluated":
            continue
        assert str(o.question_type) == r["question_type"], f"{ctx}: question_type {o.question_type!r} vs {r['question_type']!r}"
        assert int(o.pool_size) == r["pool_size"], f"{ctx}: pool_size {o.pool_size} vs {r['pool_size']}"
        assert int(o.gold_in_pool) == r["gold_in_pool"], f"{ctx}: gold_in_pool {o.gold_in_pool} vs {r['gold_in_pool']}"
        # questions counted as a miss for an empty token sequence appear in no type row (run.cjs)
        assert bool(o.in_types) == (r["reason"] is None), f"{ctx}: in_types {o.in_types}"
        got = lists.get(q, [])
        assert got == r["final"], (
            f"{ctx}: final lists differ\n  project:   {got}\n  reference: {r['final']}"
        )
        assert int(o.gold_rank) == r["rank"], f"{ctx}: rank project={o.gold_rank} reference={r['rank']}"
        checked += 1
    return checked


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------

LME_FILES = {
    "spiced1": dict(seed=11, spice=True),
    "spiced2": dict(seed=12, spice=True),
    "clean": dict(seed=13, spice=False),
}
if write_longmemeval is not None:
    LME_FILES["gen-spiced"] = dict(seed=21, spice=True, generator=True)
    LME_FILES["gen-clean"] = dict(seed=22, spice=False, generator=True)
    # session ids repeated inside haystacks, as in real LongMemEval files
    LME_FILES["gen-repeats"] = dict(seed=23, spice=True, generator=True, repeat_ids=0.5)
    LME_FILES["gen-repeats-any-length"] = dict(seed=24, spice=False, generator=True, repeat_ids=1.0,
                                               repeat_ids_any_length=True)
    # haystack_session_ids lists that do not match the sessions (the gold is read from the raw list)
    LME_FILES["gen-uneven"] = dict(seed=25, spice=True, generator=True, uneven_ids=0.6)


@pytest.fixture(scope="module")
def lme_dataset(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            spec = LME_FILES[name]
            d = tmp_path_factory.mktemp(f"lme_{name}")
            raw = d / "raw.json"
            if spec.get("generator"):
                write_longmemeval(raw, n_questions=40, sessions_per_question=30, seed=spec["seed"], spice=spec["spice"],
                                  repeat_ids=spec.get("repeat_ids", 0.0),
                                  repeat_ids_any_length=spec.get("repeat_ids_any_length", False),
                                  uneven_ids=spec.get("uneven_ids", 0.0))
            else:
                make_lme(raw, spec["seed"], spice=spec["spice"])
            normalize.normalize_longmemeval(str(raw), str(d / "norm"), log=lambda *a, **k: None)
            cache[name] = (raw, d / "norm", d)
        return cache[name]

    return get


LOCOMO_FILES = ["real", "spiced-real"]
if write_locomo is not None:
    LOCOMO_FILES.append("gen-spiced")


@pytest.fixture(scope="module")
def locomo_dataset(request, tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            d = tmp_path_factory.mktemp(f"locomo_{name}")
            raw = d / "raw.json"
            if name == "real":
                raw = request.getfixturevalue("locomo_path")  # conftest: skip, or fail under CI
            elif name == "spiced-real":
                make_locomo_spiced(raw, 5, request.getfixturevalue("locomo_path"))
            else:
                write_locomo(raw, 2, seed=31, qa_per_conversation=(30, 60), spice=True)
            normalize.normalize_locomo(str(raw), str(d / "norm"), log=lambda *a, **k: None)
            cache[name] = (raw, d / "norm", d)
        return cache[name]

    return get


REF_ARGS = {
    "v0.8.0": dict(weights="idf080", window="cf"),
    "v0.5.0": dict(weights="len", window="cf"),
    "v0.4.0": dict(weights="len", window="plain"),
}


def lme_reference(raw, variant_name, family):
    if variant_name == "v0.8.0-index":
        return reference_exp6(raw)
    return reference_run(raw, fts_limit=500 if family == "s" else 2000, **REF_ARGS[variant_name])


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant_name", VARIANTS)
# the whole real file (38 s of CPU) and the generated LongMemEval files (40 questions x 30
# sessions, 37 s) are marked slow: the whole suite compares them, the unit run the small files
@pytest.mark.parametrize("dataset", [pytest.param(n, marks=pytest.mark.slow) if n == "real" else n
                                     for n in LOCOMO_FILES])
def test_locomo_equals_reference(dataset, variant_name, locomo_dataset):
    raw, norm, d = locomo_dataset(dataset)
    if variant_name == "v0.8.0-index":
        ref = reference_locomo(raw, backend="index")
    else:
        ref = reference_locomo(raw, **REF_ARGS[variant_name])
    rankings, outcomes = run_project(norm, variant_name, "locomo", d / "out")
    checked = compare(ref, rankings, outcomes, f"locomo {dataset} {variant_name}")
    if dataset == "real":
        assert checked == 1977  # docs/harnesses.md#locomo-conversations
    assert checked > 0


@pytest.mark.parametrize("family", ["s", "m"])
@pytest.mark.parametrize("variant_name", VARIANTS)
@pytest.mark.parametrize("dataset", [pytest.param(n, marks=pytest.mark.slow) if spec.get("generator") else n
                                     for n, spec in LME_FILES.items()])
def test_longmemeval_equals_reference(dataset, variant_name, family, lme_dataset):
    raw, norm, d = lme_dataset(dataset)
    ref = lme_reference(raw, variant_name, family)
    rankings, outcomes = run_project(norm, variant_name, family, d / "out")
    checked = compare(ref, rankings, outcomes, f"{dataset} {variant_name}/{family}")
    assert checked > 0


def test_fixture_exercises_the_limit_and_the_skips(lme_dataset):
    """The spiced file really makes LIMIT 500 vs 2000 matter and hits every skip path."""
    raw, _, _ = lme_dataset("spiced1")
    r500 = reference_run(raw, fts_limit=500)
    r2000 = reference_run(raw, fts_limit=2000)
    assert any(a["final"] != b["final"] for a, b in zip(r500, r2000))
    reasons = {r["reason"] for r in r500}
    # "no sessions" needs answer ids listed in haystack_session_ids with no sessions at all (test_bad_inputs)
    assert {"no_gold", "empty_seq"} <= reasons
    assert any(r["rank"] == 0 for r in r500 if r["status"] == "evaluated")
    assert any(r["rank"] == 1 for r in r500 if r["status"] == "evaluated")


@pytest.mark.slow  # a generated file ranked by every variant: the whole suite runs it
@pytest.mark.skipif(write_longmemeval is None, reason="memobench.tools.generate absent")
def test_uneven_id_lists_move_counts_not_lists(lme_dataset):
    """On the uneven file the harness gold (raw id list) and a gold read from the
    session ids really disagree, both ways, and the project's skips, denominator,
    hit counts and MRR are the reference's."""
    from tests.oracles.naive import lme_gold, lme_sessions

    from memobench.core.jsmath import js_string
    from memobench.evaluation.metrics import compute
    from memobench.memo.tokenize import seq_ascii

    raw, norm, d = lme_dataset("gen-uneven")
    items = json.loads(raw.read_text(encoding="utf-8"))
    sessionless = gold_lost = 0
    for e in items:
        ids = {s["id"] for s in lme_sessions(e, seq_ascii)}
        gold = lme_gold(e)
        by_sessions = {js_string(a) for a in (e.get("answer_session_ids") or [])} & ids
        sessionless += bool(gold) and not gold & ids  # evaluated, a certain miss
        gold_lost += bool(by_sessions) and not gold  # skipped although a session id is an answer
    assert sessionless >= 3 and gold_lost >= 2
    for variant in ("v0.8.0", "v0.8.0-index"):
        ref = lme_reference(raw, variant, "s")
        _, outcomes = run_project(norm, variant, "s", d / "metrics")
        m = compute([dict(r, reason=r["reason"] if isinstance(r["reason"], str) else None)  # NaN from pandas
                     for r in outcomes.to_dict("records")])
        evaluated = [r for r in ref if r["status"] == "evaluated"]
        skipped = {}
        for r in ref:
            if r["status"] == "skipped":
                skipped[r["reason"]] = skipped.get(r["reason"], 0) + 1
        assert m["skipped"] == skipped and skipped["no_gold"] >= gold_lost
        assert m["questions"] == len(evaluated)
        assert [m["hit@1"], m["hit@5"], m["hit@10"]] == [
            sum(1 <= r["rank"] <= k for r in evaluated) for k in (1, 5, 10)]
        assert m["mrr_sum"] == sum(1 / r["rank"] for r in evaluated if r["rank"])  # same order, same sum


@pytest.mark.parametrize("variant_name", ["v0.8.0", "v0.8.0-index"])
def test_segments_concatenate(variant_name, lme_dataset):
    raw, norm, d = lme_dataset("spiced1")
    one_rk, one_oc = run_project(norm, variant_name, "s", d / "seg1")
    three_rk, three_oc = run_project(norm, variant_name, "s", d / "seg3", n_segments=3)
    assert list(three_oc["q_index"]) == list(one_oc["q_index"])
    pd.testing.assert_frame_equal(one_rk.reset_index(drop=True), three_rk.reset_index(drop=True))
    pd.testing.assert_frame_equal(one_oc.reset_index(drop=True), three_oc.reset_index(drop=True))
