"""What the report says beside a figure is true of that figure: the
published figures of the report's datasets only, the exclusions of each
convention as the main table counts them, each variant's list depth, a
minimum detectable difference only where the differences vary, a run that
covers few questions flagged and kept out of the paired tests; and what
metrics.json says a variant is."""

from __future__ import annotations

import json

import numpy as np

from memobench.evaluation import correction, official
from memobench.reporting import conventions, markdown
from memobench.reporting.report import build_report
from tests.unit.reporting.test_report import _md_rows, _run, _stats


def _locomo_official(depth: int, n: int = 6) -> dict:
    metrics = {f"{name}@{k}": 0.5 for name in ("recall_any", "recall_all") for k in official.KS}
    view = {"excluded": {"no_evidence": 2}, "questions": n, "not_ranked": 0, **metrics}
    c14 = {**view, "excluded": {"no_evidence": 2, "category_5": 1}, "questions": n - 1}
    return {"rules": "LoCoMo evidence sessions (recall_any/recall_all)", "depth": depth, **view,
            "categories_1_4": c14,
            "conventions": {"all_categories": {"convention": official.CONVENTIONS["all_categories"], **view},
                            "categories_1_4": {"convention": official.CONVENTIONS["categories_1_4"], **c14}}}


def _locomo_runs(tmp_path, depths=(31, 32)):
    """LoCoMo runs of two variants with official.json beside metrics.json."""
    res = tmp_path / "results"
    metrics_paths, official_paths = [], []
    for v, depth in zip(("v0.8.0", "mine"), depths):
        mp, _ = _run(res, "locomo10", v, [1, 2, 0, 1, 5, 1], ["4", "5", "2", "1", "3", "4"], fmt="locomo",
                     skip_rule="locomo")
        op = mp.parent / "official.json"
        op.write_text(json.dumps({"dataset": "locomo10", "variant": v, "official": _locomo_official(depth)}))
        metrics_paths.append(mp)
        official_paths.append(op)
    return res, metrics_paths, official_paths


def _report(tmp_path, metrics_paths, official_paths=(), stats_paths=()):
    out = {k: tmp_path / f"report.{k}" for k in ("md", "html")}
    build_report(metrics_paths, [], out["md"], out["html"], tmp_path / "hitk.png", official_paths=official_paths,
                 stats_paths=stats_paths, log=lambda m: None)
    return out["md"].read_text(), out["html"].read_text()


def test_published_figures_are_those_of_the_datasets_in_the_run(tmp_path):
    """A LoCoMo-only report lists LoCoMo's published figures, not LongMemEval-M's."""
    _, metrics_paths, official_paths = _locomo_runs(tmp_path)
    md, html = _report(tmp_path, metrics_paths, official_paths)
    pub = next(rows for header, rows in _md_rows(md) if header[0].strip() == "source")
    assert {r[2].strip() for r in pub} == {"locomo10"}
    assert "longmemeval_m" not in md and "Table 9" not in html
    assert conventions.published_rows([]) == []


def test_convention_table_counts_the_exclusions_the_main_table_counts(tmp_path):
    """The convention rows say what each convention leaves out, the all-categories
    row as the Official metrics table does."""
    _, metrics_paths, official_paths = _locomo_runs(tmp_path)
    md, _ = _report(tmp_path, metrics_paths, official_paths)
    tables = _md_rows(md)
    main = next(rows for header, rows in tables if header[:5] == [" dataset ", " variant ", " n ", " excluded ",
                                                                   " depth "])
    conv = next(rows for header, rows in tables if "convention" in header[2])
    assert {r[3].strip() for r in main} == {"no_evidence 2"}
    assert [(r[2].strip(" `"), r[4].strip()) for r in conv[:2]] == [
        ("all_categories", "no_evidence 2"), ("categories_1_4", "no_evidence 2, category_5 1")]


def test_depth_is_each_variants_and_is_explained(tmp_path):
    """Variants whose lists reach 31 and 32: the HTML names each depth (not the
    first variant's for all), and both formats say what depth is."""
    _, metrics_paths, official_paths = _locomo_runs(tmp_path, depths=(31, 32))
    md, html = _report(tmp_path, metrics_paths, official_paths)
    assert "list depth 31 (v0.8.0), 32 (mine)" in html
    assert "lists to depth 31" not in html
    for text in (md, html):
        assert "depth: the length of the variant&#x27;s longest list" in text or \
               "depth: the length of the variant's longest list" in text
    same = tmp_path / "same"
    same.mkdir()
    _, metrics_paths, official_paths = _locomo_runs(same, depths=(32, 32))
    _, html = _report(same, metrics_paths, official_paths)
    assert "list depth 32 (depth:" in html


