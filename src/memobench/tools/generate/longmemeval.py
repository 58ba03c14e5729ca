"""LongMemEval-shaped files: :func:`write_longmemeval` streams a JSON array
written like ``json.dumps(items, ensure_ascii=False)``, with a shared pool of
filler sessions (the same id always carries the same content), the spice
edge cases (:data:`LME_SPICE_CASES`), repeated and uneven session ids
(repeated.py) and surrogate escapes (surrogates.py)."""

from __future__ import annotations

import datetime as _dt
import functools
import itertools
import json
import os
import re
from json.encoder import encode_basestring as _enc_u
from json.encoder import encode_basestring_ascii as _enc_a

from .repeated import repeat_session_ids, uneven_session_ids
from .surrogates import _surrogate_rates, with_surrogates
from .vocabulary import (QUESTION_TYPES, _ALNUM, _ENTITIES, _HARNESS_STOP, _HEX, _MONTHS, _QTYPE_WEIGHTS,
                         _atomic_open, _cap, _randstr, _rng, _vocab, lme_date)

#: Edge cases that ``write_longmemeval(..., spice=True)`` puts in the file,
#: each on at least one question (when there are at least as many questions
#: as cases; ``max(1, n_questions // 200)`` questions each).
LME_SPICE_CASES = (
    "accents",                 # café, naïve, école in a turn and the question
    "combining_accent",        # cafe + U+0301
    "han_bmp",                 # BMP Han text, and a mixed run like Python中文
    "han_astral",              # Extension B (U+20000, ...)
    "kelvin_sign",             # U+212A
    "dotted_capital_i",        # U+0130
    "quoted_words",            # question with "..." quotes
    "pure_chinese_question",   # question with Han only, no ASCII
    "single_token_question",   # question of one ASCII token
    "date_empty",              # haystack date ""
    "date_null",               # haystack date null
    "date_bad_month",          # "2023/13/01 (Mon) 10:00"
    "date_feb30_hour24",       # "2023/02/30 (Thu) 24:00" (parses: rolls over)
    "date_bad_hour",           # "2023/05/20 (Sat) 24:30"
    "dates_short",             # haystack_dates shorter than the sessions
    "question_date_bad",       # unparseable question_date
    "ids_short",               # haystack_session_ids shorter; gold "s<i>" fallback id
    "id_null",                 # a null session id
    "id_numeric",              # an integer session id (also in answer_session_ids)
    "id_with_question_word",   # a filler id made of a word of the question
    "gold_not_in_haystack",    # an answer id absent from the haystack
    "gold_none_in_haystack",   # no answer id in the haystack (gold empty)
    "duplicate_question_id",   # same question_id as the previous item
    "empty_session",           # a session []
    "null_session",            # a session null
    "turn_no_content",         # a turn without "content"
    "turn_content_null",       # "content": null
    "turn_numeric_content",    # "content": 42 / 2.0 / -0.5
    "null_turn",               # a turn that is null
    "missing_question_type",   # no "question_type" key
)

_SPICE_TEXT = {
    "accents": ("We had coffee at the café near the école; I was so naïve about the prices.",
                " I think it was the café near the école."),
    "combining_accent": ("The cafe\u0301 menu listed a re\u0301sume\u0301 workshop.",
                         " Maybe the cafe\u0301 one?"),
    "han_bmp": ("我昨天在东京吃了寿司，非常好吃。Python中文教程也很有用。",
                " 东京寿司"),
    "han_astral": ("Her name is written \U00020000\U00020001 in Extension B, and \U0002A700 too.",
                   " \U00020000\U00020001"),
    "kelvin_sign": ("The sample was kept at 300 \u212A on the \u212Aelvin scale.",
                    " In \u212Aelvin?"),
    "dotted_capital_i": ("We flew to İstanbul and met İlker at the İZMİR stand.",
                         " Was it in İstanbul?"),
    "quoted_words": ('I named it the lucky charm mug, my "lucky charm".',
                     ' I called it "lucky charm".'),
}

_ZH_QUESTIONS = (
    "我上次说的那家餐厅叫什么名字？",
    "我最喜欢的咖啡店在哪里？",
    "我妹妹的生日是哪一天？",
    "你之前推荐的那本书叫什么？",
    "我们上周讨论的旅行计划是什么？",
)


