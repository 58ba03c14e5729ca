"""Sessions in a server's own shape (config ``system.render``,
docs/memory-services.md#servers-with-their-own-shapes): what a system
variant's ingest placeholders ``{session.key}``, ``{session.text}``,
``{session.lines}`` and ``{session.messages}`` hold, a long session split
into parts, and a search's results mapped back to haystack positions.

One haystack becomes a list of :class:`Item` s, one per ingested item, in
haystack order. A session's *key* is its id for the haystack's first copy
of that id and ``render.copy_key`` (``{session.id}~{copy}``) for the n-th
(n >= 2): a server that keeps one entry per key (a note's title, an
entity's name) keeps every copy. A session whose text (its header line,
then one line per turn) is longer than ``max_chars`` is sent in parts,
split between lines (a turn whose line is longer than a part can hold is
cut into pieces of its content, each a turn of its own), each part with the
header again and its own key, ``render.part_key`` (``{session.key}~p{part}``,
part from 1); an unsplit session's item key is its key. Both forms are
config, for a server whose keys allow fewer characters (``.`` in place of
``~``). A search's results that name keys (or ids the server assigned at
ingestion, mapped to keys) are read by lookup of the keys sent, as those
items' sessions, a session ranked through several parts at its best part
(its later parts dropped); keys that two items share, or a key that is
another session's id, are one line before anything is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import ConfigError
from ...retrieval.returned import RetrieverError

# render's defaults: a turn as one line, no header, a turn as {role, content}, no split
DEFAULT_RENDER = {"line": "{turn.role}: {turn.content}", "header": None,
                  "turn": {"role": "{turn.role}", "content": "{turn.content}"}, "max_chars": None}
# the placeholders of render's templates
TURN_PLACEHOLDERS = ("turn.role", "turn.content", "turn.id", "turn.index", "session.id", "session.date", "session.key")
HEADER_PLACEHOLDERS = ("session.id", "session.date", "session.key")
# the placeholders that make the ingest send rendered sessions (so keys, parts and text exist)
RENDERED = frozenset({"session.key", "session.text", "session.lines", "session.messages"})
# the forms of a repeated id's copy key and of a part's key, and the placeholders each must name: kept out of a
# render spec at their defaults (DEFAULT_RENDER), so that a render written before them keeps its definition
KEY_FORMS = {"copy_key": ("{session.id}~{copy}", ("session.id", "copy")),
             "part_key": ("{session.key}~p{part}", ("session.key", "part"))}


def render_spec(raw, where: str) -> dict:
    """``system.render`` checked, with its defaults (a ConfigError line for a wrong key or template)."""
    from ..operations.api import stray_brace

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: render must be a mapping (line, header, turn, max_chars), not {raw!r}")
    unknown = set(raw) - set(DEFAULT_RENDER) - set(KEY_FORMS)
    if unknown:
        raise ConfigError(f"{where}: render: unknown key(s) {', '.join(sorted(unknown))} (known: "
                          f"{', '.join([*DEFAULT_RENDER, *KEY_FORMS])})")
    out = {**DEFAULT_RENDER, **raw}
    for key, (default, named) in KEY_FORMS.items():
        value = out.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ConfigError(f"{where}: render: {key} must be a template string, not {value!r}")
        brace = stray_brace(value, named)
        missing = [n for n in named if "{" + n + "}" not in value]
        if brace is not None or missing:
            raise ConfigError(f"{where}: render: {key} {value!r} must name " + " and ".join(
                "{" + n + "}" for n in named) + f" and no other placeholder (default {default!r}), so that each "
                f"key is its own")
        if value == default:
            del out[key]
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
    from ..operations.api import placeholders

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


def session_keys(ids: list[str], where: str, form: str = KEY_FORMS["copy_key"][0]) -> list[str]:
    """Each session's key, in haystack order: its id at its first copy, ``form`` (render.copy_key) at its
    n-th."""
    from ..operations.api import fill

    seen: dict[str, int] = {}
    keys = []
    for sid in ids:
        seen[sid] = seen.get(sid, 0) + 1
        keys.append(sid if seen[sid] == 1 else str(fill(form, {"session.id": sid, "copy": seen[sid]})))
    clash = set(keys[i] for i in range(len(keys)) if keys[i] != ids[i]) & set(ids)
    if clash:
        raise RetrieverError(f"{where}: the key {sorted(clash)[0]!r} of a repeated session is also a session id of "
                             f"the haystack (render.copy_key {form!r}); the copies cannot be told apart")
    return keys


def items(sessions: list[dict], render: dict | None, where: str) -> list[Item]:
    """A haystack's sessions (``{id, date, turns}``, haystack order) as the items sent (module docstring)."""
    from ..operations.api import fill

    r = render or DEFAULT_RENDER
    part_key = r.get("part_key", KEY_FORMS["part_key"][0])
    out = []
    keys = session_keys([s["id"] for s in sessions], where, r.get("copy_key", KEY_FORMS["copy_key"][0]))
    for position, (s, key) in enumerate(zip(sessions, keys)):
        values = {"session.id": s["id"], "session.date": s["date"], "session.key": key}
        header = None if r["header"] is None else str(fill(r["header"], values))
        room = None if r["max_chars"] is None else r["max_chars"] - (len(header) + 1 if header is not None else 0)
        if room is not None and room < 1:
            raise RetrieverError(f"{where}: session {key!r}: its header line is {len(header)} characters, and "
                                 f"render.max_chars ({r['max_chars']}) leaves no room for a turn")

        def rendered(t: dict, index: int) -> tuple:
            tv = {**values, "turn.role": t.get("role"), "turn.content": t.get("content"), "turn.id": t.get("id"),
                  "turn.index": index}
            return t, str(fill(r["line"], tv)), fill(r["turn"], tv)

        turns = [x for index, t in enumerate(s["turns"]) for x in _pieces(rendered(t, index), rendered, index, room)]
        parts = _parts(turns, room)
        for i, part in enumerate(parts, 1):
            lines = tuple(line for _, line, _ in part)
            out.append(Item(key if len(parts) == 1 else str(fill(part_key, {"session.key": key, "part": i})), key,
                            position,
                            s if len(parts) == 1 and len(turns) == len(s["turns"]) else
                            {"id": s["id"], "date": s["date"], "turns": [t for t, _, _ in part]},
                            lines, tuple(m for _, _, m in part),
                            "\n".join(([header] if header is not None else []) + list(lines))))
    # a part's key may be another session's id ("a~p1"), or another part's key (a form without {part}'s
    # digits apart): the results naming it could not be told apart
    seen: dict[str, Item] = {}
    holders: dict[str, set] = {}  # a session id -> the positions of its copies
    for position, s in enumerate(sessions):
        holders.setdefault(s["id"], set()).add(position)
    for item in out:
        other = seen.get(item.key)
        if other is None and item.position not in holders.get(item.key, {item.position}):
            other = next(i for i in out if i.position in holders[item.key])
        if other is not None:
            first, second = sorted((other, item), key=lambda i: i.position)
            raise RetrieverError(f"{where}: sessions {first.session_key!r} and {second.session_key!r} are both sent "
                                 f"with the key {item.key!r} (a part's key, render.part_key {part_key!r}, is also "
                                 f"another session's id or key); the results naming it cannot be told apart")
        seen[item.key] = item
    return out


