# Merge a variant's segments: rankings concatenated in question order, the
# per-question outcomes (with each list's length), and the counts and sums
# recomputed over all questions (never an average of rates). The same job
# scores the merged deep list with LongMemEval's official metrics
# (official.json) and writes the TREC run (PROTOCOL.md section 5).

MERGE_OUTPUTS = dict(
    rankings=f"{RESULTS}/{{dataset}}/{{variant}}/rankings.parquet",
    questions=f"{RESULTS}/{{dataset}}/{{variant}}/questions.parquet",
    metrics=f"{RESULTS}/{{dataset}}/{{variant}}/metrics.json",
    deep=f"{RESULTS}/{{dataset}}/{{variant}}/deep.parquet",
    official=f"{RESULTS}/{{dataset}}/{{variant}}/official.json",
    run=f"{RESULTS}/{{dataset}}/{{variant}}/run.trec",
)


rule merge:
    input:
        unpack(merge_inputs),
    output:
        **MERGE_OUTPUTS,
    params:
        variant=variant_of,
        fmt=lambda w: DATASETS[w.dataset]["format"],
        code=code("merge"),
    benchmark:
        f"{RESULTS}/logs/benchmarks/merge/{{dataset}}/{{variant}}.tsv"
    log:
        f"{RESULTS}/logs/merge/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


# LongMemEval-format datasets: the same job also writes the variant's
# retrieval log (LongMemEval's format, about the raw file's size) from the
# official metrics it has just computed and each session's ready-made JSON
# (session_json, official.smk): one process start per variant instead of two.
use rule merge as merge_lme with:
    input:
        unpack(merge_lme_inputs),
    output:
        **MERGE_OUTPUTS,
        retrievallog=f"{RESULTS}/{{dataset}}/{{variant}}/retrievallog.jsonl",
    wildcard_constraints:
        dataset=LME_DATASETS,


ruleorder: merge_lme > merge
