# Rank every question of one segment under one variant (the tokens it reads
# are tokens.smk's). Segments of a dataset are independent jobs, so they run
# in parallel under --cores.


rule retrieve:
    input:
        unpack(retrieve_inputs),
    output:
        rankings=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["rankings"]),
        outcomes=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["outcomes"]),
        deep=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["deep"]),
        # a turn variant's turn lists (empty for the others)
        turns=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["turns"]),
        # a memory service's timed requests (empty for the variants not timed): with the logs, since
        # they differ from run to run (retrieval/timings.py)
        timings=layout.TIMINGS,
    params:
        **stage_params(
            # only what decides the lists: editing a description reruns no retrieval
            # (a user retriever's: with the user_retrievers limits)
            variant=retrieve_variant,
            segment=segment_of,
            n_segments=lambda w: len(segments(w.dataset)),
            # the variant's retriever's code only (common.smk): editing one retriever reruns its variants
            code=retrieve_code,
        ),
    wildcard_constraints:
        variant=RANKED_VARIANTS,  # not an imported run (import_run reads those)
    # a group's leading job first, so the other core takes another group's pass
    # rather than a sibling that would wait for this one's (common.smk)
    priority: retrieve_priority
    benchmark:
        f"{BENCHMARKS}/retrieve/{{dataset}}/{{variant}}/{{segment}}.tsv"
    log:
        f"{LOGS}/retrieve/{{dataset}}/{{variant}}/{{segment}}.log",
    resources:
        mem_mb=2000,
        memory_service=memory_service_jobs,
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("retrieve")
