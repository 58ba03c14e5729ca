"""Your own retriever: a Python callable named in the config ranks each
question's haystack, under the harness rules of the dataset's family (the
same questions, gold and denominators as the Memo variants)::

    variants:
      my-retriever:
        retriever:
          callable: my_retrievers.py:rank   # a file and a function, or module:function
          params: {k1: 1.2}                 # keyword arguments of every call
          documents: user                   # a session's text: its user turns, or all turns
          prepare: my_index.py:embed        # optional per-session work, cached

``rank(question, haystack, **params)`` gets a :class:`Question` and the
:class:`Haystack` it searches, and returns the sessions best first: haystack
positions (ints) or session ids (strings), optionally with their scores as
``(ranking, scores)``. A variant with ``grain: turn`` ranks turns: ``rank``
gets the haystack's :class:`Turns` and returns turn positions or turn ids
(docs/protocol.md#turn-level). With ``prepare``, ``prepare(texts, **params)`` returns
one value per session document; it runs once per distinct document of a
dataset in its own job (rule ``prepare``: ``results/{dataset}/prepared/
{variant}.parquet``, keyed by the document's sha256), and ``rank`` gets the
values of its haystack's sessions, in haystack order, as a third argument:
``rank(question, haystack, prepared, **params)``.

A file path is read from the working directory; the file's folder (or, for
a file inside a package, the folder above the top package) goes first on
``sys.path``, so the file imports its neighbours as usual. A module name is
imported with the working directory first on ``sys.path``. Every Python file
of the callable's folder or package, and what it imports from there
(:func:`sources`), is hashed into the retrieve job's code fingerprint: an edit
to one reruns the variant, however the code loads it (an ``import``
statement, ``importlib.import_module``, ``__import__``). A module the job
loaded from inside that folder that the fingerprint does not hold (a folder
without ``__init__.py`` below it) stops the job with one line, rather than
leaving a result that its next edit would not rerun.

Each call of the user's code (:class:`Calls`) writes its stdout and stderr to
the job's log, gets back the working directory it changed, and ``rank`` has
``timeout_s`` seconds per question (config ``user_retrievers``): a question
past it is ranked as an empty list (a miss), counted in the outcomes
table's metadata and so in ``metrics.json``; more than ``max_timeouts`` in
one job stop it. The first :data:`DETERMINISM_SAMPLE` ranked questions of
each segment are ranked twice and the two answers compared (``metrics.json``'s
``determinism``).

A bad return (not a list, an id not in the haystack, an id or position given
twice, a non-finite or too large score, a count of scores unlike the
ranking's) or an exception (``KeyboardInterrupt`` and ``SystemExit``
included; a real Ctrl-C still interrupts) is one ``memobench:`` line naming
the variant, the question and what is wrong; an exception's traceback goes
to the job's log.
"""

from __future__ import annotations

import hashlib
import re
import time

from ..catalog.row import Retriever, Row, register, register_retriever
from ..core.errors import ConfigError, DataError
from .callables import Calls, check_covered, describe, load, sources
from .returned import Haystack, Question, RetrieverError, _is_sequence, _what, check_ranking, turns_of


# --------------------------------------------------------------------------- calling the user's code


# --------------------------------------------------------------------------- what rank returns


# --------------------------------------------------------------------------- the retrieve stage

# the first ranked questions of each segment that are ranked twice, the two answers compared
DETERMINISM_SAMPLE = 5
# what rank returns: haystack positions or ids, or texts attributed to the haystack's turns
# (docs/retrievers.md#returning-text)
RETURNS = ("ids", "text")


