# The report: every dataset x variant with its metrics, the published number
# beside each figure, the random baseline, a hit@k plot, and the provenance.


rule report:
    input:
        metrics=[f"{RESULTS}/{ds}/{v}/metrics.json" for ds, v in run_pairs()],
        extras=report_extras(),
        manifest=f"{RESULTS}/manifest.json",
    output:
        md=f"{RESULTS}/report.md",
        html=f"{RESULTS}/report.html",
        plot=f"{RESULTS}/hitk.png",
    params:
        code=code("report"),
    log:
        f"{RESULTS}/logs/report.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