def test_identical_lists_have_no_mde_of_zero(tmp_path):
    """Two variants with the same outcome on every question: no discordant
    pair, so stats.json has no MDE (not 0) and the report says why, never
    'MDE 0.0'."""
    res = tmp_path / "results"
    ranks = [1, 2, 0, 1, 5, 1, 3, 0, 1, 2]
    types = ["a", "b"] * 5
    m0, o0 = _run(res, "lme", "v0.8.0", ranks, types)
    m1, o1 = _run(res, "lme", "twin", ranks, types, baseline="v0.8.0")
    st = _stats(res, "lme", {"v0.8.0": "", "twin": "v0.8.0"}, {"v0.8.0": o0, "twin": o1})
    s = json.loads(st.read_text())
    for mm in s["comparisons"][0]["metrics"].values():
        assert mm["mde"] is None and mm["sd"] == 0 and mm["diff"] == 0
    assert correction.mde(np.zeros(10)) is None
    md, html = _report(tmp_path, [m0, m1], stats_paths=[st])
    assert "MDE 0.0" not in md and "MDE 0.0" not in html
    paired = next(rows for header, rows in _md_rows(md) if header[0].strip() == "variant" and "against" in header[2])
    assert paired[0][4].count("MDE n/a: no question differs") == 1
    assert "no spread to size one from" in md


