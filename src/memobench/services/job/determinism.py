"""Whether a memory service gives the same lists run after run
(docs/memory-services.md#determinism). A service whose order moves (ties of
second-resolution timestamps broken by write time, a random tie-break, a
race between concurrent searches) gives other figures in every run, with
exit status 0; each retrieve job compares, at a bounded cost:

- ``replicas`` (``system.determinism.replicas``, default 1): that many of the
  job's haystacks (those with the most questions) ingested again into a
  fresh namespace of their own (a server of their own, with a server per
  namespace; under ``isolation: reset``, the one namespace emptied and filled
  again), their questions searched again, ``concurrency`` at a time, and
  each list compared with the first. The cost: that many ingestions and
  their questions' searches more per job; none of it reaches the timings;
- the warm repeats (``warm_repeats``): each repeat's list, the same search
  again in a row, compared with the first;
- the load curve (``system.load``): each of its concurrent searches' lists
  compared with the same question's sequential one.

What differs is in the job's log, in the segment's checks (the merge job
states it in metrics.json's ``system_determinism`` and ``warnings``, the console and
the report, with how far the figures move over the replicated questions);
``on_differ: error`` makes the job stop in one line instead."""

from __future__ import annotations

import secrets
import threading
import time
from typing import NamedTuple

from ...core.errors import ConfigError

DEFAULTS = {"replicas": 1, "on_differ": "warn"}
ON_DIFFER = ("warn", "error")
MAX_REPLICAS = 100  # haystacks per job: more is a second run, not a check


def determinism_of(value, where: str) -> dict | None:
    """``system.determinism`` checked: None at its defaults (a variant that leaves it out keeps its params),
    else the whole setting (``false``: no replica)."""
    if value is None or value is True:
        return None
    if value is False:
        value = {"replicas": 0}
    if not isinstance(value, dict) or set(value) - set(DEFAULTS):
        raise ConfigError(f"{where}: determinism must be true, false or a mapping of {', '.join(DEFAULTS)}, not "
                          f"{value!r}")
    out = {**DEFAULTS, **value}
    n = out["replicas"]
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_REPLICAS:
        raise ConfigError(f"{where}: determinism: replicas {n!r} must be a whole number from 0 to {MAX_REPLICAS} (the "
                          f"haystacks per retrieve job ingested again and searched again)")
    if out["on_differ"] not in ON_DIFFER:
        raise ConfigError(f"{where}: determinism: on_differ {out['on_differ']!r} is not one of {', '.join(ON_DIFFER)}")
    return None if out == DEFAULTS else out


def settings(spec: dict) -> dict:
    return {**DEFAULTS, **(spec.get("determinism") or {})}


class Searched(NamedTuple):
    """A question's first search: what it asked, and what it got (raw result ids; its ranking)."""

    namespace: str
    q: dict
    hay: object
    sessions: list
    turns: object
    content: str
    ids: list
    ranking: tuple


def figures(items: list[tuple[dict, list[int], object]]) -> dict:
    """hit@1, hit@5 and the sum of reciprocal ranks (to rank 10) of session lists (``items``: (question,
    positions, haystack)), as the harness counts them."""
    out = {"hit@1": 0, "hit@5": 0, "mrr_sum": 0.0}
    for q, positions, hay in items:
        gold = set(q.get("gold") or ())
        rank = next((r for r, p in enumerate(positions[:10], 1) if hay.ids[p] in gold), 0)
        out["hit@1"] += rank == 1
        out["hit@5"] += 0 < rank <= 5
        out["mrr_sum"] += 1.0 / rank if rank else 0.0
    out["mrr_sum"] = round(out["mrr_sum"], 6)
    return out


