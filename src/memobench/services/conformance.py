"""The conformance check of a memory service (``memobench check-service``,
and the retrieve stage before a system variant's first ingestion): in
seconds, on a few synthetic sessions made here, whether the service keeps
the promises a run relies on (docs/memory-services.md#checking-a-service).

Two small namespaces (one under ``isolation: reset``, which promises no
namespaces), named ``{namespace_prefix}check-{8 hex digits}-a`` and ``-b``
(a run's are ``{prefix}{variant}-{20 hex digits}``, so never one of these):
A holds five sessions, one of them unicode text, one about 25 KB long, one
id sent twice with different content (as LongMemEval's haystacks repeat a
session id), ids of mixed case and with leading zeros; B holds three, one of
them sharing its id with A's (as LoCoMo's ``session_1`` is in every
conversation): three, since with two a word in one session has BM25Okapi's
idf ln(1.5/1.5) = 0 and every score ties. Each session has a made-up word
and a few topic words no other holds, searched for as its own question, so
every correct ranking (BM25 in any form, a substring test) puts the session
holding them strictly above the rest. A session ingested into A before A's
reset must be gone. Then, one line each (:data:`CHECKS`):

- ``api``: every reset, ingest, search and count answered as config says,
  every score a finite number (a failure here skips the rest);
- ``reset``: the session ingested before the reset never comes back
  (skipped for a service without reset);
- ``sessions``: every session comes back in the search for its own words,
  each copy of the repeated id its own (results that name keys: that copy's
  key; with scores, above the list's lowest: a list whose scores all tie
  found nothing, and a dropped copy's id padding it proves nothing);
- ``isolation``: a search of one namespace never returns a session only the
  other holds (skipped under ``isolation: reset``);
- ``ids``: every id comes back exactly as it was sent, and no session is
  ranked strictly above the one holding a search's words (first, or tied
  with the first's score);
- ``count``: ``count`` says each namespace holds what was sent (skipped
  without ``count``);
- ``stable``: the same search twice gives the same list;
- ``latency``: the median time of the searches (informative; it passes).

``system.check: {skip: [names]}`` skips checks one by one (:func:`check_of`):
each is still judged, and shown as ``skipped (config)`` with what it found,
but never fails the check; ``api`` cannot be skipped (the others read its
answers).

The command is :mod:`memobench.check_service`. The requests and the reading of answers are the retrieve stage's own
(:func:`.system.reset_namespace`, ``ingest_namespace``, ``search_values``,
``count_of``, ``result_ids``), through the variant's client: a server's own
shapes (rendered sessions, keys, parts, assigned ids, a batch ingest, a
query transform) are checked as a run sends them, results that name keys
read as their sessions' ids. The namespaces are reset again at the end,
where the service still answers.
"""

from __future__ import annotations

import math
import numbers
import secrets
import statistics
from dataclasses import dataclass
from typing import NamedTuple

from ..core.errors import ConfigError

# the more telling first: the stage names the first that fails (a leak also upsets count)
CHECKS = ("api", "reset", "sessions", "isolation", "ids", "count", "stable", "latency")
DATE = "2023/05/20 (Sat) 02:21"
QUESTION_DATE = "2023/06/01 (Thu) 10:00"
SKIPPED = "skipped (config)"  # a check system.check.skip names: judged, shown, never failing


def check_of(value, where: str):
    """``system.check`` checked: None (true, the default), False, or ``{"skip": [names]}`` in
    :data:`CHECKS` order (an empty skip is the default)."""
    if value is None or value is True:
        return None
    if value is False:
        return False
    names = value.get("skip") if isinstance(value, dict) and set(value) == {"skip"} else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: check {value!r} must be true, false or {{skip: [checks]}} (checks: "
                          f"{', '.join(CHECKS[1:])})")
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ConfigError(f"{where}: check: skip: {unknown[0]!r} is not a check (one of {', '.join(CHECKS[1:])})")
    if "api" in names:
        raise ConfigError(f"{where}: check: skip: api cannot be skipped (every other check reads its answers); "
                          f"check: false turns the whole check off")
    skip = [c for c in CHECKS if c in names]
    return {"skip": skip} if skip else None


