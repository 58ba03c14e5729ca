"""Runs Snakemake's command line in a fork of a process that has already
imported Snakemake and the libraries a workflow start loads (about a second
of every start, and the suite starts Snakemake about two hundred times).

Started by :func:`tests.helpers.snakemake` (one per test process); reads one
JSON request per line on stdin: ``{"args", "cwd", "env", "out", "err"}``;
forks; the child takes the request's folder and environment, writes its
stdout and stderr to the two files and runs ``snakemake.cli.main`` exactly
as ``python -m snakemake`` does. Answers ``{"pid": ...}`` at once and
``{"rc": ...}`` when the child ends. Nothing of the memobench package is
imported here: the Snakefile imports it, from its own ``src/``, in each
child, as in a fresh process.

Every child shares this process's hash seed. A test that compares the bytes
of two runs to catch an order that depends on it starts fresh processes
(``snakemake(..., fresh=True)``) or a server started with another seed
(``hash_seed=``); otherwise a child's jobs run in forks of
:mod:`tests.helpers.job_server` (the request's ``python``).
"""

from __future__ import annotations

import json
import os
import sys

# third-party only: what a workflow start imports (tests.helpers checks the environment allows it)
PRELOAD = ("snakemake.cli", "snakemake.api", "snakemake.workflow", "snakemake.dag", "snakemake.persistence",
           "snakemake.scheduling.job_scheduler", "snakemake.report", "snakemake.report.html_reporter",
           "smart_open", "pandas", "jsonschema", "yaml", "numpy", "pyarrow", "pyarrow.parquet", "pyarrow.compute")


def _child(req: dict) -> int:
    import snakemake.cli

    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, req["out"]), (2, req["err"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    sys.argv = ["snakemake", *req["args"]]
    if req.get("python"):  # the jobs' Python: tests/helpers/job_server.py's client
        sys.executable = req["python"]
    try:
        snakemake.cli.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    return code


def main() -> None:
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    # the plugin registries (executors, storage, reports...) are found once, by walking the installed packages,
    # when the first command line is parsed: done here, for every child
    sys.modules["snakemake.cli"].get_argument_parser()
    assert not any(m == "memobench" or m.startswith("memobench.") for m in sys.modules), "memobench preloaded"
    gc.freeze()  # the preloaded objects out of every child's collections (as a new process has none of them)
    reply = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        reply.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(req)
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        reply.flush()


if __name__ == "__main__":
    main()
