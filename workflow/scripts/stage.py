# The one script every rule runs: it makes the package importable from src/
# (also without an install, e.g. under --sdm conda) and hands Snakemake's job
# to the stage registered under the rule's name (src/memobench/steps.py).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench.steps import run  # noqa: E402

run(snakemake)  # noqa: F821 (injected by Snakemake)
