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


def _hooks_function(name: str) -> str:
    """The source of one top-level function of hooks.smk (the file is Snakemake's dialect, not Python)."""
    text = (REPO / "workflow" / "rules" / "hooks.smk").read_text(encoding="utf-8")
    m = re.search(rf"(?ms)^def {name}\(.*?(?=^\S)", text)
    assert m, f"hooks.smk defines no {name}"
    return m.group(0)


def test_snakemakes_params_records_import_no_pandas_and_stay_the_same():
    """hooks.smk's record_params_without_pandas, applied to this Snakemake:
    while pandas is not imported, a job's params are recorded without
    importing it, each value as Snakemake's own serializer records it; once
    pandas is there, a DataFrame param is hashed as before."""
    code = _hooks_function("record_params_without_pandas") + """
import sys
from snakemake.persistence import PersistenceBase
values = [None, 1, 2.5, True, "job", (1, "a"), ["x"], {"k": (1, 2)}, b"b", object()]
before = PersistenceBase.__dict__["_serialize_param"]
Concrete = type("Concrete", (PersistenceBase,), {})
Concrete.__abstractmethods__ = frozenset()  # only its serializers are used
p = Concrete.__new__(Concrete)
record_params_without_pandas()
assert PersistenceBase.__dict__["_serialize_param"] is not before, "not applied to this Snakemake"
assert "pandas" not in sys.modules
ours = [p._serialize_param(v) for v in values]
assert "pandas" not in sys.modules, "recording params imported pandas"
theirs = [before.fget(p)(v) for v in values]  # Snakemake's own choice (pandas installed: the pandas-aware one)
assert ours == theirs, (ours, theirs)
import pandas as pd
frame = pd.DataFrame({"a": [1, 2]})
assert p._serialize_param(frame) == before.fget(p)(frame) != p._serialize_param_builtin(frame)
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
