"""LongMemEval's official retrieval metrics (docs/protocol.md#official-metrics)
and LoCoMo's evidence-session recall, computed from a variant's rankings.

These sit beside the harness's hit@k and MRR (``metrics.py``) and never
replace them: the harness scores ``answer_session_ids`` at the first gold rank;
the official rules score *scoring ids* (session ids, ``answer`` renamed to
``noans`` in a session whose user turns carry no ``has_answer``), gold = the
scoring ids containing ``answer``, and average over every question of the file
except abstention questions and questions with no user-side target.

The question set is the file's, not the variant's: a question the variant gave
no list for (a harness skip) is scored with an empty list, so every variant is
averaged over the same questions (``not_ranked`` counts them).

Two averaging conventions are both given (``conventions``): LongMemEval's
``run_retrieval.py`` leaves out abstention and no-user-target questions (the
top-level figures, kept as they were), its ``print_retrieval_metrics.py``,
which printed the paper's tables, only abstentions; LoCoMo over every
category and over categories 1-4. Each names its convention and its count.

Rankings of any depth are accepted (``rankings.parquet`` holds the harness's
top 10; a deeper table with the same columns gives the deeper figures); the
depth used is reported, and metrics at k beyond it see a list shorter than k.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter, defaultdict
from itertools import compress, count, repeat
from operator import contains, itemgetter

from ..core.formats import FORMATS, LME_FORMATS
from ..core.errors import DataError
from ..core.progress import Progress

# pyarrow (core.tables, retrieval.harness) is imported by the functions that read tables: the
# report, which reads only this module's names, imports no pyarrow

KS = (1, 3, 5, 10, 30, 50)
# LoCoMo's question categories (``qa[].category``) by the names of the LoCoMo
# paper's five QA types (Maharana et al. 2024): its evaluation code prints the
# categories in the order 4, 1, 2, 3, 5, the order of the paper's table
# (single-hop, multi-hop, temporal, open-domain, adversarial); in locomo10.json
# every category-5 item is the one with an ``adversarial_answer`` and most
# category-2 questions start with "When". The report shows these names beside
# the numbers; the harness itself prints the numbers only.
LOCOMO_CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
LOCOMO_CATEGORIES_1_4 = ("1", "2", "3", "4")

# The averaging conventions the field quotes (official.json's ``conventions``):
# the same per-question metrics, averaged over different question sets.
CONVENTIONS = {
    "run_retrieval": "LongMemEval run_retrieval.py: the mean over the questions less abstention and "
                     "no-user-target questions",
    "print_retrieval_metrics": "LongMemEval print_retrieval_metrics.py (the paper's tables): the mean over the "
                               "questions less abstention questions; a no-user-target question counts with its "
                               "empty gold (recall_any 0, recall_all 1, ndcg_any 0)",
    "all_categories": "LoCoMo: every question with evidence sessions, categories 1-5",
    "categories_1_4": "LoCoMo, memory-system convention (mem0's evaluation): questions with evidence sessions in "
                      "categories 1-4 (5, adversarial, left out)",
}


# ---------------------------------------------------------------- the rules


def gold_ids(scoring: list[str]) -> set[str]:
    """The distinct scoring ids of the corpus that contain ``answer``."""
    return {s for s in scoring if "answer" in s}


def is_abstention(question_id: str) -> bool:
    return "_abs" in question_id


def dcg(rels: list[float]) -> float:
    """LongMemEval's DCG: ``r[0] + sum(r[i] / log2(i + 1))`` for 0-based i >= 1,
    so ranks 1 and 2 are both undiscounted (not the textbook log2(i + 2))."""
    if not rels:
        return 0.0
    return rels[0] + sum(r / math.log2(i + 1) for i, r in enumerate(rels[1:], 1))


# dcg's discount of 0-based rank i >= 1, as dcg computes it for a relevant
# document (1.0 / log2(i + 1)); grown on demand (_discounts)
_DISCOUNTS = [0.0]
# the ideal DCG of c relevant documents first (dcg([1.0] * c)), by c
_IDEAL: dict[int, float] = {}


def _discounts(n: int) -> list[float]:
    while len(_DISCOUNTS) < n:
        _DISCOUNTS.append(1.0 / math.log2(len(_DISCOUNTS) + 1))
    return _DISCOUNTS


def _ideal_dcg(c: int) -> float:
    ideal = _IDEAL.get(c)
    if ideal is None:
        ideal = _IDEAL[c] = dcg([1.0] * c)
    return ideal


def ranked_positions(ranked: list[str], haystack: list[str], path="rankings", item=None) -> list[int]:
    """Corpus positions of a ranked list of session ids (a harness list names
    ids, not positions). The n-th time an id is ranked it stands for the n-th
    haystack position holding that id: a list that ranks a repeated id k times
    is scored as k documents at their ranks, as the harness counts them. A
    ranker of documents gives its own positions instead (:func:`given_positions`)."""
    # the common case, distinct ids on both sides: each id's one position
    first = dict(zip(reversed(haystack), range(len(haystack) - 1, -1, -1)))
    if len(first) == len(haystack) and len(set(ranked)) == len(ranked):
        try:
            return list(map(first.__getitem__, ranked))
        except KeyError:
            pass  # an id not in the haystack: the error below names it
    slots: dict[str, list[int]] = defaultdict(list)
    for p, sid in enumerate(haystack):
        slots[sid].append(p)
    used: dict[str, int] = defaultdict(int)
    out = []
    for sid in ranked:
        n = used[sid]
        if n >= len(slots.get(sid, ())):
            what = "not in its haystack" if sid not in slots else "ranked more often than its haystack holds it"
            raise DataError(path, item, f"ranked session {sid!r} is {what}")
        out.append(slots[sid][n])
        used[sid] = n + 1
    return out


def lme_question_metrics(positions: list[int], scoring: list[str], ks=KS) -> dict[str, float]:
    """recall_any@k, recall_all@k and ndcg_any@k of one question (every k)."""
    return _lme_metrics(positions, scoring, gold_ids(scoring), ks)


def _lme_metrics(positions: list[int], scoring: list[str], gold: set[str], ks=KS) -> dict[str, float]:
    """lme_question_metrics from the relevant documents' ranks (:func:`metrics_from_hits`)."""
    hits = []  # the 0-based ranks of the relevant documents
    first: dict[str, int] = {}  # each gold id's first rank
    if gold:
        listed = list(map(scoring.__getitem__, positions))
        hits = list(compress(count(), map(gold.__contains__, listed)))
        for i in hits:
            first.setdefault(listed[i], i)
    n_relevant = sum(map(gold.__contains__, scoring)) if gold else 0
    return metrics_from_hits(hits, list(first.values()), len(gold), len(positions), len(scoring), n_relevant, ks)


