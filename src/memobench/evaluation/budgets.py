"""Recall within a token budget (docs/protocol.md#token-budgets): how much of
the gold a variant's list delivers within the first T tokens of its context,
and what that context costs, from the sessions' token counts made once per
dataset (context.py, the ``context_tokens`` stage).

A list's context is its items' renderings in rank order, a separator between
two; item r (1-based) ends at ``end(r) = tokens(1) + ... + tokens(r) + (r - 1)
* separator_tokens``. A gold item is inside budget T when its end is at most
T: the context is cut before the first item that does not fit whole. Gold and
the questions averaged are the official metrics' (official.py): LongMemEval's
scoring ids and exclusions, LoCoMo's evidence sessions and categories.
"""

from __future__ import annotations

import math
import re
import statistics
from itertools import accumulate

from ..core.errors import DataError
from ..core.formats import LME_FORMATS
from .official import CONVENTIONS, KS, LOCOMO_CATEGORIES_1_4, ranked_positions

BUDGETS = (512, 1024, 2048, 4096, 8192)  # the default budgets, in tokens (config budgets.tokens)
RULES = "token budgets over the session lists (docs/protocol.md#token-budgets)"
TURN_RULES = "token budgets over the turn lists, at turn grain (docs/protocol.md#token-budgets)"


def is_budget_name(name: str) -> bool:
    """Whether ``name`` is recall_any or recall_all within a budget (any_name, all_name)."""
    return re.fullmatch(r"recall_(any|all)@[1-9][0-9]*tok", name) is not None


def any_name(budget: int) -> str:
    return f"recall_any@{budget}tok"


def all_name(budget: int) -> str:
    return f"recall_all@{budget}tok"


def context_name(k: int) -> str:
    return f"context_tokens@{k}"


def ends(item_tokens: list[int], separator_tokens: int) -> list[int]:
    """Where each listed item's rendering ends in the context, in tokens."""
    return [e + r * separator_tokens for r, e in enumerate(accumulate(item_tokens))]


def gold_reach(item_ends: list[int], item_gold: list[str | None], n_gold: int) -> tuple[int | None, int | None]:
    """(the end of the first gold item, the end of the item that completes the
    gold) of one list; ``item_gold`` names the gold id each item stands for (None:
    not gold). The first is None when no gold item is listed, the second when
    some gold id is not; it is 0 for a question with no gold (recall_all 1, as
    the official rules have it)."""
    first = None
    seen: dict[str, int] = {}
    for e, g in zip(item_ends, item_gold):
        if g is not None:
            if first is None:
                first = e
            seen.setdefault(g, e)
    if not n_gold:
        return first, 0
    return first, (max(seen.values()) if len(seen) == n_gold else None)


def question_figures(first: int | None, complete: int | None, item_ends: list[int], budgets, ks=KS) -> dict:
    out = {}
    for t in budgets:
        out[any_name(t)] = 1.0 if first is not None and first <= t else 0.0
        out[all_name(t)] = 1.0 if complete is not None and complete <= t else 0.0
    for k in ks:
        out[context_name(k)] = item_ends[min(k, len(item_ends)) - 1] if item_ends else 0
    return out


def summary(rows: list[dict], budgets, ks=KS) -> dict:
    """The means of a question set's figures; tokens to the first gold item over
    the questions whose list holds one."""
    n = len(rows)
    names = [f(t) for t in budgets for f in (any_name, all_name)] + [context_name(k) for k in ks]
    out = {"questions": n}
    out.update({m: (math.fsum(r["budgets"][m] for r in rows) / n if n else None) for m in names})
    found = [r["first_gold_tokens"] for r in rows if r["first_gold_tokens"] is not None]
    out["first_gold_listed"] = len(found)
    out["tokens_to_first_gold_mean"] = math.fsum(found) / len(found) if found else None
    out["tokens_to_first_gold_median"] = statistics.median(found) if found else None
    return out


def views(fmt: str, rows: list[dict]) -> dict[str, list[dict]]:
    """The questions each of the official averaging conventions keeps
    (official.lme_conventions, official.locomo_block), by convention."""
    if fmt in LME_FORMATS:
        return {"run_retrieval": [r for r in rows if r["excluded"] is None],
                "print_retrieval_metrics": [r for r in rows if r["excluded"] != "abstention"]}
    kept = [r for r in rows if r["excluded"] is None]
    return {"all_categories": kept,
            "categories_1_4": [r for r in kept if r["question_type"] in LOCOMO_CATEGORIES_1_4]}


