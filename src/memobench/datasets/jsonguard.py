"""Bounds on hostile JSON, checked before any parser sees the bytes.

Two shapes of valid-looking JSON hurt the parsers we use:

* deep nesting: ijson's C backend keeps one prefix string per open level
  (``item.item.item...``), so memory grows with the square of the depth
  (842 KB of ``[`` reached 24 GB); Python's ``json`` raises RecursionError;
* long number literals: above Python's 4,300-digit int limit ijson's C
  backend crashes the process (SIGSEGV) and ``json`` raises ValueError.

:class:`Guard` scans the bytes incrementally, at C speed for ordinary data
(strings are dropped with a few bytes operations per chunk), and reports the
exact byte of the first violation: the bracket that opens level
``MAX_DEPTH + 1``, or the first character of a number literal longer than
``MAX_NUMBER`` characters. Strings follow JSON's rules (a backslash escapes
the next byte), the same rules as run-m's element scanner, so the guard and
that scanner agree on what is inside a string even in malformed files.

:func:`parse_error_offset` finds the exact byte at which ijson's parser (yajl)
fails, which ijson itself only reports to within its read buffer.

:class:`LoneEscapes` rewrites the escapes that ijson's C backend decodes
wrongly: a lone surrogate (``\\ud83d`` alone, or before ``\\u0061``) comes
out as ``?``, as a wrong character or as a crash. JavaScript's ``JSON.parse``
keeps it as a lone UTF-16 code unit, as Python's ``json`` keeps a lone code
point; :func:`restore` gives ijson's values the same.
"""

from __future__ import annotations

import os
import re
import sys
from array import array
from bisect import bisect_right
from itertools import accumulate

import ijson

MAX_DEPTH = 64  # the real LongMemEval and LoCoMo files nest 5 deep
MAX_NUMBER = 4096  # characters of one number literal; Python's int limit is 4,300 digits

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # the end of a string begun earlier
_NUM_CHARS = b"-+.0123456789eE"
_NUM_MASK = bytes(b in _NUM_CHARS for b in range(256))  # number characters to 1, the rest to 0
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}\\\0')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DELTA = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))
_QUOTE, _BACKSLASH = 0x22, 0x5C
_ESCAPED = re.compile(rb"\\.", re.DOTALL)  # a backslash and the byte it escapes (inside a string)


