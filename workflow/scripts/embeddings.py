import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.baselines.embeddings import embed_sessions
from memobench.steps import run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(sm.log[0], embed_sessions, sm.input.events, sm.params.format, sm.output.embeddings,
         device=sm.params.device, batch_size=sm.params.batch or None)