class _LME:
    def __init__(self, n_questions, sessions_per_question, seed, turns, words,
                 pool_size, ensure_ascii, vocab, cache_bytes=128 << 20):
        self.n = int(n_questions)
        self.K = max(1, int(sessions_per_question))
        self.seed = seed
        self.turns = (max(1, int(turns[0])), max(1, int(turns[1])))
        if self.turns[0] > self.turns[1]:
            raise ValueError("turns: low > high")
        self.words = (max(1, int(words[0])), max(1, int(words[1])))
        if self.words[0] > self.words[1]:
            raise ValueError("words_per_turn: low > high")
        self.ea = bool(ensure_ascii)
        self.enc = _enc_a if ensure_ascii else _enc_u
        self.vocab = vocab
        if pool_size is None:
            pool_size = max(2 * self.K, (self.n * self.K) // 4)
        # a haystack never holds the same filler twice, so the pool covers K
        self.pool_size = max(1, self.K, int(pool_size))
        self._build_pool()
        est = self.estimate_session_bytes()
        self._filler = functools.lru_cache(maxsize=max(64, int(cache_bytes // max(est, 1))))(
            self._make_filler)

    # -- pool ---------------------------------------------------------------
    def _build_pool(self):
        rng = _rng(self.seed, "pool-ids")
        ids, seen = [], set()
        while len(ids) < self.pool_size:
            r = rng.random()
            if r < 0.45:
                sid = f"sharegpt_{_randstr(rng, _ALNUM, 7)}_{rng.randrange(4)}"
            elif r < 0.8:
                sid = f"ultrachat_{rng.randrange(1, 1000000)}"
            else:
                sid = f"{_randstr(rng, _HEX, 8)}_{rng.randrange(1, 6)}"
            if sid not in seen:
                seen.add(sid)
                ids.append(sid)
        self.pool_ids = ids
        # popularity: a few sessions recur in many haystacks, most in few
        self.pool_cum = list(itertools.accumulate(
            1.0 / (i + 1) ** 0.5 for i in range(self.pool_size)))
        self.pool_range = range(self.pool_size)

    def sample_pool(self, rng, k):
        size = self.pool_size
        if k >= size:
            out = list(range(size))
            rng.shuffle(out)
            return out
        if 2 * k > size:
            return rng.sample(range(size), k)
        chosen = {}
        while len(chosen) < k:
            for i in rng.choices(self.pool_range, cum_weights=self.pool_cum,
                                 k=2 * (k - len(chosen)) + 4):
                if i not in chosen:
                    chosen[i] = None
                    if len(chosen) == k:
                        break
        out = list(chosen)
        rng.shuffle(out)
        return out

    # -- sessions -----------------------------------------------------------
    def _n_words(self, rng, role):
        lo, hi = self.words
        mid = (lo + hi) // 2
        return rng.randint(lo, mid) if role == "user" else rng.randint(mid, hi)

    def make_turns(self, rng, min_turns=1):
        n = max(min_turns, rng.randint(*self.turns))
        text = self.vocab.text
        out = []
        for k in range(n):
            role = "user" if k % 2 == 0 else "assistant"
            out.append([role, text(rng, self._n_words(rng, role)), False])
        return out

    def ser(self, turns):
        enc = self.enc
        parts = []
        for role, text, ha in turns:
            if ha:
                parts.append('{"role": "' + role + '", "content": ' + enc(text)
                             + ', "has_answer": true}')
            else:
                parts.append('{"role": "' + role + '", "content": ' + enc(text) + "}")
        return "[" + ", ".join(parts) + "]"

    def _make_filler(self, idx):
        return self.ser(self.make_turns(_rng(self.seed, "pool", idx)))

    def filler(self, idx):
        return self._filler(idx)

    def estimate_session_bytes(self, samples=48):
        tot = 0
        for i in range(samples):
            tot += len(self.ser(self.make_turns(_rng(self.seed, "calib", i))).encode("utf-8"))
        return tot / samples

    def mean_filler_bytes(self, head=2000, tail=200):
        """Popularity-weighted mean size of a filler session.

        The most popular ``head`` sessions are measured exactly (they recur in
        many haystacks, so their sizes matter); the rest is sampled.
        """
        P = self.pool_size
        size = lambda i: len(self._make_filler(i).encode("utf-8"))  # noqa: E731
        if 2 * max(self.K - 1, 1) > P:       # sample_pool draws uniformly
            idx = range(P) if P <= head else _rng(self.seed, "calib-u").sample(range(P), head)
            return sum(size(i) for i in idx) / len(idx)
        cum = self.pool_cum
        total = cum[-1]
        T = min(P, head)
        acc = 0.0
        prev = 0.0
        for i in range(T):
            acc += (cum[i] - prev) / total * size(i)
            prev = cum[i]
        rest = 1.0 - prev / total
        if rest > 0 and T < P:
            r = _rng(self.seed, "calib-t")
            idx = [r.randrange(T, P) for _ in range(tail)]
            acc += rest * sum(size(i) for i in idx) / len(idx)
        return acc

    def estimate_item_bytes(self):
        """Expected bytes of one item (sessions, ids, dates and fixed fields)."""
        per_slot = self.mean_filler_bytes() + 2 + 26 + 2
        n = min(200, self.pool_size)
        per_slot += sum(len(s) + 4 for s in self.pool_ids[:n]) / n
        return self.K * per_slot + 420

    # -- questions ----------------------------------------------------------
    def _answer_turns(self, rng, key, on_assistant):
        turns = self.make_turns(rng, min_turns=2)
        idx = [k for k in range(len(turns)) if (k % 2 == 1) == on_assistant]
        k = rng.choice(idx)
        t = self.vocab.text
        turns[k][1] = (t(rng, max(1, self._n_words(rng, turns[k][0]) // 2)) + " " + key
                       + " " + t(rng, max(1, self._n_words(rng, turns[k][0]) // 2)))
        turns[k][2] = True
        return turns

    def build_question(self, qi):
        """Return (head fields, answer sessions (turn lists), answer ids, n_slots, rng, kws)."""
        rng = _rng(self.seed, "q", qi)
        qtype = rng.choices(QUESTION_TYPES, weights=_QTYPE_WEIGHTS)[0]
        is_abs = rng.random() < 0.05
        prefix = "gpt4_" if rng.random() < 0.08 else ""
        qid = prefix + _randstr(rng, _HEX, 8) + ("_abs" if is_abs else "")
        kw = self.vocab.keyword
        a, b, c = kw(rng), kw(rng), kw(rng)
        ent = rng.choice(_ENTITIES)
        ent2 = rng.choice(_ENTITIES)
        keys: list[str]          # key sentence per answer session
        on_asst = False
        answer: object
        if qtype == "single-session-user":
            form = rng.randrange(3)
            if form == 0:
                question = f"What {a} {b} did I get at {ent}?"
                keys = [f"I got the {a} {b} at {ent}, it was {c}."]
                answer = _cap(c)
            elif form == 1:
                question = f"Where did I buy my {a} {b}?"
                keys = [f"I bought my {a} {b} at {ent} last week."]
                answer = ent
            else:
                x = rng.randint(2, 9)
                question = f"How often do I {a} my {b}?"
                keys = [f"I {a} my {b} about {x} times a week."]
                answer = f"{x} times a week"
        elif qtype == "single-session-assistant":
            on_asst = True
            if rng.random() < 0.5:
                question = f"In our previous chat, what {a} did you suggest for my {b}?"
                keys = [f"For your {b} I would suggest {a} from {ent}."]
                answer = f"{_cap(a)} from {ent}"
            else:
                question = f"Can you remind me what you said about {a} {b} and {ent}?"
                keys = [f"About {a} {b}: {ent} offers {c} options."]
                answer = _cap(c)
        elif qtype == "single-session-preference":
            if rng.random() < 0.5:
                question = f"Can you recommend some {a} {b} for me?"
            else:
                question = f"Any tips for {a} {b} this weekend?"
            keys = [f"I really love {a} {b}, especially the ones from {ent}."]
            answer = (f"The user would prefer suggestions about {a} {b} similar to "
                      f"what {ent} offers.")
        elif qtype == "multi-session":
            m = rng.randint(2, 3)
            xs = [rng.randint(1, 6) for _ in range(m)]
            ents = [rng.choice(_ENTITIES) for _ in range(m)]
            if rng.random() < 0.5:
                question = f"How many {a} {b} did I {c} in total?"
                keys = [f"I {c} {x} {a} {b} at {e}." for x, e in zip(xs, ents)]
                answer = sum(xs) if rng.random() < 0.5 else str(sum(xs))
            else:
                question = f"How much did I spend on {a} {b} across my trips?"
                keys = [f"I spent ${x * 10} on {a} {b} in {e}." for x, e in zip(xs, ents)]
                answer = f"${sum(xs) * 10}"
        elif qtype == "temporal-reasoning":
            m = rng.randint(1, 3)
            if m == 1:
                question = f"When did I {a} the {b} at {ent}?"
                keys = [f"Today I finally {a} the {b} at {ent}!"]
                answer = None        # filled from the dates
            elif m == 2:
                question = f"How many days passed between my {a} {b} and the {c} at {ent}?"
                keys = [f"Today I finally did my {a} {b}!",
                        f"Just got back from the {c} at {ent}."]
                answer = None
            else:
                question = f"Which did I do first: the {a}, the {b} or the {c}?"
                keys = [f"I did the {w} today, with {e}." for w, e in
                        zip((a, b, c), (ent, ent2, rng.choice(_ENTITIES)))]
                answer = None
        else:  # knowledge-update
            x, y = rng.randint(2, 40), rng.randint(2, 40)
            question = f"What is my current {a} {b}?"
            keys = [f"My {a} {b} is {x} right now.", f"Update: my {a} {b} is now {y}."]
            answer = str(y)
        if is_abs:
            # the answer sessions talk about the topic without the asked detail
            keys = [k.replace(f" {b}", f" {c}") for k in keys]
            answer = (f"The information provided is not enough. You mentioned {a} "
                      f"but not {b}.")
        n_ans = len(keys)
        n_slots = max(self.K, n_ans)
        hexid = _randstr(rng, _HEX, 8)
        if n_ans == 1 and rng.random() < 0.6:
            ans_ids = [f"answer_{hexid}"]
        else:
            ans_ids = [f"answer_{hexid}_{j + 1}" for j in range(n_ans)]
        ans_turns = [self._answer_turns(rng, k, on_asst) for k in keys]
        # haystack layout and dates
        ans_pos = sorted(rng.sample(range(n_slots), n_ans))
        fill_idx = self.sample_pool(rng, n_slots - n_ans)
        start = (_dt.datetime(2022, 1, 1) + _dt.timedelta(days=rng.randrange(700))
                 + _dt.timedelta(minutes=rng.randrange(1440)))
        span = rng.randint(n_slots * 360, max(n_slots * 360, 240 * 1440))
        offs = sorted(rng.randrange(span) for _ in range(n_slots))
        dts = [start + _dt.timedelta(minutes=o) for o in offs]
        qdt = dts[-1] + _dt.timedelta(minutes=rng.randint(30, 20 * 1440))
        if answer is None:
            ad = [dts[p] for p in ans_pos]
            if n_ans == 1:
                answer = f"{_MONTHS[ad[0].month - 1]} {ad[0].day}, {ad[0].year}"
            elif n_ans == 2:
                d = (ad[1].date() - ad[0].date()).days
                answer = f"{d} days" if rng.random() < 0.7 else d
            else:
                answer = f"The {a}"
        head = {
            "question_id": qid,
            "question_type": qtype,
            "question": question,
            "answer": answer,
            "question_date": lme_date(qdt),
            "haystack_session_ids": None,
            "haystack_dates": [lme_date(d) for d in dts],
        }
        slots = []          # ('a', j) or ('f', pool index)
        fi = iter(fill_idx)
        pos_to_ans = {p: j for j, p in enumerate(ans_pos)}
        for p in range(n_slots):
            j = pos_to_ans.get(p)
            slots.append(("a", j) if j is not None else ("f", next(fi)))
        head["haystack_session_ids"] = [
            ans_ids[v] if kind == "a" else self.pool_ids[v] for kind, v in slots]
        return dict(head=head, slots=slots, ans_turns=ans_turns, ans_ids=ans_ids,
                    ans_pos=ans_pos, rng=rng, kws=(a, b, c), hexid=hexid)

    def item_json(self, q):
        parts = []
        ans_turns = q["ans_turns"]
        for kind, v in q["slots"]:
            parts.append(self.ser(ans_turns[v]) if kind == "a" else self.filler(v))
        s = json.dumps(q["head"], ensure_ascii=self.ea)
        return (s[:-1] + ', "haystack_sessions": [' + ", ".join(parts)
                + '], "answer_session_ids": ' + json.dumps(q["ans_ids"], ensure_ascii=self.ea)
                + "}")

    def item_obj(self, q):
        item = dict(q["head"])
        item["haystack_session_ids"] = list(item["haystack_session_ids"])
        item["haystack_dates"] = list(item["haystack_dates"])
        sess = []
        for kind, v in q["slots"]:
            sess.append(json.loads(self.ser(q["ans_turns"][v]) if kind == "a" else self.filler(v)))
        item["haystack_sessions"] = sess
        item["answer_session_ids"] = list(q["ans_ids"])
        return item

    # -- spice ----------------------------------------------------------------
    def fresh_session(self, rng):
        return [{"role": r, "content": t} for r, t, _ in self.make_turns(rng, min_turns=2)]

    def fresh_turns(self, rng, n_turns):
        """``n_turns`` new filler turns (a repeated id's other content)."""
        text = self.vocab.text
        return [{"role": "user" if k % 2 == 0 else "assistant",
                 "content": text(rng, self._n_words(rng, "user" if k % 2 == 0 else "assistant"))}
                for k in range(n_turns)]

    def spice(self, item, q, cases, prev_qid):
        rng = _rng(self.seed, "spice-item", q["head"]["question_id"], ",".join(cases))
        ans_pos = set(q["ans_pos"])
        free = [p for p in range(len(item["haystack_sessions"])) if p not in ans_pos]
        rng.shuffle(free)
        a0 = q["ans_pos"][0]

        def take():
            return free.pop() if free else None

        def new_id():
            return f"sharegpt_{_randstr(rng, _ALNUM, 7)}_9"

        ids = item["haystack_session_ids"]
        dates = item["haystack_dates"]
        sessions = item["haystack_sessions"]
        for case in cases:
            if case in _SPICE_TEXT:
                content, qadd = _SPICE_TEXT[case]
                s = sessions[a0]
                role = "assistant" if (s and s[-1]["role"] == "user") else "user"
                s.append({"role": role, "content": content, "has_answer": True})
                item["question"] = item["question"] + qadd
            elif case == "pure_chinese_question":
                item["question"] = rng.choice(_ZH_QUESTIONS)
            elif case == "single_token_question":
                item["question"] = q["kws"][0] + ("?" if rng.random() < 0.5 else "")
            elif case in ("date_empty", "date_null", "date_bad_month", "date_feb30_hour24",
                          "date_bad_hour"):
                p = rng.randrange(len(dates))
                dates[p] = {"date_empty": "", "date_null": None,
                            "date_bad_month": "2023/13/01 (Mon) 10:00",
                            "date_feb30_hour24": "2023/02/30 (Thu) 24:00",
                            "date_bad_hour": "2023/05/20 (Sat) 24:30"}[case]
            elif case == "dates_short":
                r = min(len(dates), rng.randint(1, 3))
                del dates[len(dates) - r:]
            elif case == "question_date_bad":
                item["question_date"] = rng.choice(("", "2023/13/40 (Xyz) 99:99", "May 30, 2023"))
            elif case == "ids_short":
                r = min(len(ids), rng.randint(1, 3))
                cut = len(ids) - r
                lost = [p for p in range(cut, len(ids)) if p not in ans_pos]
                del ids[cut:]
                if lost:
                    item["answer_session_ids"].append(f"s{lost[0]}")
            elif case == "id_null":
                p = take()
                if p is not None and p < len(ids):
                    ids[p] = None
            elif case == "id_numeric":
                p = take()
                if p is not None and p < len(ids):
                    num = rng.randrange(10 ** 7, 10 ** 8)
                    ids[p] = num
                    sessions[p] = self.fresh_session(rng)
                    item["answer_session_ids"].append(num)
            elif case == "id_with_question_word":
                p = take()
                words = [w for w in re.findall(r"[a-z0-9]+", item["question"].lower())
                         if len(w) >= 3 and w not in _HARNESS_STOP] or [q["kws"][0]]
                if p is not None and p < len(ids):
                    ids[p] = f"{rng.choice(words)}_{_randstr(rng, _HEX, 6)}_notes"
                    sessions[p] = self.fresh_session(rng)
            elif case == "gold_not_in_haystack":
                item["answer_session_ids"].append(f"answer_{q['hexid']}_9")
            elif case == "gold_none_in_haystack":
                item["answer_session_ids"] = [f"answer_{q['hexid']}_missing"]
            elif case == "duplicate_question_id":
                if prev_qid is not None:
                    item["question_id"] = prev_qid
            elif case in ("empty_session", "null_session", "turn_no_content",
                          "turn_content_null", "turn_numeric_content", "null_turn"):
                p = take()
                if p is None:
                    continue
                if p < len(ids):
                    ids[p] = new_id()
                if case == "empty_session":
                    sessions[p] = []
                elif case == "null_session":
                    sessions[p] = None
                else:
                    s = self.fresh_session(rng)
                    k = rng.randrange(len(s) + 1)
                    if case == "turn_no_content":
                        s.insert(k, {"role": "user"})
                    elif case == "turn_content_null":
                        s.insert(k, {"role": "assistant", "content": None})
                    elif case == "turn_numeric_content":
                        s[k:k] = [{"role": "user", "content": 42},
                                  {"role": "assistant", "content": 2.0},
                                  {"role": "user", "content": -0.5}]
                    else:
                        s.insert(k, None)
                    sessions[p] = s
            elif case == "missing_question_type":
                item.pop("question_type", None)
            else:  # pragma: no cover
                raise ValueError(f"unknown spice case {case!r}")
        return item


def _spice_plan(n, seed, cases):
    """Map question index -> list of case names (each case on >= 1 question)."""
    plan: dict[int, list[str]] = {}
    if n <= 0:
        return plan
    rng = _rng(seed, "spice-plan")
    order = rng.sample(range(n), n)
    reps = max(1, n // 200)
    nc = len(cases)
    for r in range(reps):
        for k, case in enumerate(cases):
            qi = order[(k + r * nc) % n]
            if case == "duplicate_question_id" and qi == 0:
                qi = 1 if n > 1 else 0
            plan.setdefault(qi, []).append(case)
    # keep a fixed case order within a question
    rank = {c: i for i, c in enumerate(cases)}
    for qi in plan:
        plan[qi].sort(key=rank.__getitem__)
    return plan


def write_longmemeval(path, n_questions, sessions_per_question, seed=0, turns=(4, 16),
                      words_per_turn=(8, 120), shared_pool=None, spice=False,
                      target_bytes=None, vocab_source=None, ensure_ascii=False,
                      cache_bytes=128 << 20, progress=None, repeat_ids=0.0,
                      repeat_ids_any_length=False, uneven_ids=0.0, surrogates=False):
    """Write a LongMemEval-shaped JSON array to ``path``; return a summary dict.

    * ``n_questions`` items, each with ``sessions_per_question`` haystack
      sessions (1-3 of them answer sessions with ``has_answer`` turns holding
      the question's words, the rest drawn from a shared pool of filler
      sessions with Zipf-like popularity).
    * ``turns``: (min, max) turns per session; ``words_per_turn``: (min, max)
      words per turn (user turns draw from the lower half, assistant turns
      from the upper half).
    * ``shared_pool``: number of distinct filler sessions (default
      ``max(2K, n*K/4)``; at least K).
    * ``target_bytes``: rescale ``words_per_turn`` so the file lands near this
      size (for example 280e6 for S, 2.7e9 for M).
    * ``vocab_source``: a LoCoMo JSON file (or plain text) to take the
      vocabulary and its frequencies from; default: the embedded word list.
    * ``spice``: add the cases of :data:`LME_SPICE_CASES`.
    * ``ensure_ascii``: escape non-ASCII as ``\\uXXXX`` (default: raw UTF-8).
    * ``progress``: optional callable ``(done, total, bytes_written)``.
    * ``repeat_ids``: the fraction of haystacks that hold a session id twice
      or more (:func:`repeat_session_ids`, :data:`REPEAT_ID_KINDS`);
      ``repeat_ids_any_length``: a repeat with other turns may have another
      number of turns.
    * ``uneven_ids``: the fraction of haystacks whose ``haystack_session_ids``
      list does not match the sessions (:func:`uneven_session_ids`,
      :data:`UNEVEN_ID_KINDS`).
    * ``surrogates``: put :data:`SURROGATE_CASES` into about 2% of the turn
      contents and 5% of the questions (:func:`with_surrogates`); a number
      instead of True: that share of both.
    """
    n = int(n_questions)
    if n < 0:
        raise ValueError("n_questions must be >= 0")
    vocab = _vocab(seed, os.fspath(vocab_source) if vocab_source is not None else None)
    lme = _LME(n, sessions_per_question, seed, turns, words_per_turn, shared_pool,
               ensure_ascii, vocab, cache_bytes)
    if target_bytes:
        lme = _calibrate(lme, float(target_bytes), n, sessions_per_question, seed, turns,
                         words_per_turn, shared_pool, ensure_ascii, vocab, cache_bytes)
    plan = _spice_plan(n, seed, LME_SPICE_CASES) if spice else {}
    written = 0
    prev_qid = None
    used: set[str] = set()
    repeated = uneven = 0
    n_surrogates, rates = 0, _surrogate_rates(surrogates)
    with _atomic_open(path, binary=True) as f:
        f.write(b"[")
        written += 1
        for qi in range(n):
            q = lme.build_question(qi)
            qid = q["head"]["question_id"]
            while qid in used:   # accidental collision: derive a fresh id
                qid = _randstr(q["rng"], _HEX, 8) + ("_abs" if qid.endswith("_abs") else "")
            q["head"]["question_id"] = qid
            used.add(qid)
            cases = plan.get(qi)
            rrng = _rng(seed, "repeat-ids", qi) if repeat_ids else None
            urng = _rng(seed, "uneven-ids", qi) if uneven_ids else None
            rep = rrng is not None and rrng.random() < repeat_ids
            unev = urng is not None and urng.random() < uneven_ids
            if rep or unev or cases:
                item = lme.spice(lme.item_obj(q), q, cases, prev_qid) if cases else lme.item_obj(q)
                if rep:
                    repeated += bool(repeat_session_ids(item, q["ans_pos"], rrng, lme.fresh_turns,
                                                        repeat_ids_any_length))
                if unev:
                    uneven += uneven_session_ids(item, q["ans_pos"], urng) is not None
                s = json.dumps(item, ensure_ascii=lme.ea)
                prev_qid = item["question_id"]
            else:
                s = lme.item_json(q)
                prev_qid = qid
            if surrogates:
                s, k = with_surrogates(s, "content", rates[0], seed)
                s, k2 = with_surrogates(s, "question", rates[1], seed)
                n_surrogates += k + k2
            b = (", " + s if qi else s).encode("utf-8")
            f.write(b)
            written += len(b)
            if progress is not None:
                progress(qi + 1, n, written)
        f.write(b"]")
        written += 1
    return {"path": os.fspath(path), "questions": n, "bytes": written,
            "sessions_per_question": lme.K, "pool_size": lme.pool_size,
            "words_per_turn": lme.words, "turns": lme.turns,
            "spice_cases": sorted({c for cs in plan.values() for c in cs}),
            "repeated_id_haystacks": repeated, "uneven_id_haystacks": uneven,
            **({"surrogate_strings": n_surrogates} if surrogates else {})}


def _calibrate(lme, target, n, K, seed, turns, words, pool, ea, vocab, cache_bytes):
    """Scale ``words_per_turn`` so that n items land near ``target`` bytes."""
    if n <= 0:
        return lme
    lo, hi = words

    def make(f):
        w = (max(1, round(lo * f)), max(1, round(hi * f)))
        return _LME(n, K, seed, turns, w, pool, ea, vocab, cache_bytes)

    def est(x):
        return n * x.estimate_item_bytes() + 2

    f0, f1 = 1.0, 2.0
    e0, e1 = est(lme), est(make(f1))
    best = lme
    for _ in range(3):
        if e1 == e0:
            break
        f = max(0.01, f0 + (target - e0) * (f1 - f0) / (e1 - e0))
        cand = make(f)
        e = est(cand)
        best = cand
        if abs(e - target) <= 0.01 * target:
            break
        f0, e0, f1, e1 = f1, e1, f, e
    return best
