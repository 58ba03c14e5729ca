# memobench: exact reproduction of the Memo session-retrieval benchmark.
# Stages: download -> verify -> normalize -> retrieve (per dataset, variant,
# segment) -> merge -> report. See README.md.

import os

from snakemake.utils import min_version

min_version("9.0")


# Relative to the Snakefile, so `-d elsewhere` still finds the defaults.
configfile: os.path.join(workflow.basedir, "config.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/normalize.smk"
include: "workflow/rules/retrieve.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/official.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/datasets.smk"


# Light jobs, and downloads (compute nodes often have no internet), stay on the
# submit host when a cluster executor is used.
localrules:
    all,
    download,
    manifest,
    merge,
    falsify,
    report,
    datasets,


rule all:
    input:
        "results/report.md",
        "results/manifest.json",
        "results/datasets.json",  # fails while a dataset is missing
    default_target: True
