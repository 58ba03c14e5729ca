"""The session store and the table writer every reader fills: each distinct
session stored once under its key (its identity a SHA-256 of its parts), the
four tables written as they grow, their row groups encoded on another core
(:class:`_WriteBehind`), or, for a part of a file a worker reads
(inparts.py), into Arrow files. The writers write to the paths they are
given (the normalize rule's outputs): no table's file name is spelled here."""

from __future__ import annotations

import hashlib
import struct
from array import array
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate, chain, repeat
from pathlib import Path

import pyarrow as pa

from ..core.layout import TABLE_NAMES
from ..core.tables import BATCH_ROWS, EVENTS, HAYSTACKS, QUESTIONS, SESSIONS, TableWriter, utf8_text


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

    def __init__(self, paths: dict, make_writer=TableWriter):
        """``paths``: the sessions' and events' tables by name;
        ``make_writer(path, schema)``: each table's writer."""
        self.sessions = make_writer(paths["sessions"], SESSIONS)
        self.events = make_writer(paths["events"], EVENTS)
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


class _PartWriter(TableWriter):
    """A :class:`TableWriter` of an Arrow IPC file, uncompressed: the rows of
    a part of a file that a worker read (inparts.py), which the job appends to
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

    def __init__(self, paths: dict, part: bool = False):
        """``paths``: where each table goes, by name (:data:`layout.TABLE_NAMES`)."""
        self.behind = None if part else _WriteBehind()

        def make_writer(path, schema, **options):
            if part:
                return _PartWriter(Path(path), schema, **options)
            return _BehindWriter(path, schema, self.behind, **options)

        self.store = SessionStore(paths, make_writer)
        self.questions = make_writer(paths["questions"], QUESTIONS, batch_rows=QUESTION_BATCH_ROWS)
        self.haystacks = make_writer(paths["haystacks"], HAYSTACKS)

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
