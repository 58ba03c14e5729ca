import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.steps import download, run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(sm.log[0], download, sm.params.raw, sm.params.urls, sm.params.bytes, sm.params.sha256, sm.output.receipt)
