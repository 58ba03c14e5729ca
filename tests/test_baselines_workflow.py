"""The embedding stage's rule (workflow/rules/baselines.smk) run by real
Snakemake on its own: it embeds every session once, and a rerun does nothing."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import REPO, dry_run_jobs, snakemake
from memobench import generate
from memobench.errors import ConfigError
from memobench.normalize import normalize_longmemeval

dense = pytest.importorskip("memobench.baselines.dense")


def test_embeddings_rule_standalone(tmp_path):
    try:
        model = dense.MiniLM(device="cpu")
    except ConfigError as e:
        pytest.skip(str(e))
    raw = tmp_path / "lme.json"
    generate.write_longmemeval(raw, 3, 6, seed=3, turns=(2, 4), words_per_turn=(4, 16))
    norm = tmp_path / "results" / "lme" / "normalized"
    normalize_longmemeval(raw, norm, log=lambda m: None)
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(
        'RESULTS = "results"\n'
        'DATASETS = {"lme": {"format": "longmemeval"}}\n'
        f'include: "{REPO / "workflow" / "rules" / "baselines.smk"}"\n', encoding="utf-8")
    target = "results/lme/embeddings/minilm.parquet"
    snakemake(tmp_path, "--cores", "2", target, "--config", "minilm_device=cpu", snakefile=snakefile)
    t = pq.read_table(tmp_path / target)
    assert t.num_rows == pq.read_metadata(norm / "sessions.parquet").num_rows
    from memobench.baselines import session_documents

    docs = session_documents(norm / "events.parquet", "longmemeval")
    keys = t.column("session_key").to_pylist()
    vecs = np.stack(t.column("vector").to_numpy(zero_copy_only=False))
    assert np.abs(vecs - model.encode([docs[k] for k in keys])).max() < 1e-5
    assert "sessions, done" in (tmp_path / "results/logs/embeddings/lme.log").read_text()
    assert dry_run_jobs(tmp_path, target, "--config", "minilm_device=cpu", snakefile=snakefile) == {}
