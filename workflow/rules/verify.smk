# Check each raw file against its published byte count, and its sha256 when
# configured (a check that must come before normalize). Where none is
# configured (LongMemEval's published facts are byte counts), manifest.smk
# hashes the accepted file for its record, beside normalize instead of on the
# path to every result. The raw file is an input and its stamp (size, mtime,
# inode) a param: replacing it, whatever its size, reruns verify and
# everything that depends on it.


rule verify:
    input:
        receipt=lambda w: receipt_path(dataset_of(w)),
        raw=raw_file,
    output:
        verified=layout.VERIFIED,
    params:
        **stage_params(
            bytes=lambda w: DATASETS[w.dataset]["bytes"],
            sha256=lambda w: DATASETS[w.dataset].get("sha256"),
            stamp=lambda w: raw_stamp(w.dataset),
            code=code("verify"),
        ),
    benchmark:
        f"{BENCHMARKS}/verify/{{dataset}}.tsv"
    log:
        f"{LOGS}/verify/{{dataset}}.log",
    conda:
        "../../envs/memobench.yaml"
    shell:
        stage_command("verify")
