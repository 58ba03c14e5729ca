# Search latency (docs/memory-services.md): the memory services' search and
# ingestion timings and the in-process retrievers' calls, as percentiles with
# bootstrap intervals beside hit@5, and a recall-latency plot. Only when the
# run has a system variant, or config latency is true; its files, like the
# timings, differ from run to run.


rule latency:
    input:
        timings=present_only(plan.latency_timings(config, VARIANT_SPECS)),
        metrics=present_only(plan.latency_metrics(config, VARIANT_SPECS)),
        # recall within token budgets beside the services' latency
        official=present_only(plan.latency_metrics(config, VARIANT_SPECS, layout.OFFICIAL)),
    output:
        md=layout.LATENCY_MD,
        html=layout.LATENCY_HTML,
        json=layout.LATENCY_JSON,
        png=layout.LATENCY_PNG,
    params:
        **stage_params(
            code=code("latency"),
        ),
    log:
        f"{LOGS}/latency.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("latency")
