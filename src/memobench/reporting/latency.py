"""The latency files (rule ``latency``): ``latency.md`` and ``latency.html`` with a table per
dataset of the memory services' search latency (cold and warm, p50/p95/p99
with their intervals), ingestion and hit@5, ``latency.json`` with the same
numbers, and ``latency.png``: hit@5 against warm p50 and p95 search latency,
one point pair per variant, a panel per dataset (numbers:
evaluation/latency.py)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..core import layout
from ..core.doc import Heading, Html, Markdown, Para, Table, to_html, to_markdown
from ..evaluation.latency import RECALL, summarize
from .html import CSS

# where the timings tables lie (the folder of layout.TIMINGS), for the page's text
TIMINGS_FOLDER = layout.TIMINGS.split("{", 1)[0]


def _ms(q: dict | None, interval: bool = True) -> str:
    if not q:
        return "-"
    text = f"{q['ms']:.3g}"
    return f"{text} [{q['low']:.3g}, {q['high']:.3g}]" if interval else text


def blocks(summaries: list[dict], png_name: str) -> list:
    """The latency page: what it measures, then a table per dataset, then the plot."""
    out = [Heading(1, "Latency of the memory services"),
           Para("Each search and ingestion request of the system variants, timed on the monotonic clock "
                "(milliseconds; [95% bootstrap interval]). Measurements of this run: they differ from run to run "
                f"({TIMINGS_FOLDER}), unlike every other result. A cold search is a namespace's first after its "
                "ingestion in that job; warm are the others and the repeats (system.warm_repeats). Outside the "
                "server: a warm search's time less what the server said it spent (its Server-Timing header): the "
                "client, the connection, HTTP and JSON. Ingestion: per request (with system.concurrency requests "
                "in flight).")]
    header = ["variant", RECALL, "searches (cold / warm, failed)", "cold p50", "warm p50", "warm p95", "warm p99",
              "outside the server p50 / p95", "ingested sessions", "ingest p50", "sessions/s per request"]
    by_ds: dict[str, list[dict]] = {}
    for s in summaries:
        by_ds.setdefault(s["dataset"], []).append(s)
    for ds, rows in by_ds.items():
        table = []
        for s in rows:
            ing, cold, warm, outside = s["ingest"], s["cold"], s["warm"], s["outside_server"]
            table.append([
                s["variant"], "-" if s[RECALL] is None else f"{100 * s[RECALL]:.1f}%",
                f"{cold['n']} / {warm['n']}, {s['failed']}", _ms(cold.get("p50"), False), _ms(warm.get("p50")),
                _ms(warm.get("p95")), _ms(warm.get("p99")),
                (f"{_ms(outside.get('p50'), False)} / {_ms(outside.get('p95'), False)}" if outside["n"]
                 else "- (no Server-Timing)"),
                str(ing["sessions"]), "-" if ing["p50_ms"] is None else f"{ing['p50_ms']:.3g}",
                "-" if ing["sessions_per_s"] is None else f"{ing['sessions_per_s']:.1f}"])
        out += [Heading(2, ds), Table(header, table)]
    out += [Heading(2, "Recall against search latency"),
            Markdown(f"![hit@5 against warm search latency]({png_name})"),
            Html(f"<img src='{html.escape(png_name, quote=True)}' alt='hit@5 against warm search latency'>")]
    return out


def plot(summaries: list[dict], png_out) -> None:
    """hit@5 against warm p50 (filled) and p95 (open) search latency, one point pair per variant, one panel
    per dataset (log-scaled latency)."""
    from .figures import STYLE, _pyplot, _save

    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    by_ds: dict[str, list[dict]] = {}
    for s in summaries:
        by_ds.setdefault(s["dataset"], []).append(s)
    n = max(1, len(by_ds))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.2), squeeze=False)
        for ax, (ds, rows) in zip(axes[0], by_ds.items()):
            for s in rows:
                p50, p95 = s["warm"].get("p50"), s["warm"].get("p95")
                if not p50 or s[RECALL] is None:
                    continue
                y = 100 * s[RECALL]
                ax.plot([p50["ms"], p95["ms"]], [y, y], color="#4f8fd6", linewidth=1.5)
                ax.plot([p50["ms"]], [y], "o", color="#1f4e8c")
                ax.plot([p95["ms"]], [y], "o", markerfacecolor="white", color="#1f4e8c")
                ax.annotate(s["variant"], (p50["ms"], y), textcoords="offset points", xytext=(0, 7), ha="center",
                            fontsize=9)
            xs = [s["warm"][q]["ms"] for s in rows for q in ("p50", "p95") if s["warm"].get(q)]
            ax.set_xscale("log")
            if xs:  # at least a decade wide, so that the log axis has labelled ticks
                ax.set_xlim(min(xs) / 3, max(xs) * 3)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("search latency, warm (ms): p50 filled, p95 open")
            ax.set_ylabel(f"{RECALL} (%)")
            ax.set_ylim(0, 112)
            ax.set_title(ds)
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
        _save(fig, png_out)


def build(timings: dict, metrics: dict, md_out, json_out, png_out, html_out, log=print) -> None:
    """The latency files from every system variant's timings tables (``timings``: {(dataset, variant):
    its segments' tables}) and metrics.json (``metrics``: {(dataset, variant): its content})."""
    import pyarrow.parquet as pq

    from ..core.atomic import write_text

    summaries = []
    n = 0
    for (ds, v), m in metrics.items():
        rows = [r for p in timings.get((ds, v), []) for r in pq.read_table(p).to_pylist()]
        n += len(rows)
        summaries.append(summarize(ds, v, rows, m))
    write_text(json_out, json.dumps(summaries, indent=2, sort_keys=True) + "\n")
    page = blocks(summaries, Path(png_out).name)
    write_text(md_out, to_markdown(page).rstrip("\n") + "\n")
    write_text(html_out, "<!doctype html><html><head><meta charset='utf-8'><title>memobench latency</title>"
                         f"<style>{CSS}</style></head><body>{to_html(page)}</body></html>\n")
    plot(summaries, png_out)
    log(f"latency: {len(summaries)} system variant(s), {n} timed requests")
