"""results/report.md, results/report.html (real tables) and the plots.

Two families of numbers sit side by side and are labelled everywhere:

* **harness metrics** (hit@k, MRR): the Memo harness's own rules, the numbers
  this project reproduces exactly, with the published value beside ours;
* **official metrics** (recall_any@k, recall_all@k, ndcg_any@k): LongMemEval's
  own retrieval scoring (docs/protocol.md#official-metrics), LoCoMo's evidence recall.

One unit per metric everywhere, tables and plots alike, from its row in
evaluation/measures.py: hit@k and recall in percent of the questions (their
differences in percentage points), MRR as the harness prints it, a fraction
from 0 to 1 (its differences in MRR units).

Paired statistics (evaluation/stats.py) give each variant's difference to its
baseline and to v0.8.0 with a 95% interval, its minimum detectable
difference, its randomization p-value and its McNemar or t-test p-value with
that p-value after Holm's correction beside it (numbers.py names each by its
test), in one table per dataset and a forest plot with one row of panels per
dataset (each on its own scale); a matrix per dataset marks who beats whom on
hit@1 and MRR after the correction, over every pair of the compared variants;
a table per dataset splits each comparison by question type. Reference
retrievers (docs/baselines.md: bm25-official, bm25s, fts5-bm25, minilm,
wordllama), a user's retrievers, imported runs and fusions of other variants'
lists are variants like the others, labelled as such.

The parts, by job: labels.py (a variant's kind and label), numbers.py (how
each kind of figure is printed), sections.py (the sections both formats
share, as doc.py blocks), conventions.py (official metrics by convention and
the published figures), markdown.py and html.py (each format's own tables and
the whole file), figures.py (the plots). This module reads the result files
and writes the report.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..datasets.missing import blocks as missing_blocks
from ..core.atomic import write_text
from ..evaluation.published import identify_file
from .conventions import convention_blocks, turn_blocks
from .figures import draw, forest_plot, heatmap, plot
from .frontier import frontier_blocks, frontier_plot
from .html import html_report
from .markdown import markdown_report
from .sections import extra_blocks, other_results_blocks, provenance_blocks


def build_report(metrics_paths, extra_paths, md_out, html_out, png_out, official_paths=(), stats_paths=(),
                 forest_out=None, heatmap_out=None, manifest_path=None, log=print, missing=None,
                 workers: int = 1, others=(), latency_made: bool | None = None, frontier_out=None) -> None:
    """``extra_paths``: analyze summaries (analyze/summary.json) and falsifier
    results (falsifier.json); ``missing``: {dataset: why} of the datasets that
    could not run (missing.py), listed with how to get them at the top;
    ``workers``: the plots drawn at once; ``forest_out``: the forest plot;
    ``others``: "dataset/variant" names of results in the folder that this
    run does not make (plan.other_results), on the board; ``latency_made``:
    whether this run makes the latency page (False: one beside the report is
    an earlier run's, and the report says so); ``frontier_out``: the plot of
    recall within token budgets."""
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in metrics_paths]
    official = {}
    for p in official_paths:
        o = json.loads(Path(p).read_text(encoding="utf-8"))
        official[(o["dataset"], o["variant"])] = o
    for m in runs:  # fold official.json into the run, as metrics.json's `official` (and a turn variant's `turn`)
        if (m["dataset"], m["variant"]) in official:
            o = official[(m["dataset"], m["variant"])]
            m["official"] = o["official"]
            if o.get("turn"):
                m["turn"] = o["turn"]
            if o.get("budgets"):
                m["budgets"] = o["budgets"]
    files = {}
    if manifest_path is not None:  # each dataset's raw file, and which published release it is
        files = {f["dataset"]: f for f in json.loads(Path(manifest_path).read_text(encoding="utf-8")).get("files", [])}
        for m in runs:
            f = files.get(m["dataset"])
            if f is not None:
                m["data_file"] = {"file": Path(f["file"]).name, "bytes": f["bytes"], "sha256": f.get("sha256"),
                                  **identify_file(f["bytes"], f.get("sha256"))}
    stats = [json.loads(Path(p).read_text(encoding="utf-8")) for p in stats_paths]
    # the board: the folder's other results join the run's own (board.py), unless stale or unreadable
    results = Path(md_out).parent
    runs, stats, stale, unreadable, board = _board(runs, metrics_paths, stats, others, results, files, log)
    extras = ([convention_blocks(runs), turn_blocks(runs),
               frontier_blocks(runs, Path(frontier_out).name if frontier_out else None)]
              + [extra_blocks(p) for p in extra_paths]
              + [provenance_blocks(manifest_path, runs)])
    gone = missing_blocks(missing or {})
    listed_apart = board + other_results_blocks(unreadable) + _earlier_latency(results, latency_made)
    write_text(md_out, markdown_report(runs, stats, extras, gone, listed_apart))
    plots = [(plot, runs, png_out)]
    images = {"hitk": Path(png_out).name}
    if forest_out:
        plots.append((forest_plot, stats, forest_out))
        images["forest"] = Path(forest_out).name
    if heatmap_out:
        plots.append((heatmap, runs, heatmap_out))
        images["heatmap"] = Path(heatmap_out).name
    if frontier_out:
        plots.append((frontier_plot, runs, frontier_out))
    draw(plots, workers)
    write_text(html_out, html_report(runs, stats, extras, images, missing=gone, others=listed_apart))
    log(f"report: {len(runs)} runs, {len(others)} other results listed, {len(missing or {})} datasets missing, "
        f"{sum(1 for m in runs if m.get('official'))} with official metrics, "
        f"{sum(len(s['comparisons']) for s in stats)} comparisons")


def _board(runs, metrics_paths, stats, others, results: Path, files: dict, log):
    """(the runs with the folder's other readable, fresh results added, the stats with each such
    dataset's paired tests over all of its entries, the stale entries, the unreadable ones, the
    board's blocks)."""
    from ..core import layout
    from ..core.provenance import source_fingerprint
    from .board import annotate, board_blocks, board_stats

    source = source_fingerprint()
    ours = {(m["dataset"], m["variant"]) for m in runs}
    for m, p in zip(runs, metrics_paths):
        annotate(m, p, results, True, files.get(m["dataset"]), source)
    stale, unreadable = [], []
    for name in sorted(others):
        m = _other_run(name, results)
        if "unreadable" in m or not isinstance(m.get("questions"), int):
            unreadable.append(m)
            continue
        annotate(m, layout.path(layout.METRICS, root=results, dataset=m["dataset"], variant=m["variant"]), results,
                 False, files.get(m["dataset"]), source)
        (stale if m["board"]["stale"] else runs).append(m)
    runs.sort(key=lambda m: m["dataset"])  # grouped by dataset, each in the order it came
    if len(runs) > len(ours):
        stats = board_stats(runs, stats, results, ours, log=log)
    return runs, stats, stale, unreadable, board_blocks(runs, stale, results)


def _earlier_latency(results: Path, latency_made: bool | None) -> list:
    """A note where a latency page beside the report is an earlier run's: its timings are of that run."""
    from ..core import layout
    from ..core.doc import Code, Para

    page = results / Path(layout.LATENCY_HTML).name
    if latency_made is not False or not page.is_file():
        return []
    try:
        shown = sorted({f"{s['dataset']}/{s['variant']}" for s in json.loads(
            (results / Path(layout.LATENCY_JSON).name).read_text(encoding="utf-8"))})
    except (OSError, ValueError, TypeError, KeyError):
        shown = []
    return [Para([Code(page.name), " beside this report is an earlier run's: this run measured no latency, so its "
                  "timings are that run's" + (f" ({', '.join(shown)})" if shown else "") + "; delete it, or run "
                  "with a memory service or config latency: true to remake it."], cls="note")]


def _other_run(name: str, results: Path) -> dict:
    """The metrics.json (its official.json folded in) of ``name``, "dataset/variant", a result in the
    folder that this run does not make; ``{"dataset", "variant", "unreadable": why}`` when it cannot be
    read (a file an older memobench wrote may lack what the report shows)."""
    from ..core import layout

    dataset, variant = name.split("/", 1)
    try:
        m = json.loads(Path(layout.path(layout.METRICS, root=results, dataset=dataset, variant=variant))
                       .read_text(encoding="utf-8"))
        official = Path(layout.path(layout.OFFICIAL, root=results, dataset=dataset, variant=variant))
        if official.is_file():
            o = json.loads(official.read_text(encoding="utf-8"))
            m["official"] = o.get("official")
            if o.get("turn"):
                m["turn"] = o["turn"]
            if o.get("budgets"):
                m["budgets"] = o["budgets"]
            if o.get("data_file"):  # the data file it was computed on: the board's staleness check
                m["data_file"] = o["data_file"]
        return m
    except (OSError, ValueError) as e:
        return {"dataset": dataset, "variant": variant, "unreadable": str(e)}
