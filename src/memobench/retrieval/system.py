"""A memory service as a variant: a running system that ingests sessions and
answers searches, driven over HTTP or MCP under the harness rules of the
dataset's family (the same questions, gold and denominators as every other
variant)::

    variants:
      my-service:
        system:
          url: http://127.0.0.1:8765   # the service (its API: services/api.py, docs/memory-services.md)
          # or, over MCP: mcp: {command: [my-server, --stdio]} (started by the job) or mcp: {url: http://.../mcp}
          isolation: namespace         # a namespace per distinct haystack; or reset (one, emptied per haystack)
          concurrency: 4               # haystacks ingested at once
          timeout_s: 30                # per request
          retries: 3                   # more tries of a transient failure, with backoff
          max_errors: 0                # questions that may fail (system errors) before the job stops
          warm_repeats: 1              # each search repeated this many times, timed as warm
          check: true                  # its conformance check (retrieval/conformance.py) before the first ingestion
          ready: {until: count}        # wait until an ingested namespace is searchable (retrieval/readiness.py)
          load: true                   # a load curve after the job's searches (retrieval/load.py)
          determinism: {replicas: 1}   # a haystack per job ingested again, its lists compared (determinism.py)
          # {namespace} or {workdir} in mcp.command or mcp.env: a server per namespace, at most
          # servers: N alive at once (retrieval/servers.py)

Each question is searched over its own haystack only. With ``namespace``
isolation every distinct haystack (its sessions' ids, dates and turns) gets
its own namespace, named by the variant and a digest of that content, so the
questions that share a haystack (LoCoMo's) share one ingestion; with
``reset`` one namespace is emptied and filled again whenever the haystack
changes, and the variant's jobs run one at a time (a lock). A session is sent
as ``{id, date, turns: [{role, content}]}`` in haystack order; a session id
the haystack lists twice is sent twice, and the service's i-th result with
that id is taken as its i-th copy.

A variant with ``grain: turn`` ranks turns (docs/protocol.md#turn-level):
each turn is sent with its ``id`` (``{session_id}_{index + 1}``, or LoCoMo's
``dia_id``) before its role and content, and the service's results are turn
ids, held to the same checks (an id repeated in the haystack, a repeated
session's turn, is its i-th copy as above). Every turn can be returned; on a
LongMemEval-format dataset, whose turn corpus is the user turns, an
assistant turn ranked is scored as a turn that is never gold, at its rank.

Ingestion is checkpointed (:data:`layout.SYSTEM_LEDGER`): a namespace is
recorded once its sessions are in and the service's ``count`` agrees, with
what shaped the requests (:func:`sent_shape`: a record made otherwise never
confirms it); a later job (a resumed run, another segment) asks ``count`` again and ingests
only what it cannot confirm, after emptying it (a stdio server without
``count`` is a new process in every job: it is always ingested; another
without ``count`` is trusted on the record, and ingested again when its first
search answers an empty list: :meth:`_Service._forgot`). A namespace
is ingested under a lock, so parallel jobs never ingest one twice at once.
A connection lost during a job (a server that restarted may have lost what
it held) makes the next search of a namespace confirm it first, and a
search that failed across a lost connection is tried again once after that.

Every request is timed (monotonic clock) into the job's timings table
(:data:`layout.TIMINGS`, under the logs: the one output that differs from
run to run). A search is ``cold`` when it is the first of its namespace
since the namespace was ingested in this job, else ``warm``; ``warm_repeats``
searches the same question again, timed as ``warm`` (its list is not used).

A transient failure that outlasts the retries (a refused connection, a
timeout, HTTP 5xx) makes the question a counted ``system_error`` (ranked as
an empty list, a miss: metrics.json's ``system_errors``); more than
``max_errors`` in one job stop it with a line that says how many and why. A
response that cannot be used (HTTP 4xx, not JSON, no list where config says
it is, an id that is not a string or not in the haystack, an id given more
times than the haystack lists it) is one ``memobench:`` line naming the
variant, the question and what came back. An answer that says in words that
the server refused an ingest, a reset or a count (config ``refused`` and
``accepted``), and, for a service without ``count``, an item that never came
back in a search for its own words (``system.confirm``), is an ingestion
that failed (retrieval/arrival.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..catalog.row import Retriever, Row, register, register_retriever
from ..core.atomic import locked
from ..core.errors import ConfigError, excerpt
from .returned import Haystack, RetrieverError, check_ranking, turns_of

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's
DEFINITION_KEY = b"memobench.definition"
DEFAULTS = {"isolation": "namespace", "namespace_prefix": "mb-", "concurrency": 4, "timeout_s": 30.0,
            "retries": 3, "backoff_s": 0.1, "max_errors": 0, "warm_repeats": 1, "k": 50, "answer": "structured"}
ISOLATION = ("namespace", "reset")
MAX_RESPONSE_MB = 64  # the largest answer read from an HTTP service (system.max_response_mb)
# an MCP tool's answer: its structured content, its text as JSON, or its text as it stands (read by patterns)
ANSWERS = ("structured", "text", "plain")
# what a degenerate answer makes (evaluation.metrics.degenerate; the merge job checks): read as given, not a
# DEFAULTS entry, so that the variants that leave it out keep their definition
DEGENERATE = ("warn", "error")
MIN_K = 10  # the least system.k: the harness figures read a list to rank 10
# settings read with a default but kept out of DEFAULTS and the params (variants written before them keep
# their definition): their defaults, for :func:`definition`
UNLISTED_DEFAULTS = {"max_response_mb": MAX_RESPONSE_MB, "degenerate": "warn"}
# settings that decide no list, kept out of the definition whatever they say: the conformance check, the
# bound on per-namespace servers alive at once, the load curve (system.ready decides lists of an
# asynchronous service: in the definition when given)
UNLISTED = ("check", "headers", "servers", "load")


# --------------------------------------------------------------------------- the variant


def system_variant(name: str, family: str, entry: dict, others: dict | None = None):
    """A memory service (config ``variants.<name>.system``) as a variant of a
    family: the family's skip rule, so its questions and gold are every
    other variant's."""
    from ..catalog.variant import SKIP, Variant
    from ..memo.recipe import Recipe
    from ..services.api import DEFAULT_RESULTS, endpoints, tools

    if set(entry) - {"system", "description"}:
        extra = ", ".join(sorted(set(entry) - {"system", "description"}))
        raise ConfigError(f"variant {name!r}: a system variant takes no {extra} (only system and description)")
    s = entry["system"]
    where = f"variant {name!r}: system"
    if not isinstance(s, dict) or sum(k in s for k in ("url", "mcp", "library")) != 1:
        raise ConfigError(f"{where}: give url (the service's HTTP API, http://host:port) or mcp (an MCP server: "
                          f"{{command: [...]}} or {{url: ...}}), or library (file.py:factory, used in-process), one "
                          f"of them")
    if "options" in s and "library" not in s:
        raise ConfigError(f"{where}: options are a library's factory's arguments (system.library)")
    if "library" in s:
        from .library import operations as library_operations

        operations, transport = library_operations(s, where), "library"
    elif "url" in s:
        if not _http_url(s["url"]):
            raise ConfigError(f"{where}: url {_shown(s['url'])!r} is not an http:// or https:// URL")
        _no_placeholder_in_url(s["url"], f"{where}: url", "an endpoint's path (endpoints: search: path: "
                                                        "/namespaces/{namespace}/search)")
        _no_written_secret(s["url"], f"{where}: url")
        if "tools" in s or s.get("answer", "plain") != "plain":
            # answer: plain reads a body as text over HTTP too; structured and text are an MCP tool's
            raise ConfigError(f"{where}: {'tools are' if 'tools' in s else 'answer is'} an MCP server's; an HTTP "
                              f"service's operations are endpoints")
        operations, transport = endpoints(s.get("endpoints"), where), "http"
    else:
        if "endpoints" in s:
            raise ConfigError(f"{where}: endpoints are an HTTP service's; an MCP server's operations are tools")
        transport = _mcp_transport(s["mcp"], f"{where}: mcp")
        operations = tools(s.get("tools"), where)
    spec = {**DEFAULTS, **{k: v for k, v in s.items() if k not in ("endpoints", "tools", "results")}}
    _canonical_numbers(spec)
    _shapes(spec, operations, transport, where)
    if spec["answer"] not in ANSWERS:
        raise ConfigError(f"{where}: answer {spec['answer']!r} is not one of {', '.join(ANSWERS)}")
    prefix = spec["namespace_prefix"]
    if not isinstance(prefix, str) or not prefix.isprintable() or any(c in prefix for c in ("/", "\\", "..")):
        raise ConfigError(f"{where}: namespace_prefix {prefix!r} may not hold '/', '\\', '..', NUL or other control "
                          f"characters (a namespace names a service's store, and may name a path there)")
    if isinstance(spec["k"], bool) or not isinstance(spec["k"], int) or spec["k"] < MIN_K:
        # fewer results would make hit@10 and MRR (read to rank 10) those of shorter lists, unmarked
        raise ConfigError(f"{where}: k {spec['k']!r} asks each search for fewer than {MIN_K} results; hit@10 and "
                          f"MRR read 10, so give k: {MIN_K} or more (default 50)")
    if spec.get("degenerate", "warn") not in DEGENERATE:
        raise ConfigError(f"{where}: degenerate {spec['degenerate']!r} is not one of {', '.join(DEGENERATE)}")
    # a setting kept out of DEFAULTS and written at its default is left out, so that the variant's params (and
    # so its jobs, which Snakemake reruns when they change) are those of the config that leaves it out
    for key, default in {**UNLISTED_DEFAULTS, "check": True}.items():
        if key in spec and _at_default(spec[key], default):
            del spec[key]
    if spec["isolation"] not in ISOLATION:
        raise ConfigError(f"{where}: isolation {spec['isolation']!r} is not one of {', '.join(ISOLATION)}")
    _serving_settings(spec, s, operations, transport, where)
    _confirm_setting(spec, operations, transport, where)
    from .conformance import check_of
    from .determinism import determinism_of

    for key, value in (("check", check_of(s.get("check"), where)),
                       ("determinism", determinism_of(s.get("determinism"), where))):
        spec.pop(key, None)
        if value is not None:  # absent at its default: the params of a config that leaves it out
            spec[key] = value
    results = {**DEFAULT_RESULTS, **(s.get("results") or {})}
    if set(results) - set(DEFAULT_RESULTS) - {"pattern"}:
        raise ConfigError(f"{where}: results: unknown key(s) {', '.join(sorted(set(results) - set(DEFAULT_RESULTS)))}"
                          f" (known: {', '.join(DEFAULT_RESULTS)}, pattern)")
    if "pattern" in results:
        from ..services.api import pattern

        pattern(results["pattern"], f"{where}: results: pattern")
    spec["operations"], spec["transport"], spec["results"] = operations, transport, results
    spec["identity"] = identity(s)
    shown = identity(s, public=True)
    # the query it was measured with, where not the question itself, and sessions whose arrival nothing
    # confirmed: in the label the report shows beside the figures
    asked = f", query: {spec['query']}" if "query" in spec else ""
    asked += ", arrival not confirmed (confirm: none)" if spec.get("confirm") == "none" else ""
    return Variant(name, Recipe(backend=BACKEND, documents="all"), SKIP[family], f"memory service: {shown}{asked}",
                   entry.get("description", f"the memory service at {shown}"), retriever=spec)