def metrics_from_hits(hits: list[int], first_ranks: list[int], n_gold: int, n_listed: int, n_corpus: int,
                      n_relevant: int, ks=KS, labels=None) -> dict[str, float]:
    """lme_question_metrics from a ranking's relevant documents alone, not a
    set and a DCG per k: the same values. ``hits``: the relevant documents'
    0-based ranks, ascending; ``first_ranks``: the first rank of each gold id
    listed; ``n_gold``: the distinct gold ids; ``n_relevant``: the corpus
    documents whose id is gold. recall_any@k holds when the first relevant
    rank is below k, recall_all@k when every gold id's first rank is; the DCG
    of the top k is dcg's sum with its zero terms left out (adding 0.0
    changes no float sum, compensated or not), the ideal's that of its
    relevant documents (dcg([1.0] * c)). ``labels``: the k each figure is named for, when
    not ``ks`` itself (turn2session's figures at k' are named for k)."""
    never = math.inf
    any_at = hits[0] if hits else never
    all_at = (max(first_ranks) if first_ranks else -1) if len(first_ranks) == n_gold else never
    recall, ndcg = _plan(ks, labels, n_listed, n_corpus, n_relevant)
    out = {}
    for any_k, all_k, n in recall:
        out[any_k] = 1.0 if any_at < n else 0.0
        out[all_k] = 1.0 if all_at < n else 0.0
    if not n_relevant:  # an ideal DCG of 0 at every k
        for ndcg_k, _, _ in ndcg:
            out[ndcg_k] = 0.0
        return out
    disc = _discounts(n_listed)
    head = 1.0 if any_at == 0 else 0.0
    later = [disc[i] for i in hits if i > 0]  # in rank order
    skip = any_at == 0
    for ndcg_k, n, ideal in ndcg:
        if ideal is None:
            out[ndcg_k] = 0.0
        else:
            # the relevant ranks 1 <= i < n are a prefix of later
            out[ndcg_k] = (head + sum(later[:bisect_left(hits, n) - skip])) / ideal
    return out


