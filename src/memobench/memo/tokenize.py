"""JS tokenizers of the harnesses (docs/harnesses.md#tokenizers).

* Event / phrase token sequences ("seq", docs/harnesses.md#tokenizers): :func:`seq_ascii`,
  :func:`seq_cjkr`, :func:`seq_zh`, :func:`seq_exp6`, :func:`seq_prod`
  (each lowercases its input first, like ``toLowerCase()``).
* Stop lists (docs/harnesses.md#stop-lists) and query windows :func:`window_plain`, :func:`window_cf`,
  :func:`window_070`, :func:`window_cnb`, :func:`window_exp6` (at most 8 tokens).

Lengths are JS ``.length`` values, i.e. UTF-16 code units.  Standard library only.
"""

from __future__ import annotations

import re

from ..core.jsmath import utf16_len

__all__ = [
    "TERM_MAX",
    "STOP_BASE",
    "STOP_A1",
    "STOP_A2",
    "STOP_A3",
    "STOP_LISTS",
    "HAN_CLASS",
    "seq_ascii",
    "seq_cjkr",
    "seq_zh",
    "seq_exp6",
    "seq_prod",
    "SEQ",
    "ascii_words",
    "han_runs",
    "window_plain",
    "window_cf",
    "window_070",
    "window_cnb",
    "window_exp6",
    "WINDOWS",
]

TERM_MAX = 8

# ---------------------------------------------------------------------------
# Stop lists (docs/harnesses.md#stop-lists)
# ---------------------------------------------------------------------------

STOP_BASE = frozenset(
    """
    the a an and or what did do does is are was were to of in on at for with
    about we you i it this that how when where which why be been from by as
    there not can could should would just also
    """.split()
)
assert len(STOP_BASE) == 45

STOP_A1 = STOP_BASE | frozenset("ever whether discuss last week".split())
STOP_A2 = STOP_A1 | frozenset("have has had will your my me our their some".split())
STOP_A3 = STOP_A1 | frozenset("have has had will your my".split())
assert len(STOP_A1) == 50 and len(STOP_A2) == 60 and len(STOP_A3) == 56

STOP_LISTS = {"base": STOP_BASE, "a1": STOP_A1, "a2": STOP_A2, "a3": STOP_A3}

# ---------------------------------------------------------------------------
# Character classes
# ---------------------------------------------------------------------------

# Script=Han, Unicode 17.0 (Node 20's \p{Script=Han}), as listed in docs/harnesses.md#tokenizers.
_HAN_BMP = (
    "\u2E80-\u2E99\u2E9B-\u2EF3\u2F00-\u2FD5\u3005\u3007\u3021-\u3029"
    "\u3038-\u303B\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFA6D\uFA70-\uFAD9"
)
_HAN_ASTRAL = (
    "\U00016FE2-\U00016FE3\U00016FF0-\U00016FF6\U00020000-\U0002A6DF"
    "\U0002A700-\U0002B81D\U0002B820-\U0002CEAD\U0002CEB0-\U0002EBE0"
    "\U0002EBF0-\U0002EE5D\U0002F800-\U0002FA1D\U00030000-\U0003134A"
    "\U00031350-\U00033479"
)
#: The body of a regex character class matching one Script=Han code point.
HAN_CLASS = _HAN_BMP + _HAN_ASTRAL

_CJKR = "\u3400-\u9FFF"  # the BMP range of S-CJKR / W-CNB (UTF-16 code units)


class _OnFirstUse:
    """A regex compiled when it is first used: the Han classes take about 15 ms
    to compile, which every job importing this module would pay, most of them
    never scanning a Han character. Once compiled, its methods are this
    object's own attributes, as cheap to call as the compiled pattern's."""

    def __init__(self, source: str):
        self.source = source

    def __getattr__(self, name: str):
        if name.startswith("__"):  # copy and pickle probe for these: not the pattern's
            raise AttributeError(name)
        compiled = re.compile(self.source)
        for method in ("findall", "search", "fullmatch"):
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


