# analyze.cjs: miss decomposition and oracle ceilings, one table per dataset.


rule analyze:
    input:
        unpack(retrieve_inputs),
    output:
        rows=f"{RESULTS}/{{dataset}}/analyze/questions.parquet",
        summary=f"{RESULTS}/{{dataset}}/analyze/summary.json",
        md=f"{RESULTS}/{{dataset}}/analyze/analyze.md",
    params:
        code=code_hash("analyze", "engine", "tokenize", "jsmath", "retrieval"),
    benchmark:
        f"{RESULTS}/logs/benchmarks/analyze/{{dataset}}.tsv"
    log:
        f"{RESULTS}/logs/analyze/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/analyze.py"


# The M direction check: experiment variants against their baselines, per segment.
rule falsify:
    input:
        metrics=lambda w: [f"{RESULTS}/{w.dataset}/{v}/metrics.json" for v in DATASETS[w.dataset]["variants"]],
    output:
        json=f"{RESULTS}/{{dataset}}/falsifier.json",
        md=f"{RESULTS}/{{dataset}}/falsifier.md",
    params:
        code=code_hash("falsifier"),
    log:
        f"{RESULTS}/logs/falsify/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/falsify.py"
