import sys
from pathlib import Path

# The package lives in src/; make it importable without an install (e.g. --sdm conda).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from memobench import steps
from memobench.steps import run_step

sm = snakemake  # noqa: F821 (injected by Snakemake)
i, o, w, p = sm.input, sm.output, sm.wildcards, sm.params
if sm.rule == "official":
    run_step(sm.log[0], steps.official, w.dataset, p.fmt, w.variant, i.questions, i.haystacks, i.events,
             i.rankings, o.official, o.run)
elif sm.rule == "retrievallog":
    run_step(sm.log[0], steps.retrievallog, p.fmt, i.questions, i.haystacks, i.events, i.rankings, o[0])
elif sm.rule == "qrels":
    run_step(sm.log[0], steps.qrels, i.questions, o[0])
elif sm.rule == "stats":
    run_step(sm.log[0], steps.stats, w.dataset, list(i.metrics), list(i.outcomes), o[0])
else:
    raise SystemExit(f"memobench: workflow/scripts/official.py does not run rule {sm.rule!r}")