_RE_ASCII = re.compile(r"[a-z0-9]+")
_RE_CJKR = _OnFirstUse("[a-z0-9" + _CJKR + "]+")
_RE_ZH = _OnFirstUse("[a-z0-9" + HAN_CLASS + "]+")
_RE_PROD = _OnFirstUse("[a-z0-9]+|[" + HAN_CLASS + "]+")
# Any character that makes a non-ASCII tokenizer differ from S-ASCII. Text
# without one (most English text) takes the cheaper S-ASCII scan.
_RE_ANY_HAN = _OnFirstUse("[" + HAN_CLASS + _CJKR + "]")
# S-EXP6: a Han run is kept only if its UTF-16 length is >= 2, i.e. it has at
# least two code points or is one astral code point.  Scanning starts at the
# beginning of every maximal run (the previous match ends at the end of a run,
# or a lone BMP Han character fails and the next position is not Han).
_RE_EXP6 = _OnFirstUse("[a-z0-9]+|[" + HAN_CLASS + "]{2,}|[" + _HAN_ASTRAL + "]")
_RE_ASCII_WORD = re.compile(r"[a-z0-9]{2,}")
_RE_HAN_RUN = _OnFirstUse("[" + HAN_CLASS + "]{2,}|[" + _HAN_ASTRAL + "]")
_RE_CNB_PART = _OnFirstUse("[a-z0-9" + _CJKR + "]+")
_RE_CJKR_ONLY2 = _OnFirstUse("[" + _CJKR + "]{2,}")

# ---------------------------------------------------------------------------
# Event token sequences (docs/harnesses.md#tokenizers)
# ---------------------------------------------------------------------------


def seq_ascii(text: str) -> list[str]:
    """S-ASCII: maximal ``[a-z0-9]`` runs of ``lower(text)``."""
    return _RE_ASCII.findall(text.lower())


def _han_aware(regex: re.Pattern, text: str) -> list[str]:
    """``regex``'s matches in ``lower(text)``; text with no character a
    non-ASCII tokenizer treats apart (most English text) takes the cheaper
    S-ASCII scan, which gives the same tokens there."""
    lower = text.lower()
    if lower.isascii() or not _RE_ANY_HAN.search(lower):  # isascii() is O(1)
        return _RE_ASCII.findall(lower)
    return regex.findall(lower)


def seq_cjkr(text: str) -> list[str]:
    """S-CJKR: maximal runs of ``[a-z0-9]`` and U+3400..U+9FFF (mixed runs are one token)."""
    return _han_aware(_RE_CJKR, text)


def seq_zh(text: str) -> list[str]:
    """S-ZH: maximal runs of ``[a-z0-9]`` and Script=Han (mixed runs are one token)."""
    return _han_aware(_RE_ZH, text)


def seq_exp6(text: str) -> list[str]:
    """S-EXP6: ``[a-z0-9]+`` or Han runs, separately; Han runs of UTF-16 length 1 dropped."""
    return _han_aware(_RE_EXP6, text)


def seq_prod(text: str) -> list[str]:
    """S-PROD: like S-EXP6 but Han runs of any length are kept."""
    return _han_aware(_RE_PROD, text)


def joined_tokens(text: str, seq) -> str:
    """An event's tokens as one string, each wrapped in its own pair of spaces
    (``" t1  t2 "``), the form the tokens stage and the engine turn into token
    ids (termids.py). Tokens never contain whitespace."""
    if seq in _ASCII_RUNS_WHEN_ASCII:
        lower = text.lower()
        if lower.isascii():
            return ascii_joined(lower)
    return " " + "  ".join(seq(text)) + " "


# Byte table: [a-z0-9] kept, every other byte a space.
_NOT_ASCII_TOKEN = bytes(c if 97 <= c <= 122 or 48 <= c <= 57 else 32 for c in range(256))


def ascii_joined(lower: str) -> str:
    """``joined_tokens`` of the ``[a-z0-9]+`` runs of an ASCII, lowercased
    string: every other byte made a space, then split and joined in C (about
    twice as fast as findall and join, on the tokens stage's whole corpus)."""
    return (b" " + b"  ".join(lower.encode("ascii").translate(_NOT_ASCII_TOKEN).split()) + b" ").decode("ascii")


# The tokens stage's name for SQLite FTS5's unicode61 tokens (fts5.py; tokens/fts5.arrow),
# here with the JS tokenizers' names, not in fts5.py: the Snakemake process reads it,
# and fts5.py imports numpy and pyarrow.
FTS5_TOKENS = "fts5"

