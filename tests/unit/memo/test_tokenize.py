"""Tests for memobench.memo.tokenize (docs/harnesses.md#tokenizers to #phrases, and #where-unicode61-and-the-js-tokens-disagree).

* pinned examples from docs/harnesses.md;
* property-based differential tests against real SQLite FTS5 unicode61
  (fts5vocab for the tokens, quoted-phrase MATCH for phrases), asserting
  equality where docs/harnesses.md says the tokenizers agree and the documented
  disagreements (docs/harnesses.md#where-unicode61-and-the-js-tokens-disagree) in the stated direction where they do not;
* one node process as the V8 oracle for the JS regexes (\\p{Script=Han},
  toLowerCase) over a batch of random strings.
"""

from __future__ import annotations

import functools
import json
import random
import re
import shutil
import sqlite3
import string
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memobench.core.jsmath import utf16_len
from tests.oracles.naive import occurrences as occ  # docs/harnesses.md's occ(E, P), written independently
from memobench.memo.tokenize import (
    HAN_CLASS,
    SEQ,
    STOP_A1,
    STOP_A2,
    STOP_A3,
    STOP_BASE,
    STOP_LISTS,
    TERM_MAX,
    WINDOWS,
    ascii_words,
    han_runs,
    joined_tokens,
    seq_ascii,
    seq_cjkr,
    seq_exp6,
    seq_prod,
    seq_zh,
    window_070,
    window_cf,
    window_cnb,
    window_exp6,
    window_plain,
)

NODE = shutil.which("node")
HYP = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---------------------------------------------------------------------------
# Stop lists
# ---------------------------------------------------------------------------


def test_stop_lists():
    assert len(STOP_BASE) == 45
    assert {"just", "also", "i", "a", "there", "which"} <= STOP_BASE
    assert not {"he", "she", "they", "who", "after", "my"} & STOP_BASE
    assert STOP_A1 - STOP_BASE == {"ever", "whether", "discuss", "last", "week"}
    assert len(STOP_A2 - STOP_BASE) == 15
    assert len(STOP_A3 - STOP_BASE) == 11
    assert STOP_A3 < STOP_A2
    assert STOP_A2 - STOP_A3 == {"me", "our", "their", "some"}
    assert STOP_LISTS == {"base": STOP_BASE, "a1": STOP_A1, "a2": STOP_A2, "a3": STOP_A3}
    assert all(isinstance(s, frozenset) for s in STOP_LISTS.values())


# ---------------------------------------------------------------------------
# Event token sequences: pinned examples
# ---------------------------------------------------------------------------


def test_seq_ascii_examples():
    assert seq_ascii("café") == ["caf"]
    assert seq_ascii("naïve") == ["na", "ve"]
    assert seq_ascii("straße") == ["stra", "e"]
    assert seq_ascii("Hello, World! 42x") == ["hello", "world", "42x"]
    assert seq_ascii("abc中文def") == ["abc", "def"]
    assert seq_ascii("\u212aelvin") == ["kelvin"]  # Kelvin sign lowercases to k
    assert seq_ascii("\u0130stanbul") == ["i", "stanbul"]  # İ -> i + U+0307
    assert seq_ascii("don't") == ["don", "t"]
    assert seq_ascii("a\u00adb c\u200bd snake_case") == ["a", "b", "c", "d", "snake", "case"]
    assert seq_ascii("ｆｕｌｌ x² ﬁnance") == ["x", "nance"]
    assert seq_ascii("") == []


def test_seq_mixed_runs():
    s = "abc中文def"
    assert seq_cjkr(s) == ["abc中文def"]
    assert seq_zh(s) == ["abc中文def"]
    assert seq_exp6(s) == ["abc", "中文", "def"]
    assert seq_prod(s) == ["abc", "中文", "def"]


def test_seq_lone_han():
    s = "foo 中 bar"
    assert seq_exp6(s) == ["foo", "bar"]  # dropped: neighbours become adjacent
    assert seq_prod(s) == ["foo", "中", "bar"]
    assert occ(seq_exp6(s), ["foo", "bar"]) == 1
    assert occ(seq_prod(s), ["foo", "bar"]) == 0
    assert seq_exp6("x中y") == ["x", "y"]
    # a lone *astral* Han character has UTF-16 length 2 and is kept
    assert seq_exp6("foo \U00020000 bar") == ["foo", "\U00020000", "bar"]
    assert seq_exp6("中\U00020000") == ["中\U00020000"]


