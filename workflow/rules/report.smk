# The report: every dataset x variant with its harness metrics beside the
# published number, the official metrics beside them, paired statistics,
# plots and the provenance, and the datasets that could not run with how to
# get them. Its outputs are also registered for
# `snakemake --report report.html`.

report: "../report/workflow.rst"


# The forest plot of the paired comparisons, drawn as soon as the stats files
# are there (beside the merge jobs) rather than by the report, the run's
# last job.
rule forest:
    input:
        stats=present_only(plan.stats_files(config)),
    output:
        forest=report(layout.FOREST_PNG, caption="../report/forest.rst", category="2. Plots"),
    params:
        code=code("forest"),
    priority: 2
    log:
        f"{LOGS}/forest.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


rule report:
    input:
        # present_only: a dataset whose download failed (and one that needs it) is left out
        metrics=present_only(plan.metrics_files(config)),
        extras=present_only(plan.report_extras(config, VARIANT_SPECS)),
        manifest=layout.MANIFEST,
        official=present_only(plan.official_files(config)),
        stats=present_only(plan.stats_files(config)),
        # made here so that rule all produces every export (docs/protocol.md#the-output-contract)
        exports=present_only(plan.export_files(config)),
        receipts=plan.receipt_files(config),
        forest=layout.FOREST_PNG,
    output:
        md=layout.REPORT_MD,
        html=report(layout.REPORT_HTML, caption="../report/report.rst", category="1. Report"),
        plot=report(layout.HITK_PNG, caption="../report/hitk.rst", category="2. Plots"),
        heatmap=report(layout.HEATMAP_PNG, caption="../report/heatmap.rst", category="2. Plots"),
    params:
        needs=NEEDS,
        code=code("report"),
    # its two plots are drawn at once (the bytes do not depend on it); the
    # report is the run's last job, so nothing waits for these cores
    threads: 2
    log:
        f"{LOGS}/report.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
