"""What a retriever returns for one question, checked against the haystack
it ranked: the :class:`Question` and :class:`Haystack` a user's retriever
gets (retrieval/python.py), and :func:`check_ranking`, which turns positions
or session ids, optionally with scores, into haystack positions, or a
one-line :class:`RetrieverError` naming what is wrong. A user's Python
retriever and a memory service (services/job/rank.py) are held to the same
checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.errors import ConfigError


class RetrieverError(ConfigError):
    """A user's retriever failed or returned something unusable (one line)."""


@dataclass(frozen=True)
class Question:
    """The question a retriever ranks a haystack for."""

    id: str
    text: str
    date: str | None  # the raw question date (LongMemEval); None where the format has none
    type: str  # LongMemEval's question_type, LoCoMo's category


@dataclass(frozen=True)
class Haystack:
    """The sessions a question searches, in haystack order: ``ids[i]``,
    ``texts[i]`` (its document, under the variant's ``documents`` rule) and
    ``dates[i]`` (the raw date string, None when absent) describe position i.
    A session id listed twice in a haystack is two positions."""

    ids: tuple
    texts: tuple
    dates: tuple
    unit = "session"  # what one entry is, for the messages of check_ranking

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Turns:
    """The turns a question searches, for a variant that ranks turns
    (``grain: turn``; docs/protocol.md#turn-level), in haystack then turn
    order: turn ``j`` has the id ``ids[j]`` (``{session_id}_{index + 1}``, or
    LoCoMo's dia_id), the text ``texts[j]``, its session's id ``sessions[j]``
    and haystack position ``positions[j]``, its place among all its session's
    turns ``indices[j]`` (from 0), its ``roles[j]`` and its session's raw date
    ``dates[j]``. A session listed twice in a haystack gives its turns twice."""

    ids: tuple
    texts: tuple
    sessions: tuple
    positions: tuple
    indices: tuple
    roles: tuple
    dates: tuple
    unit = "turn"

    def __len__(self) -> int:
        return len(self.ids)


def turns_of(hay, turns) -> Turns:
    """The :class:`Turns` a turn variant ranks: a haystack's turn documents
    (``turns.HaystackTurns``) with their sessions' ids and dates (``hay``:
    ``harness.Entries``)."""
    return Turns(tuple(turns.ids), tuple(turns.texts), tuple(hay.ids[p] for p in turns.positions),
                 tuple(turns.positions), tuple(turns.seqs), tuple(turns.roles),
                 tuple(hay.dates[p] for p in turns.positions))


def _is_sequence(x) -> bool:
    import numpy as np

    return isinstance(x, (list, tuple, range, np.ndarray))


def _what(x) -> str:
    return "None" if x is None else f"a {type(x).__name__}"


def check_ranking(result, haystack: Haystack | Turns, where: str) -> tuple[list[int], list[float] | None]:
    """(haystack positions best first, their scores or None) from what a
    retriever returned; a one-line RetrieverError (``where`` first) when it
    is not a ranking of this haystack (of its turns, for :class:`Turns`)."""
    import numpy as np

    unit = haystack.unit

    order, scores = result, None
    if isinstance(result, tuple) and len(result) == 2 and all(_is_sequence(x) for x in result):
        order, scores = result
    elif isinstance(result, tuple) and len(result) == 2 and _is_sequence(result[0]) and not _is_sequence(result[1]):
        raise RetrieverError(f"{where} returned (ranking, {_what(result[1])}); the second item of a pair is the "
                             f"scores, a list of numbers, one per ranked {unit}: return the ranking alone when "
                             f"it has no scores")
    if not _is_sequence(order):
        raise RetrieverError(f"{where} returned {_what(result)}; return the haystack's positions or {unit} ids, "
                             f"best first, or (ranking, scores)")
    items = order.tolist() if isinstance(order, np.ndarray) else list(order)
    positions: list[int] = []
    if all(isinstance(x, str) for x in items):
        slots: dict[str, list[int]] = {}
        for i, sid in enumerate(haystack.ids):
            slots.setdefault(sid, []).append(i)
        used: dict[str, int] = {}
        for sid in items:
            pos = slots.get(sid)
            if pos is None:
                raise RetrieverError(f"{where} returned {unit} id {sid!r}, which is not in its haystack")
            k = used.get(sid, 0)
            if k == len(pos):
                times = "once" if len(pos) == 1 else f"{len(pos)} times"
                raise RetrieverError(f"{where} returned {unit} id {sid!r} {k + 1} times; the haystack lists it "
                                     f"{times}")
            used[sid] = k + 1
            positions.append(pos[k])
    else:
        n = len(haystack.ids)
        seen: set[int] = set()
        for x in items:
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                raise RetrieverError(f"{where} returned {x!r} in its ranking; give haystack positions (ints) or "
                                     f"{unit} ids (strings), not a mix")
            p = int(x)
            if not 0 <= p < n:
                raise RetrieverError(f"{where} returned position {p}, outside the haystack's 0..{n - 1}")
            if p in seen:
                raise RetrieverError(f"{where} returned position {p} twice")
            seen.add(p)
            positions.append(p)
    if scores is None:
        return positions, None
    values = scores.tolist() if isinstance(scores, np.ndarray) else list(scores)
    if len(values) != len(positions):
        raise RetrieverError(f"{where} returned {len(values)} scores for {len(positions)} ranked {unit}s")
    floats: list[float] = []
    for r, x in enumerate(values, 1):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise RetrieverError(f"{where} returned score {x!r} at rank {r}, not a number")
        try:
            value = float(x)
        except OverflowError:  # an int beyond a float's range
            raise RetrieverError(f"{where} returned score {_short(x)} at rank {r}, an integer too large for a float "
                                 f"(over 1.8e308); scores must be finite floats") from None
        if not math.isfinite(value):
            raise RetrieverError(f"{where} returned score {x} at rank {r}; scores must be finite")
        floats.append(value)
    return positions, floats


def _short(x) -> str:
    """An integer for a one-line message: a huge one by its digit count."""
    try:
        text = str(x)
    except ValueError:  # past int_max_str_digits
        return f"of about {int(abs(int(x)).bit_length() * math.log10(2)) + 1} digits"
    return text if len(text) <= 20 else f"{text[:6]}... ({len(text.lstrip('-'))} digits)"
