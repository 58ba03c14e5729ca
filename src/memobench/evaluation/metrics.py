"""Metrics from per-question outcomes (docs/harnesses.md#metrics and docs/protocol.md#harness-metrics).

Counts and sums are accumulated in question order, so a segmented run merges
to exactly the numbers of an unsegmented one (rates are never averaged).
"""

from __future__ import annotations

from collections import Counter
from math import comb

from ..core.errors import DataError
from ..core.jsmath import to_fixed
from .measures import HITS, MEASURES

_CUTOFFS = tuple((k, MEASURES[k].cutoff) for k in HITS)  # (hit@k, k) of each harness hit rate


def _block() -> dict:
    return {"questions": 0, **{k: 0 for k in HITS}, "mrr_sum": 0.0}


def _add(block: dict, rank: int) -> None:
    block["questions"] += 1
    for k, cutoff in _CUTOFFS:
        if 1 <= rank <= cutoff:
            block[k] += 1
    if rank > 0:
        block["mrr_sum"] += 1 / rank


def _rates(block: dict, hit_denominator: int | None = None) -> dict:
    """Rates as the harness prints them. exp4-m/exp5-m divide the hit counts by
    ``evaluated`` (which includes their unrecorded empty-seq questions) while n
    and the MRR use the recorded count: ``hit_denominator`` carries that."""
    n = block["questions"]
    d = n if hit_denominator is None else hit_denominator
    out = dict(block)
    out["hit_denominator"] = d
    for k in HITS:
        out[k + "_rate"] = block[k] / d if d else None
    out["mrr"] = block["mrr_sum"] / n if n else None
    return out


def random_hit(pool: int, gold: int, k: int) -> float:
    """The chance that a uniformly random ranking of ``pool`` positions, ``gold``
    of them holding a gold session, puts one of those in its top ``k``:
    1 - C(pool - gold, k) / C(pool, k) (0 when the pool has no gold position)."""
    k = min(k, pool)
    if gold <= 0 or k <= 0:
        return 0.0
    return 1 - comb(pool - gold, k) / comb(pool, k)


def compute(outcomes: list[dict], segments: list[list[dict]] | None = None) -> dict:
    """``outcomes``: rows of the outcomes table in question order."""
    total = _block()
    types: dict[str, dict] = {}
    skipped: Counter = Counter()
    forced: Counter = Counter()
    unrecorded = 0
    for row in outcomes:
        if row["status"] == "skipped":
            skipped[row["reason"]] += 1
            continue
        if row["status"] == "unrecorded":
            unrecorded += 1
            continue
        _add(total, row["gold_rank"])
        if row["reason"]:
            forced[row["reason"]] += 1
        if row["in_types"]:
            _add(types.setdefault(row["question_type"], _block()), row["gold_rank"])
    # The harnesses print types by n descending, ties in order of first appearance.
    order = sorted(types, key=lambda t: -types[t]["questions"])
    result = _rates(total, total["questions"] + unrecorded if unrecorded else None)
    result["unrecorded"] = unrecorded
    result["by_type"] = {t: _rates(types[t]) for t in order}
    result["skipped"] = dict(sorted(skipped.items()))
    result["counted_as_miss"] = dict(sorted(forced.items()))
    result["items"] = len(outcomes)
    pooled = [row for row in outcomes if row["status"] == "evaluated" and row["pool_size"] > 0]
    pools = [row["pool_size"] for row in pooled]
    result["mean_pool_size"] = sum(pools) / len(pools) if pools else None
    # Expected hit@k of a uniformly random ranking of each question's pool, its gold positions counted
    result["random"] = {
        k: (sum(random_hit(row["pool_size"], row["gold_in_pool"], c) for row in pooled) / len(pooled)
            if pooled else None) for k, c in _CUTOFFS
    }
    # the share of those questions whose pool holds k or fewer sessions: their hit@k is bought by the pool
    result["pool_at_most"] = {k: (sum(p <= c for p in pools) / len(pools) if pools else None) for k, c in _CUTOFFS}
    if segments is not None:
        segs = []
        for i, seg in enumerate(segments, 1):
            b = _block()
            seg_unrecorded = 0
            for row in seg:
                if row["status"] == "evaluated":
                    _add(b, row["gold_rank"])
                elif row["status"] == "unrecorded":
                    seg_unrecorded += 1
            r = _rates(b, b["questions"] + seg_unrecorded if seg_unrecorded else None)
            r["segment"] = i
            r["mrr_printed"] = to_fixed(r["mrr"], MEASURES["mrr"].digits) if r["mrr"] is not None else None
            segs.append(r)
        result["segments"] = segs
        printed = [float(s["mrr_printed"]) for s in segs if s["mrr_printed"] is not None]
        # The published exp6-m M total is the plain mean of the printed segment MRRs.
        result["mrr_mean_of_printed_segments"] = sum(printed) / len(printed) if printed else None
    return result


