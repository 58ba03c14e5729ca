"""Fusion variants: one list per question fused from the deep lists of other
variants of the same dataset::

    variants:
      rrf-lex-dense:
        fuse: {of: [v0.8.0, minilm], method: rrf, k: 60}

A fusion variant's retrieve job reads the segment's deep tables (depth 50)
of the variants it fuses (its ``fused`` inputs, in ``of`` order), so it reruns
when one of them changes, and ranks nothing itself. Its questions, gold and
denominators are its dataset family's (the skip rule of the reference
retrievers, ``harness.skip_reason``): a question the family skips is skipped;
a question the family evaluates is fused from the inputs that have a list for
it, and an input without one (it skipped the question under its own rule, or
counted it as a miss with no list) contributes nothing. No input with a list
is a miss.

Each input's list is its deep list with any later copy of a session removed
(a session counts once, at its first rank), ranked 1, 2, ... in that order;
``s`` is the deep table's score (the retriever's own where it strictly
decreases, else 51 - rank). For each session in any input's list:

* ``rrf``: reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR
  2009): the sum over the inputs that rank it of ``1 / (k + rank)``
  (``k`` default 60);
* ``combsum``: CombSUM (Fox and Shaw, TREC-2) of min-max normalized scores:
  the sum over the inputs that rank it of ``(s - min) / max(max - min, 1e-9)``,
  min and max over that input's list for the question (ranx's ``min-max``
  norm, so the last session of a list, and the only one of a list of one,
  gets 0);
* ``borda``: Borda count (Aslam and Montague's BordaFuse, as ranx): with ``C``
  the sessions in the union of the lists, an input gives a session it ranks
  at ``rank`` ``C - rank + 1`` points, and each session it does not rank
  ``(C - n + 1) / 2`` (``n``: its list's length).

Sums are exact (a float score is a binary fraction: each sum is an integer
over a common denominator), so sums that are equal are ties, and rounding
never orders them. The fused list is by
score, descending; ties are broken by the session's best rank in any input
(lower first), then by the first input, in ``of`` order, that ranks it
there: a total order, since an input holds one session per rank. The fused
score written is the exact sum rounded to the nearest float. It is cut at 50 (``deep.parquet``) and 10 (``rankings``);
its deep score is the fused score where it strictly decreases, else
``51 - rank`` (``harness.run_scores``).

A fusion with ``grain: turn`` fuses turn variants' turn lists
(docs/protocol.md#turn-level): the same rules over turn ids instead of
session ids (a repeated session's turn counts once, at its first rank), each
input's whole turn list read from its segment's turn table (``s`` as a deep
list's: the retriever's own scores where strictly decreasing, else
``51 - rank``, below zero past rank 50, which min-max normalizing makes no
matter), the fused turn list kept whole, each turn at the haystack
position and index of its best-ranked occurrence; its session list is each
session at its best turn, as every turn variant's.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from pathlib import Path

from ..core.errors import DataError
from ..core.protocol import DEPTH, TOP
from ..catalog.row import Retriever, Row, register, register_retriever

METHODS = ("rrf", "combsum", "borda")
RRF_K = 60  # rrf's constant k in 1 / (k + rank), Cormack et al.'s
MIN_MAX_FLOOR = Fraction(1e-9)  # ranx's min-max norm: the denominator's floor
FLOOR_RATIO = MIN_MAX_FLOOR.as_integer_ratio()  # (n, a power of two)


def distinct(ranked) -> list[tuple[str, float]]:
    """An input's list of (session id, score) in rank order, later copies of a session removed."""
    seen: set[str] = set()
    out = []
    for sid, score in ranked:
        if sid not in seen:
            seen.add(sid)
            out.append((sid, score))
    return out


