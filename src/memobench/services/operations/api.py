"""The API a system variant speaks, over HTTP or MCP, as config states it
(docs/memory-services.md).

Four operations, each an endpoint (a path, POSTed a JSON body made from a
template): ``reset`` empties a namespace, ``ingest`` adds one session to it,
``search`` ranks its sessions for a question, and the optional ``count``
says how many sessions it holds (how a resumed run confirms an ingestion
without redoing it). The defaults (:data:`DEFAULT_ENDPOINTS`) are the
project's own API, which its reference server speaks; a server this project
has never seen is driven by giving its paths, bodies and result paths in
config, never by guessing. A path may hold placeholders too
(``/namespaces/{namespace}/search``), filled in URL-quoted. Over MCP each
operation is a tool instead (:data:`DEFAULT_TOOLS`: its name and an
``arguments`` template, the same placeholders), answered by the tool's
structured content, or else its text parsed as JSON.

A template is any JSON value. A string that is exactly one placeholder
(``"{session}"``) becomes the value itself (an object, a list, a number); a
placeholder inside a longer string is replaced by its text. The
placeholders (:data:`PLACEHOLDERS`): ``namespace``, ``k``, ``session`` (``{id,
date, turns: [{role, content}]}``), ``session.id``, ``session.date``,
``session.turns``, ``question.id``, ``question.text``, ``question.date``,
``question.type``. Where the ranked list sits in a search response, and the
session id and score in one of its results, are dotted paths
(:func:`pick`): ``results``, ``id``, ``score`` by default; ``""`` is the
value itself (a response that is the list, a result that is the id).

Servers with their own shapes (docs/memory-services.md#servers-with-their-own-shapes)
add: ``session.key`` (a per-copy key), ``session.text``, ``session.lines``,
``session.messages`` (a session rendered: services/sent/rendering.py),
``sessions`` (a haystack's items, each the ingest operation's ``session``
template filled: one call per haystack) and ``query`` (the search's query
text); and these operation options: ``reset: null`` or ``may_fail: true``,
``count``'s ``length: true`` (the count is the length of the list at
``sessions``) or ``pattern`` (a regex whose group 1 is the count, on the
answer's text), ``ingest``'s ``session`` (the item template), ``id`` (where
a server-assigned id sits in the ingest answer) or ``id_pattern`` (a regex
whose group 1 is the id, on the answer's text); and on ingest, reset and
count, ``refused`` and ``accepted``: regexes on the answer's text saying
that a server answering in words refused the request (``Failed to save
...``), or did what was asked.
"""

from __future__ import annotations

import re

from ...core.errors import ConfigError

OPERATIONS = ("reset", "ingest", "search", "count")
# the operations whose answer is read (config says where its values sit); another's may be anything
READ = frozenset({"search", "count"})


def reads_json(op: str, operation: dict) -> bool:
    """True when an operation's answer must be JSON: a search's or a count's, unless a count is read from
    its words (``pattern``)."""
    return op in READ and "pattern" not in operation
DEFAULT_ENDPOINTS = {
    "reset": {"path": "/reset", "body": {"namespace": "{namespace}"}},
    "ingest": {"path": "/ingest", "body": {"namespace": "{namespace}", "session": "{session}"}},
    "search": {"path": "/search", "body": {"namespace": "{namespace}", "query": "{question.text}",
                                           "date": "{question.date}", "k": "{k}"}},
    # the number of sessions a namespace holds, at ``sessions`` in the response
    "count": {"path": "/count", "body": {"namespace": "{namespace}"}, "sessions": "sessions"},
}
# over MCP: the same operations as tools, their arguments the HTTP bodies
DEFAULT_TOOLS = {op: {"tool": op, "arguments": e["body"], **({"sessions": e["sessions"]} if "sessions" in e else {})}
                 for op, e in DEFAULT_ENDPOINTS.items()}
DEFAULT_RESULTS = {"list": "results", "id": "id", "score": "score"}
# one session's placeholders (an ingest's, or the item template's of a batch ingest)
SESSION_PLACEHOLDERS = ("session", "session.id", "session.date", "session.turns", "session.key", "session.text",
                        "session.lines", "session.messages")
