# results/manifest.json: the bytes and sha256 of every accepted raw file and
# what produced the results.


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