def _shapes(spec: dict, operations: dict, transport: str, where: str) -> None:
    """A server's own shapes checked (docs/memory-services.md#servers-with-their-own-shapes): headers,
    render (kept normalized in ``spec``), query, and what they ask of the operations."""
    from ..services.api import ingest_placeholders, placeholders
    from .queries import check_query
    from .rendering import DEFAULT_RENDER, render_spec

    if "headers" in spec:
        if transport == "mcp-stdio":
            raise ConfigError(f"{where}: headers are sent over HTTP; a server started by command takes env")
        _no_written_header_secret(spec["headers"], f"{where}: headers")
    if "render" in spec:
        spec["render"] = render_spec(spec["render"], where)
        if spec["render"] == DEFAULT_RENDER:
            del spec["render"]  # written at its defaults: the definition (and the ledger's shape) of leaving it out
    ingest = operations["ingest"]
    keyed = "session.key" in ingest_placeholders(ingest) or "id" in ingest or "id_pattern" in ingest
    if (spec.get("render") or {}).get("max_chars") is not None and not keyed:
        raise ConfigError(f"{where}: render: max_chars sends a long session in parts, each its own item: name "
                          f"{{session.key}} in the ingest template (or read the ids the server assigns: id or "
                          f"id_pattern), so that a result names the part it found")
    if operations["reset"] is None and spec.get("isolation") == "reset":
        raise ConfigError(f"{where}: isolation: reset empties one namespace for each haystack, and this service "
                          f"has no reset operation (reset: null)")
    if (spec.get("isolation") == "reset" and (operations["reset"] or {}).get("may_fail")
            and operations.get("count") is None):
        # each haystack refills the one namespace: a reset that failed leaves the last haystack's sessions
        # in it, and without count nothing tells; their ids (shared across haystacks) would rank as this one's
        raise ConfigError(f"{where}: isolation: reset with reset.may_fail needs the service's count operation, "
                          f"which confirms each refill (a reset that failed would leave the previous haystack's "
                          f"sessions in the namespace); give count, or use isolation: namespace")
    if "query" in spec:
        check_query(spec["query"], where)
        search = operations["search"]
        if "query" not in placeholders(search.get("body", search.get("arguments"))) | placeholders(search.get("path")):
            raise ConfigError(f"{where}: query: {spec['query']!r} makes the query text, and the search template does "
                              f"not name {{query}} (it sends {{question.text}} unless told): put \"{{query}}\" where "
                              f"the service reads its query")


