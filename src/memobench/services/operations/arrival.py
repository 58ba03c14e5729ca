"""Whether what a system variant sent arrived (docs/memory-services.md#failures):
an answer in words that says the server refused an ingest, a reset or a
count (config ``refused`` and ``accepted`` on the operation: regexes on the
answer's text), a count read from words (``pattern``), and, for a service
without ``count``, each sent item searched back by its own words
(``system.confirm: search``), so that a session the server dropped while
answering as if it had kept it never passes for a miss.

A server that answers ``Failed to save context item: Key contains special
characters`` as a normal result (MCP ``isError`` false, HTTP 200) is, by its
answer's shape, a success: only config can say that these words are a
refusal. A refusal is :class:`Refused`, an ingestion that failed: the
namespace is ingested again from its reset, then its questions are system
errors (services/job/rank.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter

from ...core.errors import excerpt
from ...retrieval.returned import RetrieverError

# system.confirm: how the arrival of each ingested item is confirmed where the service has no count
CONFIRM = ("search", "none")
# the words of an item's confirmation search: the rarest word of each of this many of its turns
CONFIRM_WORDS = 4
_WORD = re.compile(r"\w\w+")


class Refused(RetrieverError):
    """An answer that says, in words config reads, that the server did not do what was asked; or an item
    sent that never came back in a search for its own words (its message is one line)."""


def answer_text(answer) -> str:
    """An answer's text as config's patterns read it: a text answer as it is, a JSON one as its JSON text."""
    if isinstance(answer, str):
        return answer
    return "" if answer is None else json.dumps(answer, ensure_ascii=False)


def check_answer(answer, op: dict, label: str, what: str) -> None:
    """Raises :class:`Refused` when ``op``'s ``refused`` regex matches ``answer``'s text, or its ``accepted``
    regex does not (``label``: where config sets them, ``tools.ingest``; ``what``: the request, for the
    line)."""
    if "refused" not in op and "accepted" not in op:
        return
    text = answer_text(answer)
    if "refused" in op and re.search(op["refused"], text):
        raise Refused(f"{what} was refused: the service answered {excerpt(text)!r} ({label}.refused matches)")
    if "accepted" in op and not re.search(op["accepted"], text):
        raise Refused(f"{what} was not accepted: the service answered {excerpt(text)!r}, which {label}.accepted "
                      f"({op['accepted']!r}) does not match")


def count_in_words(answer, op: dict, where: str) -> int:
    """The count ``op["pattern"]`` reads in ``answer``'s text: its group 1 as a whole number, or, with
    ``length: true``, how many times it matches (a listing in words)."""
    text = answer_text(answer)
    regex = re.compile(op["pattern"])
    if op.get("length"):
        return sum(1 for _ in regex.finditer(text))
    m = regex.search(text)
    if m is None:
        raise RetrieverError(f"{where}: count.pattern {op['pattern']!r} does not match the answer "
                             f"{excerpt(text)!r}")
    number = (m.group(1) or "").strip().replace(",", "")
    if not number.isdigit():
        raise RetrieverError(f"{where}: count.pattern {op['pattern']!r} read {m.group(1)!r} in the answer "
                             f"{excerpt(text)!r}, not a whole number")
    return int(number)


def confirm_of(spec: dict, has_count: bool) -> str:
    """How ingested items are confirmed: ``count`` where the service has one (its count must agree), else
    ``system.confirm`` (default ``search``)."""
    return "count" if has_count else spec.get("confirm", "search")


def _turns(item) -> list[tuple[str, str]]:
    """(role, content) of an item's turns: a rendered item's (rendering.Item) or a session's own."""
    session = getattr(item, "session", item)
    return [(str(t.get("role") or ""), "" if t.get("content") is None else str(t.get("content")))
            for t in session.get("turns") or []]


def confirm_queries(items: list) -> list[str | None]:
    """Each item's confirmation query: the rarest word (held by the fewest of the namespace's items, then
    the first) of up to :data:`CONFIRM_WORDS` of its turns, user turns first (a server may index only
    what the user said), each word in the item, so a server that holds the item finds it by any or all of
    them; None for an item without a word (an empty session), which nothing can search for."""
    from ..sent.queries import stop_words

    stop = stop_words()
    per_item = [[[w for w in _WORD.findall(content.lower()) if w not in stop] for _, content in _turns(x)]
                for x in items]
    held = Counter(w for turns in per_item for w in {w for words in turns for w in words})
    out = []
    for item, turns in zip(items, per_item):
        roles = [role for role, _ in _turns(item)]
        best = [(held[min(words, key=lambda w: held[w])], roles[i] != "user", i, min(words, key=lambda w: held[w]))
                for i, words in enumerate(turns) if words]
        chosen = sorted(sorted(best, key=lambda b: (b[1], b[0], b[2]))[:CONFIRM_WORDS], key=lambda b: b[2])
        words = list(dict.fromkeys(b[3] for b in chosen))
        out.append(" ".join(words) if words else None)
    return out


def came_back(item, ids: list[str], keyed: bool, assigned: dict | None) -> bool:
    """True when a search's result ids name ``item``: its key (or the id the service assigned it) when
    results name keys, else its session id, or, for a turn variant, one of its turns' ids."""
    if keyed:
        named = {assigned.get(i) for i in ids} if assigned is not None else set(ids)
        return item.key in named
    session = getattr(item, "session", item)
    turn_ids = {t.get("id") for t in session.get("turns") or [] if t.get("id") is not None}
    return session["id"] in ids or bool(turn_ids & set(ids))


def label(spec: dict, operation: str) -> str:
    """Where config sets an operation's options: ``endpoints.ingest`` over HTTP, ``tools.ingest`` over MCP."""
    return f"{'endpoints' if spec['transport'] == 'http' else 'tools'}.{operation}"
