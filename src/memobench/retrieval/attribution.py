"""Text a memory service returns, attributed to the haystack's turns
(docs/protocol.md#text-attribution): each returned item's text is mapped to
the turns it came from, and through them to their sessions, without reading
the gold.

The stages, in order; the first that finds the text decides:

1. ``exact``: the text, as returned, is a turn's whole text or a contiguous
   part of one turn's text (verbatim).
2. ``normalized``: the same after :func:`normalized` (Unicode NFKC, casefold,
   every run of characters that are neither letters nor digits made one
   space, the ends stripped), or a contiguous part of several consecutive
   turns of one session (each of them is attributed).
3. ``overlap`` (opt-in, ``attribution.overlap``): the turn whose distinct
   tokens hold the largest share of the text's distinct tokens (ties: the
   higher Dice coefficient, then all that still tie), where that share is at
   least the threshold; the share is kept as the item's score.

A part (a text that is not a whole turn) must hold at least
``attribution.min_tokens`` tokens; a shorter one is matched only as a whole
turn. A text found in several places is attributed to each (``ambiguous``);
one found nowhere is ``unattributed``: counted, never a hit.

The exact and normalised stages search one string per haystack: the turns'
texts joined with separators (a session's turns by a space after
normalisation, sessions by a character no normalised text holds), whose
offsets map back to turns by bisection.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass

from ..core.errors import ConfigError

EXACT, NORMALIZED, OVERLAP, UNATTRIBUTED = "exact", "normalized", "overlap", "unattributed"
KINDS = (EXACT, NORMALIZED, OVERLAP, UNATTRIBUTED)
# attribution's settings and their defaults (overlap None: the lexical stage is off)
DEFAULTS = {"overlap": None, "min_tokens": 3}
LISTED = 100  # the wrong ids listed (question, rank, id), the first in question order; all are counted
_NOT_WORD = re.compile(r"[\W_]+")
_SESSION_BREAK = "\x00"  # between sessions in the joined strings: no text holds it once cleaned, none normalised
_TURN_BREAK = "\x01"  # between turns in the verbatim string: an exact part never spans two turns


def normalized(text: str) -> str:
    """``text`` as the normalised stage compares it (module docstring)."""
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def text_hash(text: str) -> str:
    """The first 16 hex digits of the sha256 of ``text``'s UTF-8 bytes: an item's text, kept without its words."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def settings_of(raw, where: str) -> dict:
    """``attribution`` checked, with its defaults (a ConfigError line naming what is wrong)."""
    if raw is None:
        return dict(DEFAULTS)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: attribution must be a mapping (overlap, min_tokens), not {raw!r}")
    unknown = set(raw) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"{where}: attribution: unknown key(s) {', '.join(sorted(map(str, unknown)))} (known: "
                          f"{', '.join(DEFAULTS)})")
    out = {**DEFAULTS, **raw}
    t = out["overlap"]
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1):
        raise ConfigError(f"{where}: attribution: overlap must be a share of the text's tokens above 0 and at most "
                          f"1 (e.g. 0.6), or null for no lexical stage; got {t!r}")
    if t is not None:
        out["overlap"] = float(t)
    n = out["min_tokens"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"{where}: attribution: min_tokens must be a whole number, at least 1 (got {n!r})")
    return out


def mode(settings: dict) -> str:
    """The attribution mode a figure states: ``exact+normalized`` or ``exact+normalized+overlap>=T``."""
    t = settings.get("overlap")
    return "exact+normalized" if t is None else f"exact+normalized+overlap>={t:g}"


@dataclass(frozen=True)
class Attribution:
    """Where one returned text came from: the turns (indices into the :class:`TurnIndex`'s turns, in
    turn order; empty when unattributed), how it matched, the overlap share (the overlap stage's only)."""

    turns: tuple
    kind: str
    score: float | None = None

    @property
    def ambiguous(self) -> bool:
        """Found in more than one place (a span's turns are one place)."""
        return self.kind != UNATTRIBUTED and self.places > 1

    places: int = 1


