"""One system variant in one retrieve job (:class:`_Service`): ingestion (checkpointed in the ledger,
under a lock), searches, readiness, timings, errors, a lost connection's confirmations."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...core.atomic import locked
from ...retrieval.returned import Haystack, RetrieverError, check_ranking, turns_of
from ..definition.variant import definition
from ..ledger import Ledger
from ..operations.calls import (_IngestFailed, _session_ids_for_turns, answers_in_text, count_of, has_count,
                               ingest_namespace, reset_namespace, result_ids, result_texts, tried_whole)
from ..sent.sessions import keyed, rendered, search_values, sent_items, sent_shape
from ..transport.connect import client_of

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's

class _Service:
    """One system variant in one retrieve job: ingestion, searches, timings, errors."""

    def __init__(self, variant, segment, log):
        from ...core import layout

        self.v, self.spec, self.log = variant, variant.retriever, log
        outs = (segment.outputs or {}).get(variant.name) or {}
        root = layout.root_of(outs["rankings"], layout.path(layout.SEGMENT_TABLE, suffix=""))
        ledger = Path(layout.path(layout.SYSTEM_LEDGER, root=root, variant=variant.name))
        # a server per namespace works in a folder of its own next to the ledger, removed when it stops
        self.client = client_of(self.spec, self.where(), log, workroot=ledger.with_suffix(".servers"))
        self.ledger = Ledger(ledger, sent_shape(self.spec, variant.grain, variant.recipe.documents))
        self.lock_dir = ledger.with_suffix(".locks")
        self.timings: list[tuple] = []
        self._timing_lock = threading.Lock()
        self.errors: list[tuple[str, str]] = []  # (question id, why)
        self.failed: dict[str, str] = {}  # a haystack's content name -> why its ingestion failed
        self.cold: set[str] = set()  # namespaces ingested in this job not yet searched
        self.confirmed: dict[str, int] = {}  # namespace -> the client's lost connections when it was confirmed
        self.current = None  # reset isolation: the namespace's content now in the service
        self.unconfirmed: set[str] = set()  # namespaces trusted on the ledger alone (no count), not yet searched
        self.assigned: dict[str, dict] = {}  # namespace -> the ids the service assigned (id -> item key)
        self._sent: dict[int, tuple] = {}  # id(a haystack's sessions) -> (them, the items they are sent as)
        self._query = None  # the query transform (queries.py), loaded at the first search
        from .determinism import Lists

        self.lists = Lists(self.spec)  # the lists searched, to compare with searches again (determinism.py)
        self.attributed = None  # a text service's attributions (retrieval/attribution.py): its Tally
        self._indexes: dict[int, tuple] = {}  # id(a haystack's sessions) -> (them, their TurnIndex, positions)
        self._turn_ids: dict[int, tuple] = {}  # id(a haystack's sessions) -> (them, its turns' ids)
        self.turn_table: dict = {}  # session key -> its turns (turns.session_turns): the turn ids kept
        self.items: dict[str, list[dict]] = {}  # question id -> its returned items as attributed
        if answers_in_text(self.spec):
            from ...retrieval.attribution import Tally

            self.attributed = Tally(self.spec["attribution"])

    def where(self, qid=None) -> str:
        return f"variant {self.v.name!r}" + (f": question {qid!r}" if qid is not None else "")

    def _time(self, operation, phase, namespace, qid, call=None, ok=True, seconds=None, attempts=None, value=None):
        row = (operation, phase, namespace, qid, call.seconds if call else seconds, call.attempts if call else attempts,
               ok, call.server_seconds if call else None, value)
        with self._timing_lock:
            self.timings.append(row)

    # ---- the conformance check (services/conformance.py), once per service and settings

    def conform(self) -> None:
        """The service's conformance check, unless ``system.check`` is false, a turn variant (the check
        asks for sessions), or a job of this variant already passed it with these settings (a marker
        file named by the definition's digest): a failure is one line naming the check, before any
        of the run's sessions is sent."""
        from ...core.secrets import mask
        from .. import conformance as check

        if self.spec.get("check", True) is False or self.v.grain != "session":
            return
        marker = self.ledger.path.with_suffix(".checked") / f"{definition(self.v)}.json"
        if marker.exists():
            return
        # one job checks; the variant's other jobs wait here, then find its marker
        with locked(marker.parent / "check.lock"):
            if marker.exists():
                return
            results = check.run(self.spec, self.client, self.where())
            failed = check.first_failure(results)
            if failed is not None:
                raise RetrieverError(f"{self.where()}: the service failed its conformance check: {failed.check}: "
                                     f"{failed.why}; run memobench check-service --variant {self.v.name} (with "
                                     f"your --configfile) for the table")
            marker.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({"identity": self.spec["identity"], "checks": {r.check: [r.status, r.why]
                                                                             for r in results}}, indent=1)
            partial = marker.with_name(marker.name + ".part")
            partial.write_text(mask(text) + "\n", encoding="utf-8")  # a why may quote what the server said
            partial.replace(marker)  # whole or absent: a killed job's half-written marker never passes
            skipped = [r.check for r in results if r.status.startswith("skipped")]
            self.log(f"{self.v.name}: the service passed its conformance check"
                     + (f" ({', '.join(skipped)} skipped: memobench check-service says why)" if skipped else ""))

    # ---- ingestion

    def _count(self, namespace: str, retries: int | None = None):
        n, call = count_of(self.client, self.spec, namespace, self.where(), retries)
        if call is not None:
            self._time("count", "", namespace, None, call)
        return n

    def _items(self, sessions: list[dict]) -> list:
        """What a haystack's sessions are sent as (:func:`sent_items`), made once per job."""
        got = self._sent.get(id(sessions))
        if got is None or got[0] is not sessions:
            got = self._sent[id(sessions)] = (sessions, sent_items(self.spec, sessions, self.where()))
        return got[1]

    def _expected(self, sessions: list[dict]) -> int:
        """How many items a namespace holding ``sessions`` holds (a split session's parts each count)."""
        return len(self._items(sessions)) if rendered(self.spec) else len(sessions)

    def _ingest(self, namespace: str, sessions: list[dict]) -> None:
        """Empty ``namespace`` and send it ``sessions`` in order; the whole of it is tried again on a
        transient failure (a session sent twice would be two sessions), or when any connection to the
        service was lost meanwhile, ``retries`` more times."""
        from ..transport.client import Unavailable, attempts
        from ..operations.arrival import Refused, confirm_of

        why, asked = "", 0.0
        expected = self._expected(sessions)
        tries = int(self.spec["retries"]) + 1
        for _ in attempts(tries, float(self.spec["backoff_s"]), lambda: asked):
            breaks = self.client.breaks
            try:
                # each request tried once: this loop is the retries (nested ones would multiply the waits)
                call = reset_namespace(self.client, self.spec, namespace, retries=0)
                if call is not None:
                    self._time("reset", "", namespace, None, call)
                started = time.monotonic()
                _, assigned = ingest_namespace(self.client, self.spec, namespace, sessions, self.where(), retries=0,
                                               timed=lambda c: self._time("ingest", "", namespace, None, c))
                self._ingested(namespace, sessions, started)
                n = self._count(namespace, retries=0)
                if confirm_of(self.spec, n is not None) == "search":
                    self._confirm(namespace, sessions, assigned)
            except (Unavailable, Refused) as e:
                # a refusal in words, or an item that never came back, is an ingestion that failed: all again
                why, asked = str(e), getattr(e, "retry_after", 0.0)  # a 429's Retry-After, honoured here too
                continue
            if self.client.breaks != breaks:
                # a connection was lost meanwhile (another thread's too): the sessions sent before it may
                # be gone with a restarted server while the later ones went to the new one
                why = "a connection to the service was lost during the ingestion"
                continue
            if n is not None and n != expected:
                raise RetrieverError(f"{self.where()}: namespace {namespace!r} holds {n} sessions after "
                                     f"{expected} were ingested (the service mixes namespaces, or drops or "
                                     f"merges sessions)")
            if assigned is not None:
                self.assigned[namespace] = assigned
            self.log(f"{self.v.name}: ingested {len(sessions)} sessions into {namespace} in "
                     f"{time.monotonic() - started:.3f} s")
            self.cold.add(namespace)
            return
        raise _IngestFailed(tried_whole(tries, self.spec["retries"], "of the whole namespace", why))

    def _confirm(self, namespace: str, sessions: list[dict], assigned: dict | None) -> None:
        """Each item sent to ``namespace`` searched for by its own words (arrival.confirm_queries), each a
        ``confirm`` timings row; :class:`.arrival.Refused` for the first that never came back (a service
        without count that dropped it while answering as if it had kept it)."""
        from ..operations.arrival import Refused, came_back, confirm_queries

        sent = self._items(sessions)
        unit = "turn" if self.v.grain == "turn" else "session"
        texts_only = self.attributed is not None and self.spec["results"].get("id") is None
        for k, (item, words) in enumerate(zip(sent, confirm_queries(sent))):
            if words is None:
                continue  # an empty session: no word to find it by
            q = {"question_id": "memobench-confirm", "question": words}
            values = search_values(namespace, int(self.spec["k"]), q, self._asked(q))
            resp, call = self.client.once("search", values, retries=0)
            self._time("confirm", "", namespace, None, call)
            what = f"confirmation search of namespace {namespace!r}"
            ids = result_ids(resp, self.spec, f"{self.where()}: {what}", unit)[0]
            if texts_only:  # its texts came back: one of them is attributed to the item's session
                index, groups = self._index(sessions)
                back = getattr(item, "position", k) in {groups[j] for t in ids for j in index.attribute(t).turns}
            else:
                back = came_back(item, ids, keyed(self.spec), assigned)
            if not back:
                key = getattr(item, "key", None) or item["id"]
                raise Refused(f"session {key!r} sent to namespace {namespace!r} never came back in a search for "
                              f"its own words {values['query']!r} (system.confirm: search; the service has no "
                              f"count): the service did not keep it, or answered a refusal that config does not "
                              f"read (refused: on the ingest operation); a service that finds it by no words of "
                              f"its own: confirm: none")

    def _ingested(self, namespace: str, sessions: list[dict], started: float) -> None:
        """After a namespace's ingest requests: their wall time (an ``ingestion`` row), then the wait until it
        is searchable (system.ready: services/job/readiness.py), a timeout an ingestion that failed."""
        self._time("ingestion", "", namespace, None, seconds=time.monotonic() - started, attempts=1,
                   value=len(sessions))
        ready = self.spec.get("ready")
        if ready is None:
            return
        if ready["until"] == "count" and not has_count(self.spec, self.client):
            # a library's count is known once its object is made: polled, None would never be the count
            raise RetrieverError(f"{self.where()}: ready: until: count needs a count, and the library's object has "
                                 f"no count method; give until: search or until: settle")
        from .readiness import NotReady, wait

        def search(text: str) -> list[str]:
            values = search_values(namespace, int(self.spec["k"]), {"question_id": "memobench-ready", "question": text})
            resp, _ = self.client.once("search", values, retries=0)
            return result_ids(resp, self.spec, f"{self.where()}: readiness search")[0]

        try:
            seconds, polls = wait(ready, namespace, sessions, lambda: self._count(namespace, retries=0), search,
                                  expected=self._expected(sessions))
        except NotReady as e:
            self._time("ready", ready["until"], namespace, None, ok=False)
            raise _IngestFailed(str(e)) from None
        self._time("ready", ready["until"], namespace, None, seconds=seconds, attempts=polls)

    def load_curve(self, client, namespace: str, questions: list[dict]) -> None:
        """system.load's levels on ``namespace`` (searched already: warm), with ``client`` (its server's)."""
        from . import load

        asks = [(q["question_id"], search_values(namespace, int(self.spec["k"]), q, self._asked(q))) for q in questions]
        listed = {q["question_id"]: q for q in questions}
        rows = load.run(client, namespace, asks, self.spec["load"],
                        lambda qid, answer: self.lists.concurrent(namespace, listed[qid], answer, self.where(qid)))
        with self._timing_lock:
            self.timings += rows
        said = ", ".join(f"{r[1]} in flight: {r[8] / r[4]:.1f}/s" for r in rows if r[0] == "load_window" and r[4])
        self.log(f"{self.v.name}: load on namespace {namespace}: {said}")

    def served(self, stdio_start: bool) -> None:
        """A stdio server's start timed apart from its first request (``stdio_start``: now, before any)."""
        if stdio_start and self.spec["transport"] == "mcp-stdio" and not self.spec.get("per_namespace"):
            seconds = self.client.start()
            if seconds is not None:
                self._time("start", "", "", None, seconds=seconds, attempts=1)

    def peak(self) -> None:
        """A shared stdio server's peak memory, a ``memory`` row (read before it stops)."""
        if self.spec["transport"] == "mcp-stdio" and not self.spec.get("per_namespace"):
            peak = self.client.peak_memory()
            if peak is not None:
                self._time("memory", "", "", None, value=peak)

    def ensure(self, namespace: str, sessions: list[dict]) -> None:
        """``namespace`` holds ``sessions``: confirmed from the ledger and ``count``, else ingested
        (namespace isolation; under the namespace's lock)."""
        from ..transport.client import ServiceError

        try:
            self._ensure(namespace, sessions)
        except ServiceError as e:
            raise RetrieverError(f"{self.where()}: namespace {namespace!r}: {e}") from None

    def _ensure(self, namespace: str, sessions: list[dict], again: bool = False) -> None:
        """``again``: ingest it whatever the ledger says (a namespace that answered as if empty)."""
        from ..transport.client import Unavailable
        from ..operations.arrival import Refused

        url = self.spec["identity"]
        # a stdio server is this job's own process: without count, nothing recorded of another is known to hold
        trust = ((self.spec["transport"] not in ("mcp-stdio", "library") or has_count(self.spec, self.client))
                 and not self.spec.get("per_namespace"))  # a server per namespace starts empty
        breaks = self.client.breaks
        # named by a digest: a namespace is the service's name, not a safe file name
        with locked(self.lock_dir / f"{hashlib.sha256(namespace.encode('utf-8')).hexdigest()[:32]}.lock"):
            if trust and not again and self.ledger.recorded(url, namespace) == self._expected(sessions):
                try:
                    n = self._count(namespace)
                except (Unavailable, Refused):
                    n = -1
                if n is None or n == self._expected(sessions):
                    if n is None:
                        # trusted on the record alone: a service that forgot may answer [] for it (_forgot)
                        self.unconfirmed.add(namespace)
                    self.confirmed[namespace] = breaks
                    return
                self.log(f"{self.v.name}: namespace {namespace} holds {n} sessions, not the {len(sessions)} "
                         f"recorded; ingesting it again")
            self._ingest(namespace, sessions)
            self.ledger.record(url, namespace, self._expected(sessions), self.assigned.get(namespace))
            self.confirmed[namespace] = breaks
            self.unconfirmed.discard(namespace)

    def ingest_all(self, needed: dict[str, list[dict]]) -> None:
        """Every needed namespace ingested or confirmed, ``concurrency`` at a time."""
        def one(item):
            namespace, sessions = item
            try:
                self.ensure(namespace, sessions)
            except _IngestFailed as e:
                self.failed[namespace] = f"ingestion failed: {e}"

        workers = max(1, int(self.spec["concurrency"]))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(one, sorted(needed.items())):
                pass

    # ---- searching

    def search(self, q: dict, hay, sessions: list[dict], namespace: str, content: str, turns=None):
        """(positions, scores) of one question searched in ``namespace``, or None when it is a
        system error; ``content`` names the haystack's sessions (reset isolation refills the
        namespace when it changes); ``turns``: a turn variant's haystack turns (turns.HaystackTurns),
        whose positions it then returns."""
        from ..transport.client import ServiceError, Unavailable

        qid = q["question_id"]
        if not self._held(qid, namespace, sessions, content):
            return self._error(qid, self.failed[content])
        values = search_values(namespace, int(self.spec["k"]), q, self._asked(q))
        where = f"{self.where(qid)}: search"
        phase = "cold" if namespace in self.cold else "warm"
        self.cold.discard(namespace)
        for attempt in (1, 2):
            breaks = self.client.breaks
            try:
                resp, call = self.client.once("search", values)
                break
            except (Unavailable, ServiceError) as e:
                if attempt == 1 and self.client.breaks != breaks:
                    # the connection was lost on the way: the server may have restarted without the namespace
                    self.log(f"{self.where(qid)}: the connection to the service was lost during the search; "
                             f"confirming namespace {namespace} and searching again")
                    if not self._held(qid, namespace, sessions, content):
                        return self._error(qid, self.failed[content])
                    continue
                if isinstance(e, ServiceError):
                    raise RetrieverError(f"{where}: {e}") from None
                self._time("search", phase, namespace, qid, ok=False, seconds=None,
                           attempts=int(self.spec["retries"]) + 1)
                return self._error(qid, str(e))
        self._time("search", phase, namespace, qid, call)
        ids, scores = result_ids(resp, self.spec, where, "turn" if turns is not None else "session")
        # a text service's items: (the ids beside them or None, their texts), one per text
        texts = result_texts(resp, self.spec, where)[:2] if self.attributed is not None else None
        for _ in range(int(self.spec["warm_repeats"])):
            try:
                answer, again = self.client.once("search", values)
                self._time("search", "warm", namespace, qid, again)
            except (Unavailable, ServiceError):
                continue  # a repeat only times; its failure changes no list
            self.lists.repeated(namespace, q, ids, answer, where)  # its list: the same, or flagged
        if self._forgot(qid, namespace, sessions, content, ids):
            return self.search(q, hay, sessions, namespace, content, turns)
        got = self.ranking(ids, scores, hay, sessions, namespace, where, turns, texts=texts, qid=qid)
        self.lists.searched(namespace, content, q, hay, sessions, turns, ids, got)
        return got

    def ranking(self, ids, scores, hay, sessions: list[dict], namespace: str, where: str, turns=None,
                texts=None, qid=None):
        """(positions, scores) of a search's result ids and scores (:func:`result_ids`) in ``namespace``. A
        service that answers in text: its texts attributed to the haystack's turns (without ids, ``ids`` are
        the texts) and counted, when ``texts`` (:func:`result_texts`' ids and texts) are given (a question's
        own search, not a replica's); beside ids, each text checked against its id's content."""
        ranked = turns_of(hay, turns) if turns is not None else Haystack(tuple(hay.ids), ("",) * len(hay.ids),
                                                                          tuple(hay.dates))
        if self.attributed is not None and self.spec["results"].get("id") is None:
            # the units its texts name, their scores checked as any list's
            positions, kept = self._attributed(ids, scores, hay, sessions, turns, qid if texts is not None else None)
            return check_ranking((positions, kept) if kept is not None else positions, ranked, where)
        if turns is None and keyed(self.spec):
            from ..sent.rendering import positions

            ids, scores = positions(ids, scores, self._items(sessions), self._assigned(namespace), where)
        if turns is not None:
            _session_ids_for_turns(ids, ranked, where)
        listed, kept = ids, scores
        if self.attributed is not None:
            # passages beside ids: several of one session (or turn) are that id at its first
            first = [r for r, rid in enumerate(ids) if rid not in ids[:r]]
            listed, kept = [ids[r] for r in first], None if scores is None else [scores[r] for r in first]
        got = check_ranking((listed, kept) if kept is not None else listed, ranked, where)
        if texts is not None:
            self._check_texts(*texts, hay, sessions, turns, namespace, qid)
        return got

    def _index(self, sessions: list[dict], turns=None):
        """The :class:`TurnIndex` of a haystack's turns (every turn its service was sent, in haystack order,
        grouped by haystack position) and each turn's haystack position; one per haystack, kept for the job."""
        from ...retrieval.attribution import TurnIndex

        key = id(sessions)
        if key not in self._indexes:
            texts = [t.get("content") or "" for s in sessions for t in s["turns"]]
            groups = [p for p, s in enumerate(sessions) for _ in s["turns"]]
            if turns is not None and len(turns.texts) != len(texts):
                raise RetrieverError(f"{self.where()}: the haystack's turns ({len(turns.texts)}) are not the "
                                     f"{len(texts)} turns sent; attribution needs them to be one list")
            self._indexes[key] = (sessions, TurnIndex(texts, groups, self.spec["attribution"]), groups)
        return self._indexes[key][1], self._indexes[key][2]

    def _attributed(self, texts: list[str], scores, hay, sessions: list[dict], turns, qid):
        """(positions, scores) of a text-only service's texts: each turn (a turn variant) or session at the
        first text attributed to it; the attributions counted and kept as question ``qid``'s items (none:
        a replica's search)."""
        from ...retrieval.attribution import attributed, ranked

        index, groups = self._index(sessions, turns)
        units = list(range(len(groups))) if turns is not None else groups
        found, records = attributed(index, texts, units, self._turn_ids_of(hay, sessions))
        if qid is not None:
            self.attributed.take(qid, found, records)
            self.items[qid] = records
        return ranked(found, units, scores)

    def _turn_ids_of(self, hay, sessions: list[dict]) -> list[str]:
        """The ids of a haystack's turns, in the order its sessions were sent (turns.turn_id)."""
        from ...retrieval.turns import haystack_turns

        key = id(sessions)
        if key not in self._turn_ids:
            self._turn_ids[key] = (sessions, haystack_turns(list(hay.ids), list(hay.keys), self.turn_table).ids)
        return self._turn_ids[key][1]

    def _check_texts(self, ids: list[str], texts: list[str], hay, sessions: list[dict], turns, namespace: str,
                     qid) -> None:
        """Each text returned beside an id, attributed and checked against that id's content: a text none of
        whose turns is the id's turn (a turn variant) or in the id's session is a mismatch (a wrong id),
        counted with the question, its rank and the id."""
        from ...retrieval.attribution import attributed

        index, groups = self._index(sessions, turns)
        if turns is not None:
            by_id: dict[str, set] = {}
            for j, tid in enumerate(turns.ids):
                by_id.setdefault(tid, set()).add(j)
            units, named = list(range(len(groups))), lambda rid: by_id.get(rid, set())
        else:
            units, named = groups, self._owners(sessions, namespace)
        found, records = attributed(index, texts, units, self._turn_ids_of(hay, sessions), ids, named)
        self.attributed.take(qid, found, records)
        self.items[qid] = records

    def _owners(self, sessions: list[dict], namespace: str):
        """A result id -> the haystack positions it names: a session id's copies, or (results that name keys
        or ids the service assigned) its item's session."""
        if keyed(self.spec):
            by_key = {i.key: i.position for i in self._items(sessions)}
            assigned = self._assigned(namespace)
            return lambda rid: {by_key[k]} if (k := (assigned.get(rid) if assigned is not None else rid)) in by_key \
                else set()
        copies: dict[str, set] = {}
        for p, s in enumerate(sessions):
            copies.setdefault(s["id"], set()).add(p)
        return lambda rid: copies.get(rid, set())

    def _asked(self, q: dict) -> str | None:
        """The query text of question ``q`` (``system.query``'s transform), or None: its own text."""
        if "query" not in self.spec:
            return None
        if self._query is None:
            from ..sent.queries import transform

            self._query = transform(self.spec["query"], self.v.name, self.log)
        return self._query(q)

    def _assigned(self, namespace: str) -> dict | None:
        """The ids the service assigned to ``namespace``'s items (id -> key): this job's, else the ledger's
        (a namespace a later job confirmed); None when the service assigns none."""
        op = self.spec["operations"]["ingest"]
        if "id" not in op and "id_pattern" not in op:
            return None
        if namespace not in self.assigned:
            self.assigned[namespace] = self.ledger.assigned(self.spec["identity"], namespace) or {}
        return self.assigned[namespace]

    def _forgot(self, qid: str, namespace: str, sessions: list[dict], content: str, listed: list) -> bool:
        """True when ``namespace``, trusted on the ledger alone, answered its first search of the job with
        an empty list and has been ingested again (search it again): a service without count that lost
        what it held (an in-memory one, restarted) may answer [] for a namespace it does not know, and
        every list would pass for a miss. Once per namespace and job; a service that answers [] for a
        namespace it holds costs one ingestion more, never a different list."""
        if namespace not in self.unconfirmed:
            return False
        self.unconfirmed.discard(namespace)
        if listed:
            return False
        self.log(f"{self.where(qid)}: namespace {namespace} answered an empty list, and without count nothing "
                 f"confirms the service still holds the {len(sessions)} sessions recorded (it may have forgotten "
                 f"them); ingesting it again and searching again")
        from ..transport.client import ServiceError, Unavailable
        from ..operations.arrival import Refused

        try:
            self._ensure(namespace, sessions, again=True)
        except (_IngestFailed, Unavailable, Refused) as e:
            self.failed[content] = f"ingestion failed: {e}"
        except ServiceError as e:
            raise RetrieverError(f"{self.where(qid)}: namespace {namespace!r}: {e}") from None
        return True

    def _held(self, qid: str, namespace: str, sessions: list[dict], content: str) -> bool:
        """:meth:`_ready`, a response that cannot be used one line naming the question; False when the
        haystack's ingestion failed (the question is then a system error)."""
        from ..transport.client import ServiceError

        try:
            self._ready(namespace, sessions, content)
        except ServiceError as e:
            raise RetrieverError(f"{self.where(qid)}: namespace {namespace!r}: {e}") from None
        return content not in self.failed

    def _ready(self, namespace: str, sessions: list[dict], content: str) -> None:
        """``namespace`` holds this haystack before a search: with reset isolation, refilled when the
        haystack changed; with either, confirmed again after a lost connection."""
        from ..transport.client import Unavailable
        from ..operations.arrival import Refused

        if content in self.failed:
            return
        try:
            if self.spec["isolation"] == "reset":
                if self.current == content and self.confirmed.get(namespace) != self.client.breaks:
                    breaks = self.client.breaks
                    if self._count(namespace) == self._expected(sessions):
                        self.confirmed[namespace] = breaks
                    else:
                        self.current = None
                if self.current != content:
                    self.current = None
                    breaks = self.client.breaks
                    self._ingest(namespace, sessions)
                    self.current, self.confirmed[namespace] = content, breaks
            elif self.confirmed.get(namespace) != self.client.breaks:
                self._ensure(namespace, sessions)
        except (_IngestFailed, Unavailable, Refused) as e:
            self.failed[content] = f"ingestion failed: {e}"
            self.current = None

    def _error(self, qid: str, why: str):
        self.errors.append((qid, why))
        self.log(f"{self.where(qid)}: system error ({why}); ranked as an empty list (a miss)")
        limit = int(self.spec["max_errors"])
        if len(self.errors) > limit:
            reasons = sorted({w for _, w in self.errors})
            raise RetrieverError(f"{self.where()}: {len(self.errors)} questions of this job failed at the service, "
                                 f"more than system.max_errors ({limit}); first: {self.errors[0][0]!r}: "
                                 f"{self.errors[0][1]}" + (f" ({len(reasons)} different reasons)"
                                                           if len(reasons) > 1 else ""))
        return None

    def checks(self) -> dict:
        return {"system_errors": {"count": len(self.errors), "questions": [q for q, _ in self.errors],
                                  "max": int(self.spec["max_errors"])},
                "system_determinism": self.lists.summary(),
                **({"attribution": self.attributed.summary()} if self.attributed is not None else {})}

    def timed(self) -> tuple[list[tuple], dict]:
        """Its timings rows and what they were measured against (write_segments writes them)."""
        return self.timings, {"url": self.spec["identity"], "transport": self.spec["transport"],
                              "isolation": self.spec["isolation"]}