def test_seq_cjkr_ranges():
    # astral Han and U+F900 compatibility ideographs separate in S-CJKR
    assert seq_cjkr("中\U00020000文") == ["中", "文"]
    assert seq_cjkr("a\uf900b") == ["a", "b"]
    # the non-Han Yijing symbols U+4DC0-U+4DFF are inside U+3400-U+9FFF
    assert seq_cjkr("a\u4dc0b") == ["a\u4dc0b"]
    assert seq_zh("a\u4dc0b") == ["a", "b"]
    # S-ZH: Script=Han, incl. astral and compatibility ideographs, U+3005/U+3007
    assert seq_zh("a\U00020000\uf900\u3005\u3007b") == ["a\U00020000\uf900\u3005\u3007b"]
    assert seq_zh("a\u3006b") == ["a", "b"]  # U+3006 is not Script=Han
    assert seq_cjkr("ABC中文") == ["abc中文"]


def test_seq_registry():
    assert SEQ == {
        "ascii": seq_ascii,
        "cjkr": seq_cjkr,
        "zh": seq_zh,
        "exp6": seq_exp6,
        "prod": seq_prod,
    }


# ---------------------------------------------------------------------------
# occ
# ---------------------------------------------------------------------------


def test_occ():
    assert occ(["a", "a", "a"], ["a", "a"]) == 2
    assert occ(["a", "a", "a"], ["a"]) == 3
    assert occ(["a", "b", "a", "b", "a"], ["a", "b", "a"]) == 2
    assert occ(["a", "b"], []) == 0
    assert occ([], []) == 0
    assert occ([], ["a"]) == 0
    assert occ(["a"], ["a", "b"]) == 0
    assert occ(["x", "a", "b"], ["a", "b"]) == 1
    assert occ(["a", "b", "x"], ["a", "b"]) == 1


