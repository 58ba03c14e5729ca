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

import codecs
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..catalog.row import Row, register
from ..runs import FORMATS
from ..core.errors import DataError
from ..core.protocol import DEPTH, TOP

ABSENT = "absent_from_run"


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
            sid = self._named(tok, copies, by_scoring)
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

    def turns(self, listed: Listed, turn_ids: list[str], scoring: list[str] | None = None) -> list[int]:
        """A turn run's list as turn corpus indices, checked: each token names
        a turn of the haystack (``turn_ids``, turns.HaystackTurns.ids; a
        retrieval log's corpus ids are LongMemEval's turn scoring ids,
        ``scoring``), its n-th mention the n-th turn holding that id."""
        slots: dict[str, list[int]] = {}
        for j, t in enumerate(turn_ids):
            slots.setdefault(t, []).append(j)
        by_scoring: dict[str, str] = {}
        for sc, t in zip(scoring or (), turn_ids):
            by_scoring.setdefault(sc, t)
        used: Counter = Counter()
        out = []
        for i, tok in enumerate(listed.tokens):
            tid = self._named(tok, slots, by_scoring)
            if tid is None:
                raise self.fail(self.line(listed, i),
                                f"turn {tok!r} is not a turn of the haystack of question {listed.qid!r}; a turn run "
                                f"names turns by their ids ({{session_id}}_{{index + 1}}, the index counting every "
                                f"turn of the session from 0; LoCoMo's dia_id)")
            if used[tid] >= len(slots[tid]):
                raise self.fail(self.line(listed, i), f"turn {tid!r} is listed again for question {listed.qid!r}; "
                                                      f"list each turn of the haystack once")
            out.append(slots[tid][used[tid]])
            used[tid] += 1
        return out

    def _named(self, tok: str, known, by_scoring: dict) -> str | None:
        """The session (or turn) id among ``known`` a token names: a TREC docno
        decoded, a retrieval log's scoring id mapped back; None when none."""
        if self.fmt == "trec":
            from ..runs import trec

            name, _ = trec.read_id(tok)
            return name if name in known else tok if tok in known else None
        if self.fmt == "retrievallog" and tok in by_scoring:
            return by_scoring[tok]
        return tok if tok in known else None

    def _outside(self, tok: str, qid: str, copies: Counter) -> str:
        head, _, tail = tok.rpartition("_")
        turn = (self.fmt == "retrievallog" and head in copies and tail.isdigit())
        hint = (" (a turn id: give the session-level ranking)" if turn else "")
        return (f"session {tok!r} is not in the haystack of question {qid!r}{hint}; rank only the question's own "
                f"haystack sessions (its haystack_session_ids), by their ids")


# --------------------------------------------------------------------------- reading a file


def readers() -> dict:
    """Each format's reader (runs/): its name -> read(path, data, err) -> [(qid token, line, tokens, lines)]
    (imported when a run is read: the catalog imports this module to learn what a variant reads, and
    the TREC and retrieval-log readers bring numpy and pyarrow)."""
    from ..runs import json_run, retrieval_log, trec

    return {m.NAME: m.read for m in (trec, retrieval_log, json_run)}


def imported_variant(name: str, family: str, entry: dict, others: dict | None = None):
    """An imported run (config ``variants.<name>.run``) as a variant of a
    family: the family's skip rule on the default recipe (as the reference
    retrievers), so its questions, gold and denominators are the Memo
    variants'; ``against`` is the variant its paired statistics compare it
    with (besides v0.8.0)."""
    from ..catalog.variant import LME, SKIP, Variant
    from ..core.errors import ConfigError
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
             make_variant=imported_variant, turns=True))