def _no_written_header_secret(headers, where: str) -> None:
    """Header values are strings; a value of a header whose name looks secret (authorization, cookie, a
    key, a token, a secret) holds a ``$NAME`` (read from the environment when the job runs), never the
    secret itself: written out, it would be in the rule's params."""
    import re

    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise ConfigError(f"{where}: headers must map header names to strings")
    secret = re.compile(r"authorization|cookie|key|token|secret|password", re.I)
    name = re.compile(r"\$(\w+|\{\w+\})")
    for header, value in headers.items():
        if secret.search(header) and not name.search(value):
            raise ConfigError(f"{where}: {header}: its value is written out, and the header may hold a secret; write "
                              f"it as $NAME (\"Bearer $API_KEY\"), read from the environment when the job runs, so "
                              f"that no file the pipeline writes holds it")


def _confirm_setting(spec: dict, operations: dict, transport: str, where: str) -> None:
    """``system.confirm`` checked (retrieval/arrival.py): search (the default without count) or none; a service
    with count is confirmed by it. Left out of ``spec`` at its default, so that a variant written without it
    keeps its params and definition."""
    from .arrival import CONFIRM

    if "confirm" not in spec:
        return
    value = spec["confirm"]
    if value not in CONFIRM:
        raise ConfigError(f"{where}: confirm {value!r} is not one of {', '.join(CONFIRM)}")
    # a library's count is its object's method, known only once it is made: its count confirms when it has one
    if operations.get("count") is not None and transport != "library":
        raise ConfigError(f"{where}: confirm is for a service without count; this one's count confirms what "
                          f"each namespace holds (give count: null to confirm by {value})")
    if value == "search":
        del spec["confirm"]  # the default


def _serving_settings(spec: dict, s: dict, operations: dict, transport: str, where: str) -> None:
    """``servers``, ``ready`` and ``load`` checked into ``spec`` (each absent when not given, so that a
    variant without them keeps its params and definition)."""
    from ..services.servers import per_namespace
    from .load import load_of
    from .readiness import ready_of
    from .servers import servers_of

    many = transport == "mcp-stdio" and per_namespace(s["mcp"])
    for key, value in (("servers", servers_of(s.get("servers"), many, spec["isolation"], where)),
                       ("ready", ready_of(s.get("ready"), operations, where)), ("load", load_of(s.get("load"), where))):
        spec.pop(key, None)
        if value is not None:
            spec[key] = value
    if many:
        spec["per_namespace"] = True


def identity(system: dict, public: bool = False) -> str:
    """What a service is known by (its ingestion ledger's key, its label, its timings' url): the HTTP
    API's URL, ``mcp <url>``, or ``mcp stdio: <command>``; a URL's user information and query values
    starred, since they may hold a secret. ``public``: as result files and the report show it, with
    nothing that may hold a secret (:func:`public_url`; a command's program alone, not its arguments)."""
    url = public_url if public else _shown
    if "library" in system:
        return f"library {system['library']}"
    if "url" in system:
        return url(system["url"])
    m = system["mcp"]
    if "url" in m:
        return f"mcp {url(m['url'])}"
    command = _command(m["command"])
    return "mcp stdio: " + (Path(command[0]).name if public else " ".join(command))


def public_url(url: str) -> str:
    """``url`` without what may hold a secret: its user and password, its query and fragment."""
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(url)
    host = f"[{u.hostname}]" if u.hostname and ":" in u.hostname else u.hostname or ""
    return urlunsplit((u.scheme, host + (f":{u.port}" if u.port else ""), u.path, "", ""))


def public(spec: dict, grain: str) -> dict:
    """What metrics.json says a service variant is (``spec``: its built spec): its protocol, its address
    without secrets (:func:`identity`), its isolation, the grain it ranks, and its query transform when
    it has one, and ``confirm: none`` when nothing confirmed what each namespace holds."""
    return {"transport": spec["transport"], "address": identity(spec, public=True),
            "isolation": spec["isolation"], "grain": grain, **({"query": spec["query"]} if "query" in spec else {}),
            **({"confirm": "none"} if spec.get("confirm") == "none" else {}),
            # the conformance checks it skips: stated beside its figures (metrics.merge_segments' warnings too)
            **({"check": spec["check"]} if isinstance(spec.get("check"), dict) else {})}


def _shown(url) -> str:
    from ..services.client import shown_url

    return shown_url(url) if isinstance(url, str) else repr(url)


def _no_written_secret(url: str, where: str) -> None:
    """A URL's password (or user, without one) and query values are ``$NAME``s, read from the
    environment when the job starts: written out, the secret would be in the rule's params, which
    Snakemake keeps in its metadata."""
    import re
    from urllib.parse import parse_qsl, urlsplit

    parts = urlsplit(url)
    name = re.compile(r"\$(\w+|\{\w+\})")
    secret = parts.password if parts.password is not None else parts.username
    written = [v for v in ([secret] if secret else []) + [v for _, v in parse_qsl(parts.query, keep_blank_values=True)]
               if v and not name.fullmatch(v)]
    if written:
        raise ConfigError(f"{where}: {_shown(url)!r} holds a secret written out (its user information or a query "
                          f"value); write it as $NAME, read from the environment when the job runs, so that no "
                          f"file the pipeline writes holds it")


def _no_placeholder_in_url(url: str, where: str, instead: str) -> None:
    """A service's URL is sent as written: a placeholder in it would reach the service as the literal
    text ``{namespace}``, every namespace one."""
    import re

    from ..services.api import _BRACE

    found = _BRACE.search(re.sub(r"\$\{\w+\}", "", url))  # ${NAME}: read from the environment
    if found:
        raise ConfigError(f"{where}: {found.group(0)!r} is not filled in a service's URL, which is sent as written; "
                          f"a placeholder goes in {instead}")


def _canonical_numbers(spec: dict) -> None:
    """Each numeric setting in ``spec`` of its default's type (``timeout_s: 30`` is 30.0, ``concurrency: 4.0``
    is 4): the retrieve rule's params are compared as their text, so a config that writes a default out and
    ``memobench score``, which leaves it out, must give the same text, or each reruns the other's jobs."""
    for key, default in {**DEFAULTS, **UNLISTED_DEFAULTS}.items():
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(default, (bool, str)):
            continue
        if isinstance(default, float):
            spec[key] = float(value)
        elif isinstance(value, float) and value.is_integer():
            spec[key] = int(value)


def _at_default(value, default) -> bool:
    """``value`` is ``default`` as a setting reads it: 64 and 64.0 are one, True and 1 are not."""
    if isinstance(value, bool) or isinstance(default, bool):
        return value is default
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and float(value) == float(default)
    return value == default


