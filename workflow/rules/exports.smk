# The field's exports beside the harness's numbers (docs/protocol.md#deep-lists-and-exports):
# TREC qrels, LongMemEval retrieval logs and the sessions' log JSON they join
# (official.json and run.trec come from the merge job; paired statistics are
# stats.smk). They read the rankings and never change them: the deep list
# (depth 50), whose ranks 1-10 are the harness's top 10.


# Each session's JSON as the retrieval log writes it, once per dataset, so a
# variant's log (about the raw file's size) only joins strings. Made only
# when some retrieval log is asked for.
rule session_json:
    input:
        events=lambda w: plan.normalized(dataset_of(w), "events"),
    output:
        sessions=layout.SESSIONS_JSON,
    params:
        **stage_params(
            code=code("session_json"),
        ),
    benchmark:
        f"{BENCHMARKS}/session_json/{{dataset}}.tsv"
    log:
        f"{LOGS}/session_json/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("session_json")


# A variant's retrieval log (LongMemEval's format, about the raw file's size):
# made by the default target only for the variants exports.retrieval_log
# lists, and for any other when its path is asked for
# (`snakemake results/{dataset}/{variant}/retrievallog.jsonl`). It reads the
# merged deep list, so adding a variant to the list runs this job alone.
rule retrievallog:
    input:
        unpack(retrievallog_inputs),
    output:
        retrievallog=layout.RETRIEVAL_LOG,
    params:
        **stage_params(
            fmt=lambda w: DATASETS[w.dataset]["format"],
            code=code("retrievallog"),
        ),
    benchmark:
        f"{BENCHMARKS}/retrievallog/{{dataset}}/{{variant}}.tsv"
    log:
        f"{LOGS}/retrievallog/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("retrievallog")


rule qrels:
    input:
        questions=lambda w: plan.normalized(dataset_of(w), "questions"),
    output:
        qrels=layout.QRELS,
    params:
        **stage_params(
            code=code("qrels"),
        ),
    log:
        f"{LOGS}/qrels/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("qrels")


# A turn variant's turn lists as a TREC run, and the dataset's gold turns as
# qrels (docs/protocol.md#turn-level): made for the datasets and variants that
# rank turns only.
rule turn_run:
    input:
        turns=layout.TURNS,
        questions=lambda w: plan.normalized(dataset_of(w), "questions"),
    output:
        run=layout.TURN_RUN_TREC,
    params:
        **stage_params(
            code=code("turn_run"),
        ),
    wildcard_constraints:
        variant=TURN_VARIANTS,
    log:
        f"{LOGS}/turn_run/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("turn_run")


rule turn_qrels:
    input:
        questions=lambda w: plan.normalized(dataset_of(w), "questions"),
        haystacks=lambda w: plan.normalized(plan.base_dataset(config, dataset_of(w)), "haystacks"),
        events=lambda w: plan.normalized(plan.base_dataset(config, dataset_of(w)), "events"),
    output:
        qrels=layout.TURN_QRELS,
    params:
        **stage_params(
            fmt=lambda w: DATASETS[w.dataset]["format"],
            code=code("turn_qrels"),
        ),
    log:
        f"{LOGS}/turn_qrels/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("turn_qrels")


localrules:
    qrels,