# _plan's answers by its arguments: a file's questions share a few list and corpus sizes
_PLANS: dict[tuple, tuple] = {}


def _plan(ks, labels, n_listed: int, n_corpus: int, n_relevant: int) -> tuple[list, list]:
    """What metrics_from_hits needs of each k besides the hits, the same for
    every question of these sizes: (recall_any@k, recall_all@k, the listed
    prefix length) and (ndcg_any@k, that length, the ideal DCG; None for a
    figure that is 0.0 whatever is listed)."""
    key = (tuple(ks), None if labels is None else tuple(labels), n_listed, n_corpus, n_relevant)
    plan = _PLANS.get(key)
    if plan is None:
        names = _names(ks if labels is None else labels)
        listed = [_prefix(n_listed, k) for k in ks]  # len(positions[:k])
        recall = [(any_k, all_k, n) for (any_k, all_k, _), n in zip(names, listed)]
        ndcg = []
        for (_, _, ndcg_k), k, n in zip(names, ks, listed):
            ideal = _ideal_dcg(min(n_relevant, _prefix(n_corpus, k))) if n_relevant else 0.0
            ndcg.append((ndcg_k, n, None if not ideal or n == 0 else ideal))
        plan = recall, ndcg
        if len(_PLANS) < 4096:
            _PLANS[key] = plan
    return plan


def _prefix(n: int, k: int) -> int:
    """len(x[:k]) of a list x of length n."""
    return (k if k <= n else n) if k >= 0 else max(n + k, 0)


_NAMES: dict[tuple, list[tuple[str, str, str]]] = {}


def _names(ks) -> list[tuple[str, str, str]]:
    """(recall_any@k, recall_all@k, ndcg_any@k) of each k (the fixed k sets
    kept; turn2session's per-question ones are not)."""
    key = tuple(ks)
    names = _NAMES.get(key)
    if names is None:
        names = [(f"recall_any@{k}", f"recall_all@{k}", f"ndcg_any@{k}") for k in key]
        if len(_NAMES) < 16:
            _NAMES[key] = names
    return names


def locomo_question_metrics(ranked: list[str], gold: list[str], ks=KS) -> dict[str, float]:
    """recall_any@k and recall_all@k over a LoCoMo question's evidence sessions."""
    out = {}
    for k in ks:
        retrieved = set(ranked[:k])
        out[f"recall_any@{k}"] = 1.0 if any(g in retrieved for g in gold) else 0.0
        out[f"recall_all@{k}"] = 1.0 if all(g in retrieved for g in gold) else 0.0
    return out


def metric_names(fmt: str, ks=KS) -> list[str]:
    names = [f"recall_any@{k}" for k in ks] + [f"recall_all@{k}" for k in ks]
    if fmt in LME_FORMATS:
        names += [f"ndcg_any@{k}" for k in ks]
    return names


def average(rows: list[dict], names: list[str]) -> dict[str, float | None]:
    """Plain means in question order (None over no questions)."""
    n = len(rows)
    metrics = [r["metrics"] for r in rows]
    return {m: (math.fsum(map(itemgetter(m), metrics)) / n if n else None) for m in names}


