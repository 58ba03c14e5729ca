# Paired statistics between a dataset's variants (docs/protocol.md#deep-lists-and-exports):
# stats.json, read from the segments' outcomes, never changing the rankings.


rule stats:
    input:
        # the segments' outcomes, not the merged metrics: stats runs beside the merge jobs
        outcomes=lambda w: [f for v in DATASETS[dataset_of(w)]["variants"]
                            for f in segment_files(w.dataset, v, ".questions.parquet")],
    output:
        stats=f"{RESULTS}/{{dataset}}/stats.json",
    params:
        # each variant's harness baseline (the pairs compared), in configured order
        baselines=lambda w: {v: s["baseline"] for v, s in VARIANT_SPECS[dataset_of(w)].items()},
        # the variants compared pair by pair (statistics.compare)
        compare=lambda w: compared(dataset_of(w)),
        code=code("stats"),
    log:
        f"{RESULTS}/logs/stats/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


localrules:
    stats,
