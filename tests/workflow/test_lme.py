"""Generated LongMemEval-format files through the workflow: a user-added dataset
(absolute path, no URLs), segmentation, and the downloader wired into the rule."""

from __future__ import annotations

import functools
import http.server
import json
import threading

import pyarrow.parquet as pq
import pytest

from tests.helpers import dry_run_jobs, snakemake, write_config
from memobench.tools.generate.longmemeval import write_longmemeval


def _dataset(path, segments, family="s", variants=("v0.8.0", "v0.8.0-index")):
    return {"format": "longmemeval", "family": family, "file": str(path), "bytes": path.stat().st_size,
            "segments": segments, "variants": list(variants)}


@pytest.fixture(scope="module")
def lme_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lme") / "mine.json"
    write_longmemeval(path, n_questions=60, sessions_per_question=25, seed=7, spice=True)
    return path


def test_segments_merge_to_the_unsegmented_run(tmp_path, lme_file):
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path / "data"), run=["one", "five"],
                       datasets={"one": _dataset(lme_file, 1), "five": _dataset(lme_file, 5)})
    snakemake(tmp_path, "--cores", "2", configfile=cfg)
    for variant in ("v0.8.0", "v0.8.0-index"):
        one = json.loads((tmp_path / "results" / "one" / variant / "metrics.json").read_text())
        five = json.loads((tmp_path / "results" / "five" / variant / "metrics.json").read_text())
        for key in ("questions", "hit@1", "hit@5", "hit@10", "mrr_sum", "by_type", "skipped", "counted_as_miss"):
            assert one[key] == five[key], (variant, key)
        assert len(five["segments"]) == 5 and sum(s["questions"] for s in five["segments"]) == five["questions"]
        a = pq.read_table(tmp_path / "results" / "one" / variant / "rankings.parquet")
        b = pq.read_table(tmp_path / "results" / "five" / variant / "rankings.parquet")
        assert a.equals(b)
    # The spiced file has questions the harness skips or counts as misses.
    m = json.loads((tmp_path / "results" / "one" / "v0.8.0" / "metrics.json").read_text())
    assert m["questions"] > 0 and (m["skipped"] or m["counted_as_miss"])


def test_one_segment_target_runs_only_what_it_needs(tmp_path, lme_file):
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path / "data"), run=["five"],
                       datasets={"five": _dataset(lme_file, 5, family="m")})
    target = "results/five/v0.8.0/segments/seg3.parquet"
    assert dry_run_jobs(tmp_path, target, configfile=cfg) == {"download": 1, "verify": 1, "normalize": 1, "tokens": 2, "retrieve": 1}
    snakemake(tmp_path, "--cores", "1", target, configfile=cfg)
    seg = pq.read_table(tmp_path / target)
    outcomes = pq.read_table(tmp_path / "results/five/v0.8.0/segments/seg3.outcomes.parquet")
    assert outcomes.column("q_index").to_pylist() == list(range(24, 36))  # items 25..36 of 60
    assert set(seg.column("q_index").to_pylist()) <= set(range(24, 36))
    assert not (tmp_path / "results/five/v0.8.0/segments/seg1.parquet").exists()


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_download_rule_fetches_from_the_second_url(tmp_path, lme_file):
    served = tmp_path / "served"
    served.mkdir()
    (served / "remote.json").write_bytes(lme_file.read_bytes())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        ds = {"format": "longmemeval", "file": "mine.json", "bytes": lme_file.stat().st_size,
              "urls": [f"{base}/missing.json", f"{base}/remote.json"], "segments": 1, "variants": ["v0.8.0"]}
        cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path / "data"), run=["mine"], datasets={"mine": ds})
        snakemake(tmp_path, "--cores", "1", "results/mine/normalized/summary.json", configfile=cfg)
    finally:
        server.shutdown()
    assert (tmp_path / "data" / "mine.json").read_bytes() == lme_file.read_bytes()
    log = (tmp_path / "results/logs/download/mine.log").read_text()
    assert "404" in log
