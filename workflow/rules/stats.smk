# Paired statistics between a dataset's variants (docs/protocol.md#deep-lists-and-exports):
# stats.json, read from the segments' outcomes, never changing the rankings; recall within
# token budgets from the merged outcomes and official.json (docs/statistics.md#token-budgets).


rule stats:
    input:
        # the segments' outcomes, not the merged metrics: stats runs beside the merge jobs
        outcomes=lambda w: plan.stats_inputs(config, dataset_of(w)),
        # the budget columns are the merge job's: stats waits for every variant's merge
        merged=lambda w: plan.merged_outcomes(config, dataset_of(w), "outcomes"),
        official=lambda w: plan.merged_outcomes(config, dataset_of(w), "official"),
    output:
        stats=layout.STATS,
    params:
        **stage_params(
            # each variant's harness baseline (the pairs compared), in configured order
            baselines=lambda w: plan.baselines(VARIANT_SPECS, dataset_of(w)),
            # the variants compared pair by pair (statistics.compare)
            compare=lambda w: plan.compared(config, dataset_of(w)),
            code=code("stats"),
        ),
    # one long job per dataset, which the report waits for: started as soon as its
    # inputs are there, the many short retrieve and merge jobs fill the other core
    priority: 2
    # with many variants its budgets' tests run in a second process (stages/stats.py): it waits
    # for every merge, so it mostly runs alone, where the second core would idle
    threads: 2
    log:
        f"{LOGS}/stats/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("stats")


localrules:
    stats,
