"""The sessions a system variant sends: each haystack's sessions with their turns, the namespace its
content names, the shape of the requests (:func:`sent_shape`, recorded in the ledger), and the placeholders'
values of an ingest and a search."""

from __future__ import annotations

import hashlib
import json

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's

def sent_turns(turns: dict, session_ids: dict, ids: bool = False) -> dict[int, list[dict]]:
    """{session_key: its turns as the service gets them, in order, each
    ``{role, content}``, or ``{id, role, content}`` with ``ids`` (a turn
    variant's service)} (``turns``: every turn of each session,
    turns.session_turns; the role as the file gives it: LongMemEval's
    ``role``, LoCoMo's speaker; ``session_ids``: each key's session id)."""
    from ...retrieval.turns import turn_id

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


def ingest_values(namespace: str, session: dict) -> dict:
    """The placeholders' values (services/operations/api.py) of ingesting ``session`` (``{id, date, turns}``)."""
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
    from ..operations.api import ingest_placeholders
    from .rendering import RENDERED

    op = spec["operations"]["ingest"]
    return bool(ingest_placeholders(op) & RENDERED) or "render" in spec or "id" in op or "id_pattern" in op


def keyed(spec: dict) -> bool:
    """True when a search's results name the items' keys (or the ids the service assigned to them), not
    session ids: the ingestion sends ``{session.key}``, or the service assigns its own ids."""
    from ..operations.api import ingest_placeholders

    op = spec["operations"]["ingest"]
    return "session.key" in ingest_placeholders(op) or "id" in op or "id_pattern" in op


def sent_items(spec: dict, sessions: list[dict], where: str) -> list:
    """The items a namespace's ``sessions`` are sent as (rendering.Item), or the sessions themselves
    when nothing is rendered (today's requests, at no rendering cost)."""
    from .rendering import items

    return items(sessions, spec.get("render"), where) if rendered(spec) else sessions
