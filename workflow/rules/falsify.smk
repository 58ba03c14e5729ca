# The M direction check (falsifier.json): experiment variants against their
# baselines, per segment, read from each variant's metrics.json.


rule falsify:
    input:
        metrics=lambda w: plan.falsify_inputs(config, dataset_of(w)),
    output:
        json=layout.FALSIFIER,
        md=layout.FALSIFIER_MD,
    params:
        **stage_params(
            code=code("falsify"),
        ),
    log:
        f"{LOGS}/falsify/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("falsify")