def definition(variant) -> str:
    """A digest of what decides a system variant's lists, its retrieve job's variant param (the service,
    every setting with its default, the grain; not the description): equal digests, equal definitions.
    A digest, not the settings themselves: an ``env`` value may be a key."""
    from ..catalog.variant import LIST_FIELDS, to_spec

    def canonical(x):  # 30 and 30.0 are one setting
        if isinstance(x, dict):
            return {str(k): canonical(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [canonical(v) for v in x]
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return float(x)
        return x

    spec = {k: v for k, v in to_spec(variant).items() if k in LIST_FIELDS}
    # whether the service is checked before a run, and the headers it is sent (a key), decide no list; a
    # setting kept out of DEFAULTS (so that adding it changed no variant's params) is the same definition
    # written at its default or left out
    if isinstance(spec.get("retriever"), dict):
        # (a check's skip is stated beside the figures: part of it)
        spec["retriever"] = {k: v for k, v in spec["retriever"].items() if (
            k not in UNLISTED or (k == "check" and isinstance(v, dict))) and not (
            k in UNLISTED_DEFAULTS and canonical(v) == canonical(UNLISTED_DEFAULTS[k]))}
    return hashlib.sha256(json.dumps(canonical(spec), sort_keys=True, default=str).encode()).hexdigest()[:20]


def _command(command) -> list[str]:
    import shlex

    return shlex.split(command) if isinstance(command, str) else list(command)


def _http_url(url) -> bool:
    from urllib.parse import urlsplit

    return isinstance(url, str) and urlsplit(url).scheme in ("http", "https") and bool(urlsplit(url).hostname)


def _mcp_transport(m, where: str) -> str:
    """``mcp-stdio`` or ``mcp-http``, or a ConfigError line saying what ``system.mcp`` lacks."""
    if not isinstance(m, dict) or ("command" in m) == ("url" in m):
        raise ConfigError(f"{where}: give command (the server to start, over stdio) or url (its streamable-HTTP "
                          f"endpoint), one of them")
    if set(m) - {"command", "url", "env"}:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(set(m) - {'command', 'url', 'env'}))} "
                          f"(known: command, url, env)")
    if "url" in m:
        if not _http_url(m["url"]):
            raise ConfigError(f"{where}: url {_shown(m['url'])!r} is not an http:// or https:// URL")
        _no_placeholder_in_url(m["url"], f"{where}: url", "a tool's arguments, or, for a server per namespace, "
                                                        "mcp: command or env")
        _no_written_secret(m["url"], f"{where}: url")
        if "env" in m:
            raise ConfigError(f"{where}: env is for a server started by command")
        return "mcp-http"
    command = m["command"]
    if not (isinstance(command, str) and command.strip()) and not (
            isinstance(command, list) and command and all(isinstance(c, str) for c in command)):
        raise ConfigError(f"{where}: command must be a list of strings (the program and its arguments) or one string")
    if not isinstance(m.get("env", {}), dict) or not all(isinstance(v, str) for v in m.get("env", {}).values()):
        raise ConfigError(f"{where}: env must map names to strings")
    return "mcp-stdio"


# --------------------------------------------------------------------------- sessions and namespaces


def sent_turns(turns: dict, session_ids: dict, ids: bool = False) -> dict[int, list[dict]]:
    """{session_key: its turns as the service gets them, in order, each
    ``{role, content}``, or ``{id, role, content}`` with ``ids`` (a turn
    variant's service)} (``turns``: every turn of each session,
    turns.session_turns; the role as the file gives it: LongMemEval's
    ``role``, LoCoMo's speaker; ``session_ids``: each key's session id)."""
    from .turns import turn_id

    if ids:
        return {key: [{"id": turn_id(session_ids[key], seq, dia), "role": role, "content": text}
                      for seq, dia, role, text in zip(t.seqs, t.dia_ids, t.roles, t.texts)]
                for key, t in turns.items()}
    return {key: [{"role": role, "content": text} for role, text in zip(t.roles, t.texts)] for key, t in turns.items()}


def haystack_sessions(hay, turns: dict) -> list[dict]:
    """A haystack's sessions as the service gets them, in haystack order (``turns``: :func:`sent_turns`)."""
    return [{"id": sid, "date": date, "turns": turns[key]} for sid, key, date in zip(hay.ids, hay.keys, hay.dates)]


def namespace_of(variant: str, prefix: str, sessions: list[dict]) -> str:
    """The namespace of one haystack: the variant and a digest of its sessions' content."""
    digest = hashlib.sha256(json.dumps(sessions, ensure_ascii=True, sort_keys=True).encode("ascii")).hexdigest()
    return f"{prefix}{variant}-{digest[:20]}"


def sent_shape(spec: dict, grain: str, documents: str) -> str:
    """A digest of what shapes the requests that fill a namespace beyond its sessions' content (which
    names it): the ingest and reset operations' templates (a path, body, tool, arguments), the grain and
    the documents rule. The ledger keys a namespace by it too: an ingest body fixed after a mistaken run
    (each session sent as its date alone, say) sends the sessions again instead of confirming the
    namespace's count, which the mistaken run filled."""
    shape = {"ingest": spec["operations"]["ingest"], "reset": spec["operations"]["reset"], "grain": grain,
             "documents": documents, "transport": spec["transport"],
             # how sessions are rendered, where config says (a shape without it is as it was before render)
             **({"render": spec["render"]} if "render" in spec else {})}
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:20]


class Ledger:
    """The namespaces a variant has ingested (one JSON line each: url, namespace, sessions, and ``sent``,
    the :func:`sent_shape` they were sent with; a line without one, written before it was recorded, is
    never confirmed: what shaped it is not known)."""

    def __init__(self, path: Path, sent: str | None = None):
        self.path, self.sent = Path(path), sent

    def recorded(self, url: str, namespace: str) -> int | None:
        """The session count recorded for ``namespace`` at ``url``, sent as now (the last line), or None."""
        return self._last(url, namespace).get("sessions")

    def assigned(self, url: str, namespace: str) -> dict | None:
        """The ids the service assigned to ``namespace``'s items (id -> item key), recorded with its last
        line sent as now; None when none are recorded."""
        return self._last(url, namespace).get("ids")

    def _last(self, url: str, namespace: str) -> dict:
        """The last line recorded for ``namespace`` at ``url``, or {} when there is none or it was sent
        otherwise than now."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return {}
        found: dict = {}
        for line in lines:
            try:
                d = json.loads(line)
            except ValueError:
                continue  # a line a killed job left half-written
            if d.get("url") == url and d.get("namespace") == namespace:
                found = d if d.get("sent") == self.sent else {}
        return found

    def record(self, url: str, namespace: str, sessions: int, ids: dict | None = None) -> None:
        """``ids``: the ids the service assigned (id -> item key), so that a later job that confirms the
        namespace reads its results."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"url": url, "namespace": namespace, "sessions": sessions, "sent": self.sent,
                           **({"ids": ids} if ids is not None else {})}, sort_keys=True) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


# --------------------------------------------------------------------------- one variant's job


