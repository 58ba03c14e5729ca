# A user's Python retriever's per-session work (config variants.<name>.retriever.prepare;
# docs/retrievers.md): its prepare callable over every distinct session
# document of a dataset, once, keyed by the document's sha256, and read by
# every segment and rerun of the variant (like the embeddings of minilm,
# embeddings.smk). It reruns when the prepare callable's source, its params
# or the document rule change, not when only the rank callable does.


rule prepare:
    input:
        events=layout.path(layout.NORMALIZED_TABLE, table="events"),
        sessions=layout.path(layout.NORMALIZED_TABLE, table="sessions"),
    output:
        prepared=layout.PREPARED,
    params:
        **stage_params(
            variant=prepare_spec,
            code=prepare_code,
        ),
    priority: 1
    resources:
        mem_mb=4000,
    benchmark:
        f"{BENCHMARKS}/prepare/{{dataset}}/{{variant}}.tsv"
    log:
        f"{LOGS}/prepare/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("prepare")
