"""Put on ``PYTHONPATH`` with ``MEMOBENCH_RECORD_IMPORTS`` set to a folder:
each Snakemake job (a new process, started by Snakemake) records at exit its
rule and the package modules it imported, ``<folder>/<pid>.json``, for
tests/workflow/test_fingerprint.py. Python imports this module at start-up
(``site``); any other process (Snakemake itself) records nothing."""

import atexit
import json
import os
import sys

FOLDER = os.environ.get("MEMOBENCH_RECORD_IMPORTS")


def _record() -> None:
    # a job runs workflow/scripts/stage.py RULE THREADS LOG (common.smk, stage_command)
    script = os.path.normpath(sys.argv[0]) if sys.argv else ""
    if not script.endswith(os.path.join("workflow", "scripts", "stage.py")) or len(sys.argv) < 2:
        return
    rule = sys.argv[1]
    mods = sorted(m.split(".", 1)[1] for m in sys.modules if m.startswith("memobench."))
    with open(os.path.join(FOLDER, f"{os.getpid()}.json"), "w", encoding="utf-8") as f:
        json.dump({"rule": rule, "modules": mods}, f)


if FOLDER:
    atexit.register(_record)
