# Fetch a raw dataset file into data_dir: mirrors in order, resumable (HTTP
# Range), moved into place only at the published byte count.

DOWNLOADABLE = downloadable()


if DOWNLOADABLE:

    localrules:
        download,

    rule download:
        output:
            # Read-only once downloaded, so --forceall cannot throw away gigabytes.
            raw=protected(os.path.join(DATA_DIR, "{filename}")),
        wildcard_constraints:
            filename="|".join(re.escape(f) for f in DOWNLOADABLE),
        params:
            urls=lambda w: DATASETS[DOWNLOADABLE[w.filename]].get("urls", []),
            bytes=lambda w: DATASETS[DOWNLOADABLE[w.filename]]["bytes"],
            sha256=lambda w: DATASETS[DOWNLOADABLE[w.filename]].get("sha256"),
        log:
            f"{RESULTS}/logs/download/{{filename}}.log",
        resources:
            downloads=1,
        conda:
            "../../envs/memobench.yaml"
        script:
            "../scripts/download.py"
