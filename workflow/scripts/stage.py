# The one script every rule runs (common.smk, stage_command): it makes the
# package importable from src/ (also without an install, e.g. under --sdm
# conda) and hands the job on stdin to the stage named like the rule
# (src/memobench/stages/: the adapter imports that stage's module only).
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve()
sys.path.insert(0, str(SCRIPT.parents[2] / "src"))

from memobench.stages import main  # noqa: E402

main(sys.argv[1:], sys.stdin.read(), SCRIPT)  # a retrieve job fingerprints its siblings with SCRIPT