class _Service:
    """One system variant in one retrieve job: ingestion, searches, timings, errors."""

    def __init__(self, variant, segment, log):
        from ..core import layout

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

    def where(self, qid=None) -> str:
        return f"variant {self.v.name!r}" + (f": question {qid!r}" if qid is not None else "")

    def _time(self, operation, phase, namespace, qid, call=None, ok=True, seconds=None, attempts=None, value=None):
        row = (operation, phase, namespace, qid, call.seconds if call else seconds, call.attempts if call else attempts,
               ok, call.server_seconds if call else None, value)
        with self._timing_lock:
            self.timings.append(row)

    # ---- the conformance check (retrieval/conformance.py), once per service and settings

    def conform(self) -> None:
        """The service's conformance check, unless ``system.check`` is false, a turn variant (the check
        asks for sessions), or a job of this variant already passed it with these settings (a marker
        file named by the definition's digest): a failure is one line naming the check, before any
        of the run's sessions is sent."""
        from ..core.secrets import mask
        from . import conformance as check

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
        from ..services.client import Unavailable, attempts
        from .arrival import Refused, confirm_of

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
        from .arrival import Refused, came_back, confirm_queries

        sent = self._items(sessions)
        unit = "turn" if self.v.grain == "turn" else "session"
        for item, words in zip(sent, confirm_queries(sent)):
            if words is None:
                continue  # an empty session: no word to find it by
            q = {"question_id": "memobench-confirm", "question": words}
            values = search_values(namespace, int(self.spec["k"]), q, self._asked(q))
            resp, call = self.client.once("search", values, retries=0)
            self._time("confirm", "", namespace, None, call)
            what = f"confirmation search of namespace {namespace!r}"
            ids = result_ids(resp, self.spec, f"{self.where()}: {what}", unit)[0]
            if not came_back(item, ids, keyed(self.spec), assigned):
                key = getattr(item, "key", None) or item["id"]
                raise Refused(f"session {key!r} sent to namespace {namespace!r} never came back in a search for "
                              f"its own words {values['query']!r} (system.confirm: search; the service has no "
                              f"count): the service did not keep it, or answered a refusal that config does not "
                              f"read (refused: on the ingest operation); a service that finds it by no words of "
                              f"its own: confirm: none")

    def _ingested(self, namespace: str, sessions: list[dict], started: float) -> None:
        """After a namespace's ingest requests: their wall time (an ``ingestion`` row), then the wait until it
        is searchable (system.ready: retrieval/readiness.py), a timeout an ingestion that failed."""
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
        from ..services.client import ServiceError

        try:
            self._ensure(namespace, sessions)
        except ServiceError as e:
            raise RetrieverError(f"{self.where()}: namespace {namespace!r}: {e}") from None

    def _ensure(self, namespace: str, sessions: list[dict], again: bool = False) -> None:
        """``again``: ingest it whatever the ledger says (a namespace that answered as if empty)."""
        from ..services.client import Unavailable
        from .arrival import Refused

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
        from ..services.client import ServiceError, Unavailable

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
        for _ in range(int(self.spec["warm_repeats"])):
            try:
                answer, again = self.client.once("search", values)
                self._time("search", "warm", namespace, qid, again)
            except (Unavailable, ServiceError):
                continue  # a repeat only times; its failure changes no list
            self.lists.repeated(namespace, q, ids, answer, where)  # its list: the same, or flagged
        if self._forgot(qid, namespace, sessions, content, ids):
            return self.search(q, hay, sessions, namespace, content, turns)
        got = self.ranking(ids, scores, hay, sessions, namespace, where, turns)
        self.lists.searched(namespace, content, q, hay, sessions, turns, ids, got)
        return got

    def ranking(self, ids, scores, hay, sessions: list[dict], namespace: str, where: str, turns=None):
        """(positions, scores) of a search's result ids and scores (:func:`result_ids`) in ``namespace``."""
        ranked = turns_of(hay, turns) if turns is not None else Haystack(tuple(hay.ids), ("",) * len(hay.ids),
                                                                          tuple(hay.dates))
        if turns is None and keyed(self.spec):
            from .rendering import positions

            ids, scores = positions(ids, scores, self._items(sessions), self._assigned(namespace), where)
        if turns is not None:
            _session_ids_for_turns(ids, ranked, where)
        return check_ranking((ids, scores) if scores is not None else ids, ranked, where)

    def _asked(self, q: dict) -> str | None:
        """The query text of question ``q`` (``system.query``'s transform), or None: its own text."""
        if "query" not in self.spec:
            return None
        if self._query is None:
            from .queries import transform

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
        from ..services.client import ServiceError, Unavailable
        from .arrival import Refused

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
        from ..services.client import ServiceError

        try:
            self._ready(namespace, sessions, content)
        except ServiceError as e:
            raise RetrieverError(f"{self.where(qid)}: namespace {namespace!r}: {e}") from None
        return content not in self.failed

    def _ready(self, namespace: str, sessions: list[dict], content: str) -> None:
        """``namespace`` holds this haystack before a search: with reset isolation, refilled when the
        haystack changed; with either, confirmed again after a lost connection."""
        from ..services.client import Unavailable
        from .arrival import Refused

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
                "system_determinism": self.lists.summary()}

    def timed(self) -> tuple[list[tuple], dict]:
        """Its timings rows and what they were measured against (write_segments writes them)."""
        return self.timings, {"url": self.spec["identity"], "transport": self.spec["transport"],
                              "isolation": self.spec["isolation"]}


# --------------------------------------------------------------------------- requests and answers
# (the retrieve stage's and the conformance check's, retrieval/conformance.py: one way to ask and to read)


def ingest_values(namespace: str, session: dict) -> dict:
    """The placeholders' values (services/api.py) of ingesting ``session`` (``{id, date, turns}``)."""
    return {"namespace": namespace, "session": session, "session.id": session["id"],
            "session.date": session["date"], "session.turns": session["turns"]}


def search_values(namespace: str, k: int, q: dict, query: str | None = None) -> dict:
    """The placeholders' values of searching ``namespace`` for question ``q`` (a questions table row);
    ``query``: the query text a transform made of the question (else the question's own text)."""
    return {"namespace": namespace, "k": k, "question.id": q["question_id"], "question.text": q["question"],
            "question.date": q.get("question_date"), "question.type": q.get("question_type"),
            "query": q["question"] if query is None else query}


def rendered(spec: dict) -> bool:
    """True when the ingestion sends rendered items (rendering.py: keys, text, parts, assigned ids)."""
    from ..services.api import ingest_placeholders
    from .rendering import RENDERED

    op = spec["operations"]["ingest"]
    return bool(ingest_placeholders(op) & RENDERED) or "render" in spec or "id" in op or "id_pattern" in op


def keyed(spec: dict) -> bool:
    """True when a search's results name the items' keys (or the ids the service assigned to them), not
    session ids: the ingestion sends ``{session.key}``, or the service assigns its own ids."""
    from ..services.api import ingest_placeholders

    op = spec["operations"]["ingest"]
    return "session.key" in ingest_placeholders(op) or "id" in op or "id_pattern" in op


