"""TREC runs: ``qid Q0 docno rank score tag`` lines, read (:func:`read`, an
imported run) and written (:func:`write`, a variant's ``run.trec``), with
the TREC ids both sides use (:func:`trec_id`, :func:`decode_trec_id`).

The run is scored by trec_eval (pytrec_eval, ir_measures) to the harness's
numbers (docs/protocol.md#deep-lists-and-exports): Success@k is hit@k and
RR@10 the reciprocal of the gold rank, question by question. Two rules make
that hold for any input (docs/tables.md, "TREC ids"):

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

import math
import re
from bisect import bisect_right

from ..core.errors import DataError
from ..core.protocol import DEPTH
from ..core.tables import atomic_path, read_table, sort_by, sorted_runs
from .text import decode, parses

NAME = "trec"
FIX_TREC = "a TREC run line is 'qid Q0 docno rank score tag' (6 fields, whitespace-separated)"



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


def write(rankings_path, questions_path, tag: str, out, log=print, id_column: str = "session_id") -> dict:
    """``run.trec`` from a rankings table of any depth (first :data:`DEPTH`
    ranks): one line per position, ids as :func:`trec_id` writes them; the
    docnos are ``id_column``'s (a turn table's ``turn_id`` for a turn run)."""
    tag = trec_id(tag)
    qtok = question_tokens(read_table(questions_path, columns=["q_index", "question_id"]).to_pylist())
    t = read_table(rankings_path, columns=["rank", id_column, "q_index"])
    t = sort_by(t, [("q_index", "ascending"), ("rank", "ascending")]).to_pydict()
    t["session_id"] = t.pop(id_column)
    stats = {"questions": 0, "lines": 0, "repeated_question_ids": 0, "repeated_sessions": 0,
             "encoded_question_ids": 0, "encoded_session_ids": 0}
    ranks, sids = t["rank"], t["session_id"]
    # the common case: every id is its own docno (none empty, none with a character to encode), checked at once
    plain = all(sids) and not _UNSAFE.search("".join(sids))
    # a question's lines at once: ids and line ends made once each, not per line
    first, ends = _FirstDocnos(), _LineEnds(tag)
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for qi, lo, hi in sorted_runs(t["q_index"]):
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
                docnos = q_sids if plain else [first[sid] for sid in q_sids]
            else:  # an id's n-th occurrence (n >= 2) has a docno of its own
                occurrences: dict[str, int] = {}
                docnos = []
                for sid in q_sids:
                    n = occurrences[sid] = occurrences.get(sid, 0) + 1
                    docnos.append(first[sid] if n == 1 else trec_id(sid, n))
                    stats["repeated_sessions"] += n > 1
            if not plain:  # an encoded id part holds a "%" (the repeat mark's is after it)
                stats["encoded_session_ids"] += sum(["%" in docno.split(REPEAT_MARK)[0] for docno in docnos])
            head = f"{qid} Q0 "
            f.write("".join(map(head.__add__, map(str.__add__, docnos, map(ends.__getitem__, q_ranks)))))
            stats["lines"] += len(docnos)
    log(f"run.trec {tag}: {stats}")
    return stats


def read_id(token: str) -> tuple[str, int]:
    """(id, occurrence) of a qid or docno of a run being read: as
    :func:`decode_trec_id` decodes what :func:`write` writes (percent-encoded
    ids, ``id%#n`` for an id's n-th occurrence); a token it does not read is
    the id itself. Every encoded form holds a "%", so a token without one is
    never decoded."""
    if "%" not in token:
        return token, 1
    try:
        return decode_trec_id(token)
    except ValueError:
        return token, 1


def read(path: str, data: bytes, err) -> list[tuple[str, int, list[str], list[int]]]:
    """[(qid token, first line, docnos, lines)] in the order queries first appear."""
    text = decode(path, data)
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
        bad = next(r for r in rows if not parses(int, r[3]))
        raise err(bad[6], f"rank {bad[3]!r} is not an integer; {FIX_TREC}") from None
    try:
        scores = list(map(float, [r[4] for r in rows]))
    except ValueError:
        scores = [float(r[4]) if parses(float, r[4]) else math.nan for r in rows]
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
