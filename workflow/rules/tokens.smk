# Tokenize every event once per tokenizer, for all segments and variants (the
# FTS backend's unicode61 tokens are the tokenizer "fts5", src/memobench/memo/fts5.py).


rule tokens:
    input:
        events=layout.path(layout.NORMALIZED_TABLE, table="events"),
    output:
        tokens=layout.TOKENS,
    params:
        **stage_params(
            code=code("tokens"),
        ),
    # tokens and retrieve lie on the path to every result: a free core takes
    # them before side jobs (manifest, qrels, session_json); a tokens job also
    # before any retrieve job (priority 1), the long per-dataset jobs (2) and
    # the context-token counts (3), since each tokenizer's table holds up all
    # of its variants' jobs: two tokenizers' tables are made side by side
    # before one core counts (a single tokenizer's table still starts beside it)
    priority: 3.5
    benchmark:
        f"{BENCHMARKS}/tokens/{{dataset}}/{{tokenizer}}.tsv"
    log:
        f"{LOGS}/tokens/{{dataset}}/{{tokenizer}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("tokens")
