# The field's yardsticks beside the harness's numbers (PROTOCOL.md section 5):
# LongMemEval's official metrics, TREC run/qrels, LongMemEval retrieval logs
# and paired statistics between variants. They read the rankings and never
# change them.

# The ranking the official metrics and exports read: the deep list (depth 50),
# whose ranks 1-10 are the harness's top 10 (rankings.parquet).
OFFICIAL_RANKINGS = "deep.parquet"
LME_FORMATS = ("longmemeval", "longmemeval_cn")


def is_lme(ds):
    return DATASETS[ds]["format"] in LME_FORMATS


def official_inputs(w):
    variant_of(w)
    base = base_dataset(w.dataset)
    return {
        "questions": f"{norm_dir(w.dataset)}/questions.parquet",
        "haystacks": f"{norm_dir(base)}/haystacks.parquet",
        "events": f"{norm_dir(base)}/events.parquet",
        "rankings": f"{RESULTS}/{w.dataset}/{w.variant}/{OFFICIAL_RANKINGS}",
    }


def official_files():
    """official.json per dataset x variant (the report folds them in)."""
    return [f"{RESULTS}/{ds}/{v}/official.json" for ds, v in run_pairs()]


def stats_files():
    return [f"{RESULTS}/{ds}/stats.json" for ds in RUN if DATASETS[ds]["variants"]]


def export_files():
    """Everything PROTOCOL section 5 promises, so rule all (through the report) makes it."""
    out = [f"{RESULTS}/{ds}/{v}/run.trec" for ds, v in run_pairs()]
    out += [f"{RESULTS}/{ds}/{v}/retrievallog.jsonl" for ds, v in run_pairs() if is_lme(ds)]
    out += [f"{RESULTS}/{ds}/qrels.trec" for ds in RUN if DATASETS[ds]["variants"]]
    return out


rule official:
    input:
        unpack(official_inputs),
    output:
        official=f"{RESULTS}/{{dataset}}/{{variant}}/official.json",
        run=f"{RESULTS}/{{dataset}}/{{variant}}/run.trec",
    params:
        fmt=lambda w: DATASETS[w.dataset]["format"],
        code=code("official"),
    benchmark:
        f"{RESULTS}/logs/benchmarks/official/{{dataset}}/{{variant}}.tsv"
    log:
        f"{RESULTS}/logs/official/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


rule retrievallog:
    input:
        unpack(official_inputs),
    output:
        retrievallog=f"{RESULTS}/{{dataset}}/{{variant}}/retrievallog.jsonl",
    params:
        fmt=lambda w: DATASETS[w.dataset]["format"],
        code=code("retrievallog"),
    benchmark:
        f"{RESULTS}/logs/benchmarks/retrievallog/{{dataset}}/{{variant}}.tsv"
    log:
        f"{RESULTS}/logs/retrievallog/{{dataset}}/{{variant}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


rule qrels:
    input:
        questions=lambda w: f"{norm_dir(dataset_of(w))}/questions.parquet",
    output:
        qrels=f"{RESULTS}/{{dataset}}/qrels.trec",
    params:
        code=code("qrels"),
    log:
        f"{RESULTS}/logs/qrels/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


rule stats:
    input:
        metrics=lambda w: [f"{RESULTS}/{w.dataset}/{v}/metrics.json" for v in DATASETS[dataset_of(w)]["variants"]],
        outcomes=lambda w: [f for v in DATASETS[dataset_of(w)]["variants"]
                            for f in segment_files(w.dataset, v, ".questions.parquet")],
    output:
        stats=f"{RESULTS}/{{dataset}}/stats.json",
    params:
        code=code("stats"),
    log:
        f"{RESULTS}/logs/stats/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


localrules:
    qrels,
    stats,
