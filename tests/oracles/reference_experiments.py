"""A second, independent, literal reading of the experiment harnesses of docs/harnesses.md
(exp.cjs, exp2.cjs, exp3.cjs, exp4.cjs, exp5.cjs, cn.cjs): a test oracle.

Written from docs/harnesses.md (the shared steps, cn.cjs, exp.cjs to exp5.cjs, the traps) without reading the
project's engine / retrieval / variants modules. Reuses only the literal building blocks
of ``memobench.naive`` (occurrences, representative, session_order, Fts, lme_sessions,
gold_rank), the tokenizers/windows of ``memobench.memo.tokenize``, ``memobench.core.jsmath``,
``memobench.datasets.dates.parse_lme`` and ``memobench.memo.stemmer.stem``.

Everything is rebuilt per question from the raw JSON (``json.load``), with plain loops.
Each ``reference_*`` function returns, per question in file order, a dict
``{question_id, q_index, status, rank, final}`` (status "evaluated" or "skipped").
"""

from __future__ import annotations

import json
import re

from memobench.datasets.dates import parse_lme
from memobench.core.jsmath import MISSING, js_log, js_string, utf16_len
from tests.oracles.naive import Fts, gold_rank, lme_gold, lme_sessions, session_order, session_representative
from memobench.memo.stemmer import stem
from memobench.memo.tokenize import (
    STOP_LISTS,
    seq_ascii,
    seq_cjkr,
    window_070,
    window_cf,
    window_cnb,
    window_plain,
)

DAY_MS = 86_400_000
PAGE = 10
CUT = 10

EXP_VARIANTS = ("V0", "V1", "V2", "V3", "V4")
EXP2_VARIANTS = ("V0", "V2", "V3", "V5", "V6")
EXP3_VARIANTS = ("V6", "T1", "T2h", "T2m")
EXP4_VARIANTS = ("A0-base", "A2+15", "B-bonus24", "C-idfProxy", "C-lenIdf")
EXP5_VARIANTS = ("base", "S1", "S2")
CN_VARIANTS = ("A", "A2", "B")


# ---------------------------------------------------------------------------
# Literal helpers
# ---------------------------------------------------------------------------


def candidates(fts, by_id, phrase, js_tokens, min_time=None):
    """Candidates and the JS check (+ exp3's hard filter): FTS rows in row order -> last session with that id
    -> [dropped unless some event has time >= min_time] -> representative -> session order."""
    cands = []
    for sid in fts.query(phrase):
        s = by_id[sid]
        if min_time is not None and not any(ev["time"] >= min_time for ev in s["events"]):
            continue
        rep = session_representative(s, js_tokens)
        if rep is None:
            continue
        cands.append({"id": s["id"], **rep})
    return session_order(cands)


def merge_counts(lists_with_weights):
    """Merge: counts / repTime in first-appearance order."""
    counts = {}
    rep_time = {}
    for lst, w in lists_with_weights:
        for c in lst:
            if c["id"] not in counts:
                counts[c["id"]] = w
                rep_time[c["id"]] = c["time"]
            else:
                counts[c["id"]] = counts[c["id"]] + w
    return counts, rep_time


def sort_counts(counts, rep_time):
    keys = list(counts)
    return sorted(keys, key=lambda k: (-counts[k], -rep_time[k]))


def p_plus_t(P, T):
    out = []
    for sid in list(P) + list(T):
        if sid not in out:
            out.append(sid)
    return out[:CUT]


def t_minus_p(P, T):
    """exp/exp2 output bug: output starts empty, seen pre-filled with P."""
    return [sid for sid in T[:CUT] if sid not in P]


def pairs(window):
    return [(a, b) for a, b in zip(window, window[1:])]


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _prepare(e, seq_fn):
    sessions = lme_sessions(e, seq_fn)
    gold = lme_gold(e)
    by_id = {}
    for s in sessions:
        by_id[s["id"]] = s  # last wins
    return sessions, gold, by_id


def _rec(e, q_index):
    return {
        "question_id": js_string(e.get("question_id", MISSING)),
        "q_index": q_index,
        "status": "skipped",
        "rank": 0,
        "final": [],
    }


def _copy(rec):
    return dict(rec, final=list(rec["final"]))


