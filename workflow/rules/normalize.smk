# Normalize a raw file into Parquet tables (questions, haystacks, sessions,
# events). CN rows only get a questions table: they search the haystacks of
# the LongMemEval dataset named by haystacks_from.

rule normalize:
    input:
        unpack(normalize_inputs),
    output:
        **{t: f"{RESULTS}/{{dataset}}/normalized/{t}.parquet" for t in TABLE_NAMES},
        summary=f"{RESULTS}/{{dataset}}/normalized/summary.json",
    wildcard_constraints:
        dataset="|".join(re.escape(d) for d in DATASETS if DATASETS[d]["format"] in ("longmemeval", "locomo")),
    params:
        raw=lambda w: raw_path(w.dataset),
        format=lambda w: DATASETS[w.dataset]["format"],
        # The streamed M harnesses skip elements that do not parse; run.cjs stops.
        lenient=lambda w: family(w.dataset) == "m",
        code=NORMALIZE_CODE,
    benchmark:
        f"{RESULTS}/logs/benchmarks/normalize/{{dataset}}.tsv"
    log:
        f"{RESULTS}/logs/normalize/{{dataset}}.log",
    resources:
        mem_mb=2000,
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/normalize.py"


rule normalize_cn:
    input:
        unpack(normalize_inputs),
    output:
        questions=f"{RESULTS}/{{dataset}}/normalized/questions.parquet",
        summary=f"{RESULTS}/{{dataset}}/normalized/summary.json",
    wildcard_constraints:
        dataset="|".join(re.escape(d) for d in DATASETS if DATASETS[d]["format"] == "longmemeval_cn") or "^$",
    params:
        raw=lambda w: raw_path(w.dataset),
        format="longmemeval_cn",
        code=NORMALIZE_CODE,
    benchmark:
        f"{RESULTS}/logs/benchmarks/normalize/{{dataset}}.tsv"
    log:
        f"{RESULTS}/logs/normalize/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/normalize.py"


rule normalize_embedded:
    output:
        **{t: f"{RESULTS}/{{dataset}}/normalized/{t}.parquet" for t in TABLE_NAMES},
        summary=f"{RESULTS}/{{dataset}}/normalized/summary.json",
    wildcard_constraints:
        dataset="|".join(re.escape(d) for d in DATASETS if DATASETS[d]["format"] == "embedded") or "^$",
    params:
        format="embedded",
        code=code_hash("normalize", "tables", "zh_data"),
    log:
        f"{RESULTS}/logs/normalize/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/normalize.py"
