"""Read the raw dataset files and write the normalized Parquet tables.

The readers keep exactly what the original harnesses read (docs/harnesses.md#input-files-and-environment to #cn-pairing):
the JS ``String()`` coercions, the date parsing and its fallbacks, LoCoMo's
numeric session-key order and exact ``dia_id`` evidence lookup, CN pairing.
LongMemEval files are streamed item by item with ijson so memory stays flat
(LongMemEval-M is 2.7 GB); each distinct session is stored once.
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
import shutil
import struct
import tempfile
from array import array
from bisect import bisect_left
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from itertools import accumulate, chain, repeat
from pathlib import Path

import ijson
import pyarrow as pa
import pyarrow.parquet as pq

from .dates import parse_lme_all, parse_locomo
from ..errors import DataError
from .parts import Slice, Worker, can_fork, cut_points, parts_for
from .jsonguard import (MARK, GuardedReader, LimitExceeded, check_bytes, lone_escape_byte, may_hold_lone,
                        parse_error_offset, restore)
from ..jsmath import MISSING, js_string
from ..progress import Progress
from ..tables import (BATCH_ROWS, EVENTS, HAYSTACKS, LONE_SURROGATE, QUESTIONS, SESSIONS, TABLE_NAMES, TableWriter,
                      escape_lone, read_table, utf8_text)

DAY_MS = 86_400_000
SESSION_KEY_RE = re.compile(r"session_([0-9]+)\Z")


def _turn_text(turn, field: str) -> str:
    """``String(turn.<field>)``; a null turn or a missing field gives ''."""
    if not isinstance(turn, dict) or field not in turn:
        return ""
    return js_string(turn[field])


def _opt_str(value):
    return None if value is None or isinstance(value, (dict, list)) else js_string(value)


class _Lone:
    """The checks of one item whose bytes may hold lone surrogates (a JSON
    escape of U+D800 to U+DFFF that is not half of a pair). Turn texts,
    questions and answers keep them (tables.utf8_text); every other string
    that the tables keep (ids, dates, types, roles) must hold none: those are
    written to outputs that must be valid UTF-8 (rankings, TREC runs, reports),
    and replacing one would merge or reorder ids. ``start``: a byte at or
    before the item's first, where the error's byte is looked for."""

    def __init__(self, path, item, start: int = 0):
        self.path, self.item, self.start = path, item, start

    def __call__(self, field: str, value):
        if type(value) is str and not value.isascii() and LONE_SURROGATE.search(value):
            unit = ord(LONE_SURROGATE.search(value).group())
            at = lone_escape_byte(self.path, self.start, value)
            where = "" if at is None else f" at byte {at}"
            raise DataError(self.path, self.item, f"field {field!r} holds a lone surrogate (\\u{unit:04x}){where}; "
                            "memobench keeps those only in turn texts, questions and answers")
        return value

    def all(self, field: str, values) -> None:
        for v in values:
            self(field, v)


def _answer_json(item: dict) -> str | None:
    """The raw ``answer`` as JSON text (a lone surrogate written as its
    ``\\udXXX`` escape, as JSON.stringify writes it: the text stays UTF-8)."""
    if "answer" not in item:
        return None
    return escape_lone(json.dumps(item["answer"], ensure_ascii=False, default=float))


DIGEST_BYTES = hashlib.sha256().digest_size  # a session's identity (SessionStore.keys)
_NULL = "\x00null"  # how the first version of the session hash wrote a None part; kept so equality stays the same


def _digest(scope: str, session_id: str, texts: list, roles: list, dia_ids: list, flags: bytes) -> bytes:
    """A session's identity: its parts (None read as ``_NULL``) and flags.
    The code-point length of every part and then all of them joined is one
    unambiguous encoding, hashed with a handful of C-level calls instead of
    one per part (a session's turns are most of the file). SHA-256: every
    occurrence of a session is hashed, and with the CPUs' SHA instructions it
    runs at twice blake2b's speed."""
    roles = [_NULL if r is None else r for r in roles] if None in roles else roles
    dia_ids = [_NULL if d is None else d for d in dia_ids] if None in dia_ids else dia_ids
    parts = [scope, session_id, *texts, *roles, *dia_ids]
    h = hashlib.sha256(array("q", [len(parts), *map(len, parts)]).tobytes())
    h.update("".join(parts).encode("utf-8", "surrogatepass"))
    h.update(flags)
    return h.digest()


class _WriteBehind:
    """One thread that writes the row groups of a dataset's tables, so that
    Parquet's encoding and zstd (pyarrow releases the GIL there) run on
    another core while the next items are parsed. Each table's batches are
    written in the order handed over, so the files are the same. One batch is
    written while the next is built, no more (one batch's memory more than
    writing in place). A failed write is raised again, the same exception, at
    the next hand-over or at :meth:`wait`; nothing is handed over after it,
    as the tables are then aborted."""

    def __init__(self):
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="normalize-writer")
        self.writing = None  # the batch being written (a Future)

    def put(self, writer, batch, rows: int) -> None:
        self.wait()
        self.writing = self.pool.submit(writer.write_batch, batch, row_group_size=rows)

    def wait(self) -> None:
        """Until the batch handed over is written; raises a failed write's error."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.result()

    def stop(self) -> None:
        """Ends the thread, after the write under way (none is waiting)."""
        self.pool.shutdown(wait=True)


class _BehindWriter(TableWriter):
    """A :class:`TableWriter` whose row groups :class:`_WriteBehind` writes."""

    def __init__(self, path, schema: pa.Schema, behind: _WriteBehind, batch_rows: int = BATCH_ROWS):
        super().__init__(path, schema, batch_rows=batch_rows)
        self.write_behind = behind

    def _write(self, batch: pa.RecordBatch) -> None:
        self.write_behind.put(self.writer, batch, self.batch_rows)

    def close(self) -> None:
        try:
            self.flush()
            self.write_behind.wait()  # its row groups are all in the file before the footer
        except BaseException:
            self.abort()
            raise
        super().close()

    def abort(self) -> None:
        self.write_behind.stop()  # the writer is not in use while it is closed
        super().abort()


class SessionStore:
    """Assigns a key to each distinct session and writes sessions and events once."""

    def __init__(self, out_dir: Path, make_writer=TableWriter):
        """``make_writer(path, schema)``: each table's writer."""
        self.sessions = make_writer(out_dir / "sessions.parquet", SESSIONS)
        self.events = make_writer(out_dir / "events.parquet", EVENTS)
        self.keys: dict[bytes, int] = {}
        self.n_events = 0

    def key(self, session_id: str, turns: list[tuple], scope: str = "", lone: bool = False) -> int:
        """``turns``: (text, role, dia_id[, has_answer]) per event, in order.
        Sessions are equal when id and turns are (has_answer included, so the
        official scoring sees each copy's own flags); ``scope`` keeps apart
        sessions that must not be merged even if equal (LoCoMo conversations)."""
        texts, roles, dia_ids = [t[0] for t in turns], [t[1] for t in turns], [t[2] for t in turns]
        has = [t[3] if len(t) == 4 else None for t in turns]
        return self.columns(session_id, texts, roles, dia_ids, has, scope,
                            flags=bytes(0 if h is None else 1 + bool(h) for h in has), lone=lone)

    def columns(self, session_id: str, texts: list, roles: list, dia_ids: list, has: list, scope: str = "",
                flags: bytes = b"", lone: bool = False) -> int:
        """:meth:`key` of a session given column-wise; ``flags``: its has_answer
        per turn as 0 (None), 1 (false) or 2 (true); ``lone``: the texts may
        hold lone surrogates (stored as tables.utf8_text says)."""
        digest = _digest(scope, session_id, texts, roles, dia_ids, flags)
        key = self.keys.get(digest)
        if key is None:
            key = self.keys[digest] = len(self.keys)
            n = len(texts)
            exact = [None] * n
            if lone and n:  # U+FFFD for a lone surrogate: the code-point length stays
                texts, exact = map(list, zip(*map(utf8_text, texts)))
            self.sessions.append(session_key=key, session_id=session_id, n_events=n)
            self.events.extend(session_key=[key] * n, seq=range(n), text=texts, length=list(map(len, texts)),
                               role=roles, dia_id=dia_ids, has_answer=has, text_exact=exact)
            self.n_events += n
        return key

    def haystack(self, sids: list, lens: list, texts: list, roles: list, has: list, lone: bool = False) -> list:
        """The keys of a LongMemEval haystack's sessions, given column-wise:
        session ``i`` is ``sids[i]`` with the ``lens[i]`` turns that follow
        the previous sessions' in ``texts``, ``roles`` and ``has`` (has_answer
        as bools); ``lone``: the texts may hold lone surrogates.

        A session's identity is what :meth:`key` compares (id, texts, roles
        with None read as ``_NULL``, has_answer; no dia_id, no scope), hashed
        in one unambiguous encoding: its turn count and id length, then per
        turn the text's and role's code-point lengths and the flag, then the
        id and roles, then the texts, all as UTF-8. The per-turn numbers are
        packed once per haystack; each session's texts are joined and encoded
        once (small buffers, which stay in cache) and those bytes serve both
        the hash and, for a new session, the Arrow array of its texts. New
        sessions' rows go out with one ``extend`` per table, cut into row
        groups as row by row."""
        named = [_NULL if r is None else r for r in roles] if None in roles else roles
        tlen = list(map(len, texts))
        rlen = list(map(len, named))
        rtext = "".join(named)
        roff = list(accumulate(rlen, initial=0))
        per_turn = [0] * (3 * len(texts))
        per_turn[0::3], per_turn[1::3], per_turn[2::3] = tlen, rlen, has
        per_turn = array("q", per_turn).tobytes()
        keys_of, sha256, pack = self.keys, hashlib.sha256, _PAIR.pack
        keys, new_keys, new_ids, new_n, new_rows, new_bytes = [], [], [], [], [], []
        ascii_ = True  # every new session's texts are ASCII: their bytes are their UTF-8 and its offsets their lengths
        a = 0
        for sid, n in zip(sids, lens):
            b = a + n
            joined = "".join(texts[a:b])
            data = joined.encode("utf-8", "surrogatepass")
            h = sha256(b"".join((pack(n, len(sid)), per_turn[24 * a:24 * b],
                                 (sid + rtext[roff[a]:roff[b]]).encode("utf-8", "surrogatepass"))))
            h.update(data)
            digest = h.digest()
            key = keys_of.get(digest)
            if key is None:
                key = keys_of[digest] = len(keys_of)
                new_keys.append(key)
                new_ids.append(sid)
                new_n.append(n)
                new_rows.append(a)
                new_bytes.append(data)
                ascii_ = ascii_ and joined.isascii()
            keys.append(key)
            a = b
        if new_keys:
            if len(new_keys) == len(sids):  # every session new (most haystacks of most files)
                ev_text, ev_len, ev_role, ev_has = texts, tlen, roles, has
            else:
                rows = list(chain.from_iterable(map(range, new_rows, map(int.__add__, new_rows, new_n))))
                ev_text, ev_len, ev_role, ev_has = ([col[i] for i in rows] for col in (texts, tlen, roles, has))
            m = len(ev_len)
            exact = [None] * m
            if lone:  # U+FFFD for a lone surrogate: the code-point length stays
                ev_text, exact = map(list, zip(*map(utf8_text, ev_text)))
            elif ascii_ and sum(map(len, new_bytes)) < 1 << 31:  # the bytes at hand, as an Arrow array
                ev_text = _ascii_strings(b"".join(new_bytes), ev_len)
            if named is roles and rtext.isascii() and roff[-1] < 1 << 31:  # no null role: the same for roles
                data = rtext.encode("ascii")
                if len(new_keys) == len(sids):
                    ev_role = _ascii_strings(data, rlen)
                else:
                    ev_role = _ascii_strings(b"".join([data[roff[a]:roff[a + n]] for a, n in zip(new_rows, new_n)]),
                                             [rlen[i] for i in rows])
            self.sessions.extend(session_key=new_keys, session_id=new_ids, n_events=new_n)
            self.events.extend(session_key=_int32(chain.from_iterable(map(repeat, new_keys, new_n)), m),
                               seq=_int32(chain.from_iterable(map(range, new_n)), m), text=ev_text,
                               length=_int32(ev_len, m), role=ev_role, dia_id=[None] * m, has_answer=ev_has,
                               text_exact=exact)
            self.n_events += m
        return keys

    def close(self) -> None:
        self.sessions.close()
        self.events.close()

    def abort(self) -> None:
        self.sessions.abort()
        self.events.abort()