def _run_lme(path, variants, seq_fn, fts_limit, per_question):
    """Generic loop: skip no gold / no sessions / empty seq (not counted) and call
    ``per_question(question, entry, sessions, gold, by_id, fts) -> {variant: final or None}``
    (None = not recorded)."""
    data = _load(path)
    out = {v: [] for v in variants}
    fts = Fts(fts_limit)
    for q_index, e in enumerate(data):
        base = _rec(e, q_index)
        sessions, gold, by_id = _prepare(e, seq_fn)
        question = e["question"] if sessions and gold else None
        if not gold or not sessions or not seq_fn(question):
            for v in variants:
                out[v].append(_copy(base))
            continue
        fts.rebuild(sessions)
        finals = per_question(question, e, sessions, gold, by_id, fts)
        for v in variants:
            r = _copy(base)
            f = finals.get(v)
            if f is not None:
                r["status"] = "evaluated"
                r["final"] = list(f)
                r["rank"] = gold_rank(f, gold)
            out[v].append(r)
    fts.close()
    return out


# ---------------------------------------------------------------------------
# exp.cjs
# ---------------------------------------------------------------------------


def reference_exp(path):
    def per_question(question, e, sessions, gold, by_id, fts):
        win = window_plain(question)
        if len(win) < 2:
            return {}  # window <= 1 token: no record
        # phrase step with raw split JS tokens
        P = [c["id"] for c in candidates(fts, by_id, question, question.split(" "))[:PAGE]]

        def lst(p, page=PAGE):
            return candidates(fts, by_id, p, p.split(" "))[:page]

        res = {}
        # V0: tokens weight 1
        T = sort_counts(*merge_counts([(lst(t), 1) for t in win]))[:CUT]
        res["V0"] = t_minus_p(P, T)
        # V1: only t1's list, weight 1
        T = sort_counts(*merge_counts([(lst(win[0]), 1)]))[:CUT]
        res["V1"] = t_minus_p(P, T)
        # V2: len(t)
        T = sort_counts(*merge_counts([(lst(t), utf16_len(t)) for t in win]))[:CUT]
        res["V2"] = t_minus_p(P, T)
        # V3: tokens 1, pairs 2
        L = [(lst(t), 1) for t in win] + [(lst(a + " " + b), 2) for a, b in pairs(win)]
        T = sort_counts(*merge_counts(L))[:CUT]
        res["V3"] = t_minus_p(P, T)
        # V4: tokens 1, page 20
        T = sort_counts(*merge_counts([(lst(t, 20), 1) for t in win]))[:CUT]
        res["V4"] = t_minus_p(P, T)
        return res

    return _run_lme(path, EXP_VARIANTS, seq_ascii, 500, per_question)


# ---------------------------------------------------------------------------
# exp2.cjs
# ---------------------------------------------------------------------------


def reference_exp2(path):
    def per_question(question, e, sessions, gold, by_id, fts):
        win = window_plain(question)
        if len(win) < 2:
            return {}
        P = [c["id"] for c in candidates(fts, by_id, question, seq_ascii(question))[:PAGE]]

        def lst(p):
            return candidates(fts, by_id, p, seq_ascii(p))[:PAGE]

        def plen(a, b):
            return utf16_len(a) + 1 + utf16_len(b)

        specs = {
            "V0": ([1 for _ in win], None),
            "V2": ([utf16_len(t) for t in win], None),
            "V3": ([1 for _ in win], [2 for _ in pairs(win)]),
            "V5": ([utf16_len(t) for t in win], [2 * plen(a, b) for a, b in pairs(win)]),
            "V6": ([utf16_len(t) for t in win], [plen(a, b) for a, b in pairs(win)]),
        }
        res = {}
        for v, (tw, pw) in specs.items():
            L = [(lst(t), w) for t, w in zip(win, tw)]
            if pw is not None:
                L += [(lst(a + " " + b), w) for (a, b), w in zip(pairs(win), pw)]
            T = sort_counts(*merge_counts(L))[:CUT]
            res[v] = t_minus_p(P, T)
        return res

    return _run_lme(path, EXP2_VARIANTS, seq_ascii, 500, per_question)


# ---------------------------------------------------------------------------
# exp3.cjs
# ---------------------------------------------------------------------------

