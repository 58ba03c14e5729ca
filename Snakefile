# memobench: exact reproduction of the Memo session-retrieval benchmark.
# Stages: download -> verify -> normalize -> retrieve (per dataset, variant,
# segment) -> merge -> report. See README.md.

import os

from snakemake.utils import min_version

min_version("9.0")


# Relative to the Snakefile, so `-d elsewhere` still finds the defaults.
configfile: os.path.join(workflow.basedir, "config.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/hooks.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/manifest.smk"
include: "workflow/rules/normalize.smk"
include: "workflow/rules/tokens.smk"
include: "workflow/rules/context_tokens.smk"
include: "workflow/rules/embeddings.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/retrieve.smk"
include: "workflow/rules/import_run.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/falsify.smk"
include: "workflow/rules/exports.smk"
include: "workflow/rules/stats.smk"
include: "workflow/rules/latency.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/datasets.smk"


# Light jobs, and downloads (compute nodes often have no internet), stay on the
# submit host when a cluster executor is used.
localrules:
    all,
    download,
    record_run,
    manifest,
    merge,
    falsify,
    report,
    datasets,


# every result users rely on, so that one deleted is made again (common.smk)
RESULT_FILES = result_files()


rule all:
    input:
        layout.REPORT_MD,
        layout.MANIFEST,
        layout.DATASETS,  # which datasets are there; the run exits 1 while one is missing
        # those of datasets that wait for no download, so their jobs start at once
        # (the others are known once the downloads have run)
        without_downloads(RESULT_FILES),
        # present_only: not those of a dataset whose download failed
        present_only(RESULT_FILES),
    default_target: True


# What Snakemake keeps for the whole run (the parsed rules, the config, the
# modules) exists by now: set it aside from the cyclic garbage collector, whose
# passes over it at exit are work for nothing (gc.freeze; objects
# made later are collected as usual, and these live until the end anyway).
import gc

gc.freeze()
