"""The load curve (``system.load``, opt-in): after the job's searches, on one
warmed namespace (its questions searched already), the same searches again
with 1, 4, 16 ... in flight at once, each level at most ``searches`` searches
and ``max_s`` seconds (bounded, so a service on loopback is never flooded),
timed into the timings table: one row per search (operation ``load``, phase
the level) and one per level (operation ``load_window``: its wall time, and in
``value`` the searches it answered), from which the latency page gives
throughput (searches/s) and p50/p95 latency per level. The load changes no
result; each answer's list is compared with the sequential one
(determinism.py)."""

from __future__ import annotations

import threading
import time

from ...core.errors import ConfigError

LOAD_DEFAULTS = {"concurrency": [1, 4, 16], "searches": 64, "max_s": 20.0}
MAX_CONCURRENCY = 64  # a level above this is a config error: more threads than a loopback test should hold


def load_of(value, where: str) -> dict | None:
    """``system.load`` checked (``true``: the defaults), or None when not asked."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict) or set(value) - set(LOAD_DEFAULTS):
        raise ConfigError(f"{where}: load must be true or a mapping of {', '.join(LOAD_DEFAULTS)}, not {value!r}")
    out = {**LOAD_DEFAULTS, **value}
    levels = out["concurrency"]
    if (not isinstance(levels, list) or not levels
            or not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= MAX_CONCURRENCY for c in levels)):
        raise ConfigError(f"{where}: load: concurrency {levels!r} must be a list of whole numbers from 1 to "
                          f"{MAX_CONCURRENCY} (the searches in flight at each level)")
    n = out["searches"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"{where}: load: searches {n!r} must be a whole number of at least 1 (per level)")
    m = out["max_s"]
    if isinstance(m, bool) or not isinstance(m, (int, float)) or m <= 0:
        raise ConfigError(f"{where}: load: max_s {m!r} must be a number of seconds above 0 (per level)")
    return {"concurrency": sorted(set(levels)), "searches": n, "max_s": float(m)}


def run(client, namespace: str, asks: list[tuple[str, dict]], load: dict, listed=None) -> list[tuple]:
    """Timings rows of the load levels (``asks``: (question id, its search's values) of the namespace's
    questions, cycled): per level, its searches from ``concurrency`` threads until ``searches`` are
    answered or ``max_s`` has passed. ``listed(question id, answer)`` is told each answer (determinism.py
    compares its list with the sequential one)."""
    from ..transport.client import ServiceError, Unavailable

    rows: list[tuple] = []
    lock = threading.Lock()
    for level in load["concurrency"]:
        issued = [0]
        started = time.monotonic()
        deadline = started + load["max_s"]

        def worker(level=level, issued=issued, deadline=deadline):
            while True:
                with lock:
                    if issued[0] >= load["searches"] or time.monotonic() >= deadline:
                        return
                    qid, values = asks[issued[0] % len(asks)]
                    issued[0] += 1
                try:
                    answer, call = client.once("search", values)
                    row = ("load", str(level), namespace, qid, call.seconds, call.attempts, True, call.server_seconds)
                    if listed is not None:
                        listed(qid, answer)
                except (Unavailable, ServiceError):
                    row = ("load", str(level), namespace, qid, None, None, False, None)
                with lock:
                    rows.append(row)

        threads = [threading.Thread(target=worker, name=f"load-{level}-{i}", daemon=True) for i in range(level)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done = sum(1 for r in rows if r[1] == str(level))
        rows.append(("load_window", str(level), namespace, None, time.monotonic() - started, None, True, None, done))
    return rows
