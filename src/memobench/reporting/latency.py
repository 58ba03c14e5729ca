"""The latency files (rule ``latency``): ``latency.md`` and ``latency.html`` with a table per
dataset of the timed variants' search latency (memory services' requests,
in-process retrievers' calls; cold and warm, p50/p95/p99 with their
intervals), ingestion and hit@5, ``latency.json`` with the same numbers, and
``latency.png``: hit@5 against warm p50 and p95 search latency, one point
pair per variant (a fusion's step alone is no search: it is left out of the
plot), a panel per dataset (numbers: evaluation/latency.py)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..core import layout
from ..core.doc import Heading, Html, Markdown, Para, Table, to_html, to_markdown
from ..evaluation.latency import RECALL, summarize
from ..catalog.registry import kind_of
from ..retrieval.timings import COLD, MEASURES
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
    out = [Heading(1, "Search latency"),
           Para("Each search and ingestion request of the memory services (system variants), and each call of "
                "the in-process retrievers (reference and Python retrievers; a fusion's step alone), timed on the "
                "monotonic clock (milliseconds; [95% bootstrap interval]). Measurements of this run: they differ "
                f"from run to run ({TIMINGS_FOLDER}), unlike every other result. A cold search is a namespace's "
                "first after its ingestion in that job (in-process: the first call on its haystack in the job, "
                "which builds what is built per haystack): each row says what its cold search includes, so read "
                "a service's cold beside an in-process one with that in mind; warm are the others and the repeats "
                "(system.warm_repeats; a Python retriever's determinism check). Failed searches are left out of "
                "the percentiles and counted; a retried one is timed from its first attempt to its answer, backoff "
                "included, and counted as retried. Outside the server: a warm "
                "search's time less what the server said it spent (HTTP's Server-Timing header, MCP's result "
                "_meta): the client, the connection, the protocol and JSON. Ingestion: per request (with "
                "system.concurrency requests in flight). The Memo variants are not timed: one engine pass ranks "
                "them all, and its time is no single variant's.")]
    header = ["variant", RECALL, "searches (cold / warm, failed, retried)", "cold p50", "a cold search includes", "warm p50",
              "warm p95", "warm p99",
              "outside the server p50 / p95", "ingested sessions", "ingest p50", "sessions/s per request"]
    by_ds: dict[str, list[dict]] = {}
    for s in summaries:
        by_ds.setdefault(s["dataset"], []).append(s)
    for ds, rows in by_ds.items():
        table = []
        for s in rows:
            ing, cold, warm, outside = s["ingest"], s["cold"], s["warm"], s["outside_server"]
            table.append([
                f"{s['variant']} ({_kind(s)})", "-" if s[RECALL] is None else f"{100 * s[RECALL]:.1f}%",
                f"{cold['n']} / {warm['n']}, {s['failed']}, {s.get('retried', 0)}", _ms(cold.get("p50"), False),
                COLD.get(s.get("kind"), "-"), _ms(warm.get("p50")),
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


def _kind(summary: dict) -> str:
    """What a row's times measure, in a word or two."""
    return {MEASURES["system"]: "service", MEASURES["fusion"]: "fusion step"}.get(summary.get("measures"), "in-process")


def _plotted(summary: dict) -> str:
    """The phase a variant's point shows: warm, or cold where it has no warm search (an in-process
    retriever on LongMemEval: one question per haystack, every call builds its index)."""
    return "warm" if summary["warm"]["n"] else "cold"


def plot(summaries: list[dict], png_out) -> None:
    """hit@5 against warm p50 (filled) and p95 (open) search latency (cold where a variant has no warm
    search, so labelled), one point pair per variant, one panel per dataset (log-scaled latency)."""
    from .figures import STYLE, _pyplot, _save

    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    by_ds: dict[str, list[dict]] = {}
    for s in summaries:
        if s.get("measures") != MEASURES["fusion"]:
            by_ds.setdefault(s["dataset"], []).append(s)
    n = max(1, len(by_ds))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.2), squeeze=False)
        for ax, (ds, rows) in zip(axes[0], by_ds.items()):
            xs = []
            stacked: dict[float, int] = {}  # labels at one recall stack upward, not over each other
            for s in rows:
                phase = _plotted(s)
                p50, p95 = s[phase].get("p50"), s[phase].get("p95")
                if not p50 or s[RECALL] is None:
                    continue
                y = 100 * s[RECALL]
                xs += [p50["ms"], p95["ms"]]
                ax.plot([p50["ms"], p95["ms"]], [y, y], color="#4f8fd6", linewidth=1.5)
                ax.plot([p50["ms"]], [y], "o", color="#1f4e8c")
                ax.plot([p95["ms"]], [y], "o", markerfacecolor="white", color="#1f4e8c")
                level = stacked[y] = stacked.get(y, -1) + 1
                ax.annotate(s["variant"] + (" (cold)" if phase == "cold" else ""), (p50["ms"], y),
                            textcoords="offset points", xytext=(0, 7 + 11 * level), ha="center", fontsize=9)
            ax.set_xscale("log")
            if xs:  # at least a decade wide, so that the log axis has labelled ticks
                ax.set_xlim(min(xs) / 3, max(xs) * 3)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("search latency (ms), warm: p50 filled, p95 open")
            ax.set_ylabel(f"{RECALL} (%)")
            ax.set_ylim(0, 100 + 10 + 5 * max(stacked.values(), default=0))
            ax.set_title(ds)
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
        _save(fig, png_out)


def build(timings: dict, metrics: dict, md_out, json_out, png_out, html_out, log=print) -> None:
    """The latency files from every timed variant's timings tables (``timings``: {(dataset, variant):
    its segments' tables}) and metrics.json (``metrics``: {(dataset, variant): its content})."""
    import pyarrow.parquet as pq

    from ..core.atomic import write_text
    from ..retrieval.timings import schema_meta

    summaries = []
    n = 0
    for (ds, v), m in metrics.items():
        tables = [pq.read_table(p) for p in timings.get((ds, v), [])]
        rows = [r for t in tables for r in t.to_pylist()]
        n += len(rows)
        measures = next((schema_meta(t.schema).get("measures") for t in tables), None)
        summaries.append({**summarize(ds, v, rows, m), "measures": measures, "kind": kind_of(m)})
    write_text(json_out, json.dumps(summaries, indent=2, sort_keys=True) + "\n")
    page = blocks(summaries, Path(png_out).name)
    write_text(md_out, to_markdown(page).rstrip("\n") + "\n")
    write_text(html_out, "<!doctype html><html><head><meta charset='utf-8'><title>memobench latency</title>"
                         f"<style>{CSS}</style></head><body>{to_html(page)}</body></html>\n")
    plot(summaries, png_out)
    log(f"latency: {len(summaries)} timed variant(s), {n} timed requests and calls")
