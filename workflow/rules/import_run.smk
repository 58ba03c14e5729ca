# Imported runs (docs/imported-runs.md): a variant whose config entry has
# `run: {file, format}` is another system's ranked lists, read from its file
# into the segment tables a retrieve job writes, under the dataset's skip rule
# (src/memobench/retrieval/imported.py). merge, official metrics, stats, exports and the
# report then treat it like any variant. The file is recorded once (record_run:
# its size and sha256), and every segment checks the bytes it read against
# that record, so a file replaced between two segments' jobs fails in one line
# instead of giving numbers of two files. The file is an input whose mtime
# decides nothing (ancient), and its content (size and sha256) a param of the
# record: replacing it by other bytes, whatever its mtime, reruns its own
# scoring only; writing the same bytes again reruns nothing.


# Its input functions (run_file, import_inputs) and IMPORTED_VARIANTS live in
# common.smk (snakemake --lint: a rule file holds only its rules).


rule record_run:
    input:
        run=lambda w: ancient(run_file(w)),
    output:
        record=layout.RUN_RECORD,
    params:
        **stage_params(
            # other bytes (whatever the file's mtime) are recorded again, and every segment reread
            stamp=run_content,
            code=code("record_run"),
        ),
    wildcard_constraints:
        variant=IMPORTED_VARIANTS,
    benchmark:
        f"{BENCHMARKS}/record_run/{{dataset}}/{{variant}}.tsv"
    log:
        f"{LOGS}/record_run/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("record_run")


rule import_run:
    input:
        unpack(import_inputs),
    output:
        rankings=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["rankings"]),
        outcomes=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["outcomes"]),
        deep=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["deep"]),
        turns=layout.path(layout.SEGMENT_TABLE, suffix=layout.SEGMENT_SUFFIXES["turns"]),  # a turn run's turn lists
        timings=layout.TIMINGS,  # empty: a run file's lists were timed by no one here (retrieval/timings.py)
    params:
        **stage_params(
            variant=lambda w: {k: variant_of(w)[k] for k in ("name", "recipe", "skip", "run", "grain") if k in variant_of(w)},
            segment=segment_of,
            n_segments=lambda w: len(segments(w.dataset)),
            fmt=lambda w: DATASETS[w.dataset]["format"],  # which turns are documents, for a turn run
            code=code("import_run"),
        ),
    wildcard_constraints:
        variant=IMPORTED_VARIANTS,
    benchmark:
        f"{BENCHMARKS}/import_run/{{dataset}}/{{variant}}/{{segment}}.tsv"
    log:
        f"{LOGS}/import_run/{{dataset}}/{{variant}}/{{segment}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("import_run")