def _number_limit() -> int:
    """MAX_NUMBER, or less if this Python's int-string limit was set lower."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    return min(MAX_NUMBER, limit) if limit else MAX_NUMBER


class LimitExceeded(Exception):
    """The input breaks a bound; ``offset`` is the exact byte, ``what`` says which."""

    def __init__(self, offset: int, what: str):
        self.offset, self.what = offset, what
        super().__init__(f"{what} at byte {offset}")


class Guard:
    """Incremental depth and number-length check of a JSON byte stream.

    ``feed(chunk)`` returns None when the chunk is within bounds, otherwise the
    index in the chunk of the first violation (``self.error`` then holds the
    :class:`LimitExceeded`); after a violation the guard stays failed."""

    def __init__(self, max_depth: int = MAX_DEPTH, max_number: int | None = None, start: int = 0):
        self.max_depth = max_depth
        self.max_number = max_number if max_number is not None else _number_limit()
        self._long = b"\1" * (self.max_number + 1)  # a run too long, in _NUM_MASK's terms
        self._stride = max(1, (self.max_number + 1) // 2)  # a run that long covers two multiples of it
        self.offset = start  # absolute byte offset of the next chunk
        self.depth = 0
        self.in_string = False
        self.escape = False  # in a string, the next byte is escaped
        self.run = 0  # length of the number literal that ends the bytes seen so far
        self.error: LimitExceeded | None = None

    def feed(self, chunk: bytes) -> int | None:
        if self.error is not None:
            return 0
        state = (self.depth, self.in_string, self.escape, self.run)
        if not self._fast(chunk):
            self.depth, self.in_string, self.escape, self.run = state
            cut = self._exact(chunk)
            if cut is not None:
                return cut
        self.offset += len(chunk)
        return None

    def _fast(self, chunk: bytes) -> bool:
        """Advance the state over ``chunk``; False if it may break a bound
        (then :meth:`_exact` decides, byte by byte)."""
        if not chunk:
            return True
        # Number literals are bounded on the raw bytes, strings included: a
        # run there is at least as long as any literal in it, and a run over
        # the bound (digits in text, almost never) is left to _exact.
        lead = len(chunk) - len(chunk.lstrip(_NUM_CHARS))
        if self.run + lead > self.max_number or self._long_run(chunk):
            return False
        stripped = self._outside_split(chunk)
        if stripped is None:
            stripped = self._outside_regex(chunk)
        if self.in_string:
            self.run = 0  # a string ends the chunk
        elif lead == len(chunk):
            self.run += lead
        else:  # the run that ends the chunk has no quote, so it is outside strings too
            self.run = len(chunk) - len(chunk.rstrip(_NUM_CHARS))
        brackets = stripped.translate(None, _NOT_BRACKETS)
        if brackets:
            # Empty pairs (most turns: {...}) are dropped first, so few brackets
            # are summed one by one; such a pair reaches one level above where
            # it is, a pair emptied by the first drop two.
            once = brackets.replace(b"{}", b"")
            rest = once.replace(b"[]", b"")
            margin = (len(once) < len(brackets)) + (len(rest) < len(once))
            sums = list(accumulate(map(_DELTA.__getitem__, rest), initial=self.depth))
            if max(sums) + margin > self.max_depth or min(sums) < 0:
                return False  # too deep, or stray closers (malformed): decided exactly
            self.depth = sums[-1]
        return True

    def _long_run(self, chunk: bytes) -> bool:
        """Whether ``chunk`` holds more than ``max_number`` number characters
        in a row. Such a run covers two neighbouring bytes of the sample
        ``chunk[::stride]`` and every byte between them, so only where two
        neighbours are number characters is more than the sample looked at."""
        stride = self._stride
        marks = chunk[::stride].translate(_NUM_MASK)
        i = marks.find(b"\1\1")
        while i >= 0:
            if not chunk[i * stride : (i + 1) * stride + 1].lstrip(_NUM_CHARS):
                return self._long in chunk.translate(_NUM_MASK)
            i = marks.find(b"\1\1", i + 1)
        return False

    def _outside_split(self, chunk: bytes) -> bytes | None:
        """The brackets of ``chunk`` outside strings (with the bytes that
        reveal a wrong pairing below, and spaces), and the string state at
        its end. Escapes (a backslash and the byte after it, left to right)
        become a NUL each, with one regex substitution (two ``bytes.replace``
        of the pairs that matter cost three times as much), all but the
        quotes, brackets, NULs and backslashes dropped, quotes with nothing of
        those between them dropped too (most strings), and the rest split on
        quotes, all at C speed; that pairing is right inside strings only, so
        a backslash or NUL left outside (never in valid JSON) answers None and
        the regex does it instead."""
        body = chunk
        if self.in_string and self.escape:
            body = chunk[1:]
        neutral = body
        if b"\\" in neutral:  # memchr: most chunks of files without escapes have no backslash
            neutral = _ESCAPED.sub(b"\0", neutral)
        pieces = neutral.translate(None, _NOT_STRUCTURE).replace(b'""', b"").split(b'"')
        odd = (len(pieces) - 1) % 2 == 1  # an odd number of string delimiters
        stripped = b" ".join(pieces[1::2] if self.in_string else pieces[0::2])
        if b"\0" in stripped or b"\\" in stripped:
            return None
        self.in_string = self.in_string != odd
        self.escape = self.in_string and (len(body) - len(body.rstrip(b"\\"))) % 2 == 1
        return stripped

    def _outside_regex(self, chunk: bytes) -> bytes:
        """As :meth:`_outside_split`, for any bytes."""
        pos = 0
        if self.in_string:
            m = _STRING_REST.match(chunk, 1 if self.escape else 0)
            if m is None:  # the whole chunk is inside the string
                rest = chunk[1:] if self.escape else chunk
                self.escape = (len(rest) - len(rest.rstrip(b"\\"))) % 2 == 1
                return b""
            pos, self.in_string, self.escape = m.end(), False, False
        stripped = _STRING.sub(b" ", chunk[pos:] if pos else chunk)
        cut = stripped.find(b'"')
        if cut >= 0:  # a string runs past the end of the chunk
            stripped = stripped[:cut]
            self.in_string = True
            self.escape = (len(chunk) - len(chunk.rstrip(b"\\"))) % 2 == 1
        return stripped

    def _exact(self, chunk: bytes) -> int | None:
        """The byte-by-byte definition the fast path agrees with. Depth never
        goes below 0 (stray closers in a malformed file count for nothing)."""
        depth, in_string, escape, run = self.depth, self.in_string, self.escape, self.run
        for i, c in enumerate(chunk):
            if in_string:
                if escape:
                    escape = False
                elif c == _BACKSLASH:
                    escape = True
                elif c == _QUOTE:
                    in_string = False
                continue
            if c in _NUM_CHARS:
                run += 1
                if run > self.max_number:
                    start = self.offset + i + 1 - run
                    self.error = LimitExceeded(start, f"number literal longer than {self.max_number} characters")
                    return i
                continue
            run = 0
            if c == _QUOTE:
                in_string = True
            elif c in b"[{":
                depth += 1
                if depth > self.max_depth:
                    self.error = LimitExceeded(self.offset + i, f"nesting deeper than {self.max_depth} levels")
                    return i
            elif c in b"]}":
                depth = max(depth - 1, 0)
        self.depth, self.in_string, self.escape, self.run = depth, in_string, escape, run
        return None


def check_bytes(data: bytes, start: int = 0, chunk_size: int = 1 << 20) -> None:
    """Raise :class:`LimitExceeded` if ``data`` (a whole document or line,
    beginning at file offset ``start``) breaks a bound."""
    guard = Guard(start=start)
    for i in range(0, len(data), chunk_size):
        if guard.feed(data[i : i + chunk_size]) is not None:
            raise guard.error


# A \u escape of a surrogate or of NUL (a real one where an even run of
# backslashes comes before it); a valid pair (a high escape and a low one
# right after it) is matched whole and left as it is. The literal start lets
# the search skip ahead at memchr speed.
_ESCAPE = re.compile(rb"\\u(?:([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
                     rb"|([dD][c-fC-F][0-9a-fA-F]{2})|(0000))")
_MAY_ESCAPE = re.compile(rb"\\u(?:[dD]|0000)")  # found in every match (a fast search)
_HOLD = 11  # bytes at the end of a read that may begin an escape not yet decidable (a pair is 12)
MARK = "\x00"  # a rewritten escape's first character in the parsed strings
_RESTORE = re.compile("\x00([\x00\ue000-\ue7ff])")


class LoneEscapes:
    """Rewrites a JSON byte stream, read by read, so that ijson's parser
    decodes every string exactly: each lone surrogate escape (U+D800 + v,
    v < 2048) becomes ``\\u0000`` and the escape of U+E000 + v, and each
    ``\\u0000`` becomes two, so that in the parsed strings NUL starts a pair
    of characters that :func:`restore` turns back (NUL NUL is a NUL, NUL and
    U+E000 + v the surrogate). Valid pairs and every other byte pass as they
    are; a stream without such escapes passes unchanged. Each rewrite adds 6
    bytes; ``offsets`` and ``units`` keep the raw offset and the code unit
    (0 for NUL) of each, in order, in 10 bytes, and :meth:`to_raw` maps an
    offset of the rewritten stream back."""

    def __init__(self):
        self.held = b""  # raw bytes kept back: they may begin an escape that the next read completes
        self.odd = False  # the bytes before ``held`` end in an odd run of backslashes
        self.at = 0  # raw offset of ``held``
        self.offsets = array("q")
        self.units = array("H")

    def feed(self, data: bytes, final: bool = False) -> bytes:
        """The rewritten bytes of the stream so far (``final``: the end of
        the stream; nothing is kept back)."""
        buf = self.held + data if self.held else data
        cut = len(buf)
        if not final:
            back = buf.find(b"\\", max(0, cut - _HOLD))
            if back >= 0:
                cut = back
        if b"\\" in buf and _MAY_ESCAPE.search(buf):  # memchr first: most reads of most files have no backslash
            out, cut = self._rewrite(buf, cut)
        else:
            out = buf if cut == len(buf) else buf[:cut]
        i = cut
        while i > 0 and buf[i - 1] == 0x5C:
            i -= 1
        run = (cut - i) % 2 == 1
        self.odd = self.odd != run if i == 0 else run
        self.at += cut
        self.held = buf[cut:]
        return out

    def _rewrite(self, buf: bytes, cut: int) -> tuple[bytes, int]:
        """``buf[:cut]`` rewritten, and ``cut`` (moved past a pair that straddles it)."""
        pieces, done, pos = [], 0, 0
        search = _ESCAPE.search
        while (m := search(buf, pos)) is not None:
            start = m.start()  # the escape's backslash
            if start >= cut:
                break  # kept back: decided with the bytes after it
            i = start
            while i > 0 and buf[i - 1] == 0x5C:
                i -= 1
            if (start - i + (self.odd and i == 0)) % 2:  # that backslash is escaped: no escape here
                pos = start + 1
                continue
            pos = m.end()
            cut = max(cut, pos)
            if m.group(2):
                continue  # a valid pair
            lone = m.group(1) or m.group(3)
            unit = 0 if lone is None else int(lone, 16)
            pieces += (buf[done:start], b"\\u0000\\u%04x" % (unit - 0xD800 + 0xE000 if unit else 0))
            done = pos
            self.offsets.append(self.at + start)
            self.units.append(unit)
        if not pieces:
            return buf[:cut], cut
        pieces.append(buf[done:cut])
        return b"".join(pieces), cut

    def to_raw(self, offset: int) -> int:
        """The raw offset of rewritten-stream offset ``offset`` (inside a
        rewrite: that escape's backslash, or the byte after it)."""
        raws = self.offsets  # rewrite k starts at raws[k] + 6 * k in the rewritten stream
        k = bisect_right(range(len(raws)), offset, key=lambda i: raws[i] + 6 * i)
        if not k:
            return offset
        raw = raws[k - 1]
        start = raw + 6 * (k - 1)
        return raw + (offset - start - 6 if offset >= start + 12 else min(offset - start, 6))


def restore(value):
    """A value parsed by ijson from :class:`LoneEscapes`' stream, with every
    string (object keys too) turned back to what ``json.loads`` gives for the
    raw bytes: lone surrogates as lone code points."""
    t = type(value)
    if t is str:
        return _RESTORE.sub(_restore_char, value) if MARK in value else value
    if t is list:
        return [restore(v) for v in value]
    if t is dict:
        return {(_RESTORE.sub(_restore_char, k) if MARK in k else k): restore(v) for k, v in value.items()}
    return value


def _restore_char(m) -> str:
    c = m.group(1)
    return c if c == MARK else chr(ord(c) - 0xE000 + 0xD800)


def may_hold_lone(data: bytes) -> bool:
    """Whether JSON bytes may hold a lone surrogate escape (False is sure)."""
    return b"\\ud" in data or b"\\uD" in data


def lone_escape_byte(path, start: int, value: str, chunk_size: int = 1 << 20) -> int | None:
    """Where an error about string ``value`` (which holds a lone surrogate)
    points: the byte of the first lone surrogate escape at or after ``start``
    in JSON file ``path`` whose string literal reads (as ``json.loads`` reads
    it) as ``value``, else as a piece of ``value`` holding its first lone
    surrogate (``String()`` of a list joins its strings). None if there is
    none (a literal over 64 KiB is not read)."""
    import json

    unit = next((c for c in value if 0xD800 <= ord(c) < 0xE000), None)
    if unit is None:
        return None
    escapes = LoneEscapes()
    piece_at = None
    with open(path, "rb") as f:
        f.seek(start)
        while True:
            data = f.read(chunk_size)
            escapes.feed(data, final=not data)
            for raw, u in zip(escapes.offsets, escapes.units):
                if chr(u) != unit:
                    continue
                at = start + raw
                lo = max(0, at - 65536)
                window = os.pread(f.fileno(), at + 65536 - lo, lo)
                q = _opening_quote(window, at - lo)
                m = None if q is None else _STRING.match(window, q)
                if m is not None:
                    piece = json.loads(m.group().decode("utf-8", "replace"))
                    if piece == value:
                        return at
                    if piece_at is None and unit in piece and piece in value:
                        piece_at = at
            del escapes.offsets[:], escapes.units[:]
            if not data:
                return piece_at


def _opening_quote(data: bytes, pos: int) -> int | None:
    """The quote that opens the string holding ``data[pos]`` (the last quote
    before it that no backslash escapes)."""
    q = data.rfind(b'"', 0, pos)
    while q >= 0:
        run = q - len(data[:q].rstrip(b"\\"))
        if run % 2 == 0:
            return q
        q = data.rfind(b'"', 0, q)
    return None


class GuardedReader:
    """A binary file for ijson and the element scanner that hands out bytes
    only up to the first violation, then signals end of file: the parser
    reads every byte before it (so an earlier syntax error is still found
    first) and never the offending bracket or digits. ``error`` then holds
    the :class:`LimitExceeded`. (An exception raised inside ``read`` does not
    survive ijson's C backend, hence the clean end of file.)

    ``escapes=True`` hands out :class:`LoneEscapes`' rewritten stream (for
    ijson; ``escapes`` holds the rewriter): ``handed`` and ``last`` count its
    bytes, :meth:`tell` the raw bytes read."""

    def __init__(self, f, escapes: bool = False):
        self.f = f
        self.with_escapes = escapes
        self.escapes = LoneEscapes() if escapes else None
        self.guard = Guard()
        self.handed = 0  # bytes given to the reader so far
        self.last = 0  # size of the last non-empty read
        self.raw = 0  # bytes read from the file
        self.done = False
        self.pending = b""  # rewritten bytes beyond what a read asked for

    @property
    def error(self) -> LimitExceeded | None:
        return self.guard.error

    def read(self, n: int = -1) -> bytes:
        if n == 0:
            return b""  # ijson's check for a binary file
        data = self.pending
        while not data and not self.done:
            data = self.f.read(n)
            cut = self.guard.feed(data)
            if cut is not None:
                data = data[:cut]
            self.raw += len(data)
            self.done = not data or cut is not None
            if self.escapes is not None:
                data = self.escapes.feed(data, self.done)
        self.pending = b""
        if 0 < n < len(data):  # a rewrite made it longer
            data, self.pending = data[:n], data[n:]
        if data:
            self.handed += len(data)
            self.last = len(data)
        return data

    def tell(self) -> int:
        return self.raw

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) != (0, 0):
            raise ValueError("GuardedReader only rewinds to the start")
        self.f.seek(0)
        self.guard = Guard()
        self.escapes = LoneEscapes() if self.with_escapes else None
        self.handed = self.last = self.raw = 0
        self.done = False
        self.pending = b""
        return 0


def parse_error_offset(f, end: int, hint: int = 0, chunk_size: int = 1 << 20) -> int | None:
    """The exact byte at which ijson's parser fails on the first ``end`` bytes
    of binary file ``f``: the first byte that no valid JSON text can continue
    with, or ``end`` if those bytes are a valid but unfinished prefix and the
    document ends there. None if they parse. ``hint``: a byte before which the
    parser is known to succeed (the start of the read that failed).

    Bytes up to ``hint`` are pushed in large chunks, the rest one at a time."""
    for fine_from in (hint, 0):
        sink = ijson.utils.sendable_list()
        coro = ijson.basic_parse_coro(sink)
        f.seek(0)
        pos = 0
        try:
            while pos < fine_from:
                data = f.read(min(chunk_size, fine_from - pos))
                if not data:
                    return None
                coro.send(data)
                del sink[:]
                pos += len(data)
        except ijson.JSONError:
            continue  # the hint was wrong: go byte by byte from the start
        data = f.read(end - pos)
        for i in range(len(data)):
            try:
                coro.send(data[i : i + 1])
            except ijson.JSONError:
                return pos + i
            del sink[:]
        try:
            coro.close()
        except ijson.JSONError:
            return pos + len(data)
        return None
    return None