def skipped_checks(spec: dict) -> list[str]:
    """The checks a system variant's ``spec`` skips (``system.check.skip``), in :data:`CHECKS` order."""
    check = spec.get("check")
    return list(check["skip"]) if isinstance(check, dict) else []


@dataclass(frozen=True)
class Result:
    check: str
    status: str  # pass | fail | skipped
    why: str


@dataclass(frozen=True)
class Synthetic:
    """One session sent: its id, the made-up word and the topic words only it holds (its question)."""

    id: str
    word: str
    topic: str
    turns: tuple

    @property
    def query(self) -> str:
        return f"{self.word} {self.topic}"

    def session(self) -> dict:
        return {"id": self.id, "date": DATE, "turns": [dict(t) for t in self.turns]}


def _said(user: str, assistant: str) -> tuple:
    return ({"role": "user", "content": user}, {"role": "assistant", "content": assistant})


# a long session's filler: words no other session's question holds
_FILLER = ("I watered the beans twice this week and spread mulch around the courgettes, then turned the compost "
           "heap with the fork; the rain barrel is nearly full again and the hoe needs a new handle. ")


def _long(word: str) -> tuple:
    turns = list(_said(f"I planted tomatoes in the greenhouse, a variety called {word}.",
                       "Tomatoes like the warmth of a greenhouse."))
    for i in range(60):  # about 25 KB: a service that refuses a long session fails here, not mid-run
        turns += _said(f"Day {i + 1}: " + _FILLER * 2, "Thanks for the update on the garden. " * 3)
    return tuple(turns)


STALE = Synthetic("stale_before_reset", "grenvault", "volcano eruption lava",
                  _said("We hiked up the volcano and saw the eruption: lava everywhere, grenvault they call it.",
                        "What a sight."))
NAMESPACE_A = (
    Synthetic("answer_4be1b6b4_2", "quillbrook", "café Kraków sushi",
              _said("Zoë booked the café in Kraków — 東京 next, then sushi 🍣; the host said quillbrook. שלום, naïve "
                    "Ångström.", "Enjoy the café and the sushi! 😊")),
    Synthetic("Sharegpt_Yw7Kx3p_0", "marrowfen", "tomatoes greenhouse", _long("marrowfen")),
    Synthetic("00417", "vostrelline", "telescope nebula",
              _said("Through my new telescope I saw the nebula I named vostrelline.", "Clear skies!")),
    # one id twice, each copy its own content: both must be kept, as a haystack that repeats an id needs
    Synthetic("session_1", "brindlewick", "sourdough bread",
              _said("My sourdough bread came out well; I call the starter brindlewick.", "Lovely crumb.")),
    Synthetic("session_1", "tamsquall", "sailing regatta",
              _said("We won the sailing regatta on a boat named tamsquall.", "Congratulations!")),
)
NAMESPACE_B = (
    # the id of one of A's sessions, other content: a service keyed by id alone mixes them up
    Synthetic("session_1", "orchelune", "chess opening",
              _said("I learned a chess opening my club calls the orchelune.", "A sharp line.")),
    Synthetic("b_only_session", "plumtrask", "pottery kiln",
              _said("At pottery class the kiln cracked my bowl, a glaze called plumtrask.", "Try again!")),
    # a third: with two, a word in one session has BM25Okapi's idf ln(1.5/1.5) = 0, and every score ties
    Synthetic("b_third_session", "wendlestoat", "kayak river",
              _said("We paddled a kayak down the river to a mill the locals call wendlestoat.", "A fine trip.")),
)


class Listed(NamedTuple):
    """A search's results read back: session ids best first, their scores (or None), and, where results
    name keys, each result's session copy (its haystack position; None for a key never sent)."""

    ids: list
    scores: list | None
    copies: list | None


class _Stop(Exception):
    """An operation that failed: the api check's why (``transient``: it outlasted the retries)."""

    def __init__(self, why: str, transient: bool = False):
        super().__init__(why)
        self.transient = transient


