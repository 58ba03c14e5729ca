"""A system variant's definition: its config read into a spec, checked, with its defaults, and the
digest of what decides its lists (:func:`definition`). Each feature's own settings are read by the
feature's module (check_of, ready_of, load_of, servers_of, determinism_of)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ...core.errors import ConfigError
from ..transport.connect import MAX_RESPONSE_MB, _command

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's

DEFINITION_KEY = b"memobench.definition"
DEFAULTS = {"isolation": "namespace", "namespace_prefix": "mb-", "concurrency": 4, "timeout_s": 30.0,
            "retries": 3, "backoff_s": 0.1, "max_errors": 0, "warm_repeats": 1, "k": 50, "answer": "structured"}
BACKEND = "system"  # the recipe backend of a memory service (catalog row: job/rank.py)
ISOLATION = ("namespace", "reset")
# an MCP tool's answer: its structured content, its text as JSON, or its text as it stands (read by patterns)
ANSWERS = ("structured", "text", "plain")
# what a degenerate answer makes (evaluation.metrics.degenerate; the merge job checks): read as given, not a
# DEFAULTS entry, so that the variants that leave it out keep their definition
DEGENERATE = ("warn", "error")
# where a service that answers in text has each item's text: a dotted path in each result, or a regex cutting
# a text answer into items (docs/memory-services.md#services-that-answer-in-text)
TEXT_RESULTS = ("text", "split")
MIN_K = 10  # the least system.k: the harness figures read a list to rank 10
# settings read with a default but kept out of DEFAULTS and the params (variants written before them keep
# their definition): their defaults, for :func:`definition`
UNLISTED_DEFAULTS = {"max_response_mb": MAX_RESPONSE_MB, "degenerate": "warn"}
# settings that decide no list, kept out of the definition whatever they say: the conformance check, the
# bound on per-namespace servers alive at once, the load curve (system.ready decides lists of an
# asynchronous service: in the definition when given)
UNLISTED = ("check", "headers", "servers", "load")






def system_variant(name: str, family: str, entry: dict, others: dict | None = None):
    """A memory service (config ``variants.<name>.system``) as a variant of a
    family: the family's skip rule, so its questions and gold are every
    other variant's."""
    from ...catalog.variant import SKIP, Variant
    from ...memo.recipe import Recipe
    from ..operations.api import DEFAULT_RESULTS, endpoints, tools

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
        from .inprocess import operations as library_operations

        operations, transport = library_operations(s, where), "library"
    elif "url" in s:
        _checked_url(s["url"], where, "an endpoint's path (endpoints: search: path: /namespaces/{namespace}/search)")
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
    from ..conformance import check_of
    from ..job.determinism import determinism_of

    for key, value in (("check", check_of(s.get("check"), where)),
                       ("determinism", determinism_of(s.get("determinism"), where))):
        spec.pop(key, None)
        if value is not None:  # absent at its default: the params of a config that leaves it out
            spec[key] = value
    results = {**DEFAULT_RESULTS, **(s.get("results") or {})}
    if set(results) - set(DEFAULT_RESULTS) - {"pattern", *TEXT_RESULTS}:
        unknown = set(results) - set(DEFAULT_RESULTS) - {"pattern", *TEXT_RESULTS}
        raise ConfigError(f"{where}: results: unknown key(s) {', '.join(sorted(unknown))}"
                          f" (known: {', '.join(DEFAULT_RESULTS)}, pattern, {', '.join(TEXT_RESULTS)})")
    if "pattern" in results:
        from ..operations.api import pattern

        pattern(results["pattern"], f"{where}: results: pattern")
    _text_results(spec, results, s, where)
    spec["operations"], spec["transport"], spec["results"] = operations, transport, results
    spec["identity"] = identity(s)
    shown = identity(s, public=True)
    # the query it was measured with, where not the question itself, and sessions whose arrival nothing
    # confirmed: in the label the report shows beside the figures
    asked = f", query: {spec['query']}" if "query" in spec else ""
    asked += ", arrival not confirmed (confirm: none)" if spec.get("confirm") == "none" else ""
    return Variant(name, Recipe(backend=BACKEND, documents="all"), SKIP[family], f"memory service: {shown}{asked}",
                   entry.get("description", f"the memory service at {shown}"), retriever=spec)


def _text_results(spec: dict, results: dict, s: dict, where: str) -> None:
    """A service that answers in text (docs/memory-services.md#services-that-answer-in-text): ``results.text``
    (where each result's text sits) or ``results.split`` (a regex cutting a text answer into items), its
    ``attribution`` settings (kept in ``spec``, so in the definition), and ``results.id: null`` (no ids) only
    then."""
    from ...retrieval.attribution import settings_of

    given = [k for k in TEXT_RESULTS if k in results]
    if len(given) > 1:
        raise ConfigError(f"{where}: results: give text (a dotted path in each result) or split (a regex cutting "
                          f"a text answer into items), not both")
    if not given:
        if results.get("id") is None:
            raise ConfigError(f"{where}: results: id is null, so the service's results name nothing: give "
                              f"results.text (where each result's text sits) to attribute its text to turns")
        if "attribution" in s:
            raise ConfigError(f"{where}: attribution needs results.text or results.split (the text attributed)")
        return
    if "text" in results and not isinstance(results["text"], str):
        raise ConfigError(f"{where}: results: text must be a dotted path (a string; \"\" for a result that is "
                          f"the text), not {results['text']!r}")
    if "split" in results:
        from ..operations.api import pattern

        pattern(results["split"], f"{where}: results: split", group=False)
        if "pattern" in results or (s.get("results") or {}).get("id") is not None:
            raise ConfigError(f"{where}: results: split cuts a text answer into items that name no id; give no id "
                              f"or pattern with it")
        results["id"] = None
    spec["attribution"] = settings_of(s.get("attribution"), where)


def _shapes(spec: dict, operations: dict, transport: str, where: str) -> None:
    """A server's own shapes checked (docs/memory-services.md#servers-with-their-own-shapes): headers,
    render (kept normalized in ``spec``), query, and what they ask of the operations."""
    from ..operations.api import ingest_placeholders, placeholders
    from ..sent.queries import check_query
    from ..sent.rendering import DEFAULT_RENDER, render_spec

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
    """``system.confirm`` checked (services/operations/arrival.py): search (the default without count) or none; a service
    with count is confirmed by it. Left out of ``spec`` at its default, so that a variant written without it
    keeps its params and definition."""
    from ..operations.arrival import CONFIRM

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
    from ..transport.servers import per_namespace
    from ..job.load import load_of
    from ..job.readiness import ready_of
    from ..job.per_namespace import servers_of

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
    from ..transport.client import shown_url

    return shown_url(url) if isinstance(url, str) else repr(url)


def _checked_url(url: str, where: str, instead: str) -> None:
    """A service's url (HTTP, or MCP's streamable HTTP): http(s), no placeholder (``instead`` says where one
    goes), no secret written out."""
    if not _http_url(url):
        raise ConfigError(f"{where}: url {_shown(url)!r} is not an http:// or https:// URL")
    _no_placeholder_in_url(url, f"{where}: url", instead)
    _no_written_secret(url, f"{where}: url")


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

    from ..operations.api import _BRACE

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
    from ...catalog.variant import LIST_FIELDS, to_spec

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
        _checked_url(m["url"], where, "a tool's arguments, or, for a server per namespace, mcp: command or env")
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