# ---------------------------------------------------------------- the tables


def read_rankings(path) -> tuple[dict[int, list[str]], int, dict[int, list[int]]]:
    """{q_index: session ids in rank order}, the deepest rank present, and
    {q_index: haystack positions in rank order} for the questions whose every
    row has one (a deep list of a ranker of documents: ``harness.DEEP``)."""
    import pyarrow.parquet as pq

    from ..core.tables import kernels, read_table, sort_by, sorted_runs

    cols = ["q_index", "rank", "session_id"]
    has_positions = "position" in pq.read_schema(path).names
    t = sort_by(read_table(path, columns=cols + ["position"] * has_positions),
                [("q_index", "ascending"), ("rank", "ascending")])
    qis, sids = t.column("q_index").to_pylist(), t.column("session_id").to_pylist()
    # a harness's deep list has no position at all: nothing to gather
    positions = (t.column("position").to_pylist()
                 if has_positions and t.column("position").null_count < t.num_rows else None)
    out: dict[int, list[str]] = {}
    known: dict[int, list] = {}
    for qi, lo, hi in sorted_runs(qis):
        out[qi] = sids[lo:hi]
        if positions is not None and None not in (ps := positions[lo:hi]):
            known[qi] = ps
    depth = kernels().call_function("max", [t.column("rank")]).as_py() if t.num_rows else 0
    return out, depth or 0, known


def given_positions(ranked: list[str], positions: list[int], haystack: list[str], path="rankings",
                    item=None) -> list[int]:
    """A ranker's own positions, checked against its session ids and the haystack."""
    for r, (sid, p) in enumerate(zip(ranked, positions), 1):
        if not 0 <= p < len(haystack) or haystack[p] != sid:
            raise DataError(path, item, f"rank {r}: position {p} does not hold session {sid!r} in its haystack")
    if len(set(positions)) != len(positions):
        raise DataError(path, item, "a haystack position is ranked twice")
    return list(positions)


def read_haystacks(path, hids=None, dates: bool = True) -> dict[int, dict[str, list]]:
    """{haystack id: its session ``ids``, ``keys`` and ``dates`` in position
    order}, of the haystacks ``hids`` (all when empty); ``dates=False`` leaves
    the dates out (the official metrics do not read them)."""
    from ..core.tables import filter_rows, is_in, read_table, sort_by, sorted_runs

    names = ["session_id", "session_key"] + ["date"] * dates
    t = read_table(path, columns=["haystack_id", "position"] + names)
    if hids:
        t = filter_rows(t, is_in(t.column("haystack_id"), hids))
    t = sort_by(t, [("haystack_id", "ascending"), ("position", "ascending")])
    ids, keys = t.column("session_id").to_pylist(), t.column("session_key").to_pylist()
    runs = sorted_runs(t.column("haystack_id").to_pylist())
    if not dates:
        return {hid: {"ids": ids[lo:hi], "keys": keys[lo:hi]} for hid, lo, hi in runs}
    days = t.column("date").to_pylist()
    return {hid: {"ids": ids[lo:hi], "keys": keys[lo:hi], "dates": days[lo:hi]} for hid, lo, hi in runs}


def read_questions(path) -> list[dict]:
    from ..core.tables import read_table, sort_by

    cols = ["q_index", "question_id", "question_type", "haystack_id", "gold", "parse_error", "evidence"]
    return sort_by(read_table(path, columns=cols), "q_index").to_pylist()


# ---------------------------------------------------------------- per dataset


def with_haystacks(questions, haystacks, progress=None):
    """(question, its haystack) of each question that has one (not an
    unparseable element, not an unpaired CN row), in order, calling
    ``progress(n)`` as it goes."""
    for n, q in enumerate(questions):
        if progress is not None:
            progress(n)
        if q["parse_error"] or q["haystack_id"] < 0:
            continue
        yield q, haystacks.get(q["haystack_id"], {"ids": [], "keys": [], "dates": []})


