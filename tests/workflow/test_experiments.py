"""Experiment harnesses through the real workflow: the embedded zh set and a
CN file paired with a generated LongMemEval file. Their quirks, checked
without the workflow: tests/unit/memo/test_experiments.py."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.helpers import snakemake, write_config
from tests.unit.memo.test_experiments import lme  # noqa: F401  (the fixture: a generated file, normalized)
from memobench.tools.generate.cn import write_cn


def test_zh_through_the_workflow(tmp_path):
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path), run=["zh"])
    snakemake(tmp_path, "--cores", "2", configfile=cfg)
    a = json.loads((tmp_path / "results/zh/zh-A/metrics.json").read_text())
    b = json.loads((tmp_path / "results/zh/zh-B/metrics.json").read_text())
    assert (a["questions"], a["hit@1"]) == (11, 0)
    assert (b["questions"], b["hit@1"], b["hit@5"]) == (11, 10, 10)
    assert "| zh | zh-B | 11 | 90.9% (10) / 91 = |" in (tmp_path / "results/report.md").read_text()


def test_cn_through_the_workflow(tmp_path, lme):
    raw = lme[0]
    cn = tmp_path / "cn.jsonl"
    write_cn(cn, raw, seed=3)
    ds = {
        "s": {"format": "longmemeval", "family": "s", "file": str(raw), "bytes": raw.stat().st_size,
              "segments": 1, "variants": ["v0.8.0"]},
        "cn": {"format": "longmemeval_cn", "family": "cn", "file": str(cn), "bytes": cn.stat().st_size,
               "haystacks_from": "s", "segments": 1, "variants": ["cn-A", "cn-A2", "cn-B"]},
    }
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path), run=["cn"], datasets=ds)
    snakemake(tmp_path, "--cores", "2", configfile=cfg)
    m = {v: json.loads((tmp_path / f"results/cn/{v}/metrics.json").read_text()) for v in ("cn-A", "cn-A2", "cn-B")}
    # Every paired row is scored by all three variants; unpaired rows are skipped.
    assert m["cn-A"]["questions"] == m["cn-A2"]["questions"] == m["cn-B"]["questions"] > 0
    assert m["cn-A"]["skipped"].get("unpaired", 0) >= 1
    # B: every window token is Han, so no token can yield a candidate under S-ASCII.
    outcomes = pq.read_table(tmp_path / "results/cn/cn-B/segments/seg1.outcomes.parquet").to_pylist()
    questions = {q["q_index"]: q for q in pq.read_table(tmp_path / "results/cn/normalized/questions.parquet").to_pylist()}
    for o in outcomes:
        if o["gold_rank"]:
            assert questions[o["q_index"]]["question"].isascii()
    assert m["cn-A2"]["hit@1"] >= m["cn-A"]["hit@1"] - 5
