import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.steps import retrieve, run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(
    sm.log[0], retrieve, sm.params.variant, sm.input.questions, sm.input.haystacks, sm.input.events, sm.input.tokens,
    sm.input.get("fts_index"),
    sm.params.segment, sm.params.n_segments, sm.output.rankings, sm.output.outcomes, deep=sm.output.deep,
)