def rank_segment(variants, segment, log=print) -> dict:
    """The seam's entry (``retrievers``): rank one segment (``harness.Segment``)
    under users' Python retrievers, question by question
    (``documents.rank_by_documents``). Each outcomes table carries, in its
    Parquet metadata (``harness.CHECKS_KEY``), the segment's determinism
    check and timed-out questions."""
    import json

    from .documents import rank_by_documents, segment_documents
    from .harness import CHECKS_KEY

    docs = segment_documents(segment, {v.recipe.documents for v in variants})
    rankers = {v.name: _Ranker(v, segment, docs[v.recipe.documents], log) for v in variants}
    if any(r.texts is not None for r in rankers.values()):
        from .turns import session_turns

        keys = sorted({k for h in segment.haystacks.values() for k in h.keys})
        every = session_turns(segment.inputs["events"], "all", keys) if keys else {}
        for r in rankers.values():
            if r.texts is not None:
                r.texts.turn_table = every
    tables = rank_by_documents(variants, segment, rankers, log, docs=docs, timed=())
    out = {}
    for v in variants:
        ranker = rankers[v.name]
        segment.timings[v.name] = (ranker.times.rows, {})
        ranker.check_covered()
        rankings, outcomes, deep = tables[v.name]
        if ranker.texts is not None:
            from .harness import with_attributed

            outcomes = with_attributed(outcomes, ranker.texts.items)
        meta = {**(outcomes.schema.metadata or {}), CHECKS_KEY: json.dumps(ranker.checks(), sort_keys=True)}
        out[v.name] = (rankings, outcomes.replace_schema_metadata(meta), deep)
    return out


class _Ranker:
    """``ranker(q, hay, texts)``: one question's (positions, scores) under a
    user's retriever (``documents.rank_by_documents``), every call through
    :class:`Calls`; what the checks found: :meth:`checks`."""

    def __init__(self, variant, segment, docs: dict, log):
        spec = variant.retriever
        limits = spec.get("limits") or {}
        self.variant, self.log, self.name = variant, log, spec["callable"]
        self.fn, self.scope = load(spec["callable"], variant.name, log)
        self.params = dict(spec.get("params") or {})
        self.prepared = (_prepared_values(variant, segment.inputs.get("prepared"), docs) if spec.get("prepare")
                         else None)
        self.timeout_s = limits.get("timeout_s")
        self.max_timeouts = limits.get("max_timeouts")
        self.calls = Calls(log, self.scope, self.timeout_s)
        self.checked: list[str] = []
        self.differing: list[str] = []
        self.timed_out: list[str] = []
        from .timings import CallTimes

        self.times = CallTimes()  # every call of the function (the determinism check's second one: warm)
        self.texts = _Texts(spec["attribution"]) if spec.get("returns") == "text" else None

    def __call__(self, q, hay, documents):
        question = Question(q["question_id"], q["question"], q["question_date"], q["question_type"])
        if self.variant.grain == "turn":  # documents: the haystack's turns (turns.HaystackTurns)
            haystack = turns_of(hay, documents)
        else:
            haystack = Haystack(tuple(hay.ids), tuple(documents), tuple(hay.dates))
        where = f"variant {self.variant.name!r}: question {question.id!r}: {self.name}"

        def rank():
            args = (question, haystack) if self.prepared is None else (
                question, haystack, [self.prepared[k] for k in hay.keys])
            called = time.perf_counter()
            result, timed_out = self.calls.call(where, self.fn, *args, **self.params)
            self.times.add(q["haystack_id"], question.id, time.perf_counter() - called, ok=not timed_out)
            if timed_out:
                return None
            if self.texts is not None:
                return self.texts.ranking(result, q["haystack_id"], hay, haystack, documents, where)
            return check_ranking(result, haystack, where), None

        got = rank()
        if got is not None and len(self.checked) < DETERMINISM_SAMPLE:
            again = rank()
            if again is not None:
                self.checked.append(question.id)
                if again[0] != got[0]:
                    self.differing.append(question.id)
                    self.log(f"{where}: ranked twice, the two answers differ (a nondeterministic retriever)")
            got = again  # a second call past the time limit times the question out too
        if got is None:
            self._timed_out(question.id)
            return [], None
        if got[1] is not None:  # a text retriever's items, counted once, from the answer ranked
            self.texts.take(question.id, *got[1])
        return got[0]

    def _timed_out(self, qid: str) -> None:
        self.timed_out.append(qid)
        self.log(f"variant {self.variant.name!r}: question {qid!r}: {self.name} took more than {self.timeout_s} s; "
                 f"ranked as an empty list (a miss)")
        if self.max_timeouts is not None and len(self.timed_out) > self.max_timeouts:
            raise RetrieverError(f"variant {self.variant.name!r}: {self.name} took more than {self.timeout_s} s on "
                                 f"{len(self.timed_out)} questions of this job ({', '.join(self.timed_out[:3])}"
                                 f"{', ...' if len(self.timed_out) > 3 else ''}), more than user_retrievers."
                                 f"max_timeouts ({self.max_timeouts}); make it faster or raise "
                                 f"user_retrievers.timeout_s")

    def check_covered(self) -> None:
        check_covered(self.variant.name, self.name, self.scope)

    def checks(self) -> dict:
        return {"determinism": {"checked": len(self.checked), "differing": len(self.differing),
                                "questions": list(self.differing)},
                "timeouts": {"limit_s": self.timeout_s, "count": len(self.timed_out),
                             "questions": list(self.timed_out)},
                **({"attribution": self.texts.tally.summary()} if self.texts is not None else {})}