def exclusion(question_id: str, has_user_target: bool) -> str | None:
    """Why LongMemEval leaves a question out of its means: ``abstention``
    first, then ``no_user_target`` (no user turn with has_answer); None when kept."""
    if is_abstention(question_id):
        return "abstention"
    return None if has_user_target else "no_user_target"


def lme_per_question(questions, haystacks, targets: set[int], rankings: dict[int, list[str]], path="rankings",
                     known: dict[int, list[int]] | None = None, progress=None):
    """One row per question with a haystack: its exclusion (or None) and
    metrics. ``known``: the ranker's own haystack positions (read_rankings);
    other lists are placed by :func:`ranked_positions`."""
    from ..retrieval.harness import scoring_id  # the rule an imported run is read under too

    rows = []
    for q, hay in with_haystacks(questions, haystacks, progress):
        # only an id with "answer" may be renamed (scoring_id) or be gold: found at C speed, then renamed
        ids, keys = hay["ids"], hay["keys"]
        answers = list(compress(count(), map(contains, ids, repeat("answer"))))
        scoring = list(ids)
        for i in answers:
            scoring[i] = scoring_id(ids[i], keys[i] in targets)
        ranked = rankings.get(q["q_index"], [])
        item = f"question {q['question_id']}"
        positions = (given_positions(ranked, known[q["q_index"]], hay["ids"], path, item)
                     if known and q["q_index"] in known else ranked_positions(ranked, hay["ids"], path, item))
        excluded = exclusion(q["question_id"], not targets.isdisjoint(hay["keys"]))
        gold = gold_ids([scoring[i] for i in answers])
        rows.append({"q_index": q["q_index"], "question_id": q["question_id"],
                     "question_type": q["question_type"], "excluded": excluded, "ranked": bool(ranked),
                     "gold": sorted(gold), "positions": positions,
                     "scoring": list(map(scoring.__getitem__, positions)),
                     "metrics": _lme_metrics(positions, scoring, gold)})
    return rows


def lme_block(rows: list[dict], questions: list[dict], depth: int) -> dict:
    kept = [r for r in rows if r["excluded"] is None]
    block = {"rules": "LongMemEval official (docs/protocol.md#official-metrics)", "depth": depth,
             "questions": len(kept),
             "excluded": {"abstention": sum(r["excluded"] == "abstention" for r in rows),
                          "no_user_target": sum(r["excluded"] == "no_user_target" for r in rows)},
             "not_ranked": sum(not r["ranked"] for r in kept),
             "empty_gold": sum(not r["gold"] for r in kept)}
    other = len(questions) - len(rows)
    if other:
        block["excluded"]["no_haystack"] = other  # unparseable elements, unpaired CN rows
    block.update(average(kept, metric_names("longmemeval")))
    block["conventions"] = lme_conventions(rows, other)
    return block


def lme_conventions(rows: list[dict], no_haystack: int = 0) -> dict:
    """Both of LongMemEval's averaging conventions, each with its question
    count and what it leaves out: ``run_retrieval`` (the top-level figures)
    and ``print_retrieval_metrics`` (abstentions only: a no-user-target
    question's per-question metrics are averaged in as the rules score them)."""
    names = metric_names("longmemeval")
    out = {}
    for conv, dropped in (("run_retrieval", ("abstention", "no_user_target")),
                          ("print_retrieval_metrics", ("abstention",))):
        kept = [r for r in rows if r["excluded"] not in dropped]
        excluded = {d: sum(r["excluded"] == d for r in rows) for d in dropped}
        if no_haystack:
            excluded["no_haystack"] = no_haystack
        out[conv] = {"convention": CONVENTIONS[conv], "questions": len(kept), "excluded": excluded,
                     "no_user_target_included": sum(r["excluded"] == "no_user_target" for r in kept),
                     "not_ranked": sum(not r["ranked"] for r in kept),
                     "empty_gold": sum(not r["gold"] for r in kept), **average(kept, names)}
    return out