def read_run(path, fmt: str, questions: list[dict], dataset: str, log=print) -> Run:
    """Read a run file and match its lists to ``questions`` (every question
    of the dataset: ``q_index``, ``question_id``): one :class:`Listed` per
    question the file lists. Sessions are checked per question later
    (:meth:`Run.sessions`), against the haystacks a job has loaded."""
    from ..runs import json_run, trec

    path = str(path)
    known = readers()
    if fmt not in known:
        raise DataError(path, None, f"unknown run format {fmt!r}; give one of {', '.join(known)}")
    raw = Path(path).read_bytes()
    # a UTF-8 byte order mark is no part of the text (RFC 8259 lets a JSON reader ignore it; a TREC
    # qid is never meant to start with one); the sha256 and size are the file's own
    data = raw.removeprefix(codecs.BOM_UTF8)

    def err(line, what):
        return DataError(path, f"line {line}" if line else None, what)

    entries = known[fmt](path, data, err)
    made: list[Listed | None] = []  # per entry, its Listed (None: not matched)

    def locate() -> None:
        """The lines of every entry, for an error message (the JSON reader leaves them out)."""
        for i, (e, (_, line, _, lines)) in enumerate(zip(list(entries), json_run.scan(path, data, err))):
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
            qid, n = trec.read_id(token)
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
                   n_segments: int, log=print, record=None, fmt: str = "") -> tuple[tuple, dict]:
    """One segment's (rankings, outcomes, deep, turns) tables from a run file,
    under the variant's skip rule, and what the import counted (``ignored``:
    lists given for questions the rule skips, by reason; ``truncated``: lists
    cut at :data:`DEPTH`). ``record``: the run file's record
    (:func:`check_record`), which the bytes read must match. A turn run
    (``grain: turn``) names turns: its turn table holds its whole lists, its
    session lists are each session at its best turn (``fmt``: the dataset's
    format, whose rule says which turns are documents)."""
    import pyarrow as pa

    from .harness import SegmentRows, load_questions, scoring_id, skip_reason, user_target_sessions
    from .turns import TurnRows, haystack_turns, sessions_by_best_turn, session_turns, turn_scoring_id
    from ..core.formats import LME_FORMATS
    from ..core.tables import read_table

    table = read_table(questions_path).sort_by("q_index")
    every = [{"q_index": i, "question_id": q} for i, q in zip(table.column("q_index").to_pylist(),
                                                                table.column("question_id").to_pylist())]
    run = read_run(run_path, variant.run["format"], every, dataset, log=log)
    if record is not None:
        check_record(run, record)
    questions, haystacks = load_questions(questions_path, haystacks_path, segment, n_segments)
    by_turns = variant.grain == "turn"
    targets = user_target_sessions(events_path) if run.fmt == "retrievallog" and not by_turns else None
    turn_rows = TurnRows()
    if by_turns:  # the segment's turn documents, by the dataset format's rule
        if not fmt or events_path is None:
            raise ValueError(f"variant {variant.name!r}: a turn run is read with its dataset's format and events")
        keys = {k for h in haystacks.values() for k in h.keys}
        by_key = session_turns(events_path, fmt, keys, texts=False) if keys else {}
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
        turn_list = None
        if listed is not None and (hay is not None or skip is None) and by_turns:
            ids = hay.ids if hay is not None else []
            turns = haystack_turns(ids, hay.keys if hay is not None else [], by_key)
            scoring = ([turn_scoring_id(ids[p], t, h) for p, t, h in zip(turns.positions, turns.seqs,
                                                                          turns.has_answer)]
                       if run.fmt == "retrievallog" and fmt in LME_FORMATS else None)
            turn_list = run.turns(listed, turns.ids, scoring)
            positions, _ = sessions_by_best_turn(turn_list, turns)
            ranked = [ids[p] for p in positions]
        elif listed is not None and (hay is not None or skip is None):
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
        elif turn_list is not None:
            counts["listed"] += 1
            turn_rows.add(q, ids, turns, turn_list)
            rows.add(q, hay, final=ranked[:TOP], deep=ranked[:DEPTH], positions=positions[:DEPTH])
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
    return (rankings, outcomes, deep, turn_rows.table()), seg
