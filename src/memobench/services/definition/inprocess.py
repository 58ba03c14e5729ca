"""A memory library used in-process as a system variant (docs/memory-services.md#a-library-in-process)::

    variants:
      my-library:
        system:
          library: my_memory.py:make      # a file and a factory, or module:factory
          options: {k1: 1.2}              # the factory's keyword arguments

``make(**options)`` returns an object with ``reset(namespace)``,
``ingest(namespace, session)``, ``search(namespace, query, k)`` and,
optionally, ``count(namespace)`` (:mod:`..transport.library`); the variant's
other settings (isolation, concurrency, retries, check, ...) are a service's.
The factory is found as a user's retriever's callable is
(:func:`.python.load`), and its files are the retrieve job's sources: an
edit to one reruns the variant. The object is made once per retrieve job
(its stdout and stderr go to the job's log), and the job's end calls its
``close()`` where it has one."""

from __future__ import annotations

from ...core.errors import ConfigError

KEYS = ("library", "options")  # the library's own keys under system (url and mcp are the services')
# a service's settings that mean nothing in-process
NOT_IN_PROCESS = ("endpoints", "tools", "answer", "results", "max_response_mb", "headers", "render")


def operations(system: dict, where: str) -> dict:
    """The four operations of a library variant (``system``: its config), each the method it calls;
    the factory and its options are in ``ingest``'s so that they shape its ledger (``system.sent_shape``).
    A ConfigError line for a factory that is not ``file.py:name`` or ``module:name``, or options that are
    not a mapping."""
    from ...retrieval.python import _callable_spec

    spec, options = system["library"], system.get("options", {})
    if not _callable_spec(spec):
        raise ConfigError(f"{where}: library {spec!r} is not 'path/to/file.py:factory' or 'module:factory'")
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise ConfigError(f"{where}: options must map the factory's keyword arguments to values")
    extra = [k for k in NOT_IN_PROCESS if k in system]
    if extra:
        raise ConfigError(f"{where}: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} a service's; a library "
                          f"is called in-process (its search returns ids, or (id, score) pairs)")
    return {"reset": {"method": "reset"}, "ingest": {"method": "ingest", "library": spec, "options": options},
            # the search's arguments as a template names them: the query is the question's text, or what the
            # variant's query transform makes of it
            "search": {"method": "search", "arguments": {"namespace": "{namespace}", "query": "{query}", "k": "{k}"}},
            "count": {"method": "count", "sessions": "sessions"}}


def client(spec: dict, where: str, log=print):
    """The :class:`..services.transport.library.LibraryClient` of a library variant's ``spec``: its factory imported
    and called with its options (through :class:`.python.Calls`: output to ``log``, an exception one line)."""
    from ..transport.library import LibraryClient, missing_methods
    from ...retrieval.callables import Calls, check_covered, describe, load
    from ...retrieval.returned import RetrieverError

    name, variant = spec["library"], _variant_named(where)
    factory, scope = load(name, variant, log)
    obj, _ = Calls(log, scope).call(f"{where}: {name}", factory, **spec.get("options", {}))
    missing = missing_methods(obj)
    if missing:
        raise RetrieverError(f"{where}: {name} returned a {type(obj).__name__}, which has no "
                             f"{', '.join(missing)} method (a memory library's object has reset, ingest, search "
                             f"and optionally count)")
    check_covered(variant, name, scope)
    return LibraryClient(obj, name, retries=int(spec["retries"]), backoff_s=float(spec["backoff_s"]),
                         describe=lambda e: describe(e, scope))


def _variant_named(where: str) -> str:
    """The variant's name in ``where`` (``variant 'name'``), or ``where`` itself (check-service's)."""
    import ast

    try:
        return ast.literal_eval(where.removeprefix("variant ")) if where.startswith("variant ") else where
    except (ValueError, SyntaxError):
        return where


def sources(variant) -> tuple:
    """The user's files of a library variant (its factory's, as a retriever callable's): hashed into the
    retrieve job's code fingerprint; none for a service."""
    from ...retrieval.callables import sources as callable_sources

    spec = variant.retriever or {}
    return tuple(callable_sources(spec["library"])) if spec.get("transport") == "library" else ()
