"""SQLite FTS5's answer to the harnesses' discovery query, computed in memory.

run.cjs asks ``SELECT rowid FROM docs WHERE docs MATCH '"<phrase>"' ORDER BY
rowid LIMIT n`` of an ``fts5(id, body)`` table holding the haystack's sessions
in order (docs/harnesses.md#fts5-discovery). That answer depends only on the unicode61 tokens
of each row's two columns and of the phrase: a row matches when the phrase's
tokens occur one after another within one column; no tokens, or a NUL in the
phrase (FTS5 reads the MATCH text up to it: "unterminated string", which the
harnesses take as no rows), match nothing. Tests hold both halves against real
FTS5 tables (tests/unit/memo/test_fts5.py).

The tokenizer is SQLite's unicode61 with its defaults (remove_diacritics 1), a
machine over single characters: a token starts at a token character, runs on
through token characters and diacritics, and each character is folded (lower
case, diacritic removed) on its own; FTS5 cuts every token, indexed or queried,
to 32,768 UTF-8 bytes. A character's class (token, diacritic, separator) and
fold are therefore enough to reproduce it, and they are asked of this process's
own SQLite, once per character, as texts bring new ones. A lone surrogate
(possible in JSON) is read as U+FFFD: unicode61 splits at it as at the
surrogate's own bytes, which the harnesses' binding hands over.
"""

from __future__ import annotations

import re
import sqlite3

from .termids import Concat, Vocab

MAX_TOKEN_BYTES = 32768  # FTS5_MAX_TOKEN_SIZE
_LONG = MAX_TOKEN_BYTES // 4  # tokens up to this many characters are never cut


def _char_class(chars: list[str]) -> str:
    """A regex character class body listing ``chars`` as ranges."""
    cps = sorted(ord(c) for c in chars)
    parts, i = [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        lo, hi = re.escape(chr(cps[i])), re.escape(chr(cps[j]))
        parts.append(lo if i == j else f"{lo}-{hi}")
        i = j + 1
    return "".join(parts)


_TOKEN, _DIACRITIC, _SEPARATOR = "token", "diacritic", "separator"
_ANSWERS: dict[str, tuple[str, str]] = {}  # character -> (class, fold): SQLite's answers, asked once per process


class Unicode61:
    """SQLite FTS5's default tokenizer, character classes learned from SQLite."""

    def __init__(self):
        self._db = None  # the probe tables, made when a character no tokenizer of this process has met comes
        self.known: set[str] = set()
        self.separators: set[str] = set()
        self.diacritics: set[str] = set()
        self.fold: dict[int, str] = {}  # str.translate table, where a character's fold differs
        self._token = None
        self.learn([chr(c) for c in range(128)])
        # ASCII text in C: separators made spaces, then split (bytes.split
        # splits on b" \t\n\r\x0b\x0c" only, all of them separators here)
        ascii_tokens = {chr(c) for c in range(128)} - self.separators
        self._ascii = None
        if not (self.diacritics & ascii_tokens) and not any(c.encode().isspace() for c in ascii_tokens):
            self._ascii = bytes(32 if chr(c) in self.separators else c for c in range(128)) + bytes(range(128, 256))
        # the same, as the 256 flags termids.token_stream tokenizes a batch of ASCII texts with
        self.ascii_token = None if self._ascii is None else bytes(
            int(c < 128 and chr(c) not in self.separators) for c in range(256))

    def learn(self, chars) -> None:
        """Take each new character's class and fold, asking SQLite of those
        no tokenizer of this process has asked (:meth:`_ask`: every answer
        comes from the same library)."""
        new = sorted(set(chars) - self.known)
        if not new:
            return
        unasked = [c for c in new if c not in _ANSWERS]
        if unasked:
            _ANSWERS.update(zip(unasked, self._ask(unasked)))
        grew = False
        for c in new:
            kind, folded = _ANSWERS[c]
            if kind != _TOKEN:
                (self.diacritics if kind == _DIACRITIC else self.separators).add(c)
                grew = True
            if folded != c:
                self.fold[ord(c)] = folded
        self.known.update(new)
        if grew or self._token is None:
            stop = _char_class(self.separators)
            self._token = re.compile(f"[^{stop}{_char_class(self.diacritics)}][^{stop}]*")

    def _ask(self, chars: list[str]) -> list[tuple[str, str]]:
        """How SQLite tokenizes each character: alone (a token character gives
        its fold) and between two x's (a diacritic joins them, a separator
        splits them). One (class, fold) per character."""
        if self._db is None:
            self._db = sqlite3.connect(":memory:")
            self._db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
            self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        probe = ["\ufffd" if 0xD800 <= ord(c) < 0xE000 else c for c in chars]
        db = self._db
        db.execute("DELETE FROM t")
        db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)",
                       [(2 * n + k + 1, text) for n, c in enumerate(probe) for k, text in enumerate((c, f"x{c}x"))])
        alone: dict[int, list[str]] = {}
        between: dict[int, list[str]] = {}
        for term, doc, offset in db.execute("SELECT term, doc, offset FROM v ORDER BY doc, offset"):
            n, k = divmod(doc - 1, 2)
            (between if k else alone).setdefault(n, []).append(term)
        answers = []
        for n, c in enumerate(chars):
            if n in alone:
                (folded,) = alone[n]
                answers.append((_TOKEN, folded))
            elif len(between.get(n, ())) == 1:  # no token alone, joins its neighbours
                answers.append((_DIACRITIC, between[n][0][1:-1]))
            else:
                answers.append((_SEPARATOR, c))
        return answers

    def tokens(self, text: str) -> list[str]:
        return self.joined(text).split()

    def joined(self, text: str) -> str:
        """The tokens of ``text`` in ``tokenize.joined_tokens`` form,
        ``" t1  t2 "`` (tokens never hold whitespace: it separates)."""
        if text.isascii():
            if self._ascii is not None and len(text) <= _LONG:
                return (b" " + b"  ".join(text.encode("ascii").translate(self._ascii).split()) + b" ").decode().lower()
            toks = self._token.findall(text)
            if not toks:
                return "  "
            joined = (" " + "  ".join(toks) + " ").lower()
        else:
            self.learn(set(text))
            toks = self._token.findall(text)
            if not toks:
                return "  "
            joined = (" " + "  ".join(toks) + " ").translate(self.fold)
        if max(map(len, toks)) > _LONG:
            joined = " " + "  ".join(_cut(t) for t in joined.split()) + " "
        return joined


