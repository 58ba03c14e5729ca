import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import os

from memobench.steps import normalize, run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
base = os.path.dirname(sm.input.base_questions) if "base_questions" in sm.input.keys() else None
raw = sm.params.get("raw")
run_step(sm.log[0], normalize, sm.params.format, raw, os.path.dirname(sm.output.summary), sm.output.summary, base,
         lenient=bool(sm.params.get("lenient", False)))