def _ascii_strings(data: bytes, lengths: list) -> pa.Array:
    """An Arrow string array of ASCII strings given as their bytes joined and
    their lengths (no Python string per value)."""
    offsets = array("i", accumulate(lengths, initial=0))
    return pa.Array.from_buffers(pa.string(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _int32(values, n: int) -> pa.Array:
    """An Arrow int32 array of ``n`` values (each below 2**31) from a C array."""
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(array("i", values))])


_PAIR = struct.Struct("<qq")  # a session's turn count and id length, first in its hashed bytes


def _lme_turns(session) -> tuple[list, list, list]:
    """(texts, roles, has_answer) of a LongMemEval session's turns: the text
    ``String(turn.content)`` ('' for a null turn or no content), the role
    (None unless a scalar) and has_answer as the official scorer tests it
    (Python truthiness; a missing key or a non-object turn is false). Column
    by column with C-level maps when every turn is an object, every content a
    string and every role a string or null, as in real files; the coercions
    value by value otherwise."""
    turns = session if isinstance(session, list) else []
    n = len(turns)
    if not set(map(type, turns)) <= {dict}:
        return ([_turn_text(t, "content") for t in turns],
                [_opt_str(t.get("role")) if isinstance(t, dict) else None for t in turns],
                [isinstance(t, dict) and bool(t.get("has_answer")) for t in turns])
    texts = list(map(dict.get, turns, repeat("content", n), repeat(MISSING, n)))
    if not set(map(type, texts)) <= {str}:
        texts = ["" if v is MISSING else js_string(v) for v in texts]
    roles = list(map(dict.get, turns, repeat("role", n)))
    if not set(map(type, roles)) <= {str, type(None)}:
        roles = [_opt_str(r) for r in roles]
    return texts, roles, list(map(bool, map(dict.get, turns, repeat("has_answer", n))))


