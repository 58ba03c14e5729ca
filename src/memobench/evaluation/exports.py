"""Exports for the field's own tools (docs/protocol.md#deep-lists-and-exports).

* ``run.trec``: TREC run lines ``qid Q0 docno rank score tag``, one per
  position of the ranking given (at most :data:`DEPTH`), score ``51 - rank``;
* ``qrels.trec``: ``qid 0 docno 1`` for the gold the harness scores against
  (LongMemEval ``answer_session_ids`` found in the haystack, LoCoMo evidence
  sessions), questions with no gold (the harness skips them) left out;
* ``retrievallog.jsonl``: LongMemEval's retrieval-log format, one line per
  question, ``metrics.session`` holding that question's official metrics.

The run and the qrels are scored by trec_eval (pytrec_eval, ir_measures) to
the harness's numbers: Success@k is hit@k and RR@10 the reciprocal of the
gold rank, question by question. Two rules make that hold for any input
(docs/tables.md, "TREC ids"):

* every position is a line. The first time an id occurs in its scope (a
  session id in its question's list, a question id in the file) it is written
  as itself; its n-th occurrence (n >= 2) as ``{id}%#{n}``, a docno no qrels
  line names, so a repeated session at rank 3 stays a non-relevant document at
  rank 3, as the harness counts it, and a repeated question id is a query of
  its own, as the harness evaluates it;
* an id TREC cannot hold (whitespace, control characters such as NUL, a lone
  surrogate, or empty) is percent-encoded: :func:`trec_id` and its inverse
  :func:`decode_trec_id`.
"""

from __future__ import annotations

import json
import os
import re
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from . import official
from ..formats import LME_FORMATS
from ..errors import DataError
from ..progress import Progress
from ..protocol import DEPTH
from ..atomic import atomic_path
from ..tables import BATCH_ROWS, escape_lone, exact_text, read_table


# what json.dumps(ensure_ascii=False) writes for a str (the C encoder where built)
_encode_basestring = json.encoder.encode_basestring


def _json_string(value: str) -> str:
    """A str as json.dumps(ensure_ascii=False) writes it, a lone surrogate (an
    exact text's) as its ``\\udXXX`` escape (tables.escape_lone)."""
    return escape_lone(_encode_basestring(value))


