# Merge a variant's segments: rankings concatenated in question order, counts
# and sums recomputed over all questions (never an average of rates); the deep
# lists (depth 50) concatenated the same way.


rule merge:
    input:
        rankings=lambda w: segment_files(w.dataset, w.variant),
        outcomes=lambda w: segment_files(w.dataset, w.variant, ".questions.parquet"),
        deep=lambda w: segment_files(w.dataset, w.variant, ".deep.parquet"),
        data_summary=lambda w: f"{norm_dir(w.dataset)}/summary.json",
    output:
        rankings=f"{RESULTS}/{{dataset}}/{{variant}}/rankings.parquet",
        metrics=f"{RESULTS}/{{dataset}}/{{variant}}/metrics.json",
        deep=f"{RESULTS}/{{dataset}}/{{variant}}/deep.parquet",
    params:
        variant=lambda w: VARIANT_SPECS[w.dataset][w.variant],
        code=MERGE_CODE,
    benchmark:
        f"{RESULTS}/logs/benchmarks/merge/{{dataset}}/{{variant}}.tsv"
    log:
        f"{RESULTS}/logs/merge/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/merge.py"
