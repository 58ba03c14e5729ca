# Check each raw file against its published byte count (and sha256 when
# configured); the manifest records the bytes and sha256 of every accepted
# file and what produced the results. The raw file is an input and its stamp
# (size, mtime, inode) a param: replacing it, whatever its size, reruns verify
# and everything that depends on it.


rule verify:
    input:
        receipt=lambda w: receipt_path(dataset_of(w)),
        raw=raw_file,
    output:
        verified=f"{RESULTS}/{{dataset}}/verified.json",
    params:
        bytes=lambda w: DATASETS[w.dataset]["bytes"],
        sha256=lambda w: DATASETS[w.dataset].get("sha256"),
        stamp=lambda w: raw_stamp(w.dataset),
        code=code("verify"),
    benchmark:
        f"{RESULTS}/logs/benchmarks/verify/{{dataset}}.tsv"
    log:
        f"{RESULTS}/logs/verify/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT


rule manifest:
    input:
        verified=present_only(verified_files()),
    output:
        manifest=f"{RESULTS}/manifest.json",
    params:
        code=code("manifest"),
    log:
        f"{RESULTS}/logs/manifest.log",
    conda:
        "../../envs/memobench.yaml"
    script:
        STAGE_SCRIPT
