# analyze.cjs: miss decomposition and oracle ceilings, one table per dataset;
# it reads the tokens and index of the package's own analyze.RECIPE.


rule analyze:
    input:
        unpack(analyze_inputs),
    output:
        rows=f"{RESULTS}/{{dataset}}/analyze/questions.parquet",
        summary=f"{RESULTS}/{{dataset}}/analyze/summary.json",
        md=f"{RESULTS}/{{dataset}}/analyze/analyze.md",
    params:
        code=code("analyze"),
    benchmark:
        f"{RESULTS}/logs/benchmarks/analyze/{{dataset}}.tsv"
    log:
        f"{RESULTS}/logs/analyze/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
