"""Imported runs: another system's ranked lists, scored beside the Memo
variants under the same harness rules (docs/imported-runs.md).

A variant whose config entry has ``run: {file, format}`` is read from that
file instead of ranked. Formats:

* ``trec``: ``qid Q0 docno rank score tag``, whitespace-separated, one ranked
  session per line (the project's ``run.trec``). A query's lines are ordered
  by rank; a score must not rise as the rank goes down (trec_eval orders by
  score, so a file where the two disagree is refused); one tag per file.
  Ids are read back with :func:`decode_trec_id` (the exports' encoding of
  ids TREC cannot hold, and of a repeated id's n-th occurrence);
* ``retrievallog``: LongMemEval's retrieval log (the project's
  ``retrievallog.jsonl``): one JSON object per line with ``question_id`` and
  ``retrieval_results.ranked_items[].corpus_id``. A corpus id is a scoring id
  (docs/protocol.md#official-metrics: ``answer`` renamed ``noans`` in a session none of whose
  user turns has ``has_answer``); it is mapped back to the haystack session
  it scores, and a plain session id is accepted as itself;
* ``json``: one object ``{question_id: [session_id, ...]}``.

Rules (the same for every format): the question set, gold and denominators
are the dataset's, under its family's skip rule (``harness.skip_reason``,
the Memo variants' and reference retrievers' rule). A list given for a
question the rule skips is ignored (counted); a question the Memo pipeline
counts as a forced miss (``empty_seq``: no token of its tokenizer) is
scored with the run's list, as a reference retriever's is. A question the
rule evaluates and the file does not list is a miss with an empty list
(outcome reason ``absent_from_run``, counted in metrics.json under
``counted_as_miss``). A list is cut at :data:`DEPTH` (the deep list) and its
first :data:`TOP` are the harness list. A session id may be listed as many
times as the question's haystack holds it (each time the next copy, as
``official.ranked_positions`` scores it). When a question id repeats in the
dataset, its n-th list in the file (its n-th line of a retrieval log, its
n-th key of a JSON object, ``qid%#n`` in TREC) is its n-th question.

Errors are one line naming the file, the line and the fix (DataError): a
malformed line, an unknown question id, a session outside the question's
haystack, a session listed more often than the haystack holds it (a
repeated (question, session) pair), a question listed twice, and a file that
names none of the dataset's questions.
"""

from __future__ import annotations

import bisect
import codecs
import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..catalog.row import Row, register
from ..errors import DataError
from ..protocol import DEPTH, TOP

ABSENT = "absent_from_run"
FIX_TREC = "a TREC run line is 'qid Q0 docno rank score tag' (6 fields, whitespace-separated)"
FIX_LOG = ("a retrieval-log line is one JSON object with question_id and retrieval_results.ranked_items, "
           "each item with its corpus_id")
FIX_JSON = "a JSON run is one object {question_id: [session_id, ...]}"


def decode_trec_id(token: str) -> tuple[str, int]:
    """The one decode hook of TREC ids: (id, occurrence) of a qid or docno as
    the exports write it (``exports.decode_trec_id``, where the exports module
    has it: percent-encoded ids, ``id%#n`` for an id's n-th occurrence); a
    token it does not read, or every token without it, is the id itself.
    Every encoded form holds a "%", so a token without one is never decoded."""
    if "%" not in token:
        return token, 1
    from ..evaluation import exports

    decode = getattr(exports, "decode_trec_id", None)
    if decode is None:
        return token, 1
    try:
        return decode(token)
    except ValueError:
        return token, 1


@dataclass
class Listed:
    """One question's list as the file gives it: session tokens in rank
    order (a TREC docno, a corpus id, a session id) and the line of each."""

    qid: str
    line: int | None  # None until a reader that skips line numbers is asked for them (Run.line)
    tokens: list[str] = field(default_factory=list)
    lines: list[int] | None = field(default_factory=list)


