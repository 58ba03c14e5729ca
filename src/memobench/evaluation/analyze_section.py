"""The report's miss-analysis section, from analyze's summary.json.

Apart from analyze.py (which imports the engine), so the report reads the
summary without the engine in its code fingerprint; analyze.md is written
from the same blocks.
"""

from __future__ import annotations

from ..core.doc import Heading, Para, Table


def blocks(dataset: str, s: dict) -> list:
    """The report's miss-analysis section from analyze's summary (summary.json)."""
    b, c = s["baseline"]["printed"], s["ceilings"]["printed"]
    causes = list(s["causes"])  # analyze.CAUSES, in its order
    return [
        Heading(2, f"Miss analysis: {dataset}"),
        Para(f"analyze.cjs on {s['questions']} questions (W-070 window, length weights, FTS LIMIT 2000)."),
        Para(f"Baseline hit@1 {b['hit@1']}% · hit@5 {b['hit@5']}% · hit@10 {b['hit@10']}%."),
        Table(["ceiling", "% of questions"], [
            ["gold in the union of all phrase lists", c["union"]],
            ["gold in the union of the per-phrase top-10 lists", c["top10"]],
            ["IDF oracle rerank (printed as hit@1 by the original; it is a hit@10)", c["idf_rerank"]]]),
        Para(f"Misses (rank 0): {s['misses']}."),
        Table(["cause", "n", "% of misses", "% of all"],
              [[cause, v["count"], v["share_of_misses"], v["share_of_all"]] for cause, v in s["causes"].items()]),
        Para("merge-cut is structurally 0: every session of a top-10 list is in P or T, both inside the merged list."),
        Para(f"Mean coverage (window tokens found in gold sessions / window size) over covered questions: "
             f"{s['mean_coverage']}; coverage 0: {s['coverage_zero']}."),
        Table(["type"] + [f"{c} misses" for c in causes],
              [[t] + [v[c[:5]] for c in causes] for t, v in s["by_type"].items()]),
    ]