class TurnIndex:
    """One haystack's turns, searchable: ``texts[j]`` is turn j's text, ``groups[j]`` its session copy (a
    haystack position); a span never crosses from one group to another."""

    def __init__(self, texts, groups, settings: dict | None = None):
        self.settings = settings or dict(DEFAULTS)
        self.texts, self.groups = list(texts), list(groups)
        self.whole: dict[str, list[int]] = {}
        self.whole_normalized: dict[str, list[int]] = {}
        raw_parts, norm_parts, raw_starts, norm_starts, norm_turns = [], [], [], [], []
        raw_at = norm_at = 0
        previous = object()
        self.tokens: list[frozenset] = []
        for j, (text, group) in enumerate(zip(self.texts, self.groups)):
            text = text or ""
            self.whole.setdefault(text, []).append(j)
            n = normalized(text)
            self.tokens.append(frozenset(n.split()))
            if n:
                self.whole_normalized.setdefault(n, []).append(j)
            clean = text.replace(_SESSION_BREAK, "").replace(_TURN_BREAK, "")
            if j:
                raw_parts.append(_TURN_BREAK)
                raw_at += 1
            raw_starts.append(raw_at)
            raw_parts.append(clean)
            raw_at += len(clean)
            if not n:
                continue  # a turn of punctuation alone: nothing of it can be found, nor found across it
            if norm_parts:
                sep = " " if group == previous else _SESSION_BREAK
                norm_parts.append(sep)
                norm_at += 1
            previous = group
            norm_starts.append(norm_at)
            norm_turns.append(j)
            norm_parts.append(n)
            norm_at += len(n)
        self.raw, self.raw_starts = "".join(raw_parts), raw_starts
        self.norm, self.norm_starts, self.norm_turns = "".join(norm_parts), norm_starts, norm_turns
        self._postings: dict[str, list[int]] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def attribute(self, text: str) -> Attribution:
        """Where ``text`` came from (module docstring)."""
        if not isinstance(text, str) or not text.strip():
            return Attribution((), UNATTRIBUTED, places=0)
        n = normalized(text)
        tokens = n.split()
        part_ok = len(tokens) >= self.settings["min_tokens"]
        if text in self.whole:
            return _found([(j,) for j in self.whole[text]], EXACT)
        if part_ok and _SESSION_BREAK not in text and _TURN_BREAK not in text:
            places = [(self._turn_at(self.raw_starts, range(len(self.texts)), s),)
                      for s in _occurrences(self.raw, text)]
            if places:
                return _found(places, EXACT)
        if not n:
            return Attribution((), UNATTRIBUTED, places=0)
        if n in self.whole_normalized:
            return _found([(j,) for j in self.whole_normalized[n]], NORMALIZED)
        if part_ok:
            places = [self._span(s, s + len(n)) for s in _occurrences(self.norm, n)]
            if places:
                return _found(places, NORMALIZED)
        if self.settings["overlap"] is not None and part_ok:
            return self._overlap(frozenset(tokens))
        return Attribution((), UNATTRIBUTED, places=0)

    def _turn_at(self, starts: list[int], turns, offset: int) -> int:
        return turns[bisect_right(starts, offset) - 1]

    def _span(self, start: int, end: int) -> tuple:
        """The turns the normalised string's [start, end) lies in, in turn order."""
        first = bisect_right(self.norm_starts, start) - 1
        last = bisect_right(self.norm_starts, end - 1) - 1
        return tuple(self.norm_turns[first:last + 1])

    def _overlap(self, item: frozenset) -> Attribution:
        if self._postings is None:
            self._postings = {}
            for j, toks in enumerate(self.tokens):
                for t in toks:
                    self._postings.setdefault(t, []).append(j)
        shared: Counter = Counter()
        for t in item:
            shared.update(self._postings.get(t, ()))
        if not shared:
            return Attribution((), UNATTRIBUTED, places=0)
        # the share of the item's tokens a turn holds, then Dice, the exact fractions compared
        best = max(shared.items(), key=lambda kv: (kv[1], _dice_key(kv[1], len(item), len(self.tokens[kv[0]]))))
        top = (best[1], _dice_key(best[1], len(item), len(self.tokens[best[0]])))
        share = best[1] / len(item)
        if share < self.settings["overlap"]:
            return Attribution((), UNATTRIBUTED, places=0)
        tied = sorted(j for j, c in shared.items() if (c, _dice_key(c, len(item), len(self.tokens[j]))) == top)
        return Attribution(tuple(tied), OVERLAP, round(share, 6), places=len(tied))


def _dice_key(shared: int, a: int, b: int) -> float:
    return 2 * shared / (a + b)


def _occurrences(haystack: str, needle: str):
    """Every start offset of ``needle`` in ``haystack`` (overlapping ones too)."""
    at = haystack.find(needle)
    while at != -1:
        yield at
        at = haystack.find(needle, at + 1)


def _found(places: list[tuple], kind: str) -> Attribution:
    turns = tuple(sorted({j for p in places for j in p}))
    return Attribution(turns, kind, places=len(set(places)))


