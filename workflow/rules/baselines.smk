# The reference retrievers' cached stage (README "Baselines"):
# all-MiniLM-L6-v2 vectors of every distinct session of a dataset, computed
# once and read by every segment and rerun of the `minilm` variant. The
# document rule is the dataset format's (LongMemEval formats: user turns;
# others: all turns). The lexical retrievers (bm25-official, bm25s,
# fts5-bm25) need no stage of their own: the retrieve job ranks them from the
# normalized tables (search_inputs in common.smk says what each reads).
# Device: a CUDA GPU through PyTorch when both are present, else the CPU.


rule embeddings:
    input:
        events=f"{RESULTS}/{{dataset}}/normalized/events.parquet",
        sessions=f"{RESULTS}/{{dataset}}/normalized/sessions.parquet",
    output:
        embeddings=f"{RESULTS}/{{dataset}}/embeddings/minilm.parquet",
    params:
        format=lambda w: DATASETS[dataset_of(w)]["format"],
        code=code("embeddings"),
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
        STAGE_SCRIPT