# The least share of its evaluated questions a variant must give lists for to enter the paired tests
# (stats.py, `memobench score`): a question an imported run does not list counts as its miss, so below
# this a paired difference measures how much of the set the file covers, not how well it ranks.
MIN_COVERAGE = 0.5


def coverage(m: dict) -> tuple[int, int]:
    """(questions a variant's lists cover, questions evaluated), from metrics.json: a question an imported
    run does not list (``absent_from_run``) is evaluated, as a miss, but not covered."""
    from ..retrieval.imported import ABSENT

    n = m.get("questions") or 0
    return n - (m.get("counted_as_miss") or {}).get(ABSENT, 0), n


def too_few(covered: int, questions: int) -> bool:
    """Covering fewer than :data:`MIN_COVERAGE` of the evaluated questions: left out of the paired tests."""
    return covered < MIN_COVERAGE * questions


def pct(count: int, n: int, digits: int = 1) -> str:
    """``(100 * count / n).toFixed(digits)`` as the harnesses print it."""
    return to_fixed(100 * count / n, digits) if n else "NaN"


# --------------------------------------------------------------------------- merge stage

# Parquet key-value metadata of an imported run's outcomes tables: what the
# import read and counted (imported.import_segment), metrics.json's ``run``.
IMPORTED_KEY = b"memobench.imported"


def imported_summary(seg_tables, file: str = "the run file") -> dict | None:
    """The segments' import records as one: the file's fields once, the counts summed."""
    import json

    parts = [json.loads(t.schema.metadata[IMPORTED_KEY]) for t in seg_tables
             if IMPORTED_KEY in (t.schema.metadata or {})]
    if not parts:
        return None
    if len({p["sha256"] for p in parts}) > 1:
        # each segment checked its bytes against the run's record: segments of two records never merge
        raise DataError(file, None,
                        f"its segments read different files (sha256 {', '.join(p['sha256'][:12] for p in parts)}); "
                        f"rerun to score the file as it is now")
    out = dict(parts[0])
    for k in ("listed", "absent", "truncated"):
        out[k] = sum(p[k] for p in parts)
    ignored: Counter = Counter()
    for p in parts:
        ignored.update(p["ignored"])
    out["ignored"] = dict(sorted(ignored.items()))
    return out

def checks_summary(seg_tables) -> dict:
    """The segments' checks of a user's retriever (harness.CHECKS_KEY) as
    one, metrics.json's ``determinism`` and ``timeouts``, or a memory
    service's ``system_errors`` (empty for any other variant): the counts
    summed and the question ids listed, never a rate averaged."""
    import json

    from ..retrieval.attribution import merged as attribution_merged
    from ..retrieval.harness import CHECKS_KEY

    parts = [json.loads(t.schema.metadata[CHECKS_KEY]) for t in seg_tables
             if CHECKS_KEY in (t.schema.metadata or {})]
    if not parts:
        return {}
    if "system_errors" in parts[0]:  # a memory service's (services/job/rank.py)
        errors = [p["system_errors"] for p in parts]
        return {"system_errors": {"count": sum(e["count"] for e in errors),
                                  "max_per_job": errors[0]["max"],
                                  "questions": [q for e in errors for q in e["questions"]]},
                **({"system_determinism": service_determinism([p["system_determinism"] for p in parts])}
                   if all("system_determinism" in p for p in parts) else {}),
                # a service that answers in text: how its items were attributed (retrieval/attribution.py)
                **({"attribution": attribution_merged([p["attribution"] for p in parts])}
                   if all("attribution" in p for p in parts) else {})}
    limits = sorted({p["timeouts"]["limit_s"] for p in parts}, key=lambda x: (x is None, x))
    return {
        "determinism": {"checked": sum(p["determinism"]["checked"] for p in parts),
                        "differing": sum(p["determinism"]["differing"] for p in parts),
                        "questions": [q for p in parts for q in p["determinism"]["questions"]]},
        "timeouts": {"limit_s": limits[0] if len(limits) == 1 else limits,
                     "count": sum(p["timeouts"]["count"] for p in parts),
                     "questions": [q for p in parts for q in p["timeouts"]["questions"]]},
        # a retriever that returns text: how its items were attributed (retrieval/attribution.py)
        **({"attribution": attribution_merged([p["attribution"] for p in parts])}
           if all("attribution" in p for p in parts) else {}),
    }