def _json_bytes(value) -> bytes:
    """json.dumps(value, ensure_ascii=False) in UTF-8 (lone surrogates
    escaped, as :func:`_json_string`); a str without json.dumps's per-call setup."""
    text = _json_string(value) if type(value) is str else json.dumps(value, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate inside a list or object
        return escape_lone(text).encode("utf-8")


# ---------------------------------------------------------------- TREC ids

# What a TREC id cannot hold as is: "%" (the escape itself), every character
# str.isspace() accepts (Python's str.split, which ir_measures reads the
# files with, splits on them; trec_eval on the ASCII ones; re's \s on str is
# the same test), the C0 and C1 control characters and DEL (NUL ends a C
# string inside pytrec_eval), and the lone surrogates (no UTF-8 form).
_UNSAFE = re.compile(r"[%\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# the encoded forms: "%" + two upper-case hex digits per UTF-8 byte
# (surrogatepass for a lone surrogate); the empty id is "%" alone; an
# occurrence after the first adds "%#" and its number. An encoded id never
# holds "%" without two hex digits after it, so all three read back unambiguously.
EMPTY_ID = "%"
REPEAT_MARK = "%#"
_TOKEN = re.compile(r"(?P<id>%|(?:[^%]|%[0-9A-F]{2})+)(?:%#(?P<n>[2-9]|[1-9][0-9]+))?")
_ESCAPED = re.compile(r"(?:%[0-9A-F]{2})+")


def _escape(m: re.Match) -> str:
    return "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "surrogatepass"))


def trec_id(value: str, occurrence: int = 1) -> str:
    """``value`` as a TREC qid or docno: itself when TREC can hold it, else
    percent-encoded (module docstring); ``occurrence`` n >= 2 appends ``%#n``."""
    token = _UNSAFE.sub(_escape, value) if value else EMPTY_ID
    return token if occurrence == 1 else f"{token}{REPEAT_MARK}{occurrence}"


def decode_trec_id(token: str) -> tuple[str, int]:
    """(id, occurrence) of a token :func:`trec_id` writes; ValueError for any
    other string (a token has exactly one spelling)."""
    m = _TOKEN.fullmatch(token)
    if m is None:
        raise ValueError(f"{token!r} is not a memobench TREC id")
    body = m.group("id")
    value = "" if body == EMPTY_ID else _ESCAPED.sub(
        lambda e: bytes.fromhex(e.group().replace("%", "")).decode("utf-8", "surrogatepass"), body)
    n = int(m.group("n") or 1)
    if trec_id(value, n) != token:
        raise ValueError(f"{token!r} is not a memobench TREC id (not its canonical spelling)")
    return value, n


def question_tokens(questions: list[dict]) -> dict[int, str]:
    """{q_index: qid token} over the file's questions (q_index order): a
    question id's n-th question is its n-th occurrence (run and qrels agree,
    whichever questions each writes)."""
    seen: dict[str, int] = {}
    out = {}
    for q in sorted(questions, key=lambda q: q["q_index"]):
        n = seen[q["question_id"]] = seen.get(q["question_id"], 0) + 1
        out[q["q_index"]] = trec_id(q["question_id"], n)
    return out


class _FirstDocnos(dict):
    """{session id: the docno of its first occurrence}, each made once."""

    def __missing__(self, sid):
        self[sid] = got = trec_id(sid)
        return got


class _LineEnds(dict):
    """{rank: the end of its run line, `` rank score tag``}, each made once."""

    def __init__(self, tag: str):
        super().__init__()
        self.tag = tag

    def __missing__(self, rank):
        self[rank] = got = f" {rank} {DEPTH + 1 - rank} {self.tag}\n"
        return got


def write_run(rankings_path, questions_path, tag: str, out, log=print) -> dict:
    """``run.trec`` from a rankings table of any depth (first :data:`DEPTH`
    ranks): one line per position, ids as :func:`trec_id` writes them."""
    tag = trec_id(tag)
    qtok = question_tokens(read_table(questions_path, columns=["q_index", "question_id"]).to_pylist())
    t = read_table(rankings_path, columns=["rank", "session_id", "q_index"])
    t = t.sort_by([("q_index", "ascending"), ("rank", "ascending")]).to_pydict()
    stats = {"questions": 0, "lines": 0, "repeated_question_ids": 0, "repeated_sessions": 0,
             "encoded_question_ids": 0, "encoded_session_ids": 0}
    ranks, sids = t["rank"], t["session_id"]
    # a question's lines at once: ids and line ends made once each, not per line
    first, ends = _FirstDocnos(), _LineEnds(tag)
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for qi, lo, hi in official.sorted_runs(t["q_index"]):
            q_ranks = ranks[lo:hi]
            if q_ranks[-1] > DEPTH:  # in rank order: the ranks past DEPTH come last
                q_ranks = q_ranks[:bisect_right(q_ranks, DEPTH)]
                if not q_ranks:
                    continue
            if qi not in qtok:
                raise DataError(rankings_path, f"q_index {qi}", f"is not a question of {questions_path}")
            qid = qtok[qi]
            stats["questions"] += 1
            stats["repeated_question_ids"] += REPEAT_MARK in qid
            stats["encoded_question_ids"] += "%" in qid.split(REPEAT_MARK)[0]
            q_sids = sids[lo:lo + len(q_ranks)]
            if len(set(q_sids)) == len(q_sids):
                docnos = [first[sid] for sid in q_sids]
            else:  # an id's n-th occurrence (n >= 2) has a docno of its own
                occurrences: dict[str, int] = {}
                docnos = []
                for sid in q_sids:
                    n = occurrences[sid] = occurrences.get(sid, 0) + 1
                    docnos.append(first[sid] if n == 1 else trec_id(sid, n))
                    stats["repeated_sessions"] += n > 1
            # an encoded id part holds a "%" (the repeat mark's is after it)
            stats["encoded_session_ids"] += sum(["%" in docno.split(REPEAT_MARK)[0] for docno in docnos])
            head = f"{qid} Q0 "
            f.write("".join([head + docno + ends[rank] for docno, rank in zip(docnos, q_ranks)]))
            stats["lines"] += len(docnos)
    log(f"run.trec {tag}: {stats}")
    return stats


def write_qrels(questions_path, out, log=print) -> dict:
    """``qrels.trec``: the harness's gold per question (``questions.gold``),
    ids as :func:`trec_id` writes them (a gold id's first occurrence)."""
    rows = read_table(questions_path, columns=["q_index", "question_id", "gold", "haystack_id", "parse_error"])
    rows = rows.sort_by("q_index").to_pylist()
    qtok = question_tokens(rows)
    stats = {"questions": 0, "lines": 0, "no_gold": 0, "repeated_question_ids": 0}
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for q in rows:
            if q["parse_error"] or q["haystack_id"] < 0 or not q["gold"]:
                stats["no_gold"] += 1
                continue
            qid = qtok[q["q_index"]]
            stats["questions"] += 1
            stats["repeated_question_ids"] += REPEAT_MARK in qid
            for sid in dict.fromkeys(q["gold"]):
                f.write(f"{qid} 0 {trec_id(sid)} 1\n")
                stats["lines"] += 1
    log(f"qrels.trec: {stats}")
    return stats


# sessions.bin: every session's two strings (UTF-8) back to back, then the
# index: n sorted session keys and 2n + 1 offsets (string 2i is session i's
# turns JSON, 2i + 1 its user text as a JSON string), then a footer: n, the
# index's offset, magic.
SESSION_MAGIC = b"MBSJv2\0\0"
_FOOTER = struct.Struct("<qq8s")


def write_session_json(events_path, out, log=print) -> dict:
    """Each session once, as the retrieval log writes it: its turns as JSON
    text (``{"role", "content"}``, plus ``"has_answer": true`` where the turn
    has it, in ``seq`` order) and its user turns' contents joined by one space
    (a ranked item's ``text``), as a JSON string. Written once per dataset, in
    session-key order, to a flat file read by offset (:class:`SessionJson`): a
    variant's log reads only the sessions it writes, whatever the dataset's
    size, and holds none in memory. Each string is json.dumps's own
    (``ensure_ascii=False``; an exact text's lone surrogate as its ``\\udXXX``
    escape, :func:`_json_string`), built a batch of events at a time."""
    columns = ["session_key", "seq", "role", "text", "has_answer"]
    exact = "text_exact" in pq.ParquetFile(events_path).schema_arrow.names  # (tables.utf8_text)
    keys: list[int] = []
    offsets = [0]
    # the session being gathered (its last batch may go on in the next): its
    # turns as (seq, role, JSON object, escaped content)
    pending_key, pending = None, []
    with atomic_path(out) as tmp, open(tmp, "wb") as f:

        def flush(turns: list) -> None:
            if any(turns[i][0] > turns[i + 1][0] for i in range(len(turns) - 1)):
                turns = sorted(turns, key=lambda t: t[0])
            # JSON escapes character by character: the joined contents' string
            # is the escaped contents joined
            user = '"' + " ".join([t[3] for t in turns if t[1] == "user"]) + '"'
            for b in (("[" + ", ".join([t[2] for t in turns]) + "]").encode("utf-8"), user.encode("utf-8")):
                f.write(b)
                offsets.append(offsets[-1] + len(b))
            keys.append(pending_key)

        events = pq.ParquetFile(events_path)
        progress = Progress(log, "session json", total=events.metadata.num_rows, unit="events")
        done = 0
        for batch in events.iter_batches(batch_size=BATCH_ROWS, columns=columns + ["text_exact"] * exact):
            progress(done)
            done += batch.num_rows
            c = batch.to_pydict()
            roles = {r: "null" if r is None else _json_string(r) for r in set(c["role"])}
            if not exact or c["text_exact"].count(None) == len(c["text_exact"]):
                texts = [_encode_basestring(t) for t in c["text"]]
            else:  # a text with a lone surrogate: its exact form (tables.utf8_text)
                texts = [_json_string(exact_text(t, x)) for t, x in zip(c["text"], c["text_exact"])]
            objs = [f'{{"role": {roles[r]}, "content": {t}, "has_answer": true}}' if ha else
                    f'{{"role": {roles[r]}, "content": {t}}}'
                    for r, t, ha in zip(c["role"], texts, c["has_answer"])]
            k = batch.column("session_key").to_numpy()
            bounds = [0, *(np.flatnonzero(k[1:] != k[:-1]) + 1).tolist(), len(k)]
            seqs, batch_roles = c["seq"], c["role"]
            for a, b in zip(bounds[:-1], bounds[1:]):
                key = c["session_key"][a]
                if key != pending_key:
                    if pending_key is not None:
                        if key < pending_key:
                            raise DataError(events_path, f"session {key}", "events are not in session-key order")
                        flush(pending)
                    pending_key, pending = key, []
                pending.extend(zip(seqs[a:b], batch_roles[a:b], objs[a:b], [t[1:-1] for t in texts[a:b]]))
        if pending_key is not None:
            flush(pending)
        index_at = offsets[-1]
        f.write(array("q", keys).tobytes())
        f.write(array("q", offsets).tobytes())
        f.write(_FOOTER.pack(len(keys), index_at, SESSION_MAGIC))
    progress(done, f", done: {len(keys)} sessions, {offsets[-1]} bytes", force=True)
    return {"sessions": len(keys), "bytes": offsets[-1]}


class SessionJson:
    """Reads :func:`write_session_json`'s file by offset (``os.pread``): the
    index (16 bytes per session) is held, the strings are read when asked."""

    def __init__(self, path):
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDONLY)
        size = os.fstat(self.fd).st_size
        bad = DataError(self.path, None, "not a session JSON file of this version; delete it and rerun")
        if size < _FOOTER.size:
            raise bad
        n, index_at, magic = _FOOTER.unpack(os.pread(self.fd, _FOOTER.size, size - _FOOTER.size))
        if magic != SESSION_MAGIC or index_at + 8 * (3 * n + 1) + _FOOTER.size != size:
            raise bad
        index = array("q")
        index.frombytes(os.pread(self.fd, 8 * (3 * n + 1), index_at))
        self.keys = index[:n]
        self.offsets = index[n:]
        self.rows = {k: i for i, k in enumerate(self.keys)}

    def _bytes(self, j: int) -> bytes:
        lo, hi = self.offsets[j], self.offsets[j + 1]
        return os.pread(self.fd, hi - lo, lo) if hi > lo else b""

    def turns(self, key: int) -> bytes:
        """The session's turns as JSON text in UTF-8, as the file holds it (the
        retrieval log copies it as is); a session without events is ``[]``."""
        i = self.rows.get(key)
        return b"[]" if i is None else self._bytes(2 * i)

    def user_text_json(self, key: int) -> bytes:
        """The session's user text as a JSON string in UTF-8, as ``json.dumps``
        (``ensure_ascii=False``) writes it: the log copies it as is."""
        i = self.rows.get(key)
        return b'""' if i is None else self._bytes(2 * i + 1)

    def user_text(self, key: int) -> str:
        return json.loads(self.user_text_json(key))

    def close(self) -> None:
        os.close(self.fd)


def write_retrievallog(fmt: str, questions_path, haystacks_path, events_path, rankings_path, out,
                       session_json_path, sessions: bool = True, log=print, rows: list | None = None,
                       haystacks: dict | None = None) -> dict:
    """``retrievallog.jsonl`` (LongMemEval-format datasets): each question's
    fields, then ``retrieval_results`` with the ranked documents (scoring id,
    user-turn text, the haystack's date) to :data:`DEPTH` and the question's
    official session metrics. ``sessions=False`` leaves out ``haystack_sessions``
    (the bulk of each line). Each line is the JSON of one object, keys in the
    order above; the sessions' JSON and the ranked items' texts (as JSON
    strings) come ready-made from ``session_json_path``
    (:func:`write_session_json`) and are joined as ``json.dumps`` would write
    them.
    ``rows`` and ``haystacks``: the per-question rows of ``official.compute``
    on the same tables and the haystacks it read, when the caller has them;
    else they are computed here (the retrievallog job)."""
    if fmt not in LME_FORMATS:
        raise DataError(questions_path, None, f"format {fmt!r} has no LongMemEval retrieval log")
    if rows is None:
        haystacks = {}
        _, rows = official.compute(fmt, questions_path, haystacks_path, events_path, rankings_path, log=log,
                                   haystacks_out=haystacks)
    cols = ["q_index", "question", "question_date", "answer", "answer_session_ids", "haystack_id", "question_exact"]
    qs = {q["q_index"]: q for q in read_table(questions_path, columns=cols).to_pylist()}
    for q in qs.values():
        q["question"] = exact_text(q["question"], q.pop("question_exact"))
    needed = {qs[r["q_index"]]["haystack_id"] for r in rows}
    hay = haystacks if haystacks is not None and needed <= haystacks.keys() else \
        official.read_haystacks(haystacks_path, needed)
    store = SessionJson(session_json_path)
    progress = Progress(log, "retrievallog", total=len(rows), unit="questions")
    with atomic_path(out) as tmp, open(tmp, "wb") as f:
        for n, r in enumerate(rows):
            progress(n)
            q = qs[r["q_index"]]
            h = hay[q["haystack_id"]]
            head = {"question_id": r["question_id"], "question_type": r["question_type"],
                    "question": q["question"],
                    "answer": json.loads(q["answer"]) if q["answer"] is not None else None,
                    "question_date": q["question_date"], "haystack_dates": h["dates"]}
            # json.dumps of the whole line, written piece by piece: each ranked
            # item {"corpus_id", "text", "timestamp"} with its text ready-made
            items = b", ".join([b'{"corpus_id": ' + _json_bytes(sid)
                                + b', "text": ' + store.user_text_json(h["keys"][p])
                                + b', "timestamp": ' + _json_bytes(h["dates"][p]) + b"}"
                                for p, sid in zip(r["positions"][:DEPTH], r["scoring"][:DEPTH])])
            f.write(_json_bytes(head)[:-1])
            if sessions:
                f.write(b', "haystack_sessions": [')
                f.write(b", ".join([store.turns(k) for k in h["keys"]]))
                f.write(b"]")
            f.write(b', "haystack_session_ids": ' + _json_bytes(h["ids"])
                    + b', "answer_session_ids": ' + _json_bytes(q["answer_session_ids"])
                    + b', "retrieval_results": {"query": ' + _json_bytes(q["question"])
                    + b', "ranked_items": [' + items
                    + b'], "metrics": ' + _json_bytes({"session": r["metrics"], "turn": {}}) + b"}}\n")
    store.close()
    progress(len(rows), f", done ({os.path.getsize(out)} bytes)", force=True)
    return {"questions": len(rows)}