_ONE_PLUS = (1).__add__  # has_answer False/True -> flag 1/2


def _restored(values: list) -> list:
    """``restore(values)``: when its values are strings, the list itself if
    none holds a mark (a join and a memchr instead of a call per value), else
    a call for each that does."""
    try:
        if MARK not in "".join(values):
            return values
    except TypeError:  # not all strings
        return restore(values)
    return [restore(v) if MARK in v else v for v in values]


def _lme_columns(sessions: list, marks: bool) -> tuple[list, list, list, list]:
    """(turn counts, texts, roles, has_answer) of a haystack's sessions, each
    column over all its turns in order (as :func:`_lme_turns` gives them
    session by session): one C-level pass per column when every session is a
    list and every turn an object, as in real files. ``marks``: the strings
    are ijson's from :class:`jsonguard.LoneEscapes`' stream, restored here
    (only the columns kept: restoring a turn's keys changes no lookup, since
    a restored key is never one of the plain keys read)."""
    if set(map(type, sessions)) <= {list}:
        turns = list(chain.from_iterable(sessions))
        if set(map(type, turns)) <= {dict}:
            n = len(turns)
            texts = list(map(dict.get, turns, repeat("content", n), repeat(MISSING, n)))
            roles = list(map(dict.get, turns, repeat("role", n)))
            if marks:
                texts, roles = _restored(texts), _restored(roles)
            if not set(map(type, texts)) <= {str}:
                texts = ["" if v is MISSING else js_string(v) for v in texts]
            if not set(map(type, roles)) <= {str, type(None)}:
                roles = [_opt_str(r) for r in roles]
            # has_answer's truthiness is the same before and after restore
            return (list(map(len, sessions)), texts,
                    roles, list(map(bool, map(dict.get, turns, repeat("has_answer", n)))))
    lens, texts, roles, has = [], [], [], []
    for session in sessions:
        t, r, h = _lme_turns(restore(session) if marks else session)
        lens.append(len(t))
        texts += t
        roles += r
        has += h
    return lens, texts, roles, has


def _lme_haystack(item: dict, hid: int, store: SessionStore, haystacks: TableWriter,
                  lone: _Lone | None = None, marks: bool = False) -> tuple[list[str], int]:
    """Write one LongMemEval item's haystack; returns (session ids, date
    fallbacks). ``lone``: the item may hold lone surrogates (their checks);
    ``marks``: its sessions' strings are still to be restored (jsonguard)."""
    sessions = item.get("haystack_sessions")
    sessions = sessions if isinstance(sessions, list) else []
    ids = item.get("haystack_session_ids")
    ids = ids if isinstance(ids, list) else []
    dates = item.get("haystack_dates")
    dates = dates if isinstance(dates, list) else []
    n = len(sessions)
    sids = ids[:n]
    if len(sids) < n or not set(map(type, sids)) <= {str}:
        padded = chain(sids, repeat(None, n - len(sids)))  # a missing id reads as null
        sids = ["s" + str(i) if raw is None else js_string(raw) for i, raw in enumerate(padded)]
    raw_dates = dates[:n]
    if len(raw_dates) == n and set(map(type, raw_dates)) <= {str}:
        strs = raw_dates
    else:
        strs = [js_string(d) for d in raw_dates] + [js_string(MISSING)] * (n - len(raw_dates))
        raw_dates = [None if d is None else x for d, x in zip(raw_dates, strs)] + [None] * (n - len(raw_dates))
    bases = parse_lme_all(strs)
    fallbacks = [b is None for b in bases]
    if True in fallbacks:
        bases = [(len(dates) - i) * DAY_MS if b is None else b for i, b in enumerate(bases)]
    lens, texts, roles, has = _lme_columns(sessions, marks)
    if lone is not None and any(LONE_SURROGATE.search("".join(col)) for col in (sids, strs, filter(None, roles))):
        a = 0  # the first of them, in the order the checks were made session by session
        for sid, date, k in zip(sids, strs, lens):
            lone("haystack_session_ids", sid)
            lone("haystack_dates", date)
            lone.all("role", roles[a : a + k])
            a += k
    keys = store.haystack(sids, lens, texts, roles, has, lone=lone is not None)
    haystacks.extend(haystack_id=[hid] * n, position=range(n), session_key=keys, session_id=sids,
                     date=raw_dates, base_time=bases, date_fallback=fallbacks)
    return sids, sum(fallbacks)


