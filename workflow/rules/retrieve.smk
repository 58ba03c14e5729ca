# Tokenize every event once per tokenizer (for all segments and variants; the
# FTS backend's unicode61 tokens are the tokenizer "fts5", src/memobench/fts5.py),
# then rank every question of one segment under one variant. Segments of a
# dataset are independent jobs, so they run in parallel under --cores.


rule tokens:
    input:
        events=f"{RESULTS}/{{dataset}}/normalized/events.parquet",
    output:
        tokens=f"{RESULTS}/{{dataset}}/tokens/{{seq}}.parquet",
    params:
        code=code("tokens"),
    # tokens and retrieve lie on the path to every result: a free core takes
    # them before side jobs (manifest, qrels, session_json, stats, analyze)
    priority: 1
    benchmark:
        f"{RESULTS}/logs/benchmarks/tokens/{{dataset}}/{{seq}}.tsv"
    log:
        f"{RESULTS}/logs/tokens/{{dataset}}/{{seq}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


rule retrieve:
    input:
        unpack(retrieve_inputs),
    output:
        rankings=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.parquet",
        outcomes=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.questions.parquet",
        deep=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.deep.parquet",
    params:
        # only what decides the lists: editing a description reruns no retrieval
        variant=lambda w: {k: v for k, v in variant_of(w).items() if k in ("name", "recipe", "skip", "retriever")},
        segment=segment_of,
        n_segments=lambda w: len(segments(w.dataset)),
        # the variant's retriever's code only (common.smk): editing one retriever reruns its variants
        code=retrieve_code,
    wildcard_constraints:
        variant=RANKED_VARIANTS,  # not an imported run (import_run reads those)
    priority: 1
    benchmark:
        f"{RESULTS}/logs/benchmarks/retrieve/{{dataset}}/{{variant}}/{{segment}}.tsv"
    log:
        f"{RESULTS}/logs/retrieve/{{dataset}}/{{variant}}/{{segment}}.log",
    resources:
        mem_mb=2000,
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
