import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.steps import report, run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
run_step(sm.log[0], report, list(sm.input.metrics), list(sm.input.extras), sm.output.md, sm.output.html,
         sm.output.plot, official_paths=list(sm.input.official), stats_paths=list(sm.input.stats),
         forest_out=sm.output.forest, heatmap_out=sm.output.heatmap)
