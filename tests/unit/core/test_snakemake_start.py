"""Every `snakemake` invocation parses the Snakefile and imports what its
files import at the top, before any job starts: pyarrow (about 0.1 s) is the
jobs' own, so none of the package modules the workflow's files import may
load it. (An executor plugin may load it anyway: the Slurm plugin imports
pandas, which imports pyarrow; so the check imports the workflow's modules
in a bare interpreter, not inside Snakemake.)"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers import REPO

TOP_IMPORT = re.compile(r"(?m)^(?:from\s+(memobench[\w.]*)\s+import\s+([\w, ]+)|import\s+(memobench[\w.]*))")


def _workflow_imports() -> list[str]:
    modules = []
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        for m in TOP_IMPORT.finditer(path.read_text(encoding="utf-8")):
            if m.group(3):
                modules.append(m.group(3))
            elif m.group(1) in ("memobench", "memobench.core"):  # from memobench import plan: submodules
                modules += [f"{m.group(1)}.{n.strip()}" for n in m.group(2).split(",")]
            else:
                modules.append(m.group(1))
    return sorted(set(modules))


def test_the_workflow_files_import_no_pyarrow():
    modules = _workflow_imports()
    assert {"memobench.plan", "memobench.core.layout", "memobench.memo.tokenize"} <= set(modules)
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            "print(sorted(n for n in sys.modules if n == 'pyarrow' or n.startswith('pyarrow.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", f"the workflow's imports load {proc.stdout.strip()}"
