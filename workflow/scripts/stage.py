# The one script every rule runs: it makes the package importable from src/
# (also without an install, e.g. under --sdm conda) and hands Snakemake's job
# to the stage named like the rule (src/memobench/stages/: the adapter
# imports that stage's module only).
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve()  # Snakemake's preamble names the workflow's file here, not its copy
sys.path.insert(0, str(SCRIPT.parents[2] / "src"))

from memobench.stages import run  # noqa: E402

run(snakemake, SCRIPT)  # noqa: F821 (injected by Snakemake); a retrieve job fingerprints its siblings with it
