"""LongMemEval's own retrieval evaluation, as a test oracle: its corpora (session
and turn granularity), its flat BM25, its metrics and its averages, written out
here from the published rules of ``src/retrieval/run_retrieval.py`` and
``src/retrieval/eval_utils.py`` (repository xiaowu0162/LongMemEval) in the
plainest form: sets, list slices and numpy where that code uses numpy, with no
shortcut the product takes. It reads the raw JSON file, never the project's
tables.
"""

from __future__ import annotations

import numpy as np
from rank_bm25 import BM25Okapi

KS = (1, 3, 5, 10, 30, 50)


def corpus(entry: dict, granularity: str) -> tuple[list[str], list[str]]:
    """(documents, corpus ids) of one question, in haystack then turn order."""
    docs, ids = [], []
    for sid, session in zip(entry["haystack_session_ids"], entry["haystack_sessions"]):
        user = [t for t in session if t["role"] == "user"]
        if granularity == "session":
            docs.append(" ".join(t["content"] for t in user))
            if "answer" in sid and all(not t["has_answer"] for t in user):
                ids.append(sid.replace("answer", "noans"))
            else:
                ids.append(sid)
            continue
        for i, t in enumerate(session):
            if t["role"] != "user":
                continue
            docs.append(t["content"])
            tid = sid + "_" + str(i + 1)
            if "answer" in sid and not t["has_answer"]:
                tid = tid.replace("answer", "noans")
            ids.append(tid)
    return docs, ids


def flat_bm25(question: str, docs: list[str]) -> list[int]:
    bm25 = BM25Okapi([d.split(" ") for d in docs])
    return np.argsort(bm25.get_scores(question.split(" ")))[::-1].tolist()


def dcg(relevances, k):
    r = np.asarray(relevances, dtype=float)[:k]
    if r.size:
        return r[0] + np.sum(r[1:] / np.log2(np.arange(2, r.size + 1)))
    return 0.0


def ndcg(rankings, correct, corpus_ids, k):
    rel = [1 if c in correct else 0 for c in corpus_ids]
    ideal = dcg(sorted(rel, reverse=True), k)
    actual = dcg([rel[i] for i in rankings[:k]], k)
    return 0.0 if ideal == 0 else actual / ideal


def evaluate(rankings, correct, corpus_ids, k):
    recalled = set(corpus_ids[i] for i in rankings[:k])
    return (float(any(c in recalled for c in correct)), float(all(c in recalled for c in correct)),
            ndcg(rankings, correct, corpus_ids, k))


def evaluate_turn2session(rankings, correct, corpus_ids, k):
    def strip(x):
        return "_".join(x.split("_")[:-1])

    correct = list(set(strip(c) for c in correct))
    corpus_ids = [strip(c) for c in corpus_ids]
    eff = k
    seen = set(corpus_ids[i] for i in rankings[:eff])
    while eff <= len(corpus_ids) and len(seen) < k:
        eff += 1
        seen = set(corpus_ids[i] for i in rankings[:eff])
    return evaluate(rankings, correct, corpus_ids, eff)


def question_metrics(rankings: list[int], corpus_ids: list[str], granularity: str) -> dict:
    """{"session": {...}, "turn": {...}} as run_retrieval.py records one question."""
    correct = list(set(c for c in corpus_ids if "answer" in c))
    out = {"session": {}, "turn": {}}
    for k in KS:
        a, b, n = evaluate(rankings, correct, corpus_ids, k)
        out[granularity].update({f"recall_any@{k}": a, f"recall_all@{k}": b, f"ndcg_any@{k}": n})
        if granularity == "turn":
            a, b, n = evaluate_turn2session(rankings, correct, corpus_ids, k)
            out["session"].update({f"recall_any@{k}": a, f"recall_all@{k}": b, f"ndcg_any@{k}": n})
    return out


def averaged(results: list[dict]) -> dict:
    """run_retrieval.py's printed means: abstention questions and questions
    with no user turn holding has_answer left out (with the counts of each)."""
    abstention = [r for r in results if "_abs" in r["question_id"]]
    kept = [r for r in results if "_abs" not in r["question_id"]
            and any(t.get("has_answer") for s in r["haystack_sessions"] for t in s if t["role"] == "user")]
    out = {"questions": len(kept), "abstention": len(abstention),
           "no_user_target": len(results) - len(kept) - len(abstention)}
    for grain in ("session", "turn"):
        names = results[0]["metrics"][grain] if results else {}
        out[grain] = {m: float(np.mean([r["metrics"][grain][m] for r in kept])) for m in names}
    return out


def run(items: list[dict], granularity: str) -> list[dict]:
    """Every question ranked by flat BM25 and scored: {question_id, haystack_sessions, rankings, corpus_ids, metrics}."""
    out = []
    for entry in items:
        docs, ids = corpus(entry, granularity)
        rankings = flat_bm25(entry["question"], docs)
        out.append({"question_id": entry["question_id"], "haystack_sessions": entry["haystack_sessions"],
                    "rankings": rankings, "corpus_ids": ids,
                    "metrics": question_metrics(rankings, ids, granularity)})
    return out
