"""Deterministic generators of LongMemEval-, LoCoMo- and LongMemEval-CN-shaped files.

The real LongMemEval files cannot be downloaded here, so tests and benchmarks
run on files made by this module.  Everything is a pure function of the seed
and the parameters: every random choice comes from a ``random.Random`` whose
seed is a BLAKE2 digest of ``(seed, purpose, index)``, so no output depends on
hash randomization, set order or the process.  Same arguments, same bytes.

Formats written (see docs/harnesses.md#input-files-and-environment):

* :func:`write_longmemeval` -- a JSON array written like ``json.dumps(items,
  ensure_ascii=False)`` (one line, items separated by ``", "``).  Each item has
  ``question_id``, ``question_type``, ``question``, ``answer``,
  ``question_date``, ``haystack_session_ids``, ``haystack_dates``,
  ``haystack_sessions`` and ``answer_session_ids``.  Filler sessions come from
  a shared pool: the same id always carries the same content, but the date
  attached to it differs per question.  The output is streamed (one item in
  memory at a time, plus a bounded cache of pool sessions), so an M-scale
  file of ~2.7 GB is written with flat memory.
* :func:`write_locomo` -- ``json.dumps(conversations, indent=2)`` like the
  real ``locomo10.json``, with the same key structure, the real date format,
  orphan date keys, image turns and the real messy evidence strings.
* :func:`write_cn` -- a ``results.jsonl`` whose rows pair (by ``questionId``
  minus ``_cn``) with a LongMemEval file's question ids, with unmatched ids,
  suffix-less ids, duplicates and blank lines.

``spice=True`` adds the edge cases of the harness verification list (see
:data:`LME_SPICE_CASES` and :data:`LOCOMO_SPICE_CASES`); ``surrogates=True``
puts JSON surrogate escapes, paired and lone, into about 2% of the turn texts
(:data:`SURROGATE_CASES`).

Only the standard library is used, except :mod:`ijson` in :func:`write_cn`
when it reads a LongMemEval file (it falls back to :mod:`json` if ijson is
missing).

CLI::

    python -m memobench.tools.generate longmemeval --out S.json --questions 500 \\
        --sessions 50 --seed 0 [--spice] [--surrogates [SHARE]] [--target-bytes 280e6]
    python -m memobench.tools.generate locomo --out locomo10.json --conversations 10
    python -m memobench.tools.generate cn --out results.jsonl --lme S.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import hashlib
import itertools
import json
import os
import random
import re
import sys
import zlib
from json.encoder import encode_basestring as _enc_u
from json.encoder import encode_basestring_ascii as _enc_a
from contextlib import contextmanager

from ..atomic import atomic_path
from ..tables import escape_lone

__all__ = [
    "write_longmemeval",
    "write_locomo",
    "write_cn",
    "LME_SPICE_CASES",
    "LOCOMO_SPICE_CASES",
    "REPEAT_ID_KINDS",
    "QUESTION_TYPES",
    "SURROGATE_CASES",
    "with_surrogates",
    "main",
]

# ---------------------------------------------------------------------------
# Embedded vocabulary: the 3,001 most frequent lower-case words of LoCoMo10
# conversation text (plus "I"), in rank order.  Weights are Zipf-like.
# ---------------------------------------------------------------------------
def _word_list(name: str) -> list[str]:
    """A word list shipped as package data (src/memobench/data/NAME.txt), one word a line."""
    from importlib.resources import files

    return files("memobench").joinpath("data", f"{name}.txt").read_text(encoding="utf-8").split()


_WORDS = " ".join(_word_list("words"))

# Proper nouns (people, places, brands) used in questions and answer turns;
# the CN generator leaves them untranslated, as real translations do.
_ENTITIES = tuple(_word_list("entities"))

_FIRST_NAMES = tuple(_word_list("first_names"))

# Two-character Chinese words used to "translate" English keywords (CN).
_ZH_WORDS = tuple(_word_list("zh_words"))

# The 45-word base stop list of the harnesses (docs/harnesses.md#stop-lists); keywords
# that build questions avoid it so questions have content words.
_HARNESS_STOP = frozenset(_word_list("harness_stop"))

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
# Counts in the real LongMemEval-S (500 questions).
_QTYPE_WEIGHTS = (70, 56, 30, 133, 133, 78)

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July",
           "August", "September", "October", "November", "December")
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_HEX = "0123456789abcdef"


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def _rng(*parts) -> random.Random:
    """A ``random.Random`` seeded from a stable digest of ``parts``."""
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return random.Random(int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big"))


def _randstr(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choices(alphabet, k=n))


def lme_date(dt: _dt.datetime) -> str:
    """Format like LongMemEval: ``2023/05/20 (Sat) 02:21`` (locale-free)."""
    return (f"{dt.year:04d}/{dt.month:02d}/{dt.day:02d} "
            f"({_WEEKDAYS[dt.weekday()]}) {dt.hour:02d}:{dt.minute:02d}")


def locomo_date(dt: _dt.datetime) -> str:
    """Format like LoCoMo: ``1:56 pm on 8 May, 2023``."""
    h = dt.hour % 12 or 12
    ampm = "am" if dt.hour < 12 else "pm"
    return f"{h}:{dt.minute:02d} {ampm} on {dt.day} {_MONTHS[dt.month - 1]}, {dt.year}"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


@contextmanager
def _atomic_open(path, binary: bool = False, buffering: int = 1 << 20):
    """An open file that appears at ``path`` only when complete (tables.atomic_path)."""
    with atomic_path(path) as tmp:
        if binary:
            with open(tmp, "wb", buffering=buffering) as f:
                yield f
        else:
            with open(tmp, "w", encoding="utf-8", newline="", buffering=buffering) as f:
                yield f


# ---------------------------------------------------------------------------
# Vocabulary and text
# ---------------------------------------------------------------------------

_WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")


def _vocab_from_source(path) -> tuple[list[str], list[float]]:
    """Words and counts from a LoCoMo-shaped JSON file (turn ``text``) or plain text."""
    counts: dict[str, int] = {}
    forms: dict[str, dict[str, int]] = {}

    def feed(text):
        for w in _WORD_RE.findall(text):
            lw = w.lower()
            counts[lw] = counts.get(lw, 0) + 1
            f = forms.setdefault(lw, {})
            f[w] = f.get(w, 0) + 1

    with open(path, encoding="utf-8") as fh:
        raw = fh.read()
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if isinstance(data, list):
        for conv in data:
            c = conv.get("conversation", {}) if isinstance(conv, dict) else {}
            for key in sorted(c):
                v = c[key]
                if isinstance(v, list):
                    for t in v:
                        if isinstance(t, dict) and isinstance(t.get("text"), str):
                            feed(t["text"])
    else:
        feed(raw)
    if len(counts) < 50:
        raise ValueError(f"vocab_source {path!r} has too few words ({len(counts)})")
    # rank by count, ties by word (deterministic); keep the most common form
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    words, weights = [], []
    for lw, n in ranked:
        f = forms[lw]
        words.append(max(sorted(f), key=lambda s: f[s]))
        weights.append(float(n))
    return words, weights


class _Vocab:
    """Zipf-weighted words, and a bank of pre-built word chunks for fast text."""

    BANK = 1 << 16
    _CHUNK_SIZES = (1, 2, 2, 3, 3, 3, 4, 4, 5, 6)

    def __init__(self, seed, source=None):
        if source is None:
            words = _WORDS.split()
            weights = [1.0 / (r + 2.0) ** 1.05 for r in range(len(words))]
        else:
            words, weights = _vocab_from_source(source)
        self.words = words
        cum = list(itertools.accumulate(weights))
        rng = _rng(seed, "bank", len(words))
        bank = []
        nwords = nbytes = 0
        sizes = self._CHUNK_SIZES
        for _ in range(self.BANK):
            n = rng.choice(sizes)
            s = " ".join(rng.choices(words, cum_weights=cum, k=n))
            r = rng.random()
            if r < 0.13:
                s += "."
            elif r < 0.18:
                s += ","
            elif r < 0.20:
                s += "?"
            elif r < 0.21:
                s += "!"
            bank.append(s)
            nwords += n
            nbytes += len(s.encode("utf-8")) + 1
        self.bank = bank
        self.mean_words = nwords / self.BANK
        self.mean_chunk_bytes = nbytes / self.BANK
        start = min(150, len(words) // 10)
        kws = []
        seen = set()
        for w in words[start:]:
            lw = w.lower()
            if (w.isascii() and w.isalpha() and w.islower() and len(w) >= 3
                    and lw not in _HARNESS_STOP and lw not in seen):
                seen.add(lw)
                kws.append(w)
        if len(kws) < 20:
            kws = [w for w in words if w.isascii() and w.isalpha() and len(w) >= 3]
        self.keywords = kws
        self.keyword_set = frozenset(k.lower() for k in kws)

    def text(self, rng: random.Random, nwords: int) -> str:
        k = max(1, int(nwords / self.mean_words + 0.5))
        return " ".join(rng.choices(self.bank, k=k))

    def keyword(self, rng: random.Random) -> str:
        return rng.choice(self.keywords)


@functools.lru_cache(maxsize=8)
def _vocab(seed, source) -> _Vocab:
    return _Vocab(seed, source)


# ---------------------------------------------------------------------------
# LongMemEval
# ---------------------------------------------------------------------------

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


#: The ways :func:`repeat_session_ids` repeats a session id inside a haystack
#: (real LongMemEval files hold some ids twice or more in one haystack).
REPEAT_ID_KINDS = (
    "neighbour_same",      # the next or previous slot: same id, same turns
    "neighbour_other",     # the next or previous slot: same id, other turns
    "distant_same",        # a slot far away: same id, same turns
    "distant_other",       # a slot far away: same id, other turns
    "three_times",         # the id in two more slots (same turns, then other turns)
    "gold_same",           # an answer session's id and turns in a filler slot too
    "gold_other",          # an answer session's id on a filler slot, other turns holding
                           # one of the answer's turns
)


def repeat_session_ids(item, answer_positions, rng, fresh, any_length=False):
    """Repeat session ids inside one haystack (``item`` is changed in place).

    One or two of :data:`REPEAT_ID_KINDS`: a slot's id (and, for ``*_same``,
    its turns) is copied over another slot, which keeps its own date; an
    answer slot is never overwritten, so the gold stays in the haystack.
    ``fresh(rng, n_turns)`` makes the other turns, as many as the copied
    slot has unless ``any_length`` (exp6.cjs reads a repeated
    id's event indices from every session with that id, and stops with a
    TypeError when one session holds the phrase's first token at an index the
    other has not: only ``any_length`` files can reach that).
    Returns the kinds applied."""
    ids, sessions = item["haystack_session_ids"], item["haystack_sessions"]
    n = min(len(ids), len(sessions))
    answers = [p for p in answer_positions if p < n and ids[p] is not None]
    fillers = [p for p in range(n) if p not in set(answer_positions)]
    if n < 2 or not fillers:
        return []
    applied = []

    def copy(src, dst, same, mix=False):
        ids[dst] = ids[src]
        if same:
            sessions[dst] = json.loads(json.dumps(sessions[src]))
            return
        turns = fresh(rng, rng.randint(1, 6) if any_length else len(sessions[src] or []))
        words = [t for t in sessions[src] or [] if isinstance(t, dict) and isinstance(t.get("content"), str)]
        if mix and turns and words:
            # other turns that still hold some of the answer's words
            k = rng.randrange(len(turns))
            turns[k]["content"] += " " + rng.choice(words)["content"]
        sessions[dst] = turns

    kinds = rng.sample(REPEAT_ID_KINDS, 1 + (rng.random() < 0.3))
    for kind in kinds:
        if kind.startswith("gold"):
            if not answers:
                continue
            src = rng.choice(answers)
            targets = [p for p in fillers if p != src]
        else:
            sources = [p for p in fillers if ids[p] is not None]
            if not sources:
                continue
            src = rng.choice(sources)
            targets = [p for p in fillers if p != src]
            if kind.startswith("neighbour"):
                targets = [p for p in targets if abs(p - src) == 1]
            elif kind.startswith("distant"):
                targets = [p for p in targets if abs(p - src) >= max(2, n // 3)]
        if not targets:
            continue
        if kind == "three_times":
            if len(targets) < 2:
                continue
            a, b = rng.sample(targets, 2)
            copy(src, a, True)
            copy(src, b, False)
        else:
            copy(src, rng.choice(targets), kind.endswith("same"), mix=kind == "gold_other")
        applied.append(kind)
    return applied


#: The ways :func:`uneven_session_ids` makes ``haystack_session_ids`` and the
#: sessions disagree (the harnesses take the gold from the raw ids list, the
#: session ids from the sessions: docs/harnesses.md#sessions-and-events).
UNEVEN_ID_KINDS = (
    "short_extra",     # ids shorter; a lost slot's "s<i>" fallback id added to the answers
    "short_only",      # ids shorter, past an answer slot; the answers are only its "s<i>"
    "long_extra",      # ids longer (ids with no session); one of them added to the answers
    "long_only",       # ids longer; the answers are only an id with no session
    "null_only",       # a filler id null; the answers are only null
    "long_fallback",   # a filler id null, its "s<i>" appended to the ids and the answers
)


def uneven_session_ids(item, answer_positions, rng):
    """Give one haystack a ``haystack_session_ids`` list that does not match its
    sessions (``item`` is changed in place): one of :data:`UNEVEN_ID_KINDS`.
    Returns the kind applied, or None when the haystack has no room for it."""
    ids, sessions, answers = item["haystack_session_ids"], item["haystack_sessions"], item["answer_session_ids"]
    n = min(len(ids), len(sessions))
    fillers = [p for p in range(n) if p not in set(answer_positions) and ids[p] is not None]
    kind = rng.choice(UNEVEN_ID_KINDS)
    if kind.startswith("short"):
        last = max((p for p in answer_positions if p < n), default=None)
        if kind == "short_only" and last is not None:
            cut = rng.randint(max(0, last - 2), last)
            answers[:] = [f"s{last}"]
        elif kind == "short_extra" and n >= 2:
            cut = n - rng.randint(1, min(3, n - 1))
            answers.append(f"s{rng.randrange(cut, n)}")
        else:
            return None
        del ids[cut:]
    elif kind.startswith("long_") and kind != "long_fallback":
        extra = [f"extra_{_randstr(rng, _HEX, 6)}_{k}" for k in range(rng.randint(1, 3))]
        del ids[len(sessions):]
        ids.extend([None] * (len(sessions) - len(ids)) + extra)
        if kind == "long_extra":
            answers.append(rng.choice(extra))
        else:
            answers[:] = [extra[-1]]
    else:
        if not fillers:
            return None
        p = rng.choice(fillers)
        ids[p] = None
        if kind == "null_only":
            answers[:] = [None]
        else:
            ids.append(f"s{p}")
            answers[:] = [f"s{p}"]
    return kind


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


# ---------------------------------------------------------------------------
# Surrogate escapes
# ---------------------------------------------------------------------------

#: What ``surrogates=True`` puts into about :data:`SURROGATE_RATE` of the turn
#: texts (and :data:`SURROGATE_QUESTION_RATE` of the questions): JSON
#: fragments inserted into the string literal, one or two per chosen string.
#: JavaScript's ``JSON.parse`` keeps a lone surrogate as a lone UTF-16 code
#: unit; a high one followed by an escaped ASCII letter stays two units.
SURROGATE_CASES = (
    "lone_high",         # \ud83d before the text that was there
    "lone_low",          # \udc00
    "high_then_ascii",   # \ud83d\u0061: a high surrogate, then an escaped ASCII letter
    "pair_escaped",      # a valid pair as two escapes (an emoji, or Han Extension B)
    "astral_raw",        # an astral character as raw UTF-8 (an emoji, or Han Extension B)
    "low_then_high",     # \udc00\ud83d: two lone surrogates in the wrong order
    "high_before_pair",  # \ud83d\ud83d\ude00: a lone high, then a pair
    "high_at_end",       # a lone high surrogate closing the string
)
SURROGATE_RATE = 0.02
SURROGATE_QUESTION_RATE = 0.05
_ASTRAL = ("\U0001F600", "\U0001F44D", "\U00020000", "\U0002A700", "\U00010400")
_LITERAL_PART = re.compile(r'\\u[0-9a-fA-F]{4}|\\.|[^\\]', re.S)  # one character of a literal's body


def _esc(rng, unit: int) -> str:
    """``unit`` as a JSON escape, its hex digits in either case (JSON allows both)."""
    h = f"{unit:04x}"
    return "\\u" + (h.upper() if rng.random() < 0.25 else h)


def _pair(rng, ch: str) -> str:
    u = ch.encode("utf-16-be")
    return _esc(rng, int.from_bytes(u[:2], "big")) + _esc(rng, int.from_bytes(u[2:], "big"))


def _surrogate_fragment(rng, case: str) -> str:
    high, low = rng.randrange(0xD800, 0xDC00), rng.randrange(0xDC00, 0xE000)
    if case in ("lone_high", "high_at_end"):
        return _esc(rng, high)
    if case == "lone_low":
        return _esc(rng, low)
    if case == "high_then_ascii":
        return _esc(rng, high) + _esc(rng, ord(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")))
    if case == "pair_escaped":
        return _pair(rng, rng.choice(_ASTRAL))
    if case == "astral_raw":
        return rng.choice(_ASTRAL)
    if case == "low_then_high":
        return _esc(rng, low) + _esc(rng, high)
    if case == "high_before_pair":
        return _esc(rng, high) + _pair(rng, rng.choice(_ASTRAL))
    raise ValueError(f"unknown surrogate case {case!r}")  # pragma: no cover


def _surrogate_body(body: str, rng) -> str:
    """A string literal's body (JSON text between the quotes) with one or two
    fragments inserted between its characters (never inside an escape)."""
    parts = _LITERAL_PART.findall(body)
    cases = rng.sample(SURROGATE_CASES, rng.choice((1, 1, 2)))
    for case in sorted(cases, key=lambda c: c == "high_at_end"):
        pos = len(parts) if case == "high_at_end" else rng.randrange(len(parts) + 1)
        parts.insert(pos, _surrogate_fragment(rng, case))
    return "".join(parts)


def _surrogate_rates(surrogates) -> tuple[float, float]:
    """(turn rate, question rate) of a ``surrogates`` argument: True for the
    defaults, a number for that rate in both."""
    if surrogates is True:
        return SURROGATE_RATE, SURROGATE_QUESTION_RATE
    return float(surrogates), float(surrogates)


def with_surrogates(json_text: str, key: str, rate: float, seed) -> tuple[str, int]:
    """``json_text`` with :func:`_surrogate_body`'s fragments in about ``rate``
    of the string values of ``key`` (``"key": "..."``, as json.dumps writes
    them), and how many were changed. Whether and how a string changes
    depends only on the seed, the key and the string, so a session that
    recurs in many haystacks carries the same text in each."""
    n = 0

    def sub(m):
        nonlocal n
        rng = _rng(seed, "surrogates", key, m.group(2))
        if rng.random() >= rate:
            return m.group(0)
        n += 1
        return m.group(1) + _surrogate_body(m.group(2), rng) + '"'

    pattern = re.compile('("' + re.escape(key) + r'": ")((?:[^"\\]|\\.)*)"')
    return pattern.sub(sub, json_text), n


# ---------------------------------------------------------------------------
# LoCoMo
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# LongMemEval-CN
# ---------------------------------------------------------------------------

_CN_PREFIX = {
    "single-session-user": "我之前提到的",
    "single-session-assistant": "你上次建议的",
    "single-session-preference": "能给我推荐一些",
    "multi-session": "我总共",
    "temporal-reasoning": "从我",
    "knowledge-update": "我现在的",
}
_CN_SUFFIX = {
    "single-session-user": "是什么？",
    "single-session-assistant": "是什么？",
    "single-session-preference": "吗？",
    "multi-session": "有多少？",
    "temporal-reasoning": "过了多少天？",
    "knowledge-update": "是什么？",
}
_CN_HYPOTHESES = ("我不确定。", "根据之前的对话，", "你提到过这个。", "信息不足，无法回答。")


def _iter_lme_questions(src):
    """Yield dicts with question_id, question, question_type, answer (streamed)."""
    if not isinstance(src, (str, bytes, os.PathLike)):
        for item in src:
            yield item
        return
    try:
        import ijson
    except ImportError:          # pragma: no cover - ijson is a dependency
        ijson = None
    if ijson is None:            # pragma: no cover
        with open(src, encoding="utf-8") as fh:
            yield from json.load(fh)
        return
    wanted = {"item.question_id": "question_id", "item.question": "question",
              "item.question_type": "question_type", "item.answer": "answer"}
    scalar = ("string", "number", "null", "boolean")
    from ..datasets.jsonguard import GuardedReader, restore

    with open(src, "rb") as fh:
        cur: dict = {}
        # the reader that keeps lone surrogate escapes as json.loads does
        for prefix, event, value in ijson.parse(GuardedReader(fh, escapes=True)):
            if prefix == "item":
                if event == "start_map":
                    cur = {}
                elif event == "end_map":
                    yield cur
            elif event in scalar:
                key = wanted.get(prefix)
                if key is not None:
                    if not isinstance(value, (str, int, bool, type(None))):
                        value = float(value)       # ijson's Decimal
                    cur[key] = restore(value)


def _zh_word(w: str) -> str:
    return _ZH_WORDS[zlib.crc32(w.lower().encode("utf-8")) % len(_ZH_WORDS)]


def _cn_question(en, qtype, rng) -> str:
    en = "" if en is None else str(en)
    if not re.search(r"[A-Za-z]", en):          # already Chinese (or empty)
        return en
    if rng.random() < 0.01:                      # left untranslated
        return en
    pieces = []
    toks = re.findall(r"[A-Za-z][A-Za-z0-9'&]*|[0-9]+", en)
    for i, t in enumerate(toks):
        low = t.lower()
        if t[0].isdigit() or (i > 0 and t[0].isupper() and t != "I"):
            pieces.append(("L", t))                          # names, brands, numbers
        elif low in _HARNESS_STOP or len(low) < 3 or low in ("did", "my", "me", "your"):
            continue
        elif rng.random() < 0.12:
            pieces.append(("L", low))                        # an untranslated word
        else:
            pieces.append(("Z", _zh_word(low)))
    out = [_CN_PREFIX.get(qtype, "关于")]
    prev = "Z"
    for kind, s in pieces:
        if kind == "L":
            # glued to the Han text or set off by spaces; never glued to Latin
            glue = prev != "L" and rng.random() < 0.5
            out.append(s if glue else f" {s} ")
        else:
            out.append(s)
        prev = kind
    out.append(_CN_SUFFIX.get(qtype, "？"))
    return re.sub(r" +", " ", "".join(out)).strip()


def write_cn(path, longmemeval_path_or_items, seed=0, fraction=1.0, surrogates=False):
    """Write a ``results.jsonl`` of Chinese questions paired to a LongMemEval file.

    ``longmemeval_path_or_items`` is a path (read with ijson, streamed) or an
    iterable of item dicts.  Each selected item (probability ``fraction``)
    gives a row ``{"questionId": id + "_cn", "question": <Chinese text with
    the English names, brands, numbers and some words left in Latin>,
    "question_type", "answer", "hypothesis", "label"}``.  About 3% of the rows
    have no ``_cn`` suffix, about 2% are duplicated, about 2% of extra rows
    have ids that pair with nothing (including an ``_cn_cn`` id), and about
    2% of the lines are blank; each kind occurs at least once when there is
    at least one row.  ``surrogates``: :data:`SURROGATE_CASES` in about 5% of
    the questions (:func:`with_surrogates`; a number: that share).  Returns a summary dict.
    """
    rng = _rng(seed, "cn")
    entries: list = []          # dict rows, or None for a blank line
    kinds = {"no_suffix": 0, "unmatched": 0, "duplicate": 0, "blank": 0}
    paired = 0
    for item in _iter_lme_questions(longmemeval_path_or_items):
        if fraction < 1.0 and rng.random() >= fraction:
            continue
        qid = item.get("question_id")
        qid = "undefined" if qid is None and "question_id" not in item else qid
        qid = json.dumps(qid) if not isinstance(qid, str) else qid
        qtype = item.get("question_type")
        row = {"questionId": qid + "_cn",
               "question": _cn_question(item.get("question"), qtype, rng),
               "question_type": qtype if qtype is not None else "unknown",
               "answer": item.get("answer"),
               "hypothesis": rng.choice(_CN_HYPOTHESES),
               "label": rng.random() < 0.6}
        if rng.random() < 0.03:
            row["questionId"] = qid
            kinds["no_suffix"] += 1
        entries.append(row)
        paired += 1
        r = rng.random()
        if r < 0.02:
            entries.append(dict(row))
            kinds["duplicate"] += 1
        elif r < 0.04:
            entries.append(_cn_unmatched(rng))
            kinds["unmatched"] += 1
        elif r < 0.06:
            entries.append(None)
            kinds["blank"] += 1
    rows = [e for e in entries if e is not None]
    if rows:
        if not kinds["no_suffix"]:
            rows[0]["questionId"] = rows[0]["questionId"][:-3]
            kinds["no_suffix"] += 1
        if not kinds["duplicate"]:
            k = rng.randrange(len(entries))
            while entries[k] is None:
                k = rng.randrange(len(entries))
            entries.insert(k + 1, dict(entries[k]))
            kinds["duplicate"] += 1
        if not kinds["unmatched"]:
            entries.insert(rng.randint(0, len(entries)), _cn_unmatched(rng))
            kinds["unmatched"] += 1
        if not kinds["blank"]:
            entries.insert(rng.randint(1, len(entries)), None)
            kinds["blank"] += 1
    n_surrogates, rates = 0, _surrogate_rates(surrogates)
    with _atomic_open(path) as f:
        for e in entries:
            line = "" if e is None else escape_lone(json.dumps(e, ensure_ascii=False))
            if surrogates and e is not None:
                line, k = with_surrogates(line, "question", rates[1], seed)
                n_surrogates += k
            f.write(line + "\n")
    return {"path": os.fspath(path), "rows": sum(e is not None for e in entries),
            "paired_rows": paired, "lines": len(entries), **kinds,
            **({"surrogate_strings": n_surrogates} if surrogates else {})}


def _cn_unmatched(rng):
    if rng.random() < 0.3:
        qid = _randstr(rng, _HEX, 8) + "_cn_cn"
    else:
        qid = "zz" + _randstr(rng, _HEX, 6) + "_cn"
    return {"questionId": qid, "question": "这个问题在英文数据里没有对应的条目？",
            "question_type": "unknown", "answer": None,
            "hypothesis": rng.choice(_CN_HYPOTHESES), "label": False}


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def _size(s: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kKmMgG]?)[bB]?\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r}")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]


def main(argv=None) -> int:
    import time

    p = argparse.ArgumentParser(prog="python -m memobench.tools.generate",
                                description="Deterministic LongMemEval/LoCoMo/CN file generator.")
    sub = p.add_subparsers(dest="kind", required=True)

    a = sub.add_parser("longmemeval", help="LongMemEval-S/M shaped JSON array")
    a.add_argument("--out", required=True)
    a.add_argument("--questions", type=int, default=500)
    a.add_argument("--sessions", type=int, default=50, help="haystack sessions per question")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--spice", action="store_true")
    a.add_argument("--target-bytes", type=_size, default=None,
                   help="approximate file size, e.g. 280M or 2.7G")
    a.add_argument("--turns", type=int, nargs=2, default=(4, 16), metavar=("LO", "HI"))
    a.add_argument("--words", type=int, nargs=2, default=(8, 120), metavar=("LO", "HI"))
    a.add_argument("--pool", type=int, default=None, help="distinct filler sessions")
    a.add_argument("--vocab-source", default=None)
    a.add_argument("--ensure-ascii", action="store_true")
    a.add_argument("--repeat-ids", type=float, default=0.0, metavar="FRACTION",
                   help="fraction of haystacks that hold a session id twice or more")
    a.add_argument("--repeat-ids-any-length", action="store_true",
                   help="a repeated id's other content may have another number of turns")
    a.add_argument("--uneven-ids", type=float, default=0.0, metavar="FRACTION",
                   help="fraction of haystacks whose haystack_session_ids list does not match the sessions")
    a.add_argument("--surrogates", nargs="?", const=True, default=False, type=float, metavar="SHARE",
                   help="JSON surrogate escapes (lone, paired, before escaped ASCII) in ~2%% of the turns "
                        "and 5%% of the questions, or in SHARE of both")
    a.add_argument("--quiet", action="store_true")

    b = sub.add_parser("locomo", help="LoCoMo10 shaped JSON")
    b.add_argument("--out", required=True)
    b.add_argument("--conversations", type=int, default=10)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--spice", action="store_true")
    b.add_argument("--sessions", type=int, nargs=2, default=(15, 32), metavar=("LO", "HI"))
    b.add_argument("--turns", type=int, nargs=2, default=(10, 30), metavar=("LO", "HI"))
    b.add_argument("--qa", type=int, nargs=2, default=(100, 250), metavar=("LO", "HI"))
    b.add_argument("--vocab-source", default=None)
    b.add_argument("--surrogates", nargs="?", const=True, default=False, type=float, metavar="SHARE",
                   help="JSON surrogate escapes (lone, paired, before escaped ASCII) in ~2%% of the turns "
                        "and 5%% of the questions, or in SHARE of both")

    c = sub.add_parser("cn", help="LongMemEval-CN results.jsonl paired to an LME file")
    c.add_argument("--out", required=True)
    c.add_argument("--lme", required=True, help="LongMemEval file to pair with")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--fraction", type=float, default=1.0)
    c.add_argument("--surrogates", nargs="?", const=True, default=False, type=float, metavar="SHARE",
                   help="JSON surrogate escapes (lone, paired, before escaped ASCII) in ~5%% of the questions, "
                        "or in SHARE of them")

    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.kind == "longmemeval":
        last = [t0]

        def progress(done, total, nbytes):
            now = time.perf_counter()
            if not args.quiet and (now - last[0] >= 5 or done == total):
                last[0] = now
                print(f"  {done}/{total} questions, {nbytes / 1e6:.1f} MB, "
                      f"{nbytes / 1e6 / max(now - t0, 1e-9):.1f} MB/s", file=sys.stderr)

        info = write_longmemeval(args.out, args.questions, args.sessions, seed=args.seed,
                                 turns=tuple(args.turns), words_per_turn=tuple(args.words),
                                 shared_pool=args.pool, spice=args.spice,
                                 target_bytes=args.target_bytes,
                                 vocab_source=args.vocab_source,
                                 ensure_ascii=args.ensure_ascii, progress=progress,
                                 repeat_ids=args.repeat_ids,
                                 repeat_ids_any_length=args.repeat_ids_any_length,
                                 uneven_ids=args.uneven_ids, surrogates=args.surrogates)
    elif args.kind == "locomo":
        info = write_locomo(args.out, args.conversations, seed=args.seed,
                            sessions=tuple(args.sessions), turns=tuple(args.turns),
                            qa_per_conversation=tuple(args.qa), spice=args.spice,
                            vocab_source=args.vocab_source, surrogates=args.surrogates)
    else:
        info = write_cn(args.out, args.lme, seed=args.seed, fraction=args.fraction,
                        surrogates=args.surrogates)
    dt = time.perf_counter() - t0
    size = os.path.getsize(args.out)
    info["seconds"] = round(dt, 3)
    info["mb_per_s"] = round(size / 1e6 / max(dt, 1e-9), 1)
    print(json.dumps(info, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
