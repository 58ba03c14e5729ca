"""The dataset-wide FTS5 index gives exactly the lists of the per-haystack
in-memory tables the harnesses rebuild (rowid ranges, LIMIT, ids, empty
sessions, duplicate ids)."""

from __future__ import annotations

import json

import pytest

from memobench.ftsindex import FtsIndex, build_index
from memobench.generate import write_longmemeval
from memobench.normalize import normalize_locomo, normalize_longmemeval
from memobench.retrieval import load_segment, run_segment
from memobench.variants import resolve


def _big_haystack_item():
    sessions = [[{"role": "user", "content": f"note {i}: we talked about the garden plan"}] for i in range(620)]
    sessions[610] = [{"role": "user", "content": "the garden plan with roses, finally"}]
    sessions[3] = []  # an empty session is a row too
    ids = [f"s{i}" for i in range(620)]
    ids[5] = ids[7]  # a duplicate id
    return {"question_id": "big", "question_type": "multi-session", "question": "What was the garden plan?",
            "question_date": "2023/05/30 (Tue) 23:40", "haystack_session_ids": ids,
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * 620, "haystack_sessions": sessions,
            "answer_session_ids": ["s610"]}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, locomo_path):
    root = tmp_path_factory.mktemp("ftsindex")
    lme = root / "lme.json"
    write_longmemeval(lme, n_questions=50, sessions_per_question=20, seed=13, spice=True)
    items = json.loads(lme.read_text())
    items.append(_big_haystack_item())
    lme.write_text(json.dumps(items, ensure_ascii=False))
    normalize_longmemeval(lme, root / "lme", log=lambda m: None)
    normalize_locomo(locomo_path, root / "locomo", log=lambda m: None)
    for d in ("lme", "locomo"):
        build_index(root / d / "haystacks.parquet", root / d / "events.parquet", root / d / "index.sqlite",
                    log=lambda m: None)
    return root


@pytest.mark.parametrize("name,family,variants", [
    ("lme", "s", ["v0.8.0", "v0.5.0", "exp4-C-idfProxy", "exp-V1", "exp3-T2h"]),
    ("lme", "m", ["v0.8.0", "exp5m-S2"]),
    ("locomo", "locomo", ["v0.8.0", "v0.4.0"]),
])
def test_index_equals_per_haystack_tables(datasets, name, family, variants):
    d = datasets / name
    for v in variants:
        variant = resolve(v, family)
        qs, hs, corpus = load_segment(d / "questions.parquet", d / "haystacks.parquet", d / "events.parquet", 1, 1)
        plain = run_segment(variant, qs, hs, corpus, log=lambda m: None)
        indexed = run_segment(variant, qs, hs, corpus, log=lambda m: None, fts_index=FtsIndex(d / "index.sqlite"))
        assert plain[0].equals(indexed[0]) and plain[1].equals(indexed[1]), v


def test_limit_binds_inside_the_haystack_range(datasets):
    d = datasets / "lme"
    index = FtsIndex(d / "index.sqlite")
    qs = load_segment(d / "questions.parquet", d / "haystacks.parquet", d / "events.parquet", 1, 1)[0]
    big = next(q for q in qs if q["question_id"] == "big")
    hits = index.positions(big["haystack_id"], '"garden"', 500)
    assert len(hits) == 500 and hits[:3] == [0, 1, 2] and 610 not in hits
    assert 610 in index.positions(big["haystack_id"], '"garden"', 2000)
    assert index.positions(big["haystack_id"], '"s7"', 2000) == [5, 7]  # the id column is indexed