PLACEHOLDERS = ("namespace", "k", *SESSION_PLACEHOLDERS, "sessions", "question.id", "question.text",
                "question.date", "question.type", "query")
# which placeholders each operation's values hold
AVAILABLE = {"reset": {"namespace"}, "count": {"namespace"},
             "ingest": {"namespace", "sessions", *SESSION_PLACEHOLDERS},
             "search": {"namespace", "k", "question.id", "question.text", "question.date", "question.type", "query"}}
# the options an operation may have beyond its path and body (tool and arguments), and the operations
OPTIONS = {"sessions": ("count",), "length": ("count",), "pattern": ("count",), "may_fail": ("reset",),
           "session": ("ingest",), "id": ("ingest",), "id_pattern": ("ingest",),
           # what an answer in words says when the server refused the request (or when it did what was asked)
           "refused": ("ingest", "reset", "count"), "accepted": ("ingest", "reset", "count")}
_PLACEHOLDER = re.compile(r"\{([a-z.]+)\}")
# a brace that no known placeholder accounts for (``{question_text}``, ``{ question.text }``, a lone ``{``):
# sent as it stands it would be the same literal text in every request
_BRACE = re.compile(r"\{[^{}]*\}?|\}")


def stray_brace(template, known=PLACEHOLDERS) -> str | None:
    """The first brace-like text in a template that is not a known placeholder (a key's: any)."""
    if isinstance(template, str):
        rest = _PLACEHOLDER.sub(lambda m: "" if m.group(1) in known else m.group(0), template)
        found = _BRACE.search(rest)
        return found.group(0) if found else None
    if isinstance(template, dict):
        # a key is never filled: any brace in one is sent as it stands
        keys = (m.group(0) for k in template for m in [_BRACE.search(str(k))] if m)
        values = (b for b in (stray_brace(v, known) for v in template.values()) if b is not None)
        return next(keys, None) or next(values, None)
    if isinstance(template, list):
        return next((b for b in (stray_brace(v, known) for v in template) if b is not None), None)
    return None


def placeholders(template) -> set[str]:
    """Every placeholder a template names."""
    if isinstance(template, str):
        return set(_PLACEHOLDER.findall(template))
    if isinstance(template, dict):
        return set().union(*map(placeholders, template.values())) if template else set()
    if isinstance(template, list):
        return set().union(*map(placeholders, template)) if template else set()
    return set()


