# The reference retrievers' cached stage (issue 11): all-MiniLM-L6-v2 embeddings
# of every distinct session of a dataset, computed once and read by every
# segment and rerun of the `minilm` variant (src/memobench/baselines/).
# The lexical retrievers (bm25-official, bm25s, fts5-bm25) need no stage of
# their own: they rank from the normalized tables inside the retrieve job.
#
# Needs from common.smk: RESULTS, DATASETS. Config (optional):
#   minilm_device: auto | cpu | cuda   (auto: CUDA through PyTorch when present)
#   minilm_batch: word-piece batches of this many sessions (default 32 CPU, 256 GPU)

import hashlib as _hashlib
from pathlib import Path as _Path

import memobench as _memobench


def _baselines_code():
    pkg = _Path(_memobench.__file__).parent
    h = _hashlib.sha256()
    for m in ("baselines/embeddings", "baselines/dense", "baselines/documents", "tables", "progress", "steps"):
        h.update((pkg / f"{m}.py").read_bytes())
    return h.hexdigest()[:16]


EMBEDDINGS_CODE = _baselines_code()


rule embeddings:
    input:
        events=f"{RESULTS}/{{dataset}}/normalized/events.parquet",
    output:
        embeddings=f"{RESULTS}/{{dataset}}/embeddings/minilm.parquet",
    params:
        format=lambda w: DATASETS[w.dataset]["format"],
        device=config.get("minilm_device", "auto"),
        batch=config.get("minilm_batch", 0),
        code=EMBEDDINGS_CODE,
    threads: 2
    resources:
        mem_mb=4000,
    benchmark:
        f"{RESULTS}/logs/benchmarks/embeddings/{{dataset}}.tsv"
    log:
        f"{RESULTS}/logs/embeddings/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/embeddings.py"