def service_determinism(parts: list[dict]) -> dict:
    """A memory service's segments' determinism checks (services/job/determinism.py) as one: counts and
    figures summed, question ids listed."""
    def summed(key):
        got = [p["replicas"][key] for p in parts if p["replicas"][key] is not None]
        return {k: round(sum(g[k] for g in got), 6) for k in got[0]} if got else None

    return {"replicas": {**{k: sum(p["replicas"][k] for p in parts) for k in ("namespaces", "questions", "unanswered")},
                         "differing": [q for p in parts for q in p["replicas"]["differing"]],
                         "first": summed("first"), "replica": summed("replica")},
            "repeats": {"checked": sum(p["repeats"]["checked"] for p in parts),
                        "differing": [q for p in parts for q in p["repeats"]["differing"]]},
            "concurrent": {"differing": [q for p in parts for q in p["concurrent"]["differing"]]}}


def attribution_warnings(checks: dict) -> list[str]:
    """Ids returned beside a text that the text does not match (metrics.json ``attribution``: a service's or a
    Python retriever's that returns text), one sentence."""
    a = checks.get("attribution")
    if not a or not a["ids_mismatched"]:
        return []
    first = a["mismatches"][0]
    return [f"{a['ids_mismatched']} of {a['ids_checked']} ids it returned beside a text do not hold that text "
            f"(a wrong id; first: question {first['question']!r}, rank {first['rank']}, id {first['id']!r}); its "
            f"figures rank those ids as returned"]


def service_warnings(checks: dict, retriever: dict) -> list[str]:
    """What qualifies a memory service's figures beyond degenerate answers, one sentence each: lists that
    moved when searched again (metrics.json's ``system_determinism``), and conformance checks its config skips."""
    out = []
    d = checks.get("system_determinism")
    if d:
        r = d["replicas"]
        if r["differing"]:
            moved = ""
            if r["first"] is not None and r["questions"]:
                a, b, n = r["first"], r["replica"], r["questions"]
                moved = (f"; over those {n} questions hit@1 {a['hit@1']} then {b['hit@1']}, hit@5 {a['hit@5']} then "
                         f"{b['hit@5']}, MRR {a['mrr_sum'] / n:.3f} then {b['mrr_sum'] / n:.3f}")
            out.append(f"its lists move between runs: {len(r['differing'])} of {r['questions']} questions searched "
                       f"again in a fresh namespace holding the same sessions ({r['namespaces']} haystack"
                       f"{'s' if r['namespaces'] != 1 else ''}, system.determinism) gave another list{moved}; its figures are not the same run to run")
        if d["repeats"]["differing"]:
            out.append(f"its lists move between runs: {len(d['repeats']['differing'])} of {d['repeats']['checked']} "
                       f"searches repeated in a row (warm_repeats) gave another list")
        if d["concurrent"]["differing"]:
            out.append(f"its lists move under load: {len(d['concurrent']['differing'])} questions searched "
                       f"concurrently (system.load) gave another list than searched alone")
    out += attribution_warnings(checks)
    check = retriever.get("check")
    if isinstance(check, dict) and check.get("skip"):
        out.append(f"its conformance check skipped {', '.join(check['skip'])} (system.check.skip): what "
                   f"{'that check confirms' if len(check['skip']) == 1 else 'those checks confirm'} was not "
                   f"confirmed")
    return out


