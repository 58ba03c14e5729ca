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
        **stage_params(
            code=code("analyze"),
        ),
    # one long job per dataset, which the report waits for: started as soon as its
    # inputs are there, the many short retrieve and merge jobs fill the other core
    priority: 2
    benchmark:
        f"{BENCHMARKS}/analyze/{{dataset}}.tsv"
    log:
        f"{LOGS}/analyze/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("analyze")
