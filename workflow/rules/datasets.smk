# The run's last step: when a download failed (no network), the run has done
# every dataset it could and the report lists the missing ones; this rule then
# prints one `memobench:` line per missing dataset and fails, so the exit
# status is non-zero until nothing is missing. Once every raw file is there it
# writes results/datasets.json and the run exits 0.


rule datasets:
    input:
        # ancient: after the report (the lines come last), but a report remade
        # once nothing is missing does not rerun this rule
        report=ancient(f"{RESULTS}/report.md"),
        manifest=ancient(f"{RESULTS}/manifest.json"),
        receipts=receipt_files(),
        # the report's inputs that wait for no download, so they start at once
        ready=ancient(without_downloads(
            [f"{RESULTS}/{ds}/{v}/metrics.json" for ds, v in run_pairs()]
            + report_extras() + official_files() + stats_files() + export_files()
        )),
    output:
        datasets=f"{RESULTS}/datasets.json",
    params:
        needs=NEEDS,
        code=code("datasets"),
    log:
        f"{RESULTS}/logs/datasets.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
