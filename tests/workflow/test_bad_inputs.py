"""Bad inputs through the real workflow (README "Failure modes"): a reader's
error and a config error each reach the user as one memobench line, with no
traceback. The rest of the catalogue: tests/unit/datasets/test_bad_inputs.py."""

from __future__ import annotations

from tests.helpers import memobench_lines, snakemake, write_config
from tests.unit.datasets.test_bad_inputs import _retriever_config, item, lme_bytes


def test_no_traceback_reaches_the_user(tmp_path):
    raw = tmp_path / "mine.json"
    data = lme_bytes([item("q1"), item("q2")])
    raw.write_bytes(data[:-30])
    ds = {"format": "longmemeval", "file": str(raw), "bytes": raw.stat().st_size, "segments": 1,
          "variants": ["v0.8.0"]}
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path), run=["mine"], datasets={"mine": ds})
    proc = snakemake(tmp_path, "--cores", "1", configfile=cfg, check=False)
    assert proc.returncode != 0
    ours = memobench_lines(proc.stderr)
    assert len(ours) == 1 and "item 1: invalid or truncated JSON" in ours[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not list((tmp_path / "results").rglob("*.parquet"))


def test_a_yaml_date_in_params_is_one_line_before_any_job(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(_retriever_config("{since: 2024-01-01}"), encoding="utf-8")
    proc = snakemake(tmp_path, "--cores", "1", configfile=cfg, check=False)
    ours = memobench_lines(proc.stderr)
    assert proc.returncode == 1 and ours == [
        "memobench: config: variants.mine.retriever.params.since: a YAML date, which JSON cannot hold; quote it "
        "('2024-01-01')"], proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr and not (tmp_path / "results").exists()
