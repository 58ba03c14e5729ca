# The report: every dataset x variant with its harness metrics beside the
# published number, the official metrics beside them, paired statistics,
# plots and the provenance, and the datasets that could not run with how to
# get them. Its outputs are also registered for
# `snakemake --report report.html`.

report: "../report/workflow.rst"


rule report:
    input:
        # present_only: a dataset whose download failed (and one that needs it) is left out
        metrics=present_only([f"{RESULTS}/{ds}/{v}/metrics.json" for ds, v in run_pairs()]),
        extras=present_only(report_extras()),
        manifest=f"{RESULTS}/manifest.json",
        official=present_only(official_files()),
        stats=present_only(stats_files()),
        # made here so that rule all produces every export (docs/protocol.md#the-output-contract)
        exports=present_only(export_files()),
        receipts=receipt_files(),
    output:
        md=f"{RESULTS}/report.md",
        html=report(f"{RESULTS}/report.html", caption="../report/report.rst", category="1. Report"),
        plot=report(f"{RESULTS}/hitk.png", caption="../report/hitk.rst", category="2. Plots"),
        forest=report(f"{RESULTS}/forest.png", caption="../report/forest.rst", category="2. Plots"),
        heatmap=report(f"{RESULTS}/heatmap.png", caption="../report/heatmap.rst", category="2. Plots"),
    params:
        needs=NEEDS,
        code=code("report"),
    log:
        f"{RESULTS}/logs/report.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