class Tally:
    """What a job's attributions came to: items by kind, ambiguous ones, spans; the ids returned beside a
    text that the text does not match (a wrong id)."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.kinds: Counter = Counter({k: 0 for k in KINDS})
        self.ambiguous = self.spans = 0
        self.checked = 0
        self.mismatched: list[dict] = []

    def add(self, a: Attribution) -> None:
        self.kinds[a.kind] += 1
        self.ambiguous += a.ambiguous
        self.spans += a.kind in (NORMALIZED, EXACT) and a.places == 1 and len(a.turns) > 1

    def mismatch(self, question: str, rank: int, returned_id: str) -> None:
        self.mismatched.append({"question": question, "rank": rank, "id": returned_id})

    def take(self, question: str, found: list, records: list[dict]) -> None:
        """One question's items (:func:`attributed`): each counted, each id beside a text checked."""
        for a in found:
            self.add(a)
        for r, rec in enumerate(records, 1):
            if rec["id"] is not None:
                self.checked += 1
                if not rec["id_matches"]:
                    self.mismatch(question, r, rec["id"])

    def summary(self) -> dict:
        """The segment's record (merged by :func:`merged`)."""
        return {"mode": mode(self.settings), "items": sum(self.kinds.values()), "kinds": dict(self.kinds),
                "ambiguous": self.ambiguous, "spans": self.spans,
                "ids_checked": self.checked, "ids_mismatched": len(self.mismatched),
                "mismatches": self.mismatched[:LISTED]}


def merged(parts: list[dict]) -> dict:
    """The segments' attribution records as one: counts summed, the first mismatches listed, the attributed
    share."""
    items = sum(p["items"] for p in parts)
    kinds = {k: sum(p["kinds"].get(k, 0) for p in parts) for k in KINDS}
    attributed = items - kinds[UNATTRIBUTED]
    return {"mode": parts[0]["mode"], "items": items, "attributed": attributed,
            "attributed_share": round(attributed / items, 6) if items else None, "kinds": kinds,
            "ambiguous": sum(p["ambiguous"] for p in parts), "spans": sum(p["spans"] for p in parts),
            "ids_checked": sum(p["ids_checked"] for p in parts),
            "ids_mismatched": sum(p["ids_mismatched"] for p in parts),
            "mismatches": [m for p in parts for m in p["mismatches"]][:LISTED]}


def stated(a: dict) -> str:
    """One sentence stating a text variant's attribution, shown beside its figures."""
    k = a["kinds"]
    share = "no items" if a["attributed_share"] is None else f"{a['attributed_share']:.1%}"
    said = (f"its lists come from returned text attributed to turns ({a['mode']}): {a['attributed']} of "
            f"{a['items']} items attributed ({share}; {k[EXACT]} exact, {k[NORMALIZED]} after normalisation, "
            f"{k[OVERLAP]} by overlap), {k[UNATTRIBUTED]} unattributed (never a hit)")
    if a["ambiguous"]:
        said += f", {a['ambiguous']} found in more than one place (attributed to each)"
    return said


def attributed(index: TurnIndex, texts: list[str], units: list, turn_ids: list, ids: list | None = None,
               named=None) -> tuple[list[Attribution], list[dict]]:
    """(each text's :class:`Attribution`, each item's record: its text's hash, kind, the ids of the turns it is
    attributed to (``turn_ids[j]``: turn j's), the overlap share; with ``ids``, the id beside it and whether
    the text is in that id's content: one of its turns' units (``units[j]``) is among ``named(id)``)."""
    found, records = [], []
    for r, text in enumerate(texts):
        a = index.attribute(text)
        found.append(a)
        rec = {"text_sha256": text_hash(text if isinstance(text, str) else ""), "kind": a.kind,
               "turn_ids": [turn_ids[j] for j in a.turns], "score": a.score, "id": None, "id_matches": None}
        if ids is not None:
            rec["id"], rec["id_matches"] = str(ids[r]), bool({units[j] for j in a.turns} & named(ids[r]))
        records.append(rec)
    return found, records


def ranked(attributions: list[Attribution], units: list, scores: list | None = None):
    """(the units best first, their scores or None) a list of attributions gives: each unit (``units[j]``:
    turn j's unit, its own index or its session's position) at the first item that names it."""
    seen: set = set()
    out, kept = [], []
    for r, a in enumerate(attributions):
        for j in a.turns:
            u = units[j]
            if u not in seen:
                seen.add(u)
                out.append(u)
                if scores is not None:
                    kept.append(scores[r])
    return out, (kept if scores is not None else None)
