# The report: every dataset x variant with its metrics, the published number
# beside each figure, the random baseline, and a hit@k plot.


rule report:
    input:
        metrics=[f"{RESULTS}/{ds}/{v}/metrics.json" for ds, v in run_pairs()],
        extras=report_extras(),
    output:
        md=f"{RESULTS}/report.md",
        html=f"{RESULTS}/report.html",
        plot=f"{RESULTS}/hitk.png",
    params:
        code=code_hash("report", "published"),
    log:
        f"{RESULTS}/logs/report.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/report.py"