def _pieces(turn: tuple, rendered, index: int, room: int | None) -> list[tuple]:
    """A rendered turn (turn, line, message) whose line is longer than ``room``, cut into turns of pieces of
    its content, each rendered again (each line then fits); one that fits, as it is. A line template without
    ``{turn.content}`` is cut as text (its message whole in each piece)."""
    t, line, message = turn
    if room is None or len(line) <= room:
        return [turn]
    content = str(t.get("content") or "")
    overhead = len(rendered({**t, "content": ""}, index)[1])
    times = (len(line) - overhead) // len(content) if content else 0
    size = (room - overhead) // times if times else 0
    if size < 1:
        return [(t, line[i:i + room], message) for i in range(0, len(line), room)]
    return [rendered({**t, "content": content[i:i + size]}, index) for i in range(0, len(content), size)]


def _parts(turns: list[tuple], room: int | None) -> list[list[tuple]]:
    """The rendered turns grouped into parts whose lines, one a line, hold at most ``room`` characters
    (one part without a limit)."""
    if room is None:
        return [turns]
    parts: list[list[tuple]] = [[]]
    size = 0
    for turn in turns:
        extra = len(turn[1]) + (1 if parts[-1] else 0)
        if parts[-1] and size + extra > room:
            parts.append([])
            extra, size = len(turn[1]), 0
        parts[-1].append(turn)
        size += extra
    return parts


def item_values(namespace: str, item: Item) -> dict:
    """One item's placeholders' values (services/operations/api.py)."""
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
