# The report: every dataset x variant with its harness metrics beside the
# published number, the official metrics beside them, paired statistics,
# plots and the provenance, and the datasets that could not run with how to
# get them. Its outputs are also registered for
# `snakemake --report report.html`.

report: "../report/workflow.rst"


rule report:
    input:
        # present_only: a dataset whose download failed (and one that needs it) is left out
        metrics=present_only(plan.metrics_files(config)),
        extras=present_only(plan.report_extras(config, VARIANT_SPECS)),
        manifest=layout.MANIFEST,
        official=present_only(plan.official_files(config)),
        stats=present_only(plan.stats_files(config)),
        # made here so that rule all produces every export (docs/protocol.md#the-output-contract)
        exports=present_only(plan.export_files(config, VARIANT_SPECS)),
        receipts=plan.receipt_files(config),
    output:
        md=layout.REPORT_MD,
        html=report(layout.REPORT_HTML, caption="../report/report.rst", category="1. Report"),
        plot=report(layout.HITK_PNG, caption="../report/hitk.rst", category="2. Plots"),
        forest=report(layout.FOREST_PNG, caption="../report/forest.rst", category="2. Plots"),
        heatmap=report(layout.HEATMAP_PNG, caption="../report/heatmap.rst", category="2. Plots"),
        frontier=report(layout.FRONTIER_PNG, caption="../report/frontier.rst", category="2. Plots"),
    params:
        **stage_params(
            needs=NEEDS,
            # results of variants this run does not make, on the board beside the run's own (an earlier overlay's, memobench score's)
            others=lambda w: plan.other_results(config),
            # whether this run makes the latency page (else one beside the report is an earlier run's)
            latency=bool(plan.timed_pairs(config, VARIANT_SPECS)),
            code=code("report"),
        ),
    # its three plots are drawn at once (the bytes do not depend on it); the
    # report is the run's last job, so nothing waits for these cores. The
    # forest plot is one of them: as a job of its own it held up a run of one
    # variant by its start and matplotlib's import, more than it saved a run
    # of many variants beside their merge jobs
    threads: 2
    log:
        f"{LOGS}/report.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("report")
