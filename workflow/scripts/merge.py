import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.steps import merge, run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(
    sm.log[0], merge, sm.wildcards.dataset, sm.params.variant, list(sm.input.rankings),
    list(sm.input.outcomes), sm.input.data_summary, sm.output.rankings, sm.output.metrics,
    deep_in=list(sm.input.deep), deep_out=sm.output.deep,
)