def _cut(token: str) -> str:
    """FTS5's cut at 32,768 bytes, which can split a character: its leftover
    bytes become lone surrogates, so tokens equal exactly when their bytes do."""
    b = token.encode("utf-8")
    return token if len(b) <= MAX_TOKEN_BYTES else b[:MAX_TOKEN_BYTES].decode("utf-8", "surrogateescape")


EMPTY = "  "  # joined form of no tokens


class PhraseMatcher:
    """``docs MATCH '"phrase"' ORDER BY rowid LIMIT n`` over one haystack's
    (id, body) rows at a time. A row matches where the phrase's tokens occur
    one after another in one column: the body column (the session's events'
    tokens in order, as ids of ``vocab``) is searched for the whole haystack
    at once (termids.Concat); the short id column in joined form, where the
    phrase's joined form is a substring exactly where it occurs.
    The rows of each phrase are remembered until the next haystack, found at
    the largest LIMIT asked and cut to each caller's, so variants sharing a
    matcher ask once."""

    def __init__(self, tokenizer: Unicode61, limit: int, vocab: Vocab):
        self.tokenizer = tokenizer
        self.limit = limit
        self.vocab = vocab
        self.current = None
        self.id_columns: list[str] = []
        self.bodies = Concat([])
        self._ids: dict[str, str] = {}
        self._rows: dict[str, list[int]] = {}

    def load(self, hay_token, ids: list, bodies: list) -> None:
        """One haystack: its session ids and each session's body token ids."""
        if hay_token == self.current:
            return
        self.current = hay_token
        self.id_columns = [self._id_joined(sid) for sid in ids]
        self.bodies = Concat(bodies)
        self._rows = {}

    def _id_joined(self, sid) -> str:
        joined = self._ids.get(sid)
        if joined is None:
            joined = self._ids[sid] = EMPTY if sid is None else self.tokenizer.joined(sid)
        return joined

    def rows(self, phrase: str, limit: int) -> list[int]:
        """Haystack positions of the matching rows, in order, at most ``limit``."""
        if limit > self.limit:
            raise ValueError(f"LIMIT {limit} above the matcher's {self.limit}")
        rows = self._rows.get(phrase)
        if rows is None:
            rows = self._rows[phrase] = self._match(phrase)
        return rows[:limit]

    def _match(self, phrase: str) -> list[int]:
        if "\x00" in phrase:
            return []
        pat = self.tokenizer.joined(phrase)
        if pat == EMPTY:
            return []
        in_id = [p for p, sid in enumerate(self.id_columns) if pat in sid]
        ids = self.vocab.lookup(pat.split())
        in_body = self.bodies.rows(ids) if ids else []
        rows = sorted(set(in_body).union(in_id)) if in_id else in_body
        return rows[:self.limit]
