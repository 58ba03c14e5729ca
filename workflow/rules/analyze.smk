# analyze.cjs: miss decomposition and oracle ceilings, one table per dataset;
# it reads the tokens and index of the package's own analyze.RECIPE.


rule analyze:
    input:
        unpack(analyze_inputs),
    output:
        rows=layout.ANALYZE_ROWS,
        summary=layout.ANALYZE_SUMMARY,
        md=layout.ANALYZE_MD,
    params:
        code=code("analyze"),
    benchmark:
        f"{BENCHMARKS}/analyze/{{dataset}}.tsv"
    log:
        f"{LOGS}/analyze/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