def sent_items(spec: dict, sessions: list[dict], where: str) -> list:
    """The items a namespace's ``sessions`` are sent as (rendering.Item), or the sessions themselves
    when nothing is rendered (today's requests, at no rendering cost)."""
    from .rendering import items

    return items(sessions, spec.get("render"), where) if rendered(spec) else sessions


def reset_namespace(client, spec: dict, namespace: str, retries: int | None = None):
    """Empties ``namespace`` (its :class:`..services.client.Call`), or None for a service without reset, or
    whose reset answered an error (or a refusal in words: arrival.check_answer) that ``may_fail`` allows (a
    namespace it never held)."""
    from ..services.client import ServiceError
    from .arrival import Refused, check_answer, label

    op = spec["operations"]["reset"]
    if op is None:
        return None
    try:
        answer, call = client.once("reset", {"namespace": namespace}, retries=retries)
        check_answer(answer, op, label(spec, "reset"), f"reset of namespace {namespace!r}")
        return call
    except (ServiceError, Refused):
        if op.get("may_fail"):
            return None
        raise


def ingest_namespace(client, spec: dict, namespace: str, sessions: list[dict], where: str,
                     retries: int | None = None, timed=None) -> tuple[int, dict | None]:
    """Sends ``sessions`` to ``namespace``: one call per item, or one for them all (a batch ingest); (the
    number of items sent, the ids the service assigned: id -> item key, or None when it assigns none).
    ``timed(call)`` is told each call; a one-line RetrieverError for an answer without the id config
    says it holds, :class:`.arrival.Refused` for one that says in words that the server refused it."""
    from ..services.api import batch, fill
    from .arrival import check_answer, label
    from .rendering import Item, item_values

    op = spec["operations"]["ingest"]
    sent = sent_items(spec, sessions, where)
    values = [item_values(namespace, x) if isinstance(x, Item) else ingest_values(namespace, x) for x in sent]
    assigns = "id" in op or "id_pattern" in op
    assigned: dict | None = {} if assigns else None

    def read(answer, of: list):
        for given, item in zip(assigned_ids(answer, op, len(of) if batch(op) else None, f"{where}: ingest of "
                                            f"namespace {namespace!r}"), of):
            if given in assigned:
                raise RetrieverError(f"{where}: ingest of namespace {namespace!r}: the service assigned id {given!r} "
                                     f"to {assigned[given]!r} and to {item.key!r}")
            assigned[given] = item.key

    def key(item) -> str:
        return item.key if isinstance(item, Item) else item["id"]

    if batch(op):
        answer, call = client.once("ingest", {"namespace": namespace,
                                              "sessions": [fill(op["session"], v) for v in values]}, retries=retries)
        if timed:
            timed(call)
        check_answer(answer, op, label(spec, "ingest"), f"ingest of namespace {namespace!r}'s {len(sent)} "
                                                        f"sessions in one call")
        if assigns:
            read(answer, sent)
    else:
        for item, v in zip(sent, values):
            answer, call = client.once("ingest", v, retries=retries)
            if timed:
                timed(call)
            check_answer(answer, op, label(spec, "ingest"), f"ingest of session {key(item)!r} into namespace "
                                                            f"{namespace!r}")
            if assigns:
                read(answer, [item])
    return len(sent), assigned


def assigned_ids(answer, op: dict, n: int | None, where: str) -> list[str]:
    """The ids an ingest answer assigns: one (``n`` None), or ``n`` in order (a batch's), read at ``op["id"]``
    or by ``op["id_pattern"]`` (its group 1) on the answer's text (a JSON answer: its JSON text)."""
    import re

    from ..services.api import Missing

    if "id" in op:
        try:
            got = _pick(answer, op["id"])
        except Missing as e:
            raise RetrieverError(f"{where}: {e} (ingest.id is {op['id']!r}): {_short(answer)}") from None
        if n is not None and (not isinstance(got, list) or len(got) != n):
            raise RetrieverError(f"{where}: the ids at {op['id']!r} are {_short(got)}, not a list of the {n} "
                                 f"sessions sent in one call")
        found = got if n is not None else [got]
        if not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in found):
            raise RetrieverError(f"{where}: the id at {op['id']!r} is {_short(got)}, not a string or a number")
        return [str(x) for x in found]
    from .arrival import answer_text

    text = answer_text(answer)
    regex = re.compile(op["id_pattern"])
    found = [m.group(1) for m in regex.finditer(text)] if n is not None else \
        [m.group(1) for m in [regex.search(text)] if m]
    if len(found) != (n or 1):
        raise RetrieverError(f"{where}: id_pattern {op['id_pattern']!r} found {len(found)} id(s) in the answer, not "
                             f"{n or 1}: {excerpt(text)!r}")
    return found


def count_of(client, spec: dict, namespace: str, where: str, retries: int | None = None):
    """(the sessions ``namespace`` holds, the call's :class:`..services.client.Call`), or (None, None) when
    the service has no ``count``; a one-line RetrieverError for an answer that is not a number, its
    :class:`.arrival.Refused` subclass for one that says in words the server refused it (``retries``: the
    client's own unless given)."""
    from ..services.api import Missing
    from .arrival import check_answer, count_in_words, label

    if not has_count(spec, client):
        return None, None
    op = spec["operations"]["count"]
    resp, call = client.once("count", {"namespace": namespace}, retries=retries)
    check_answer(resp, op, label(spec, "count"), f"count of namespace {namespace!r}")
    if "pattern" in op:  # a count in words ("Context Items: 4")
        return count_in_words(resp, op, f"{where}: count of namespace {namespace!r}"), call
    try:
        n = _pick(resp, op.get("sessions", "sessions"))
    except Missing as e:
        raise RetrieverError(f"{where}: count of namespace {namespace!r}: {e}") from None
    if op.get("length"):  # the count is how many things the service lists
        if not isinstance(n, list):
            raise RetrieverError(f"{where}: count of namespace {namespace!r} answered {_short(n)} at "
                                 f"{op.get('sessions', 'sessions')!r}, not a list (count.length is true)")
        n = len(n)
    elif isinstance(n, str) and n.strip().isdigit():
        n = int(n)  # a number in words' place: a plain-text answer's
    if isinstance(n, bool) or not isinstance(n, int):
        raise RetrieverError(f"{where}: count of namespace {namespace!r} answered {n!r}, not a number")
    return n, call


def has_count(spec: dict, client) -> bool:
    """The service has a ``count`` operation (a library: its object has a count method)."""
    return spec["operations"].get("count") is not None and getattr(client, "counts", True)


