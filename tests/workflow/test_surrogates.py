"""JSON surrogate escapes through the real workflow (docs/edge-cases.md,
"Surrogate escapes"). The rules themselves: tests/unit/datasets/test_surrogates.py."""

from __future__ import annotations

import re

import pyarrow.parquet as pq

from tests.unit.datasets.test_surrogates import write_longmemeval  # the generator, as that file imports it


def test_workflow_runs_a_file_with_surrogates(tmp_path):
    """The real workflow on a small file with lone surrogates in turns and
    questions: normalize, a Memo variant, LongMemEval's BM25 and the
    retrieval log all finish; the log carries the escapes."""
    from tests.helpers import snakemake, write_config

    raw = tmp_path / "mine.json"
    write_longmemeval(raw, 12, 8, seed=17, surrogates=0.3)
    ds = {"format": "longmemeval", "family": "s", "file": str(raw), "bytes": raw.stat().st_size, "segments": 1,
          "variants": ["v0.8.0", "bm25-official"]}
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(tmp_path / "data"), run=["mine"], datasets={"mine": ds})
    snakemake(tmp_path, "--cores", "2", "results/mine/v0.8.0/retrievallog.jsonl",
              "results/mine/bm25-official/rankings.parquet", configfile=cfg)
    log = (tmp_path / "results/mine/v0.8.0/retrievallog.jsonl").read_bytes().decode("utf-8")
    assert re.search(r"\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])", log)
    assert pq.read_table(tmp_path / "results/mine/bm25-official/rankings.parquet").num_rows > 0