class Lists:
    """One retrieve job's lists of a service variant, and what searching again found."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.lock = threading.Lock()
        # a haystack's content (reset isolation: one namespace holds each in turn) -> {question's place: Searched}
        self.first: dict[str, dict] = {}
        self.placed: dict = {}  # question's place -> Searched
        self.repeats = {"checked": 0, "differing": {}}  # differing: q_index -> question id
        self.loaded = {"checked": 0, "differing": {}}  # the load curve's
        self.replicas = {"namespaces": 0, "questions": 0, "unanswered": 0, "differing": {}, "first": None,
                         "replica": None}

    @staticmethod
    def _place(q: dict):
        return q.get("q_index", q["question_id"])

    def searched(self, namespace, content, q, hay, sessions, turns, ids, ranking) -> None:
        x = Searched(namespace, q, hay, sessions, turns, content, list(ids), ranking)
        with self.lock:
            self.first.setdefault(content, {})[self._place(q)] = self.placed[self._place(q)] = x

    def _same(self, q: dict, ids: list, answer, where: str) -> bool:
        from ...retrieval.returned import RetrieverError
        from ..operations.calls import result_ids

        try:
            return result_ids(answer, self.spec, where)[0] == ids
        except RetrieverError:
            return False  # an answer that cannot be read where the first could: not the same

    def repeated(self, namespace: str, q: dict, ids: list, answer, where: str) -> None:
        """A warm repeat's answer: the same search again, in a row."""
        same = self._same(q, ids, answer, where)
        with self.lock:
            self.repeats["checked"] += 1
            if not same:
                self.repeats["differing"][self._place(q)] = q["question_id"]

    def concurrent(self, namespace: str, q: dict, answer, where: str) -> None:
        """A load search's answer, sent while others were in flight."""
        first = self.placed.get(self._place(q))
        if first is None or first.namespace != namespace:
            return
        same = self._same(q, first.ids, answer, where)
        with self.lock:
            self.loaded["checked"] += 1
            if not same:
                self.loaded["differing"][self._place(q)] = q["question_id"]

    def chosen(self, n: int, failed) -> list[str]:
        """The ``n`` haystacks replicated (their contents): those with the most questions (the first by name
        among equals), whose ingestion did not fail."""
        held = {c: qs for c, qs in self.first.items() if qs and c not in failed}
        return sorted(held, key=lambda c: (-len(held[c]), c))[:n]

    def replicated(self, answered: list[tuple]) -> None:
        """The replica's answers (``answered``: (Searched, its ranking or None, why it failed))."""
        done = [(x, got) for x, got, _ in answered if got is not None]
        r = self.replicas
        r["namespaces"] += 1
        r["questions"] += len(done)
        r["unanswered"] += len(answered) - len(done)
        for x, got in done:
            if list(got[0]) != list(x.ranking[0]):
                r["differing"][self._place(x.q)] = x.q["question_id"]
        if any(x.turns is not None for x, _ in done):
            return  # turns: its session figures are the merge's; the lists compared suffice
        for key, items in (("first", [(x.q, x.ranking[0], x.hay) for x, _ in done]),
                           ("replica", [(x.q, got[0], x.hay) for x, got in done])):
            now = figures(items)
            r[key] = now if r[key] is None else {k: round(r[key][k] + now[k], 6) for k in now}

    def differs(self) -> list[str]:
        """What differed, one clause each (none: [])."""
        out = []
        r = self.replicas
        if r["differing"]:
            out.append(f"{len(r['differing'])} of {r['questions']} questions searched again in a fresh namespace "
                       f"holding the same sessions gave another list")
        if self.repeats["differing"]:
            out.append(f"{len(self.repeats['differing'])} of {self.repeats['checked']} searches repeated in a row "
                       f"gave another list")
        if self.loaded["differing"]:
            out.append(f"{len(self.loaded['differing'])} of {self.loaded['checked']} searches sent "
                       f"concurrently (system.load) gave another list than sent alone")
        return out

    def summary(self) -> dict:
        """The segment's checks (harness.CHECKS_KEY; metrics.checks_summary merges them): only what is the
        same run after run for a service that is (a load curve's count of searches depends on time)."""
        def qids(d):
            return [d[k] for k in sorted(d)]

        r = self.replicas
        return {"replicas": {"namespaces": r["namespaces"], "questions": r["questions"],
                             "unanswered": r["unanswered"], "differing": qids(r["differing"]),
                             "first": r["first"], "replica": r["replica"]},
                "repeats": {"checked": self.repeats["checked"], "differing": qids(self.repeats["differing"])},
                "concurrent": {"differing": qids(self.loaded["differing"])}}