@dataclass
class Run:
    """A run file read and matched to a dataset's questions."""

    path: str
    fmt: str
    dataset: str
    lists: dict[int, Listed]  # q_index -> its list
    summary: dict
    locate: Callable[[], None] | None = None  # fills in the lines a fast reader left out

    def fail(self, line, what: str):
        return DataError(self.path, f"line {line}" if line else None, what)

    def line(self, listed: Listed, i: int) -> int:
        """The line of the i-th session of a list."""
        if listed.lines is None and self.locate is not None:
            self.locate()
        return listed.lines[i]

    def sessions(self, listed: Listed, hay_ids: list[str], scoring: list[str] | None = None) -> list[str]:
        """The haystack session ids of a question's list, checked: each token
        names a session of the haystack (``hay_ids``; a retrieval log's scoring
        ids are ``scoring``, position by position), listed at most as often as
        the haystack holds it."""
        toks = listed.tokens
        if (self.fmt == "json" or self.fmt == "trec" and not any("%" in t for t in toks)) \
                and len(set(toks)) == len(toks) and set(hay_ids).issuperset(toks):
            return list(toks)  # the common case: each a distinct session id of the haystack
        copies = Counter(hay_ids)
        by_scoring = {}
        if scoring is not None:
            for s, sid in zip(scoring, hay_ids):
                by_scoring.setdefault(s, sid)
        used: Counter = Counter()
        first: dict[str, int] = {}
        out = []
        for i, tok in enumerate(toks):
            sid = self._session(tok, copies, by_scoring)
            if sid is None:
                raise self.fail(self.line(listed, i), self._outside(tok, listed.qid, copies))
            used[sid] += 1
            if used[sid] > copies[sid]:
                held = f" (its haystack holds it {copies[sid]} times)" if copies[sid] > 1 else ""
                raise self.fail(self.line(listed, i),
                                f"session {sid!r} is listed again for question {listed.qid!r} (first at line "
                                f"{self.line(listed, first[sid])}){held}; list each session of the haystack once")
            first.setdefault(sid, i)
            out.append(sid)
        return out

    def _session(self, tok: str, copies: Counter, by_scoring: dict) -> str | None:
        if self.fmt == "trec":
            sid, _ = decode_trec_id(tok)
            return sid if sid in copies else tok if tok in copies else None
        if self.fmt == "retrievallog" and tok in by_scoring:
            return by_scoring[tok]
        return tok if tok in copies else None

    def _outside(self, tok: str, qid: str, copies: Counter) -> str:
        head, _, tail = tok.rpartition("_")
        turn = (self.fmt == "retrievallog" and head in copies and tail.isdigit())
        hint = (" (a turn id: give the session-level ranking)" if turn else "")
        return (f"session {tok!r} is not in the haystack of question {qid!r}{hint}; rank only the question's own "
                f"haystack sessions (its haystack_session_ids), by their ids")


# --------------------------------------------------------------------------- reading a file


def _line_of(starts: list[int], pos: int) -> int:
    return bisect.bisect_right(starts, pos)


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(path, f"line {line}", "is not UTF-8 text; write the run file in UTF-8") from None


def _read_trec(path: str, data: bytes, err) -> list[tuple[str, int, list[str], list[int]]]:
    """[(qid token, first line, docnos, lines)] in the order queries first appear."""
    text = _decode(path, data)
    fast = _read_trec_columns(data, text)
    return fast if fast is not None else _read_trec_lines(text, err)


