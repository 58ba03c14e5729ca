"""Only stale stages rerun: code edits and variant settings reach their rules
through params (checked with Snakemake's dry run in a scratch copy)."""

from __future__ import annotations


import pytest

from tests.helpers import copy_project, data_dir, dry_run_jobs, snakemake, write_config


@pytest.fixture(scope="module")
def project(tmp_path_factory, locomo_path):
    root = tmp_path_factory.mktemp("reruns")
    proj = copy_project(root / "proj")
    data = data_dir(root, locomo_path)
    cfg = write_config(
        root / "cfg.yaml", data_dir=str(data), run=["locomo10"],
        datasets={"locomo10": {"variants": ["v0.8.0", "v0.5.0", "mine"]}},
        variants={"mine": {"base": "v0.8.0", "recipe": {"weights": "len"}}},
    )
    snakemake(proj, "--cores", "2", configfile=cfg, snakefile=proj / "Snakefile")
    return proj, cfg, root


def _jobs(project, cfg=None):
    proj, default_cfg, _ = project
    return dry_run_jobs(proj, configfile=cfg or default_cfg, snakefile=proj / "Snakefile")


def test_up_to_date(project):
    assert _jobs(project) == {}


def test_engine_edit_reruns_retrieval_merge_report_only(project):
    proj = project[0]
    engine = proj / "src" / "memobench" / "memo" / "engine.py"
    original = engine.read_text()
    try:
        engine.write_text(original + "\n# an edit\n")
        # the official metrics, TREC run and statistics read the rankings: they follow
        assert _jobs(project) == {"retrieve": 3, "merge": 3, "stats": 1, "report": 1, "all": 1}
    finally:
        engine.write_text(original)
    assert _jobs(project) == {}


def test_normalize_edit_reruns_normalize_not_download_or_verify(project):
    proj = project[0]
    code = proj / "src" / "memobench" / "datasets" / "normalize.py"
    original = code.read_text()
    try:
        code.write_text(original + "\n# an edit\n")
        jobs = _jobs(project)
        assert jobs.get("normalize") == 1
        assert "download" not in jobs and "verify" not in jobs
    finally:
        code.write_text(original)


def test_variant_setting_reruns_only_that_variant(project):
    proj, _, root = project
    cfg = write_config(
        root / "cfg2.yaml", data_dir=str(root / "data"), run=["locomo10"],
        datasets={"locomo10": {"variants": ["v0.8.0", "v0.5.0", "mine"]}},
        variants={"mine": {"base": "v0.8.0", "recipe": {"weights": "len", "window": "plain"}}},
    )
    proc = snakemake(proj, "-n", "--cores", "1", configfile=cfg, snakefile=proj / "Snakefile")
    assert _jobs(project, cfg) == {"retrieve": 1, "merge": 1, "stats": 1, "report": 1, "all": 1}
    assert "results/locomo10/mine/segments/seg1.parquet" in proc.stdout


def test_slurm_profile_dry_run(tmp_path, locomo_path):
    """The Slurm profile resolves every job with its resources (no cluster needed for -n)."""
    from tests.helpers import REPO

    data = data_dir(tmp_path, locomo_path)
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["locomo10"])
    proc = snakemake(tmp_path, "-n", "--workflow-profile", str(REPO / "workflow" / "profiles" / "slurm"),
                     configfile=cfg)
    out = proc.stdout + proc.stderr
    assert "retrieve" in out and "This was a dry-run" in out
    assert "mem_mb=3000" in out.replace(" ", "") or "mem_mb=3000" in out