class _Texts:
    """A retriever that returns text (``returns: text``): each answer's texts attributed to the haystack's
    turns (retrieval/attribution.py), into a ranking checked as any; what they came to, counted."""

    def __init__(self, settings: dict):
        from .attribution import Tally

        self.settings, self.tally = settings, Tally(settings)
        self.turn_table: dict = {}  # session key -> every turn of it (turns.session_turns)
        self.items: dict[str, list[dict]] = {}  # question id -> its items as attributed
        self._built: dict[int, tuple] = {}  # haystack id -> (its TurnIndex, each turn's unit and id, id -> units)

    def ranking(self, result, hid: int, hay, haystack, documents, where: str):
        """((positions, scores), (attributions, records)) of what rank returned: texts best first, each a
        string or an (id, text) pair, optionally as (items, scores)."""
        from .attribution import TurnIndex, attributed, ranked

        items, scores = result, None
        if isinstance(result, tuple) and len(result) == 2 and all(_is_sequence(x) for x in result):
            items, scores = result
        if not _is_sequence(items):
            raise RetrieverError(f"{where} returned {_what(result)}; with returns: text, return texts best first "
                                 f"(strings, or (id, text) pairs), or (texts, scores)")
        items = list(items)
        if scores is not None and len(scores) != len(items):
            raise RetrieverError(f"{where} returned {len(scores)} scores for {len(items)} texts")
        pairs = [x for x in items if isinstance(x, (tuple, list))]
        if pairs and len(pairs) != len(items):
            raise RetrieverError(f"{where} returned texts and (id, text) pairs in one list; give one or the other")
        for x in items:
            if not (isinstance(x, str) or (isinstance(x, (tuple, list)) and len(x) == 2
                                           and all(isinstance(y, str) for y in x))):
                raise RetrieverError(f"{where} returned {x!r} among its texts; give strings, or (id, text) pairs "
                                     f"of strings")
        ids = [x[0] for x in items] if pairs else None
        texts = [x[1] for x in items] if pairs else items
        if hid not in self._built:
            if haystack.unit == "turn":  # the turns it ranks: each its own unit
                index = TurnIndex(documents.texts, documents.positions, self.settings)
                units, turn_ids, named = list(range(len(documents.ids))), list(documents.ids), documents.ids
            else:  # every turn of its sessions, each at its session's haystack position
                from .turns import haystack_turns

                every = haystack_turns(list(hay.ids), list(hay.keys), self.turn_table)
                index = TurnIndex(every.texts, every.positions, self.settings)
                units, turn_ids, named = every.positions, every.ids, hay.ids
            by_id: dict[str, set] = {}  # an id -> the units it names (a repeated session's copies: each)
            for u, rid in enumerate(named):
                by_id.setdefault(rid, set()).add(u)
            self._built[hid] = (index, units, turn_ids, by_id)
        index, units, turn_ids, by_id = self._built[hid]
        found, records = attributed(index, texts, units, turn_ids, ids, lambda rid: by_id.get(rid, set()))
        if ids is None:
            order, kept = ranked(found, units, None if scores is None else list(scores))
            listed = (order, kept) if kept is not None else order
        else:  # ranked by its ids, each at its first item
            first = [r for r, rid in enumerate(ids) if rid not in ids[:r]]
            order = [ids[r] for r in first]
            listed = (order, [list(scores)[r] for r in first]) if scores is not None else order
        return check_ranking(listed, haystack, where), (found, records)

    def take(self, qid: str, found: list, records: list[dict]) -> None:
        self.tally.take(qid, found, records)
        self.items[qid] = records


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _prepared_values(variant, path, docs: dict) -> dict:
    """{session key: prepare's value} for the segment's sessions, read from
    the prepare stage's table (only the rows of their documents)."""
    import pickle

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if path is None:
        raise ConfigError(f"variant {variant.name!r}: no prepared table (the prepare stage's output) was given")
    meta = read_meta(path)
    if meta.get("documents") != variant.recipe.documents or meta.get("prepare") != variant.retriever["prepare"]:
        raise DataError(path, None, f"was prepared by {meta.get('prepare')} over {meta.get('documents')} documents, "
                                    f"not {variant.retriever['prepare']} over {variant.recipe.documents}; "
                                    f"delete it and rerun")
    by_hash: dict[bytes, list[int]] = {}
    for key, text in docs.items():
        by_hash.setdefault(text_hash(text), []).append(key)
    wanted = pa.array(list(by_hash), pa.binary())
    values: dict[int, object] = {}
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=["sha256", "value"]):
        rows = pc.is_in(batch.column(0), value_set=wanted)
        picked = batch.filter(rows)
        for h, blob in zip(picked.column(0).to_pylist(), picked.column(1).to_pylist()):
            value = pickle.loads(blob)
            for key in by_hash.pop(h, ()):
                values[key] = value
    if by_hash:
        key = next(iter(by_hash.values()))[0]
        raise DataError(path, f"session_key {key}", "has no prepared value; delete the prepared table and rerun")
    return values