@given(
    st.lists(st.sampled_from("abc"), max_size=12),
    st.lists(st.sampled_from("abc"), max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_occ_matches_naive(ev, ph):
    naive = 0 if not ph else sum(ev[i : i + len(ph)] == ph for i in range(len(ev) - len(ph) + 1))
    assert occ(ev, ph) == naive


# ---------------------------------------------------------------------------
# Windows and phrases: pinned examples
# ---------------------------------------------------------------------------


def test_ascii_words_and_han_runs():
    assert ascii_words("What is a B2 plan? What, again: a b cd") == ["what", "is", "b2", "plan", "again", "cd"]
    assert han_runs("中 中文 abc中文def 中国人 \U00020000 x\U00020000\U00020001") == [
        "中文",
        "中国人",
        "\U00020000",  # a lone astral Han is 2 UTF-16 units long
        "\U00020000\U00020001",
    ]
    assert utf16_len("\U00020000") == 2


def test_window_plain_and_cf():
    q = "What did Caroline do at the café with Melanie?"
    assert window_plain(q) == ["what", "did", "caroline", "do", "at", "the", "caf", "with"]
    assert window_cf(q) == ["caroline", "caf", "melanie", "what", "did", "do", "at", "the"]
    # stop list is a parameter
    assert window_cf("When did my week last go", STOP_A1) == ["my", "go", "when", "did", "week", "last"]
    assert window_cf("When did my week last go", STOP_A2) == ["go", "when", "did", "my", "week", "last"]


def test_window_070_ordering():
    q = "What did 小明 say about the Paris trip 旅行 last year 中 \U00020000?"
    assert window_070(q) == ["say", "paris", "trip", "last", "year", "小明", "旅行", "\U00020000"]
    assert window_070("Did you go 东京 to 京都?") == ["go", "东京", "京都", "did", "you", "to"]
    assert window_070("Did you go 东京 last week?", STOP_A1) == ["go", "东京", "did", "you", "last", "week"]


def test_window_cnb():
    assert window_cnb("abc中文 中国, 中国! 东京123 日本") == ["中国", "日本"]
    assert window_cnb("中 中文") == ["中文"]
    assert window_cnb("中文\U00020000日本") == ["中文", "日本"]  # astral chars separate
    assert window_cnb("hello world") == []


def test_window_exp6():
    q = "The 小明abc trip 中 x to 东京 and \U00020000"
    # non-stop tokens (ASCII and Han interleaved in question order), then stops
    assert window_exp6(q) == ["小明", "abc", "trip", "东京", "\U00020000", "the", "to", "and"]
    # differs from W-070 (which puts Han after all content words)
    assert window_070(q) == ["abc", "trip", "小明", "东京", "\U00020000", "the", "to", "and"]


def test_windows_cut_to_8_and_deduplicated():
    q = "alpha beta alpha gamma delta beta epsilon zeta eta theta iota kappa"
    expect = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    for name in ("plain", "cf", "070", "exp6"):
        assert WINDOWS[name](q, STOP_BASE) == expect, name
    han = " ".join(["一二", "三四", "一二", "五六", "七八", "九十", "十一", "十二", "十三", "十四"])
    assert window_cnb(han) == ["一二", "三四", "五六", "七八", "九十", "十一", "十二", "十三"]
    assert window_070(han) == ["一二", "三四", "五六", "七八", "九十", "十一", "十二", "十三"]
    assert TERM_MAX == 8


def test_windows_registry_signature():
    q = "What is 东京 like"
    assert set(WINDOWS) == {"plain", "cf", "070", "cnb", "exp6"}
    for name, fn in WINDOWS.items():
        assert fn(q, STOP_A2) == fn(q, stop=STOP_A2)
    assert WINDOWS["cnb"](q, STOP_BASE) == ["东京"]
    assert WINDOWS["plain"](q, STOP_BASE) == ["what", "is", "like"]


def _fts():
    con = sqlite3.connect(":memory:")
    try:
        con.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        con.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    except sqlite3.OperationalError:  # pragma: no cover
        return None
    return con


def _need_fts():
    con = _fts()
    if con is None:  # pragma: no cover
        pytest.skip("SQLite FTS5 not available")
    return con


def fts_tokens(text: str) -> list[str]:
    con = _need_fts()
    con.execute("DELETE FROM t")
    con.execute("INSERT INTO t(body) VALUES (?)", (text,))
    return [r[0] for r in con.execute("SELECT term FROM v ORDER BY offset")]


def fts_phrase_match(text: str, phrase: str) -> bool:
    con = _need_fts()
    con.execute("DELETE FROM t")
    con.execute("INSERT INTO t(body) VALUES (?)", (text,))
    q = '"' + phrase.replace('"', '""') + '"'
    try:
        return con.execute("SELECT count(*) FROM t WHERE t MATCH ?", (q,)).fetchone()[0] > 0
    except sqlite3.Error:
        return False


ASCII_ALNUM = string.ascii_letters + string.digits
ASCII_SEPS = " \t\n.,;:!?'\"-_()[]{}/\\@#$%^&*+=<>|~`"
# characters docs/harnesses.md#where-unicode61-and-the-js-tokens-disagree (last rows) says unicode61 and S-ASCII treat alike
AGREE_EXTRA = "\u212a\u00ad\u200b\u2019\u3000\u0651" + "\U0001F600\U0001F389"

ascii_text = st.text(alphabet=ASCII_ALNUM + ASCII_SEPS, max_size=80)
agree_text = st.text(
    alphabet=st.sampled_from(list(ASCII_ALNUM + ASCII_SEPS + AGREE_EXTRA)), max_size=80
)


@HYP
@given(st.one_of(st.text(alphabet=st.characters(max_codepoint=127)),
                 st.text(alphabet=st.sampled_from(list(ASCII_ALNUM + ASCII_SEPS + AGREE_EXTRA + "\u0130\u4e2d\u6587"
                                                       + "\x1c\x1f\x85\xa0"))),
                 st.text()))
def test_joined_form_is_the_tokens_each_in_a_pair_of_spaces(text):
    """The joined form's ASCII fast path (bytes translate and split) gives
    every tokenizer's own tokens; \x1c-\x1f and \x85 are str whitespace, not bytes'."""
    for name, seq in SEQ.items():
        assert joined_tokens(text, seq) == " " + "  ".join(seq(text)) + " ", name


@HYP
@given(ascii_text)
def test_ascii_text_equals_unicode61(text):
    assert seq_ascii(text) == fts_tokens(text)


@HYP
@given(agree_text)
def test_agreeing_characters_equal_unicode61(text):
    # Kelvin sign folded to k; soft hyphen, U+200B, apostrophes, emoji and
    # non-diacritic combining marks (U+0651) separate, in both.
    assert seq_ascii(text) == fts_tokens(text)


# --- structured mixed text: every "word" is exactly one unicode61 token ------

# diacritic-bearing atoms unicode61 folds to ASCII (remove_diacritics=1).
# value: (unicode61 form, S-ASCII contribution, S-ASCII breaks after it)
FOLD_ATOMS = {
    "é": ("e", "", True),
    "É": ("e", "", True),
    "è": ("e", "", True),
    "ï": ("i", "", True),
    "ü": ("u", "", True),
    "à": ("a", "", True),
    "ñ": ("n", "", True),
    "ç": ("c", "", True),
    "Å": ("a", "", True),
    "e\u0301": ("e", "e", True),  # e + combining acute: JS keeps e, U+0301 separates
    "o\u0308": ("o", "o", True),
    "\u0130": ("i", "i", True),  # İ -> i + U+0307 in JS
    "\u212a": ("k", "k", False),  # Kelvin sign: agree
}
HAN_ATOMS = ["中", "文", "的", "中文", "\U00020000", "\U0002a700", "\u3005"]
OTHER_ATOMS = HAN_ATOMS + ["ß", "Ω", "ｆｕｌｌ", "ＡＢ", "²", "ﬁ", "я", "ا"]
WORD_SEPS = [" ", "\n", ", ", " - ", "'", "\u2019", "\u00ad", "\u200b", "_", ".", "\U0001F600", "\u0651", "\u3000", "  "]

atom = st.one_of(
    st.tuples(st.just("ascii"), st.text(alphabet=ASCII_ALNUM, min_size=1, max_size=5)),
    st.tuples(st.just("fold"), st.sampled_from(sorted(FOLD_ATOMS))),
    st.tuples(st.just("other"), st.sampled_from(OTHER_ATOMS)),
)
word = st.lists(atom, min_size=1, max_size=4)
sentence = st.tuples(
    st.lists(st.tuples(word, st.sampled_from(WORD_SEPS)), min_size=1, max_size=8),
    st.sampled_from(["", " ", "\U0001F389"]),
)


def _js_model(atoms) -> list[str]:
    """Expected S-ASCII tokens of one word, from the atoms (independent of the regex)."""
    toks, cur = [], ""
    for kind, a in atoms:
        if kind == "ascii":
            cur += a.lower()
            continue
        if kind == "fold":
            _, contrib, brk = FOLD_ATOMS[a]
            cur += contrib
        else:
            brk = True
        if brk:
            if cur:
                toks.append(cur)
            cur = ""
    if cur:
        toks.append(cur)
    return toks


@HYP
@given(sentence)
def test_mixed_text_disagreements_unicode61(sent):
    words, lead = sent
    text = lead + "".join("".join(a for _, a in w) + sep for w, sep in words)
    fts = fts_tokens(text)
    assert len(fts) == len(words)  # every word is exactly one unicode61 token

    expected_all = []
    for (w, _sep), ft in zip(words, fts):
        wtext = "".join(a for _, a in w)
        js = seq_ascii(wtext)
        assert js == _js_model(w)
        expected_all += js
        kinds = {k for k, _ in w}

        if kinds == {"ascii"}:
            # a pure-ASCII word: S-ASCII and unicode61 give the same single token
            assert js == [wtext.lower()] == [ft]
        elif "other" not in kinds:
            # diacritics: unicode61 folds (café -> cafe), S-ASCII splits (caf)
            folded = "".join(a.lower() if k == "ascii" else FOLD_ATOMS[a][0] for k, a in w)
            assert ft == folded
            if any(k == "fold" and FOLD_ATOMS[a][1] == "" for k, a in w):
                # a dropped accented letter: the folded FTS token is never a JS token
                assert ft not in js
        else:
            # Han, ß, full-width, ... glued to ASCII: one non-ASCII unicode61
            # token; the ASCII fragments are invisible to FTS
            assert not ft.isascii()
            assert ft not in js
            if kinds == {"other"} and all(a in HAN_ATOMS for _, a in w):
                # a pure Han word: dropped by S-ASCII, one token in S-ZH/S-PROD,
                # equal to the unicode61 token
                assert js == []
                assert seq_zh(wtext) == seq_prod(wtext) == [ft]
        # every S-ASCII token lies inside the word's unicode61 token
        for t in js:
            assert t in ft
    # separators separate in both tokenizers
    assert seq_ascii(text) == expected_all


@HYP
@given(st.data())
def test_phrase_match_iff_occ(data):
    text = data.draw(ascii_text, label="text")
    toks = seq_ascii(text)
    source = data.draw(st.sampled_from(["self", "other"]), label="source")
    if source == "self" and toks:
        src = toks
    else:
        src = seq_ascii(data.draw(ascii_text, label="other")) or ["zz"]
    i = data.draw(st.integers(0, len(src) - 1), label="i")
    n = data.draw(st.integers(1, min(4, len(src) - i)), label="n")
    ph = src[i : i + n]
    phrase = " ".join(ph)
    assert fts_phrase_match(text, phrase) == (occ(toks, ph) > 0)


def test_pinned_fts_disagreements():
    _need_fts()
    # a single non-ASCII token between two ASCII words: JS-adjacent, FTS not
    for text in ("foo 的 bar", "foo é bar", "foo ß bar"):
        assert occ(seq_ascii(text), ["foo", "bar"]) == 1
        assert not fts_phrase_match(text, "foo bar")
    # café: FTS knows "cafe", JS knows "caf"
    assert fts_tokens("Café") == ["cafe"]
    assert seq_ascii("Café") == ["caf"]
    assert not fts_phrase_match("Café", "caf")
    assert fts_phrase_match("Café", "cafe")
    assert occ(seq_ascii("Café"), ["cafe"]) == 0
    # glued ASCII fragments are invisible to FTS
    assert fts_tokens("abc中文def") == ["abc中文def"]
    assert not fts_phrase_match("abc中文def", "abc")
    # agreeing cases
    assert fts_tokens("\u212aelvin") == seq_ascii("\u212aelvin") == ["kelvin"]
    assert fts_tokens("don\u2019t a\u00adb") == seq_ascii("don\u2019t a\u00adb")
    # İ: unicode61 folds to one token, JS splits
    assert fts_tokens("\u0130stanbul") == ["istanbul"]
    assert seq_ascii("\u0130stanbul") == ["i", "stanbul"]


# ---------------------------------------------------------------------------
# V8 oracle: the JS regexes themselves (Script=Han, toLowerCase)
# ---------------------------------------------------------------------------

_JS_TOKENIZERS = r"""
const fs = require('fs');
const items = JSON.parse(fs.readFileSync(0, 'utf8'));
const STOP = new Set(%s);
const uniq = a => [...new Set(a)];
const m = (s, re) => s.match(re) || [];
function one(q) {
  const l = q.toLowerCase();
  const ascii = m(l, /[a-z0-9]+/g);
  const prod = m(l, /[a-z0-9]+|\p{Script=Han}+/gu);
  const exp6 = prod.filter(t => /^[a-z0-9]/.test(t) || t.length >= 2);
  const words = uniq(ascii.filter(w => w.length >= 2));
  const han = uniq(m(l, /\p{Script=Han}+/gu).filter(t => t.length >= 2));
  const content = words.filter(w => !STOP.has(w)), stops = words.filter(w => STOP.has(w));
  const cnb = uniq(l.split(/[^a-z0-9\u3400-\u9fff]+/).filter(p => p.length >= 2 && /^[\u3400-\u9fff]+$/.test(p)));
  const e6 = uniq(exp6).filter(t => t.length >= 2);
  return {
    ascii, cjkr: m(l, /[a-z0-9\u3400-\u9fff]+/g), zh: m(l, /[a-z0-9\p{Script=Han}]+/gu), exp6, prod,
    plain: words.slice(0, 8),
    cf: content.concat(stops).slice(0, 8),
    w070: content.concat(han, stops).slice(0, 8),
    cnb: cnb.slice(0, 8),
    wexp6: e6.filter(t => !STOP.has(t)).concat(e6.filter(t => STOP.has(t))).slice(0, 8),
  };
}
// Script=Han ranges and the code points whose lowercase adds [a-z0-9]
const re = /\p{Script=Han}/u; const han = []; let st = -1;
for (let c = 0; c <= 0x110000; c++) {
  const h = c < 0x110000 && !(c >= 0xd800 && c <= 0xdfff) && re.test(String.fromCodePoint(c));
  if (h && st < 0) st = c; if (!h && st >= 0) { han.push([st, c - 1]); st = -1; }
}
const lowerAscii = [];
for (let c = 0x80; c < 0x110000; c++) {
  if (c >= 0xd800 && c <= 0xdfff) continue;
  if (/[a-z0-9]/.test(String.fromCodePoint(c).toLowerCase())) lowerAscii.push(c);
}
process.stdout.write(JSON.stringify({out: items.map(one), han, lowerAscii}));
"""

_ORACLE_ALPHABET = (
    list(ASCII_ALNUM) * 3
    + list(" .,'\u2019-_\n")
    * 3
    + list("中文的国人东京小明旅行")
    + [
        "\u2e80", "\u2e99", "\u2e9a", "\u2e9b", "\u2ef3", "\u2ef4", "\u2f00", "\u2fd5", "\u2fd6",
        "\u3004", "\u3005", "\u3006", "\u3007", "\u3020", "\u3021", "\u3029", "\u302a", "\u3038",
        "\u303b", "\u303c", "\u33ff", "\u3400", "\u4dbf", "\u4dc0", "\u4dff", "\u4e00", "\u9fff",
        "\ua000", "\uf8ff", "\uf900", "\ufa6d", "\ufa6e", "\ufa70", "\ufad9", "\ufada",
        "\U00016fe1", "\U00016fe2", "\U00016fe3", "\U00016fe4", "\U00016ff0", "\U00016ff6",
        "\U00016ff7", "\U0001ffff", "\U00020000", "\U0002a6df", "\U0002a6e0", "\U0002a700",
        "\U0002b81d", "\U0002b81e", "\U0002b820", "\U0002cead", "\U0002ceb0", "\U0002ebe0",
        "\U0002ebf0", "\U0002ee5d", "\U0002ee5e", "\U0002f800", "\U0002fa1d", "\U0002fa1e",
        "\U00030000", "\U0003134a", "\U0003134b", "\U00031350", "\U00033479", "\U0003347a",
        "é", "ï", "ß", "\u0130", "\u212a", "\u00ad", "\u200b", "ｆ", "Ａ", "²", "ﬁ", "Σ", "ς",
        "\U0001F600", "\u0301", "\u3000", "\ud83d",  # a lone high surrogate
    ]
)


def _oracle_questions() -> list[str]:
    rng = random.Random(12345)
    words = sorted(STOP_BASE) + ["caroline", "paris", "trip", "42", "b2", "x"]
    out = []
    for _ in range(1500):
        parts = []
        for _ in range(rng.randint(0, 14)):
            if rng.random() < 0.3:
                parts.append(rng.choice(words))
            else:
                parts.append("".join(rng.choice(_ORACLE_ALPHABET) for _ in range(rng.randint(1, 6))))
            parts.append(rng.choice([" ", "", "  ", ", ", "中", "\n"]))
        out.append("".join(parts))
    out += ["abc中文def", "foo 中 bar", "\u0130stanbul \u212aelvin", "ΣΑΣ ΟΔΟΣ", ""]
    return out


def _ranges(chars) -> list[list[int]]:
    out = []
    for c in sorted(chars):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


@pytest.mark.skipif(NODE is None, reason="node (V8 oracle) not available")
def test_tokenizers_vs_v8_regexes():
    qs = _oracle_questions()
    script = _JS_TOKENIZERS % json.dumps(sorted(STOP_BASE))
    proc = subprocess.run(
        [NODE, "-e", script], input=json.dumps(qs), capture_output=True, text=True,
        encoding="utf-8", timeout=120, check=True,
    )
    res = json.loads(proc.stdout)

    # our Script=Han class equals V8's \p{Script=Han}
    allcp = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    ours = [ord(c) for c in re.findall("[" + HAN_CLASS + "]", allcp)]
    assert _ranges(ours) == res["han"]
    # only İ and the Kelvin sign lowercase into [a-z0-9] in V8, and Python agrees
    assert res["lowerAscii"] == [0x130, 0x212A]
    py_lower_ascii = [ord(c) for c in allcp[0x80:] if re.search("[a-z0-9]", c.lower())]
    assert py_lower_ascii == [0x130, 0x212A]

    bad = []
    for q, exp in zip(qs, res["out"]):
        got = {
            "ascii": seq_ascii(q), "cjkr": seq_cjkr(q), "zh": seq_zh(q),
            "exp6": seq_exp6(q), "prod": seq_prod(q),
            "plain": window_plain(q), "cf": window_cf(q), "w070": window_070(q),
            "cnb": window_cnb(q), "wexp6": window_exp6(q),
        }
        for k, v in got.items():
            if v != exp[k]:
                bad.append((q, k, exp[k], v))
    assert not bad, bad[:5]


def test_the_han_regexes_compile_on_first_use_only():
    # a job importing the tokenizers pays for a Han class's compile only when it scans with it
    code = ("import copy, memobench.memo.tokenize as t\n"
            "before = 'findall' in vars(t._RE_ZH)\n"
            "got = t.seq_zh('Hello 你好世界 x')\n"
            "copy.deepcopy(t._RE_EXP6)\n"
            "print(before, 'findall' in vars(t._RE_ZH), got == ['hello', '你好世界', 'x'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"]