def _lme_gold(raw_ids, answers) -> list[str]:
    """The harnesses' gold (docs/harnesses.md#sessions-and-events): each ``String(answer)`` found among
    ``String()`` of the raw ``haystack_session_ids``, first occurrences in answer
    order. The raw list, not the session ids: an id past the last session is
    gold (and never ranked), a session's ``"s<i>"`` fallback id is not, and a
    null id is the string ``"null"``. A string of answers is iterated by code
    point, as ``for (const id of ...)`` does; any other non-list gives none."""
    id_set = {js_string(x) for x in raw_ids} if isinstance(raw_ids, list) else set()
    gold: list[str] = []
    for a in answers if isinstance(answers, (list, str)) else ():
        a = js_string(a)
        if a in id_set and a not in gold:
            gold.append(a)
    return gold


def _question_type(value) -> str:
    if value is MISSING or value is None or value == "":
        return "unknown"
    return js_string(value)


def _question_text(path, index: int, item: dict) -> str:
    q = item.get("question", MISSING)
    if not isinstance(q, str):
        got = "missing" if q is MISSING else type(q).__name__
        raise DataError(path, f"item {index}", f"field 'question' must be a string, got {got}")
    return q


class _PartWriter(TableWriter):
    """A :class:`TableWriter` of an Arrow IPC file, uncompressed: the rows of
    a part of a file that a worker read (parts.py), which the job appends to
    its own tables. ``close()`` leaves it under its name; nothing commits it."""

    def _open(self) -> None:
        self.writer = pa.ipc.new_file(str(self.path), self.schema)

    def _write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)

    def close(self) -> None:
        self.flush()
        self.writer.close()

    def abort(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass
        self.path.unlink(missing_ok=True)


QUESTION_BATCH_ROWS = 4096  # rows per row group of the questions table


class _Tables:
    """The four tables of one dataset. Used as a context manager: an exception
    removes every temporary file; ``close()`` moves them all into place.
    ``part``: a part's tables, as :class:`_PartWriter` files (no thread)."""

    def __init__(self, out_dir: Path, part: bool = False):
        self.behind = None if part else _WriteBehind()

        def make_writer(path, schema, **options):
            if part:
                return _PartWriter(Path(path).with_suffix(PART_SUFFIX), schema, **options)
            return _BehindWriter(path, schema, self.behind, **options)

        self.store = SessionStore(out_dir, make_writer)
        self.questions = make_writer(out_dir / "questions.parquet", QUESTIONS, batch_rows=QUESTION_BATCH_ROWS)
        self.haystacks = make_writer(out_dir / "haystacks.parquet", HAYSTACKS)

    def writers(self) -> dict[str, TableWriter]:
        """Each table's writer, by table name."""
        return dict(zip(TABLE_NAMES, (self.questions, self.haystacks, self.store.sessions, self.store.events)))

    def close(self) -> None:
        try:
            # every last batch handed over first: one is built while another is written
            for t in self.writers().values():
                t.flush()
            self.questions.close()
            self.haystacks.close()
            self.store.close()
        finally:
            if self.behind is not None:
                self.behind.stop()

    def abort(self) -> None:
        if self.behind is not None:
            self.behind.stop()
        self.questions.abort()
        self.haystacks.abort()
        self.store.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()


class _LmeTables(_Tables):
    """The tables of a LongMemEval-format file, filled item by item."""

    def __init__(self, path: Path, out_dir: Path, part: bool = False):
        super().__init__(out_dir, part)
        self.path = path
        self.stats = {"questions": 0, "date_fallbacks": 0, "duplicate_question_ids": 0, "unparseable_items": 0}
        self.seen_ids: set[str] = set()

    def add(self, index: int, item, lone: _Lone | None = None, marks: bool = False) -> None:
        """``lone``: the item may hold lone surrogates (their checks);
        ``marks``: its strings are ijson's from :class:`jsonguard.LoneEscapes`'
        stream, to be restored (all but its sessions' here, where they are
        read: restoring the whole item, every turn object again, would cost
        more than the rest of its reading)."""
        if not isinstance(item, dict):
            raise DataError(self.path, f"item {index}", f"expected an object, got {type(item).__name__}")
        if marks:
            item = {k: v if k == "haystack_sessions" else restore(v) for k, v in item.items()}
        qid = js_string(item.get("question_id", MISSING))
        if qid in self.seen_ids:
            self.stats["duplicate_question_ids"] += 1
        self.seen_ids.add(qid)
        question = _question_text(self.path, index, item)
        question_type = _question_type(item.get("question_type", MISSING))
        question_date = _opt_str(item.get("question_date"))
        answers = item.get("answer_session_ids")
        answer_ids = [js_string(a) for a in answers] if isinstance(answers, list) else []
        if lone is not None:
            lone("question_id", qid)
            lone("question_type", question_type)
            lone("question_date", question_date)
            lone.all("answer_session_ids", answer_ids)
        _, fallbacks = _lme_haystack(item, index, self.store, self.haystacks, lone, marks)
        self.stats["date_fallbacks"] += fallbacks
        gold = _lme_gold(item.get("haystack_session_ids"), answers)
        question, question_exact = utf8_text(question) if lone is not None else (question, None)
        self.questions.append(
            q_index=index, question_id=qid, question=question, question_type=question_type,
            question_date=question_date, haystack_id=index, gold=gold,
            paired_question_id=None, parse_error=False, answer=_answer_json(item),
            answer_session_ids=answer_ids, question_exact=question_exact,
        )
        self.stats["questions"] += 1

    def add_unparseable(self, index: int) -> None:
        """An element the M harness's scanner emits but JSON.parse rejects: it is
        skipped, yet it still counts toward the segment offsets."""
        self.questions.append(
            q_index=index, question_id=f"#unparseable-{index}", question="", question_type="unknown",
            question_date=None, haystack_id=-1, gold=[], paired_question_id=None, parse_error=True,
            answer=None, answer_session_ids=[], question_exact=None,
        )
        self.stats["unparseable_items"] += 1

    def summary(self) -> dict:
        return {**self.stats, "items": self.stats["questions"] + self.stats["unparseable_items"],
                "sessions": len(self.store.keys), "events": self.store.n_events}


def _first_line(e: Exception) -> str:
    text = e.args[0] if e.args else str(e)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return str(text).strip().splitlines()[0] if str(text).strip() else type(e).__name__


@contextmanager
def _gc_paused():
    """The cyclic garbage collector off while a file is read: ijson makes
    millions of objects (every turn an object), none in a cycle, freed by
    their reference counts, and each of the collector's passes over the young
    ones costs time for nothing (about a tenth of the stage)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def normalize_longmemeval(path, out_dir, log=print, lenient: bool = False, workers: int = 1) -> dict:
    """Stream a LongMemEval JSON array into the tables.

    ``lenient`` follows the streamed M harnesses (run-m, exp*-m): an element
    that does not parse is skipped and counted instead of stopping the run
    (docs/harnesses.md#streaming-the-m-file). Otherwise, like run.cjs's JSON.parse of the whole file,
    malformed JSON is an error naming the item and the exact byte. Either way
    the bytes pass :mod:`jsonguard` first: nesting deeper than ``MAX_DEPTH`` or
    a number literal longer than ``MAX_NUMBER`` characters is an error.

    ``workers``: the cores it may use. A large file is then read in parts at
    once (parts.py, :func:`_normalize_in_parts`); the tables are the same
    bytes as one pass's, and a file whose parts do not each read cleanly is
    read in one pass, which reports its errors as above."""
    path, out_dir = Path(path), Path(out_dir)
    size = path.stat().st_size
    n_parts = parts_for(size, workers)
    if n_parts > 1 and can_fork():
        cuts = cut_points(path, n_parts)
        stats = _normalize_in_parts(path, out_dir, cuts, log) if cuts else None
        if stats is not None:
            return stats
    progress = Progress(log, f"normalize {path.name}", unit="items")
    tables = _LmeTables(path, out_dir)
    reading = _Reading()
    try:
        with open(path, "rb") as raw, _gc_paused():
            f = GuardedReader(raw, escapes=True)
            try:
                _read_items(f, tables, progress, size, reading)
            except ijson.JSONError as e:
                index = reading.index
                where = parse_error_offset(GuardedReader(raw, escapes=True), f.handed, hint=f.handed - f.last)
                if f.error is not None and (where is None or where >= f.handed):
                    raise _limit_error(path, f"item {index + 1}", f.error) from None
                where = f.escapes.to_raw(f.handed if where is None else where)
                if not lenient:
                    what = "invalid UTF-8" if "UTF8" in _first_line(e) else "invalid or truncated JSON"
                    raise DataError(path, f"item {index + 1}", f"{what} at byte {_at(where, size)}: "
                                    f"{_first_line(e)}") from None
                log(f"malformed JSON after item {index} (at byte {where}): re-reading with the M harness's "
                    "element scanner, which skips elements that do not parse")
                tables.abort()
                tables = _LmeTables(path, out_dir)
                _normalize_scanned(GuardedReader(raw), tables, progress, size)
            else:
                if f.error is not None:  # the bytes before the violation were a complete document
                    raise _limit_error(path, f"item {reading.index + 1}", f.error)
        if tables.stats["questions"] + tables.stats["unparseable_items"] == 0:
            raise DataError(path, None, "no items: expected a JSON array of LongMemEval objects")
        tables.close()
        stats = tables.summary()
    except BaseException:
        tables.abort()
        raise
    progress(stats["items"], ", done", force=True)
    return stats


class _Reading:
    """Where a pass over a file's items is: the index of the last item read."""

    index = -1


def _read_items(f: GuardedReader, tables: _LmeTables, progress, size: int, reading: _Reading) -> None:
    """Every item ijson reads from ``f`` (a GuardedReader of ``size`` raw
    bytes, with escapes) into ``tables``, ``reading.index`` kept up to date."""
    escapes = f.escapes.offsets  # raw offsets of the rewrites so far, in order; grows in place
    start = 0  # a byte at or before the next item's first
    for reading.index, item in enumerate(ijson.items(f, "item")):
        index = reading.index
        # Rewrites (rare) since ``start`` may be in this item: its strings are turned back
        # and checked. None there: it has no lone surrogate and no NUL, nothing to do.
        if escapes and bisect_left(escapes, start) < len(escapes):
            tables.add(index, item, _Lone(tables.path, f"item {index}", start), marks=True)
        else:
            tables.add(index, item)
        start = f.escapes.to_raw(f.handed - f.last)
        progress(index + 1, f", {f.tell() * 100 // max(size, 1)}% of bytes")


PART_SUFFIX = ".arrow"  # a part's table, beside where the table goes
_SCRATCH_PREFIX = ".normalize-parts-"  # the workers' folder, in the tables' folder


def _normalize_in_parts(path: Path, out_dir: Path, cuts: list[int], log) -> dict | None:
    """The tables of a LongMemEval file cut at ``cuts`` (parts.py), its parts
    read at once: the job reads the first, a forked worker each other one
    into Arrow files (:func:`_read_part`), and the job then appends their rows
    in file order (:func:`_append_part`). None, with the tables and the
    workers' files gone, when a part does not read on its own."""
    size = path.stat().st_size
    bounds = [0, *cuts, size]
    n = len(bounds) - 1
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(f"{_SCRATCH_PREFIX}*"):  # of a job killed before its cleanup (this one has the lock)
        shutil.rmtree(stale, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=_SCRATCH_PREFIX, dir=out_dir))
    overall = Progress(log, f"normalize {path.name}", unit="items")
    log(f"normalize {path.name}: {n} parts read at once, cut at bytes {', '.join(map(str, cuts))}")
    workers: list[Worker] = []
    tables = None
    try:
        for k in range(1, n):
            part_dir = scratch / f"part{k + 1}"
            part_dir.mkdir()
            read = partial(_read_part, path, bounds[k] + 1, bounds[k + 1], k == n - 1, part_dir, log,
                           f"part {k + 1} of {n}")
            workers.append(Worker(read, part_dir / "error.txt"))
        tables = _LmeTables(path, out_dir)
        progress = Progress(log, f"normalize {path.name} (part 1 of {n})", unit="items")
        failed = None
        try:
            with open(path, "rb") as raw, _gc_paused():
                f = GuardedReader(Slice(raw.fileno(), 0, bounds[1], suffix=b"]"), escapes=True)
                reading = _Reading()
                _read_items(f, tables, progress, bounds[1], reading)
                if f.error is not None:
                    failed = f"part 1: {f.error}"
                elif reading.index < 0:  # "[ ]" reads, but "[ ,{...}" does not: an item must come before a cut
                    failed = "part 1: no item before the first cut"
        except Exception as e:  # noqa: BLE001 - the one-pass reading reports it, at its place
            failed = f"part 1: {type(e).__name__}: {_first_line(e)}"
        for k, worker in enumerate(workers, 2):
            if failed is None and not worker.wait():
                failed = f"part {k}: {worker.error}"
            if failed is None:
                _append_part(tables, scratch / f"part{k}", log, f"part {k} of {n}")
        if failed is not None:
            log(f"normalize {path.name}: {failed}; reading the file in one pass instead")
            for worker in workers:
                worker.kill()
            tables.abort()
            return None
        tables.close()
    except BaseException:
        for worker in workers:
            worker.kill()
        if tables is not None:
            tables.abort()
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stats = tables.summary()
    overall(stats["items"], ", done", force=True)
    return stats


def _read_part(path: Path, start: int, end: int, last: bool, part_dir: Path, log, label: str) -> None:
    """A worker's part: the items in bytes ``start`` to ``end`` of ``path``
    (read as ``[`` and those bytes, and ``]`` unless ``last``) into Arrow
    files in ``part_dir``, with each new session's digest in key order and
    the part's counts. Anything amiss raises (the job then reads in one pass)."""
    tables = _LmeTables(path, part_dir, part=True)
    progress = Progress(log, f"normalize {path.name} ({label})", unit="items")
    with open(path, "rb") as raw, _gc_paused():
        f = GuardedReader(Slice(raw.fileno(), start, end, b"[", b"" if last else b"]"), escapes=True)
        _read_items(f, tables, progress, end - start, _Reading())
        if f.error is not None:
            raise f.error
    tables.close()
    (part_dir / "digests.bin").write_bytes(b"".join(tables.store.keys))  # in key order: dicts keep it
    (part_dir / "counts.json").write_text(json.dumps(tables.stats), encoding="utf-8")


def _append_part(tables: _LmeTables, part_dir: Path, log, label: str) -> None:
    """A worker's part (:func:`_read_part`) appended to ``tables`` as one pass
    would have written it: item numbers after the items so far; each session
    seen before gets its key and is not stored again, each new one the next
    key, in the order the part first saw them (its own key order); duplicate
    question ids counted against every item before."""
    import pyarrow.compute as pc

    base = tables.stats["questions"]  # items before this part (a part has no unparseable one)
    digests = (part_dir / "digests.bin").read_bytes()
    keys, mapping, is_new = tables.store.keys, [], []
    for i in range(0, len(digests), DIGEST_BYTES):
        digest = digests[i:i + DIGEST_BYTES]
        key = keys.get(digest)
        is_new.append(key is None)
        if key is None:
            key = keys[digest] = len(keys)
        mapping.append(key)
    seen_before = is_new.count(False)
    mapping, is_new = pa.array(mapping, pa.int32()), pa.array(is_new, pa.bool_())
    offset = pa.scalar(base, pa.int32())
    for name, writer in tables.writers().items():
        # read batch by batch, not mapped: every page of a mapped part stays resident here, growing
        # with the file (on the 2.7 GB M file a peak of 1.0 GB against 0.8 GB, for 0.5 s less)
        reader = pa.ipc.open_file(pa.OSFile(str(part_dir / f"{name}{PART_SUFFIX}")))
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            if name in ("sessions", "events"):  # a session seen before is stored once, already
                batch = batch.filter(pc.take(is_new, batch.column("session_key")))
            columns = dict(zip(batch.schema.names, batch.columns))
            if "session_key" in columns:
                columns["session_key"] = pc.take(mapping, columns["session_key"])
            if "haystack_id" in columns:  # a LongMemEval item's haystack is its own: its number
                columns["haystack_id"] = pc.add(columns["haystack_id"], offset)
            if name == "questions":
                columns["q_index"] = pc.add(columns["q_index"], offset)
                for qid in columns["question_id"].to_pylist():
                    tables.stats["duplicate_question_ids"] += qid in tables.seen_ids
                    tables.seen_ids.add(qid)
            elif name == "events":
                tables.store.n_events += batch.num_rows
            writer.extend(**columns)
    counts = json.loads((part_dir / "counts.json").read_text(encoding="utf-8"))
    for name in ("questions", "date_fallbacks"):
        tables.stats[name] += counts[name]
    log(f"normalize {tables.path.name} ({label}): {counts['questions']} items appended, "
        f"{seen_before} of its {len(mapping)} sessions seen before")


def _at(offset: int, size: int) -> str:
    return f"{offset} (end of file)" if offset >= size else str(offset)


def _limit_error(path, item, e: LimitExceeded) -> DataError:
    return DataError(path, item, f"{e.what} at byte {e.offset} (a bound of memobench, see the README)")


_SCAN = re.compile(rb'[{}"\\]')


def _normalize_scanned(f: GuardedReader, tables: _LmeTables, progress, size: int) -> int:
    """run-m's brace-depth scanner (docs/harnesses.md#streaming-the-m-file): every top-level object is
    emitted once in file order and parsed on its own; a failure skips it. The
    guard ends the bytes at a violation of its bounds, which is then an error."""
    index = -1
    start = 0  # a byte at or before the next element's first
    for element in scan_elements(f):
        if element is None and f.error is not None:
            break
        if element is None:  # the file ends inside an element: never emitted
            tables.stats["truncated_tail"] = 1
            continue
        index += 1
        try:
            item = json.loads(element.decode("utf-8", "replace"))
        except ValueError:
            tables.add_unparseable(index)
            continue
        tables.add(index, item, _Lone(tables.path, f"item {index}", start) if may_hold_lone(element) else None)
        start = max(0, f.tell() - SCAN_CHUNK)
        progress(index + 1, f", {f.tell() * 100 // max(size, 1)}% of bytes (scanner)")
    if f.error is not None:
        raise _limit_error(tables.path, f"item {index + 1}", f.error)
    return index


SCAN_CHUNK = 1 << 20


def scan_elements(f, chunk_size: int = SCAN_CHUNK):
    """Yield the bytes of each top-level ``{...}`` element of ``f`` (opened in
    binary mode, read from the start), then None if the file ends inside one.
    Structure characters are ASCII, so scanning UTF-8 bytes equals scanning
    the decoded text."""
    f.seek(0)
    depth, in_string, skip_until = 0, False, 0
    parts: list[bytes] = []
    start = None  # offset of the open element's "{" in the current chunk
    offset = 0
    while True:
        chunk = f.read(chunk_size)
        if not chunk:
            if depth > 0:
                yield None
            return
        for m in _SCAN.finditer(chunk):
            pos = m.start()
            if offset + pos < skip_until:
                continue  # the character after a backslash inside a string
            ch = chunk[pos]
            if in_string:
                if ch == 0x5C:  # backslash
                    skip_until = offset + pos + 2
                elif ch == 0x22:
                    in_string = False
            elif ch == 0x22:
                in_string = True
            elif ch == 0x7B:  # {
                if depth == 0:
                    start, parts = pos, []
                depth += 1
            elif ch == 0x7D:  # }  (a stray one drives depth negative, as in the original)
                depth -= 1
                if depth == 0:
                    parts.append(chunk[start : pos + 1])
                    yield b"".join(parts)
                    parts, start = [], None
        if start is not None:
            parts.append(chunk[start:])
            start = 0
        offset += len(chunk)


def _loads(path, data: bytes, item=None, start: int = 0):
    """``json.loads`` of one document (a file, or a line at file offset
    ``start``) within the :mod:`jsonguard` bounds. The first problem in byte
    order is reported, at its exact file offset: a limit violation, invalid
    UTF-8 (the first bad byte) or invalid JSON (where Python's parser stops:
    the start of the token it cannot use, or the end of the data)."""
    limit = None
    try:
        check_bytes(data, start=start)
    except LimitExceeded as e:
        limit, data = e, data[: e.offset - start]  # the parser never sees the offending bytes
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(path, item, f"invalid UTF-8 at byte {start + e.start} ({e.reason})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        where = start + len(text[: e.pos].encode("utf-8"))
        if limit is None or where < limit.offset:
            msg = e.msg.removesuffix(" at")  # "Unterminated string starting at"
            raise DataError(path, item, f"invalid or truncated JSON: {msg} at byte {where}") from None
    if limit is not None:
        raise _limit_error(path, item, limit)
    return value


def _load_json(path):
    """The file's JSON value, and whether it may hold lone surrogates."""
    with open(path, "rb") as f:
        data = f.read()
    return _loads(path, data), may_hold_lone(data)


def _sample_id(conv: dict, ci: int) -> str:
    sample = conv.get("sample_id", MISSING)
    return js_string(sample) if sample is not MISSING else f"conv{ci}"


def _check_sample_ids(path, data: list) -> None:
    """Question ids are ``<sample_id>#<n>``: two conversations with one
    sample_id would give every question of both a twin."""
    where: dict[str, list[int]] = {}
    for ci, conv in enumerate(data):
        if isinstance(conv, dict):
            where.setdefault(_sample_id(conv, ci), []).append(ci)
    dups = {sid: cis for sid, cis in where.items() if len(cis) > 1}
    if dups:
        listed = "; ".join(f"{sid!r} (conversations {', '.join(map(str, cis))})" for sid, cis in dups.items())
        raise DataError(path, None, f"duplicate sample_id: {listed}")


def normalize_locomo(path, out_dir, log=print) -> dict:
    path, out_dir = Path(path), Path(out_dir)
    data, lone = _load_json(path)
    if not isinstance(data, list):
        raise DataError(path, None, "expected a JSON array of conversations")
    _check_sample_ids(path, data)
    tables = _Tables(out_dir)
    store, questions, haystacks = tables.store, tables.questions, tables.haystacks
    stats = {"conversations": len(data), "questions": 0, "date_fallbacks": 0, "evidence_unmatched": 0}
    q_index = 0
    progress = Progress(log, f"normalize {path.name}", total=len(data), unit="conversations")
    with tables:
        for ci, conv in enumerate(data):
            if not isinstance(conv, dict) or not isinstance(conv.get("conversation"), dict):
                raise DataError(path, f"conversation {ci}", "expected an object with a 'conversation' object")
            c = conv["conversation"]
            sample_id = _sample_id(conv, ci)
            check = _Lone(path, f"conversation {ci}") if lone else None
            if check is not None:
                check("sample_id", sample_id)
            keys = sorted(
                (k for k in c if SESSION_KEY_RE.match(k) and isinstance(c[k], list)),
                key=lambda k: int(SESSION_KEY_RE.match(k).group(1)),
            )
            dia: dict[str, str] = {}
            for i, key in enumerate(keys):
                date_raw = c.get(key + "_date_time", MISSING)
                date = js_string(date_raw)
                base = parse_locomo(date)
                fallback = base is None
                if fallback:
                    base = i * DAY_MS
                    stats["date_fallbacks"] += 1
                events = []
                for turn in c[key]:
                    d = turn.get("dia_id") if isinstance(turn, dict) else None
                    dia_id = js_string(d) if d not in (None, "", 0, False) else None
                    speaker = _opt_str(turn.get("speaker")) if isinstance(turn, dict) else None
                    events.append((_turn_text(turn, "text"), speaker, dia_id))
                    if dia_id is not None:
                        dia[dia_id] = key
                    if check is not None:
                        check("speaker", speaker)
                        check("dia_id", dia_id)
                if check is not None:
                    check(key + "_date_time", date)
                skey = store.key(key, events, scope=f"conversation {ci}", lone=check is not None)
                haystacks.append(
                    haystack_id=ci, position=i, session_key=skey, session_id=key,
                    date=None if date_raw is MISSING or date_raw is None else date,
                    base_time=base, date_fallback=fallback,
                )
            qa = conv.get("qa")
            for qi, item in enumerate(qa if isinstance(qa, list) else []):
                if not isinstance(item, dict):
                    raise DataError(path, f"{sample_id} qa {qi}", "expected an object")
                evidence = item.get("evidence")
                gold = []
                for e in evidence if isinstance(evidence, list) else []:
                    s = dia.get(js_string(e))
                    if s is None:
                        stats["evidence_unmatched"] += 1
                    elif s not in gold:
                        gold.append(s)
                cat = item.get("category", MISSING)
                question = _question_text(path, f"{sample_id} qa {qi}", item)
                question_type = "unknown" if cat is MISSING else js_string(cat)
                question, question_exact = (question, None) if check is None else utf8_text(question)
                if check is not None:
                    check("category", question_type)
                questions.append(
                    q_index=q_index, question_id=f"{sample_id}#{qi}", question=question,
                    question_type=question_type, question_date=None, haystack_id=ci, gold=gold,
                    paired_question_id=None, parse_error=False, answer=None, answer_session_ids=[],
                    question_exact=question_exact,
                )
                q_index += 1
            progress(ci + 1)
        stats["questions"] = q_index
        tables.close()
    stats.update(sessions=len(store.keys), events=store.n_events, haystacks=len(data))
    progress(len(data), ", done", force=True)
    return stats


def normalize_cn(path, base_dir, out_dir, log=print) -> dict:
    """CN rows paired to the normalized LongMemEval-S questions (docs/harnesses.md#cn-pairing).

    Only ``questions.parquet`` is written; haystacks, sessions and events are
    the base dataset's. Unpaired rows are kept with ``haystack_id = -1`` so the
    retrieval stage counts them as skips.
    """
    path, base_dir, out_dir = Path(path), Path(base_dir), Path(out_dir)
    base = read_table(base_dir / "questions.parquet", columns=["question_id", "haystack_id", "gold", "question_type", "question_date"]).to_pylist()
    by_id = {row["question_id"]: row for row in base}  # last entry per id wins
    questions = TableWriter(out_dir / "questions.parquet", QUESTIONS, batch_rows=QUESTION_BATCH_ROWS)
    stats = {"rows": 0, "paired": 0, "unpaired": 0}
    size = path.stat().st_size
    progress = Progress(log, f"normalize {path.name}", unit="rows")
    try:
        with open(path, "rb") as f:
            offset = 0
            for lineno, raw in enumerate(f, 1):
                progress(stats["rows"], f", {offset * 100 // max(size, 1)}% of bytes")
                start, offset = offset, offset + len(raw)
                if not raw.decode("utf-8", "replace").strip():
                    continue
                row = _loads(path, raw, f"line {lineno}", start)
                if not isinstance(row, dict):
                    raise DataError(path, f"line {lineno}", "expected a JSON object")
                qid = js_string(row.get("questionId", MISSING))
                lone = may_hold_lone(raw)
                if lone:
                    _Lone(path, f"line {lineno}", start)("questionId", qid)
                orig = qid[:-3] if qid.endswith("_cn") else qid
                pair = by_id.get(orig)
                stats["paired" if pair else "unpaired"] += 1
                # cn.cjs skips an unpaired row before reading its question
                question = _question_text(path, f"line {lineno}", row) if pair else ""
                question, question_exact = utf8_text(question) if lone else (question, None)
                questions.append(
                    q_index=stats["rows"], question_id=qid, question=question,
                    question_type=pair["question_type"] if pair else "unknown",
                    question_date=pair["question_date"] if pair else None,
                    haystack_id=pair["haystack_id"] if pair else -1,
                    gold=pair["gold"] if pair else [],
                    paired_question_id=orig if pair else None, parse_error=False,
                    answer=None, answer_session_ids=[], question_exact=question_exact,
                )
                stats["rows"] += 1
        if stats["rows"] and not stats["paired"]:
            raise DataError(path, None, f"none of its {stats['rows']} rows pairs with a question of {base_dir} "
                            "(questionId minus '_cn'): haystacks_from must name the LongMemEval-S dataset "
                            "these rows translate")
        questions.close()
    except BaseException:
        questions.abort()
        raise
    progress(stats["rows"], f", done: {stats['paired']} paired, {stats['unpaired']} unpaired", force=True)
    return stats


def normalize_zh(out_dir, log=print) -> dict:
    """The embedded Chinese functional set (zh_data): one haystack of ten
    sessions whose events are the sentence pieces, time = seq = k (base 0)."""
    from .zh_data import QUERIES, SESSIONS, pieces

    out_dir = Path(out_dir)
    tables = _Tables(out_dir)
    store, questions, haystacks = tables.store, tables.questions, tables.haystacks
    with tables:
        for i, (sid, text) in enumerate(SESSIONS):
            key = store.key(sid, [(p, None, None) for p in pieces(text)])
            haystacks.append(haystack_id=0, position=i, session_key=key, session_id=sid, date=None,
                             base_time=0, date_fallback=False)
        for qi, (query, gold) in enumerate(QUERIES):
            questions.append(q_index=qi, question_id=f"zh#{qi}", question=query, question_type="zh",
                             question_date=None, haystack_id=0, gold=[gold], paired_question_id=None,
                             parse_error=False, answer=None, answer_session_ids=[], question_exact=None)
        tables.close()
    stats = {"questions": len(QUERIES), "sessions": len(store.keys), "events": store.n_events, "haystacks": 1}
    log(f"normalize zh: {stats}")
    return stats