def _read_trec_lines(text: str, err) -> list[tuple[str, int, list[str], list[int]]]:
    """:func:`_read_trec` line by line, naming the first line that breaks a rule."""
    rows = []
    for n, line in enumerate(text.split("\n"), 1):
        parts = line.split()
        if len(parts) == 6:
            parts.append(n)
            rows.append(parts)
        elif parts:
            raise err(n, f"has {len(parts)} fields, not 6; {FIX_TREC}")
    try:
        ranks = list(map(int, [r[3] for r in rows]))
    except ValueError:
        bad = next(r for r in rows if not _parses(int, r[3]))
        raise err(bad[6], f"rank {bad[3]!r} is not an integer; {FIX_TREC}") from None
    try:
        scores = list(map(float, [r[4] for r in rows]))
    except ValueError:
        scores = [float(r[4]) if _parses(float, r[4]) else math.nan for r in rows]
    if not all(map(math.isfinite, scores)):
        bad = next(r for r, x in zip(rows, scores) if not math.isfinite(x))
        raise err(bad[6], f"score {bad[4]!r} is not a finite number; {FIX_TREC}")
    if rows and len({r[5] for r in rows}) > 1:
        bad = next(r for r in rows if r[5] != rows[0][5])
        raise err(bad[6], f"run tag {bad[5]!r} differs from line {rows[0][6]}'s {rows[0][5]!r}; give one run per "
                          f"file")
    by_q: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_q.setdefault(r[0], []).append(i)
    out = []
    for qtok, idx in by_q.items():
        idx.sort(key=lambda i: (ranks[i], i))
        seen: dict[str, int] = {}
        prev = None
        for i in idx:
            docno, n = rows[i][2], rows[i][6]
            if prev is not None:
                pn = rows[prev][6]
                if ranks[prev] == ranks[i]:
                    raise err(max(n, pn), f"rank {ranks[i]} is given twice for query {qtok!r} (lines {min(n, pn)} "
                                          f"and {max(n, pn)}); give each line of a query its own rank")
                if scores[i] > scores[prev]:
                    raise err(n, f"score {rows[i][4]} at rank {ranks[i]} is above rank {ranks[prev]}'s "
                                 f"{rows[prev][4]} (line {pn}) for query {qtok!r}; trec_eval orders by score: give "
                                 f"scores that fall as the rank grows")
            if docno in seen:
                m = seen[docno]
                raise err(max(n, m), f"docno {docno!r} is given twice for query {qtok!r} (lines {min(n, m)} and "
                                     f"{max(n, m)}); list each session once")
            seen[docno] = n
            prev = i
        lines = [rows[i][6] for i in idx]
        out.append((qtok, min(lines), [rows[i][2] for i in idx], lines))
    return out


# whitespace other than " " and "\n", which str.split() splits on and the CSV reader does not
_OTHER_SPACE = re.compile(r"[^\S \n]")