# --------------------------------------------------------------------------- the prepare stage


def read_meta(path) -> dict:
    import json

    import pyarrow.parquet as pq

    raw = (pq.read_schema(path).metadata or {}).get(b"memobench")
    if raw is None:
        raise DataError(path, None, "not a memobench prepared table; delete it and rerun")
    return json.loads(raw)


def prepare_sessions(variant, events_path, out, log=print, sessions_path=None, chunk: int = 1024) -> dict:
    """Write ``out``: ``prepare``'s value (pickled) for every distinct session
    document of the events table (and, given ``sessions_path``, the empty
    document of a session with no event), keyed by the document's sha256.
    ``prepare`` is called with up to ``chunk`` documents at a time."""
    import json
    import pickle
    import time

    import pyarrow as pa

    from .documents import iter_session_documents
    from ..core.progress import Progress
    from ..core.tables import TableWriter, read_table

    spec = variant.retriever
    fn, scope = load(spec["prepare"], variant.name, log)
    calls = Calls(log, scope)
    params = dict(spec.get("params") or {})
    where = f"variant {variant.name!r}: {spec['prepare']}"
    meta = {"variant": variant.name, "prepare": spec["prepare"], "documents": variant.recipe.documents}
    schema = pa.schema([("sha256", pa.binary()), ("value", pa.large_binary())],
                       metadata={"memobench": json.dumps(meta, sort_keys=True)})
    writer = TableWriter(out, schema, batch_rows=chunk)
    progress = Progress(log, f"{variant.name} prepare", unit="distinct documents")
    started = time.monotonic()
    seen: set[bytes] = set()
    hashes: list[bytes] = []
    texts: list[str] = []
    stats = {"sessions": 0, "distinct": 0, "calls": 0}

    def flush():
        values, _ = calls.call(where, fn, list(texts), **params)
        if not _is_sequence(values) or len(values) != len(texts):
            got = f"{len(values)} values" if _is_sequence(values) else _what(values)
            raise RetrieverError(f"{where} returned {got} for {len(texts)} sessions; return one value per "
                                 f"session, in order")
        try:
            blobs = [pickle.dumps(v, protocol=5) for v in values]
        except Exception as e:
            raise RetrieverError(f"{where} returned a value that cannot be pickled: {describe(e)}") from None
        writer.extend(sha256=list(hashes), value=blobs)
        stats["calls"] += 1
        stats["distinct"] += len(texts)
        hashes.clear()
        texts.clear()
        progress(stats["distinct"])

    def add(text: str) -> None:
        stats["sessions"] += 1
        h = text_hash(text)
        if h in seen:
            return
        seen.add(h)
        hashes.append(h)
        texts.append(text)
        if len(texts) >= chunk:
            flush()

    try:
        keys = set()
        for key, text in iter_session_documents(events_path, variant.recipe.documents):
            keys.add(key)
            add(text)
        if sessions_path is not None:
            for key in sorted(set(read_table(sessions_path, columns=["session_key"]).column(0).to_pylist()) - keys):
                add("")
        if texts:
            flush()
        check_covered(variant.name, spec["prepare"], scope)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    progress(stats["distinct"], f", done: {stats['sessions']} sessions in {time.monotonic() - started:.1f} s",
             force=True)
    return {**stats, **meta}