def run(spec: dict, client=None, where: str = "check-service") -> list[Result]:
    """The checks' results, in :data:`CHECKS` order, of the service of a system variant's ``spec``
    (:func:`.definition.variant.system_variant`'s ``retriever``), through ``client`` (made and closed here
    when not given). A server that cannot start raises :class:`.client.StartFailed`: no check can say
    more than that."""
    from .transport.connect import client_of

    own = client is None
    client = client_of(spec, where) if own else client
    try:
        return _Check(spec, client, where).run()
    finally:
        if own:
            client.close()


class _Check:
    def __init__(self, spec: dict, client, where: str):
        self.spec, self.client, self.where = spec, client, where
        token = secrets.token_hex(4)  # two checks at once (or one left behind) never share a namespace
        base = f"{spec['namespace_prefix']}check-{token}"
        self.reset_only = spec["isolation"] == "reset"
        self.a = base if self.reset_only else f"{base}-a"
        self.b = None if self.reset_only else f"{base}-b"
        self.held = {self.a: NAMESPACE_A, **({} if self.b is None else {self.b: NAMESPACE_B})}
        self.calls = 0
        self.seconds: list[float] = []
        self.searches: list[tuple] = []  # (namespace, the session asked for, first Listed, second Listed)
        self.counts: dict[str, int | None] = {}
        self.sent: dict[str, tuple] = {}  # namespace -> (the items sent, the ids the service assigned or None)
        self.has_reset = spec["operations"].get("reset") is not None
        self._query = None

    # ---- asking

    def _once(self, op: str, values: dict, what: str):
        from .transport.client import ServiceError, Unavailable

        try:
            # an ingest is never retried alone (as in a run): one that timed out may be in, and twice is two
            answer, call = self.client.once(op, values, **({"retries": 0} if op == "ingest" else {}))
        except (ServiceError, Unavailable) as e:
            raise _Stop(f"{what}: {e}", isinstance(e, Unavailable)) from None
        self.calls += 1
        return answer, call

    def _search(self, namespace: str, s: Synthetic) -> Listed:
        from ..retrieval.returned import RetrieverError
        from .operations.calls import result_ids
        from .sent.sessions import search_values

        q = {"question_id": f"check-{s.word}", "question": s.query, "question_date": QUESTION_DATE,
             "question_type": "single-session-user"}
        what = f"search of namespace {namespace!r} for {s.query!r}"
        try:
            asked = self._asked(q)
        except RetrieverError as e:
            raise _Stop(str(e)) from None
        answer, call = self._once("search", search_values(namespace, int(self.spec["k"]), q, asked), what)
        self.seconds.append(call.seconds)
        try:
            ids, scores = result_ids(answer, self.spec, what)
        except RetrieverError as e:
            raise _Stop(str(e)) from None
        for rank, x in enumerate(scores or (), 1):
            # what a run stops at after hours of ingestion (returned.check_ranking): said here, in seconds
            if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(float(x)):
                raise _Stop(f"{what}: score {x!r} at rank {rank} is not a finite number; a run stops at such an "
                            f"answer")
        return self._ids_of(namespace, ids, scores)

    def _asked(self, q: dict):
        if "query" not in self.spec:
            return None
        if self._query is None:
            from .sent.queries import transform

            self._query = transform(self.spec["query"], self.where, lambda m: None)
        return self._query(q)

    def _ids_of(self, namespace: str, ids: list[str], scores: list | None) -> Listed:
        """Results that name keys (or ids the service assigned) as their sessions' ids and copies, a session
        found through several parts once (at its best part); an id that names none is kept as it came (the
        ids check judges it)."""
        from .operations.calls import answers_in_text
        from .sent.sessions import keyed

        if answers_in_text(self.spec) and self.spec["results"].get("id") is None and namespace in self.held:
            return self._attributed(namespace, ids, scores)
        if not keyed(self.spec) or namespace not in self.sent:
            return Listed(ids, scores, None)
        items, assigned = self.sent[namespace]
        by_key = {i.key: i for i in items}
        out, kept, copies, seen = [], [], [], set()
        for r, rid in enumerate(ids):
            item = by_key.get(assigned.get(rid, rid) if assigned is not None else rid)
            if item is not None and item.session_key in seen:
                continue
            if item is not None:
                seen.add(item.session_key)
            out.append(rid if item is None else item.session["id"])
            copies.append(None if item is None else item.position)
            kept.append(None if scores is None else scores[r])
        return Listed(out, None if scores is None else kept, copies)

    def _attributed(self, namespace: str, texts: list[str], scores: list | None) -> Listed:
        """A text service's results (``texts``) as the sessions of ``namespace`` they are attributed to
        (retrieval/attribution.py), each at its first text; a text attributed to none is kept as it came (the
        ids check judges it)."""
        from ..retrieval.attribution import TurnIndex

        held = self.held[namespace]
        index = TurnIndex([t["content"] for s in held for t in s.turns],
                          [p for p, s in enumerate(held) for _ in s.turns], self.spec["attribution"])
        groups = index.groups
        out, kept, copies, seen = [], [], [], set()
        for r, text in enumerate(texts):
            found = [groups[j] for j in index.attribute(text).turns]
            for p in (found or [None]):
                if p in seen:
                    continue
                if p is not None:
                    seen.add(p)
                out.append(text if p is None else held[p].id)
                copies.append(p)
                kept.append(None if scores is None else scores[r])
        return Listed(out, None if scores is None else kept, copies)

    def _holder(self, ns: str, s: Synthetic, got: Listed) -> int | None:
        """Where in ``got`` the session ``s`` of ``ns`` is: its own copy where results name keys, else the
        first result with its id (a repeated id's copies are then not told apart); None when absent."""
        if got.copies is not None:
            position = next(i for i, x in enumerate(self.held[ns]) if x is s)
            return next((j for j, c in enumerate(got.copies) if c == position), None)
        return got.ids.index(s.id) if s.id in got.ids else None

    def _reset(self, ns: str) -> None:
        from .transport.client import ServiceError, Unavailable
        from ..retrieval.returned import RetrieverError
        from .operations.calls import reset_namespace

        try:
            self.calls += reset_namespace(self.client, self.spec, ns) is not None
        except (ServiceError, Unavailable) as e:
            raise _Stop(f"reset of namespace {ns!r}: {e}", isinstance(e, Unavailable)) from None
        except RetrieverError as e:  # a refusal in words (arrival.Refused)
            raise _Stop(str(e)) from None

    def _ingest(self, ns: str, sessions: list[dict], what: str) -> tuple:
        """(the items sent, the ids assigned) of ``sessions`` sent to ``ns`` as a run sends a haystack."""
        from .transport.client import ServiceError, Unavailable
        from ..retrieval.returned import RetrieverError
        from .operations.calls import ingest_namespace
        from .sent.sessions import sent_items

        try:
            # an ingest is never retried alone (as in a run): one that timed out may be in, and twice is two
            calls = []
            _, assigned = ingest_namespace(self.client, self.spec, ns, sessions, self.where, retries=0,
                                           timed=calls.append)
            items = sent_items(self.spec, sessions, self.where)
        except (ServiceError, Unavailable) as e:
            raise _Stop(f"{what}: {e}", isinstance(e, Unavailable)) from None
        except RetrieverError as e:
            raise _Stop(str(e)) from None
        self.calls += len(calls)  # one per session, or one for them all (a batch ingest)
        return items, assigned

    def _fill(self) -> None:
        from ..retrieval.returned import RetrieverError
        from .operations.calls import count_of
        from .transport.client import ServiceError, Unavailable

        for ns in self.held:
            self._reset(ns)
        if self.has_reset:
            # a session in A before A's reset: the reset check's
            self._ingest(self.a, [STALE.session()], f"ingest of {STALE.id!r} into {self.a!r}")
            self._reset(self.a)
        for ns, sessions in self.held.items():
            self.sent[ns] = self._ingest(ns, [s.session() for s in sessions], f"ingest of namespace {ns!r}'s sessions")
        for ns in self.held:
            try:
                self.counts[ns] = count_of(self.client, self.spec, ns, "check-service")[0]
            except RetrieverError as e:
                raise _Stop(str(e)) from None
            except (ServiceError, Unavailable) as e:
                raise _Stop(f"count of namespace {ns!r}: {e}", isinstance(e, Unavailable)) from None
            self.calls += self.counts[ns] is not None

    def _ask(self) -> None:
        others = {ns: [s for other, held in self.held.items() if other != ns for s in held
                       if s.id not in {x.id for x in self.held[ns]}] for ns in self.held}
        for ns, sessions in self.held.items():
            # its own sessions, the one reset away, and (isolation) the sessions only the other namespace holds
            for s in (*sessions, *((STALE,) if ns == self.a and self.has_reset else ()), *others[ns]):
                self.searches.append((ns, s, self._search(ns, s), self._search(ns, s)))

    def run(self) -> list[Result]:
        from .transport.client import attempts

        try:
            # filled again from the start after a transient failure, as a run ingests a namespace again
            for attempt in attempts(int(self.spec["retries"]) + 1, float(self.spec["backoff_s"])):
                try:
                    self._fill()
                    break
                except _Stop as e:
                    if not e.transient:
                        raise
                    if attempt == int(self.spec["retries"]) + 1:
                        from .operations.calls import tried_whole

                        raise _Stop(tried_whole(attempt, self.spec["retries"], "of filling the check's namespaces",
                                                str(e)), True) from None
            self._ask()
        except _Stop as e:
            self._clean()
            return self._skipped([Result("api", "fail", str(e)),
                                  *(Result(c, "skipped", "not run: the service did not answer as the API says (api)")
                                    for c in CHECKS[1:])])
        self._clean()
        return self._skipped([Result("api", "pass", f"{self.calls} resets, ingests, searches and counts answered"),
                              self._judge_reset(), self._sessions(), self._isolation(), self._ids(), self._count(),
                              self._stable(), self._latency()])

    def _skipped(self, results: list[Result]) -> list[Result]:
        """The checks system.check.skip names shown as such, with what each found, never a failure."""
        skip = skipped_checks(self.spec)
        return [Result(r.check, SKIPPED, f"system.check.skip names it; it found: {r.status}: {r.why}")
                if r.check in skip else r for r in results]

    def _clean(self) -> None:
        """The check's namespaces emptied again, where the service still answers."""
        from .operations.calls import reset_namespace

        for ns in self.held:
            try:
                reset_namespace(self.client, self.spec, ns, retries=0)
            except Exception:  # noqa: BLE001 - a service that stopped answering keeps what it holds
                pass

    # ---- judging

    def _judge_reset(self) -> Result:
        if not self.has_reset:
            return Result("reset", "skipped", "the service has no reset operation (reset: null in config)")
        for ns, s, got, _ in self.searches:
            if STALE.id in got.ids:
                return Result("reset", "fail", f"session {STALE.id!r}, ingested into namespace {ns!r} before its "
                                               f"reset, came back in a search for {s.query!r}: reset did not "
                                               f"empty the namespace")
        return Result("reset", "pass", "a session ingested before a reset never came back")

    def _sessions(self) -> Result:
        n = 0
        for ns, s, got, _ in self.searches:
            copies = [x for x in self.held[ns] if x.id == s.id]
            if s not in self.held[ns]:
                continue
            n += 1
            j = self._holder(ns, s, got)
            if j is None or not _found(got, j):
                which = (f" (copy {copies.index(s) + 1} of the {len(copies)} sessions sent with that id; a "
                         f"service must keep each)" if len(copies) > 1 else "")
                how = ("never came back" if j is None else
                       f"came back only at the list's lowest score ({got.scores[j]!r}, as every session does)")
                return Result("sessions", "fail", f"session {s.id!r} of namespace {ns!r}{which} {how} in a "
                                                  f"search for its own words {s.query!r}")
        return Result("sessions", "pass", f"each of the {n} sessions sent came back for its own words, both "
                                          f"copies of a repeated id included")

    def _count(self) -> Result:
        from .operations.calls import has_count

        if not has_count(self.spec, self.client):
            return Result("count", "skipped", "the service has no count operation (count: null in config, or a "
                                              "library without a count method)")
        for ns, held in self.held.items():
            sent = len(self.sent[ns][0])
            if self.counts[ns] != sent:
                if sent != len(held):
                    return Result("count", "fail", f"namespace {ns!r} holds {self.counts[ns]} items by count, not "
                                                   f"the {sent} sent (its {len(held)} sessions, a long one in parts)")
                return Result("count", "fail", f"namespace {ns!r} holds {self.counts[ns]} sessions by count, not "
                                               f"the {len(held)} sent (one id sent twice)"
                              if len({s.id for s in held}) < len(held) else
                              f"namespace {ns!r} holds {self.counts[ns]} sessions by count, not the {len(held)} sent")
        return Result("count", "pass", "count agrees with the sessions sent to each namespace")

    def _isolation(self) -> Result:
        if self.reset_only:
            return Result("isolation", "skipped", "isolation: reset uses one namespace, emptied for each haystack")
        for ns, s, got, again in self.searches:
            own = {x.id for x in self.held[ns]}
            for other, held in self.held.items():
                leaked = next((i for i in got.ids + again.ids if i in {x.id for x in held} - own), None) if other != ns else None
                if leaked is not None:
                    return Result("isolation", "fail", f"a search of namespace {ns!r} for {s.query!r} returned "
                                                       f"{leaked!r}, a session only namespace {other!r} holds: the "
                                                       f"service does not keep namespaces apart")
        return Result("isolation", "pass", "no search returned a session of the other namespace")

    def _ids(self) -> Result:
        sent = {x.id for held in self.held.values() for x in held} | {STALE.id}
        for ns, s, got, again in self.searches:
            altered = next((i for i in got.ids + again.ids if i not in sent), None)
            if altered is not None:
                like = next((x for x in sorted(sent) if x.casefold() == altered.casefold()
                             or x.strip().lstrip("0") == altered.strip().lstrip("0")), None)
                return Result("ids", "fail", f"a search of namespace {ns!r} returned {altered!r}, an id never sent"
                                             + (f" (sent as {like!r})" if like else ""))
        for ns, s, got, _ in self.searches:
            if s not in self.held[ns] or not got.ids:
                continue
            j = self._holder(ns, s, got)
            # a tie with the first is no wrong ranking (what a correct ranking gives is all this asks); nor is
            # a first that found nothing either (every score tied) in place of an absent one: sessions says so
            if j == 0 or (j is not None and got.scores is not None and got.scores[j] == got.scores[0]) or (
                    j is None and not _found(got, 0)):
                continue
            other = " (another copy of that id)" if got.ids[0] == s.id else ""
            if j is None:
                return Result("ids", "fail", f"a search of namespace {ns!r} for {s.query!r} ranked {got.ids[0]!r} "
                                             f"first and never {s.id!r}, the one session holding those words")
            why = f" (score {got.scores[0]!r} over {got.scores[j]!r})" if got.scores is not None else ""
            return Result("ids", "fail", f"a search of namespace {ns!r} for {s.query!r} ranked {got.ids[0]!r}{other} "
                                         f"first, above {s.id!r}, the one session holding those words{why}")
        return Result("ids", "pass", "every id came back as sent, none ranked above the session holding a "
                                     "search's words")

    def _stable(self) -> Result:
        for ns, s, got, again in self.searches:
            if (got.ids, got.copies) != (again.ids, again.copies):  # the lists; a score's last digits decide none
                return Result("stable", "fail", f"two identical searches of namespace {ns!r} for {s.query!r} "
                                                f"answered {got.ids[:5]} then {again.ids[:5]}")
        return Result("stable", "pass", f"{len(self.searches)} searches asked twice gave the same lists")

    def _latency(self) -> Result:
        ms = statistics.median(self.seconds) * 1000.0
        return Result("latency", "pass", f"p50 {ms:.1f} ms over {len(self.seconds)} searches (the client's time)")


def _found(got: Listed, j: int) -> bool:
    """The ``j``-th result was found, not listed as every session is: without scores, listed; with scores,
    above the list's lowest, or the list names no other session (a list whose scores all tie found
    nothing: a dropped copy's id may still pad it, at score 0 as every session)."""
    return got.scores is None or got.scores[j] > min(got.scores) or all(i == got.ids[j] for i in got.ids)


def first_failure(results: list[Result]) -> Result | None:
    return next((r for r in results if r.status == "fail"), None)

