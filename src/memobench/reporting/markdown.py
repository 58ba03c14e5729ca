"""results/report.md: the Markdown-only tables (harness and official metrics)
and the whole Markdown report."""

from __future__ import annotations

from ..core.doc import Code, Heading, Para, Table, to_markdown
from ..evaluation.measures import HARNESS_MEASURES, MEASURES, OFFICIAL_MEASURES
from ..evaluation.published import published
from .labels import by_dataset, label
from .numbers import percent, printed, published_diff
from .sections import (DEPTH_MEANS, latency_note, matrix_blocks, paired_blocks, per_type_blocks, pool_note, reading_guide, warned, warnings_note, attribution_note, type_paired_blocks,
                       variant_table)


def _published_cell(m: dict, key: str, pub: dict) -> str:
    """Markdown main table: ``60.2% (1190) / 60.2 =``."""
    ours = printed(m, key)
    if ours is None:
        return "-"
    text = ours + MEASURES[key].unit.suffix
    if MEASURES[key].counted:
        text += f" ({m[key]})"
    if key in pub:
        text += f" / {pub[key]} {published_diff(m, key, pub[key])}"
    return text


def md_main(runs: list[dict]) -> list:
    rows = []
    for m in runs:
        pub = published(m["dataset"], m["variant"])
        rnd = (m.get("random") or {}).get("hit@1")
        rows.append([m["dataset"], warned(m), m["questions"], *(_published_cell(m, k, pub) for k in HARNESS_MEASURES),
                     percent(rnd)])
    return [Heading(2, "Harness metrics"),
            Para(["Each cell: our value (count) / the published value and the difference (", Code("="),
                  " when equal to the printed digit). Rates are over the evaluated questions."]),
            Table(["dataset", "variant", "questions", *(MEASURES[k].label for k in HARNESS_MEASURES), "random hit@1"],
                  rows, left=2),
            *(Para([f"{ds}: ", *note.content], cls=note.cls) for ds, ms in by_dataset(runs).items()
              for note in (warnings_note(ms), attribution_note(ms), pool_note(ms)) if note is not None)]


def md_official(runs: list[dict]) -> list:
    rows = []
    for m in runs:
        o = m.get("official")
        if not o:
            continue
        exc = ", ".join(f"{k} {v}" for k, v in o["excluded"].items())
        rows.append([m["dataset"], label(m), o["questions"], exc, o["depth"]]
                    + [percent(o.get(k)) for k in OFFICIAL_MEASURES])
    if not rows:
        return []
    lme_only = [MEASURES[k].label for k in OFFICIAL_MEASURES if MEASURES[k].lme_only]
    empty = [m["dataset"] for m in runs if m.get("official") and not any(k in m["official"] for k in OFFICIAL_MEASURES
                                                                         if MEASURES[k].lme_only)]
    why = (f" {', '.join(lme_only)}: LongMemEval's scoring only; LoCoMo's evidence-session scoring has no nDCG, so "
           f"its rows ({', '.join(dict.fromkeys(empty))}) show - there." if empty and lme_only else "")
    return [Heading(2, "Official metrics (LongMemEval's own scoring, LoCoMo's evidence sessions; not the harness's "
                       "hit@k)"),
            Para("recall_all@k: every gold session in the top k; recall_any@k: at least one; ndcg_any@k with "
                 "LongMemEval's discount. Averaged over the file's questions less abstention and no-user-target "
                 "questions (LongMemEval); LoCoMo over questions with evidence sessions (convention "
                 f"all_categories; categories_1_4 under Official metrics by convention); {DEPTH_MEANS}.{why}"),
            Table(["dataset", "variant", "n", "excluded", "depth", *(MEASURES[k].label for k in OFFICIAL_MEASURES)],
                  rows, left=2)]


def markdown_report(runs, stats, extras: list, missing: list | None = None, others: list | None = None) -> str:
    """``others``: the blocks of the folder's results that this run does not make (sections.other_results_blocks)."""
    blocks = [Heading(1, "memobench report"), *reading_guide(), *latency_note(runs), *(missing or []), *md_main(runs),
              *md_official(runs), *(others or []), *paired_blocks(runs, stats), *matrix_blocks(runs, stats),
              *type_paired_blocks(runs, stats), *variant_table(runs), *per_type_blocks(runs)]
    for b in extras:
        blocks += b
    return to_markdown(blocks).rstrip("\n") + "\n"
