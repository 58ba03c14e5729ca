# Rank every question of one segment under one variant. Segments of a dataset
# are independent jobs, so they run in parallel under --cores.


rule retrieve:
    input:
        unpack(retrieve_inputs),
    output:
        rankings=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.parquet",
        outcomes=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.questions.parquet",
    params:
        variant=lambda w: VARIANT_SPECS[w.dataset][w.variant],
        segment=lambda w: int(w.segment[3:]),
        n_segments=lambda w: len(segments(w.dataset)),
        code=RETRIEVE_CODE,
    benchmark:
        f"{RESULTS}/logs/benchmarks/retrieve/{{dataset}}/{{variant}}/{{segment}}.tsv"
    log:
        f"{RESULTS}/logs/retrieve/{{dataset}}/{{variant}}/{{segment}}.log",
    resources:
        mem_mb=2000,
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/retrieve.py"