def replicate(service) -> None:
    """After a job's searches (and its load curve): ``replicas`` haystacks ingested again, fresh, and searched
    again; then what differed, logged, or with ``on_differ: error`` one line that stops the job."""
    from ...retrieval.returned import RetrieverError

    lists, log = service.lists, service.log
    for content in lists.chosen(settings(service.spec)["replicas"], service.failed):
        _replica(service, content)
    said = lists.differs()
    if lists.repeats["checked"] or lists.loaded["checked"]:
        service.log(f"{service.v.name}: determinism: {lists.repeats['checked']} searches repeated in a row and "
                    f"{lists.loaded['checked']} sent concurrently (system.load) compared with the first: "
                    f"{len(lists.repeats['differing']) + len(lists.loaded['differing'])} lists differ")
    if not said:
        return
    where = service.where()
    r = lists.replicas
    moved = ""
    if r["differing"] and r["first"] is not None:
        a, b, n = r["first"], r["replica"], r["questions"]
        moved = (f"; over them hit@1 {a['hit@1']} then {b['hit@1']}, hit@5 {a['hit@5']} then {b['hit@5']}, MRR "
                 f"{a['mrr_sum'] / n:.3f} then {b['mrr_sum'] / n:.3f}")
    line = f"{where}: its lists move between runs: {'; '.join(said)}{moved}"
    if settings(service.spec)["on_differ"] == "error":
        raise RetrieverError(f"{line} (system.determinism.on_differ: error)")
    log(f"warning: {line}")


def _replica(service, content: str) -> None:
    """A haystack's sessions (``content``: :class:`Lists`' key) ingested into a fresh namespace (or server), its
    questions searched there again ``concurrency`` at a time, each list compared with the first."""
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    from ..transport.client import ServiceError, Unavailable
    from ...retrieval.returned import RetrieverError
    from ..operations.calls import _IngestFailed, reset_namespace, result_ids
    from ..sent.sessions import search_values

    spec, client, lists = service.spec, service.client, service.lists
    asked = [lists.first[content][k] for k in sorted(lists.first[content])]
    sessions, namespace = asked[0].sessions, asked[0].namespace
    reset_only = spec["isolation"] == "reset"
    # its own name, new each job: a service without reset never holds an earlier job's replica under it
    replica = namespace if reset_only else f"{namespace}-replica-{secrets.token_hex(4)}"
    many = bool(spec.get("per_namespace"))
    rows, started = len(service.timings), time.monotonic()
    where = f"{service.where()}: determinism: replica of namespace {namespace}"
    answered: list[tuple] = []
    with client.serving(replica) if many else contextlib.nullcontext():
        try:
            if many:
                client.start(replica)
            service._ingest(replica, sessions)
        except (_IngestFailed, Unavailable, ServiceError) as e:
            service.log(f"{where}: its ingestion failed ({e}); nothing compared")
            answered = []
        else:
            service.cold.discard(replica)
            if reset_only:
                service.current = content  # the one namespace holds this haystack again

            def one(x: Searched):
                values = search_values(replica, int(spec["k"]), x.q, service._asked(x.q))
                unit = "turn" if x.turns is not None else "session"
                try:
                    answer, _ = client.once("search", values)
                    ids, scores = result_ids(answer, spec, where, unit)
                    return x, service.ranking(ids, scores, x.hay, x.sessions, replica, where, x.turns), None
                except (Unavailable, ServiceError, RetrieverError) as e:
                    return x, None, str(e)

            with ThreadPoolExecutor(max_workers=max(1, int(spec["concurrency"]))) as pool:
                answered = list(pool.map(one, asked))
            if not reset_only and not many:
                try:  # the replica emptied again: it holds a copy of what the run searched
                    reset_namespace(client, spec, replica, retries=0)
                except (Unavailable, ServiceError):
                    pass
    del service.timings[rows:]  # the replica's requests: no latency of the run's
    if answered:
        lists.replicated(answered)
        failed = [why for _, got, why in answered if got is None]
        differing = sum(1 for x, got, _ in answered if got is not None and list(got[0]) != list(x.ranking[0]))
        service.log(f"{service.v.name}: determinism: namespace {namespace}'s {len(sessions)} sessions ingested again "
                    f"into {replica}, its {len(asked)} questions searched again ({int(spec['concurrency'])} at a "
                    f"time) in {time.monotonic() - started:.2f} s: {differing} lists differ"
                    + (f", {len(failed)} searches failed (first: {failed[0]})" if failed else ""))
