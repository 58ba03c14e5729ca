# The embedding retrievers' cached stage (docs/baselines.md): the vectors of
# every distinct session of a dataset under one model (minilm:
# all-MiniLM-L6-v2; wordllama: WordLlama's static token vectors), computed
# once and read by every segment and rerun of that model's variants. The
# document rule is the dataset format's (LongMemEval formats: user turns;
# others: all turns). The lexical retrievers (bm25-official, bm25s,
# fts5-bm25) need no stage of their own: the retrieve job ranks them from the
# normalized tables (memobench.plan.search_inputs says what each reads).
# Device (minilm): a CUDA GPU through PyTorch when both are present, else the
# CPU; wordllama runs on the CPU.


rule embeddings:
    input:
        events=layout.path(layout.NORMALIZED_TABLE, table="events"),
        sessions=layout.path(layout.NORMALIZED_TABLE, table="sessions"),
    output:
        embeddings=layout.EMBEDDINGS,
    params:
        **stage_params(
            format=lambda w: DATASETS[dataset_of(w)]["format"],
            model=lambda w: w.model,
            # the stage's code less the other model's encoder: editing one model reruns only its tables
            code=embeddings_code,
        ),
    threads: 2
    resources:
        mem_mb=4000,
    benchmark:
        f"{BENCHMARKS}/embeddings/{{dataset}}/{{model}}.tsv"
    log:
        f"{LOGS}/embeddings/{{dataset}}/{{model}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("embeddings")
