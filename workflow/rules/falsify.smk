# The M direction check (falsifier.json): experiment variants against their
# baselines, per segment, read from each variant's metrics.json.


rule falsify:
    input:
        metrics=lambda w: [f"{RESULTS}/{w.dataset}/{v}/metrics.json" for v in DATASETS[dataset_of(w)]["variants"]],
    output:
        json=f"{RESULTS}/{{dataset}}/falsifier.json",
        md=f"{RESULTS}/{{dataset}}/falsifier.md",
    params:
        code=code("falsify"),
    log:
        f"{RESULTS}/logs/falsify/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