def _imported(tmp, dataset, variant, ranks, types, listed):
    """An imported run's outcomes and metrics.json: the questions past ``listed`` absent from its file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from memobench.evaluation import metrics
    from memobench.retrieval.imported import ABSENT
    from memobench.retrieval.memo import OUTCOMES

    rows = [{"q_index": i, "question_id": f"q{i}", "question_type": t, "status": "evaluated",
             "reason": None if i < listed else ABSENT, "in_types": True, "gold_rank": r if i < listed else 0,
             "pool_size": 20, "gold_in_pool": 1} for i, (r, t) in enumerate(zip(ranks, types))]
    d = tmp / dataset / variant
    d.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTCOMES), d / "outcomes.parquet")
    m = metrics.compute(rows)
    m.update(dataset=dataset, variant=variant, harness="imported trec run", description="lists from a file",
             baseline="", kind="imported", skip_rule="run", data={"format": "longmemeval"},
             run={"file": "their.trec", "format": "trec", "sha256": "ab" * 32, "questions_listed": listed,
                  "absent": len(rows) - listed, "ignored": {}, "truncated": 0},
             provenance={"source": "0123456789abcdef", "python": "3"})
    (d / "metrics.json").write_text(json.dumps(m))
    return d / "metrics.json", d / "outcomes.parquet"


def test_a_run_covering_few_questions_is_flagged_and_kept_out_of_the_paired_tests(tmp_path):
    """A one-line run file over 40 questions: its rows say it covers 1 of 40,
    it enters no comparison, pair or Holm family (below half the evaluated
    questions), and the paired section says so; a run covering 30 of 40 stays
    in, flagged."""
    res = tmp_path / "results"
    n = 40
    ranks, types = [1 + i % 4 for i in range(n)], ["a", "b"] * (n // 2)
    m0, o0 = _run(res, "lme", "v0.8.0", ranks, types)
    m1, o1 = _imported(res, "lme", "theirs", ranks, types, listed=1)
    m2, o2 = _imported(res, "lme", "most", ranks, types, listed=30)
    st = _stats(res, "lme", {"v0.8.0": "", "theirs": "", "most": ""}, {"v0.8.0": o0, "theirs": o1, "most": o2})
    s = json.loads(st.read_text())
    assert s["min_coverage"] == 0.5
    assert s["left_out"] == [{"variant": "theirs", "covered": 1, "questions": n}]
    assert all("theirs" not in (c["variant"], c["baseline"]) for c in s["comparisons"] + s["pairs"])
    assert s["compared"] == ["v0.8.0", "most"] and s["holm"]["pairs"]["hit@1"] == 1
    md, html = _report(tmp_path, [m0, m1, m2], stats_paths=[st])
    main = next(rows for header, rows in _md_rows(md) if header[:3] == [" dataset ", " variant ", " questions "])
    assert [r[1].strip() for r in main] == ["v0.8.0", "theirs (imported run, covers 1 of 40 questions)",
                                            "most (imported run, covers 30 of 40 questions)"]
    assert "**Left out of the paired tests**: theirs (covers 1 of 40 questions)" in md
    assert "fewer than 50% of the evaluated questions" in md
    paired = next(rows for header, rows in _md_rows(md) if header[0].strip() == "variant" and "against" in header[2])
    assert [r[0].strip() for r in paired] == ["most covers 30 of 40 questions"]
    assert "covers 1 of 40 questions" in html and "Left out of the paired tests" in html


def test_memobench_score_compares_no_run_covering_too_few_questions(tmp_path):
    """`memobench score` follows the report's rule: a one-line run gets no paired
    difference, and a line saying why; a run covering most questions gets one."""
    from memobench import score_engine as score

    res = tmp_path / "results"
    ranks, types = [1 + i % 4 for i in range(40)], ["a", "b"] * 20
    _, o0 = _run(res, "lme", "v0.8.0", ranks, types)
    m1, o1 = _imported(res, "lme", "theirs", ranks, types, listed=1)
    m2, o2 = _imported(res, "lme", "most", ranks, types, listed=30)
    (why,) = score.paired_or_why("lme", "theirs", "v0.8.0", json.loads(m1.read_text()), [o1], [o0])
    assert why.startswith("no paired comparison: theirs covers 1 of 40 questions, fewer than 50%")
    lines = score.paired_or_why("lme", "most", "v0.8.0", json.loads(m2.read_text()), [o2], [o0])
    assert lines[0].startswith("paired against v0.8.0") and len(lines) == 4


def test_metrics_json_states_what_ranked_each_kind_and_no_memo_recipe_beside_others():
    """metrics.json's account of a variant: a Memo variant's whole recipe; a
    reference retriever's backend and documents only; a Python retriever's
    callable and params; a fusion's inputs and method; an imported run
    nothing of a recipe; a memory service its protocol, its address without
    the user, password or query that may hold a secret, and its grain. The
    report still names each kind."""
    from memobench.catalog.variant import to_spec
    from memobench.catalog.variants import resolve
    from memobench.plan import what_ranked
    from memobench.reporting.labels import kind

    # a URL's secrets are $NAMEs (a written-out one is a config error: services/job/rank.py)
    secret = "http://me:$MY_PW@127.0.0.1:8765/api?token=$MY_TOKEN#x"
    custom = {"mine": {"retriever": {"callable": "my_retrievers.py:rank", "params": {"min_len": 3}}},
              "fused": {"fuse": {"of": ["v0.8.0", "bm25s"], "method": "rrf", "k": 60}},
              "theirs": {"run": {"file": "runs/their.trec", "format": "trec"}},
              "svc": {"system": {"url": secret}},
              "stdio": {"system": {"mcp": {"command": ["/opt/bin/my-server", "--api-key", "s3cret"]}},
                        "grain": "turn"}}
    got = {}
    for name in ("v0.8.0", "bm25s", *custom):
        got[name] = what_ranked(to_spec(resolve(name, "locomo", custom)))
    assert got["v0.8.0"]["kind"] == "memo" and got["v0.8.0"]["recipe"]["fts_limit"] == 500
    assert got["bm25s"] == {"kind": "reference", "recipe": {"backend": "bm25s", "documents": "all"}}
    assert got["mine"] == {"kind": "python", "retriever": {"callable": "my_retrievers.py:rank", "prepare": None,
                                                           "params": {"min_len": 3}, "documents": "all"}}
    assert got["fused"] == {"kind": "fusion", "fusion": {"of": ["v0.8.0", "bm25s"], "method": "rrf", "k": 60}}
    assert got["theirs"] == {"kind": "imported"}
    assert got["svc"] == {"kind": "system", "system": {"transport": "http", "address": "http://127.0.0.1:8765/api",
                                                       "isolation": "namespace", "grain": "session"}}
    assert got["stdio"]["system"] == {"transport": "mcp-stdio", "address": "mcp stdio: my-server",
                                      "isolation": "namespace", "grain": "turn"}
    for name, block in got.items():
        text = json.dumps(block)
        assert "MY_PW" not in text and "MY_TOKEN" not in text and "s3cret" not in text and "me@" not in text
        if name not in ("v0.8.0", "bm25s"):
            assert "recipe" not in block and "window" not in text and "fts_limit" not in text
        assert kind({"variant": name, "questions": 1, **block}) == {
            "memo": "Memo", "reference": "reference retriever", "python": "your retriever", "fusion": "fusion",
            "imported": "imported run", "system": "memory service"}[block["kind"]]
    spec = to_spec(resolve("svc", "locomo", custom))
    assert "MY_PW" not in spec["harness"] + spec["description"] and "127.0.0.1:8765" in spec["description"]


def test_a_text_variant_s_figures_state_its_attribution_in_both_reports(tmp_path):
    from memobench.retrieval.attribution import Tally, TurnIndex, merged, settings_of

    res = tmp_path / "results"
    paths = [_run(res, "locomo10", v, [1, 2, 0, 1, 5, 1], ["4", "5", "2", "1", "3", "4"], fmt="locomo",
                  skip_rule="locomo")[0] for v in ("v0.8.0", "texts")]
    index = TurnIndex(["I bought a blue kayak", "The bakery sells rye"], [0, 1], settings_of(None, "t"))
    tally = Tally(settings_of(None, "t"))
    for text in ("I bought a blue kayak", "the BAKERY sells rye", "unrelated words here"):
        tally.add(index.attribute(text))
    m = json.loads(paths[1].read_text())
    m["attribution"] = merged([tally.summary()])
    paths[1].write_text(json.dumps(m))
    md, html = _report(tmp_path, paths)
    for text in (md, html):
        said = text[text.index("Attribution: "):]
        for part in ("exact+normalized", "2 of 3 items attributed", "66.7%", "1 exact", "1 after normalisation",
                     "0 by overlap", "1 unattributed (never a hit)"):
            assert part in said[:600], (part, said[:600])
    assert md.count("Attribution: ") == 1