def result_ids(resp, spec: dict, where: str, unit: str = "session") -> tuple[list[str], list | None]:
    """(the ids, best first; their scores, or None when a result has none) of a search's answer, read where
    ``system.results`` says; a one-line RetrieverError saying what came back when they are not there."""
    from ..services.api import Missing, pick

    import re

    res = spec["results"]
    listed = _picked(resp, res, "list", where)
    found = re.compile(res["pattern"]) if res.get("pattern") else None
    if isinstance(listed, str) and found is not None:
        # a plain-text answer: its ids are every match, in order, without scores
        return [m.group(1) for m in found.finditer(listed)], None
    if not isinstance(listed, list):
        raise RetrieverError(f"{where}: the results at {res['list']!r} are {type(listed).__name__}, not a "
                             f"list: {_short(resp)}")
    ids, scores = [], []
    ingest = spec["operations"]["ingest"]
    assigns = "id" in ingest or "id_pattern" in ingest
    for r, item in enumerate(listed, 1):
        sid = _picked(item, res, "id", f"{where}: result {r}")
        if assigns and isinstance(sid, int) and not isinstance(sid, bool):
            sid = str(sid)  # an id the service assigned as a number (read as its text at ingestion: assigned_ids)
        if not isinstance(sid, str):
            raise RetrieverError(f"{where}: result {r}: the id {sid!r} is not a string (a {unit} id)")
        if found is not None:
            m = found.search(sid)
            if m is None:
                raise RetrieverError(f"{where}: result {r}: results.pattern {res['pattern']!r} does not match "
                                     f"{excerpt(sid)!r}")
            sid = m.group(1)
        ids.append(sid)
        if res.get("score") and scores is not None:
            try:
                scores.append(pick(item, res["score"]))
            except Missing:
                scores = None  # a result without a score: the list has none
    return ids, (scores or None) if res.get("score") else None


class _IngestFailed(Exception):
    pass


def tried_whole(tries: int, retries, what: str, why: str) -> str:
    """Why an ingestion retried as a whole failed, with its true attempts: an ingest request is sent once
    in each try (``why``, the last try's, says "failed 1 time(s)"), and the whole is what system.retries
    repeats."""
    # the cause first: a line cut short for the console keeps what the server said
    return (f"{why} (the last of {tries} {'try' if tries == 1 else 'tries'} {what}: system.retries {retries} "
            f"retries the whole, never an ingest request alone)")


def client_of(spec: dict, where: str = "memory service", log=print, workroot=None):
    """The client of a system variant's service (HTTP, or MCP over stdio or streamable HTTP; a server per
    namespace, its working folders under ``workroot`` or a temporary folder: services/servers.py; or a library
    in-process, ``log`` getting what its factory prints); ``where`` names the variant in a config line (an
    unset ``$NAME``), raised before any request."""
    from ..services.api import from_environment, header_value, url_from_environment

    settings = {"timeout_s": float(spec["timeout_s"]), "retries": int(spec["retries"]),
                "backoff_s": float(spec["backoff_s"])}
    if spec["transport"] == "library":
        from .library import client

        return client(spec, where, log)
    if spec.get("headers"):
        # read when the job starts, never written: the spec (the rule's params) holds the $NAMEs
        settings["headers"] = {k: header_value(v, f"{where}: system: headers: {k}") for k, v in spec["headers"].items()}
    if spec["transport"] == "http":
        from ..services.client import HttpClient

        # read as given, not a DEFAULTS entry: a new default key would change every system variant's params
        limit = int(float(spec.get("max_response_mb", MAX_RESPONSE_MB)) * 2**20)
        return HttpClient(url_from_environment(spec["url"], f"{where}: system: url"), spec["operations"],
                          max_response_bytes=limit, plain=spec["answer"] == "plain", **settings)
    from ..services.mcp import McpClient, sdk_missing

    if sdk_missing():
        raise ConfigError(f"memory service {spec['identity']!r}: an MCP service needs the MCP Python SDK, which is "
                          f"not installed: pip install 'memobench[mcp]' (or -e '.[mcp]' in a checkout)")
    m, settings["answer"] = spec["mcp"], spec["answer"]
    if spec["transport"] == "mcp-http":
        url = url_from_environment(m["url"], f"{where}: system: mcp: url")
        return McpClient(spec["operations"], url=url, **settings)
    env = m.get("env")
    if env is not None:
        env = {k: from_environment(v, f"{where}: system: mcp: env: {k}") for k, v in env.items()}
    if spec.get("per_namespace"):
        from ..services.servers import NamespaceServers

        made = []  # the first server made: what it says it is names the service (served_by)

        def make(command, env):
            client = McpClient(spec["operations"], command=command, env=env, **settings)
            made[:] = made or [client]
            return client

        servers = NamespaceServers(make, _command(m["command"]), env, workroot)
        servers.identified = made
        return servers
    return McpClient(spec["operations"], command=_command(m["command"]), env=env, **settings)


def served_by(spec: dict, client) -> dict:
    """What served a job (services/identity.py): an MCP server's ``server`` (its serverInfo's name and
    version, once connected), a stdio server's ``package``, the ``host`` of a URL (never its user
    information); whatever the server said starred where it holds a secret."""
    from ..core.secrets import mask
    from ..services.identity import host_of, package_of

    out = {}
    info = next((c.server_info for c in getattr(client, "identified", [client]) if getattr(c, "server_info", None)),
                None)
    if info:
        out["server"] = {k: mask(v) for k, v in info.items()}
    if spec["transport"] == "mcp-stdio":
        out["package"] = package_of(_command(spec["mcp"]["command"]))
    url = spec.get("url") or (spec.get("mcp") or {}).get("url")
    if isinstance(url, str):
        out["host"] = host_of(url)
    return out


def _session_ids_for_turns(ids: list[str], turns, where: str) -> None:
    """A turn variant whose service answers with its haystack's session ids (a server that ranks
    sessions, as the reference server does unless started with --grain turn): check_ranking's line
    for the first unknown id, saying what it is."""
    known = set(turns.ids)
    unknown = next((i for i in ids if i not in known), None)
    if unknown is not None and unknown in set(turns.sessions):
        raise RetrieverError(f"{where} returned turn id {unknown!r}, which is not in its haystack; it is a session id "
                             f"of the haystack: the service ranks sessions (start the reference server with --grain "
                             f"turn, or give this variant grain: session)")


def _pick(answer, path: str):
    """What sits at ``path`` in ``answer`` (services.api.pick); an answer read as text (``answer: plain``,
    an ingest's text) is the text at ``""``, and its JSON, where it is JSON, at any other path."""
    from ..services.api import Missing, pick

    if isinstance(answer, str) and path != "":
        try:
            answer = json.loads(answer)
        except ValueError:
            raise Missing(f"the answer is text, not JSON, so nothing sits at {path!r} (a text answer is read "
                          f"whole, at \"\", by a pattern)") from None
    return pick(answer, path)


def _picked(answer, results: dict, key: str, where: str):
    """What sits at ``system.results.<key>`` in ``answer``, or a one-line error saying what came back."""
    from ..services.api import Missing

    try:
        return _pick(answer, results[key])
    except Missing as e:
        raise RetrieverError(f"{where}: {e} (system.results.{key} is {results[key]!r}): {_short(answer)}") from None


