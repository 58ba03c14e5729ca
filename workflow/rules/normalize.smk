# Normalize a dataset into Parquet tables (questions, haystacks, sessions,
# events). CN rows get empty haystacks/sessions/events tables: they search the
# haystacks of the LongMemEval dataset named by haystacks_from.


rule normalize:
    input:
        unpack(normalize_inputs),
    output:
        **{t: layout.path(layout.NORMALIZED_TABLE, table=t) for t in layout.TABLE_NAMES},
        summary=layout.NORMALIZED_SUMMARY,
    params:
        **stage_params(
            raw=lambda w: raw_path(w.dataset) if has_raw_file(DATASETS[w.dataset]["format"]) else None,
            format=lambda w: DATASETS[w.dataset]["format"],
            # The streamed M harnesses skip elements that do not parse; run.cjs stops.
            lenient=lambda w: family(w.dataset) == "m",
            code=code("normalize"),
        ),
    # a large LongMemEval file is read in parts, one per core (the tables are the same bytes)
    threads: lambda w: plan.normalize_threads(config, w.dataset)
    # every later job of the dataset waits for it: its cores go to it before a
    # side job that would hold one of them (the manifest hashing the same
    # file would keep a large file's normalize waiting), and before the
    # tokens jobs (3.5) of a dataset normalized already
    priority: 4
    benchmark:
        f"{BENCHMARKS}/normalize/{{dataset}}.tsv"
    log:
        f"{LOGS}/normalize/{{dataset}}.log",
    resources:
        mem_mb=3000,  # the job and a worker per part (the M file: 0.8 GB and 0.5 GB each)
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("normalize")
