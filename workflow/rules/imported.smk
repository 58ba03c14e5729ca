# Imported runs (docs/imported-runs.md): a variant whose config entry has
# `run: {file, format}` is another system's ranked lists, read from its file
# into the segment tables a retrieve job writes, under the dataset's skip rule
# (src/memobench/imported.py). merge, official metrics, stats, exports and the
# report then treat it like any variant. The file is an input, and its stamp
# (size, mtime, inode) a param: replacing it reruns its own scoring only.


# IMPORTED_VARIANTS (common.smk): the variant names that are imported runs.


def run_file(w):
    """The imported run's file, which must be there (one line naming the fix if not)."""
    spec = variant_of(w)
    if not spec.get("run"):
        fail(f"{RESULTS}/{w.dataset}/{w.variant}/...: variant {w.variant!r} is not an imported run under "
             f"dataset {w.dataset!r}")
    path = spec["run"]["file"]
    if not os.path.isfile(path):
        fail(f"config: variants.{w.variant}.run.file: {path}: no such file (relative paths start from the "
             f"working directory, {os.getcwd()}); give the run file's path")
    return path


def import_inputs(w):
    segment_of(w)
    ds, base = w.dataset, base_dataset(w.dataset)
    inputs = {"run": run_file(w), "questions": f"{norm_dir(ds)}/questions.parquet",
              "haystacks": f"{norm_dir(base)}/haystacks.parquet"}
    if variant_of(w)["run"]["format"] == "retrievallog":  # scoring ids: which sessions hold a user target
        inputs["events"] = f"{norm_dir(base)}/events.parquet"
    return inputs


rule import_run:
    input:
        unpack(import_inputs),
    output:
        rankings=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.parquet",
        outcomes=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.questions.parquet",
        deep=f"{RESULTS}/{{dataset}}/{{variant}}/segments/{{segment}}.deep.parquet",
    params:
        variant=lambda w: {k: variant_of(w)[k] for k in ("name", "recipe", "skip", "run")},
        segment=segment_of,
        n_segments=lambda w: len(segments(w.dataset)),
        # a file replaced by another (whatever its mtime) reruns the import
        stamp=lambda w: file_stamp(run_file(w)),
        code=code("import_run"),
    wildcard_constraints:
        variant=IMPORTED_VARIANTS,
    benchmark:
        f"{RESULTS}/logs/benchmarks/import_run/{{dataset}}/{{variant}}/{{segment}}.tsv"
    log:
        f"{RESULTS}/logs/import_run/{{dataset}}/{{variant}}/{{segment}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT

