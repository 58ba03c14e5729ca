# memobench: exact reproduction of the Memo session-retrieval benchmark.
# Stages: download -> verify -> normalize -> retrieve (per dataset, variant,
# segment) -> merge -> report. See README.md.

from snakemake.utils import min_version

min_version("8.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/normalize.smk"
include: "workflow/rules/retrieve.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "results/report.md",
        "results/manifest.json",
    default_target: True