def fuse(lists, method: str = "rrf", k: int = RRF_K) -> list[tuple[str, float]]:
    """Fuse one question's lists (one per input, in ``of`` order: a list of
    (session id, score) in rank order, or None when the input has none) into
    [(session id, fused score)], best first (the module docstring's rules).
    The sums are exact (integers over one denominator: a float score is a binary fraction), so
    equal sums are ties, broken by the rule, never by rounding."""
    if method not in METHODS:
        raise ValueError(f"unknown fusion method {method!r} (known: {', '.join(METHODS)})")
    lists = [distinct(ranked) for ranked in lists if ranked]
    best: dict[str, tuple[int, int]] = {}  # session -> (best rank, first input at that rank)
    for i, ranked in enumerate(lists):
        for r, (sid, _) in enumerate(ranked, 1):
            if sid not in best or (r, i) < best[sid]:
                best[sid] = (r, i)
    n_all = len(best)
    # each score is a whole number of 1/scale: exact integers for rrf and borda, fractions for combsum
    score: dict = dict.fromkeys(best, 0)
    if method == "rrf":
        scale = math.lcm(*(k + r for r in range(1, max(map(len, lists), default=0) + 1)))
        for ranked in lists:
            for r, (sid, _) in enumerate(ranked, 1):
                score[sid] += scale // (k + r)
    elif method == "borda":
        scale = 2  # the unranked sessions' points are halves
        for ranked in lists:
            here = set()
            for r, (sid, _) in enumerate(ranked, 1):
                score[sid] += 2 * (n_all - r + 1)
                here.add(sid)
            for sid in score:
                if sid not in here:
                    score[sid] += n_all - len(ranked) + 1
    else:
        # each input's terms as integers over one denominator per input (its span, every float
        # scaled to the list's finest binary denominator), then over their product: exact
        # integer sums, far cheaper than summing and sorting Fractions
        spans, terms = [], []
        for ranked in lists:
            ratios = [s.as_integer_ratio() for _, s in ranked]
            grain = max(FLOOR_RATIO[1], *(d for _, d in ratios))
            ints = [n * (grain // d) for n, d in ratios]
            hi, lo = ints[0], ints[-1]
            spans.append(max(hi - lo, FLOOR_RATIO[0] * (grain // FLOOR_RATIO[1])))
            terms.append([(sid, x - lo) for (sid, _), x in zip(ranked, ints)])
        scale = math.prod(spans)
        for span, pairs in zip(spans, terms):
            weight = scale // span
            for sid, t in pairs:
                score[sid] += t * weight
    order = sorted(score, key=lambda sid: (-score[sid], best[sid]))
    # int / int is correctly rounded: the float nearest the exact sum
    return [(sid, score[sid] / scale) for sid in order]


def read_deep(path) -> dict[int, list[tuple[str, float]]]:
    """{q_index: [(session id, score)] in rank order} of a segment's deep table."""
    from ..core.tables import read_table

    t = read_table(path, columns=["q_index", "rank", "session_id", "score"]).sort_by(
        [("q_index", "ascending"), ("rank", "ascending")]).to_pydict()
    out: dict[int, list[tuple[str, float]]] = {}
    for qi, rank, sid, score in zip(t["q_index"], t["rank"], t["session_id"], t["score"]):
        rows = out.setdefault(qi, [])
        if rank != len(rows) + 1:
            raise DataError(path, f"q_index {qi}", f"ranks are not 1, 2, ... (rank {rank} after {len(rows)}); "
                                                   f"delete the file and rerun")
        rows.append((sid, score))
    return out


def read_turn_table(path) -> dict[int, list[tuple[str, float, int, int]]]:
    """{q_index: [(turn id, score, session position, turn index)] in rank order} of a segment's turn
    table, scores as the module docstring says (``harness.run_scores`` over the whole list)."""
    from ..core.tables import read_table, sorted_runs
    from .harness import run_scores

    t = read_table(path, columns=["q_index", "rank", "turn_id", "score", "position", "turn"]).sort_by(
        [("q_index", "ascending"), ("rank", "ascending")]).to_pydict()
    out = {}
    for qi, lo, hi in sorted_runs(t["q_index"]):
        scores = run_scores([math.nan if x is None else x for x in t["score"][lo:hi]])
        out[qi] = list(zip(t["turn_id"][lo:hi], scores, t["position"][lo:hi], t["turn"][lo:hi]))
    return out


def _fuse_turns(v, q, hay, lists, rows: SegmentRows, turn_rows: TurnRows) -> None:
    """One question of a turn fusion: its fused turn list into ``turn_rows``, its sessions at their
    best turns into ``rows``."""
    from .harness import run_scores

    spec = v.retriever
    place: dict[str, tuple] = {}  # turn id -> (rank, input) of its best occurrence, (position, index)
    for i, ranked in enumerate(lists):
        for r, (tid, _, p, t) in enumerate(ranked or (), 1):
            if tid not in place or (r, i) < place[tid][0]:
                place[tid] = ((r, i), (p, t))
    fused = fuse([[(tid, sc) for tid, sc, _, _ in ranked] if ranked else None for ranked in lists],
                 spec["method"], spec.get("k", RRF_K))
    at = [place[tid][1] for tid, _ in fused]
    turn_rows.append(q, hay.ids, [p for p, _ in at], [t for _, t in at], [tid for tid, _ in fused],
                     [score for _, score in fused])
    best: dict[int, float] = {}  # each session position at its best turn's score, in that order
    for (p, _), (_, score) in zip(at, fused):
        best.setdefault(p, score)
    positions = list(best)[:DEPTH]
    ids = [hay.ids[p] for p in positions]
    rows.add(q, hay, final=ids[:TOP], deep=ids, scores=run_scores([best[p] for p in positions]),
             positions=positions)


def rank_segment(variants, segment, log=print) -> dict:
    """Rank one segment (``harness.Segment``) under each fusion variant from
    its ``fused`` inputs (the fused variants' deep tables of this segment, in
    ``of`` order). Returns {variant name: (rankings, outcomes, deep) tables}."""
    from .harness import SegmentRows, run_scores, skip_reason
    from .timings import CallTimes
    from .turns import TurnRows

    paths = segment.inputs.get("fused") or []
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out = {}
    for v in variants:
        spec = v.retriever
        of = list(spec["of"])
        if len(paths) != len(of):
            raise ValueError(f"variant {v.name!r} fuses {of} but was given {len(paths)} deep table(s)")
        turns = v.grain == "turn"
        deep = [(read_turn_table if turns else read_deep)(p) for p in paths]
        rows = SegmentRows()
        turn_rows = TurnRows()
        times = CallTimes()
        for q in segment.questions:
            hay = segment.haystacks.get(q["haystack_id"])
            skip, _ = skip_reason(v.skip, q, hay, v)  # a forced miss is fused from the inputs' lists
            if skip is not None:
                rows.add(q, hay, skip=skip)
                continue
            called = time.perf_counter()
            if turns:
                _fuse_turns(v, q, hay, [d.get(q["q_index"]) for d in deep], rows, turn_rows)
                times.add(q["haystack_id"], q["question_id"], time.perf_counter() - called)
                continue
            fused = fuse([d.get(q["q_index"]) for d in deep], spec["method"], spec.get("k", RRF_K))[:DEPTH]
            times.add(q["haystack_id"], q["question_id"], time.perf_counter() - called)
            ids = [sid for sid, _ in fused]
            rows.add(q, hay, final=ids[:TOP], deep=ids, scores=run_scores([s for _, s in fused]))
        log(f"{segment.label}: {v.name}: {spec['method']} of {', '.join(of)}{' (turn lists)' * turns}, "
            f"{len(segment.questions)} questions")
        out[v.name] = rows.tables()
        if turns:
            segment.turns[v.name] = turn_rows.table()
        segment.timings[v.name] = (times.rows, {})
    return out


def fusion_variant(name: str, family: str, entry: dict, others: dict | None = None):
    """A fusion of other variants' deep lists (config ``variants.<name>.fuse``)
    as a variant of a family: the family's skip
    rule, as the reference retrievers'. ``others``: the config's other user
    variants, which it may fuse (never another fusion)."""
    from ..catalog.variant import SKIP, Variant
    from ..catalog.variants import resolve
    from ..core.errors import ConfigError
    from ..memo.recipe import Recipe

    where = f"variant {name!r}: fuse"
    if set(entry) - {"fuse", "description"}:
        extra = ", ".join(sorted(set(entry) - {"fuse", "description"}))
        raise ConfigError(f"variant {name!r}: a fusion variant takes no {extra} (only fuse and description)")
    f = entry["fuse"] or {}
    of = f.get("of")
    if not isinstance(of, list) or len(of) < 2 or not all(isinstance(o, str) for o in of):
        raise ConfigError(f"{where}: of must list at least two variants, not {of!r}")
    if len(set(of)) != len(of) or name in of:
        raise ConfigError(f"{where}: of lists a variant twice or the fusion itself: {of}")
    method = f.get("method", "rrf")
    if method not in METHODS:
        raise ConfigError(f"{where}: method {method!r} is not one of {', '.join(METHODS)}")
    if "k" in f and method != "rrf":
        raise ConfigError(f"{where}: k is the rrf constant; method {method!r} takes none")
    k = f.get("k", RRF_K)
    if method == "rrf" and (not isinstance(k, int) or isinstance(k, bool) or k < 0):
        raise ConfigError(f"{where}: k must be an integer >= 0, not {k!r}")
    cycle = _fusion_cycle(name, of, others or {})
    if cycle:
        # resolving it would pass through the fusion itself, which ``others`` leaves out: name the loop instead
        raise ConfigError(f"{where}: a fusion cycle: {' -> '.join(cycle)}; a fusion fuses variants that are not "
                          f"fusions")
    for o in of:
        if resolve(o, family, others).recipe.backend == BACKEND:
            raise ConfigError(f"{where}: {o!r} is itself a fusion; fuse the variants it fuses instead")
    spec = {"of": list(of), "method": method, **({"k": k} if method == "rrf" else {})}
    what = f"{method}{f' (k {k})' if method == 'rrf' else ''} of {', '.join(of)}"
    return Variant(name, Recipe(backend=BACKEND), SKIP[family], f"fusion: {what}",
                   entry.get("description", f"the deep lists of {', '.join(of)} fused by {what.split(' of ')[0]}"),
                   retriever=spec)


def check_fusion(v, family: str, others: dict) -> None:
    """A turn fusion fuses turn lists: every variant it fuses ranks turns."""
    from ..catalog.variants import resolve
    from ..core.errors import ConfigError

    if v.grain == "turn":
        for o in v.retriever["of"]:
            if resolve(o, family, others).grain != "turn":
                raise ConfigError(f"variant {v.name!r}: fuse: grain turn fuses turn lists, and {o!r} ranks sessions "
                                  f"(give it grain: turn, or fuse the session lists without grain: turn)")


def _fusion_cycle(name: str, of: list, others: dict) -> list[str] | None:
    """The path [name, ..., name] by which a fusion reaches itself through the
    user variants it fuses (their ``fuse.of``, or a ``base``), or None."""
    def via(v: str) -> list:
        entry = others.get(v)
        if not isinstance(entry, dict):
            return []
        fuse = entry.get("fuse")
        got = list(fuse.get("of") or []) if isinstance(fuse, dict) and isinstance(fuse.get("of"), list) else []
        return got + ([entry["base"]] if isinstance(entry.get("base"), str) else [])

    stack, seen = [(o, [name, o]) for o in reversed(of)], set()
    while stack:
        v, path = stack.pop()
        if v == name:
            return path
        if v in seen:
            continue
        seen.add(v)
        stack += [(w, path + [w]) for w in reversed(via(v))]
    return None


# The recipe backend of a fusion variant (config ``variants.<name>.fuse``): its list is fused from other
# variants' deep lists; not a recipe choice either.
BACKEND = "fusion"
register(Row(BACKEND, "fusion", label="fusion", description="other variants' deep lists fused (rrf, combsum, borda)",
             module=__name__, config_key="fuse", make_variant=fusion_variant, turns=True, check_variant=check_fusion))
# ``fused``: the deep tables (a turn fusion's: the turn tables) of the variants it fuses, of the job's
# segment, in ``of`` order
register_retriever(Retriever("fusion", __name__, rank_segment, inputs=frozenset({"questions", "haystacks", "fused"}),
                             shares=False))
