# results/manifest.json: the bytes and sha256 of every accepted raw file and
# what produced the results. A file verify checked by its byte count alone is
# hashed here, through its verified.json: the job fails unless the file still
# has the stamp verify recorded (a replaced file reruns verify first).


rule manifest:
    input:
        verified=present_only(plan.verified_files(config)),
    output:
        manifest=layout.MANIFEST,
    params:
        **stage_params(
            code=code("manifest"),
        ),
    log:
        f"{LOGS}/manifest.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("manifest")
