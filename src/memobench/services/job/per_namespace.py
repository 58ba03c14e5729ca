"""A server per namespace in a retrieve job (services/transport/servers.py starts and
stops them): such a server holds nothing once stopped, so each namespace's
ingestion and all its searches happen while its server lives. The job's
searches are ordered by namespace in a pre-pass: per namespace its server
is started (timed: a ``start`` row, apart from its searches), the namespace
ingested (and waited for: system.ready), its questions searched, and the
server stopped and its folder removed, at most ``system.servers`` namespaces
(default: ``system.concurrency``) at once, across the variant's parallel jobs
too (:func:`slot`); the ranking step then gives the
stored answers in question order. With ``system.load`` the namespace with
the most questions goes last, alone, and its load curve is measured before
its server stops."""

from __future__ import annotations

import contextlib
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path


def servers_of(value, per_namespace: bool, isolation: str, where: str):
    """``system.servers`` checked: None when not given."""
    from ...core.errors import ConfigError

    if not per_namespace:
        if value is not None:
            raise ConfigError(f"{where}: servers bounds the servers started per namespace, and this variant starts "
                              f"one server for all: name {{namespace}} or {{workdir}} in mcp.command or mcp.env for "
                              f"a server per namespace, or leave servers out")
        return None
    if isolation != "namespace":
        raise ConfigError(f"{where}: a server per namespace ({{namespace}} or {{workdir}} in mcp.command or mcp.env) "
                          f"needs isolation: namespace; isolation: reset uses one namespace")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{where}: servers {value!r} must be a whole number of at least 1 (the servers alive at "
                          f"once)")
    return value


def load_namespace(by_namespace: dict[str, list]) -> str | None:
    """The namespace the load curve is measured on: the one with the most questions (the first by name
    among equals)."""
    return min(by_namespace, key=lambda ns: (-len(by_namespace[ns]), ns)) if by_namespace else None


@contextlib.contextmanager
def slot(folder: Path | None, n: int, poll_s: float = 0.05):
    """One of ``n`` slots in ``folder``, held across processes (an exclusive lock on one of its files
    ``0.lock`` ... ``n-1.lock``), waited for while all are held: the bound on servers alive at once
    (system.servers) holds across a variant's parallel retrieve jobs, whose threads each take one before
    starting a server. ``folder`` None, or a filesystem without locks: no bound beyond the caller's own."""
    import fcntl
    import time

    if folder is None:
        yield None
        return
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        for i in range(n):
            f = open(folder / f"{i}.lock", "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            except OSError:
                f.close()
                yield None
                return
            try:
                yield i
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        time.sleep(poll_s)


def serve_each(service, calls: list[tuple], namespace_of, sessions_of, search_one, log=print,
               label: str = "") -> dict:
    """[(positions, scores)] of every call, in its order (``calls``: the ranking step's (question, haystack,
    documents), in its order), each namespace served by its own server while its questions are searched.
    ``namespace_of(q)``/``sessions_of(q)``: a question's namespace and sessions; ``search_one(q, hay, docs)``:
    one search (system.rank_segment's). Its progress (``label``: the segment's) counts the questions searched
    as they are: this is the job's work, and the ranking step that follows only reads the answers."""
    import threading
    import time

    from ...core.progress import Progress
    from ..operations.calls import _IngestFailed

    client, spec = service.client, service.spec
    progress = Progress(log, label, total=len(calls), unit="questions")
    started, searched, counting = time.monotonic(), [0], threading.Lock()

    def search_counted(q, hay, docs):
        got = search_one(q, hay, docs)
        with counting:
            searched[0] += 1
            progress(searched[0])
        return got
    by_namespace: dict[str, list] = {}
    for n, call in enumerate(calls):  # a question id may repeat: a call is known by its place
        by_namespace.setdefault(namespace_of(call[0]), []).append((n, *call))
    last = load_namespace(by_namespace) if spec.get("load") else None
    answers: list = [None] * len(calls)

    workers = max(1, int(spec.get("servers") or spec["concurrency"]))
    shared = getattr(client, "shared", None)  # the variant's servers' folder: its jobs' servers count together

    def one(namespace: str) -> None:
        questions = by_namespace[namespace]
        with slot(None if shared is None else shared.with_suffix(".slots"), workers), client.serving(namespace):
            try:
                seconds = client.start(namespace)
                if seconds is not None:
                    service._time("start", "", namespace, None, seconds=seconds, attempts=1)
                service.ensure(namespace, sessions_of(questions[0][1]))
            except _IngestFailed as e:
                service.failed[namespace] = f"ingestion failed: {e}"
            for n, q, hay, docs in questions:
                answers[n] = search_counted(q, hay, docs)
            if namespace == last and namespace not in service.failed:
                service.load_curve(client, namespace, [q for _, q, _, _ in questions])
            peak = client.peak_memory(namespace)
            if peak is not None:
                service._time("memory", "", namespace, None, seconds=None, attempts=None, value=peak)

    order = sorted(ns for ns in by_namespace if ns != last)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(one, ns) for ns in order]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in done if f.exception() is not None), None)
        if failed is not None:
            for f in futures:
                f.cancel()  # the namespaces not started: one failure stops the job
            raise failed.exception()
    if last is not None:
        one(last)  # alone: its load curve shares the machine with no other namespace's work
    progress(searched[0], f", done in {time.monotonic() - started:.1f} s", force=True)
    return answers
