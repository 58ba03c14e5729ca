# The run's last step: results/datasets.json says which of the config's
# datasets (`run`) are there and which are missing (a failed download, no
# network), with the lines the end of the run prints. The job itself never
# fails: the onsuccess/onerror handlers print one `memobench:` line per missing dataset
# and a summary after Snakemake's own lines, and exit 1 (end_of_run in
# hooks.smk, read from the receipts of this run's datasets), so the exit
# status is non-zero on every run while one is missing, whatever ran before,
# with no job-error block after the lines. The config's dataset list is a
# param: a run of other datasets rewrites the file.


rule datasets:
    input:
        # not the report: a job downstream of one that reruns is never looked
        # at for its own params, so a changed dataset list would go unseen
        receipts=datasets_receipts,
    output:
        datasets=layout.DATASETS,
    params:
        **stage_params(
            run=RUN,
            needs=NEEDS,
            code=code("datasets"),
        ),
    log:
        f"{LOGS}/datasets.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("datasets")