_B = r"(?<![A-Za-z0-9_])"
_E = r"(?![A-Za-z0-9_])"
# JS \s
_WS = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+"
_RELATIVE = [
    (_B + "yesterday" + _E, 1),
    (_B + "today" + _E, 1),
    (_B + "(?:last|past|this)" + _WS + "(?:week|weekend)" + _E, 7),
    (_B + "(?:last|past|this)" + _WS + "month" + _E, 30),
    (_B + "(?:last|past|this)" + _WS + "year" + _E, 365),
    (_B + "days" + _WS + "ago" + _E, 5),  # "a few"/"couple of" prefixes are optional
    (_B + "recent(?:ly)?" + _E, 14),
    (_B + "last" + _WS + "(?:summer|winter|spring|autumn|fall)" + _E, 90),
]
_RELATIVE = [(re.compile(p, re.I | re.A), d) for p, d in _RELATIVE]
_DATE_WORD = re.compile(
    _B
    + "(monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    + "|january|february|march|april|may|june|july|august|september|october|november|december"
    + "|weekend|summer|winter|spring|autumn|fall|19[0-9][0-9]|20[0-9][0-9])"
    + _E,
    re.I | re.A,
)


def min_time_of(question, question_date):
    days = None
    for rx, d in _RELATIVE:
        if rx.search(question):
            days = d
            break
    if days is None:
        return None
    anchor = parse_lme(js_string(question_date))  # JS coerces: undefined/null fail
    if anchor is None:
        return None
    return anchor - days * DAY_MS


def date_words_of(question):
    return list(dict.fromkeys(m.group(1).lower() for m in _DATE_WORD.finditer(question)))


def _length_pipeline(question, fts, by_id, win, seq_fn, min_time=None):
    """0.5.0 pipeline (length weights, page 10, P first), the hard filter in every list."""
    P = [c["id"] for c in candidates(fts, by_id, question, seq_fn(question), min_time)[:PAGE]]
    T = []
    if len(win) >= 2:
        L = [(candidates(fts, by_id, t, seq_fn(t), min_time)[:PAGE], utf16_len(t)) for t in win]
        L += [
            (candidates(fts, by_id, a + " " + b, seq_fn(a + " " + b), min_time)[:PAGE],
             utf16_len(a) + 1 + utf16_len(b))
            for a, b in pairs(win)
        ]
        T = sort_counts(*merge_counts(L))[:CUT]
    return p_plus_t(P, T)


def reference_exp3(path):
    def per_question(question, e, sessions, gold, by_id, fts):
        win = window_cf(question)
        v6 = _length_pipeline(question, fts, by_id, win, seq_ascii)
        t1_win = (win + date_words_of(question))[:8]  # no de-duplication
        t1 = _length_pipeline(question, fts, by_id, t1_win, seq_ascii)
        mt = min_time_of(question, e.get("question_date", MISSING))
        t2h = _length_pipeline(question, fts, by_id, win, seq_ascii, mt) if mt is not None else v6
        t2m = p_plus_t(t2h, v6)
        return {"V6": v6, "T1": t1, "T2h": t2h, "T2m": t2m}

    return _run_lme(path, EXP3_VARIANTS, seq_ascii, 500, per_question)


# ---------------------------------------------------------------------------
# exp4.cjs
# ---------------------------------------------------------------------------


def reference_exp4(path):
    def per_question(question, e, sessions, gold, by_id, fts):
        N = len(sessions)

        def lst(p):
            return candidates(fts, by_id, p, seq_cjkr(p))[:PAGE]

        Pc = candidates(fts, by_id, question, seq_cjkr(question))[:PAGE]
        P = [c["id"] for c in Pc]
        df_cache = {}

        def df(t):
            if t not in df_cache:
                df_cache[t] = len(fts.query(t))
            return df_cache[t]

        def idfO(t):
            return js_log((N + 1) / (1 + df(t)))

        def idfP(t):
            return js_log((N + 1) / (1 + min(df(t), 50)))

        def counts_for(win, tweight):
            if len(win) < 2:
                return {}, {}
            L = [(lst(t), tweight(t)) for t in win]
            L += [(lst(a + " " + b), utf16_len(a) + 1 + utf16_len(b)) for a, b in pairs(win)]
            return merge_counts(L)

        res = {}
        w_base = window_070(question, STOP_LISTS["base"])
        w_a2 = window_070(question, STOP_LISTS["a2"])
        c, r = counts_for(w_base, utf16_len)
        res["A0-base"] = p_plus_t(P, sort_counts(c, r)[:CUT])
        c, r = counts_for(w_a2, utf16_len)
        res["A2+15"] = p_plus_t(P, sort_counts(c, r)[:CUT])
        # bonus 24
        pool = {}
        for i, cand in enumerate(Pc):
            pool[cand["id"]] = [24 + (10 - i), cand["time"]]  # Map.set: a repeated id keeps its slot
        for sid in c:
            if sid in pool:
                pool[sid][0] = max(pool[sid][0], c[sid])
            else:
                pool[sid] = [c[sid], r[sid]]
        res["B-bonus24"] = sorted(pool, key=lambda k: (-pool[k][0], -pool[k][1]))[:CUT]
        c, r = counts_for(w_a2, lambda t: 4 * idfP(t))
        res["C-idfProxy"] = p_plus_t(P, sort_counts(c, r)[:CUT])
        c, r = counts_for(w_a2, lambda t: utf16_len(t) * idfO(t))
        res["C-lenIdf"] = p_plus_t(P, sort_counts(c, r)[:CUT])
        return res

    return _run_lme(path, EXP4_VARIANTS, seq_cjkr, 2000, per_question)


