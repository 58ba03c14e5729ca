"""The operations a system variant calls and the reading of their answers: reset, ingest (in items or
batches), count, search's ids; the retrieve stage's and the conformance check's one way to ask and read."""

from __future__ import annotations

import json

from ...core.errors import excerpt
from ...retrieval.returned import RetrieverError
from ..sent.sessions import ingest_values, sent_items

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's

def reset_namespace(client, spec: dict, namespace: str, retries: int | None = None):
    """Empties ``namespace`` (its :class:`..transport.client.Call`), or None for a service without reset, or
    whose reset answered an error (or a refusal in words: arrival.check_answer) that ``may_fail`` allows (a
    namespace it never held)."""
    from ..transport.client import ServiceError
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
    from .api import batch, fill
    from .arrival import check_answer, label
    from ..sent.rendering import Item, item_values

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

    from .api import Missing

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
    """(the sessions ``namespace`` holds, the call's :class:`..transport.client.Call`), or (None, None) when
    the service has no ``count``; a one-line RetrieverError for an answer that is not a number, its
    :class:`.arrival.Refused` subclass for one that says in words the server refused it (``retries``: the
    client's own unless given)."""
    from .api import Missing
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


def answers_in_text(spec: dict) -> bool:
    """True when the service's results are text attributed to turns (``results.text`` or ``results.split``)."""
    return "text" in spec["results"] or "split" in spec["results"]


def result_texts(resp, spec: dict, where: str, unit: str = "session") -> tuple[list[str] | None, list[str], list | None]:
    """(the ids beside the texts, or None where the results name none; each result's text, best first; their
    scores or None) of a text service's search answer (``results.text``: a dotted path in each result,
    ``results.split``: a regex cutting the text at ``results.list`` into items, each stripped, blank ones
    dropped); a one-line RetrieverError saying what came back when they are not there."""
    import re

    res = spec["results"]
    listed = _picked(resp, res, "list", where)
    if "split" in res:
        if not isinstance(listed, str):
            raise RetrieverError(f"{where}: the results at {res['list']!r} are {type(listed).__name__}, not text to "
                                 f"split (results.split): {_short(resp)}")
        return None, [p.strip() for p in re.split(res["split"], listed) if p.strip()], None
    if not isinstance(listed, list):
        raise RetrieverError(f"{where}: the results at {res['list']!r} are {type(listed).__name__}, not a "
                             f"list: {_short(resp)}")
    texts, of = [], []  # each item's text, and the result it came from
    for r, item in enumerate(listed, 1):
        text = _picked(item, res, "text", f"{where}: result {r}")
        many = text if isinstance(text, list) else [text]  # a result holding several texts: one item each
        if not all(isinstance(t, str) for t in many):
            raise RetrieverError(f"{where}: result {r}: the text at {res['text']!r} is {_short(text)}, not a string "
                                 f"or a list of strings")
        texts += many
        of += [r - 1] * len(many)
    ids, scores = _ids_and_scores(resp, listed, spec, where, unit)
    if scores is not None:
        scores = [scores[r] for r in of]
    return ([ids[r] for r in of] if res.get("id") is not None else None), texts, scores


def result_ids(resp, spec: dict, where: str, unit: str = "session") -> tuple[list[str], list | None]:
    """(the ids, best first; their scores, or None when a result has none) of a search's answer, read where
    ``system.results`` says; a one-line RetrieverError saying what came back when they are not there. A
    service whose results name no id (``results.id: null``, or ``results.split``) lists its texts: two
    answers compare as their texts (a repeated search, a replica)."""
    if answers_in_text(spec) and spec["results"].get("id") is None:
        _, texts, scores = result_texts(resp, spec, where, unit)
        return texts, scores
    res = spec["results"]
    return _ids_and_scores(resp, _picked(resp, res, "list", where), spec, where, unit)


def _ids_and_scores(resp, listed, spec: dict, where: str, unit: str) -> tuple[list[str], list | None]:
    """result_ids of the value at ``results.list`` (``listed``)."""
    from .api import Missing, pick

    import re

    res = spec["results"]
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
        if res.get("id") is None:  # a text service's results without ids: their scores only
            if res.get("score") and scores is not None:
                try:
                    scores.append(pick(item, res["score"]))
                except Missing:
                    scores = None
            continue
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
    """What sits at ``path`` in ``answer`` (services.operations.api.pick); an answer read as text (``answer: plain``,
    an ingest's text) is the text at ``""``, and its JSON, where it is JSON, at any other path."""
    from .api import Missing, pick

    if isinstance(answer, str) and path != "":
        try:
            answer = json.loads(answer)
        except ValueError:
            raise Missing(f"the answer is text, not JSON, so nothing sits at {path!r} (a text answer is read "
                          f"whole, at \"\", by a pattern)") from None
    return pick(answer, path)


def _picked(answer, results: dict, key: str, where: str):
    """What sits at ``system.results.<key>`` in ``answer``, or a one-line error saying what came back."""
    from .api import Missing

    try:
        return _pick(answer, results[key])
    except Missing as e:
        raise RetrieverError(f"{where}: {e} (system.results.{key} is {results[key]!r}): {_short(answer)}") from None


def _short(obj) -> str:
    return excerpt(json.dumps(obj, ensure_ascii=False, default=str))
