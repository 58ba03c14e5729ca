"""What ``memobench score`` prints of the figures the scoring engine (score_engine.py) read: the harness
and official metrics, the paired comparison, a turn run's turn-level figures, the data file, a service's
latency; each figure as the report prints it (reporting/numbers.py)."""

from __future__ import annotations

from pathlib import Path

from .evaluation.measures import HARNESS_MEASURES, MEASURES, OFFICIAL_MEASURES, PAIRED
from .evaluation.published import data_file


def harness_line(label: str, m: dict, published: dict | None = None) -> str:
    from .reporting.numbers import level

    line = f"  {label:24s} n {m['questions']:5d}  " + "  ".join(
        f"{k} {level(m, k)}" for k in HARNESS_MEASURES)
    if published:
        line += "  (published: " + ", ".join(f"{k} {v}" for k, v in published.items()) + ")"
    return line



def official_shown(fmt: str) -> list[str]:
    """The official measures printed for a dataset of format ``fmt``."""
    shown = "locomo" if fmt == "locomo" else "lme"
    return [k for k in OFFICIAL_MEASURES if shown in MEASURES[k].score_formats]



def official_convention(block: dict | None) -> str | None:
    """The averaging convention whose figures official.json's top-level ones are (``run_retrieval``
    for LongMemEval, ``all_categories`` for LoCoMo): the first of its ``conventions`` with the same
    questions and figures; None for a block without conventions."""
    if not block:
        return None
    figures = {k: v for k, v in block.items() if "@" in k}
    for name, conv in (block.get("conventions") or {}).items():
        if conv.get("questions") == block.get("questions") and all(conv.get(k) == v for k, v in figures.items()):
            return name
    return None


def official_line(label: str, block: dict | None, fmt: str) -> str:
    if not block:
        return f"  {label:24s} (no official scorer for this dataset)"
    from .reporting.numbers import percent

    cells = "  ".join(f"{k} {percent(block.get(k))}" for k in official_shown(fmt))
    return f"  {label:24s} n {block['questions']:5d}  {cells}"



def paired_lines(c: dict) -> list[str]:
    """The paired comparison of :func:`memobench.evaluation.stats.compare`, one
    line per measure, each figure as the report prints it (reporting/numbers.py)."""
    from .reporting.numbers import difference, p_randomization, p_test

    out = [f"paired against {c['baseline']} (per question, {c['variant']} - {c['baseline']}; hit@k in percentage "
           f"points, MRR in MRR units; bootstrap 95% interval; p-values: randomization, and McNemar (hit@k) or "
           f"paired t-test (MRR)), n {c['n']}:"]
    for k in PAIRED:
        mm = c["metrics"][k]
        test = p_test(mm, k)
        out.append(f"  {MEASURES[k].label:6s} {difference(mm, k)}  p: {p_randomization(mm)}"
                   + (f"; {test}" if test else ""))
    return out



def turn_lines(label: str, t: dict) -> list[str]:
    """A turn run's figures at turn level (official.json's ``turn``), each named by its grain."""
    from .reporting.numbers import percent

    if "turn2session" in t:  # LongMemEval's turn path
        shown = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10")
        return [f"turn level ({t['rules']}):",
                f"  {label:24s} n {t['questions']:5d}  turn: " + "  ".join(f"{k} {percent(t.get(k))}" for k in shown),
                f"  {'':24s} {'':7s}  turn2session: "
                + "  ".join(f"{k} {percent(t['turn2session'].get(k))}" for k in shown)]
    shown = ("recall@5", "recall@10", "recall_all@10")
    return [f"turn level ({t['rules']}):",
            f"  {label:24s} n {t['questions']:5d}  turn: " + "  ".join(f"{k} {percent(t.get(k))}" for k in shown)]



def data_file_line(verified: Path) -> str:
    """The dataset's raw file as checked (verify stage), and which published release it is: a
    figure is comparable with a published one only on the same file."""
    f = data_file(verified if verified.exists() else None)  # none: the embedded zh set
    if f["file"] is None:
        return f"data file: {f['label']}"
    how = {"sha256": ", by its sha256", "bytes": ", by its byte count"}.get(f["matched_by"], "")
    return f"data file: {f['file']}, {f['bytes']:,} bytes: {f['label']}{how}"



def latency_lines(s: dict) -> list[str]:
    """:func:`latency_summary`'s figures, as the latency page states them."""

    def q(phase: str, p: str) -> str:
        v = s[phase].get(p)
        from .reporting.numbers import plain

        return "-" if not v else f"{plain(v['ms'])} ms [{plain(v['low'])}, {plain(v['high'])}]"

    return [f"search latency (this run's measurement; {s['cold']['n']} cold, {s['warm']['n']} warm searches, "
            f"{s['failed']} failed; 95% bootstrap intervals):",
            f"  warm p50 {q('warm', 'p50')}  p95 {q('warm', 'p95')}  p99 {q('warm', 'p99')}",
            f"  cold p50 {q('cold', 'p50')}; ingested {s['ingest']['sessions']} sessions"]