def compute(fmt: str, rows: list[dict], questions_path, haystacks_path, rankings_path, counts_path,
            budgets=BUDGETS, reads: dict | None = None) -> tuple[dict, dict[int, tuple]]:
    """(official.json's ``budgets`` block, {q_index: (first gold end, complete
    gold end, item ends, in the top-level convention's mean)}) of one session variant, from its official per-question
    ``rows`` (official.compute) and its deep list. ``reads``: what official.compute
    read of the same files (its ``reads``), not read again."""
    from .context import read_counts
    from .official import read_haystacks, read_questions, read_rankings

    reads = reads or {}
    counts, tokenizer = read_counts(counts_path)
    questions = reads["questions"] if "questions" in reads else read_questions(questions_path)
    hids = {q["q_index"]: q["haystack_id"] for q in questions}
    haystacks = (reads["haystacks"] if "haystacks" in reads else
                 read_haystacks(haystacks_path, sorted({h for h in hids.values() if h >= 0}), dates=False))
    rankings, depth, _ = reads["rankings"] if "rankings" in reads else read_rankings(rankings_path)
    lists = []
    for r in rows:
        hay = haystacks.get(hids[r["q_index"]], {"ids": [], "keys": []})
        if "positions" in r:  # LongMemEval: the official rows' documents and scoring ids
            positions, gold = r["positions"], set(r["gold"])
            item_gold = [s if s in gold else None for s in r["scoring"]]
        else:  # LoCoMo: evidence sessions, by id
            ranked = rankings.get(r["q_index"], [])
            positions = ranked_positions(ranked, hay["ids"], rankings_path, f"question {r['question_id']}")
            gold = set(r["gold"])
            item_gold = [s if s in gold else None for s in ranked]
        lists.append(([counts[hay["keys"][p]] for p in positions], item_gold, len(gold)))
    return _figures(fmt, rows, lists, tokenizer, budgets, depth, "session", RULES)


def compute_turns(fmt: str, rows: list[dict], questions_path, haystacks_path, counts_path, budgets=BUDGETS,
                  turns_path="turns") -> tuple[dict, dict[int, tuple]]:
    """:func:`compute` of a turn variant at turn grain, from its official turn
    rows (turn_metrics.compute with ``items``): each listed turn (a memory
    service's assistant turn too, never gold) is delivered, the gold is the
    turn figures' gold turns, the questions their conventions'."""
    from .context import read_turn_counts
    from .official import read_haystacks, read_questions

    counts, tokenizer = read_turn_counts(counts_path)
    hids = {q["q_index"]: q["haystack_id"] for q in read_questions(questions_path)}
    haystacks = read_haystacks(haystacks_path, sorted({h for h in hids.values() if h >= 0}), dates=False)
    lists = []
    for r in rows:
        keys, gold, tokens = haystacks[hids[r["q_index"]]]["keys"], set(r["gold"]), []
        for rank, (p, seq, _) in enumerate(r["items"], 1):
            n = counts.get((keys[p], seq))
            if n is None:
                raise DataError(str(turns_path), f"question {r['question_id']}",
                                f"rank {rank}: session position {p} has no turn {seq} in the events table")
            tokens.append(n)
        lists.append((tokens, [t if t in gold else None for _, _, t in r["items"]], len(gold)))
    depth = max((len(r["items"]) for r in rows), default=0)
    return _figures(fmt, rows, lists, tokenizer, budgets, depth, "turn", TURN_RULES)


def _figures(fmt: str, rows: list[dict], lists: list[tuple], tokenizer: dict, budgets, depth: int, grain: str,
             rules: str) -> tuple[dict, dict[int, tuple]]:
    """The block and per-question figures from each row's list: (its items' tokens, the gold id
    each stands for or None, the number of gold ids)."""
    from .context import SEPARATOR

    sep = tokenizer["separator_tokens"]
    convs = views(fmt, rows)
    top = next(iter(convs))
    counted = {r["q_index"] for r in convs[top]}
    per_question = {}
    for r, (tokens, item_gold, n_gold) in zip(rows, lists):
        item_ends = ends(tokens, sep)
        first, complete = gold_reach(item_ends, item_gold, n_gold)
        r["first_gold_tokens"] = first
        r["budgets"] = question_figures(first, complete, item_ends, budgets)
        per_question[r["q_index"]] = (first, complete, item_ends, r["q_index"] in counted)
    block = {"rules": rules, "grain": grain, "tokenizer": {"name": tokenizer["name"], "sha256": tokenizer["sha256"]},
             "separator": SEPARATOR, "separator_tokens": sep, "budgets": list(budgets), "depth": depth,
             "convention": top, **summary(convs[top], budgets),
             "conventions": {c: {"convention": CONVENTIONS[c], **summary(kept, budgets)} for c, kept in convs.items()}}
    return block, per_question


def outcome_columns(per_question: dict[int, tuple]) -> dict:
    """The per-question columns of outcomes.parquet (docs/tables.md#retrieval-outputs):
    ``first_gold_tokens``, ``all_gold_tokens``, ``context_tokens`` (each listed item's end) and
    ``in_budgets`` (the question counts in the budgets' top-level means: what stats.json pairs)."""
    import pyarrow as pa

    return {"first_gold_tokens": (pa.int32(), {q: v[0] for q, v in per_question.items()}),
            "all_gold_tokens": (pa.int32(), {q: v[1] for q, v in per_question.items()}),
            "context_tokens": (pa.list_(pa.int32()), {q: v[2] for q, v in per_question.items()}),
            "in_budgets": (pa.bool_(), {q: v[3] for q, v in per_question.items()})}
