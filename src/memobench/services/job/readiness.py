"""Readiness (``system.ready``): after a namespace is ingested, wait until it is
searchable, for a service that indexes what it was sent after answering
(asynchronously)::

    ready: {until: count, every_s: 0.5, timeout_s: 120}   # count polled until it says every session sent
    ready: {until: search}                                # a search polled until it answers a non-empty list
    ready: {until: settle, settle_s: 2}                   # a fixed wait

The time from the last ingest request's answer to searchable is a timings
row (operation ``ready``, phase the condition). A namespace not searchable
within ``timeout_s`` is an ingestion that failed: its questions are system
errors (counted; more than ``system.max_errors`` stop the job with a line
saying why). ``ready`` is part of the variant's definition when given: a
list searched before an asynchronous service has indexed everything may
differ from one searched after."""

from __future__ import annotations

import time

from ...core.errors import ConfigError

UNTIL = ("count", "search", "settle")
READY_DEFAULTS = {"every_s": 0.5, "timeout_s": 120.0, "settle_s": 2.0}


class NotReady(Exception):
    """A namespace that did not become searchable in time (its message is one line)."""


def ready_of(value, operations: dict, where: str) -> dict | None:
    """``system.ready`` checked, its defaults filled in; None when not given."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("until") not in UNTIL:
        raise ConfigError(f"{where}: ready must be a mapping with until: one of {', '.join(UNTIL)} (and every_s, "
                          f"timeout_s, settle_s), not {value!r}")
    unknown = set(value) - {"until", *READY_DEFAULTS}
    if unknown:
        raise ConfigError(f"{where}: ready: unknown key(s) {', '.join(sorted(unknown))} (known: until, "
                          f"{', '.join(READY_DEFAULTS)})")
    out = {"until": value["until"]}
    for key, default in READY_DEFAULTS.items():
        v = value.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (key != "settle_s" and v == 0):
            raise ConfigError(f"{where}: ready: {key} {v!r} is not a number of seconds"
                              + (" above 0" if key != "settle_s" else ""))
        out[key] = float(v)
    if out["until"] == "count" and operations.get("count") is None:
        raise ConfigError(f"{where}: ready: until: count needs the service's count operation, which it has none "
                          f"of; give until: search or until: settle")
    return out


def probe_query(sessions: list[dict]) -> str:
    """What a readiness search asks: the last turn's text the namespace was sent (a service that holds it
    finds something for it; one that indexes in the order sent holds the rest by then, where the first
    session's text would be found while the others still wait)."""
    for s in reversed(sessions):
        for t in reversed(s.get("turns") or []):
            if str(t.get("content") or "").strip():
                return str(t["content"])
    return "memobench"


def wait(ready: dict, namespace: str, sessions: list[dict], count, search, expected: int | None = None
         ) -> tuple[float, int]:
    """Wait until ``namespace`` is searchable: (its seconds, the polls it took), or NotReady.
    ``count()``: the items it holds now, ``expected`` when all are in (default: one per session; a
    session sent in parts counts each); ``search(text)``: the ids a search answers now (either may
    raise: a service that does not know the namespace yet; polled again)."""
    expected = len(sessions) if expected is None else expected
    started = time.monotonic()
    if ready["until"] == "settle":
        time.sleep(ready["settle_s"])
        return time.monotonic() - started, 0
    deadline, polls, last = started + ready["timeout_s"], 0, "nothing yet"
    query = probe_query(sessions)
    while True:
        polls += 1
        try:
            if ready["until"] == "count":
                n = count()
                if n == expected:
                    return time.monotonic() - started, polls
                last = f"count {n} of {expected}"
            else:
                ids = search(query)
                if ids:
                    return time.monotonic() - started, polls
                last = "an empty list"
        except Exception as e:  # noqa: BLE001 - a service that does not hold the namespace yet may refuse
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() + ready["every_s"] > deadline:
            raise NotReady(f"namespace {namespace} was not searchable {ready['timeout_s']:g} s after its ingestion "
                           f"(ready.until {ready['until']}, {polls} polls; last: {last}); raise system.ready."
                           f"timeout_s if the service indexes slower")
        time.sleep(ready["every_s"])