def concat_rankings(paths):
    """The segments' ranking tables (top-10 or deep) in question order."""
    import pyarrow as pa

    from ..core.tables import read_table, sort_by

    t = pa.concat_tables([read_table(p) for p in paths])
    return sort_by(t, [("q_index", "ascending"), ("rank", "ascending")])


def degenerate(result: dict, outcomes: list[dict], deep) -> list[str]:
    """What is degenerate about a variant's lists, one sentence each (none: []): every evaluated
    question's list empty; every list its haystack in haystack (ingestion) order, whatever the scores;
    hit@k at or below a random ranking's at some k (``result``: :func:`compute`'s, with
    ``empty_lists``; ``deep``: the merged deep table). Each is what a service that ignores the
    question, lost what it held or answers from nothing gives with exit status 0."""
    evaluated = [row for row in outcomes if row["status"] == "evaluated"]
    if not evaluated:
        return []
    if result["empty_lists"] == len(evaluated):
        return [f"every list is empty ({len(evaluated)} questions evaluated): the service found nothing; it may "
                f"have lost or never received the sessions"]
    out = []
    d = deep.select(["q_index", "position"]).to_pydict()
    lists: dict[int, list] = {}
    for q, pos in zip(d["q_index"], d["position"]):
        lists.setdefault(q, []).append(pos)
    pools = {row["q_index"]: row["pool_size"] for row in evaluated}
    listed = [(lists[q], pools[q]) for q in pools if q in lists]
    # a pool of one is in haystack order whatever ranks it: the check needs one list that could differ
    if (listed and any(p > 1 for _, p in listed) and all(None not in ps for ps, _ in listed)
            and all(ps == list(range(len(ps))) and len(ps) >= min(p, 10) for ps, p in listed)):
        out.append(f"every list is its haystack in ingestion order ({len(listed)} lists): the ranking ignores "
                   f"the question")
    rnd = result.get("random") or {}
    below = [f"{k} {100 * result[k + '_rate']:.1f}% <= {100 * rnd[k]:.1f}%" for k in HITS
             # a k at or above every pool: a random ranking hits as often as any, and no ranking does better
             if rnd.get(k) is not None and rnd[k] < 1 and result.get(k + "_rate") is not None
             and result[k + "_rate"] <= rnd[k]]
    if below and not out:
        out.append(f"recall at or below a random ranking's ({', '.join(below)}, random's expected hit@k over the "
                   f"same pools)")
    return out


