"""The M direction check ("falsifier", the segment checks of docs/harnesses.md#exp4-mcjs): an
experiment variant's per-segment hit@1 and MRR against its baseline, and
whether the direction is the same in every segment."""

from __future__ import annotations

from ..core.jsmath import to_fixed
from .measures import MEASURES


def verdict(deltas: list[int]) -> str:
    if all(d == 0 for d in deltas):
        return "no change in any segment"
    if all(d > 0 for d in deltas):
        return "consistent: better in every segment"
    if all(d < 0 for d in deltas):
        return "consistent: worse in every segment"
    return "inconsistent: direction differs between segments"


def compare(metrics: dict[str, dict]) -> list[dict]:
    """``metrics``: variant name -> its metrics.json (with per-segment blocks)."""
    rows = []
    for name, m in metrics.items():
        base = m.get("baseline") or ""
        if not base or base not in metrics:
            continue
        b = metrics[base]
        segs = []
        for sv, sb in zip(m.get("segments", []), b.get("segments", [])):
            d_mrr = (sv["mrr"] or 0.0) - (sb["mrr"] or 0.0)
            segs.append({"segment": sv["segment"], "hit@1": sv["hit@1"], "base_hit@1": sb["hit@1"],
                         "delta_hit@1": sv["hit@1"] - sb["hit@1"], "delta_mrr": d_mrr,
                         "delta_mrr_printed": to_fixed(d_mrr, MEASURES["mrr"].diff_digits)})
        rows.append({"variant": name, "baseline": base, "segments": segs,
                     "verdict": verdict([s["delta_hit@1"] for s in segs])})
    return rows


def blocks(dataset: str, rows: list[dict]) -> list:
    """The report's falsifier section (doc.py blocks)."""
    from ..core.doc import Heading, Para, Table

    table = []
    for r in rows:
        dh = " / ".join(f"{s['delta_hit@1']:+d}" for s in r["segments"])
        dm = " / ".join(("+" if not s["delta_mrr_printed"].startswith("-") else "") + s["delta_mrr_printed"]
                        for s in r["segments"])
        table.append([r["variant"], r["baseline"], dh, dm, r["verdict"]])
    return [Heading(2, f"Falsifier: {dataset}"),
            Para("Per segment, the experiment's hit@1 count and MRR minus its baseline's; an S-scale gain "
                 "counts only if its direction holds in every segment."),
            Table(["variant", "baseline", "Δhit@1 per segment (questions)", "ΔMRR per segment", "verdict"], table,
                  left=(0, 1, 4))]


def markdown(dataset: str, rows: list[dict]) -> str:
    from ..core.doc import to_markdown

    return to_markdown(blocks(dataset, rows))