# ---------------------------------------------------------------------------
# exp5.cjs
# ---------------------------------------------------------------------------


def reference_exp5(path):
    def per_question(question, e, sessions, gold, by_id, fts):
        def lst(p):
            return candidates(fts, by_id, p, seq_ascii(p))[:PAGE]

        P = [c["id"] for c in candidates(fts, by_id, question, seq_ascii(question))[:PAGE]]
        win = window_070(question, STOP_LISTS["base"])
        res = {}
        for v in EXP5_VARIANTS:
            T = []
            if len(win) >= 2:
                phrase_list = [(t, utf16_len(t)) for t in win]
                pair_strs = [a + " " + b for a, b in pairs(win)]
                phrase_list += [(p, utf16_len(a) + 1 + utf16_len(b)) for p, (a, b) in zip(pair_strs, pairs(win))]
                if v != "base":
                    added = []
                    for t in win:
                        s = stem(t)
                        if utf16_len(s) < 2:
                            continue
                        if v == "S2" and (s in win or s in pair_strs or s in added):
                            continue
                        added.append(s)
                        phrase_list.append((s, utf16_len(s)))
                T = sort_counts(*merge_counts([(lst(p), w) for p, w in phrase_list]))[:CUT]
            res[v] = p_plus_t(P, T)
        return res

    return _run_lme(path, EXP5_VARIANTS, seq_ascii, 2000, per_question)


# ---------------------------------------------------------------------------
# cn.cjs (with the CN pairing)
# ---------------------------------------------------------------------------


def reference_cn(lme_path, cn_path):
    data = _load(lme_path)
    by_qid = {}
    for e in data:
        by_qid[js_string(e.get("question_id", MISSING))] = e  # last wins
    rows = []
    with open(cn_path, encoding="utf-8") as f:
        for line in f:
            if line.strip() == "":
                continue
            rows.append(json.loads(line))
    out = {v: [] for v in CN_VARIANTS}
    fts = Fts(500)
    windows = {"A": window_cf, "A2": window_070, "B": window_cnb}
    for q_index, row in enumerate(rows):
        qid = js_string(row.get("questionId", MISSING))
        orig = qid[:-3] if qid.endswith("_cn") else qid
        base = {"question_id": qid, "q_index": q_index, "status": "skipped", "rank": 0, "final": []}
        e = by_qid.get(orig)
        if e is None:
            for v in CN_VARIANTS:
                out[v].append(_copy(base))
            continue
        sessions, gold, by_id = _prepare(e, seq_ascii)
        if not gold or not sessions:
            for v in CN_VARIANTS:
                out[v].append(_copy(base))
            continue
        question = row["question"]
        fts.rebuild(sessions)
        N = len({s["id"] for s in sessions})
        cache = {}

        def idfP(t):
            if t not in cache:
                cache[t] = js_log((N + 1) / (1 + min(len(fts.query(t)), 50)))
            return cache[t]

        P = [c["id"] for c in candidates(fts, by_id, question, seq_ascii(question))[:PAGE]]
        for v in CN_VARIANTS:
            win = windows[v](question)
            T = []
            if len(win) >= 2:
                L = [(candidates(fts, by_id, t, seq_ascii(t))[:PAGE], 4 * idfP(t)) for t in win]
                for a, b in pairs(win):
                    p = a + " " + b
                    w = (utf16_len(a) + 1 + utf16_len(b)) * max(idfP(a), idfP(b))
                    L.append((candidates(fts, by_id, p, seq_ascii(p))[:PAGE], w))
                T = sort_counts(*merge_counts(L))[:CUT]
            final = p_plus_t(P, T)
            r = _copy(base)
            r.update(status="evaluated", final=final, rank=gold_rank(final, gold))
            out[v].append(r)
    fts.close()
    return out