def merge_segments(dataset: str, variant_spec: dict, rankings_in, outcomes_in, data_summary,
                   rankings_out, outcomes_out, metrics_out, log=print, deep_in=None, warn=None,
                   columns: dict | None = None) -> None:
    """Merge a variant's segments: rankings concatenated in question order, the
    per-question outcomes (with each list's length, so an evaluated question
    with an empty list is visible), and the counts recomputed over all
    questions (never an average of rates). ``columns``: more per-question
    columns of the outcomes, {name: (Arrow type, {q_index: value})}, null
    for a question not given (budgets.outcome_columns)."""
    import json
    from array import array
    from pathlib import Path

    import pyarrow as pa

    from ..core.provenance import PROVENANCE_KEY
    from ..core.atomic import write_json
    from ..core.tables import kernels, read_table, sort_by, write_table

    rankings = concat_rankings(rankings_in)
    seg_tables = [sort_by(read_table(p), "q_index") for p in outcomes_in]
    per_segment = [t.to_pylist() for t in seg_tables]
    outcomes = [row for seg in per_segment for row in seg]
    result = compute(outcomes, per_segment)

    # list length per question: 0 for an evaluated question whose list is empty
    counts = kernels().call_function("value_counts", [rankings.column("q_index")]) if rankings.num_rows else []
    n_ranked = {c["values"]: c["counts"] for c in (counts.to_pylist() if rankings.num_rows else [])}
    merged = pa.concat_tables([t.replace_schema_metadata(None) for t in seg_tables])
    # built on its buffer: pa.array of a list runs pyarrow's pandas probe,
    # which imports pandas (0.3 s) wherever the jobs' guard is not in place
    n_col = array("b", [n_ranked.get(q, 0) for q in merged.column("q_index").to_pylist()])
    merged = merged.append_column("n_ranked", pa.Array.from_buffers(pa.int8(), len(n_col), [None, pa.py_buffer(n_col)]))
    q_order = merged.column("q_index").to_pylist()
    for name, (kind, by_question) in (columns or {}).items():
        merged = merged.append_column(name, pa.array([by_question.get(q) for q in q_order], kind))
    result["empty_lists"] = sum(1 for row in outcomes if row["status"] == "evaluated"
                                and n_ranked.get(row["q_index"], 0) == 0)

    # where each segment was computed (recorded by the retrieve job)
    seen = []
    for t in seg_tables:
        raw = (t.schema.metadata or {}).get(PROVENANCE_KEY)
        prov = json.loads(raw) if raw else None
        if prov not in seen:
            seen.append(prov)
    meta = {"dataset": dataset, "variant": variant_spec["name"], "harness": variant_spec["harness"],
            # what ranked it, stated by the plan (plan.merge_spec: the merge job imports no retriever's code)
            "description": variant_spec["description"], **variant_spec.get("ranked", {}),
            "skip_rule": variant_spec["skip"], "baseline": variant_spec.get("baseline", ""),
            # a turn variant says so (its sessions are read at their best turn); a session variant's file is
            # as it was before grains existed
            **({"grain": variant_spec["grain"]} if variant_spec.get("grain") else {}),
            "provenance": seen[0] if len(seen) == 1 else seen,
            **({"run": {**variant_spec["run"], **(imported_summary(seg_tables, variant_spec["run"]["file"]) or {})}} if variant_spec.get("run") else {}),
            # what normalization counted (date fallbacks, unmatched evidence, ...)
            "data": {k: v for k, v in json.loads(Path(data_summary).read_text(encoding="utf-8")).items()
                     if k != "source"}}
    checks = checks_summary(seg_tables)
    ranked = variant_spec.get("ranked", {})
    if ranked.get("kind") == "system":
        from ..services.identity import merged as served_by

        # what served it (a server's name and version, its package, the host), beside what the config says
        meta["system"] = {**meta.get("system", {}), **served_by(seg_tables)}
    if ranked.get("kind") == "system" and deep_in is not None:
        # a memory service's answers, checked for what passes as a ranking with exit status 0
        said = [f"variant {variant_spec['name']!r} on {dataset}: {w}"
                for w in degenerate(result, outcomes, concat_rankings(deep_in))]
        if said and (variant_spec.get("retriever") or {}).get("degenerate", "warn") == "error":
            from ..retrieval.returned import RetrieverError

            raise RetrieverError(f"{said[0]} (system.degenerate: error)")
        said += [f"variant {variant_spec['name']!r} on {dataset}: {w}"
                 for w in service_warnings(checks, variant_spec.get("retriever") or {})]
        for line in said:
            log(f"warning: {line}")
            (warn or (lambda m: None))(f"memobench: warning: {line}")
        checks["warnings"] = said
    elif attribution_warnings(checks):  # a Python retriever's wrong ids beside its texts
        said = [f"variant {variant_spec['name']!r} on {dataset}: {w}" for w in attribution_warnings(checks)]
        for line in said:
            log(f"warning: {line}")
            (warn or (lambda m: None))(f"memobench: warning: {line}")
        checks["warnings"] = said
    write_table(rankings_out, rankings)
    write_table(outcomes_out, merged)
    write_json(metrics_out, {**meta, **result, **checks})
    log(f"{dataset} {variant_spec['name']}: {result['questions']} questions, hit@1 {result['hit@1']}, "
        f"hit@5 {result['hit@5']}, hit@10 {result['hit@10']}, MRR sum {result['mrr_sum']}, "
        f"{result['empty_lists']} empty lists")
