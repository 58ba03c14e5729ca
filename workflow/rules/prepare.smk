# A user's Python retriever's per-session work (config variants.<name>.retriever.prepare;
# docs/retrievers.md): its prepare callable over every distinct session
# document of a dataset, once, keyed by the document's sha256, and read by
# every segment and rerun of the variant (like the embeddings of minilm,
# baselines.smk). It reruns when the prepare callable's source, its params
# or the document rule change, not when only the rank callable does.


def prepare_spec(w):
    """The settings that decide a prepared table: the variant resolved for
    the dataset (the base dataset of those that search its haystacks)."""
    ds = dataset_of(w)
    try:
        v = resolve(w.variant, family(ds), CUSTOM_VARIANTS)
    except ConfigError as e:
        fail(f"{RESULTS}/{ds}/prepared/{w.variant}.parquet: {e}")
    if not (v.retriever or {}).get("prepare"):
        fail(f"{RESULTS}/{ds}/prepared/{w.variant}.parquet: variant {w.variant!r} is not a retriever with a "
             f"prepare step")
    spec = to_spec(v)
    return {"name": spec["name"], "recipe": spec["recipe"], "skip": "",
            "retriever": {"prepare": v.retriever["prepare"], "params": v.retriever["params"]}}


def prepare_code(w):
    from memobench.pyretriever import prepare_fingerprint

    try:
        return prepare_fingerprint(from_spec(prepare_spec(w)), STAGE_SCRIPT_PATH)
    except (ConfigError, OSError) as e:
        fail(f"config: variant {w.variant!r}: {e}")


rule prepare:
    input:
        events=f"{RESULTS}/{{dataset}}/normalized/events.parquet",
        sessions=f"{RESULTS}/{{dataset}}/normalized/sessions.parquet",
    output:
        prepared=f"{RESULTS}/{{dataset}}/prepared/{{variant}}.parquet",
    params:
        variant=prepare_spec,
        code=prepare_code,
    priority: 1
    resources:
        mem_mb=4000,
    benchmark:
        f"{RESULTS}/logs/benchmarks/prepare/{{dataset}}/{{variant}}.tsv"
    log:
        f"{RESULTS}/logs/prepare/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
