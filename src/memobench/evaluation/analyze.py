"""analyze.cjs: the miss decomposition and the oracle ceilings (docs/harnesses.md#analyzecjs).

Kept as the original computes them, including two quirks the guide's prose
misreads: ``merge-cut`` is structurally always 0, and the "IDF rerank hit@1"
is really a hit@10 without phrase-first ordering.
"""

from __future__ import annotations

import pyarrow as pa

from ..memo.engine import REQUEST_LIMIT, Corpus, Haystack, Ranker, Recipe, Scorer, merge_final
from ..memo.fts5 import PhraseMatcher, Unicode61
from ..memo.recipe import ANALYZE_RECIPE
from ..core.jsmath import to_fixed
from . import metrics
from ..core.progress import Progress
from ..retrieval.memo import load_segment, token_tables
from ..core.atomic import write_json, write_text
from ..core.tables import write_table
from ..memo.tokenize import seq_ascii

RECIPE = ANALYZE_RECIPE
CAUSES = ("no-anchor", "discovered-cut", "merge-cut", "near-miss")

ROWS = pa.schema([
    ("q_index", pa.int32()), ("question_id", pa.string()), ("question_type", pa.string()),
    ("rank", pa.int8()), ("merged_rank", pa.int32()), ("coverage", pa.int32()), ("window_size", pa.int32()),
    ("ceiling_union", pa.bool_()), ("ceiling_top10", pa.bool_()), ("idf_rerank_hit", pa.bool_()),
    ("cause", pa.string()), ("gold_events", pa.int32()), ("gold_sessions", pa.int32()), ("question", pa.string()),
])


def _first_rank(ids: list[str], gold: set[str]) -> int:
    for r, sid in enumerate(ids, 1):
        if sid in gold:
            return r
    return 0


def analyze_question(ranker: Ranker, corpus: Corpus, hay: Haystack, hay_token, q: dict) -> dict | None:
    """One question's diagnostics, or None when analyze.cjs skips it."""
    question, gold = q["question"], set(q["gold"])
    if not gold or not hay.ids or not seq_ascii(question):
        return None
    window = RECIPE.window_tokens(question)
    if len(window) <= 1:
        return None
    ranker.backend.load(hay, hay_token)
    phrases = [("question", question, ())] + ranker.phrases(window)
    lists = {text: ranker.candidates(hay, text, kind) for kind, text, _ in phrases}
    union_all: dict[int, None] = {}
    union_top: dict[int, None] = {}
    for _, text, _ in phrases:
        for n, (i, _t) in enumerate(lists[text]):
            union_all.setdefault(i)
            if n < REQUEST_LIMIT:
                union_top.setdefault(i)
    # a gold id may name no session (an id past the last one): it adds no events
    # here, yet analyze.cjs counts it among the gold sessions of its examples
    gold_pos = {hay.by_id[g] for g in gold if g in hay.by_id}
    gold_tokens: set[str] = set()
    gold_events = 0
    for i in gold_pos:
        events = corpus.event_tokens(hay.keys[i], "ascii")
        gold_events += len(events)
        for tokens in events:
            gold_tokens.update(tokens)
    coverage = sum(1 for t in window if t in gold_tokens)
    # Baseline (0.7.x): length weights, page 10, P then ALL of T (uncut) minus P.
    counts, rep_time = ranker.weighted(hay, window)  # RECIPE: length weights, page 10
    t_all = [hay.ids[i] for i in sorted(counts, key=lambda i: (-counts[i], -rep_time[i]))]
    p_ids = [hay.ids[i] for i, _ in lists[question][:REQUEST_LIMIT]]
    merged = merge_final(p_ids, t_all, "prepend", cut=None)
    rank = _first_rank(merged[:REQUEST_LIMIT], gold)
    merged_rank = _first_rank(merged, gold)
    ceiling_union = any(hay.ids[i] in gold for i in union_all)
    ceiling_top = any(hay.ids[i] in gold for i in union_top)
    idf_hit = False
    if ceiling_union:
        sc = Scorer(ranker.backend, hay, RECIPE)
        score = {i: 0.0 for i in union_all}
        for kind, text, parts in phrases[1:]:
            if kind == "token":
                w = 4 * sc.idf(text, capped=False)
            else:
                w = 2 * max(sc.idf(parts[0], capped=False), sc.idf(parts[1], capped=False))
            for i, _t in lists[text][:REQUEST_LIMIT]:
                score[i] += w

        def last_time(i):
            return hay.bases[i] + corpus.n_events(hay.keys[i]) - 1

        top = sorted(score, key=lambda i: (-score[i], -last_time(i)))[:REQUEST_LIMIT]
        idf_hit = any(hay.ids[i] in gold for i in top)
    cause = None
    if rank == 0:
        if coverage == 0:
            cause = "no-anchor"
        elif not ceiling_top:
            cause = "discovered-cut"
        elif merged_rank == 0:
            cause = "merge-cut"
        else:
            cause = "near-miss"
    return {
        "q_index": q["q_index"], "question_id": q["question_id"], "question_type": q["question_type"],
        "rank": rank, "merged_rank": merged_rank, "coverage": coverage, "window_size": len(window),
        "ceiling_union": ceiling_union, "ceiling_top10": ceiling_top, "idf_rerank_hit": idf_hit,
        "cause": cause, "gold_events": gold_events, "gold_sessions": len(gold), "question": question,
    }


def summarize(rows: list[dict]) -> dict:
    total = len(rows)

    def pct(n, d=total):
        return metrics.pct(n, d)

    h1 = sum(r["rank"] == 1 for r in rows)
    h5 = sum(1 <= r["rank"] <= 5 for r in rows)
    h10 = sum(1 <= r["rank"] <= 10 for r in rows)
    misses = total - h10
    causes = {c: sum(r["cause"] == c for r in rows) for c in CAUSES}
    covered = [r for r in rows if r["coverage"] > 0]
    types = sorted({r["question_type"] for r in rows})
    return {
        "questions": total,
        "baseline": {"hit@1": h1, "hit@5": h5, "hit@10": h10,
                     "printed": {"hit@1": pct(h1), "hit@5": pct(h5), "hit@10": pct(h10)}},
        "ceilings": {
            "union": sum(r["ceiling_union"] for r in rows),
            "top10": sum(r["ceiling_top10"] for r in rows),
            "idf_rerank": sum(r["idf_rerank_hit"] for r in rows),
            "printed": {
                "union": pct(sum(r["ceiling_union"] for r in rows)),
                "top10": pct(sum(r["ceiling_top10"] for r in rows)),
                # analyze.cjs labels this hit@1; it counts any gold in the first 10.
                "idf_rerank": pct(sum(r["idf_rerank_hit"] for r in rows)),
            },
        },
        "misses": misses,
        "causes": {c: {"count": n, "share_of_misses": pct(n, max(1, misses)), "share_of_all": pct(n)}
                   for c, n in causes.items()},
        "mean_coverage": to_fixed(sum(r["coverage"] / min(r["window_size"], 8) for r in covered) / len(covered), 2)
        if covered else "NaN",
        "coverage_zero": total - len(covered),
        "by_type": {t: {c[:5]: sum(r["cause"] == c and r["question_type"] == t for r in rows) for c in CAUSES}
                    for t in types},
        "examples": {c: [{"question": r["question"][:70], "coverage": r["coverage"], "gold_events": r["gold_events"],
                          "gold_sessions": r["gold_sessions"], "merged_rank": r["merged_rank"]}
                         for r in rows if r["cause"] == c][:3] for c in CAUSES},
    }


def markdown(dataset: str, s: dict) -> str:
    from .analyze_section import blocks
    from ..core.doc import to_markdown

    return to_markdown(blocks(dataset, s))


def run_analyze(questions_path, haystacks_path, events_path, rows_out, json_out, md_out, dataset: str,
                tokens_path=None, fts_tokens_path=None, log=print):
    # texts only when a tokens table is missing (a direct call)
    questions, haystacks, corpus = load_segment(questions_path, haystacks_path, events_path, 1, 1,
                                                tokens=token_tables(RECIPE.seq, tokens_path, fts_tokens_path),
                                                texts=not (tokens_path and fts_tokens_path))
    ranker = Ranker(corpus, RECIPE, PhraseMatcher(Unicode61(), RECIPE.fts_limit, corpus.fts_vocab))
    rows = []
    progress = Progress(log, f"analyze {dataset}", total=len(questions), unit="questions")
    for n, q in enumerate(questions, 1):
        hay = haystacks.get(q["haystack_id"])
        if hay is not None:
            row = analyze_question(ranker, corpus, hay, q["haystack_id"], q)
            if row is not None:
                rows.append(row)
        progress(n)
    summary = summarize(rows)
    write_table(rows_out, pa.Table.from_pylist(rows, schema=ROWS))
    write_json(json_out, {"dataset": dataset, **summary})
    write_text(md_out, markdown(dataset, summary))
    progress(len(questions), f", done: baseline {summary['baseline']['printed']}", force=True)
