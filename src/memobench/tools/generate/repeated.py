"""Session ids repeated inside one haystack (:data:`REPEAT_ID_KINDS`) and
``haystack_session_ids`` lists that do not match the sessions
(:data:`UNEVEN_ID_KINDS`), as real LongMemEval files hold them."""

from __future__ import annotations

import json

from .vocabulary import _HEX, _randstr

#: The ways :func:`repeat_session_ids` repeats a session id inside a haystack
#: (real LongMemEval files hold some ids twice or more in one haystack).
REPEAT_ID_KINDS = (
    "neighbour_same",      # the next or previous slot: same id, same turns
    "neighbour_other",     # the next or previous slot: same id, other turns
    "distant_same",        # a slot far away: same id, same turns
    "distant_other",       # a slot far away: same id, other turns
    "three_times",         # the id in two more slots (same turns, then other turns)
    "gold_same",           # an answer session's id and turns in a filler slot too
    "gold_other",          # an answer session's id on a filler slot, other turns holding
                           # one of the answer's turns
)


def repeat_session_ids(item, answer_positions, rng, fresh, any_length=False):
    """Repeat session ids inside one haystack (``item`` is changed in place).

    One or two of :data:`REPEAT_ID_KINDS`: a slot's id (and, for ``*_same``,
    its turns) is copied over another slot, which keeps its own date; an
    answer slot is never overwritten, so the gold stays in the haystack.
    ``fresh(rng, n_turns)`` makes the other turns, as many as the copied
    slot has unless ``any_length`` (exp6.cjs reads a repeated
    id's event indices from every session with that id, and stops with a
    TypeError when one session holds the phrase's first token at an index the
    other has not: only ``any_length`` files can reach that).
    Returns the kinds applied."""
    ids, sessions = item["haystack_session_ids"], item["haystack_sessions"]
    n = min(len(ids), len(sessions))
    answers = [p for p in answer_positions if p < n and ids[p] is not None]
    fillers = [p for p in range(n) if p not in set(answer_positions)]
    if n < 2 or not fillers:
        return []
    applied = []

    def copy(src, dst, same, mix=False):
        ids[dst] = ids[src]
        if same:
            sessions[dst] = json.loads(json.dumps(sessions[src]))
            return
        turns = fresh(rng, rng.randint(1, 6) if any_length else len(sessions[src] or []))
        words = [t for t in sessions[src] or [] if isinstance(t, dict) and isinstance(t.get("content"), str)]
        if mix and turns and words:
            # other turns that still hold some of the answer's words
            k = rng.randrange(len(turns))
            turns[k]["content"] += " " + rng.choice(words)["content"]
        sessions[dst] = turns

    kinds = rng.sample(REPEAT_ID_KINDS, 1 + (rng.random() < 0.3))
    for kind in kinds:
        if kind.startswith("gold"):
            if not answers:
                continue
            src = rng.choice(answers)
            targets = [p for p in fillers if p != src]
        else:
            sources = [p for p in fillers if ids[p] is not None]
            if not sources:
                continue
            src = rng.choice(sources)
            targets = [p for p in fillers if p != src]
            if kind.startswith("neighbour"):
                targets = [p for p in targets if abs(p - src) == 1]
            elif kind.startswith("distant"):
                targets = [p for p in targets if abs(p - src) >= max(2, n // 3)]
        if not targets:
            continue
        if kind == "three_times":
            if len(targets) < 2:
                continue
            a, b = rng.sample(targets, 2)
            copy(src, a, True)
            copy(src, b, False)
        else:
            copy(src, rng.choice(targets), kind.endswith("same"), mix=kind == "gold_other")
        applied.append(kind)
    return applied


#: The ways :func:`uneven_session_ids` makes ``haystack_session_ids`` and the
#: sessions disagree (the harnesses take the gold from the raw ids list, the
#: session ids from the sessions: docs/harnesses.md#sessions-and-events).
UNEVEN_ID_KINDS = (
    "short_extra",     # ids shorter; a lost slot's "s<i>" fallback id added to the answers
    "short_only",      # ids shorter, past an answer slot; the answers are only its "s<i>"
    "long_extra",      # ids longer (ids with no session); one of them added to the answers
    "long_only",       # ids longer; the answers are only an id with no session
    "null_only",       # a filler id null; the answers are only null
    "long_fallback",   # a filler id null, its "s<i>" appended to the ids and the answers
)


def uneven_session_ids(item, answer_positions, rng):
    """Give one haystack a ``haystack_session_ids`` list that does not match its
    sessions (``item`` is changed in place): one of :data:`UNEVEN_ID_KINDS`.
    Returns the kind applied, or None when the haystack has no room for it."""
    ids, sessions, answers = item["haystack_session_ids"], item["haystack_sessions"], item["answer_session_ids"]
    n = min(len(ids), len(sessions))
    fillers = [p for p in range(n) if p not in set(answer_positions) and ids[p] is not None]
    kind = rng.choice(UNEVEN_ID_KINDS)
    if kind.startswith("short"):
        last = max((p for p in answer_positions if p < n), default=None)
        if kind == "short_only" and last is not None:
            cut = rng.randint(max(0, last - 2), last)
            answers[:] = [f"s{last}"]
        elif kind == "short_extra" and n >= 2:
            cut = n - rng.randint(1, min(3, n - 1))
            answers.append(f"s{rng.randrange(cut, n)}")
        else:
            return None
        del ids[cut:]
    elif kind.startswith("long_") and kind != "long_fallback":
        extra = [f"extra_{_randstr(rng, _HEX, 6)}_{k}" for k in range(rng.randint(1, 3))]
        del ids[len(sessions):]
        ids.extend([None] * (len(sessions) - len(ids)) + extra)
        if kind == "long_extra":
            answers.append(rng.choice(extra))
        else:
            answers[:] = [extra[-1]]
    else:
        if not fillers:
            return None
        p = rng.choice(fillers)
        ids[p] = None
        if kind == "null_only":
            answers[:] = [None]
        else:
            ids.append(f"s{p}")
            answers[:] = [f"s{p}"]
    return kind