SEQ = {
    "ascii": seq_ascii,
    "cjkr": seq_cjkr,
    "zh": seq_zh,
    "exp6": seq_exp6,
    "prod": seq_prod,
}
# Every tokenizer here gives the [a-z0-9]+ runs of a lowercased text that is ASCII.
_ASCII_RUNS_WHEN_ASCII = frozenset(SEQ.values())
# ... as the 256 flags of termids.token_stream: [0-9A-Za-z] (it lowercases the runs)
ASCII_TOKEN = bytes(int(chr(c).isascii() and chr(c).isalnum()) for c in range(256))


def ascii_words(question: str) -> list[str]:
    """Maximal ``[a-z0-9]`` runs of ``lower(question)`` of length >= 2, de-duplicated."""
    return list(dict.fromkeys(_RE_ASCII_WORD.findall(question.lower())))


def han_runs(question: str) -> list[str]:
    """Maximal Script=Han runs of ``lower(question)`` of UTF-16 length >= 2, de-duplicated."""
    return list(dict.fromkeys(_RE_HAN_RUN.findall(question.lower())))


def window_plain(question: str, stop=None) -> list[str]:
    """W-PLAIN: ASCII words in question order (``stop`` is ignored)."""
    return ascii_words(question)[:TERM_MAX]


def window_cf(question: str, stop=STOP_BASE) -> list[str]:
    """W-CF: non-stop ASCII words, then stop ASCII words."""
    words = ascii_words(question)
    content = [w for w in words if w not in stop]
    stops = [w for w in words if w in stop]
    return (content + stops)[:TERM_MAX]


def window_070(question: str, stop=STOP_BASE) -> list[str]:
    """W-070: non-stop ASCII words, then Han runs, then stop ASCII words."""
    words = ascii_words(question)
    content = [w for w in words if w not in stop]
    stops = [w for w in words if w in stop]
    return (content + han_runs(question) + stops)[:TERM_MAX]


def window_cnb(question: str, stop=None) -> list[str]:
    """W-CNB: parts made entirely of U+3400..U+9FFF, length >= 2 (``stop`` is ignored)."""
    full = _RE_CJKR_ONLY2.fullmatch
    parts = [p for p in _RE_CNB_PART.findall(question.lower()) if full(p)]
    return list(dict.fromkeys(parts))[:TERM_MAX]


def window_exp6(question: str, stop=STOP_BASE) -> list[str]:
    """W-EXP6: de-duplicated S-EXP6 tokens of UTF-16 length >= 2; non-stop, then stop."""
    toks = [t for t in dict.fromkeys(seq_exp6(question)) if utf16_len(t) >= 2]
    content = [t for t in toks if t not in stop]
    stops = [t for t in toks if t in stop]
    return (content + stops)[:TERM_MAX]


WINDOWS = {
    "plain": window_plain,
    "cf": window_cf,
    "070": window_070,
    "cnb": window_cnb,
    "exp6": window_exp6,
}


def write_tokens(events_path, seq_name: str, out, log=print) -> None:
    """The tokens stage: every event's tokens under one tokenizer, in the
    events table's row order, so retrieval jobs read them instead of each
    tokenizing the sessions of its segment again: a JS tokenizer's, or
    ``fts5``, SQLite FTS5's unicode61 (fts5.py) for the FTS backend's
    discovery; written as token ids with their vocabulary (termids.py), the
    ASCII texts of each batch tokenized at once on their bytes."""
    import pyarrow.parquet as pq

    from .fts5 import _LONG, Unicode61
    from ..core.progress import Progress
    from .termids import write_token_ids
    from ..core.tables import BATCH_ROWS

    events = pq.ParquetFile(events_path)
    progress = Progress(log, f"tokens {seq_name}", total=events.metadata.num_rows, unit="events")
    done = 0
    if seq_name == FTS5_TOKENS:
        u61 = Unicode61()
        # a longer ASCII token may be cut (fts5._cut): its text goes through u61.joined
        joined, ascii_token, long = u61.joined, u61.ascii_token, _LONG
    else:
        seq = SEQ[seq_name]

        def joined(text):
            return joined_tokens(text, seq)

        ascii_token, long = (ASCII_TOKEN if seq in _ASCII_RUNS_WHEN_ASCII else None), None

    def batches():
        for batch in events.iter_batches(batch_size=BATCH_ROWS, columns=["session_key", "text"]):
            yield batch.column(0), batch.column(1)

    def count(n):
        nonlocal done
        done += n
        progress(done)

    write_token_ids(batches(), out, joined, ascii_token, long, count)
    progress(done, ", done", force=True)
