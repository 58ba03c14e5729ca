"""LoCoMo-shaped files: :func:`write_locomo` writes ``json.dumps(conversations,
indent=2)`` like the real ``locomo10.json``, with its key structure, date
format, orphan date keys, image turns, messy evidence strings and the spice
edge cases (:data:`LOCOMO_SPICE_CASES`)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re

from .surrogates import _surrogate_rates, with_surrogates
from .vocabulary import (_ALNUM, _FIRST_NAMES, _HARNESS_STOP, _HEX, _MONTHS, _atomic_open, _cap, _randstr, _rng,
                         _vocab, locomo_date)

#: Evidence strings of the real locomo10.json that match no ``dia_id``.  The
#: first five are an item's only evidence; the others stand beside valid ids.
LOCOMO_MESSY_ALONE = ("D8:6; D9:17", "D9:1 D4:4 D4:6", "D22:1 D22:2 D9:10 D9:11",
                      "D21:18 D21:22 D11:15 D11:19", "D30:05")
LOCOMO_MESSY_WITH = ("D", "D:11:26", "D10:19", "D4:36")

#: Edge cases that ``write_locomo(..., spice=True)`` adds (each at least once).
LOCOMO_SPICE_CASES = (
    "turn_no_text",          # a turn without "text"
    "turn_numeric_text",     # "text": 7
    "dia_id_empty",          # "dia_id": "" (falsy: not in the map)
    "dia_id_missing",        # no "dia_id"
    "dia_id_duplicate",      # a dia_id used twice (the last one wins)
    "date_unparseable",      # "13:00 pm on 8 May, 2023", "1:56 PM on ..."
    "date_feb31",            # "1:56 pm on 31 February, 2023" (rolls over)
    "date_missing",          # a session without its session_<n>_date_time
    "session_gap",           # session numbers with a gap
    "category_missing",      # a qa item without "category"
    "evidence_non_string",   # evidence holding 3 and null
    "unicode_text",          # café, naïve, Han, astral, Kelvin sign, İ in text and question
)

_CATEGORY_WEIGHTS = (282, 321, 96, 841, 446)   # categories 1..5 in locomo10.json
_IMG_FORMS = (("full", 709), ("blip", 311), ("full_redl", 179), ("dia_redl", 22),
              ("blip_redl", 5))


def _locomo_turn(rng, speaker, dia_id, text, vocab):
    if rng.random() >= 0.2:
        return {"speaker": speaker, "dia_id": dia_id, "text": text}
    form = rng.choices([f for f, _ in _IMG_FORMS], weights=[w for _, w in _IMG_FORMS])[0]
    if rng.random() < 0.6:
        url = f"https://i.redd.it/{_randstr(rng, _ALNUM.lower()[:36], 13)}.jpg"
    else:
        url = (f"https://live.staticflickr.com/{rng.randint(1000, 9999)}/"
               f"{rng.randint(10**9, 10**10 - 1)}_{_randstr(rng, _HEX, 10)}_b.jpg")
    caption = "a photo of " + vocab.text(rng, rng.randint(4, 10)).rstrip(".,?!")
    query = " ".join(vocab.keyword(rng) for _ in range(rng.randint(2, 4)))
    if form == "full":
        return {"speaker": speaker, "img_url": [url], "blip_caption": caption, "query": query,
                "dia_id": dia_id, "text": text}
    if form == "blip":
        return {"speaker": speaker, "blip_caption": caption, "dia_id": dia_id, "text": text}
    if form == "full_redl":
        return {"speaker": speaker, "img_url": [url], "blip_caption": caption, "query": query,
                "dia_id": dia_id, "re-download": True, "text": text}
    if form == "dia_redl":
        return {"speaker": speaker, "dia_id": dia_id, "img_url": [url], "re-download": True,
                "blip_caption": caption, "text": text}
    return {"speaker": speaker, "blip_caption": caption, "dia_id": dia_id, "re-download": True,
            "text": text}


def _q_words(text, vocab, rng, k):
    toks = re.findall(r"[a-z]+", text.lower())
    good = [w for w in toks if w in vocab.keyword_set]
    if len(good) < k:
        good += [w for w in toks if len(w) >= 3 and w not in _HARNESS_STOP]
    if not good:
        good = [vocab.keyword(rng) for _ in range(k)]
    start = rng.randrange(len(good))
    out = []
    for w in good[start:] + good[:start]:
        if w not in out:
            out.append(w)
        if len(out) == k:
            break
    while len(out) < k:
        out.append(vocab.keyword(rng))
    return out


def _locomo_conversation(ci, sample_num, seed, vocab, sessions, turns, qa_range, messy,
                         spice_cases):
    rng = _rng(seed, "locomo", ci)
    A, B = rng.sample(_FIRST_NAMES, 2)
    ns = max(1, rng.randint(*sessions))
    nums = list(range(1, ns + 1))
    if "session_gap" in spice_cases and ns >= 3:
        gap = rng.randint(2, ns - 1)
        nums = [s for s in nums if s != gap] + [ns + 1]
    orphan = ci == 0 or rng.random() < 0.2
    cap = {}
    if "D10:19" in messy:
        cap[10] = 18
    if "D4:36" in messy:
        cap[4] = 35
    dt = (_dt.datetime(2022, 1, 1) + _dt.timedelta(days=rng.randrange(600))
          + _dt.timedelta(minutes=rng.randrange(1440)))
    conversation: dict = {"speaker_a": A, "speaker_b": B}
    all_turns = []      # (session number, turn dict)
    dates = {}
    for s in nums:
        dt = dt.replace(hour=0, minute=0) + _dt.timedelta(days=rng.randint(1, 30),
                                                          minutes=rng.randrange(1440))
        dates[s] = dt
        conversation[f"session_{s}_date_time"] = locomo_date(dt)
        nt = max(1, rng.randint(*turns))
        nt = min(nt, cap.get(s, nt))
        lst = []
        for t in range(1, nt + 1):
            spk = A if t % 2 == 1 else B
            turn = _locomo_turn(rng, spk, f"D{s}:{t}", vocab.text(rng, rng.randint(4, 40)), vocab)
            lst.append(turn)
            all_turns.append((s, turn))
        conversation[f"session_{s}"] = lst
    if orphan:
        last = nums[-1]
        for s in range(last + 1, last + 1 + rng.randint(3, 16)):
            dt += _dt.timedelta(days=rng.randint(1, 30))
            conversation[f"session_{s}_date_time"] = locomo_date(dt)

    # -- qa ---------------------------------------------------------------
    qa = []
    n_qa = max(1, rng.randint(*qa_range))
    for _ in range(n_qa):
        cat = rng.choices((1, 2, 3, 4, 5), weights=_CATEGORY_WEIGHTS)[0]
        if cat == 1:
            nev = rng.choice((2, 2, 2, 3, 3, 4, 5))
        else:
            nev = 1 if rng.random() < 0.85 else 2
        ev = rng.sample(all_turns, min(nev, len(all_turns)))
        s0, t0 = ev[0]
        spk = t0["speaker"]
        other = B if spk == A else A
        w1, w2 = _q_words(t0["text"], vocab, rng, 2)
        evidence = [t["dia_id"] for _, t in ev]
        d0 = dates[s0]
        if cat == 1:
            question = f"What {w1} and {w2} has {spk} talked about?"
            answer = ", ".join(_q_words(t["text"], vocab, rng, 1)[0] for _, t in ev)
        elif cat == 2:
            question = f"When did {spk} {w1} the {w2}?"
            answer = (d0.year if rng.random() < 0.03
                      else f"{d0.day} {_MONTHS[d0.month - 1]} {d0.year}")
        elif cat == 3:
            question = f"Would {spk} likely {w1} {w2}?"
            answer = rng.choice(("Likely yes", "Likely no", "Yes", "No")) + f", {w1}"
            if rng.random() < 0.04:
                evidence = []
        elif cat == 4:
            question = rng.choice((f"What did {spk} say about {w1} {w2}?",
                                   f"How does {spk} feel about the {w1} {w2}?"))
            answer = f"{_cap(w1)} {w2}"
        else:
            question = f"What did {other} say about {w1} {w2}?"
            answer = f"{_cap(w2)} {w1}"
        if cat == 5:
            if rng.random() < 0.005:
                item = {"question": question, "adversarial_answer": answer, "answer": "No",
                        "evidence": evidence, "category": 5}
            else:
                item = {"question": question, "evidence": evidence, "category": 5,
                        "adversarial_answer": answer}
        else:
            item = {"question": question, "answer": answer, "evidence": evidence,
                    "category": cat}
        qa.append(item)
    # the real messy evidence strings assigned to this conversation
    normal = [q for q in qa if q["evidence"]]
    targets = rng.sample(normal, len(messy)) if len(normal) >= len(messy) else \
        [rng.choice(qa) for _ in messy]
    for m, q in zip(messy, targets):
        if m in LOCOMO_MESSY_ALONE:
            q["evidence"] = [m]
        else:
            q["evidence"].insert(rng.randint(0, len(q["evidence"])), m)
    if ci == 0:
        # at least one item without evidence per file, as in locomo10.json
        rest = [q for q in qa if all(q is not t for t in targets)]
        q = rng.choice(rest or qa)
        q["evidence"] = []
        if q.get("category") != 5:
            q["category"] = 3

    # -- summaries --------------------------------------------------------
    def sent(name):
        return f"{name} " + vocab.text(rng, rng.randint(6, 16)).rstrip(".,?!") + "."

    turns_by_s: dict[int, list] = {}
    for s, t in all_turns:
        turns_by_s.setdefault(s, []).append(t)
    event_summary, observation, session_summary = {}, {}, {}
    for s in nums:
        d = dates[s]
        event_summary[f"events_session_{s}"] = {
            A: [sent(A) for _ in range(rng.randint(0, 2))],
            B: [sent(B) for _ in range(rng.randint(0, 2))],
            "date": f"{d.day} {_MONTHS[d.month - 1]}, {d.year}",
        }
        obs = {}
        for name in (A, B):
            mine = [t for t in turns_by_s.get(s, []) if t["speaker"] == name]
            k = min(len(mine), rng.randint(1, 4))
            obs[name] = [[sent(name), t["dia_id"]] for t in rng.sample(mine, k)]
        observation[f"session_{s}_observation"] = obs
        h = d.hour % 12 or 12
        session_summary[f"session_{s}_summary"] = (
            f"{A} and {B} had a conversation on {d.day} {_MONTHS[d.month - 1]} {d.year} at "
            f"{h}:{d.minute:02d} {'am' if d.hour < 12 else 'pm'}. " + sent(A) + " " + sent(B))

    conv = {"qa": qa, "conversation": conversation, "event_summary": event_summary,
            "observation": observation, "session_summary": session_summary,
            "sample_id": f"conv-{sample_num}"}
    if spice_cases:
        _locomo_spice(conv, rng, spice_cases, nums, all_turns, vocab)
    return conv


def _locomo_spice(conv, rng, cases, nums, all_turns, vocab):
    c = conv["conversation"]
    qa = conv["qa"]
    # turns that are not evidence of anything, so gold stays as generated
    used = {e for q in qa for e in q["evidence"] if isinstance(e, str)}
    free = [t for _, t in all_turns if t["dia_id"] not in used]
    rng.shuffle(free)

    def pick():
        return free.pop() if free else all_turns[rng.randrange(len(all_turns))][1]

    for case in cases:
        if case == "turn_no_text":
            pick().pop("text", None)
        elif case == "turn_numeric_text":
            pick()["text"] = 7
        elif case == "dia_id_empty":
            pick()["dia_id"] = ""
        elif case == "dia_id_missing":
            pick().pop("dia_id", None)
        elif case == "dia_id_duplicate":
            s_first = [t for s, t in all_turns if s == nums[0]]
            s_last = [t for s, t in all_turns if s == nums[-1]]
            src = s_first[0]
            if len(s_last) > 1 and s_last[-1] is not src:
                s_last[-1]["dia_id"] = src["dia_id"]
                qa.append({"question": f"What did {src['speaker']} say first?",
                           "answer": "Hello", "evidence": [src["dia_id"]], "category": 4})
        elif case == "date_unparseable":
            for s, v in zip(rng.sample(nums, min(2, len(nums))),
                            ("13:00 pm on 8 May, 2023", "1:56 PM on 8 May, 2023")):
                c[f"session_{s}_date_time"] = v
        elif case == "date_feb31":
            c[f"session_{rng.choice(nums)}_date_time"] = "1:56 pm on 31 February, 2023"
        elif case == "date_missing":
            c.pop(f"session_{rng.choice(nums)}_date_time", None)
        elif case == "session_gap":
            pass        # applied while building the sessions
        elif case == "category_missing":
            rng.choice(qa).pop("category", None)
        elif case == "evidence_non_string":
            q = rng.choice(qa)
            q["evidence"] = q["evidence"] + [3, None]
        elif case == "unicode_text":
            t = pick()
            t["text"] = ("We met at the café in İstanbul, naïve as ever; 東京 \U00020000 "
                         "and 300 \u212A.")
            if "dia_id" in t and t["dia_id"]:
                qa.append({"question": "Which café in İstanbul did they visit? 東京",
                           "answer": "the café", "evidence": [t["dia_id"]], "category": 4})
        else:  # pragma: no cover
            raise ValueError(f"unknown LoCoMo spice case {case!r}")


def write_locomo(path, n_conversations, seed=0, sessions=(15, 32), turns=(10, 30),
                 qa_per_conversation=(100, 250), spice=False, vocab_source=None, surrogates=False):
    """Write a LoCoMo-shaped JSON file (``json.dumps(convs, indent=2)``); return a summary.

    The key structure is that of the real ``locomo10.json``: each conversation
    has ``qa``, ``conversation`` (``speaker_a``, ``speaker_b``,
    ``session_<n>_date_time`` and ``session_<n>`` turn lists with ``speaker``,
    ``dia_id`` ``D<n>:<k>``, ``text`` and sometimes ``img_url``,
    ``blip_caption``, ``query``, ``re-download``), ``event_summary``,
    ``observation``, ``session_summary`` and ``sample_id``.  The first
    conversation (and ~20% of the others) has orphan date keys after its last
    session.  QA evidence is mostly valid ``dia_id`` strings; the real messy
    strings (:data:`LOCOMO_MESSY_ALONE`, :data:`LOCOMO_MESSY_WITH`) are spread
    over the conversations, and about 4% of category-3 items (and one item of
    the first conversation) have no evidence.  ``spice`` adds :data:`LOCOMO_SPICE_CASES`;
    ``surrogates``, :data:`SURROGATE_CASES` in about 2% of the turn texts and 5%
    of the questions (:func:`with_surrogates`; a number: that share of both).
    """
    n = int(n_conversations)
    vocab = _vocab(seed, os.fspath(vocab_source) if vocab_source is not None else None)
    messy_all = LOCOMO_MESSY_ALONE + LOCOMO_MESSY_WITH
    rng = _rng(seed, "locomo-plan")
    messy: dict[int, list[str]] = {}
    spice_plan: dict[int, list[str]] = {}
    if n > 0:
        for k, m in enumerate(messy_all):
            messy.setdefault(rng.randrange(n) if k >= n else k % n, []).append(m)
        if spice:
            for k, case in enumerate(LOCOMO_SPICE_CASES):
                spice_plan.setdefault((k + 1) % n, []).append(case)
    sample_num = 26
    n_items = 0
    n_surrogates, rates = 0, _surrogate_rates(surrogates)
    with _atomic_open(path) as f:
        if n == 0:
            f.write("[]")
        else:
            f.write("[\n")
            for ci in range(n):
                if ci:
                    sample_num += _rng(seed, "sample-id", ci).randint(1, 7)
                conv = _locomo_conversation(ci, sample_num, seed, vocab, sessions, turns,
                                            qa_per_conversation, messy.get(ci, []),
                                            spice_plan.get(ci, []))
                n_items += len(conv["qa"])
                s = json.dumps(conv, indent=2)
                if surrogates:
                    s, k = with_surrogates(s, "text", rates[0], seed)
                    s, k2 = with_surrogates(s, "question", rates[1], seed)
                    n_surrogates += k + k2
                f.write(("" if ci == 0 else ",\n") + "  " + s.replace("\n", "\n  "))
            f.write("\n]")
    return {"path": os.fspath(path), "conversations": n, "qa": n_items,
            "spice_cases": sorted({c for cs in spice_plan.values() for c in cs}),
            **({"surrogate_strings": n_surrogates} if surrogates else {})}
