import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.steps import run_step, verify_raw

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(sm.log[0], verify_raw, sm.params.raw, sm.output.verified, sm.wildcards.dataset, sm.params.bytes, sm.params.sha256)