def fill(template, values: dict):
    """The template with its placeholders replaced by ``values`` (module docstring)."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: "" if values[m.group(1)] is None else str(values[m.group(1)]), template)
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


_ENV = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def from_environment(text: str, where: str, environ=None, encode=None) -> str:
    """``text`` with each ``$NAME`` (or ``${NAME}``) replaced by the environment's value (``encode``d,
    when given), so a secret stays out of config; an unset one is a ConfigError line naming it (sent
    as the literal ``$NAME`` it would reach the service as a wrong key, with no error). Each value is
    a secret from now on: starred in whatever this process writes (core/secrets.py)."""
    import os

    from ...core.secrets import register

    env = os.environ if environ is None else environ

    def value(m):
        name = m.group(1) or m.group(2)
        if name not in env:
            raise ConfigError(f"{where}: ${name} is not set in the environment")
        register(env[name])
        return env[name] if encode is None else encode(env[name])

    return _ENV.sub(value, text)


def url_from_environment(url: str, where: str, environ=None) -> str:
    """A service's URL with its ``$NAME``s read from the environment (:func:`from_environment`), each
    value percent-encoded where it lands (a password holding ``/`` or ``#``, a key holding ``&``: the URL
    keeps its parts, and the server reads the value back as it was); a host or port as it is."""
    from urllib.parse import quote, unquote, urlsplit, urlunsplit

    from ...core.secrets import register_basic

    if not _ENV.search(url):
        return url  # as written, every byte
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")

    def part(text, safe):
        return from_environment(text, where, environ, lambda v: quote(v, safe=safe))

    userinfo = part(userinfo, "")
    if at:
        user, _, password = userinfo.partition(":")
        register_basic(unquote(user), unquote(password))  # as HTTP Basic auth sends them
    netloc = userinfo + at + from_environment(hostport, where, environ)
    # a query value's ``=`` and ``&`` are encoded too: the query's own stay as written
    return urlunsplit((parts.scheme, netloc, part(parts.path, "/"), part(parts.query, ""), part(parts.fragment, "")))


def header_value(template: str, where: str, environ=None) -> str:
    """A header's value with its ``$NAME``s read (:func:`from_environment`); one holding a line break or
    another control character (a CRLF ``.env`` file's ``\\r``) is a ConfigError line that names the header
    but not the value: no request could carry it, and the HTTP libraries' own errors quote it."""
    value = from_environment(template, where, environ)
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
        names = ", ".join(f"${m.group(1) or m.group(2)}" for m in _ENV.finditer(template))
        what = "a line break (CR or LF: a .env file saved with CRLF line endings?)" if any(
            c in value for c in "\r\n") else "a control character"
        raise ConfigError(f"{where}: its value (from {names or 'the config'}) holds {what}, which no HTTP header "
                          f"can carry; remove it from the environment's value")
    return value


class Missing(Exception):
    """A dotted path that is not in a response (its message names where it stopped)."""


def fill_path(path: str, values: dict) -> str:
    """An endpoint's path with its placeholders replaced by their URL-quoted text
    (``/namespaces/{namespace}/search``)."""
    from urllib.parse import quote

    return _PLACEHOLDER.sub(lambda m: quote(str(values[m.group(1)]), safe=""), path)


def pick(obj, path: str):
    """The value at a dotted path (``results``, ``data.hits``, ``0.id``; ``""``: ``obj`` itself)."""
    if path == "":
        return obj
    at = []
    for part in path.split("."):
        at.append(part)
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            raise Missing(f"no {'.'.join(at)!r} in the response")
    return obj


def endpoints(spec: dict | None, where: str) -> dict:
    """The four operations' HTTP endpoints: the defaults with ``spec``'s changes
    (an operation set to None is not available: ``count`` only may be
    left out); a ConfigError line for a template naming a placeholder its
    operation does not have."""
    return _operations(spec, where, "endpoints", DEFAULT_ENDPOINTS, "path", "body")


def tools(spec: dict | None, where: str) -> dict:
    """The four operations' MCP tools (``{tool, arguments}``), checked as :func:`endpoints` are."""
    return _operations(spec, where, "tools", DEFAULT_TOOLS, "tool", "arguments")


def _operations(spec: dict | None, where: str, key: str, defaults: dict, name: str, template: str) -> dict:
    out = {op: dict(e) for op, e in defaults.items()}
    for op, e in (spec or {}).items():
        if op not in OPERATIONS:
            raise ConfigError(f"{where}: {key}: unknown operation {op!r} (known: {', '.join(OPERATIONS)})")
        if e is None:
            if op not in ("count", "reset"):
                raise ConfigError(f"{where}: {key}: {op} is required")
            out[op] = None
            continue
        if not isinstance(e, dict):
            raise ConfigError(f"{where}: {key}: {op} must be a mapping (or null), not {e!r}")
        if "pattern" in e and "sessions" in e:
            raise ConfigError(f"{where}: {key}: {op}: give sessions (a path in a JSON answer) or pattern (a regex "
                              f"on its text), not both")
        # a count read by a pattern reads the answer's text, not the default path
        out[op] = {**{k: v for k, v in out[op].items() if not ("pattern" in e and k == "sessions")}, **e}
    for op, e in out.items():
        if e is None:
            continue
        if name == "path" and (not isinstance(e.get("path"), str) or not e["path"].startswith("/")):
            raise ConfigError(f"{where}: {key}: {op}: path must start with '/' (got {e.get('path')!r})")
        if name == "tool" and (not isinstance(e.get("tool"), str) or not e["tool"]):
            raise ConfigError(f"{where}: {key}: {op}: tool must be a tool's name (got {e.get('tool')!r})")
        _options(op, e, f"{where}: {key}: {op}", (name, template))
        for part in ("path", template) if name == "path" else (template,):
            brace = stray_brace(e.get(part))
            if brace is not None:
                raise ConfigError(f"{where}: {key}: {op}: {part}: {brace!r} is not a placeholder (known: "
                                  f"{', '.join(sorted(AVAILABLE[op]))})")
        named = placeholders(e.get(template)) | (placeholders(e["path"]) if name == "path" else set())
        unknown = named - AVAILABLE[op]
        if unknown:
            verb = "names" if template == "body" else "name"
            raise ConfigError(f"{where}: {key}: {op}: the {template} {verb} {', '.join(sorted(unknown))}, which "
                              f"{op} does not have (it has: {', '.join(sorted(AVAILABLE[op]))})")
        if op == "ingest":
            _batch(e, named, f"{where}: {key}: ingest", template)
    return out


def _options(op: str, e: dict, where: str, own: tuple) -> None:
    """An operation's options beyond its own two keys: each the right operation's, of the right type."""
    for option in set(e) - set(own):
        if op not in OPTIONS.get(option, ()):
            known = ", ".join([*own, *sorted(o for o, of in OPTIONS.items() if op in of)])
            raise ConfigError(f"{where}: unknown key {option!r} (known: {known})")
    for flag in ("length", "may_fail"):
        if flag in e and not isinstance(e[flag], bool):
            raise ConfigError(f"{where}: {flag} must be true or false, not {e[flag]!r}")
    if "id" in e and "id_pattern" in e:
        raise ConfigError(f"{where}: give id (a path in a JSON answer) or id_pattern (a regex on its text), not both")
    if "id" in e and not isinstance(e["id"], str):
        raise ConfigError(f"{where}: id must be a dotted path (a string), not {e['id']!r}")
    if "id_pattern" in e:
        pattern(e["id_pattern"], f"{where}: id_pattern")
    if "pattern" in e:
        pattern(e["pattern"], f"{where}: pattern", "the count", "\"Context Items: (\\d+)\"")
    for said in ("refused", "accepted"):
        if said in e:
            pattern(e[said], f"{where}: {said}", group=False)


def _batch(e: dict, named: set, where: str, template: str) -> None:
    """A batch ingest (``{sessions}``) fills its ``session`` item template per session; its own template
    names no session's placeholder, and an ingest without ``{sessions}`` has no item template."""
    if "sessions" not in named:
        if "session" in e:
            raise ConfigError(f"{where}: session (the item template of a batch ingest) is used only with "
                              f"{{sessions}} in the {template}")
        return
    single = named & set(SESSION_PLACEHOLDERS)
    if single:
        raise ConfigError(f"{where}: the {template} name {{sessions}} (one call per haystack) and "
                          f"{', '.join(sorted(single))}, one session's: put those in the session item template")
    item = e.get("session")
    if item is None:
        raise ConfigError(f"{where}: {{sessions}} needs session, the template of each item of the list "
                          f"(e.g. session: {{id: \"{{session.key}}\", text: \"{{session.text}}\"}})")
    brace = stray_brace(item, ("namespace", *SESSION_PLACEHOLDERS))
    if brace is not None:
        raise ConfigError(f"{where}: session: {brace!r} is not a placeholder (known: "
                          f"{', '.join(sorted(('namespace', *SESSION_PLACEHOLDERS)))})")


def pattern(text, where: str, what: str = "the id", example: str = "\"id: (\\S+)\"",
            group: bool = True) -> re.Pattern:
    """``text`` compiled as a regex with a group 1 (``what`` it reads; ``group`` False: a regex that only
    matches), or a ConfigError line."""
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{where}: {text!r} is not a regex (a non-empty string)")
    try:
        compiled = re.compile(text)
    except re.error as e:
        raise ConfigError(f"{where}: {text!r} is not a regex: {e}") from None
    if group and compiled.groups < 1:
        raise ConfigError(f"{where}: {text!r} has no group: {what} is its group 1, e.g. {example}")
    return compiled


def batch(operation: dict) -> bool:
    """True when an ingest operation sends a whole haystack in one call (``{sessions}``)."""
    return "session" in operation


def ingest_placeholders(operation: dict) -> set[str]:
    """Every placeholder an ingest operation names, its item template's included."""
    return placeholders(operation.get("body", operation.get("arguments"))) | placeholders(operation.get("session"))
