"""Tests of memobench.tools.generate: determinism, formats, sharing, edge cases."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import ijson
import pytest

from tests.helpers import REPO
from memobench.tools.generate import locomo as gen_locomo
from memobench.tools.generate import longmemeval as gen_lme
from memobench.tools.generate import vocabulary as gen_vocab
from memobench.tools.generate.cn import write_cn
from memobench.tools.generate.locomo import LOCOMO_SPICE_CASES, write_locomo
from memobench.tools.generate.longmemeval import LME_SPICE_CASES, write_longmemeval
from memobench.tools.generate.vocabulary import QUESTION_TYPES
from memobench.tools.generate.__main__ import main as generate_main

HERE = Path(__file__).resolve()
# where the README tells users to place it (the clone's data/); CI places it there
REAL_LOCOMO = HERE.parents[3] / "data" / "locomo10.json"
REAL_LOCOMO = REAL_LOCOMO if REAL_LOCOMO.exists() else None

# Key structure of the real locomo10.json (used when the file is absent).
REAL_TURN_KEYS = {
    ("speaker", "dia_id", "text"),
    ("speaker", "img_url", "blip_caption", "query", "dia_id", "text"),
    ("speaker", "blip_caption", "dia_id", "text"),
    ("speaker", "img_url", "blip_caption", "query", "dia_id", "re-download", "text"),
    ("speaker", "dia_id", "img_url", "re-download", "blip_caption", "text"),
    ("speaker", "blip_caption", "dia_id", "re-download", "text"),
}
REAL_QA_KEYS = {
    ("question", "answer", "evidence", "category"),
    ("question", "evidence", "category", "adversarial_answer"),
    ("question", "adversarial_answer", "answer", "evidence", "category"),
}
CONV_KEYS = ["qa", "conversation", "event_summary", "observation", "session_summary",
             "sample_id"]
LME_KEYS = ["question_id", "question_type", "question", "answer", "question_date",
            "haystack_session_ids", "haystack_dates", "haystack_sessions",
            "answer_session_ids"]
LME_DATE = re.compile(r"(\d{4})/(\d{2})/(\d{2}) \((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) (\d{2}):(\d{2})")
LOCOMO_DATE = re.compile(r"(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) ([A-Za-z]+), (\d{4})")
STOP = gen_vocab._HARNESS_STOP


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def parse_lme_date(s: str) -> dt.datetime:
    m = LME_DATE.fullmatch(s)
    assert m, s
    y, mo, d, wd, h, mi = m.groups()
    t = dt.datetime(int(y), int(mo), int(d), int(h), int(mi))
    assert gen_vocab._WEEKDAYS[t.weekday()] == wd, s
    return t


# ---------------------------------------------------------------------------
# fixtures (module scope: each file is generated once)
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lme(tmp_path_factory):
    p = tmp_path_factory.mktemp("lme") / "s.json"
    info = write_longmemeval(p, 120, 16, seed=7)
    return p, info


@pytest.fixture(scope="module")
def lme_items(lme):
    with open(lme[0], encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def spicy(tmp_path_factory):
    p = tmp_path_factory.mktemp("spicy") / "s.json"
    write_longmemeval(p, 60, 12, seed=3, spice=True)
    return p


@pytest.fixture(scope="module")
def spicy_items(spicy):
    with open(spicy, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def locomo(tmp_path_factory):
    p = tmp_path_factory.mktemp("locomo") / "locomo.json"
    write_locomo(p, 6, seed=1, sessions=(8, 14), turns=(6, 20), qa_per_conversation=(30, 60))
    return p


# ---------------------------------------------------------------------------
# LongMemEval
# ---------------------------------------------------------------------------

def test_lme_deterministic(tmp_path, lme):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    write_longmemeval(a, 120, 16, seed=7)
    write_longmemeval(c, 120, 16, seed=8)
    assert sha(a) == sha(lme[0])
    assert sha(a) != sha(c)
    # a fresh interpreter with another hash seed, through the CLI
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-m", "memobench.tools.generate", "longmemeval", "--out", str(b),
                    "--questions", "120", "--sessions", "16", "--seed", "7", "--quiet"],
                   check=True, env=env, capture_output=True)
    assert sha(b) == sha(a)


def test_lme_spice_deterministic(tmp_path, spicy):
    p = tmp_path / "s.json"
    write_longmemeval(p, 60, 12, seed=3, spice=True)
    assert sha(p) == sha(spicy)


def test_lme_parses_with_json_and_ijson(lme, lme_items):
    path, info = lme
    raw = Path(path).read_text(encoding="utf-8")
    assert "\n" not in raw and raw.startswith("[{") and raw.endswith("}]")
    # byte-identical to json.dumps of the parsed items: compact, ", " separators
    assert json.dumps(lme_items, ensure_ascii=False) == raw
    assert info["bytes"] == len(raw.encode("utf-8")) == os.path.getsize(path)
    with open(path, "rb") as f:
        streamed = list(ijson.items(f, "item", use_float=True))
    assert streamed == lme_items
    assert len(lme_items) == 120


def test_lme_structure(lme_items):
    for it in lme_items:
        assert list(it) == LME_KEYS
        assert isinstance(it["question_id"], str) and it["question_id"]
        assert it["question_type"] in QUESTION_TYPES
        assert isinstance(it["question"], str) and it["question"]
        assert isinstance(it["answer"], (str, int))
        ids, dates, sess = (it["haystack_session_ids"], it["haystack_dates"],
                            it["haystack_sessions"])
        assert len(ids) == len(dates) == len(sess) == 16
        assert all(isinstance(x, str) for x in ids)
        assert len(set(ids)) == len(ids)
        parsed = [parse_lme_date(d) for d in dates]
        assert parsed == sorted(parsed)
        assert parse_lme_date(it["question_date"]) > parsed[-1]
        for s in sess:
            assert isinstance(s, list) and s
            for k, t in enumerate(s):
                assert t["role"] == ("user" if k % 2 == 0 else "assistant")
                assert isinstance(t["content"], str) and t["content"]
                assert set(t) <= {"role", "content", "has_answer"}
                assert t.get("has_answer", True) is True
        gold = it["answer_session_ids"]
        assert 1 <= len(gold) <= 3 and set(gold) <= set(ids)
        qwords = {w for w in re.findall(r"[a-z0-9]+", it["question"].lower())
                  if len(w) >= 3 and w not in STOP}
        for gid in gold:
            s = sess[ids.index(gid)]
            assert any(t.get("has_answer") for t in s)
            text = " ".join(t["content"] for t in s).lower()
            assert any(w in re.findall(r"[a-z0-9]+", text) for w in qwords), it["question"]
        for sid, s in zip(ids, sess):
            assert sid.startswith("answer_") == any(t.get("has_answer") for t in s)
            assert re.fullmatch(r"sharegpt_[A-Za-z0-9]{7}_\d|ultrachat_\d+|[0-9a-f]{8}_\d"
                                r"|answer_[0-9a-f]{8}(_\d)?", sid), sid
    assert len({it["question_id"] for it in lme_items}) == len(lme_items)
    types = Counter(it["question_type"] for it in lme_items)
    assert len(types) == 6
    assert any(isinstance(it["answer"], int) for it in lme_items)
    assert any(len(it["answer_session_ids"]) > 1 for it in lme_items)


def test_lme_sessions_shared_with_differing_dates(lme_items):
    content: dict[str, str] = {}
    dates = defaultdict(set)
    seen = Counter()
    for it in lme_items:
        for sid, d, s in zip(it["haystack_session_ids"], it["haystack_dates"],
                             it["haystack_sessions"]):
            js = json.dumps(s)
            assert content.setdefault(sid, js) == js, f"{sid} has two contents"
            dates[sid].add(d)
            seen[sid] += 1
    shared = [sid for sid, n in seen.items() if n > 1]
    assert len(shared) > 50
    assert any(len(dates[sid]) > 1 for sid in shared)
    assert not any(sid.startswith("answer_") for sid in shared)
    assert seen.most_common(1)[0][1] >= 10          # some sessions are popular


def test_lme_abs_ids(tmp_path):
    p = tmp_path / "s.json"
    write_longmemeval(p, 300, 3, seed=0, turns=(2, 3), words_per_turn=(3, 6))
    items = json.loads(p.read_text(encoding="utf-8"))
    n_abs = sum(it["question_id"].endswith("_abs") for it in items)
    assert 3 <= n_abs <= 35
    assert any(it["question_id"].startswith("gpt4_") for it in items)


def test_lme_target_bytes(tmp_path):
    p = tmp_path / "s.json"
    info = write_longmemeval(p, 40, 30, seed=2, target_bytes=4_000_000)
    assert abs(os.path.getsize(p) - 4_000_000) < 0.1 * 4_000_000
    assert info["words_per_turn"] != (8, 120)


def test_lme_ensure_ascii_and_vocab(tmp_path):
    p = tmp_path / "a.json"
    write_longmemeval(p, 40, 6, seed=1, spice=True, ensure_ascii=True)
    raw = p.read_bytes()
    assert raw.isascii() and b"\\u0130" in raw and b"\\ud840\\udc00" in raw
    items = json.loads(raw)
    assert json.dumps(items) == raw.decode()
    if REAL_LOCOMO is not None:
        q = tmp_path / "v.json"
        write_longmemeval(q, 10, 5, seed=1, vocab_source=REAL_LOCOMO)
        text = q.read_text(encoding="utf-8")
        assert "Caroline" in text or "Melanie" in text
        json.loads(text)


def test_lme_spice_cases(spicy, spicy_items):
    items = spicy_items
    raw = Path(spicy).read_text(encoding="utf-8")
    with open(spicy, "rb") as f:
        assert len(list(ijson.items(f, "item", use_float=True))) == len(items) == 60
    # characters
    for marker in ("café", "naïve", "école", "e\u0301", "\u212A", "İ", "\U00020000",
                   "东京寿司"):
        assert marker in raw, marker
    contents = [t.get("content") for it in items for s in it["haystack_sessions"] if s
                for t in s if t]
    assert any(isinstance(c, str) and re.search(r"[\u4e00-\u9fff]", c) for c in contents)
    assert any(isinstance(c, str) and "\U00020000" in c for c in contents)
    # dates
    all_dates = [d for it in items for d in it["haystack_dates"]]
    for v in ("", None, "2023/13/01 (Mon) 10:00", "2023/02/30 (Thu) 24:00",
              "2023/05/20 (Sat) 24:30"):
        assert v in all_dates, v
    assert any(len(it["haystack_dates"]) < len(it["haystack_sessions"]) for it in items)
    assert any(not LME_DATE.fullmatch(it["question_date"]) for it in items)
    # ids
    assert any(len(it["haystack_session_ids"]) < len(it["haystack_sessions"]) for it in items)
    all_ids = [x for it in items for x in it["haystack_session_ids"]]
    assert None in all_ids
    assert any(isinstance(x, int) for x in all_ids)
    assert any(isinstance(x, int) for it in items for x in it["answer_session_ids"])
    assert any(f"s{i}" in it["answer_session_ids"]
               for it in items for i in range(len(it["haystack_sessions"])))
    # gold ids not in the haystack; an item with no gold in the haystack at all
    hs = [(set(map(str, it["haystack_session_ids"])), [str(x) for x in it["answer_session_ids"]])
          for it in items]
    assert any(set(gold) - ids for ids, gold in hs)
    assert any(not (set(gold) & ids) for ids, gold in hs)
    # an id made of a word of its question
    def qwords(it):
        return {w for w in re.findall(r"[a-z0-9]+", it["question"].lower()) if len(w) >= 3}
    assert any(isinstance(x, str) and not x.startswith(("answer_", "sharegpt_", "ultrachat_"))
               and set(re.findall(r"[a-z0-9]+", x.lower())) & qwords(it)
               for it in items for x in it["haystack_session_ids"])
    # sessions and turns
    sessions = [s for it in items for s in it["haystack_sessions"]]
    assert [] in sessions and None in sessions
    turns = [t for s in sessions if s for t in s]
    assert None in turns
    assert any(isinstance(t, dict) and "content" not in t for t in turns)
    assert any(isinstance(t, dict) and "content" in t and t["content"] is None for t in turns)
    assert any(isinstance(t, dict) and type(t.get("content")) is int for t in turns)
    assert any(isinstance(t, dict) and type(t.get("content")) is float for t in turns)
    # questions
    qs = [it["question"] for it in items]
    assert any(re.search(r"[\u4e00-\u9fff]", q) and not re.search(r"[A-Za-z0-9]", q) for q in qs)
    assert any(re.fullmatch(r"[a-z0-9]+\??", q) for q in qs)
    assert any('"' in q for q in qs)
    qids = Counter(it["question_id"] for it in items)
    assert qids.most_common(1)[0][1] >= 2
    assert any("question_type" not in it for it in items)
    # the planned cases are all there
    plan = gen_lme._spice_plan(60, 3, LME_SPICE_CASES)
    assert sorted({c for cs in plan.values() for c in cs}) == sorted(LME_SPICE_CASES)


def _repeats(item):
    """{id: [positions]} of the ids a haystack holds more than once."""
    ids = item["haystack_session_ids"][: len(item["haystack_sessions"])]
    pos = defaultdict(list)
    for i, sid in enumerate(ids):
        if sid is not None:
            pos[json.dumps(sid)].append(i)
    return {k: v for k, v in pos.items() if len(v) > 1}


def test_lme_repeat_ids(tmp_path, lme_items):
    p = tmp_path / "r.json"
    info = write_longmemeval(p, 120, 16, seed=7, repeat_ids=0.3)
    items = json.loads(p.read_text(encoding="utf-8"))
    again = tmp_path / "r2.json"
    generate_main(["longmemeval", "--out", str(again), "--questions", "120", "--sessions", "16", "--seed", "7",
            "--repeat-ids", "0.3", "--quiet"])
    assert sha(again) == sha(p)
    repeated = [i for i, it in enumerate(items) if _repeats(it)]
    assert len(repeated) == info["repeated_id_haystacks"]
    assert 0.15 * 120 <= len(repeated) <= 0.45 * 120
    kinds = Counter()
    for it, base in zip(items, lme_items):
        groups = _repeats(it)
        if not groups:
            assert it == base  # a haystack left alone is the plain file's
            continue
        # the answer sessions are untouched, so the gold is still in the haystack
        for a in base["answer_session_ids"]:
            j = base["haystack_session_ids"].index(a)
            assert it["haystack_session_ids"][j] == a and it["haystack_sessions"][j] == base["haystack_sessions"][j]
        for key, pos in groups.items():
            sessions = [it["haystack_sessions"][i] for i in pos]
            assert len({len(s) for s in sessions}) == 1  # as many turns: exp6.cjs can run
            kinds["twice" if len(pos) == 2 else "three or more"] += 1
            kinds["gold"] += json.loads(key) in base["answer_session_ids"]
            kinds["same turns"] += any(s == sessions[0] for s in sessions[1:])
            kinds["other turns"] += any(s != sessions[0] for s in sessions[1:])
            gaps = [b - a for a, b in zip(pos, pos[1:])]
            kinds["neighbouring"] += 1 in gaps
            kinds["distant"] += max(gaps) >= 16 // 3
            # dates stay per slot
            assert [it["haystack_dates"][i] for i in pos] == [base["haystack_dates"][i] for i in pos]
    assert all(kinds[k] for k in ("twice", "three or more", "gold", "same turns", "other turns",
                                  "neighbouring", "distant")), kinds
    q = tmp_path / "any.json"
    write_longmemeval(q, 60, 16, seed=7, repeat_ids=1.0, repeat_ids_any_length=True)
    lengths = [{len(it["haystack_sessions"][i] or []) for i in pos}
               for it in json.loads(q.read_text(encoding="utf-8")) for pos in _repeats(it).values()]
    assert any(len(n) > 1 for n in lengths)


def test_lme_uneven_ids(tmp_path, lme_items):
    p = tmp_path / "u.json"
    info = write_longmemeval(p, 120, 16, seed=7, uneven_ids=0.5)
    again = tmp_path / "u2.json"
    generate_main(["longmemeval", "--out", str(again), "--questions", "120", "--sessions", "16", "--seed", "7",
            "--uneven-ids", "0.5", "--quiet"])
    assert sha(again) == sha(p)
    kinds = Counter()
    changed = 0
    for it, base in zip(json.loads(p.read_text(encoding="utf-8")), lme_items):
        if it == base:
            continue
        changed += 1
        # only the id list and the answers change
        assert {k for k in it if it[k] != base[k]} <= {"haystack_session_ids", "answer_session_ids"}
        ids, n, answers = it["haystack_session_ids"], len(it["haystack_sessions"]), it["answer_session_ids"]
        raw = {str(x) for x in ids if x is not None} | ({"null"} if None in ids else set())
        kinds["shorter"] += len(ids) < n
        kinds["longer"] += len(ids) > n
        kinds["null"] += None in ids
        # an answer id with no session, or a fallback id that is not in the raw list
        kinds["gold without a session"] += any(str(a) in raw and a not in ids[:n] for a in answers if a is not None) \
            or (None in answers and None in ids)
        kinds["fallback id not gold"] += any(isinstance(a, str) and a not in raw for a in answers)
    assert changed == info["uneven_id_haystacks"] and 0.3 * 120 <= changed <= 0.7 * 120
    assert all(kinds[k] for k in ("shorter", "longer", "null", "gold without a session", "fallback id not gold")), kinds


def test_lme_spice_plan_covers_small_files():
    for n in (len(LME_SPICE_CASES), 100, 450):
        plan = gen_lme._spice_plan(n, 0, LME_SPICE_CASES)
        assert {c for cs in plan.values() for c in cs} == set(LME_SPICE_CASES)
        assert all(len(cs) == 1 for cs in plan.values()) or n < len(LME_SPICE_CASES)
        assert "duplicate_question_id" not in plan.get(0, [])


# ---------------------------------------------------------------------------
# LoCoMo
# ---------------------------------------------------------------------------

def test_locomo_deterministic(tmp_path, locomo):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_locomo(a, 6, seed=1, sessions=(8, 14), turns=(6, 20), qa_per_conversation=(30, 60))
    write_locomo(b, 6, seed=2, sessions=(8, 14), turns=(6, 20), qa_per_conversation=(30, 60))
    assert sha(a) == sha(locomo)
    assert sha(a) != sha(b)


def _real_structure():
    if REAL_LOCOMO is None:
        return REAL_TURN_KEYS, REAL_QA_KEYS
    real = json.loads(REAL_LOCOMO.read_text())
    turn_keys = {tuple(t) for c in real for k, v in c["conversation"].items()
                 if re.fullmatch(r"session_\d+", k) for t in v}
    qa_keys = {tuple(q) for c in real for q in c["qa"]}
    assert [list(c) for c in real] == [CONV_KEYS] * len(real)
    return turn_keys, qa_keys


def test_locomo_structure(locomo):
    raw = Path(locomo).read_text()
    data = json.loads(raw)
    assert json.dumps(data, indent=2) == raw           # written like the real file
    with open(locomo, "rb") as f:
        assert list(ijson.items(f, "item", use_float=True)) == data
    turn_keys, qa_keys = _real_structure()
    assert len(data) == 6
    orphans = 0
    bad_evidence = []
    n_ev = n_ok = empty = 0
    for c in data:
        assert list(c) == CONV_KEYS
        assert re.fullmatch(r"conv-\d+", c["sample_id"])
        conv = c["conversation"]
        assert list(conv)[:2] == ["speaker_a", "speaker_b"]
        names = {conv["speaker_a"], conv["speaker_b"]}
        snums = sorted(int(k[8:]) for k in conv if re.fullmatch(r"session_\d+", k))
        dnums = sorted(int(k[8:-10]) for k in conv if re.fullmatch(r"session_\d+_date_time", k))
        assert set(snums) <= set(dnums)
        orphans += len(set(dnums) - set(snums))
        assert len(c["event_summary"]) == len(c["observation"]) == len(c["session_summary"]) \
            == len(snums)
        assert f"events_session_{snums[0]}" in c["event_summary"]
        assert f"session_{snums[0]}_observation" in c["observation"]
        assert f"session_{snums[0]}_summary" in c["session_summary"]
        prev = None
        dia = set()
        for s in snums:
            m = LOCOMO_DATE.fullmatch(conv[f"session_{s}_date_time"])
            assert m and m.group(5) in gen_vocab._MONTHS
            h, mi, ap, d, mon, y = m.groups()
            hh = int(h) % 12 + (12 if ap == "pm" else 0)
            t = dt.datetime(int(y), gen_vocab._MONTHS.index(mon) + 1, int(d), hh, int(mi))
            assert prev is None or t > prev
            prev = t
            for k, turn in enumerate(conv[f"session_{s}"], 1):
                assert tuple(turn) in turn_keys, tuple(turn)
                assert turn["dia_id"] == f"D{s}:{k}"
                assert turn["speaker"] in names
                assert isinstance(turn["text"], str) and turn["text"]
                dia.add(turn["dia_id"])
        for q in c["qa"]:
            assert tuple(q) in qa_keys, tuple(q)
            assert type(q["category"]) is int and 1 <= q["category"] <= 5
            assert ("adversarial_answer" in q) == (q["category"] == 5)
            assert isinstance(q["evidence"], list)
            empty += not q["evidence"]
            for e in q["evidence"]:
                assert isinstance(e, str)
                n_ev += 1
                if e in dia:
                    n_ok += 1
                else:
                    bad_evidence.append(e)
    assert orphans > 0
    assert empty > 0
    assert n_ok / n_ev > 0.97
    for m in gen_locomo.LOCOMO_MESSY_ALONE + gen_locomo.LOCOMO_MESSY_WITH:
        assert m in bad_evidence, m
    assert {1, 2, 3, 4, 5} == {q["category"] for c in data for q in c["qa"]}
    turns = [t for c in data for k, v in c["conversation"].items()
             if re.fullmatch(r"session_\d+", k) for t in v]
    assert any("img_url" in t for t in turns) and any("blip_caption" in t for t in turns)


def test_locomo_defaults_look_like_the_real_file(tmp_path):
    p = tmp_path / "l.json"
    info = write_locomo(p, 10, seed=0)
    data = json.loads(p.read_text())
    assert 1000 <= info["qa"] <= 2500
    for c in data:
        n = sum(1 for k in c["conversation"] if re.fullmatch(r"session_\d+", k))
        assert 15 <= n <= 32
    # exact lookup: the messy forms never resolve, so some items lose all gold
    skipped = 0
    for c in data:
        dia = {t["dia_id"] for k, v in c["conversation"].items()
               if re.fullmatch(r"session_\d+", k) for t in v}
        skipped += sum(1 for q in c["qa"] if not (set(q["evidence"]) & dia))
    assert skipped >= len(gen_locomo.LOCOMO_MESSY_ALONE) + 1


def test_locomo_spice(tmp_path):
    p = tmp_path / "l.json"
    info = write_locomo(p, 4, seed=5, sessions=(5, 12), turns=(4, 12),
                          qa_per_conversation=(10, 20), spice=True)
    assert info["spice_cases"] == sorted(LOCOMO_SPICE_CASES)
    raw = p.read_text()
    assert raw.isascii()
    data = json.loads(raw)
    assert json.dumps(data, indent=2) == raw
    turns = []
    gaps = 0
    missing_date = 0
    max_dup = 0
    for c in data:
        conv = c["conversation"]
        snums = sorted(int(k[8:]) for k in conv if re.fullmatch(r"session_\d+", k))
        gaps += snums != list(range(1, len(snums) + 1))
        missing_date += sum(f"session_{s}_date_time" not in conv for s in snums)
        mine = [t for s in snums for t in conv[f"session_{s}"]]
        ids = Counter(t["dia_id"] for t in mine if t.get("dia_id"))
        max_dup = max(max_dup, ids.most_common(1)[0][1])
        turns += mine
    dates = [v for c in data for k, v in c["conversation"].items() if k.endswith("_date_time")]
    assert gaps and missing_date
    assert "13:00 pm on 8 May, 2023" in dates and "1:56 PM on 8 May, 2023" in dates
    assert "1:56 pm on 31 February, 2023" in dates
    assert any("text" not in t for t in turns)
    assert any(t.get("text") == 7 for t in turns)
    assert any(t.get("dia_id") == "" for t in turns)
    assert any("dia_id" not in t for t in turns)
    assert max_dup == 2                     # a dia_id used twice in one conversation
    qa = [q for c in data for q in c["qa"]]
    assert any("category" not in q for q in qa)
    assert any(3 in q["evidence"] and None in q["evidence"] for q in qa)
    texts = [t.get("text") for t in turns if isinstance(t.get("text"), str)]
    joined = " ".join(texts)
    for marker in ("café", "İ", "\u212A", "\U00020000", "東京"):
        assert marker in joined
    assert any("café" in q["question"] for q in qa)


# ---------------------------------------------------------------------------
# CN
# ---------------------------------------------------------------------------

def _cn_rows(path):
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    return lines[:-1]


def test_cn_pairs(tmp_path, lme, lme_items):
    out = tmp_path / "cn.jsonl"
    info = write_cn(out, lme[0], seed=4)
    lines = _cn_rows(out)
    assert "" in lines
    rows = [json.loads(x) for x in lines if x.strip()]
    assert info["rows"] == len(rows)
    by_id = {it["question_id"]: it for it in lme_items}
    matched, unmatched, no_suffix = 0, 0, 0
    for r in rows:
        assert isinstance(r["questionId"], str) and isinstance(r["question"], str)
        orig = r["questionId"][:-3] if r["questionId"].endswith("_cn") else r["questionId"]
        no_suffix += not r["questionId"].endswith("_cn")
        if orig not in by_id:
            unmatched += 1
            continue
        matched += 1
        en = by_id[orig]["question"]
        assert re.search(r"[\u4e00-\u9fff]", r["question"]) or r["question"] == en
        # Latin tokens of the Chinese question come from the English one
        en_tokens = set(re.findall(r"[a-z0-9]+", en.lower()))
        assert set(re.findall(r"[a-z0-9]+", r["question"].lower())) <= en_tokens
    assert matched >= len(lme_items) and unmatched >= 1 and no_suffix >= 1
    ids = Counter(r["questionId"] for r in rows)
    assert ids.most_common(1)[0][1] >= 2                  # duplicates
    # every English question has a row; some keep Latin names/brands
    assert {r["questionId"].removesuffix("_cn") for r in rows} >= set(by_id)
    assert any(re.search(r"[A-Za-z]", r["question"]) and re.search(r"[\u4e00-\u9fff]",
                                                                      r["question"])
               for r in rows)
    # deterministic, and the same from items as from the file
    out2 = tmp_path / "cn2.jsonl"
    write_cn(out2, lme_items, seed=4)
    assert sha(out) == sha(out2)
    out3 = tmp_path / "cn3.jsonl"
    write_cn(out3, lme[0], seed=5, fraction=0.5)
    rows3 = [json.loads(x) for x in _cn_rows(out3) if x]
    assert 30 < len(rows3) < 100


def test_cn_on_spicy_file(tmp_path, spicy, spicy_items):
    out = tmp_path / "cn.jsonl"
    write_cn(out, spicy, seed=0)
    rows = [json.loads(x) for x in _cn_rows(out) if x]
    ids = {it["question_id"] for it in spicy_items}
    assert sum(r["questionId"].removesuffix("_cn") in ids for r in rows) >= len(ids)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def test_cli(tmp_path, capsys):
    s, l, c = tmp_path / "s.json", tmp_path / "l.json", tmp_path / "c.jsonl"
    assert generate_main(["longmemeval", "--out", str(s), "--questions", "5", "--sessions", "4",
                   "--seed", "1", "--spice", "--target-bytes", "200k", "--quiet"]) == 0
    assert generate_main(["locomo", "--out", str(l), "--conversations", "2", "--sessions", "3", "5",
                   "--turns", "4", "8", "--qa", "5", "10"]) == 0
    assert generate_main(["cn", "--out", str(c), "--lme", str(s)]) == 0
    out = capsys.readouterr().out.strip().split("\n")
    infos = [json.loads(x) for x in out]
    assert [i["path"] for i in infos] == [str(s), str(l), str(c)]
    assert len(json.loads(s.read_text(encoding="utf-8"))) == 5
    assert len(json.loads(l.read_text())) == 2
    assert not list(tmp_path.glob("*.tmp"))


class _SmallBank(gen_vocab._Vocab):
    BANK = 3000


@pytest.mark.parametrize("words", [gen_vocab._WORDS.split(), ["été", "naïve", "日本", "a", "ok", "zebra"]],
                         ids=["built-in", "non-ascii"])
@pytest.mark.parametrize("seed", [5, 77])
def test_the_bank_is_drawn_by_random_choice_and_choices(words, seed):
    """The bank's written-out draws are ``rng.choice``, ``rng.choices`` and
    ``rng.random`` called as the definition says, draw for draw."""
    weights = [1.0 / (r + 2.0) ** 1.05 for r in range(len(words))]
    cum = list(itertools.accumulate(weights))
    rng = gen_vocab._rng(seed, "bank", len(words))
    want = []
    for _ in range(_SmallBank.BANK):
        s = " ".join(rng.choices(words, cum_weights=cum, k=rng.choice(_SmallBank._CHUNK_SIZES)))
        r = rng.random()
        want.append(s + ("." if r < 0.13 else "," if r < 0.18 else "?" if r < 0.20 else "!" if r < 0.21 else ""))
    bank, nwords, nbytes = _SmallBank._bank(gen_vocab._rng(seed, "bank", len(words)), words, weights)
    assert bank == want
    assert nwords == sum(len(s.split(" ")) for s in want)
    assert nbytes == sum(len(s.encode("utf-8")) + 1 for s in want)


def test_the_committed_test_file_is_what_its_documented_command_writes(tmp_path):
    """.test/config/config.yaml says how .test/data/lme_tiny.json was made and holds its sha256."""
    import yaml

    config = (REPO / ".test" / "config" / "config.yaml").read_text(encoding="utf-8")
    command = re.search(r"python -m memobench\.tools\.generate (longmemeval .*?)\n#\s+(--.*?)\n", config)
    args = (command.group(1).rstrip("\\ ") + " " + command.group(2)).split()
    out = tmp_path / "lme_tiny.json"
    args[args.index("--out") + 1] = str(out)
    assert generate_main([*args, "--quiet"]) == 0
    dataset = yaml.safe_load(config)["datasets"]["lme_tiny"]
    assert out.stat().st_size == dataset["bytes"]
    assert hashlib.sha256(out.read_bytes()).hexdigest() == dataset["sha256"]