def locomo_per_question(questions, rankings: dict[int, list[str]], progress=None):
    rows = []
    for n, q in enumerate(questions):
        if progress is not None:
            progress(n)
        ranked = rankings.get(q["q_index"], [])
        rows.append({"q_index": q["q_index"], "question_id": q["question_id"],
                     "question_type": q["question_type"], "excluded": None if q["gold"] else "no_evidence",
                     "ranked": bool(ranked), "gold": list(q["gold"]),
                     "metrics": locomo_question_metrics(ranked, list(q["gold"]))})
    return rows


def locomo_block(rows: list[dict], depth: int) -> dict:
    names = metric_names("locomo")

    no_evidence = {"no_evidence": sum(r["excluded"] == "no_evidence" for r in rows)}

    def view(in_view=lambda r: True):
        kept = [r for r in rows if r["excluded"] is None and in_view(r)]
        # each question left out once, for its first reason: no evidence, then a category the view drops;
        # so n and the excluded counts add up to the file's questions under every convention
        dropped = Counter(f"category_{r['question_type']}" for r in rows
                          if r["excluded"] is None and not in_view(r))
        return {"excluded": {**no_evidence, **dict(sorted(dropped.items()))}, "questions": len(kept),
                "not_ranked": sum(not r["ranked"] for r in kept), **average(kept, names)}

    block = {"rules": "LoCoMo evidence sessions (recall_any/recall_all)", "depth": depth}
    block.update(view())
    block["categories_1_4"] = view(lambda r: r["question_type"] in LOCOMO_CATEGORIES_1_4)
    block["conventions"] = {
        "all_categories": {"convention": CONVENTIONS["all_categories"], **view()},
        "categories_1_4": {"convention": CONVENTIONS["categories_1_4"], **block["categories_1_4"]}}
    return block


def compute(fmt: str, questions_path, haystacks_path, events_path, rankings_path, log=print,
            haystacks_out: dict | None = None, reads: dict | None = None):
    """(official block, per-question rows) of one variant; (None, []) for a
    format with no official scorer (the embedded zh set). ``haystacks_out``
    receives the haystacks read (read_haystacks), for a caller that needs them too;
    ``reads`` what it read, for a caller reading the same files (budgets.compute):
    ``questions``, ``rankings`` (read_rankings' three) and, where it read them,
    ``haystacks`` (without dates). Nothing read is changed here."""
    from ..retrieval.harness import user_target_sessions  # the rule an imported run is read under too

    questions = read_questions(questions_path)
    ranked = read_rankings(rankings_path)
    rankings, depth, known = ranked
    if reads is not None:
        reads.update(questions=questions, rankings=ranked)
    progress = Progress(log, f"official ({fmt})", total=len(questions), unit="questions")
    if fmt in LME_FORMATS:
        hids = {q["haystack_id"] for q in questions if q["haystack_id"] >= 0}
        haystacks = read_haystacks(haystacks_path, hids, dates=haystacks_out is not None)
        if haystacks_out is not None:
            haystacks_out.update(haystacks)
        elif reads is not None:
            reads["haystacks"] = haystacks
        rows = lme_per_question(questions, haystacks, user_target_sessions(events_path), rankings, rankings_path,
                                known, progress)
        block = lme_block(rows, questions, depth)
    elif FORMATS[fmt].scorer == "locomo":
        rows = locomo_per_question(questions, rankings, progress)
        block = locomo_block(rows, depth)
    else:
        return None, []
    progress(len(questions), f", done: {block['questions']} averaged at depth {depth}", force=True)
    return block, rows


def __getattr__(name: str):
    """harness's official rules (scoring_id, user_target_sessions), named
    here too: imported when first asked for, with pyarrow."""
    if name in ("scoring_id", "user_target_sessions"):
        from ..retrieval import harness

        return getattr(harness, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
