"""LongMemEval's retrieval log (``retrievallog.jsonl``): one JSON object per
question with its ``retrieval_results.ranked_items``; read (:func:`read`, an
imported run) and written (:func:`write`, a variant's log, each line's
``metrics.session`` that question's official metrics), with the sessions'
JSON store the writer joins (:func:`write_session_json`, :class:`SessionJson`).
"""

from __future__ import annotations

import json
import os
import re
import struct
from array import array
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from ..core.errors import DataError
from ..core.formats import LME_FORMATS
from ..core.progress import Progress
from ..core.protocol import DEPTH
from ..core.tables import BATCH_ROWS, atomic_path, escape_lone, exact_text, read_table

NAME = "retrievallog"
FIX_LOG = ("a retrieval-log line is one JSON object with question_id and retrieval_results.ranked_items, "
           "each item with its corpus_id")


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
        self._turns: dict[int, list[bytes]] = {}

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

    def turn_texts_json(self, key: int) -> list[bytes]:
        """Each turn's content as a JSON string in UTF-8 (as :meth:`user_text_json`), in turn order
        (the index is the turn's ``seq``); the last few sessions asked are kept."""
        got = self._turns.get(key)
        if got is None:
            if len(self._turns) >= 256:
                self._turns.clear()
            got = self._turns[key] = [_json_bytes(t["content"]) for t in json.loads(self.turns(key))]
        return got

    def user_text(self, key: int) -> str:
        return json.loads(self.user_text_json(key))

    def close(self) -> None:
        os.close(self.fd)


def write(fmt: str, questions_path, rows: list, haystacks: dict, out, session_json_path, sessions: bool = True,
          log=print) -> dict:
    """``retrievallog.jsonl`` (LongMemEval-format datasets): each question's
    fields, then ``retrieval_results`` with the ranked documents (scoring id,
    user-turn text, the haystack's date) to :data:`DEPTH` and the question's
    official session metrics; a turn ranking's row (one with ``items``:
    (session position, turn index, scoring id) best first, the whole list)
    lists its turns, each with its own text, and its metrics at both grains
    (``metrics.turn``, and ``metrics.session`` from the turns by LongMemEval's
    turn2session rule), as LongMemEval's ``run_retrieval.py --granularity
    turn`` writes them. ``sessions=False`` leaves out ``haystack_sessions``
    (the bulk of each line). Each line is the JSON of one object, keys in the
    order above; the sessions' JSON and the ranked items' texts (as JSON
    strings) come ready-made from ``session_json_path``
    (:func:`write_session_json`) and are joined as ``json.dumps`` would write
    them.
    ``rows`` and ``haystacks``: the per-question rows of the official
    metrics on the same tables (evaluation.official.compute) and the
    haystacks of their questions."""
    if fmt not in LME_FORMATS:
        raise DataError(questions_path, None, f"format {fmt!r} has no LongMemEval retrieval log")
    cols = ["q_index", "question", "question_date", "answer", "answer_session_ids", "haystack_id", "question_exact"]
    qs = {q["q_index"]: q for q in read_table(questions_path, columns=cols).to_pylist()}
    for q in qs.values():
        q["question"] = exact_text(q["question"], q.pop("question_exact"))
    hay = haystacks
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
            if "items" in r:  # a turn ranking
                ranked = [(sid, store.turn_texts_json(h["keys"][p])[seq], p) for p, seq, sid in r["items"]]
                metrics = {"session": _in_log_order(r["turn2session"]), "turn": _in_log_order(r["metrics"])}
            else:
                ranked = [(sid, store.user_text_json(h["keys"][p]), p)
                          for p, sid in zip(r["positions"][:DEPTH], r["scoring"][:DEPTH])]
                metrics = {"session": _in_log_order(r["metrics"]), "turn": {}}
            items = b", ".join([b'{"corpus_id": ' + _json_bytes(sid) + b', "text": ' + text
                                + b', "timestamp": ' + _json_bytes(h["dates"][p]) + b"}" for sid, text, p in ranked])
            f.write(_json_bytes(head)[:-1])
            if sessions:
                f.write(b', "haystack_sessions": [')
                f.write(b", ".join([store.turns(k) for k in h["keys"]]))
                f.write(b"]")
            f.write(b', "haystack_session_ids": ' + _json_bytes(h["ids"])
                    + b', "answer_session_ids": ' + _json_bytes(q["answer_session_ids"])
                    + b', "retrieval_results": {"query": ' + _json_bytes(q["question"])
                    + b', "ranked_items": [' + items
                    + b'], "metrics": ' + _json_bytes(metrics) + b"}}\n")
    store.close()
    progress(len(rows), f", done ({os.path.getsize(out)} bytes)", force=True)
    return {"questions": len(rows)}


_LOG_METRICS = ("recall_any", "recall_all", "ndcg_any")


def _in_log_order(metrics: dict) -> dict:
    """A question's metrics in the order LongMemEval's log lists them: by k, then recall_any,
    recall_all, ndcg_any."""
    def key(name):
        metric, k = name.rsplit("@", 1)
        return int(k), _LOG_METRICS.index(metric)

    return {n: metrics[n] for n in sorted(metrics, key=key)}


_QID_FIRST = re.compile(r'\s*\{\s*"question_id"\s*:\s*"')
_RESULTS_KEY = re.compile(r'"retrieval_results"\s*:\s*')


def _log_fields(line: str) -> tuple[object, object]:
    """(question_id, retrieval_results) of one retrieval-log line. Most of a
    line is the haystack's sessions: where the question id comes first and
    the results last (as LongMemEval and this project write them) only those
    two are decoded; otherwise, or on any doubt, the whole line."""
    dec = json.JSONDecoder()
    m = _QID_FIRST.match(line)
    at = line.rfind('"retrieval_results"')
    if m and at > 0:
        try:
            qid, _ = json.decoder.scanstring(line, m.end())
            k = _RESULTS_KEY.match(line, at)
            if k:
                results, end = dec.raw_decode(line, k.end())
                if line[end:].strip() == "}":
                    return qid, results
        except ValueError:
            pass
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj.get("question_id"), obj.get("retrieval_results")


def read(path: str, data: bytes, err) -> list[tuple[str, int, list[str], list[int]]]:
    out = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise err(n, "is not UTF-8 text; write the run file in UTF-8") from None
        try:
            qid, results = _log_fields(line)
        except ValueError as e:
            why = f"{e.msg} at character {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
            raise err(n, f"is not one JSON object ({why}); {FIX_LOG}") from None
        if not isinstance(qid, str):
            raise err(n, f"has no question_id string; {FIX_LOG}")
        items = results.get("ranked_items") if isinstance(results, dict) else None
        if not isinstance(items, list):
            raise err(n, f"has no retrieval_results.ranked_items list; {FIX_LOG}")
        ids = []
        for i, item in enumerate(items, 1):
            cid = item.get("corpus_id") if isinstance(item, dict) else None
            if not isinstance(cid, str):
                raise err(n, f"ranked item {i} of question {qid!r} has no corpus_id string; {FIX_LOG}")
            ids.append(cid)
        out.append((qid, n, ids, [n] * len(ids)))
    return out
