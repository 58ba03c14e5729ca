"""Sessions in a server's own shape (config ``system.render``,
docs/memory-services.md#servers-with-their-own-shapes): what a system
variant's ingest placeholders ``{session.key}``, ``{session.text}``,
``{session.lines}`` and ``{session.messages}`` hold, a long session split
into parts, and a search's results mapped back to haystack positions.

One haystack becomes a list of :class:`Item` s, one per ingested item, in
haystack order. A session's *key* is its id for the haystack's first copy
of that id and ``{id}~{n}`` for the n-th (n >= 2): a server that keeps one
entry per key (a note's title, an entity's name) keeps every copy. A
session whose text (its header line, then one line per turn) is longer than
``max_chars`` is sent in parts, split between lines (a line longer than a
part can hold is cut), each part with the header again and its own key
``{key}~p{i}`` (i from 1); an unsplit session's item key is its key. A
search's results that name keys (or ids the server assigned at ingestion,
mapped to keys) are read as those items' sessions, a session ranked through
several parts at its best part (its later parts dropped).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import ConfigError
from .returned import RetrieverError

# render's defaults: a turn as one line, no header, a turn as {role, content}, no split
DEFAULT_RENDER = {"line": "{turn.role}: {turn.content}", "header": None,
                  "turn": {"role": "{turn.role}", "content": "{turn.content}"}, "max_chars": None}
# the placeholders of render's templates
TURN_PLACEHOLDERS = ("turn.role", "turn.content", "turn.id", "turn.index", "session.id", "session.date", "session.key")
HEADER_PLACEHOLDERS = ("session.id", "session.date", "session.key")
# the placeholders that make the ingest send rendered sessions (so keys, parts and text exist)
RENDERED = frozenset({"session.key", "session.text", "session.lines", "session.messages"})


def render_spec(raw, where: str) -> dict:
    """``system.render`` checked, with its defaults (a ConfigError line for a wrong key or template)."""
    from ..services.api import stray_brace

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: render must be a mapping (line, header, turn, max_chars), not {raw!r}")
    unknown = set(raw) - set(DEFAULT_RENDER)
    if unknown:
        raise ConfigError(f"{where}: render: unknown key(s) {', '.join(sorted(unknown))} (known: "
                          f"{', '.join(DEFAULT_RENDER)})")
    out = {**DEFAULT_RENDER, **raw}
    for key, known in (("line", TURN_PLACEHOLDERS), ("header", HEADER_PLACEHOLDERS), ("turn", TURN_PLACEHOLDERS)):
        value = out[key]
        if key != "turn" and value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}: render: {key} must be a template string, not {value!r}")
        brace = stray_brace(value, known)
        if brace is not None:
            raise ConfigError(f"{where}: render: {key}: {brace!r} is not a placeholder (known: "
                              f"{', '.join(sorted(known))})")
    n = out["max_chars"]
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 16):
        raise ConfigError(f"{where}: render: max_chars must be a whole number of characters, at least 16 "
                          f"(got {n!r})")
    return out


def names_turn_id(spec: dict) -> bool:
    """True when the render templates name ``{turn.id}`` (the sessions then carry their turns' ids)."""
    from ..services.api import placeholders

    r = spec.get("render") or {}
    return "turn.id" in placeholders(r.get("line")) | placeholders(r.get("turn"))


@dataclass(frozen=True)
class Item:
    """One ingested item: a session copy, or one part of it."""

    key: str  # its own key (a part's: {key}~p{i})
    session_key: str  # its session copy's key
    position: int  # the session's haystack position
    session: dict  # {id, date, turns}: its turns only, for a part
    lines: tuple  # its lines (turns rendered by render.line, cut where one was too long)
    messages: tuple  # its turns rendered by render.turn
    text: str  # its header line (if any) and its lines, one per line


def session_keys(ids: list[str], where: str) -> list[str]:
    """Each session's key, in haystack order: its id at its first copy, ``{id}~{n}`` at its n-th."""
    seen: dict[str, int] = {}
    keys = []
    for sid in ids:
        seen[sid] = seen.get(sid, 0) + 1
        keys.append(sid if seen[sid] == 1 else f"{sid}~{seen[sid]}")
    clash = set(keys[i] for i in range(len(keys)) if keys[i] != ids[i]) & set(ids)
    if clash:
        raise RetrieverError(f"{where}: the key {sorted(clash)[0]!r} of a repeated session is also a session id of "
                             f"the haystack; the copies cannot be told apart")
    return keys


def items(sessions: list[dict], render: dict | None, where: str) -> list[Item]:
    """A haystack's sessions (``{id, date, turns}``, haystack order) as the items sent (module docstring)."""
    from ..services.api import fill

    r = render or DEFAULT_RENDER
    out = []
    for position, (s, key) in enumerate(zip(sessions, session_keys([s["id"] for s in sessions], where))):
        values = {"session.id": s["id"], "session.date": s["date"], "session.key": key}
        header = None if r["header"] is None else str(fill(r["header"], values))
        rendered = []
        for index, t in enumerate(s["turns"]):
            tv = {**values, "turn.role": t.get("role"), "turn.content": t.get("content"), "turn.id": t.get("id"),
                  "turn.index": index}
            rendered.append((t, str(fill(r["line"], tv)), fill(r["turn"], tv)))
        parts = _parts(rendered, header, r["max_chars"], f"{where}: session {key!r}")
        for i, part in enumerate(parts, 1):
            turns = list(dict.fromkeys(id(t) for t, _, _ in part))  # a cut turn's pieces: the turn once
            by_id = {id(t): (t, m) for t, _, m in part}
            lines = tuple(line for _, line, _ in part)
            out.append(Item(key if len(parts) == 1 else f"{key}~p{i}", key, position,
                            {"id": s["id"], "date": s["date"], "turns": [by_id[x][0] for x in turns]}
                            if len(parts) > 1 else s,
                            lines, tuple(by_id[x][1] for x in turns),
                            "\n".join(([header] if header is not None else []) + list(lines))))
    return out


def _parts(rendered: list[tuple], header: str | None, max_chars: int | None, where: str) -> list[list[tuple]]:
    """The rendered turns (turn, line, message) grouped into parts whose text is at most ``max_chars``
    (the header line in each); one part without a limit. A line longer than a part holds is cut."""
    if max_chars is None:
        return [rendered]
    room = max_chars - (len(header) + 1 if header is not None else 0)
    if room < 1:
        raise RetrieverError(f"{where}: its header line is {len(header)} characters, and render.max_chars "
                             f"({max_chars}) leaves no room for a turn")
    pieces = [(t, line[i:i + room], m) for t, line, m in rendered for i in range(0, max(len(line), 1), room)]
    parts: list[list[tuple]] = [[]]
    size = 0
    for piece in pieces:
        extra = len(piece[1]) + (1 if parts[-1] else 0)
        if parts[-1] and size + extra > room:
            parts.append([])
            extra, size = len(piece[1]), 0
        parts[-1].append(piece)
        size += extra
    return parts


def item_values(namespace: str, item: Item) -> dict:
    """One item's placeholders' values (services/api.py)."""
    s = item.session
    return {"namespace": namespace, "session": s, "session.id": s["id"], "session.date": s["date"],
            "session.turns": s["turns"], "session.key": item.key, "session.text": item.text,
            "session.lines": list(item.lines), "session.messages": list(item.messages)}


def positions(ids: list[str], scores: list | None, sent: list[Item], assigned: dict | None,
              where: str) -> tuple[list[int], list | None]:
    """(haystack positions best first, their scores) of a search's result ids that name the items' keys
    (``assigned``: the ids the server gave at ingestion -> item keys, when it assigns them); a session
    ranked through several parts is at its best part. A one-line RetrieverError for an id never sent or
    given, or an item given twice."""
    by_key = {i.key: i for i in sent}
    out, kept, taken, seen = [], [], set(), set()
    for r, rid in enumerate(ids):
        key = rid
        if assigned is not None:
            key = assigned.get(rid)
            if key is None:
                raise RetrieverError(f"{where} returned id {rid!r}, which the service did not assign to any "
                                     f"session of this haystack at ingestion")
        item = by_key.get(key)
        if item is None:
            raise RetrieverError(f"{where} returned session id {rid!r}, which is not in its haystack (nor a key "
                                 f"sent to it)")
        if key in seen:
            raise RetrieverError(f"{where} returned {rid!r} twice; it was sent once")
        seen.add(key)
        if item.position in taken:
            continue  # a later part of a session already ranked
        taken.add(item.position)
        out.append(item.position)
        if scores is not None:
            kept.append(scores[r])
    return out, (kept if scores is not None else None)