def _short(obj) -> str:
    return excerpt(json.dumps(obj, ensure_ascii=False, default=str))


# --------------------------------------------------------------------------- the retrieve stage


def rank_segment(variants, segment, log=print) -> dict:
    """The seam's entry: rank one segment (``harness.Segment``) under system
    variants (``documents.rank_by_documents``, each session's ingest payload
    in place of its document)."""
    from ..services.client import StartFailed
    from ..services.processes import ended_as_exit
    from .documents import rank_by_documents
    from ..services.identity import SERVICE_KEY
    from .harness import CHECKS_KEY, skip_reason
    from .rendering import names_turn_id
    from .turns import session_turns

    keys = sorted({k for h in segment.haystacks.values() for k in h.keys})
    turns = session_turns(segment.inputs["events"], "all", keys) if keys else {}
    session_ids = {k: sid for h in segment.haystacks.values() for k, sid in zip(h.keys, h.ids)}
    out = {}
    for v in variants:
        sent = sent_turns(turns, session_ids, ids=v.grain == "turn" or names_turn_id(v.retriever))
        payloads = {hid: haystack_sessions(h, sent) for hid, h in segment.haystacks.items()}
        service = _Service(v, segment, log)
        contents = {hid: namespace_of(v.name, v.retriever["namespace_prefix"], s) for hid, s in payloads.items()}
        # reset isolation: one namespace, refilled whenever the haystack's content changes
        names = (dict.fromkeys(payloads, f"{v.retriever['namespace_prefix']}{v.name}")
                 if v.retriever["isolation"] == "reset" else contents)
        try:
            with (locked(service.lock_dir / "reset.lock") if v.retriever["isolation"] == "reset"
                  else contextlib.nullcontext()), ended_as_exit():
                service.served(stdio_start=True)
                service.conform()
                if v.retriever.get("per_namespace"):
                    service.client.close_servers()  # the check's: the job's namespaces get their own
                elif v.retriever["isolation"] == "namespace":
                    needed = {}
                    for q in segment.questions:
                        hay = segment.haystacks.get(q["haystack_id"])
                        if hay is not None and hay.ids and skip_reason(v.skip, q, hay, v)[0] is None:
                            needed[names[q["haystack_id"]]] = payloads[q["haystack_id"]]
                    service.ingest_all(needed)

                searched: dict[str, list[dict]] = {}  # namespace -> its questions searched (the load curve's)

                def ranked(q, hay, docs, service=service, names=names, contents=contents, payloads=payloads):
                    hid = q["haystack_id"]
                    got = service.search(q, hay, payloads[hid], names[hid], contents[hid],
                                         turns=docs if v.grain == "turn" else None)
                    searched.setdefault(names[hid], []).append(q)
                    return ([], None) if got is None else got

                # rank_by_documents hands the ranker each session's document (a turn variant's: the
                # haystack's turns, every turn, as the service has them); a service gets the haystack's
                # sessions instead (payloads), so the session documents are placeholders
                docs = {v.recipe.documents: dict.fromkeys(keys)}
                if v.retriever.get("per_namespace"):
                    ranked = _per_namespace(service, v, segment, docs, ranked, names, payloads, log)
                # a server per namespace: the searches were made (and their progress logged) above; this pass
                # reads their answers in a moment, and its rate would pass for theirs
                rankings, outcomes, deep = rank_by_documents([v], segment, {v.name: ranked},
                                                             (lambda _: None) if v.retriever.get("per_namespace")
                                                             else log, docs=docs, timed=())[v.name]
                if v.retriever.get("load") and not v.retriever.get("per_namespace"):
                    _shared_load(service, v, searched, names, contents)
                service.peak()
                from .determinism import replicate

                replicate(service)  # a haystack ingested again, fresh, and its lists compared
        except StartFailed as e:
            # one line at once: a server that cannot start would fail every question the same way
            raise RetrieverError(f"variant {v.name!r}: the MCP server could not start: {e}") from None
        finally:
            service.client.close()
        segment.timings[v.name] = service.timed()
        meta = {**(outcomes.schema.metadata or {}), CHECKS_KEY: json.dumps(service.checks(), sort_keys=True),
                DEFINITION_KEY: definition(v), SERVICE_KEY: json.dumps(served_by(v.retriever, service.client),
                                                                       sort_keys=True)}
        out[v.name] = (rankings, outcomes.replace_schema_metadata(meta), deep)
    return out


def _library_sources(variant) -> tuple:
    from .library import sources

    return sources(variant)


def _per_namespace(service, v, segment, docs, ranked, names, payloads, log):
    """A server per namespace (retrieval/servers.py): the ranking step's calls collected first (the skip
    rule's questions, in its order), searched namespace by namespace, each while its server lives; the
    ranker that then gives the stored answers."""
    from .documents import rank_by_documents
    from .servers import serve_each

    calls: list[tuple] = []

    def collect(q, hay, documents):
        calls.append((q, hay, documents))
        return [], None

    rank_by_documents([v], segment, {v.name: collect}, lambda _: None, docs=docs, timed=())
    answers = serve_each(service, calls, lambda q: names[q["haystack_id"]], lambda q: payloads[q["haystack_id"]],
                         ranked, log, segment.label)
    stored = iter(zip(calls, answers))

    def answered(q, hay, documents):  # the ranking step asks again in the same order
        (asked, _, _), got = next(stored)
        assert asked["question_id"] == q["question_id"], "the ranking step's order changed between its passes"
        return got

    return answered


def _shared_load(service, v, searched: dict, names: dict, contents: dict) -> None:
    """system.load on one warmed namespace of a shared service: with reset isolation the one it holds now
    (the last haystack's), else the one with the most questions."""
    from .servers import load_namespace

    if v.retriever["isolation"] == "reset":
        if service.current is None or not searched:
            return
        held = {next(iter(searched)): [q for qs in searched.values() for q in qs
                                       if contents[q["haystack_id"]] == service.current]}
    else:
        held = {ns: qs for ns, qs in searched.items() if ns not in service.failed}
    namespace = load_namespace({ns: qs for ns, qs in held.items() if qs})
    if namespace is not None:
        service.load_curve(service.client, namespace, held[namespace])


# The recipe backend of a memory service (config ``variants.<name>.system``): not a recipe choice.
BACKEND = "system"
register(Row(BACKEND, "system", label="memory service", description="a running memory service that ingests "
             "each haystack's sessions and answers searches over HTTP", module=__name__, config_key="system",
             make_variant=system_variant, turns=True))


def _variant_sources(variant) -> tuple:
    """A user's query transform's files (queries.py), a library's (library.py): an edit to one reruns the
    variant."""
    from .queries import sources

    return tuple(sources((variant.retriever or {}).get("query"))) + _library_sources(variant)


register_retriever(Retriever("system", __name__, rank_segment, sources=_variant_sources, shares=False))
