"""Sibling variants ranked in one pass, through Snakemake: one job ranks the
LoCoMo variants of one tokenizer, and changing one variant reruns only its
job. The sharing itself, without the workflow: tests/unit/retrieval/test_sharing.py."""

from __future__ import annotations

import os

from tests.helpers import snakemake, write_config
from memobench.retrieval.sharing import read_plan, stored_key


def test_workflow_shares_and_reruns_only_the_changed_variant(tmp_path, locomo_path):
    """Through Snakemake: the LoCoMo variants of one tokenizer are ranked by one
    job; changing one custom variant reruns only its job, which ranks only it."""
    names = ["v0.8.0", "v0.5.0", "mine"]
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(locomo_path, data / "locomo10.json")

    def cfg(weights):
        return write_config(tmp_path / f"cfg_{weights}.yaml", data_dir=str(data), run=["locomo10"],
                            datasets={"locomo10": {"variants": names}},
                            variants={"mine": {"base": "v0.8.0", "recipe": {"weights": weights}}})

    targets = [f"results/locomo10/{n}/segments/seg1.parquet" for n in names]
    snakemake(tmp_path, "--cores", "2", *targets, configfile=cfg("len"))
    # a first run's DAG grows after the download checkpoint: the plan says it is incomplete
    assert read_plan(tmp_path / "results")[1] is False
    logs = {n: (tmp_path / f"results/logs/retrieve/locomo10/{n}/seg1.log").read_text() for n in names}
    assert sum("sibling variant(s) in the same pass" in t for t in logs.values()) == 1
    assert sum("computed by a sibling's job" in t for t in logs.values()) == 2
    seg = {n: tmp_path / f"results/locomo10/{n}/segments/seg1.outcomes.parquet" for n in names}
    cache = tmp_path / "results/locomo10/cache/seg1"
    keys = {n: stored_key(cache, n) for n in names}
    assert all(keys.values())
    stamps = {n: os.stat(p).st_mtime_ns for n, p in seg.items()}
    snakemake(tmp_path, "--cores", "2", *targets, configfile=cfg("one"))
    log = (tmp_path / "results/logs/retrieve/locomo10/mine/seg1.log").read_text()
    assert "sibling" not in log
    assert {n for n in names if os.stat(seg[n]).st_mtime_ns != stamps[n]} == {"mine"}
    assert read_plan(tmp_path / "results") == ({("locomo10", "mine", 1)}, True)
    assert stored_key(cache, "mine") != keys["mine"]
    assert {n for n in names if stored_key(cache, n) != keys[n]} == {"mine"}
