"""What the generators build text from, and what they share: the embedded
word lists (package data, Zipf-weighted), a vocabulary read from a source
file, the seeded random streams (a BLAKE2 digest of the seed and a purpose,
so no output depends on the process), the LongMemEval and LoCoMo date
formats, and the file that appears only when complete."""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import itertools
import json
import random
import re
from contextlib import contextmanager

from ...core.atomic import atomic_path

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
        self.bank, nwords, nbytes = self._bank(_rng(seed, "bank", len(words)), words, weights)
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

    @classmethod
    def _bank(cls, rng: random.Random, words: list[str], weights: list[float]) -> tuple[list[str], int, int]:
        """BANK chunks, each ``rng.choice(_CHUNK_SIZES)`` words drawn by
        ``rng.choices(words, cum_weights=...)`` and a punctuation mark drawn
        by ``rng.random()``; the words and bytes (one separator each) in all.
        The bank is most of a generator start, so those calls are made here in
        bulk, the same draws in the same order (every generated file depends
        on them): ``rng``'s Mersenne Twister continued by numpy's MT19937 from
        its state (the same 32-bit outputs), ``choice`` by rejection on the top
        bits as ``random._randbelow``, ``random()`` from two outputs as CPython
        makes it, ``choices`` by bisecting the cumulative weights."""
        import numpy as np

        cum = np.array(list(itertools.accumulate(weights)), dtype=np.float64)
        total, hi = float(cum[-1]) + 0.0, len(cum) - 1
        sizes = cls._CHUNK_SIZES
        shift = 32 - len(sizes).bit_length()
        twister = np.random.MT19937()
        state = rng.getstate()[1]
        twister.state = {"bit_generator": "MT19937",
                         "state": {"key": np.array(state[:-1], dtype=np.uint32), "pos": state[-1]}}
        raw = twister.random_raw(cls.BANK * 12).astype(np.uint32)
        top = (raw >> shift).tolist()
        most = 2 * max(sizes) + 3  # the outputs a chunk takes after its size
        starts, counts = [], []
        p = 0
        for _ in range(cls.BANK):
            while True:  # rng.choice(sizes)
                if p + most >= len(top):  # more outputs, as the twister goes on
                    more = twister.random_raw(cls.BANK * 4 + most).astype(np.uint32)
                    raw = np.concatenate([raw, more])
                    top.extend((more >> shift).tolist())
                r = top[p]
                p += 1
                if r < len(sizes):
                    break
            n = sizes[r]
            starts.append(p)
            counts.append(n)
            p += 2 * n + 2
        # random.random() at each output: (a >> 5, b >> 6) of it and the next, as 53 bits
        unit = ((raw[:-1] >> 5).astype(np.float64) * 67108864.0 + (raw[1:] >> 6)) * (1.0 / 9007199254740992.0)
        first, n_of = np.array(starts), np.array(counts)
        at = np.repeat(first, n_of) + 2 * (np.arange(int(n_of.sum())) - np.repeat(np.cumsum(n_of) - n_of, n_of))
        chosen = [words[k] for k in np.minimum(np.searchsorted(cum, unit[at] * total, side="right"), hi).tolist()]
        bank = []
        q = 0
        for n, r in zip(counts, unit[first + 2 * n_of].tolist()):
            s = " ".join(chosen[q:q + n])
            q += n
            if r < 0.21:
                s += "." if r < 0.13 else "," if r < 0.18 else "?" if r < 0.20 else "!"
            bank.append(s)
        return bank, q, len("\n".join(bank).encode("utf-8")) + 1

    def text(self, rng: random.Random, nwords: int) -> str:
        k = max(1, int(nwords / self.mean_words + 0.5))
        return " ".join(rng.choices(self.bank, k=k))

    def keyword(self, rng: random.Random) -> str:
        return rng.choice(self.keywords)


@functools.lru_cache(maxsize=8)
def _vocab(seed, source) -> _Vocab:
    return _Vocab(seed, source)
