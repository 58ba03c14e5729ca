# Every session's and turn's tokens as a reader receives it (docs/protocol.md#token-budgets),
# counted once per dataset with the budgets' tokenizer and read by every variant's merge job:
# adding a budget or a variant adds no pass over the text. Sessions and turns are two jobs: the
# turns' only where a turn variant reads them (each is half the text to count).


rule context_tokens:
    input:
        sessions=layout.path(layout.NORMALIZED_TABLE, table="sessions"),
        events=layout.path(layout.NORMALIZED_TABLE, table="events"),
    output:
        sessions=layout.CONTEXT_SESSIONS,
    params:
        **stage_params(
            # its name and the sha256 of its file: a changed tokenizers file reruns the counts
            tokenizer=lambda w: checked(plan.budgets_tokenizer, config),
            code=code("context_tokens"),
        ),
    # one core: a second would hold the job until two are free, and every merge waits for it (LoCoMo's
    # sessions take well under a second, the 188 MB benchmark file's about four)
    threads: 1
    # every merge job reads it, as every retrieve job reads the token tables (tokens.smk)
    priority: 3
    benchmark:
        f"{BENCHMARKS}/context_tokens/{{dataset}}.tsv"
    log:
        f"{LOGS}/context_tokens/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("context_tokens")


rule context_turns:
    input:
        events=layout.path(layout.NORMALIZED_TABLE, table="events"),
    output:
        turns=layout.CONTEXT_TURNS,
    params:
        **stage_params(
            tokenizer=lambda w: checked(plan.budgets_tokenizer, config),
            code=code("context_turns"),
        ),
    threads: 1  # as context_tokens
    priority: 3
    benchmark:
        f"{BENCHMARKS}/context_turns/{{dataset}}.tsv"
    log:
        f"{LOGS}/context_turns/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("context_turns")
