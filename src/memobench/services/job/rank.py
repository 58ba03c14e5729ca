"""A memory service as a variant: a running system that ingests sessions and
answers searches, driven over HTTP or MCP under the harness rules of the
dataset's family (the same questions, gold and denominators as every other
variant)::

    variants:
      my-service:
        system:
          url: http://127.0.0.1:8765   # the service (its API: services/operations/api.py, docs/memory-services.md)
          # or, over MCP: mcp: {command: [my-server, --stdio]} (started by the job) or mcp: {url: http://.../mcp}
          isolation: namespace         # a namespace per distinct haystack; or reset (one, emptied per haystack)
          concurrency: 4               # haystacks ingested at once
          timeout_s: 30                # per request
          retries: 3                   # more tries of a transient failure, with backoff
          max_errors: 0                # questions that may fail (system errors) before the job stops
          warm_repeats: 1              # each search repeated this many times, timed as warm
          check: true                  # its conformance check (services/conformance.py) before the first ingestion
          ready: {until: count}        # wait until an ingested namespace is searchable (services/job/readiness.py)
          load: true                   # a load curve after the job's searches (services/job/load.py)
          determinism: {replicas: 1}   # a haystack per job ingested again, its lists compared (determinism.py)
          # {namespace} or {workdir} in mcp.command or mcp.env: a server per namespace, at most
          # servers: N alive at once (services/job/per_namespace.py)

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
that failed (services/operations/arrival.py).
"""

from __future__ import annotations

import contextlib
import json

from ...catalog.row import Retriever, Row, register, register_retriever
from ...core.atomic import locked
from ...retrieval.returned import RetrieverError
from ..definition.variant import BACKEND, DEFINITION_KEY, definition, system_variant
from .service import _Service
from ..sent.sessions import haystack_sessions, namespace_of, sent_turns
from ..transport.connect import served_by

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's

# --------------------------------------------------------------------------- the retrieve stage


def rank_segment(variants, segment, log=print) -> dict:
    """The seam's entry: rank one segment (``harness.Segment``) under system
    variants (``documents.rank_by_documents``, each session's ingest payload
    in place of its document)."""
    from ..transport.client import StartFailed
    from ..transport.processes import ended_as_exit
    from ...retrieval.documents import rank_by_documents
    from ..identity import SERVICE_KEY
    from ...retrieval.harness import CHECKS_KEY, skip_reason
    from ..sent.rendering import names_turn_id
    from ...retrieval.turns import session_turns

    keys = sorted({k for h in segment.haystacks.values() for k in h.keys})
    turns = session_turns(segment.inputs["events"], "all", keys) if keys else {}
    session_ids = {k: sid for h in segment.haystacks.values() for k, sid in zip(h.keys, h.ids)}
    out = {}
    for v in variants:
        sent = sent_turns(turns, session_ids, ids=v.grain == "turn" or names_turn_id(v.retriever))
        payloads = {hid: haystack_sessions(h, sent) for hid, h in segment.haystacks.items()}
        service = _Service(v, segment, log)
        service.turn_table = turns
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
        if service.attributed is not None:
            from ...retrieval.harness import with_attributed

            outcomes = with_attributed(outcomes, service.items)
        meta = {**(outcomes.schema.metadata or {}), CHECKS_KEY: json.dumps(service.checks(), sort_keys=True),
                DEFINITION_KEY: definition(v), SERVICE_KEY: json.dumps(served_by(v.retriever, service.client),
                                                                       sort_keys=True)}
        out[v.name] = (rankings, outcomes.replace_schema_metadata(meta), deep)
    return out


def _library_sources(variant) -> tuple:
    from ..definition.inprocess import sources

    return sources(variant)


def _per_namespace(service, v, segment, docs, ranked, names, payloads, log):
    """A server per namespace (services/job/per_namespace.py): the ranking step's calls collected first (the skip
    rule's questions, in its order), searched namespace by namespace, each while its server lives; the
    ranker that then gives the stored answers."""
    from ...retrieval.documents import rank_by_documents
    from .per_namespace import serve_each

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
    from .per_namespace import load_namespace

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


register(Row(BACKEND, "system", label="memory service", description="a running memory service that ingests "
             "each haystack's sessions and answers searches over HTTP", module=__name__, config_key="system",
             make_variant=system_variant, turns=True))


def _variant_sources(variant) -> tuple:
    """A user's query transform's files (queries.py), a library's (library.py): an edit to one reruns the
    variant."""
    from ..sent.queries import sources

    return tuple(sources((variant.retriever or {}).get("query"))) + _library_sources(variant)


register_retriever(Retriever("system", __name__, rank_segment, sources=_variant_sources, shares=False))