def prepare_fingerprint(variant, script) -> str:
    """The prepare job's code fingerprint: the stage's modules, ``script``
    and the ``prepare`` callable's sources (its edits rerun it, the ``rank``
    callable's do not)."""
    from ..core.fingerprint import stage_fingerprint

    return stage_fingerprint("prepare", script, *sources(variant.retriever["prepare"]))


def python_variant(name: str, family: str, entry: dict, others: dict | None = None):
    """A user's Python retriever (config ``variants.<name>.retriever``) as a
    variant of a family: the family's skip rule, so its questions and gold
    are the Memo variants'; its documents are the user's choice, by default
    the family's rule (as the reference retrievers')."""
    from ..catalog.variant import SKIP, Variant
    from ..core.formats import USER_TURN_FAMILIES
    from ..memo.recipe import Recipe, validate

    if set(entry) - {"retriever", "description"}:
        extra = ", ".join(sorted(set(entry) - {"retriever", "description"}))
        raise ConfigError(f"variant {name!r}: a retriever variant takes no {extra} (only retriever and description)")
    r = entry["retriever"]
    where = f"variant {name!r}: retriever"
    for key in ("callable", "prepare"):
        if r.get(key) is not None and not _callable_spec(r[key]):
            raise ConfigError(f"{where}: {key} {r[key]!r} is not 'module:function' or 'path/to/file.py:function'")
    if not r.get("callable"):
        raise ConfigError(f"{where}: callable is required ('module:function' or 'path/to/file.py:function')")
    params = r.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: params must be a mapping of keyword arguments, not {params!r}")
    docs = r.get("documents") or ("user" if family in USER_TURN_FAMILIES else "all")
    validate({"documents": docs}, where)
    spec = {"callable": r["callable"], "prepare": r.get("prepare"), "params": params}
    returns = r.get("returns", "ids")
    if returns not in RETURNS:
        raise ConfigError(f"{where}: returns {returns!r} is not one of {', '.join(RETURNS)}")
    if returns == "text":  # kept out of the spec otherwise: a retriever of ids keeps its definition
        from .attribution import settings_of

        spec["returns"], spec["attribution"] = "text", settings_of(r.get("attribution"), where)
    elif "attribution" in r:
        raise ConfigError(f"{where}: attribution is for a retriever that returns text (returns: text)")
    return Variant(name, Recipe(backend=BACKEND, documents=docs), SKIP[family],
                   f"your retriever: {r['callable']}",
                   entry.get("description", f"{r['callable']} over each session's "
                                            f"{'user turns' if docs == 'user' else 'turns'}"),
                   retriever=spec)


def _callable_spec(text) -> bool:
    """'module.sub:function' or 'path/to/file.py:function' (the function may be dotted: 'Class.method')."""
    if not isinstance(text, str) or ":" not in text:
        return False
    target, _, func = text.rpartition(":")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", func):
        return False
    return target.endswith(".py") or bool(re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", target))


def _inputs(variant) -> frozenset[str]:
    return frozenset({"prepared"}) if (variant.retriever or {}).get("prepare") else frozenset()


def _variant_sources(variant) -> tuple:
    return tuple(sources(variant.retriever["callable"]))


# The recipe backend of a user's Python retriever (config ``variants.<name>.retriever``): not a recipe
# choice, a user variant states it by ``retriever``.
BACKEND = "python"
register(Row(BACKEND, "python", label="your retriever", description="a user's Python callable ranking each "
             "question's session documents", module=__name__, config_key="retriever", make_variant=python_variant,
             turns=True))
register_retriever(Retriever("python", __name__, rank_segment, variant_inputs=_inputs, sources=_variant_sources,
                             shares=False))
