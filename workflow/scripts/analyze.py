import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.analyze import run_analyze
from memobench.steps import run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(
    sm.log[0], run_analyze, sm.input.questions, sm.input.haystacks, sm.input.events,
    sm.output.rows, sm.output.summary, sm.output.md, sm.wildcards.dataset, sm.input.tokens, sm.input.fts_index,
)
