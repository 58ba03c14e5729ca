"""The client of a memory library used in-process: a Python object with
``reset(namespace)``, ``ingest(namespace, session)``, ``search(namespace,
query, k)`` and, optionally, ``count(namespace)`` (docs/memory-services.md#a-library-in-process),
called with the same promises as :class:`.client.HttpClient` and
:class:`.mcp.McpClient`: one call timed on the monotonic clock,
:class:`.client.ServiceError` at once for an answer that cannot be used or
an exception of the library's, and retries with exponential backoff for a
transient one (``OSError``: a connection, a timeout, a busy file), then
:class:`.client.Unavailable`. A system variant drives it, checks it, times it
and records it exactly as a service (``services.job.rank``); its answers are
given the shapes of the project's own API, so that the same reading
(``results``, ``id``, ``score``; ``sessions``) applies:

- ``search`` returns the sessions best first: ids (strings), ``(id, score)``
  pairs, or ``{"id": ..., "score": ...}`` objects; it may return more than
  ``k``, as a service may;
- ``count`` returns a number.

What ``reset`` and ``ingest`` return is not read. A call cannot be cut
short (``timeout_s`` does not apply: a library's call runs in this thread).
The object's methods may be called from several threads at once (the
variant's ``concurrency``), each on its own namespace while ingesting; a
library that is not safe so is run with ``concurrency: 1``."""

from __future__ import annotations

import numbers
import time

from ...core.errors import excerpt
from .client import Call, ServiceError, Unavailable, attempts

# the methods each operation calls, and the ones an object must have
METHODS = {"reset": "reset", "ingest": "ingest", "search": "search", "count": "count"}
REQUIRED = ("reset", "ingest", "search")


def missing_methods(obj) -> list[str]:
    """The required methods ``obj`` lacks (or holds as something not callable)."""
    return [m for m in REQUIRED if not callable(getattr(obj, m, None))]


class LibraryClient:
    """Calls the methods of ``obj`` (made by the user's factory) as the four
    operations. ``name`` names it in messages (``file.py:factory``);
    ``describe(exception) -> str``: an exception in one line (the user's
    frame in it), else its type and message."""

    def __init__(self, obj, name: str, retries: int = 3, backoff_s: float = 0.1, describe=None):
        missing = missing_methods(obj)
        if missing:
            raise ValueError(f"{name} made a {type(obj).__name__}, which has no {', '.join(missing)} method "
                             f"(a memory library's object has reset, ingest, search and optionally count)")
        self.obj, self.name, self.retries, self.backoff_s = obj, name, retries, backoff_s
        self.counts = callable(getattr(obj, "count", None))  # count is optional
        self._describe = describe or (lambda e: f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
        self.breaks = 0  # no connection to lose: a library holds what it was given for the job

    def close(self) -> None:
        close = getattr(self.obj, "close", None)
        if callable(close):
            close()

    def _call(self, op: str, values: dict):
        namespace = values["namespace"]
        method = getattr(self.obj, METHODS[op])
        if op == "ingest":
            return method(namespace, values["session"])
        if op == "search":
            # the query an agent would send, where the variant says how to make it; else the question's text
            query = values["query"] if values.get("query") is not None else values["question.text"]
            return method(namespace, query, int(values["k"]))
        return method(namespace)

    def once(self, op: str, values: dict, retries: int | None = None) -> tuple[object, Call]:
        """(the answer in the project API's shape, its :class:`.client.Call`) of one operation."""
        if op == "count" and not self.counts:
            raise ServiceError(f"{self.name} has no count method")
        tries = (self.retries if retries is None else retries) + 1
        why, first = "", time.monotonic()
        for attempt in attempts(tries, self.backoff_s):
            try:
                got = self._call(op, values)
            except OSError as e:  # a store the library reaches (a socket, a file) failing now: worth a retry
                why = self._describe(e)
                continue
            except Exception as e:  # noqa: BLE001 - the library's own failure: its message, one line
                raise ServiceError(f"{op}: {self.name}'s {METHODS[op]} raised {self._describe(e)}") from None
            seconds = time.monotonic() - first
            return _shaped(op, got, self.name), Call(seconds, attempt, None)
        raise Unavailable(f"{op}: {self.name}'s {METHODS[op]} failed {tries} time(s), last: {why}")


def _shaped(op: str, got, name: str):
    """A method's return as the project's API answers: ``{"results": [{id, score}]}`` for search,
    ``{"sessions": n}`` for count; a return that cannot be read is a ServiceError naming it."""
    if op == "count":
        # a library's own integer type (numpy.int64, a numpy array's len or sum) is a number as int is
        return {"sessions": int(got) if isinstance(got, numbers.Integral) and not isinstance(got, bool) else got}
    if op != "search":
        return None
    if isinstance(got, (str, bytes, dict)) or not hasattr(got, "__iter__"):
        raise ServiceError(f"search: {name}'s search returned {excerpt(repr(got))}, not a list of session ids "
                           f"(or (id, score) pairs, or {{id, score}} objects)")
    out = []
    for r, item in enumerate(got, 1):
        if isinstance(item, dict):
            out.append({k: _number(item[k]) if k == "score" else item[k] for k in ("id", "score") if k in item})
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            out.append({"id": item[0], "score": _number(item[1])})
        else:
            out.append({"id": item})  # an id (result_ids says so when it is not a string)
    return {"results": out}


def _number(x):
    """A score as JSON has it: any real number (numpy's included) a float; anything else, a bool too, as it
    came (check_ranking says what is wrong with it)."""
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        try:
            return float(x)
        except OverflowError:  # an int beyond a float's range: check_ranking says so
            return x
    return x
