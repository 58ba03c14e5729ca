# Check each raw file against its published byte count (and sha256 when
# configured); the manifest records the bytes and sha256 of every accepted file.


rule verify:
    input:
        receipt=f"{RESULTS}/{{dataset}}/raw.json",
    output:
        verified=f"{RESULTS}/{{dataset}}/verified.json",
    params:
        raw=lambda w: raw_path(w.dataset),
        bytes=lambda w: DATASETS[w.dataset]["bytes"],
        sha256=lambda w: DATASETS[w.dataset].get("sha256"),
    benchmark:
        f"{RESULTS}/logs/benchmarks/verify/{{dataset}}.tsv"
    log:
        f"{RESULTS}/logs/verify/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/verify.py"


rule manifest:
    input:
        verified=verified_files(),
    output:
        manifest=f"{RESULTS}/manifest.json",
    log:
        f"{RESULTS}/logs/manifest.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        "../scripts/manifest.py"
