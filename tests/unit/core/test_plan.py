"""memobench.plan: what a run makes and what each job reads, from the
validated config alone (common.smk's input functions are one-liners over it)."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import REPO
from memobench import plan
from memobench.core.config import validate
from memobench.core.errors import ConfigError

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def config_of(tmp_path, overlay: dict) -> dict:
    """config.yaml overlaid like `--configfile` (top-level keys replaced, datasets merged), validated."""
    cfg = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for ds in overlay.get("datasets", {}).values():
        if "file" in ds:
            (data / ds["file"]).write_text("[]")
    for key, value in overlay.items():
        cfg[key] = {**cfg[key], **value} if key == "datasets" else value
    cfg["data_dir"] = str(data)
    validate(cfg, SCHEMA)
    return cfg


@pytest.fixture
def cfg(tmp_path):
    return config_of(tmp_path, {
        "run": ["zh", "s", "cn"],
        "datasets": {
            "s": {"format": "longmemeval", "file": "s.json", "bytes": 2, "segments": 2, "analyze": True,
                  "variants": ["v0.8.0", "exp4-A0-base", "exp4-B-bonus12"]},
            "cn": {"format": "longmemeval_cn", "file": "cn.json", "bytes": 2, "haystacks_from": "s",
                   "variants": ["cn-A"]},
        },
        "exports": {"retrieval_log": ["s/v0.8.0"]},
    })


def test_run_pairs_segments_and_segment_files(cfg):
    assert ("s", "v0.8.0") in plan.run_pairs(cfg) and ("cn", "cn-A") in plan.run_pairs(cfg)
    assert [ds for ds, _ in plan.run_pairs(cfg)] == ["zh", "zh", "s", "s", "s", "cn"]  # config["run"] order
    assert plan.segments(cfg, "s") == ["seg1", "seg2"]
    assert plan.segment_files(cfg, "s", "v0.8.0", ".deep.parquet") == [
        "results/s/v0.8.0/segments/seg1.deep.parquet", "results/s/v0.8.0/segments/seg2.deep.parquet"]


def test_one_list_of_downloaded_datasets(cfg):
    """The datasets with a raw file, and those whose haystacks others search:
    the verified files, the receipts and the download waits are all this list."""
    assert plan.downloaded_datasets(cfg) == ["s", "cn"]
    assert plan.needs(cfg) == {"cn": "s"}
    assert plan.verified_files(cfg) == ["results/s/verified.json", "results/cn/verified.json"]
    assert plan.receipt_files(cfg) == ["results/s/raw.json", "results/cn/raw.json"]


def test_a_haystacks_source_outside_the_run_is_still_downloaded(tmp_path):
    cfg = config_of(tmp_path, {
        "run": ["cn"],
        "datasets": {"s": {"format": "longmemeval", "file": "s.json", "bytes": 2, "variants": []},
                     "cn": {"format": "longmemeval_cn", "file": "cn.json", "bytes": 2, "haystacks_from": "s",
                            "variants": ["cn-A"]}}})
    assert plan.downloaded_datasets(cfg) == ["cn", "s"]


def test_falsified_datasets_and_report_extras(cfg):
    specs = plan.variant_specs(cfg)
    # s is segmented and runs exp4-B-bonus12 beside its baseline exp4-A0-base
    assert plan.falsified_datasets(cfg, specs) == ["s"]
    assert plan.report_extras(cfg, specs) == ["results/s/analyze/summary.json", "results/s/falsifier.json"]


def test_retrievallog_pairs_listed_or_already_made(cfg):
    listed = [("s", "v0.8.0")]
    assert plan.retrievallog_pairs(cfg, listed, exists=lambda p: False) == [("s", "v0.8.0")]
    made = {"results/s/exp4-A0-base/retrievallog.jsonl", "results/zh/zh-A/retrievallog.jsonl"}
    # a log already there is kept up to date; a non-LongMemEval dataset has none
    assert plan.retrievallog_pairs(cfg, listed, exists=made.__contains__) == [("s", "v0.8.0"), ("s", "exp4-A0-base")]


def test_result_jobs_cover_every_result_rule(cfg):
    specs = plan.variant_specs(cfg)
    jobs = plan.result_jobs(cfg, specs, [("s", "v0.8.0")])
    rules = {rule for rule, _ in jobs}
    assert rules == {"retrieve", "merge", "retrievallog", "qrels", "stats", "analyze", "falsify", "report",
                     "manifest"}
    assert ("retrieve", {"dataset": "s", "variant": "v0.8.0", "segment": "seg2"}) in jobs
    assert ("analyze", {"dataset": "zh"}) not in jobs and ("analyze", {"dataset": "s"}) in jobs
    assert jobs[-2:] == [("report", {}), ("manifest", {})]


def test_search_inputs_name_the_base_datasets_tables(cfg):
    got = plan.search_inputs(cfg, "cn", {"questions", "haystacks", "tokens", "fts_tokens", "embeddings"}, "cjkr")
    assert got == {"questions": "results/cn/normalized/questions.parquet",
                   "haystacks": "results/s/normalized/haystacks.parquet",
                   "tokens": "results/s/tokens/cjkr.arrow", "fts_tokens": "results/s/tokens/fts5.arrow",
                   "embeddings": "results/s/embeddings/minilm.parquet"}
    fused = plan.search_inputs(cfg, "s", {"fused"}, "ascii", "f", "seg1", ["v0.8.0", "bm25s"])
    assert fused == {"fused": ["results/s/v0.8.0/segments/seg1.deep.parquet",
                               "results/s/bm25s/segments/seg1.deep.parquet"]}


def test_merge_and_normalize_inputs(cfg):
    m = plan.merge_inputs(cfg, "cn", "cn-A")
    assert m["rankings"] == ["results/cn/cn-A/segments/seg1.parquet"]
    assert m["outcomes"] == ["results/cn/cn-A/segments/seg1.outcomes.parquet"]
    assert m["events"] == "results/s/normalized/events.parquet"
    assert m["data_summary"] == "results/cn/normalized/summary.json"
    assert plan.normalize_inputs(cfg, "cn") == {"verified": "results/cn/verified.json",
                                                "base_questions": "results/s/normalized/questions.parquet"}
    assert plan.normalize_inputs(cfg, "zh") == {}


def test_retrievallog_inputs_only_for_longmemeval_formats(cfg):
    assert plan.retrievallog_inputs(cfg, "cn", "cn-A")["sessions"] == "results/s/exports/sessions.bin"
    with pytest.raises(ConfigError, match=r"results/zh/zh-A/retrievallog.jsonl: dataset 'zh' has format 'embedded'; "
                                          r"a retrieval log is made for longmemeval, longmemeval_cn datasets only"):
        plan.retrievallog_inputs(cfg, "zh", "zh-A")


def test_checked_wildcards_name_the_fix(cfg):
    specs = plan.variant_specs(cfg)
    with pytest.raises(ConfigError, match="dataset 'other' is not configured"):
        plan.check_dataset(cfg, "other")
    with pytest.raises(ConfigError, match="variant 'nope' is not listed for dataset 's'"):
        plan.check_variant(cfg, specs, "s", "nope")
    with pytest.raises(ConfigError, match=r"has 2 segment\(s\): seg1..seg2"):
        plan.check_segment(cfg, "s", "v0.8.0", "seg3")
    assert plan.check_segment(cfg, "s", "v0.8.0", "seg2") == 2


def test_a_bad_variant_name_fails_with_its_dataset(tmp_path):
    with pytest.raises(ConfigError, match="config: dataset 'zh': "):
        plan.variant_specs(config_of(tmp_path, {"datasets": {"zh": {"format": "embedded", "variants": ["nope"]}}}))


def test_missing_and_download_free_paths(cfg):
    paths = ["results/s/v0.8.0/metrics.json", "results/zh/zh-A/metrics.json", "results/cn/cn-A/metrics.json",
             "results/report.md"]
    assert plan.drop_datasets(paths, ["s", "cn"]) == ["results/zh/zh-A/metrics.json", "results/report.md"]
    assert plan.drop_datasets(paths, []) == paths
    # only zh needs no download; a dataset named like a prefix of another is not confused with it
    assert plan.without_downloads(cfg, paths + ["results/zhx/a/metrics.json"]) == ["results/zh/zh-A/metrics.json"]


def test_wildcard_patterns(cfg):
    import re

    assert plan.imported_variants(plan.variant_specs(cfg)) == "(?!)"
    assert re.fullmatch(plan.NAME, "v0.8.0") and not re.fullmatch(plan.NAME, "segments/x")
    specs = {"s": {"mine.run": {"run": {"file": "x", "format": "trec"}}, "v0.8.0": {}}}
    assert plan.imported_variants(specs) == r"mine\.run"
    ranked = plan.ranked_variants(specs)
    assert re.match(ranked, "v0.8.0/") and not re.match(ranked, "mine.run/")
