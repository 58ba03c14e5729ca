# Fetch a raw dataset file into data_dir when it is not there yet: mirrors in
# order, resumable (HTTP Range), moved into place only at the published byte
# count. The raw file is deliberately not a Snakemake output (only the receipt
# is): Snakemake deletes the outputs of a job before rerunning it, and a
# multi-GB download or a file placed by hand must never be deleted by a rerun,
# --forceall, or a change to this rule's code. It is a checkpoint so that the
# verify rule can take the raw file itself as an input once it exists.
# A download that fails (no network) is recorded in the receipt, not a failed
# job, and retried by every later run until the file is there (download_attempt
# in common.smk); the report and the last rule say what is missing.


checkpoint download:
    output:
        receipt=layout.RAW_RECEIPT,
    params:
        **stage_params(
            raw=lambda w: raw_path(dataset_of(w)),
            urls=lambda w: DATASETS[w.dataset].get("urls", []),
            bytes=lambda w: DATASETS[w.dataset]["bytes"],
            sha256=lambda w: DATASETS[w.dataset].get("sha256"),
            attempt=download_attempt,
            code=code("download"),
        ),
    log:
        f"{LOGS}/download/{{dataset}}.log",
    resources:
        downloads=1,
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("download")
