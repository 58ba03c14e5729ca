import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.steps import run_step, tokens

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(sm.log[0], tokens, sm.input.events, sm.wildcards.seq, sm.output.tokens)