def _read_trec_columns(data: bytes, text: str):
    """:func:`_read_trec`'s result by column (pyarrow's CSV reader, numpy),
    for a file of single-space-separated lines with no blank line that breaks
    no rule; None for any other file, which the line-by-line reader then reads
    (and names the first bad line of)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv

    body = data[:-1] if data.endswith(b"\n") else data
    if not body or b"\n\n" in body or body.startswith(b"\n") or _OTHER_SPACE.search(text):
        return None
    names = ["qid", "q0", "docno", "rank", "score", "tag"]
    types = {"qid": pa.string(), "q0": pa.string(), "docno": pa.string(), "rank": pa.int64(),
             "score": pa.float64(), "tag": pa.string()}
    try:
        t = csv.read_csv(pa.py_buffer(data), read_options=csv.ReadOptions(column_names=names),
                         parse_options=csv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False,
                                                        escape_char=False, newlines_in_values=False,
                                                        ignore_empty_lines=False),
                         convert_options=csv.ConvertOptions(column_types=types, strings_can_be_null=False,
                                                            quoted_strings_can_be_null=False, null_values=[]))
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return None
    if t.num_rows != body.count(b"\n") + 1 or any(t.column(n).null_count for n in names):
        return None
    if any(pc.min(pc.utf8_length(t.column(n))).as_py() == 0 for n in ("qid", "q0", "docno", "tag")):
        return None  # an empty field: two spaces in a row
    score = t.column("score").to_numpy()
    if not np.all(np.isfinite(score)) or len(t.column("tag").unique()) > 1:
        return None
    q = t.column("qid").dictionary_encode().combine_chunks()
    d = t.column("docno").dictionary_encode().combine_chunks()
    qc, dc = q.indices.to_numpy().astype(np.int64), d.indices.to_numpy().astype(np.int64)
    rank = t.column("rank").to_numpy()
    order = np.lexsort((np.arange(len(rank)), rank, qc))
    sq, sr, ss = qc[order], rank[order], score[order]
    same = sq[1:] == sq[:-1]
    if np.any(same & (sr[1:] == sr[:-1])) or np.any(same & (ss[1:] > ss[:-1])):
        return None
    if len(np.unique(qc * max(len(d.dictionary), 1) + dc)) != len(qc):
        return None
    qids, docnos = q.dictionary.to_pylist(), d.dictionary.to_pylist()
    cuts = [0, *(np.flatnonzero(~same) + 1).tolist(), len(order)]
    first = np.minimum.reduceat(order, cuts[:-1]) if len(order) else np.array([], dtype=np.int64)
    lines = (order + 1).tolist()
    dcs = dc[order].tolist()
    groups = [(int(first[g]), qids[int(sq[a])], [docnos[i] for i in dcs[a:b]], lines[a:b])
              for g, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    groups.sort(key=lambda g: g[0])  # in the order queries first appear, as the line reader gives them
    return [(qid, first_row + 1, ds, ls) for first_row, qid, ds, ls in groups]


def _parses(kind, text: str) -> bool:
    try:
        kind(text)
        return True
    except ValueError:
        return False


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


def _read_log(path: str, data: bytes, err) -> list[tuple[str, int, list[str], list[int]]]:
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


_WS = re.compile(r"[ \t\n\r]*")


def _read_json(path: str, data: bytes, err) -> list[tuple[str, int | None, list[str], list[int] | None]]:
    """The object's lists in file order, by Python's JSON parser, without
    their lines (None: :func:`_scan_json` finds them when an error needs
    one); a file of any other shape is scanned at once, and its first
    problem named."""
    text = _decode(path, data)
    try:
        pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    except ValueError:
        pairs = None
    if isinstance(pairs, list) and all(type(p) is tuple and type(p[1]) is list and all(type(x) is str for x in p[1])
                                       for p in pairs):
        return [(k, None, v, None) for k, v in pairs]
    return _scan_json(path, data, err)


def _scan_json(path: str, data: bytes, err) -> list[tuple[str, int, list[str], list[int]]]:
    """The object's lists in file order, each key and session with its line
    (a scan of the one shape a JSON run has, so that every error names a line)."""
    text = _decode(path, data)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(pos):
        return _line_of(starts, pos)

    def expect(pos, chars, what):
        pos = _WS.match(text, pos).end()
        if pos >= len(text) or text[pos] not in chars:
            got = "the end of the file" if pos >= len(text) else repr(text[pos])
            raise err(line(pos), f"expected {what}, found {got}; {FIX_JSON}")
        return pos

    def string(pos, what):
        pos = expect(pos, '"', what)
        try:
            return json.decoder.scanstring(text, pos + 1)
        except json.JSONDecodeError as e:
            raise err(line(e.pos), f"{e.msg}; {FIX_JSON}") from None

    out = []
    pos = expect(0, "{", "'{' (the run's object)") + 1
    if text[expect(pos, '"}', "a question id or '}'")] == "}":
        pos = _WS.match(text, pos).end() + 1
    else:
        while True:
            at = _WS.match(text, pos).end()
            qid, pos = string(pos, "a question id (a JSON string)")
            pos = expect(pos, ":", "':'") + 1
            pos = expect(pos, "[", f"'[' (the list of question {qid!r})") + 1
            ids, lines = [], []
            if text[expect(pos, '"]', "a session id (a JSON string) or ']'")] == "]":
                pos = _WS.match(text, pos).end() + 1
            else:
                while True:
                    p = _WS.match(text, pos).end()
                    sid, pos = string(pos, f"a session id (a JSON string) in the list of question {qid!r}")
                    ids.append(sid)
                    lines.append(line(p))
                    pos = expect(pos, ",]", "',' or ']'")
                    pos += 1
                    if text[pos - 1] == "]":
                        break
            out.append((qid, line(at), ids, lines))
            pos = expect(pos, ",}", "',' or '}'") + 1
            if text[pos - 1] == "}":
                break
    rest = _WS.match(text, pos).end()
    if rest < len(text):
        raise err(line(rest), f"text after the run's object; {FIX_JSON}")
    return out


READERS = {"trec": _read_trec, "retrievallog": _read_log, "json": _read_json}
FORMATS = tuple(READERS)


def imported_variant(name: str, family: str, entry: dict, others: dict | None = None):
    """An imported run (config ``variants.<name>.run``) as a variant of a
    family: the family's skip rule on the default recipe (as the reference
    retrievers), so its questions, gold and denominators are the Memo
    variants'; ``against`` is the variant its paired statistics compare it
    with (besides v0.8.0)."""
    from ..catalog.variant import LME, SKIP, Variant
    from ..errors import ConfigError
    from ..memo.recipe import Recipe

    extra = sorted(set(entry) - {"run", "against", "description"})
    if extra:
        raise ConfigError(f"variant {name!r}: an imported run takes no {', '.join(extra)} "
                          f"(only run, against and description)")
    run = entry["run"]
    fmt = run.get("format")
    if fmt not in FORMATS or not run.get("file"):
        raise ConfigError(f"variant {name!r}: run needs file (a path) and format ({', '.join(FORMATS)})")
    if fmt == "retrievallog" and family not in (*LME, "cn"):
        raise ConfigError(f"variant {name!r}: a retrieval log is LongMemEval's format; a dataset of family "
                          f"{family!r} takes format trec or json")
    against = entry.get("against") or ""
    if against == name:
        raise ConfigError(f"variant {name!r}: against names the variant itself; name another variant")
    spec = {"file": str(run["file"]), "format": fmt}
    return Variant(name, Recipe(backend=BACKEND), SKIP[family], f"imported {fmt} run",
                   entry.get("description", f"ranked lists read from {spec['file']}"), against, run=spec)


# An imported run (config ``variants.<name>.run``): another system's lists read from a file; not a
# recipe choice: a user variant states it by ``run``.
BACKEND = "imported"
register(Row(BACKEND, "imported", label="imported run", description="another system's ranked lists read from a run "
             "file (TREC, a LongMemEval retrieval log, or JSON)", module=__name__, config_key="run",
             make_variant=imported_variant))


def read_run(path, fmt: str, questions: list[dict], dataset: str, log=print) -> Run:
    """Read a run file and match its lists to ``questions`` (every question
    of the dataset: ``q_index``, ``question_id``): one :class:`Listed` per
    question the file lists. Sessions are checked per question later
    (:meth:`Run.sessions`), against the haystacks a job has loaded."""
    path = str(path)
    if fmt not in READERS:
        raise DataError(path, None, f"unknown run format {fmt!r}; give one of {', '.join(READERS)}")
    raw = Path(path).read_bytes()
    # a UTF-8 byte order mark is no part of the text (RFC 8259 lets a JSON reader ignore it; a TREC
    # qid is never meant to start with one); the sha256 and size are the file's own
    data = raw.removeprefix(codecs.BOM_UTF8)

    def err(line, what):
        return DataError(path, f"line {line}" if line else None, what)

    entries = READERS[fmt](path, data, err)
    made: list[Listed | None] = []  # per entry, its Listed (None: not matched)

    def locate() -> None:
        """The lines of every entry, for an error message (the JSON reader leaves them out)."""
        for i, (e, (_, line, _, lines)) in enumerate(zip(list(entries), _scan_json(path, data, err))):
            entries[i] = (e[0], line, e[2], lines)
            if i < len(made) and made[i] is not None:
                made[i].line, made[i].lines = line, lines
    by_id: dict[str, list[int]] = {}
    for q in sorted(questions, key=lambda q: q["q_index"]):
        by_id.setdefault(q["question_id"], []).append(q["q_index"])
    lists: dict[int, Listed] = {}
    taken: dict[str, list[int]] = {}  # question id -> the lines of its lists so far
    unknown = []
    for token, line, tokens, lines in entries:
        made.append(None)
        if fmt == "trec":
            qid, n = decode_trec_id(token)
            if qid not in by_id and token in by_id:
                qid, n = token, 1
        else:
            qid = token
            n = len(taken.get(qid, ())) + 1
        if qid not in by_id or n > len(by_id[qid]):
            unknown.append((len(made) - 1, token))
            continue
        taken.setdefault(qid, []).append(len(made) - 1)
        made[-1] = lists[by_id[qid][n - 1]] = Listed(qid, line, tokens, lines)
    if not entries:
        raise err(None, f"holds no ranked lists; give the run of dataset {dataset!r} in format {fmt}")
    if unknown and any(e[1] is None for e in entries):
        locate()
    unknown = [(entries[i][1], token) for i, token in unknown]
    if not lists:
        line, token = min(unknown)
        raise err(line, f"names none of dataset {dataset!r}'s questions (this line names {token!r}); is it a "
                        f"run of another dataset? score it against that dataset")
    if unknown:
        line, token = min(unknown)
        repeated = token in taken and fmt != "trec"
        if repeated:
            raise err(line, f"question {token!r} is listed again (first at line {entries[taken[token][0]][1]}); "
                            f"give each question one list")
        raise err(line, f"question {token!r} is not a question of dataset {dataset!r}; list only its questions "
                        f"(their question_id)")
    summary = {"format": fmt, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
               "questions_listed": len(lists), "entries": sum(len(x.tokens) for x in lists.values())}
    log(f"run {path}: {summary}")
    return Run(path, fmt, dataset, lists, summary, locate)


# --------------------------------------------------------------------------- a segment's tables


def check_record(run: Run, record_path) -> None:
    """The bytes a segment read are the file its run recorded once
    (``record_path``: the record_run stage's sha256), so that every segment
    of a run reads the same file: one replaced between two segments' jobs
    fails here instead of giving a result of two files."""
    record = json.loads(Path(record_path).read_text(encoding="utf-8"))
    if record["sha256"] != run.summary["sha256"]:
        raise DataError(run.path, None, f"its sha256 is {run.summary['sha256']}, not the {record['sha256']} recorded "
                                        f"in {record_path} before the run's segments read it: the file changed while "
                                        f"it was scored; rerun to score it as it is now")


def import_segment(variant, run_path, questions_path, haystacks_path, events_path, dataset: str, segment: int,
                   n_segments: int, log=print, record=None) -> tuple[tuple, dict]:
    """One segment's (rankings, outcomes, deep) tables from a run file, under
    the variant's skip rule, and what the import counted (``ignored``: lists
    given for questions the rule skips, by reason;
    ``truncated``: lists cut at :data:`DEPTH`). ``record``: the run file's
    record (:func:`check_record`), which the bytes read must match."""
    from types import SimpleNamespace

    import pyarrow as pa

    from ..evaluation.official import read_haystacks, scoring_id, user_target_sessions
    from ..retrievers.harness import SegmentRows, segment_bounds, skip_reason
    from ..tables import read_table

    table = read_table(questions_path).sort_by("q_index")
    every = [{"q_index": i, "question_id": q} for i, q in zip(table.column("q_index").to_pylist(),
                                                                table.column("question_id").to_pylist())]
    run = read_run(run_path, variant.run["format"], every, dataset, log=log)
    if record is not None:
        check_record(run, record)
    lo, hi = segment_bounds(table.num_rows, segment, n_segments)
    questions = table.slice(lo, hi - lo).to_pylist()
    hids = sorted({q["haystack_id"] for q in questions if q["haystack_id"] >= 0})
    haystacks = {hid: SimpleNamespace(ids=h["ids"], keys=h["keys"])
                 for hid, h in (read_haystacks(haystacks_path, hids) if hids else {}).items()}
    targets = user_target_sessions(events_path) if run.fmt == "retrievallog" else None
    rows = SegmentRows()
    ignored: Counter = Counter()
    counts = {"listed": 0, "truncated": 0}
    absent: set[int] = set()
    for q in questions:
        hay = haystacks.get(q["haystack_id"])
        listed = run.lists.get(q["q_index"])
        # a forced miss of the Memo pipeline (empty_seq) is the list the run gives, as a reference retriever's
        skip, _ = skip_reason(variant.skip, q, hay, variant)
        ranked = None
        if listed is not None and (hay is not None or skip is None):
            ids = hay.ids if hay is not None else []
            scoring = ([scoring_id(s, k in targets) for s, k in zip(ids, hay.keys)]
                       if targets is not None and hay is not None else None)
            ranked = run.sessions(listed, ids, scoring)
        if skip:
            rows.add(q, hay, skip=skip)
            if listed is not None:
                ignored[skip] += 1
        elif ranked is None:
            rows.add(q, hay)  # an empty list (its reason is set below)
            absent.add(q["q_index"])
        else:
            deep = ranked[:DEPTH]
            counts["listed"] += 1
            counts["truncated"] += len(ranked) > DEPTH
            rows.add(q, hay, final=deep[:TOP], deep=deep)
    rankings, outcomes, deep = rows.tables()
    if absent:
        # evaluated with an empty list, as a variant's empty list is (in the per-type table too), and named
        col = outcomes.schema.get_field_index("reason")
        reasons = [ABSENT if qi in absent else r for qi, r in zip(outcomes.column("q_index").to_pylist(),
                                                                 outcomes.column("reason").to_pylist())]
        outcomes = outcomes.set_column(col, outcomes.schema.field(col), pa.array(reasons, pa.string()))
    seg = {**run.summary, **counts, "absent": len(absent), "ignored": dict(sorted(ignored.items()))}
    log(f"{variant.name} segment {segment}/{n_segments}: {len(questions)} questions, {seg}")
    return (rankings, outcomes, deep), seg
