# Merge a variant's segments: rankings concatenated in question order, the
# per-question outcomes (outcomes.parquet, with each list's length), and the counts and sums
# recomputed over all questions (never an average of rates). The same job
# scores the merged deep list with LongMemEval's official metrics
# (official.json) and writes the TREC run (docs/protocol.md#deep-lists-and-exports). The
# retrieval log, as large as the raw file, is a rule of its own
# (retrievallog, exports.smk), made only where asked.


rule merge:
    input:
        unpack(merge_inputs),
    output:
        rankings=layout.RANKINGS,
        outcomes=layout.OUTCOMES,
        metrics=layout.METRICS,
        deep=layout.DEEP,
        turns=layout.TURNS,
        official=layout.OFFICIAL,
        run=layout.RUN_TREC,
    params:
        **stage_params(
            variant=lambda w: plan.merge_spec(variant_of(w)),
            fmt=lambda w: DATASETS[w.dataset]["format"],
            # recall within these token budgets (official.json's budgets; the counts are an input)
            budgets=lambda w: plan.budget_tokens(config),
            code=code("merge"),
        ),
    benchmark:
        f"{BENCHMARKS}/merge/{{dataset}}/{{variant}}.tsv"
    log:
        f"{LOGS}/merge/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("merge")
