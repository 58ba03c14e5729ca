# The one script every rule runs: it makes the package importable from src/
# (also without an install, e.g. under --sdm conda) and hands Snakemake's job
# to the stage named like the rule (src/memobench/stages/: the adapter
# imports that stage's module only).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.stages import run  # noqa: E402

run(snakemake)  # noqa: F821 (injected by Snakemake)
